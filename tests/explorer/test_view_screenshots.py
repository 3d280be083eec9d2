"""Every view on screen from the command line: --screenshot OUT --view NAME saves that view."""

import pytest
from PySide6.QtGui import QImage

from explorer.app import run_app

SENTENCE = "The animal didn't cross the street because it was too tired."
TOY = ["--sentence", SENTENCE, "--heads", "2", "--mask", "causal", "--stage", "weights"]


@pytest.mark.parametrize("view, extra, size", [
    ("inspector", ["--cell", "1,4,2"], None),
    ("compare", [], (1100, 460)),  # the compare window alone
    ("pe-lens", [], (900, 700)),  # the lens alone
    ("mask", ["--mask", "custom"], None),
])  # fmt: skip
def test_each_toy_view_is_saved(tmp_path, capsys, view, extra, size):
    out = tmp_path / f"{view}.png"
    assert run_app([*TOY, *extra, "--view", view, "--screenshot", str(out)]) == 0, capsys.readouterr().err
    image = QImage(str(out))
    assert not image.isNull()
    if size is not None:
        assert (image.width(), image.height()) == size


@pytest.mark.parametrize("view", ["model", "rollout"])
def test_the_whole_model_views_are_saved(tmp_path, capsys, view):
    out = tmp_path / f"{view}.png"
    argv = ["--model", "minilm", "--sentence", "The cat sat on the mat.", "--view", view, "--screenshot", str(out)]
    assert run_app(argv) == 0, capsys.readouterr().err
    assert QImage(str(out)).width() == 1300  # the survey window, not the main one


def test_the_metrics_view_is_the_whole_table(tmp_path, capsys):
    """Issue 35, item 4: ``--view metrics`` was byte for byte ``--view model`` (the survey window),
    its table cut after ``distance``; it is the table alone, every row and column."""
    argv = ["--model", "minilm", "--sentence", "The cat sat on the mat."]
    assert run_app([*argv, "--view", "model", "--screenshot", str(tmp_path / "model.png")]) == 0
    assert run_app([*argv, "--view", "metrics", "--screenshot", str(tmp_path / "metrics.png")]) == 0
    model, metrics = QImage(str(tmp_path / "model.png")), QImage(str(tmp_path / "metrics.png"))
    assert metrics.size() != model.size()
    assert 72 * 20 < metrics.height() < 72 * 20 + 120  # 6 layers × 12 heads, one 20 px row each
    assert metrics.width() < 700  # the table alone (nine columns, "sink" the last)


def test_bad_view_arguments_say_why(tmp_path, capsys):
    shot = str(tmp_path / "x.png")
    assert run_app([*TOY, "--view", "model", "--screenshot", shot]) == 2
    assert "--view model needs --model" in capsys.readouterr().err
    assert run_app([*TOY, "--view", "inspector"]) == 2
    assert "--view needs --screenshot" in capsys.readouterr().err
    assert run_app([*TOY, "--view", "inspector", "--cell", "5,0,0", "--screenshot", shot]) == 2
    assert "outside weights" in capsys.readouterr().err
    assert run_app([*TOY, "--view", "inspector", "--cell", "a,b", "--screenshot", shot]) == 2
    assert "--cell expects" in capsys.readouterr().err


def test_an_inspector_screenshot_shows_the_derivation_whole_without_a_scroll_bar(qtbot, make_window, settle):
    """The screenshot measured the derivation while the inspector's scroll bar took 18 px of its
    width: lines kept whole (no break inside a term) wrapped once more there, it never fitted, and
    the PNG showed a scroll bar over a derivation that fits the window without one."""
    from explorer.files.view_shots import open_view
    from explorer.state import Inputs

    window = make_window(Inputs(sentence=SENTENCE, heads=2, d_model=16, mask="causal"), stage="weights")
    window.resize(1400, 900)  # a screenshot's window (explorer.app)
    settle(window)
    shot = open_view(window, "inspector", (1, 9, 1), None)
    qtbot.waitUntil(lambda: window.inspector.inspector.derivation is not None, timeout=15_000)
    qtbot.waitUntil(lambda: shot.ready() and window.is_settled(), timeout=15_000)  # as explorer.app polls
    qtbot.wait(50)
    bar = window.inspector_scroll.verticalScrollBar()
    assert window.height() < 1400 and bar.maximum() == 0 and not bar.isVisible()


@pytest.mark.parametrize("view", ["model", "rollout"])
def test_an_encoder_decoder_whole_model_view_is_saved_with_its_three_rows(tmp_path, capsys, view):
    """``--view model`` with a T5 stopped on an AttributeError traceback (its window has three
    panels, not one). The PNG holds all three rows (encoder, decoder, cross), scrolled or not."""
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "models"))
    from encdec_refs import SOURCE, TARGET, build

    folder = tmp_path / "tiny-t5"
    folder.mkdir()
    build(folder, "t5")
    out = tmp_path / f"{view}.png"
    argv = ["--model", str(folder), "--sentence", SOURCE, "--cross-sentence", TARGET, "--view", view,
            "--screenshot", str(out)]  # fmt: skip
    assert run_app(argv) == 0, capsys.readouterr().err
    image = QImage(str(out))
    assert image.height() >= 3 * 400  # three rows of at least 400 px each, the ones scrolled out included
