"""The window's command line: its options (the one table, models/fields.py, then the window's own),
and the window's inputs they give, refused as ``main.py export`` refuses them (one line, exit 2:
nothing substituted, clamped or dropped). Nothing loads here; no torch runs.
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
from pathlib import Path

from explorer.files.persistence import COLOUR_CHOICES
from explorer.files.view_shots import VIEWS
from explorer.state import Inputs, settings_problem
from explorer.usage import UsageError
from models.command_fields import NEW_TOKENS
from models.config import InputError
from models.engine.trace import STAGE_ORDER
from models.fields import BY_DEST, TOY_ONLY, Field, OneLineParser, add_arguments, check_text
from models.limits import RANGES, in_bounds, said
from models.runspec import FIELDS, check_applicable, check_command, check_ranges, given_values

PROMPT = Field("generate", "generate", "model", "with --model: open the Generate window on this prompt (with "
               "--screenshot: save it)", metavar="PROMPT", text=True)  # fmt: skip


def build_parser(commands: str = "") -> argparse.ArgumentParser:
    """The window's options: every input option of ``main.py export`` (the one table, models/fields.py),
    then what only the window has (stage, head, colours, screenshot, ...); ``commands``: the list of
    main.py's commands, shown at the end of --help. A usage mistake is one ``error:`` line."""
    p = OneLineParser(prog="main.py", description="Open the Attention Explorer window, or run one of the "
                      "commands below.", epilog=commands or None,
                      formatter_class=argparse.RawDescriptionHelpFormatter)  # fmt: skip
    # Not given = None: the window then keeps what was saved last time (or the defaults).
    add_arguments(p, FIELDS, unset=True, command="window")
    view = p.add_argument_group("window")
    view.add_argument("--stage", choices=STAGE_ORDER, help="the stage to show first (default: weights)")
    view.add_argument("--head", type=int, metavar="N",
                      help="show head N (0-based: the first head is 0, as heads.csv and explain) instead of all heads")
    view.add_argument("--colours", choices=COLOUR_CHOICES,
                      help="the weights' colour scale: auto (default: log10 once rows hold more than 256 keys, "
                           "else 0 to 1), fixed 0 to 1, fit 0 to their largest value, or log (log10)")
    view.add_argument("--timeline", action="store_true",
                      help="open the training timeline (with --screenshot: save it alone)")
    view.add_argument("--window-screenshot", metavar="OUT.png",
                      help="with --timeline --screenshot: also save the main window, at the timeline's step")
    view.add_argument("--screenshot", metavar="OUT.png", help="compute, save a PNG of the window and exit")
    view.add_argument("--view", choices=VIEWS, help="with --screenshot: the view to save (default: stepper, the "
                      "main window); model, metrics and rollout need --model or --attention")
    view.add_argument("--cell", metavar="H,R,C", help="with --view inspector: the cell explained (0-based)")
    view.add_argument("--query", type=int, metavar="I", help="the query row focused on (0-based)")
    view.add_argument("--attention", metavar="FILE",
                      help="open attention computed anywhere (.npy, .npz, or an 'export --all-layers' folder)")
    view.add_argument("--atlas", metavar="DIR", help="open a head atlas folder ('main.py atlas --out DIR')")
    view.add_argument("--atlas-compare", metavar="DIR2", help="with --atlas: show the difference DIR − DIR2")
    view.add_argument("--settings", metavar="FILE.ini", help="read and write settings in this INI file")
    view.add_argument("--session", metavar="FILE", help="open a saved session (other options given apply on top)")
    view.add_argument("--save-session", metavar="FILE", help="with --screenshot: also save the session it shows")
    return add_arguments(p, (PROMPT, NEW_TOKENS), unset=True)  # the Generate window: generate's rows and checks


FILES = {"embeddings": "embeddings_file", "cross_embeddings": "cross_embeddings_file", "weights": "weights_file",
         "mask_file": "mask_file"}  # fmt: skip


def model_from_arg(text: str, step: str | None = None) -> str:
    """What to store for ``--model``: a folder as an absolute path, a name as given; UsageError
    (one line) when there is no such model or its config.json is unusable. Nothing loads here."""
    from models.config import InputError
    from models.pretrained.registry import read_config, resolve_model

    try:
        folder = resolve_model(text)
        if step is not None:  # issue 20: one training step of the model, opened as its own folder
            from models.pretrained.steps import step_folder

            folder = step_folder(folder, step)
        read_config(folder)
    except InputError as exc:
        raise UsageError(str(exc)) from None
    if step is not None:
        return str(folder.resolve())
    given = Path(text.strip()).expanduser()
    return str(given.resolve()) if given.is_dir() else text.strip()


def is_encoder_decoder(model: str) -> bool:
    from models.pretrained.registry import is_encoder_decoder as check

    return check(model)


def inputs_from_args(args: argparse.Namespace, base: Inputs) -> Inputs:
    """``base`` with every option given on the command line applied; UsageError when invalid:
    what ``export`` refuses, with its line (issue 36: nothing substituted, clamped or dropped)."""
    try:
        check_text(args)  # a sentence that is not UTF-8 (a saved session could not hold it)
    except InputError as exc:
        raise UsageError(str(exc)) from None
    if args.model is not None:
        encdec = is_encoder_decoder(args.model)  # its --cross-sentence is the target, not the toy's queries
        given = [f.dest for f in FIELDS if getattr(args, f.dest, None) not in (None, False)
                 and not (encdec and f.dest == "cross_sentence")]  # fmt: skip
        try:  # the one check export and sessions make: an option the model ignores is refused
            check_applicable(given, with_model=True)
        except InputError as exc:
            raise UsageError(str(exc)) from None
        if args.cross_sentence is not None and not encdec:  # would be silently ignored by this model
            raise UsageError("--cross-sentence applies with --model only to encoder-decoder models (t5, mt5, bart, "
                             "marian): their target; leave it out")  # fmt: skip
        base = dataclasses.replace(base, model=model_from_arg(args.model, args.step), pad_positions=())
        if encdec and args.cross_sentence is None and base.cross_sentence == type(base)().cross_sentence:
            # the toy's placeholder second sentence is never a model's target: none given, none used
            # (the window asks for it, a screenshot is refused as `export` is)
            base = dataclasses.replace(base, cross_sentence="")
    elif args.step is not None:
        raise UsageError("--step needs --model (a model with training checkpoints)")
    elif base.uses_model and (toy := [BY_DEST[d].option for d in TOY_ONLY
                                      if getattr(args, d, None) not in (None, False)]):  # fmt: skip
        # the model restored from the last session does not take the toy's options given now: the toy does
        print(f"note: {', '.join(toy)} {'is' if len(toy) == 1 else 'are'} the toy's: starting on the toy, not the "
              f"last session's model {base.model} (--model chooses one)", file=sys.stderr)  # fmt: skip
        default = type(base)()
        base = dataclasses.replace(base, model=default.model, layer=default.layer, block=default.block,
                                   model_mask=default.model_mask, pad_positions=())  # fmt: skip
    if args.block is not None:
        if not base.uses_model or not is_encoder_decoder(base.model):
            raise UsageError("--block needs an encoder-decoder --model (t5, mt5, bart, marian)")
        base = dataclasses.replace(base, block=args.block)
    if args.layer is not None:
        if not base.uses_model:
            raise UsageError("--layer needs --model (the toy model has a single layer)")
        if not in_bounds("layer", args.layer):
            raise UsageError(f"--layer must be {RANGES['layer'][0]} or more (the first layer is 0)")
        base = dataclasses.replace(base, layer=args.layer)
    # Every other option the form holds as it is (a new row of FIELDS included), given or not.
    special = {"model", "layer", "block", "cross_sentence", "pe", "pad_positions"}
    changes = {name: value for name, value in given_values(args, FIELDS).items()
               if name in type(base).table and name not in special}  # fmt: skip
    if base.uses_model and "mask" in changes:  # --mask replaces the model's own, to compare
        base = dataclasses.replace(base, model_mask=changes.pop("mask"))
    if getattr(args, "text_file", None):  # a long text as the sentence
        from models.io.text_file import read_text_file

        if args.sentence is not None:
            raise UsageError("give --sentence or --text-file, not both")
        try:
            changes["sentence"] = read_text_file(args.text_file)
        except InputError as exc:
            raise UsageError(str(exc)) from None
    if args.cross_sentence is not None:
        changes.update(cross_enabled=True, cross_sentence=args.cross_sentence)
    if args.pe is not None:
        changes["pe"] = args.pe == "sinusoidal"
    for option, field in FILES.items():  # read below with export's reader (its checks: when the request is built)
        if getattr(args, option) is not None:
            changes[field] = str(Path(getattr(args, option)).expanduser().resolve())
    if args.cross_embeddings is not None:
        changes["cross_enabled"] = True
    try:  # --device, --max-tokens, --all-layers: the headless commands' only
        check_command(args, "window")
    except InputError as exc:
        raise UsageError(str(exc)) from None
    if args.pad_positions is not None:
        changes["pad_positions"] = args.pad_positions
    for name in ("d_k", "d_v"):  # 0 would mean "auto" in the window; on the command line it is an error
        if name in changes and not in_bounds(name, changes[name]):
            raise UsageError(f"--{name.replace('_', '-')} must be {said(name)}")
    try:  # what the window's boxes show (models/fields.py: Field.shown): refused, never clamped
        check_ranges(args, window=True)
    except InputError as exc:
        raise UsageError(str(exc)) from None
    if base.uses_model and (args.layer is not None or args.pad_positions is not None):
        changes["exact"] = True  # used as given (as export uses them), refused when the model has no such one
    inputs = dataclasses.replace(base, **changes)
    try:  # the files are read once, now: the window's requests hold their arrays
        inputs = inputs.with_files_read(tuple(f for f in FILES.values() if f in changes))
    except InputError as exc:
        raise UsageError(str(exc)) from None
    message, _ = settings_problem(inputs)
    if message:
        raise UsageError(message)
    check_as_export(inputs, args.pad_positions is not None)
    if args.head is not None and args.head < 0:
        raise UsageError(f"{head_name(args)} must be 0 or more (the first head is 0)")
    if args.head is not None and not inputs.uses_model and args.head >= inputs.heads:
        # (a model's head count is known once it has loaded: the screenshot checks it then)
        raise UsageError(head_out_of_range(head_name(args), inputs.heads))
    return inputs


def head_name(args: argparse.Namespace) -> str:
    """Where the head shown came from, for a refusal: ``--head``, or the session's field that gave it
    (``--session``'s head was refused as "--head must be …", an option not given: issue 50)."""
    return getattr(args, "head_from", None) or "--head"


def head_out_of_range(name: str, heads: int) -> str:
    return f"{name} must be between 0 and {heads - 1} ({heads} heads, numbered from 0)"


def check_as_export(inputs: Inputs, pads_given: bool) -> None:
    """The toy's request refused as ``export`` refuses it (RunSpec.validate: no file read, no torch,
    e.g. pad positions past the sentence), and what it ignores said as export says it."""
    if inputs.uses_model:
        return  # the model's tokenizer runs where it is loaded: its refusals come from the worker
    try:
        spec = inputs.to_runspec().validate()
    except InputError as exc:
        raise UsageError(str(exc)) from None
    if pads_given:
        for note in spec.replace(pad_positions=tuple(inputs.pad_positions)).notes():
            print(f"note: {note}", file=sys.stderr)


def generate_arguments(args: argparse.Namespace, inputs: Inputs) -> str | None:
    """``--generate``'s model (``--step`` applied: its folder) after generate's checks of
    ``--max-new-tokens`` (refused, never clamped); the one-line reason when refused."""
    if args.generate is None:
        return "--max-new-tokens applies only with --generate" if args.max_new_tokens is not None else None
    if not inputs.uses_model:
        return "--generate needs --model (a decoder)"
    if args.max_new_tokens is None:
        args.max_new_tokens = NEW_TOKENS.default
    try:
        check_text(args, (PROMPT,))
        check_ranges(args, fields=(NEW_TOKENS,))
    except InputError as exc:
        return str(exc)
    return None


