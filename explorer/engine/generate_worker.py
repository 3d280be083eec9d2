"""Generate off the GUI thread; the latest request wins (explorer.jobs.LatestJob).

Each request runs on the app's executor (explorer/executor.py): the model is loaded (or taken from the
runner's cache) there, generation reports each token (``progress``), and the finished
:class:`~models.generate.Generation` comes back with every matrix the panel shows already built
(``GenerationView``, its thumbnails at the side the model view asks for), so the GUI thread only
slices and paints. A newer request (or :meth:`cancel`)
stops the running one between tokens.
"""

from __future__ import annotations

from PySide6.QtCore import Signal

from explorer.engine.generation_view import GenerationView
from explorer.images.thumbnails import tile_side
from explorer.jobs import LatestJob
from models.engine.finite import refuse_nonfinite
from models.generate import GenerateSettings, generate
from models.generate.finite import SCORES, check_generation


class GenerateWorker(LatestJob):
    """``submit(model, prompt, settings)``: generate with ``model`` (a PretrainedModel, or a callable
    returning one, called on the worker); returns the request's number."""

    progress = Signal(int, int, int)  # request, tokens done, tokens asked
    finished = Signal(int, object)  # request, GenerationView
    out_of_memory = "not enough memory for this generation; ask for fewer tokens"
    view_pixels: tuple[int, int] | None = None  # the model view's (rows, cols) device pixels, set by the GUI

    @property
    def request(self) -> int:
        """The newest request's number (the generation of :class:`LatestJob`)."""
        return self.generation

    def submit(self, model, prompt: str, settings: GenerateSettings) -> int:
        return super().submit(model, prompt, settings)

    def run_now(self, model, prompt: str, settings: GenerateSettings) -> int:
        return super().run_now(model, prompt, settings)

    def work(self, request, stale, model, prompt: str, settings: GenerateSettings) -> None:
        if callable(model) and not hasattr(model, "encode"):
            model = model()
        def on_step(done_tokens: int, total: int) -> None:
            if not stale():
                self.progress.emit(request, done_tokens, total)

        side = tile_side(self.view_pixels, model.num_layers, model.num_heads)  # as the model view's
        if model.default_mask != "causal":  # an encoder: its predictions at the mask tokens
            from models.generate.mlm import predict_masks

            result = predict_masks(model, prompt, shown=settings.shown, max_tokens=settings.max_tokens)
            refuse_nonfinite(result.attention, "the attention", SCORES, ("layer", "head", "query", "key"))
            view = GenerationView(check_generation(result.as_generation()), attention=result.attention, causal=False,
                                  side=side)  # fmt: skip
        else:
            gen = generate(model, prompt, settings, should_stop=stale, on_step=on_step)
            view = GenerationView(check_generation(gen), side=side)  # no NaN on screen: one line instead
        if not stale():
            self.finished.emit(request, view)
