"""The status-bar message: what was computed, where and how fast; notices in amber; errors in red."""

from __future__ import annotations

from typing import TYPE_CHECKING

from PySide6.QtCore import Qt
from PySide6.QtGui import QFont, QFontMetrics, QTextDocumentFragment
from PySide6.QtWidgets import QLabel, QSizePolicy, QWidget

from explorer.widgets.labels import rich_safe

if TYPE_CHECKING:
    from models.engine.trace import AttentionTrace

NOTICE_COLOUR = "#8a5300"  # dark amber: worth reading, not a failure


class StatusLine(QLabel):
    def __init__(self, parent: QWidget | None = None):
        super().__init__(parent)
        self.setObjectName("statusLine")
        self.is_error = False
        self.notices: tuple[str, ...] = ()
        self._text = self._message = ""
        # Never let a long message widen the window: the status bar clips it, the tooltip has it all.
        self.setSizePolicy(QSizePolicy.Policy.Ignored, QSizePolicy.Policy.Preferred)

    def show_info(self, text: str, notices: tuple[str, ...] | list[str] = ()) -> None:
        """``text`` after the computation's notices (truncation, a replaced mask...): those come
        first, so that a narrow window clips the routine part."""
        self._show(text, error=False, notices=tuple(notices))

    def show_error(self, text: str) -> None:
        self._show(f"⚠ {text}", error=True)

    def show_status(self, status) -> None:
        """Draw ``status`` (explorer.panes.Status: the window's state.status)."""
        if status.error:
            self.show_error(status.text)
        else:
            self.show_info(status.text, status.notices)

    def plain_text(self) -> str:
        """The message without markup (what the tooltip shows)."""
        return self.toolTip()

    def _show(self, text: str, error: bool, notices: tuple[str, ...] = ()) -> None:
        self.is_error, self.notices, self._text = error, notices, text
        self.setProperty("error", error)
        self.style().unpolish(self)  # re-apply the style sheet's [error="true"] rule
        self.style().polish(self)
        self.setToolTip("\n".join([*(f"Note: {n}" for n in notices), *([text] if text else [])]))
        self._fit()

    def _fit(self) -> None:
        """The message elided at the right to the line's width ("…", the tooltip has it all), never cut
        mid-letter by the status bar (MiniLM's "… from request to v"); the notices first, in amber."""
        bold = QFont(self.font())
        bold.setBold(True)  # measured bold throughout: never narrower than what is drawn
        metrics = QFontMetrics(bold)
        width = self.contentsRect().width() - 2 * self.margin() - 4
        if (bar := self.parentWidget()) is not None:  # never past what the status bar shows (its size grip)
            width = min(width, bar.contentsRect().right() - self.x() - 2 * self.margin() - 24)
        notes = "  ".join(f"Note: {n}" for n in self.notices)
        rest = f"  ·  {self._text}" if self.notices and self._text else self._text
        whole = notes + rest
        fitted = metrics.elidedText(whole, Qt.TextElideMode.ElideRight, width) if width > 0 else whole
        if not self.notices:
            self.setTextFormat(Qt.TextFormat.PlainText)
            self._message = whole
            super().setText(fitted)
            return
        self.setTextFormat(Qt.TextFormat.RichText)
        shown_notes = fitted if len(fitted) <= len(notes) else notes
        shown_rest = "" if len(fitted) <= len(notes) else fitted[len(notes) :]
        self._message = _marked(notes, rest)
        super().setText(_marked(shown_notes, shown_rest))

    def text(self) -> str:
        """The whole message (as set, not elided; markup included when it has notices)."""
        return self._message

    def shown_text(self) -> str:
        """The words on screen now, without markup (elided to the line's width)."""
        shown = super().text()
        return QTextDocumentFragment.fromHtml(shown).toPlainText() if self.notices else shown

    def resizeEvent(self, event):  # noqa: N802 - Qt API
        super().resizeEvent(event)
        self._fit()

def _marked(notes: str, rest: str) -> str:
    """Notices in amber, each "Note:" bold, then the rest."""
    marked = rich_safe(notes).replace("Note:", "<b>Note:</b>")
    return f'<span style="color:{NOTICE_COLOUR}">{marked}</span>{rich_safe(rest)}'


def trace_summary(trace: AttentionTrace, latency_ms: float) -> str:
    """The status line's words for a result: what was computed, how many stages, how long."""
    sizes = f"{len(trace.query_tokens)} × {len(trace.key_tokens)} tokens" if trace.config.get("cross") else \
        f"{len(trace.key_tokens)} tokens"
    heads = trace.config.get("heads", "?")
    block = f"{trace.meta['block']} block " if "block" in trace.meta else ""  # an encoder-decoder's
    source = f"{trace.meta['model']}, {block}layer {trace.meta['layer']} · " if "model" in trace.meta else ""
    weights = f" · {trace.meta['weights']}" if trace.meta.get("weights") else ""  # how a model's layers are held
    return (f"{source}Computed {len(trace.stages)} stages for {sizes}, {heads} heads on {trace.device} "
            f"in {trace.elapsed_ms:.1f} ms ({latency_ms:.0f} ms from request to view){weights}")  # fmt: skip
