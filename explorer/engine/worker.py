"""The only bridge to the torch engine: jobs of kind "compute" on the app's one executor, latest wins.

The GUI thread calls :meth:`ComputeWorker.submit` and returns at once. A job on the executor (explorer/
executor.py: this worker's own lane, one at a time, in order; holding the shown run's device queue while
it converts, so that it never computes on a lazy store beside a read) computes the trace, converts the
stage on screen to uint8 colour indices (models.engine.colour_index) and emits ``result_ready``. A newer
submit bumps the generation; the running computation sees that at its next stage boundary
(``should_stop``) and is abandoned. With nothing to do no job runs: an ask, or the GUI going idle,
starts one. The worker has no clock: its two waits for the GUI end when the GUI is idle
(:meth:`set_gui_busy`, from the window's ``Frames``) or, at the latest, at a ``frames.later``; a long
overview's next picture is asked for by a ``frames.later``; a load's progress is thinned by the window.

Runners are looked up by request type: a :class:`~models.runspec.RunSpec` goes to a real model (loaded
once, then cached here) or to the toy engine (with its edits: explorer.engine.edited_runner); another kind
of request needs one more entry in ``runners``: ``(request, should_stop) -> AttentionTrace``. A result
carries the RunSpec that made it, as traced (``RunSpec.as_traced``).
"""

from __future__ import annotations

import dataclasses
import threading
import time
from collections.abc import Callable, Mapping

from PySide6.QtCore import QObject, Signal

from explorer.engine.edited_runner import run_edited
from explorer.engine.job_results import (
    Job,
    background_order,
    failure_kind,
    failure_message,
    first_images,
    leave_a_core_to_the_gui,
    shown_run,
    small_values,
)
from explorer.engine.long_render import Overviews, is_long
from explorer.engine.pretrained_runner import PretrainedRunner
from explorer.executor import EXECUTOR
from explorer.images.plot_pixels import PlotsOnScreen, pixels_for
from explorer.run import DisplayTrace
from explorer.widgets.frames import later
from models.config import AttentionRequest, Cancelled, InputError
from models.engine import pipeline
from models.engine.trace import AttentionTrace
from models.reads.read import ReadRequest, read
from models.run_engine import toy_request
from models.runspec import RunSpec

Runner = Callable[[object, Callable[[], bool]], AttentionTrace]
# Traces up to this many float elements in total are converted whole before they are shown (a few ms), so
# stepping is instant. Bigger ones show the focused stage first, then convert the rest, nearest first.
CONVERT_ALL_BELOW = 4_000_000
# The GUI says when it is busy (explorer.widgets.frames: a change's phases still to come), the one
# signal this worker consults, through set_gui_busy. Two things wait for it, each at most so long
# (a frames.later on the GUI thread ends the wait: the worker has no clock of its own):
# - reading a model ("wait for gui"): reading the tokenizer holds the interpreter lock for ~40 ms,
#   and the GUI thread, laying out and repainting the panels after a model is chosen, waited for
#   it (a 50-100 ms stall on choosing a model, for ~25 ms of the GUI's own work);
# - converting the other stages after a result ("quiet after result"): converting takes the lock in
#   short bursts, and each burst the GUI thread waits for (up to sys.getswitchinterval(), 5 ms) is
#   multiplied by the hundred Python calls of one paint, which doubled the window's longest stall.
#   Handing over a result makes the GUI busy until it says otherwise (it has painted the result).


class ComputeWorker(QObject):
    """Owns torch. Its jobs run on the executor; signals emitted there are delivered queued to the GUI
    thread (where this object lives)."""

    result_ready = Signal(object)  # DisplayTrace
    stage_ready = Signal(int, object)  # generation, StageImage
    # generation, [(head, StageImage of a zoomed region)]: asked together, sent together (one repaint)
    regions_ready = Signal(int, object)
    # generation, one-line message, kind: "load" (the model did not open), "input", "error" (an engine bug)
    failed = Signal(int, str, str)
    load_progress = Signal(float, str)  # fraction 0..1, what is being read (while a model loads)
    # From a job to this object's thread (the GUI's): start the time limit of a wait for the GUI.
    _handed_over = Signal(int)  # a result's generation: its quiet period begins
    _load_waits = Signal()  # a job waits for the GUI before reading a model

    def __init__(self, runners: Mapping[type, Runner] | None = None, parent=None):
        """``runners`` are added to (or replace) the defaults for their request types."""
        super().__init__(parent)
        # Called on the executor while a model loads; the signal carries it to the GUI thread.
        self.models = PretrainedRunner(progress=self.report_load, before_load=self._wait_for_gui)
        self._runners: dict[type, Runner] = {AttentionRequest: pipeline.run, RunSpec: self._run_spec}
        self._runners.update(runners or {})
        self._cond = threading.Condition()
        self._job: Job | None = None
        self._wanted: list[tuple] = []  # (generation, stage, colour scale, PlotsOnScreen or None) the GUI waits for
        self._regions: dict[int, tuple] = {}  # head -> (generation, stage, region): the latest zoom per plot
        self._trash: list[object] = []  # old traces to free off the GUI thread
        self._stopping = False
        self._latest = 0
        self._gui_busy = False  # the GUI's frame scheduler has phases to come (set_gui_busy)
        self._quiet_over = 0  # the generation whose quiet period's time limit has passed
        self._go_ahead = False  # the time limit of the wait before reading a model has passed
        self._scheduled = False  # a job of this worker is queued or running on the executor
        self._idle = threading.Event()  # set while no job of this worker is queued or running
        self._idle.set()
        # Kept between jobs (one at a time: the lane): the trace on screen (after a failed request too),
        # its stages not converted yet, and the colour scale last handed over for it.
        self._current: DisplayTrace | None = None
        self._todo, self._fit, self._plots = [], False, None
        self._long = Overviews()  # a long input's overview, streamed
        self.stage_ready.connect(self._streamed)  # its next picture is asked for on the GUI thread
        self._handed_over.connect(self._limit_quiet)
        self._load_waits.connect(self._limit_load_wait)

    # --- GUI thread ------------------------------------------------------------------------
    @property
    def latest_generation(self) -> int:
        return self._latest

    def submit(self, request: object, focus_stage: str | None = None, fit_colours: bool | str = False,
               plots: PlotsOnScreen | None = None) -> int:
        """Queue ``request`` (replacing any queued one), its images made for the colour scale
        ``fit_colours`` (the state's: the worker keeps no copy of its own) at the device pixels of the
        view's ``plots`` where the new stages are laid out alike (explorer.images.plot_pixels; None: no
        plot yet), and return its generation."""
        with self._cond:
            self._latest += 1
            self._job = Job(self._latest, request, focus_stage, fit_colours, plots)
            self._cond.notify_all()
            generation = self._latest
        self._wake()
        return generation

    def prepare(self, generation: int, stage_name: str, fit_colours: bool | str | None = None,
                plots: PlotsOnScreen | None = None) -> None:
        """Ask for a stage's image ahead of the background order (lazy conversion), or again for another
        colour scale, at the device pixels of the view's ``plots`` laid out for it (``fit_colours``,
        ``plots``: they then apply to that run's later conversions too; None: as it has)."""
        with self._cond:
            self._wanted.append((generation, stage_name, fit_colours, plots))
        self._wake()

    def prepare_regions(self, generation: int, stage_name: str, asks: list) -> None:
        """Reduce each ask's region (``(head, (r0, r1, c0, c1), levels, pixels)``: rows r0:r1, cols
        c0:c1 of that head) again from the exact values, at the view's device ``pixels`` (rows,
        cols): what is painted is never scaled down again, and a zoomed heatmap is sharp down to
        single cells. The latest ask per head wins; asks made together are answered together."""
        with self._cond:
            for head, region, levels, pixels in asks:
                self._regions[head] = (generation, stage_name, tuple(region), levels, pixels)
        self._wake()

    def set_gui_busy(self, busy: bool) -> None:
        """The GUI is busy showing a change, or no longer (explorer.widgets.frames.Frames.busy_changed,
        on the GUI thread): while it is, a model is not read and stages are not converted in the
        background (see the delays "wait for gui" and "quiet after result", frames.DELAYS)."""
        with self._cond:
            self._gui_busy = bool(busy)
            self._cond.notify_all()
        if not busy:
            self._wake()

    # What the GUI said last (True from a result's hand-over until the GUI says it is idle).
    gui_busy = property(lambda self: self._gui_busy)

    def _limit_quiet(self, generation: int) -> None:  # GUI thread: the quiet period's time limit, by Frames
        later("quiet after result", self, lambda: self._end_wait("_quiet_over", max(self._quiet_over, generation)))

    def _limit_load_wait(self) -> None:  # GUI thread: the load's wait for the GUI ends by then at the latest
        later("wait for gui", self, lambda: self._end_wait("_go_ahead", True))

    def _end_wait(self, name: str, value: object) -> None:
        with self._cond:
            setattr(self, name, value)
            self._cond.notify_all()
        self._wake()

    def report_load(self, fraction: float, message: str) -> None:
        """Called on the executor while a model loads: each report to the GUI (load_progress). A model
        reports each tensor: the window thins them to a few a second (a ``frames.throttled``), the
        worker keeps no clock."""
        self.load_progress.emit(fraction, message)

    def _streamed(self, generation: int, image) -> None:  # GUI thread: a long overview's picture came
        if image.progress < 1.0:  # the next one is asked for by Frames, when making it costs little enough
            later(self._long.next_ask_ms(), self, self._long.want)

    def discard(self, old: object) -> None:
        """Let a job drop ``old``: freeing a trace of hundreds of MB takes milliseconds."""
        with self._cond:
            self._trash.append(old)
        self._wake()

    @property
    def idle(self) -> bool:
        return self._idle.is_set()

    stopped = property(lambda self: self._stopping)

    def stop(self, timeout: float = 30.0) -> None:
        """Abandon the current work, take no more, and wait for the running job to end."""
        with self._cond:
            self._stopping = True
            self._latest += 1  # makes should_stop() true for a running computation
            self._cond.notify_all()
        self._idle.wait(timeout)
        EXECUTOR.forget(self)  # its thread goes to the next window's worker

    # --- on the executor -------------------------------------------------------------------
    def _wake(self) -> None:
        """Start a job on the executor unless one is queued or running (it takes what was just asked)."""
        with self._cond:
            if self._scheduled or self._stopping:
                return
            self._scheduled = True
            self._idle.clear()
        EXECUTOR.start(self._work, lane=self)

    def _wait_for_gui(self) -> None:
        with self._cond:
            if not self._gui_busy or self._stopping:
                return
            self._go_ahead = False
        self._load_waits.emit()  # a frames.later ends the wait at the latest (on the GUI thread)
        with self._cond:
            self._cond.wait_for(lambda: not self._gui_busy or self._go_ahead or self._stopping)

    def _background_allowed(self) -> bool:
        """Called with the lock held: convert the rest of the latest trace once it is on screen."""
        current = self._current
        if not self._todo or current is None or current.generation != self._latest:
            return False
        return not self._gui_busy or self._quiet_over >= current.generation

    def _work(self) -> None:
        """The job: what was asked, until nothing is left that may be done now; then it ends (a later
        ask, or the GUI going idle, starts another)."""
        leave_a_core_to_the_gui()
        try:
            while True:
                with self._cond:
                    if self._stopping or not (self._job or self._wanted or self._trash or self._regions
                                              or self._background_allowed()):  # fmt: skip
                        self._scheduled = False
                        self._idle.set()
                        return
                    job, self._job = self._job, None
                    wanted, self._wanted = self._wanted, []
                    regions, self._regions = self._regions, {}
                    trash, self._trash = self._trash, []
                trash.clear()  # the last references to old traces: their memory is freed here
                self._step(job, wanted, regions)
        except BaseException:
            with self._cond:
                self._scheduled = False
                self._idle.set()
            raise

    def _step(self, job: Job | None, wanted: list, regions: dict) -> None:
        if job is not None:
            computed = self._compute(job)
            if computed is not None:
                (self._current, self._todo), self._fit, self._plots = computed, job.fit_colours, job.plots
            return
        current = self._current
        if current is None:
            return
        # A new request interrupts a conversion; the trace on screen still converts when asked (it stays).
        stale = lambda: self._job is not None or self._stopping  # noqa: E731
        # The shown run's stores are the read jobs' too: one job on them at a time (the device queue).
        device = EXECUTOR.device(current.trace.device)
        for g, _n, scale, plots in wanted:  # asked for another colour scale or laid out anew: its run's now
            if g == current.generation:
                self._fit = scale if scale is not None else self._fit
                self._plots = plots if plots is not None else self._plots
        try:
            with device.turn():
                self._convert(current, regions, wanted, self._todo, self._fit, stale, device)
        except Cancelled:  # a newer request (or a stage asked for) came: it goes first
            pass

    def _convert(self, current: DisplayTrace, regions: dict, wanted: list, todo: list[str], fit, stale, device):
        """Convert (holding the shown run's device queue) the regions and stages the GUI asked for, else
        the next stage of the background order (``todo``, in place)."""
        self._serve_regions(current, regions, stale, fit)
        # A converted stage may be asked for again: the colour scale changed since.
        names = [n for g, n, *_ in wanted if g == current.generation and n in current.trace]
        asked_at = {n: p.pixels for g, n, _s, p in wanted if g == current.generation and p is not None}
        with self._cond:
            background = not names and not regions and self._background_allowed()
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
            long = stage.streamed

            def asked(stale=stale, background=background, name=name, long=long) -> bool:
                device.yield_turn()
                if stale():
                    return True
                if long:  # regions are served as it goes; another stage interrupts it
                    return any(n != name for _g, n, *_ in self._wanted)
                return background and bool(self._wanted or self._regions)

            try:
                image = self._stage_image(current, stage, asked, fit, asked_at.get(name))
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
                side = tuple(pixels) if pixels else None
                image = self._long.region(current.trace, stage, fit, head, region, levels, pixels)
                if image is None:
                    asked = ReadRequest(name, heads=(head,), region=region, pixels=side, scale=fit, levels=levels)
                    image = read(current.trace, asked, stale)
                ready.append((head, image))
        if ready:
            self.regions_ready.emit(current.generation, ready)

    def _stage_image(self, current: DisplayTrace, stage, should_stop, fit, pixels=None):
        """A stage's picture at the view's ``pixels`` (the ones it asked at; else its plots', where the
        stage is laid out alike; else, ahead of being shown, MAX_DISPLAY_SIDE); a long input's weights
        streamed (explorer.engine.long_render), the regions asked meanwhile answered between its blocks."""
        if not stage.streamed:
            side = pixels or pixels_for(self._plots, stage)
            return read(current.trace, ReadRequest(stage.name, pixels=side and tuple(side), scale=fit), should_stop)

        def serve() -> None:
            with self._cond:
                regions, self._regions = self._regions, {}
            self._serve_regions(current, regions, should_stop, fit)

        def emit(image) -> None:
            self.stage_ready.emit(current.generation, image)

        return self._long.stream(current.trace, stage, fit, should_stop, emit, serve)

    def _compute(self, job: Job) -> tuple[DisplayTrace, list[str]] | None:
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
            images = first_images(trace, first, focus, job.plots, job.fit_colours, is_stale)
            values = small_values(trace, focus) if total <= CONVERT_ALL_BELOW else {}
            display = DisplayTrace(job.generation, shown_run(self.models, job.request, trace), images, values=values)
        except Exception as exc:  # noqa: BLE001 - every failure becomes a status-bar message
            if not is_stale():  # a stale job's failure (Cancelled included) interests no one
                self.failed.emit(job.generation, failure_message(exc), failure_kind(exc))
            return None
        display.worker_ms = (time.perf_counter() - t0) * 1000.0
        if is_stale():
            return None
        with self._cond:  # the GUI is busy with it from now until it says otherwise
            self._gui_busy = True
        self._handed_over.emit(job.generation)  # its quiet period's time limit starts (frames.later)
        self.result_ready.emit(display)
        # a shown stage left out (no plots yet) is the view's to ask for, not the background's (issue 44)
        made = {*display.images, *([focus] if focus in first else [])}
        return display, background_order([n for n in names if n not in made], names, focus)

    def _run_spec(self, spec: RunSpec, should_stop: Callable[[], bool]) -> AttentionTrace:
        """A RunSpec: a model's layer, or the toy engine (its request answered by its runner)."""
        if spec.uses_model:
            return self.models(spec, should_stop)
        request = toy_request(spec)
        if spec.edits or spec.difference:
            return run_edited(request, spec.edits, spec.difference, should_stop)
        return self._runner_for(request)(request, should_stop)

    def _runner_for(self, request: object) -> Runner:
        for cls in type(request).__mro__:
            if cls in self._runners:
                return self._runners[cls]
        raise InputError(f"no engine for a {type(request).__name__}")
