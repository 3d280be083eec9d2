"""Issue 45's table on one card, side by side with ``transformers`` and PyTorch's fused attention.

    python bench/bench_gpu.py                  on a CUDA machine: the issue's sizes (about 15 GB of card)
    python bench/bench_gpu.py --cpu-smoke      tiny sizes on the CPU: checks the script runs (figures mean nothing)
    ... [--device cuda:1] [--threads 1]

Rows (each timed after a warm-up, the card synchronised around every timing):

- generation, ms per token: a random LLaMA of Llama-3.2-1B's shape (16 layers, d_model 2048, 32 query / 8
  key-value heads, MLP 8192, vocabulary 32,000; 1.1 B parameters, 4.4 GB float32) made with ``transformers``
  and saved; ours (``models.generate.generate``, without and with the logit lens) against ``transformers``'
  ``generate`` (sdpa), greedy, the same prompt; whether the tokens are the same; checkpoint reads per token;
- one layer's trace (the last) at 2,047 and 8,191 tokens, including the hand-over (every head's weights
  read to the host, head by head, as the window does), against ``transformers``' eager forward with every
  layer's attention at 2,047 (at 8,191 that would be 137 GB: its sdpa forward without attention instead);
- the overview at 16,384 and 131,072 tokens (the toy, 8 heads, d_model 512, causal, distinct words): every
  head's weights reduced to 1024 × 1024 keeping every peak (``models.engine.reduce.reduce_heads``), against
  ``F.scaled_dot_product_attention`` in float32 on the same Q, K, V;
- the atlas: texts per second over 64 texts of ~64 tokens (``api.Model.atlas``, detectors off), against
  ``transformers``' eager forward with attentions, text by text;
- an 8B-shape LLaMA in bfloat16 (Llama-3.1-8B's config, its 32 layers: a 16 GB checkpoint written to a
  temporary folder): its last layer traced and 2 tokens generated, against ``transformers``-bf16's ids, and
  its residency on a 24 GB budget (bench/bench_llama8b.py).

A row that fails prints its error in the table and the next one runs. Imports no Qt (the GPU box has none).

No figure was measured on a GPU yet (docs/gpu.md); a GPU session runs this as is and fills that page in.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

FULL = dict(layers=16, d=2048, heads=32, kv=8, ffn=8192, vocab=32000, traces=(2047, 8191),
            overviews=(16384, 131072), texts=64, words=64, tokens=16, prompt=64)  # fmt: skip
SMOKE = dict(layers=2, d=64, heads=4, kv=2, ffn=128, vocab=1000, traces=(63, 127),
             overviews=(512, 1024), texts=4, words=16, tokens=4, prompt=8)  # fmt: skip


class Clock:
    """Wall time of a block, the device synchronised before and after (CUDA runs asynchronously)."""

    def __init__(self, device) -> None:
        import torch

        self.sync = torch.cuda.synchronize if device.type == "cuda" else (lambda: None)

    def __call__(self, fn, repeat: int = 1) -> tuple[float, object]:
        """(median seconds over ``repeat`` runs, the last result)."""
        times, out = [], None
        for _ in range(repeat):
            self.sync()
            t0 = time.perf_counter()
            out = fn()
            self.sync()
            times.append(time.perf_counter() - t0)
        return statistics.median(times), out


def write_llama(folder: Path, s: dict) -> int:
    """A random LlamaForCausalLM of the shape ``s`` saved to ``folder``, a word-level tokenizer; parameters."""
    import torch
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    config = LlamaConfig(hidden_size=s["d"], intermediate_size=s["ffn"], num_hidden_layers=s["layers"],
                         num_attention_heads=s["heads"], num_key_value_heads=s["kv"], vocab_size=s["vocab"],
                         max_position_embeddings=16384, tie_word_embeddings=False, bos_token_id=0,
                         eos_token_id=s["vocab"] - 1, pad_token_id=0)  # fmt: skip
    model = LlamaForCausalLM(config).eval()
    model.save_pretrained(folder, safe_serialization=True)
    tok = Tokenizer(models.WordLevel({f"w{i}": i for i in range(s["vocab"])}, unk_token="w0"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    tok.save(str(folder / "tokenizer.json"))
    return sum(p.numel() for p in model.parameters())


def words(n: int, vocab: int, start: int = 0) -> list[int]:
    return [1 + (start + 7 * i) % (vocab - 2) for i in range(n)]  # distinct while n < vocab


def generation_rows(folder: Path, device, s: dict, clock: Clock) -> list[tuple]:
    import torch
    from transformers import LlamaForCausalLM, LogitsProcessor, LogitsProcessorList

    from models.generate import GenerateSettings, generate
    from models.pretrained import load_model
    from models.pretrained.checkpoint import Checkpoint

    ids = words(s["prompt"], s["vocab"])
    ref = LlamaForCausalLM.from_pretrained(folder, dtype=torch.float32, attn_implementation="sdpa").to(device).eval()
    stamps: list[float] = []

    class Stamp(LogitsProcessor):
        def __call__(self, input_ids, scores):
            clock.sync()
            stamps.append(time.perf_counter())
            return scores

    x = torch.tensor([ids], device=device)
    with torch.no_grad():
        ref.generate(x, max_new_tokens=2, do_sample=False)  # warm up
        out = ref.generate(x, max_new_tokens=s["tokens"], min_new_tokens=s["tokens"], do_sample=False,
                           logits_processor=LogitsProcessorList([Stamp()]))  # fmt: skip
    theirs_ms = statistics.median((b - a) * 1000 for a, b in zip(stamps, stamps[1:]))
    theirs_ids = out[0, len(ids) :].tolist()
    del ref
    free(device)  # its card memory given back before ours sizes its layer budget from what is free
    reads = [0]
    read = Checkpoint.read

    def counted(ckpt, key):
        reads[0] += 1
        return read(ckpt, key)

    Checkpoint.read = counted
    model = load_model(folder, device=str(device))
    prompt = " ".join(f"w{i}" for i in ids)
    generate(model, prompt, GenerateSettings(max_new_tokens=2))  # warm up: every layer read once
    rows = [("generation (ms per token)", "transformers generate, sdpa", theirs_ms, 1.0, "–")]
    for lens in (False, True):
        marks: list[int] = []
        gen = generate(model, prompt, GenerateSettings(max_new_tokens=s["tokens"], lens=lens),
                       on_step=lambda done, total, m=marks: m.append(reads[0]))  # fmt: skip
        per_token = max(b - a for a, b in zip(marks, marks[1:]))
        same = "same tokens" if gen.ids[len(ids) :] == theirs_ids else "OTHER TOKENS"
        label = f"ours, {'with' if lens else 'without'} the lens"
        ms = statistics.median(gen.step_ms[1:])
        rows.append(("", label, ms, ms / theirs_ms, f"{same}; {per_token} tensors read per token; {gen.weights}"))
    Checkpoint.read = read
    return rows


def trace_rows(folder: Path, device, s: dict, clock: Clock) -> list[tuple]:
    import torch
    from transformers import LlamaForCausalLM

    from models.pretrained import load_model

    model = load_model(folder, device=str(device))
    layer = model.num_layers - 1
    rows = []
    for n in s["traces"]:
        sentence = " ".join(f"w{i}" for i in words(n, s["vocab"], start=11))

        def ours(sentence=sentence):
            trace = model.trace(sentence, layer)
            stage = trace["weights"]
            for h in range(model.num_heads):
                stage.head(h)  # handed over to the host, head by head
            return trace

        model.trace(sentence[:200], layer)  # warm up
        ours_s, _ = clock(ours)
        eager = n <= 4096
        kind = "eager" if eager else "sdpa"
        ref = LlamaForCausalLM.from_pretrained(folder, dtype=torch.float32, attn_implementation=kind).to(device).eval()
        ids = torch.tensor([model.encode(sentence).ids], device=device)
        with torch.no_grad():
            ref(ids[:, :16], output_attentions=eager)  # warm up
            theirs_s, _ = clock(lambda ref=ref, ids=ids, eager=eager: ref(ids, output_attentions=eager))
        ref = None  # freed before the next size
        free(device)
        what = "transformers eager forward, every layer's attention" if eager else "transformers sdpa forward"
        rows.append((f"one layer's trace, {ids.shape[1]:,} tokens (s)", what, theirs_s, 1.0, "–"))
        rows.append(("", "ours: the last layer, its weights handed over", ours_s, ours_s / theirs_s, ""))
    return rows


def overview_rows(device, s: dict, clock: Clock) -> list[tuple]:
    import torch
    import torch.nn.functional as F

    from models.config import AttentionConfig, AttentionRequest
    from models.engine.pipeline import run
    from models.engine.reduce import reduce_heads

    rows = []
    for n in s["overviews"]:
        cfg = AttentionConfig(heads=8, d_model=512, mask="causal", max_tokens=n, device=device.type)
        req = AttentionRequest(config=cfg, sentence=" ".join(f"w{i}" for i in range(n)))  # distinct words
        trace = run(req)
        q, k, v = (torch.from_numpy(trace[name].array).to(device)[None] for name in ("q", "k", "v"))
        F.scaled_dot_product_attention(q[..., :64, :], k[..., :64, :], v[..., :64, :], is_causal=True)  # warm up
        fused_s, _ = clock(lambda q=q, k=k, v=v: F.scaled_dot_product_attention(q, k, v, is_causal=True))
        q = k = v = None  # freed before the overview
        ours_s, _ = clock(lambda trace=trace: reduce_heads(trace["weights"], list(range(8)), max_side=1024))
        rows.append((f"overview, {n:,} tokens (s)", "F.scaled_dot_product_attention, float32", fused_s, 1.0, "–"))
        rows.append(("", "ours: every head's weights at 1024², every peak", ours_s, ours_s / fused_s, ""))
        trace = None
    return rows


def atlas_rows(folder: Path, device, s: dict, clock: Clock) -> list[tuple]:
    import torch
    from transformers import LlamaForCausalLM

    from models import api

    texts = [" ".join(f"w{i}" for i in words(s["words"], s["vocab"], start=97 * t)) for t in range(s["texts"])]
    model = api.load(folder, device=device.type)
    model.atlas(texts[:1], detectors=False)  # warm up
    ours_s, _ = clock(lambda: model.atlas(texts, detectors=False))
    ref = LlamaForCausalLM.from_pretrained(folder, dtype=torch.float32, attn_implementation="eager").to(device).eval()
    ids = [torch.tensor([model.engine.encode(t).ids], device=device) for t in texts]

    def theirs():
        with torch.no_grad():
            for x in ids:
                ref(x, output_attentions=True)

    theirs_s, _ = clock(theirs)
    n = len(texts)
    return [("atlas (texts per second)", "transformers eager forward with attentions", n / theirs_s, 1.0, "–"),
            ("", "ours: every head's metrics, detectors off", n / ours_s, ours_s / theirs_s, "")]  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cpu-smoke", action="store_true", help="tiny sizes on the CPU: only checks that it runs")
    parser.add_argument("--device", default="cuda", help="the card (default cuda)")
    parser.add_argument("--threads", type=int, default=1, help="torch threads (the CPU's share)")
    parser.add_argument("--llama8b-layers", type=int, default=32, help="layers of the 8B shape built (default all 32)")
    args = parser.parse_args()
    import torch
    from transformers.utils import logging

    logging.disable_progress_bar()
    torch.set_num_threads(args.threads)
    s = SMOKE if args.cpu_smoke else FULL
    device = torch.device("cpu" if args.cpu_smoke else args.device)
    if device.type == "cuda" and not torch.cuda.is_available():
        sys.exit("error: no CUDA device; on a CPU, run with --cpu-smoke")
    smoke = "CPU (smoke sizes: the figures mean nothing)"
    card = torch.cuda.get_device_name(device) if device.type == "cuda" else smoke
    clock = Clock(device)
    rows: list[tuple] = []
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        try:
            params = write_llama(folder, s)
            print(f"{card}; torch {torch.__version__}; LLaMA {s['layers']} layers, d_model {s['d']}, "
                  f"{s['heads']}/{s['kv']} heads, MLP {s['ffn']}, vocabulary {s['vocab']}: "
                  f"{params / 1e9:.2f} B parameters\n")  # fmt: skip
        except Exception as exc:  # noqa: BLE001 - the rows that need it say so, the others run
            rows.append(failed("the 1.2B-shape LLaMA", exc))
        sections = (("generation (ms per token)", lambda: generation_rows(folder, device, s, clock)),
                    ("one layer's trace", lambda: trace_rows(folder, device, s, clock)),
                    ("overview", lambda: overview_rows(device, s, clock)),
                    ("atlas (texts per second)", lambda: atlas_rows(folder, device, s, clock)),
                    ("8B-shape LLaMA, bfloat16", lambda: llama8b_rows(device, args, s is SMOKE)))  # fmt: skip
        for name, section in sections:
            try:
                rows += section()
            except Exception as exc:  # noqa: BLE001 - a row that fails prints its error, the table goes on
                rows.append(failed(name, exc))
            free(device)
    print("| figure | what | value | time ÷ the reference's | notes |")
    print("|---|---|---:|---:|---|")
    for figure, what, value, ratio, notes in rows:
        shown = f"{value:.4g}" if isinstance(value, float) and value == value else "–"
        times = f"{ratio:.2f}×" if isinstance(ratio, float) and ratio == ratio else "–"
        print(f"| {figure} | {what} | {shown} | {times} | {notes} |")


def failed(name: str, exc: BaseException) -> tuple:
    """A row saying what failed, in one line."""
    text = str(exc).strip().splitlines()
    return (name, "FAILED", float("nan"), float("nan"), f"{type(exc).__name__}: {text[0] if text else ''}")


def free(device) -> None:
    """What a section left behind, freed before the next one (the card's cache too)."""
    import gc

    import torch

    gc.collect()
    if device.type == "cuda":
        torch.cuda.empty_cache()


def llama8b_rows(device, args, smoke: bool) -> list[tuple]:
    """Issue 45's target row: an 8B-shape LLaMA in bfloat16, traced and generated on the card against
    transformers-bf16 (bench/bench_llama8b.py: the whole 32 layers unless ``--llama8b-layers``)."""
    import bench_llama8b

    config = bench_llama8b.SMOKE if smoke else bench_llama8b.LLAMA_31_8B
    t0 = time.perf_counter()
    lines = bench_llama8b.run(config, 2 if smoke else args.llama8b_layers, device.type)
    seconds = time.perf_counter() - t0
    rows = [("8B-shape LLaMA, bfloat16 (s, all of it)", "built, saved, transformers-bf16 and ours", seconds,
             float("nan"), "")]  # fmt: skip
    return rows + [("", what, float("nan"), float("nan"), value) for what, value in lines]

if __name__ == "__main__":
    main()
