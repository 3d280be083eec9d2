"""Benchmark a big checkpoint: a LLaMA-shaped ~1.1 B parameter bf16 model (TinyLlama's shape).

    python bench/bench_big_checkpoint.py [--dir DIR] [--shards 3] [--keep]

Writes the checkpoint with random weights into a temporary folder (about 2.2 GB; nothing is
downloaded or committed), plus a tiny word-level tokenizer.json, then in fresh subprocesses
(a cold start each: the files are first dropped from the page cache with posix_fadvise)
traces layer 0 and layer 21 of a 128-token sentence and prints peak RSS and wall time.

Targets: layer 0 with peak RSS <= 1.5 GiB and <= 5 s from a cold start; layer 21 with peak RSS
<= the bf16 weights of layers 0..21 + 1 GiB.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

HIDDEN, LAYERS, HEADS, KV_HEADS, FFN, VOCAB = 2048, 22, 32, 4, 5632, 32000
TOKENS = 128
GIB = 1 << 30
WORDS = [f"w{i}" for i in range(1000)]


def layer_shapes(i: int) -> dict[str, tuple[int, ...]]:
    d, dk = HIDDEN, HIDDEN // HEADS
    p = f"model.layers.{i}."
    return {
        p + "self_attn.q_proj.weight": (d, d),
        p + "self_attn.k_proj.weight": (KV_HEADS * dk, d),
        p + "self_attn.v_proj.weight": (KV_HEADS * dk, d),
        p + "self_attn.o_proj.weight": (d, d),
        p + "mlp.gate_proj.weight": (FFN, d),
        p + "mlp.up_proj.weight": (FFN, d),
        p + "mlp.down_proj.weight": (d, FFN),
        p + "input_layernorm.weight": (d,),
        p + "post_attention_layernorm.weight": (d,),
    }


def write_checkpoint(folder: Path, shards: int) -> int:
    """Write config.json, tokenizer.json and the bf16 shards; returns the parameter count."""
    import torch
    from safetensors.torch import save_file
    from tokenizers import Tokenizer, models, pre_tokenizers, processors

    config = {
        "model_type": "llama",
        "hidden_size": HIDDEN,
        "intermediate_size": FFN,
        "num_hidden_layers": LAYERS,
        "num_attention_heads": HEADS,
        "num_key_value_heads": KV_HEADS,
        "max_position_embeddings": 2048,
        "vocab_size": VOCAB,
        "rms_norm_eps": 1e-5,
        "rope_theta": 10000.0,
        "torch_dtype": "bfloat16",
    }
    (folder / "config.json").write_text(json.dumps(config))
    vocab = {"<unk>": 0, "<s>": 1, "</s>": 2, **{w: i + 3 for i, w in enumerate(WORDS)}}
    tok = Tokenizer(models.WordLevel(vocab, unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    tok.post_processor = processors.TemplateProcessing(single="<s> $A", special_tokens=[("<s>", 1)])
    tok.save(str(folder / "tokenizer.json"))

    g = torch.Generator().manual_seed(0)

    def rand(shape):
        if len(shape) == 1:
            return torch.ones(shape, dtype=torch.bfloat16)
        return (torch.randn(shape, generator=g) * 0.02).to(torch.bfloat16)

    per_shard = -(-LAYERS // shards)
    weight_map, params = {}, 0
    for s in range(shards):
        name = f"model-{s + 1:05d}-of-{shards:05d}.safetensors"
        shapes = {}
        if s == 0:
            shapes["model.embed_tokens.weight"] = (VOCAB, HIDDEN)
        for i in range(s * per_shard, min(LAYERS, (s + 1) * per_shard)):
            shapes.update(layer_shapes(i))
        if s == shards - 1:
            shapes["model.norm.weight"] = (HIDDEN,)
            shapes["lm_head.weight"] = (VOCAB, HIDDEN)
        tensors = {k: rand(v) for k, v in shapes.items()}
        params += sum(t.numel() for t in tensors.values())
        save_file(tensors, str(folder / name))
        del tensors
        weight_map.update(dict.fromkeys(shapes, name))
    index = {"metadata": {"total_size": 2 * params}, "weight_map": weight_map}
    (folder / "model.safetensors.index.json").write_text(json.dumps(index))
    return params


def drop_page_cache(folder: Path) -> None:
    """Evict the files from the page cache (no root needed for clean pages) for a cold read."""
    for path in folder.iterdir():
        with open(path, "rb") as f:
            os.fsync(f.fileno())
            os.posix_fadvise(f.fileno(), 0, 0, os.POSIX_FADV_DONTNEED)


CHILD = r"""
import json, sys, time
start = time.perf_counter()
sys.path.insert(0, {root!r})
from models.pretrained import load_model
import torch
torch.set_num_threads({threads})
model = load_model({folder!r}, device="cpu")
loaded = time.perf_counter() - start
sentence = " ".join("w%d" % (i * 7 % 1000) for i in range({tokens} - 1))
trace = model.trace(sentence, {layer}, max_tokens={tokens})
total = time.perf_counter() - start
# VmHWM (peak resident set) starts afresh with this process, unlike ru_maxrss, which a child
# inherits from the parent that forked it (the parent held a shard while writing it)
peak = [int(l.split()[1]) * 1024 for l in open("/proc/self/status") if l.startswith("VmHWM")][0]
print(json.dumps(dict(n=len(trace.query_tokens), load=loaded, total=total, peak=peak,
                      reads=model.arch.layers.reads)))
"""


def measure(folder: Path, layer: int, threads: int) -> dict:
    drop_page_cache(folder)
    code = CHILD.format(
        root=str(ROOT), folder=str(folder), layer=layer, tokens=TOKENS, threads=threads
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout
    return json.loads(out.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dir", help="where to write the checkpoint (default: a temp folder)")
    parser.add_argument("--shards", type=int, default=3)
    parser.add_argument("--threads", type=int, default=max(1, os.cpu_count() or 1))
    parser.add_argument("--keep", action="store_true", help="keep the checkpoint afterwards")
    args = parser.parse_args()
    base = Path(args.dir) if args.dir else Path(tempfile.mkdtemp(prefix="big-ckpt-"))
    folder = base / "tinyllama-shaped"
    try:
        if not (folder / "model.safetensors.index.json").is_file():
            folder.mkdir(parents=True, exist_ok=True)
            print(f"writing a random bf16 checkpoint into {folder} ...", flush=True)
            params = write_checkpoint(folder, args.shards)
        else:
            index = json.loads((folder / "model.safetensors.index.json").read_text())
            params = index["metadata"]["total_size"] // 2
        size = sum(p.stat().st_size for p in folder.glob("*.safetensors"))
        layer_bytes = 2 * sum(
            _numel(s) for s in layer_shapes(0).values()
        )  # bf16 bytes of one layer
        print(f"checkpoint: {params / 1e9:.2f} B parameters, {size / 1e9:.2f} GB bf16, "
              f"{args.shards} shards, {layer_bytes / 1e6:.0f} MB per layer")  # fmt: skip
        for layer in (0, LAYERS - 1):
            r = measure(folder, layer, args.threads)
            if layer == 0:
                target = 1.5 * GIB
                ok = r["peak"] <= target and r["total"] <= 5.0
                goal = "target <= 1.50 GiB and <= 5 s"
            else:
                target = (layer + 1) * layer_bytes + GIB
                ok = r["peak"] <= target
                goal = f"target <= {target / GIB:.2f} GiB (layers 0..{layer} + 1 GiB)"
            print(
                f"trace layer {layer:2d} at {r['n']} tokens, cold start: peak RSS "
                f"{r['peak'] / GIB:.2f} GiB, {r['total']:.2f} s (load {r['load']:.2f} s), "
                f"{r['reads']} layers read; {goal}: {'ok' if ok else 'MISSED'}"
            )
    finally:
        if not args.keep and not args.dir:
            shutil.rmtree(base, ignore_errors=True)


def _numel(shape) -> int:
    n = 1
    for s in shape:
        n *= s
    return n


if __name__ == "__main__":
    main()
