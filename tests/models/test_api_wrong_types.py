"""The Python API with values of the wrong type (issue 50, item 9): each call ends in a result or
one :class:`InputError` line, as ``trace`` and the command lines do, never a deep exception.

Before: ``trace.explain("weights", None)`` and ``explain(..., 5)`` were TypeErrors from ``tuple()``;
``generate("ab\\udcff")`` and ``atlas(["ab\\udcff"])`` the tokenizer's "TextInputSequence must be
str"; ``atlas(None)``, ``atlas([None])``, ``atlas([123])`` TypeErrors or AttributeErrors;
``atlas(texts, limit="2")`` a comparison's TypeError; ``generate(prompt, evil=1)`` Python's
"unexpected keyword argument". The fuzz half tries hostile values (tests/models/test_fuzz_readers.py's)
in every argument of every API call; docs/hardening.md gives the counts."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from test_fuzz_readers import FUZZ, ends_well, values

from models import api
from models.errors import InputError

TEXTS = ["the cat sat", "a dog ran"]
EXAMPLES = 40  # per call: each one may run a model (a generation, an atlas), so fewer than the readers'


@pytest.fixture(scope="module")
def model():
    return api.load("induction")


@pytest.fixture(scope="module")
def trace():
    return api.toy("The cat sat.", heads=2)


ISSUE_CALLS = {  # the issue's nine, each with the words of its one line
    "explain(None)": (lambda m, t: t.explain("weights", None), "a cell is a tuple of whole numbers"),
    "explain(5)": (lambda m, t: t.explain("weights", 5), "a cell is a tuple of whole numbers"),
    "generate(surrogate)": (lambda m, t: m.generate("ab\udcff"), "the prompt is not valid UTF-8 text"),
    "atlas([surrogate])": (lambda m, t: m.atlas(["ab\udcff"]), "text 1 is not valid UTF-8 text"),
    "atlas(None)": (lambda m, t: m.atlas(None), "texts must be a list"),
    "atlas([None])": (lambda m, t: m.atlas([None]), "text 1 must be a string, got NoneType"),
    "atlas([123])": (lambda m, t: m.atlas([123]), "text 1 must be a string, got int"),
    "atlas(limit='2')": (lambda m, t: m.atlas(TEXTS, limit="2"), "limit must be an integer"),
    "generate(evil=1)": (lambda m, t: m.generate("ab", evil=1), "generate() has no setting 'evil'"),
}


@pytest.mark.parametrize("call", list(ISSUE_CALLS))
def test_the_issues_calls_are_one_input_error_line(model, trace, call):
    run, words = ISSUE_CALLS[call]
    with pytest.raises(InputError) as refused:
        run(model, trace)
    assert words in str(refused.value) and "\n" not in str(refused.value), str(refused.value)


def test_one_string_is_not_a_corpus_and_texts_are_checked_before_running(model):
    """``atlas("the cat")`` read each character as a text; a bad text late in a list is refused too."""
    with pytest.raises(InputError, match="texts must be a list"):
        model.atlas("the cat sat")
    with pytest.raises(InputError, match="text 3 must be a string"):
        model.atlas(["the cat", "a dog", b"bytes"], detectors=False)


CALLS = {  # name: call(model, trace, value), the value put in one argument
    "toy sentence": lambda m, t, v: api.toy(v),
    "toy heads": lambda m, t, v: api.toy("a b", heads=v),
    "trace sentence": lambda m, t, v: m.trace(v),
    "trace layer": lambda m, t, v: m.trace("a b", layer=v),
    "explain stage": lambda m, t, v: t.explain(v, (0, 1, 0)),
    "explain cell": lambda m, t, v: t.explain("weights", v),
    "why head": lambda m, t, v: t.why(v, 1, 0),
    "why row": lambda m, t, v: t.why(0, v, 0),
    "stage": lambda m, t, v: t.stage(v),
    "generate prompt": lambda m, t, v: m.generate(v, max_new_tokens=1),
    "generate temperature": lambda m, t, v: m.generate("ab", max_new_tokens=1, temperature=v),
    "generate top_k": lambda m, t, v: m.generate("ab", max_new_tokens=1, temperature=1.0, top_k=v),
    "generate top_p": lambda m, t, v: m.generate("ab", max_new_tokens=1, temperature=1.0, top_p=v),
    "generate seed": lambda m, t, v: m.generate("ab", max_new_tokens=1, seed=v),
    "generate top": lambda m, t, v: m.generate("ab", max_new_tokens=1, top=v),
    "generate max_tokens": lambda m, t, v: m.generate("ab", max_new_tokens=1, max_tokens=v),
    "atlas texts": lambda m, t, v: m.atlas(v, limit=2, detectors=False),
    "atlas limit": lambda m, t, v: m.atlas(TEXTS, limit=v, detectors=False),
    "atlas seed": lambda m, t, v: m.atlas(["a b"], seed=v, detectors=isinstance(v, int) and 0 <= v < 4),
    "atlas detectors": lambda m, t, v: m.atlas(["a b"], detectors=v) if v is not True else None,
    "load step": lambda m, t, v: api.load("induction", step=v),
}


@pytest.mark.parametrize("call", list(CALLS))
def test_a_hostile_value_in_any_argument_is_a_result_or_one_line(model, trace, call):
    run = CALLS[call]

    @settings(FUZZ, max_examples=EXAMPLES)
    @given(value=values | st.sampled_from(["ab\udcff", "\ud800", b"ab", (0, 1, 0), [1.5], float("nan")]))
    def fuzz(value):
        ends_well(lambda: run(model, trace, value))

    fuzz()
