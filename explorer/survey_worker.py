"""Compute a whole-model survey off the GUI thread, one layer at a time; the latest request wins.

Each request runs on a superqt worker (Qt's thread pool). Every layer's weights are sent to the
GUI thread with their thumbnails already made (``layer_ready``), so the model view only copies
pixels; then the metrics and the rollout (``finished``). A newer request (or :meth:`cancel`) bumps
the generation: the running one stops at its next layer (``should_stop``) and sends nothing more.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

import numpy as np
from PySide6.QtCore import QObject, Signal
from superqt.utils import create_worker

from models.config import Cancelled, InputError
from models.survey import Survey, complete, norm_shares

from .thumbnails import thumbnail_indices
from .worker import leave_a_core_to_the_gui


class SurveyWorker(QObject):
    started = Signal(int, object, int, int, bool)  # generation, tokens, layers, heads, decoder
    layer_ready = Signal(int, int, object, object)  # generation, layer, weights (h, n, n), thumbnails
    finished = Signal(int, object)  # generation, Survey
    failed = Signal(int, str)  # generation, one-line message

    def __init__(self, parent: QObject | None = None):
        super().__init__(parent)
        self.generation = 0
        self._lock = threading.Lock()
        self._running: dict[int, threading.Event] = {}
        self._jobs: dict[int, object] = {}  # keeps each superqt worker alive until it ends

    def submit(self, model, sentence: str, mask: str | None = None, max_tokens: int | None = None,
               fit_each: bool = True, weighted: bool = False) -> int:  # fmt: skip
        """Survey ``model`` (a PretrainedModel, or a callable returning one, called on the worker:
        e.g. a cached loader) over ``sentence``. Returns the request's generation. ``weighted``:
        the weighted norms ‖α_ij f_h(x_j)‖, each row as shares of its sum, instead of the weights."""
        with self._lock:
            self.generation += 1
            generation = self.generation
            done = self._running[generation] = threading.Event()
        job = create_worker(self._run, generation, model, sentence, mask, max_tokens, fit_each, done, weighted,
                            _start_thread=False)  # fmt: skip
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
        """Cancel and wait for the running request to stop (before the panel goes away)."""
        self.cancel()
        for event in list(self._running.values()):
            event.wait(timeout_s)

    def _current(self, generation: int) -> bool:
        return generation == self.generation

    def _run(self, generation, model, sentence, mask, max_tokens, fit_each, done: threading.Event,
             weighted: bool = False) -> None:  # fmt: skip
        should_stop: Callable[[], bool] = lambda: not self._current(generation)  # noqa: E731
        leave_a_core_to_the_gui()
        try:
            if callable(model) and not hasattr(model, "layer_weights"):
                model = model()
            enc = model.encode(sentence, max_tokens)
            self.started.emit(generation, tuple(enc.tokens), model.num_layers, model.num_heads,
                              model.default_mask == "causal")  # fmt: skip

            def on_layer(layer: int, weights: np.ndarray) -> None:
                if weighted:
                    norm_shares(weights)  # in place: the survey's array holds the shares
                if self._current(generation):
                    self.layer_ready.emit(generation, layer, weights, thumbnail_indices(weights, fit_each))

            enc, weights, notices = model.layer_weights(sentence, mask=mask, should_stop=should_stop,
                                                        max_tokens=max_tokens, on_layer=on_layer,
                                                        weighted=weighted)  # fmt: skip
            if should_stop():
                return
            tokens = tuple(enc.tokens)
            source = f"{model.name} (weighted norms ‖α f(x)‖, rows as shares)" if weighted else model.name
            survey = Survey(weights, tokens, tokens, source, decoder=model.default_mask == "causal",
                            warnings=list(notices))  # fmt: skip
            complete(survey)
            if self._current(generation):
                self.finished.emit(generation, survey)
        except Cancelled:
            pass
        except InputError as exc:
            self.failed.emit(generation, str(exc))
        except MemoryError:
            self.failed.emit(generation, "not enough memory for every layer at this length; use fewer tokens")
        except Exception as exc:  # an engine bug: say so in one line rather than lose the thread
            self.failed.emit(generation, f"internal error: {type(exc).__name__}: {exc}")
        finally:
            with self._lock:
                self._running.pop(generation, None)
            done.set()
