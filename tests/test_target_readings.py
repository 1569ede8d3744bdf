"""Constructs an engine reads past, answering as if they were not there: written for that engine they are
refused by name, or rewritten into what it reads right. Found by the spec coverage sweep (one hand-built
plan per relation type, enum value and oneof case, run on Spark and on each engine as given and as
written for it); the plans are in tests/data/target_readings, over the small tables made here."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from test_targets import run_acero, run_datafusion, run_duckdb

from optimizer.errors import UnsupportedError
from optimizer.plan_io import load_plan
from optimizer.write import write_for_target

PLANS = Path(__file__).parent / "data" / "target_readings"
RUN = {"duckdb": run_duckdb, "datafusion": run_datafusion, "acero": run_acero}


@pytest.fixture(scope="module")
def tables(tmp_path_factory) -> dict[str, str]:
    """t(k, v, s) and u(k, w) with NULL keys; p and q: multisets of x with NULLs."""
    folder = tmp_path_factory.mktemp("readings")
    data = {
        "t": {"k": [1, 1, 2, 3, None, None, 4], "v": [10, 10, 20, None, 50, None, 70],
              "s": ["a", "a", "b", None, "e", "f", "g"]},
        "u": {"k": [1, 2, 2, None, 5], "w": [100, 200, 201, 400, 500]},
        "p": {"x": [1, 2, 2, 3, 3, 3, 4, None, None]},
        "q": {"x": [1, 2, 3, 3, 5, None]},
    }
    paths = {}
    for name, columns in data.items():
        path = folder / f"{name}.parquet"
        types = {c: pa.string() if c == "s" else pa.int64() for c in columns}
        pq.write_table(pa.table({c: pa.array(v, types[c]) for c, v in columns.items()}), path)
        paths[name] = str(path)
    return paths


def _plan(name: str):
    return load_plan((PLANS / f"{name}.json").read_bytes())


@pytest.mark.parametrize(("plan", "targets", "words"), [
    # DataFusion's mark is false where no row matches; Substrait's NULL where u.k = NULL made the condition NULL.
    ("mark_projected", ["datafusion"], "LEFT_MARK whose mark is read where NULL and false differ"),
    ("mark_negated", ["datafusion"], "LEFT_MARK whose mark is read where NULL and false differ"),  # NOT IN: 4 rows, not 0
    ("minus_primary_all", ["datafusion", "duckdb"], "SetRel MINUS_PRIMARY_ALL"),  # EXCEPT ALL as EXCEPT
    ("intersection_multiset_all", ["datafusion", "duckdb"], "SetRel INTERSECTION_MULTISET_ALL"),  # as a semi join
    ("intermediate_phase", ["datafusion", "duckdb", "acero"], "AGGREGATION_PHASE_INTERMEDIATE_TO_RESULT"),  # 5, not 160
    ("round_tie_to_even", ["datafusion", "duckdb"], "with rounding TIE_TO_EVEN"),  # round(2.5): 3.0, not 2.0
    ("window_count_distinct", ["datafusion"], "window function 'count' of DISTINCT values"),  # 5, not 4
    ("expression_reference", ["datafusion", "duckdb"], "a field reference into the value of an expression"),
])
def test_what_the_target_reads_past_is_refused_by_name(plan, targets, words):
    for target in targets:
        with pytest.raises(UnsupportedError, match=words) as info:
            write_for_target(_plan(plan), target)
        assert f"target '{target}'" in str(info.value) and info.value.path


@pytest.mark.parametrize("target", ["datafusion", "duckdb", "acero"])
def test_a_grouping_set_naming_its_key_twice_groups_by_it_once(target, tables):
    """GROUPING SETS ((k, k)) groups as (k): the output is k, then count(*). Each engine read the written set's
    keys as columns: DuckDB gave (k, k) without the count, DataFusion and Acero refused the names."""
    plan = _plan("grouping_set_repeated_reference")
    assert list(plan.relations[0].root.input.aggregate.groupings[0].expression_references) == [0]
    rows = RUN[target](write_for_target(plan, target), tables).to_pylist()
    assert sorted(rows, key=lambda r: (r["k"] is not None, r["k"] or 0)) == [
        {"k": None, "c": 2}, {"k": 1, "c": 2}, {"k": 2, "c": 1}, {"k": 3, "c": 1}, {"k": 4, "c": 1}]


def test_a_mark_read_only_as_a_disjunct_is_written_for_datafusion(tables):
    """WHERE k IN (SELECT k FROM u) OR k = 4, the mark dropped after: NULL and false drop a row alike, so
    DataFusion's two-valued mark answers as Substrait's (DataFusion's own plans of EXISTS / IN under OR)."""
    written = write_for_target(_plan("mark_in_a_disjunct"), "datafusion")
    rows = run_datafusion(written, tables).to_pylist()
    assert sorted(r["k"] for r in rows) == [1, 1, 2, 4]


@pytest.mark.spark
def test_datafusion_marks_are_read_as_it_means_them(spark, tables):
    """DataFusion writes NOT (v > 0 AND EXISTS (...)) with a LEFT_MARK join whose mark it computes, and
    declares, two-valued: the loader reads it as coalesce(mark, false). Read by the spec, a row whose k
    matches no u.k (u.k holds a NULL) had a NULL mark and was dropped. Written for DataFusion, the plan
    answers the same as SQL."""
    from substrait.proto import JoinRel, Plan

    from optimizer.driver import optimize
    from optimizer.expr_utils import rels_with_paths
    from optimizer.spark import SparkBackend
    from workloads.producers import datafusion_plan

    sql = "SELECT t.k, t.s FROM t WHERE NOT (t.v > 0 AND EXISTS (SELECT 1 FROM u WHERE u.k = t.k))"
    raw = datafusion_plan(sql, tables)
    assert any(r.WhichOneof("rel_type") == "join" and r.join.type == JoinRel.JOIN_TYPE_LEFT_MARK
               for r, _ in rels_with_paths(Plan.FromString(raw)))
    expected = sorted([(3, None), (None, "e"), (None, "f"), (4, "g")], key=str)  # DuckDB's and DataFusion's SQL

    def answer(table) -> list:
        return sorted(((r["k"], r["s"]) for r in table.to_pylist()), key=str)

    plan = load_plan(raw)
    backend = SparkBackend(spark, tables=tables)
    assert answer(backend.execute(plan)) == expected
    assert answer(backend.execute(optimize(plan))) == expected
    assert answer(run_datafusion(write_for_target(plan, "datafusion"), tables)) == expected


def test_a_semi_join_condition_null_for_a_pair_is_no_match_on_duckdb():
    """DuckDB 1.1.3 misreads a LEFT_SEMI join whose condition is NULL for a pair: SELECT a.k, a.v FROM t3 a
    WHERE EXISTS (SELECT 1 FROM t2 b WHERE b.k = a.k AND b.v > a.v), NULL for a's row (6, NULL), answered
    (2, 3) too, where SQL gives (2, 0), (6, 2) (the random SQL sweep's tables). Written for it, each
    conjunct that may be NULL is also asked IS NOT NULL."""
    paths = {"t2": str(PLANS / "sweep_t2.parquet"), "t3": str(PLANS / "sweep_t3.parquet")}
    written = write_for_target(_plan("semi_join_condition"), "duckdb")
    assert sorted((r["k"], r["v"]) for r in run_duckdb(written, paths).to_pylist()) == [(2, 0), (6, 2)]


SWEEP = {"t1": str(PLANS / "sweep_t1.parquet"), "t2": str(PLANS / "sweep_t2.parquet"),
         "t3": str(PLANS / "sweep_t3.parquet")}


def test_plans_the_random_sweep_wrote_that_the_engine_then_failed_on():
    """Found by the random SQL sweep, each written with exit 0 and then failed by the engine: an
    uncorrelated EXISTS as a semi join without condition ('join condition should not be empty' on
    DataFusion, its own plan), and a ROLLUP whose grand-total measures nobody reads as an aggregate of no
    column ('SELECT list is empty' on DuckDB). Each now runs and answers as Spark's SQL; a function the
    engine lacks is refused by name at write time."""
    semi = write_for_target(_plan("semi_join_without_condition"), "datafusion")
    assert len(run_datafusion(semi, SWEEP).to_pylist()) == 15  # t3's rows: some t2 row has v <= 3
    rollup = write_for_target(_plan("rollup_total_unread"), "duckdb")
    # t3's rows whose k is one of t2's (the ROLLUP's NULL key of the total joins nothing): 12, DuckDB's SQL
    assert sorted(r["v"] for r in run_duckdb(rollup, SWEEP).to_pylist() if r["v"] is not None) == [
        -1, 0, 2, 2, 2, 3, 3, 8, 100, 100]
    assert run_duckdb(rollup, SWEEP).num_rows == 12
    # SELECT a.k, u.k FROM t3 a JOIN (SELECT k FROM t2 GROUP BY k) u ON a.k = u.k: eliminate_joins makes it a
    # semi join giving t3.k twice, which DataFusion called ambiguous; the columns named apart, it runs
    from optimizer.driver import optimize

    twice = optimize(_plan("same_column_twice"), target="datafusion")
    assert [r.WhichOneof("rel_type") for r in [twice.relations[0].root.input]] == ["join"]
    assert list(twice.relations[0].root.names) == ["k", "k_1"]
    assert run_datafusion(twice, SWEEP).num_rows == 12
    with pytest.raises(UnsupportedError, match="window function in a project relation: target 'acero'"):
        write_for_target(_plan("window_sum"), "acero")  # sum(v) OVER (PARTITION BY k): Acero fails on it
    with pytest.raises(UnsupportedError, match="function 'is_distinct_from' .* target 'duckdb' has no such function"):
        write_for_target(_plan("is_distinct_from"), "duckdb")


@pytest.mark.spark
def test_a_comparison_with_negative_zero_keeps_the_zeros_on_spark(spark, tmp_path):
    """f = -0.0 holds for f = 0.0. Spark pushes the comparison into its Parquet reader, which skipped the
    row group whose smallest value is 0.0: 0 rows (found by the random SQL sweep). The literal is compared
    as 0.0, in the read's filter too."""
    from optimizer.driver import optimize
    from optimizer.spark import SparkBackend
    from testing.builder import Builder, filter_, lit, read, ref

    path = tmp_path / "z.parquet"
    pq.write_table(pa.table({"f": pa.array([0.0, 1.5, 0.0, 2.0], pa.float64())}), path)
    b = Builder()
    plan = b.plan(filter_(read("z", [("f", "fp64")]), b.call("equal", ref(0), lit(-0.0, "fp64"))), ["f"])
    backend = SparkBackend(spark, tables={"z": str(path)})
    for p in (plan, optimize(plan)):
        assert backend.execute(p).num_rows == 2


def test_literal_kinds_the_engine_reads_or_a_refusal_by_name():
    """Found by the spec coverage sweep: DuckDB 1.1.3 fails on a timestamp literal and on a var_char one
    ('INTERNAL Error: 34', '... 22'), DataFusion on a var_char one ('Unsupported literal_type'). A var_char
    is written as the string of its text, which both read; a timestamp is refused for DuckDB by name (it
    reads no timestamp literal, nor a cast to a timestamp type) and kept for DataFusion, which reads it."""
    for target, run in (("duckdb", run_duckdb), ("datafusion", run_datafusion)):
        assert run(write_for_target(_plan("literal_var_char"), target), {}).to_pylist() == [{"x": "abc"}]
    with pytest.raises(UnsupportedError, match="literal of kind precision_timestamp: target 'duckdb'") as info:
        write_for_target(_plan("literal_precision_timestamp"), "duckdb")
    assert info.value.path == "relations[0].root.input"
    written = write_for_target(_plan("literal_precision_timestamp"), "datafusion")
    assert [str(v) for v in run_datafusion(written, {}).column(0).to_pylist()] == ["1970-01-01 00:00:01"]
    # Acero: 'substrait literal did not have any literal type set'
    with pytest.raises(UnsupportedError, match="literal of kind precision_timestamp: target 'acero'"):
        write_for_target(_plan("literal_timestamp_over_t"), "acero")


def test_interval_results_of_the_datafusion_engine_are_read():
    """DataFusion gives an interval_day_to_second literal as Arrow's interval[day_time], whose values
    pyarrow cannot give as Python objects (`run --engine datafusion` of one: an internal KeyError 22, found
    by the spec coverage sweep). The runner gives month_day_nano intervals, as DuckDB and Spark do."""
    from optimizer.engines.datafusion import DataFusionRunner

    runner = DataFusionRunner({})
    expected = {"interval_day_to_second": pa.MonthDayNano([0, 1, 2_003_000_000]),
                "interval_year_to_month": pa.MonthDayNano([14, 0, 0])}
    for kind, value in expected.items():
        written = write_for_target(_plan(f"literal_{kind}"), "datafusion")
        table = runner.execute(written)
        assert table.schema.field(0).type == pa.month_day_nano_interval()
        assert table.column(0).to_pylist() == [value]


def test_set_inputs_whose_columns_acero_names_apart_are_written_alike():
    """SELECT k FROM t3 UNION ALL SELECT v FROM t3, k an i32 cast to i64: Acero names each column by the
    expression that made it and refused inputs named apart ('UnionNode input schemas must all match'; the
    random SQL sweep). Each input is written as a project of its columns: the answer is DuckDB's SQL's."""
    import duckdb

    written = write_for_target(_plan("union_cast_column"), "acero")
    rows = sorted((r["k"] is None, r["k"]) for r in run_acero(written, SWEEP).to_pylist())
    t3 = SWEEP["t3"]
    sql = duckdb.sql(f"SELECT k FROM '{t3}' UNION ALL SELECT v FROM '{t3}'").fetchall()
    assert len(rows) == 30 and rows == sorted((k is None, k) for (k,) in sql)
    # IS NOT DISTINCT FROM, a join key too: 'No conversion function exists ...'; refused by name
    with pytest.raises(UnsupportedError, match="function 'is_not_distinct_from' .* target 'acero'"):
        write_for_target(_plan("join_is_not_distinct_from"), "acero")


def test_window_frame_offsets_as_datafusion_reads_them(tables):
    """DataFusion 55 reads a frame bound's offset from the int64 ``offset`` field only: written with
    ``offset_expr``, ROWS BETWEEN 1 PRECEDING AND 1 FOLLOWING failed ('Preceding bound must be positive');
    a RANGE offset in ``offset`` it answers as unbounded (1401 for w = 500 where Spark gives 900). ROWS
    offsets are written in ``offset`` and answer as Spark; a RANGE offset is refused, by the target and by
    the runner given such a plan (found by the spec coverage sweep)."""
    from optimizer.engines.datafusion import DataFusionRunner

    rows = write_for_target(_plan("window_rows_offsets"), "datafusion")
    answer = sorted((r["w"], r["sw"]) for r in run_datafusion(rows, tables).to_pylist())
    assert answer == [(100, 300), (200, 501), (201, 801), (400, 1101), (500, 900)]  # Spark's
    with pytest.raises(UnsupportedError, match="window frame with an offset other than ROWS: target 'datafusion'"):
        write_for_target(_plan("window_range_offset"), "datafusion")
    runner = DataFusionRunner(tables)
    for given in ("window_range_offset", "window_rows_offsets"):  # the second in offset_expr
        with pytest.raises(UnsupportedError, match="datafusion reads past a window frame's offset"):
            runner.execute(_plan(given))
    assert sorted(r["sw"] for r in runner.execute(rows).to_pylist()) == [300, 501, 801, 900, 1101]


def test_a_year_to_month_interval_is_written_in_months_for_duckdb():
    """DuckDB 1.1.3 reads an interval_year_to_month's months and not its years: 2022-01-08 + (1 year 2
    months) written as such gave 2022-03-08, with no error (found by the second spec coverage sweep). The
    literal is written as 14 months: 2023-03-08, Spark's answer to the plan."""
    import datetime

    written = write_for_target(_plan("date_plus_year_month"), "duckdb")
    (value,) = run_duckdb(written, {}).column(0).to_pylist()
    assert value in (datetime.date(2023, 3, 8), datetime.datetime(2023, 3, 8))


def test_coalesce_is_written_as_a_case_for_duckdb():
    """DuckDB 1.1.3's consumer has no function coalesce ('Scalar Function with name coalesce does not
    exist!'; the random SQL sweep: SELECT ... FROM t2 WHERE k >= (SELECT COALESCE(MIN(k), 0) FROM t1 WHERE k
    IS NOT NULL), decorrelated into a join). Written as CASE WHEN a IS NOT NULL THEN a ELSE b END, the
    answer is DuckDB's SQL's."""
    import duckdb

    from optimizer.driver import optimize

    written = optimize(_plan("coalesce_of_a_scalar_subquery"), target="duckdb")
    rows = sorted((r["k"] is None, r["k"], r["v"] is None, r["v"]) for r in run_duckdb(written, SWEEP).to_pylist())
    t1, t2 = SWEEP["t1"], SWEEP["t2"]
    sql = duckdb.sql(f"SELECT y.k, y.v FROM '{t2}' y WHERE y.k >= (SELECT COALESCE(MIN(z.k), 0) FROM '{t1}' z "
                     "WHERE z.k IS NOT NULL)").fetchall()
    assert len(rows) == 24 and rows == sorted((k is None, k, v is None, v) for k, v in sql)
