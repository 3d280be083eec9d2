"""Issue 44 item 10, in every family the registry names (tests/models/zoo.py): the positions the
positional-encoding lens shows (models/reads/model_positions.py) equal transformers' own.

Rotary: every ``inv_freq`` buffer of transformers' rotary embedding (one per kind of layer where
Gemma 3 and ModernBERT keep one, with the config's scaling: YaRN, linear, partial rotary), and the
angles i·θ_j from it. A position table: the rows transformers' own position module returns for the
sentence (caught by a forward hook, so its offsets, OPT's and BART's +2 and RoBERTa's padding index,
are transformers'), and Marian's fixed sinusoids called so. Neither (T5's relative buckets): one
plain sentence and no plots."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from zoo import ZOO, build

from models.pretrained.loader import family_kind, load_model
from models.reads.model_positions import FULL, describe, model_positions, wrapped

SOURCE, TARGET = "the cat sat on the mat and the dog", "a dog"
TABLE_MODULES = ("wpe", "embed_positions", "position_embeddings")  # transformers' names for a position table


def rotary_reference(model) -> dict[str, np.ndarray]:
    """θ_j of each kind of layer transformers rotates with ({"": θ} for one shared table)."""
    found = {}
    for module in model.modules():
        for name, buffer in module.named_buffers(recurse=False):
            if name.endswith("inv_freq") and not name.endswith("original_inv_freq"):
                found[name.removesuffix("inv_freq").rstrip("_")] = buffer.double().numpy()
    return found


def table_reference(model, ids, kind) -> tuple[np.ndarray, str] | None:
    """The rows transformers' first-run position module returns for the sentence, and its class."""
    caught = []
    hooks = [module.register_forward_hook(lambda m, args, out: caught.append((out, type(m).__name__)))
             for name, module in model.named_modules() if name.split(".")[-1] in TABLE_MODULES]  # fmt: skip
    if not hooks:
        return None
    inputs = {"input_ids": ids}
    if kind == "encoder-decoder":
        inputs["decoder_input_ids"] = torch.tensor([[1, 5, 6]])
    with torch.no_grad():
        model(**inputs)
    for hook in hooks:
        hook.remove()
    out, name = caught[0]  # the encoder's (or the only) table, for the sentence
    return out.reshape(-1, out.shape[-1])[-ids.shape[1] :].double().numpy(), name


@pytest.mark.parametrize("case", list(ZOO))
def test_the_lens_shows_transformers_own_positions(tmp_path, case):
    kind = family_kind(ZOO[case].family)
    reference = build(tmp_path, case)
    ours = load_model(tmp_path, device="cpu")
    ids = list(ours.tokenizer.encode(SOURCE, 30).ids)
    n = len(ids)
    mp = model_positions(ours.arch, n)
    rotary = rotary_reference(reference)
    table = table_reference(reference, torch.tensor([ids]), kind)
    text = describe(mp, case)
    if rotary:
        assert mp.kind == "rotary", case
        shown = mp.tables or {"": mp.inv_freq}
        assert shown.keys() == rotary.keys()
        for layer_kind, theta in rotary.items():
            np.testing.assert_allclose(shown[layer_kind], theta, rtol=1e-6, err_msg=f"{case} {layer_kind}")
        full = rotary.get(FULL, rotary.get(""))
        np.testing.assert_allclose(np.cos(mp.angles), np.cos(np.arange(n)[:, None] * full), atol=1e-6)
        np.testing.assert_allclose(mp.angles, wrapped(np.arange(n)[:, None] * full), atol=1e-6)
        assert "rotary" in text
    elif table is not None:
        rows, module = table
        assert mp.kind == ("sinusoidal" if "Sinusoidal" in module else "learned"), (case, module)
        np.testing.assert_allclose(mp.rows, rows, atol=1e-6, err_msg=case)
        assert mp.kind in text
    else:  # relative buckets: no position vector at all
        assert mp.kind == "relative" and mp.rows is None and mp.angles is None
        assert "bucket" in text and "no position vector" in text
