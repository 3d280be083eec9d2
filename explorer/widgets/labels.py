"""Labels that never show an empty box: characters no installed font covers become ``U+4E2D``,
and a token's whitespace is drawn as a sign (``␣`` a space, ``↵`` a newline, ``⇥`` a tab).

Qt falls back to any installed font that has a glyph, so a character shows correctly when the
label's font or any other installed family covers it. Only when none does, the character is
written as its code point, so that the user still learns what the token was. Coverage is read
from each font's character map (QRawFont.supportsCharacter), cached per code point.
"""

from __future__ import annotations

import functools
import html
import re
import unicodedata

from PySide6.QtGui import QFont, QFontDatabase, QRawFont

# Invisible by design (joiners, variation selectors, tags, controls, spaces): nothing to cover.
_INVISIBLE_CATEGORIES = ("Cc", "Cf", "Zs", "Zl", "Zp")


def _invisible(cp: int) -> bool:
    if 0xFE00 <= cp <= 0xFE0F or 0xE0100 <= cp <= 0xE01EF:  # variation selectors
        return True
    return unicodedata.category(chr(cp)) in _INVISIBLE_CATEGORIES


@functools.cache
def _installed_fonts() -> tuple[QRawFont, ...]:
    """One raw font per installed family (built once: families do not change while running)."""
    return tuple(QRawFont.fromFont(QFont(family)) for family in QFontDatabase.families())


@functools.cache
def installed_font_covers(cp: int) -> bool:
    """True when some installed font family has a glyph for code point ``cp``."""
    return any(raw.supportsCharacter(cp) for raw in _installed_fonts())


@functools.lru_cache(maxsize=16)
def raw_font(description: str) -> QRawFont:
    font = QFont()
    font.fromString(description)
    return QRawFont.fromFont(font)


def covered(char: str, font: QFont | None = None) -> bool:
    """True when ``char`` shows as itself: in ``font`` or in a fallback font (or is invisible)."""
    cp = ord(char)
    if _invisible(cp):
        return True
    if font is not None and raw_font(font.toString()).supportsCharacter(cp):
        return True
    return installed_font_covers(cp)


LRM = "\u200e"  # left-to-right mark: a label's base direction, whatever its first letter
_RTL = ("R", "AL")


def logical_order(text: str) -> str:
    """``text`` drawn in its logical order: a label holding right-to-left letters gets a left-to-right
    base direction, so that a word piece ``##ل`` reads ``##ل`` (the bidirectional algorithm, seeing
    an Arabic letter first, would draw it ``ل##``); the letters themselves still run right to left."""
    if text.isascii() or text.startswith(LRM) or not any(unicodedata.bidirectional(c) in _RTL for c in text):
        return text
    return LRM + text


_QUOTED_TOKEN = re.compile(r"'(.+?)' \((\d+)\)")  # a derivation's token: 'tok' (i)  (models/reads)


def isolate_tokens(text: str) -> str:
    """Every quoted token ``'tok' (i)`` holding right-to-left letters closed by a left-to-right mark,
    so that a line of a derivation reads left to right: an Arabic token otherwise took its closing
    quote and the position after it into its right-to-left run ("key '(8) 'مرحبا = 0.8452"). (A mark,
    not an isolate FSI … PDI: few fonts have those, and the fallback's taller line cut the inspector.)"""
    if text.isascii():
        return text

    def isolated(match: re.Match) -> str:
        rtl = any(unicodedata.bidirectional(c) in _RTL for c in match[1])
        return f"'{match[1]}'{LRM} ({match[2]})" if rtl else match[0]

    return _QUOTED_TOKEN.sub(isolated, text)


def uncovered_characters(text: str, font: QFont | None = None) -> list[str]:
    """The distinct characters of ``text`` that no installed font draws (they show as boxes in a
    text box, which cannot write them as code points: it would change the person's text)."""
    if text.isascii():
        return []
    raw = raw_font(font.toString()) if font is not None else None
    out = []
    for char in dict.fromkeys(c for c in text if not c.isascii()):
        code = ord(char)
        if not (_invisible(code) or (raw is not None and raw.supportsCharacter(code)) or installed_font_covers(code)):
            out.append(char)
    return out


# A token made of whitespace (a character-level model's space) would be drawn as nothing: the axis
# read "15 " and the logit lens showed empty cells. Each is drawn as a sign; other whitespace
# (no-break space, ideographic space...) as its code point.
WHITESPACE_SIGNS = {" ": "\u2423", "\n": "\u21b5", "\t": "\u21e5"}  # ␣ ↵ ⇥


def visible_whitespace(text: str) -> str:
    """``text`` with every whitespace character drawn: a space as ``␣``, a newline as ``↵``, a tab as
    ``⇥``, any other as ``U+XXXX`` (``"a b"`` -> ``"a␣b"``)."""
    if not any(c.isspace() for c in text):
        return text
    return "".join(WHITESPACE_SIGNS.get(c, f"U+{ord(c):04X}") if c.isspace() else c for c in text)


def display_label(text: str, font: QFont | None = None) -> str:
    """A token's label as drawn (axes, lists, bars, the logit lens): its whitespace visible
    (:func:`visible_whitespace`), then :func:`display_text`."""
    return display_text(visible_whitespace(text), font)


def display_text(text: str, font: QFont | None = None) -> str:
    """Running text (a derivation, a title) as drawn, its spaces kept: ``text`` where every character
    is covered; otherwise the uncovered ones as ``U+XXXX``. Labels with right-to-left letters keep
    their logical order (:func:`logical_order`).

    Code points are set apart by spaces: ``"a中b"`` -> ``"a U+4E2D b"`` when no font has 中. In
    such a label the invisible joiners and selectors are written as code points too (an emoji
    sequence then reads ``U+1F468 U+200D U+1F469``); its whitespace stays whitespace (a derivation's
    spaces and lines read ``U+0020`` / ``U+000A`` when one token of the sentence had no font).
    """
    if text.isascii() and text.isprintable():  # every font has these: the common case, kept fast
        return text
    raw = raw_font(font.toString()) if font is not None else None
    visible = [_invisible(ord(c)) or (raw is not None and raw.supportsCharacter(ord(c)))
               or installed_font_covers(ord(c)) for c in text]  # fmt: skip
    if all(visible):
        return logical_order(text)
    out = ""
    for char, ok in zip(text, visible):
        if char.isspace() or (ok and not _invisible(ord(char))):
            out += " " if out.endswith(_CODE_END) and not char.isspace() else ""
            out += char
            continue
        out += " " if out and not out[-1].isspace() else ""
        out += f"U+{ord(char):04X}" + _CODE_END
    return logical_order(out.replace(_CODE_END, ""))


_CODE_END = "\x00"  # marks where a code point ends while the text is built: the next letter is set apart


def rich_safe(text: str) -> str:
    """``text`` for a label that reads HTML (every pyqtgraph title and axis label, a rich-text QLabel):
    ``<s>``, ``</w>`` or ``a&b`` are shown as themselves (a rollout title for ``<s>`` read ``'' by
    layer``, struck through)."""
    return html.escape(text, quote=False)
