"""RunSpec is a dataclass written out field by field (editors and type checkers see its fields), and
equal to the option table: a field per stored row of ``FIELDS``, in table order, with the row's name,
type and default (issue 46, "One request schema"). A new row makes this test fail until its field is
written (``python -m models.runspec`` prints the lines)."""

from __future__ import annotations

import dataclasses
import inspect
import typing

from models.engine.edits import Edit
from models.engine.held_arrays import HeldArrays
from models.fields import FIELDS
from models.runspec import RunSpec, written_fields

BESIDE = ("arrays", "edits", "difference", "exact", "origins")  # what a RunSpec holds beside the rows


def test_runspec_is_written_out_with_a_field_per_stored_row_same_name_type_default():
    rows = [f for f in FIELDS if f.stored and f.array is None]
    written = [f for f in dataclasses.fields(RunSpec) if f.name not in BESIDE]
    assert [f.name for f in written] == [r.dest for r in rows], f"write these fields:\n{written_fields()}"
    hints = typing.get_type_hints(RunSpec, localns={"Edit": Edit, "HeldArrays": HeldArrays})
    for row, f in zip(rows, written, strict=True):
        assert hints[f.name] == row.annotation, row.dest
        assert f.default == row.default and type(f.default) is type(row.default), row.dest
    assert [f.name for f in dataclasses.fields(RunSpec)][len(rows):] == list(BESIDE)
    # Written in the class's source (not made at import from the table), which an editor reads.
    source = inspect.getsource(RunSpec)
    assert all(f"    {r.dest}: " in source for r in rows)
    assert written_fields() in source


def test_with_the_shipped_table_runspec_is_the_written_class_and_compares_by_value():
    """Only a row added at run time (tests/explorer/test_new_row_everywhere.py) makes a subclass with
    its field; the shipped table's RunSpec is the class as written."""
    spec = RunSpec(sentence="a b", heads=3)
    assert dataclasses.replace(spec, heads=4) != spec and RunSpec(sentence="a b", heads=3) == spec
    assert RunSpec.__module__ == "models.runspec" and RunSpec.__mro__[1] is object  # the written class itself
