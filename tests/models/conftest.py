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


# --- the device a device-dependent test runs on (issue 45: a GPU is a first-class machine) -----------
TEST_DEVICE_ENV = "EXPLORER_TEST_DEVICE"


@pytest.fixture(params=["cpu", "cuda"])
def device(request):
    """``"cpu"``, then ``"cuda"`` when CUDA is present (skipped cleanly without it). The one switch,
    EXPLORER_TEST_DEVICE: ``cuda`` makes a missing CUDA a failure (a GPU session cannot skip its tests
    unseen), ``cpu`` runs the CPU only."""
    import os

    import torch

    wanted = os.environ.get(TEST_DEVICE_ENV, "").strip().lower()
    if request.param == "cuda":
        if wanted == "cpu":
            pytest.skip(f"{TEST_DEVICE_ENV}=cpu")
        if not torch.cuda.is_available():
            if wanted == "cuda":
                pytest.fail(f"{TEST_DEVICE_ENV}=cuda but torch sees no CUDA device")
            pytest.skip(f"no CUDA device (set {TEST_DEVICE_ENV}=cuda on a GPU machine to require it)")
    return request.param
