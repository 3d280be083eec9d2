"""The cell inspector, the positional-encoding lens and labels for every script (pytest-qt)."""

from __future__ import annotations

import numpy as np
import pytest
from PySide6.QtGui import QFont

from explorer.widgets.cell_inspector import CellInspector
from explorer.widgets.labels import covered, display_label
from explorer.widgets.pe_lens import PeLens
from explorer.widgets.token_axis import TokenAxis
from models.config import AttentionConfig, AttentionRequest
from models.engine.pipeline import run
from models.reads.explain import explain
from models.reads.params import toy_params


def _text(label) -> str:
    """A label's text as read: the inspector joins the pieces of a term with no-break spaces."""
    return label.text().replace("\u00a0", " ")


@pytest.fixture(scope="module")
def toy():
    req = AttentionRequest(config=AttentionConfig(heads=2, d_model=16, mask="causal", pe="sinusoidal", bias=True),
                           sentence="The cat sat on the mat.")  # fmt: skip
    return run(req), toy_params(req)


def test_inspector_shows_a_score_cell(qtbot, toy):
    trace, params = toy
    panel = CellInspector()
    qtbot.addWidget(panel)
    d = explain(trace, params, "scores", (0, 4, 1))
    panel.show_derivation(d)
    assert _text(panel.title) == "Score · head 0 · query 'the' (4) → key 'cat' (1)"
    assert "q_4 · k_1 = Σ_c q_4c k_1c" in _text(panel.formula)
    assert panel.bar_heights() == [t.value for t in d.sum_of] and len(d.sum_of) == 8
    assert not panel.plot.isHidden()
    assert "the 6 largest of 8" in _text(panel.terms) and "… and 2 more" in _text(panel.terms)
    assert f"{float(trace['scores'].array[0, 4, 1]):.8g}".replace("-", "−") in _text(panel.value)


def test_inspector_shows_a_weight_row_and_a_hidden_cell(qtbot, toy):
    trace, params = toy
    panel = CellInspector()
    qtbot.addWidget(panel)
    d = explain(trace, params, "weights", (1, 3, 2))
    panel.show_derivation(d)
    assert panel.bar_heights() == pytest.approx(list(d.details["exponentials"]))
    assert panel.bar_heights()[4:] == [0.0, 0.0, 0.0]  # keys after the query: e^(−∞) = 0
    assert "a_3,2 = e^(s_3,2 − m) / Σ_l e^(s_3,l − m)" in _text(panel.formula)
    assert "cell's own in orange" in _text(panel.caption)
    panel.show_derivation(explain(trace, params, "masked", (1, 3, 5)))
    assert panel.plot.isHidden() and "j > i" in _text(panel.steps) and "−∞" in _text(panel.value)
    panel.clear()
    assert panel.derivation is None and panel.plot.isHidden()


@pytest.mark.parametrize("delta", [1, 3, 7, -4, 20, 59])
def test_pe_lens_relative_position_error_is_tiny(qtbot, delta):
    lens = PeLens()
    qtbot.addWidget(lens)
    lens.set_encoding(60, 32)
    with qtbot.waitSignal(lens.delta_changed, timeout=1000):
        lens.set_delta(delta)
    assert lens.check.delta == delta and lens.check.positions == 60 - abs(delta)
    assert 0 < lens.largest_error() < 1e-5
    assert f"{lens.largest_error():.2e}" in lens.error.text()
    assert len(lens.check.errors) == 16  # d / 2 frequency pairs


def test_pe_lens_odd_width_and_offset_beyond_the_sequence(qtbot):
    lens = PeLens()
    qtbot.addWidget(lens)
    lens.set_encoding(5, 7)
    assert lens.delta.maximum() == 4 and len(lens.check.errors) == 3  # the last sin column has no cos
    lens.set_delta(4)
    assert lens.largest_error() < 1e-5 and lens.check.positions == 1


# --- labels for every script ---------------------------------------------------------------------------

RARE = ["\U0001e900", "\U00010400", "\u4e2d", "\u0928", "\U0001f600", "\ud55c"]  # Adlam, Deseret, CJK, ...


def test_uncovered_characters_show_as_code_points(qapp):
    font = QFont()
    uncovered = [c for c in RARE if not covered(c, font)]
    if not uncovered:  # every font is installed here: the label is the text itself
        assert all(display_label(c, font) == c for c in RARE)
        return
    char = uncovered[0]
    code = f"U+{ord(char):04X}"
    assert display_label(char, font) == code
    assert display_label(f"a{char}b", font) == f"a {code} b"
    axis = TokenAxis("bottom")
    axis.set_labels(("cat", char))
    assert axis.tickStrings([0.5, 1.5], 1.0, 1.0) == ["cat", code]


def test_covered_text_stays_text(qapp):
    font = QFont()
    for text in ("cat", "naïve", "Straße", "[CLS]", "Ġthe", "a\u200db"):
        assert display_label(text, font) == text
    hebrew = "\u05e9\u05dc\u05d5\u05dd"
    if all(covered(c, font) for c in hebrew):  # right-to-left text shows as text where a font has it
        assert display_label(hebrew, font) == "\u200e" + hebrew  # drawn as text, in logical order


def test_a_wide_inspector_renders(qtbot, toy, tmp_path):
    trace, params = toy
    panel = CellInspector()
    qtbot.addWidget(panel)
    panel.resize(560, 640)
    panel.show_derivation(explain(trace, params, "output", (2, 3)))
    panel.show()
    qtbot.waitExposed(panel)
    image = panel.grab().toImage()
    colours = {image.pixel(x, y) for x in range(0, image.width(), 7) for y in range(0, image.height(), 7)}
    assert len(colours) > 5  # text and bars, not an empty panel
    assert np.isfinite(panel.derivation.total())
