"""Issue 35, item 9: one notation. Heads are numbered from 0 with their own letter (h), as every
title says (``H0``, ``L0 H2``); i and j are the query and the key; a score is s_ij, a weight a_ij (the
formulas said ``C = [O_1 … O_h]`` and ``A_i`` with i the head, the inspector α for a score and α′
for a weight)."""

from __future__ import annotations

import re

from models.config import AttentionConfig, AttentionRequest
from models.engine.pipeline import run
from models.reads.explain import explain
from models.reads.params import toy_params

SENTENCE = "The cat sat on the mat."


def _trace(**config):
    req = AttentionRequest(sentence=SENTENCE, config=AttentionConfig(heads=3, d_model=12, **config))
    return run(req), toy_params(req)


def test_stage_formulas_number_heads_from_zero_with_their_own_letter():
    trace, _ = _trace(mask="causal")
    for stage in trace.stages:
        assert not re.search(r"\b[SAQKVO]'?̂?_i\b|W_[QKVO],i\b|O_1\b|f_i\b", stage.formula), (stage.name, stage.formula)
    assert trace["concat"].formula == "C = [O_0 … O_2]"
    assert trace["weights"].formula.startswith("A_h = softmax(S_h")
    assert trace["head_output"].formula == "O_h = A_h V_h"


def test_the_inspector_writes_a_score_s_and_a_weight_a():
    trace, params = _trace()
    score = explain(trace, params, "scores", (1, 2, 0))
    weight = explain(trace, params, "weights", (1, 2, 0))
    for d in (score, weight):
        assert "α" not in d.text()
    assert weight.formula.startswith("a_2,0 = e^(s_2,0 − m)")
    assert "s_2,0 reads as how related token 2 is to token 0" in score.text()
