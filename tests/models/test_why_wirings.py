"""``why`` against float64 references for the residual wirings beyond GPT-2 and LLaMA (test_why.py):

- BERT (the shipped MiniLM: post-norm blocks, an embedding LayerNorm, token types), every source through
  the frozen LayerNorms after the adds;
- Gemma 2 (a norm after the attention and around the MLP, ``1 + w`` norms, query_pre_attn_scalar),
  OLMo 2 (norms after the attention and the MLP only, RMS norms of the whole q and k projections),
  Granite (the residual and attention multipliers) and Qwen3 (per-head RMS qk-norms);
- T5's encoder, whose relative position bias is one more term (transformers' own ``compute_bias``),
  BART's (post-norm, learned positions with their offset, an embedding LayerNorm), T5's decoder
  (its cross-attention heads as sources, reading the encoder's real output) and T5's cross block (the
  queries' sources the decoder's, the keys' the encoder's through its final norm).

Each reference runs transformers' model in float64, takes each head's write at the input of its output
projection and each MLP's contribution at the module the block adds, and freezes the norms by hand.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
from test_why import check_table

from models.pretrained import load_model
from models.reads.why import why

transformers = pytest.importorskip("transformers")


def _capture(modules, pre: bool):
    """Hooks keeping each module's input (``pre``) or output, by layer; returns (store, handles)."""
    store, handles = {}, []
    for i, m in enumerate(modules):
        if pre:
            handles.append(m.register_forward_pre_hook(lambda _m, args, i=i: store.__setitem__(i, args[0][0])))
        else:
            handles.append(m.register_forward_hook(lambda _m, _a, out, i=i: store.__setitem__(i, out[0])))
    return store, handles


def _rms(x, weight, eps, plus_one=False):
    """The frozen RMS factor of the real ``x``: (n, d) multipliers."""
    return torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * ((1.0 + weight) if plus_one else weight)


# --- BERT: post-norm -------------------------------------------------------------------------------


def test_bert_post_norm_against_transformers_float64():
    from models.pretrained.registry import builtin_path

    folder = builtin_path()
    ref = transformers.AutoModel.from_pretrained(folder).double().eval().requires_grad_(False)
    model = load_model("minilm", device="cpu")
    sentence, layer = "The cat sat on the mat.", 2
    ids = model.tokenize(sentence)[1]
    n = len(ids)
    blocks = ref.encoder.layer
    concat, h1 = _capture([b.attention.output.dense for b in blocks], pre=True)
    ffn, h2 = _capture([b.output.dense for b in blocks], pre=False)
    with torch.no_grad():
        out = ref(torch.tensor([ids]), output_hidden_states=True)
    for h in h1 + h2:
        h.remove()
    states = [s[0] for s in out.hidden_states]
    emb = ref.embeddings

    def ln_frozen(z, ln):
        sigma = torch.sqrt(z.var(-1, unbiased=False, keepdim=True) + ln.eps)
        return lambda v: (v - v.mean(-1, keepdim=True)) / sigma * ln.weight

    word = emb.word_embeddings.weight[ids] + emb.token_type_embeddings.weight[0]
    pos = emb.position_embeddings.weight[:n]
    lin = ln_frozen(word + pos, emb.LayerNorm)
    src = {"embed": lin(word), "pos": lin(pos), "embed norm bias": emb.LayerNorm.bias.expand(n, -1)}
    heads, dk = ref.config.num_attention_heads, ref.config.hidden_size // ref.config.num_attention_heads
    for i in range(layer):
        b = blocks[i]
        w_o = b.attention.output.dense.weight.T  # (h·d_k, d)
        new = {f"L{i} H{g}": concat[i][:, g * dk : (g + 1) * dk] @ w_o[g * dk : (g + 1) * dk] for g in range(heads)}
        new[f"L{i} attn bias"] = b.attention.output.dense.bias.expand(n, -1)
        ln1, ln2 = b.attention.output.LayerNorm, b.output.LayerNorm
        attn_out = sum(new.values())
        lin1 = ln_frozen(states[i] + attn_out, ln1)  # LN₁(h + attn)
        a = lin1(states[i] + attn_out) + ln1.bias
        lin2 = ln_frozen(a + ffn[i], ln2)  # LN₂(a + ffn)
        src = {k: lin2(lin1(v)) for k, v in {**src, **new}.items()}
        src[f"L{i} mlp"] = lin2(ffn[i])
        src[f"L{i} norm bias"] = lin2(ln1.bias.expand(n, -1)) + ln2.bias
        torch.testing.assert_close(sum(src.values()), states[i + 1], atol=1e-9, rtol=0)
    att = blocks[layer].attention.self
    trace = model.trace(sentence, layer)
    for head, i, j in ((3, 4, 2), (0, n - 1, 0), (11, 2, 5)):
        c = slice(head * dk, (head + 1) * dk)
        q = [v[i] @ att.query.weight.T[:, c] for v in src.values()] + [att.query.bias[c]]
        k = [v[j] @ att.key.weight.T[:, c] for v in src.values()] + [att.key.bias[c]]
        reference = (torch.stack(q) @ torch.stack(k).T / np.sqrt(dk)).numpy()
        names = list(src) + ["bias"]
        check_table(why(trace, head, i, j, model=model), names, names, reference)


# --- decoders with norms after the attention, multipliers, qk-norms --------------------------------

# name: (builder module, builder name, what the block adds after the attention and after the MLP)
DECODERS = {
    "gemma2-softcaps-window": "generate_refs",
    "qwen3-qknorm": "generate_refs",
    "olmo2-gqa": "newer_families",
    "granite-multipliers": "newer_families",
}


def _build(name, folder):
    if DECODERS[name] == "generate_refs":
        from generate_refs import build

        return build(transformers, folder, name).base_model
    from newer_families import build

    return build(folder, name)


@pytest.mark.parametrize("name", list(DECODERS))
def test_decoder_wirings_against_transformers_float64(tmp_path, name):
    from generate_refs import PROMPT

    base = _build(name, tmp_path).double().eval().requires_grad_(False)
    model = load_model(tmp_path, device="cpu")
    cfg, blocks = base.config, base.layers
    ids = model.tokenize(PROMPT)[1]
    n, layer = len(ids), len(blocks) - 1
    heads, kv = cfg.num_attention_heads, cfg.num_key_value_heads
    dk = getattr(cfg, "head_dim", None) or cfg.hidden_size // heads
    sandwich = hasattr(blocks[0], "post_feedforward_layernorm")  # Gemma 2, OLMo 2
    gemma = cfg.model_type.startswith("gemma")
    mult = getattr(cfg, "residual_multiplier", 1.0)  # Granite
    concat, h1 = _capture([b.self_attn.o_proj for b in blocks], pre=True)
    o_out, h2 = _capture([b.self_attn.o_proj for b in blocks], pre=False)
    mlp_out, h3 = _capture([b.post_feedforward_layernorm if sandwich else b.mlp for b in blocks], pre=False)
    with torch.no_grad():
        out = base(torch.tensor([ids]), output_hidden_states=True)
    for h in h1 + h2 + h3:
        h.remove()
    states = [s[0] for s in out.hidden_states]
    src = {"embed": states[0]}  # the embedding as the model scales it (Gemma √d, Granite's multiplier)
    for i in range(layer):
        b = blocks[i]
        factor = mult
        if sandwich:  # the norm after the attention, frozen at the real attention output
            post = b.post_attention_layernorm
            factor = _rms(o_out[i], post.weight, getattr(post, "eps", getattr(post, "variance_epsilon", None)), gemma)
        w_o = b.self_attn.o_proj.weight.T
        for g in range(heads):
            src[f"L{i} H{g}"] = (concat[i][:, g * dk : (g + 1) * dk] @ w_o[g * dk : (g + 1) * dk]) * factor
        src[f"L{i} mlp"] = mlp_out[i] * mult
        # Gemma's norms compute in float32 even in a float64 model
        torch.testing.assert_close(sum(src.values()), states[i + 1], atol=1e-5, rtol=0)
    block, x = blocks[layer], states[layer]
    attn = block.self_attn
    if hasattr(block, "input_layernorm"):
        norm = block.input_layernorm
        factor = _rms(x, norm.weight, getattr(norm, "eps", getattr(norm, "variance_epsilon", None)), gemma)
    else:  # OLMo 2: the attention reads h itself
        factor = torch.ones(1, dtype=torch.float64)
    parts = torch.stack([v * factor for v in src.values()])  # (S, n, d)
    q_all, k_all = parts @ attn.q_proj.weight.T, parts @ attn.k_proj.weight.T  # (S, n, h·d_k), (S, n, kv·d_k)
    real_q, real_k = x * factor @ attn.q_proj.weight.T, x * factor @ attn.k_proj.weight.T
    if cfg.model_type == "olmo2":  # RMS over the whole projection, frozen at the real one
        q_all = q_all * _rms(real_q, attn.q_norm.weight, attn.q_norm.variance_epsilon)
        k_all = k_all * _rms(real_k, attn.k_norm.weight, attn.k_norm.variance_epsilon)
    modeling = __import__(type(attn).__module__, fromlist=["apply_rotary_pos_emb"])
    with torch.no_grad():
        cos, sin = base.rotary_emb(x[None], torch.arange(n)[None])
    scale = cfg.query_pre_attn_scalar**-0.5 if gemma else getattr(cfg, "attention_multiplier", dk**-0.5)
    trace = model.trace(PROMPT, layer)
    for head, i, j in ((0, n - 1, 2), (heads - 1, 6, 6), (1, n - 1, n - 3)):
        g = head // (heads // kv)
        q = q_all[..., head * dk : (head + 1) * dk]
        k = k_all[..., g * dk : (g + 1) * dk]
        if cfg.model_type == "qwen3":  # per-head RMS norms of q and k, frozen at the real ones
            q = q * _rms(real_q[..., head * dk : (head + 1) * dk], attn.q_norm.weight, attn.q_norm.variance_epsilon)
            k = k * _rms(real_k[..., g * dk : (g + 1) * dk], attn.k_norm.weight, attn.k_norm.variance_epsilon)
        q = torch.cat([q, torch.zeros(1, n, dk, dtype=torch.float64)])  # no biases: bias = 0
        k = torch.cat([k, torch.zeros(1, n, dk, dtype=torch.float64)])
        q, k = modeling.apply_rotary_pos_emb(q[:, None], k[:, None], cos, sin)
        reference = (q[:, 0, i] @ k[:, 0, j].T * scale).numpy()
        names = list(src) + ["bias"]
        check_table(why(trace, head, i, j, model=model), names, names, reference)


# --- T5's encoder: the relative position bias is one more term -------------------------------------


def test_t5_encoder_with_its_position_bias_against_transformers_float64(tmp_path):
    from encdec_refs import build

    ref, _tok = build(tmp_path, "t5")
    enc = ref.double().eval().requires_grad_(False).encoder
    model = load_model(tmp_path, device="cpu")
    sentence, layer = "the cat sat on the mat", 1
    trace = model.trace(sentence, layer, cross_sentence="a dog ran", block="encoder")
    ids = list(trace.meta["token_ids"])
    n, heads = len(ids), ref.config.num_heads
    dk = ref.config.d_kv
    blocks = enc.block
    concat, h1 = _capture([b.layer[0].SelfAttention.o for b in blocks], pre=True)
    ffn, h2 = _capture([b.layer[1].DenseReluDense for b in blocks], pre=False)
    with torch.no_grad():
        out = enc(input_ids=torch.tensor([ids]), output_hidden_states=True)
    for h in h1 + h2:
        h.remove()
    states = [s[0] for s in out.hidden_states]
    src = {"embed": enc.embed_tokens.weight[ids]}
    for i in range(layer):
        w_o = blocks[i].layer[0].SelfAttention.o.weight.T
        for g in range(heads):
            src[f"L{i} H{g}"] = concat[i][:, g * dk : (g + 1) * dk] @ w_o[g * dk : (g + 1) * dk]
        src[f"L{i} mlp"] = ffn[i]
        torch.testing.assert_close(sum(src.values()), states[i + 1], atol=1e-9, rtol=0)
    sa = blocks[layer].layer[0]
    norm = sa.layer_norm
    factor = _rms(states[layer], norm.weight, norm.variance_epsilon)
    parts = torch.stack([v * factor for v in src.values()])
    bias = blocks[0].layer[0].SelfAttention.compute_bias(n, n)[0]  # (h, n, n): layer 0's table serves all
    for head, i, j in ((1, 3, 2), (0, n - 1, 0), (heads - 1, 0, n - 1)):
        c = slice(head * dk, (head + 1) * dk)
        q = torch.cat([parts[:, i] @ sa.SelfAttention.q.weight.T[:, c], torch.zeros(1, dk, dtype=torch.float64)])
        k = torch.cat([parts[:, j] @ sa.SelfAttention.k.weight.T[:, c], torch.zeros(1, dk, dtype=torch.float64)])
        table = q @ k.T  # T5 has no scale
        reference = torch.zeros(table.shape[0] + 1, table.shape[1] + 1, dtype=torch.float64)
        reference[:-1, :-1] = table
        reference[-1, -1] = bias[head, i, j]
        names = list(src) + ["bias", "position bias"]
        check_table(why(trace, head, i, j, model=model), names, names, reference.numpy())


def test_bart_encoder_post_norm_against_transformers_float64(tmp_path):
    """BART's encoder: learned positions (offset 2), an embedding LayerNorm, post-norm blocks."""
    from encdec_refs import build

    ref, _tok = build(tmp_path, "bart")
    enc = ref.double().eval().requires_grad_(False).get_encoder()
    model = load_model(tmp_path, device="cpu")
    sentence, layer = "the cat sat on the mat", 1
    trace = model.trace(sentence, layer, cross_sentence="a dog ran", block="encoder")
    ids = list(trace.meta["token_ids"])
    n, heads = len(ids), ref.config.encoder_attention_heads
    dk = ref.config.d_model // heads
    blocks = enc.layers
    concat, h1 = _capture([b.self_attn.out_proj for b in blocks], pre=True)
    ffn, h2 = _capture([b.fc2 for b in blocks], pre=False)
    with torch.no_grad():
        out = enc(input_ids=torch.tensor([ids]), output_hidden_states=True)
    for h in h1 + h2:
        h.remove()
    states = [s[0] for s in out.hidden_states]

    def ln_frozen(z, ln):
        sigma = torch.sqrt(z.var(-1, unbiased=False, keepdim=True) + ln.eps)
        return lambda v: (v - v.mean(-1, keepdim=True)) / sigma * ln.weight

    word = enc.embed_tokens(torch.tensor([ids]))[0]  # times its embed_scale
    pos = enc.embed_positions(torch.tensor([ids]))[0]
    lin = ln_frozen(word + pos, enc.layernorm_embedding)
    src = {"embed": lin(word), "pos": lin(pos), "embed norm bias": enc.layernorm_embedding.bias.expand(n, -1)}
    for i in range(layer):
        b = blocks[i]
        w_o = b.self_attn.out_proj.weight.T
        new = {f"L{i} H{g}": concat[i][:, g * dk : (g + 1) * dk] @ w_o[g * dk : (g + 1) * dk] for g in range(heads)}
        new[f"L{i} attn bias"] = b.self_attn.out_proj.bias.expand(n, -1)
        attn_out = sum(new.values())
        lin1 = ln_frozen(states[i] + attn_out, b.self_attn_layer_norm)
        a = lin1(states[i] + attn_out) + b.self_attn_layer_norm.bias
        lin2 = ln_frozen(a + ffn[i], b.final_layer_norm)
        src = {k: lin2(lin1(v)) for k, v in {**src, **new}.items()}
        src[f"L{i} norm bias"] = lin2(b.self_attn_layer_norm.bias.expand(n, -1)) + b.final_layer_norm.bias
        src[f"L{i} mlp"] = lin2(ffn[i])
        torch.testing.assert_close(sum(src.values()), states[i + 1], atol=1e-9, rtol=0)
    att = blocks[layer].self_attn
    for head, i, j in ((1, 3, 2), (0, n - 1, 0), (heads - 1, 0, n - 1)):
        c = slice(head * dk, (head + 1) * dk)
        q = [v[i] @ att.q_proj.weight.T[:, c] for v in src.values()] + [att.q_proj.bias[c]]
        k = [v[j] @ att.k_proj.weight.T[:, c] for v in src.values()] + [att.k_proj.bias[c]]
        reference = (torch.stack(q) @ torch.stack(k).T * att.scaling).numpy()
        names = list(src) + ["bias"]
        check_table(why(trace, head, i, j, model=model), names, names, reference)


def test_t5_decoder_with_its_cross_attention_heads_against_transformers_float64(tmp_path):
    """T5's decoder: each layer's self- and cross-attention heads and MLP are sources; the cross heads
    read the encoder's real output; the decoder's own (causal) position bias is one more term."""
    from encdec_refs import build

    ref, _tok = build(tmp_path, "t5")
    ref = ref.double().eval().requires_grad_(False)
    model = load_model(tmp_path, device="cpu")
    source, target, layer = "the cat sat on the mat", "a dog ran in the park", 2
    trace = model.trace(source, layer, cross_sentence=target, block="decoder")
    src_ids = model.encode(source, None, "encoder").ids
    ids = list(trace.meta["token_ids"])
    n, heads, dk = len(ids), ref.config.num_heads, ref.config.d_kv
    blocks = ref.decoder.block
    self_in, h1 = _capture([b.layer[0].SelfAttention.o for b in blocks], pre=True)
    cross_in, h2 = _capture([b.layer[1].EncDecAttention.o for b in blocks], pre=True)
    ffn, h3 = _capture([b.layer[2].DenseReluDense for b in blocks], pre=False)
    with torch.no_grad():
        memory = ref.encoder(input_ids=torch.tensor([src_ids])).last_hidden_state
        out = ref.decoder(input_ids=torch.tensor([ids]), encoder_hidden_states=memory, output_hidden_states=True)
    for h in h1 + h2 + h3:
        h.remove()
    states = [s[0] for s in out.hidden_states]
    src = {"embed": ref.decoder.embed_tokens.weight[ids]}
    for i in range(layer):
        for label, store, attn in (("", self_in, blocks[i].layer[0].SelfAttention),
                                   (" cross", cross_in, blocks[i].layer[1].EncDecAttention)):  # fmt: skip
            w_o = attn.o.weight.T
            for g in range(heads):
                src[f"L{i}{label} H{g}"] = store[i][:, g * dk : (g + 1) * dk] @ w_o[g * dk : (g + 1) * dk]
        src[f"L{i} mlp"] = ffn[i]
        torch.testing.assert_close(sum(src.values()), states[i + 1], atol=1e-9, rtol=0)
    sa = blocks[layer].layer[0]
    factor = _rms(states[layer], sa.layer_norm.weight, sa.layer_norm.variance_epsilon)
    parts = torch.stack([v * factor for v in src.values()])
    bias = blocks[0].layer[0].SelfAttention.compute_bias(n, n)[0]  # (h, n, n): the decoder's own table
    for head, i, j in ((1, 3, 2), (0, n - 1, 0), (heads - 1, n - 1, n - 1)):
        c = slice(head * dk, (head + 1) * dk)
        q = torch.cat([parts[:, i] @ sa.SelfAttention.q.weight.T[:, c], torch.zeros(1, dk, dtype=torch.float64)])
        k = torch.cat([parts[:, j] @ sa.SelfAttention.k.weight.T[:, c], torch.zeros(1, dk, dtype=torch.float64)])
        reference = torch.zeros(q.shape[0] + 1, k.shape[0] + 1, dtype=torch.float64)
        reference[:-1, :-1] = q @ k.T
        reference[-1, -1] = bias[head, i, j]
        names = list(src) + ["bias", "position bias"]
        check_table(why(trace, head, i, j, model=model, source=source), names, names, reference.numpy())


def test_t5_cross_attention_two_streams_against_transformers_float64(tmp_path):
    """T5's cross block: the queries' sources are the decoder's after that layer's self-attention, the
    keys' the encoder's (``enc …``) through its final norm."""
    from encdec_refs import build

    ref, _tok = build(tmp_path, "t5")
    ref = ref.double().eval().requires_grad_(False)
    model = load_model(tmp_path, device="cpu")
    source, target, layer = "the cat sat on the mat", "a dog ran in the park", 1
    trace = model.trace(source, layer, cross_sentence=target, block="cross")
    src_ids, tgt_ids = list(trace.meta["token_ids"]), list(trace.meta["query_token_ids"])
    heads, dk = ref.config.num_heads, ref.config.d_kv
    enc_blocks, dec_blocks = ref.encoder.block, ref.decoder.block
    enc_in, h1 = _capture([b.layer[0].SelfAttention.o for b in enc_blocks], pre=True)
    enc_ffn, h2 = _capture([b.layer[1].DenseReluDense for b in enc_blocks], pre=False)
    self_in, h3 = _capture([b.layer[0].SelfAttention.o for b in dec_blocks], pre=True)
    cross_in, h4 = _capture([b.layer[1].EncDecAttention.o for b in dec_blocks], pre=True)
    dec_ffn, h5 = _capture([b.layer[2].DenseReluDense for b in dec_blocks], pre=False)
    with torch.no_grad():
        memory = ref.encoder(input_ids=torch.tensor([src_ids])).last_hidden_state
        ref.decoder(input_ids=torch.tensor([tgt_ids]), encoder_hidden_states=memory)
    for h in h1 + h2 + h3 + h4 + h5:
        h.remove()

    def writes(store, attn, i, label):
        w_o = attn.o.weight.T
        return {f"L{i}{label} H{g}": store[i][:, g * dk : (g + 1) * dk] @ w_o[g * dk : (g + 1) * dk]
                for g in range(heads)}  # fmt: skip

    enc = {"enc embed": ref.encoder.embed_tokens.weight[src_ids]}
    for i in range(len(enc_blocks)):
        enc |= {f"enc {k}": v for k, v in writes(enc_in, enc_blocks[i].layer[0].SelfAttention, i, "").items()}
        enc[f"enc L{i} mlp"] = enc_ffn[i]
    final = ref.encoder.final_layer_norm
    keys = {k: v * _rms(sum(enc.values()), final.weight, final.variance_epsilon) for k, v in enc.items()}
    torch.testing.assert_close(sum(keys.values()), memory[0], atol=1e-6, rtol=0)  # T5's norm: a float32 variance
    dec = {"embed": ref.decoder.embed_tokens.weight[tgt_ids]}
    for i in range(layer):
        dec |= writes(self_in, dec_blocks[i].layer[0].SelfAttention, i, "")
        dec |= writes(cross_in, dec_blocks[i].layer[1].EncDecAttention, i, " cross")
        dec[f"L{i} mlp"] = dec_ffn[i]
    dec |= writes(self_in, dec_blocks[layer].layer[0].SelfAttention, layer, "")  # this layer's self-attention
    cross = dec_blocks[layer].layer[1]
    factor = _rms(sum(dec.values()), cross.layer_norm.weight, cross.layer_norm.variance_epsilon)
    for head, i, j in ((1, 3, 2), (0, len(tgt_ids) - 1, 0), (heads - 1, 0, len(src_ids) - 1)):
        c = slice(head * dk, (head + 1) * dk)
        q = [(v * factor)[i] @ cross.EncDecAttention.q.weight.T[:, c] for v in dec.values()]
        k = [v[j] @ cross.EncDecAttention.k.weight.T[:, c] for v in keys.values()]
        reference = torch.zeros(len(q) + 1, len(k) + 1, dtype=torch.float64)  # the biases: none in T5
        reference[:-1, :-1] = torch.stack(q) @ torch.stack(k).T
        check_table(why(trace, head, i, j, model=model), list(dec) + ["bias"], list(keys) + ["bias"],
                    reference.numpy())  # fmt: skip
