"""ONE catalogue of stages: name, title, formula, operand shapes, plain-language line and axes.

The toy engine and every pretrained family describe their stages through :func:`describe`, so a
stage reads the same wherever it comes from ("Softmax weights" everywhere), and its operand shapes
are always there. Only the numbers differ: a :class:`Context` carries the sizes and options.
"""

from __future__ import annotations

from dataclasses import dataclass, field

# The canonical order of stages; a trace holds the applicable subset, in this order.
STAGE_ORDER = (
    "embeddings",
    "positional_encoding",
    "input",
    "query_input",
    "q",
    "k",
    "v",
    "q_normed",
    "k_normed",
    "q_rotated",
    "k_rotated",
    "scores",
    "scaled",
    "biased",
    "softcapped",
    "masked",
    "weights",
    "weighted_norms",
    "value_norms",
    "head_output",
    "concat",
    "output",
)
# Stages with one (n_q × n_k) matrix per head: computed lazily, per head and per block of rows.
PAIR_STAGES = ("scores", "scaled", "biased", "softcapped", "masked", "weights", "weighted_norms")


def features(n: int) -> tuple[str, ...]:
    """Labels of a feature axis: "0", "1", ..."""
    return tuple(str(j) for j in range(n))


def head_labels(h: int) -> tuple[str, ...]:
    """Labels of a head axis: "H0", "H1", ..."""
    return tuple(f"H{i}" for i in range(h))


WORD_VECTORS = "a generator seeded by the seed and the word alone (the same row in every sentence)"


@dataclass(frozen=True)
class Context:
    """The sizes and options the texts of a trace's stages are written with."""

    n_q: int
    n_k: int
    d_model: int
    d_k: int
    d_v: int
    heads: int
    kv_heads: int = 0  # 0: same as heads (no grouped-query attention)
    d_out: int = 0  # 0: d_model
    biases: frozenset[str] = frozenset()  # of "q", "k", "v", "o"
    score: str = "scaled"  # dot, scaled, general, additive
    scale: float = 0.0  # the multiplier of the scaled stage (0: 1/√d_k)
    scale_text: str = "√d_k"  # what the scores are divided by, in words
    softcap: float | None = None
    temperature: float = 1.0
    mask: str = "none"  # none, causal, padding, custom
    pad_positions: tuple[int, ...] = ()
    window: int | None = None  # sliding-window attention: a query sees at most this many keys
    pe: str = "none"  # none, sinusoidal, learned, rotary, alibi
    rotary_dim: int | None = None  # partial rotary: only this many features rotate
    embedding_source: str = WORD_VECTORS
    input_title: str = "Input"
    input_formula: str = ""  # "" : X (+ P)
    input_description: str = ""
    layer: int | None = None  # pretrained: the traced layer
    qk_norm: str = ""  # "w" or "(1 + w)": the per-head RMS norm's weight (q_normed, k_normed)
    qk_norm_eps: float = 0.0
    qk_norm_kind: str = "rms"  # "rms" per head, "layer" (per-head LayerNorm), "layer_bias" (Phi), "rms_all"
    rotary_interleaved: bool = False  # RoPE rotates the pairs (2j, 2j + 1), not (j, j + d/2)
    mask_note: str = ""  # an extra sentence for the masked stage (e.g. the model's own mask)
    band: int | None = None  # two-sided local window: a query sees keys at most this far on each side
    sinks: bool = False  # learned attention sinks: one more key column "sink" in the n×n stages
    extra: dict = field(default_factory=dict)

    @property
    def gqa(self) -> bool:
        return 0 < self.kv_heads < self.heads


@dataclass(frozen=True)
class StageText:
    title: str
    formula: str
    description: str
    shapes: str
    row_axis: str
    col_axis: str
    per_head: bool


def _d(*shape: int) -> str:
    return "×".join(str(s) for s in shape)


def _bias(c: Context, which: str, index: str) -> str:
    return f" + b_{which.upper()},{index}" if which in c.biases else ""


def _mask_description(c: Context) -> str:
    parts = []
    if c.mask == "causal":
        parts.append("keys after the query (j > i)")
    if c.window:
        parts.append(f"keys {c.window} or more positions back (a sliding window of {c.window}: each query sees "
                     f"its {c.window} most recent keys, itself included)")  # fmt: skip
    if c.band is not None:
        parts.append(f"keys more than {c.band} positions away on either side (a local window of "
                     f"{2 * c.band + 1} keys centred on the query)")  # fmt: skip
    if c.pad_positions and c.mask in ("causal", "padding"):
        parts.append(f"the padding keys {list(c.pad_positions)}")
    if c.mask == "custom":
        parts.append("the keys the custom mask hides (True = hidden)")
    note = f" {c.mask_note}" if c.mask_note else ""
    if not parts:
        if c.mask == "padding":
            return "Padding mask with no padding key chosen: nothing is hidden." + note
        return "No mask: every query may attend to every key." + note
    return f"Scores of {', and '.join(parts)} become −∞, so their weights will be exactly 0." + note


def _sink_shapes(n_q: int, dk: int, n_k: int) -> str:
    """Operand shapes of the scores with a learned sink: the keys' products, then the sink column."""
    return f"({_d(n_q, dk)})·({_d(dk, n_k - 1)}) → {_d(n_q, n_k - 1)}, + sink column → {_d(n_q, n_k)}"


def describe(name: str, c: Context) -> StageText:
    """Title, formula (with the actual sizes), operand shapes and description of stage ``name``."""
    n_q, n_k, d, dk, dv, h = c.n_q, c.n_k, c.d_model, c.d_k, c.d_v, c.heads
    g = "g" if c.gqa else "h"  # the key/value head a query head reads (heads h = 0 … H−1; i, j: query, key)
    shared = (
        f" {c.kv_heads} key/value heads, each shared by {h // c.kv_heads} query heads "
        f"(query head h reads key/value head g(h))."
        if c.gqa
        else ""
    )
    rot = c.pe == "rotary"
    normed = bool(c.qk_norm)
    q_sym = "Q'_h" if rot else ("Q̂_h" if normed else "Q_h")
    k_sym = f"K'_{g}" if rot else (f"K̂_{g}" if normed else f"K_{g}")
    d_out = c.d_out or d
    pair = ("query", "key", True)
    if c.sinks and name in PAIR_STAGES:  # the sink column: one more key, last
        n_k = n_k + 1
    if name == "embeddings":
        t = ("Embeddings", "X = Embedding(ids)", f"Each token becomes a row of {d} numbers, read from "
             f"{c.embedding_source}.", f"→ {_d(n_k, d)}", "token", "feature", False)  # fmt: skip
    elif name == "positional_encoding":
        t = ("Positional encoding", "P[i,2j] = sin(i/10000^(2j/d)),  P[i,2j+1] = cos(i/10000^(2j/d))",
             "A fixed wave pattern per position, so attention can tell word order.", f"→ {_d(n_k, d)}",
             "token", "feature", False)  # fmt: skip
    elif name == "input":
        formula = c.input_formula or ("X + P" if c.pe == "sinusoidal" else "X")
        desc = c.input_description or ("What attention reads: one row per token" +
                                       (" (embedding plus position)." if c.pe == "sinusoidal" else "."))
        t = (c.input_title, formula, desc, f"→ {_d(n_k, d)}", "token", "feature", False)
    elif name == "query_input":
        t = ("Query input", "X_q + P_q" if c.pe == "sinusoidal" else "X_q",
             "The second sequence: its rows ask the questions (queries).", f"→ {_d(n_q, d)}",
             "token", "feature", False)  # fmt: skip
    elif name == "q":
        t = ("Queries Q", f"Q_h = X W_Q,h{_bias(c, 'q', 'h')}", "What each token is looking for, one "
             "matrix per head.", f"({_d(n_q, d)})·({_d(d, dk)}) → {_d(n_q, dk)}", "query", "feature", True)  # fmt: skip
    elif name == "k":
        t = ("Keys K", f"K_{g} = X W_K,{g}{_bias(c, 'k', g)}", "What each token offers to be matched "
             "against, per head." + shared, f"({_d(n_k, d)})·({_d(d, dk)}) → {_d(n_k, dk)}", "key",
             "feature", True)  # fmt: skip
    elif name == "v":
        t = ("Values V", f"V_{g} = X W_V,{g}{_bias(c, 'v', g)}", "What each token hands over when it "
             "is attended to, per head." + shared, f"({_d(n_k, d)})·({_d(d, dv)}) → {_d(n_k, dv)}", "key",
             "feature", True)  # fmt: skip
    elif name in ("q_normed", "k_normed"):
        sym, rows, n, i = ("Q", "query", n_q, "h") if name == "q_normed" else ("K", "key", n_k, g)
        w = c.qk_norm or "w"
        title = f"Normed {'queries' if sym == 'Q' else 'keys'}"
        why = "so that query–key dot products cannot grow without bound."
        if c.qk_norm_kind == "layer_bias":  # Phi's qk_layernorm
            formula = f"{sym}̂_{i} = ({sym}_{i} − mean) / std · w + b"
            desc = (f"Each head's vector is centred and divided by its standard deviation over its {dk} "
                    f"features, then multiplied by the learned w and shifted by b (LayerNorm, ε = {c.qk_norm_eps:g}), "
                    f"{why}")  # fmt: skip
        elif c.qk_norm_kind == "layer":
            formula = f"{sym}̂_{i} = ({sym}_{i} − mean) / √(var + ε) · w_{i}"
            desc = (f"Each head's vector is centred and divided by its standard deviation over its {dk} features, "
                    f"then multiplied by that head's own learned weights (LayerNorm without bias, "
                    f"ε = {c.qk_norm_eps:g}), {why}")  # fmt: skip
        elif c.qk_norm_kind == "rms_all":
            heads = h if sym == "Q" else (c.kv_heads or h)
            formula = f"{sym}̂ = {sym} / rms({sym} of all {heads} heads) · {w}"
            desc = (f"The whole projection of each token ({heads} heads × {dk} = {heads * dk} features) is divided "
                    f"by its root mean square and multiplied by the learned {w} (RMS norm, ε = {c.qk_norm_eps:g}) "
                    f"before it is split into heads, {why}")  # fmt: skip
        else:
            formula = f"{sym}̂_{i} = {sym}_{i} / rms({sym}_{i}) · {w}"
            desc = (f"Each head's vector is divided by its root mean square over its {dk} features and multiplied "
                    f"by the learned {w} (RMS norm, ε = {c.qk_norm_eps:g}), {why}")  # fmt: skip
        t = (title, formula, desc + (shared if sym == "K" else ""), f"→ {_d(n, dk)}", rows, "feature", True)
    elif name in ("q_rotated", "k_rotated"):
        sym, rows, n, i = ("Q", "query", n_q, "h") if name == "q_rotated" else ("K", "key", n_k, g)
        partial = bool(c.rotary_dim and c.rotary_dim < dk)
        part = (f" Partial rotary: only the first r = {c.rotary_dim} of the {dk} features of each head rotate; "
                f"the other {dk - (c.rotary_dim or 0)} pass unchanged." if partial else "")
        src = f"{sym}̂_{i}" if normed else f"{sym}_{i}"
        t = (f"Rotated {'queries' if sym == 'Q' else 'keys'}",
             f"{sym}'_{i} = RoPE({src}{f'[:{c.rotary_dim}]' if partial else ''}, position)",
             f"Each pair of features {'(2j, 2j + 1)' if c.rotary_interleaved else '(j, j + d/2)'} is rotated "
             "by an angle proportional to the token's position, so that q·k depends on how far apart "
             "two tokens are." + part
             + (shared if sym == "K" else ""), f"→ {_d(n, dk)}", rows, "feature", True)  # fmt: skip
    elif name == "scores":
        if c.score == "general":
            t = ("Scores", f"S_h = {q_sym} W_h {k_sym}ᵀ", "Bilinear match: the query is mixed by a "
                 "learned matrix before meeting the key.",
                 f"({_d(n_q, dk)})·({_d(dk, dk)})·({_d(dk, n_k)}) → {_d(n_q, n_k)}", *pair)  # fmt: skip
        elif c.score == "additive":
            t = ("Scores", "s_ij = wᵀ tanh(q_i W_q + k_j W_k)", "Additive (Bahdanau) match: a tiny "
                 "network scores every query-key pair.", f"→ {_d(n_q, n_k)}", *pair)  # fmt: skip
        else:
            t = ("Scores", f"S_h = {q_sym} {k_sym}ᵀ", "How well each query matches each key: the dot "
                 "product of their rows.", f"({_d(n_q, dk)})·({_d(dk, n_k)}) → {_d(n_q, n_k)}", *pair)  # fmt: skip
        if c.sinks:
            sink = " The last column, 'sink', is not a key: it holds the head's learned sink logit s_h, in every row."
            t = (t[0], t[1] + ",  s_i,sink = s_h", t[2] + sink, _sink_shapes(n_q, dk, n_k), *t[4:])
    elif name == "scaled":
        scale = c.scale or dk**-0.5
        if c.scale_text == "√d_k":
            formula = f"S_h / √d_k  (√{dk} = {dk ** 0.5:.4g})"
        elif c.scale_text.startswith("×"):  # a multiplier of the family's own (Granite)
            formula = f"S_h {c.scale_text}"
        else:
            formula = f"S_h / {c.scale_text}  (× {scale:.4g})"
        t = ("Scaled scores", formula, f"Scores multiplied by {scale:.4g}, so that softmax does not "
             "saturate as d_k grows." + (" The sink column is not scaled: s_h enters the softmax as it is."
             if c.sinks else ""), _sink_shapes(n_q, dk, n_k) if c.sinks else
             f"({_d(n_q, dk)})·({_d(dk, n_k)}) → {_d(n_q, n_k)}", *pair)  # fmt: skip
    elif name == "biased" and c.pe == "alibi":
        t = ("Position-biased scores (ALiBi)", "s_ij ← s_ij + m_h · j", "Each head adds its own slope m_h times "
             "the key's position (ALiBi): within a row this is a penalty growing with the distance i − j, since "
             "the row's own m_h · i drops out of its softmax. This is the model's only position signal.",
             f"→ {_d(n_q, n_k)}", *pair)  # fmt: skip
    elif name == "biased":
        t = ("Position-biased scores", "s_ij ← s_ij + B_h[bucket(j − i)]", "A learned number per head and "
             "relative-distance bucket is added to every score (T5's relative position bias): near distances "
             "get a bucket each, far ones share logarithmically wider buckets. This is the model's only "
             "position signal.", f"→ {_d(n_q, n_k)}", *pair)  # fmt: skip
    elif name == "softcapped":
        cap = c.softcap
        t = ("Soft-capped scores", f"S ← {cap:g} · tanh(S / {cap:g})", f"Soft-capping: scores are squashed "
             f"smoothly into (−{cap:g}, {cap:g}); small scores barely change, large ones saturate, so no single "
             "key can dominate without limit.", f"→ {_d(n_q, n_k)}", *pair)  # fmt: skip
    elif name == "masked":
        window = f" or j ≤ i − {c.window} (window {c.window})" if c.window else ""
        if c.band is not None:
            window += f" or |i − j| > {c.band} (local window)"
        sink = " The sink column is never hidden." if c.sinks else ""
        t = ("Masked scores", f"s_ij = −∞ where hidden{window}", _mask_description(c) + sink,
             f"→ {_d(n_q, n_k)}", *pair)  # fmt: skip
    elif name == "weights":
        temp = f" / {c.temperature:g}" if c.temperature != 1.0 else ""
        if c.sinks:
            t = ("Softmax weights", f"A_h = softmax([S_h, s_h]{temp}) row-wise", "Each row becomes a probability "
                 "distribution over the keys and the sink: the sink takes its share of every row (its column, "
                 "last), and having no value it adds nothing to the output, so the real keys' weights sum to "
                 "1 − a_i,sink, less than 1.", f"→ {_d(n_q, n_k)}", *pair)  # fmt: skip
        else:
            t = ("Softmax weights", f"A_h = softmax(S_h{temp}) row-wise", "Each row becomes a probability "
                 "distribution over the keys: it sums to 1 (all zero if every key is hidden).",
                 f"→ {_d(n_q, n_k)}", *pair)  # fmt: skip
    elif name == "weighted_norms":
        f_h = f"(x W_V,{g}{_bias(c, 'v', g)}) W_O,h"
        t = ("Weighted norms", f"‖a_ij f_h(x_j)‖ = a_ij · ‖f_h(x_j)‖,  f_h(x) = {f_h}",
             "The weight times the length of what the key's value adds to the output through this head: a "
             "large weight on a key whose transformed value is tiny moves little (Kobayashi et al., 2020, "
             "'Attention is not only a weight').", f"({_d(n_q, n_k)})∘(1×{n_k}) → {_d(n_q, n_k)}", *pair)  # fmt: skip
    elif name == "value_norms":
        t = ("Value norms", f"‖f_h(x_j)‖ = ‖(x_j W_V,{g}{_bias(c, 'v', g)}) W_O,h‖",
             f"How far each key's value would move the output through head h if the head attended to it "
             f"alone: its value row times the {c.d_v} rows of W_O that head h feeds, measured as a length. "
             "One row per head." + shared, f"{h}×({_d(n_k, dv)})·({_d(dv, d_out)}) → {_d(h, n_k)}", "head", "key",
             False)  # fmt: skip
    elif name == "head_output":
        sink = (" The sink's weight multiplies no value: it only takes weight away from the keys."
                if c.sinks else "")
        t = ("Head outputs", f"O_h = A_h{'[:, keys]' if c.sinks else ''} V_{g}", "Each token's output is the "
             "weighted sum of the value rows." + sink, f"({_d(n_q, n_k)})·({_d(n_k, dv)}) → {_d(n_q, dv)}", "query",
             "feature", True)  # fmt: skip
    elif name == "concat":
        t = ("Concatenation", f"C = [O_0 … O_{h - 1}]", f"The {h} heads' outputs side by side along the "
             f"features ({h} × {dv} = {h * dv}).", f"{h}×({_d(n_q, dv)}) → {_d(n_q, h * dv)}", "query",
             "feature", False)  # fmt: skip
    elif name == "output":
        t = ("Output", f"Y = C W_O{' + b_O' if 'o' in c.biases else ''}", "The output projection mixes "
             "the heads back into one vector per token.", f"({_d(n_q, h * dv)})·({_d(h * dv, d_out)}) → "
             f"{_d(n_q, d_out)}", "query", "feature", False)  # fmt: skip
    else:
        raise KeyError(f"no stage {name!r} in the catalogue; known: {', '.join(STAGE_ORDER)}")
    return StageText(*t)
