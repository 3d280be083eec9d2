"""``--force`` removes only files whose bytes it can prove it wrote (issue 50, item 6): every folder
the tool writes signs its files (``"sha256"`` in its manifest), and a folder is replaced only when
each file has the digest signed.

Before: ``export --all-layers --force`` deleted a user's ``thesis.tex`` that a ``manifest.json`` it
had not written (or had, then edited by hand) listed among its ``files``."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from test_fuzz_readers import FUZZ, values
from test_pretrained_loader import write_tiny_gpt2

from models.cli.export import export_main
from models.config import AttentionConfig, AttentionRequest, InputError
from models.engine.pipeline import run
from models.files.export import MANIFEST, write_trace
from models.io.atomic import atomic_folder, is_previous_export
from models.io.signatures import file_sha256

THESIS = b"\\chapter{Attention}\n"


@pytest.fixture(scope="module")
def tiny(tmp_path_factory) -> Path:
    return write_tiny_gpt2(tmp_path_factory.mktemp("tiny") / "tiny-gpt2")


def _trace(sentence="the cat sat"):
    return run(AttentionRequest(config=AttentionConfig(heads=2, d_model=8), sentence=sentence))


def _edit(folder: Path, change) -> None:
    man = json.loads((folder / MANIFEST).read_text(encoding="utf-8"))
    change(man)
    (folder / MANIFEST).write_text(json.dumps(man, indent=2), encoding="utf-8")


def _refused(capsys, rc: int) -> str:
    err = capsys.readouterr().err.splitlines()
    assert rc == 2 and len(err) == 1 and err[0].startswith("error: "), err
    return err[0]


def test_all_layers_force_keeps_a_users_file_its_manifest_was_edited_to_list(tmp_path, capsys, tiny):
    out = tmp_path / "survey"
    argv = ["--model", str(tiny), "--sentence", "the cat sat", "--all-layers", "--out", str(out)]
    assert export_main(argv) == 0
    (out / "thesis.tex").write_bytes(THESIS)
    _edit(out, lambda man: man["files"].update({"thesis.tex": {}}))
    line = _refused(capsys, export_main([*argv, "--force"]))
    assert "lists thesis.tex, whose content this tool did not write" in line, line
    assert (out / "thesis.tex").read_bytes() == THESIS and (out / "attention.npy").exists()


def test_force_keeps_a_file_of_ours_the_user_overwrote(tmp_path):
    out = tmp_path / "run"
    write_trace(_trace(), out)
    (out / "weights.npy").write_bytes(THESIS)  # the same name, the user's bytes
    with pytest.raises(InputError, match=r"lists weights\.npy, whose content this tool did not write"):
        write_trace(_trace("a dog"), out, force=True)
    assert (out / "weights.npy").read_bytes() == THESIS


def test_force_refuses_a_manifest_that_signs_nothing(tmp_path):
    """A folder written before the signatures, or a manifest made by hand: nothing can be proved."""
    out = tmp_path / "run"
    write_trace(_trace(), out)
    _edit(out, lambda man: man.pop("sha256"))
    assert not is_previous_export(out)
    with pytest.raises(InputError, match=r"signs no file \(sha256\)"):
        write_trace(_trace("a dog"), out, force=True)
    _edit(out, lambda man: man.update({"sha256": ["weights.npy"]}))  # not a table of digests
    with pytest.raises(InputError, match="signs no file"):
        write_trace(_trace("a dog"), out, force=True)


def test_every_folder_written_signs_each_of_its_files_and_force_replaces_it(tmp_path):
    out = tmp_path / "run"
    write_trace(_trace(), out)
    man = json.loads((out / MANIFEST).read_text(encoding="utf-8"))
    files = sorted(p.name for p in out.iterdir() if p.name != MANIFEST)
    assert sorted(man["sha256"]) == files and len(files) > 3
    assert all(man["sha256"][name] == file_sha256(out / name) for name in files)
    assert is_previous_export(out)
    write_trace(_trace("a dog"), out, force=True)
    assert is_previous_export(out)


def test_a_folder_without_a_manifest_is_written_as_it_was(tmp_path):
    """The signing step touches only a manifest: a folder written without one gets none."""
    with atomic_folder(tmp_path / "plain") as tmp:
        (tmp / "a.txt").write_text("a")
    assert sorted(p.name for p in (tmp_path / "plain").iterdir()) == ["a.txt"]


@settings(FUZZ, max_examples=60)
@given(listed=st.sampled_from(["stages", "files", "both", "neither"]), digest=values | st.text(max_size=70),
       others=st.dictionaries(st.sampled_from(["weights.npy", "q.npy", "k.npy", "x"]), values, max_size=3))  # fmt: skip
def test_force_over_a_tampered_manifest_never_removes_the_users_file(tmp_path_factory, listed, digest, others):
    """A previous export, the user's thesis.tex beside it, its manifest edited at random (the file
    listed or not, any value as its digest, other digests changed): --force may replace the folder
    only if nothing in it is the user's; thesis.tex stays byte for byte."""
    out = tmp_path_factory.mktemp("tampered") / "run"
    write_trace(_trace(), out)
    (out / "thesis.tex").write_bytes(THESIS)
    assume(digest != file_sha256(out / "thesis.tex"))

    def tamper(man):
        if listed in ("stages", "both"):
            man["stages"].append({"name": "thesis", "file": "thesis.tex"})
        if listed in ("files", "both"):
            man["files"] = {"thesis.tex": {}}
        man["sha256"].update({"thesis.tex": digest, **others})

    _edit(out, tamper)
    try:
        write_trace(_trace("a dog"), out, force=True)
    except InputError:
        pass
    assert (out / "thesis.tex").read_bytes() == THESIS
