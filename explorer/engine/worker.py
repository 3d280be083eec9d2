"""The only bridge to the torch engine: one long-lived thread, the latest request wins.

The GUI thread calls :meth:`ComputeWorker.submit` and returns at once. The thread computes the
trace, converts the stage on screen to uint8 colour indices (explorer.images.stage_image) and emits
:attr:`ComputeWorker.result_ready`. A newer submit bumps the generation; the running computation
sees that at its next stage boundary (``should_stop``) and is abandoned.

Runners are looked up by request type: a :class:`~models.runspec.RunSpec` (what the window
submits) goes to a real model (loaded once, then cached here, on this thread) or, as the toy
engine's ``AttentionRequest``, to the toy engine (with its edits: explorer.engine.edited_runner). Another
kind of request only needs one more entry in ``runners``: ``(request, should_stop) -> AttentionTrace``.
A result carries the RunSpec that made it, as traced (``RunSpec.as_traced``).
"""

from __future__ import annotations

import dataclasses
import os
import threading
import time
import traceback
from collections.abc import Callable, Mapping
from dataclasses import dataclass

import torch
from PySide6.QtCore import QThread, Signal

from explorer.engine.edited_runner import run_edited
from explorer.engine.long_render import Overviews, is_long, streams
from explorer.engine.pretrained_runner import PretrainedRunner
from explorer.engine.stage_render import stage_image
from explorer.executor import EXECUTOR
from explorer.images.stage_image import MAX_DISPLAY_SIDE
from explorer.run import DisplayTrace
from models.config import AttentionRequest, Cancelled, InputError
from models.engine import pipeline
from models.engine.trace import AttentionTrace
from models.memory import OUT_OF_MEMORY, is_out_of_memory
from models.reads.params import pretrained_params, toy_params
from models.runspec import RunSpec

Runner = Callable[[object, Callable[[], bool]], AttentionTrace]
# Traces up to this many float elements in total are converted whole before they are shown
# (a few milliseconds), so stepping is instant. Bigger ones show the focused stage first and
# convert the rest in the background, most likely next stages first.
CONVERT_ALL_BELOW = 4_000_000
# The GUI says when it is busy (explorer.widgets.frames: a change's phases still to come), the one
# signal this thread consults, through set_gui_busy. Two things wait for it, each at most so long:
# - reading a model (WAIT_FOR_GUI_S): reading the tokenizer holds the interpreter lock for ~40 ms,
#   and the GUI thread, laying out and repainting the panels after a model is chosen, waited for
#   it (a 50-100 ms stall on choosing a model, for ~25 ms of the GUI's own work);
# - converting the other stages after a result (QUIET_AFTER_RESULT_S): converting takes the lock in
#   short bursts, and each burst the GUI thread waits for (up to sys.getswitchinterval(), 5 ms) is
#   multiplied by the hundred Python calls of one paint, which doubled the window's longest stall.
#   Handing over a result makes the GUI busy until it says otherwise (it has painted the result).
WAIT_FOR_GUI_S = 0.1
QUIET_AFTER_RESULT_S = 0.25
PROGRESS_EVERY_S = 0.05


def leave_a_core_to_the_gui() -> None:
    """torch on every core but one, so that painting never queues behind a computation
    (torch's thread count is the process's: the survey worker calls this too)."""
    torch.set_num_threads(max(1, (os.cpu_count() or 2) - 1))


@dataclass(frozen=True)
class _Job:
    generation: int
    request: object
    focus_stage: str | None
    fit_colours: bool | str = False  # the colour scale its images are made for (the state's, handed over)


class ComputeWorker(QThread):
    """Owns torch. Signals are emitted from this thread and delivered queued to the GUI thread."""

    result_ready = Signal(object)  # DisplayTrace
    stage_ready = Signal(int, object)  # generation, StageImage
    # generation, [(head, StageImage of a zoomed region (exact cells))]: the regions asked together,
    # sent together, so that the GUI paints them in one turn and one repaint
    regions_ready = Signal(int, object)
    # generation, one-line message, kind: "load" (the model could not be opened), "input"
    # (anything else the user can fix), "error" (an engine bug)
    failed = Signal(int, str, str)
    load_progress = Signal(float, str)  # fraction 0..1, what is being read (while a model loads)

    def __init__(self, runners: Mapping[type, Runner] | None = None, parent=None):
        """``runners`` are added to (or replace) the defaults for their request types."""
        super().__init__(parent)
        self.setObjectName("ComputeWorker")
        # Called on this thread while a model loads; the signal carries it to the GUI thread.
        self.models = PretrainedRunner(progress=self.report_load, before_load=self._wait_for_gui)
        self._last_report = 0.0
        self._runners: dict[type, Runner] = {AttentionRequest: pipeline.run, RunSpec: self._run_spec}
        self._runners.update(runners or {})
        self._cond = threading.Condition()
        self._job: _Job | None = None
        self._wanted: list[tuple] = []  # (generation, stage, colour scale or None) the GUI is waiting for
        self._regions: dict[int, tuple] = {}  # head -> (generation, stage, region): the latest zoom per plot
        self._trash: list[object] = []  # old traces to free here rather than on the GUI thread
        self._stopping = False
        self._latest = 0
        self._gui_busy = False  # the GUI's frame scheduler has phases to come (set_gui_busy)
        self._quiet_until = 0.0  # time.monotonic() until which background conversion waits for the GUI
        self._long = Overviews()  # a long input's overview, streamed (this thread only)

    # --- GUI thread ------------------------------------------------------------------------
    @property
    def latest_generation(self) -> int:
        return self._latest

    def submit(self, request: object, focus_stage: str | None = None, fit_colours: bool | str = False) -> int:
        """Queue ``request`` (replacing any queued one), its images made for the colour scale
        ``fit_colours`` (the state's: this thread keeps no copy of its own), and return its generation."""
        with self._cond:
            self._latest += 1
            self._job = _Job(self._latest, request, focus_stage, fit_colours)
            self._cond.notify()
            return self._latest

    def prepare(self, generation: int, stage_name: str, fit_colours: bool | str | None = None) -> None:
        """Ask for a stage's image ahead of the background order (lazy conversion), or again
        for another colour scale (``fit_colours``, which then applies to that run's later conversions
        and regions too; None: the scale it has)."""
        with self._cond:
            self._wanted.append((generation, stage_name, fit_colours))
            self._cond.notify()

    def prepare_regions(self, generation: int, stage_name: str, asks: list) -> None:
        """Reduce each ask's region (``(head, (r0, r1, c0, c1), levels, pixels)``: rows r0:r1, cols
        c0:c1 of that head) again from the exact values, at the view's device ``pixels`` (rows,
        cols): what is painted is never scaled down again, and a zoomed heatmap is sharp down to
        single cells. The latest ask per head wins; asks made together are answered together."""
        with self._cond:
            for head, region, levels, pixels in asks:
                self._regions[head] = (generation, stage_name, tuple(region), levels, pixels)
            self._cond.notify()

    def set_gui_busy(self, busy: bool) -> None:
        """The GUI is busy showing a change, or no longer (explorer.widgets.frames.Frames.busy_changed,
        on the GUI thread): while it is, a model is not read and stages are not converted in the
        background (see WAIT_FOR_GUI_S and QUIET_AFTER_RESULT_S)."""
        with self._cond:
            self._gui_busy = bool(busy)
            self._cond.notify()

    @property
    def gui_busy(self) -> bool:
        """What the GUI said last (True from a result's hand-over until the GUI says it is idle)."""
        return self._gui_busy

    def report_load(self, fraction: float, message: str) -> None:
        """Called on the worker thread while a model loads: progress to the GUI (load_progress) at most
        every PROGRESS_EVERY_S (a model reports each tensor: a hundred repaints of the status line for
        a small one), the end always."""
        now = time.monotonic()
        if fraction >= 1.0 or now - self._last_report >= PROGRESS_EVERY_S:
            self._last_report = now
            self.load_progress.emit(fraction, message)

    def _wait_for_gui(self) -> None:
        self._last_report = 0.0  # a new load's first report always goes
        with self._cond:
            self._cond.wait_for(lambda: not self._gui_busy or self._stopping, WAIT_FOR_GUI_S)

    def _background_allowed(self, current: DisplayTrace | None, todo: list[str]) -> bool:
        """Called with the lock held: convert the rest of the latest trace once it is on screen."""
        if not todo or current is None or current.generation != self._latest:
            return False
        return not self._gui_busy or time.monotonic() >= self._quiet_until

    def discard(self, old: object) -> None:
        """Let this thread drop ``old``: freeing a trace of hundreds of MB takes milliseconds."""
        with self._cond:
            self._trash.append(old)
            self._cond.notify()

    def stop(self) -> None:
        """Abandon the current work and join the thread."""
        with self._cond:
            self._stopping = True
            self._latest += 1  # makes should_stop() true for a running computation
            self._cond.notify()
        self.wait()

    # --- worker thread ---------------------------------------------------------------------
    def run(self) -> None:
        leave_a_core_to_the_gui()
        # The trace on screen and its stages not converted yet. It stays after a failed or
        # cancelled job: the GUI still shows it and may still ask for its stages.
        current: DisplayTrace | None = None
        todo: list[str] = []
        fit: bool | str = False  # the colour scale the GUI last handed over for the current trace
        while True:
            with self._cond:
                # Background conversion only for the latest trace; a superseded one waits for requests.
                while not (self._stopping or self._job or self._wanted or self._trash or self._regions
                           or self._background_allowed(current, todo)):  # fmt: skip
                    quiet = todo and current is not None and current.generation == self._latest
                    self._cond.wait(max(0.0, self._quiet_until - time.monotonic()) + 0.001 if quiet else None)
                if self._stopping:
                    return
                job, self._job = self._job, None
                wanted, self._wanted = self._wanted, []
                regions, self._regions = self._regions, {}
                trash, self._trash = self._trash, []
            trash.clear()  # the last references to old traces: their memory is freed here
            if job is not None:
                computed = self._compute(job)
                if computed is not None:
                    (current, todo), fit = computed, job.fit_colours
                continue
            if current is None:
                continue
            # A new request interrupts a conversion; the trace on screen still converts when asked,
            # even when a newer request failed and it stays on screen.
            stale = lambda: self._job is not None or self._stopping  # noqa: E731
            # The shown run's stores are the read jobs' too: one job on them at a time (the device queue).
            device = EXECUTOR.device(current.trace.device)
            try:
                with device.turn():
                    self._convert(current, regions, wanted, todo, fit, stale, device)
            except Cancelled:  # a newer request (or a stage asked for) came: it goes first
                pass
            for g, _n, scale in wanted:  # a stage converted for another colour scale: its run's scale now
                fit = scale if g == current.generation and scale is not None else fit

    def _convert(self, current: DisplayTrace, regions: dict, wanted: list, todo: list[str], fit, stale,
                 device) -> None:  # fmt: skip
        """Convert (on this thread, holding the shown run's device queue) the regions and stages the GUI
        asked for, else the next stage of the background order (``todo``, in place)."""
        for g, _n, scale in wanted:
            fit = scale if g == current.generation and scale is not None else fit
        self._serve_regions(current, regions, stale, fit)
        # A converted stage may be asked for again: the colour scale changed since.
        names = [n for g, n, _f in wanted if g == current.generation and n in current.trace]
        background = not names and not regions and self._background_allowed(current, todo)
        if background:
            names = todo[:1]
        for name in dict.fromkeys(names):  # in order, once each
            if name in todo:
                todo.remove(name)
            stage = current.trace[name]
            # A stage or region the GUI asks for interrupts a background conversion (a big one takes a
            # second), another stage a long overview: the interrupted stage goes back to the front of
            # the queue. A long overview serves regions as it goes. A read waiting for the store
            # (hover, focus) has its turn between two bands, then this goes on.
            long = streams(stage)

            def asked(stale=stale, background=background, name=name, long=long) -> bool:
                device.yield_turn()
                if stale():
                    return True
                if long:  # regions are served as it goes; another stage interrupts it
                    return any(n != name for _g, n, _f in self._wanted)
                return background and bool(self._wanted or self._regions)

            try:
                image = self._stage_image(current, stage, asked, fit)
            except Cancelled:
                if background or long:
                    todo.insert(0, name)
                raise
            self.stage_ready.emit(current.generation, image)

    def _serve_regions(self, current: DisplayTrace, regions: dict, stale, fit) -> None:
        """Reduce the regions asked for (the latest per head), and send them together."""
        ready = []
        for head, (generation, name, region, levels, pixels) in regions.items():
            if generation == current.generation and name in current.trace:
                stage = current.trace[name]
                side = tuple(pixels) if pixels else MAX_DISPLAY_SIDE
                image = self._long.region(current.trace, stage, fit, head, region, levels, pixels)
                if image is None:
                    image = stage_image(stage, fit, region=region, heads=[head], should_stop=stale,
                                        levels=levels, max_side=side)  # fmt: skip
                ready.append((head, image))
        if ready:
            self.regions_ready.emit(current.generation, ready)

    def _stage_image(self, current: DisplayTrace, stage, should_stop, fit):
        """A stage's picture; a long input's weights streamed (explorer.engine.long_render), the
        regions asked meanwhile answered between its blocks of rows."""
        if not streams(stage):
            return stage_image(stage, fit, should_stop=should_stop)

        def serve() -> None:
            with self._cond:
                regions, self._regions = self._regions, {}
            self._serve_regions(current, regions, should_stop, fit)

        def emit(image) -> None:
            self.stage_ready.emit(current.generation, image)

        return self._long.stream(current.trace, stage, fit, should_stop, emit, serve)

    def _compute(self, job: _Job) -> tuple[DisplayTrace, list[str]] | None:
        """Run, convert and emit one job; None when it failed or went stale."""
        t0 = time.perf_counter()
        is_stale = lambda: job.generation != self._latest
        try:
            if hasattr(job.request, "resolve"):  # files to read first (explorer.run.FileRequest): here
                job = dataclasses.replace(job, request=job.request.resolve())
            runner = self._runner_for(job.request)
            trace = runner(job.request, is_stale)
            if is_stale():
                return None
            names = list(trace.names)
            focus = job.focus_stage if job.focus_stage in names else names[-1]
            total = sum(s.nbytes // 4 for s in trace.stages)  # shapes only: lazy stages stay uncomputed
            first = names if total <= CONVERT_ALL_BELOW else [] if is_long(trace) else [focus]
            images = {n: stage_image(trace[n], job.fit_colours, should_stop=is_stale) for n in first}
            shown = job.request.as_traced(trace) if isinstance(job.request, RunSpec) else job.request
            display = DisplayTrace(job.generation, trace, images, shown)
        except Exception as exc:  # noqa: BLE001 - every failure becomes a status-bar message
            if not is_stale():  # a stale job's failure (Cancelled included) interests no one
                self.failed.emit(job.generation, _message(exc), _kind(exc))
            return None
        display.params = self._params(job.request, trace)
        display.worker_ms = (time.perf_counter() - t0) * 1000.0
        if is_stale():
            return None
        with self._cond:  # the GUI is busy with it from now until it says otherwise
            self._gui_busy, self._quiet_until = True, time.monotonic() + QUIET_AFTER_RESULT_S
        self.result_ready.emit(display)
        return display, _background_order([n for n in names if n not in display.images], names, focus)

    def _run_spec(self, spec: RunSpec, should_stop: Callable[[], bool]) -> AttentionTrace:
        """A RunSpec: a model's layer, or the toy engine (its request answered by its runner)."""
        if spec.uses_model:
            return self.models(spec, should_stop)
        request = spec.toy_request()
        if spec.edits or spec.difference:
            return run_edited(request, spec.edits, spec.difference, should_stop)
        return self._runner_for(request)(request, should_stop)

    def _params(self, request: object, trace: AttentionTrace):
        """The layer's weights in one form for both engines, for explaining a cell; None if unknown
        (an edited run: its weights are the unedited ones)."""
        try:
            if isinstance(request, AttentionRequest):
                return toy_params(request)
            if not isinstance(request, RunSpec) or request.edits or request.difference:
                return None
            if not request.uses_model:
                return toy_params(request.toy_request())
            model = self.models.model(request.model, request.device)
            c = trace.config
            if c.get("encoder_decoder"):  # one block of an encoder-decoder model
                from models.reads.encdec_params import encdec_params

                return encdec_params(model, trace)
            return pretrained_params(model, c["layer"], len(trace.query_tokens), c["mask"], c["pad_positions"])
        except Exception:  # noqa: BLE001 - the inspector then says it cannot explain; the trace still shows
            return None

    def _runner_for(self, request: object) -> Runner:
        for cls in type(request).__mro__:
            if cls in self._runners:
                return self._runners[cls]
        raise InputError(f"no engine for a {type(request).__name__}")


def _background_order(todo: list[str], names: list[str], focus: str) -> list[str]:
    """Stages nearest the focused one first: those are the ones a user steps to next."""
    at = names.index(focus)
    return sorted(todo, key=lambda n: (abs(names.index(n) - at), names.index(n) < at))


def _kind(exc: BaseException) -> str:
    if isinstance(exc, InputError):
        return getattr(exc, "kind", "input")
    return "input" if isinstance(exc, Cancelled) or is_out_of_memory(exc) else "error"


def _message(exc: BaseException) -> str:
    if isinstance(exc, InputError):
        return str(exc)
    if is_out_of_memory(exc):  # torch raises RuntimeError, not MemoryError: the command line's one line
        return OUT_OF_MEMORY
    if isinstance(exc, Cancelled):
        return "computation cancelled"
    traceback.print_exception(exc)  # an engine bug: keep the traceback for whoever debugs it
    return f"engine error ({type(exc).__name__}): {exc}"
