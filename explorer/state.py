"""Everything the window shows, in one place: Qt-free data with one psygnal event per field.

As in napari's Dims beside QtDims, the widgets and actions are handed this state, read it, write it
through its methods and subscribe to its events; none of them keeps a fact of its own.
- what is asked for: ``inputs`` (an immutable :class:`~explorer.inputs.Inputs`: the window's
  controls), the what-if ``edits`` with their undo and redo steps (an
  :class:`~explorer.snapshot.EditHistory`) and the ``difference`` toggle; :meth:`request` is the
  RunSpec of the three (models/runspec.py), ``requested`` the one last sent to the worker;
- what is shown: the latest run (``display``, a DisplayTrace carrying the RunSpec that made it), the
  ``pinned`` run compared with it, the stage, the head (-1 = all heads), the focused query row and head,
  the colour scale, and the ``notices`` to show with the next summary;
- each pane's view state (explorer/panes.py): ``stepper`` (the stage whose images are on screen now), ``status``,
  ``inspector``, ``zoom``, ``mask_painter``, the other windows' (``generate``, ``atlas`` and ``survey`` with their
  forms, ``timeline``, ``compare``).
:meth:`snapshot` is what a session file holds; :meth:`apply` sets one whole, or nothing.
"""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass

from psygnal import Signal

from explorer import panes
from explorer.inputs import DEFAULT_SENTENCE, Inputs, painted_mask, same_computation, settings_problem
from explorer.panes import InspectedCell, InspectorPane, ShownStage, Status, StatusPane, StepperPane
from explorer.run import DisplayTrace, FileRequest
from explorer.snapshot import ALL_HEADS, NO_QUERY, EditHistory, Snapshot
from models.engine.colour_index import StageImage
from models.engine.tokenize import tokenize
from models.engine.trace import STAGE_ORDER, AttentionTrace
from models.runspec import RunSpec

__all__ = ["ALL_HEADS", "DEFAULT_SENTENCE", "NO_QUERY", "EditHistory", "ExplorerState", "InspectedCell",
           "InspectorPane", "Inputs", "ModelInfo", "ShownStage", "Snapshot", "Status", "StatusPane", "StepperPane",
           "default_query", "is_special_token", "painted_mask", "settings_problem"]  # fmt: skip

SPECIAL_TOKEN = re.compile(r"\[[A-Z]+\]|<[^<>\s]+>")


@dataclass(frozen=True)
class ModelInfo:
    """What the shown pretrained model is, read from its trace (never from its files: the GUI
    thread does not open models)."""

    name: str
    model_type: str
    num_layers: int
    heads: int
    kv_heads: int
    d_model: int
    d_k: int
    default_mask: str
    pe: str  # "learned" or "rotary"
    device: str
    encoder_decoder: bool = False  # t5, bart, ...: the trace is of one block (below)
    block: str = ""  # "encoder", "decoder" or "cross"

    @classmethod
    def from_trace(cls, trace: AttentionTrace) -> ModelInfo | None:
        c = trace.config
        if c.get("source") != "pretrained":
            return None
        return cls(name=c["model"], model_type=c["model_type"], num_layers=c["num_layers"], heads=c["heads"],
                   kv_heads=c["kv_heads"], d_model=c["d_model"], d_k=c["d_k"], default_mask=c["default_mask"],
                   pe=c["pe"], device=trace.device, encoder_decoder=bool(c.get("encoder_decoder")),
                   block=c.get("block", ""))  # fmt: skip


class ExplorerState:
    inputs_changed = Signal(object)  # Inputs
    settings_error_changed = Signal(str, tuple)  # message ('' when valid), offending field names
    key_tokens_changed = Signal(tuple)  # the sentence's tokens, for the padding picker
    model_info_changed = Signal(object)  # ModelInfo of the shown model, or None (toy, loading)
    edits_changed = Signal(object)  # EditHistory: the edits or their undone steps changed
    difference_changed = Signal(bool)  # show edited − original rather than the edited run
    requested_changed = Signal(object)  # the RunSpec just sent to the worker
    trace_changed = Signal(object)  # DisplayTrace now shown
    stage_image_added = Signal(str)  # a lazily converted stage arrived for the shown trace
    pinned_changed = Signal(object)  # the DisplayTrace pinned beside the shown one, or None
    stage_changed = Signal(str)
    head_changed = Signal(int)
    query_changed = Signal(int)
    focus_head_changed = Signal(int)
    colours_changed = Signal(object)  # True: weights 0..their max ("fit to data"), "log": log10, False: 0..1
    notices_changed = Signal(tuple)  # what to show with the next summary in the status line
    restore_point_changed = Signal(object)  # the Snapshot a session being opened goes back to, or None

    def __init__(self, inputs: Inputs | None = None, parent: object = None):
        # ``parent``: ignored (kept for callers written for the QObject this used to be).
        self._inputs = inputs or Inputs()
        self._key_tokens = () if self._inputs.uses_model else tuple(tokenize(self._inputs.sentence))
        self._problem = settings_problem(self._inputs)
        self._history = EditHistory()
        self.difference = False
        self.requested: RunSpec | None = None  # the RunSpec last sent to the worker (it may fail)
        self.model_info: ModelInfo | None = None
        self.display: DisplayTrace | None = None
        self.pinned: DisplayTrace | None = None  # kept alive here: the worker never frees it
        self.stage_name, self.head = "weights", ALL_HEADS
        self.focus_head = 0  # the head the query panel explains (the one last clicked)
        self.query = NO_QUERY
        self.fit_colours = False
        self.notices: tuple[str, ...] = ()
        self.restore_point: Snapshot | None = None  # what a session being opened goes back to if it fails
        # The panes' view state (above; the stepper's stage on screen is a step behind stage_name while drawn).
        self.stepper, self.status, self.inspector = StepperPane(), StatusPane(), InspectorPane()
        self.zoom, self.generate, self.atlas = panes.ZoomPane(), panes.GeneratePane(), panes.AtlasPane()
        self.timeline, self.compare, self.survey = panes.TimelinePane(), panes.ComparePane(), panes.SurveyPane()
        self.mask_painter = panes.MaskPane()  # the painted mask's status line (the mask: inputs.painted_mask)
        self.survey_rows = panes.SurveyRows()  # the encoder-decoder whole-model window's three rows

    # --- inputs ----------------------------------------------------------------------------
    @property
    def inputs(self) -> Inputs:
        return self._inputs

    @property
    def key_tokens(self) -> tuple[str, ...]:
        return self._key_tokens

    @property
    def settings_error(self) -> str:
        return self._problem[0]

    @property
    def problem(self) -> tuple[str, tuple[str, ...]]:
        """``(message, offending field names)``, as settings_error_changed last carried them."""
        return self._problem

    def update_inputs(self, **changes) -> None:
        """Change some inputs. Edits of another computation are dropped (with a notice): they
        edited cells of a run that is no longer asked for."""
        old = self._inputs
        if old.exact and "exact" not in changes:
            changes = {**changes, "exact": False}  # the user changes what the session set
        new, tokens = self._settled(dataclasses.replace(old, **changes), "pad_positions" in changes)
        if new == old:
            return
        cleared = (self._history.steps or self._history.undone) and not same_computation(old, new)
        if cleared:  # set before any event: a subscriber to inputs_changed reads the edits that go with them
            self._history = EditHistory()
            self.notices += ("edits cleared: the inputs changed",)
        self._set(new, tokens, settings_problem(new))
        if cleared:
            self.notices_changed.emit(self.notices)
            self.edits_changed.emit(self._history)

    def _settled(self, new: Inputs, pads_given: bool) -> tuple[Inputs, tuple[str, ...]]:
        """``new`` made consistent (pad positions of another tokenizer dropped) and its key tokens."""
        model_changed = new.model != self._inputs.model
        if model_changed and not pads_given:
            new = dataclasses.replace(new, pad_positions=())  # positions of another tokenizer's tokens
        if new.uses_model:
            # The model's tokenizer runs on the worker: its tokens arrive with the trace.
            return new, () if model_changed else self._key_tokens
        tokens = tuple(tokenize(new.sentence))
        if new.pad_positions:  # keep only positions that still name a key of the sentence
            new = dataclasses.replace(new, pad_positions=tuple(p for p in new.pad_positions if p < len(tokens)))
        return new, tokens

    def _set(self, new: Inputs, tokens: tuple[str, ...], problem: tuple) -> None:
        """Set the inputs (their tokens and problem computed already), then emit what changed."""
        model_changed = new.model != self._inputs.model
        self._inputs = new
        if tokens != self._key_tokens:
            self._key_tokens = tokens
            self.key_tokens_changed.emit(tokens)
        if model_changed and self.model_info is not None:
            self.model_info = None  # until the new model's first trace
            self.model_info_changed.emit(None)
        if problem != self._problem:
            self._problem = problem
            self.settings_error_changed.emit(*problem)
        self.inputs_changed.emit(new)

    def request(self) -> RunSpec | FileRequest | None:
        """The RunSpec of the current inputs with the edits (as a difference when that is shown), or
        None while the settings are invalid. A file opened in the window is read once, when it is
        opened (its arrays held: the request reads nothing); a file not read yet (given on the command
        line, say) makes a :class:`FileRequest`: the worker reads and checks it, never the GUI thread."""
        if self._problem[0]:
            return None
        if self._inputs.files_unread and not self._inputs.uses_model:
            return FileRequest(self._inputs, self._history.edits, self.difference)
        return self._inputs.to_runspec().with_edits(self._history.edits, self.difference)

    def set_requested(self, spec: RunSpec | FileRequest) -> None:
        self.requested = spec
        self.requested_changed.emit(spec)

    # --- edits -----------------------------------------------------------------------------
    @property
    def history(self) -> EditHistory:
        return self._history

    @property
    def edits(self) -> tuple:
        return self._history.edits

    def add_edits(self, edits) -> None:
        """``edits`` as one undo step (hiding a token from every query is several)."""
        self._set_history(self._history.add(edits))

    def undo(self) -> None:
        self._set_history(self._history.undo())

    def redo(self) -> None:
        self._set_history(self._history.redo())

    def reset_edits(self) -> None:
        self._set_history(EditHistory())

    def _set_history(self, history: EditHistory) -> None:
        if history != self._history:
            self._history = history
            self.edits_changed.emit(history)

    def set_difference(self, on: bool) -> None:
        if bool(on) != self.difference:
            self.difference = bool(on)
            self.difference_changed.emit(self.difference)

    # --- notices ---------------------------------------------------------------------------
    def add_notice(self, text: str) -> None:
        """A notice shown with the next summary in the status line (e.g. "opened mask m.npy")."""
        self.notices += (text,)
        self.notices_changed.emit(self.notices)

    def take_notices(self) -> tuple[str, ...]:
        """The notices, now shown: the state forgets them."""
        notices, self.notices = self.notices, ()
        if notices:
            self.notices_changed.emit(())
        return notices

    # --- sessions --------------------------------------------------------------------------
    def snapshot(self) -> Snapshot:
        """What is on screen, as a session file holds it (plain data: no Qt, no copy of a trace)."""
        return Snapshot(self._inputs, self._history, self.difference, self.stage_name, self.head, self.query,
                        self.pinned, self.focus_head)  # fmt: skip

    def apply(self, snapshot: Snapshot) -> None:
        """Set every field of ``snapshot``, or none: one that is not a snapshot the state can hold
        raises TypeError / ValueError and leaves every field as it was, with no event. Its edits are
        its own (its inputs do not clear them). The events of the fields that changed follow once
        all are set: one request follows, not one per field."""
        snapshot.check()
        new, tokens = self._settled(snapshot.inputs, pads_given=True)
        problem = settings_problem(new)
        stage = snapshot.stage or self.stage_name
        focus = snapshot.focus_head if snapshot.focus_head is not None else \
            snapshot.head if snapshot.head != ALL_HEADS else self.focus_head  # fmt: skip
        # Everything is known: from here on nothing can fail, and the events come after the fields.
        old = self.snapshot()
        self._history, self.difference, self.pinned = snapshot.history, snapshot.difference, snapshot.pinned
        self.stage_name, self.head, self.query, self.focus_head = stage, snapshot.head, snapshot.query, focus
        if new != old.inputs:
            self._set(new, tokens, problem)
        if snapshot.history != old.history:
            self.edits_changed.emit(snapshot.history)
        for signal, before, now in ((self.difference_changed, old.difference, self.difference),
                                    (self.pinned_changed, old.pinned, self.pinned),
                                    (self.stage_changed, old.stage, self.stage_name),
                                    (self.head_changed, old.head, self.head),
                                    (self.focus_head_changed, old.focus_head, self.focus_head),
                                    (self.query_changed, old.query, self.query)):  # fmt: skip
            if now is not before and now != before:
                signal.emit(now)

    # --- what is shown ---------------------------------------------------------------------
    def show_trace(self, display: DisplayTrace) -> None:
        """Show ``display``; the stage, head, focused head and query follow it (each with its event,
        after ``trace_changed``: a view that redraws for the new run draws them then)."""
        before = (self.stage_name, self.head, self.focus_head, self.query)
        self.display = display
        self.inspector.set_cell(None)  # the cell explained was the old run's
        self._follow_model(display.trace)
        names = display.trace.names
        if self.stage_name not in names:  # e.g. 'masked' after the mask was turned off
            self.stage_name = _nearest_stage(self.stage_name, names)
        heads = max(s.heads for s in display.trace.stages)
        if self.head >= heads:
            self.head = ALL_HEADS
        self.focus_head = min(self.focus_head, heads - 1)
        if not 0 <= self.query < len(display.trace.query_tokens):
            self.query = default_query(display.trace.query_tokens)
        self.trace_changed.emit(display)
        after = (self.stage_name, self.head, self.focus_head, self.query)
        signals = (self.stage_changed, self.head_changed, self.focus_head_changed, self.query_changed)
        for signal, old, new in zip(signals, before, after, strict=True):
            if old != new:
                signal.emit(new)

    def inspect(self, head: int, row: int, col: int) -> None:
        """Explain the cell ``(head, row, col)`` of the stage on screen in the inspector."""
        shown = self.stepper.shown
        if shown is not None:
            self.inspector.set_cell(InspectedCell(shown.generation, shown.stage, head, row, col))

    def set_restore_point(self, snapshot: Snapshot | None) -> None:
        if snapshot is not self.restore_point:
            self.restore_point = snapshot
            self.restore_point_changed.emit(snapshot)

    def _follow_model(self, trace: AttentionTrace) -> None:
        """Take the model's facts, its tokens and the layer it really traced from its trace."""
        info = ModelInfo.from_trace(trace) if self._inputs.uses_model else None
        if info is not None:
            layer = trace.meta.get("layer", self._inputs.layer)
            if layer != self._inputs.layer:  # the deepest there is, shown instead (the window asks no more)
                self._inputs = dataclasses.replace(self._inputs, layer=layer)
                self.inputs_changed.emit(self._inputs)
            if trace.key_tokens != self._key_tokens:
                self._key_tokens = trace.key_tokens
                self.key_tokens_changed.emit(trace.key_tokens)
        if info != self.model_info or info is not None:
            self.model_info = info
            self.model_info_changed.emit(info)

    def add_stage_image(self, generation: int, image: StageImage) -> None:
        if self.display is not None and self.display.generation == generation:
            self.display.images[image.name] = image
            self.stage_image_added.emit(image.name)

    def pin(self, display: DisplayTrace | None = None) -> bool:
        """Keep ``display`` (the shown run by default) beside every later run; False when there is none."""
        display = display if display is not None else self.display
        if display is None:
            return False
        if display is not self.pinned:
            self.pinned = display
            self.pinned_changed.emit(display)
        return True

    def unpin(self) -> None:
        if self.pinned is not None:
            self.pinned = None
            self.pinned_changed.emit(None)

    def set_stage(self, name: str) -> None:
        if name != self.stage_name:
            self.stage_name = name
            self.stage_changed.emit(name)

    def step(self, offset: int) -> None:
        """Move ``offset`` stages along the shown trace, stopping at either end."""
        if self.display is None:
            return
        names = self.display.trace.names
        at = names.index(self.stage_name) if self.stage_name in names else 0
        self.set_stage(names[max(0, min(len(names) - 1, at + offset))])

    def step_to_end(self, last: bool) -> None:
        if self.display is not None:
            names = self.display.trace.names
            self.set_stage(names[-1] if last else names[0])

    def set_head(self, head: int) -> None:
        if head != self.head:
            self.head = head
            self.head_changed.emit(head)
        if head != ALL_HEADS:
            self.set_focus_head(head)

    def set_focus_head(self, head: int) -> None:
        if head != self.focus_head:
            self.focus_head = head
            self.focus_head_changed.emit(head)

    def set_fit_colours(self, fit: bool | str) -> None:
        if fit != self.fit_colours or type(fit) is not type(self.fit_colours):
            self.fit_colours = fit
            self.colours_changed.emit(fit)

    def set_query(self, row: int) -> None:
        if row != self.query:
            self.query = row
            self.query_changed.emit(row)


def is_special_token(token: str) -> bool:
    """A tokenizer's marker rather than a word: [CLS], [SEP], [PAD], <s>, </s>, <|endoftext|>."""
    return bool(SPECIAL_TOKEN.fullmatch(token))


def default_query(tokens: tuple[str, ...]) -> int:
    """The query to explain first: the last one, which sees every key under any mask, unless it
    is a special token (BERT's closing [SEP]); then the last real word before it."""
    words = [i for i, token in enumerate(tokens) if not is_special_token(token)]
    return words[-1] if words else len(tokens) - 1


def _nearest_stage(wanted: str, names: tuple[str, ...]) -> str:
    """The stage to show when ``wanted`` vanished: the next one in canonical order, else the last."""
    at = STAGE_ORDER.index(wanted) if wanted in STAGE_ORDER else len(STAGE_ORDER)
    later = [n for n in names if n in STAGE_ORDER and STAGE_ORDER.index(n) > at]
    return later[0] if later else names[-1]
