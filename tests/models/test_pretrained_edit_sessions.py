"""Sessions of a model's layer carry its what-if edits: `export --session` reproduces them exactly;
edits that do not fit are refused in one line, before anything is written."""

from __future__ import annotations

import numpy as np
import pytest
from pretrained_edit_refs import SENTENCE, build_decoder

from main import main
from models.config import InputError
from models.engine.edits import Edit, hide_key
from models.files.export import read_trace_files
from models.files.session import Session, load_session, save_session
from models.pretrained import list_models, load_model
from models.runspec import RunSpec

EDITS = (Edit("q", (1, 2, 3), 5.0), Edit("scores", (0, 4, 1), 7.0), hide_key(5, 0))


@pytest.fixture(scope="module")
def llama(tmp_path_factory):
    folder = tmp_path_factory.mktemp("llama")
    build_decoder(folder)
    return folder


@pytest.mark.parametrize("which", ["llama", "minilm"])
def test_export_session_reproduces_the_edits_of_a_model_run(tmp_path, llama, which):
    name = str(llama) if which == "llama" else "minilm"
    if which == "minilm" and not any(e.name == "minilm" for e in list_models()):
        pytest.skip("minilm is not installed")
    run = RunSpec(model=name, sentence=SENTENCE, layer=1)
    path = save_session(tmp_path / "s.zip", Session(run.with_edits(EDITS), stage="weights"))
    back = load_session(path)
    assert back.run.edits == EDITS
    expected = load_model(name, device="cpu").trace(SENTENCE, 1, edits=EDITS)
    assert main(["export", "--session", str(path), "--out", str(tmp_path / "out")]) == 0
    _, arrays = read_trace_files(tmp_path / "out")
    assert set(expected.names) <= set(arrays)
    for stage in expected.names:
        np.testing.assert_array_equal(arrays[stage], expected[stage].array, err_msg=stage)
    assert arrays["q"][1, 2, 3] == 5.0 and (arrays["weights"][:, 5, 0] == 0).all()
    unedited = load_model(name, device="cpu").trace(SENTENCE, 1)
    assert not np.array_equal(arrays["weights"], unedited["weights"].array)


def test_an_edit_outside_the_layer_is_refused_by_export_session_in_one_line(tmp_path, llama, capsys):
    run = RunSpec(model=str(llama), sentence=SENTENCE, layer=1)
    path = save_session(tmp_path / "s.zip", Session(run.with_edits((Edit("k", (2, 0, 0), 1.0),))))  # 2 kv heads
    assert main(["export", "--session", str(path), "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    assert err.strip() == "error: edit of k: cell [2, 0, 0] is outside its shape [2, 13, 8]"
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (Edit("embeddings", (0, 0), 1.0), "cannot edit stage 'embeddings' of a model's layer"),
        (Edit("q", (0, 0), 1.0), "edit of q: cell [0, 0] must be 3 indices ≥ 0"),
        (Edit("mask", (-1, 0), 1.0), "edit of mask: cell [-1, 0] must be 2 indices ≥ 0"),
    ],
)
def test_a_malformed_model_edit_is_refused_when_the_session_is_read(tmp_path, llama, edit, message):
    run = RunSpec(model=str(llama), sentence=SENTENCE)
    path = save_session(tmp_path / "s.zip", Session(run.with_edits((edit,))))
    with pytest.raises(InputError) as info:
        load_session(path)
    assert message in str(info.value) and "\n" not in str(info.value)
