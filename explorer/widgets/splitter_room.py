"""Room for a splitter's second pane: a panel that just got something to show (a clicked cell's
derivation) is given the height it needs, up to a share of the splitter, from the pane above."""

from __future__ import annotations

from PySide6.QtWidgets import QSplitter, QWidget


def content_height(widget: QWidget, width: int) -> int:
    """The height ``widget`` asks for at ``width`` (its wrapped labels included)."""
    return widget.heightForWidth(width) if widget.hasHeightForWidth() else widget.sizeHint().height()


def give_room(splitter: QSplitter, wanted: int, share: float = 0.6) -> bool:
    """Make the second pane at least ``min(wanted, share × the splitter)`` px tall, taking the height
    from the first pane down to its minimum; True when the sizes changed."""
    first, second = splitter.sizes()
    want = min(wanted, int((first + second) * share))
    if second >= want:
        return False
    least = max(splitter.widget(0).minimumSizeHint().height(), splitter.widget(0).minimumHeight())
    moved = min(want - second, max(0, first - least))
    if moved <= 0:
        return False
    splitter.setSizes([first - moved, second + moved])
    return True
