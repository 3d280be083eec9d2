"""Generate off the GUI thread; the latest request wins (the survey worker's pattern).

Each request runs on a superqt worker (Qt's thread pool): the model is loaded (or taken from the
runner's cache) there, generation reports each token (``progress``), and the finished
:class:`~models.generate.Generation` comes back with every matrix the panel shows already built
(``GenerationView``), so the GUI thread only slices and paints. A newer request (or :meth:`cancel`)
stops the running one between tokens.
"""

from __future__ import annotations

import threading

from PySide6.QtCore import QObject, Signal
from superqt.utils import create_worker

from models.config import Cancelled, InputError
from models.generate import GenerateSettings, generate

from .generation_view import GenerationView
from .worker import leave_a_core_to_the_gui


class GenerateWorker(QObject):
    progress = Signal(int, int, int)  # request, tokens done, tokens asked
    finished = Signal(int, object)  # request, GenerationView
    failed = Signal(int, str)  # request, one-line message

    def __init__(self, parent: QObject | None = None):
        super().__init__(parent)
        self.request = 0
        self._lock = threading.Lock()
        self._running: dict[int, threading.Event] = {}
        self._jobs: dict[int, object] = {}

    def submit(self, model, prompt: str, settings: GenerateSettings) -> int:
        """Generate with ``model`` (a PretrainedModel, or a callable returning one, called on the
        worker). Returns the request's number."""
        with self._lock:
            self.request += 1
            request = self.request
            done = self._running[request] = threading.Event()
        job = create_worker(self._run, request, model, prompt, settings, done, _start_thread=False)
        self._jobs[request] = job
        job.finished.connect(lambda r=request: self._jobs.pop(r, None))
        job.start()
        return request

    def run_now(self, model, prompt: str, settings: GenerateSettings) -> int:
        """The same work on the calling thread (tests, screenshots)."""
        with self._lock:
            self.request += 1
            request = self.request
            done = self._running[request] = threading.Event()
        self._run(request, model, prompt, settings, done)
        return request

    def cancel(self) -> None:
        with self._lock:
            self.request += 1

    @property
    def busy(self) -> bool:
        return any(not e.is_set() for e in list(self._running.values()))

    def stop(self, timeout_s: float = 10.0) -> None:
        self.cancel()
        for event in list(self._running.values()):
            event.wait(timeout_s)

    def _run(self, request: int, model, prompt: str, settings: GenerateSettings, done: threading.Event) -> None:
        def stale() -> bool:
            return request != self.request

        leave_a_core_to_the_gui()
        try:
            if callable(model) and not hasattr(model, "encode"):
                model = model()
            def on_step(done_tokens: int, total: int) -> None:
                if not stale():
                    self.progress.emit(request, done_tokens, total)

            if model.default_mask != "causal":  # an encoder: its predictions at the mask tokens
                from models.generate.mlm import predict_masks

                result = predict_masks(model, prompt, shown=settings.shown, max_tokens=settings.max_tokens)
                view = GenerationView(result.as_generation(), attention=result.attention, causal=False)
            else:
                view = GenerationView(generate(model, prompt, settings, should_stop=stale, on_step=on_step))
            if not stale():
                self.finished.emit(request, view)
        except Cancelled:
            pass
        except InputError as exc:
            self.failed.emit(request, str(exc))
        except MemoryError:
            self.failed.emit(request, "not enough memory for this generation; ask for fewer tokens")
        except Exception as exc:  # an engine bug: one line rather than a lost thread
            self.failed.emit(request, f"internal error: {type(exc).__name__}: {exc}")
        finally:
            with self._lock:
                self._running.pop(request, None)
            done.set()
