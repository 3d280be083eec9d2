"""Compute a head atlas off the GUI thread (superqt worker, as explorer/survey_worker.py); the latest
request wins and :meth:`cancel` stops the running one at its next text."""

from __future__ import annotations

import threading

from PySide6.QtCore import QObject, Signal
from superqt.utils import create_worker

from models.atlas import compute_atlas, corpus_lines, count_lines, file_sha256, fill_best_texts, probe_texts
from models.config import Cancelled, InputError

from .worker import leave_a_core_to_the_gui


class AtlasWorker(QObject):
    progress = Signal(int, int, int)  # generation, texts done, total
    finished = Signal(int, object)  # generation, models.atlas.Atlas
    failed = Signal(int, str)  # generation, one-line message

    def __init__(self, parent: QObject | None = None):
        super().__init__(parent)
        self.generation = 0
        self._lock = threading.Lock()
        self._running: dict[int, threading.Event] = {}
        self._jobs: dict[int, object] = {}

    def submit(self, model, corpus: str | None = None, limit: int | None = None) -> int:
        """``model``: a PretrainedModel or a callable returning one (called on the worker);
        ``corpus``: a text file, one text per line, or None for the detectors' probes."""
        with self._lock:
            self.generation += 1
            generation = self.generation
            done = self._running[generation] = threading.Event()
        job = create_worker(self._run, generation, model, corpus, limit, done, _start_thread=False)
        self._jobs[generation] = job
        job.finished.connect(lambda g=generation: self._jobs.pop(g, None))
        job.start()
        return generation

    def cancel(self) -> None:
        with self._lock:
            self.generation += 1

    @property
    def busy(self) -> bool:
        return any(not e.is_set() for e in list(self._running.values()))

    def stop(self, timeout_s: float = 10.0) -> None:
        self.cancel()
        for event in list(self._running.values()):
            event.wait(timeout_s)

    def _run(self, generation, model, corpus, limit, done: threading.Event) -> None:
        should_stop = lambda: generation != self.generation  # noqa: E731
        leave_a_core_to_the_gui()
        try:
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
        except Cancelled:
            pass
        except InputError as exc:
            self.failed.emit(generation, str(exc))
        except MemoryError:
            self.failed.emit(generation, "not enough memory for this atlas")
        except Exception as exc:  # an engine bug: one line rather than a lost thread
            self.failed.emit(generation, f"internal error: {type(exc).__name__}: {exc}")
        finally:
            with self._lock:
                self._running.pop(generation, None)
            done.set()
