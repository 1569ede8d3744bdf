"""Acceptance of the optimizer on real plans: the optimized plan is valid and gives the original's answer.

Every TPC-H plan -- DataFusion's 22 and DuckDB 1.1.3's 15 (both produced live), Isthmus' 21 (corpus) --
and every plan of the consumer-testing corpus that reads TPC-H tables or ``t`` is optimized with the
usual statistics (plan hints, Spark ``ANALYZE`` of the SF 0.01 tables, Parquet footers), and then:

* the optimized plan passes :func:`optimizer.schema.check.check_plan` and comes back from binary protobuf
  as the same plan;
* run on Spark with ``best_effort_filter`` ignored (a consumer may), it gives the original plan's answer
  (:func:`optimizer.difftest.compare`: multiset equality, floats to 1e-9, order where the root is sorted);
* by the optimizer's own cost model and the same statistics, it is never estimated costlier than the
  plan that went in.

A plan the backend cannot run as given (the one-line UnsupportedError) is counted, not failed: there is
no answer to compare. A plan the specification rejects (the producer bugs of
``tests/test_backend_acceptance.py`` that are PlanErrors) is skipped the same way. The original and the
optimized plan of a few plans at a time run from worker threads (most of a tiny query's time is
planning on the driver). Each plan runs once in the test session (``tests/plan_answers.py``): an original
the acceptance tests ran is not run again, and an optimized plan that differs from its original only in
the estimates it gained (``hint``, which the backend does not read) is the same query.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import pytest
from plan_answers import MemoBackend, PlanAnswers
from substrait.proto import Plan
from test_backend_acceptance import CORPUS, PRODUCER_BUGS, _data_set

from optimizer.difftest import compare
from optimizer.difftest.harness import DIFFERENT, EQUAL, ERROR, SKIPPED, ignoring_best_effort
from optimizer.driver import COST_TOLERANCE, estimated_cost
from optimizer.errors import PlanError
from optimizer.plan_io import dump_plan, load_plan
from optimizer.schema.check import check_plan
from workloads.producers import DUCKDB_TPCH_PRODUCIBLE, duckdb_plan
from workloads.tpch import table_paths, tpch_query

pytestmark = pytest.mark.spark

WORKERS = 3


@dataclass
class Verdict:
    status: str  # equal | skipped | failed
    message: str = ""
    rules: tuple[str, ...] = ()
    seconds: float = 0.0


class OptimizedRuns:
    """One backend and one statistics stack per data set (the SF 0.01 tables, the SF 0.0001 ``_small`` ones)."""

    def __init__(self, spark, tpch_dir: Path, small_dir: Path, answers: PlanAnswers) -> None:
        from optimizer.spark import SparkBackend
        from optimizer.spark.statistics import default_statistics

        self.answers = answers
        self.backends, self.statistics = {}, {}
        for data, folder, with_spark in (("full", tpch_dir, True), ("small", small_dir, False)):
            paths = table_paths(folder)
            frames = {name: spark.read.parquet(str(path)) for name, path in paths.items()}
            # as in test_backend_acceptance.py: corpus tests that declare int over our bigint files
            self.backends[data] = SparkBackend(spark, tables=frames, allow_lossy_casts=True)
            stats = default_statistics(spark=spark if with_spark else None, tables=paths)
            for name in paths:  # ANALYZE (or its cache) now, not from several threads at once
                stats.table(name)
            self.statistics[data] = stats

    def judge(self, key: str, plan: Callable[[], Plan | bytes], data: str = "full") -> Verdict:
        start = time.perf_counter()
        try:
            original = plan()
            # Through the session's answers: the original as the acceptance tests ran it, and an optimized
            # plan that differs from it only in its estimates is not run again.
            backend = self.backends[data]
            result = compare(original, backend=MemoBackend(self.answers, backend, data),
                             optimized_backend=MemoBackend(self.answers, ignoring_best_effort(backend), data),
                             statistics=self.statistics[data])
        except Exception as exc:  # compare never raises; loading the plan may
            return Verdict("failed", f"{type(exc).__name__}: {exc}")
        rules = tuple(dict.fromkeys(result.rules_fired))
        seconds = time.perf_counter() - start
        if result.status == SKIPPED:
            return Verdict("skipped", f"original unsupported: {result.reason}", rules, seconds)
        if result.status == ERROR and result.stage == "original" and isinstance(result.error, PlanError):
            bug = PRODUCER_BUGS.get(key)
            if bug is not None and bug.plan_error:
                return Verdict("skipped", f"producer bug: {bug.reason}", rules, seconds)
        if result.status in (ERROR, DIFFERENT):
            return Verdict("failed", result.verdict(), rules, seconds)
        assert result.status == EQUAL
        optimized = result.optimized_plan
        problems = check_plan(optimized)
        if problems:
            return Verdict("failed", f"check_plan: {problems[0]}", rules, seconds)
        if load_plan(dump_plan(optimized, "binpb")) != optimized:
            return Verdict("failed", "the optimized plan does not survive binary protobuf", rules, seconds)
        # Never costlier: by the optimizer's own model, the plan it returns costs at most what it was given.
        before = estimated_cost(original, statistics=self.statistics[data])
        after = estimated_cost(optimized, statistics=self.statistics[data])
        if after > before * (1 + COST_TOLERANCE):
            return Verdict("failed", f"estimated costlier after optimizing: {after:.4g} > {before:.4g}", rules, seconds)
        return Verdict("equal", "", rules, seconds)


TPCH_KEYS = (
    [f"datafusion-tpch/q{q:02d}" for q in range(1, 23)]
    + [f"duckdb-tpch/q{q:02d}" for q in DUCKDB_TPCH_PRODUCIBLE]
    + [p.id for p in CORPUS if p.producer == "isthmus" and p.tpch_query is not None]
)
CORPUS_KEYS = [p.id for p in CORPUS if not (p.producer == "isthmus" and p.tpch_query is not None)]
CORPUS_BY_ID = {p.id: p for p in CORPUS}


def _duckdb_plan(usable: dict[int, bytes], q: int, tpch_dir: Path) -> bytes:
    """DuckDB's plan of TPC-H ``q``; Q13 is produced though it is not in the usable set (DuckDB writes its
    NOT LIKE as ``<>``: the original and the optimized plan must still agree on what it says)."""
    return usable[q] if q in usable else duckdb_plan(tpch_query(q), table_paths(tpch_dir))


@pytest.fixture(scope="module")
def verdicts(request, spark, tpch_dir, tpch_small_dir, plan_answers) -> dict[str, Verdict]:
    """The verdict of every plan this module's selected tests need, computed on :data:`WORKERS` threads."""
    wanted: set[str] = set()
    for item in request.session.items:
        if getattr(item, "module", None) is not request.module:
            continue
        callspec = getattr(item, "callspec", None)
        if callspec is not None and "key" in callspec.params:
            wanted.add(callspec.params["key"])
        elif item.originalname == "test_tally":
            wanted.update(TPCH_KEYS + CORPUS_KEYS)
    runs = OptimizedRuns(spark, tpch_dir, tpch_small_dir, plan_answers)
    jobs: dict[str, Callable[[], Verdict]] = {}
    datafusion = duckdb = None
    for key in sorted(wanted):
        if key.startswith("datafusion-tpch/"):
            if datafusion is None:
                datafusion = request.getfixturevalue("datafusion_tpch_plans")
            jobs[key] = lambda k=key, d=datafusion: runs.judge(k, lambda: d[int(k[-2:])])
        elif key.startswith("duckdb-tpch/"):
            if duckdb is None:
                duckdb = request.getfixturevalue("duckdb_tpch_plans")
            jobs[key] = lambda k=key, d=duckdb: runs.judge(k, lambda: _duckdb_plan(d, int(k[-2:]), tpch_dir))
        else:
            plan = CORPUS_BY_ID[key]
            jobs[key] = lambda k=key, p=plan: runs.judge(k, lambda: p.path.read_bytes(), _data_set(p))
    start = time.perf_counter()
    with ThreadPoolExecutor(max_workers=WORKERS) as pool:
        results = dict(zip(jobs, pool.map(lambda k: jobs[k](), jobs), strict=True))
    results["_wall"] = Verdict("timing", seconds=time.perf_counter() - start)
    return results


def _assert_verdict(key: str, verdict: Verdict) -> None:
    if verdict.status == "skipped":
        pytest.skip(verdict.message)
    assert verdict.status == "equal", f"{key}: {verdict.message}"


@pytest.mark.parametrize("key", TPCH_KEYS)
def test_optimized_tpch_plan_gives_the_original_answer(verdicts, key):
    """A TPC-H plan of DataFusion, DuckDB or Isthmus: valid after optimizing, and the same answer."""
    verdict = verdicts[key]
    assert verdict.status == "equal", f"{key}: {verdict.message}"  # every TPC-H plan runs: no skipping


@pytest.mark.parametrize("key", CORPUS_KEYS)
def test_optimized_corpus_plan_gives_the_original_answer(verdicts, key):
    _assert_verdict(key, verdicts[key])


def test_tally(verdicts, plan_answers, capsys):
    """Prints how many plans were compared and which rules fired; no plan may fail."""
    done = {k: v for k, v in verdicts.items() if not k.startswith("_")}
    tally = Counter(v.status for v in done.values())
    fired = Counter(r for v in done.values() if v.status == "equal" for r in v.rules)
    with capsys.disabled():
        print(f"\noptimized plans: {len(done)}: {tally['equal']} equal to the original, {tally['skipped']} skipped "
              f"(original unsupported or invalid), {tally['failed']} failed "
              f"in {verdicts['_wall'].seconds:.1f}s on {WORKERS} threads; the session's plans so far: "
              f"{plan_answers.runs} run on Spark, {plan_answers.hits} answers reused")
        print("  rules fired (plans): " + ", ".join(f"{r} {n}" for r, n in fired.most_common()))
    failed = {k: v.message for k, v in done.items() if v.status == "failed"}
    assert not failed, failed
    assert tally["equal"] >= 0.9 * len(done)
