"""Cardinality estimates where the right answer is known exactly, and q-errors on TPC-H."""

from __future__ import annotations

import datetime
import json
import math

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from cardinality_plans import CUST, ORDERS, T_COLS, B
from hypothesis import given, settings
from hypothesis import strategies as st
from optimizer.cost.cardinality import CardinalityEstimator
from optimizer.cost.estimates import (
    DEFAULT_EQ_SEL,
    DEFAULT_LIKE_SEL,
    DEFAULT_RANGE_SEL,
    DEFAULT_TABLE_ROWS,
    distinct_after_sampling,
    q_error,
)
from optimizer.cost.providers import FileStatistics, MemoryStatistics
from optimizer.cost.selectivity import _histogram_mass, like_fragment_selectivity
from optimizer.cost.statistics import ColumnStatistics, Histogram, TableStatistics
from substrait.proto import Plan

from optimizer.dag import annotate_schemas, to_dag
from optimizer.plan_io import load_plan


def estimate(plan: Plan, stats=None, node: int | None = None):
    g = to_dag(plan)
    est = CardinalityEstimator(g, stats)
    return est.estimate(g.graph["roots"][0]["node"] if node is None else node), g, est


def t_stats(**columns: ColumnStatistics) -> MemoryStatistics:
    base = {
        "x": ColumnStatistics(ndv=10, min=1, max=10, null_count=0, data_type="bigint"),
        "y": ColumnStatistics(ndv=1000, min=1, max=1000, null_count=0, data_type="bigint"),
        "s": ColumnStatistics(ndv=4, min="a", max="d", null_count=0, avg_len=1, data_type="string"),
        "d": ColumnStatistics(ndv=100, min="2020-01-01", max="2020-04-09", null_count=0, data_type="date"),
        "p": ColumnStatistics(ndv=1000, min=0.0, max=100.0, null_count=0, data_type="decimal(15,2)"),
    }
    base.update(columns)
    return MemoryStatistics({"t": TableStatistics(row_count=1000, columns=base)})


def rows_of(cond_builder, stats=None) -> float:
    b = B()
    plan = b.plan(b.filter(b.read("t", T_COLS), cond_builder(b)))
    return estimate(plan, stats if stats is not None else t_stats())[0].rows


# --------------------------------------------------------------------------------------------------
# Filters
# --------------------------------------------------------------------------------------------------


def test_equality_uses_ndv():
    assert rows_of(lambda b: b.call("equal", b.ref(0), b.i64(5))) == pytest.approx(100)
    assert rows_of(lambda b: b.call("equal", b.i64(5), b.ref(0))) == pytest.approx(100)  # flipped
    assert rows_of(lambda b: b.call("not_equal", b.ref(0), b.i64(5))) == pytest.approx(900)
    assert rows_of(lambda b: b.call("equal", b.ref(0), b.i64(50))) == pytest.approx(1)  # out of range: floor 1


def test_equality_without_statistics_uses_default():
    b = B()
    plan = b.plan(b.filter(b.read("t", T_COLS), b.call("equal", b.ref(0), b.i64(5))))
    est, _, _ = estimate(plan, None)
    assert est.rows == pytest.approx(DEFAULT_TABLE_ROWS * DEFAULT_EQ_SEL)


def test_ranges_interpolate_on_integers_and_dates():
    # x in 1..10 uniformly: x < 4 -> 3 values of 10
    assert rows_of(lambda b: b.call("lt", b.ref(0), b.i64(4))) == pytest.approx(300)
    assert rows_of(lambda b: b.call("lte", b.ref(0), b.i64(4))) == pytest.approx(400)
    assert rows_of(lambda b: b.call("gt", b.ref(0), b.i64(4))) == pytest.approx(600)
    assert rows_of(lambda b: b.call("gte", b.ref(0), b.i64(4))) == pytest.approx(700)
    # 3 <= x <= 6 as two conjuncts and as BETWEEN: 4 values
    both = rows_of(lambda b: b.call("and", b.call("gte", b.ref(0), b.i64(3)), b.call("lte", b.ref(0), b.i64(6))))
    assert both == pytest.approx(400)
    assert rows_of(lambda b: b.call("between", b.ref(0), b.i64(3), b.i64(6))) == pytest.approx(400)
    # dates: 100 days from 2020-01-01; < 2020-01-21 is 20 days
    assert rows_of(lambda b: b.call("lt", b.ref(3), b.date(datetime.date(2020, 1, 21)))) == pytest.approx(200)
    # decimals are continuous: p in [0, 100], p < 25.00 -> 25%
    assert rows_of(lambda b: b.call("lt", b.ref(4), b.dec("25.00"))) == pytest.approx(250, rel=1e-6)


def test_range_without_bounds_uses_default():
    stats = t_stats(y=ColumnStatistics(ndv=1000))
    assert rows_of(lambda b: b.call("lt", b.ref(1), b.i64(4)), stats) == pytest.approx(1000 * DEFAULT_RANGE_SEL)


def test_histogram_range_selectivity():
    # 1000 rows, 4 bins of 250: values 0..10 (bin 1), 10..20, 20..100, 100..1000: skewed towards small values
    hist = Histogram(height=250, bins=[(0, 10, 10), (10, 20, 10), (20, 100, 80), (100, 1000, 900)])
    stats = t_stats(y=ColumnStatistics(ndv=1000, min=0, max=1000, null_count=0, histogram=hist, data_type="bigint"))
    assert rows_of(lambda b: b.call("lte", b.ref(1), b.i64(20)), stats) == pytest.approx(500, rel=0.01)
    assert rows_of(lambda b: b.call("gt", b.ref(1), b.i64(100)), stats) == pytest.approx(250, rel=0.01)
    # half of the last bin
    assert rows_of(lambda b: b.call("gt", b.ref(1), b.i64(550)), stats) == pytest.approx(125, rel=0.01)
    # equality: a value of the first bin is 250 rows / 10 distinct
    assert rows_of(lambda b: b.call("equal", b.ref(1), b.i64(5)), stats) == pytest.approx(25, rel=0.01)


def test_in_list_null_and_boolean_logic():
    # IN: 3 of the 10 values of x
    b = B()
    in_list = {"singularOrList": {"value": b.ref(0), "options": [b.i64(1), b.i64(2), b.i64(3), b.i64(3)]}}
    plan = b.plan(b.filter(b.read("t", T_COLS), in_list))
    assert estimate(plan, t_stats())[0].rows == pytest.approx(300)
    nulls = t_stats(y=ColumnStatistics(ndv=100, min=1, max=100, null_count=250))
    assert rows_of(lambda b: b.call("is_null", b.ref(1)), nulls) == pytest.approx(250)
    assert rows_of(lambda b: b.call("is_not_null", b.ref(1)), nulls) == pytest.approx(750)
    # comparisons reject nulls: y = 7 among 750 non-null rows of 100 values
    assert rows_of(lambda b: b.call("equal", b.ref(1), b.i64(7)), nulls) == pytest.approx(7.5)
    # OR and NOT, independence
    assert rows_of(lambda b: b.call("or", b.call("equal", b.ref(0), b.i64(1)),
                                     b.call("equal", b.ref(2), b.string("a")))) == pytest.approx(1000 * (1 - 0.9 * 0.75))
    assert rows_of(lambda b: b.call("not", b.call("equal", b.ref(0), b.i64(1)))) == pytest.approx(900)
    assert rows_of(lambda b: b.call("and", b.call("equal", b.ref(0), b.i64(1)),
                                     b.call("equal", b.ref(2), b.string("a")))) == pytest.approx(25)


def test_like_strings_and_column_comparisons():
    assert rows_of(lambda b: b.call("like", b.ref(2), b.string("b"))) == pytest.approx(250)  # no wildcard: equality
    assert rows_of(lambda b: b.call("like", b.ref(2), b.string("%b%"))) == pytest.approx(250)  # floor 1/ndv
    big = t_stats(s=ColumnStatistics(ndv=1000, min="aa", max="zz", null_count=0))
    two = like_fragment_selectivity("green") * like_fragment_selectivity("Complaints")
    assert rows_of(lambda b: b.call("like", b.ref(2), b.string("%green%Complaints%")), big) == pytest.approx(1000 * two)
    assert rows_of(lambda b: b.call("like", b.ref(2), b.string("%green%")), big) == pytest.approx(1000 * DEFAULT_LIKE_SEL)
    assert rows_of(lambda b: b.call("like", b.ref(2), b.string("Q%")), big) == pytest.approx(1)  # not in a..z
    # string ranges: 'b' <= s < 'c' over a..d (4 values)
    assert 100 < rows_of(lambda b: b.call("lt", b.ref(2), b.string("b"))) < 500
    # column vs column: x in 1..10 and y in 1..1000: x < y almost always
    assert rows_of(lambda b: b.call("lt", b.ref(0), b.ref(1))) > 950
    assert rows_of(lambda b: b.call("equal", b.ref(0), b.ref(1))) == pytest.approx(1)


def test_repeated_filter_is_not_counted_twice():
    """DataFusion writes a pushed predicate into the read and again in a filter above it."""
    b = B()
    cond = b.call("equal", b.ref(2), b.string("a"))
    read = b.read("t", T_COLS, filter=cond, projection={"select": {"structItems": [{"field": 0}, {"field": 2}]}})
    plan = b.plan(b.filter(read, b.call("equal", b.ref(1), b.string("a"))))
    est, g, e = estimate(plan, t_stats())
    assert est.rows == pytest.approx(250)
    # and a narrowed column: a second, tighter range still counts
    plan = b.plan(b.filter(b.filter(b.read("t", T_COLS), b.call("lt", b.ref(0), b.i64(6))),
                           b.call("lt", b.ref(0), b.i64(4))))
    assert estimate(plan, t_stats())[0].rows == pytest.approx(300)


# --------------------------------------------------------------------------------------------------
# Joins, aggregates, others
# --------------------------------------------------------------------------------------------------


def join_stats() -> MemoryStatistics:
    return MemoryStatistics({
        "orders": TableStatistics(row_count=10_000, columns={
            "o_id": ColumnStatistics(ndv=10_000, min=1, max=10_000),
            "o_cust": ColumnStatistics(ndv=500, min=1, max=1000)}),
        "cust": TableStatistics(row_count=1000, columns={
            "c_id": ColumnStatistics(ndv=1000, min=1, max=1000),
            "c_seg": ColumnStatistics(ndv=5)}),
    })


def join_rows(type_: str, filter_cust: bool = False) -> float:
    b = B()
    cust = b.read("cust", CUST)
    if filter_cust:
        cust = b.filter(cust, b.call("equal", b.ref(1), b.string("AUTO")))
    plan = b.plan(b.join(b.read("orders", ORDERS), cust, b.call("equal", b.ref(1), b.ref(2)), type_))
    return estimate(plan, join_stats())[0].rows


def test_equi_join_from_key_ndvs():
    # |L||R| / max(ndv): 10000 * 1000 / 1000
    assert join_rows("INNER") == pytest.approx(10_000)
    assert join_rows("INNER", filter_cust=True) == pytest.approx(2000)
    # every order has a customer; half of the customers have orders (500 of 1000 values)
    assert join_rows("LEFT_SEMI") == pytest.approx(10_000)
    assert join_rows("LEFT_ANTI") == pytest.approx(1, abs=1)
    assert join_rows("RIGHT_SEMI") == pytest.approx(500)
    assert join_rows("RIGHT_ANTI") == pytest.approx(500)
    assert join_rows("LEFT") == pytest.approx(10_000)
    assert join_rows("RIGHT") == pytest.approx(10_500)
    assert join_rows("OUTER") == pytest.approx(10_500)
    assert join_rows("LEFT_SINGLE") == pytest.approx(10_000)
    assert join_rows("LEFT_MARK") == pytest.approx(10_000)
    # a filtered customer side keeps its key domain: a fifth of the orders find their customer
    assert join_rows("LEFT_SEMI", filter_cust=True) == pytest.approx(2000)
    assert join_rows("LEFT_ANTI", filter_cust=True) == pytest.approx(8000)


def test_a_dimension_filtered_on_another_column_is_joined_within_the_facts_range():
    # 100,000 sales on 1,000 days (keys 2000..2999) of a 73,000-day date dimension; the days of one
    # year (365 of the dimension's rows, chosen by d_year) are taken to be among the days sold: the join
    # keeps 100,000 * 365 / 1,000 sales, not 100,000 * 365 / 73,000 (the days spread over the dimension)
    stats = MemoryStatistics({
        "sales": TableStatistics(row_count=100_000, columns={
            "s_date": ColumnStatistics(ndv=1000, min=2000, max=2999, data_type="bigint"),
            "s_amt": ColumnStatistics(ndv=1000, min=1, max=1000, data_type="bigint")}),
        "dates": TableStatistics(row_count=73_000, columns={
            "d_sk": ColumnStatistics(ndv=73_000, min=1, max=73_000, data_type="bigint"),
            "d_year": ColumnStatistics(ndv=200, min=1900, max=2099, data_type="bigint")}),
    })
    b = B()
    sales = b.read("sales", [("s_date", "i64"), ("s_amt", "i64")])
    for dates, days in (
            (b.filter(b.read("dates", [("d_sk", "i64"), ("d_year", "i64")]),
                      b.call("equal", b.ref(1), b.i64(2000))), 365),
            # filtered on the key itself, within the days sold: the same containment
            (b.filter(b.read("dates", [("d_sk", "i64"), ("d_year", "i64")]),
                      b.call("between", b.ref(0), b.i64(2000), b.i64(2364))), 365)):
        plan = b.plan(b.join(sales, dates, b.call("equal", b.ref(0), b.ref(2))))
        assert estimate(plan, stats)[0].rows == pytest.approx(100_000 * days / 1000, rel=0.05)
    # a customer dimension whose keys the orders span entirely keeps its whole domain (see above)
    assert join_rows("INNER", filter_cust=True) == pytest.approx(2000)


def test_cross_and_physical_joins():
    b = B()
    cross = b.plan({"cross": {"left": b.read("orders", ORDERS), "right": b.read("cust", CUST)}})
    assert estimate(cross, join_stats())[0].rows == pytest.approx(1e7)
    hj = {"hashJoin": {"left": b.read("orders", ORDERS), "right": b.read("cust", CUST), "type": "JOIN_TYPE_INNER",
                       "keys": [{"left": {"directReference": {"structField": {"field": 1}}},
                                 "right": {"directReference": {"structField": {"field": 0}}},
                                 "comparison": {"simple": "SIMPLE_COMPARISON_TYPE_EQ"}}]}}
    assert estimate(b.plan(hj), join_stats())[0].rows == pytest.approx(10_000)
    mj = {"mergeJoin": {**hj["hashJoin"], "type": "JOIN_TYPE_LEFT_SEMI"}}
    assert estimate(b.plan(mj), join_stats())[0].rows == pytest.approx(10_000)


def test_aggregate_groups_and_functional_dependencies():
    b = B()
    # group by o_cust: 500 groups
    plan = b.plan(b.aggregate(b.read("orders", ORDERS), [1], [("count", [])]))
    est, _, _ = estimate(plan, join_stats())
    assert est.rows == pytest.approx(500, rel=0.01)
    assert len(est.columns) == 2
    # global aggregate: one row
    assert estimate(b.plan(b.aggregate(b.read("orders", ORDERS), [], [("count", [])])), join_stats())[0].rows == 1
    # group by (c_id, c_seg) after the join: c_seg depends on c_id (a key of cust) -> 500 groups, not 500*5
    joined = b.join(b.read("orders", ORDERS), b.read("cust", CUST), b.call("equal", b.ref(1), b.ref(2)))
    plan = b.plan(b.aggregate(joined, [2, 3]))
    assert estimate(plan, join_stats())[0].rows == pytest.approx(500, rel=0.02)


def test_fetch_topn_sets_expand_window_exchange():
    b = B()
    read = b.read("orders", ORDERS)
    fetch = {"fetch": {"input": read, "offsetExpr": b.i64(9_995), "countExpr": b.i64(100)}}
    assert estimate(b.plan(fetch), join_stats())[0].rows == pytest.approx(5)
    top = {"topN": {"input": read, "count": b.i64(7), "sorts": [{"expr": b.ref(0), "direction": "SORT_DIRECTION_ASC_NULLS_FIRST"}]}}
    assert estimate(b.plan(top), join_stats())[0].rows == 7
    union = {"set": {"inputs": [read, read], "op": "SET_OP_UNION_ALL"}}
    assert estimate(b.plan(union), join_stats())[0].rows == 20_000
    distinct = {"set": {"inputs": [read, read], "op": "SET_OP_UNION_DISTINCT"}}
    assert 10_000 <= estimate(b.plan(distinct), join_stats())[0].rows <= 20_000
    expand = {"expand": {"input": read, "fields": [{"switchingField": {"duplicates": [b.ref(0), b.ref(1), b.i64(0)]}},
                                                    {"consistentField": b.ref(1)}]}}
    assert estimate(b.plan(expand), join_stats())[0].rows == 30_000
    exchange = {"exchange": {"input": read, "broadcast": {}}}
    assert estimate(b.plan(exchange), join_stats())[0].rows == 10_000


def test_expand_of_a_column_without_statistics():
    """A switching field over a column of no known distinct count and a literal: its count is unknown
    (it raised TypeError, and every command naming no place, on every such ExpandRel)."""
    b = B()
    expand = {"expand": {"input": b.read("unknown", [("k", "i64")]),
                         "fields": [{"switchingField": {"duplicates": [b.ref(0), b.i64(5)]}}]}}
    (est, *_) = estimate(b.plan(expand), join_stats())
    assert est.columns[0] is None or est.columns[0].ndv is None


def test_virtual_table_and_unknown_relations():
    b = B()
    rows = [{"fields": [b.i64(i), b.string(s)]} for i, s in ((1, "a"), (2, "a"), (3, "b"))]
    vt = {"read": {"virtualTable": {"expressions": rows},
                   "baseSchema": {"names": ["k", "s"], "struct": {"types": [{"i64": {}}, {"string": {}}]}}}}
    est, _, _ = estimate(b.plan(vt))
    assert est.rows == 3 and est.columns[0].ndv == 3 and est.columns[1].ndv == 2
    plan = b.plan(b.filter(vt, b.call("equal", b.ref(1), b.string("a"))))
    assert estimate(plan)[0].rows == pytest.approx(1.5)
    # an unknown function: the default selectivity, never an exception
    plan = b.plan(b.filter(b.read("t", T_COLS), b.call("my_udf", b.ref(0))))
    assert estimate(plan, t_stats())[0].rows == pytest.approx(250)
    ext = {"extensionSingle": {"input": b.read("t", T_COLS)}}
    assert estimate(b.plan(ext), t_stats())[0].rows == 1000


def test_hints_override_and_absent_hint():
    b = B()
    read = b.read("t", T_COLS, common={"hint": {"stats": {"rowCount": 42, "recordSize": 10}}})
    est, _, _ = estimate(b.plan(b.filter(read, b.call("equal", b.ref(0), b.i64(5)))), t_stats())
    assert est.rows == pytest.approx(4.2, rel=0.05)
    est, _, _ = estimate(b.plan(read), t_stats())
    assert est.rows == 42 and est.width == 10 and est.source == "hint"
    # row_count 0 with record_size 0 is an absent hint
    absent = b.read("t", T_COLS, common={"hint": {"stats": {"rowCount": 0, "recordSize": 0}}})
    assert estimate(b.plan(absent), t_stats())[0].rows == 1000
    empty = b.read("t", T_COLS, common={"hint": {"stats": {"rowCount": 0, "recordSize": 8}}})
    assert estimate(b.plan(empty), t_stats())[0].rows == 0


def test_width_from_statistics_and_types():
    b = B()
    est, _, _ = estimate(b.plan(b.read("t", T_COLS)), t_stats())
    # x, y: 8 bytes; s: avg_len 1; d: 4; p: decimal(15,2): 8
    assert est.width == pytest.approx(8 + 8 + 1 + 4 + 8)


def test_invalidate_forgets(tmp_path):
    b = B()
    plan = b.plan(b.read("t", T_COLS))
    g = to_dag(plan)
    est = CardinalityEstimator(g, t_stats())
    node = g.graph["roots"][0]["node"]
    assert est.estimate(node).rows == 1000
    g.nodes[node]["rel"].read.common.hint.stats.row_count = 5
    g.nodes[node]["rel"].read.common.hint.stats.record_size = 1
    assert est.estimate(node).rows == 1000  # memoised
    est.invalidate()
    assert est.estimate(node).rows == 5


def test_file_statistics_and_local_parquet_files(tmp_path):
    doc = {"version": 1, "tables": {"t": {"row_count": 1000, "columns": {"x": {"ndv": 20, "min": 1, "max": 20}}}}}
    (tmp_path / "s.json").write_text(json.dumps(doc))
    assert rows_of(lambda b: b.call("equal", b.ref(0), b.i64(5)), FileStatistics(tmp_path / "s.json")) == pytest.approx(50)
    path = tmp_path / "f.parquet"
    pq.write_table(pa.table({"x": pa.array(range(300), pa.int64())}), path)
    b = B()
    read = {"read": {"localFiles": {"items": [{"uriFile": f"file://{path}", "parquet": {}}]},
                     "baseSchema": {"names": ["x"], "struct": {"types": [{"i64": {}}]}}}}
    plan = b.plan(b.filter(read, b.call("lt", b.ref(0), b.i64(30))))
    assert estimate(plan)[0].rows == pytest.approx(30)


def test_sampling_formula_and_q_error():
    assert distinct_after_sampling(10, 1000, 0.5) == pytest.approx(10)
    assert distinct_after_sampling(1000, 1000, 0.1) == pytest.approx(100)
    assert q_error(10, 100) == q_error(100, 10) == 10
    assert q_error(0, 1) == 1


def test_never_crashes_on_datafusion_like_plans(tmp_path):
    """Every relation of a plan gets an estimate, also without statistics and for odd relations."""
    b = B()
    plan = b.plan({"project": {"input": b.aggregate(b.read("t", T_COLS), [0], [("sum", [4]), ("avg", [1])]),
                               "expressions": [b.call("add", b.ref(1), b.ref(2))]}})
    for stats in (None, t_stats()):
        g = to_dag(plan)
        est = CardinalityEstimator(g, stats)
        for n in g:
            e = est.estimate(n)
            assert e.rows >= 0 and e.width >= 1 and not math.isnan(e.rows)


def test_measure_distributions_for_having():
    """HAVING sum(x) > c: the sum of ~m values per group is about normal."""
    b = B()
    agg = b.aggregate(b.read("t", T_COLS), [1], [("sum", [0])])  # group by y (1000 values): 1 row per group
    plan = b.plan(b.filter(agg, b.call("gt", b.ref(1), b.i64(5))))
    est, _, _ = estimate(plan, t_stats(y=ColumnStatistics(ndv=100, min=1, max=100)))
    # 10 rows per group, x uniform on 1..10 (mean 5.5): sum > 5 holds for nearly every group
    assert est.rows == pytest.approx(100, rel=0.05)
    plan = b.plan(b.filter(agg, b.call("gt", b.ref(1), b.i64(500))))
    assert estimate(plan, t_stats(y=ColumnStatistics(ndv=100, min=1, max=100)))[0].rows <= 1.0


# --------------------------------------------------------------------------------------------------
# Against Spark on TPC-H SF 0.01
# --------------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def tpch_statistics(spark, tpch_dir):
    from optimizer.spark.statistics import default_statistics
    from workloads.tpch import table_paths

    tables = {k: str(v) for k, v in table_paths(tpch_dir, include_t=False).items()}
    return default_statistics(spark=spark, tables=tables), tables


@pytest.mark.spark
@pytest.mark.parametrize("query", [10, 14])
def test_q_error_against_spark(spark, tpch_dir, tpch_statistics, query):
    from optimizer.explain.estimates import count_rows, subtree_plan, tree_order
    from optimizer.spark import SparkBackend
    from workloads.producers import datafusion_plan
    from workloads.tpch import tpch_query

    statistics, tables = tpch_statistics
    plan = load_plan(datafusion_plan(tpch_query(query), tables))
    g = to_dag(plan)
    annotate_schemas(g)
    est = CardinalityEstimator(g, statistics)
    backend = SparkBackend(spark, tables=tables)
    nodes = [n for n in tree_order(g) if g.nodes[n]["kind"] in ("join", "aggregate")]
    errors = [q_error(est.estimate(n).rows, count_rows(backend, subtree_plan(g, n))) for n in nodes]
    errors.sort()
    assert errors[len(errors) // 2] <= 1.5, errors
    assert errors[-1] <= 20, errors


@pytest.mark.spark
def test_lying_hints_change_estimates_not_results(spark, tpch_dir, tpch_statistics):
    """Hints that lie (every relation 'has 1 row') change the plan the optimizer picks, never its answer."""
    from optimizer.difftest.results import compare_tables
    from optimizer.driver import Optimizer
    from optimizer.spark import SparkBackend
    from workloads.producers import datafusion_plan
    from workloads.tpch import tpch_query

    statistics, tables = tpch_statistics
    plan = load_plan(datafusion_plan(tpch_query(3), tables))
    lying = Plan()
    lying.CopyFrom(plan)
    g = to_dag(lying)
    for n in g:
        body = getattr(g.nodes[n]["rel"], g.nodes[n]["kind"])
        if "common" in body.DESCRIPTOR.fields_by_name:
            body.common.hint.stats.row_count = 1.0
            body.common.hint.stats.record_size = 1.0
    from optimizer.dag import from_dag

    lying = from_dag(g)
    g2 = to_dag(lying)
    est = CardinalityEstimator(g2, statistics)
    assert all(est.estimate(n).rows == 1.0 for n in g2)
    backend = SparkBackend(spark, tables=tables)
    expected = backend.execute(plan)
    for p in (lying, Optimizer(statistics=statistics).run(lying).plan):
        verdict = compare_tables(backend.execute(p), expected)
        assert verdict.equal, verdict.reason


@settings(max_examples=400, deadline=None)
@given(bounds=st.lists(st.integers(-50, 50), min_size=1, max_size=12),
       a=st.integers(-60, 60), width=st.integers(0, 40), scale=st.sampled_from([1.0, 0.01, 1e6]),
       integral=st.booleans(), shuffled=st.booleans())
def test_histogram_mass_skips_only_bins_outside_the_range(bounds, a, width, scale, integral, shuffled):
    points = sorted(bounds)
    if shuffled:  # bins out of order: every bin is read
        points = list(reversed(points))
    bins = [(points[i] * scale, points[i + 1] * scale, 1.0) for i in range(len(points) - 1)]
    bins = bins or [(points[0] * scale, points[0] * scale, 1.0)]
    h = Histogram(height=10.0, bins=bins)
    every_bin = Histogram(height=10.0, bins=bins)
    vars(every_bin)["upper_bounds"] = None  # read as unordered bins: the sum runs over every bin
    lo, hi = a * scale, (a + width) * scale
    assert _histogram_mass(h, lo, hi, integral) == _histogram_mass(every_bin, lo, hi, integral)


def test_a_join_estimate_keeps_a_side_s_sets_where_the_other_adds_nothing():
    """The predicates applied below and the functional dependencies of a join are its inputs' together:
    where one side has none and the join adds none, the join's are the other side's own (not a copy:
    the estimates of a wide join graph hold thousands), and equal to the union either way."""
    import networkx as nx
    from optimizer.cost.estimates import ColumnEstimate, RelEstimate

    estimator = CardinalityEstimator(nx.DiGraph(), None)
    left = RelEstimate(1000.0, 8.0, [ColumnEstimate(ndv=100.0)], applied=frozenset({b"p"}), fds=frozenset({(1, 2)}))
    right = RelEstimate(10.0, 8.0, [ColumnEstimate(ndv=10.0)])
    joined = estimator.join("INNER", left, right, [(0, 0)], [])
    assert joined.applied is left.applied and joined.fds is left.fds
    flipped = estimator.join("INNER", right, left, [(0, 0)], [])
    assert flipped.applied is left.applied and flipped.fds is left.fds
    both = estimator.join("INNER", left, RelEstimate(10.0, 8.0, [ColumnEstimate(ndv=10.0)], applied=frozenset({b"q"}),
                                                     fds=frozenset({(3, 4)})), [(0, 0)], [])
    assert both.applied == {b"p", b"q"} and both.fds == {(1, 2), (3, 4)}


def test_evolve_copies_an_estimate_without_making_instance_dicts():
    """``evolve`` gives what ``dataclasses.replace`` gives, attribute by attribute: neither the estimate
    nor its copy gets a ``__dict__`` object of its own (the garbage collector walks every such dict, and
    a wide join graph's estimates are tens of thousands)."""
    import dataclasses
    import gc

    from optimizer.cost.estimates import ColumnEstimate, RelEstimate, evolve

    col = ColumnEstimate(ndv=10.0, min=1.0, max=9.0, origin=(3, 1))
    copy = evolve(col, ndv=5.0)
    assert copy == dataclasses.replace(col, ndv=5.0) and col.ndv == 10.0
    rel = RelEstimate(100.0, 8.0, [col], applied=frozenset({b"p"}))
    assert evolve(rel, rows=50.0) == dataclasses.replace(rel, rows=50.0)
    for obj in (col, copy, rel, evolve(rel, rows=50.0)):
        names = {f.name for f in dataclasses.fields(obj)}
        assert not any(type(r) is dict and names <= r.keys() for r in gc.get_referents(obj)), obj
    with pytest.raises(TypeError, match="no field 'rowz'"):
        evolve(rel, rowz=1.0)
