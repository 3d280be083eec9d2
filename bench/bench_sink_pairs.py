"""What a learned sink column costs the lazy n×n stages: one pass over every head's weights and the
head outputs, causal mask, with and without gpt-oss's sink column (which is always visible, so a
block's keys are not cut at the diagonal). Prints seconds; one torch thread."""

import time

import torch

from models.engine import pairs


def run(n: int, heads: int, d: int, sinks: bool) -> float:
    torch.manual_seed(0)
    q, k, v = (torch.randn(heads, n, d) for _ in range(3))
    spec = pairs.PairSpec(q=q, k=k, v=v, head_groups=tuple(range(heads)), mask=pairs.MaskSpec(causal=True),
                          scale=("mul", d**-0.5), sinks=torch.randn(heads) if sinks else None)  # fmt: skip
    store = pairs.PairStore(spec, budget=0)  # nothing kept: every block computed once
    start = time.perf_counter()
    for h in range(heads):
        for _ in store.iter_blocks("weights", h, keep=False):
            pass
    store.head_output()
    return time.perf_counter() - start


if __name__ == "__main__":
    torch.set_num_threads(1)
    for n in (1024, 4096):  # interleaved, best of 3: the machine is shared
        times = [(run(n, 8, 64, False), run(n, 8, 64, True)) for _ in range(3)]
        plain, sink = min(t[0] for t in times), min(t[1] for t in times)
        print(f"n={n:5d}, 8 heads: causal {plain:.2f} s, with the sink column {sink:.2f} s ({sink / plain:.2f}×)")
