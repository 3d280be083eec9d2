"""Generation with a key/value cache, for every decoder family: the prompt runs once, then one
new token per step through the cache (:mod:`models.pretrained.kv_cache`).

What a family provides is what tracing already needs plus three things, all on the shared pieces:
``block(i, h, hidden, cache=...)`` (the attention of :mod:`models.pretrained.common`), ``final``
(its last norm) and the head (:mod:`models.generate.head`). Per step the loop keeps the new
token's attention row for every layer × head, the top next tokens, and the residual stream after each
layer at the new position: what the logit lens reads (final norm and unembedding) for the cells a view
or a command asks for, never all of them during generation (:mod:`models.generate.lens`).
"""

from __future__ import annotations

import dataclasses
import json
import time
import weakref
from collections.abc import Callable

import numpy as np
import torch
from torch import Tensor

from models.config import Cancelled, InputError
from models.engine.host import to_numpy
from models.generate.head import OutputHead, load_head
from models.generate.lens import LENS_CHUNK_BYTES, LENS_TOP, Lens
from models.generate.result import Generation, Step
from models.generate.sampling import Chooser, GenerateSettings
from models.memory import MARGIN, check_memory
from models.pretrained.kv_cache import new_cache
from models.pretrained.registry import read_config

F32 = 4
_HEADS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def output_head(model) -> OutputHead:
    """The model's head, read once per loaded model."""
    if model not in _HEADS:
        _HEADS[model] = load_head(model)
    return _HEADS[model]


def eos_ids(model) -> frozenset[int]:
    """The end tokens: config.json's ``eos_token_id`` and generation_config.json's (int or list)."""
    found: set[int] = set()
    sources = [read_config(model.path)]
    gen = model.path / "generation_config.json"
    if gen.is_file():
        try:
            sources.append(json.loads(gen.read_text(encoding="utf-8")))
        except (OSError, UnicodeDecodeError, ValueError, RecursionError):
            pass  # a broken generation config: config.json's end token still counts
    for src in sources:
        value = src.get("eos_token_id") if isinstance(src, dict) else None
        for v in value if isinstance(value, list) else [value]:
            if isinstance(v, int) and not isinstance(v, bool):
                found.add(v)
    return frozenset(found)


def estimate_generation_bytes(model, n: int) -> int:
    """Peak bytes of generating up to ``n`` tokens: the attention rows (and one full copy of the
    ``(L, h, n, n)`` matrix when written), the cache, the residuals of the prompt and the lens."""
    a = model.arch
    L, h = a.num_layers, a.num_heads
    rows = F32 * L * h * n * (n + 1) // 2
    full = F32 * L * h * n * n
    cache = F32 * 2 * L * a.num_kv_heads * n * a.head_dim
    states = F32 * (L + 4) * n * (a.hidden_size + getattr(a, "ffn", 4 * a.hidden_size))
    lens = 2 * LENS_CHUNK_BYTES + F32 * L * n * (4 + 4 * LENS_TOP)
    prompt_pass = 4 * F32 * h * n * n  # one layer's scores, mask, weights of the prompt at once
    return rows + full + cache + states + lens + prompt_pass + MARGIN


class _Run:
    """The state of one generation while it runs."""

    def __init__(self, model, head: OutputHead, settings: GenerateSettings, n_max: int) -> None:
        self.model, self.arch, self.head, self.settings = model, model.arch, head, settings
        L = self.arch.num_layers
        self.cache = new_cache(L, n_max)
        self.rows: list[np.ndarray] = []
        rows = n_max if settings.lens else 0  # each layer's residual at each position: what the lens reads
        self.states = torch.zeros(L, rows, self.arch.hidden_size, dtype=torch.float32, device=model.device)

    def feed(self, ids: list[int], start: int) -> list[Tensor]:
        """Run tokens at positions ``start..`` through every layer; the residual after each."""
        x = self.arch.embed_at(torch.tensor(ids, dtype=torch.long, device=self.model.device), start)
        states = []
        with self.arch.layers.computing():  # in the model's --dtype (float32: as ever)
            for i, kv in enumerate(self.cache):
                x = self.arch.block(i, x, None, cache=kv)  # (m, d)
                states.append(x.float())
        weights = np.stack([to_numpy(kv.weights.float()) for kv in self.cache])  # (L, h, m, t)
        for a in range(len(ids)):
            self.rows.append(weights[:, :, a, : start + a + 1])
        return states

    def record(self, states: list[Tensor], start: int) -> Tensor:
        """Keep each layer's residual at the new positions ``start..`` for the lens (read later, for the
        cells asked: :class:`~models.generate.lens.Lens`); the model's next-token logits ``(vocab,)``."""
        if self.settings.lens:
            self.states[:, start : start + states[0].shape[0]] = torch.stack(states)
        return self.head.logits(states[-1][-1:])[0]

    def step(self, logits: Tensor, position: int, chosen: int | None) -> Step:
        probs = torch.softmax(logits, dim=-1)
        t = torch.topk(probs, min(self.settings.shown, probs.shape[-1]))
        ids = tuple(int(i) for i in t.indices)
        tokens = tuple(self.model.tokenizer.token(i) for i in ids)
        chosen_prob = None if chosen is None else float(probs[chosen])
        return Step(position, ids, tokens, tuple(float(p) for p in t.values), chosen, chosen_prob)


def generate(
    model,
    prompt: str,
    settings: GenerateSettings | None = None,
    should_stop: Callable[[], bool] | None = None,
    on_step: Callable[[int, int], None] | None = None,
) -> Generation:
    """Generate from ``prompt`` with ``model`` (a :class:`~models.pretrained.PretrainedModel`).

    ``should_stop()`` is polled between steps (True raises :class:`Cancelled`);
    ``on_step(done, total)`` reports the tokens generated so far.
    """
    start_time = time.perf_counter()
    s = (settings or GenerateSettings()).validate()
    head = output_head(model)
    enc = model.encode(prompt, s.max_tokens)
    ids, n_p = list(enc.ids), len(enc.ids)
    notices = list(model.notices) + list(enc.notices)
    room = model.max_positions - n_p
    if room < 1:
        raise InputError(
            f"the prompt's {n_p} tokens fill {model.name}'s {model.max_positions} positions; "
            "nothing can be generated"
        )
    max_new = min(s.max_new_tokens, room)
    if max_new < s.max_new_tokens:
        notices.append(f"Only {max_new} new tokens fit in {model.name}'s {model.max_positions} positions.")
    arch = model.arch
    needed = estimate_generation_bytes(model, n_p + max_new)
    needed += arch.layers.bytes_to_read(range(arch.num_layers))
    check_memory(needed, f"generating {max_new} tokens after {n_p} with {model.name}",
                 hint="ask for fewer new tokens or use a shorter prompt")
    eos = eos_ids(model)
    run, choose = _Run(model, head, s, n_p + max_new), Chooser(s)
    steps: list[Step] = []
    step_ms: list[float] = []
    stopped = "length"
    fed, new = 0, ids
    with torch.no_grad(), arch.layers.reading(range(arch.num_layers), model.progress, should_stop):
        while True:
            t0 = time.perf_counter()
            states = run.feed(new, fed)
            fed = len(ids)
            logits = run.record(states, fed - len(new))  # the model's own next-token logits
            done = len(ids) - n_p
            if done and ids[-1] in eos:
                chosen, stopped = None, "eos"
            elif done >= max_new:
                chosen = None
                stopped = "max positions" if max_new < s.max_new_tokens else "length"
            else:
                chosen = choose(logits)
            steps.append(run.step(logits, fed - 1, chosen))
            if done:
                step_ms.append((time.perf_counter() - t0) * 1000)
            if chosen is None:
                break
            if should_stop is not None and should_stop():
                raise Cancelled(f"stopped after {done} generated tokens")
            ids.append(chosen)
            new = [chosen]
            if on_step is not None:
                on_step(done + 1, max_new)
    n = len(ids)
    tok = model.tokenizer
    named = set(ids) | {i for step in steps for i in step.top_ids}  # the lens names its own (Lens.token)
    nexts = [*ids[1:], steps[-1].top_ids[0]]  # each position's next token; the last one's: the model's top
    lens = Lens(head, run.states[:, :n], nexts, tok.token) if s.lens else Lens.unread(arch.num_layers, n, tok.token)
    return Generation(
        model=model.name, model_type=model.model_type, num_layers=arch.num_layers,
        num_heads=arch.num_heads, ids=ids, tokens=[tok.token(i) for i in ids], prompt_length=n_p,
        text=tok.decode(ids[n_p:]), steps=steps, rows=run.rows,
        lens=lens,
        stopped=stopped, settings=dataclasses.asdict(s),
        head_source=head.source, device=model.device_label, notices=notices,
        elapsed_ms=(time.perf_counter() - start_time) * 1000, step_ms=step_ms,
        token_names={i: tok.token(i) for i in sorted(named)},
        sequence_text=tok.decode(ids, skip_special=True), weights=arch.layers.residency_text(),
    )  # fmt: skip
