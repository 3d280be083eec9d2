"""Every output a command writes (or prints), as the hostile-case tests run it: one list.

``COMMAND_OUTPUTS`` names them; ``command_argv(name, inputs, out)`` is the command line that
writes ``name`` at ``out`` from ``inputs`` (``decoder``: a decoder model folder, ``encdec``: an
encoder-decoder one, ``embeddings``: an ``.npy`` matrix, ``d_model``: its width, ``toy``: more
options for the toy, such as ``--weights``). The same line with hostile inputs (too big,
overflowing, a FIFO) is the hostile case; tests/models/test_hardening_matrix.py checks this list
against main.py's commands and docs/hardening.md's matrix against the tests."""

from __future__ import annotations

from pathlib import Path

COMMAND_OUTPUTS = ("export", "all-layers", "encdec-all-layers", "explain", "why", "generate", "atlas", "timeline",
                   "train", "session")  # fmt: skip
PRINTS = ("explain", "why")  # writes no file: no full disk, file-size limit or signal inside a write to try
WRITES = tuple(o for o in COMMAND_OUTPUTS if o not in PRINTS)


def history_of(model: Path) -> Path:
    """A training history whose one checkpoint is ``model`` (what ``timeline`` reads), made beside it once."""
    run = Path(model).parent / f"{Path(model).name}-history"
    step = run / "checkpoints" / "step-000000"
    if (Path(model) / "config.json").is_file() and not step.is_symlink():  # a dry listing names no model
        step.parent.mkdir(parents=True, exist_ok=True)
        step.symlink_to(Path(model).resolve(), target_is_directory=True)
    return run


def command_argv(name: str, inputs: dict, out: Path) -> list[str]:
    model, encdec, emb = str(inputs["decoder"]), str(inputs["encdec"]), str(inputs["embeddings"])
    toy = ["--embeddings", emb, "--d-model", str(inputs["d_model"]), "--heads", "2", *inputs.get("toy", ())]
    return {
        "export": ["export", *toy, "--out", str(out)],
        "all-layers": ["export", "--model", model, "--sentence", "the cat sat", "--all-layers", "--out", str(out)],
        "encdec-all-layers": ["export", "--model", encdec, "--sentence", "the cat sat", "--cross-sentence",
                              "die katze", "--all-layers", "--block", "cross", "--out", str(out)],  # fmt: skip
        "explain": ["explain", "--model", model, "--sentence", "the cat", "--stage", "weights", "--cell", "0,1,0"],
        "why": ["why", "--model", model, "--sentence", "the cat", "--cell", "0,1,0"],
        "generate": ["generate", "--model", model, "--prompt", "the cat", "--max-new-tokens", "2", "--out", str(out)],
        "atlas": ["atlas", "--model", model, "--out", str(out), "--quiet"],
        "timeline": ["timeline", "--model", str(history_of(inputs["decoder"])), "--out", str(out), "--quiet"],
        "train": ["train", "--steps", "2", "--out", str(out)],
        "session": [*toy, "--screenshot", str(out.with_name("shot.png")), "--save-session", str(out)],
    }[name]
