"""A long input's weights on the worker thread: the overview streams in, the zoomed regions come at once.

At 131,072 tokens a head's overview takes minutes (models.engine.long_rows computes each row's statistics
on the way, never the map). So the worker does not wait for it before showing the result: the
overview of every head is streamed in row blocks, top to bottom, head after head, and sent to the
GUI as it grows (a :class:`StageImage` with its ``progress`` below 1) when the GUI asks for the next
picture (:meth:`Overviews.want`: the first at once, each next one a ``frames.later`` after the last
came, at most one a second and at most 5 % of the time spent making them: this module keeps no
clock, it only measures what a picture cost); any newer request cancels it (``should_stop``).
Between two blocks of rows the zoomed regions the GUI asked for are answered (``serve``): a region
of a few hundred rows and keys is computed from Q and K (and its rows' statistics) at once, and the
whole matrix at the plot's own pixels is made from the overview itself (each pixel the peak of whole
overview pixels: no second pass).
"""

from __future__ import annotations

import time
from collections.abc import Callable

import numpy as np

from explorer.widgets.frames import DELAYS
from models.engine.colour_index import MAX_DISPLAY_SIDE, StageImage
from models.engine.pixels import block_step
from models.engine.reduce import Reduced
from models.engine.trace import AttentionTrace, Stage
from models.reads.picture import stage_image

SHARE = 0.05  # at most this share of the time spent making its pictures (and one each "stream every": frames.DELAYS)


def is_long(trace: AttentionTrace) -> bool:
    """True when some stage of ``trace`` is a long store's: its pictures are made only when asked."""
    return any(s.store is not None and getattr(s.store, "long", None) is not None for s in trace.stages)


class Overviews:
    """The overview of the long stage being streamed (or streamed last): every head's peaks so far."""

    def __init__(self) -> None:
        self._of: tuple[int, str] | None = None  # (id of the trace, stage name)
        self._stage: Stage | None = None
        self.peaks: list[np.ndarray] = []
        self.rows_done: list[int] = []
        self.step = (1, 1)
        self.wanted = True  # the GUI asks for the next picture (want(), on its thread): sent after the next block
        self.cost_s = 0.0  # how long the last picture took to make (measured here, read by the GUI's next ask)

    def want(self) -> None:
        """The GUI wants the overview as it is now (a ``frames.later`` after the last picture came)."""
        self.wanted = True

    def next_ask_ms(self) -> int:
        """How long after a picture came the GUI asks for the next: a second, or longer when making one
        took more than SHARE of that."""
        return max(DELAYS["stream every"], round(self.cost_s / SHARE * 1000))

    def _start(self, trace: AttentionTrace, stage: Stage) -> None:
        n_rows, n_cols = stage.shape[-2:]
        kr, kc = block_step(n_rows, MAX_DISPLAY_SIDE), block_step(n_cols, MAX_DISPLAY_SIDE)
        self._of, self._stage, self.step = (id(trace), stage.name), stage, (kr, kc)
        shape = (-(-n_rows // kr), -(-n_cols // kc))
        self.peaks = [np.zeros(shape, np.float32) for _ in range(stage.heads)]
        self.rows_done = [0] * stage.heads

    def _reduced(self, heads: list[int]) -> list[Reduced]:
        n_rows, n_cols = self._stage.shape[-2:]
        return [Reduced(self.peaks[h], None, (0, n_rows, 0, n_cols), self.step,
                        (float("nan"), float(self.peaks[h].max()))) for h in heads]  # fmt: skip

    def progress(self) -> float:
        height = self.peaks[0].shape[0] if self.peaks else 1
        return sum(self.rows_done) / max(1, height * len(self.peaks))

    def stream(self, trace: AttentionTrace, stage: Stage, fit, should_stop, emit: Callable[[StageImage], None],
               serve: Callable[[], None]) -> StageImage:  # fmt: skip
        """Every head's overview, head after head; ``emit`` gets the picture so far now and then,
        ``serve`` is called between blocks of rows (the regions asked meanwhile). An overview of this
        stage interrupted (another stage asked for, then this one again) goes on from the pixel rows it
        had done: at 65,536 tokens the neighbours' strips, asked near its end, made it start again from
        the top, and the screenshot's deadline saw no progress (issue 50, point 1)."""
        if self._stage is not stage or self._of != (id(trace), stage.name):  # (the stage held: its id not reused)
            self._start(trace, stage)
        heads = list(range(stage.heads))
        self.wanted = True  # the first block of rows is sent at once
        n_rows, n_cols = stage.shape[-2:]
        kr = self.step[0]

        def grew(head: int, base: int, rows: int, peak: np.ndarray) -> None:
            done = self.rows_done[head] - base  # whole pixel rows of ``peak`` copied already
            self.peaks[head][base + done : base + rows] = peak[done:rows]
            self.rows_done[head] = base + rows
            serve()
            if self.wanted:
                self.wanted = False
                t0 = time.perf_counter()  # measured only: the GUI decides when the next is asked for
                emit(stage_image(stage, fit, reduced=self._reduced(heads), progress=self.progress()))
                self.cost_s = time.perf_counter() - t0

        for head in heads:
            base = self.rows_done[head]
            if base >= self.peaks[head].shape[0]:
                continue
            region = (base * kr, n_rows, 0, n_cols)  # the pixel rows not done yet, at the same step
            peak = stage.store.long.overview(head, region, self.step, should_stop,
                                             lambda rows, peak, head=head, base=base: grew(head, base, rows, peak))
            grew(head, base, peak.shape[0], peak)  # fmt: skip
        return stage_image(stage, fit, reduced=self._reduced(heads))

    def region(self, trace: AttentionTrace, stage: Stage, fit, head: int, region, levels, pixels) -> StageImage | None:
        """The whole matrix of ``head`` at the plot's ``pixels``, from the overview (each pixel the peak
        of whole overview pixels; exact, as peaks of peaks); None when the overview cannot answer
        (another stage, or a region smaller than the whole: computed exactly instead)."""
        n_rows, n_cols = stage.shape[-2:]
        if self._of != (id(trace), stage.name) or tuple(region) != (0, n_rows, 0, n_cols):
            return None
        rows_px, cols_px = pixels if pixels else (MAX_DISPLAY_SIDE, MAX_DISPLAY_SIDE)
        peak = self.peaks[head]
        fr, fc = block_step(peak.shape[0], rows_px), block_step(peak.shape[1], cols_px)
        height, width = -(-peak.shape[0] // fr), -(-peak.shape[1] // fc)
        padded = np.zeros((height * fr, width * fc), np.float32)  # weights ≥ 0: zeros never win a peak
        padded[: peak.shape[0], : peak.shape[1]] = peak
        coarse = padded.reshape(height, fr, width, fc).max(axis=(1, 3))
        step = (self.step[0] * fr, self.step[1] * fc)
        reduced = Reduced(coarse, None, (0, n_rows, 0, n_cols), step, (float("nan"), float(coarse.max())))
        image = stage_image(stage, fit, region=tuple(region), heads=[head], levels=levels, reduced=[reduced],
                            progress=self.rows_done[head] / max(1, peak.shape[0]))  # fmt: skip
        return image
