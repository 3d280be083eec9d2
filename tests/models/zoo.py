"""Every family the registry names, as tiny random transformers configs, in ONE catalogue.

``ZOO`` maps a case name to ``(model_type, transformers config class, kwargs)``; the capability
tests parametrize over it (or over :func:`cases` of one kind), and :func:`missing_types` holds it
to the registry: a family added to ``SUPPORTED_TYPES`` without a case here fails the tests of every
capability at once, instead of never being tested.
"""

from __future__ import annotations

from encdec_refs import FAMILIES as ENCDEC
from generate_refs import FAMILIES as GENERATE
from newer_families import NEWER
from test_pretrained_families import ENCODER
from test_pretrained_families import FAMILIES as FAMILIES_1
from test_pretrained_families_2 import FAMILIES as FAMILIES_2

from models.pretrained.loader import family_kind
from models.pretrained.registry import SUPPORTED_TYPES


def _three(table: dict) -> dict:
    return {name: tuple(entry[:3]) for name, entry in table.items()}


ZOO: dict[str, tuple[str, str, dict]] = {
    **_three(GENERATE), **_three(NEWER), **{f"2-{k}": v for k, v in _three(FAMILIES_2).items()},
    **{f"1-{k}": v for k, v in _three(FAMILIES_1).items()}, **_three(ENCDEC),
    "bert": ("bert", "BertConfig", dict(ENCODER)),
}  # fmt: skip


def cases(kind: str) -> list[str]:
    """The case names whose family is of ``kind`` ("encoder", "decoder", "encoder-decoder")."""
    return [name for name, (model_type, _, _) in ZOO.items() if family_kind(model_type) == kind]


def missing_types(kind: str | None = None) -> set[str]:
    """The registry's families (of ``kind``) without a case in the zoo: empty, or a test fails."""
    wanted = {t for t in SUPPORTED_TYPES if kind is None or family_kind(t) == kind}
    return wanted - {model_type for model_type, _, _ in ZOO.values()}


def first_case_of_each_family() -> list[str]:
    """One case per family of the registry, in the registry's order (the capability matrix)."""
    first: dict[str, str] = {}
    for name, (model_type, _, _) in ZOO.items():
        first.setdefault(model_type, name)
    return [first[t] for t in SUPPORTED_TYPES if t in first]


def build(folder, name: str):
    """Save case ``name`` (a random model and a tokenizer.json) into ``folder``; return
    transformers' copy read back with eager attention: a causal LM for a decoder (with its head,
    so that it generates), the base model for an encoder, a seq2seq LM for an encoder-decoder."""
    import encdec_refs
    import generate_refs
    import newer_families
    import test_pretrained_families as families_1
    import test_pretrained_families_2 as families_2
    import transformers

    model_type = ZOO[name][0]
    if family_kind(model_type) == "decoder":
        return generate_refs.build(transformers, folder, name)
    if family_kind(model_type) == "encoder-decoder":
        return encdec_refs.build(folder, name)[0]
    if name == "bert":
        return _build_bert(folder)
    for prefix, module in (("1-", families_1), ("2-", families_2)):
        if name.startswith(prefix):
            return module.build(folder, name[len(prefix) :])
    return newer_families.build(folder, name)


def _build_bert(folder):
    import torch
    import transformers
    from test_pretrained_families import make_tokenizer

    torch.manual_seed(0)
    tok = make_tokenizer(True)
    config = transformers.BertConfig(vocab_size=tok.get_vocab_size(), **ZOO["bert"][2])
    model = transformers.AutoModel.from_config(config, attn_implementation="eager").eval()
    model.save_pretrained(folder)
    tok.save(str(folder / "tokenizer.json"))
    return transformers.AutoModel.from_pretrained(folder, attn_implementation="eager").eval()
