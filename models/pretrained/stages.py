"""Turn the tensors recorded by :func:`common.attention` into an :class:`AttentionTrace`.

Only naming and explaining happens here; the numbers are exactly those of the forward pass.
"""

from __future__ import annotations

import numpy as np
import torch
from torch import Tensor

from models.checks import check_finite_stages
from models.engine import attention as att
from models.engine import pairs, stages
from models.engine.host import to_numpy as host_numpy
from models.engine.trace import AttentionTrace, Stage
from models.pretrained.common import AttentionParams, linear
from models.pretrained.edits import LayerEdits
from models.pretrained.layer_store import dtype_name
from models.pretrained.loaded import LoadedModel
from models.pretrained.tokenizer import Encoded

SINK = "sink"  # the label of the learned attention sink's key column (gpt-oss)



def to_numpy(t: Tensor) -> np.ndarray:
    """A float32 copy: traces must not share memory with the cached hidden states."""
    return np.array(host_numpy(t), dtype=np.float32, copy=True)


def build_trace(
    model: LoadedModel,
    enc: Encoded,
    layer: int,
    mode: str,
    pads: tuple[int, ...],
    x: Tensor,
    p: AttentionParams,
    rec: dict[str, Tensor],
    *,
    notices: list[str],
    device: str,
    elapsed_ms: float,
    edits: LayerEdits | None = None,
) -> AttentionTrace:
    """The traced layer: input, Q, K, V (and their norms and rotations) as recorded by
    :func:`~models.pretrained.common.project_qkv`; the n×n stages and what follows them computed
    when looked at, per head and block of rows, in the order :class:`AttentionParams` documents.
    ``edits`` (already applied to the recorded tensors): the scores and mask edits of the layer."""
    arch = model.arch
    tokens = enc.tokens
    n = len(tokens)
    h, kv, dk = p.heads, p.kv_heads, p.d_k
    groups = p.head_groups if kv < h else None
    variant = p.variant(causal=mode == "causal", pads=pads if mode != "none" else (), n=n)
    window, band = variant.window, variant.band  # None where the layer's hides nothing in n tokens
    norm = p.q_norm or p.k_norm
    pe = p.pe(arch.rotary)
    biases = frozenset(name for name, b in (("q", p.b_q), ("k", p.b_k), ("v", p.b_v), ("o", p.b_o)) if b is not None)
    own = "" if mode == model.default_mask else f"(The model's own mask is {model.default_mask}.)"
    if arch.rotary and p.rope is None:  # SmolLM3's NoPE layers
        notices = [*notices, f"Layer {layer} uses no rotary positions (NoPE): q and k are not rotated, and only "
                   "the causal mask tells the positions apart."]  # fmt: skip
    if p.sliding_window is not None and window is None:
        own += f" The layer's sliding window of {p.sliding_window} hides nothing in {n} tokens."
    if p.band is not None and band is None:
        own += f" The layer's local window of ±{p.band} hides nothing in {n} tokens."
    ctx = stages.Context(
        n_q=n, n_k=n, d_model=arch.hidden_size, d_k=dk, d_v=dk, heads=h, kv_heads=kv, biases=biases,
        score="scaled", scale=float(p.scale),
        scale_text=p.scale_formula.removeprefix("S / ").removeprefix("S * ").removeprefix("S "),
        softcap=p.softcap, mask=mode, pad_positions=pads if mode != "none" else (), window=window,
        pe=pe, rotary_dim=p.rotary_dim, rotary_interleaved=p.rope_interleaved,
        input_title=f"Layer {layer} input", input_formula=arch.input_formula, input_description=arch.input_description,
        layer=layer, qk_norm=("(1 + w)" if norm.plus_one else "w") if norm is not None else "",
        qk_norm_eps=norm.eps if norm is not None else 0.0, mask_note=own.strip(),
        qk_norm_kind=norm.kind if norm is not None else "rms", band=band, sinks=p.sinks is not None,
    )  # fmt: skip

    def text(name: str) -> dict:
        t = stages.describe(name, ctx)
        return dict(title=t.title, formula=t.formula, description=t.description, shapes=t.shapes,
                    row_axis=t.row_axis, col_axis=t.col_axis, per_head=t.per_head,
                    head_groups=groups if t.per_head else None)  # fmt: skip

    def eager(name: str, tensor: Tensor) -> Stage:
        array = to_numpy(tensor)
        cols = stages.features(array.shape[-1])
        return Stage(name, array=array, row_labels=tokens, col_labels=cols, **text(name))

    built = [eager("input", x)] + [eager(name, rec[name]) for name in stages.STAGE_ORDER if name in rec]
    q = rec.get("q_rotated", rec.get("q_normed", rec["q"]))  # (h, n, d_k) as the scores read it
    k = rec.get("k_rotated", rec.get("k_normed", rec["k"]))  # (kv, n, d_k)
    if edits is not None:
        variant = variant.with_mask(edits.mask(variant.mask, n))
    spec = pairs.PairSpec(q=q, k=k, v=rec["v"], head_groups=p.head_groups, variant=variant, always_masked=True,
                          label=f"layer {layer}", score_edits=edits.scores or None if edits is not None else None,
                          w_o=p.w_o)  # fmt: skip
    store = pairs.PairStore(spec)
    keys = tokens + (SINK,) if p.sinks is not None else tokens  # the sink: one more key column, last
    built += [Stage(name, row_labels=tokens, col_labels=keys, store=store, **text(name)) for name in spec.names]

    def value_norms() -> np.ndarray:
        return to_numpy(store.value_norms())  # (h, n)

    built.append(Stage("value_norms", row_labels=stages.head_labels(h), col_labels=tokens, compute=value_norms,
                       shape=(h, n), **text("value_norms")))  # fmt: skip

    def head_output() -> np.ndarray:
        return to_numpy(store.head_output())  # (h, n, d_k)

    def concat() -> np.ndarray:
        return to_numpy(att.concat_heads(store.head_output()))  # (n, h·d_k)

    def output() -> np.ndarray:
        with torch.no_grad():
            return to_numpy(linear(att.concat_heads(store.head_output()), p.w_o, p.b_o))  # (n, d_model)

    for name, compute, shape in (("head_output", head_output, (h, n, dk)), ("concat", concat, (n, h * dk)),
                                 ("output", output, (n, arch.hidden_size))):  # fmt: skip
        built.append(Stage(name, row_labels=tokens, col_labels=stages.features(shape[-1]), compute=compute, shape=shape,
                           **text(name)))  # fmt: skip
    check_finite_stages(built)  # the eager stages; the lazy ones are checked as they are written
    stages_ = tuple(built)
    config = {
        "source": "pretrained",
        "model": model.name,
        "path": str(model.path),
        "model_type": arch.model_type,
        "layer": layer,
        "num_layers": arch.num_layers,
        "heads": h,
        "kv_heads": kv,
        "head_groups": list(p.head_groups),
        "d_model": arch.hidden_size,
        "d_k": dk,
        "d_v": dk,
        "d_out": arch.hidden_size,
        "mask": mode,
        "default_mask": arch.default_mask,
        "pad_positions": list(pads),
        "score": "scaled",
        "scale": float(p.scale),
        "pe": pe,
        "rotary_dim": p.rotary_dim,
        "qk_norm": p.q_norm is not None or p.k_norm is not None,
        "softcap": p.softcap,
        "sliding_window": p.sliding_window,
        "local_window": p.band,
        "sinks": p.sinks is not None,
        "bias": bool(biases),
        "max_positions": arch.max_positions,
        "n_tokens": len(tokens),
        "dtype": "float32",
        "device": device,
    }
    meta = {
        "model": model.name,
        "layer": layer,
        "tokens": list(tokens),
        "token_ids": list(enc.ids),
        "notices": list(notices),
        "weights": arch.layers.residency_text(),  # "weights resident, 4.9 GB" (the status line)
        "layers_dtype": dtype_name(arch.layers.dtype),  # --dtype of the layers below (the traced one: float32)
    }
    if edits is not None:
        meta["edits"] = [e.to_json() for e in edits.edits]
    return AttentionTrace(
        stages=stages_,
        query_tokens=tokens,
        key_tokens=tokens,
        config=config,
        device=device,
        elapsed_ms=elapsed_ms,
        meta=meta,
    )
