"""Every top-level window opens on the screen: at most 1400 × 900 by default, and never larger than
the screen's available geometry (a 1280 × 720 laptop, a 1920 × 1080 desktop, the offscreen platform's
screen). What does not fit scrolls or splits inside the window; the window does not grow.

One helper for every window (main, Generate, whole model, encoder-decoder model, compare, atlas,
positional-encoding lens, training timeline), so no window carries its own numbers past the rule.
"""

from __future__ import annotations

import os
from pathlib import Path

from PySide6.QtGui import QGuiApplication
from PySide6.QtWidgets import QApplication, QWidget

LARGEST = (1400, 900)  # the largest size a window opens at, whatever the screen
CASCADE = 40  # px: a window opened from another opens this much below and right of it
# The offscreen platform's own screen is 800 × 800; screenshots and tests are taken on this desktop.
OFFSCREEN_SCREEN = Path(__file__).resolve().parents[2] / "resources" / "offscreen_screen.json"


def fitted_size(width: int, height: int, available: tuple[int, int]) -> tuple[int, int]:
    """(width, height) capped at :data:`LARGEST` and at ``available`` (the screen's free area)."""
    return (max(1, min(width, LARGEST[0], available[0])), max(1, min(height, LARGEST[1], available[1])))


def screen_of(window: QWidget):
    """The screen ``window`` opens on: its parent window's when that is shown, else its own (the
    primary one before it is shown)."""
    parent = window.parentWidget()
    parent = parent.window() if parent is not None else None
    if parent is not None and parent.isVisible() and parent.screen() is not None:
        return parent.screen()
    return window.screen() or QGuiApplication.primaryScreen()


def frame_margins(window: QWidget) -> tuple[int, int, int, int]:
    """(left, top, right, bottom) of the frame the window system draws around ``window``: its own once
    framed, else a shown window's (the main window's title bar, say), else none."""
    for candidate in (window, *QApplication.topLevelWidgets()):
        if candidate is window or (candidate.isVisible() and candidate.isWindow()):
            frame, inner = candidate.frameGeometry(), candidate.geometry()
            margins = (inner.left() - frame.left(), inner.top() - frame.top(),
                       frame.right() - inner.right(), frame.bottom() - inner.bottom())  # fmt: skip
            if any(margins) and min(margins) >= 0:
                return margins
    return (0, 0, 0, 0)


def available_size(window: QWidget) -> tuple[int, int]:
    """The free area of the window's screen (:func:`screen_of`), less its frame (:func:`frame_margins`)."""
    screen = screen_of(window)
    if screen is None:
        return LARGEST
    area = screen.availableGeometry()
    left, top, right, bottom = frame_margins(window)
    return (area.width() - left - right, area.height() - top - bottom)


def place_on_screen(window: QWidget) -> None:
    """Move ``window`` so that all of it, frame included, is on the free area of the screen it opens on:
    a little below and right of its parent window when that is shown (both in sight), else centred.
    The window manager's own placement put windows partly below a 1080 px screen (the whole-model
    window at y 297, 800 px tall; compare at y 637; the timeline at y 277, 820 px tall)."""
    screen = screen_of(window)
    if screen is None:
        return
    area = screen.availableGeometry()
    left, top, right, bottom = frame_margins(window)
    outer_w, outer_h = window.width() + left + right, window.height() + top + bottom
    parent = window.parentWidget().window() if window.parentWidget() is not None else None
    if parent is not None and parent.isVisible():
        x, y = parent.frameGeometry().x() + CASCADE, parent.frameGeometry().y() + CASCADE
    else:
        x, y = area.x() + (area.width() - outer_w) // 2, area.y() + (area.height() - outer_h) // 2
    x = max(area.left(), min(x, area.x() + area.width() - outer_w))
    y = max(area.top(), min(y, area.y() + area.height() - outer_h))
    window.move(x, y)  # a window's position is its frame's


def open_sized(window: QWidget, width: int = LARGEST[0], height: int = LARGEST[1]) -> None:
    """Resize ``window`` to (width, height), or less when the screen (or :data:`LARGEST`) is smaller,
    and place it on that screen (:func:`place_on_screen`)."""
    window.resize(*fitted_size(width, height, available_size(window)))
    place_on_screen(window)


def keep_on_screen(window: QWidget) -> None:
    """Shrink a window (a restored geometry, one grown for a dock) that is larger than its screen's free
    area, and move it back onto that area when part of its frame is off it."""
    available = available_size(window)
    if window.width() > available[0] or window.height() > available[1]:
        window.resize(min(window.width(), available[0]), min(window.height(), available[1]))
    screen = screen_of(window)
    if screen is None:
        return
    area = screen.availableGeometry()
    left, top, right, bottom = frame_margins(window)
    frame = window.frameGeometry()
    outer_w, outer_h = window.width() + left + right, window.height() + top + bottom
    x = max(area.left(), min(frame.x(), area.x() + area.width() - outer_w))
    y = max(area.top(), min(frame.y(), area.y() + area.height() - outer_h))
    if (x, y) != (frame.x(), frame.y()):
        window.move(x, y)


def use_desktop_offscreen_screen(environ=os.environ) -> None:
    """With ``QT_QPA_PLATFORM=offscreen`` (screenshots, tests) Qt's screen is an 800 × 800 square;
    give it a 1920 × 1080 desktop instead, so that a screenshot shows a window at its default size.
    Call before the QApplication is made; a platform given with its own options is left alone."""
    if environ.get("QT_QPA_PLATFORM") == "offscreen" and OFFSCREEN_SCREEN.is_file():
        environ["QT_QPA_PLATFORM"] = f"offscreen:configfile={OFFSCREEN_SCREEN}"


def bring_forward(window: QWidget | None) -> None:
    """Raise ``window`` above the others and give it the keyboard: a head chosen in the Whole model
    or atlas window changed the main window behind it, which stayed hidden."""
    if window is not None:
        window.raise_()
        window.activateWindow()
