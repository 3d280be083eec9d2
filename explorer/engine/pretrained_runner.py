"""The worker-side runner of a model's RunSpec (models/runspec.py): one layer of a pretrained model.

The runner loads each model once (keyed by folder and device) and keeps the last few, so that
changing the layer or the sentence only traces. It never does maths: it calls
:mod:`models.pretrained` and nothing else. It runs on the worker thread only.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable
from pathlib import Path

from explorer.engine.edited_runner import shown_edits
from models.config import Cancelled, InputError
from models.encdec_options import encdec_options, is_encoder_decoder
from models.engine.trace import AttentionTrace
from models.pretrained import PretrainedModel, load_model, resolve_model
from models.run_engine import model_trace
from models.runspec import DEFAULT_MASK, RunSpec  # noqa: F401 - re-exported

MODELS_KEPT = 2  # switching back and forth between two models never reloads either
# A model folder whose files hold at most this many bytes is small (a training step of the induction
# model: 0.2 MB): reading it holds the interpreter lock for a few milliseconds, so the worker does not
# wait for the GUI's turn first, and up to SMALL_KEPT small models stay besides the MODELS_KEPT
# (the timeline's slider goes back and forth over forty of them).
SMALL_MODEL_BYTES = 4 * 1024 * 1024
SMALL_KEPT = 64


def folder_bytes(folder: Path) -> int:
    """The bytes of the files directly in ``folder`` (stat only; 0 when unreadable)."""
    try:
        return sum(f.stat().st_size for f in folder.iterdir() if f.is_file())
    except OSError:
        return 0


Progress = Callable[[float, str], None]


class ModelLoadError(InputError):
    """The model could not be opened (no such model, bad folder, corrupt weights...)."""

    kind = "load"


class PretrainedRunner:
    """``runner(request, should_stop) -> AttentionTrace``, with a cache of loaded models."""

    def __init__(self, progress: Progress | None = None, kept: int = MODELS_KEPT,
                 before_load: Callable[[], None] | None = None):  # fmt: skip
        """``before_load()`` runs before a model is read from disk (the worker waits there for
        the GUI to finish its turn: reading a tokenizer holds the interpreter lock ~40 ms)."""
        self.progress = progress or (lambda fraction, message: None)
        self.before_load = before_load or (lambda: None)
        self.kept = kept
        self.loads = 0  # how many times a model was actually read from disk (for tests)
        self._models: OrderedDict[tuple[str, str], PretrainedModel] = OrderedDict()
        self._small: set[tuple[str, str]] = set()  # keys of small models (SMALL_MODEL_BYTES)
        self._lock = threading.Lock()

    def model(self, name_or_path: str, device: str = "auto", dtype: str = "float32") -> PretrainedModel:
        """The loaded model, from the cache when it was opened before."""
        try:
            folder = resolve_model(name_or_path).resolve()
        except InputError as exc:
            raise ModelLoadError(str(exc)) from exc
        key = (str(folder), device, dtype)
        with self._lock:
            if key in self._models:
                self._models.move_to_end(key)
                return self._models[key]
        small = folder_bytes(folder) <= SMALL_MODEL_BYTES
        if not small:
            self.before_load()
        try:
            model = load_model(name_or_path, device=device, progress=self.progress, dtype=dtype)
        except Cancelled:
            raise
        except InputError as exc:
            raise ModelLoadError(str(exc)) from exc
        except Exception as exc:  # noqa: BLE001 - a hostile folder may raise anything: never stuck on "Loading…"
            first = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
            raise ModelLoadError(f"could not open {name_or_path}: {type(exc).__name__}: {first}") from exc
        with self._lock:
            self.loads += 1
            self._models[key] = model
            if small:
                self._small.add(key)
            self._evict()
        return model

    def _evict(self) -> None:
        """Keep the ``kept`` most recent models, and besides them up to SMALL_KEPT small ones."""
        big = [k for k in self._models if k not in self._small]
        small = [k for k in self._models if k in self._small]
        for k in big[: max(0, len(big) - self.kept)] + small[: max(0, len(small) - SMALL_KEPT)]:
            del self._models[k]
            self._small.discard(k)

    def __call__(self, request: RunSpec, should_stop: Callable[[], bool]) -> AttentionTrace:
        """The layer ``request`` asks for; unless ``request.exact``, a layer past the model's last
        shows the last, and pad positions past the sentence are dropped (the window's inputs may
        hold what was picked for another model or sentence). The target and block apply only to an
        encoder-decoder model."""
        model = self.model(request.model, request.device, request.dtype)
        layer, notices = request.layer, []
        encdec = encdec_options(model, request) if is_encoder_decoder(model) else {}  # as export: block or cross
        count = model.block_layers(encdec["block"]) if encdec else model.num_layers
        if not 0 <= layer < count and not request.exact:  # e.g. layer 8 kept from a deeper model
            layer = min(max(layer, 0), count - 1)
            notices.append(f"{model.name} has layers 0–{count - 1}: showing layer {layer}")
        pads = request.pad_positions
        if pads and not encdec and not request.exact:  # positions picked for an older sentence may lie past the end
            n = len(model.encode(request.sentence).ids)
            pads = tuple(p for p in pads if p < n)

        def trace_with(edits=()) -> AttentionTrace:  # export's mapping of a spec to model.trace (max_tokens too)
            return model_trace(request, model, edits, should_stop, layer, pads, encdec)

        if request.edits or request.difference:
            edited = trace_with(request.edits)
            original = trace_with() if request.difference else edited  # the layers below are cached
            trace = shown_edits(original, edited, len(request.edits), request.difference)
        else:
            trace = trace_with()
        if notices:
            trace.meta["notices"] = notices + list(trace.meta.get("notices", []))
        return trace


READ_AHEAD = 4  # tokenizers parsed ahead of time when the model list opens (each ~30 ms of one core)


def read_tokenizers_ahead(names: list[str]) -> int:
    """Parse the tokenizers of the first READ_AHEAD ``names`` not loaded yet (on the executor, while
    the model list is open), so that choosing one does not hold the interpreter lock ~30 ms on the
    worker while the window repaints (models/pretrained/tokenizer.py). Returns how many were read."""
    from models.pretrained.tokenizer import read_ahead

    read = 0
    for name in names:
        if read >= READ_AHEAD:
            break
        if not name:  # the toy
            continue
        try:
            folder = resolve_model(name)
        except InputError:
            continue
        read += read_ahead(folder)
    return read
