"""The Generate panel: what it shows at each step equals the generation's numbers, ←/→ step, the
worker answers off the GUI thread, a head is chosen by a click, errors are one line, and the
first key can be left out of the colour scale."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np
import pytest
from PySide6.QtCore import Qt

from explorer.images.sink_scale import first_key_out_of_scale
from explorer.panels.generate_panel import GeneratePanel
from models.generate import GenerateSettings, generate
from models.pretrained import load_model

PROMPT = "the cat sat on the mat and the dog"
BENCH = Path(__file__).resolve().parents[2] / "bench" / "bench_generate.py"


@pytest.fixture(scope="module")
def decoder(tmp_path_factory):
    spec = importlib.util.spec_from_file_location("bench_generate", BENCH)
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    folder = tmp_path_factory.mktemp("demo")
    bench.write_decoder(folder, layers=3, d=32, heads=4, ffn=64, words=bench.DEMO_WORDS, scale=0.35)
    return folder


@pytest.fixture
def panel(qtbot, decoder):
    p = GeneratePanel(lambda name: load_model(name, device="cpu"), str(decoder))
    qtbot.addWidget(p)
    p.resize(1400, 900)
    p.prompt_edit.setText(PROMPT)
    p.new_tokens.setValue(6)
    p.show()
    yield p
    p.worker.stop()


def test_each_step_shows_the_generation(qtbot, panel, decoder):
    panel.generate(now=True)
    gen = generate(load_model(decoder, device="cpu"), PROMPT, GenerateSettings(max_new_tokens=6))
    view = panel.view
    assert view is not None and view.gen.ids == gen.ids
    np.testing.assert_array_equal(view.attention, gen.attention())
    assert panel.slider.maximum() == 6 and panel.step == 6  # opens on the last step
    panel.slider.setFocus()
    qtbot.keyClick(panel.slider, Qt.Key.Key_Left)
    with qtbot.waitSignal(panel.shown, check_params_cb=lambda step: step == 4):  # painted when its frame comes
        qtbot.keyClick(panel.slider, Qt.Key.Key_Left)
    assert panel.step == 4
    p = gen.prompt_length - 1 + 4
    # the model view grows row by row: rows after p are empty in every thumbnail
    from explorer.images.thumbnails import EMPTY_INDEX

    assert panel.model_view.tile == (gen.n, gen.n)
    thumbs = view.step_thumbnails(4, True, False)
    assert (thumbs[..., p + 1 :, :] == EMPTY_INDEX).all() and (thumbs[..., : p + 1, :] != EMPTY_INDEX).all()
    np.testing.assert_allclose(panel.model_view.metrics["sink"], gen.attention()[:, :, 1:, 0].mean(-1), atol=1e-6)
    # the bars: the step's top-k, the chosen token in orange (the greedy choice is the first)
    step = gen.steps[4]
    assert panel.bars.chosen_row == 0 and step.chosen == gen.ids[p + 1]
    assert panel.bars.labels[0].startswith(gen.tokens[p + 1])
    assert f"position {p}" in panel.step_label.text()
    # a head chosen in the model view is the one drawn in full
    panel.choose_head(2, 3)
    assert panel.wait_until_shown()
    np.testing.assert_array_equal(panel.matrix.matrix, gen.attention()[2, 3])
    hover = panel.lens.describe(1, p)
    assert hover.startswith(f"L1, position {p}") and "top-5" in hover


def test_worker_generates_off_the_gui_thread(qtbot, panel):
    with qtbot.waitSignal(panel.worker.finished, timeout=60_000):
        panel.generate()
    assert panel.view is not None and panel.slider.isEnabled()


def test_errors_are_one_line(qtbot, panel, tmp_path):
    panel.model_edit.setText(str(tmp_path / "nowhere"))
    panel.generate(now=True)
    assert panel.status.text().startswith("error: ") and panel.view is None
    panel.model_edit.setText("")
    panel.generate(now=True)
    assert panel.status.text() == "error: choose a decoder model first"


def test_first_key_out_of_the_scale():
    a = np.array([[[1.0, 0.0, 0.0], [0.9, 0.1, 0.0], [0.5, 0.2, 0.3]]], np.float32)
    out = first_key_out_of_scale(a)
    np.testing.assert_array_equal(out[0, :, 0], np.float32([0.3, 0.3, 0.3]))  # at most the rest's largest
    np.testing.assert_array_equal(out[0, :, 1:], a[0, :, 1:])
    assert a[0, 0, 0] == 1.0  # the input is unchanged


def test_file_menu_generate_then_open_in_the_explorer(qtbot, make_window, settle, decoder):
    window = make_window()
    gen_window = window.windows.open_generate()
    qtbot.addWidget(gen_window)
    panel = gen_window.panel
    panel.model_edit.setText(str(decoder))
    panel.prompt_edit.setText(PROMPT)
    panel.new_tokens.setValue(4)
    panel.generate(now=True)
    assert panel.open_button.isEnabled()
    panel.layer_box.setValue(2)
    panel.open_button.click()
    inputs = window.state.inputs
    assert inputs.model == str(decoder) and inputs.layer == 2
    assert inputs.sentence == panel.view.gen.sequence_text and inputs.sentence.startswith(PROMPT)
    settle(window, timeout=60_000)
    panel.worker.stop()


def test_model_view_can_leave_the_first_key_out_of_the_scale(qtbot, tmp_path):
    from pixels import mosaic_tiles

    from explorer.images.thumbnails import thumbnail_indices
    from explorer.panels.survey_panel import SurveyPanel

    rng = np.random.default_rng(0)
    a = np.tril(rng.random((2, 3, 6, 6))).astype(np.float32)
    a[..., 0] += 5.0  # every head parks most of its weight on the first token
    a /= a.sum(-1, keepdims=True)
    np.save(tmp_path / "sink.npy", a)
    panel = SurveyPanel()
    qtbot.addWidget(panel)
    assert panel.open_attention(tmp_path / "sink.npy")
    assert panel.wait_until_shown()  # the thumbnails are made on the read thread
    np.testing.assert_array_equal(mosaic_tiles(panel.model_view)[1], thumbnail_indices(a[1], True))
    panel.sink_box.setChecked(True)
    assert panel.wait_until_shown()
    painted = mosaic_tiles(panel.model_view)[1]
    np.testing.assert_array_equal(painted, thumbnail_indices(first_key_out_of_scale(a[1]), True))
    assert painted[..., 1:].max() > thumbnail_indices(a[1], True)[..., 1:].max()  # the rest brightens
    np.testing.assert_allclose(panel.table.model.values[:, -1], a[:, :, 1:, 0].mean(-1).reshape(-1), atol=1e-6)
    panel.stop()


# one cell per pixel; blocks of 2, 3 and 4 rows a pixel (the last one partial for 65 and 150 - 1); at the
# sides a view of the Generate window asks for (issue 18: its device pixels), not only the old 64
@pytest.mark.parametrize("n", [9, 65, 150, 199])
@pytest.mark.parametrize("sink_out", [False, True])
@pytest.mark.parametrize("side", [37, 64, 150])
def test_step_thumbnails_equal_the_rows_so_far(n, sink_out, side):
    # Drawn with the model view's own reduction and colours (explorer.images.thumbnails): the strongest
    # weight of a head is the top colour, never the NaN pink of a borrowed table.
    from explorer.engine.generation_view import GenerationView
    from explorer.images.thumbnails import EMPTY_INDEX, thumbnail_indices, thumbnail_shape
    from models.engine.colour_index import COLOURS, NAN_INDEX

    rng = np.random.default_rng(1)
    a = np.tril(rng.random((2, 3, n, n))).astype(np.float32)
    a /= a.sum(-1, keepdims=True)
    steps = [type("S", (), {"position": 2 + s})() for s in range(n - 2)]
    gen = type("G", (), {"steps": steps, "tokens": tuple(f"t{i}" for i in range(n)), "token_names": {}})()
    view = GenerationView(gen, attention=a, causal=True, side=side)  # a generation of n tokens with this attention
    shown = first_key_out_of_scale(a) if sink_out else a
    tops = shown.max(axis=(-2, -1))  # the whole sequence's scale, at every step
    for step in range(n - 2):  # every step: only the pixel rows near p are reduced again (a band)
        p = 2 + step
        got = view.step_thumbnails(step, True, sink_out, side)
        assert got.shape == (2, 3, *thumbnail_shape(n, n, side)) and max(got.shape[-2:]) <= side
        rows = shown.copy()
        rows[:, :, p + 1 :] = 0  # rows not generated yet take no part in the block maxima
        want = np.stack([thumbnail_indices(rows[layer], True, side=side, tops=tops[layer]) for layer in range(2)])
        per_pixel = -(-n // got.shape[-2])
        filled = p // per_pixel + 1
        np.testing.assert_array_equal(got[..., :filled, :], want[..., :filled, :], err_msg=f"step {step}")
        assert (got[..., filled:, :] == EMPTY_INDEX).all()
        assert got[..., :filled, :].max() <= COLOURS - 1 < NAN_INDEX  # colours only, never the NaN pink
    assert (view.step_thumbnails(n - 3, True, sink_out, side) == COLOURS - 1).any()  # each head's peak: the top colour


def test_a_thumbnails_shape_is_known_from_the_sizes_alone():
    # The model view lays out its mosaic with thumbnail_shape (nothing reduced on the GUI thread): it must
    # be the shape thumbnail_indices makes, for square and cross attention, reduced or not.
    from explorer.images.thumbnails import MAX_SIDE, MIN_SIDE, thumbnail_indices, thumbnail_shape

    for n_q, n_k in ((1, 1), (6, 6), (9, 300), (300, 9), (257, 257), (1000, 37), (4096, 4096)):
        for side in (MIN_SIDE, 37, 64, 150, MAX_SIDE):
            made = thumbnail_indices(np.zeros((1, n_q, n_k), np.float32), side=side).shape[1:]
            assert thumbnail_shape(n_q, n_k, side) == made, (n_q, n_k, side)


def test_an_encoder_shows_its_mask_predictions(qtbot, tmp_path):
    import torch

    transformers = pytest.importorskip("transformers")
    from tokenizers import Tokenizer, models, pre_tokenizers, processors

    from models.generate.mlm import predict_masks

    words = ["[CLS]", "[SEP]", "[MASK]", "the", "cat", "sat", "on", "mat", "dog", "ran"]
    tok = Tokenizer(models.WordLevel({w: i for i, w in enumerate(words)}, unk_token="the"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    tok.add_special_tokens(["[MASK]"])  # one token, not split at its brackets
    tok.post_processor = processors.TemplateProcessing(single="[CLS] $A [SEP]",
                                                       special_tokens=[("[CLS]", 0), ("[SEP]", 1)])  # fmt: skip
    torch.manual_seed(0)
    config = transformers.BertConfig(vocab_size=len(words), hidden_size=16, num_hidden_layers=2, num_attention_heads=2,
                                     intermediate_size=32, max_position_embeddings=16)  # fmt: skip
    transformers.BertForMaskedLM(config).save_pretrained(tmp_path)
    tok.save(str(tmp_path / "tokenizer.json"))
    panel = GeneratePanel(lambda name: load_model(name, device="cpu"), str(tmp_path))
    qtbot.addWidget(panel)
    panel.prompt_edit.setText("the cat [MASK] on the [MASK]")
    panel.show()
    panel.generate(now=True)
    view = panel.view
    assert view is not None, panel.status.text()
    assert not view.causal and view.steps == 2
    result = predict_masks(load_model(tmp_path, device="cpu"), "the cat [MASK] on the [MASK]")
    np.testing.assert_array_equal(view.attention, result.attention)
    assert [view.position(s) for s in range(2)] == [3, 6]  # [CLS] the cat [MASK] on the [MASK] [SEP]
    panel.slider.setValue(0)
    assert panel.wait_until_shown()
    assert "mask token 1 of 2" in panel.step_label.text() and panel.bars.chosen_row is None
    assert panel.bars.labels[0].startswith(result.masks[0].top_tokens[0])
    assert (view.step_thumbnails(0, True, False) != 255).all()  # an encoder shows every row
    assert "(encoder)" in panel.status.text()
    panel.worker.stop()


def test_main_generate_screenshot(qtbot, decoder, tmp_path, capsys):
    from explorer.app import run_app

    out = tmp_path / "gen.png"
    assert run_app(["--generate", PROMPT, "--model", str(decoder), "--new-tokens", "3", "--screenshot", str(out)]) == 0
    assert out.stat().st_size > 10_000
    assert run_app(["--generate", PROMPT, "--screenshot", str(tmp_path / "x.png")]) == 2
    assert "--generate needs --model" in capsys.readouterr().err
