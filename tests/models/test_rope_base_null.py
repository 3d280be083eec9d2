"""A rope base given as null (``"rope_theta": null``) is refused, as transformers refuses the config
(issue 50, item 11): before, it was taken for the default 10,000 and the model traced.

Every family the registry names (tests/models/zoo.py): each rope base its config.json holds (top
level, ``rope_parameters``, per layer type, ``rotary_emb_base``) set to null; transformers' own
loading is the reference: where it refuses, ``export`` refuses in one line naming the null; where it
loads (no rotary positions), ``export`` runs."""

from __future__ import annotations

import json

import pytest
from zoo import ZOO, build, first_case_of_each_family

from main import main
from models.pretrained.loader import family_kind

transformers = pytest.importorskip("transformers")

BASES = ("rope_theta", "rotary_emb_base", "global_rope_theta", "local_rope_theta", "rope_local_base_freq")


def nulled(cfg) -> int:
    """Set every rope base in ``cfg`` (nested mappings too) to null; how many were set."""
    count = 0
    for key, value in list(cfg.items()):
        if key in BASES and value is not None:
            cfg[key], count = None, count + 1
        elif isinstance(value, dict):
            count += nulled(value)
    return count


def transformers_refuses(folder, kind) -> bool:
    auto = transformers.AutoModelForSeq2SeqLM if kind == "encoder-decoder" else transformers.AutoModel
    try:
        auto.from_pretrained(folder, attn_implementation="eager")
    except (TypeError, ValueError) as exc:  # 1 / (None ** ...) in its rotary embedding's init
        return "NoneType" in str(exc) or "None" in str(exc)
    return False


@pytest.mark.parametrize("case", first_case_of_each_family())
def test_a_null_rope_base_is_refused_where_transformers_refuses_it(tmp_path, capsys, case):
    folder = tmp_path / case
    folder.mkdir()
    build(folder, case)
    cfg = json.loads((folder / "config.json").read_text())
    count = nulled(cfg)
    (folder / "config.json").write_text(json.dumps(cfg))
    kind = family_kind(ZOO[case][0])
    refused = transformers_refuses(folder, kind)
    assert refused == (count > 0)  # transformers refuses exactly the configs that had a rope base
    argv = ["export", "--model", folder, "--sentence", "the cat sat", "--device", "cpu", "--out", tmp_path / "out"]
    if kind == "encoder-decoder":
        argv += ["--cross-sentence", "a dog"]
    capsys.readouterr()  # what building the model printed
    code = main([str(a) for a in argv])
    err = capsys.readouterr().err
    if refused:
        assert code == 2 and err.count("\n") == 1 and err.startswith("error: config.json: ") and "is null" in err, err
        assert not (tmp_path / "out").exists()
    else:
        assert code == 0, err
