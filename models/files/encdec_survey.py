"""``export --all-layers`` for an encoder-decoder model: every layer of ONE block, in one pass.

The same folder as :mod:`models.files.survey_export` (``attention.npy``, ``heads.csv``, ``manifest.json``,
and ``rollout.npy`` for the square encoder and decoder blocks; the cross block's query and key
tokens differ, so it has no rollout), its manifest saying which block and both token rows.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

import numpy as np

from models.files.survey_export import ATTENTION_FILE, FORMAT, HEADS_FILE, ROLLOUT_FILE, LayerFile, write_heads_csv
from models.io.atomic import MANIFEST, TOOL, atomic_folder
from models.reads.survey import DEFINITIONS, METRIC_NAMES, METRICS_VERSION, head_metrics, rollout


def write_block_layers(model, sentence: str, out: str | os.PathLike, force: bool = False, mask: str | None = None,
                       pad_positions=(), max_tokens: int | None = None, *, cross_sentence: str,
                       block: str) -> tuple[Path, dict[str, Any]]:  # fmt: skip
    """Run ``model`` (an EncoderDecoderModel) once and write ``block``'s layers to ``out``."""
    start = time.perf_counter()
    model.check_supported(mask, pad_positions, ())
    src = model.encode(sentence, max_tokens, "encoder")
    tgt = model.encode(cross_sentence, max_tokens, "decoder")
    n_q, n_k = {"encoder": (src, src), "decoder": (tgt, tgt), "cross": (tgt, src)}[block]
    shape = (model.block_layers(block), model.num_heads, len(n_q.ids), len(n_k.ids))
    with atomic_folder(out, force) as tmp:
        # Plain writes, layer by layer, never a memory map: on a full disk a map dies of SIGBUS.
        with LayerFile(tmp / ATTENTION_FILE, shape) as layers:
            q_enc, k_enc, _, notices = model.layer_weights(
                sentence, mask=mask, pad_positions=pad_positions, cross_sentence=cross_sentence, block=block,
                max_tokens=max_tokens, out=layers,
            )  # refuses a mask or pad positions (not the model's own) before anything is written
        weights = np.load(tmp / ATTENTION_FILE, mmap_mode="r")  # read-only: the file is whole and synced
        metrics = head_metrics(weights)
        files = {ATTENTION_FILE: {"shape": list(shape), "axes": ["layer", "head", "query", "key"]}}
        if block != "cross":
            np.save(tmp / ROLLOUT_FILE, rollout(weights), allow_pickle=False)
            files[ROLLOUT_FILE] = {"shape": [shape[0], shape[2], shape[3]], "axes": ["layer", "query", "key"]}
        del weights  # closes the memory map before the folder is renamed
        write_heads_csv(metrics, tmp / HEADS_FILE)
        files[HEADS_FILE] = {"columns": ["layer", "head", *METRIC_NAMES]}
        man = {
            "tool": TOOL, "format": FORMAT, "model": model.name, "model_type": model.model_type,
            "encoder_decoder": True, "block": block,
            "tokens": list(k_enc.tokens), "token_ids": list(k_enc.ids),
            "query_tokens": list(q_enc.tokens), "query_token_ids": list(q_enc.ids),
            "source_tokens": list(src.tokens), "target_tokens": list(tgt.tokens),
            "mask": "causal" if block == "decoder" else "none", "pad_positions": [],
            "num_layers": shape[0], "num_heads": shape[1], "decoder": block == "decoder",
            "metrics_version": METRICS_VERSION, "definitions": DEFINITIONS, "files": files,
            "device": model.device_label, "notices": notices,
            "elapsed_ms": round((time.perf_counter() - start) * 1000, 3),
        }  # fmt: skip
        text = json.dumps(man, indent=2, ensure_ascii=False, allow_nan=False)
        (tmp / MANIFEST).write_text(text + "\n", encoding="utf-8")
    return Path(out), man


class BlockSurvey:
    """One block of an encoder-decoder model, shaped like a model for the whole-model view's worker
    (``encode``, ``layer_weights``, ``num_layers``, ...): its query rows are ``encode``'s tokens, its
    key rows ``key_tokens``. ``model`` may be a callable returning the model (loaded on first use,
    on the worker's thread)."""

    def __init__(self, model, block: str, cross_sentence: str) -> None:
        self._model, self.block, self.cross_sentence = model, block, cross_sentence

    @property
    def model(self):
        if callable(self._model) and not hasattr(self._model, "layer_weights"):
            self._model = self._model()
        return self._model

    name = property(lambda self: f"{self.model.name} · {self.block}")
    num_layers = property(lambda self: self.model.block_layers(self.block))
    num_heads = property(lambda self: self.model.num_heads)
    default_mask = property(lambda self: "causal" if self.block == "decoder" else "none")
    cross = property(lambda self: self.block == "cross")  # Survey.cross: never a rollout, whatever the lengths

    def _sides(self, sentence: str, max_tokens: int | None):
        src = self.model.encode(sentence, max_tokens, "encoder")
        tgt = self.model.encode(self.cross_sentence, max_tokens, "decoder")
        return {"encoder": (src, src), "decoder": (tgt, tgt), "cross": (tgt, src)}[self.block]

    def encode(self, sentence: str, max_tokens: int | None = None):
        return self._sides(sentence, max_tokens)[0]

    def key_tokens(self, sentence: str, max_tokens: int | None = None) -> tuple[str, ...]:
        return tuple(self._sides(sentence, max_tokens)[1].tokens)

    def layer_weights(self, sentence: str, mask=None, should_stop=None, max_tokens=None, on_layer=None, out=None):
        q_enc, _k_enc, weights, notices = self.model.layer_weights(
            sentence, mask=mask, should_stop=should_stop, max_tokens=max_tokens, on_layer=on_layer, out=out,
            cross_sentence=self.cross_sentence, block=self.block,
        )
        return q_enc, weights, notices
