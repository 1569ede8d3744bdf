"""Replays every saved differential-testing case (``tests/regressions/*.json``) forever.

The fuzzer (``python -m testing.fuzz``) saves each minimal failing case it finds here; a
case is a self-contained test (tables as JSON rows, the plan, the statistics, profile and
configuration the optimizer was given). Each must now give the same answer optimized as not. A case
with an ``"xfail"`` key documents a known bug that is not fixed yet (expected to fail, non-strict).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from optimizer.difftest import DiffCase

REGRESSIONS = sorted((Path(__file__).parent / "regressions").glob("*.json"))


def test_regression_cases_load():
    assert REGRESSIONS, "tests/regressions holds no case"
    for path in REGRESSIONS:
        case = DiffCase.load(path)
        assert case.database.tables and case.plan.relations, path.name


@pytest.mark.spark
@pytest.mark.parametrize("path", REGRESSIONS, ids=[p.stem for p in REGRESSIONS])
def test_regression(path, spark, tmp_path, request):
    from optimizer.spark import SparkBackend

    case = DiffCase.load(path)
    if case.xfail:
        request.applymarker(pytest.mark.xfail(reason=case.xfail, strict=False))
    result = case.run(lambda tables: SparkBackend(spark, tables=tables), tmp_path)
    assert not result.failed, f"{path.name}: {result} (rules fired: {', '.join(result.rules_fired)})"
