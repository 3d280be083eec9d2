"""The files a run's options name, read into a :class:`~models.runspec.RunSpec`'s arrays: ``--embeddings``,
``--cross-embeddings``, ``--mask-file`` (:func:`load_matrix`), ``--weights`` and ``--text-file``, with the
command line's messages (InputError, one line). What ``export``, ``explain``, ``why`` and the API parse
becomes a RunSpec through :func:`spec_from_args`; a RunSpec itself reads no file (models/runspec.py)."""

from __future__ import annotations

import argparse
from collections.abc import Mapping

import numpy as np

from models.errors import InputError
from models.runspec import ARRAY_FIELDS, RunSpec


def load_matrix(path: str, what: str, max_tokens: int | None = None, d_model: int | None = None) -> np.ndarray:
    """Read a ``.npy`` file without ever unpickling, with a clear message on failure
    (models.io: a regular file only, its header checked before its data: models/io/matrix_header.py);
    read-only, so that HeldArrays keeps it without a copy."""
    from models.io import read_npy
    from models.io.matrix_header import matrix_check

    matrix = read_npy(path, f"{what} file", matrix_check(what, path, max_tokens, d_model))
    matrix.flags.writeable = False
    return matrix


def spec_from_args(args: argparse.Namespace, arrays: Mapping[str, np.ndarray] | None = None) -> RunSpec:
    """The RunSpec of parsed options; their files (``--embeddings``, ``--mask-file``, ``--weights`` …)
    are read now, unless ``arrays`` gives what they held; ``--text-file`` is read as the sentence."""
    if getattr(args, "text_file", None):  # a long text as the sentence
        from models.io.text_file import read_text_file

        if getattr(args, "sentence", None) is not None:
            raise InputError("give --sentence or --text-file, not both")
        args = argparse.Namespace(**{**vars(args), "sentence": read_text_file(args.text_file)})
    bare = RunSpec.from_args(args)
    if arrays is not None:
        return RunSpec.from_args(args, arrays)
    held: dict[str, np.ndarray] = {}
    origins: dict[str, str] = {}
    for name, f in ARRAY_FIELDS.items():
        path = getattr(args, f.dest, None)
        if not path:
            continue
        origins[name] = f"{'weights' if name == 'weights' else name.replace('_', ' ')} file {path}"
        if name == "weights":
            from models.engine.weights import read_weights_file

            held |= {f"weights/{k}": a for k, a in read_weights_file(path).items()}
        else:  # an embeddings file's width is checked from its header (the toy's d_model)
            width = bare.d_model if bare.model is None else None
            held[name] = load_matrix(path, name.replace("_", " "), getattr(args, "max_tokens", None), width)
    return RunSpec.from_args(args, held, origins)


