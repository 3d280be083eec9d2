"""Heads -> small uint8 thumbnails for the model view (numpy only: runs on the worker or the GUI).

A thumbnail is at most ``side`` pixels a side: the device pixels one thumbnail gets in the model
view (:func:`tile_side`, again after every resize), ``THUMB`` where no view is known. Larger
matrices are reduced as every view reduces them (models.engine.pixels: each pixel its block's largest
weight, peaks enlarged to 3 × 3 pixels), and coloured with the one index layout of
models.engine.colour_index (0..126 the colour map, 254 NaN), so the model view's thumbnails paint
exactly as the stepper's heatmaps.
"""

from __future__ import annotations

import numpy as np

from explorer.images.sink_scale import first_key_out_of_scale
from models.engine.colour_index import MASKED_INDEX, to_indices
from models.engine.pixels import block_peaks, block_step, enlarge_peaks
from models.reads.survey import special_token_mask

THUMB = 64
MIN_SIDE, MAX_SIDE = 8, 256  # a thumbnail's side in device pixels, whatever the view's size
READABLE_SIDE = 56  # a thumbnail's least side where its view can scroll (the encoder-decoder window)
GAP = 3  # device pixels between thumbnails
EMPTY_INDEX = MASKED_INDEX  # gaps between thumbnails and layers not computed yet (weights are never −∞)


def tile_side(view_pixels: tuple[int, int] | None, layers: int, heads: int) -> int:
    """The largest thumbnail side with which ``layers × heads`` thumbnails and their gaps fit a
    view of ``(rows, cols)`` device pixels (so each is drawn at its own pixels, never scaled down),
    within MIN_SIDE..MAX_SIDE; THUMB when the view's size is not known."""
    if not view_pixels or layers < 1 or heads < 1:
        return THUMB
    rows, cols = view_pixels
    side = min((cols - (heads - 1) * GAP) // heads, (rows - (layers - 1) * GAP) // layers)
    return int(min(MAX_SIDE, max(MIN_SIDE, side)))


def _pixels(n_q: int, n_k: int, side: int) -> tuple[int, int]:
    """The pixels a thumbnail of ``n_q × n_k`` cells asks for: ``side`` for the longer side, both
    sides reduced by the same step so that a thumbnail keeps the matrix's shape."""
    if max(n_q, n_k) <= side:
        return side, side
    step = -(-max(n_q, n_k) // side)
    return -(-n_q // step), -(-n_k // step)


def thumbnail_steps(n_q: int, n_k: int, side: int = THUMB) -> tuple[int, int]:
    """Cells per thumbnail pixel (rows, columns) of an ``n_q × n_k`` matrix at ``side``."""
    side_q, side_k = _pixels(n_q, n_k, side)
    return block_step(n_q, side_q), block_step(n_k, side_k)


def thumbnail_shape(n_q: int, n_k: int, side: int = THUMB) -> tuple[int, int]:
    """The (rows, cols) pixels of an ``n_q × n_k`` matrix's thumbnail at ``side``, computed from
    the sizes alone (nothing reduced: the model view lays out its mosaic with it)."""
    k_q, k_k = thumbnail_steps(n_q, n_k, side)
    return -(-n_q // k_q), -(-n_k // k_k)


def thumbnail_indices(a: np.ndarray, fit_each: bool = True, side: int = THUMB,
                      tops: np.ndarray | None = None) -> np.ndarray:  # fmt: skip
    """``a (h, n_q, n_k)`` weights -> ``(h, t_q, t_k)`` uint8 colour indices (stage_image's layout).

    ``fit_each``: each head from 0 to its own largest weight (so diffuse heads stay visible);
    otherwise 0 to 1 for all; ``tops (h,)``: each head's own top, given (a generation's thumbnails
    keep the whole sequence's scale while its rows appear). NaN becomes stage_image's NaN index."""
    a = np.asarray(a, dtype=np.float32)
    small, step = block_peaks(a, *_pixels(*a.shape[-2:], side))
    if step != (1, 1):
        small = enlarge_peaks(small, signed=False)
    if tops is not None:
        top = np.asarray(tops, dtype=np.float64).reshape(-1)
    elif fit_each:
        top = np.where(np.isfinite(small), small, -np.inf).max(axis=(-2, -1), initial=-np.inf).astype(np.float64)
    else:
        top = np.ones(small.shape[0])
    top = np.where(top > 0, top, 1.0)  # no weight above 0 (or none finite): 0..1
    # All heads in one call (each with its own top): a loop of per-head calls cost ~0.15 ms a head
    # of Python, 6 ms a generation step on a 6 × 6 model.
    out, _ = to_indices(small, None, (0.0, top[:, None, None]), log=False)
    return out


def kept_tokens(tokens, decoder: bool) -> np.ndarray | None:
    """"Leave out special tokens": the tokens kept (a bool mask), or None to keep them all (none is
    special, or none would be left)."""
    keep = ~special_token_mask(tokens, decoder)
    return None if keep.all() or not keep.any() else keep


def layer_thumbnails(a: np.ndarray, fit_each: bool, side: int, keep: np.ndarray | None = None,
                     sink_out: bool = False) -> np.ndarray:  # fmt: skip
    """One layer ``a (h, n_q, n_k)`` as the survey shows it: the rows and keys of ``keep`` only
    (square attention), the first key out of the colour scale with ``sink_out``
    (explorer/images/sink_scale.py), at ``side``. The survey worker makes them as layers arrive,
    the survey panel's reads after a resize or a toggle: never the GUI thread."""
    shown = a if keep is None else a[:, keep][:, :, keep]
    return thumbnail_indices(first_key_out_of_scale(shown) if sink_out else shown, fit_each, side=side)
