"""The steps where a head takes a role (or leaves it): a detector's score crossing its threshold
between two consecutive checkpoints, with the loss's change beside it."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

# The score a head must reach on models.reads.detectors' scale to hold the role. TransformerLens's
# detectors divide by every query row, so an induction head that puts all its weight on the right key
# from the second block on scores about 0.5 on a block twice: its threshold is lower.
THRESHOLDS = {"previous": 0.5, "duplicate": 0.5, "induction": 0.3, "sink": 0.5, "retrieval": 0.5}
ROLE_NAMES = {"previous": "previous-token", "duplicate": "duplicate-token"}


@dataclass(frozen=True)
class Event:
    layer: int
    head: int
    role: str
    becomes: bool  # True: takes the role; False: loses it
    step_before: int
    step_after: int
    before: float
    after: float
    loss_before: float = math.nan
    loss_after: float = math.nan
    loss_name: str = "loss"

    def text(self) -> str:
        verb = "becomes" if self.becomes else "stops being"
        role = ROLE_NAMES.get(self.role, self.role)
        article = "an" if role[0] in "aeiou" else "a"
        line = (f"L{self.layer} H{self.head} {verb} {article} {role} head between steps {self.step_before} "
                f"and {self.step_after} ({self.role} score {self.before:.2f} → {self.after:.2f}")  # fmt: skip
        if math.isfinite(self.loss_before) and math.isfinite(self.loss_after):
            line += f"; {self.loss_name.replace('_', ' ')} {self.loss_before:.3f} → {self.loss_after:.3f}"
        return line + ")"


def role_events(steps: list[int], scores: dict[str, np.ndarray], losses: dict[int, float] | None = None,
                thresholds: dict[str, float] | None = None, loss_name: str = "loss") -> list[Event]:  # fmt: skip
    """Every crossing of a role's threshold between consecutive steps, in step order.
    ``scores[role]``: (S, L, h) over ``steps``; ``losses``: step -> loss (for the events' lines)."""
    thresholds = {**THRESHOLDS, **(thresholds or {})}
    losses = losses or {}
    events = []
    for role, limit in thresholds.items():
        if role not in scores:
            continue
        s = np.asarray(scores[role], dtype=np.float64)
        held = np.where(np.isfinite(s), s >= limit, False)
        for t in range(1, len(steps)):
            before, after = steps[t - 1], steps[t]
            for layer, head in zip(*np.nonzero(held[t] != held[t - 1]), strict=True):
                events.append(Event(int(layer), int(head), role, bool(held[t, layer, head]), before, after,
                                    float(s[t - 1, layer, head]), float(s[t, layer, head]),
                                    losses.get(before, math.nan), losses.get(after, math.nan), loss_name))  # fmt: skip
    return sorted(events, key=lambda e: (e.step_after, e.layer, e.head, e.role))
