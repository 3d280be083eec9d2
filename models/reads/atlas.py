"""A head atlas: every head's metrics over many texts (mean and sample standard deviation) and the
detectors' scores, written as ``heads.csv``, ``top_texts.csv`` and ``manifest.json``.

numpy (plus the model's own forward pass); no Qt. Each text runs alone, at its own length, with the
model's own special tokens, so no padding can change a number; the metrics are models.reads.survey's
:func:`~models.reads.survey.head_metrics`, the detectors models.reads.detectors'. Memory is bounded however
large the corpus: texts are read one at a time (models/reads/corpora.py), a block of them
(:data:`CHUNK_TEXTS`) is held while it runs, the texts of one length as one batch (no padding, the
same numbers as text by text), and only exact sums are kept (models/reads/atlas_sums.py: per head
and metric the count, sum and sum of squares as integers, so that any split of the corpus merges to
the same bits), plus, per head and metric, the line where the head scores highest (the texts
themselves are read again at the end, only for those lines).
"""

from __future__ import annotations

import csv
import io
import json
import math
import os
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from models.config import Cancelled, InputError
from models.engine.finite import csv_float, csv_number
from models.io import check_regular, read_bytes, read_json
from models.io.atomic import MANIFEST, TOOL, atomic_folder
from models.io.heap import return_freed_memory
from models.memory import check_memory
from models.reads.atlas_sums import HeadSums
from models.reads.corpora import MAX_TEXT_CHARS as MAX_TEXT_CHARS  # models.api's
from models.reads.corpora import corpus_identity, corpus_lines, count_texts
from models.reads.detectors import DEFINITIONS as DETECTOR_DEFINITIONS
from models.reads.detectors import DETECTORS, PROBE_SEED, PROBES_PER_KIND
from models.reads.survey import DEFINITIONS, METRIC_NAMES, METRICS_VERSION

FORMAT = "attention-explorer-atlas/1"
HEADS_FILE = "heads.csv"
TOP_FILE = "top_texts.csv"
STAT_COLUMNS = tuple(f"{m}_{s}" for m in METRIC_NAMES for s in ("mean", "sd"))
COLUMNS = ("layer", "head", "texts", *STAT_COLUMNS, *DETECTORS)


@dataclass
class Atlas:
    """Every head's columns over a corpus (``columns[name]`` is (L, h)) and where each head peaks."""

    model: str
    layers: int
    heads: int
    texts: int
    columns: dict[str, np.ndarray]
    best_line: dict[str, np.ndarray] = field(default_factory=dict)  # metric -> (L, h) line number, -1: none
    best_value: dict[str, np.ndarray] = field(default_factory=dict)
    best_text: dict[int, str] = field(default_factory=dict)  # line number -> its text
    manifest: dict = field(default_factory=dict)

    def difference(self, other: Atlas) -> Atlas:
        """``self − other`` column by column (the same layers × heads), for comparing two atlases."""
        if (self.layers, self.heads) != (other.layers, other.heads):
            raise InputError(f"cannot compare {self.layers}×{self.heads} heads with {other.layers}×{other.heads}")
        cols = {k: self.columns[k] - other.columns[k] for k in self.columns if k in other.columns and k != "texts"}
        return Atlas(f"{self.model} − {other.model}", self.layers, self.heads, self.texts, cols)


# --- the corpus (models/reads/corpora.py) --------------------------------------------------------------
def file_sha256(path: str | os.PathLike) -> str:
    """The sha256 of a corpus: of its bytes (a file), of its files' names and bytes (a folder)."""
    return corpus_identity(path)["sha256"]


def count_lines(path: str | os.PathLike, limit: int | None = None) -> int:
    """The corpus's texts (for a progress bar), at most ``limit``."""
    return count_texts(path, limit)


# --- computing -----------------------------------------------------------------------------------------
CHUNK_TEXTS = 256  # texts a block holds (read ahead, grouped by length); each block runs layer by layer
CHUNK_STATE_BYTES = 128 << 20  # ... in fewer texts at a time when their hidden states would hold more


def chunk_metrics(model, encs, should_stop=None, on_layer: Callable[[int], None] | None = None
                  ) -> tuple[dict[str, np.ndarray], int]:  # fmt: skip
    """Every head's metrics ``{metric: (texts, L, h)}`` of the encoded texts ``encs``, those of one
    length run as one batch (models/pretrained/batch_weights.py); ``on_layer(layer)`` after each
    layer. Returns the metrics and the number of batches run. The metrics are computed in torch where
    the weights are (models/reads/atlas_metrics.py) and cross to the host once for all the texts."""
    import torch

    from models.engine.host import to_numpy
    from models.pretrained.batch_weights import batch_layer_weights
    from models.reads.atlas_metrics import metrics_tensor

    held = torch.full((len(METRIC_NAMES), len(encs), model.num_layers, model.num_heads), float("nan"),
                      dtype=torch.float64, device=getattr(model, "device", "cpu"))  # fmt: skip

    def add(layer: int, indices, weights) -> None:  # weights (b, h, n, n), on the model's device
        held[:, list(indices), layer] = metrics_tensor(weights).to(held.device)

    ran = batch_layer_weights(model, encs, add, should_stop, on_layer, on_device=True)
    values = to_numpy(held)
    return {m: values[i] for i, m in enumerate(METRIC_NAMES)}, ran


def blocks(texts, size: int | None = None, limit: int | None = None) -> Iterator[tuple[int, list]]:
    """``(block index from 0, [(line, text), ...])``: the first ``limit`` texts of ``texts`` in
    consecutive blocks of ``size`` (:data:`CHUNK_TEXTS`); only the block being read is held."""
    size = size or CHUNK_TEXTS
    block: list = []
    index = read = 0
    for item in texts:
        if limit is not None and read >= limit:
            break
        block.append(item)
        read += 1
        if len(block) == size:
            yield index, block
            index, block = index + 1, []
    if block:
        yield index, block


def block_sums(model, items, should_stop: Callable[[], bool] | None = None,
               progress: Callable[[int], None] | None = None) -> HeadSums:  # fmt: skip
    """The exact sums of one block of ``(line, text or Encoded)``: its texts encoded, then run
    layer by layer, the texts of one length as one batch (fewer texts at a time when their hidden
    states would hold more than :data:`CHUNK_STATE_BYTES`). Which texts run together depends on the
    block alone, so a block gives the same bits in any run, shard or worker. ``progress(texts of
    the block done)`` after each layer (a chunk's texts count in proportion to its layers)."""
    from models.pretrained.batch_weights import state_bytes

    sums = HeadSums(METRIC_NAMES, (model.num_layers, model.num_heads))
    counters = sums.counters
    pending: list[tuple[int, object]] = []  # (line, Encoded), in the corpus's order
    held = 0

    def run_chunk() -> None:
        nonlocal held
        if not pending:
            return
        count, layers, done = len(pending), model.num_layers, counters["texts"]
        report = None if progress is None else (lambda layer: progress(done + count * (layer + 1) // layers))
        metrics, ran = chunk_metrics(model, [e for _, e in pending], should_stop, report)
        sums.add([line for line, _ in pending], metrics)
        counters["texts"] += count
        counters["batches"] += ran
        held = 0
        pending.clear()

    for line, text in items:
        if should_stop is not None and should_stop():
            raise Cancelled(f"stopped after {counters['texts']} texts of a block")
        try:
            enc = text if not isinstance(text, str) else model.encode(text, model.max_positions)  # or Encoded
        except InputError:  # a line the tokenizer makes nothing of
            counters["skipped_texts"] += 1
            continue
        counters["truncated_texts"] += bool(enc.notices)
        counters["tokens"] += len(enc.ids)
        pending.append((line, enc))
        held += state_bytes(model.arch, len(enc.ids)) if hasattr(model, "arch") else 0
        if held >= CHUNK_STATE_BYTES:
            run_chunk()
    run_chunk()
    return_freed_memory()  # a block's batches of many shapes leave the heap fragmented: flat memory over a corpus
    return sums


def run_blocks(model, texts, *, limit: int | None = None, block: int | None = None,
               wanted: Callable[[int], bool] | None = None, sums: HeadSums | None = None,
               on_block: Callable[[int, HeadSums], None] | None = None,
               should_stop: Callable[[], bool] | None = None,
               progress: Callable[[int], None] | None = None) -> HeadSums:  # fmt: skip
    """The exact sums of the blocks of ``texts`` that ``wanted(index)`` keeps (all by default),
    added to ``sums`` (a resumed run's); ``on_block(index, sums so far)`` after each block (to
    commit it); ``progress(texts done)``."""
    total = sums if sums is not None else HeadSums(METRIC_NAMES, (model.num_layers, model.num_heads))
    for index, items in blocks(texts, block, limit):
        if wanted is not None and not wanted(index):
            continue
        before = total.counters["texts"] + total.counters["skipped_texts"]
        report = None if progress is None else (lambda n, before=before: progress(before + n))
        total.merge(block_sums(model, items, should_stop, report))
        if progress is not None:
            progress(total.counters["texts"] + total.counters["skipped_texts"])
        if on_block is not None:
            on_block(index, total)
    return total


def compute_atlas(model, texts, *, limit: int | None = None, detectors: bool = True, seed: int = PROBE_SEED,
                  should_stop: Callable[[], bool] | None = None,
                  progress: Callable[[int], None] | None = None, block: int | None = None) -> Atlas:  # fmt: skip
    """The atlas of ``model`` (a PretrainedModel) over ``texts``, an iterable of ``(line, text)``
    (:func:`corpus_lines`, or the detectors' probes), read lazily, a block of :data:`CHUNK_TEXTS`
    texts at a time (:func:`block_sums`). ``progress(texts done)`` after each layer of a block."""
    start = time.perf_counter()
    sums = run_blocks(model, texts, limit=limit, block=block, should_stop=should_stop, progress=progress)
    found = detect_all(model, seed, should_stop) if detectors else None
    return finish_atlas(model, sums, found, seed, time.perf_counter() - start)


def finish_atlas(model, sums: HeadSums, found: dict[str, np.ndarray] | None, seed: int = PROBE_SEED,
                 elapsed: float = 0.0, model_info: dict | None = None) -> Atlas:  # fmt: skip
    """The atlas from the merged sums and the detectors' scores (None: ``--no-detectors``);
    ``model`` is a PretrainedModel or ``model_info`` its manifest keys (a merge loads no model)."""
    info = model_info or model_manifest(model)
    shape = (info["num_layers"], info["num_heads"])
    done = sums.counters["texts"]
    if done == 0:
        raise InputError("the corpus has no text to read (every line is blank)")
    columns: dict[str, np.ndarray] = {"texts": np.full(shape, float(done))}
    for m in METRIC_NAMES:
        columns[f"{m}_mean"], columns[f"{m}_sd"] = sums.stats[m].result()
    columns.update(found if found is not None else {d: np.full(shape, np.nan) for d in DETECTORS})
    manifest = {
        **info, "texts": done, "tokens": sums.counters["tokens"], "truncated_texts": sums.counters["truncated_texts"],
        "skipped_texts": sums.counters["skipped_texts"], "batches": sums.counters["batches"],
        "metrics_version": METRICS_VERSION,
        "definitions": {**{m: DEFINITIONS[m] for m in METRIC_NAMES},
                        "mean_sd": "over the texts, each run alone at its own length with the model's own special "
                                   "tokens (texts of one length as one batch, no padding); the count, sum and sum "
                                   "of squares kept exactly, mean and sd rounded once from them; sd is the "
                                   "sample standard deviation (n - 1)"},
        "detectors": {"seed": seed, "probes_per_kind": PROBES_PER_KIND, "definitions": DETECTOR_DEFINITIONS}
        if found is not None else None,
        "elapsed_s": round(elapsed, 3),
    }  # fmt: skip
    return Atlas(info["model"], shape[0], shape[1], done, columns, sums.best_line, sums.best_value, manifest=manifest)


def model_manifest(model) -> dict:
    """What an atlas's manifest says of its model."""
    return {"model": model.name, "model_type": model.model_type, "num_layers": model.num_layers,
            "num_heads": model.num_heads, "decoder": model.default_mask == "causal",
            "device": model.device_label}  # fmt: skip


def probe_texts(model, seed: int = PROBE_SEED) -> Iterator[tuple[int, object]]:
    """The detectors' probes as atlas texts (numbered from 1), for an atlas without a corpus file."""
    from models.reads.detectors import model_probes

    for number, probe in enumerate(model_probes(model, seed), start=1):
        yield number, model.encode_ids(probe.ids)


def detect_all(model, seed: int, should_stop) -> dict[str, np.ndarray]:
    from models.reads.detectors import detect

    return detect(model, seed=seed, should_stop=should_stop)


def fill_best_texts(atlas: Atlas, path: str | os.PathLike) -> None:
    """Read again only the lines some head peaks on (bounded: at most L × h × 6 of them)."""
    wanted = {int(x) for lines in atlas.best_line.values() for x in lines.ravel() if x >= 0}
    for number, text in corpus_lines(path):
        if number in wanted:
            atlas.best_text[number] = text
            if len(atlas.best_text) == len(wanted):
                break


def head_rows(atlas: Atlas) -> Iterator[dict]:
    """The rows of heads.csv, one per (layer, head): ``{"layer": int, "head": int, "texts": int,
    column: float, ...}`` (models.api's ``Model.atlas`` returns them)."""
    for layer in range(atlas.layers):
        for head in range(atlas.heads):
            yield {"layer": layer, "head": head, "texts": atlas.texts,
                   **{c: float(atlas.columns[c][layer, head]) for c in COLUMNS[3:]}}  # fmt: skip


# --- files ---------------------------------------------------------------------------------------------
def write_atlas(atlas: Atlas, out: str | os.PathLike, force: bool = False, corpus: dict | None = None) -> Path:
    """``heads.csv``, ``top_texts.csv`` and ``manifest.json`` into ``out``, all at once."""
    with atomic_folder(out, force) as tmp:
        with open(tmp / HEADS_FILE, "w", newline="", encoding="utf-8") as f:
            w = csv.writer(f)
            w.writerow(COLUMNS)
            for row in head_rows(atlas):
                w.writerow([row[c] if c in COLUMNS[:3] else csv_number(row[c]) for c in COLUMNS])
        with open(tmp / TOP_FILE, "w", newline="", encoding="utf-8") as f:
            w = csv.writer(f)
            w.writerow(["layer", "head", "metric", "line", "value", "text"])
            for m, lines in atlas.best_line.items():
                for (layer, head), line in np.ndenumerate(lines):
                    if line >= 0:
                        w.writerow([layer, head, m, int(line), csv_number(atlas.best_value[m][layer, head]),
                                    atlas.best_text.get(int(line), "")])  # fmt: skip
        man = {"tool": TOOL, "format": FORMAT, **atlas.manifest,
               "corpus": corpus if corpus is not None else atlas.manifest.get("corpus"), "columns": list(COLUMNS),
               # what --force may replace: exactly these files (models.io.atomic reads "stages")
               "stages": [{"file": HEADS_FILE}, {"file": TOP_FILE}]}  # fmt: skip
        text = json.dumps(man, indent=2, ensure_ascii=False, allow_nan=False)
        (tmp / MANIFEST).write_text(text + "\n", encoding="utf-8")
    return Path(out)


MAX_ATLAS_BYTES = 256 << 20  # one atlas table (heads.csv, top_texts.csv): far above a 100-layer model's
CSV_HELD = 16  # bytes held per byte of a table while it is parsed (its rows as dictionaries of strings)


def _table(path: Path) -> list[dict[str, str]]:
    """The rows of one atlas table, read through the one safe reader: a FIFO refused at once, its
    size against the limit and the memory it takes parsed before any byte is read."""
    what = f"atlas table {path}"
    check_memory(check_regular(path, "atlas table").st_size * CSV_HELD, what, hint="free some memory")
    text = read_bytes(path, "atlas table", MAX_ATLAS_BYTES).decode("utf-8")
    return list(csv.DictReader(io.StringIO(text, newline="")))


MAX_ATLAS_HEADS = 1 << 20  # layers and heads an atlas may number


def _cell(row: dict, name: str, convert=int, most: int = MAX_ATLAS_HEADS):
    value = row.get(name)
    if value is None:
        raise ValueError(f"a row has no {name!r}")
    number = convert(value)
    if convert is int and not 0 <= number < most:
        raise ValueError(f"{name} {number} is out of range")
    if number in (math.inf, -math.inf):  # NaN is an undefined metric (an empty cell); no metric is infinite
        raise ValueError(f"{name} is {value.strip()}, not a value an atlas holds")
    return number


def read_atlas(folder: str | os.PathLike) -> Atlas:
    """An atlas folder back (heads.csv, top_texts.csv, manifest.json); a one-line error if it is not
    one. Every file goes through models.io (issue 36: a FIFO heads.csv hung the window)."""
    folder = Path(folder)
    try:
        man = read_json(folder / MANIFEST, "atlas manifest", expect=None)
        rows = _table(folder / HEADS_FILE)
        if not isinstance(man, dict) or man.get("format") != FORMAT or not rows:
            raise InputError(f"{folder} is not an atlas folder (its manifest is not {FORMAT})")
        cells = [(_cell(r, "layer"), _cell(r, "head")) for r in rows]
        layers, heads = 1 + max(c[0] for c in cells), 1 + max(c[1] for c in cells)
        if layers * heads > len(rows):  # each head is a row: the grid is no larger than the table
            raise ValueError(f"{len(rows)} rows for {layers} layers × {heads} heads")
        names = [c for c in rows[0] if isinstance(c, str) and c not in ("layer", "head")]  # None: cells beyond
        columns = {c: np.full((layers, heads), np.nan) for c in names}
        for r, (layer, head) in zip(rows, cells):
            for c in names:
                columns[c][layer, head] = _cell(r, c, csv_float)
        atlas = Atlas(str(man.get("model", folder.name)), layers, heads, int(man.get("texts", 0)), columns,
                      manifest=man)  # fmt: skip
        top = folder / TOP_FILE
        for r in _table(top) if top.exists() else ():
            m, layer, head, line = r.get("metric"), _cell(r, "layer"), _cell(r, "head"), _cell(r, "line", most=1 << 62)
            if layer >= layers or head >= heads:
                raise ValueError(f"{TOP_FILE} names layer {layer}, head {head}, beyond {HEADS_FILE}")
            atlas.best_line.setdefault(m, np.full((layers, heads), -1, dtype=np.int64))[layer, head] = line
            atlas.best_value.setdefault(m, np.full((layers, heads), np.nan))[layer, head] = _cell(r, "value", csv_float)
            atlas.best_text[line] = str(r.get("text", ""))
    except (ValueError, TypeError, OverflowError) as exc:  # UnicodeDecodeError, a cell that is not a number
        raise InputError(f"{folder} is not an atlas folder ({' '.join(str(exc).split())})") from None
    return atlas
