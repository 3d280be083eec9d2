"""Every family the registry names, as tiny random transformers configs, in ONE table.

``ZOO`` maps a case name to a :class:`Case`: the registry family it builds, the transformers config
class and its kwargs, and the recipe that builds it (the module whose ``build`` saves it: a causal
LM with its head for the generation tests, a base model for the layer-by-layer comparisons, a
seq2seq LM for the encoder-decoders). Every test iterates this table (all of it, one
:func:`table` of one recipe, the :func:`cases` of one kind, or :func:`first_case_of_each_family`),
and tests/models/test_zoo.py holds it to the registry: a family added to ``SUPPORTED_TYPES``
without a row here (or a row naming a family the registry does not) fails at once.
"""

from __future__ import annotations

import importlib
from typing import NamedTuple

from models.pretrained.loader import family_kind
from models.pretrained.registry import SUPPORTED_TYPES


class Case(NamedTuple):
    family: str  # the registry's model_type
    config: str  # the transformers config class
    kwargs: dict
    recipe: str  # the module whose build(folder, name) saves it (see RECIPES)


# recipe -> the prefix its case names carry in ZOO (its own tests know them without it)
RECIPES = {"generate_refs": "", "newer_families": "", "test_pretrained_families_2": "2-",
           "test_pretrained_families": "1-", "encdec_refs": "", "bert": ""}  # fmt: skip

WINDOW = 4  # shorter than the sentence's tokens (and the generated sequence): the sliding windows bite
SLIDING, FULL = "sliding_attention", "full_attention"
CAUSAL = dict(hidden_size=32, intermediate_size=64, num_hidden_layers=3, num_attention_heads=4,
              max_position_embeddings=40, initializer_range=0.2)  # fmt: skip
BLOCKS = dict(hidden_size=32, num_hidden_layers=3, num_attention_heads=4)
SMALL = dict(BLOCKS, intermediate_size=64)
DECODER = dict(SMALL, max_position_embeddings=32, initializer_range=0.2)
ENCODER = dict(SMALL, max_position_embeddings=40, initializer_range=0.3)
MOE = dict(num_experts=4, num_experts_per_tok=2, moe_intermediate_size=16)
SPECIALS = dict(pad_token_id=1, bos_token_id=0, eos_token_id=2)  # the BPE test tokenizer's ids
# YaRN whose ramp splits the rotated pairs: the fastest extrapolated, the others interpolated
YARN = {"rope_type": "yarn", "rope_theta": 100.0, "factor": 4.0, "original_max_position_embeddings": 16,
        "beta_fast": 8.0, "beta_slow": 1.0}  # fmt: skip
PHI3_ROPE = {"rope_type": "default", "rope_theta": 10000.0, "partial_rotary_factor": 0.5}
OPT = dict(BLOCKS, ffn_dim=64, max_position_embeddings=32, init_std=0.2)
SMALL_SEQ = dict(d_model=16, encoder_layers=2, decoder_layers=3, encoder_attention_heads=4,
                 decoder_attention_heads=4, encoder_ffn_dim=32, decoder_ffn_dim=24, max_position_embeddings=40,
                 pad_token_id=0, bos_token_id=3, eos_token_id=1, decoder_start_token_id=1, init_std=0.3)  # fmt: skip


def _rows(recipe: str, rows: dict) -> dict[str, Case]:
    return {RECIPES[recipe] + name: Case(*row, recipe) for name, row in rows.items()}


# name: (model_type, config class, kwargs), by recipe
ZOO: dict[str, Case] = {
    **_rows("generate_refs", {  # causal LMs with their heads: the generation tests
        "gpt2": ("gpt2", "GPT2Config", dict(n_embd=32, n_layer=3, n_head=4, n_positions=40, initializer_range=0.3)),
        "gpt_neox-parallel": ("gpt_neox", "GPTNeoXConfig", dict(CAUSAL, rotary_pct=0.5)),
        "gpt_neox-sequential": ("gpt_neox", "GPTNeoXConfig",
                                dict(CAUSAL, rotary_pct=0.25, use_parallel_residual=False)),
        "llama-gqa": ("llama", "LlamaConfig", dict(CAUSAL, num_key_value_heads=2)),
        "llama-tied": ("llama", "LlamaConfig", dict(CAUSAL, num_key_value_heads=1, tie_word_embeddings=True)),
        "mistral-window": ("mistral", "MistralConfig", dict(CAUSAL, num_key_value_heads=2, sliding_window=WINDOW)),
        "qwen2-bias-window": ("qwen2", "Qwen2Config", dict(CAUSAL, num_key_value_heads=2, use_sliding_window=True,
                                                           sliding_window=WINDOW, max_window_layers=1)),
        "qwen3-qknorm": ("qwen3", "Qwen3Config", dict(CAUSAL, num_key_value_heads=2, head_dim=16)),
        "gemma": ("gemma", "GemmaConfig", dict(CAUSAL, num_key_value_heads=1, head_dim=16)),
        "gemma2-softcaps-window": ("gemma2", "Gemma2Config",
                                   dict(CAUSAL, num_key_value_heads=2, head_dim=16, query_pre_attn_scalar=24,
                                        attn_logit_softcapping=1.5, final_logit_softcapping=2.0,
                                        sliding_window=WINDOW)),
        "phi3-partial-window": ("phi3", "Phi3Config", dict(CAUSAL, num_key_value_heads=2, sliding_window=WINDOW + 1,
                                                           pad_token_id=0, rope_parameters=PHI3_ROPE)),
    }),
    **_rows("newer_families", {  # issue 23's families: MoE routing, q/k norms, multipliers, NoPE layers
        "olmo2-gqa": ("olmo2", "Olmo2Config", dict(DECODER, num_key_value_heads=2, **SPECIALS)),
        "smollm3-nope-window": ("smollm3", "SmolLM3Config",
                                dict(DECODER, num_key_value_heads=2, no_rope_layer_interval=2,
                                     use_sliding_window=True, sliding_window=WINDOW, **SPECIALS)),
        "granite-multipliers": ("granite", "GraniteConfig",
                                dict(DECODER, num_key_value_heads=2, embedding_multiplier=3.0,
                                     attention_multiplier=0.2, residual_multiplier=0.5, logits_scaling=4.0)),
        "qwen2_moe-shared-window": ("qwen2_moe", "Qwen2MoeConfig",
                                    dict(DECODER, **MOE, num_key_value_heads=2, shared_expert_intermediate_size=24,
                                         mlp_only_layers=[1], use_sliding_window=True, sliding_window=WINDOW,
                                         max_window_layers=2)),
        "qwen3_moe-qknorm-topk": ("qwen3_moe", "Qwen3MoeConfig",
                                  dict(DECODER, **MOE, num_key_value_heads=2, head_dim=16, norm_topk_prob=True)),
        "starcoder2-window": ("starcoder2", "Starcoder2Config",
                              dict(DECODER, num_key_value_heads=2, sliding_window=WINDOW, **SPECIALS)),
        "stablelm-qknorm-partial": ("stablelm", "StableLmConfig",
                                    dict(DECODER, num_key_value_heads=2, qk_layernorm=True, use_qkv_bias=True,
                                         partial_rotary_factor=0.5)),
        "stablelm-parallel": ("stablelm", "StableLmConfig",
                              dict(DECODER, num_key_value_heads=4, use_parallel_residual=True)),
        "cohere-qknorm": ("cohere", "CohereConfig",
                          dict(DECODER, num_key_value_heads=2, use_qk_norm=True, logit_scale=0.5, **SPECIALS)),
    }),
    **_rows("test_pretrained_families_2", {  # Gemma 3, gpt-oss's sinks, Phi, OPT, Falcon, ModernBERT
        "gemma3-types-softcap": ("gemma3_text", "Gemma3TextConfig",
                                 dict(DECODER, num_key_value_heads=2, head_dim=16, query_pre_attn_scalar=24,
                                      sliding_window=WINDOW, attn_logit_softcapping=2.0,
                                      layer_types=[SLIDING, FULL, SLIDING],
                                      rope_parameters={SLIDING: {"rope_type": "default", "rope_theta": 10.0},
                                                       FULL: {"rope_type": "linear", "rope_theta": 1000.0,
                                                              "factor": 2.0}})),
        "gemma3-pattern": ("gemma3_text", "Gemma3TextConfig",
                           dict(DECODER, num_key_value_heads=1, head_dim=8, sliding_window=WINDOW,
                                sliding_window_pattern=2)),
        "gpt_oss-sinks-moe": ("gpt_oss", "GptOssConfig",
                              dict(DECODER, num_key_value_heads=2, head_dim=8, sliding_window=WINDOW,
                                   num_local_experts=4, num_experts_per_tok=2, swiglu_limit=1.0,
                                   rope_parameters=YARN | {"truncate": False})),
        "llama-yarn": ("llama", "LlamaConfig",  # YaRN, read by every family built on LLaMA's blocks
                       dict(DECODER, num_key_value_heads=2, rope_parameters=YARN | {"mscale": 2.0,
                                                                                    "mscale_all_dim": 1.0})),
        "phi-qk-layernorm": ("phi", "PhiConfig", dict(DECODER, qk_layernorm=True, num_key_value_heads=2)),
        "phi-quarter-rotary": ("phi", "PhiConfig", dict(DECODER, rope_parameters=PHI3_ROPE
                                                        | {"partial_rotary_factor": 0.25})),
        "opt-prenorm": ("opt", "OPTConfig", dict(OPT)),
        "opt-postnorm-projected": ("opt", "OPTConfig", dict(OPT, do_layer_norm_before=False, word_embed_proj_dim=16)),
        "opt-no-bias-no-affine": ("opt", "OPTConfig",
                                  dict(OPT, enable_bias=False, layer_norm_elementwise_affine=False)),
        "falcon-new-gqa": ("falcon", "FalconConfig",
                           dict(BLOCKS, new_decoder_architecture=True, num_kv_heads=2, ffn_hidden_size=64,
                                max_position_embeddings=32, bias=True, initializer_range=0.2)),
        "falcon-new-one-norm": ("falcon", "FalconConfig",  # Falcon2-11B's layout: one LayerNorm feeds both branches
                                dict(BLOCKS, new_decoder_architecture=True, num_kv_heads=1,
                                     num_ln_in_parallel_attn=1, parallel_attn=True, ffn_hidden_size=48,
                                     max_position_embeddings=32, initializer_range=0.2)),
        "falcon-multi-query": ("falcon", "FalconConfig", dict(BLOCKS, multi_query=True, parallel_attn=True,
                                                              max_position_embeddings=32, initializer_range=0.2)),
        "falcon-sequential": ("falcon", "FalconConfig", dict(BLOCKS, multi_query=False, parallel_attn=False,
                                                             max_position_embeddings=32, initializer_range=0.2)),
        "modernbert-local-global": ("modernbert", "ModernBertConfig",
                                    dict(SMALL, max_position_embeddings=40, local_attention=4,
                                         global_attn_every_n_layers=3, global_rope_theta=1000.0,
                                         local_rope_theta=10.0, attention_bias=True, norm_bias=True,
                                         initializer_range=0.3, pad_token_id=1, bos_token_id=0, eos_token_id=2,
                                         cls_token_id=0, sep_token_id=2)),
    }),
    **_rows("test_pretrained_families", {  # biases, grouped heads, windows, soft-caps, fused projections
        "qwen2-bias-gqa-window": ("qwen2", "Qwen2Config",
                                  dict(DECODER, num_key_value_heads=2, use_sliding_window=True, sliding_window=WINDOW,
                                       max_window_layers=1)),
        "qwen3-qknorm": ("qwen3", "Qwen3Config",
                         dict(DECODER, num_key_value_heads=2, head_dim=16, attention_bias=True)),
        "mistral-window": ("mistral", "MistralConfig", dict(DECODER, num_key_value_heads=2, sliding_window=WINDOW)),
        "gemma-mqa": ("gemma", "GemmaConfig", dict(DECODER, num_key_value_heads=1, head_dim=16)),
        "gemma2-softcap-window": ("gemma2", "Gemma2Config",
                                  dict(DECODER, num_key_value_heads=2, head_dim=16, query_pre_attn_scalar=24,
                                       attn_logit_softcapping=1.5, sliding_window=WINDOW)),
        "phi3-fused-partial-window": ("phi3", "Phi3Config", dict(DECODER, num_key_value_heads=2,
                                                                 sliding_window=WINDOW + 1, pad_token_id=0,
                                                                 rope_parameters=PHI3_ROPE)),
        "gpt_neox-parallel": ("gpt_neox", "GPTNeoXConfig", dict(DECODER, rotary_pct=0.5)),
        "gpt_neox-sequential": ("gpt_neox", "GPTNeoXConfig",
                                dict(DECODER, rotary_pct=0.25, use_parallel_residual=False)),
        "roberta": ("roberta", "RobertaConfig", dict(ENCODER, pad_token_id=1, type_vocab_size=1)),
        "xlm-roberta": ("xlm-roberta", "XLMRobertaConfig", dict(ENCODER, pad_token_id=1, type_vocab_size=1)),
        "distilbert": ("distilbert", "DistilBertConfig", dict(dim=32, hidden_dim=64, n_layers=3, n_heads=4,
                                                              max_position_embeddings=32, initializer_range=0.3,
                                                              pad_token_id=1)),
    }),
    **_rows("encdec_refs", {  # seq2seq LMs
        # 4 buckets over a max distance of 6: the source's 18 tokens reach past it (the log buckets, clamped)
        "t5": ("t5", "T5Config", dict(d_model=16, d_kv=8, d_ff=32, num_layers=2, num_decoder_layers=3, num_heads=3,
                                      relative_attention_num_buckets=8, relative_attention_max_distance=6,
                                      feed_forward_proj="relu", initializer_factor=1.0)),
        "t5-v1_1-gated": ("t5", "T5Config", dict(d_model=16, d_kv=4, d_ff=24, num_layers=3, num_decoder_layers=2,
                                                 num_heads=2, relative_attention_num_buckets=6,
                                                 relative_attention_max_distance=5, feed_forward_proj="gated-gelu",
                                                 initializer_factor=1.0)),
        "mt5": ("mt5", "MT5Config", dict(d_model=16, d_kv=4, d_ff=24, num_layers=2, num_heads=4,
                                         relative_attention_num_buckets=10, relative_attention_max_distance=8,
                                         initializer_factor=1.0)),
        "bart": ("bart", "BartConfig", dict(SMALL_SEQ, activation_function="gelu")),
        "marian": ("marian", "MarianConfig", dict(SMALL_SEQ, scale_embedding=True, activation_function="swish")),
        # separate source and target embeddings: no "shared.weight" in the checkpoint
        "marian-unshared": ("marian", "MarianConfig", dict(SMALL_SEQ, scale_embedding=True,
                                                           share_encoder_decoder_embeddings=False)),
    }),
    **_rows("bert", {"bert": ("bert", "BertConfig", dict(ENCODER))}),
}  # fmt: skip


def table(recipe: str) -> dict[str, Case]:
    """The rows one recipe builds, by the names its own tests know them (without the zoo's prefix)."""
    prefix = RECIPES[recipe]
    return {name.removeprefix(prefix): case for name, case in ZOO.items() if case.recipe == recipe}


def cases(kind: str) -> list[str]:
    """The case names whose family is of ``kind`` ("encoder", "decoder", "encoder-decoder")."""
    return [name for name, case in ZOO.items() if family_kind(case.family) == kind]


def missing_types(kind: str | None = None) -> set[str]:
    """The registry's families (of ``kind``) without a case in the zoo: empty, or a test fails."""
    wanted = {t for t in SUPPORTED_TYPES if kind is None or family_kind(t) == kind}
    return wanted - {case.family for case in ZOO.values()}


def first_case_of_each_family() -> list[str]:
    """One case per family of the registry, in the registry's order (the capability matrix)."""
    first: dict[str, str] = {}
    for name, case in ZOO.items():
        first.setdefault(case.family, name)
    return [first[t] for t in SUPPORTED_TYPES if t in first]


def build(folder, name: str):
    """Save case ``name`` (a random model and a tokenizer.json) into ``folder``; return
    transformers' copy read back with eager attention: a causal LM for a decoder (with its head,
    so that it generates), the base model for an encoder, a seq2seq LM for an encoder-decoder."""
    if family_kind(ZOO[name].family) == "decoder":
        import generate_refs
        import transformers

        return generate_refs.build(transformers, folder, name)
    return build_own(folder, name)


def build_own(folder, name: str):
    """Save case ``name`` with its own recipe (the row's: a causal LM, a base model or a seq2seq
    LM); return transformers' copy read back with eager attention."""
    case = ZOO[name]
    short = name.removeprefix(RECIPES[case.recipe])
    if case.recipe == "bert":
        return _build_bert(folder)
    module = importlib.import_module(case.recipe)
    if case.recipe == "generate_refs":
        import transformers

        return module.build(transformers, folder, short)
    built = module.build(folder, short)
    return built[0] if case.recipe == "encdec_refs" else built  # encdec_refs: (model, tokenizer)


def _build_bert(folder):
    import torch
    import transformers
    from test_pretrained_families import make_tokenizer

    torch.manual_seed(0)
    tok = make_tokenizer(True)
    config = transformers.BertConfig(vocab_size=tok.get_vocab_size(), **ZOO["bert"].kwargs)
    model = transformers.AutoModel.from_config(config, attn_implementation="eager").eval()
    model.save_pretrained(folder)
    tok.save(str(folder / "tokenizer.json"))
    return transformers.AutoModel.from_pretrained(folder, attn_implementation="eager").eval()
