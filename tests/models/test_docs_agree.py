"""Issue 35, item 21: the docs say what the code does (each of these disagreed before).

Issue 44, item 21: every command of every docs page (and the README) runs as printed, and the numbers a
page quotes are the command's. Every fenced ``sh`` block: each line calling ``main.py`` (continuation
lines joined), run in order in a fresh folder (a block's commands may read what the one before wrote); a
headless command in this process, one that opens the window offscreen in a child process, with
``--screenshot`` to that folder when it has none; a line with a ``...`` placeholder (a template) is not
run. Before: docs/why.md's second command failed ("row 40 is out of range 0..11": its sentence was cut
to "k78lt2nx..."), its worked example's command had no ``--sentence``, and the toy example's prose
(−0.19, position·position −0.25, +0.18) contradicted the command (−0.5828; pos × embed −0.3576)."""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from main import COMMANDS, main
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


# --- every command of every page (issue 44, item 21) ------------------------------------------------


def commands(page: Path) -> list[list[list[str]]]:
    """The ``main.py`` commands of each ``sh`` block of ``page``, as argument lists after ``main.py``."""
    blocks = []
    for body in re.findall(r"```sh\n(.*?)```", page.read_text(encoding="utf-8"), re.S):
        lines = body.replace("\\\n", " ").splitlines()
        argvs, names = [], {}
        for line in lines:
            if found := re.match(r"^([A-Z_]+)=(.+)$", line.strip()):  # G=$(...): as a reader runs it
                script = f"{line.replace('.venv/bin/python', sys.executable)}\nprintf %s \"${found.group(1)}\""
                names[found.group(1)] = subprocess.run(["bash", "-c", script], cwd=ROOT, capture_output=True, text=True,
                                                       timeout=120).stdout  # (this Python: a checkout's own .venv)
                continue
            for name, value in names.items():
                line = line.replace(f"${name}", value)
            words = shlex.split(line, comments=True)
            if "main.py" not in [Path(w).name for w in words] or "..." in words:
                continue
            argvs.append(words[[Path(w).name for w in words].index("main.py") + 1 :])
        if argvs:
            blocks.append(argvs)
    return blocks


BLOCKS = [(page.name, i, argvs) for page in [*sorted(DOCS.glob("*.md")), ROOT / "README.md"]
          for i, argvs in enumerate(commands(page))]  # fmt: skip


def test_the_pages_have_commands_to_run():
    assert {"why.md", "formats.md", "window.md", "README.md"} <= {name for name, _, _ in BLOCKS}


def run(argv: list[str], folder: Path, capsys) -> str:
    """Run one command in ``folder``: its stdout, after checking it succeeded."""
    if argv[:1] and argv[0] in COMMANDS:
        cwd = os.getcwd()
        os.chdir(folder)
        try:
            code = main(argv)
        finally:
            os.chdir(cwd)
        out, err = capsys.readouterr()
        assert code == 0, (argv, err)
        return out
    if "--screenshot" not in argv:
        argv = [*argv, "--screenshot", "shot.png"]
    env = {**os.environ, "QT_QPA_PLATFORM": "offscreen"}
    done = subprocess.run([sys.executable, str(ROOT / "main.py"), *argv], cwd=folder, env=env, capture_output=True,
                          text=True, timeout=600)  # fmt: skip
    assert done.returncode == 0, (argv, done.stderr)
    return done.stdout


@pytest.mark.parametrize("page, index, argvs", BLOCKS, ids=[f"{p}-{i}" for p, i, _ in BLOCKS])
def test_every_command_runs_as_printed(tmp_path, capsys, page, index, argvs):
    for argv in argvs:
        run(argv, tmp_path, capsys)


def _quoted(text: str, pattern: str) -> float:
    found = re.search(pattern, " ".join(text.split()))
    assert found is not None, pattern
    return float(found.group(1).replace("−", "-"))


def test_why_quotes_the_numbers_its_commands_print(tmp_path, capsys):
    page = (ROOT / "docs" / "why.md").read_text(encoding="utf-8")
    toy, induction = (argv for argv in commands(ROOT / "docs" / "why.md")[0] if "--model" not in argv or
                      "induction" in argv)  # fmt: skip
    result = json.loads(run([*toy, "--json"], tmp_path, capsys))
    table = {(q, k): result["table"][i][j] for i, q in enumerate(result["query_sources"])
             for j, k in enumerate(result["key_sources"])}  # fmt: skip
    prose = page[page.index("Head 1's score of") :]
    assert round(result["score"], 4) == _quoted(prose, r"is (−?\d+\.\d+)\.")
    assert round(table["pos", "embed"], 4) == _quoted(prose, r"`pos × embed`, (−?\d+\.\d+)\)")
    assert round(table["pos", "pos"], 4) == _quoted(prose, r"position·position \((−?\d+\.\d+)\)")
    assert round(table["embed", "embed"], 4) == _quoted(prose, r"token·token \(\+(\d+\.\d+)\)")
    worked = page[page.index("**Last step (2500).**") :]
    assert f"--sentence {induction[induction.index('--sentence') + 1]}" in worked  # the very command above
    result = json.loads(run([*induction, "--json"], tmp_path, capsys))
    rows = dict(zip(result["query_sources"], result["row_totals"]))
    assert round(rows["embed"], 1) == _quoted(worked, r"`embed` carries \+(\d+\.\d+) of the")
    assert round(result["score"], 1) == _quoted(worked, r"of the (\d+\.\d+), `L0 H3`")
    assert round(rows["L0 H3"], 1) == _quoted(worked, r"`L0 H3` \+(\d+\.\d+)\)")
    assert result["relative_error"] < 1e-7 and result["row_split"]["margin"] > 0
