"""Heads matched back to a permutation in every family of the registry (issue 48): a copy of each
zoo model whose heads are renumbered computes the same as the original (transformers, checked), and
the time machine's matching finds every head's old number, with similarity 1."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from head_permute import permuted_copy
from zoo import ZOO, build, first_case_of_each_family

from models.config import InputError
from models.history.heads import head_signatures, match_heads
from models.pretrained import load_model
from models.pretrained.loader import family_kind

transformers = pytest.importorskip("transformers")
FAMILIES = first_case_of_each_family()


def _outputs(model, ids: torch.Tensor) -> torch.Tensor:
    with torch.no_grad():
        out = model(input_ids=ids)
    return out.logits if hasattr(out, "logits") else out.last_hidden_state


@pytest.mark.parametrize("name", [n for n in FAMILIES if family_kind(ZOO[n][0]) != "encoder-decoder"])
def test_renumbered_heads_are_matched_back(tmp_path, name):
    hf = build(tmp_path / "model", name).eval()
    perms = permuted_copy(tmp_path / "model", tmp_path / "permuted", seed=len(name))
    copy = type(hf).from_pretrained(tmp_path / "permuted", attn_implementation="eager").eval()
    ids = torch.tensor([[3, 7, 11, 5, 7, 11, 9, 4]])
    torch.testing.assert_close(_outputs(copy, ids), _outputs(hf, ids), atol=2e-5, rtol=2e-5)  # the same function
    original = head_signatures(load_model(tmp_path / "model"))
    renumbered = head_signatures(load_model(tmp_path / "permuted"))
    found = match_heads(renumbered, original)
    assert found.basis == "maps"
    for layer, perm in perms.items():
        assert found.match[layer].tolist() == perm, (layer, found.score[layer])
    np.testing.assert_allclose(found.score, 1.0, atol=1e-4)


@pytest.mark.parametrize("name", [n for n in FAMILIES if family_kind(ZOO[n][0]) == "encoder-decoder"])
def test_encoder_decoder_models_are_refused_in_one_line(tmp_path, name):
    build(tmp_path / "model", name)
    with pytest.raises(InputError, match="is an encoder-decoder model"):  # was an AttributeError
        head_signatures(load_model(tmp_path / "model"))
