"""The shared ground truth: TPC-H data, live producers, the DuckDB oracle, the corpus index, compare_tables."""

from __future__ import annotations

import datetime
import json
import math
import time
from decimal import Decimal
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from substrait.proto import Plan

from optimizer.difftest.results import assert_tables_equal, compare_tables
from workloads import producers, tpch
from workloads.corpus import our_table, plan_tables, sql_for, table_map

# ------------------------------------------------------------------------------------------ TPC-H data


def test_generated_tables(tpch_dir):
    expected = tpch.expected_row_counts(0.01)
    for table in tpch.TPCH_TABLES:
        path = tpch_dir / f"{table}.parquet"
        meta = pq.ParquetFile(path)
        assert meta.schema_arrow == tpch.TPCH_SCHEMAS[table], table
        if expected[table] is not None:
            assert meta.metadata.num_rows == expected[table], table
    assert 59_000 < pq.ParquetFile(tpch_dir / "lineitem.parquet").metadata.num_rows < 61_000
    t = pq.read_table(tpch_dir / "t.parquet")
    assert t.schema == tpch.T_SCHEMA
    assert [tuple(r.values()) for r in t.to_pylist()] == tpch.T_ROWS


def test_generation_is_reused(tpch_dir):
    marker = tpch_dir / "_TPCH_GENERATED.json"
    before = marker.stat().st_mtime_ns
    start = time.perf_counter()
    assert tpch.generate_tpch(0.01, tpch_dir) == tpch_dir
    assert time.perf_counter() - start < 1.0
    assert marker.stat().st_mtime_ns == before
    info = tpch.generation_info(tpch_dir)
    assert info["scale"] == 0.01 and info["rows"]["orders"] == 15_000


def test_duckdb_fallback_gives_the_same_rows(tmp_path, monkeypatch):
    """tpchgen-cli and DuckDB dbgen: the same schema and the same rows, only the comment texts differ."""
    with_cli = tpch.generate_tpch(0.001, tmp_path / "cli")
    assert tpch.generation_info(with_cli)["generator"].startswith("tpchgen")
    monkeypatch.setattr(tpch, "tpchgen_executable", lambda: None)
    with_duckdb = tpch.generate_tpch(0.001, tmp_path / "duckdb")
    assert tpch.generation_info(with_duckdb)["generator"].startswith("duckdb")
    for table in ("orders", "lineitem", "partsupp", "nation"):
        a, b = pq.read_table(with_cli / f"{table}.parquet"), pq.read_table(with_duckdb / f"{table}.parquet")
        assert a.schema == b.schema == tpch.TPCH_SCHEMAS[table]
        keep = [c for c in a.column_names if not c.endswith("_comment")]
        assert_tables_equal(a.select(keep), b.select(keep))


def test_default_data_dir(monkeypatch, tmp_path):
    monkeypatch.delenv("SUBSTRAIT_OPT_DATA", raising=False)
    assert tpch.default_data_dir(0.01) == tpch.repo_root() / ".cache" / "tpch" / "sf0.01"
    monkeypatch.setenv("SUBSTRAIT_OPT_DATA", str(tmp_path))
    assert tpch.default_data_dir(1) == tmp_path / "sf1"


def test_tpch_queries():
    queries = tpch.tpch_queries()
    assert sorted(queries) == list(range(1, 23))
    for n, sql in queries.items():
        assert sql.lstrip().upper().startswith(("SELECT", "WITH")), n
        assert not sql.rstrip().endswith(";")
    assert set(tpch.TPCH_ORDER_BY) == set(queries)


# ------------------------------------------------------------------------------------------- producers


def _plan(data: bytes) -> Plan:
    plan = Plan()
    plan.ParseFromString(data)
    return plan


def _read_names(plan: Plan) -> tuple[set[str], int]:
    """Named tables read by the plan, and the number of local_files reads."""
    text = str(plan)
    names = set()
    for chunk in text.split("named_table {")[1:]:
        names.add(chunk.split('names: "', 1)[1].split('"', 1)[0])
    return names, text.count("local_files {")


def test_datafusion_produces_all_22(datafusion_tpch_plans):
    assert sorted(datafusion_tpch_plans) == list(range(1, 23))
    for n, data in datafusion_tpch_plans.items():
        plan = _plan(data)
        assert plan.version.producer == "datafusion"
        names, local = _read_names(plan)
        assert names and names <= set(tpch.TPCH_TABLES) and local == 0, n
        assert "type_variation_reference" not in str(plan), n  # no Utf8View strings


def test_datafusion_plans_give_the_oracle_answers(datafusion_tpch_plans, tpch_tables, duckdb_oracle):
    """Round trip through DataFusion's own consumer: checks the producer, the oracle and compare_tables."""
    from datafusion.substrait import Consumer, Serde

    ctx = producers.datafusion_context(tpch_tables)
    for n, data in datafusion_tpch_plans.items():
        logical = Consumer.from_substrait_plan(ctx, Serde.deserialize_bytes(data))
        actual = ctx.create_dataframe_from_logical_plan(logical).to_arrow_table()
        expected = duckdb_oracle(tpch.tpch_query(n))
        result = compare_tables(actual, expected, ordered_by=tpch.TPCH_ORDER_BY[n])
        assert result, f"Q{n}: {result}"


def test_duckdb_produces_the_supported_set(duckdb_tpch_plans, tpch_tables):
    assert tuple(sorted(duckdb_tpch_plans)) == producers.DUCKDB_TPCH_QUERIES
    assert len(producers.DUCKDB_TPCH_QUERIES) + len(producers.DUCKDB_TPCH_EXCLUDED) == 22
    for n, data in duckdb_tpch_plans.items():
        plan = _plan(data)
        assert plan.version.producer == "DuckDB"
        names, local = _read_names(plan)
        assert names and names <= set(tpch.TPCH_TABLES) and local == 0, n
    # data_independent: no min/max statistics written into the plan as filters
    q3 = producers.duckdb_plan_json(tpch.tpch_query(3), tpch_tables)
    assert '"i64": "' not in q3  # no i64 literal at all
    with_stats = producers.duckdb_plan_json(tpch.tpch_query(3), tpch_tables, data_independent=False)
    assert '"i64": "1499"' in with_stats


def test_duckdb_exclusions_still_hold(tpch_tables):
    """If DuckDB's extension is upgraded, these tell which exclusions to revisit."""
    for n, reason in producers.DUCKDB_TPCH_EXCLUDED.items():
        if reason.startswith("not produced"):
            with pytest.raises(producers.ProducerError):
                producers.duckdb_plan(tpch.tpch_query(n), tpch_tables)
    q13 = json.loads(producers.duckdb_plan_json(tpch.tpch_query(13), tpch_tables))
    names = {e["extensionFunction"]["name"] for e in q13["extensions"]}
    assert "not_equal:string_string" in names and not any(name.startswith("like") for name in names)


def test_duckdb_plans_round_trip_in_duckdb(duckdb_tpch_plans, duckdb_oracle, tpch_tables):
    con = producers.duckdb_producer_connection(tpch_tables)
    for n in (1, 6, 18):
        actual = con.from_substrait(duckdb_tpch_plans[n]).fetch_arrow_table()
        assert_tables_equal(actual, duckdb_oracle(tpch.tpch_query(n)), ordered_by=tpch.TPCH_ORDER_BY[n])


def test_oracle_answers_q1(duckdb_oracle):
    result = duckdb_oracle(tpch.tpch_query(1))
    assert result.num_rows == 4
    rows = result.to_pylist()
    assert [(r["l_returnflag"], r["l_linestatus"]) for r in rows] == [
        ("A", "F"),
        ("N", "F"),
        ("N", "O"),
        ("R", "F"),
    ]
    total = duckdb_oracle("select count(*) from lineitem where l_shipdate <= date '1998-09-02'").column(0)[0]
    assert sum(r["count_order"] for r in rows) == total.as_py()
    assert duckdb_oracle("select count(*) from t where a is null").column(0)[0].as_py() == 1


# ---------------------------------------------------------------------------------------------- corpus


def test_corpus_index(corpus_plans):
    assert len(corpus_plans) == 446
    assert {p.producer for p in corpus_plans} == {"isthmus", "duckdb", "datafusion", "ibis"}
    assert all(p.sql is not None and p.definition is not None for p in corpus_plans)
    assert len({p.id for p in corpus_plans}) == len(corpus_plans)
    tpch_duckdb = sorted(p.tpch_query for p in corpus_plans if p.producer == "duckdb" and p.tpch_query)
    assert tuple(tpch_duckdb) == producers.DUCKDB_TPCH_PRODUCIBLE
    isthmus_q3 = next(p for p in corpus_plans if p.producer == "isthmus" and p.tpch_query == 3)
    assert table_map(isthmus_q3)["LINEITEM"] == "lineitem"
    assert our_table("orders_small.parquet") == "orders"


def test_corpus_sql_runs_on_our_data(corpus_plans, duckdb_oracle, tpch_dir, tpch_small_dir):
    queries = [p for p in corpus_plans if p.is_query]
    assert len(queries) >= 440
    for plan in queries:
        duckdb_oracle(sql_for(plan, small_dir=tpch_small_dir))
    for plan in queries[::25]:
        text = sql_for(plan, tpch_dir)
        assert "{" not in text
        duckdb_oracle(text)
    cross = next(p for p in queries if p.test_name == "cross_join")
    assert duckdb_oracle(sql_for(cross, small_dir=tpch_small_dir)).num_rows == 15 * 150
    tables = plan_tables(cross, tpch_dir, small_dir=tpch_small_dir)
    assert set(tables.values()) == {tpch_small_dir / "customer.parquet", tpch_small_dir / "orders.parquet"}
    function_test = next(p for p in corpus_plans if p.sql and "FROM 't'" in p.sql)
    assert "FROM t" in sql_for(function_test)


# --------------------------------------------------------------------------------------- compare_tables


def test_compare_basics():
    a = pa.table({"x": [1, 2, 3], "y": ["a", "b", None]})
    assert compare_tables(a, a)
    assert compare_tables(a, a.rename_columns(["p", "q"]))  # names are ignored
    assert not compare_tables(a, a.select([0]))
    assert "column count" in compare_tables(a, a.select([0])).reason
    assert "row count" in compare_tables(a, a.slice(1)).reason
    b = pa.table({"x": [1, 2, 4], "y": ["a", "b", None]})
    result = compare_tables(a, b)
    assert not result and result.actual_only == [(3, None)] and result.expected_only == [(4, None)]
    assert "incompatible" in compare_tables(a, pa.table({"x": ["1", "2", "3"], "y": a["y"]})).reason
    assert compare_tables(
        pa.table({"x": pa.array([], pa.int64())}), pa.table({"x": pa.array([], pa.int32())})
    )


def test_compare_order_and_ties():
    expected = pa.table({"k": [1, 1, 2, 3], "v": ["a", "b", "c", "d"]})
    ties_swapped = pa.table({"k": [1, 1, 2, 3], "v": ["b", "a", "c", "d"]})
    assert compare_tables(ties_swapped, expected, ordered_by=[0])
    assert not compare_tables(ties_swapped, expected, ordered_by=[0, 1])
    reversed_ = expected.take([3, 2, 1, 0])
    assert compare_tables(reversed_, expected)  # as a multiset
    result = compare_tables(reversed_, expected, ordered_by=[0])
    assert not result and result.row == 0 and "order differs" in result.reason
    desc = pa.table({"k": [3, 2, 1, 1], "v": ["d", "c", "b", "a"]})
    assert compare_tables(desc, reversed_, ordered_by=[0])  # direction needs not be given


def test_compare_nulls_nan_and_tolerance():
    nan = float("nan")
    a = pa.table({"f": [1.0, nan, None, 0.0, math.inf]})
    assert compare_tables(a, pa.table({"f": [math.inf, -0.0, None, nan, 1.0 + 1e-12]}))
    assert not compare_tables(a, pa.table({"f": [1.0, nan, nan, 0.0, math.inf]}))  # null is not NaN
    assert not compare_tables(a, pa.table({"f": [1.0, nan, None, 0.0, -math.inf]}))
    assert not compare_tables(pa.table({"f": [1.0]}), pa.table({"f": [1.0 + 1e-6]}))
    assert compare_tables(pa.table({"f": [1.0]}), pa.table({"f": [1.0 + 1e-6]}), rel_tol=1e-5)
    assert compare_tables(pa.table({"i": [None, 1]}), pa.table({"i": [1, None]}))
    assert not compare_tables(pa.table({"i": [None, 1]}), pa.table({"i": [1, 1]}))
    assert compare_tables(pa.table({"i": pa.nulls(2)}), pa.table({"i": pa.array([None, None], pa.int32())}))


def test_compare_multiset_duplicates():
    a = pa.table({"x": [1, 1, 2]})
    assert compare_tables(a, pa.table({"x": [1, 2, 1]}))
    result = compare_tables(a, pa.table({"x": [1, 2, 2]}))
    assert not result and result.actual_only == [(1,)] and result.expected_only == [(2,)]


def test_compare_mixed_numeric_types():
    dec = pa.array([Decimal("1.10"), Decimal("2.25"), None], pa.decimal128(15, 2))
    assert compare_tables(pa.table({"d": dec}), pa.table({"d": pa.array([2.25, 1.1, None])}))
    assert not compare_tables(pa.table({"d": dec}), pa.table({"d": pa.array([2.25, 1.12, None])}))
    # a decimal rounded to 6 places (Spark's avg) against DuckDB's double
    avg = pa.array([Decimal("25.522005")], pa.decimal128(19, 6))
    assert compare_tables(pa.table({"a": avg}), pa.table({"a": [25.52200513]}))
    # same scale, different precision: exact
    wide = pa.array([Decimal("1.10"), Decimal("2.25"), None], pa.decimal128(38, 2))
    assert compare_tables(pa.table({"d": dec}), pa.table({"d": wide}))
    # DuckDB's HUGEINT sum (decimal(38,0)) against Spark's bigint, int32 against int64
    assert compare_tables(
        pa.table(
            {"s": pa.array([Decimal(5), Decimal(7)], pa.decimal128(38, 0)), "i": pa.array([1, 2], pa.int32())}
        ),
        pa.table({"s": pa.array([7, 5], pa.int64()), "i": pa.array([2, 1], pa.int64())}),
    )
    assert not compare_tables(
        pa.table({"s": pa.array([Decimal(5)], pa.decimal128(38, 0))}),
        pa.table({"s": pa.array([6], pa.int64())}),
    )
    big = pa.table({"u": pa.array([2**64 - 1, 1], pa.uint64())})
    assert not compare_tables(big, pa.table({"u": pa.array([-1, 1], pa.int64())}))
    assert compare_tables(big, big)


def test_compare_strings_and_dates():
    a = pa.table({"s": pa.array(["x", "y"], pa.string()), "d": pa.array([datetime.date(1998, 9, 2), None])})
    b = pa.table(
        {
            "s": pa.array(["y", "x"], pa.large_string()).dictionary_encode(),
            "d": pa.array([None, datetime.datetime(1998, 9, 2)], pa.timestamp("us")),
        }
    )
    assert compare_tables(a, b)
    c = pa.table(
        {"s": ["x", "y"], "d": pa.array([datetime.datetime(1998, 9, 2, 0, 0, 1), None], pa.timestamp("s"))}
    )
    assert not compare_tables(a, c)


def test_compare_is_fast():
    n = 100_000
    a = pa.table(
        {
            "k": pa.array(range(n)),
            "f": pa.array([i * 0.5 for i in range(n)]),
            "s": [str(i % 97) for i in range(n)],
        }
    )
    b = a.take(pa.array(list(range(n - 1, -1, -1))))
    start = time.perf_counter()
    assert compare_tables(a, b)
    assert time.perf_counter() - start < 3.0


_values = st.one_of(
    st.none(),
    st.integers(-3, 3),
)
_floats = st.one_of(
    st.none(), st.floats(allow_nan=True, allow_infinity=True, width=64), st.sampled_from([0.0, 1.5])
)
_text = st.one_of(st.none(), st.sampled_from(["", "a", "b", "ab"]))
_rows = st.lists(st.tuples(_values, _floats, _text), min_size=0, max_size=30)


def _table(rows) -> pa.Table:
    cols = list(zip(*rows, strict=True)) if rows else [[], [], []]
    return pa.table(
        {
            "i": pa.array(cols[0], pa.int64()),
            "f": pa.array(cols[1], pa.float64()),
            "s": pa.array(cols[2], pa.string()),
        }
    )


_quick = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@_quick
@given(_rows, st.randoms(use_true_random=False))
def test_compare_permutation_invariant(rows, rnd):
    shuffled = list(rows)
    rnd.shuffle(shuffled)
    assert compare_tables(_table(shuffled), _table(rows))


@_quick
@given(_rows, st.data())
def test_compare_detects_a_changed_value(rows, data):
    if not rows:
        return
    index = data.draw(st.integers(0, len(rows) - 1))
    i, f, s = rows[index]
    changed = list(rows)
    changed[index] = (None if i is not None else 7, f, s)
    assert not compare_tables(_table(changed), _table(rows))


@_quick
@given(_rows)
def test_compare_float_noise_within_tolerance(rows):
    noisy = [(i, f * (1 + 1e-12) if f is not None and math.isfinite(f) else f, s) for i, f, s in rows]
    assert compare_tables(_table(noisy), _table(rows))


@_quick
@given(_rows, st.randoms(use_true_random=False))
def test_compare_order_on_keys_only(rows, rnd):
    rows = sorted(rows, key=lambda r: (r[0] is None, r[0] or 0))
    expected = _table(rows)
    # shuffle within groups of equal keys: still in order on column 0
    groups: dict = {}
    for row in rows:
        groups.setdefault(row[0], []).append(row)
    reshuffled = []
    for key in dict.fromkeys(r[0] for r in rows):
        group = groups[key]
        rnd.shuffle(group)
        reshuffled.extend(group)
    assert compare_tables(_table(reshuffled), expected, ordered_by=[0])
    distinct = list(dict.fromkeys(r[0] for r in rows))
    if len(distinct) > 1:
        assert not compare_tables(_table(list(reversed(rows))), expected, ordered_by=[0])


@_quick
@given(
    st.lists(st.one_of(st.none(), st.decimals(min_value=-(10**6), max_value=10**6, places=2)), max_size=20)
)
def test_compare_decimal_against_double(values):
    dec = pa.array(values, pa.decimal128(15, 2))
    dbl = pa.array([None if v is None else float(v) for v in values], pa.float64())
    assert compare_tables(
        pa.table({"d": dec}), pa.table({"d": dbl}).take(pa.array(range(len(values) - 1, -1, -1), pa.int64()))
    )


# ------------------------------------------------------------------------- nothing beside the repository


def test_the_repository_reads_nothing_beside_itself():
    """The corpus is the repository's copy, and no code or test names a path beside the repository
    (a user's clone has no ``../shared``)."""
    from workloads.corpus import corpus_root
    from workloads.tpch import repo_root

    root = repo_root()
    assert corpus_root().resolve().is_relative_to(root)
    assert (corpus_root() / "LICENSE").is_file() and (corpus_root() / "README.corpus.md").is_file()
    offenders = []
    for folder in ("optimizer", "rules", "cost", "workloads", "tests", "benchmarks"):
        for path in (root / folder).rglob("*.py"):
            if path.resolve() == Path(__file__).resolve():
                continue  # this test spells the patterns it looks for
            text = path.read_text()
            if '"shared"' in text or "../shared" in text or "parents[1].parent" in text:
                offenders.append(str(path.relative_to(root)))
    assert offenders == [], f"these name a path beside the repository: {offenders}"


def test_missing_corpus_is_an_error_naming_the_folder(tmp_path):
    from workloads.corpus import corpus_plans

    with pytest.raises(FileNotFoundError, match=str(tmp_path)):
        corpus_plans(tmp_path)


# ------------------------------------------------------------------------- the session's plan answers


def test_plan_answers_run_a_plan_once_whatever_its_estimates():
    """``tests/plan_answers.py``: a plan that differs from one already run only in its ``hint``s is not run
    again; a plan with a best-effort filter runs once per backend mode; a failure is raised to each caller."""
    from plan_answers import MemoBackend, PlanAnswers

    from testing.builder import Builder, lit, read

    class Counting:
        def __init__(self, ignore: bool = False) -> None:
            self.ignore_best_effort_filter, self.calls = ignore, 0

        def execute(self, plan):
            self.calls += 1
            if plan.relations[0].root.names[0] == "boom":
                raise ValueError("boom")
            return plan.relations[0].root.names[0]

    b, backend, answers = Builder(), Counting(), PlanAnswers()
    with_hint = b.plan(read("t", [("a", "i64")], rows=5), ["a"])
    without = b.plan(read("t", [("a", "i64")]), ["a"])
    assert with_hint != without
    assert answers.run(backend, "full", with_hint) == answers.run(backend, "full", without) == "a"
    assert backend.calls == 1 and (answers.runs, answers.hits) == (1, 1)
    answers.run(backend, "small", without)  # another data set: another query
    assert backend.calls == 2

    best_effort = read("t", [("a", "i64")])
    best_effort.read.best_effort_filter.CopyFrom(lit(True, "bool"))
    plan = b.plan(best_effort, ["a"])
    ignoring = Counting(ignore=True)
    MemoBackend(answers, backend, "full").execute(plan)
    MemoBackend(answers, ignoring, "full").execute(plan)
    assert (backend.calls, ignoring.calls) == (3, 1)
    MemoBackend(answers, ignoring, "full").execute(without)  # no best-effort filter: the mode is moot
    assert ignoring.calls == 1

    failing = b.plan(read("t", [("a", "i64")]), ["boom"])
    for _ in range(2):
        with pytest.raises(ValueError, match="boom"):
            answers.run(backend, "full", failing)
    assert backend.calls == 4


def test_no_jvm_archive_without_java(tmp_path, monkeypatch, capsys):
    """``make test`` runs with a class-data-sharing archive when Java can make one; without a Java the
    suite runs without (nothing printed, nothing written), not with an error."""
    from testing import jvm_archive

    monkeypatch.delenv("JAVA_HOME", raising=False)
    monkeypatch.setenv("PATH", str(tmp_path))  # no java on it
    assert jvm_archive.main([str(tmp_path / "jvm")]) == 0
    assert capsys.readouterr().out == "" and not (tmp_path / "jvm").exists()
