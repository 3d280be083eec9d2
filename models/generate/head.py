"""The language-model head: final norm, then the unembedding, then Granite's logit scaling and
Gemma 2's logit soft-cap.

The loader keeps only the base model's tensors, so the head is found here: a checkpoint whose
config ties the word embeddings (``tie_word_embeddings``, or the family's default when config.json
does not say) reads the embedding matrix; otherwise the head's own tensor (``lm_head.weight``,
GPT-NeoX's ``embed_out.weight``) is read from the checkpoint. A base model without a head (e.g.
``LlamaModel`` saved alone) cannot predict tokens: a one-line refusal.

Big checkpoints: the head stays in its stored dtype (bf16 stays bf16, like the embedding matrix).
A run in bfloat16/float16 (``--dtype``) computes the logits of such a head as transformers does in that
dtype: one product in the weight's dtype (the normed residuals cast to it, the bias added in it), the
scaling and soft-cap in that dtype too, then float32. No float32 copy of the head is made (issue 45:
converting Llama-3.1-8B's 128,256 × 4,096 head at every token was most of a step). A float32 run
converts such a head to float32 one block of vocabulary rows at a time while the logits are computed;
float32 conversion of bf16/fp16 is exact, so those logits equal those of a whole float32 matrix.

A GGUF file's head (its tied token embeddings or its own ``output.weight``) is a ``RowTable``, read by rows.
It is dequantized once and kept when the model's layers all stay resident and it fits the layer budget
beside them (as one more layer would: SmolLM2's 113 MB, Gemma 3's 671 MB on most machines); otherwise every
step dequantizes it a block of rows at a time (:data:`TABLE_BLOCK_BYTES`), multiplies and drops the block,
so a 7B Q4 file's head is never dequantized whole.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor

from models.checks import config_bool
from models.config import InputError
from models.memory import check_memory, estimate_tensors_read
from models.pretrained.checkpoint import Weights
from models.pretrained.registry import read_config

FEW_ROWS = 64  # up to this many rows the logits are computed as W xᵀ (measured faster for a step)
VOCAB_BLOCK = 8192  # vocabulary rows converted to float32 at a time (a bf16/fp16 head in a float32 run)
TABLE_BLOCK_BYTES = 32 << 20  # float32 bytes of the rows of a GGUF head dequantized at a time
HALF = (torch.bfloat16, torch.float16)


class OutputHead:
    """``logits(h)``: the model's next-token logits ``(r, vocab)`` from residuals ``(r, d_model)``."""

    def __init__(self, arch, weight: Tensor, source: str) -> None:
        self.arch = arch
        self.weight = weight  # (vocab, d_model), as held (float32, bf16/fp16 of a big checkpoint, or a RowTable)
        self.source = source  # "tied embeddings" or the checkpoint key read
        self.softcap = arch.final_logit_softcap
        self.vocab_size = weight.shape[0]
        self.bias: Tensor | None = None  # (vocab,): Phi's head has one

    def unembed(self, x: Tensor) -> Tensor:
        """Normed residuals ``(r, d)`` -> logits ``(r, vocab)``, soft-capped when the family does."""
        w, bias = self.weight, self.bias
        if not isinstance(w, Tensor):  # a GGUF file's RowTable: a block of rows dequantized at a time
            logits = torch.empty(x.shape[0], w.shape[0], dtype=torch.float32, device=x.device)
            block = max(1, TABLE_BLOCK_BYTES // (4 * w.shape[1]))
            for a in range(0, w.shape[0], block):
                logits[:, a : a + block] = F.linear(x, w[a : a + block])
        elif w.dtype in HALF and self.arch.layers.dtype in HALF:  # a bf16/fp16 run: as transformers' lm_head,
            logits = F.linear(x.to(w.dtype), w, None if bias is None else bias.to(w.dtype))  # in the head's dtype
            bias = None  # added in the product (nn.Linear); what follows stays in that dtype until .float()
        elif w.dtype == torch.float32 and x.shape[0] <= FEW_ROWS:
            logits = (w @ x.T).T.contiguous()  # a few rows (a step): 2-3x faster than F.linear here
        elif w.dtype == torch.float32:
            logits = F.linear(x, w)  # exactly nn.Linear(bias=False)
        else:
            logits = torch.empty(x.shape[0], w.shape[0], dtype=torch.float32, device=x.device)
            for a in range(0, w.shape[0], VOCAB_BLOCK):
                logits[:, a : a + VOCAB_BLOCK] = F.linear(x, w[a : a + VOCAB_BLOCK].to(torch.float32))
        if bias is not None:  # Phi's head has a bias
            logits = logits + bias
        if self.arch.logits_scaling != 1.0:  # Granite divides its logits
            logits = logits / self.arch.logits_scaling
        if self.arch.logit_scale != 1.0:  # Cohere multiplies them
            logits = logits * self.arch.logit_scale
        if self.softcap is not None:
            logits = torch.tanh(logits / self.softcap) * self.softcap
        return logits.float()  # a half-precision run's logits read in float32, as transformers' sampling does

    def logits(self, h: Tensor) -> Tensor:
        """The logit lens of residual stream states ``(r, d)``: final norm, then :meth:`unembed`."""
        return self.unembed(self.arch.final(h))


def is_tied(model) -> bool:
    cfg = read_config(model.path)
    return config_bool(cfg, "tie_word_embeddings", model.arch.tied_default)


def keeps_whole(arch, table) -> bool:
    """Whether a GGUF head (a RowTable) is dequantized once and kept: every layer stays resident and the
    table fits the layer budget beside them; otherwise each step reads it by blocks of rows."""
    layers = arch.layers
    residency = layers.residency()
    return residency.resident == residency.layers and residency.resident_bytes + table.nbytes <= layers.budget


def held(model, weight):
    """The head's matrix as the head holds it: a RowTable dequantized whole when :func:`keeps_whole`."""
    if isinstance(weight, Tensor) or not keeps_whole(model.arch, weight):
        return weight
    check_memory(estimate_tensors_read([weight.stored_bytes], [weight.nbytes]), f"reading {model.name}'s head")
    with torch.no_grad():
        return weight.whole()


def load_head(model) -> OutputHead:
    """The head of a :class:`~models.pretrained.PretrainedModel` (read from disk when untied)."""
    arch = model.arch
    if model.default_mask != "causal":
        raise InputError(
            f"{model.name} is an encoder ({model.model_type}); generation needs a decoder"
        )
    if is_tied(model):
        return OutputHead(arch, held(model, arch.input_embeddings()), "tied embeddings")
    weights: Weights = arch.layers.weights
    ckpt = weights.ckpt
    name = arch.lm_head_key
    hits = [k for k in ckpt.keys if k == name or k.endswith("." + name)]
    if not hits:
        raise InputError(
            f"{model.name} has no language-model head ({name!r} is not in its checkpoint and "
            f"config.json does not tie the word embeddings); it cannot predict tokens"
        )
    key = min(hits, key=len)
    head = Weights(ckpt, {name: key}, weights.model_type, weights.device)
    meta = head.as_meta()
    meta.stored(name, arch.vocab_size, arch.hidden_size)  # checks the name, shape and dtype
    check_memory(estimate_tensors_read(meta.taken, meta.held), f"reading {model.name}'s head")
    with torch.no_grad(), ckpt.reading():
        weight = head.table(name, arch.vocab_size, arch.hidden_size)  # a GGUF file's: by rows
    if isinstance(weight, Tensor) and weight.dtype == torch.float64:
        weight = weight.to(torch.float32)
    out = OutputHead(arch, held(model, weight), key)
    if arch.lm_head_bias_key is not None:  # the head's bias, beside its weight
        bias_key = key[: -len("weight")] + "bias"
        if bias_key in ckpt.keys:
            with torch.no_grad(), ckpt.reading():
                b = Weights(ckpt, {"bias": bias_key}, weights.model_type, weights.device)
                out.bias = b.take("bias", arch.vocab_size)
    return out
