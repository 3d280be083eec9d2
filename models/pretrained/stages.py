"""Turn the tensors recorded by :func:`common.attention` into an :class:`AttentionTrace`.

Only naming and explaining happens here; the numbers are exactly those of the forward pass.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
from torch import Tensor

from models.checks import check_finite_stages
from models.pretrained.common import AttentionParams
from models.pretrained.tokenizer import Encoded
from models.trace import AttentionTrace, Stage

if TYPE_CHECKING:
    from models.pretrained.model import PretrainedModel


def to_numpy(t: Tensor) -> np.ndarray:
    """A float32 copy: traces must not share memory with the cached hidden states."""
    return np.array(t.detach().cpu().numpy(), dtype=np.float32, copy=True)


def features(n: int) -> tuple[str, ...]:
    return tuple(str(j) for j in range(n))


def mask_description(mode: str, pads: tuple[int, ...]) -> str:
    pad_text = f" Pad key positions {list(pads)} are hidden from every query." if pads else ""
    if mode == "causal":
        return "Future keys (j > i) are set to −∞ so no token can look ahead." + pad_text
    if mode == "padding" and pads:
        return pad_text.strip() + " Hidden entries are −∞."
    if mode == "padding":
        return "Padding mask: a single sentence has no pad tokens, so nothing is hidden."
    return "No mask: every token may attend to every token."


def qk_norm_text(p: AttentionParams) -> tuple[str, str]:
    """(formula weight, description) of the per-head q/k RMS norm (stages q_normed, k_normed)."""
    norm = p.q_norm or p.k_norm
    assert norm is not None
    w = "(1 + w)" if norm.plus_one else "w"
    return w, (
        f"Each head's vector is divided by its root mean square over its {p.d_k} features and "
        f"multiplied by the learned {w} (RMS norm, ε = {norm.eps:g}), so that "
        "query–key dot products cannot grow without bound."
    )


def rope_text(p: AttentionParams) -> str:
    """What q_rotated / k_rotated show, partial rotary included."""
    rd, dk = p.rotary_dim, p.d_k
    partial = rd is not None and rd < dk
    text = (
        f"Each pair of dimensions (j, j + {'r' if partial else 'd_k'}/2) is rotated by an angle "
        "proportional to the token's position, so that q·k depends on how far apart two tokens are."
    )
    if partial:
        text += (
            f" Partial rotary: only the first r = {rd} of the {dk} features of each head rotate; "
            f"the other {dk - rd} pass unchanged."
        )
    return text


def softcap_text(p: AttentionParams) -> tuple[str, str]:
    c = p.softcap
    return f"S_capped = {c:g} · tanh(S_scaled / {c:g})", (
        f"Soft-capping: scores are squashed smoothly into (−{c:g}, {c:g}); small scores barely "
        "change, large ones saturate, so no single key can dominate without limit."
    )


def window_text(p: AttentionParams, n: int) -> tuple[str, str]:
    """(formula suffix, description) of the layer's sliding window, or ("", "")."""
    w = p.sliding_window
    if w is None:
        return "", ""
    note = "" if w < n else f" (the {n} tokens fit inside it: it hides nothing here)"
    return f" or j ≤ i − {w} (window)", (
        f" Sliding window of {w}: each query sees only its {w} most recent keys (itself "
        f"included); keys {w} or more positions back are −∞{note}."
    )


def build_trace(
    model: PretrainedModel,
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
) -> AttentionTrace:
    arch = model.arch
    tokens = enc.tokens
    h, kv, dk = p.heads, p.kv_heads, p.d_k
    gqa = kv < h
    groups = p.head_groups if gqa else None
    g = "g" if gqa else "i"  # index of the key/value head in formulas
    kg = "K_g(i)" if gqa else "K_i"
    vg = "V_g(i)" if gqa else "V_i"
    shared = (
        f" {kv} key/value heads, each shared by {h // kv} query heads: query head i reads "
        f"key/value head g(i) = head_groups[i]."
        if gqa
        else ""
    )
    bias = {"q": p.b_q, "k": p.b_k, "v": p.b_v, "o": p.b_o}

    def b(name: str, idx: str = "") -> str:
        """The bias term of a formula, when the model has that bias."""
        if bias[name] is None:
            return ""
        return f" + b_{name},{idx}" if idx else f" + b_{name}"

    def stage(name, title, formula, description, *, rows="token", cols="feature", heads=False):
        arr = to_numpy(rec[name]) if name in rec else to_numpy(x)
        row_labels = tokens
        col_labels = tokens if cols == "key" else features(arr.shape[-1])
        return Stage(
            name,
            title,
            formula,
            description,
            arr,
            row_labels,
            col_labels,
            row_axis=rows,
            col_axis=cols,
            per_head=heads,
            head_groups=groups if heads else None,
        )

    stages = [
        stage("input", f"Layer {layer} input", arch.input_formula, arch.input_description),
        stage(
            "q",
            "Queries",
            f"Q_i = X W_q,i{b('q', 'i')}",
            "What each token is looking for, one d_k-vector per token and query head.",
            rows="query",
            heads=True,
        ),
        stage(
            "k",
            "Keys",
            f"K_{g} = X W_k,{g}{b('k', g)}",
            "What each token offers to be found by." + shared,
            rows="key",
            heads=True,
        ),
        stage(
            "v",
            "Values",
            f"V_{g} = X W_v,{g}{b('v', g)}",
            "What each token passes on when attended to." + shared,
            rows="key",
            heads=True,
        ),
    ]
    q_in, k_in = "Q_i", f"K_{g}"
    q_sym, k_sym = "Q_i", kg
    if "q_normed" in rec:
        w, text = qk_norm_text(p)
        stages += [
            stage(
                "q_normed",
                "Normed queries",
                f"Q̂_i = Q_i / rms(Q_i) · {w}",
                text,
                rows="query",
                heads=True,
            ),
            stage(
                "k_normed",
                "Normed keys",
                f"K̂_{g} = K_{g} / rms(K_{g}) · {w}",
                text + shared,
                rows="key",
                heads=True,
            ),
        ]
        q_in, k_in = "Q̂_i", f"K̂_{g}"
        q_sym, k_sym = "Q̂_i", kg.replace("K", "K̂")
    if p.rope is not None:
        rope = rope_text(p)
        part = "" if p.rotary_dim == p.d_k else f"[:{p.rotary_dim}]"
        stages += [
            stage(
                "q_rotated",
                "Rotated queries",
                f"Q'_i = RoPE({q_in}{part}, position)",
                rope,
                rows="query",
                heads=True,
            ),
            stage(
                "k_rotated",
                "Rotated keys",
                f"K'_{g} = RoPE({k_in}{part}, position)",
                rope + shared,
                rows="key",
                heads=True,
            ),
        ]
        q_sym, k_sym = "Q'_i", kg.replace("K", "K'")
    att = {"rows": "query", "cols": "key", "heads": True}
    stages += [
        stage(
            "scores",
            "Raw scores",
            f"S_i = {q_sym} {k_sym}ᵀ",
            "Dot product of every query with every key: how well they match.",
            **att,
        ),
        stage(
            "scaled",
            "Scaled scores",
            f"S_scaled = {p.scale_formula}",
            f"Scores multiplied by {p.scale:.4g}, keeping their spread independent of d_k.",
            **att,
        ),
    ]
    masked_from = "S_scaled"
    if p.softcap is not None:
        formula, text = softcap_text(p)
        stages.append(stage("softcapped", "Soft-capped scores", formula, text, **att))
        masked_from = "S_capped"
    window, window_note = window_text(p, len(tokens))
    stages += [
        stage(
            "masked",
            "Masked scores",
            f"S_masked = {masked_from}, −∞ where hidden{window}",
            mask_description(mode, pads) + window_note,
            **att,
        ),
        stage(
            "weights",
            "Attention weights",
            "A_i = softmax(S_masked,i) per row",
            "Each row sums to 1: how much query token i takes from each key token "
            "(all zero if every key is hidden).",
            **att,
        ),
        stage(
            "head_output",
            "Head outputs",
            f"O_i = A_i {vg}",
            "Each token's weighted mix of the values, per head.",
            rows="query",
            heads=True,
        ),
        stage(
            "concat",
            "Concatenated heads",
            "O = [O_1 … O_h]",
            f"The {h} head outputs side by side ({h} × {dk} = {h * dk} features).",
            rows="query",
        ),
        stage(
            "output",
            "Attention output",
            f"Y = O W_o{b('o')}",
            "The attention block's output projection, before the residual add and the norm.",
            rows="query",
        ),
    ]
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
        "pe": "rotary" if p.rope is not None else "learned",
        "rotary_dim": p.rotary_dim,
        "qk_norm": p.q_norm is not None or p.k_norm is not None,
        "softcap": p.softcap,
        "sliding_window": p.sliding_window,
        "bias": any(t is not None for t in bias.values()),
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
    }
    check_finite_stages(stages)  # overflow on huge weights: refuse rather than show NaN
    return AttentionTrace(
        stages=tuple(stages),
        query_tokens=tokens,
        key_tokens=tokens,
        config=config,
        device=device,
        elapsed_ms=elapsed_ms,
        meta=meta,
    )
