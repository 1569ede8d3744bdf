"""Estimates that learn from execution (``--learn``, :mod:`optimizer.cost.learned`): the actual rows that
``explain --analyze`` and ``run`` count on Spark are recorded in the statistics cache, and a later estimate
of the same subtree (in the same plan or another) is those rows; a changed table forgets them, a corrupt
store is ignored, the learned rows never leave a plan the model prices above the plan optimized without
them, and nothing is written without ``--learn``."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest
from optimizer.cost.cardinality import CardinalityEstimator
from optimizer.cost.learned import FILE_NAME, LearnedRows, LearnedStatistics

from optimizer.cli import main
from optimizer.dag import to_dag
from optimizer.driver import Optimizer, _without_row_hints, estimated_cost
from optimizer.explain.estimates import prepared_dag, subtree_plan, tree_order
from optimizer.plan_io import load_plan
from optimizer.spark.statistics import default_statistics
from workloads.corpus import corpus_root

TPCH = corpus_root() / "substrait_consumer/snapshots/producer/integration/tpch"
Q3 = TPCH / "q03-duckdb_plan.json"  # three tables, two joins: 13 relations
Q6 = TPCH / "q06-duckdb_plan.json"

pytestmark = pytest.mark.spark


def _tables(tpch_dir: Path, into: Path) -> Path:
    """A copy of the TPC-H tables a test may touch (never the session's shared ones)."""
    into.mkdir(parents=True)
    for name in ("customer", "orders", "lineitem"):
        shutil.copy2(Path(tpch_dir) / f"{name}.parquet", into / f"{name}.parquet")
    return into


def _records(code_out: tuple[int, str, str]) -> list[dict]:
    code, out, err = code_out
    assert code == 0, err
    return json.loads(out)


def _explain(capsys, plan: Path, tables: Path, session_args: list[str], *extra: str) -> tuple[int, str, str]:
    code = main(["explain", str(plan), "--tables", str(tables), "--no-spark-stats", "--format", "json",
                 *extra, *session_args])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


@pytest.fixture(scope="module")
def learned_q3(spark, session_args, tpch_dir, tmp_path_factory):
    """Q3's actual rows learned by ``explain --analyze --learn`` over copied tables, in a cache of its own:
    ``(tables, cache, records of that run)``."""
    root = tmp_path_factory.mktemp("learned")
    tables = _tables(tpch_dir, root / "tables")
    cache = root / "cache"
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("XDG_CACHE_HOME", str(cache))
        code = main(["explain", str(Q3), "--tables", str(tables), "--no-spark-stats", "--format", "json",
                     "--analyze", "--learn", "-o", str(root / "analyzed.json"), *session_args])
    assert code == 0
    records = json.loads((root / "analyzed.json").read_text())
    return tables, cache, records


def _store_file(cache: Path) -> Path:
    return cache / "substrait-optimizer" / FILE_NAME


def test_learned_rows_are_recorded_and_estimated_as_they_ran(learned_q3, capsys, monkeypatch, session_args):
    tables, cache, analyzed = learned_q3
    assert _store_file(cache).exists()
    assert all(r["actual_rows"] is not None for r in analyzed)
    assert any(r["q_error"] > 1.2 for r in analyzed), "the plan's estimates were all right already: nothing to learn"
    monkeypatch.setenv("XDG_CACHE_HOME", str(cache))
    learned = _records(_explain(capsys, Q3, tables, session_args, "--learn"))
    assert [r["path"] for r in learned] == [r["path"] for r in analyzed]
    for before, after in zip(analyzed, learned, strict=True):
        assert after["estimated_rows"] == before["actual_rows"], after["path"]
    plain = _records(_explain(capsys, Q3, tables, session_args))  # without --learn: the estimates as before
    assert [r["estimated_rows"] for r in plain] == [r["estimated_rows"] for r in analyzed]


def test_a_subtree_repeated_in_another_plan_is_estimated_as_it_ran(learned_q3):
    from google.protobuf import json_format

    tables, cache, analyzed = learned_q3
    g = prepared_dag(load_plan(Q3))
    records = dict(zip(tree_order(g), analyzed, strict=True))
    # The join the plan's estimate missed most.
    join = max((n for n in g if g.nodes[n]["kind"] == "join"), key=lambda n: records[n]["q_error"])
    assert records[join]["q_error"] > 1.05
    # Another plan: that join alone, under a root of its own, its functions declared under other anchors
    # (a plan's numbering is its own; the functions are what count).
    doc = _shift_anchors(json.loads(json_format.MessageToJson(subtree_plan(g, join))), 100)
    other = load_plan(json.dumps(doc))
    store = LearnedRows(_store_file(cache), tables)
    sub = to_dag(other)
    root = sub.graph["roots"][0]["node"]
    estimated = CardinalityEstimator(sub, LearnedStatistics(default_statistics(tables=tables), store)).estimate(root)
    assert estimated.rows == records[join]["actual_rows"]
    plain = CardinalityEstimator(to_dag(other), default_statistics(tables=tables))
    assert plain.estimate(root).rows == records[join]["estimated_rows"]


def _shift_anchors(value, by: int):
    """Every function anchor and reference in a plan's JSON moved by ``by``."""
    if isinstance(value, dict):
        return {k: (v + by if k in ("functionAnchor", "functionReference") else _shift_anchors(v, by))
                for k, v in value.items()}
    if isinstance(value, list):
        return [_shift_anchors(v, by) for v in value]
    return value


def test_optimize_reads_the_learned_rows_and_is_never_priced_above_the_plain_plan(learned_q3):
    tables, cache, _ = learned_q3
    base = default_statistics(tables=tables)
    store = LearnedRows(cache / "substrait-optimizer" / FILE_NAME, tables)
    statistics = LearnedStatistics(base, store)
    plan = load_plan(Q3)
    with_learned = Optimizer(statistics).run(plan)
    assert store.hits > 0, "the optimizer never used a learned row count"
    assert "learned" in with_learned.timings  # both plans were made and priced
    without = Optimizer(base).run(plan)
    priced = [estimated_cost(_without_row_hints(r.plan), statistics=statistics) for r in (with_learned, without)]
    assert priced[0] <= priced[1]


def test_learned_rows_that_lead_the_search_astray_never_leave_a_dearer_plan(tpch_dir):
    """Learned rows for some subtrees and estimates for the others (here: rows far from the estimates,
    drawn at random for half the relations) can lead the optimizer to a plan that the model with those
    rows prices above the plan it finds without them; the driver keeps the cheaper of the two."""
    import random

    base = default_statistics(tables=tpch_dir)
    astray = 0
    for name in ("q03-duckdb_plan.json", "q08-duckdb_plan.json", "q10-isthmus_plan.json"):
        plan = load_plan(TPCH / name)
        g = prepared_dag(plan)
        without = Optimizer(base).run(plan)
        for seed in range(3):
            rnd = random.Random(seed)
            store = LearnedRows(None, tpch_dir)
            statistics = LearnedStatistics(base, store)
            store.record(g, {n: rnd.choice([1, 10, 1000, 10**6, 10**8]) for n in g if rnd.random() < 0.5})
            learned_only, _ = Optimizer(statistics)._run(plan)  # the search with the learned rows alone
            kept = Optimizer(statistics).run(plan)
            priced = [estimated_cost(_without_row_hints(p), statistics=statistics)
                      for p in (learned_only.plan, without.plan, kept.plan)]
            astray += priced[0] > priced[1]
            assert priced[2] <= priced[1], (name, seed)
    assert astray, "no draw led the search astray: the test shows nothing"


def test_a_changed_table_forgets_its_entries(learned_q3, tmp_path, tpch_dir):
    _, _, analyzed = learned_q3
    # Tables of this test's own, which it touches: the rows Spark counted for Q3 learned over them.
    moved = _tables(tpch_dir, tmp_path / "tables")
    store_path = tmp_path / FILE_NAME
    g = prepared_dag(load_plan(Q3))
    actual = dict(zip(tree_order(g), (r["actual_rows"] for r in analyzed), strict=True))
    store = LearnedRows(store_path, moved)
    assert store.record(g, actual) == len(actual)
    store.save()
    reads = {g.nodes[n]["rel"].read.named_table.names[-1].lower(): n for n in g if g.nodes[n]["kind"] == "read"}

    def estimates() -> dict[int, float]:
        statistics = LearnedStatistics(default_statistics(tables=moved), LearnedRows(store_path, moved))
        est = CardinalityEstimator(g, statistics)
        return {n: est.estimate(n).rows for n in g}

    # The files as they were learned: the entries hold.
    assert estimates()[reads["orders"]] == actual[reads["orders"]]
    st = os.stat(moved / "lineitem.parquet")
    os.utime(moved / "lineitem.parquet", ns=(st.st_atime_ns, st.st_mtime_ns + 10**9))  # touched, same size
    after = estimates()
    assert after[reads["orders"]] == actual[reads["orders"]]  # orders did not change
    plain = CardinalityEstimator(g, default_statistics(tables=moved))
    assert after[reads["lineitem"]] == plain.estimate(reads["lineitem"]).rows != actual[reads["lineitem"]]
    root = g.graph["roots"][0]["node"]
    assert after[root] == plain.estimate(root).rows  # the root reads lineitem: forgotten too
    # Recording again for the touched table drops its old entries from the file.
    store = LearnedRows(store_path, moved)
    store.record(g, {reads["customer"]: actual[reads["customer"]]})
    with (moved / "lineitem.parquet").open("ab") as f:
        f.write(b"\0")  # another size
    store.record(g, {reads["lineitem"]: 7})
    store.save()
    document = json.loads(store_path.read_text())
    lineitem = str(moved / "lineitem.parquet")
    holding = [e for e in document["entries"].values() if lineitem in e["tables"]]
    assert [e["rows"] for e in holding] == [7]


@pytest.mark.parametrize("content", [
    b"{not json", b"\xff\xfe", b"[]", b'{"version": 1, "kind": "learned-rows", "tables": [], "entries": {}}',
    b'{"version": 2, "kind": "learned-rows", "tables": {}, "entries": {}}',
    b'{"version": 1, "kind": "learned-rows", "tables": {"/x": 5}, "entries": {"k": {"rows": "many"}}}',
    b'{"version": 1, "kind": "learned-rows", "tables": {}, "entries": {"k": {"rows": 1e999, "tables": []}}}',
    b'{"version": 1, "kind": "learned-rows", "tables": {}, "entries": {"k": {"rows": 1' + b"0" * 5000 + b'}}}',
    b"[" * 100000,
])
def test_a_corrupt_store_reads_as_empty(content, tmp_path):
    path = tmp_path / FILE_NAME
    path.write_bytes(content)
    store = LearnedRows(path, {})
    assert store.document["entries"] == {}


def test_a_corrupt_store_is_ignored_without_a_traceback(learned_q3, tmp_path, capsys, monkeypatch, session_args):
    tables, _, analyzed = learned_q3
    cache = tmp_path / "cache"
    (cache / "substrait-optimizer").mkdir(parents=True)
    _store_file(cache).write_bytes(b'{"version": 1, "kind": "learned-rows", "tables": {"/x": 5}, "entries": [')
    monkeypatch.setenv("XDG_CACHE_HOME", str(cache))
    code, out, err = _explain(capsys, Q3, tables, session_args, "--learn")
    assert code == 0 and "Traceback" not in err
    assert [r["estimated_rows"] for r in json.loads(out)] == [r["estimated_rows"] for r in analyzed]
    code = main(["optimize", str(Q3), "--tables", str(tables), "--no-spark-stats", "--learn",
                 "-o", str(tmp_path / "q3.binpb")])
    assert code == 0 and "Traceback" not in capsys.readouterr().err
    # The next record writes a good file in its place.
    g = prepared_dag(load_plan(Q3))
    store = LearnedRows(_store_file(cache), tables)
    store.record(g, dict(zip(tree_order(g), (r["actual_rows"] for r in analyzed), strict=True)))
    store.save()
    assert len(LearnedRows(_store_file(cache), tables).document["entries"]) == len(analyzed)
    # A store that cannot be written is one line naming it, exit 2.
    _store_file(cache).unlink()
    _store_file(cache).mkdir()
    code = main(["explain", str(Q3), "--tables", str(tables), "--no-spark-stats", "--analyze", "--learn",
                 "--format", "json", "-o", str(tmp_path / "x.json"), *session_args])
    err = capsys.readouterr().err.strip()
    assert code == 2 and len(err.splitlines()) == 1 and FILE_NAME in err, err


def test_run_learn_records_and_nothing_is_written_without_it(spark, tpch_dir, tmp_path, capsys, monkeypatch,
                                                            session_args):
    tables = _tables(tpch_dir, tmp_path / "tables")
    cache = tmp_path / "cache"
    monkeypatch.setenv("XDG_CACHE_HOME", str(cache))
    assert main(["run", str(Q6), "--tables", str(tables), *session_args]) == 0
    assert _explain(capsys, Q6, tables, session_args, "--analyze")[0] == 0
    assert not _store_file(cache).exists()
    assert main(["run", str(Q6), "--tables", str(tables), "--learn", *session_args]) == 0
    out = capsys.readouterr().out
    assert "learned the rows of" in out
    assert _store_file(cache).exists()
    analyzed = _records(_explain(capsys, Q6, tables, session_args, "--analyze"))
    learned = _records(_explain(capsys, Q6, tables, session_args, "--learn"))
    assert [r["estimated_rows"] for r in learned] == [r["actual_rows"] for r in analyzed]
    assert [r["estimated_rows"] for r in analyzed] != [r["actual_rows"] for r in analyzed]


def test_learn_is_refused_where_it_cannot_record(tmp_path, capsys):
    assert main(["run", str(Q6), "--engine", "duckdb", "--learn"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "--learn" in err
    assert main(["explain", str(Q6), "--analyze", "--learn", "--format", "dot", "-o", str(tmp_path / "x.dot")]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "--learn" in err


def test_the_documented_store_file_reads_and_names_no_file_to_stat(tmp_path):
    """docs/statistics.md's example is a store as the code reads it; a table it names that is not under the
    given tables is never listed (its entries are unusable, not an error)."""
    import re

    docs = Path(__file__).resolve().parent.parent / "docs" / "statistics.md"
    (example,) = [b for b in re.findall(r"```json\n(.*?)```", docs.read_text(), re.S) if "learned-rows" in b]
    path = tmp_path / FILE_NAME
    path.write_text(example)
    store = LearnedRows(path, {"lineitem": str(tmp_path / "lineitem.parquet")})
    assert list(store.document["entries"].values()) == [
        {"rows": 59986.0, "tables": ["/data/tpch/lineitem.parquet"]}]
    assert store.rows(("<key>", frozenset())) is None  # /data/tpch is not a given table: not stat'ed, not used
    assert store._files == {}


def test_the_cardinality_benchmark_learns_in_two_passes(spark, tpch_dir, tmp_path):
    """``benchmarks/cardinality.py --learn`` at SF 0.01 on Q6: the second pass estimates every relation at the
    rows the first counted, read back from the store's file (a temporary one; the statistics are Spark's,
    cached as the other tests' are)."""
    from benchmarks import cardinality

    result = cardinality.main(["--scale", "0.01", "--queries", "6", "--learn", "--no-cache",
                               "--out", str(tmp_path)], spark=spark)
    first, second = result["first"], result["second"]
    assert result["hits"] == len(second) == len(first)
    assert all(r["q_error"] == 1.0 for r in second)
    assert [r["actual"] for r in second] == [r["actual"] for r in first]
    report = (tmp_path / "cardinality-learned.md").read_text()
    assert "| joins |" in report and f"{len(second)} of {len(second)} relations found a learned entry" in report


def test_a_plan_with_nothing_learned_is_optimized_once_as_without(tpch_dir):
    base = default_statistics(tables=tpch_dir)
    plan = load_plan(Q3)
    result = Optimizer(LearnedStatistics(base, LearnedRows(None, tpch_dir))).run(plan)
    assert "learned" not in result.timings  # no second run
    assert result.plan == Optimizer(base).run(plan).plan


def test_a_physical_join_finds_the_rows_learned_for_its_logical_join(learned_q3):
    """A hash join is keyed by what it matches, as the logical join it was bound for, and an exchange by its
    input: the optimized plan's joins (filters left where they were) are estimated at the rows the logical
    plan's joins produced."""
    from optimizer.engine import OptimizerConfig

    tables, cache, analyzed = learned_q3
    statistics = LearnedStatistics(default_statistics(tables=tables), LearnedRows(_store_file(cache), tables))
    joins = [r["actual_rows"] for r in analyzed if r["kind"] == "join"]
    config = OptimizerConfig(disabled_rules=frozenset({"filter_into_read"}))
    optimized = Optimizer(default_statistics(tables=tables), config=config).run(load_plan(Q3)).plan
    g = prepared_dag(optimized)
    estimator = CardinalityEstimator(g, statistics)
    assert {g.nodes[n]["kind"] for n in g} & {"hash_join", "merge_join"}
    bound = sorted(estimator.estimate(n).rows for n in tree_order(g) if g.nodes[n]["kind"].endswith("_join"))
    assert bound == sorted(float(j) for j in joins)


def test_rows_learned_running_the_optimized_plan_serve_the_original(learned_q3, tpch_dir, tmp_path, capsys,
                                                                    monkeypatch, session_args):
    """``run --learn`` of the optimized plan (hash joins, exchanges, filters moved into reads) teaches the
    joins of the plan it came from: a filter over a read is keyed as the read with the filter in it, a
    join by what it matches, an exchange by its input."""
    from optimizer.plan_io import save_plan

    _, _, analyzed = learned_q3
    tables = _tables(tpch_dir, tmp_path / "tables")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    optimized = Optimizer(default_statistics(tables=tables)).run(load_plan(Q3)).plan
    g = prepared_dag(optimized)
    kinds = {g.nodes[n]["kind"] for n in g}
    assert {"hash_join", "exchange"} <= kinds and "filter" not in kinds  # the plan as Spark's target writes it
    save_plan(optimized, str(tmp_path / "q3.opt.binpb"), format="binpb")
    assert main(["run", str(tmp_path / "q3.opt.binpb"), "--tables", str(tables), "--learn", "--show", "0",
                 *session_args]) == 0
    capsys.readouterr()
    learned = _records(_explain(capsys, Q3, tables, session_args, "--learn"))
    for before, after in zip(analyzed, learned, strict=True):
        if before["kind"] in ("join", "aggregate", "fetch"):
            assert after["estimated_rows"] == before["actual_rows"], after["path"]
