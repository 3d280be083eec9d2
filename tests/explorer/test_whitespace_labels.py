"""A token made of whitespace is drawn visibly: a character-level model's space token read "15 " on
the axes and left the logit lens's cells and the next-token bars empty."""

import numpy as np

from explorer.widgets.labels import display_label, display_text, visible_whitespace
from explorer.widgets.lens_map import LensMap
from explorer.widgets.token_axis import TokenAxis
from explorer.widgets.topk_bars import TopKBars


def test_whitespace_becomes_a_sign_in_labels_but_not_in_running_text(qapp):
    assert display_label(" ") == "␣" and display_label("\n") == "↵" and display_label("\t") == "⇥"
    assert display_label("a b") == "a␣b" and display_label("\u00a0") == "U+00A0"
    assert display_label("the") == "the" and visible_whitespace("Ġthe") == "Ġthe"
    assert display_text("key ' ' (28)") == "key ' ' (28)"  # a derivation keeps its spaces


def test_axes_draw_a_space_token(qapp):
    axis = TokenAxis("bottom")
    axis.set_labels(("c", "a", "t", " ", "s"))
    assert axis.tickStrings([0.5, 3.5, 4.5], 1.0, 1.0) == ["c", "␣", "s"]


def test_the_logit_lens_writes_a_space_as_a_sign(qtbot):
    lens = LensMap()
    qtbot.addWidget(lens)
    labels = [["a", " "], ["\n", "b"]]
    lens.set_lens(np.full((2, 2), 0.3), labels, ("x", " "), prompt_length=1)
    written = [item.textItem.toPlainText() for item in lens.texts]
    assert written == ["a", "␣", "↵", "b"]
    assert lens.bottom.tickStrings([1.5], 1.0, 1.0) == ["␣"]


def test_the_next_token_bars_name_a_space(qtbot):
    bars = TopKBars()
    qtbot.addWidget(bars)
    bars.set_bars([" ", "a"], [0.6, 0.3], chosen=None, chosen_token="\n", chosen_prob=0.01)
    assert [label.split("  ")[0] for label in bars.labels] == ["␣", "a", "… ↵"]
