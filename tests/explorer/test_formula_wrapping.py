"""The inspector's derivations wrap only between terms: at an "=" step, before a "+ term", or
between words of prose; never inside a product or a number. "q_3,0·k_2,0·scale = −0.05051 × 0.343 ×"
broke before "0.5 = −0.008661", and "0.0804627 / √4 = 0.0804627 /" before "2 = 0.0402313"."""

from __future__ import annotations

import pytest
from PySide6.QtGui import QTextLayout, QTextOption

from explorer.widgets.cell_inspector import CellInspector
from models.config import AttentionConfig, AttentionRequest
from models.engine.pipeline import run
from models.reads.explain import explain
from models.reads.params import toy_params

README = "The animal didn't cross the street because it was too tired."
STEPS = ("=", "≈", "→")  # a line may end with one of these, or start with one
PRODUCTS = ("×", "·", "/")  # never at either side of a break


def _lines(text: str, font, width: float) -> list[list[str]]:
    """Each paragraph of ``text`` broken into lines as a word-wrapped label of ``width`` px breaks it."""
    out = []
    for paragraph in text.split("\n"):
        layout = QTextLayout(paragraph, font)
        option = QTextOption()
        option.setWrapMode(QTextOption.WrapMode.WordWrap)
        layout.setTextOption(option)
        layout.beginLayout()
        lines = []
        while (line := layout.createLine()).isValid():
            line.setLineWidth(width)
            lines.append(paragraph[line.textStart() : line.textStart() + line.textLength()])
        layout.endLayout()
        out.append(lines)
    return out


def _prose(word: str) -> bool:
    word = word.rstrip(".,;:").strip("'")
    return len(word) > 1 and word.isascii() and word.replace("-", "").isalpha()


def _bad_breaks(text: str, font, width: float) -> tuple[list[str], int]:
    """The breaks that fall inside a term (the text each side), and how many breaks there were."""
    bad, breaks = [], 0
    for lines in _lines(text, font, width):
        for left, right in zip(lines, lines[1:]):
            breaks += 1
            last, first = left.split()[-1], right.split()[0]  # split() takes no-break spaces as spaces
            if last in PRODUCTS or first in PRODUCTS:
                bad.append(f"{left!r} | {right!r}")
            elif last in STEPS or first in STEPS or last.endswith((",", ":", ";")) or first in ("+", "−"):
                continue
            elif not (_prose(last) or _prose(first)):  # two pieces of one term (numbers, names)
                bad.append(f"{left!r} | {right!r}")
    return bad, breaks


CASES = [  # (config, stage, cell): the brief's cell, and every other stage's derivation
    (dict(heads=4, d_model=16), "scaled", (1, 3, 2)),
    (dict(heads=4, d_model=16), "scores", (1, 3, 2)),
    (dict(heads=4, d_model=16), "weights", (1, 3, 2)),
    (dict(heads=4, d_model=16), "q", (1, 3, 2)),
    (dict(heads=4, d_model=16), "head_output", (1, 3, 2)),
    (dict(heads=4, d_model=16), "weighted_norms", (1, 3, 2)),
    (dict(heads=4, d_model=16), "concat", (3, 5)),
    (dict(heads=4, d_model=16), "output", (3, 2)),
    (dict(heads=2, d_model=16, score="general"), "scores", (1, 3, 2)),
    (dict(heads=2, d_model=16, pe="sinusoidal"), "input", (3, 2)),
    (dict(heads=2, d_model=16, mask="causal", temperature=0.5), "weights", (0, 9, 1)),
]


@pytest.mark.parametrize(("config", "stage", "cell"), CASES)
def test_derivations_break_only_between_terms(qtbot, config, stage, cell):
    request = AttentionRequest(config=AttentionConfig(**config), sentence=README)
    trace, params = run(request), toy_params(request)
    panel = CellInspector()
    qtbot.addWidget(panel)
    panel.show_derivation(explain(trace, params, stage, cell))
    total = 0
    for width in (330, 260, 200):  # the right column's width, and narrower
        for label in (panel.title, panel.formula, panel.steps, panel.terms, panel.value):
            bad, breaks = _bad_breaks(label.text(), label.font(), width)
            assert not bad, (stage, width, bad)
            total += breaks
    assert total > 0  # the widths did make lines break


def test_the_focus_panels_output_line_breaks_only_at_its_commas(qapp):
    """"(d_v = 4, Σ_j a_ij" then "= 1.0000)" on the next line: the sum was cut from its value."""
    import numpy as np
    from PySide6.QtGui import QFont, QTextDocument

    from explorer.widgets.query_focus import contributions_html

    tokens = ("The", "animal", "didn", "'")
    html = contributions_html(tokens, np.array([0.1, 0.2, 0.3, 0.4], np.float32),
                              np.array([0.037, -0.011, 0.160, 0.131], np.float32))  # fmt: skip
    breaks = 0
    for width in (330, 250, 190, 150):
        document = QTextDocument()
        document.setDefaultFont(QFont())
        document.setHtml(html)
        document.setTextWidth(width)
        document.size()  # lays the document out
        block = document.lastBlock()  # the o_i line
        layout, text = block.layout(), block.text()
        lines = [text[line.textStart() : line.textStart() + line.textLength()]
                 for line in (layout.lineAt(i) for i in range(layout.lineCount()))]  # fmt: skip
        assert "1.0000" in text
        for left in lines[:-1]:
            breaks += 1
            assert left.rstrip().endswith((",", "]")), (width, lines)
    assert breaks > 0
