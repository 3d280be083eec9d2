"""``--dtype bfloat16`` (issue 45) in every decoder family of the registry, against ``transformers`` run
in bfloat16 on the same weights: a random model of each family is saved as a bfloat16 checkpoint (as
real ones are), so transformers-bf16, our bfloat16 model and our float32 model all hold the very
same weights. Checked: the layers are held in bfloat16 (half the bytes) and said so; the hidden
states and the traced attention agree with transformers-bf16 within the tolerance docs/models.md
states; greedy generation picks, at every step, a token transformers-bf16 also ranks at the top
(within its bf16 rounding), and the same ids in all but the cases named below; the logits agree with
transformers-bf16's (``LOGITS_TOL``, ``HEAD_STEPS``) and the head computes them in bfloat16 without a
float32 copy of itself; the traced layer is float32 (layer 0, with no layer below it, equals the float32
model's); float32 stays exact."""

from __future__ import annotations

import shutil

import numpy as np
import pytest
import torch
from generate_refs import NEW_TOKENS, PROMPT
from zoo import build, cases

from models.generate import GenerateSettings, generate, output_head
from models.pretrained import load_model

transformers = pytest.importorskip("transformers")

# The tolerances docs/models.md ("Precision") states, measured over every decoder case of the zoo
# (largest seen: hidden states 2.0e-2 of the largest |value|, attention weights 3.2e-2).
HIDDEN_TOL = 3e-2  # |ours - transformers-bf16| / max |transformers-bf16|, every layer's output
WEIGHTS_TOL = 5e-2  # |ours - transformers-bf16|, the last layer's attention weights
LOGITS_TOL = 1e-1  # |ours - transformers-bf16| / max |transformers-bf16|, the logits of a run (8.0e-2 seen)
HEAD_STEPS = 1  # the head alone on transformers' final state: bf16 steps at its largest logit (0.5 seen)
LOGIT_STEPS = 4  # a greedy token's transformers-bf16 logit below that step's largest: bf16 steps there
# Greedy ids equal transformers-bf16's token for token in every decoder case but these (measured: 33 of the
# 41; 32 before the head computed in bf16, issue 45): in these a random model's nearly tied logits flip under
# a different bf16 rounding, which LOGIT_STEPS bounds.
OTHER_IDS = ("gpt_neox-parallel", "1-gpt_neox-parallel", "mistral-window", "1-mistral-window", "1-qwen3-qknorm",
             "stablelm-qknorm-partial", "2-gpt_oss-sinks-moe", "2-phi-qk-layernorm")  # fmt: skip


@pytest.fixture(scope="module", params=cases("decoder"))
def family(request, tmp_path_factory):
    first, folder = tmp_path_factory.mktemp(request.param), tmp_path_factory.mktemp(request.param + "-bf16")
    ref16 = build(first, request.param).to(torch.bfloat16).eval()
    ref16.save_pretrained(folder)  # a bfloat16 checkpoint
    shutil.copy(first / "tokenizer.json", folder / "tokenizer.json")
    ref16 = transformers.AutoModelForCausalLM.from_pretrained(folder, dtype=torch.bfloat16,
                                                              attn_implementation="eager").eval()  # fmt: skip
    ours16 = load_model(folder, device="cpu", dtype="bfloat16")
    ours32 = load_model(folder, device="cpu")
    return request.param, ref16, ours16, ours32


def test_the_cases_whose_ids_may_differ_are_cases():
    assert set(OTHER_IDS) <= set(cases("decoder"))


def test_every_layer_is_held_in_bfloat16_and_said(family):
    _, _, ours16, ours32 = family
    assert ours16.dtype == "bfloat16" and ours32.dtype == "float32"
    held16 = [ours16.arch.layers.held_bytes(i) for i in range(ours16.num_layers)]
    held32 = [ours32.arch.layers.held_bytes(i) for i in range(ours32.num_layers)]
    assert all(b16 < b32 for b16, b32 in zip(held16, held32, strict=True))
    with ours16.arch.layers.computing():  # the bytes counted are the bytes held: matrices in bf16
        assert held16[0] == sum(t.nbytes for t in _tensors(ours16.arch.layers[0]))
    assert ours16.arch.layers.residency_text().startswith("weights resident in bfloat16, ")
    assert ours32.arch.layers.residency_text().startswith("weights resident, ")


def test_hidden_states_and_attention_agree_with_transformers_bfloat16(family):
    _, ref16, ours16, ours32 = family
    ids = torch.tensor([ours16.encode(PROMPT).ids])
    ref32 = _float32_reference(ours32)
    with torch.no_grad():
        out = ref16(ids, output_hidden_states=True, output_attentions=True)
        exact = ref32(ids, output_hidden_states=True, output_attentions=True)
    mine = ours16.hidden_states(PROMPT)
    L = ours16.num_layers
    for i in range(L):  # the embeddings and every block's output (the last one: before the final norm)
        theirs, full = out.hidden_states[i][0].float().numpy(), exact.hidden_states[i][0].numpy()
        assert mine[i].dtype == np.float32
        # within the tolerance, or within twice bf16's own distance from float32 where bf16 itself is
        # unstable (gpt-oss: a random router's top experts change with the rounding, in transformers too)
        allowed = max(HIDDEN_TOL * np.abs(theirs).max(), 2 * np.abs(theirs - full).max())
        assert np.abs(mine[i] - theirs).max() <= allowed, i
    trace = ours16.trace(PROMPT, L - 1)
    weights, theirs = trace["weights"].array, out.attentions[L - 1][0].float().numpy()
    assert weights.dtype == np.float32
    allowed = max(WEIGHTS_TOL, 2 * np.abs(theirs - exact.attentions[L - 1][0].numpy()).max())
    np.testing.assert_allclose(weights[..., : theirs.shape[-1]], theirs, atol=allowed, rtol=0)


def test_greedy_generation_agrees_with_transformers_bfloat16(family):
    name, ref16, ours16, ours32 = family
    gen = generate(ours16, PROMPT, GenerateSettings(max_new_tokens=NEW_TOKENS))
    assert gen.generated == NEW_TOKENS and "bfloat16" in gen.weights
    with torch.no_grad():  # transformers-bf16's logits along our sequence: each of our tokens at its top
        logits = ref16(torch.tensor([gen.ids])).logits[0].float()
        exact = _float32_reference(ours32)(torch.tensor([gen.ids])).logits[0]
    own = (exact - logits).abs().max(-1).values  # transformers' own bf16-to-float32 distance, per position
    unstable = float(own.max()) > LOGITS_TOL * float(logits.abs().max())  # bf16 itself unstable (gpt-oss)
    for p in range(gen.prompt_length - 1, gen.n - 1):
        top = float(logits[p].max())
        step = 2.0 ** (np.floor(np.log2(max(abs(top), 1e-3))) - 7)  # bfloat16's spacing at the largest logit
        allowed = max(LOGIT_STEPS * step, 2 * float(own[p])) if unstable else LOGIT_STEPS * step
        assert top - float(logits[p, gen.ids[p + 1]]) <= allowed, p
    if name not in OTHER_IDS:
        prompt = torch.tensor([gen.ids[: gen.prompt_length]])
        with torch.no_grad():
            out = ref16.generate(prompt, attention_mask=torch.ones_like(prompt), do_sample=False,
                                 max_new_tokens=NEW_TOKENS, pad_token_id=0)  # fmt: skip
        assert gen.ids == out[0].tolist()


def test_logits_agree_with_transformers_bfloat16(family):
    _, ref16, ours16, ours32 = family
    ids = torch.tensor([ours16.encode(PROMPT).ids])
    ref32 = _float32_reference(ours32)
    head = output_head(ours16)
    with torch.no_grad():
        out = ref16(ids, output_hidden_states=True)
        exact = ref32(ids).logits[0]
        alone = head.unembed(out.hidden_states[-1][0].float())  # the head given transformers' final state
        mine = head.unembed(torch.from_numpy(ours16.hidden_states(PROMPT)[-1]))  # our whole bf16 run
    theirs = out.logits[0].float()
    assert mine.dtype == torch.float32 and mine.shape == theirs.shape
    top = float(theirs.abs().max())
    step = 2.0 ** (np.floor(np.log2(top)) - 7)  # bfloat16's spacing at the largest logit
    assert float((alone - theirs).abs().max()) <= HEAD_STEPS * step
    allowed = max(LOGITS_TOL * top, 2 * float((exact - theirs).abs().max()))  # gpt-oss: as for the hidden states
    assert float((mine - theirs).abs().max()) <= allowed


class _Float32Made(torch.overrides.TorchFunctionMode):
    """The element counts of the float32 tensors torch makes inside."""

    def __init__(self) -> None:
        super().__init__()
        self.sizes: list[int] = []

    def __torch_function__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        if isinstance(out, torch.Tensor) and out.dtype == torch.float32:
            self.sizes.append(out.numel())
        return out


def test_the_head_makes_no_float32_copy_of_itself(family):
    _, _, ours16, _ = family
    head = output_head(ours16)
    x = torch.randn(1, head.weight.shape[1])
    with torch.no_grad(), _Float32Made() as made:  # a step's one row: nothing float32 beyond its logits
        logits = head.unembed(x)
    assert made.sizes and max(made.sizes) <= logits.numel() == head.vocab_size


def test_the_traced_layer_is_float32_and_float32_is_exact(family):
    _, _, ours16, ours32 = family
    low, exact = ours16.trace(PROMPT, 0), ours32.trace(PROMPT, 0)  # no layer below layer 0
    for stage in ("q", "k", "weights", "output"):
        assert low[stage].array.dtype == np.float32
        np.testing.assert_allclose(low[stage].array, exact[stage].array, atol=1e-6, rtol=1e-6)
    ref32 = _float32_reference(ours32)
    L = ours32.num_layers
    with torch.no_grad():
        out = ref32(torch.tensor([ours32.encode(PROMPT).ids]), output_attentions=True)
    theirs = out.attentions[L - 1][0].numpy()
    np.testing.assert_allclose(ours32.trace(PROMPT, L - 1)["weights"].array[..., : theirs.shape[-1]], theirs,
                               atol=1e-5, rtol=0)  # fmt: skip


def test_the_layers_are_held_in_bfloat16_and_handed_out_in_float32(family):
    _, _, ours16, _ = family
    store = ours16.arch.layers
    with store.computing():  # as the layers below a traced one and generation see them
        held = [t for t in _tensors(store[0]) if t.is_floating_point()]
    low = sum(t.nbytes for t in held if t.dtype == torch.bfloat16)
    assert low > sum(t.nbytes for t in held if t.dtype != torch.bfloat16)  # the matrices (vectors: float32)
    assert all(t.dtype == torch.float32 for t in _tensors(store[0]) if t.is_floating_point())  # anywhere else


def _float32_reference(ours32):
    """transformers in float32 on the same (bfloat16) checkpoint."""
    return transformers.AutoModelForCausalLM.from_pretrained(ours32.path, dtype=torch.float32,
                                                             attn_implementation="eager").eval()  # fmt: skip


def _tensors(value):
    if isinstance(value, torch.Tensor):
        yield value
    elif isinstance(value, dict):
        for v in value.values():
            yield from _tensors(v)
    elif isinstance(value, (tuple, list)):
        for v in value:
            yield from _tensors(v)
