"""Long inputs of a decoder (issue 34): ``bench/bench_long.py --model [random-llama|FOLDER] [n ...]``.

Each size in a fresh process (its peak RSS its own), torch on 1 thread. The default model is a random
LLaMA whose positions reach 131,072 (2 layers, d_model 32, 2 heads sharing one key/value head, built
with transformers into a temporary folder); the last layer is traced. Per size: the trace (every layer
below run with fused attention, never an n × n tensor; the traced layer's Q, K, V); PyTorch's fused
attention forward over the traced layer's heads (SDPA, causal); a 256 × 256 tile of every head near
the last row (its rows' statistics computed then); the last row of head 0 and its largest relative
error against a float64 softmax of the same scores; with ``--overview`` every head's overview (the
peak of each pixel's block, 1024²); the peak RSS. Prints a table; asserts nothing.
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

SIZES = (16384, 32768, 131072)

CHILD = r"""
import json, sys, time
sys.path.insert(0, sys.argv[1])
import torch
torch.set_num_threads(1)
import torch.nn.functional as F
from models.pretrained import load_model

folder, n, overview = sys.argv[2], int(sys.argv[3]), sys.argv[4] == "1"
model = load_model(folder, device="cpu")
vocab = sorted(model.tokenizer.tokenizer.get_vocab())
words = [w for w in vocab if w.isalnum()][:50] or vocab[:50]
text = " ".join(words[(i * 7919) % len(words)] for i in range(n))
layer = model.num_layers - 1
out = {"n": n, "heads": model.num_heads, "layers": model.num_layers}
t = time.perf_counter()
trace = model.trace(text, layer, max_tokens=n)
out["trace_s"] = time.perf_counter() - t
n = out["n"] = len(trace.query_tokens)
w = trace["weights"]
store = w.store
out["long"] = store.long is not None
q = torch.from_numpy(trace["q_rotated" if "q_rotated" in trace else "q"].array)
k = torch.from_numpy(trace["k_rotated" if "k_rotated" in trace else "k"].array)
v = torch.from_numpy(trace["v"].array)
rep = q.shape[0] // k.shape[0]
k_all, v_all = k.repeat_interleave(rep, 0), v.repeat_interleave(rep, 0)
t = time.perf_counter()
F.scaled_dot_product_attention(q[None], k_all[None], v_all[None], is_causal=True, scale=trace.config["scale"])
out["sdpa_s"] = time.perf_counter() - t
r1 = n
t = time.perf_counter()
for h in range(store.heads):
    store.region("weights", h, max(0, r1 - 256), r1, max(0, r1 - 456), max(256, r1 - 200))
out["tile_s"] = time.perf_counter() - t
t = time.perf_counter()
row = torch.from_numpy(w.rows(0, n - 1, n)[0, :n]).double()
out["row_s"] = time.perf_counter() - t
s = (q[0, n - 1].double() @ k_all[0].double().T) * trace.config["scale"]
want = torch.softmax(s, 0)
if store.n_k > n:  # a learned sink: one more logit in the softmax
    want = torch.softmax(torch.cat([s, store.spec.sinks[0:1].double()]), 0)[:n]
big = want > 1e-6 * want.max()
out["row_err"] = float(((row - want).abs()[big] / want[big]).max())
if overview:
    from models.engine.reduce import reduce_head
    t = time.perf_counter()
    for h in range(store.heads):
        reduce_head(w, h, 1024, signed=False)
    out["overview_s"] = time.perf_counter() - t
status = open("/proc/self/status").read().split("\n")
out["peak_rss_gib"] = int(next(l for l in status if l.startswith("VmHWM")).split()[1]) / 2**20
print(json.dumps(out))
"""


def random_llama(folder: Path) -> None:
    """A random LLaMA whose positions reach 131,072, with a word-level tokenizer (one token a word)."""
    import torch
    import transformers
    from tokenizers import Tokenizer, models, pre_tokenizers

    words = [f"w{i}" for i in range(50)]
    vocab = {"[UNK]": 0, **{w: i + 1 for i, w in enumerate(words)}}
    config = transformers.LlamaConfig(vocab_size=len(vocab), hidden_size=32, intermediate_size=64,
                                      num_hidden_layers=2, num_attention_heads=2, num_key_value_heads=1,
                                      max_position_embeddings=131072, initializer_range=0.2)  # fmt: skip
    torch.manual_seed(0)
    transformers.LlamaForCausalLM(config).eval().save_pretrained(folder)
    tokenizer = Tokenizer(models.WordLevel(vocab, unk_token="[UNK]"))
    tokenizer.pre_tokenizer = pre_tokenizers.Whitespace()
    tokenizer.save(str(folder / "tokenizer.json"))


def main(argv: list[str], root: Path) -> None:
    """``argv`` after ``--model``: the model (``random-llama`` or a folder), then sizes, ``--overview``."""
    overview = "--overview" in argv
    argv = [a for a in argv if a != "--overview"]
    name = argv[0] if argv and not argv[0].isdigit() else "random-llama"
    sizes = [int(a) for a in argv if a.isdigit()] or SIZES
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp) if name == "random-llama" else Path(name)
        if name == "random-llama":
            random_llama(folder)
        print(f"code: {root}\nmodel: {name}, the last layer traced, 1 torch thread")
        print(f"{'n':>7}  {'trace':>7}  {'SDPA':>7}  {'tile':>7}  {'last row':>8}  {'rel.err':>7}  {'overview':>8}  "
              f"{'peak':>8}")  # fmt: skip
        for n in sizes:
            t = time.perf_counter()
            done = subprocess.run([sys.executable, "-c", CHILD, str(root), str(folder), str(n), str(int(overview))],
                                  capture_output=True, text=True)  # fmt: skip
            if done.returncode:
                print(f"{n:>7}  failed: {done.stderr.strip().splitlines()[-1] if done.stderr else done.returncode}")
                continue
            r = json.loads(done.stdout.strip().splitlines()[-1])
            over = f"{r['overview_s']:.1f}s" if "overview_s" in r else "—"
            print(f"{r['n']:>7}  {r['trace_s']:>6.1f}s  {r['sdpa_s']:>6.1f}s  {r['tile_s'] * 1e3:>5.0f}ms  "
                  f"{r['row_s'] * 1e3:>6.0f}ms  {r['row_err']:>7.1e}  {over:>8}  {r['peak_rss_gib']:>4.2f} GiB"
                  f"   ({time.perf_counter() - t:.0f} s)")  # fmt: skip
