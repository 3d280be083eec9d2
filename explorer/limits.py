"""The ranges the controls offer, shared by the settings panel and the settings loader.

No Qt and no torch here, so that widgets may import it.
"""

from models.checks import MAX_SEED as MODEL_MAX_SEED
from models.config import SCORES

MASK_CHOICES = ("none", "causal", "padding", "custom")  # custom: painted in the window, or --mask-file
MODEL_MASK_CHOICES = ("default", "none", "causal", "padding")  # a pretrained model: its own mask, or one to compare
SCORE_CHOICES = SCORES
MAX_HEADS = 64
MAX_D_MODEL = 4096
MAX_HEAD_DIM = 1024
MAX_SEED = MODEL_MAX_SEED  # what export takes (torch's 64 bits): a session's seed of 2**40 opens
MAX_LAYER = 9999  # far beyond any model; the layer box is a 32-bit QSpinBox
TEMPERATURE_RANGE = (0.05, 20.0)
