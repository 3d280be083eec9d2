"""Compute a whole-model survey off the GUI thread, one layer at a time; the latest request wins.

Each request runs on the app's executor (explorer/executor.py). Every layer's weights are sent to the
GUI thread with their thumbnails already made as the panel shows them (its side, its toggles:
``layer_ready``), so the model view only copies pixels; then the metrics and the rollout
(``finished``). A newer request (or :meth:`cancel`) bumps the generation: the running one stops
at its next layer (``should_stop``) and sends nothing more.
"""

from __future__ import annotations

import numpy as np
from PySide6.QtCore import Signal

from explorer.images.thumbnails import kept_tokens, layer_thumbnails, tile_side
from explorer.jobs import LatestJob
from models.reads.survey import Survey, complete, norm_shares


class SurveyWorker(LatestJob):
    """``submit(model, sentence, mask=None, max_tokens=None, fit_each=True, ...)``: survey ``model``
    (a PretrainedModel, or a callable returning one, called on the worker: e.g. a cached loader)
    over ``sentence``; returns the request's generation."""

    started = Signal(int, object, int, int, bool, object)  # generation, tokens, layers, heads, decoder, key tokens
    layer_ready = Signal(int, int, object, object)  # generation, layer, weights (h, n, n), thumbnails
    finished = Signal(int, object)  # generation, Survey
    out_of_memory = "not enough memory for every layer at this length; use fewer tokens"
    view_pixels: tuple[int, int] | None = None  # the model view's (rows, cols) device pixels, set by the GUI

    def submit(self, model, sentence: str, mask: str | None = None, max_tokens: int | None = None,
               fit_each: bool = True, weighted: bool = False, special_out: bool = False,
               sink_out: bool = False) -> int:  # fmt: skip
        """``weighted``: the weighted norms ‖a_ij f_h(x_j)‖, each row as shares of its sum, instead of
        the weights; ``special_out``, ``sink_out``: the thumbnails without the special tokens, with the
        first key out of the colour scale (the panel's toggles, explorer.images.thumbnails)."""
        return super().submit(model, sentence, mask, max_tokens, fit_each, weighted, special_out, sink_out)

    def work(self, generation, should_stop, model, sentence, mask, max_tokens, fit_each, weighted=False,
             special_out=False, sink_out=False) -> None:  # fmt: skip
        if callable(model) and not hasattr(model, "layer_weights"):
            model = model()
        enc = model.encode(sentence, max_tokens)
        # the keys' tokens: the queries' own, but for an encoder-decoder's cross block (the source)
        keys = tuple(model.key_tokens(sentence, max_tokens)) if hasattr(model, "key_tokens") else tuple(enc.tokens)
        self.started.emit(generation, tuple(enc.tokens), model.num_layers, model.num_heads,
                          model.default_mask == "causal", keys)  # fmt: skip

        side = tile_side(self.view_pixels, model.num_layers, model.num_heads)  # as the model view's
        square = keys == tuple(enc.tokens) and not getattr(model, "cross", False)  # cross: none left out
        keep = kept_tokens(enc.tokens, model.default_mask == "causal") if special_out and square else None

        def on_layer(layer: int, weights: np.ndarray) -> None:
            if weighted:
                norm_shares(weights)  # in place: the survey's array holds the shares
            if self.is_current(generation):
                thumbs = layer_thumbnails(weights, fit_each, side, keep, sink_out)
                self.layer_ready.emit(generation, layer, weights, thumbs)

        enc, weights, notices = model.layer_weights(sentence, mask=mask, should_stop=should_stop,
                                                    max_tokens=max_tokens, on_layer=on_layer,
                                                    **({"weighted": True} if weighted else {}))  # fmt: skip
        if should_stop():
            return
        tokens = tuple(enc.tokens)
        source = f"{model.name} (weighted norms ‖a f(x)‖, rows as shares)" if weighted else model.name
        survey = Survey(weights, tokens, keys, source, decoder=model.default_mask == "causal",
                        warnings=list(notices), cross=getattr(model, "cross", False))  # fmt: skip
        complete(survey)
        if self.is_current(generation):
            self.finished.emit(generation, survey)
