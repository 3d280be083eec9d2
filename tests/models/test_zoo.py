"""The one zoo table (tests/models/zoo.py) against the registry: every family the registry names has
at least one row, no row names a family the registry does not know, every row's recipe builds it,
and each family test's own table is a view of the zoo (nothing listed beside it)."""

from __future__ import annotations

import importlib

import pytest
from zoo import RECIPES, ZOO, first_case_of_each_family, missing_types, table

from models.pretrained.loader import family_kind
from models.pretrained.registry import SUPPORTED_TYPES


def test_every_registry_family_has_a_row_and_every_row_a_registry_family():
    families = {case.family for case in ZOO.values()}
    assert families == set(SUPPORTED_TYPES), (set(SUPPORTED_TYPES) - families, families - set(SUPPORTED_TYPES))
    assert missing_types() == set()
    assert [ZOO[name].family for name in first_case_of_each_family()] == list(SUPPORTED_TYPES)


def test_a_family_missing_from_the_zoo_or_unknown_to_the_registry_is_caught(monkeypatch):
    import zoo

    family = ZOO[first_case_of_each_family()[0]].family
    monkeypatch.setattr(zoo, "ZOO", {n: c for n, c in ZOO.items() if c.family != family})
    assert zoo.missing_types() == {family}
    assert family not in {zoo.ZOO[name].family for name in zoo.first_case_of_each_family()}


def test_every_row_names_a_recipe_and_its_kind_fits_the_recipe():
    for name, case in ZOO.items():
        assert case.recipe in RECIPES and name.startswith(RECIPES[case.recipe]), name
        kind = family_kind(case.family)
        if case.recipe == "generate_refs":  # causal LMs with their heads
            assert kind == "decoder", name
        assert (case.recipe == "encdec_refs") == (kind == "encoder-decoder"), name


@pytest.mark.parametrize("recipe", [r for r in RECIPES if r != "bert"])
def test_each_family_test_table_is_a_view_of_the_zoo(recipe):
    """A family test's table (``FAMILIES``, ``NEWER``) holds exactly the zoo's rows of its recipe: the
    same objects, nothing added beside the zoo."""
    module = importlib.import_module(recipe)
    own = getattr(module, "NEWER", None) or module.FAMILIES
    assert own == table(recipe)
    assert all(own[short] is ZOO[RECIPES[recipe] + short] for short in own)
    assert sum(len(table(r)) for r in RECIPES) == len(ZOO)
