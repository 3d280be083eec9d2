"""What to compute, described once: the input options of ``export``, ``explain``, the window and sessions.

``FIELDS`` is the one table of input options. From it come the command-line options of every
command (:func:`add_input_arguments`), the lists of what applies to the toy engine and what to a
model (:data:`TOY_ONLY`, :data:`MODEL_ONLY`), and the one check that refuses an option that would
be ignored (:func:`check_applicable`). A new input option is one row here.

The rest turns parsed options into what the engines take: :func:`request_from_args` (the toy
engine's :class:`~models.config.AttentionRequest`, its files read and checked) and
:func:`model_from_args` / :func:`model_trace_from_args` (a model's layer).
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from .config import DEFAULT_MAX_TOKENS, DEVICES, MASKS, POSITIONAL, SCORES, AttentionConfig, AttentionRequest
from .errors import InputError

if TYPE_CHECKING:
    from .edits import Edit


DEFAULT_MASK = "default"  # a model's own mask: padding for encoders, causal for decoders


@dataclass(frozen=True)
class PretrainedRequest:
    """Trace one layer of a real model. ``model`` is what resolve_model accepts (a name or folder)."""

    model: str
    layer: int
    sentence: str
    mask: str | None = None  # None: the model's own
    pad_positions: tuple[int, ...] = ()
    device: str = "auto"
    cross_sentence: str | None = None  # an encoder-decoder model's target (others ignore it)
    block: str = "cross"  # an encoder-decoder model's attention: encoder, decoder or cross
    exact: bool = False  # a session's layer and pads: refused as export refuses them, never adjusted


@dataclass(frozen=True)
class EditedModelRequest(PretrainedRequest):
    """The same layer with what-if edits (models/pretrained/edits.py); ``difference``: show edited −
    original. A PretrainedRequest still (the window reads its model), answered by the same runner."""

    edits: tuple[Edit, ...] = ()
    difference: bool = False


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

    @property
    def option(self) -> str:
        return "--" + self.dest.replace("_", "-")


FIELDS: tuple[Field, ...] = (
    Field("sentence", "input", "both", "the sentence whose tokens are the keys and values", text=True),
    Field("embeddings", "input", "toy", "an n × d_model matrix instead of a sentence", metavar="X.npy"),
    Field("labels", "input", "toy", "comma-separated token labels for --embeddings", type=labels, text=True),
    # With a model it is an encoder-decoder's target (refused by name for other models once the model is open).
    Field("cross_sentence", "input", "both", "a second sentence: the toy's queries (cross-attention), or an "
          "encoder-decoder model's target", text=True),
    Field("cross_embeddings", "input", "toy", "a matrix supplying the queries", metavar="XQ.npy"),
    Field("cross_labels", "input", "toy", "labels for --cross-embeddings", type=labels, text=True),
    Field("model", "input", "both", "a pretrained model folder, a cached model name, or 'minilm' (built in)",
          metavar="PATH_OR_NAME"),
    Field("step", "input", "model", "with --model: a training step ('first', 'last' (default) or a number)",
          metavar="S"),
    Field("layer", "input", "model", "the model layer to trace, from 0 (with --model)", type=int, default=0),
    Field("block", "input", "model", "with an encoder-decoder --model: which attention (default: cross)",
          choices=("encoder", "decoder", "cross")),
    Field("all_layers", "input", "model", "with --model: every layer and head, rollout and head metrics",
          type=None, flag=True),
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
          metavar="M.npy"),
    Field("score", "attention", "toy", "how a query meets a key: dot, scaled dot (÷ √d_k), additive or general",
          choices=SCORES, default="scaled"),
    Field("pe", "attention", "toy", "positional encoding added to the embeddings", choices=POSITIONAL,
          default="none"),
    Field("temperature", "attention", "toy", "softmax temperature T: weights = softmax(scores / T)", type=float,
          default=1.0),
    Field("seed", "attention", "toy", "seed of the random embeddings and weights", type=int, default=0),
    Field("bias", "attention", "toy", "random biases (a weights file has its own)", type=None, flag=True),
    Field("weights", "attention", "toy", "projection weights (.npz, see docs/formats.md)", metavar="W.npz"),
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


def check_arguments(args: argparse.Namespace, given: dict[str, str]) -> list[str]:
    """Refuse options that would be ignored and text that is not valid UTF-8; return notes."""
    check_text(args)
    check_applicable(given, args.model is not None)
    notes = []
    mask = args.mask or ("model" if args.model is not None else "none")
    if args.pad_positions and args.model is None and mask != "padding":
        shown = ",".join(map(str, args.pad_positions))
        notes.append(f"--pad-positions {shown} ignored: mask '{mask}' does not use them (use --mask padding)")
    return notes


def load_matrix(path: str, what: str) -> np.ndarray:
    """Read a ``.npy`` file without ever unpickling, with a clear message on failure
    (models.io: a regular file only, its header checked before its data)."""
    from .io import read_npy

    return read_npy(path, f"{what} file")


def _matrix(source, what: str) -> np.ndarray | None:
    """A file option's matrix: read from its path, or given in memory (a session's array)."""
    if source is None or isinstance(source, str) and not source:
        return None
    return source if isinstance(source, np.ndarray) else load_matrix(source, what)


def request_from_args(args: argparse.Namespace) -> AttentionRequest:
    """The toy engine's request; the file options (``embeddings``, ``cross_embeddings``,
    ``mask_file``, ``weights``) may also hold their arrays in memory (a dict for ``weights``)."""
    from .weights import load_weights, weights_from_arrays

    if args.sentence is None and args.embeddings is None:
        raise InputError("give --sentence or --embeddings")
    if args.sentence is not None and args.embeddings is not None:
        raise InputError("give --sentence or --embeddings, not both")
    if args.cross_sentence is not None and not args.cross_sentence.strip():
        raise InputError("the second sentence (--cross-sentence) is empty: type at least one word")
    if args.cross_sentence is not None and args.cross_embeddings is not None:
        raise InputError("give --cross-sentence or --cross-embeddings, not both")
    cfg = AttentionConfig(
        heads=args.heads, d_model=args.d_model, d_k=args.d_k, d_v=args.d_v, d_out=args.d_out,
        mask=args.mask or "none", pad_positions=tuple(args.pad_positions), score=args.score,
        pe=args.pe, temperature=args.temperature, seed=args.seed, bias=args.bias,
        device=args.device, max_tokens=args.max_tokens,
    ).validate()  # fmt: skip
    embeddings = _matrix(args.embeddings, "embeddings")
    cross = _matrix(args.cross_embeddings, "cross embeddings")
    mask = None
    if cfg.mask == "custom":
        mask = _matrix(args.mask_file, "mask")
        if mask is None:
            raise InputError("--mask custom needs --mask-file M.npy (boolean, True = hidden)")
        if mask.dtype != bool:
            where = "the mask" if isinstance(args.mask_file, np.ndarray) else f"mask file {args.mask_file}"
            raise InputError(f"{where} must hold booleans, got {mask.dtype}")
    if isinstance(args.weights, dict):  # in memory (a session's): checked as a file's would be
        weights = weights_from_arrays(args.weights, cfg, "the session's weights")
    else:
        weights = load_weights(args.weights, cfg) if args.weights else None
    return AttentionRequest(
        config=cfg, sentence=args.sentence, embeddings=embeddings, labels=args.labels,
        cross_sentence=args.cross_sentence, cross_embeddings=cross, cross_labels=args.cross_labels,
        weights=weights, custom_mask=mask,
    )  # fmt: skip


def model_from_args(args: argparse.Namespace):
    from .pretrained import load_model

    if not args.sentence:
        raise InputError("--model needs --sentence")
    return load_model(args.model, device=args.device, step=getattr(args, "step", None))


def model_trace_from_args(model, args: argparse.Namespace, edits=()):
    from .encdec_cli import encdec_options

    return model.trace(
        args.sentence, args.layer, mask=args.mask, pad_positions=args.pad_positions, max_tokens=args.max_tokens,
        edits=edits, **encdec_options(model, args),
    )


def input_trace(args: argparse.Namespace):
    """The trace of parsed input options (no session): a model's layer or the toy engine."""
    if args.model is not None:
        return model_trace_from_args(model_from_args(args), args)
    from .pipeline import run

    return run(request_from_args(args))
