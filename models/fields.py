"""The ONE table of input options (:data:`FIELDS`): what to compute, one row per option.

From it come the command-line options of ``export``, ``explain`` and the window
(:func:`add_input_arguments`), the fields of :class:`models.runspec.RunSpec` and their JSON, and
the lists of what applies to the toy engine and what to a model (:data:`TOY_ONLY`,
:data:`MODEL_ONLY`) with the one check that refuses an option that would be ignored
(:func:`check_applicable`), and each option's ranges: ``Field.low`` / ``Field.high`` (read from
:mod:`models.limits`, which AttentionConfig.validate reads too),
what every reader accepts (``export`` and ``explain`` through :meth:`RunSpec.validate
<models.runspec.RunSpec.validate>`, a RunSpec's JSON through :meth:`Field.from_json`), and
``Field.shown``, the narrower range the window's boxes offer (so its command line and its saved
settings take only that; ``export`` takes a temperature of 1e-45 or a d_k of 40000, which no box
shows). A new input option is one row here.
"""

from __future__ import annotations

import argparse
import dataclasses
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, NoReturn

from models.errors import InputError
from models.limits import CHOICES, DEFAULT_MAX_TOKENS, bounds

DEFAULT_MASK = "default"  # a model's own mask: padding for encoders, causal for decoders
MODEL_MASKS = (DEFAULT_MASK, "none", "causal", "padding")  # with a model: its own, or one to compare
# What the window's boxes offer (``Field.shown`` below).
MAX_HEADS, MAX_D_MODEL, MAX_HEAD_DIM = 64, 4096, 1024
MAX_LAYER = 9999  # far beyond any model; the window's layer box is a 32-bit QSpinBox
TEMPERATURES = (0.05, 20.0)


def positions(text: str) -> tuple[int, ...]:
    """Comma-separated integers, sorted, duplicates merged."""
    try:
        return tuple(sorted({int(p) for p in text.replace(" ", "").split(",") if p}))
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated integers, got {text!r}") from None


def labels(text: str) -> tuple[str, ...]:
    return tuple(p.strip() for p in text.split(","))


@dataclass(frozen=True)
class Field:
    """One input option. ``applies``: "toy" (only the toy engine reads it), "model" (only with
    ``--model``) or "both"."""

    dest: str
    group: str  # "input" or "attention": the --help section
    applies: str
    help: str
    type: Callable[[str], Any] | None = str
    default: Any = None
    choices: tuple[str, ...] | None = None
    metavar: str | None = None
    flag: bool = False  # store_true
    text: bool = False  # free text: checked to be valid UTF-8
    array: str | None = None  # a file option: the name of the array it holds in a RunSpec (and a session)
    stored: bool = True  # False: a mode of the export command, not part of what is computed
    low: float | None = None  # the range every reader accepts (None: unbounded that side)
    high: float | None = None
    shown: tuple[float, float] | None = None  # the window's boxes offer only this (None: low to high)
    aliases: tuple[str, ...] = ()  # older option names still accepted ("--new-tokens")
    const: Any = None  # not None: the value may be left out (``--ray`` alone is ``--ray local``)
    # The commands that take it ("export", "explain", "why", "window"); None: every one reading this table.
    # Elsewhere it is not in --help, and given, refused by name (check_command).
    commands: tuple[str, ...] | None = None
    toy_choices: tuple[str, ...] = ()  # choices the toy alone takes (said in --help; a model refuses them)
    # The window's form holds it in a shape of its own (explorer/inputs.py: ``own_shape``), turned to and
    # from a RunSpec by hand; every other row passes as it is.
    own_shape: bool = False

    @property
    def option(self) -> str:
        return "--" + self.dest.replace("_", "-")

    @property
    def annotation(self) -> Any:
        """The Python type of its value (a RunSpec's and the window form's field): ``bool``, ``int``,
        ``float``, ``str``, ``tuple[int, ...]`` or ``tuple[str, ...]``; ``| None`` where not given is
        a value of its own (no default: "auto", "not given")."""
        kind = bool if self.flag else {positions: tuple[int, ...], labels: tuple[str, ...], int: int,
                                       float: float}.get(self.type, str)  # fmt: skip
        return kind if self.default is not None else kind | None

    def to_json(self, value: Any) -> Any:
        return list(value) if isinstance(value, tuple) else value

    @property
    def range(self) -> tuple[float | None, float | None]:
        """What every reader accepts (``export``, a RunSpec's JSON)."""
        return self.low, self.high

    @property
    def window_range(self) -> tuple[float | None, float | None]:
        """What the window's boxes offer, and so its command line and saved settings take."""
        return self.shown or self.range

    def in_range(self, value: Any, window: bool = False) -> bool:
        """Whether ``value`` (a number of this row's type; None, an unset option, always is) is in
        :attr:`range`, or in :attr:`window_range` with ``window``. NaN is in no range."""
        low, high = self.window_range if window else self.range
        return value is None or ((low is None or value >= low) and (high is None or value <= high))

    def check_range(self, value: Any, window: bool = False) -> Any:
        """``value`` when :meth:`in_range`; else InputError naming the option and the range (never
        clamped: a value the user did not choose is not substituted)."""
        if self.in_range(value, window):
            return value
        low, high = self.window_range if window else self.range
        if window and self.shown:
            raise InputError(f"{self.option} {_number(value)} is outside what the window shows ({_number(low)} to "
                             f"{_number(high)}); use 'main.py export' for it")  # fmt: skip
        span = f"from {_number(low)} to {_number(high)}" if low is not None and high is not None else \
            f"at least {_number(low)}" if low is not None else f"at most {_number(high)}"  # fmt: skip
        raise InputError(f"{self.option} must be {span}, got {_number(value)}")

    def from_json(self, value: Any) -> Any:
        """A value read from JSON, checked as the command line checks it (type, choices, range);
        InputError when it is not one."""
        if self.flag:
            ok = isinstance(value, bool)
        elif self.choices:
            ok = value in self.choices
        elif self.type is int:
            ok = type(value) is int
        elif self.type is float:
            ok, value = type(value) in (int, float), float(value) if type(value) in (int, float) else value
        elif self.type is positions:
            ok = isinstance(value, list) and all(type(v) is int and v >= 0 for v in value)
            value = tuple(sorted(set(value))) if ok else value
        elif self.type is labels:
            ok = isinstance(value, list) and all(isinstance(v, str) for v in value)
            value = tuple(value) if ok else value
        else:
            ok = isinstance(value, str)
        if not ok:
            kind = "one of " + ", ".join(self.choices) if self.choices else \
                {int: "an integer", float: "a number", positions: "a list of integers ≥ 0",
                 labels: "a list of strings"}.get(self.type, "true or false" if self.flag else "a string")  # fmt: skip
            raise InputError(f"option {self.dest} must be {kind}, got {str(value)[:60]!r}")
        return self.check_range(value)


def _number(value: Any) -> str:
    return f"{value:g}" if isinstance(value, float) else str(value)[:60]


HEADLESS = ("export", "explain", "why")  # the commands reading FIELDS beside the window

FIELDS: tuple[Field, ...] = (
    Field("sentence", "input", "both", "the sentence whose tokens are the keys and values", text=True, own_shape=True),
    Field("text_file", "input", "both", "a long text read as the sentence", metavar="FILE", stored=False),
    Field("embeddings", "input", "toy", "an n × d_model matrix instead of a sentence", metavar="X.npy",
          array="embeddings"),
    Field("labels", "input", "toy", "comma-separated token labels for --embeddings", type=labels, text=True,
          own_shape=True),
    # With a model it is an encoder-decoder's target (refused by name for other models once the model is open).
    Field("cross_sentence", "input", "both", "a second sentence: the toy's queries (cross-attention), or an "
          "encoder-decoder model's target", text=True, own_shape=True),
    Field("cross_embeddings", "input", "toy", "a matrix supplying the queries", metavar="XQ.npy",
          array="cross_embeddings"),
    Field("cross_labels", "input", "toy", "labels for --cross-embeddings", type=labels, text=True, own_shape=True),
    Field("model", "input", "both", "a model folder, a .gguf file, a cached model name, or 'minilm' (built in)",
          metavar="PATH_OR_NAME", own_shape=True),
    Field("step", "input", "model", "with --model: a training step ('first', 'last' (default) or a number)",
          metavar="S"),
    Field("layer", "input", "model", "the model layer to trace, from 0 (with --model)", type=int, default=0,
          **bounds("layer"), shown=(0, MAX_LAYER)),
    Field("block", "input", "model", "with an encoder-decoder --model: which attention (default: cross)",
          choices=("encoder", "decoder", "cross")),
    Field("all_layers", "input", "model", "with --model: every layer and head, rollout and head metrics",
          type=None, flag=True, default=False, stored=False, commands=("export",)),
    Field("heads", "attention", "toy", "number of attention heads h", type=int, default=2,
          **bounds("heads"), shown=(1, MAX_HEADS)),
    Field("d_model", "attention", "toy", "width of each token's vector (embeddings and output)", type=int,
          default=16, **bounds("d_model"), shown=(1, MAX_D_MODEL)),
    Field("d_k", "attention", "toy", "width of each head's queries and keys (default d_model / heads)", type=int,
          **bounds("d_k"), shown=(1, MAX_HEAD_DIM)),
    Field("d_v", "attention", "toy", "width of each head's values (default d_k)", type=int,
          **bounds("d_v"), shown=(1, MAX_HEAD_DIM)),
    Field("d_out", "attention", "toy", "width of the output projection (default d_model)", type=int,
          **bounds("d_out")),
    Field("mask", "attention", "both", "which keys each query may see (default: none; a model's own with --model)",
          choices=CHOICES["mask"], toy_choices=("custom",), own_shape=True),
    Field("pad_positions", "attention", "both", "key positions the padding mask hides, from 0", type=positions,
          default=(), metavar="3,4", own_shape=True),
    Field("mask_file", "attention", "toy", "boolean n_q × n_k matrix for --mask custom (True = hidden)",
          metavar="M.npy", array="mask"),
    Field("score", "attention", "toy", "how a query meets a key: dot, scaled dot (÷ √d_k), additive or general",
          choices=CHOICES["score"], default="scaled"),
    Field("pe", "attention", "toy", "positional encoding added to the embeddings", choices=CHOICES["pe"],
          default="none", own_shape=True),
    Field("temperature", "attention", "toy", "softmax temperature T: weights = softmax(scores / T)", type=float,
          default=1.0, shown=TEMPERATURES),  # above 0 (models/limits.py: POSITIVE): 1e-45 gives one-hot weights
    Field("seed", "attention", "toy", "seed of the random embeddings and weights", type=int, default=0,
          **bounds("seed")),
    Field("bias", "attention", "toy", "random biases (a weights file has its own)", type=None, flag=True,
          default=False),
    Field("weights", "attention", "toy", "projection weights (.npz, see docs/formats.md)", metavar="W.npz",
          array="weights"),
    Field("device", "attention", "both", "where torch computes (auto: CUDA when present)", choices=CHOICES["device"],
          default="auto", commands=HEADLESS),
    Field("dtype", "attention", "model", "what a model's layers are held in, and the layers below the traced one "
          "and generation compute in (the traced layer is float32 whatever it is)", choices=CHOICES["dtype"],
          default="float32"),
    Field("max_tokens", "attention", "both", "refuse inputs longer than this", type=int,
          default=DEFAULT_MAX_TOKENS, **bounds("max_tokens"), commands=HEADLESS),
)  # fmt: skip


def tables(fields: tuple[Field, ...]) -> dict[str, Any]:
    """What is derived from a table: by name, toy-only, model-only and text rows (a test that adds a
    row to :data:`FIELDS` derives them again)."""
    return {"BY_DEST": {f.dest: f for f in fields}, "TOY_ONLY": tuple(f.dest for f in fields if f.applies == "toy"),
            "MODEL_ONLY": tuple(f.dest for f in fields if f.applies == "model"),
            "TEXT_OPTIONS": tuple(f.dest for f in fields if f.text)}  # fmt: skip


_DERIVED = tables(FIELDS)
BY_DEST: dict[str, Field] = _DERIVED["BY_DEST"]
TOY_ONLY: tuple[str, ...] = _DERIVED["TOY_ONLY"]
MODEL_ONLY: tuple[str, ...] = _DERIVED["MODEL_ONLY"]
TEXT_OPTIONS: tuple[str, ...] = _DERIVED["TEXT_OPTIONS"]
MODEL_OPTIONS = ("model", "step", "device", "dtype", "max_tokens")  # what every command taking a model takes


def rows(*dests: str, group: str = "model") -> tuple[Field, ...]:
    """The rows of :data:`FIELDS` named ``dests``, in one --help section (other commands reuse them:
    ``--model``, ``--step``, …)."""
    return tuple(dataclasses.replace(BY_DEST[d], group=group) for d in dests)


# --- the one converter between a table of rows and argparse ----------------------------------------


class OneLineParser(argparse.ArgumentParser):
    """argparse, but a usage mistake is one ``error:`` line and exit status 2, as every other error."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"error: {message}\n")


def add_arguments(p: argparse.ArgumentParser, fields: Iterable[Field], unset: bool = False,
                  required: Iterable[str] = (), command: str | None = None) -> argparse.ArgumentParser:  # fmt: skip
    """Every row of ``fields`` as an option of ``p``, in a --help section per row group: its names
    (aliases too), type or choices, its default said in its help. ``unset``: every default None
    ("not given": the window keeps what it has); ``required``: dests that must be given; ``command``:
    the rows of other commands are parsed but not listed (:func:`check_command` refuses them by name)."""
    sections: dict[str, Any] = {}
    required = set(required)
    for f in fields:
        section = sections.get(f.group) or sections.setdefault(f.group, p.add_argument_group(f.group))
        said = not (f.default is None or f.default is False or f.default == ()) and "default" not in f.help
        text = f"{f.help} (default: {_number(f.default)})" if said else f.help
        if f.toy_choices:
            text += f"; {', '.join(f.toy_choices)}: the toy only, not with --model"
        kwargs: dict[str, Any] = {"dest": f.dest, "default": None if unset else f.default, "help": text}
        if f.dest in required:
            kwargs |= {"required": True, "help": f"{f.help} (required)"}
        if command is not None and f.commands is not None and command not in f.commands:
            kwargs["help"] = argparse.SUPPRESS  # given, it is refused by name, not "unrecognized"
        if f.flag:
            section.add_argument(f.option, action="store_true", **kwargs)
            continue
        if f.choices:
            kwargs["choices"] = f.choices
        elif f.type is not None:
            kwargs["type"] = f.type
        if f.metavar:
            kwargs["metavar"] = f.metavar
        if f.const is not None:
            kwargs |= {"nargs": "?", "const": f.const}
        section.add_argument(f.option, **kwargs)
        for alias in f.aliases:  # accepted, not shown: the option has one name
            section.add_argument(alias, **kwargs | {"help": argparse.SUPPRESS})
    return p


def add_input_arguments(p: argparse.ArgumentParser, skip: Iterable[str] = (),
                        command: str | None = None) -> argparse.ArgumentParser:  # fmt: skip
    """Every option saying what to compute, from :data:`FIELDS` (``skip``: dests left out; ``command``:
    listed in --help only where that command takes them, :func:`add_arguments`)."""
    skip = set(skip)
    return add_arguments(p, [f for f in FIELDS if f.dest not in skip], command=command)


def check_command(args: Any, command: str, fields: Iterable[Field] | None = None) -> None:
    """Refuse a row ``args`` gives (not its default) that ``command`` does not take (:attr:`Field.commands`)."""
    for f in FIELDS if fields is None else fields:
        value = getattr(args, f.dest, None)
        if f.commands is None or command in f.commands or value is None or value is False or value == f.default:
            continue
        names = [f"'main.py {c}'" for c in f.commands]
        said = names[0] if len(names) == 1 else ", ".join(names[:-1]) + " and " + names[-1]
        raise InputError(f"{f.option} applies to {said} only")


def given_values(args: Any, fields: Iterable[Field]) -> dict[str, Any]:
    """``{dest: value}`` of the rows ``args`` sets (not None, not an unset flag)."""
    return {f.dest: v for f in fields if (v := getattr(args, f.dest, None)) is not None and v is not False}


def given_options(parser: argparse.ArgumentParser, argv: Sequence[str]) -> dict[str, str]:
    """The options written on ``parser``'s command line ``argv`` (not defaults): ``{dest: "--option"}``."""
    names = {}
    for action in parser._actions:
        action.default, action.required = argparse.SUPPRESS, False
        if action.option_strings:
            names[action.dest] = action.option_strings[-1]
    return {dest: names[dest] for dest in vars(parser.parse_args(argv))}


def check_applicable(given: Iterable[str], with_model: bool) -> None:
    """Refuse options that would be ignored: toy-only options with a model, model-only without.
    ``given``: the dests written by the user (command line, session or settings)."""
    given = list(given)
    if with_model:
        ignored = [BY_DEST[d].option for d in TOY_ONLY if d in given]
        if ignored:
            one = len(ignored) == 1
            raise InputError(
                f"{', '.join(ignored)} {'does' if one else 'do'} not apply with --model "
                f"(the model fixes its heads, widths, scores and weights); remove {'it' if one else 'them'}"
            )
    else:
        ignored = [BY_DEST[d].option for d in MODEL_ONLY if d in given]
        if ignored:
            raise InputError(f"{', '.join(ignored)} applies only with --model; remove it")


def check_ranges(values: Any, window: bool = False, fields: Iterable[Field] | None = None) -> None:
    """Refuse a value outside its row's range (``window``: the window's range); ``values``: parsed
    options or a RunSpec (a row it does not have is not checked); ``fields``: these rows (FIELDS)."""
    for f in FIELDS if fields is None else fields:
        if f.range != (None, None) or f.shown:
            f.check_range(getattr(values, f.dest, None), window)


def check_text(args: Any, fields: Iterable[Field] | None = None) -> None:
    """Refuse text options that are not valid UTF-8 (surrogate-escaped bytes from the command line)."""
    for f in FIELDS if fields is None else fields:
        value = getattr(args, f.dest, None) if f.text else None
        for text in value if isinstance(value, tuple) else [value]:
            if isinstance(text, str) and any("\udc80" <= c <= "\udcff" for c in text):
                raise InputError(f"{f.option} is not valid UTF-8 text: {ascii(text)}")
