"""Issue 35, "what a newcomer trips over": the pictures (each test failed before its fix)."""

from __future__ import annotations

import explorer.widgets.labels as labels
from explorer.widgets.labels import display_text

MIXED = "Café naïve 東京は美しい مرحبا بالعالم 🎉👍🏽 São Paulo"


def test_running_text_keeps_its_spaces_and_lines_when_a_character_has_no_font(qapp, monkeypatch):
    """Item 1: with one undrawable character every space and newline of the inspector's text read
    ``U+0020`` / ``U+000A``; only the undrawable characters are code points."""
    monkeypatch.setattr(labels, "installed_font_covers", lambda cp: cp < 0x2E80)  # no CJK, no emoji
    shown = display_text("key 東京 (3)\nq · k = 1.5")
    assert shown == "key U+6771 U+4EAC (3)\nq · k = 1.5"
    assert "U+0020" not in display_text(MIXED) and "U+000A" not in display_text(MIXED + "\nnext")
    assert display_text("a東b") == "a U+6771 b"
    assert display_text("👍🏽 ok") == "U+1F44D U+1F3FD ok"
