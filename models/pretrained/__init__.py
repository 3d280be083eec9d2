"""Real pretrained transformers, offline: step through the attention of an actual model.

Opens Hugging Face model folders (config.json, model.safetensors or pytorch_model.bin,
tokenizer.json) of the families in ``SUPPORTED_TYPES`` (BERT-style encoders and ModernBERT, GPT-2,
GPT-NeoX, OPT, Falcon, Phi and LLaMA-style decoders: Mistral, Qwen, Gemma 1–3, Phi-3, gpt-oss, OLMo 2,
SmolLM3, Granite, the Qwen MoE models, StarCoder2, StableLM, Cohere; encoder-decoders T5, mT5, BART,
Marian, whose ``trace(source, layer, cross_sentence=target, block="encoder"|"decoder"|"cross")`` picks
one of their three attentions, see :mod:`models.pretrained.encdec_model`), runs their layers with a small torch
implementation (no `transformers`), reading big checkpoints layer by layer, and traces one layer's attention
as an :class:`~models.engine.trace.AttentionTrace`::

    model = load_model("minilm")                  # or "gpt2", "org/name", a folder path
    trace = model.trace("The cat sat.", layer=3)  # stages input, q, k, v, scores, ... output
    trace["weights"].array                        # (heads, n, n)

Errors the user can fix raise :class:`models.config.InputError` (one line); ``should_stop``
callbacks abandon work by raising :class:`Cancelled` (the engine's shared
``models.config.Cancelled``, re-exported here).
"""

from models.config import Cancelled
from models.pretrained.common import MASK_MODES
from models.pretrained.encdec_model import EncoderDecoderModel
from models.pretrained.loader import load_model
from models.pretrained.model import PretrainedModel
from models.pretrained.registry import SUPPORTED_TYPES, ModelEntry, list_models, resolve_model

__all__ = [
    "MASK_MODES",
    "SUPPORTED_TYPES",
    "Cancelled",
    "EncoderDecoderModel",
    "ModelEntry",
    "PretrainedModel",
    "list_models",
    "load_model",
    "resolve_model",
]
