"""Generation with our KV cache against transformers, for a random model of every decoder family:
greedy ids equal ``generate(do_sample=False)``; every attention row equals transformers' eager
attention of one forward pass over the final sequence; the last layer's lens is the model's own
next-token distribution and the other layers' lens is the final norm and unembedding of
transformers' hidden states; a seed gives the same sampled tokens twice."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from generate_refs import NEW_TOKENS, PROMPT, WINDOW, build, lens_logits
from zoo import cases, missing_types

from models.generate import GenerateSettings, generate
from models.pretrained import load_model

transformers = pytest.importorskip("transformers")


def test_every_decoder_family_of_the_registry_is_tested():
    assert missing_types("decoder") == set()
    assert len(cases("decoder")) >= 22


@pytest.fixture(scope="module", params=cases("decoder"))
def family(request, tmp_path_factory):
    folder = tmp_path_factory.mktemp(request.param)
    ref = build(transformers, folder, request.param)
    model = load_model(folder, device="cpu")
    gen = generate(model, PROMPT, GenerateSettings(max_new_tokens=NEW_TOKENS))
    return request.param, ref, model, gen


def test_greedy_ids_equal_transformers_generate(family):
    _, ref, _, gen = family
    prompt = torch.tensor([gen.ids[: gen.prompt_length]])
    with torch.no_grad():
        out = ref.generate(prompt, attention_mask=torch.ones_like(prompt), do_sample=False,
                           max_new_tokens=NEW_TOKENS, pad_token_id=0)  # fmt: skip
    assert gen.ids == out[0].tolist()
    assert gen.generated == NEW_TOKENS and gen.stopped == "length"
    assert gen.prompt_length + WINDOW < gen.n
    assert [s.chosen for s in gen.steps] == gen.ids[gen.prompt_length :] + [None]
    assert all(s.top_ids[0] == s.chosen for s in gen.steps[:-1])  # greedy: the most likely


def test_every_attention_row_equals_eager_forward(family):
    _, ref, model, gen = family
    with torch.no_grad():
        out = ref(torch.tensor([gen.ids]), output_attentions=True, output_hidden_states=True)
    mine = gen.attention()
    assert mine.shape == (model.num_layers, model.num_heads, gen.n, gen.n)
    theirs = np.stack([a[0].numpy() for a in out.attentions])
    np.testing.assert_allclose(mine, theirs, atol=1e-5, rtol=0)
    for p in (0, gen.prompt_length - 1, gen.n - 1):
        np.testing.assert_array_equal(gen.layer_rows(p), mine[:, :, p, : p + 1])


def test_logit_lens_equals_final_norm_and_unembedding(family):
    _, ref, model, gen = family
    with torch.no_grad():
        out = ref(torch.tensor([gen.ids]), output_hidden_states=True)
        probs_out = torch.softmax(out.logits[0], -1).numpy()  # (n, vocab): the model's own output
        L = model.num_layers
        # transformers' last hidden state is after the final norm: the last layer is the output
        lens = [torch.softmax(lens_logits(ref, out.hidden_states[i + 1][0]), -1).numpy()
                for i in range(L - 1)] + [probs_out]  # fmt: skip
    n = gen.n
    nxt = gen.ids[1:] + [int(np.argmax(probs_out[-1]))]
    for layer in range(L):
        want = lens[layer][np.arange(n), nxt]
        np.testing.assert_allclose(gen.lens_prob[layer], want, atol=1e-5, rtol=0)
        # the top token: the reference's most likely one (equal to 1e-5 where two nearly tie)
        np.testing.assert_allclose(lens[layer][np.arange(n), gen.lens_ids[layer]], lens[layer].max(-1),
                                   atol=1e-5, rtol=0)  # fmt: skip
        clear = np.sort(lens[layer], -1)[:, -2] < lens[layer].max(-1) - 1e-4
        np.testing.assert_array_equal(gen.lens_ids[layer][clear], lens[layer].argmax(-1)[clear])
        top = np.sort(lens[layer], -1)[:, ::-1][:, :5]
        np.testing.assert_allclose(gen.lens_top_prob[layer], top, atol=1e-5, rtol=0)
    for s in gen.steps:  # each step's bars: the model's own distribution at its position
        np.testing.assert_allclose(s.top_probs, probs_out[s.position][list(s.top_ids)], atol=1e-5)


def test_sampling_with_a_seed_repeats(family):
    _, _, model, _ = family
    s = GenerateSettings(max_new_tokens=NEW_TOKENS, temperature=1.5, top_k=50, top_p=0.95, seed=7)
    a, b = generate(model, PROMPT, s), generate(model, PROMPT, s)
    assert a.ids == b.ids and a.generated == NEW_TOKENS
    others = {tuple(generate(model, PROMPT, GenerateSettings(max_new_tokens=NEW_TOKENS, temperature=1.5,
                                                             seed=seed)).ids) for seed in range(4)}  # fmt: skip
    assert len(others) > 1  # the seed matters


def test_stops_at_the_end_token(tmp_path):
    ref = build(transformers, tmp_path, "llama-gqa")
    model = load_model(tmp_path, device="cpu")
    first = generate(model, PROMPT, GenerateSettings(max_new_tokens=NEW_TOKENS))
    eos = first.ids[first.prompt_length + 2]  # the third generated token becomes the end token
    build(transformers, tmp_path, "llama-gqa", eos=eos)
    model = load_model(tmp_path, device="cpu")
    gen = generate(model, PROMPT, GenerateSettings(max_new_tokens=NEW_TOKENS))
    stop = gen.ids.index(eos, gen.prompt_length)
    assert gen.stopped == "eos" and gen.n == stop + 1 and gen.steps[-1].chosen is None
    prompt = torch.tensor([gen.ids[: gen.prompt_length]])
    with torch.no_grad():
        out = ref.generate(prompt, attention_mask=torch.ones_like(prompt), do_sample=False,
                           max_new_tokens=NEW_TOKENS, eos_token_id=eos, pad_token_id=0)  # fmt: skip
    assert gen.ids == out[0].tolist()


def test_the_lens_is_computed_for_the_cells_read_only(family):
    """Issue 47: generating computes no cell of the lens (it records each layer's residual stream); a
    cell read is computed then, once, and equals the lens of every cell (whose values the test above
    holds to transformers') to 1e-5."""
    _, _, model, whole = family
    gen = generate(model, PROMPT, GenerateSettings(max_new_tokens=NEW_TOKENS))
    L, last = model.num_layers, gen.n - 1
    assert gen.lens.computed_cells == 0
    top_ids, prob = gen.lens.column(last)  # what the window shows first: the newest position, every layer
    assert gen.lens.computed_cells == L
    np.testing.assert_allclose(prob, whole.lens_prob[:, last], atol=1e-5, rtol=0)
    ids, top = gen.lens.top(0, 1)
    assert gen.lens.computed_cells == L + 1 and gen.lens.has(0, 1) and not gen.lens.has(1, 1)
    np.testing.assert_allclose(top, whole.lens_top_prob[0, 1], atol=1e-5, rtol=0)
    gen.lens.column(last)  # memoised: nothing computed again
    assert gen.lens.computed_cells == L + 1
    np.testing.assert_allclose(gen.lens_top_prob, whole.lens_top_prob, atol=1e-5, rtol=0)
    assert gen.lens.computed_cells == L * gen.n
