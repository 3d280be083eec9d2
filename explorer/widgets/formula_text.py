"""Formulas with numbers that wrap only where a person would break them: before an ``=`` step (or
``≈``, ``→``: the next line starts with it), before a ``+`` or ``−`` between terms, after a list's
comma, or between two words of prose; never inside a product (``−0.05051 × 0.343 × 0.5``), a
quotient (``0.0804627 / √4``), a number, brackets or a juxtaposed product (``a_ij v_j``). Every
other space becomes a no-break space.

``keep_terms(text)`` returns the text (lines and indentation kept) with those no-break spaces, for a
word-wrapped QLabel (Qt never breaks a line at a no-break space).
"""

from __future__ import annotations

import unicodedata

NBSP = "\u00a0"
STEPS = frozenset({"=", "≈", "→", "⇒", "≤", "≥", "<", ">", ":=", "≡"})  # a step: a new line may start with it
TERM_SIGNS = frozenset({"+", "−", "-", "±"})  # between terms: the sign starts the next line with its term
TIGHT = frozenset({"×", "·", "/", "÷", "*", "^", "∘", "⊙", "@"})  # products and quotients stay whole
MATH_MARKS = frozenset("_()[]{}|‖")
MATH_CATEGORIES = frozenset({"Nd", "No", "Sm", "Sk", "Lm"})  # digits, ², √ Σ × =, ˆ, ᵀ


def _mathy(token: str) -> bool:
    """A number, a symbol or an indexed name (``k_2,0``, ``Kᵀ``, ``0.5``, ``α``, ``x``), not a word of
    prose (``keys``, ``one-hot.``)."""
    core = token.rstrip(".,;:").strip("'\"‘’“”")
    if len(core) <= 1:
        return True
    return any(c in MATH_MARKS or unicodedata.category(c) in MATH_CATEGORIES or "\u0370" <= c <= "\u03ff"
               for c in core)  # fmt: skip


def _breakable(before: str, after: str) -> bool:
    """May the line break at the space between the tokens ``before`` and ``after``?"""
    if before in STEPS or before in TERM_SIGNS or before in TIGHT or after in TIGHT:
        return False  # "= 0.891445", "+ 0.3", "0.343 × 0.5" stay together
    if after in STEPS or before.endswith((",", ";", ":")):
        return True  # before a step (a continued line starts "= …"), after a comma or a colon
    if after in TERM_SIGNS:
        return True  # before "+ term"
    return not (_mathy(before) and _mathy(after))


def keep_terms(text: str) -> str:
    """``text`` with every space that must not break replaced by a no-break space, line by line."""
    return "\n".join(_keep_terms(line) for line in text.split("\n"))


def _keep_terms(line: str) -> str:
    indent = len(line) - len(line.lstrip(" "))
    tokens = line[indent:].split(" ")
    out = [NBSP * indent + tokens[0]]
    depth = _depth(tokens[0])  # inside brackets a formula is one factor: "e^(s_3,2 − m)" stays whole
    for before, after in zip(tokens, tokens[1:]):
        if not before or not after:  # a run of spaces (column alignment): kept, never a break
            breakable = False
        elif depth > 0:  # only a list's commas ("[0.037, −0.011, …]") may end a line inside brackets
            breakable = before.endswith(",")
        else:
            breakable = _breakable(before, after)
        out.append((" " if breakable else NBSP) + after)
        depth += _depth(after)
    return "".join(out)


def _depth(token: str) -> int:
    """How many brackets ``token`` opens (negative: closes)."""
    return sum(token.count(c) for c in "([{") - sum(token.count(c) for c in ")]}")

