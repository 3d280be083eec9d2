"""Sessions and ``.npy`` files checked from their headers (issue 50, point 2): shapes, widths and the
memory they need are refused from the zip's and the ``.npy``'s headers before their data is read, on
every path (``--embeddings``, a session's members). The data read is counted (the readers wrapped),
not timed."""

from __future__ import annotations

import io
import json
import zipfile

import numpy as np
import pytest
from numpy.lib import format as npformat

import models.io
import models.io.zips
from models.cli.export import export_main
from models.config import InputError
from models.engine.held_arrays import HeldArrays
from models.files.session import Session, load_session, save_session
from models.runspec import RunSpec


@pytest.fixture
def data_read(monkeypatch):
    """The bytes every ``.npy`` reader takes from its stream (a file's, a zip member's), in a list."""
    counted = [0]

    class Counting:
        def __init__(self, f) -> None:
            self._f = f

        def read(self, n=-1):
            data = self._f.read(n)
            counted[0] += len(data)
            return data

        def readinto(self, buffer):
            n = self._f.readinto(buffer) or 0
            counted[0] += n
            return n

        def __getattr__(self, name):
            return getattr(self._f, name)

    for module in (models.io, models.io.zips):
        real = module.read_array
        monkeypatch.setattr(module, "read_array", lambda f, *a, real=real, **k: real(Counting(f), *a, **k))
    return counted


def npy_header(shape, dtype="<f4") -> bytes:
    buf = io.BytesIO()
    npformat.write_array_header_1_0(buf, {"descr": dtype, "fortran_order": False, "shape": shape})
    return buf.getvalue()


def session_with(tmp_path, member: bytes, **options):
    """A saved session whose ``run/embeddings.npy`` member is replaced by ``member`` (``options``: the run's)."""
    run = RunSpec(arrays=HeldArrays({"embeddings": np.zeros((3, 16), np.float32)}))
    path = save_session(tmp_path / "s.zip", Session(run))
    with zipfile.ZipFile(path) as zf:
        members = {n: zf.read(n) for n in zf.namelist()}
    doc = json.loads(members["session.json"])
    doc["run"]["options"].update(options)
    members["session.json"] = json.dumps(doc).encode()
    members["run/embeddings.npy"] = member
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as zf:
        for name, data in members.items():
            zf.writestr(name, data)
    return path


def test_a_session_whose_embeddings_are_too_wide_is_refused_from_the_header(tmp_path, data_read):
    # 32 MiB of zeros, a few kB compressed, 1,048,576 columns against the default d_model of 16
    member = io.BytesIO()
    np.save(member, np.zeros((8, 1 << 20), np.float32))
    path = session_with(tmp_path, member.getvalue())
    with pytest.raises(InputError, match=r"embeddings has 1048576 columns but d_model is 16 \(member run/embeddings"):
        load_session(path)
    assert data_read[0] < 4096  # the header only (before: the 32 MiB of data, then refused)


def test_a_session_whose_honest_embeddings_do_not_fit_says_d_model_is_what_is_large(tmp_path, data_read):
    # declared 1,024 × 8,388,608 floats (32 GiB; the member holds its header alone): the width is the run's own
    path = session_with(tmp_path, npy_header((1024, 1 << 23)), d_model=1 << 23)
    wanted = (r"member run/embeddings.npy \(shape \(1024, 8388608\)\) needs about .* of memory but only .* is "
              r"available; its rows are 8,388,608 wide \(d_model\): use a smaller d_model")
    with pytest.raises(InputError, match=wanted):
        load_session(path)
    assert data_read[0] < 4096


def test_export_of_a_wide_embeddings_file_is_refused_from_its_header(tmp_path, capsys, data_read):
    path = tmp_path / "wide.npy"
    header = npy_header((64, 1 << 23))
    with open(path, "wb") as f:  # 2 GiB of float32 that the disk holds as a hole
        f.write(header)
        f.truncate(len(header) + 64 * (1 << 23) * 4)
    assert export_main(["--embeddings", str(path), "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [f"error: embeddings has 8388608 columns but d_model is 16 (file {path})"]
    assert data_read[0] < 4096  # before: read whole (2 GiB) first
    assert not (tmp_path / "out").exists()
