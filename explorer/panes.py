"""The view state of the window's panes, kept in the state (``ExplorerState.stepper``): Qt-free,
one psygnal event per fact, as the rest of explorer/state.py.

The stepper's matrix view draws a stage in several event-loop turns (phases of explorer/widgets/frames.py), so
what is on screen can lag ``state.stage_name`` and ``state.display``: :attr:`StepperPane.shown` is
the stage whose images, titles and grid are all set now, and the run (generation) it belongs to.
The matrix view sets it when its images are set; the hover line, the numbers in cells, zooming,
edits, the inspector and screenshots read it here.
"""

from __future__ import annotations

from typing import NamedTuple

from psygnal import Signal

from models.command_fields import NEW_TOKENS
from models.engine.trace import Stage


class ShownStage(NamedTuple):
    """What the stepper's heatmaps show: ``stage`` of the run numbered ``generation``."""

    generation: int
    stage: Stage


class StepperPane:
    """The stepper's view state: the stage on screen (None until the first one is drawn)."""

    shown_changed = Signal(object)  # ShownStage: another stage (or another run's) is now on screen

    def __init__(self) -> None:
        self._shown: ShownStage | None = None

    @property
    def shown(self) -> ShownStage | None:
        return self._shown

    @property
    def stage(self) -> Stage | None:
        """The stage on screen, or None before the first."""
        return self._shown.stage if self._shown is not None else None

    @property
    def generation(self) -> int:
        """The run (generation) whose stage is on screen; 0 before the first."""
        return self._shown.generation if self._shown is not None else 0

    def set_shown(self, generation: int, stage: Stage) -> bool:
        """``stage`` of run ``generation`` is on screen now; one event when that changed (the same
        stage drawn again, for another head or colour scale, is no change). True when it changed."""
        shown = self._shown
        if shown is not None and shown.generation == generation and shown.stage is stage:
            return False
        self._shown = ShownStage(generation, stage)
        self.shown_changed.emit(self._shown)
        return True


class Status(NamedTuple):
    """What the status line says: ``text``, whether it is an error, the notices shown before it."""

    text: str = ""
    error: bool = False
    notices: tuple[str, ...] = ()


class StatusPane:
    """The status line's view state (the widget, explorer/widgets/status_line.py, only draws it)."""

    changed = Signal(object)  # Status

    def __init__(self) -> None:
        self.status = Status()

    def show_info(self, text: str, notices: tuple[str, ...] | list[str] = ()) -> None:
        self._set(Status(text, False, tuple(notices)))

    def show_error(self, text: str) -> None:
        self._set(Status(text, True))

    def _set(self, status: Status) -> None:
        self.status = status
        self.changed.emit(status)  # the same message again is shown again (and read by tests)


class InspectedCell(NamedTuple):
    """The cell the inspector derives: ``stage`` of run ``generation``, ``(head, row, col)``."""

    generation: int
    stage: Stage
    head: int
    row: int
    col: int


class InspectorPane:
    """The inspector's view state: the cell it explains, or None (nothing clicked, or the run gone)."""

    cell_changed = Signal(object)  # InspectedCell or None

    def __init__(self) -> None:
        self.cell: InspectedCell | None = None

    def set_cell(self, cell: InspectedCell | None) -> None:
        if cell != self.cell or cell is not None:  # clicking the same cell again explains it again
            self.cell = cell
            self.cell_changed.emit(cell)


class ZoomPane:
    """The stepper's zoom: the cells in view of each plot zoomed in, ``{head: (r0, r1, c0, c1)}`` (a head
    absent shows its whole matrix). The matrix view sets it as a plot's range changes (the wheel, a pan,
    a new stage laid out)."""

    regions_changed = Signal(object)  # dict head -> (r0, r1, c0, c1)

    def __init__(self) -> None:
        self.regions: dict[int, tuple[int, int, int, int]] = {}

    def set_regions(self, regions: dict[int, tuple[int, int, int, int]]) -> None:
        if regions != self.regions:
            self.regions = regions
            self.regions_changed.emit(regions)


class Shown:
    """A pane whose view state is one value, what its window shows now (``shown``, None before the
    first), announced by ``shown_changed``: Generate's step, the atlas's picture, the timeline's step,
    the comparison of the pinned run."""

    shown_changed = Signal(object)

    def __init__(self) -> None:
        self.shown: object | None = None

    def set_shown(self, shown: object | None) -> None:
        if shown is not self.shown and not _equal(shown, self.shown):
            self.shown = shown
            self.shown_changed.emit(shown)


def _equal(a: object, b: object) -> bool:
    try:
        return bool(a == b)
    except (ValueError, TypeError):  # arrays inside: only the same object is the same
        return False


class GeneratedStep(NamedTuple):
    """What the Generate window shows: ``step`` of its generation, the head ``(layer, head)`` in full,
    the colour options (each thumbnail fitted to its own maximum; the first key left out of the scale)."""

    step: int
    layer: int
    head: int
    fit_each: bool
    sink_out: bool


class StatusText:
    """A window's status line as one value (``status``: what it is doing, its last error), announced by
    ``status_changed``; ``idle_status`` is what it says with nothing done yet (and once its window closed)."""

    status_changed = Signal(str)

    idle_status = ""

    def __init__(self) -> None:
        super().__init__()
        self.status = self.idle_status

    def set_status(self, text: str) -> None:
        if text != self.status:
            self.status = text
            self.status_changed.emit(text)


class MaskPane(StatusText):
    """The mask painter's view state (explorer/widgets/mask_painter.py): its status line (the pairs
    hidden, the file saved, why a file could not be opened or saved). The mask it paints is the state's
    ``inputs.painted_mask``."""

    idle_status = "Click a cell to hide or show that key for that query; drag to paint."


class FormPane(StatusText, Shown):
    """A pane whose window also has a form: ``form`` (a NamedTuple, one field per control), announced
    by ``form_changed``. The window's controls follow it and write to it (as the main window's follow
    ``ExplorerState.inputs``): what a control shows is never held in the control alone. ``status``: the
    window's status line, announced by ``status_changed`` (:class:`StatusText`)."""

    form_changed = Signal(object)

    def __init__(self, form: tuple) -> None:
        super().__init__()
        self.form = form

    def update_form(self, **changes: object) -> None:
        """Change some fields of the form; one event when it changed."""
        form = self.form._replace(**changes)
        if form != self.form:
            self.form = form
            self.form_changed.emit(form)


class GenerateForm(NamedTuple):
    """The Generate window's form: the decoder (a folder or a cached name), the prompt, how many tokens
    to generate, the sampling settings (temperature 0: greedy; top-k 0 and top-p 1: off) and the seed."""

    model: str = ""
    prompt: str = "The cat sat on the"
    new_tokens: int = NEW_TOKENS.default
    temperature: float = 0.0
    top_k: int = 0
    top_p: float = 1.0
    seed: int = 0


class GeneratePane(FormPane):
    """The Generate window's state: its :class:`GenerateForm`, status and the :class:`GeneratedStep` on screen."""

    idle_status = "Type a prompt and press Generate."
    view_changed = Signal(object)  # GeneratedStep: the step, head and colours asked for (``view``)

    def __init__(self) -> None:
        super().__init__(GenerateForm())
        self.view = GeneratedStep(0, 0, 0, True, False)  # what the slider, boxes and checkboxes ask for

    def update_view(self, **changes: object) -> bool:
        """Ask for another step, head or colour option; one event when it changed (True)."""
        view = self.view._replace(**changes)
        if view == self.view:
            return False
        self.view = view
        self.view_changed.emit(view)
        return True


class AtlasShown(NamedTuple):
    """What the atlas window shows: the atlas (its model and corpus), the one it is compared with (or ""),
    the map's colour metric and the scatter's axes."""

    atlas: str
    compared: str
    colour: str
    x: str
    y: str


class AtlasForm(NamedTuple):
    """The atlas window's form: the corpus last run on ("" for the built-in probes), the map's colour
    column, the scatter's axes, and whether the scatter (rather than the map) is in front."""

    corpus: str = ""
    colour: str = "previous_mean"
    x: str = "entropy_mean"
    y: str = "induction"
    scatter: bool = False


class AtlasPane(FormPane):
    """The head atlas window's state: its :class:`AtlasForm`, status and the :class:`AtlasShown` on screen."""

    idle_status = "No atlas yet: run one on a corpus file or the built-in probes, or open a folder."

    def __init__(self) -> None:
        super().__init__(AtlasForm())


class TimelinePane(Shown):
    """The training timeline's view state: the step (checkpoint index) its slider shows."""


class ComparePane(Shown):
    """The compare window's view state: the Comparison (explorer/engine/compare.py) it shows, or None
    (nothing pinned)."""


class SurveyForm(NamedTuple):
    """The whole-model (survey) window's options: what every thumbnail and metric reads (``measure``:
    "weights" or "weighted norms"), special tokens left out, token 0 left out of each thumbnail's scale,
    each thumbnail fitted to its own maximum, the metric colouring the heat table ("" until a survey
    fills it), the tab in front ("metrics" or "rollout"), and the rollout's layer and token (-1: none
    chosen, the last layer and the first token once a rollout is shown), and the metrics table's order."""

    measure: str = "weights"
    special_out: bool = False
    sink_out: bool = False
    fit_each: bool = True
    metric: str = ""
    tab: str = "metrics"
    rollout_layer: int = -1
    rollout_token: int = -1
    sort: tuple[str, bool] = ("", False)  # the heat table's column sorted by ("": layer, head order), descending


class SurveyPane(FormPane):
    """The whole-model window's state: its :class:`SurveyForm`, status (what it shows: the source and its
    shape, or that it computes or failed), ``message`` (a file's warnings, an error: "" when none) and the
    Survey (models/reads/survey.py) complete on screen (``shown``, None while one computes)."""

    idle_status = "No model or attention file yet"
    message_changed = Signal(str)

    def __init__(self) -> None:
        super().__init__(SurveyForm())
        self.message = ""

    def set_message(self, text: str) -> None:
        if text != self.message:
            self.message = text
            self.message_changed.emit(text)


class SurveyRows:
    """The encoder-decoder whole-model window's rows, each a :class:`SurveyPane` of its own (a row's
    metric, rollout and order are not the others'): ``encoder``, ``decoder`` and ``cross``."""

    BLOCKS = ("encoder", "decoder", "cross")

    def __init__(self) -> None:
        self.encoder, self.decoder, self.cross = SurveyPane(), SurveyPane(), SurveyPane()
