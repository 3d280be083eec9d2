"""A copy of a saved Hugging Face model whose attention heads are renumbered, computing the same
function: q, k and v rows and the output projection's columns move together (key/value heads as
whole groups, so grouped-query models stay grouped), with each family's fused layouts and per-head
extras (gpt-oss's sinks, Cohere's and StableLM's per-head norms, OLMo 2's whole-projection norm).
The tests check the copy against transformers (same outputs) before using it."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import numpy as np
import torch
from safetensors.torch import load_file, save_file

LAYER = re.compile(r"(?:^|\.)(?:layers|layer|h)\.(\d+)\.")
Q_ROWS = (".q_proj.", ".query.", ".q_lin.")
KV_ROWS = (".k_proj.", ".v_proj.", ".key.", ".value.", ".k_lin.", ".v_lin.")
O_COLS = ("self_attn.o_proj.weight", "self_attn.out_proj.weight", "attention.out_lin.weight",
          "attention.output.dense.weight", "self_attn.dense.weight", "attention.dense.weight",
          "self_attention.dense.weight", "attn.Wo.weight")  # fmt: skip


def shape_of(cfg: dict) -> tuple[int, int, int]:
    """(query heads, key/value heads, head size)."""
    h = cfg.get("num_attention_heads") or cfg.get("n_head")
    d = cfg.get("hidden_size") or cfg.get("n_embd") or cfg.get("dim")
    h = h or cfg.get("n_heads")
    kv = cfg.get("num_key_value_heads") or cfg.get("num_kv_heads") or h
    if cfg.get("model_type") == "falcon" and not cfg.get("new_decoder_architecture") and cfg.get("multi_query"):
        kv = 1
    return h, kv, cfg.get("head_dim") or d // h


def head_permutation(h: int, kv: int, rng: np.random.Generator) -> tuple[list[int], list[int]]:
    """``(perm, kv_perm)``: new head i is old head perm[i]; whole key/value groups move together."""
    g = h // kv
    kv_perm, within = rng.permutation(kv), rng.permutation(g)
    return [int(kv_perm[i // g] * g + within[i % g]) for i in range(h)], [int(p) for p in kv_perm]


def _rows(perm: list[int], size: int) -> torch.Tensor:
    return torch.cat([torch.arange(p * size, (p + 1) * size) for p in perm])


def _fused(t: torch.Tensor, parts: list[tuple[int, list[int], int]], axis: int) -> torch.Tensor:
    """``t`` along ``axis`` made of consecutive parts ``(count, perm, size)``: each part's blocks reordered."""
    index, start = [], 0
    for count, perm, size in parts:
        index.append(start + _rows(perm, size))
        start += count * size
    return t.index_select(axis, torch.cat(index))


def permute_tensor(key: str, t: torch.Tensor, cfg: dict, perm: list[int], kv_perm: list[int]) -> torch.Tensor:
    h, kv, dk = shape_of(cfg)
    g = h // kv
    if key.endswith(("attn.c_attn.weight", "attn.c_attn.bias")):  # GPT-2's Conv1D: (in, [q|k|v])
        return _fused(t, [(h, perm, dk)] * 3, t.dim() - 1)
    if key.endswith("attn.c_proj.weight"):  # Conv1D (in = heads, out)
        return t[_rows(perm, dk)]
    if key.endswith(("query_key_value.weight", "query_key_value.bias")):
        if cfg.get("model_type") == "gpt_neox":  # (h, 3, dk) rows
            return t[_rows(perm, 3 * dk)]
        if cfg.get("new_decoder_architecture"):  # Falcon: (kv, g + 2, dk) rows: a group's queries, its k, its v
            within = [perm[j] % g for j in range(g)]  # the same order inside every group
            blocks = [(kv_perm[a] * (g + 2) + b) for a in range(kv) for b in [*within, g, g + 1]]
            return t[_rows(blocks, dk)]
        return _fused(t, [(h, perm, dk), (kv, kv_perm, dk), (kv, kv_perm, dk)], 0)
    if key.endswith(("qkv_proj.weight", "qkv_proj.bias", "attn.Wqkv.weight", "attn.Wqkv.bias")):
        return _fused(t, [(h, perm, dk), (kv, kv_perm, dk), (kv, kv_perm, dk)], 0)
    if any(s in key for s in Q_ROWS) and key.endswith((".weight", ".bias")):
        return t[_rows(perm, dk)]
    if any(s in key for s in KV_ROWS) and key.endswith((".weight", ".bias")):
        return t[_rows(kv_perm, dk)]
    if key.endswith(O_COLS):
        return t[:, _rows(perm, dk)]
    if key.endswith("self_attn.sinks"):
        return t[perm]
    if key.endswith(("q_norm.weight", "k_norm.weight")) and t.numel() != dk:
        which = perm if "q_norm" in key else kv_perm
        return t[which] if t.dim() == 2 else t[_rows(which, dk)]  # Cohere (heads, dk); OLMo 2 (heads·dk,)
    return t


def permuted_copy(src: Path, dst: Path, seed: int = 0) -> dict[int, list[int]]:
    """Copy the model folder ``src`` to ``dst`` with every layer's heads renumbered; ``{layer: perm}``."""
    shutil.copytree(src, dst)
    cfg = json.loads((src / "config.json").read_text())
    h, kv, _ = shape_of(cfg)
    rng = np.random.default_rng(seed)
    tensors = load_file(src / "model.safetensors")
    layers = sorted({int(m.group(1)) for k in tensors if (m := LAYER.search(k))})
    perms = {layer: head_permutation(h, kv, rng) for layer in layers}
    assert layers, f"no layer found in {src}'s tensor names"
    while all(p == list(range(h)) for p, _ in perms.values()):  # at least one layer really renumbered
        perms = {layer: head_permutation(h, kv, rng) for layer in layers}
    out = {}
    for key, t in tensors.items():
        m = LAYER.search(key)
        if m is None:
            out[key] = t
            continue
        perm, kv_perm = perms[int(m.group(1))]
        norms = re.search(r"(q|k)_layernorm\.norms\.(\d+)\.", key)  # StableLM: one norm module per head
        if norms:
            which = perm if norms.group(1) == "q" else kv_perm
            out[key] = tensors[key.replace(f".norms.{norms.group(2)}.", f".norms.{which[int(norms.group(2))]}.")]
            continue
        out[key] = permute_tensor(key, t, cfg, perm, kv_perm).contiguous()
    save_file(out, dst / "model.safetensors", metadata={"format": "pt"})
    return {layer: p for layer, (p, _) in perms.items()}
