"""The window's command line names what it refuses (issue 50, item 11): a session's head out of
range was "--head must be …", an option not given; ``--view why`` of a cell the split refuses
wrote a PNG of the refusal and exited 0."""

from __future__ import annotations

import json
import zipfile

from explorer.app import run_app


def _session_with_head(tmp_path, head: int):
    shot, saved = tmp_path / "first.png", tmp_path / "s.zip"
    assert run_app(["--sentence", "the cat sat", "--heads", "2", "--screenshot", str(shot), "--save-session",
                    str(saved)]) == 0  # fmt: skip
    doc = json.loads(zipfile.ZipFile(saved).read("session.json"))
    doc["view"]["head"] = head
    hostile = tmp_path / "head.zip"
    with zipfile.ZipFile(hostile, "w") as z:
        z.writestr("session.json", json.dumps(doc))
    return hostile


def test_a_sessions_head_out_of_range_is_named_as_the_sessions(tmp_path, capsys, isolated_settings):
    session = _session_with_head(tmp_path, 99)
    capsys.readouterr()
    assert run_app(["--session", str(session), "--screenshot", str(tmp_path / "x.png")]) == 2
    err = capsys.readouterr().err.splitlines()
    assert err == [f"error: session {session}'s view head 99 must be between 0 and 1 (2 heads, numbered from 0)"], err
    assert run_app(["--session", str(session), "--head", "1", "--screenshot", str(tmp_path / "x.png")]) == 0


def test_why_view_of_a_cell_the_split_refuses_says_so_and_exits_2(tmp_path, capsys, isolated_settings):
    out = tmp_path / "why.png"
    code = run_app(["--sentence", "the cat sat", "--score", "additive", "--view", "why", "--cell", "0,1,0",
                    "--screenshot", str(out)])  # fmt: skip
    err = capsys.readouterr().err.splitlines()
    assert code == 2 and len(err) == 1 and "why: the additive score is not a product" in err[0], (code, err)
    assert not out.exists()
