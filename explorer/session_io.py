"""Sessions (models/session.py) to and from what the window shows: :class:`~explorer.state.Inputs`
plus the stage, head and focused query.

What the window cannot show yet (embeddings and weights files, a painted custom mask, edits, a
pinned run, --d-out, --bias, …) is listed by :func:`inputs_from_session` so that the caller can
say so, rather than silently showing something else.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from models.config import InputError
from models.session import Run, Session, load_session, save_session

from .state import ALL_HEADS, NO_QUERY, Inputs

# session option -> Inputs field, for options that carry over as they are
_PLAIN = {"--sentence": "sentence", "--heads": "heads", "--d-model": "d_model", "--d-k": "d_k", "--d-v": "d_v",
          "--score": "score", "--temperature": "temperature", "--seed": "seed", "--layer": "layer"}  # fmt: skip
_SHOWABLE_MASKS = ("none", "causal", "padding")


@dataclass(frozen=True)
class WindowSession:
    inputs: Inputs
    stage: str | None
    head: int  # 0-based, ALL_HEADS (-1) for all
    query: int  # 0-based, NO_QUERY (-1) for none
    not_applied: tuple[str, ...]  # what the session holds that the window does not show yet


def inputs_from_session(session: Session, base: Inputs | None = None) -> WindowSession:
    """The window's inputs for ``session`` (``base`` for anything the session does not set)."""
    run = session.run
    options = dict(run.options)
    changes, left = {}, []
    for option, name in _PLAIN.items():
        if option in options:
            changes[name] = options.pop(option)
    if "--cross-sentence" in options:
        changes |= {"cross_enabled": True, "cross_sentence": options.pop("--cross-sentence")}
    if "--pe" in options:
        changes["pe"] = options.pop("--pe") == "sinusoidal"
    if "--pad-positions" in options:
        changes["pad_positions"] = tuple(options.pop("--pad-positions"))
    mask = options.pop("--mask", None)
    if "--model" in options:
        changes["model"] = options.pop("--model")
        if mask is not None:
            changes["model_mask"] = mask
        changes.setdefault("layer", 0)
    elif mask in _SHOWABLE_MASKS:
        changes["mask"] = mask
    elif mask is not None:
        left.append(f"--mask {mask}")
    left += [f"{o} {v}" for o, v in options.items()]
    left += [f"the {name.replace('weights/', 'weights ')} array" for name in run.arrays]
    if session.edits:
        left.append(f"{len(session.edits)} edit(s)")
    if session.pinned is not None:
        left.append("the pinned run")
    inputs = dataclasses.replace(base or Inputs(), **changes)
    return WindowSession(inputs, session.stage, session.head, session.query, tuple(left))


def open_window_session(path: str, base: Inputs | None = None) -> WindowSession:
    """Read ``path``; one-line :class:`InputError` when it cannot be shown."""
    return inputs_from_session(load_session(path), base)


def session_from_inputs(inputs: Inputs, stage: str | None = None, head: int = ALL_HEADS,
                        query: int = NO_QUERY) -> Session:  # fmt: skip
    """The session of what the window shows: options as ``main.py export`` takes them."""
    if inputs.uses_model:
        options = {"--model": inputs.model, "--layer": inputs.layer, "--sentence": inputs.sentence}
        if inputs.model_mask in _SHOWABLE_MASKS:
            options["--mask"] = inputs.model_mask
    else:
        options = {"--sentence": inputs.sentence, "--heads": inputs.heads, "--d-model": inputs.d_model,
                   "--mask": inputs.mask, "--score": inputs.score, "--pe": "sinusoidal" if inputs.pe else "none",
                   "--temperature": inputs.temperature, "--seed": inputs.seed}  # fmt: skip
        options |= {o: v for o, v in (("--d-k", inputs.d_k), ("--d-v", inputs.d_v)) if v}
        if inputs.cross_enabled:
            options["--cross-sentence"] = inputs.cross_sentence
    pads_apply = inputs.model_mask != "none" if inputs.uses_model else inputs.mask == "padding"
    if inputs.pad_positions and pads_apply:
        options["--pad-positions"] = list(inputs.pad_positions)
    return Session(Run(options), stage, head, query)


def save_window_session(path: str, inputs: Inputs, stage: str | None = None, head: int = ALL_HEADS,
                        query: int = NO_QUERY) -> str | None:  # fmt: skip
    """Write the session; the one-line reason when it cannot be written, else None."""
    try:
        save_session(path, session_from_inputs(inputs, stage, head, query))
    except InputError as exc:
        return str(exc)
    return None


def session_arguments(args, base: Inputs) -> Inputs:
    """``main.py --session FILE``: the session's inputs as the base the other options apply to;
    its stage and head unless --stage / --head are given. Raises the app's UsageError (one line)."""
    import sys

    from .app import UsageError

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
        args.head = shown.head + 1  # --head counts from 1
    left = list(shown.not_applied) + ([f"the focused query {shown.query}"] if shown.query != NO_QUERY else [])
    if left:
        print(f"note: the window does not show yet: {', '.join(left)}", file=sys.stderr)
    return shown.inputs


def save_shown_session(path: str, state) -> int:
    """After a screenshot: write the session of what ``state`` (ExplorerState) shows; exit status."""
    import sys

    problem = save_window_session(path, state.inputs, state.stage_name, state.head, state.query)
    if problem:
        print(f"error: {problem}", file=sys.stderr)
        return 2
    print(f"wrote {path}")
    return 0
