"""Sessions (models/files/session.py) to and from what the window shows: a snapshot of the state
(explorer/snapshot.py: the inputs, the edits and the Difference toggle, the pinned run, the stage,
head and focused query). Qt-free.

A session holds RunSpecs (models/runspec.py): the window saves the RunSpecs of the runs it shows
(each display carries the one that made it), and opening one turns each RunSpec back into the
window's inputs (:func:`inputs_from_spec`). The arrays stay in memory (``Inputs.held``, the painted
mask): nothing is written to the user's disk. What a session holds that the window cannot show
(``--device``, ``--max-tokens``) is listed in ``not_applied`` so that the caller can say so, rather
than silently showing something else.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from explorer.inputs import own_values, passed_rows
from explorer.run import DisplayTrace
from explorer.snapshot import EditHistory, Snapshot
from explorer.state import ALL_HEADS, NO_QUERY, Inputs
from models.config import InputError
from models.engine.held_arrays import HeldArrays
from models.files.session import Session, load_session, save_session
from models.runspec import DEFAULT_MASK, RunSpec
from models.runspec import VALUES as RUNSPEC_ROWS

if TYPE_CHECKING:  # models.engine.edits imports torch: reading and writing sessions needs none
    from models.engine.edits import Edit

@dataclass(frozen=True)
class WindowRun:
    """One run as the window shows it: its inputs, edits and whether edited − original is shown."""

    inputs: Inputs
    edits: tuple[Edit, ...] = ()
    difference: bool = False

    def snapshot(self, base: Snapshot) -> Snapshot:
        """``base`` (the state's snapshot) with this run's inputs, edits and toggle; nothing pinned."""
        return base.replace(inputs=self.inputs, history=EditHistory.of(self.edits), difference=self.difference,
                            pinned=None)  # fmt: skip


@dataclass(frozen=True)
class WindowSession:
    inputs: Inputs
    stage: str | None
    head: int  # 0-based, ALL_HEADS (-1) for all
    query: int  # 0-based, NO_QUERY (-1) for none
    not_applied: tuple[str, ...]  # what the session holds that the window does not show
    edits: tuple[Edit, ...] = ()
    difference: bool = False
    pinned: WindowRun | None = None  # computed first and pinned, then this session's run is shown
    atlas: dict | None = None  # the head atlas's corpus {"corpus", "sha256"} (issue 22)

    def snapshot(self, pinned: DisplayTrace | None = None) -> Snapshot:
        """The state this session shows, ``pinned`` once its pinned run was computed."""
        return Snapshot(self.inputs, EditHistory.of(self.edits), self.difference, self.stage, self.head, self.query,
                        pinned)  # fmt: skip


# --- session -> window ----------------------------------------------------------------------


def inputs_from_spec(spec: RunSpec, base: Inputs | None = None) -> tuple[Inputs, tuple[str, ...]]:
    """The window's inputs for ``spec``, with what they cannot show. Every setting the spec's kind
    (toy or model) uses comes from the spec, defaults filled in as ``main.py export`` fills them;
    ``base`` keeps only the other kind's settings (the toy sizes behind a model, …). The rows the
    form holds as they are come back by the one list (explorer/inputs.py: ``passed_rows``)."""
    base = base or Inputs()
    left = tuple(f"{row.option} {getattr(spec, row.dest)}" for row in not_shown(type(base))
                 if getattr(spec, row.dest) != row.default)  # fmt: skip
    cleared = dict(embeddings_file="", cross_embeddings_file="", weights_file="", mask_file="", held=HeldArrays(),
                   labels=(), cross_labels=(), painted_mask=())  # fmt: skip
    kind = "model" if spec.uses_model else "toy"
    form_default = type(base)()
    passed = {row.dest: form_default_if_none(getattr(spec, row.dest), getattr(form_default, row.dest, None))
              for row in passed_rows(type(base), kind)}  # fmt: skip
    if spec.uses_model:
        model = spec.model
        if spec.step is not None:  # one training step, opened as its own folder (as `main.py --step`)
            from models.pretrained.registry import resolve_model
            from models.pretrained.steps import step_folder

            model = str(step_folder(resolve_model(model), spec.step).resolve())
        target = {} if spec.cross_sentence is None else {"cross_sentence": spec.cross_sentence}  # encoder-decoder
        own = dict(model=model, sentence=spec.sentence or "", mask=spec.mask or DEFAULT_MASK,
                   pad_positions=tuple(spec.pad_positions), **target)  # mask: the model's, model_mask
        return dataclasses.replace(base, **passed, **own_values(type(base), own, attributes=True), exact=True,
                                   **cleared), left  # fmt: skip
    arrays = dict(spec.arrays)
    mask, painted = spec.mask or "none", ()
    if mask == "custom":
        if "mask" not in arrays:
            raise InputError("--mask custom needs its mask array")
        painted = tuple(tuple(bool(v) for v in row) for row in np.asarray(arrays.pop("mask"), bool))
    arrays.pop("mask", None)  # a mask array without --mask custom hides nothing
    cross = spec.cross_sentence is not None or "cross_embeddings" in arrays
    own = dict(model="", sentence=base.sentence if spec.sentence is None else spec.sentence,
               cross_sentence=spec.cross_sentence or base.cross_sentence, mask=mask,
               pad_positions=tuple(spec.pad_positions), pe=spec.pe == "sinusoidal", labels=tuple(spec.labels or ()),
               cross_labels=tuple(spec.cross_labels or ()))  # fmt: skip
    inputs = dataclasses.replace(
        base, **passed, **own_values(type(base), own), cross_enabled=cross, painted_mask=painted,
        held=HeldArrays(arrays), embeddings_file="", cross_embeddings_file="", weights_file="", mask_file="",
    )  # fmt: skip
    return inputs, left


def form_default_if_none(value, default):
    """A RunSpec's "not given" (None) is the form's default where the form has no None (block: cross)."""
    return default if value is None else value


def not_shown(form: type) -> tuple:
    """The RunSpec's rows the window neither offers nor turns into something it shows (``--device``,
    ``--max-tokens``; ``--step`` opens the step's folder)."""
    own = {dest for dest, _ in form.own_shape}
    return tuple(row for row in RUNSPEC_ROWS if row.dest not in form.table and row.dest not in own
                 and row.dest != "step")  # fmt: skip


def inputs_from_session(session: Session, base: Inputs | None = None) -> WindowSession:
    """What the window shows for ``session`` (``base`` for the settings its runs do not use)."""
    run = session.run
    inputs, left = inputs_from_spec(run, base)
    pinned = None
    if session.pinned is not None:
        pinned_inputs, pinned_left = inputs_from_spec(session.pinned, base)
        pinned = WindowRun(pinned_inputs, session.pinned.edits, session.pinned.difference)
        left += tuple(f"pinned {item}" for item in pinned_left)
    return WindowSession(inputs, session.stage, session.head, session.query, left, run.edits,
                         run.difference, pinned, session.atlas)  # fmt: skip


def open_window_session(path: str, base: Inputs | None = None) -> WindowSession:
    """Read ``path``; one-line :class:`InputError` when it cannot be shown (out of memory too:
    issue 36, a session with big arrays ended the window on a MemoryError traceback)."""
    from models.memory import OUT_OF_MEMORY, is_out_of_memory

    try:
        session = load_session(path)
    except (MemoryError, RuntimeError) as exc:
        if not is_out_of_memory(exc):
            raise
        raise InputError(f"session {path}: {OUT_OF_MEMORY}") from None
    try:
        return inputs_from_session(session, base)
    except InputError as exc:
        raise InputError(f"session {path}: {exc}") from None


# --- window -> session ----------------------------------------------------------------------


def spec_to_save(spec: RunSpec) -> RunSpec:
    """``spec`` as a session stores it: a model's target and block only for an encoder-decoder (the
    window's inputs keep them for when one is chosen; a shown run's RunSpec is already so)."""
    if spec.uses_model and spec.cross_sentence is not None:
        from models.pretrained.registry import is_encoder_decoder

        if not is_encoder_decoder(spec.model):
            return spec.replace(cross_sentence=None, block=None)
    return spec


def session_of(snapshot: Snapshot, shown: RunSpec | None = None, atlas: dict | None = None) -> Session:
    """The session of a state's ``snapshot``: the RunSpec that made the ``shown`` run (what is on screen,
    not what was asked since; before the first result: the snapshot's own) and the pinned run's."""
    if not isinstance(shown, RunSpec):
        shown = snapshot.inputs.to_runspec().with_edits(snapshot.edits, snapshot.difference)
    pinned = snapshot.pinned.request if snapshot.pinned is not None else None
    pinned = spec_to_save(pinned) if isinstance(pinned, RunSpec) else None
    return Session(spec_to_save(shown), snapshot.stage, snapshot.head, snapshot.query, pinned, atlas)


def session_from_inputs(inputs: Inputs, stage: str | None = None, head: int = ALL_HEADS,
                        query: int = NO_QUERY) -> Session:  # fmt: skip
    """The session of ``inputs`` (no edits, nothing pinned); InputError when a file cannot be read."""
    return Session(spec_to_save(inputs.to_runspec()), stage, head, query)


def save_window_session(path: str, inputs: Inputs, stage: str | None = None, head: int = ALL_HEADS,
                        query: int = NO_QUERY) -> str | None:  # fmt: skip
    """Write the session; the one-line reason when it cannot be written, else None."""
    try:
        save_session(path, session_from_inputs(inputs, stage, head, query))
    except InputError as exc:
        return str(exc)
    return None


# --- the command line -----------------------------------------------------------------------


def session_arguments(args, base: Inputs) -> Inputs:
    """``main.py --session FILE``: the session's inputs as the base the other options apply to;
    its stage and head unless --stage / --head are given; the whole :class:`WindowSession` in
    ``args.window_session`` (the window restores its edits, pinned run and query). Raises the
    app's UsageError (one line)."""
    import sys

    from explorer.usage import UsageError

    args.window_session = None
    if args.save_session and not args.screenshot:
        raise UsageError("--save-session needs --screenshot (the window saves sessions from its File menu)")
    if not args.session:
        return base
    try:
        shown = open_window_session(args.session, base)
    except InputError as exc:
        raise UsageError(str(exc)) from None
    from models.engine.trace import STAGE_ORDER

    if shown.stage is not None and shown.stage not in STAGE_ORDER:
        raise UsageError(f"session {args.session}: unknown stage {shown.stage!r}")
    if args.stage is None:
        args.stage = shown.stage
    if args.head is None and shown.head != ALL_HEADS:
        args.head = shown.head  # --head counts from 0, as the session
        args.head_from = f"session {args.session}'s view head {shown.head}"  # named so in a refusal
    if shown.not_applied:
        print(f"note: the window does not show: {', '.join(shown.not_applied)}", file=sys.stderr)
    args.window_session = shown
    return shown.inputs


def on_top(shown: WindowSession, inputs: Inputs, stage: str | None, head: int) -> WindowSession:
    """``shown`` with the command line's options applied on top (``inputs``, ``stage``, ``head``);
    its edits only when the options left its inputs as they were (else they edit another run)."""
    import sys

    edits = shown.edits
    if edits and inputs != shown.inputs:
        print("note: the session's edits are not applied: options given beside --session change its run",
              file=sys.stderr)  # fmt: skip
        edits = ()
    return dataclasses.replace(shown, inputs=inputs, stage=stage, head=head, edits=edits, not_applied=())


def save_shown_session(path: str, window) -> int:
    """After a screenshot: write the session of what ``window`` shows; exit status."""
    import sys

    try:
        save_session(path, window.sessions.session())
    except InputError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(f"wrote {path}")
    return 0
