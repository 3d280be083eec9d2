"""``why`` for T5's (and mT5's) encoder self-attention: its relative position bias is one more term.

T5's encoder blocks are ``h + attn(RMS(h))`` then ``h + ffn(RMS(h))``, so the sources are those of
:mod:`models.why_stream` (``embed``, ``L{l} H{h}``, ``L{l} mlp``) and the score ``biased = q·k + B``
gets one more term, ``position bias`` (T5 has no scale: its ``scaled`` stage is the scores). The
layers below run through the engine's own block attention with its record (each head's output is
its recorded weights times its recorded values). The decoder's self-attention (its rows read the
encoder's output through cross-attention) and the cross blocks, and BART and Marian, are refused by
name.
"""

from __future__ import annotations

import numpy as np
import torch

from models import attention as att
from models.config import InputError
from models.pretrained.common import hidden_mask
from models.pretrained.encdec import block_attention
from models.why import Sides
from models.why_stream import _check, frozen, head_writes


def encdec_sides(model, trace, head: int, row: int, cols) -> Sides:
    from models.pretrained.t5 import T5

    arch, block = model.arch, trace.config.get("block")
    if not isinstance(arch, T5) or block != "encoder":
        raise InputError(f"why: {model.model_type} {block} attention is not split yet (the split covers T5's "
                         "encoder self-attention, and encoders and decoders with one residual stream)")  # fmt: skip
    layer = int(trace.config["layer"])
    ids = torch.tensor(trace.meta["token_ids"], dtype=torch.long, device=model.device)
    n, rows = ids.shape[0], tuple(sorted({row, *cols}))
    r = list(rows)
    with torch.no_grad():
        free = hidden_mask(n, "none", (), model.device)  # the encoder hides nothing
        h = arch.embed("encoder", ids)
        names, parts = ["embed"], h[r].double()[None]
        for i in range(layer):
            x = arch.attention_input("encoder", i, h)
            p = arch.params("encoder", i, n, n)
            rec: dict = {}
            o = block_attention(x, x, p, free, record=rec)
            rec["head_output"] = att.weighted_sum(rec["weights"], rec["v"])  # (h, n, d_k): its recorded parts
            new = head_writes(rec, p.w_o, p.heads, rows)
            _check(new, o[r], f"encoder layer {i}'s attention output")
            nxt = arch.feed_forward("encoder", i, arch.after_attention("encoder", i, h, o))
            mlp = nxt[r].double() - h[r].double() - new.sum(0)
            parts = torch.cat([parts, new, mlp[None]])
            names += [f"L{i} H{g}" for g in range(p.heads)] + [f"L{i} mlp"]
            _check(parts, nxt[r], f"the encoder's hidden state after layer {i}")
            h = nxt
        L = arch.layer("encoder", layer)
        x = arch.attention_input("encoder", layer, h)
        if not np.array_equal(x.cpu().numpy(), np.asarray(trace["input"].array)):
            raise InputError(f"why: the encoder layers below {layer} do not give this trace's input; refusing")
        norm = frozen(h, "rms", L["self_norm"], None, arch.eps)
        xs = norm.lin(parts, rows)
        _check(xs, x[r], f"encoder layer {layer}'s attention input")
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
        position = p.bias[head, row, list(cols)].double().cpu().numpy()  # (n_keys,)
    return Sides(tuple(names) + ("bias",), tuple(names) + ("bias",), q[:, at[row]].cpu().numpy(),
                 k[:, [at[j] for j in cols]].permute(1, 0, 2).cpu().numpy(), tuple(cols), float(p.scale),
                 additive=position, additive_name="position bias")  # fmt: skip
