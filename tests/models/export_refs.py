"""Shared checks of the export tests: nothing left behind, one refusal line, a save that fails."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from models.cli.export import export_main


def leftovers(parent: Path) -> list[str]:
    return sorted(p.name for p in parent.iterdir() if ".partial-" in p.name or ".old-" in p.name)

def save_that_fails_on_call(monkeypatch, failing_call: int, exc: BaseException) -> None:
    real_save = np.save
    calls = []

    def save(*args, **kwargs):
        calls.append(1)
        if len(calls) == failing_call:
            raise exc
        return real_save(*args, **kwargs)

    monkeypatch.setattr(np, "save", save)

def assert_refused(capsys, argv, out: Path, message: str) -> None:
    """Exit status 2, one ``error:`` line naming the problem, nothing written beside ``out``."""
    before = sorted(p.name for p in out.parent.iterdir()) if out.parent.is_dir() else None
    rc = export_main([*argv, "--out", str(out)])
    captured = capsys.readouterr()
    assert rc == 2
    assert captured.out == ""
    lines = captured.err.splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), captured.err
    assert message in lines[0]
    assert not out.exists()
    if before is not None:
        assert sorted(p.name for p in out.parent.iterdir()) == before
