"""``why`` for the self-attention of the encoder-decoder families (T5, mT5, BART, Marian).

T5's sublayers are ``h + attn(RMS(h))`` and ``h + ffn(RMS(h))``: the sources are those of
:mod:`models.reads.why_stream` (``embed``, ``L{l} H{h}``, ``L{l} mlp``) and the score ``biased = q·k + B``
gets one more term, ``position bias`` (T5 has no scale). BART's and Marian's are post-norm, like BERT's:
``LN(h + sublayer(h))``, every source through each frozen LayerNorm (their biases join ``L{l} norm
bias``), with learned (BART) or sinusoidal (Marian) positions as ``pos``. In the decoder, each layer's
cross-attention heads write too (``L{l} cross H{h}``): what they read, the encoder's output, is the
real one, computed from the source sentence, which the caller gives (``source``: its token ids).
The layers below run through the engine's own block attention with its record (each head's output is
its recorded weights times its recorded values); the cross blocks (queries and keys from two streams)
are refused by name.
"""

from __future__ import annotations

import numpy as np
import torch

from models.config import InputError
from models.engine import attention as att
from models.engine.host import to_numpy
from models.pretrained.common import hidden_mask, linear
from models.pretrained.encdec import block_attention
from models.reads.why_sides import Sides, check_size
from models.reads.why_stream import check_parts, frozen, head_writes


class _Stream:
    """One stack's residual stream at rows ``r``: the real state ``h (n, d)``, its sources ``parts``."""

    def __init__(self, arch, side: str, ids, r) -> None:
        self.arch, self.side, self.r, self.post = arch, side, r, arch.wiring.kind == "post"
        self.h = arch.embed(side, ids)
        if not self.post:  # T5: no positions in the stream
            self.names, parts = ["embed"], [self.h[r].double()]
        else:
            word = arch.word[side][ids].double() * arch.embed_scale
            pos = arch.positions(side, ids.shape[0]).double()
            self.names, parts = ["embed", "pos"], [word[r], pos[r]]
            if arch.embedding_norm:  # BART (Marian has none)
                raw = arch.word[side][ids] * arch.embed_scale + arch.positions(side, ids.shape[0])
                ln = frozen(raw, "layer", *arch.emb_norm[side], arch.eps)
                self.names.append("embed norm bias")
                parts = [ln.lin(parts[0], r), ln.lin(parts[1], r), ln.bias.expand(len(r), -1)]
        self.parts = torch.stack(parts)
        check_parts(self.parts, self.h[r], f"the {side}'s embedding")

    def add(self, i: int, new, new_names, sublayer_input, norm_key: str | None, nxt, what: str) -> None:
        """The sublayer's writes ``new`` join; a post-norm sends every source through its frozen LayerNorm,
        its bias joining layer ``i``'s ``norm bias``."""
        parts = torch.cat([self.parts, new])
        names = self.names + new_names
        if self.post:
            weight, bias = self.arch.layer(self.side, i)[norm_key]
            ln = frozen(sublayer_input, "layer", weight, bias, self.arch.eps)
            parts = ln.lin(parts, self.r)
            label = f"L{i} norm bias"
            if label in names:
                parts[names.index(label)] += ln.bias
            else:
                parts, names = torch.cat([parts, ln.bias.expand(len(self.r), -1)[None]]), names + [label]
        self.parts, self.names, self.h = parts, names, nxt
        check_parts(self.parts, nxt[self.r], f"the {self.side}'s hidden state after {what}")

    def attention(self, block: str, i: int, hidden, memory=None, label: str = "") -> None:
        arch, r = self.arch, self.r
        x = arch.attention_input(block, i, self.h)
        kv = x if memory is None else memory
        p = arch.params(block, i, x.shape[0], kv.shape[0])
        rec: dict = {}
        o = block_attention(x, kv, p, hidden, record=rec)
        rec["head_output"] = att.weighted_sum(rec["weights"], rec["v"])  # (h, n, d_k): its recorded parts
        new = head_writes(rec, p.w_o, p.heads, r)
        new_names = [f"L{i}{label} H{g}" for g in range(p.heads)]
        if p.b_o is not None:
            new = torch.cat([new, p.b_o.double().expand(1, len(r), -1)])
            new_names.append(f"L{i}{label} attn bias")
        check_parts(new, o[r], f"{block} layer {i}'s attention output")
        key = "cross_norm" if block == "cross" else "self_norm"
        self.add(i, new, new_names, self.h + o, key, arch.after_attention(block, i, self.h, o), f"{block} layer {i}")

    def feed_forward(self, i: int) -> None:
        arch, r, h = self.arch, self.r, self.h
        nxt = arch.feed_forward(self.side, i, h)
        if self.post:  # LN(h + f): f itself, as the family computes it (add() checks the sum against nxt)
            L = arch.layer(self.side, i)
            f = linear(arch.act(linear(h, *L["fc1"])), *L["fc2"])
            self.add(i, f[r].double()[None], [f"L{i} mlp"], h + f, "ffn_norm", nxt, f"{self.side} layer {i}")
        else:  # h + f: what it added
            self.add(i, (nxt[r].double() - self.parts.sum(0))[None], [f"L{i} mlp"], None, None, nxt,
                     f"{self.side} layer {i}")  # fmt: skip


def _memory(arch, source, device):
    """The encoder's real output for the source token ids."""
    ids = torch.as_tensor(source, dtype=torch.long, device=device)
    free = hidden_mask(ids.shape[0], "none", (), device)
    h = arch.embed("encoder", ids)
    for i in range(arch.encoder_layers):
        h = arch.encoder_block(i, h, free)
    return arch.encoder_final(h)


def _project(p, xs, head: int, side: str):
    """One side's sources ``xs (S, r, d)`` through its projection's head slice, the bias as one more source."""
    w, b = (p.w_q, p.b_q) if side == "q" else (p.w_k, p.b_k)
    dk = p.d_k
    w = w[:, head * dk : (head + 1) * dk].double()
    bias = torch.zeros(1, xs.shape[1], dk, dtype=torch.float64) if b is None else \
        b[head * dk : (head + 1) * dk].double().expand(1, xs.shape[1], -1)  # fmt: skip
    return torch.cat([xs @ w, bias])  # (S + 1, r, d_k)


def _cross_sides(model, trace, head: int, row: int, cols) -> Sides:
    """Cross-attention: the queries' sources are the decoder's (after layer L's self-attention), the keys'
    the encoder's (through its final norm), named ``enc …``; the two streams meet in the table."""
    arch, layer = model.arch, int(trace.config["layer"])
    src = torch.tensor(trace.meta["token_ids"], dtype=torch.long, device=model.device)
    tgt = torch.tensor(trace.meta["query_token_ids"], dtype=torch.long, device=model.device)
    check_size(arch.encoder_layers * (arch.num_heads + 4) + 4, len(cols), arch.hidden_size)
    with torch.no_grad():
        enc = _Stream(arch, "encoder", src, list(cols))
        free = hidden_mask(src.shape[0], "none", (), model.device)
        for i in range(arch.encoder_layers):
            enc.attention("encoder", i, free)
            enc.feed_forward(i)
        memory = arch.encoder_final(enc.h)
        keys = enc.parts  # BART and Marian: the encoder's last state is its output
        if not enc.post:  # T5: through the encoder's final norm
            keys = frozen(enc.h, "rms", arch.final["encoder"], None, arch.eps).lin(enc.parts, list(cols))
        check_parts(keys, memory[list(cols)], "the encoder's output")
        if not np.array_equal(to_numpy(memory), np.asarray(trace["input"].array)):
            raise InputError("why: the encoder does not give this trace's keys' input; refusing")
        dec = _Stream(arch, "decoder", tgt, [row])
        causal = hidden_mask(tgt.shape[0], "causal", (), model.device)
        between = torch.zeros(tgt.shape[0], src.shape[0], dtype=torch.bool, device=model.device)
        for i in range(layer):
            dec.attention("decoder", i, causal)
            dec.attention("cross", i, between, memory, " cross")
            dec.feed_forward(i)
        dec.attention("decoder", layer, causal)  # the cross block reads the state after this self-attention
        x = arch.attention_input("cross", layer, dec.h)
        if not np.array_equal(to_numpy(x), np.asarray(trace["query_input"].array)):
            raise InputError(f"why: the decoder below cross layer {layer} does not give this trace's queries")
        xs = dec.parts if dec.post else frozen(dec.h, "rms", arch.layer("cross", layer)["cross_norm"], None,
                                               arch.eps).lin(dec.parts, [row])  # fmt: skip
        check_parts(xs, x[[row]], f"cross layer {layer}'s query input")
        p = arch.params("cross", layer, tgt.shape[0], src.shape[0])
        q, k = _project(p, xs, head, "q"), _project(p, keys, head, "k")
    return Sides(tuple(dec.names) + ("bias",), tuple(f"enc {n}" for n in enc.names) + ("bias",),
                 to_numpy(q[:, 0]), to_numpy(k.permute(1, 0, 2)), tuple(cols), float(p.scale))  # fmt: skip


def encdec_sides(model, trace, head: int, row: int, cols, source=None) -> Sides:
    """``source``: the source sentence's token ids (the decoder block's cross-attention reads them)."""
    arch, block = model.arch, trace.config.get("block")
    if getattr(arch, "wiring", None) is None:
        raise InputError(f"why: {model.model_type} is not an encoder-decoder the split knows")
    if block == "cross":
        return _cross_sides(model, trace, head, row, tuple(cols))
    if block == "decoder" and source is None:
        raise InputError("why: the decoder's split needs its source sentence (its cross-attention reads it)")
    layer = int(trace.config["layer"])
    ids = torch.tensor(trace.meta["token_ids"], dtype=torch.long, device=model.device)
    n, rows = ids.shape[0], tuple(sorted({row, *cols}))
    r = list(rows)
    check_size(layer * (2 * arch.num_heads + 6) + 4, len(rows), arch.hidden_size)
    with torch.no_grad():
        stream = _Stream(arch, block, ids, r)
        if block == "encoder":
            free = hidden_mask(n, "none", (), model.device)  # the encoder hides nothing
            for i in range(layer):
                stream.attention("encoder", i, free)
                stream.feed_forward(i)
        else:
            memory = _memory(arch, source, model.device)
            causal = hidden_mask(n, "causal", (), model.device)
            free = torch.zeros(n, memory.shape[0], dtype=torch.bool, device=model.device)
            for i in range(layer):
                stream.attention("decoder", i, causal)
                stream.attention("cross", i, free, memory, " cross")
                stream.feed_forward(i)
        x = arch.attention_input(block, layer, stream.h)
        if not np.array_equal(to_numpy(x), np.asarray(trace["input"].array)):
            raise InputError(f"why: the {block} layers below {layer} do not give this trace's input; refusing")
        xs = stream.parts  # BART and Marian: the attention reads h itself
        if not stream.post:  # T5: a pre-norm
            xs = frozen(stream.h, "rms", arch.layer(block, layer)["self_norm"], None, arch.eps).lin(xs, r)
        check_parts(xs, x[r], f"{block} layer {layer}'s attention input")
        p = arch.params(block, layer, n, n)
        q, k = _project(p, xs, head, "q"), _project(p, xs, head, "k")
        at = {j: rows.index(j) for j in rows}
        position = None if p.bias is None else to_numpy(p.bias[head, row, list(cols)].double())  # (n_keys,)
    names = tuple(stream.names) + ("bias",)
    return Sides(names, names, to_numpy(q[:, at[row]]), to_numpy(k[:, [at[j] for j in cols]].permute(1, 0, 2)),
                 tuple(cols), float(p.scale), additive=position, additive_name="position bias")  # fmt: skip
