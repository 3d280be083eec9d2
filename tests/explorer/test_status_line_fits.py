"""The status line is elided to its width, never cut mid-word by the status bar (issue 44, item 22:
MiniLM's line ended "… (2440 ms from request to v")."""

from PySide6.QtGui import QFont, QFontMetrics

from explorer.widgets.status_line import StatusLine

NOTICE = "Sentence truncated: 830 tokens, but minilm's maximum (max positions) is 512; only the first 512 are traced."
TEXT = "minilm, layer 0 · Computed 13 stages for 512 tokens, 12 heads on cpu in 192.0 ms (2440 ms from request to view)"


def squeezed(text: str) -> str:
    return " ".join(text.split())  # rich text draws runs of spaces as one


def drawn_width(line: StatusLine) -> float:
    bold = QFont(line.font())
    bold.setBold(True)
    return QFontMetrics(bold).horizontalAdvance(line.shown_text())


def test_a_long_status_line_is_elided_to_its_width_and_whole_in_its_tooltip(qtbot):
    line = StatusLine()
    qtbot.addWidget(line)
    line.resize(1400, 24)
    line.show()
    for notices in ((NOTICE,), ()):
        line.show_info(TEXT, notices)
        for width in (1400, 600, 200):
            line.resize(width, 24)
            shown = squeezed(line.shown_text())
            assert drawn_width(line) <= line.contentsRect().width(), (width, shown)
            whole = squeezed("  ·  ".join([*(f"Note: {n}" for n in notices), TEXT]))
            assert shown == whole or (shown.endswith("…") and whole.startswith(shown[:-1])), (width, shown)
            assert TEXT in line.plain_text() and all(n in line.plain_text() for n in notices)
        line.resize(4000, 24)
        whole = squeezed("  ·  ".join([*(f"Note: {n}" for n in notices), TEXT]))
        assert squeezed(line.shown_text()) == whole  # whole when it fits
