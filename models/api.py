"""The front door for Python: the toy, any model, a traced layer, one cell explained, generation
and a head atlas, in a few lines, with the numbers the command lines write (``export`` and
``explain`` trace through :func:`trace_spec`)::

    from models import api

    model = api.load("minilm")                       # or "induction", a cache name, a folder; step="first"
    trace = model.trace("The cat sat on the mat.", layer=2)
    trace.tokens, trace.stages                       # ('[CLS]', 'the', ...), ('input', 'q', ..., 'weights', ...)
    trace.stage("weights")                           # numpy (heads, n_q, n_k), as export's weights.npy
    trace.explain("weights", (0, 3, 1))              # the dict `explain --json` prints
    api.toy("The cat sat.", heads=2, mask="causal")  # the notes' single attention layer, export's settings
    api.load("induction").generate("abcabc", max_new_tokens=5).tokens
    model.atlas(["the cat sat", "a dog ran"])        # the rows of heads.csv

The settings are the rows of the one option table (:data:`models.fields.FIELDS`), named as their
``dest`` (``d_model`` for ``--d-model``) with the same defaults, checks and one-line
:class:`~models.config.InputError` for what the user can fix. ``export`` and ``explain`` build
their trace with :func:`trace_spec`, as :meth:`Model.trace` and :func:`toy` do. Documented with a
notebook-style example in docs/api.md.
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Callable, Iterable
from functools import cached_property
from typing import Any

import numpy as np

from models import run_engine
from models.api_generated import Generated, generation_settings
from models.engine.held_arrays import HeldArrays
from models.errors import InputError
from models.fields import BY_DEST, FIELDS, labels, positions
from models.files.run_files import spec_from_args
from models.runspec import RunSpec

__all__ = ["SETTINGS", "TRACE_SETTINGS", "Generated", "Model", "Trace", "generation_settings", "layer_params", "load",
           "runspec", "toy", "trace_spec"]

SETTINGS = tuple(f.dest for f in FIELDS if f.stored)  # every keyword a RunSpec takes, table order
# What Model.trace takes beyond the sentence: the rows that apply to a model, except those load() fixes.
TRACE_SETTINGS = tuple(d for d in SETTINGS if BY_DEST[d].applies != "toy" and d not in ("sentence", "model", "step",
                                                                                      "device"))  # fmt: skip


# --- settings -> RunSpec (the one request) ----------------------------------------------------------
def runspec(**settings: Any) -> RunSpec:
    """A validated :class:`~models.runspec.RunSpec` from keyword settings named as the rows of
    ``FIELDS`` (``sentence``, ``heads``, ``d_model``, ``mask``, ``pe``, ``seed``, ``model``, ...),
    with their defaults. A file row (``embeddings``, ``cross_embeddings``, ``mask_file``,
    ``weights``) takes a path (read as the command line reads it) or the array itself (``weights``:
    a dict of arrays, as in the ``.npz``). Lists are accepted where the command line takes
    comma-separated values (``pad_positions=[3, 4]``). InputError (one line) for anything wrong."""
    unknown = [k for k in settings if k not in SETTINGS]
    if unknown:
        raise InputError(f"unknown setting {unknown[0]!r}; the settings are {', '.join(SETTINGS)}")
    args = argparse.Namespace(**{f.dest: f.default for f in FIELDS})
    held: dict[str, np.ndarray] = {}
    for dest, value in settings.items():
        f = BY_DEST[dest]
        if f.array and value is not None and not isinstance(value, (str, os.PathLike)):
            held |= _held(f.array, value)
        else:
            setattr(args, dest, _value(f, value))
    spec = spec_from_args(args)  # the files read as export reads them
    if held:
        spec = spec.replace(arrays=HeldArrays({**spec.arrays, **held}))
    return spec.validate()


def _value(f, value: Any) -> Any:
    """A Python value for row ``f``, checked as a RunSpec's JSON is (type, choices, range)."""
    if value is None:
        if f.default is not None:
            raise InputError(f"setting {f.dest} cannot be None (default {f.default!r})")
        return None
    if f.array:
        return os.fspath(value)  # a file's path: RunSpec.from_args reads it
    if f.type in (positions, labels):
        if isinstance(value, str):
            try:
                return f.type(value)
            except argparse.ArgumentTypeError as exc:
                raise InputError(f"setting {f.dest}: {exc}") from None
        value = list(value) if isinstance(value, (list, tuple)) else value
    elif f.type is str and isinstance(value, os.PathLike):
        value = os.fspath(value)  # model=Path("runs/my-model")
    elif f.type is str and isinstance(value, int) and not isinstance(value, bool):
        value = str(value)  # step=500
    elif isinstance(value, np.generic):
        value = value.item()
    return f.from_json(value)


def _text(value: Any, what: str) -> str:
    """A text given to the API: a ``str`` that UTF-8 can encode (no surrogates: bytes that were not
    UTF-8, escaped); one InputError line otherwise (they were tokenizers' TypeErrors)."""
    if not isinstance(value, str):
        raise InputError(f"{what} must be a string, got {type(value).__name__} {str(value)[:40]!r}")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise InputError(f"{what} is not valid UTF-8 text: {ascii(value)[:80]}") from None
    return value


def _cell(cell: Any) -> tuple[int, ...]:
    """``(head, row, col)`` or ``(row, col)`` as whole numbers; one InputError line for anything else."""
    numbers = isinstance(cell, (tuple, list, np.ndarray)) and all(
        isinstance(c, (int, np.integer)) and not isinstance(c, bool) for c in cell)  # fmt: skip
    if not numbers:
        raise InputError(f"a cell is a tuple of whole numbers, (head, row, col) or (row, col), got {str(cell)[:60]!r}")
    return tuple(int(c) for c in cell)


def _held(name: str, value: Any) -> dict[str, np.ndarray]:
    if name == "weights":
        if not isinstance(value, dict):
            raise InputError("setting weights takes a path to a .npz file or a dict of arrays (W_q, W_k, ...)")
        return {f"weights/{k}": np.asarray(a) for k, a in value.items()}
    return {name: np.asarray(value)}


# --- one traced layer --------------------------------------------------------------------------------
class Trace:
    """One traced attention layer, the toy's or a model's: what ``export`` writes, what ``explain``
    explains. ``raw`` is the engine's :class:`~models.engine.trace.AttentionTrace`, ``spec`` the request,
    ``engine`` the loaded model that made it (None for the toy)."""

    def __init__(self, raw, spec: RunSpec, params: Callable[[], Any], engine=None) -> None:
        self.raw, self.spec, self._params, self.engine = raw, spec, params, engine

    def __repr__(self) -> str:
        what = self.raw.meta.get("model") or "toy"
        return f"Trace({what}, {len(self.tokens)} tokens, stages={', '.join(self.stages)})"

    @property
    def tokens(self) -> tuple[str, ...]:
        """The key tokens (the sentence's; a model's with its special tokens)."""
        return tuple(self.raw.key_tokens)

    @property
    def query_tokens(self) -> tuple[str, ...]:
        """The query tokens: :attr:`tokens`, except in cross-attention (the second sentence's)."""
        return tuple(self.raw.query_tokens)

    @property
    def stages(self) -> tuple[str, ...]:
        """The stage names, in order (``input``, ``q``, ``k``, ``v``, ``scores``, ..., ``output``)."""
        return self.raw.names

    @property
    def config(self) -> dict:
        """What was computed (manifest.json's ``config``)."""
        return self.raw.config

    @property
    def notices(self) -> list[str]:
        """What the engine noted (a mask replacing the model's own, a truncation, ...)."""
        return list(self.spec.notes()) + list(self.raw.meta.get("notices", []))

    def stage(self, name: str) -> np.ndarray:
        """Stage ``name`` as a numpy array, as ``export`` writes ``<name>.npy``: per-head stages
        have the head axis first (``weights`` is ``(heads, n_q, n_k)``). Read-only: ``.copy()`` it
        to change it (a what-if edit is the window's, or a session's)."""
        if name not in self.raw:
            raise InputError(f"this trace has no stage {name!r}; its stages are {', '.join(self.stages)}")
        array = self.raw[name].array.view()
        array.flags.writeable = False  # the trace's own numbers: .copy() to change them
        return array

    @cached_property
    def params(self):
        """The traced layer's parameters (models.reads.params.LayerParams), read once when first asked."""
        return self._params()

    def derivation(self, stage: str, cell) -> Any:
        """How one cell is computed (a models.reads.derivation.Derivation: ``.text()``, ``.to_dict()``)."""
        from models.reads.explain import explain

        return explain(self.raw, self.params, stage, _cell(cell))

    def explain(self, stage: str, cell) -> dict:
        """The derivation of ``cell`` of ``stage`` (``(head, row, col)`` for per-head stages, else
        ``(row, col)``, from 0): the very dict ``main.py explain --json`` prints (formula, value,
        ``sum_of`` the summands adding up to it, steps)."""
        return self.derivation(stage, cell).to_dict()

    def why(self, head: int, row: int, col: int, with_row: bool = False, steps: str | None = None) -> dict:
        """Why head ``head`` scores key ``col`` as it does for query ``row``: the score (stage
        ``scaled``) split exactly into query-source × key-source terms, the very dict
        ``main.py why --json`` prints (``score``, ``query_sources``, ``key_sources``, ``table``);
        ``with_row``: also ``row_split``, the top key's terms against the weighted mean. docs/why.md.
        ``steps``: ``"all"`` or ``"first,583,last"``: the same cell at those training checkpoints of
        the model, as a series (``main.py why --steps ... --json``; docs/time-machine.md)."""
        from models.reads.why import why

        if steps is not None:
            from models.history.why_steps import why_over_steps

            if with_row:
                raise InputError("with_row splits one step's row; leave it out with steps=")
            return why_over_steps(self.spec, head, row, col, steps=str(steps))

        return why(self.raw, head, row, col, model=self.engine, params=None if self.engine else self.params,
                   with_row=with_row, source=self.spec.sentence)  # fmt: skip


def trace_spec(spec: RunSpec, model=None) -> Trace:
    """The trace ``spec`` describes (its edits applied), the one way ``export``, ``explain`` and
    this module trace: the toy engine, or ``model`` (loaded from ``spec.model`` when None)."""
    if not spec.uses_model:
        raw = run_engine.trace(spec)
        return Trace(raw, spec, lambda: layer_params(spec, raw))
    engine = run_engine.load_model(spec) if model is None else model
    raw = run_engine.model_trace(spec, engine)
    return Trace(raw, spec, lambda: layer_params(spec, raw, engine), engine)


def layer_params(spec: RunSpec, raw, model=None):
    """The traced layer's parameters (models.reads.params.LayerParams) of ``raw``, the trace of ``spec``
    (``model``: the loaded model that made it): the one mapping, of :attr:`Trace.params` and the window's
    inspector (explorer/engine/job_results.py). A model's layer and mask as traced (``raw.config``)."""
    from models.reads.params import pretrained_params, toy_params

    if not spec.uses_model:
        return toy_params(run_engine.toy_request(spec))
    c = raw.config
    if c.get("encoder_decoder"):
        from models.reads.encdec_params import encdec_params

        return encdec_params(model, raw)
    return pretrained_params(model, c["layer"], len(raw.query_tokens), c["mask"], c["pad_positions"])


def toy(sentence: str | None = None, **settings: Any) -> Trace:
    """The notes' single attention layer on ``sentence`` with ``export``'s settings (``heads=2,
    d_model=16, d_k, d_v, d_out, mask="none", score="scaled", pe="none", temperature=1.0, seed=0,
    bias=False, cross_sentence, pad_positions, embeddings, weights, mask_file, device``; the rows
    of ``FIELDS`` that apply to the toy), as ``main.py export --sentence ...`` computes it."""
    if settings.get("model") is not None:
        raise InputError("toy() is the toy engine; trace a model with load(name).trace(sentence)")
    if sentence is not None:
        _text(sentence, "the sentence")
    return trace_spec(runspec(sentence=sentence, **settings))


# --- a model -----------------------------------------------------------------------------------------
def load(name_or_folder: str | os.PathLike, step: str | int | None = None, device: str = "auto",
         dtype: str = "float32") -> Model:  # fmt: skip
    """Open a model: ``"minilm"`` (built in), ``"induction"`` (trained here, with its checkpoints),
    a Hugging Face cache name (``"gpt2"``, ``"org/name"``), a folder or a GGUF file. ``step``: a training
    checkpoint, ``"first"``, ``"last"`` or a step number, as ``--step`` (models/pretrained/steps.py);
    ``device``: ``"auto"`` (CUDA when present), ``"cpu"`` or ``"cuda"``; ``dtype``: as ``--dtype``."""
    from models.pretrained import load_model

    given = {"model": name_or_folder, "step": step, "device": device, "dtype": dtype}
    opened = {k: _value(BY_DEST[k], v) for k, v in given.items()}
    return Model(load_model(opened["model"], opened["device"], step=opened["step"], dtype=opened["dtype"]), opened)


class Model:
    """A loaded model (:func:`load`); ``engine`` is the engine's PretrainedModel or
    EncoderDecoderModel."""

    def __init__(self, engine, opened: dict[str, Any]) -> None:
        self.engine, self._opened = engine, dict(opened)  # model, step, device, dtype: as load() was asked

    def __repr__(self) -> str:
        return f"Model({self.name!r}, {self.model_type}, layers={self.num_layers}, heads={self.num_heads})"

    name = property(lambda self: self.engine.name, doc="its name (with ``@ step-N`` for a checkpoint)")
    model_type = property(lambda self: self.engine.model_type, doc="config.json's model_type")
    num_layers = property(lambda self: self.engine.num_layers)
    num_heads = property(lambda self: self.engine.num_heads)
    dtype = property(lambda self: self._opened["dtype"], doc='"float32", "bfloat16" or "float16" (load())')
    weights = property(lambda self: self.engine.arch.layers.residency_text(),
                       doc='how its layers are held: "weights resident, 4.9 GB" or "12 of 32 layers read from disk '
                           'per token" (those that do not fit the device\'s memory)')  # fmt: skip
    is_decoder = property(lambda self: getattr(self.engine, "default_mask", None) == "causal",
                          doc="whether it generates (a decoder; encoders and encoder-decoders do not)")  # fmt: skip

    def spec(self, sentence: str, **settings: Any) -> RunSpec:
        """The RunSpec of a trace of this model (what ``export --model`` takes)."""
        _text(sentence, "the sentence")
        wrong = [k for k in settings if k not in TRACE_SETTINGS]
        if wrong:
            raise InputError(f"{wrong[0]!r} is not a setting of a model's trace; those are {', '.join(TRACE_SETTINGS)}")
        return runspec(**self._opened, sentence=sentence, **settings)

    def trace(self, sentence: str, layer: int = 0, block: str | None = None, cross_sentence: str | None = None,
              **settings: Any) -> Trace:  # fmt: skip
        """Layer ``layer`` (from 0) of the model on ``sentence``: the layers below run for real, the
        traced one is a :class:`Trace` of the toy's stages plus the family's own. An
        encoder-decoder takes its target as ``cross_sentence`` and ``block="encoder" | "decoder" |
        "cross"`` (default cross). ``settings``: ``mask`` (None: the model's own; ``"none"``,
        ``"causal"``, ``"padding"``), ``pad_positions``, ``max_tokens``. As ``main.py export --model
        ... --layer ...``."""
        spec = self.spec(sentence, layer=layer, block=block, cross_sentence=cross_sentence, **settings)
        return trace_spec(spec, self.engine)

    def generate(self, prompt: str, max_new_tokens: int = 20, temperature: float | None = None,
                 top_k: int | None = None, top_p: float | None = None, seed: int = 0, *, top: int = 10,
                 max_tokens: int | None = None, **unknown: Any) -> Generated:  # fmt: skip
        """Continue ``prompt`` with a decoder through its own KV cache, greedily (``temperature``
        None or 0) or sampled (``temperature`` above 0, then ``top_k``, ``top_p``, drawn with
        ``seed``), keeping ``top`` next tokens per step: as ``main.py generate``."""
        from models.generate import generate

        if unknown:
            raise InputError(f"generate() has no setting {next(iter(unknown))!r}; its settings are max_new_tokens, "
                             "temperature, top_k, top_p, seed, top, max_tokens")  # fmt: skip
        _text(prompt, "the prompt")
        if not self.is_decoder:
            raise InputError(f"{self.name} is not a decoder ({self.model_type}): only decoders generate "
                             "(for an encoder, main.py generate predicts its mask tokens)")  # fmt: skip
        settings = generation_settings(max_new_tokens, temperature, top_k, top_p, seed, top, max_tokens)
        return Generated(generate(self.engine, prompt, settings))

    def history(self, steps: str = "all", corpus: str | os.PathLike | None = None, limit: int | None = None):
        """This model's training history (models/history/table.py ``History``): every checkpoint's content
        hash (``.integrity``; a broken history, steps holding the same weights, also warns), every
        head's detector scores per step, its match to the previous step and the role ``events``;
        what ``main.py timeline`` writes."""
        import warnings
        from pathlib import Path

        from models.history.table import build_history
        from models.history.why_steps import chosen_steps, history_of

        root, available = history_of(self._opened["model"])
        chosen = chosen_steps(steps, list(available), root)

        def warn(integrity) -> None:
            if integrity.broken:
                warnings.warn(integrity.message(), stacklevel=3)

        return build_history(Path(root), {s: available[s] for s in chosen}, None if corpus is None else str(corpus),
                             limit, device=str(self.engine.device), on_integrity=warn)  # fmt: skip

    def atlas(self, texts: Iterable[str], *, limit: int | None = None, detectors: bool = True,
              seed: int | None = None) -> list[dict]:  # fmt: skip
        """Every head's metrics over ``texts`` (mean and sample sd, each text alone at its own
        length) and its detector scores: the rows of ``main.py atlas``'s heads.csv, one dict per
        (layer, head) with its columns (models.reads.atlas.COLUMNS). Blank texts are skipped."""
        from models.command_fields import ATLAS_ROWS
        from models.reads.atlas import MAX_TEXT_CHARS, compute_atlas, head_rows
        from models.reads.detectors import PROBE_SEED

        if isinstance(texts, (str, bytes)) or not isinstance(texts, Iterable):
            raise InputError(f"texts must be a list (or any iterable) of strings, one text each, got "
                             f"{type(texts).__name__}")  # fmt: skip
        options = {f.dest: f for f in ATLAS_ROWS}  # main.py atlas's checks of --limit and --seed
        limit = None if limit is None else options["limit"].from_json(limit)
        seed = PROBE_SEED if seed is None else options["seed"].from_json(seed)
        if not isinstance(detectors, bool):
            raise InputError(f"detectors must be True or False, got {str(detectors)[:40]!r}")
        lines = ((i, t.strip()[:MAX_TEXT_CHARS]) for i, t in enumerate(texts, start=1) if _text(t, f"text {i}").strip())
        found = compute_atlas(self.engine, lines, limit=limit, detectors=detectors, seed=seed)
        return list(head_rows(found))
