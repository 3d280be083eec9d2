"""A generation -> ``tokens.json``, ``attention.npy``, ``lens_ids.npy``, ``lens_prob.npy`` and
``manifest.json``, written atomically (models/io/atomic.py: all of them or nothing)."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import numpy as np
import torch

from models.engine.finite import refuse_nonfinite
from models.files.survey_export import LayerFile
from models.generate.finite import SCORES, check_generation
from models.generate.result import Generation
from models.io.atomic import MANIFEST, TOOL, atomic_folder

FORMAT = "attention-explorer-generation/1"
TOKENS_FILE = "tokens.json"
ATTENTION_FILE = "attention.npy"
LENS_IDS_FILE = "lens_ids.npy"
LENS_PROB_FILE = "lens_prob.npy"


def tokens_json(gen: Generation) -> dict[str, Any]:
    return {
        "ids": list(gen.ids),
        "tokens": list(gen.tokens),
        "prompt_length": gen.prompt_length,
        "text": gen.text,
        "stopped": gen.stopped,
        "steps": [
            {
                "position": s.position,
                "chosen": s.chosen,
                "chosen_prob": s.chosen_prob,
                "top": [{"id": i, "token": t, "prob": p}
                        for i, t, p in zip(s.top_ids, s.top_tokens, s.top_probs)],  # fmt: skip
            }
            for s in gen.steps
        ],
    }


def manifest(gen: Generation, prompt: str) -> dict[str, Any]:
    L, h, n = gen.num_layers, gen.num_heads, gen.n
    files = {
        TOKENS_FILE: {"what": "ids, tokens, prompt_length, and each step's top next tokens"},
        ATTENTION_FILE: {"shape": [L, h, n, n], "dtype": "float32", "axes": ["layer", "head", "query", "key"]},
        LENS_IDS_FILE: {"shape": [L, n], "dtype": "int64", "axes": ["layer", "position"],
                        "what": "top token of final norm + unembedding of the residual after each layer"},
        LENS_PROB_FILE: {"shape": [L, n], "dtype": "float32", "axes": ["layer", "position"],
                         "what": "probability of the next token of the sequence (last position: "
                                 "of the final layer's top token)"},
    }  # fmt: skip
    steps = gen.step_ms
    return {
        "tool": TOOL,
        "format": FORMAT,
        "model": gen.model,
        "model_type": gen.model_type,
        "prompt": prompt,
        "settings": gen.settings,
        "num_layers": L,
        "num_heads": h,
        "n": n,
        "prompt_length": gen.prompt_length,
        "generated": gen.generated,
        "stopped": gen.stopped,
        "unembedding": gen.head_source,
        "device": gen.device,
        "torch_version": torch.__version__,
        "notices": list(gen.notices),
        "elapsed_ms": round(gen.elapsed_ms, 3),
        "step_ms_median": round(float(np.median(steps)), 3) if steps else None,
        "files": files,
        # every file listed as a "stage" too, so that --force recognises this folder as ours
        "stages": [{"name": Path(f).stem, "file": f} for f in files],
    }


def write_attention(gen: Generation, path: Path) -> None:
    """``attention.npy`` layer by layer with plain writes (:class:`LayerFile`), never through a
    memory map: on a full disk a map dies of SIGBUS (exit 135, the temporary folder left behind);
    a plain write raises ENOSPC, one line."""
    L, h, n = gen.num_layers, gen.num_heads, gen.n
    with LayerFile(path, (L, h, n, n)) as layers:
        for layer in range(L):
            matrix = np.zeros((h, n, n), np.float32)  # (h, n, n), zero above the diagonal
            for p, row in enumerate(gen.rows):
                matrix[:, p, : p + 1] = row[layer]
            layers[layer] = matrix


def write_generation(gen: Generation, prompt: str, out: str | os.PathLike, force: bool = False) -> Path:
    """Write the folder ``out`` (``force``: replace a previous export of this tool only)."""
    check_generation(gen)  # no NaN in a file (json.dumps would stop on one with a traceback)
    with atomic_folder(out, force) as tmp:
        write_attention(gen, tmp / ATTENTION_FILE)
        np.save(tmp / LENS_IDS_FILE, gen.lens_ids.astype(np.int64), allow_pickle=False)
        np.save(tmp / LENS_PROB_FILE, gen.lens_prob.astype(np.float32), allow_pickle=False)
        for name, data in ((TOKENS_FILE, tokens_json(gen)), (MANIFEST, manifest(gen, prompt))):
            text = json.dumps(data, indent=2, ensure_ascii=False, allow_nan=False)
            (tmp / name).write_text(text + "\n", encoding="utf-8", errors="backslashreplace")
    return Path(out)


MASKED_FORMAT = "attention-explorer-masked/1"


def write_masked(result, sentence: str, out: str | os.PathLike, force: bool = False) -> Path:
    """An encoder's mask predictions (:mod:`models.generate.mlm`) as the same files: tokens.json
    (``masks``: each mask position's top tokens), attention.npy, lens_ids.npy, lens_prob.npy."""
    L, h, n, _ = result.attention.shape
    tokens = {
        "ids": list(result.ids),
        "tokens": list(result.tokens),
        "masks": [{"position": m.position, "top": [{"id": i, "token": t, "prob": p}
                                                    for i, t, p in zip(m.top_ids, m.top_tokens, m.top_probs)]}
                  for m in result.masks],
    }  # fmt: skip
    files = {
        TOKENS_FILE: {"what": "ids, tokens, and each mask position's top tokens"},
        ATTENTION_FILE: {"shape": [L, h, n, n], "dtype": "float32", "axes": ["layer", "head", "query", "key"]},
        LENS_IDS_FILE: {"shape": [L, n], "dtype": "int64", "axes": ["layer", "position"],
                        "what": "top token of the masked-language-model head on each layer's output"},
        LENS_PROB_FILE: {"shape": [L, n], "dtype": "float32", "axes": ["layer", "position"],
                         "what": "probability of the last layer's top token at that position"},
    }  # fmt: skip
    man = {
        "tool": TOOL, "format": MASKED_FORMAT, "model": result.model, "model_type": result.model_type,
        "prompt": sentence, "num_layers": L, "num_heads": h, "n": n, "decoder_weights": result.head_source,
        "torch_version": torch.__version__, "notices": list(result.notices), "files": files,
        "stages": [{"name": Path(f).stem, "file": f} for f in files],
    }  # fmt: skip
    refuse_nonfinite(result.attention, "the attention", SCORES, ("layer", "head", "query", "key"))
    check_generation(result.as_generation())
    with atomic_folder(out, force) as tmp:
        np.save(tmp / ATTENTION_FILE, result.attention.astype(np.float32), allow_pickle=False)
        np.save(tmp / LENS_IDS_FILE, result.lens_ids.astype(np.int64), allow_pickle=False)
        np.save(tmp / LENS_PROB_FILE, result.lens_prob.astype(np.float32), allow_pickle=False)
        for name, data in ((TOKENS_FILE, tokens), (MANIFEST, man)):
            text = json.dumps(data, indent=2, ensure_ascii=False, allow_nan=False)
            (tmp / name).write_text(text + "\n", encoding="utf-8", errors="backslashreplace")
    return Path(out)
