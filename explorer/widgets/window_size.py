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
from PySide6.QtWidgets import QWidget

LARGEST = (1400, 900)  # the largest size a window opens at, whatever the screen
# The offscreen platform's own screen is 800 × 800; screenshots and tests are taken on this desktop.
OFFSCREEN_SCREEN = Path(__file__).resolve().parents[2] / "resources" / "offscreen_screen.json"


def fitted_size(width: int, height: int, available: tuple[int, int]) -> tuple[int, int]:
    """(width, height) capped at :data:`LARGEST` and at ``available`` (the screen's free area)."""
    return (max(1, min(width, LARGEST[0], available[0])), max(1, min(height, LARGEST[1], available[1])))


def available_size(window: QWidget) -> tuple[int, int]:
    """The free area of the window's screen (the primary one before it is shown), less its frame
    once the window system has given it one."""
    screen = window.screen() or QGuiApplication.primaryScreen()
    if screen is None:
        return LARGEST
    area = screen.availableGeometry()
    frame = window.frameGeometry()  # as large as the window until the window system frames it
    frame_w, frame_h = max(0, frame.width() - window.width()), max(0, frame.height() - window.height())
    return (area.width() - frame_w, area.height() - frame_h)


def open_sized(window: QWidget, width: int = LARGEST[0], height: int = LARGEST[1]) -> None:
    """Resize ``window`` to (width, height), or less when the screen (or :data:`LARGEST`) is smaller."""
    window.resize(*fitted_size(width, height, available_size(window)))


def keep_on_screen(window: QWidget) -> None:
    """Shrink a window (a restored geometry, say) that is larger than its screen's free area."""
    available = available_size(window)
    if window.width() > available[0] or window.height() > available[1]:
        window.resize(min(window.width(), available[0]), min(window.height(), available[1]))


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
