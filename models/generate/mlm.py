"""Encoders with a masked-language-model head (BERT, RoBERTa, XLM-R, DistilBERT): what the model
predicts at each mask token, and the same logit lens (each layer's output through the MLM head).

The head, as transformers computes it: ``logits = LN(act(h W_t + b_t)) W_decᵀ + b`` with the
decoder tied to the word embeddings unless config.json unties it. Its tensors lie outside the base
model in the checkpoint (``cls.predictions.*``, ``lm_head.*``, ``vocab_*``), so they are read here;
a checkpoint saved without them (all-MiniLM-L6-v2, a sentence-embedding model) says so.

The lens of an encoder has no "next token": ``lens_prob`` holds, at each layer, the probability of
the token the last layer ranks first at that position (what the model finally predicts there).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import torch
import torch.nn.functional as F
from torch import Tensor

from models.checks import config_bool
from models.config import InputError
from models.engine.host import to_numpy
from models.generate.result import LENS_TOP, Generation, Lens, Step
from models.memory import check_memory, estimate_tensors_read
from models.pretrained.checkpoint import Weights
from models.pretrained.common import layer_norm
from models.pretrained.registry import read_config

# model_type: (transform, layer norm, decoder, bias names), as transformers' *ForMaskedLM save them
MLM_KEYS = {
    "bert": ("cls.predictions.transform.dense", "cls.predictions.transform.LayerNorm",
             "cls.predictions.decoder", ("cls.predictions.bias", "cls.predictions.decoder.bias")),
    "roberta": ("lm_head.dense", "lm_head.layer_norm", "lm_head.decoder", ("lm_head.bias", "lm_head.decoder.bias")),
    "distilbert": ("vocab_transform", "vocab_layer_norm", "vocab_projector", ("vocab_projector.bias",)),
}  # fmt: skip
MLM_KEYS["xlm-roberta"] = MLM_KEYS["roberta"]
MASK_TOKENS = ("[MASK]", "<mask>")


class MaskedLMHead:
    def __init__(self, arch, tensors: dict[str, Tensor], act, source: str) -> None:
        self.arch, self.t, self.act, self.source = arch, tensors, act, source
        self.vocab_size = tensors["decoder"].shape[0]

    def logits(self, h: Tensor) -> Tensor:
        """Layer outputs ``(r, d)`` -> vocabulary logits ``(r, vocab)``."""
        t = self.t
        x = self.act(F.linear(h, t["dense_w"], t["dense_b"]))
        x = layer_norm(x, t["ln_w"], t["ln_b"], self.arch.eps)
        return F.linear(x, t["decoder"], t["bias"])


def _key(ckpt, name: str) -> str | None:
    hits = [k for k in ckpt.keys if k == name or k.endswith("." + name)]
    return min(hits, key=len) if hits else None


def load_mlm_head(model) -> MaskedLMHead:
    arch, mt = model.arch, model.model_type
    if mt not in MLM_KEYS:
        raise InputError(f"{model.name} ({mt}) is not an encoder with a masked-language-model head")
    dense, ln, decoder, biases = MLM_KEYS[mt]
    weights: Weights = arch.layers.weights
    ckpt = weights.ckpt
    if _key(ckpt, dense + ".weight") is None:
        raise InputError(
            f"{model.name} has no masked-language-model head ({dense}.* is not in its checkpoint: it "
            "was saved without one, e.g. as a sentence-embedding model); it cannot predict masked tokens"
        )
    d, v = arch.hidden_size, arch.vocab_size
    wanted = {"dense_w": (dense + ".weight", (d, d)), "dense_b": (dense + ".bias", (d,)),
              "ln_w": (ln + ".weight", (d,)), "ln_b": (ln + ".bias", (d,))}  # fmt: skip
    bias = next((b for b in biases if _key(ckpt, b) is not None), None)
    if bias is None:
        raise InputError(f"{model.name}'s masked-language-model head lacks its bias ({biases[0]})")
    wanted["bias"] = (bias, (v,))
    tied = config_bool(read_config(model.path), "tie_word_embeddings", True)
    if not tied:
        wanted["decoder"] = (decoder + ".weight", (v, d))
    names = {name: _key(ckpt, name) for name, _ in wanted.values()}
    missing = [n for n, k in names.items() if k is None]
    if missing:
        raise InputError(f"{model.name}'s masked-language-model head lacks {missing[0]!r}")
    head = Weights(ckpt, names, weights.model_type, weights.device)
    meta = head.as_meta()
    for name, shape in wanted.values():
        meta.take(name, *shape)
    check_memory(estimate_tensors_read(meta.taken, meta.held), f"reading {model.name}'s masked-language-model head")
    with torch.no_grad(), ckpt.reading():
        tensors = {role: head.take(name, *shape) for role, (name, shape) in wanted.items()}
    if "decoder" not in tensors:
        tensors["decoder"] = arch.word
    act = F.gelu if mt in ("roberta", "xlm-roberta") else arch.act  # RobertaLMHead: gelu, always
    return MaskedLMHead(arch, tensors, act, "tied embeddings" if tied else names[decoder + ".weight"])


@dataclass(frozen=True)
class MaskPrediction:
    position: int
    top_ids: tuple[int, ...]
    top_tokens: tuple[str, ...]
    top_probs: tuple[float, ...]


@dataclass
class MaskedResult:
    model: str
    model_type: str
    ids: list[int]
    tokens: list[str]
    masks: list[MaskPrediction]
    attention: np.ndarray  # (L, h, n, n)
    lens_ids: np.ndarray  # (L, n) int64: each layer's top token
    lens_prob: np.ndarray  # (L, n) float32: probability of the last layer's top token
    lens_top_ids: np.ndarray  # (L, n, LENS_TOP)
    lens_top_prob: np.ndarray
    head_source: str
    notices: list[str] = field(default_factory=list)
    token_names: dict[int, str] = field(default_factory=dict)  # id -> token, for every id named here

    def as_generation(self) -> Generation:
        """The same numbers in a Generation's shape (one step per mask token; nothing generated,
        ``prompt_length = n``), for the Generate window; ``attention`` stays on this result."""
        L, h, n, _ = self.attention.shape
        steps = [Step(m.position, m.top_ids, m.top_tokens, m.top_probs, None, None) for m in self.masks]
        return Generation(
            model=self.model, model_type=self.model_type, num_layers=L, num_heads=h, ids=list(self.ids),
            tokens=list(self.tokens), prompt_length=n, text="", steps=steps, rows=[],
            lens=Lens.computed(self.lens_top_ids, self.lens_top_prob, self.lens_prob,
                               lambda i: self.token_names.get(i, "?")),
            stopped="masks predicted", settings={}, head_source=self.head_source, notices=list(self.notices),
            token_names=dict(self.token_names),
        )  # fmt: skip


def predict_masks(model, sentence: str, shown: int = 10, max_tokens: int | None = None) -> MaskedResult:
    """The predictions at every mask token of ``sentence`` and the lens of every position."""
    head = load_mlm_head(model)
    tok = model.tokenizer
    enc, attention, notices = model.layer_weights(sentence, max_tokens=max_tokens)
    masks = [p for p, t in enumerate(enc.tokens) if t in MASK_TOKENS]
    if not masks:
        mask = next((t for t in MASK_TOKENS if tok.tokenizer.token_to_id(t) is not None), MASK_TOKENS[0])
        raise InputError(f"the sentence has no mask token; write {mask} where {model.name} should predict")
    states = model.hidden_states(sentence)[1:]  # each layer's output (L arrays (n, d))
    with torch.no_grad():
        probs = [torch.softmax(head.logits(torch.from_numpy(s).to(model.device)), -1) for s in states]
        final_top = probs[-1].argmax(-1)  # (n,)
        top = [torch.topk(p, min(LENS_TOP, p.shape[-1]), -1) for p in probs]
        lens_prob = torch.stack([p.gather(1, final_top[:, None])[:, 0] for p in probs])
        predictions = []
        for p in masks:
            t = torch.topk(probs[-1][p], min(shown, head.vocab_size))
            ids = tuple(int(i) for i in t.indices)
            predictions.append(MaskPrediction(p, ids, tuple(tok.token(i) for i in ids),
                                              tuple(float(x) for x in t.values)))  # fmt: skip
    top_ids = to_numpy(torch.stack([t.indices for t in top])).astype(np.int64)
    named = set(np.unique(top_ids).tolist()) | set(enc.ids) | {i for m in predictions for i in m.top_ids}
    return MaskedResult(
        model=model.name, model_type=model.model_type, ids=list(enc.ids), tokens=list(enc.tokens),
        masks=predictions, attention=attention, lens_ids=top_ids[:, :, 0].copy(),
        lens_prob=to_numpy(lens_prob).astype(np.float32), lens_top_ids=top_ids,
        lens_top_prob=to_numpy(torch.stack([t.values for t in top])).astype(np.float32),
        head_source=head.source, notices=list(notices), token_names={i: tok.token(i) for i in sorted(named)},
    )  # fmt: skip
