"""Issue 35, item 21: the docs say what the code does (each of these disagreed before)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np

from models.reads.survey import METRIC_NAMES

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"


def _text(name: str) -> str:
    return (ROOT / name).read_text(encoding="utf-8")


def test_formats_numbers_only_heads_from_zero_and_names_the_manifests_token_keys(tmp_path):
    from models.cli.export import export_main

    text = " ".join(_text("docs/formats.md").split())
    assert "--only-heads 0,2` (only these heads of per-head stages, numbered from 0" in text
    assert "numbered from 1" not in text
    out = tmp_path / "cat"
    assert export_main(["--sentence", "The cat sat.", "--heads", "2", "--d-model", "8", "--stages", "weights",
                        "--only-heads", "0", "--out", str(out)]) == 0  # fmt: skip
    manifest = json.loads((out / "manifest.json").read_text())
    for key in ("query_tokens", "key_tokens"):
        assert key in manifest and f"`{key}`" in text
    assert "tokens" not in manifest and manifest["stages"][0]["heads"] == [0]


def test_the_atlas_page_lists_every_metric_of_heads_csv():
    text = " ".join(_text("docs/atlas.md").split())
    listed = re.search(r"for the (\w+) metrics of the model view \(`([^`]*)`", text)
    assert listed is not None
    assert tuple(n.strip() for n in listed.group(2).split(",")) == METRIC_NAMES
    assert listed.group(1) == {6: "six", 7: "seven", 8: "eight"}[len(METRIC_NAMES)]


def test_the_timeline_score_is_not_credited_to_transformerlens():
    """The timeline's induction score averages over the rows that can score; TransformerLens's
    head_detector over every row (0.48 where the timeline says 0.98): two scales, named as such."""
    from models.training import scores

    assert "TransformerLens's head detector defines" not in scores.__doc__
    page = " ".join(_text("docs/induction.md").split())
    assert "**induction** (TransformerLens's head detector)" not in page
    assert "not TransformerLens's `head_detector`" in page and "another scale" in page


def test_every_docs_image_is_made_by_make_screenshots_and_shown_somewhere():
    makefile = _text("Makefile")
    recipe = makefile[makefile.index("\nscreenshots:"):]
    pages = "".join(p.read_text(encoding="utf-8") for p in [ROOT / "README.md", *DOCS.glob("*.md")])
    for image in sorted(DOCS.glob("*.png")):
        assert f"docs/{image.name}" in recipe, f"make screenshots does not make docs/{image.name}"
        assert image.name in pages, f"docs/{image.name} is shown on no page"


def test_the_readme_generate_example_names_a_model_that_copies():
    readme = _text("README.md")
    line = next(line for line in readme.splitlines() if "main.py generate" in line)
    assert "--model induction" in line


def test_the_bertviz_snippet_fits_an_export(tmp_path):
    """docs/bertviz.md: one (1, heads, n, n) tensor per layer and as many tokens as n."""
    import torch

    from models.cli.export import export_main

    out = tmp_path / "cat"
    assert export_main(["--model", "minilm", "--sentence", "The cat sat.", "--all-layers", "--out", str(out)]) == 0
    attention = np.load(out / "attention.npy")
    manifest = json.loads((out / "manifest.json").read_text())
    layers = tuple(torch.from_numpy(a)[None] for a in attention)
    assert len(layers) == manifest["num_layers"]
    assert all(t.shape == (1, manifest["num_heads"], len(manifest["tokens"]), len(manifest["tokens"])) for t in layers)
    page = _text("docs/bertviz.md")
    assert 'manifest["tokens"]' in page and 'manifest["key_tokens"]' in page
