"""No NaN in a generation (issue 36): before its files are written or the Generate window shows it,
every number it holds is checked by the one gate (:func:`models.engine.finite.refuse_nonfinite`). A model
whose scores overflow float32 made NaN attention and probabilities; ``generate`` then stopped on
a ValueError traceback writing its JSON, and the window showed ``nan``."""

from __future__ import annotations

import numpy as np

from models.engine.finite import refuse_nonfinite
from models.generate.lens import LOGITS
from models.generate.result import Generation

SCORES = "the queries and keys are too large for their dot products"
__all__ = ["LOGITS", "SCORES", "check_generation"]


def check_generation(gen: Generation) -> Generation:
    """``gen``, or one InputError line naming the first number that is NaN or ±∞."""
    for p, row in enumerate(gen.rows):  # (L, h, p + 1)
        refuse_nonfinite(row, f"the attention of position {p}", SCORES, ("layer", "head", "key"))
    for s, step in enumerate(gen.steps):
        probs = np.asarray([*step.top_probs, *([] if step.chosen_prob is None else [step.chosen_prob])], np.float64)
        refuse_nonfinite(probs, f"the next-token probabilities of step {s}", LOGITS)
    return gen  # the lens' cells are checked as they are computed (models.generate.lens)
