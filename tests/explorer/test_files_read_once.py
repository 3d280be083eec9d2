"""A file the window opens is read once, when it is opened (issue 31, "Checks without side effects"):
every request after it holds its arrays, so a change of a setting reads no file on the GUI thread.
Before, each request read every file again (and a file deleted meanwhile failed the next change)."""

from __future__ import annotations

import builtins
import io

import numpy as np
import pytest

from models.runspec import RunSpec


def test_an_opened_file_is_read_once_and_the_requests_after_it_read_none(make_window, settle, tmp_path,
                                                                         monkeypatch):  # fmt: skip
    rng = np.random.default_rng(3)
    x = tmp_path / "x.npy"
    np.save(x, rng.standard_normal((5, 8)).astype(np.float32))
    w = tmp_path / "w.npz"
    np.savez(w, **{k: rng.standard_normal((2, 8, 4)).astype(np.float32) for k in ("W_q", "W_k", "W_v")})
    window = make_window()  # 2 heads, d_model 8
    monkeypatch.setattr(window.files, "ask_labels", lambda rows: "")
    assert window.files.open_embeddings(str(x)) and window.files.open_weights(str(w))
    settle(window)
    x.unlink()
    w.unlink()  # gone from the disk: nothing reads them any more

    def refuse(*args, **kwargs):
        raise AssertionError("a file was read for a request")

    with pytest.MonkeyPatch.context() as mp:
        for module in (builtins, io):
            mp.setattr(module, "open", refuse)
        mp.setattr(np, "load", refuse)
        window.state.update_inputs(seed=5, temperature=0.5)
        assert window.state.problem == ("", ())
        request = window.state.request()
    assert isinstance(request, RunSpec) and request.seed == 5
    assert request.arrays["embeddings"].shape == (5, 8) and request.arrays.weights()["W_q"].shape == (2, 8, 4)
    window.submit_now()
    settle(window)
    assert not window.status_line.is_error and window.state.display.request.seed == 5
