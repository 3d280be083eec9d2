"""One block of an encoder-decoder model as an :class:`AttentionTrace`, with the toy's stage names.

Self-attention blocks read one sequence (stage ``input``); the cross block reads the decoder's rows
as ``query_input`` and the encoder's output as ``input`` (keys and values), exactly as the toy
engine's cross-attention names them. The n_q × n_k stages are computed when looked at
(:mod:`models.engine.pairs`), from the very q, k and v of the forward pass.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import torch
from torch import Tensor

from models.checks import check_finite_stages
from models.engine import attention as att
from models.engine import pairs, stages
from models.engine.trace import AttentionTrace, Stage
from models.pretrained.common import linear, split_heads
from models.pretrained.encdec import EncDecParams
from models.pretrained.layer_store import dtype_name
from models.pretrained.loaded import LoadedModel
from models.pretrained.stages import to_numpy
from models.pretrained.tokenizer import Encoded

SIDE_NAMES = {"encoder": "Encoder", "decoder": "Decoder", "cross": "Cross-attention"}


def build_block_trace(model: LoadedModel, block: str, layer: int, q_enc: Encoded, k_enc: Encoded,
                      x_q: Tensor, x_kv: Tensor, p: EncDecParams, *, notices: list[str],
                      elapsed_ms: float) -> AttentionTrace:  # fmt: skip
    arch = model.arch
    q_tokens, k_tokens = tuple(q_enc.tokens), tuple(k_enc.tokens)
    n_q, n_k, h, dk = len(q_tokens), len(k_tokens), p.heads, p.d_k
    cross = block == "cross"
    causal = block == "decoder"
    biases = frozenset(name for name, b in (("q", p.b_q), ("k", p.b_k), ("v", p.b_v), ("o", p.b_o)) if b is not None)
    scaled = p.scale != 1.0
    ctx = stages.Context(
        n_q=n_q, n_k=n_k, d_model=arch.hidden_size, d_k=dk, d_v=dk, heads=h, biases=biases, score="scaled",
        scale=float(p.scale), scale_text=p.scale_formula.removeprefix("S / ").removeprefix("S * "),
        mask="causal" if causal else "none", layer=layer,
        mask_note="The decoder's own mask: a target token never sees the tokens after it." if causal else "",
    )  # fmt: skip
    side = SIDE_NAMES[block]
    inputs = {
        "input": (f"{side} L{layer} " + ("keys' input" if cross else "input"),
                  "X = encoder output" if cross else arch.input_formula[block],
                  arch.key_description if cross else arch.input_description[block]),
        "query_input": (f"{side} L{layer} query input", arch.input_formula["cross"], arch.input_description["cross"]),
    }  # fmt: skip

    def text(name: str) -> dict:
        t = stages.describe(name, ctx)
        title, formula, description = inputs.get(name, (t.title, t.formula, t.description))
        return dict(title=title, formula=formula, description=description, shapes=t.shapes,
                    row_axis=t.row_axis, col_axis=t.col_axis, per_head=t.per_head)  # fmt: skip

    def eager(name: str, tensor: Tensor, rows: tuple[str, ...]) -> Stage:
        array = to_numpy(tensor)
        return Stage(name, array=array, row_labels=rows, col_labels=stages.features(array.shape[-1]), **text(name))

    with torch.no_grad():
        q = split_heads(linear(x_q, p.w_q, p.b_q), h)  # (h, n_q, d_k)
        k = split_heads(linear(x_kv, p.w_k, p.b_k), h)  # (h, n_k, d_k)
        v = split_heads(linear(x_kv, p.w_v, p.b_v), h)  # (h, n_k, d_k)
    built = [eager("input", x_kv, k_tokens)]
    if cross:
        built.append(eager("query_input", x_q, q_tokens))
    built += [eager("q", q, q_tokens), eager("k", k, k_tokens), eager("v", v, k_tokens)]
    variant = p.variant(causal=causal)
    variant = variant if scaled else replace(variant, scale=None)  # T5's unscaled scores: no scaled stage
    spec = pairs.PairSpec(q=q, k=k, v=v, head_groups=tuple(range(h)), variant=variant, w_o=p.w_o)
    store = pairs.PairStore(spec)
    built += [Stage(name, row_labels=q_tokens, col_labels=k_tokens, store=store, **text(name)) for name in spec.names]

    def value_norms() -> np.ndarray:
        return to_numpy(store.value_norms())  # (h, n_k): ‖f_h(x_j)‖, as every other family's

    built.append(Stage("value_norms", row_labels=stages.head_labels(h), col_labels=k_tokens, compute=value_norms,
                       shape=(h, n_k), **text("value_norms")))  # fmt: skip

    def head_output() -> np.ndarray:
        return to_numpy(store.head_output())  # (h, n_q, d_k)

    def concat() -> np.ndarray:
        return to_numpy(att.concat_heads(store.head_output()))  # (n_q, h·d_k)

    def output() -> np.ndarray:
        with torch.no_grad():
            return to_numpy(linear(att.concat_heads(store.head_output()), p.w_o, p.b_o))  # (n_q, d_model)

    for name, compute, shape in (("head_output", head_output, (h, n_q, dk)), ("concat", concat, (n_q, h * dk)),
                                 ("output", output, (n_q, arch.hidden_size))):  # fmt: skip
        built.append(Stage(name, row_labels=q_tokens, col_labels=stages.features(shape[-1]), compute=compute,
                           shape=shape, **text(name)))  # fmt: skip
    check_finite_stages(built)
    count = arch.stack_layers(block)
    config = {
        "source": "pretrained", "model": model.name, "path": str(model.path), "model_type": arch.model_type,
        "encoder_decoder": True, "block": block, "cross": cross, "layer": layer, "num_layers": count,
        "encoder_layers": arch.encoder_layers, "decoder_layers": arch.decoder_layers, "heads": h, "kv_heads": h,
        "head_groups": list(range(h)), "d_model": arch.hidden_size, "d_k": dk, "d_v": dk,
        "d_out": arch.hidden_size, "mask": "causal" if causal else "none", "default_mask": "causal" if causal else
        "none", "pad_positions": [], "score": "scaled", "scale": float(p.scale), "pe": arch.pe,
        "position_bias": p.bias is not None, "rotary_dim": None, "qk_norm": False, "softcap": None,
        "sliding_window": None, "bias": bool(biases), "max_positions": arch.max_positions, "n_tokens": n_k,
        "n_query_tokens": n_q, "dtype": "float32", "device": model.device_label,
    }  # fmt: skip
    meta = {
        "model": model.name, "block": block, "layer": layer, "tokens": list(k_tokens), "token_ids": list(k_enc.ids),
        "query_tokens": list(q_tokens), "query_token_ids": list(q_enc.ids), "notices": list(notices),
        "weights": model.arch.layers.residency_text(), "layers_dtype": dtype_name(model.arch.layers.dtype),
    }  # fmt: skip
    return AttentionTrace(stages=tuple(built), query_tokens=q_tokens, key_tokens=k_tokens, config=config,
                          device=model.device_label, elapsed_ms=elapsed_ms, meta=meta)  # fmt: skip
