"""The ONE table of input options (:data:`FIELDS`): what to compute, one row per option.

From it come the command-line options of ``export``, ``explain`` and the window
(:func:`add_input_arguments`), the fields of :class:`models.runspec.RunSpec` and their JSON, and
the lists of what applies to the toy engine and what to a model (:data:`TOY_ONLY`,
:data:`MODEL_ONLY`) with the one check that refuses an option that would be ignored
(:func:`check_applicable`). A new input option is one row here.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from .config import DEFAULT_MAX_TOKENS, DEVICES, MASKS, POSITIONAL, SCORES
from .errors import InputError

DEFAULT_MASK = "default"  # a model's own mask: padding for encoders, causal for decoders


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

    @property
    def option(self) -> str:
        return "--" + self.dest.replace("_", "-")

    def to_json(self, value: Any) -> Any:
        return list(value) if isinstance(value, tuple) else value

    def from_json(self, value: Any) -> Any:
        """A value read from JSON, checked as the command line checks it; InputError when it is not one."""
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
        return value


FIELDS: tuple[Field, ...] = (
    Field("sentence", "input", "both", "the sentence whose tokens are the keys and values", text=True),
    Field("embeddings", "input", "toy", "an n × d_model matrix instead of a sentence", metavar="X.npy",
          array="embeddings"),
    Field("labels", "input", "toy", "comma-separated token labels for --embeddings", type=labels, text=True),
    # With a model it is an encoder-decoder's target (refused by name for other models once the model is open).
    Field("cross_sentence", "input", "both", "a second sentence: the toy's queries (cross-attention), or an "
          "encoder-decoder model's target", text=True),
    Field("cross_embeddings", "input", "toy", "a matrix supplying the queries", metavar="XQ.npy",
          array="cross_embeddings"),
    Field("cross_labels", "input", "toy", "labels for --cross-embeddings", type=labels, text=True),
    Field("model", "input", "both", "a pretrained model folder, a cached model name, or 'minilm' (built in)",
          metavar="PATH_OR_NAME"),
    Field("step", "input", "model", "with --model: a training step ('first', 'last' (default) or a number)",
          metavar="S"),
    Field("layer", "input", "model", "the model layer to trace, from 0 (with --model)", type=int, default=0),
    Field("block", "input", "model", "with an encoder-decoder --model: which attention (default: cross)",
          choices=("encoder", "decoder", "cross")),
    Field("all_layers", "input", "model", "with --model: every layer and head, rollout and head metrics",
          type=None, flag=True, default=False, stored=False),
    Field("heads", "attention", "toy", "number of attention heads h", type=int, default=2),
    Field("d_model", "attention", "toy", "width of each token's vector (embeddings and output)", type=int,
          default=16),
    Field("d_k", "attention", "toy", "width of each head's queries and keys (default d_model / heads)", type=int),
    Field("d_v", "attention", "toy", "width of each head's values (default d_k)", type=int),
    Field("d_out", "attention", "toy", "width of the output projection (default d_model)", type=int),
    Field("mask", "attention", "both", "which keys each query may see (default: none; a model's own with --model)",
          choices=MASKS),
    Field("pad_positions", "attention", "both", "key positions the padding mask hides, from 0", type=positions,
          default=(), metavar="3,4"),
    Field("mask_file", "attention", "toy", "boolean n_q × n_k matrix for --mask custom (True = hidden)",
          metavar="M.npy", array="mask"),
    Field("score", "attention", "toy", "how a query meets a key: dot, scaled dot (÷ √d_k), additive or general",
          choices=SCORES, default="scaled"),
    Field("pe", "attention", "toy", "positional encoding added to the embeddings", choices=POSITIONAL,
          default="none"),
    Field("temperature", "attention", "toy", "softmax temperature T: weights = softmax(scores / T)", type=float,
          default=1.0),
    Field("seed", "attention", "toy", "seed of the random embeddings and weights", type=int, default=0),
    Field("bias", "attention", "toy", "random biases (a weights file has its own)", type=None, flag=True,
          default=False),
    Field("weights", "attention", "toy", "projection weights (.npz, see docs/formats.md)", metavar="W.npz",
          array="weights"),
    Field("device", "attention", "both", "where torch computes (auto: CUDA when present)", choices=DEVICES,
          default="auto"),
    Field("max_tokens", "attention", "both", "refuse inputs longer than this", type=int,
          default=DEFAULT_MAX_TOKENS),
)  # fmt: skip
BY_DEST = {f.dest: f for f in FIELDS}
TOY_ONLY = tuple(f.dest for f in FIELDS if f.applies == "toy")
MODEL_ONLY = tuple(f.dest for f in FIELDS if f.applies == "model")
TEXT_OPTIONS = tuple(f.dest for f in FIELDS if f.text)


def add_input_arguments(p: argparse.ArgumentParser, skip: Iterable[str] = ()) -> argparse.ArgumentParser:
    """Every option saying what to compute, from :data:`FIELDS` (``skip``: dests left out)."""
    groups = {name: p.add_argument_group(name) for name in ("input", "attention")}
    for f in FIELDS:
        if f.dest in skip:
            continue
        if f.flag:
            groups[f.group].add_argument(f.option, action="store_true", help=f.help)
            continue
        kwargs = {"help": f.help, "default": f.default, "metavar": f.metavar}
        if f.choices:
            kwargs["choices"] = f.choices
        else:
            kwargs["type"] = f.type
        groups[f.group].add_argument(f.option, **{k: v for k, v in kwargs.items() if v is not None or k == "default"})
    return p


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


def check_text(args: argparse.Namespace) -> None:
    """Refuse text options that are not valid UTF-8 (surrogate-escaped bytes from the command line)."""
    for dest in TEXT_OPTIONS:
        value = getattr(args, dest, None)
        for text in value if isinstance(value, tuple) else [value]:
            if isinstance(text, str) and any("\udc80" <= c <= "\udcff" for c in text):
                raise InputError(f"{BY_DEST[dest].option} is not valid UTF-8 text: {ascii(text)}")
