"""Benchmark generation with the KV cache (models/generate) on a MiniLM-sized random decoder.

    python bench/bench_generate.py [--threads 1] [--tokens 16]

The decoder is a random LLaMA-format checkpoint written to a temporary folder (6 layers,
d_model 384, 6 heads, MLP 1536, vocabulary 30,522 like MiniLM's, tied embeddings). Prints the
median time of one generated token at 128 tokens of context (target <= 30 ms) and the step cost
as the context grows from 64 to 2048 tokens, as a table. A step is everything generation does per
token: the new token through every layer (the cache), its attention rows kept, the next-token
top-k, the choice, and the logit lens of the new position at every layer.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

TARGET_MS = 30.0
LAYERS, D, HEADS, FFN, VOCAB = 6, 384, 6, 1536, 30522
CONTEXTS = (64, 128, 256, 512, 1024, 2048)


DEMO_WORDS = ("<s> the a cat dog sat on mat and ran to park in house saw big small red blue bird tree "
              "was is it he she they then over under quick brown fox jumps lazy . ,").split()


def write_decoder(folder: Path, layers: int = LAYERS, d: int = D, heads: int = HEADS, ffn: int = FFN,
                  words: tuple[str, ...] | None = None, scale: float = 0.05) -> None:  # fmt: skip
    """A random LLaMA-format decoder (config.json, model.safetensors, a word-level tokenizer.json)."""
    import torch
    from safetensors.torch import save_file
    from tokenizers import Tokenizer, models, pre_tokenizers

    g = torch.Generator().manual_seed(0)
    LAYERS, D, HEADS, FFN, VOCAB = layers, d, heads, ffn, (len(words) if words else 30522)  # noqa: N806

    def rand(*shape):
        return (torch.randn(*shape, generator=g) * scale).contiguous()

    tensors = {"model.embed_tokens.weight": rand(VOCAB, D), "model.norm.weight": torch.ones(D)}
    for i in range(LAYERS):
        p = f"model.layers.{i}."
        for name, shape in (("self_attn.q_proj", (D, D)), ("self_attn.k_proj", (D, D)), ("self_attn.v_proj", (D, D)),
                            ("self_attn.o_proj", (D, D)), ("mlp.gate_proj", (FFN, D)), ("mlp.up_proj", (FFN, D)),
                            ("mlp.down_proj", (D, FFN))):  # fmt: skip
            tensors[p + name + ".weight"] = rand(*shape)
        tensors[p + "input_layernorm.weight"] = torch.ones(D)
        tensors[p + "post_attention_layernorm.weight"] = torch.ones(D)
    save_file(tensors, str(folder / "model.safetensors"))
    config = dict(model_type="llama", hidden_size=D, intermediate_size=FFN, num_hidden_layers=LAYERS,
                  num_attention_heads=HEADS, num_key_value_heads=HEADS, max_position_embeddings=4096,
                  vocab_size=VOCAB, rms_norm_eps=1e-6, tie_word_embeddings=True, eos_token_id=VOCAB + 1)  # fmt: skip
    (folder / "config.json").write_text(json.dumps(config))
    vocab = {w: i for i, w in enumerate(words)} if words else {f"w{i}": i for i in range(VOCAB)}
    tok = Tokenizer(models.WordLevel(vocab, unk_token=next(iter(vocab))))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    tok.save(str(folder / "tokenizer.json"))


def prompt(n: int) -> str:
    return " ".join(f"w{(7 * i) % VOCAB}" for i in range(n))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=1, help="torch.set_num_threads (default 1)")
    parser.add_argument("--tokens", type=int, default=16, help="tokens generated per measurement")
    parser.add_argument("--write-demo", metavar="DIR", help="only write a small random word-level decoder "
                        "(for the Generate window's screenshot) to DIR and exit")  # fmt: skip
    args = parser.parse_args()
    if args.write_demo:
        Path(args.write_demo).mkdir(parents=True, exist_ok=True)
        write_decoder(Path(args.write_demo), layers=4, d=64, heads=4, ffn=128, words=DEMO_WORDS, scale=0.35)
        print(f"wrote a random demo decoder to {args.write_demo}")
        return
    import torch

    from models.generate import GenerateSettings, generate
    from models.pretrained import load_model

    torch.set_num_threads(args.threads)
    print(f"torch threads: {torch.get_num_threads()}; decoder: {LAYERS} layers, d_model {D}, {HEADS} heads, "
          f"vocabulary {VOCAB}")  # fmt: skip
    with tempfile.TemporaryDirectory() as tmp:
        write_decoder(Path(tmp))
        model = load_model(tmp, device="cpu")
        plain = GenerateSettings(max_new_tokens=args.tokens, lens=False)
        with_lens = GenerateSettings(max_new_tokens=args.tokens)
        generate(model, prompt(16), GenerateSettings(max_new_tokens=4))  # warm up
        rows = []
        for context in CONTEXTS:
            timed = []
            for settings in (plain, with_lens):
                start = time.perf_counter()
                steps = generate(model, prompt(context - 1), settings).step_ms
                timed.append((statistics.median(steps), min(steps), time.perf_counter() - start))
            rows.append((context, *timed))
            if context == 128:
                for label, (median, best, _) in zip(("without", "with"), timed):
                    verdict = "ok" if median <= TARGET_MS else "SLOW"
                    print(f"one generated token at 128 tokens of context, {label} the logit lens: median "
                          f"{median:.1f} ms, best {best:.1f} ms over {len(steps)} tokens  "
                          f"[target <= {TARGET_MS:.0f} ms: {verdict}]")  # fmt: skip
        print("\n| context (tokens) | step median (ms) | step best (ms) | with the lens: median (ms) | "
              "best (ms) | whole run with the lens (s) |")  # fmt: skip
        print("|---:|---:|---:|---:|---:|---:|")
        for context, (med, best, _), (lmed, lbest, total) in rows:
            print(f"| {context} | {med:.1f} | {best:.1f} | {lmed:.1f} | {lbest:.1f} | {total:.2f} |")
        (c0, (m0, _, _), _), (c1, (m1, _, _), _) = rows[0], rows[-1]
        slope = (m1 - m0) / (c1 - c0)
        print(f"\ngrowth of a step from {c0} to {c1} tokens: {slope * 1000:.2f} ms per 1,000 tokens of context "
              f"(each step reads every cached key once; the weights, read once per step, dominate)")  # fmt: skip


if __name__ == "__main__":
    main()
