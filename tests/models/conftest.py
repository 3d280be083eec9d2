"""Signals as a terminal gives them, whatever started the test run.

A run started in the background (``cmd &`` in a script, ``nohup``) inherits SIGINT and SIGHUP
ignored, and the writers rightly leave an ignored signal ignored (models/io/atomic.py). The tests
of Ctrl+C and hang-ups then saw nothing arrive. Each test here starts from the dispositions of an
interactive run: Python's own Ctrl+C handler, SIGHUP's default.
"""

from __future__ import annotations

import signal

import pytest


@pytest.fixture(autouse=True)
def terminal_signals():
    before = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGHUP)}
    signal.signal(signal.SIGINT, signal.default_int_handler)
    signal.signal(signal.SIGHUP, signal.SIG_DFL)
    yield
    for s, handler in before.items():
        signal.signal(s, handler)
