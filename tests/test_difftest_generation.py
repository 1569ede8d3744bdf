"""What the fuzzer generates, without running anything on Spark: deterministic seeds, the plan shapes
that find bugs, data that gives answers, shared subtrees that are read; and that every mutant of the
mutation harness still applies to the code. (About 20 s: plan generation only.)"""

from __future__ import annotations

from collections import Counter

import pytest
from google.protobuf import json_format
from hypothesis import HealthCheck, Phase, given, seed, settings

from optimizer.difftest.harness import DiffResult
from testing.fuzz import Fuzzer, _OutOfTime
from testing.mutate import MUTANTS, Mutant, MutantError, check_all
from testing.strategies import _references, cases


class _Recorder(Fuzzer):
    """The campaign's generation with each case recorded instead of run (a generation test only)."""

    def __init__(self) -> None:
        super().__init__(None, progress=False)
        self.seen: list[str] = []

    def check(self, case) -> DiffResult:
        self.seen.append(case.fingerprint())
        return DiffResult("equal", original_rows=1, rules_fired=["push_filters"])


def _campaign(plans: int, seed_: int) -> list[str]:
    fuzzer = _Recorder()
    report = fuzzer.run(plans, 5.0, seed_)
    assert report.plans == plans == len(fuzzer.seen)
    return fuzzer.seen


def test_a_seed_gives_the_same_first_plans_whatever_the_plan_count():
    short, long_ = _campaign(6, 11), _campaign(15, 11)
    assert long_[:6] == short
    assert len(set(long_)) == len(long_)  # every plan of a campaign is distinct
    assert _campaign(6, 12) != short


def _generated(n: int, seed_: int = 5) -> list:
    out = []

    @settings(max_examples=n, database=None, deadline=None, suppress_health_check=list(HealthCheck),
              phases=[Phase.generate])
    @seed(seed_)
    @given(cases(max_depth=3, max_relations=6))
    def collect(case):
        out.append(case)

    collect()
    return out


@pytest.fixture(scope="module")
def generated():
    return _generated(80, 5) + _generated(80, 6)


SHAPES = {
    "fetch with an offset": '"offsetExpr"',
    "full outer join": "JOIN_TYPE_OUTER",
    "left anti join": "JOIN_TYPE_LEFT_ANTI",
    "right anti join": "JOIN_TYPE_RIGHT_ANTI",
    "right single join": "JOIN_TYPE_RIGHT_SINGLE",
    "MINUS_PRIMARY_ALL": "SET_OP_MINUS_PRIMARY_ALL",
    "INTERSECTION_MULTISET_ALL": "SET_OP_INTERSECTION_MULTISET_ALL",
    "ROWS frame": "BOUNDS_TYPE_ROWS",
    "window function": '"windowFunction"',
    "correlated subquery": '"outerReference"',
}
FUNCTIONS = ("lead", "lag", "is_not_distinct_from")


class _AllFound(_OutOfTime):
    """Every shape was seen: the campaign stops there."""


class _ShapeRecorder(_Recorder):
    def __init__(self) -> None:
        super().__init__()
        self.found: Counter = Counter()

    def check(self, case) -> DiffResult:
        text = json_format.MessageToJson(case.plan)
        self.found.update(name for name, needle in SHAPES.items() if needle in text)
        names = {e.extension_function.name for e in case.plan.extensions}
        self.found.update(n for n in FUNCTIONS if n in names)
        if all(self.found[n] for n in [*SHAPES, *FUNCTIONS]):
            raise _AllFound
        return super().check(case)


def test_the_shapes_that_find_bugs_are_generated():
    """Each shape appears within the first 600 plans of a campaign (seed 5: three Hypothesis runs of 200,
    as the fuzzer makes them). One run's plans are far from independent draws -- Hypothesis builds many
    examples by changing earlier ones -- so a run of 200 may draw only a few distinct set operations:
    a single run is not enough to see each of eight."""
    recorder = _ShapeRecorder()
    recorder.run(600, 5.0, 5)
    missing = [n for n in [*SHAPES, *FUNCTIONS] if not recorder.found[n]]
    assert not missing, f"not generated in {len(recorder.seen)} plans: {missing}"


def test_generated_data_gives_answers(generated):
    roots = Counter(c.plan.relations[-1].root.input.WhichOneof("rel_type") for c in generated)
    assert not roots["read"], "a plan that only reads a table fires no rule"
    tables = [t for c in generated for t in c.database.tables.values()]
    assert sum(1 for t in tables if t.rows) >= 0.9 * len(tables)
    for case in generated:
        for rel in _virtual_tables(case.plan):
            assert rel.read.virtual_table.expressions, "an empty virtual table"


def _virtual_tables(plan):
    stack = list(plan.relations)
    while stack:
        m = stack.pop()
        if m.DESCRIPTOR.name == "Rel" and m.WhichOneof("rel_type") == "read" and m.read.HasField("virtual_table"):
            yield m
        for fd, value in m.ListFields():
            if fd.message_type is not None:
                stack.extend(value if fd.label == fd.LABEL_REPEATED else [value])


def test_every_shared_subtree_is_read(generated):
    with_shared = 0
    for case in generated:
        plan = case.plan
        roots = {i for i, r in enumerate(plan.relations) if r.WhichOneof("rel_type") == "root"}
        shared = set(range(len(plan.relations))) - roots
        with_shared += bool(shared)
        assert {r.subtree_ordinal for rel in plan.relations for r in _references(rel)} == shared
    assert with_shared  # the property is not vacuous


def test_every_mutant_applies_and_a_stale_one_fails_loudly():
    check_all()
    assert len(MUTANTS) >= 12
    stale = Mutant("stale", "rules/push_filters.py", "no such text\n", "x\n", "nothing")
    with pytest.raises(MutantError, match="mutant stale"):
        check_all([stale])


def test_answer_cache_keys_on_plan_data_and_best_effort_mode(tmp_path):
    import pyarrow as pa
    from substrait.proto import Plan

    from testing.fuzz import AnswerCache

    cache = AnswerCache(tmp_path)
    plan, other = Plan(), Plan()
    other.version.minor_number = 1
    path = cache.key(plan, "data", False)
    assert len({path, cache.key(other, "data", False), cache.key(plan, "more", False), cache.key(plan, "data", True)}) == 4
    assert cache.get(path) is None
    table = pa.table({"a": [1, None, 3]})
    cache.put(path, table)
    assert cache.get(path).equals(table) and cache.hits == 1
