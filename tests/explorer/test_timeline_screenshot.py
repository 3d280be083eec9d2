"""``--timeline --screenshot T.png`` writes T.png and nothing else (issue 50, item 5): it wrote
``T_window.png`` beside it too, replacing a user's file of that name without a word. The main
window is saved only where ``--window-screenshot`` names it; a second name that is missing its
first, or names the same file, is one line."""

from __future__ import annotations

from PySide6.QtGui import QImage

from explorer.app import run_app

TIMELINE = ["--model", "induction", "--sentence", "abcdabcd", "--timeline"]


def test_the_timeline_alone_leaves_a_users_file_beside_it_as_it_was(tmp_path, isolated_settings):
    out, users = tmp_path / "t.png", tmp_path / "t_window.png"
    users.write_bytes(b"the user's own picture")
    assert run_app([*TIMELINE, "--screenshot", str(out)]) == 0
    assert QImage(str(out)).width() > 400
    assert users.read_bytes() == b"the user's own picture"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["t.png", "t_window.png"]


def test_window_screenshot_without_the_timelines_or_with_its_name_is_one_line(tmp_path, capsys, isolated_settings):
    out = tmp_path / "t.png"
    assert run_app(["--sentence", "a b", "--screenshot", str(out), "--window-screenshot", str(tmp_path / "w.png")]) == 2
    assert "give both" in capsys.readouterr().err
    assert run_app([*TIMELINE, "--screenshot", str(out), "--window-screenshot", str(out)]) == 2
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 1 and "both name" in err[0], err
    assert list(tmp_path.iterdir()) == []
