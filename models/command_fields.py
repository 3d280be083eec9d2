"""The options of the commands beside ``export`` (``generate``, ``atlas``, ``train``), as rows of the
same kind as :data:`models.fields.FIELDS`, read by the same converter (``add_arguments``,
``check_ranges``, ``check_text``). What takes a model takes the table's own model rows (``--model``,
``--step``, ``--device``, ``--max-tokens``: :func:`models.fields.rows`), so ``--step first|last|N``
works wherever ``--model`` does. Torch-free: the window's command line reads these rows too (its
``--generate`` takes ``--max-new-tokens``).
"""

from __future__ import annotations

from models.fields import MODEL_OPTIONS, Field, rows
from models.limits import bounds

MAX_NEW_TOKENS = 4096  # models/generate/sampling.py checks a GenerateSettings against the same
MAX_SHOWN = 50
TRAIN_SEEDS = 2**32 - 1  # numpy's seed range (the training data)

NEW_TOKENS = Field("max_new_tokens", "generate", "model", "tokens to generate (fewer if an end token comes)",
                   type=int, default=20, low=1, high=MAX_NEW_TOKENS, metavar="N",
                   aliases=("--new-tokens",))  # the window's older name  # fmt: skip
OUT = Field("out", "output", "both", "folder to create", metavar="DIR")
FORCE = Field("force", "output", "both", "replace a previous export of this tool (never other files)", type=None,
              flag=True, default=False)  # fmt: skip

GENERATE_ROWS: tuple[Field, ...] = (
    *rows(*MODEL_OPTIONS),
    Field("prompt", "generate", "model", "the text to continue", text=True),
    NEW_TOKENS,
    Field("temperature", "generate", "model", "0: greedy; above 0: sample with this temperature", type=float,
          default=0.0, low=0.0),
    Field("top_k", "generate", "model", "sampling: keep the k most likely tokens (default: all)", type=int, low=1),
    Field("top_p", "generate", "model", "sampling: keep the most likely tokens up to this mass (default: all)",
          type=float),
    Field("seed", "generate", "model", "sampling: the random seed (same seed, same tokens)", type=int, default=0,
          **bounds("seed")),
    Field("top", "generate", "model", "next tokens kept per step", type=int, default=10, low=1, high=MAX_SHOWN,
          metavar="K"),
    OUT,
    FORCE,
    Field("json", "output", "both", "print the generated text and ids as JSON", type=None, flag=True, default=False),
)  # fmt: skip

ATLAS_ROWS: tuple[Field, ...] = (
    *rows("model", "step", "device"),
    Field("corpus", "atlas", "model", "a text a line (.txt), JSONL with a \"text\" field (.jsonl), or a folder of .txt "
          "files (a file a text); without it, the detectors' probes", metavar="PATH"),
    Field("limit", "atlas", "model", "read at most N texts (default: all)", type=int, low=1, metavar="N"),
    Field("shard", "scale", "model", "compute only the I-th of N parts of the corpus (its blocks I, I+N, ...) and "
          "write its exact sums to OUT, a file; 'main.py atlas merge' joins the parts", metavar="I/N"),
    Field("block", "scale", "model", "texts a block holds (the unit of parts, resuming and Ray tasks)", type=int,
          default=256, low=1, high=1_000_000, metavar="N"),
    Field("ray", "scale", "model", "run the blocks as Ray tasks: on a local cluster, or the running cluster at "
          "ADDRESS (pip install '.[ray]')", const="local", metavar="ADDRESS"),
    Field("workers", "scale", "model", "Ray workers, each loading the model once (default: the cluster's CPUs)",
          type=int, low=1, high=100_000, metavar="N"),
    Field("seed", "atlas", "model", "the detectors' probes", type=int, default=0, **bounds("seed")),
    Field("no_detectors", "atlas", "model", "leave the detector columns empty (empty cells in heads.csv)",
          type=None, flag=True, default=False),
    Field("quiet", "output", "both", "no progress bar", type=None, flag=True, default=False),
    Field("out", "output", "both", "folder to create (with --shard: the part's file)", metavar="DIR"),
    Field("force", "output", "both", "replace a previous atlas (never other files)", type=None, flag=True,
          default=False),
)  # fmt: skip

TRAIN_ROWS: tuple[Field, ...] = (
    Field("out", "output", "toy", "folder to create", default="induction-run", metavar="DIR"),
    Field("steps", "training", "toy", "training steps", type=int, default=2500, low=1, high=1_000_000),
    Field("seed", "training", "toy", "random seed", type=int, default=0, low=0, high=TRAIN_SEEDS),
)  # fmt: skip
