"""The short fuzzing profile: generated plans keep their answers when optimized (on Spark).

The long profile is ``make fuzz`` (``python -m testing.fuzz --long``), which also saves the
shrunk failing cases under ``tests/regressions``. A failure here is shrunk by Hypothesis too: the
minimal case is written to ``.cache/fuzz-failures/last-failure.json``; move it to ``tests/regressions/``.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings

from testing.strategies import cases

EXAMPLES = int(os.environ.get("SUBSTRAIT_OPT_FUZZ_EXAMPLES", "30"))
FAILURES = Path(__file__).resolve().parent.parent / ".cache" / "fuzz-failures"


@pytest.fixture(scope="module")
def fuzzer(spark, tmp_path_factory):
    from testing.fuzz import Fuzzer

    return Fuzzer(spark, workdir=tmp_path_factory.mktemp("fuzz"), progress=False)


@pytest.mark.spark
@settings(max_examples=EXAMPLES, deadline=None, database=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.function_scoped_fixture])
@given(case=cases(max_depth=2, max_relations=5, max_rows=6))
def test_optimized_plans_give_the_same_answers(fuzzer, case):
    result = fuzzer.check(case)
    if result.failed:  # Hypothesis calls the minimal failing case last: it is the one left in the file
        FAILURES.mkdir(parents=True, exist_ok=True)
        path = FAILURES / "last-failure.json"
        path.write_text(case.dumps(), encoding="utf-8")
        raise AssertionError(f"{result} (rules fired: {', '.join(result.rules_fired)}); case saved in {path}")
