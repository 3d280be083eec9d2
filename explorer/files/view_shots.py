"""``main.py --screenshot OUT --view NAME``: every view on screen from the command line.

The main window computes as for any screenshot; then the view asked for is opened as a person
would open it (a click on a cell for the inspector, Stage → Pin for the compare window, File →
Positional-encoding lens…, File → Whole model… for the model view, its metrics and rollout, the
custom-mask painter), and that view alone is grabbed once it is ready. How the PNG is written
stays with the window (explorer.app's screenshot).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QVBoxLayout, QWidget

from explorer.widgets.splitter_room import content_height, give_room

VIEWS = ("stepper", "inspector", "why", "compare", "pe-lens", "model", "metrics", "rollout", "mask", "time-machine")


@dataclass
class Shot:
    """The widget to grab, when it is ready (polled), and why it never will be ("" while it may)."""

    widget: object
    ready: Callable[[], bool]
    failed: Callable[[], str] = lambda: ""


def _inspector_whole(window, tallest: int = 1400) -> bool:
    """True once the derivation is shown whole: a screenshot gives the inspector the height its
    content asks for, from the focus panel's spare height, then makes the window taller (up to
    ``tallest`` px), rather than show the inspector's scroll bar, as a person would drag the divider.

    Measured from the content's own height for the viewport's width (not the scroll bar's range,
    which lags the layout by a turn: the same command gave 1400 × 900 with a sliver of inspector,
    or 1400 × 1374), so the same command makes the same image."""
    if window.inspector.inspector.derivation is None:
        return False
    area = window.inspector_scroll
    # Measured at the width the derivation has without a scroll bar: one shown while measuring took
    # that width, the derivation's lines wrapped again, and it never fitted.
    area.setVerticalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
    needed = content_height(window.inspector, area.viewport().width())
    split = window.right_splitter
    give_room(split, needed, share=1.0)
    hidden = needed - split.sizes()[1]
    if hidden > 0 and window.height() < tallest:
        window.resize(window.width(), min(tallest, window.height() + hidden))
        return False
    if hidden > 0:  # as tall as it goes: shown with its scroll bar
        area.setVerticalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAsNeeded)
    return True


def parse_cell(text: str) -> tuple[int, int, int]:
    """``--cell H,R,C`` (0-based head, row, column)."""
    parts = [p.strip() for p in text.split(",")]
    if len(parts) != 3 or not all(p.lstrip("-").isdigit() for p in parts):
        raise ValueError(f"--cell expects head,row,col (three 0-based integers), got {text!r}")
    head, row, col = (int(p) for p in parts)
    if min(head, row, col) < 0:
        raise ValueError(f"--cell {text}: head, row and column count from 0")
    return head, row, col


def check_view_arguments(view: str | None, model: str | None, screenshot: str | None, attention: str | None) -> str:
    """'' when ``--view`` can be honoured, else the one-line reason."""
    if view is None:
        return ""
    if not screenshot:
        return "--view needs --screenshot (it says which view the PNG shows)"
    if view in ("model", "metrics", "rollout") and not (model or attention):
        return f"--view {view} needs --model (or --attention FILE): it shows every layer of a pretrained model"
    return ""


def check_window_screenshot(args) -> str:
    """'' when ``--window-screenshot`` can be honoured (or is not given), else the one-line reason:
    a second PNG is written only where the user named it, never beside the first (issue 50)."""
    second = getattr(args, "window_screenshot", None)
    if second is None:
        return ""
    if not (args.timeline and args.screenshot):
        return "--window-screenshot saves the main window beside --timeline's --screenshot; give both"
    if os.path.abspath(second) == os.path.abspath(args.screenshot):
        return f"--window-screenshot and --screenshot both name {second}; give two files"
    return ""


def open_view(window, view: str, cell: tuple[int, int, int] | None, query: int | None) -> Shot | str:
    """Open ``view`` on the computed ``window``; a :class:`Shot`, or the one-line reason it cannot."""
    state = window.state
    display = state.display
    trace = display.trace
    if query is not None:
        if not 0 <= query < len(trace.query_tokens):
            return f"--query must be between 0 and {len(trace.query_tokens) - 1}"
        state.set_query(query)
    if view == "stepper":
        return Shot(window, lambda: True)
    if view == "inspector":
        stage = state.stepper.stage
        head, row, col = cell if cell is not None else (0, max(0, state.query), 0)
        rows, cols = stage.shape[-2:]
        if not (0 <= head < max(1, stage.heads) and 0 <= row < rows and 0 <= col < cols):
            return f"--cell {head},{row},{col} is outside {stage.name} ({stage.heads} heads × {rows} × {cols}, from 0)"
        window.select_cell(head, row, col)
        return Shot(window, lambda: _inspector_whole(window))
    if view == "why":
        return _why_view(window, cell)
    if view == "compare":
        compare = window.compare
        if compare.pinned is None:  # no session with a pinned run: the run compared with itself
            print("note: no pinned run (give --session with one): the run is compared with itself")
            compare.pin()
        return Shot(compare.view, lambda: compare.comparison is not None)
    if view == "pe-lens":
        lens = window.windows.open_pe_lens()
        return Shot(lens, lambda: True)
    if view == "time-machine":
        tm = window.windows.open_time_machine(cell=cell)
        if tm is None:
            return window.windows.timeline_error or "the time machine needs a model with training checkpoints"
        return Shot(tm, lambda: True)
    if view == "mask":
        dock = window.mask_dock
        if not dock.isVisible():
            return "--view mask needs the painted custom mask: --mask custom without --mask-file (toy model)"
        return Shot(window, lambda: True)
    survey = window.windows.open_survey(model=True)
    if survey is None:
        return window.last_error or "the whole-model view needs --model"
    # An encoder-decoder's window has three panels (encoder, decoder, cross) in a scrolled column:
    # the PNG is that whole column, the rows scrolled out of view included.
    panels = list(getattr(survey, "panels", {}).values()) or [survey.panel]
    for panel in panels:
        survey_tab(panel, view)
    widget = survey.centralWidget().widget() if hasattr(survey, "panels") else survey

    def ready() -> bool:
        return all(p.survey is not None and not p.busy and p.model_view.settled() for p in panels)

    def failed() -> str:  # a survey that failed (scores that overflow, say) is said at once, not waited for
        return next((p.error for p in panels if p.error), "")

    if view == "metrics":  # the table alone, every row and column (in the window it scrolls)
        sheet = MetricsSheet([p.table for p in panels])
        return Shot(sheet, lambda: ready() and sheet.fill(), failed)
    return Shot(widget, ready, failed)


def _why_view(window, cell) -> Shot | str:
    """The Why panel on the score stage's cell ``cell`` (default: head 0, the focused or last query, key 0)."""
    display = window.state.display
    trace = display.trace
    name = "scaled" if "scaled" in trace else "scores"
    stage = trace[name]
    head, row, col = cell if cell is not None else (0, max(0, window.state.query) or len(trace.query_tokens) - 1, 0)
    if not (0 <= head < stage.heads and 0 <= row < stage.shape[1] and 0 <= col < stage.shape[2]):
        size = f"{stage.heads} heads × {stage.shape[1]} × {stage.shape[2]}"
        return f"--cell {head},{row},{col} is outside {name} ({size})"
    # The table wants room: the window wide, the panel beside the inspector wide (as a person would drag it).
    window.resize(max(window.width(), 1800), max(window.height(), 1000))
    dock = window.why.open()
    dock.setMinimumWidth(860)
    dock.panel.show_cell(display, stage, head, row, col, dock.model_of(display))
    panel = dock.panel

    def refused() -> str:  # the split refused (a score that is no product, ...): that line, exit 2, no PNG
        text = panel.note.text()
        return text if panel.result is None and text.startswith("why:") else ""

    return Shot(dock, lambda: panel.result is not None, refused)


class MetricsSheet(QWidget):
    """``--view metrics``: the head metrics tables on a sheet of their own, each as large as its
    rows and columns (in the survey window the table shares the width with the model view and
    scrolls: the PNG was the model view's, cut after ``distance``)."""

    def __init__(self, tables) -> None:
        super().__init__()
        self.tables = tables
        QVBoxLayout(self).setContentsMargins(6, 6, 6, 6)

    def fill(self) -> bool:
        if self.layout().count():
            return True
        width = height = 0
        for table in self.tables:
            view = table.view
            frame = 2 * view.frameWidth()
            header = view.horizontalHeader()
            w = sum(header.sectionSize(c) for c in range(header.count())) + frame
            h = header.sizeHint().height() + view.verticalHeader().length() + frame
            view.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
            view.setVerticalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
            view.setCurrentIndex(view.model().index(-1, -1))  # no cell outlined as current
            table.setFixedSize(w, h)
            self.layout().addWidget(table)
            table.show()  # a tab's page out of its tab widget: shown again
            width, height = max(width, w), height + h + self.layout().spacing()
        self.resize(width + 12, height + 12)
        self.show()
        return True


def survey_tab(panel, view: str | None) -> None:
    """``--attention FILE --view metrics|rollout``: the tab asked for in the survey window."""
    if view == "metrics":
        panel.tabs.setCurrentWidget(panel.table)
    elif view == "rollout":
        panel.tabs.setCurrentWidget(panel.rollout_view)


def attention_screenshot(path, out, view: str | None = None) -> int:
    """``main.py --attention FILE --screenshot OUT.png``: the survey window alone, saved as PNG
    (``view``: metrics or rollout picks that tab)."""
    from PySide6.QtWidgets import QApplication

    from explorer.files.image_export import save_screenshot
    from explorer.panels.survey_panel import open_attention_window

    window = open_attention_window(None, path)
    survey_tab(window.panel, view)
    QApplication.processEvents()
    window.panel.wait_until_shown()  # the thumbnails, made on the read thread
    QApplication.processEvents()
    if not window.panel.model_view.settled():  # laid out again: thumbnails at the view's pixels now
        window.panel.wait_until_shown()
        QApplication.processEvents()
    code = save_screenshot(window, out)  # atomic: a failed write never touches the old PNG
    window.close()
    window.deleteLater()
    QApplication.processEvents()
    return code
