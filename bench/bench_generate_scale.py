"""Generation at a real model's scale, side by side with ``transformers`` in one run (issue 45).

    python bench/bench_generate_scale.py [--layers 24] [--d 1024] [--ffn 3072] [--tokens 8] [--prompt 32]
                                         [--dtype bfloat16]

A random LLaMA built with ``transformers``' ``LlamaForCausalLM(config)`` (default: 24 layers, d_model
1024, 16 heads, MLP 3072, vocabulary 32,000, untied head: 393 M parameters, 1.46 GiB in float32) is saved
with ``save_pretrained`` to a temporary folder beside a word-level tokenizer.json. With one torch thread it
times, per generated token (greedy, the same prompt ids):

- ``transformers``' ``generate`` (sdpa; each step timed by a logits processor);
- our ``generate`` loading that folder, without the logit lens (the same work as ``transformers``) and
  with it (what the window and ``main.py generate`` do), and the checkpoint reads of each step: tensors
  read from the file (``Checkpoint.read``) and layers read (``LayerStore.reads``),

in alternated rounds (both models held: about 3 GB), so that a busy machine slows each alike. Prints a
table with per-token medians and ranges, ours ÷ ``transformers`` (the median of the rounds' ratios and
their range), whether the tokens are the same, the most checkpoint reads of a token and how the weights
are held. Target: ours (without the lens) ≤ 1.2× ``transformers``; 0 reads
per token for a model that fits. ``EXPLORER_ROOT=/path/to/checkout`` times another checkout's code.
``--dtype bfloat16`` (or float16) adds, in the same rounds, ``transformers`` and ours in that dtype
(without the lens), each ÷ ``transformers`` in that dtype, and whether their tokens are the same.
"""

from __future__ import annotations

import argparse
import gc
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(os.environ.get("EXPLORER_ROOT") or Path(__file__).resolve().parent.parent)
sys.path.insert(0, str(ROOT))

TARGET = 1.2


def write_model(folder: Path, layers: int, d: int, ffn: int, heads: int, vocab: int) -> int:
    """A random LlamaForCausalLM saved with save_pretrained, plus a word-level tokenizer; its parameters."""
    import torch
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    config = LlamaConfig(hidden_size=d, intermediate_size=ffn, num_hidden_layers=layers, num_attention_heads=heads,
                         num_key_value_heads=heads, vocab_size=vocab, max_position_embeddings=2048,
                         tie_word_embeddings=False, bos_token_id=0, eos_token_id=vocab - 1, pad_token_id=0)  # fmt: skip
    model = LlamaForCausalLM(config).eval()
    model.save_pretrained(folder, safe_serialization=True)
    tok = Tokenizer(models.WordLevel({f"w{i}": i for i in range(vocab)}, unk_token="w0"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    tok.save(str(folder / "tokenizer.json"))
    count = sum(p.numel() for p in model.parameters())
    del model
    gc.collect()
    return count


def spread(values: list[float]) -> str:
    return f"{statistics.median(values):.0f} ({min(values):.0f}–{max(values):.0f})"


class Transformers:
    """transformers' model of the folder; :meth:`run` times each generated token with a logits processor."""

    def __init__(self, folder: Path, dtype: str = "float32") -> None:
        import torch
        from transformers import LlamaForCausalLM

        self.model = LlamaForCausalLM.from_pretrained(folder, dtype=getattr(torch, dtype),
                                                      attn_implementation="sdpa").eval()  # fmt: skip

    def run(self, ids: list[int], tokens: int) -> tuple[list[float], list[int]]:
        """ms of each generated token after the first (which includes the prompt) and the ids generated."""
        import torch
        from transformers import LogitsProcessor, LogitsProcessorList

        stamps: list[float] = []

        class Stamp(LogitsProcessor):
            def __call__(self, input_ids, scores):
                stamps.append(time.perf_counter())
                return scores

        with torch.no_grad():
            out = self.model.generate(torch.tensor([ids]), max_new_tokens=tokens, min_new_tokens=tokens,
                                      do_sample=False, logits_processor=LogitsProcessorList([Stamp()]))  # fmt: skip
        return [(b - a) * 1000 for a, b in zip(stamps, stamps[1:])], out[0, len(ids) :].tolist()


class Ours:
    """Our model of the folder, tensors read from the file counted (``Checkpoint.read``)."""

    def __init__(self, folder: Path, dtype: str = "float32") -> None:
        from models.pretrained import load_model
        from models.pretrained.checkpoint import Checkpoint

        self.reads = 0
        read = Checkpoint.read

        def counted(ckpt, key):
            self.reads += 1
            return read(ckpt, key)

        Checkpoint.read = counted  # this process times nothing else (a second Ours counts its own reads)
        start = time.perf_counter()
        self.model = load_model(folder, device="cpu", **({} if dtype == "float32" else {"dtype": dtype}))
        self.load_s = time.perf_counter() - start

    def held(self) -> str:
        store = self.model.arch.layers
        return store.residency().text if hasattr(store, "residency") else "(this checkout does not say)"

    def run(self, ids: list[int], tokens: int, lens: bool) -> tuple[list[float], list[int], list[int], list[int]]:
        """ms of each generated token after the first, the ids, tensors and layers read per token."""
        from models.generate import GenerateSettings, generate

        marks: list[tuple[int, int]] = []
        store = self.model.arch.layers

        def mark(done, total):
            marks.append((self.reads, store.reads))

        gen = generate(self.model, " ".join(f"w{i}" for i in ids), GenerateSettings(max_new_tokens=tokens, lens=lens),
                       on_step=mark)  # fmt: skip
        tensors = [b[0] - a[0] for a, b in zip(marks, marks[1:])]
        layers = [b[1] - a[1] for a, b in zip(marks, marks[1:])]
        return gen.step_ms[1:], gen.ids[len(ids) :], tensors, layers


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--layers", type=int, default=24)
    parser.add_argument("--d", type=int, default=1024, help="d_model (16 heads)")
    parser.add_argument("--ffn", type=int, default=3072)
    parser.add_argument("--vocab", type=int, default=32000)
    parser.add_argument("--tokens", type=int, default=8, help="tokens generated per run")
    parser.add_argument("--prompt", type=int, default=32, help="prompt tokens")
    parser.add_argument("--rounds", type=int, default=3, help="rounds of the three, alternated")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--dtype", choices=("float32", "bfloat16", "float16"), default="float32",
                        help="also time transformers and ours in this dtype")
    args = parser.parse_args()
    import torch
    from transformers.utils import logging

    logging.disable_progress_bar()
    torch.set_num_threads(args.threads)
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        params = write_model(folder, args.layers, args.d, args.ffn, 16, args.vocab)
        size = sum(f.stat().st_size for f in folder.glob("*.safetensors"))
        print(f"code: {ROOT}; torch threads: {torch.get_num_threads()}; random LLaMA: {args.layers} layers, "
              f"d_model {args.d}, MLP {args.ffn}, vocabulary {args.vocab}: {params / 1e6:.0f} M parameters, "
              f"{size / 2**30:.2f} GiB float32; prompt {args.prompt} tokens, {args.tokens} generated")  # fmt: skip
        ids = [(7 * i + 3) % (args.vocab - 1) for i in range(args.prompt)]
        theirs, ours = Transformers(folder), Ours(folder)
        low = args.dtype != "float32"
        if low:
            theirs_low, ours_low = Transformers(folder, args.dtype), Ours(folder, args.dtype)
            theirs_low.run(ids, 2)
        theirs.run(ids, 2)  # warm up
        runs: dict[object, list] = {"ref": [], False: [], True: [], "ref_low": [], "low": []}
        for _ in range(args.rounds):  # alternated, so that a busy machine slows each alike
            runs["ref"].append(theirs.run(ids, args.tokens))
            for lens in (False, True):
                runs[lens].append(ours.run(ids, args.tokens, lens))
            if low:
                runs["ref_low"].append(theirs_low.run(ids, args.tokens))
                runs["low"].append(ours_low.run(ids, args.tokens, False))
    ref_ids = runs["ref"][0][1]
    ref_ms = [ms for r in runs["ref"] for ms in r[0]]
    ref_round = [statistics.median(r[0]) for r in runs["ref"]]
    print(f"\nour load: {ours.load_s:.1f} s; weights: {ours.held()}; {args.rounds} rounds alternated\n")
    print("| generation | ms per token, median (range) | ÷ transformers (per round) | same tokens | "
          "tensors read per token | layers read per token |")  # fmt: skip
    print("|---|---:|---:|:-:|---:|---:|")
    print(f"| transformers generate (sdpa) | {spread(ref_ms)} | 1.00 | – | – | – |")
    ratios = {}
    for lens, label in ((False, "ours, without the lens"), (True, "ours, with the lens (default)")):
        ms = [m for r in runs[lens] for m in r[0]]
        ratios[lens] = [statistics.median(r[0]) / t for r, t in zip(runs[lens], ref_round)]
        same = all(r[1] == ref_ids for r in runs[lens] + runs["ref"])
        tensors = [t for r in runs[lens] for t in r[2]]
        layers = [n for r in runs[lens] for n in r[3]]
        print(f"| {label} | {spread(ms)} | {statistics.median(ratios[lens]):.2f} ({min(ratios[lens]):.2f}–"
              f"{max(ratios[lens]):.2f}) | {'yes' if same else 'NO'} | {max(tensors)} | {max(layers)} |")  # fmt: skip
    if low:
        low_round = [statistics.median(r[0]) for r in runs["ref_low"]]
        for key, label in (("ref_low", f"transformers generate (sdpa), {args.dtype}"),
                           ("low", f"ours, {args.dtype}, without the lens")):  # fmt: skip
            ms = [m for r in runs[key] for m in r[0]]
            per = [statistics.median(r[0]) / t for r, t in zip(runs[key], low_round)]
            f32 = [statistics.median(r[0]) / t for r, t in zip(runs[key], ref_round)]
            same = all(r[1] == runs["ref_low"][0][1] for r in runs[key])
            print(f"| {label} | {spread(ms)} | {statistics.median(f32):.2f}; ÷ transformers {args.dtype}: "
                  f"{statistics.median(per):.2f} ({min(per):.2f}–{max(per):.2f}) | "
                  f"{'yes' if same else 'NO'} (as transformers {args.dtype}) | – | – |")  # fmt: skip
        print(f"\nours {args.dtype}: {ours_low.held()}")
    ratio = statistics.median(ratios[False])
    verdict = "ok" if ratio <= TARGET else "SLOW"
    print(f"\nours without the lens ÷ transformers: {ratio:.2f} [target ≤ {TARGET}: {verdict}]")


if __name__ == "__main__":
    main()
