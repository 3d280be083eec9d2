"""One traced block of an encoder-decoder model as :class:`models.reads.params.LayerParams` (for explain).

The block's projections in the toy engine's per-head form, its own mask (causal in the decoder,
none elsewhere), the query and key token ids of its two sequences, and for T5 the relative position
bias and each pair's bucket in ``extra`` (``position_bias`` (h, n_q, n_k), ``bucket`` (n_q, n_k)).
"""

from __future__ import annotations

from models.engine.host import to_numpy
from models.reads.params import LayerParams, as_f32, bias_per_head, per_head


def encdec_params(model, trace) -> LayerParams:
    """The parameters behind ``trace`` (a trace of ``model``, an EncoderDecoderModel)."""
    block, layer = trace.config["block"], trace.config["layer"]
    n_q, n_k = len(trace.query_tokens), len(trace.key_tokens)
    arch = model.arch
    p = arch.params(block, layer, n_q, n_k)
    h = p.heads
    extra = {}
    if p.bias is not None:
        import torch

        extra["position_bias"] = as_f32(p.bias)
        i = torch.arange(n_q)[:, None]
        j = torch.arange(n_k)[None, :]
        from models.pretrained.t5 import relative_bucket

        extra["bucket"] = to_numpy(relative_bucket(j - i, block == "encoder", arch.buckets, arch.max_distance))
    return LayerParams(
        W_q=per_head(p.w_q, h), b_q=bias_per_head(p.b_q, h), W_k=per_head(p.w_k, h), b_k=bias_per_head(p.b_k, h),
        W_v=per_head(p.w_v, h), b_v=bias_per_head(p.b_v, h), W_o=as_f32(p.w_o), b_o=as_f32(p.b_o),
        head_groups=tuple(range(h)), score="scaled", scale=float(p.scale), scale_formula=p.scale_formula,
        extra=extra, pe=arch.pe, mask=trace.config["mask"], vocab_size=arch.vocab_size, source="model",
        query_source="model", key_ids=tuple(trace.meta["token_ids"]),
        query_ids=tuple(trace.meta["query_token_ids"]),
    )  # fmt: skip

