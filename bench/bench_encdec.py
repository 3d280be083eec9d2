"""Benchmark encoder-decoder tracing: a t5-small-size model (random weights, transformers from_config).

    python bench/bench_encdec.py [--runs 3] [--tokens 128]

A 6 + 6-layer, 8-head, d_model 512, gated-gelu T5 (t5-v1_1-small's shape) saved to a temporary folder with a
word-level tokenizer; source and target of ``--tokens`` words each. Prints the load time, the first trace of
each block (the encoder and decoder run for real), a trace from the cache (another layer of the same block),
and every layer of each block in one pass (what `export --all-layers` and the model view's rows compute).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


def build(folder: Path, words: list[str]) -> None:
    import torch
    import transformers
    from tokenizers import Tokenizer, models, pre_tokenizers, processors

    vocab = {t: i for i, t in enumerate(["<pad>", "</s>", "<unk>", *sorted(set(words))])}
    tok = Tokenizer(models.WordLevel(vocab, unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    tok.post_processor = processors.TemplateProcessing(single="$A </s>", special_tokens=[("</s>", 1)])
    torch.manual_seed(0)
    cfg = transformers.T5Config(vocab_size=len(vocab), d_model=512, d_kv=64, d_ff=1024, num_layers=6,
                                num_decoder_layers=6, num_heads=8, feed_forward_proj="gated-gelu")  # fmt: skip
    transformers.T5ForConditionalGeneration(cfg).eval().save_pretrained(folder)
    tok.save(str(folder / "tokenizer.json"))


def timed(fn, runs: int) -> float:
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--tokens", type=int, default=128)
    ap.add_argument("--threads", type=int, default=1)
    a = ap.parse_args()
    import torch

    torch.set_num_threads(a.threads)
    from models.pretrained import load_model

    words = [f"w{i % 97}" for i in range(a.tokens)]
    source, target = " ".join(words), " ".join(reversed(words))
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp) / "t5-small-random"
        build(folder, words)
        start = time.perf_counter()
        model = load_model(folder, device="cpu")
        print(f"load: {time.perf_counter() - start:.2f} s  ({model!r})")
        n = a.tokens + 1
        for block in ("encoder", "decoder", "cross"):
            def first(block=block):
                model.clear_cache()
                return model.trace(source, 5, cross_sentence=target, block=block)["weights"].array

            cold = timed(first, a.runs)
            model.trace(source, 5, cross_sentence=target, block=block)
            def again(block=block):
                return model.trace(source, 2, cross_sentence=target, block=block)["weights"].array

            warm = timed(again, a.runs)
            every = timed(lambda block=block: model.layer_weights(source, cross_sentence=target, block=block), a.runs)
            print(f"{block:8s} {n} + {n} tokens: layer 5 from scratch {cold * 1000:7.1f} ms · another layer, "
                  f"states cached {warm * 1000:6.1f} ms · every layer in one pass {every * 1000:7.1f} ms")  # fmt: skip


if __name__ == "__main__":
    main()
