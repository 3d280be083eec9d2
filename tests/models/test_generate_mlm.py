"""Encoders with a masked-language-model head: the predictions at mask tokens and the lens equal
transformers' ``*ForMaskedLM`` (random models); a checkpoint without a head says so."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers

from main import main
from models.config import InputError
from models.generate.mlm import predict_masks
from models.pretrained import load_model

transformers = pytest.importorskip("transformers")

CORPUS = ["the cat sat on the mat", "a dog is walking in the park", "attention is all you need"] * 4
SMALL = dict(hidden_size=32, intermediate_size=64, num_hidden_layers=3, num_attention_heads=4,
             max_position_embeddings=40, initializer_range=0.3)  # fmt: skip
FAMILIES = {
    "bert": ("BertConfig", SMALL, "[MASK]", lambda ref, h: ref.cls(h)),
    "roberta": ("RobertaConfig", dict(SMALL, pad_token_id=1, type_vocab_size=1), "<mask>",
                lambda ref, h: ref.lm_head(h)),
    "distilbert": ("DistilBertConfig", dict(dim=32, hidden_dim=64, n_layers=3, n_heads=4, max_position_embeddings=40,
                                            initializer_range=0.3, pad_token_id=1), "[MASK]",
                   lambda ref, h: ref.vocab_projector(ref.vocab_layer_norm(ref.activation(ref.vocab_transform(h))))),
}  # fmt: skip


def make_tokenizer() -> Tokenizer:
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=300, special_tokens=["<s>", "<pad>", "</s>", "[MASK]", "<mask>"],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())  # fmt: skip
    tok.train_from_iterator(CORPUS, trainer)
    tok.post_processor = processors.TemplateProcessing(single="<s> $A </s>", special_tokens=[("<s>", 0), ("</s>", 2)])
    return tok


@pytest.mark.parametrize("name", list(FAMILIES))
def test_mask_predictions_and_lens_equal_transformers(tmp_path, name):
    cls_name, kwargs, mask, head_of = FAMILIES[name]
    torch.manual_seed(0)
    tok = make_tokenizer()
    config = getattr(transformers, cls_name)(vocab_size=tok.get_vocab_size(), **kwargs)
    ref = transformers.AutoModelForMaskedLM.from_config(config, attn_implementation="eager").eval()
    with torch.no_grad():
        for param in ref.parameters():
            if param.dim() == 1:
                param.add_(0.1 * torch.randn_like(param))
    ref.save_pretrained(tmp_path)
    tok.save(str(tmp_path / "tokenizer.json"))
    ref = transformers.AutoModelForMaskedLM.from_pretrained(tmp_path, attn_implementation="eager").eval()
    sentence = f"the cat {mask} on the {mask}"
    result = predict_masks(load_model(tmp_path, device="cpu"), sentence, shown=5)
    assert [result.tokens[m.position] for m in result.masks] == [mask, mask]
    with torch.no_grad():
        out = ref(torch.tensor([result.ids]), output_hidden_states=True, output_attentions=True)
        probs = torch.softmax(out.logits[0], -1).numpy()
        lens = [torch.softmax(head_of(ref, h[0]), -1).numpy() for h in out.hidden_states[1:]]
    for m in result.masks:
        np.testing.assert_allclose(m.top_probs, np.sort(probs[m.position])[::-1][:5], atol=1e-5)
        assert m.top_ids[0] == probs[m.position].argmax()
    np.testing.assert_allclose(lens[-1], probs, atol=1e-6)
    final_top = probs.argmax(-1)
    for layer, p in enumerate(lens):
        np.testing.assert_allclose(result.lens_prob[layer], p[np.arange(len(result.ids)), final_top], atol=1e-5)
        np.testing.assert_allclose(result.lens_top_prob[layer], np.sort(p, -1)[:, ::-1][:, :5], atol=1e-5)
    np.testing.assert_allclose(result.attention, np.stack([a[0].numpy() for a in out.attentions]), atol=1e-5)
    # main.py generate on an encoder writes the mask predictions and the lens
    assert main(["generate", "--model", str(tmp_path), "--prompt", sentence, "--out", str(tmp_path / "o")]) == 0
    written = json.loads((tmp_path / "o" / "tokens.json").read_text())
    assert [m["position"] for m in written["masks"]] == [m.position for m in result.masks]
    np.testing.assert_array_equal(np.load(tmp_path / "o" / "lens_ids.npy"), result.lens_ids)


def test_minilm_has_no_head_and_says_so(capsys, tmp_path):
    with pytest.raises(InputError, match="no masked-language-model head"):
        predict_masks(load_model("minilm", device="cpu"), "the cat [MASK] on the mat")
    assert main(["generate", "--model", "minilm", "--prompt", "the [MASK]", "--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err
    assert "no masked-language-model head" in err and err.count("\n") == 1 and not (tmp_path / "o").exists()
    assert main(["generate", "--model", "minilm", "--prompt", "the [MASK]", "--temperature", "1",
                 "--out", str(tmp_path / "o")]) == 2  # fmt: skip
    assert "is an encoder" in capsys.readouterr().err
