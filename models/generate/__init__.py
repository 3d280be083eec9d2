"""Generate with a decoder and keep what the explorer shows: every step's attention rows, the
next-token choices and the logit lens (Qt-free, no transformers)::

    from models.generate import GenerateSettings, generate
    gen = generate(load_model("gpt2"), "The cat", GenerateSettings(max_new_tokens=10))
    gen.attention()      # (L, h, n, n) over the prompt and the generated tokens
    gen.steps[0].top_tokens, gen.lens_ids   # next-token choices, the logit lens (L, n): every cell
    gen.lens.column(gen.n - 1)               # the lens of one position over every layer: only those cells
"""

from models.generate.head import OutputHead, load_head
from models.generate.loop import eos_ids, generate, output_head
from models.generate.result import LENS_TOP, Generation, Lens, Step
from models.generate.sampling import GenerateSettings, sampling_distribution

__all__ = [
    "LENS_TOP",
    "GenerateSettings",
    "Generation",
    "Lens",
    "OutputHead",
    "Step",
    "eos_ids",
    "generate",
    "load_head",
    "output_head",
    "sampling_distribution",
]
