"""An 8B-shape LLaMA in bfloat16 (issue 45's target row): traced and generated, against ``transformers``
run in bfloat16 on the same checkpoint, and how the whole 32-layer model is held on a 24 GB budget.

    python bench/bench_llama8b.py                 Llama-3.1-8B's config with 2 of its 32 layers (a 3.5 GB
                                                  bfloat16 checkpoint in a temporary folder), on the CPU
    python bench/bench_llama8b.py --layers 32 --device cuda     the whole 8B shape on a card (16 GB)
    python bench/bench_llama8b.py --smoke         a tiny LLaMA: checks the script runs

The model is random (``from_config`` with the published config values, bfloat16) and saved as a bfloat16
checkpoint, as real ones are. Ours loads it with ``dtype="bfloat16"``, traces its last layer (float32)
and generates 2 tokens greedily; ``transformers`` in bfloat16 generates from the same prompt. The ids
must be equal where ``transformers``' two best logits are more than 4 bfloat16 steps apart (a random
model's near ties may flip under another rounding); the residency of the full config on a 24 GB budget
is :func:`models.pretrained.plan.residency_from_config`'s. Prints figures; the script imports no Qt.
"""

from __future__ import annotations

import argparse
import resource
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

# Llama-3.1-8B's config.json (meta-llama/Llama-3.1-8B), its published values
LLAMA_31_8B = dict(hidden_size=4096, intermediate_size=14336, num_hidden_layers=32, num_attention_heads=32,
                   num_key_value_heads=8, vocab_size=128256, max_position_embeddings=131072, rms_norm_eps=1e-5,
                   rope_theta=500000.0, rope_scaling={"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
                   "high_freq_factor": 4.0, "original_max_position_embeddings": 8192}, tie_word_embeddings=False,
                   bos_token_id=128000, eos_token_id=128001, hidden_act="silu", attention_bias=False,
                   mlp_bias=False, head_dim=128)  # fmt: skip
SMOKE = dict(LLAMA_31_8B, hidden_size=64, intermediate_size=128, num_attention_heads=4, num_key_value_heads=2,
             head_dim=16, vocab_size=1000, bos_token_id=1, eos_token_id=2)  # fmt: skip
CARD = 24 * 10**9  # a 24 GB card's free memory
PROMPT_WORDS = 24
NEW_TOKENS = 2
TIE_STEPS = 4  # bfloat16 steps at the top logit within which two logits count as tied


def write_model(folder: Path, config: dict, layers: int, device: str = "cpu") -> int:
    """A random bfloat16 LlamaForCausalLM of ``config`` with ``layers`` layers saved to ``folder``, and
    a word-level tokenizer (``w0`` … over the vocabulary); returns its parameter count."""
    import torch
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    cfg = LlamaConfig(**dict(config, num_hidden_layers=layers))
    with torch.device(device):
        model = LlamaForCausalLM._from_config(cfg, dtype=torch.bfloat16).eval()
    model.save_pretrained(folder, safe_serialization=True)
    count = sum(p.numel() for p in model.parameters())
    del model
    free_cache(device)
    vocab = config["vocab_size"]
    tok = Tokenizer(models.WordLevel({f"w{i}": i for i in range(vocab)}, unk_token="w0"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    tok.save(str(folder / "tokenizer.json"))
    return count


def prompt_ids(vocab: int) -> list[int]:
    return [3 + 7919 * i % (vocab - 10) for i in range(PROMPT_WORDS)]  # distinct words


class StepClock:
    """A ``generate`` streamer that notes when each token arrives (the prompt first, then each new one)."""

    def __init__(self) -> None:
        self.times: list[float] = []

    def put(self, value) -> None:
        self.times.append(time.perf_counter())

    def end(self) -> None:
        pass

    def step_ms(self) -> list[float]:
        """The cached steps' times: from each new token to the next (the prompt's pass not counted)."""
        return [(b - a) * 1000 for a, b in zip(self.times[1:], self.times[2:])]


def reference(folder: Path, ids: list[int], device: str) -> tuple[list[int], list[float], list[float]]:
    """``transformers`` in bfloat16: its greedy ids, at each step its top-two logit gap in bfloat16 steps,
    and its cached steps' times in ms (as ours are timed: one new token through the layers and the head)."""
    import numpy as np
    import torch
    from transformers import LlamaForCausalLM

    ref = LlamaForCausalLM.from_pretrained(folder, dtype=torch.bfloat16, attn_implementation="sdpa").to(device).eval()
    x = torch.tensor([ids], device=device)
    clock = StepClock()
    with torch.no_grad():
        out = ref.generate(x, attention_mask=torch.ones_like(x), max_new_tokens=NEW_TOKENS, do_sample=False,
                           output_logits=True, return_dict_in_generate=True, pad_token_id=0,
                           streamer=clock)  # fmt: skip
    gaps = []
    for logits in out.logits:
        top = torch.topk(logits[0].float(), 2).values.tolist()
        step = 2.0 ** (np.floor(np.log2(max(abs(top[0]), 1e-3))) - 7)
        gaps.append((top[0] - top[1]) / step)
    return out.sequences[0, len(ids) :].tolist(), gaps, clock.step_ms()


def free_cache(device: str) -> None:
    import gc

    import torch

    gc.collect()
    if device.startswith("cuda"):
        torch.cuda.empty_cache()


def run(config: dict, layers: int, device: str) -> list[tuple[str, str]]:
    """The figures, as (what, value) lines."""
    from models.generate import GenerateSettings, generate
    from models.pretrained import load_model
    from models.pretrained.plan import residency_from_config

    rows = []
    full = residency_from_config(dict(config, model_type="llama"), "bfloat16", free=CARD)
    assert full.per_pass == 0, full.text  # the whole 32-layer 8B shape is resident on a 24 GB budget
    rows.append(("the 32-layer config on a 24 GB budget, bfloat16", full.text))
    f32 = residency_from_config(dict(config, model_type="llama"), "float32", free=CARD)
    rows.append(("... in float32", f32.text))
    with tempfile.TemporaryDirectory(dir="/tmp") as tmp:
        folder = Path(tmp)
        t0 = time.perf_counter()
        params = write_model(folder, config, layers, device)
        size = sum(p.stat().st_size for p in folder.glob("*.safetensors"))
        rows.append((f"random model, {layers} of 32 layers", f"{params / 1e9:.2f} B parameters, {size / 1e9:.2f} GB "
                     f"bfloat16 checkpoint, written in {time.perf_counter() - t0:.0f} s"))  # fmt: skip
        ids = prompt_ids(config["vocab_size"])
        t0 = time.perf_counter()
        theirs, gaps, their_ms = reference(folder, ids, device)
        free_cache(device)  # transformers' copy gone before ours sizes its budget from the free memory
        rows.append(("transformers bfloat16 generate", f"{theirs} in {time.perf_counter() - t0:.1f} s with the load "
                     f"(top-two gaps {', '.join(f'{g:.1f}' for g in gaps)} bfloat16 steps); "
                     f"{', '.join(f'{t:.0f}' for t in their_ms)} ms per cached step"))  # fmt: skip
        t0 = time.perf_counter()
        model = load_model(folder, device=device, dtype="bfloat16")
        prompt = " ".join(f"w{i}" for i in ids)
        trace = model.trace(prompt, model.num_layers - 1)
        weights = trace["weights"].array
        rows.append(("ours: the last layer traced", f"{time.perf_counter() - t0:.1f} s with the load; weights "
                     f"{weights.dtype} {weights.shape}, rows sum to 1 within "
                     f"{abs(weights.sum(-1) - 1).max():.1e}; {trace.meta['weights']}"))  # fmt: skip
        assert weights.dtype.name == "float32" and trace.config["dtype"] == "float32"
        gen = generate(model, prompt, GenerateSettings(max_new_tokens=NEW_TOKENS))
        ours = gen.ids[gen.prompt_length :]
        decided = [i for i, g in enumerate(gaps) if g > TIE_STEPS]
        prefix = next((i for i in range(NEW_TOKENS) if ours[i] != theirs[i]), NEW_TOKENS)
        same = all(ours[i] == theirs[i] for i in decided if i <= prefix)  # after a flip the prompts differ
        ms = ", ".join(f"{t:.0f}" for t in gen.step_ms)
        verdict = "equal to transformers where not tied" if same else "DIFFERENT from transformers"
        rows.append(("ours: 2 tokens generated, bfloat16",
                     f"{ours} ({verdict}); {ms} ms per cached step; {gen.weights}"))
        assert same, (ours, theirs, gaps)
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20
    rows.append(("peak memory of this process", f"{peak:.2f} GiB (RSS)"))
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--layers", type=int, default=2, help="layers of the 32 built (default 2)")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--smoke", action="store_true", help="a tiny LLaMA: checks the script runs")
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()
    import torch
    from transformers.utils import logging

    logging.disable_progress_bar()
    torch.set_num_threads(args.threads)
    for what, value in run(SMOKE if args.smoke else LLAMA_31_8B, args.layers, args.device):
        print(f"{what}: {value}")


if __name__ == "__main__":
    main()
