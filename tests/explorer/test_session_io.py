"""Sessions in the window: Inputs ⇄ session, main.py --session / --save-session."""

from __future__ import annotations

import numpy as np

from explorer.app import run_app
from explorer.files.session_io import inputs_from_session, session_from_inputs
from explorer.state import Inputs
from models.engine.edits import Edit
from models.engine.held_arrays import HeldArrays
from models.engine.pipeline import materialize, run
from models.files.session import Session, load_session, save_session
from models.run_engine import toy_request, trace
from models.runspec import RunSpec

TOY = Inputs(sentence="The cat sat on the mat.", heads=4, d_model=8, d_k=3, mask="padding", pad_positions=(1, 3),
             score="additive", pe=True, temperature=0.5, seed=7, cross_enabled=True,
             cross_sentence="Die Katze")  # fmt: skip


def test_window_inputs_round_trip_through_a_session_and_compute_the_same_numbers(tmp_path):
    path = save_session(tmp_path / "s.zip", session_from_inputs(TOY, "weights", 2, 1))
    shown = inputs_from_session(load_session(path))
    assert shown.inputs == TOY and (shown.stage, shown.head, shown.query) == ("weights", 2, 1)
    assert shown.not_applied == ()
    window = materialize(run(toy_request(TOY.to_runspec())))
    exported = materialize(load_session(path).trace())  # what export --session computes
    assert window.names == exported.names
    for name in window.names:
        np.testing.assert_array_equal(window[name].array, exported[name].array, err_msg=name)


def test_a_model_session_maps_to_the_model_inputs():
    inputs = Inputs(sentence="a b", model="minilm", layer=2, model_mask="causal", pad_positions=(1,))
    shown = inputs_from_session(session_from_inputs(inputs))
    assert (shown.inputs.model, shown.inputs.layer, shown.inputs.model_mask) == ("minilm", 2, "causal")
    assert shown.inputs.pad_positions == (1,)


def test_the_window_shows_everything_but_the_export_only_options():
    mask = np.eye(2, dtype=bool)
    session = Session(RunSpec(sentence="a b", mask="custom", bias=True, d_out=6, device="cpu",
                              arrays=HeldArrays({"mask": mask}), edits=(Edit("q", (0, 0, 0), 1.0),)),
                      pinned=RunSpec(sentence="a", max_tokens=9))  # fmt: skip
    shown = inputs_from_session(session)
    assert shown.not_applied == ("--device cpu", "pinned --max-tokens 9")
    assert (shown.inputs.mask, shown.inputs.bias, shown.inputs.d_out) == ("custom", True, 6)
    assert np.array_equal(np.array(shown.inputs.painted_mask), mask)
    assert shown.edits == (Edit("q", (0, 0, 0), 1.0),) and shown.pinned.inputs.sentence == "a"


def test_a_toy_session_resets_what_the_window_had_before():
    before = Inputs(model="minilm", layer=3, d_k=5, cross_enabled=True, labels=("x",), weights_file="/w.npz")
    shown = inputs_from_session(session_from_inputs(Inputs(sentence="a b c")), before)
    assert shown.inputs == Inputs(sentence="a b c", layer=3)  # the model's layer waits behind the toy


def test_screenshot_saves_its_session_and_session_reopens_it(qtbot, tmp_path, capsys):
    shot, saved = tmp_path / "a.png", tmp_path / "a.zip"
    argv = ["--sentence", "The cat sat.", "--heads", "2", "--mask", "causal", "--stage", "masked", "--head", "1"]
    assert run_app([*argv, "--screenshot", str(shot), "--save-session", str(saved)]) == 0
    session = load_session(saved)
    assert (session.stage, session.head) == ("masked", 1)  # --head and sessions: both 0-based
    assert session.run.mask == "causal" and session.run.heads == 2
    again = tmp_path / "b.zip"
    argv = ["--session", str(saved), "--screenshot", str(tmp_path / "b.png"), "--save-session", str(again)]
    assert run_app(argv) == 0
    back = load_session(again)
    assert (back.run, back.stage, back.head) == (session.run, session.stage, session.head)


def test_bad_session_or_save_without_screenshot_exit_2(tmp_path, capsys):
    bad = tmp_path / "bad.zip"
    bad.write_bytes(b"nope")
    assert run_app(["--session", str(bad), "--screenshot", str(tmp_path / "x.png")]) == 2
    assert "corrupt or truncated" in capsys.readouterr().err
    assert run_app(["--save-session", str(tmp_path / "s.zip")]) == 2
    assert capsys.readouterr().err.strip().startswith("error: --save-session needs --screenshot")
    assert not (tmp_path / "x.png").exists() and not (tmp_path / "s.zip").exists()


def test_inputs_with_arrays_make_a_runspec_with_the_same_numbers():
    rng = np.random.default_rng(8)
    held = HeldArrays({"embeddings": rng.standard_normal((4, 6)), "cross_embeddings": rng.standard_normal((3, 6)),
                       **{f"weights/{k}": rng.standard_normal((2, 6, 3)) for k in ("W_q", "W_k", "W_v")}})  # fmt: skip
    inputs = Inputs(heads=2, d_model=6, d_out=5, bias=True, score="additive", mask="custom", cross_enabled=True,
                    painted_mask=((True, False, False, False),) * 3, labels=tuple("abcd"), held=held)  # fmt: skip
    edits = (Edit("v", (1, 0, 2), 9.0),)
    saved = inputs.to_runspec().with_edits(edits)
    assert saved.edits == edits and not saved.difference and saved.labels == tuple("abcd")
    original = materialize(run(toy_request(inputs.to_runspec())))
    again = materialize(trace(saved.replace(edits=())))
    for name in original.names:
        np.testing.assert_array_equal(original[name].array, again[name].array, err_msg=name)
    shown = inputs_from_session(Session(saved))
    assert shown.edits == edits and shown.inputs.to_runspec() == saved.replace(edits=())
    assert toy_request(shown.inputs.to_runspec()).custom_mask.tolist() == [[True, False, False, False]] * 3
