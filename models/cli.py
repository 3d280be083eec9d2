"""The headless ``export`` command: arguments -> request -> trace -> files.

Every user error becomes one line on stderr and exit status 2, with nothing written.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

import numpy as np

from .config import (
    DEFAULT_MAX_TOKENS,
    DEVICES,
    MASKS,
    POSITIONAL,
    SCORES,
    AttentionConfig,
    AttentionRequest,
    InputError,
)
from .export import check_target, write_trace
from .memory import OUT_OF_MEMORY, is_out_of_memory

# Options that only the toy engine reads: with --model they would be silently ignored.
TOY_ONLY = ("embeddings", "labels", "cross_sentence", "cross_embeddings", "cross_labels", "heads",
            "d_model", "d_k", "d_v", "d_out", "mask_file", "score", "pe", "temperature", "seed",
            "bias", "weights")  # fmt: skip
MODEL_ONLY = ("layer",)
TEXT_OPTIONS = ("sentence", "cross_sentence", "labels", "cross_labels")


def _positions(text: str) -> tuple[int, ...]:
    """Comma-separated integers, sorted, duplicates merged."""
    try:
        return tuple(sorted({int(p) for p in text.replace(" ", "").split(",") if p}))
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated integers, got {text!r}") from None


def _labels(text: str) -> tuple[str, ...]:
    return tuple(p.strip() for p in text.split(","))


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="main.py export",
        description="Compute every stage of attention and write <stage>.npy files + manifest.json.",
    )
    add_input_arguments(p)
    p.add_argument("--session", metavar="FILE", help="compute what a saved session shows (not with input options)")
    out = p.add_argument_group("output")
    out.add_argument("--out", required=True, metavar="DIR", help="folder to create")
    out.add_argument("--force", action="store_true", help="replace a previous export of this tool (never other files)")
    out.add_argument("--stages", type=_labels, metavar="weights,output",
                     help="write only these stages (default: all)")  # fmt: skip
    out.add_argument("--only-heads", type=_positions, metavar="0,2",
                     help="write only these heads of per-head stages, numbered from 0 (default: all)")  # fmt: skip
    return p


def add_input_arguments(p: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """Every option saying what to compute (shared by ``export`` and ``explain``)."""
    src = p.add_argument_group("input")
    src.add_argument("--sentence", help="the sentence whose tokens are the keys and values")
    src.add_argument("--embeddings", metavar="X.npy", help="an n × d_model matrix instead of a sentence")
    src.add_argument("--labels", type=_labels, help="comma-separated token labels for --embeddings")
    src.add_argument("--cross-sentence", help="a second sentence supplying the queries")
    src.add_argument("--cross-embeddings", metavar="XQ.npy", help="a matrix supplying the queries")
    src.add_argument("--cross-labels", type=_labels, help="labels for --cross-embeddings")
    src.add_argument("--model", metavar="PATH_OR_NAME",
                     help="a pretrained model folder, a cached model name, or 'minilm' (built in)")  # fmt: skip
    src.add_argument("--layer", type=int, default=0, help="the model layer to trace, 0-based (with --model)")
    src.add_argument("--all-layers", action="store_true",
                     help="with --model: every layer and head, rollout and head metrics (see README)")  # fmt: skip
    att = p.add_argument_group("attention")
    att.add_argument("--heads", type=int, default=2, help="attention heads h (default 2; d_model must divide by it)")
    att.add_argument("--d-model", type=int, default=16, help="embedding width d_model (default 16)")
    att.add_argument("--d-k", type=int, help="query/key width per head (default d_model / heads)")
    att.add_argument("--d-v", type=int, help="value width per head (default d_k)")
    att.add_argument("--d-out", type=int, help="output width of W_o (default d_model)")
    att.add_argument("--mask", choices=MASKS, help="default: none (the model's own with --model)")
    att.add_argument("--pad-positions", type=_positions, default=(), metavar="3,4",
                     help="0-based key positions hidden by --mask padding")  # fmt: skip
    att.add_argument("--mask-file", metavar="M.npy", help="boolean n_q × n_k matrix for --mask custom")
    att.add_argument("--score", choices=SCORES, default="scaled",
                     help="score function: q·k, q·k/√d_k (default), additive (Bahdanau) or general q W k")  # fmt: skip
    att.add_argument("--pe", choices=POSITIONAL, default="none",
                     help="positional encoding added to the embeddings (default none)")  # fmt: skip
    att.add_argument("--temperature", type=float, default=1.0,
                     help="softmax temperature T: weights = softmax(scores / T) (default 1)")  # fmt: skip
    att.add_argument("--seed", type=int, default=0, help="seed of the random embeddings and weights (default 0)")
    att.add_argument("--bias", action="store_true", help="random biases (a weights file has its own)")
    att.add_argument("--weights", metavar="W.npz", help="projection weights (see README)")
    att.add_argument("--device", choices=DEVICES, default="auto", help="where torch computes (default: cuda if any)")
    att.add_argument("--max-tokens", type=int, default=DEFAULT_MAX_TOKENS, help="refuse longer inputs")
    return p


def load_matrix(path: str, what: str) -> np.ndarray:
    """Read a ``.npy`` file without ever unpickling, with a clear message on failure."""
    try:
        loaded = np.load(path, allow_pickle=False)
    except FileNotFoundError:
        raise InputError(f"{what} file not found: {path}") from None
    except IsADirectoryError:
        raise InputError(f"{what} path is a folder, not a .npy file: {path}") from None
    except (OSError, ValueError, EOFError) as exc:
        raise InputError(f"cannot read {what} file {path}: {exc}") from None
    if not isinstance(loaded, np.ndarray):  # a .npz archive, not a single matrix
        loaded.close()
        raise InputError(f"{what} file {path} is a .npz archive; give a single-matrix .npy file")
    return loaded


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


def given_options(argv: Sequence[str]) -> dict[str, str]:
    """The options written on the command line (not defaults): ``{dest: "--option"}``."""
    parser = build_parser()
    names = {}
    for action in parser._actions:
        action.default, action.required = argparse.SUPPRESS, False
        if action.option_strings:
            names[action.dest] = action.option_strings[-1]
    return {dest: names[dest] for dest in vars(parser.parse_args(argv))}


def check_arguments(args: argparse.Namespace, given: dict[str, str]) -> list[str]:
    """Refuse options that would be ignored and text that is not valid UTF-8; return notes."""
    if getattr(args, "session", None) is not None:  # issue 9: the session holds every input
        from .session import check_session_options

        return check_session_options(given)
    for dest in TEXT_OPTIONS:
        value = getattr(args, dest)
        for text in value if isinstance(value, tuple) else [value]:
            if isinstance(text, str) and any("\udc80" <= c <= "\udcff" for c in text):
                raise InputError(f"{given[dest]} is not valid UTF-8 text: {ascii(text)}")
    if args.model is not None:
        ignored = [given[d] for d in TOY_ONLY if d in given]
        if ignored:
            raise InputError(
                f"{', '.join(ignored)} {'does' if len(ignored) == 1 else 'do'} not apply with --model "
                f"(the model fixes its heads, widths, scores and weights); remove "
                f"{'it' if len(ignored) == 1 else 'them'}"
            )
    else:
        ignored = [given[d] for d in MODEL_ONLY if d in given]
        if ignored:
            raise InputError(f"{', '.join(ignored)} applies only with --model; remove it")
    notes = []
    mask = args.mask or ("model" if args.model is not None else "none")
    if args.pad_positions and args.model is None and mask != "padding":
        shown = ",".join(map(str, args.pad_positions))
        notes.append(f"--pad-positions {shown} ignored: mask '{mask}' does not use them (use --mask padding)")
    return notes


def model_from_args(args: argparse.Namespace):
    from .pretrained import load_model

    if not args.sentence:
        raise InputError("--model needs --sentence")
    return load_model(args.model, device=args.device)


def model_trace_from_args(model, args: argparse.Namespace, edits=()):
    return model.trace(
        args.sentence, args.layer, mask=args.mask, pad_positions=args.pad_positions, max_tokens=args.max_tokens,
        edits=edits,
    )


def trace_from_args(args: argparse.Namespace):
    if getattr(args, "session", None) is not None:
        from .session import load_session

        return load_session(args.session).trace()
    if args.model is not None:
        return model_trace_from_args(model_from_args(args), args)
    from .pipeline import run

    return run(request_from_args(args))


def _error(message: str) -> int:
    print(f"error: {_printable(message)}", file=sys.stderr)
    return 2


def _printable(text: str) -> str:
    """One line, and bytes that are not UTF-8 (surrogate-escaped) shown as escapes."""
    line = " ".join(str(text).split("\n")).strip()
    return line.encode("utf-8", "backslashreplace").decode("utf-8")


def export_main(argv: Sequence[str]) -> int:
    args = build_parser().parse_args(argv)
    try:
        notes = check_arguments(args, given_options(argv))
        check_target(args.out, args.force)  # fail before computing anything
        if args.all_layers:
            from .survey_export import export_all_layers

            return export_all_layers(args)
        trace = trace_from_args(args)
        heads = list(dict.fromkeys(args.only_heads)) if args.only_heads else None
        out = write_trace(trace, args.out, force=args.force, stages=args.stages, heads=heads)
    except InputError as exc:
        return _error(str(exc))
    except RecursionError:
        return _error("input nested too deeply to read")
    except (MemoryError, RuntimeError) as exc:
        if not is_out_of_memory(exc):
            raise
        return _error(OUT_OF_MEMORY)
    for notice in notes + list(trace.meta.get("notices", [])):
        print(f"note: {_printable(notice)}", file=sys.stderr)
    written = len(args.stages or trace.stages)
    print(_printable(f"wrote {written} stages to {out} ({trace.device}, {trace.elapsed_ms:.1f} ms)"))
    return 0
