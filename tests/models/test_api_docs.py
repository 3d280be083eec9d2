"""docs/api.md cannot drift: every ```python block of it runs, in order, in one namespace (as the
cells of a notebook), and its asserts hold."""

from __future__ import annotations

import re
from pathlib import Path

DOC = Path(__file__).resolve().parents[2] / "docs" / "api.md"


def python_blocks(text: str) -> list[str]:
    return re.findall(r"^```python\n(.*?)^```", text, flags=re.DOTALL | re.MULTILINE)


def test_the_blocks_are_found():
    blocks = python_blocks("a\n```python\nx = 1\n```\n```sh\nls\n```\n```python\ny = 2\n```\n")
    assert blocks == ["x = 1\n", "y = 2\n"]


def test_every_python_block_of_the_api_page_runs(capsys):
    blocks = python_blocks(DOC.read_text(encoding="utf-8"))
    assert len(blocks) >= 5  # a model and a layer, a cell, the toy, generation, steps, the atlas
    namespace: dict = {"__name__": "docs_api"}
    for i, block in enumerate(blocks):
        exec(compile(block, f"{DOC.name} block {i + 1}", "exec"), namespace)  # noqa: S102 - our own page
    printed = capsys.readouterr().out
    assert "Model('minilm', bert, layers=6, heads=12)" in printed and "' sat. '" in printed
    assert {"model", "trace", "toy", "gen", "rows"} <= set(namespace)
