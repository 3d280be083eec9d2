"""The main window: builds the panels and wires state -> worker -> state -> views. No maths."""

from __future__ import annotations

import dataclasses
import time
from pathlib import Path

from PySide6.QtCore import QSettings, Qt, Signal
from PySide6.QtWidgets import (
    QFileDialog,
    QMainWindow,
    QProgressBar,
    QScrollArea,
    QSplitter,
    QVBoxLayout,
    QWidget,
)

from explorer.actions.compare_actions import CompareActions
from explorer.actions.experiment import Experiment
from explorer.actions.export_actions import ExportActions
from explorer.actions.file_actions import FileActions
from explorer.actions.hide_keys import KeyHider
from explorer.actions.menus import build_menus
from explorer.actions.other_windows import OtherWindows
from explorer.actions.session_actions import SessionActions
from explorer.actions.window_actions import window_registry
from explorer.engine.pretrained_runner import read_tokenizers_ahead
from explorer.engine.worker import ComputeWorker
from explorer.executor import EXECUTOR
from explorer.files.persistence import (
    GEOMETRY_KEY,
    available_inputs,
    load_fit_colours,
    load_inputs,
    model_folder,
    remember_model_folder,
    save_fit_colours,
    save_inputs,
)
from explorer.jobs import ReadJobs
from explorer.panels.atlas_extras import atlas_corpus
from explorer.panels.inspector_panel import InspectorPanel, InspectorScroll
from explorer.panels.mask_dock import MaskDock
from explorer.panels.why_dock import WhyDock
from explorer.run import DisplayTrace
from explorer.state import ALL_HEADS, ExplorerState, Inputs
from explorer.widgets.frames import Frames, debounced, throttled
from explorer.widgets.left_column import left_column
from explorer.widgets.matrix_view import MatrixView
from explorer.widgets.model_chooser import GGUF_FILTER, ModelChooser
from explorer.widgets.query_focus import QueryFocusPanel
from explorer.widgets.sentence_panel import SentencePanel
from explorer.widgets.settings_panel import SettingsPanel
from explorer.widgets.splitter_room import MiddleFirst
from explorer.widgets.stage_list import StageList
from explorer.widgets.stage_stepper import StageStepper
from explorer.widgets.status_line import StatusLine, trace_summary
from explorer.widgets.window_size import keep_on_screen, open_sized
from models.engine.device import describe_default_device
from models.pretrained import list_models

RESOURCES = Path(__file__).resolve().parent.parent / "resources"
WARM_PLOTS = 12  # heads of BERT-base, GPT-2, MiniLM: heatmaps made ready while such a model loads
IDLE_PLOTS = 16  # heatmaps built in idle time after start-up, so that a first model shows at once


def read_examples() -> list[str]:
    try:
        text = (RESOURCES / "examples.txt").read_text(encoding="utf-8")
    except OSError:
        return []
    return [line.strip() for line in text.splitlines() if line.strip()]


class MainWindow(QMainWindow):
    shown = Signal(int)  # generation of a result now in the views (after its handling, before paint)

    def __init__(self, settings: QSettings, inputs: Inputs | None = None, persist: bool = True,
                 worker: ComputeWorker | None = None, stage: str | None = None, head: int = ALL_HEADS,
                 fit_colours: bool | None = None):  # fmt: skip
        super().__init__()
        self.setWindowTitle("Attention Explorer")
        self.settings = settings
        self.persist = persist  # False for --screenshot runs: they must not change the user's settings
        inputs, startup_notice = available_inputs(inputs if inputs is not None else load_inputs(settings))
        self.state = ExplorerState(inputs, parent=self)
        if stage:
            self.state.set_stage(stage)
        self.state.set_head(head)  # also makes it the head the query panel explains
        if fit_colours is None:  # not given (--colours): as last time, or chosen from the data for a screenshot
            fit_colours = load_fit_colours(settings) if persist else "auto"
        self.state.set_fit_colours(fit_colours)
        self.worker = worker or ComputeWorker()
        # The worker is handed the state's colour scale with each request (submit, prepare): no copy.
        self.last_gui_ms = 0.0  # GUI-thread time spent handling the latest result (for the benchmark)
        self._submitted_at: dict[int, float] = {}
        self._answered = 0  # the latest generation that produced a result or an error
        self.last_error = ""  # the message of the latest request, if it failed
        self._load_error = ""  # why the chooser went back; shown instead of the next summary

        # Every number the GUI shows is read off this thread by these jobs (hover, focus, numbers in
        # cells, the edit dialog's value, the inspector, the comparison): the GUI thread never computes.
        self.jobs = ReadJobs(self)
        # Its reads compute on the shown run's lazy stores: they take turns with the worker on its device.
        self.jobs.device = lambda: self.state.display.trace.device if self.state.display is not None else "cpu"
        # The one frame scheduler: every turn after a change is one of its phases; while any is to
        # come the GUI is busy, and the worker and the read jobs hold back (explorer/widgets/frames.py).
        self.frames = Frames(self)
        self.frames.busy_changed.connect(self.worker.set_gui_busy)
        self.jobs.busy = lambda: self.frames.busy
        self.frames.idle.connect(self.jobs.release, Qt.ConnectionType.QueuedConnection)  # after the paint
        self.model_chooser = ModelChooser(self.state, list_models())
        self.sentence_panel = SentencePanel(self.state, read_examples())
        self.settings_panel = SettingsPanel(self.state, describe_default_device())
        self.stepper = StageStepper(self.state)
        self.stage_list = StageList(self.state)
        self.matrix_view = MatrixView(self.state, jobs=self.jobs, frames=self.frames)
        self.focus_panel = QueryFocusPanel(self.state, jobs=self.jobs)
        self.inspector = InspectorPanel(jobs=self.jobs)
        self.status_line = StatusLine()  # draws state.status
        self.state.status.changed.connect(self.status_line.show_status)
        self.statusBar().addWidget(self.status_line, 1)
        self.load_bar = QProgressBar()  # while a model loads on the worker
        self.load_bar.setRange(0, 100)
        self.load_bar.setMaximumWidth(180)
        self.load_bar.setFormat("Loading %p%")
        self.load_bar.hide()
        self.statusBar().addPermanentWidget(self.load_bar)
        self.exports = ExportActions(self, self.state, self.matrix_view, settings, self.state.status.show_info,
                                     self.state.status.show_error, jobs=self.jobs)  # fmt: skip
        self._lay_out()
        info, error = self.state.status.show_info, self.state.status.show_error
        self.mask_dock = MaskDock(self.state, error, self, off_gui=self.jobs.call)  # issue 9: the painted mask
        self.why = WhyDock(self.state, self.jobs, self.frames, self)  # File → Why…, hidden
        self.addDockWidget(Qt.DockWidgetArea.RightDockWidgetArea, self.why)
        self.why.hide()
        self.addDockWidget(Qt.DockWidgetArea.BottomDockWidgetArea, self.mask_dock)
        # issue 9: what-if edits, difference view
        self.experiment = Experiment(self.state, self.matrix_view, error, self)
        # Alt+click hides a key from a query (Shift: from every query)
        self.key_hider = KeyHider(self.state, self.matrix_view, error)
        self.jobs.failed.connect(lambda _kind, message: self.state.status.show_error(message))
        # Stage → Pin this run, compared with the current one
        self.compare = CompareActions(self.state, self.jobs, info, error, self)
        # issue 9: File → Save session… / Open session…
        self.sessions = SessionActions(self.state, self.submit_now, info, error, self,
                                       atlas=lambda: atlas_corpus(self.windows.atlas),
                                       off_gui=self.jobs.call)  # the file read off this thread
        # File → Open embeddings… / mask…: each file read and checked off this thread
        self.files = FileActions(self.state, self.state.add_notice, error, self, off_gui=self.jobs.call)
        # File → Whole model…, Head atlas…, Training timeline…: windows beside this one
        self.windows = OtherWindows(self, self.state, self.worker.models, error, self.submit_now,
                                    off_gui=self.jobs.call)
        # Every menu entry and shortcut, registered once by id (explorer/actions/window_actions.py).
        self.registry = window_registry(self)
        self.menus = build_menus(self.menuBar(), self.registry)
        for changed in (self.state.edits_changed, self.state.pinned_changed):  # Undo, Redo, Unpin apply or not
            changed.connect(lambda *_: self.registry.refresh())
        self.shown.connect(self.sessions.arrived)
        self.worker.failed.connect(lambda generation, message, _kind: self.sessions.arrived(generation, message))

        # Many changes in one event-loop turn (a spin box held down, a session applied) make one request.
        self._submit_soon = debounced(self.submit_now, 0, self)
        self.state.inputs_changed.connect(lambda *_: None if self._shows_request() else self._submit_soon())
        for changed in (self.state.edits_changed, self.state.difference_changed):
            changed.connect(lambda *_: self._submit_soon())
        self.state.settings_error_changed.connect(self._settings_problem)
        self.worker.result_ready.connect(self._on_result)
        self.worker.failed.connect(self._on_failed)
        # A load reports each tensor: the bar and status line follow at most every "load progress" ms (frames.DELAYS).
        self._progress_soon = throttled(self._on_load_progress, "load progress", self)
        self.worker.load_progress.connect(self._load_progress)
        self.model_chooser.open_folder_requested.connect(self.open_model_folder)
        # Building a model's dozen heatmaps takes ~100 ms: do it while the user picks, not after.
        self.model_chooser.about_to_choose.connect(lambda: self.matrix_view.warm_up(WARM_PLOTS))
        # and parse the listed models' tokenizers (~30 ms holding the interpreter lock each) before one is chosen
        self.model_chooser.about_to_choose.connect(self._read_tokenizers_ahead)
        self.worker.stage_ready.connect(self.state.add_stage_image)
        self.matrix_view.image_missing.connect(self.worker.prepare)
        self.matrix_view.regions_wanted.connect(self.worker.prepare_regions)
        self.worker.regions_ready.connect(self.matrix_view.zoom.arrived_together)
        self.matrix_view.cell_clicked.connect(self.select_cell)
        self.inspector.follow(self.state, self.inspector_scroll, self.right_splitter)  # the inspected cell

        geometry = settings.value(GEOMETRY_KEY) if persist else None
        if geometry is None or not self.restoreGeometry(geometry):
            open_sized(self)  # 1400 × 900, or the screen's free area when smaller
            left = self.splitter.widget(0).sizeHint().width()
            right = max(self.focus_panel.minimumWidth(), min(330, self.width() // 4))
            self.splitter.setSizes([left, self.width() - left - right, right])
        else:
            keep_on_screen(self)  # saved on a larger screen
        self.submit_now()
        # One plot per idle event-loop turn (~10 ms each), behind the first result: a model chosen
        # later (12 heads, say) then finds its heatmaps built, even chosen from the keyboard.
        self.matrix_view.warm_up(IDLE_PLOTS)
        # So are the listed models' tokenizers, once the first result has painted (again when the list opens).
        once = Qt.ConnectionType.SingleShotConnection
        self.shown.connect(lambda _generation: self.frames.idle.connect(self._read_tokenizers_ahead, type=once),
                           type=once)  # fmt: skip
        if startup_notice:
            self.state.add_notice(startup_notice)
            self.state.status.show_info("", self.state.notices)

    # --- layout ----------------------------------------------------------------------------
    def _lay_out(self) -> None:
        # what to compute (scrolls when short), then every stage whole (explorer/widgets/left_column.py)
        left = left_column([self.model_chooser, self.sentence_panel, self.settings_panel], self.stage_list)

        centre = QWidget()
        middle = QVBoxLayout(centre)
        middle.setContentsMargins(6, 6, 6, 6)
        middle.addWidget(self.stepper)
        middle.addWidget(self.matrix_view, 1)

        splitter = MiddleFirst(Qt.Orientation.Horizontal)  # narrowed: the side panes give way first
        splitter.addWidget(left)
        splitter.addWidget(centre)
        right = QSplitter(Qt.Orientation.Vertical)  # the focused query above, the clicked cell below
        right.addWidget(self.focus_panel)
        # A long derivation scrolls: its height never becomes the window's minimum (a click on a
        # cell made the window 1,106 px tall, past the bottom of a laptop's screen).
        self.inspector_scroll = inspector_scroll = InspectorScroll()
        inspector_scroll.setWidget(self.inspector)
        inspector_scroll.setWidgetResizable(True)
        inspector_scroll.setFrameShape(QScrollArea.Shape.NoFrame)
        inspector_scroll.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAsNeeded)  # a wide formula: never cut
        right.addWidget(inspector_scroll)
        right.setChildrenCollapsible(False)
        self.right_splitter = right
        right.setStretchFactor(0, 3)
        right.setStretchFactor(1, 2)
        splitter.addWidget(right)
        for index, stretch in enumerate((0, 1, 0)):
            splitter.setStretchFactor(index, stretch)
        self.focus_panel.setMinimumWidth(200)  # with the left column and the matrix: fits half a 1920 px screen
        self.splitter = splitter
        splitter.setChildrenCollapsible(False)
        self.setCentralWidget(splitter)

    # --- requests and results --------------------------------------------------------------
    def submit_now(self) -> int | None:
        """Send the state's request (its inputs with the edits) to the worker; None while the settings
        are invalid."""
        self._submit_soon.cancel()
        request = self.state.request()
        if request is None:
            return None
        self.state.set_requested(request)
        self.matrix_view.zoom.supersede()  # the picture on screen is outgoing: no more regions for it
        self.frames.after_this_turn("submitted")  # the worker reads a model after this turn's repaints
        generation = self.worker.submit(request, focus_stage=self.state.stage_name, fit_colours=self.state.fit_colours,
                                        plots=self.matrix_view.zoom.plots_on_screen())  # reduced once, to their pixels
        self._submitted_at = {generation: time.perf_counter()}  # only the latest one matters
        return generation

    def _shows_request(self) -> bool:
        """The inputs ask for the run on screen (as requested, with the layer its model really traced: no
        request for the same trace again), shown without an error, and nothing newer is on its way."""
        shown, asked = self.state.display, self.state.requested
        if shown is None or self.state.status.status.error or self._answered != self.worker.latest_generation:
            return False
        if getattr(asked, "uses_model", False):  # a model's RunSpec (never a FileRequest: files are the toy's)
            asked = dataclasses.replace(asked, layer=shown.trace.meta.get("layer", asked.layer))
        return self.state.request() == asked

    # --- models ----------------------------------------------------------------------------
    def ask_model_folder(self, start: Path, gguf: bool = False) -> str | None:  # the dialog (tests replace it)
        return (QFileDialog.getOpenFileName(self, "Open a GGUF model file", str(start), GGUF_FILTER)[0] if gguf
                else QFileDialog.getExistingDirectory(self, "Open a model folder", str(start))) or None  # fmt: skip

    def open_model_folder(self, gguf: bool = False) -> None:
        """"Open folder…" (``gguf``: "Open GGUF file…"): pick a model folder (file), trace it on the worker."""
        chosen = self.ask_model_folder(model_folder(self.settings), *([True] if gguf else []))
        if not chosen:
            return
        folder = str(Path(chosen).resolve())
        remember_model_folder(self.settings, Path(folder).parent)
        self.model_chooser.add_folder(folder)
        self.state.update_inputs(model=folder)

    def _read_tokenizers_ahead(self) -> None:
        names = self.model_chooser.models()  # read here, parsed on the executor
        EXECUTOR.start(lambda: read_tokenizers_ahead(names))

    def _load_progress(self, fraction: float, message: str) -> None:
        """A load's report: the first at once, then at most one every "load progress" ms, the end at once."""
        if fraction >= 1.0:
            self._progress_soon.cancel()
        (self._on_load_progress if fraction >= 1.0 else self._progress_soon)(fraction, message)

    def _on_load_progress(self, fraction: float, message: str) -> None:
        self.matrix_view.warm_up(WARM_PLOTS)  # build heatmaps for its heads while it loads
        self.load_bar.setVisible(fraction < 1.0)
        self.load_bar.setValue(round(fraction * 100))
        model = self.state.inputs.model
        name = Path(model).name if Path(model).exists() else model  # a folder or file by its name, not its path
        if fraction >= 1.0:  # "Loaded minilm"
            self.state.status.show_info(f"{message}; tracing layer {self.state.inputs.layer}…")
        else:
            self.state.status.show_info(f"Loading {name or 'the model'}: {message}…")

    def is_settled(self) -> bool:
        """True when the last input change has been computed and shown (or refused with a message)."""
        return not (self.sentence_panel.is_typing() or self._submit_soon.pending) and (
            self._answered == self.worker.latest_generation and self.matrix_view.settled()
        ) and self.jobs.idle

    def _on_result(self, display: DisplayTrace) -> None:
        # The worker holds back until the GUI says it is idle again, after this turn at the earliest.
        self.frames.after_this_turn("result")
        if display.generation != self.worker.latest_generation:
            return  # stale: a newer request is on its way, never paint an old answer
        self._progress_soon.cancel()  # a load's report still waiting never overwrites the result's summary
        # A load that failed and sent the chooser back stays the latest news (and the error).
        self._answered, self.last_error, self._load_error = display.generation, self._load_error, ""
        self.load_bar.hide()
        t0 = time.perf_counter()
        old = self.state.display
        self.state.show_trace(display)
        if old is not None:
            self.worker.discard(old)  # the views have let go of it: the worker frees it
        del old
        self.last_gui_ms = (time.perf_counter() - t0) * 1000.0
        submitted = self._submitted_at.get(display.generation, t0)
        if self.last_error:
            self.state.status.show_error(self.last_error)
        else:
            summary = trace_summary(display.trace, (t0 - submitted) * 1000.0)
            notices = [*self.state.take_notices(), *(display.trace.meta.get("notices") or ())]
            self.state.status.show_info(summary, notices)
        # The heatmaps (a new grid's layout, then its images) and their paint come in later
        # event-loop turns of their own, each short, rather than all in this one (MatrixView).
        self.shown.emit(display.generation)

    def _on_failed(self, generation: int, message: str, kind: str = "input") -> None:
        if generation != self.worker.latest_generation:
            return
        self._progress_soon.cancel()  # nor the error
        self.load_bar.hide()
        self.matrix_view.request_failed()  # the picture on screen stays
        self._answered, self.last_error = generation, message
        self.state.status.show_error(message)
        failed_model = getattr(self.state.requested, "model", None) or ""
        if kind == "load" and failed_model and failed_model != self.shown_model:
            # The model did not open: back to the one on screen, which keeps working.
            self._load_error = message
            self.model_chooser.remove_folder(failed_model)
            self.state.update_inputs(model=self.shown_model)

    @property
    def shown_model(self) -> str:
        """The model of the trace on screen ("" for the toy engine), read from the request that
        made it: where a failed load goes back to."""
        display = self.state.display
        request = display.request if display is not None else None
        return getattr(request, "model", None) or ""

    def _settings_problem(self, message: str, _fields: tuple) -> None:
        if message:
            self.state.status.show_error(f"settings not applied: {message}")

    def select_cell(self, head: int, row: int, col: int) -> None:
        stage = self.state.stepper.stage
        if stage is None or self.state.display is None:
            return
        self.state.inspect(head, row, col)
        self.why.cell_clicked(self.state.display, stage, head, row, col)
        if stage.row_labels == self.state.display.trace.query_tokens:
            self.state.set_query(row)
        if stage.per_head:
            self.state.set_focus_head(head)

    def settle_for_screenshot(self) -> None:
        self.matrix_view.flush()  # the heatmaps painted, not a held canvas
        self.jobs.wait_until_idle()  # and the numbers read off this thread (in cells, focus) shown

    def save_screenshot(self, path: str | Path) -> bool:
        from explorer.files.image_export import write_png

        self.settle_for_screenshot()
        self.screenshot_error = write_png(self, path)  # atomic: never a truncated PNG in place
        return self.screenshot_error is None

    def closeEvent(self, event):  # noqa: N802 - Qt API
        self.sentence_panel.flush()
        if self.persist:
            save_inputs(self.settings, self.state.inputs)
            save_fit_colours(self.settings, self.state.fit_colours)
            self.settings.setValue(GEOMETRY_KEY, self.saveGeometry())
            self.settings.sync()
        self.windows.close_all()  # the windows it opened go with it (their threads stop as they close)
        self.worker.stop()  # waits for its job on the executor: nothing keeps computing after the window is gone
        self.jobs.shutdown()
        super().closeEvent(event)

