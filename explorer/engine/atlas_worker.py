"""Compute a head atlas off the GUI thread (explorer.jobs.LatestJob, as the survey and generation
workers); the latest request wins and :meth:`cancel` stops the running one at its next text."""

from __future__ import annotations

from PySide6.QtCore import Signal

from explorer.jobs import LatestJob
from models.reads.atlas import compute_atlas, corpus_lines, count_lines, file_sha256, fill_best_texts, probe_texts


class AtlasWorker(LatestJob):
    """``submit(model, corpus=None, limit=None)``: ``model`` a PretrainedModel or a callable
    returning one (called on the worker); ``corpus`` a text file, one text per line, or None for
    the detectors' probes. Returns the request's generation."""

    progress = Signal(int, int, int)  # generation, texts done, total
    finished = Signal(int, object)  # generation, models.reads.atlas.Atlas
    out_of_memory = "not enough memory for this atlas"

    def submit(self, model, corpus: str | None = None, limit: int | None = None) -> int:
        return super().submit(model, corpus, limit)

    def work(self, generation, should_stop, model, corpus, limit) -> None:
        if callable(model) and not hasattr(model, "layer_weights"):
            model = model()
        if corpus is not None:
            total, texts = count_lines(corpus, limit), corpus_lines(corpus)
            info = {"path": str(corpus), "sha256": file_sha256(corpus)}
        else:
            texts = list(probe_texts(model))
            total, info = len(texts), None
        atlas = compute_atlas(model, texts, limit=limit, should_stop=should_stop,
                              progress=lambda k: self.progress.emit(generation, k, total))  # fmt: skip
        if corpus is not None:
            fill_best_texts(atlas, corpus)
        else:
            atlas.best_text = {i: " ".join(e.tokens) for i, e in texts}
        atlas.manifest["corpus"] = info
        if not should_stop():
            self.finished.emit(generation, atlas)
