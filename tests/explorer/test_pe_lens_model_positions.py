"""Issue 44 item 10: the positional-encoding lens shows the loaded model's own positions, checked
against transformers: a rotary model's angles from transformers' own rotary embedding of the same
config, a learned model's rows from transformers' own position embeddings."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "models"))  # the family zoo
from zoo import build, first_case_of_each_family  # noqa: E402

from explorer.inputs import Inputs  # noqa: E402

SENTENCE = "the cat sat on the mat and the cat sat on the mat"


def _lens(window, settle, model):
    window.state.update_inputs(model=model, sentence=SENTENCE)
    settle(window, timeout=60_000)
    return window.windows.open_pe_lens(), len(window.state.display.trace.key_tokens)


def test_a_rotary_model_shows_its_own_angles(qtbot, make_window, settle):
    from transformers import AutoConfig
    from transformers.models.llama.modeling_llama import LlamaRotaryEmbedding

    from models.pretrained.registry import resolve_model

    window = make_window(Inputs(sentence=SENTENCE, heads=2, d_model=16))
    lens, n = _lens(window, settle, "induction")
    qtbot.addWidget(lens)
    config = AutoConfig.from_pretrained(resolve_model("induction"))
    inv_freq = LlamaRotaryEmbedding(config).inv_freq  # transformers' own, for the same config
    angles = np.arange(n)[:, None] * inv_freq.double().numpy()[None, :]  # (n, pairs)
    assert "heatmap" in lens.shown, lens.about.text()
    assert lens.shown["heatmap"].shape == angles.shape
    np.testing.assert_allclose(lens.shown["heatmap"], np.cos(angles), atol=1e-5)
    curves = [v for k, v in lens.shown.items() if k.startswith("pair ")]
    assert curves and all(np.all(np.abs(c) <= np.pi + 1e-9) for c in curves)
    assert "rotary" in lens.about.text() and "illustration" not in lens.about.text()
    assert not lens.delta.isVisibleTo(lens)


def test_the_lens_reads_the_model_the_run_loaded_not_a_second_copy(qtbot, make_window, settle):
    """With a --dtype other than the default the lens asked the models' cache for the float32 model:
    a second copy read from disk (a second 16 GB for an 8B model). Failed before (2 loads)."""
    window = make_window(Inputs(sentence=SENTENCE, heads=2, d_model=16))
    window.state.update_inputs(dtype="bfloat16")
    lens, _ = _lens(window, settle, "induction")
    qtbot.addWidget(lens)
    assert window.worker.models.loads == 1 and "rotary" in lens.about.text()


def test_a_learned_model_shows_its_checkpoint_rows(qtbot, make_window, settle):
    from transformers import AutoModel

    from models.pretrained.registry import resolve_model

    window = make_window(Inputs(sentence=SENTENCE, heads=2, d_model=16))
    lens, n = _lens(window, settle, "minilm")
    qtbot.addWidget(lens)
    reference = AutoModel.from_pretrained(resolve_model("minilm")).embeddings.position_embeddings.weight
    rows = reference.detach()[:n].double()
    unit = torch.nn.functional.normalize(rows, dim=1)
    np.testing.assert_allclose(lens.shown["heatmap"], (unit @ unit.T).numpy(), atol=1e-5)
    dims = {int(k.split()[1]): v for k, v in lens.shown.items() if k.startswith("dim ")}
    assert dims and all(np.allclose(v, rows[:, c].numpy(), atol=1e-6) for c, v in dims.items())
    assert "learned" in lens.about.text()


@pytest.mark.parametrize("n", [14, 60])
def test_the_legend_is_beside_the_curves_not_on_them(qtbot, n):
    from explorer.widgets.pe_lens import PeLens

    lens = PeLens()
    qtbot.addWidget(lens)
    lens.resize(900, 700)
    lens.show()
    lens.set_encoding(n, 32)
    qtbot.wait(50)
    legend = lens.legend.sceneBoundingRect()
    curves = lens.curves.vb.sceneBoundingRect()
    assert not legend.intersects(curves)
    if n < 30:  # a short sentence shows the fast columns, which turn within it
        assert all(np.ptp(v) > 1.0 for v in lens.shown.values() if v.ndim == 1)


def test_a_model_without_positions_of_its_own_says_so(qtbot):
    """T5's relative bias is no position table: the lens shows one sentence and no plots."""
    from explorer.widgets.pe_lens import PeLens
    from models.reads.model_positions import model_positions

    mp = model_positions(object(), 9)
    assert mp.kind == "none"
    lens = PeLens()
    qtbot.addWidget(lens)
    lens.set_model_positions(mp, "t5")
    assert not lens.plots.isVisibleTo(lens) and lens.check is None


@pytest.mark.parametrize("case", first_case_of_each_family())
def test_the_lens_draws_every_familys_positions(qtbot, tmp_path, case):
    """Every family: the lens draws what model_positions read (checked against transformers in
    tests/models/test_model_positions_families.py) and says it in words; T5's buckets: words only.
    Before, OPT's table went unseen ("no positional encoding of its own"), Marian's fixed sinusoids were
    called learned, Gemma 3's sliding layers' frequencies were not shown."""
    from explorer.widgets.pe_lens import PeLens
    from models.pretrained.loader import load_model
    from models.reads.model_positions import cosine, describe, model_positions

    build(tmp_path, case)
    mp = model_positions(load_model(tmp_path, device="cpu").arch, 11)
    lens = PeLens()
    qtbot.addWidget(lens)
    lens.set_model_positions(mp, case)
    lens.set_about(describe(mp, case))
    drawn = mp.kind in ("rotary", "learned", "sinusoidal")
    assert lens.plots.isVisibleTo(lens) == drawn and mp.kind != "none", case
    assert lens.about.text().startswith(case) and "no positional encoding" not in lens.about.text()
    if mp.kind == "rotary":
        np.testing.assert_allclose(lens.shown["heatmap"], np.cos(mp.angles))
        assert len(lens.frequency_bars) == max(len(mp.tables), 1)
    elif drawn:
        np.testing.assert_allclose(lens.shown["heatmap"], cosine(mp.rows))
        assert mp.kind in lens.curves.titleLabel.text
