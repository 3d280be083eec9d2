"""Sessions (models/session.py) to and from what the window shows: :class:`~explorer.state.Inputs`,
the edits and the Difference toggle, the pinned run, the stage, head and focused query. Qt-free.

A run's files become arrays inside the session (read when it is saved); on opening, the arrays
stay in memory (``Inputs.held``, the painted mask): nothing is written to the user's disk. What a
session holds that the window cannot show (``--device``, ``--max-tokens``) is listed in
``not_applied`` so that the caller can say so, rather than silently showing something else.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import numpy as np

from models.config import InputError
from models.edits import Edit
from models.pretrained.registry import is_encoder_decoder
from models.runspec import load_matrix
from models.session import Run, Session, load_session, save_session

from .held_arrays import HeldArrays
from .pretrained_runner import DEFAULT_MASK
from .state import ALL_HEADS, NO_QUERY, Inputs

_SHOWABLE_MASKS = ("none", "causal", "padding")
_EXPORT_ONLY = ("--device", "--max-tokens")  # the window always computes on its own device, unlimited


@dataclass(frozen=True)
class WindowRun:
    """One run as the window shows it: its inputs, edits and whether edited − original is shown."""

    inputs: Inputs
    edits: tuple[Edit, ...] = ()
    difference: bool = False


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


# --- session -> window ----------------------------------------------------------------------


def inputs_from_run(run: Run, base: Inputs | None = None) -> tuple[Inputs, tuple[str, ...]]:
    """The window's inputs for ``run``, with what they cannot show. Every setting the run's kind
    (toy or model) uses comes from the run, defaults filled in as ``main.py export`` fills them;
    ``base`` keeps only the other kind's settings (the toy sizes behind a model, …)."""
    base = base or Inputs()
    args = run.parsed()
    left = tuple(f"{o} {run.options[o]}" for o in _EXPORT_ONLY if o in run.options)
    cleared = dict(embeddings_file="", cross_embeddings_file="", weights_file="", mask_file="", held=HeldArrays(),
                   labels=(), cross_labels=(), painted_mask=())  # fmt: skip
    if run.model is not None:
        target = {} if args.cross_sentence is None else {"cross_sentence": args.cross_sentence}  # encoder-decoder
        return dataclasses.replace(base, model=run.model, layer=args.layer, sentence=args.sentence or "",
                                   model_mask=args.mask or DEFAULT_MASK, pad_positions=tuple(args.pad_positions),
                                   block=args.block or "cross", **target, exact=True, **cleared), left  # fmt: skip
    arrays = dict(run.arrays)
    mask, painted = args.mask or "none", ()
    if mask == "custom":
        if "mask" not in arrays:
            raise InputError("--mask custom needs its mask array")
        painted = tuple(tuple(bool(v) for v in row) for row in np.asarray(arrays.pop("mask"), bool))
    arrays.pop("mask", None)  # a mask array without --mask custom hides nothing
    cross = args.cross_sentence is not None or "cross_embeddings" in arrays
    inputs = dataclasses.replace(
        base, model="", sentence=base.sentence if args.sentence is None else args.sentence,
        cross_enabled=cross, cross_sentence=args.cross_sentence or base.cross_sentence,
        heads=args.heads, d_model=args.d_model, d_k=args.d_k, d_v=args.d_v, d_out=args.d_out, mask=mask,
        pad_positions=tuple(args.pad_positions), score=args.score, pe=args.pe == "sinusoidal",
        temperature=args.temperature, seed=args.seed, bias=args.bias, labels=tuple(args.labels or ()),
        cross_labels=tuple(args.cross_labels or ()), painted_mask=painted, held=HeldArrays(arrays),
        embeddings_file="", cross_embeddings_file="", weights_file="", mask_file="",
    )  # fmt: skip
    return inputs, left


def inputs_from_session(session: Session, base: Inputs | None = None) -> WindowSession:
    """What the window shows for ``session`` (``base`` for the settings its runs do not use)."""
    inputs, left = inputs_from_run(session.run, base)
    pinned = None
    if session.pinned is not None:
        pinned_inputs, pinned_left = inputs_from_run(session.pinned, base)
        pinned = WindowRun(pinned_inputs, session.pinned_edits, session.pinned_difference)
        left += tuple(f"pinned {item}" for item in pinned_left)
    return WindowSession(inputs, session.stage, session.head, session.query, left, session.edits,
                         session.difference, pinned, session.atlas)  # fmt: skip


def open_window_session(path: str, base: Inputs | None = None) -> WindowSession:
    """Read ``path``; one-line :class:`InputError` when it cannot be shown."""
    session = load_session(path)
    try:
        return inputs_from_session(session, base)
    except InputError as exc:
        raise InputError(f"session {path}: {exc}") from None


# --- window -> session ----------------------------------------------------------------------


def run_from_inputs(inputs: Inputs) -> Run:
    """The run of ``inputs``: options as ``main.py export`` takes them, files read into arrays."""
    if inputs.uses_model:
        options = {"--model": inputs.model, "--layer": inputs.layer, "--sentence": inputs.sentence}
        if inputs.model_mask in _SHOWABLE_MASKS:
            options["--mask"] = inputs.model_mask
        if inputs.pad_positions and inputs.model_mask != "none":
            options["--pad-positions"] = list(inputs.pad_positions)
        if is_encoder_decoder(inputs.model):  # the target and the block, as `export` takes them
            options |= {"--cross-sentence": inputs.cross_sentence, "--block": inputs.block}
        return Run(options)
    options, arrays = {}, {}
    embeddings = _matrix(inputs.embeddings_file, inputs.held, "embeddings")
    if embeddings is None:
        options["--sentence"] = inputs.sentence
    else:
        arrays["embeddings"] = embeddings
    options |= {"--heads": inputs.heads, "--d-model": inputs.d_model, "--mask": inputs.mask, "--score": inputs.score,
                "--pe": "sinusoidal" if inputs.pe else "none", "--temperature": inputs.temperature,
                "--seed": inputs.seed}  # fmt: skip
    options |= {o: v for o, v in (("--d-k", inputs.d_k), ("--d-v", inputs.d_v), ("--d-out", inputs.d_out)) if v}
    if inputs.bias:
        options["--bias"] = True
    if inputs.labels:
        options["--labels"] = list(inputs.labels)
    if inputs.cross_enabled:
        cross = _matrix(inputs.cross_embeddings_file, inputs.held, "cross_embeddings")
        if cross is None:
            options["--cross-sentence"] = inputs.cross_sentence
        else:
            arrays["cross_embeddings"] = cross
            if inputs.cross_labels:
                options["--cross-labels"] = list(inputs.cross_labels)
    if inputs.pad_positions and inputs.mask == "padding":
        options["--pad-positions"] = list(inputs.pad_positions)
    arrays |= {f"weights/{k}": a for k, a in (_weights(inputs) or {}).items()}
    if inputs.mask == "custom":
        mask = load_matrix(inputs.mask_file, "mask") if inputs.mask_file else inputs.request().custom_mask
        arrays["mask"] = np.asarray(mask)
    return Run(options, arrays)


def _matrix(path: str, held: HeldArrays, name: str) -> np.ndarray | None:
    if path:
        return load_matrix(path, name.replace("_", " "))
    return held.get(name)


def _weights(inputs: Inputs) -> dict[str, np.ndarray] | None:
    if not inputs.weights_file:
        return inputs.held.weights()
    from models.weights import read_weights_file

    return read_weights_file(inputs.weights_file)  # the very reader export uses


def session_from_inputs(inputs: Inputs, stage: str | None = None, head: int = ALL_HEADS,
                        query: int = NO_QUERY) -> Session:  # fmt: skip
    """The session of what the window shows (no edits, nothing pinned)."""
    return Session(run_from_inputs(inputs), stage, head, query)


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

    from .usage import UsageError

    args.window_session = None
    if args.save_session and not args.screenshot:
        raise UsageError("--save-session needs --screenshot (the window saves sessions from its File menu)")
    if not args.session:
        return base
    try:
        shown = open_window_session(args.session, base)
    except InputError as exc:
        raise UsageError(str(exc)) from None
    from models.trace import STAGE_ORDER

    if shown.stage is not None and shown.stage not in STAGE_ORDER:
        raise UsageError(f"session {args.session}: unknown stage {shown.stage!r}")
    if args.stage is None:
        args.stage = shown.stage
    if args.head is None and shown.head != ALL_HEADS:
        args.head = shown.head  # --head counts from 0, as the session
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
