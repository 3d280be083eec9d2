"""The shown trace's numbers as the GUI thread has them: blocks of rows, read off the GUI thread.

Hover, numbers in cells and the edit dialog need a few exact floats of the stage on screen. Reading
them may compute (a lazy n×n stage computes its block of rows in torch), so the GUI thread never
reads a stage itself: it looks here, and what is not here yet is asked of the window's read jobs
(explorer.jobs.ReadJobs, handed in duck-typed: ``ask(kind, compute, deliver)``), which read whole
blocks of rows on their thread and hand them back as plain numpy. The latest ask of a kind wins
(a fast hover never queues reads); an answer for another trace than the one now shown is dropped.
A small stage on screen is read whole in advance (:meth:`StageRows.prefetch`), so hovering it is
a cache hit from the first move.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Iterable

import numpy as np

BLOCK_CELLS = 1 << 16  # cells per block of rows read at once (256 KiB of float32)
MAX_BLOCK_ROWS = 64
BUDGET_BYTES = 64 << 20  # blocks kept; the least recently used go first
PREFETCH_CELLS = 1 << 20  # the shown heads of a stage up to this many cells are read in advance

Want = tuple[str, int, int, int]  # stage name, head (index into the stage's heads), rows r0:r1


def block_rows(cols: int) -> int:
    """Rows per block for a stage with ``cols`` columns: whole rows, about BLOCK_CELLS a block."""
    return max(1, min(MAX_BLOCK_ROWS, BLOCK_CELLS // max(1, cols)))


class StageRows:
    """Blocks of rows of the stages of one trace (``trace``, set by :meth:`follow`)."""

    def __init__(self, jobs=None) -> None:
        """``jobs``: the window's ReadJobs; None reads in the caller's turn (a view on its own)."""
        self.jobs = jobs
        self.trace = None  # the trace the blocks belong to
        self._blocks: OrderedDict[tuple[str, int, int], np.ndarray] = OrderedDict()  # (name, head, block)
        self._bytes = 0

    def follow(self, trace, values: dict | None = None) -> None:
        """The trace now on screen: the blocks of any other are forgotten (and late answers dropped);
        ``values`` (``{stage: [each head's rows]}``, read with the result off the GUI thread) are here at once."""
        if trace is not self.trace:
            self.trace = trace
            self._blocks.clear()
            self._bytes = 0
            for name, heads in (values or {}).items():
                step = self._rows_per_block(name)
                for head, rows in enumerate(heads):
                    for b in range(-(-len(rows) // step)):
                        self._keep((name, head, b), rows[b * step : (b + 1) * step])

    # --- what is here ----------------------------------------------------------------------
    def _rows_per_block(self, name: str) -> int:
        return block_rows(self.trace[name].shape[-1])

    def _keys(self, want: Want) -> list[tuple[str, int, int]]:
        name, head, r0, r1 = want
        step = self._rows_per_block(name)
        return [(name, head, b) for b in range(r0 // step, (max(r1, r0 + 1) - 1) // step + 1)]

    def has(self, wants: Iterable[Want]) -> bool:
        return all(k in self._blocks for w in wants for k in self._keys(w))

    def rows(self, name: str, head: int, r0: int, r1: int) -> np.ndarray | None:
        """Rows ``r0:r1`` of head ``head`` of stage ``name`` when they are all here, else None."""
        if self.trace is None or name not in self.trace:
            return None
        step = self._rows_per_block(name)
        parts = []
        for key in self._keys((name, head, r0, r1)):
            block = self._blocks.get(key)
            if block is None:
                return None
            self._blocks.move_to_end(key)
            start = key[2] * step
            parts.append(block[max(0, r0 - start) : max(0, r1 - start)])
        return np.concatenate(parts) if len(parts) > 1 else parts[0]

    def value(self, name: str, head: int, row: int, col: int) -> float | None:
        rows = self.rows(name, head, row, row + 1)
        return None if rows is None or len(rows) == 0 else float(rows[0, col])

    # --- asking for the rest ---------------------------------------------------------------
    def request(self, kind: str, wants: Iterable[Want], arrived: Callable[[], None]) -> bool:
        """True when every wanted row is here; else ask ``kind`` for the missing blocks (off the GUI
        thread) and call ``arrived()`` once they are here (never for a trace no longer followed).
        Without read jobs the blocks are read now and it returns True (``arrived`` is not called)."""
        trace = self.trace
        if trace is None:
            return False
        missing = sorted({k for w in wants if w[0] in trace for k in self._keys(w) if k not in self._blocks})
        if not missing:
            return True
        steps = {name: self._rows_per_block(name) for name, _h, _b in missing}

        def read() -> tuple[object, list]:  # on the read thread: plain numpy copies of whole blocks
            out = []
            for name, head, b in missing:
                stage = trace[name]
                r0 = b * steps[name]
                out.append(((name, head, b), np.array(stage.rows(head, r0, r0 + steps[name]), np.float32)))
            return trace, out

        def deliver(answer) -> None:
            answered_for, blocks = answer
            if answered_for is not self.trace:  # stale: the trace on screen has changed since
                return
            for key, block in blocks:
                self._keep(key, block)
            arrived()

        if self.jobs is None:
            for key, block in read()[1]:
                self._keep(key, block)
            return True
        self.jobs.ask(kind, read, deliver)
        return False

    def prefetch(self, names: Iterable[str], heads: Iterable[int]) -> bool:
        """Read the shown heads of the stages ``names`` whole, in advance, when they are small (at
        most PREFETCH_CELLS cells together); True when asked (or already here)."""
        if self.trace is None:
            return False
        names, heads = [n for n in names if n in self.trace], list(heads)
        wants = [(n, h, 0, self.trace[n].shape[-2]) for n in names for h in heads]
        if sum((r1 - r0) * self.trace[n].shape[-1] for n, _h, r0, r1 in wants) > PREFETCH_CELLS:
            return False
        self.request("prefetch", wants, lambda: None)
        return True

    def _keep(self, key: tuple[str, int, int], block: np.ndarray) -> None:
        if key in self._blocks:
            return
        self._blocks[key] = block
        self._bytes += block.nbytes
        while self._bytes > BUDGET_BYTES and len(self._blocks) > 1:
            _, old = self._blocks.popitem(last=False)
            self._bytes -= old.nbytes
