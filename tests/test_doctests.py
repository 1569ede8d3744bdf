"""The doctests of ``optimizer.rules`` and ``optimizer.cost`` (the repository's ``rules/`` and ``cost/``),
run under their installed names. pytest's ``--doctest-modules`` would import ``rules/*.py`` a second time as
a top-level ``rules`` package, whose classes are not the installed package's."""

from __future__ import annotations

import doctest
import importlib
import pkgutil

import optimizer.cost
import optimizer.rules
import pytest


def _examples() -> list[str]:
    """Every docstring with examples in the two packages, as ``module::object`` ids."""
    out = []
    for package in (optimizer.rules, optimizer.cost):
        names = [package.__name__] + [m.name for m in pkgutil.walk_packages(package.__path__, package.__name__ + ".")]
        for name in names:
            module = importlib.import_module(name)
            out += [f"{name}::{t.name}" for t in doctest.DocTestFinder().find(module) if t.examples]
    return sorted(out)


EXAMPLES = _examples()


def test_the_packages_have_doctests():
    # the rules' before/after examples (docs/rules.md) live in their docstrings
    assert len(EXAMPLES) >= 30, EXAMPLES


@pytest.mark.parametrize("test_id", EXAMPLES)
def test_doctest(test_id):
    module_name, _, qualified = test_id.partition("::")
    module = importlib.import_module(module_name)
    (test,) = [t for t in doctest.DocTestFinder().find(module) if t.name == qualified]
    runner = doctest.DocTestRunner(verbose=False)
    out: list[str] = []
    result = runner.run(test, out=out.append)
    assert result.failed == 0, "".join(out)
