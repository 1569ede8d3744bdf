"""``distinct_semi_join_to_inner``: where a semi join under a DISTINCT becomes an inner join, where it must
not (measures, window functions, non-deterministic filters, outer joins, shared relations), and that the
rewritten plans give the original's rows on Spark (duplicate and NULL keys, chains, TPC-DS Q37 and Q82)."""

from __future__ import annotations

import pytest
from optimizer.rules.distinct_semi_join_to_inner import RULE
from rule_rewrites import forced_by, join_types
from substrait.proto import JoinRel, ReferenceRel, Rel, RelCommon

from optimizer.dag import annotate_schemas, to_dag
from optimizer.driver import Optimizer, OptimizerConfig
from optimizer.plan_io import load_plan
from optimizer.schema.check import check_plan
from testing.builder import Builder, aggregate, emit, filter_, join, lit, project, read, ref

SEMI, ANTI, INNER, LEFT = (JoinRel.JOIN_TYPE_LEFT_SEMI, JoinRel.JOIN_TYPE_LEFT_ANTI, JoinRel.JOIN_TYPE_INNER,
                           JoinRel.JOIN_TYPE_LEFT)


def small():
    return read("small", [("k", "i64"), ("v", "i64")], rows=10)


def big():
    return read("big", [("j", "i64")], rows=1e7)


forced = forced_by(RULE)


def semi_over(b: Builder, left, right, left_key: int = 0, width: int = 2):
    return join(left, right, SEMI, b.call("equal", ref(left_key), ref(width)))


def test_semi_join_under_distinct_becomes_inner():
    b = Builder()
    plan = b.plan(aggregate(semi_over(b, small(), big()), [0]), ["k"])
    out, fired = forced(plan)
    assert fired == 1 and join_types(out) == [INNER]
    assert check_plan(out) == []


def test_chain_through_projects_filters_and_inner_joins():
    """Both semi joins of ``DISTINCT over Project(Filter(Semi(Inner(Semi(a, b), c), d)))`` are converted
    (DataFusion's TPC-DS Q82 has two, one above the other)."""
    b = Builder()
    lower = semi_over(b, small(), big())
    inner = join(lower, read("c", [("c0", "i64")], rows=5), INNER, b.call("equal", ref(0), ref(2)))
    upper = join(inner, big(), SEMI, b.call("equal", ref(1), ref(3)))
    top = project(filter_(upper, b.call("gt", ref(1), lit(0))), b.call("add", ref(0), lit(1), out="i64"),
                  common=emit(3, 1))
    out, fired = forced(b.plan(aggregate(top, [0, 1]), ["k1", "v"]))
    assert fired == 1 and join_types(out) == [INNER, INNER, INNER]
    assert check_plan(out) == []


def test_semi_join_in_a_semi_joins_right_input():
    """Once the upper semi join is an inner join, its right input is read for its distinct rows too."""
    b = Builder()
    lower = semi_over(b, small(), big())
    rel = aggregate(join(read("t", [("t0", "i64")], rows=5), lower, SEMI, b.call("equal", ref(0), ref(1))), [0])
    out, fired = forced(b.plan(rel, ["t0"]))
    assert fired == 1 and join_types(out) == [INNER, INNER]
    assert check_plan(out) == []


def test_the_semi_joins_emit_is_kept():
    b = Builder()
    semi = join(small(), big(), SEMI, b.call("equal", ref(0), ref(2)), common=emit(1))
    out, fired = forced(b.plan(aggregate(semi, [0]), ["v"]))
    assert fired == 1 and check_plan(out) == []
    g = to_dag(out)
    (proj,) = [n for n in g if g.nodes[n]["kind"] == "project"]
    assert list(g.nodes[proj]["rel"].project.common.emit.output_mapping) == [1]


def test_a_producers_row_count_is_not_kept_on_the_relations_with_more_rows():
    b = Builder()
    counted = RelCommon()
    counted.hint.stats.row_count = 10
    top = project(semi_over(b, small(), big()), b.call("add", ref(0), lit(1), out="i64"), common=counted)
    out, fired = forced(b.plan(aggregate(top, [2]), ["k1"]))
    g = to_dag(out)
    assert fired == 1
    assert not any(g.nodes[n]["rel"].project.common.HasField("hint") for n in g if g.nodes[n]["kind"] == "project")


@pytest.mark.parametrize("case", ["measure", "window", "random_filter", "anti", "under_left_join",
                                  "read_twice", "no_groups"])
def test_left_alone(case):
    b = Builder()
    semi = semi_over(b, small(), big())
    if case == "measure":  # count(*) counts the copies
        rel = aggregate(semi, [0], b.agg("count"))
    elif case == "window":  # row_number() numbers the copies
        rel = aggregate(project(semi, b.window("row_number", out="i64")), [0, 2])
    elif case == "random_filter":  # evaluated once per copy
        rel = aggregate(filter_(semi, b.call("gt", b.call("random", out="fp64"), lit(0.5, "fp64"))), [0])
    elif case == "anti":
        rel = aggregate(join(small(), big(), ANTI, b.call("equal", ref(0), ref(2))), [0])
    elif case == "under_left_join":  # outer joins are not followed
        rel = aggregate(join(read("t", [("t0", "i64")], rows=5), semi, LEFT, b.call("equal", ref(0), ref(1))), [0])
    elif case == "read_twice":  # another reader needs the semi join's rows as they are
        shared = Rel(reference=ReferenceRel(subtree_ordinal=0))
        plan = b.plan(join(aggregate(shared, [0]), shared, INNER, b.call("equal", ref(0), ref(1))),
                      ["k", "k2", "v"], shared=[semi])
        out, fired = forced(plan)
        assert fired == 0
        return
    else:
        rel = aggregate(semi, [])
    out, fired = forced(b.plan(rel, [f"c{i}" for i in range(_width(b, rel))]))
    assert fired == 0


def _width(b: Builder, rel) -> int:
    g = to_dag(b.plan(rel, ["x"] * 8))
    annotate_schemas(g)
    return len(g.nodes[g.graph["roots"][0]["node"]]["schema"].types)


def test_kept_only_where_the_model_prices_it_cheaper():
    """With the whole optimizer: a large right side is built from the small left one (the conversion
    stays); a small right side keeps the semi join (the inner join would only add rows)."""
    b = Builder()
    kept = Optimizer(config=OptimizerConfig(annotate_estimates=False)).run(
        b.plan(aggregate(semi_over(b, small(), big()), [0]), ["k"]))
    assert any(e.rule == RULE.name for e in kept.events)
    b = Builder()
    tiny_right = read("tiny", [("j", "i64")], rows=3)
    left = read("wide", [("k", "i64"), ("v", "i64")], rows=1e7)
    declined = Optimizer(config=OptimizerConfig(annotate_estimates=False)).run(
        b.plan(aggregate(semi_over(b, left, tiny_right), [0]), ["k"]))
    assert not any(e.rule == RULE.name for e in declined.events)


# ------------------------------------------------------------------------------------------ Spark

QUERIES = {
    "big_right_side": "select distinct n_name from nation where n_nationkey in (select c_nationkey from customer)",
    "null_keys": """select distinct o_orderpriority, o_orderstatus from orders where
        (case when o_orderkey % 3 = 0 then null else o_custkey end) in
        (select case when c_custkey % 4 = 0 then null else c_custkey end from customer where c_acctbal > 0)""",
    "chain_with_inner_joins": """select distinct p_brand, s_name from part, partsupp, supplier
        where p_partkey = ps_partkey and ps_suppkey = s_suppkey and p_size < 10
        and p_partkey in (select l_partkey from lineitem where l_quantity > 45)
        and s_suppkey in (select l_suppkey from lineitem where l_discount > 0.09)""",
}


def _same_rows(backend, plan, rewritten, label):
    from optimizer.difftest.results import compare_tables

    assert check_plan(rewritten) == []
    comparison = compare_tables(backend.execute(rewritten), backend.execute(plan))
    assert comparison, f"{label}: {comparison}"


@pytest.mark.spark
@pytest.mark.parametrize("name", sorted(QUERIES))
def test_same_answer_on_spark(backend, tpch_tables, tpch_statistics, name):
    """The rewrite alone (forced) and the whole optimizer give the original's rows."""
    from workloads.producers import datafusion_plan

    plan = load_plan(datafusion_plan(QUERIES[name], tpch_tables))
    rewritten, fired = forced(plan)
    assert fired == 1, f"{name}: DataFusion's plan has no semi join under its DISTINCT"
    _same_rows(backend, plan, rewritten, name)
    optimized = Optimizer(statistics=tpch_statistics, config=OptimizerConfig(annotate_estimates=False)).run(plan)
    _same_rows(backend, plan, optimized.plan, f"{name} optimized")


@pytest.mark.spark
@pytest.mark.parametrize("query", [37, 82])
def test_tpcds_semi_joins_become_inner(spark, query):
    """DataFusion writes TPC-DS Q37 and Q82 as ``item ⋈ inventory ⋉ date_dim ⋉ *_sales`` under a
    DISTINCT: with the tables' statistics the optimizer joins the sales table as an inner join, built from
    the few items, and the answer stays the same."""
    from optimizer.spark import SparkBackend
    from optimizer.spark.statistics import default_statistics
    from workloads.producers import datafusion_plan
    from workloads.tpcds import generate_tpcds, tpcds_queries, tpcds_table_paths

    data = generate_tpcds(0.01)
    tables = tpcds_table_paths(data)
    plan = load_plan(datafusion_plan(tpcds_queries()[query], tables))
    assert SEMI in join_types(plan)
    result = Optimizer(statistics=default_statistics(tables=tables),
                       config=OptimizerConfig(annotate_estimates=False)).run(plan)
    assert any(e.rule == RULE.name for e in result.events)
    assert SEMI not in join_types(result.plan)
    _same_rows(SparkBackend(spark, tables=tables), plan, result.plan, f"Q{query}")
