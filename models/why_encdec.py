"""``why`` for the encoders of the encoder-decoder families (T5, mT5, BART, Marian).

T5's encoder blocks are ``h + attn(RMS(h))`` then ``h + ffn(RMS(h))``: the sources are those of
:mod:`models.why_stream` (``embed``, ``L{l} H{h}``, ``L{l} mlp``) and the score ``biased = q·k + B``
gets one more term, ``position bias`` (T5 has no scale). BART's and Marian's are post-norm, like BERT's:
``LN(a + ffn(a))`` with ``a = LN(h + attn)``, every source through both frozen LayerNorms, with learned
(BART) or sinusoidal (Marian) positions as ``pos``. The layers below run through the engine's own block
attention with its record (each head's output is its recorded weights times its recorded values).
The decoder's self-attention (its rows read the encoder's output through cross-attention, a second
stream) and the cross blocks are refused by name.
"""

from __future__ import annotations

import numpy as np
import torch

from models import attention as att
from models.config import InputError
from models.pretrained.common import hidden_mask
from models.pretrained.encdec import block_attention
from models.why_sides import Sides, check_size
from models.why_stream import check_parts, frozen, head_writes


def _embedding(arch, ids, r):
    """The encoder's embedding sources at rows ``r``: ``embed`` (+ ``pos``, ``embed norm bias``), and h₀."""
    from models.pretrained.bart import Bart

    h = arch.embed("encoder", ids)
    if not isinstance(arch, Bart):  # T5: no positions in the stream
        return ["embed"], [h[r].double()], h
    word = arch.word["encoder"][ids].double() * arch.embed_scale
    pos = arch.positions("encoder", ids.shape[0]).double()
    if not arch.embedding_norm:  # Marian
        return ["embed", "pos"], [word[r], pos[r]], h
    raw = arch.word["encoder"][ids] * arch.embed_scale + arch.positions("encoder", ids.shape[0])
    ln = frozen(raw, "layer", *arch.emb_norm["encoder"], arch.eps)
    return (["embed", "pos", "embed norm bias"], [ln.lin(word[r], r), ln.lin(pos[r], r), ln.bias.expand(len(r), -1)],
            h)  # fmt: skip


def _post_norm(arch, i, h, o, parts, new, r):
    """BART/Marian: ``LN_ffn(a + ffn(a))`` with ``a = LN_self(h + attn)``: every source through both."""
    from models.pretrained.common import layer_norm, linear

    L = arch.layer("encoder", i)
    ln1 = frozen(h + o, "layer", *L["self_norm"], arch.eps)
    a = layer_norm(h + o, *L["self_norm"], arch.eps)
    f = linear(arch.act(linear(a, *L["fc1"])), *L["fc2"])
    ln2 = frozen(a + f, "layer", *L["ffn_norm"], arch.eps)
    both = ln2.lin(ln1.lin(torch.cat([parts, new]), r), r)
    bias = ln2.lin(ln1.bias.expand(len(r), -1), r) + ln2.bias
    return torch.cat([both, ln2.lin(f[r].double(), r)[None], bias[None]])


def encdec_sides(model, trace, head: int, row: int, cols) -> Sides:
    from models.pretrained.bart import Bart
    from models.pretrained.t5 import T5

    arch, block = model.arch, trace.config.get("block")
    if not isinstance(arch, (T5, Bart)) or block != "encoder":
        raise InputError(f"why: {model.model_type} {block} attention is not split yet (the split covers the "
                         "encoders' self-attention, and encoders and decoders with one residual stream)")  # fmt: skip
    post = isinstance(arch, Bart)
    layer = int(trace.config["layer"])
    ids = torch.tensor(trace.meta["token_ids"], dtype=torch.long, device=model.device)
    n, rows = ids.shape[0], tuple(sorted({row, *cols}))
    r = list(rows)
    check_size(layer * (arch.num_heads + 4) + 4, len(rows), arch.hidden_size)
    with torch.no_grad():
        free = hidden_mask(n, "none", (), model.device)  # the encoder hides nothing
        names, parts, h = _embedding(arch, ids, r)
        parts = torch.stack(parts)
        check_parts(parts, h[r], "the encoder's embedding")
        for i in range(layer):
            x = arch.attention_input("encoder", i, h)
            p = arch.params("encoder", i, n, n)
            rec: dict = {}
            o = block_attention(x, x, p, free, record=rec)
            rec["head_output"] = att.weighted_sum(rec["weights"], rec["v"])  # (h, n, d_k): its recorded parts
            new = head_writes(rec, p.w_o, p.heads, rows)
            new_names = [f"L{i} H{g}" for g in range(p.heads)]
            if p.b_o is not None:
                new = torch.cat([new, p.b_o.double().expand(1, len(r), -1)])
                new_names.append(f"L{i} attn bias")
            check_parts(new, o[r], f"encoder layer {i}'s attention output")
            nxt = arch.feed_forward("encoder", i, arch.after_attention("encoder", i, h, o))
            if post:
                parts = _post_norm(arch, i, h, o, parts, new, r)
                names += new_names + [f"L{i} mlp", f"L{i} norm bias"]
            else:
                mlp = nxt[r].double() - h[r].double() - new.sum(0)
                parts = torch.cat([parts, new, mlp[None]])
                names += new_names + [f"L{i} mlp"]
            check_parts(parts, nxt[r], f"the encoder's hidden state after layer {i}")
            h = nxt
        x = arch.attention_input("encoder", layer, h)
        if not np.array_equal(x.cpu().numpy(), np.asarray(trace["input"].array)):
            raise InputError(f"why: the encoder layers below {layer} do not give this trace's input; refusing")
        xs = parts  # BART and Marian: the attention reads h itself
        if not post:  # T5: a pre-norm
            xs = frozen(h, "rms", arch.layer("encoder", layer)["self_norm"], None, arch.eps).lin(parts, r)
        check_parts(xs, x[r], f"encoder layer {layer}'s attention input")
        p = arch.params("encoder", layer, n, n)
        dk = p.d_k
        sides = []
        for w, b in ((p.w_q, p.b_q), (p.w_k, p.b_k)):
            w = w[:, head * dk : (head + 1) * dk].double()
            bias = torch.zeros(1, len(r), dk, dtype=torch.float64) if b is None else \
                b[head * dk : (head + 1) * dk].double().expand(1, len(r), -1)  # fmt: skip
            sides.append(torch.cat([xs @ w, bias]))  # (S + 1, r, d_k)
        q, k = sides
        at = {j: rows.index(j) for j in rows}
        position = None if p.bias is None else p.bias[head, row, list(cols)].double().cpu().numpy()  # (n_keys,)
    return Sides(tuple(names) + ("bias",), tuple(names) + ("bias",), q[:, at[row]].cpu().numpy(),
                 k[:, [at[j] for j in cols]].permute(1, 0, 2).cpu().numpy(), tuple(cols), float(p.scale),
                 additive=position, additive_name="position bias")  # fmt: skip
