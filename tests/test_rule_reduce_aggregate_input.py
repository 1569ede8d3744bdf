"""``reduce_aggregate_input``: where the semi-join reduction applies, where it must not, and that the
reduced plans give the original's rows on Spark (NULL keys, outer, anti and semi joins, TPC-H)."""

from __future__ import annotations

import json

import pytest
from optimizer.cost.providers import MemoryStatistics
from optimizer.cost.statistics import ColumnStatistics, TableStatistics
from optimizer.rules import reduce_aggregate_input
from optimizer.rules.reduce_aggregate_input import RULE
from physical_rule_plans import NO_FIXED_COSTS
from substrait.proto import JoinRel

from optimizer.dag import inputs
from optimizer.driver import Optimizer, OptimizerConfig
from optimizer.plan_io import load_plan
from optimizer.schema.check import check_plan

QUIET = OptimizerConfig(annotate_estimates=False)
ANCHOR = {"equal": 1, "sum": 2, "rand": 3, "gt": 4, "and": 5}


def ref(i: int) -> dict:
    return {"selection": {"directReference": {"structField": {"field": i}}, "rootReference": {}}}


def call(name: str, *args: dict) -> dict:
    output = {"fp64": {}} if name == "rand" else {"bool": {}}
    return {"scalarFunction": {"functionReference": ANCHOR[name], "outputType": output,
                               "arguments": [{"value": a} for a in args]}}


def read(table: str, *columns: str) -> dict:
    return {"read": {"namedTable": {"names": [table]}, "baseSchema": {
        "names": list(columns), "struct": {"types": [{"i64": {"nullability": "NULLABILITY_REQUIRED"}} for _ in columns]}}}}


def aggregate(input_: dict, keys: list[int], measure_of: int, groupings: list[list[int]] | None = None) -> dict:
    return {"aggregate": {
        "input": input_,
        "groupingExpressions": [ref(k) for k in keys],
        "groupings": [{"expressionReferences": g} for g in (groupings or [list(range(len(keys)))])],
        "measures": [{"measure": {"functionReference": ANCHOR["sum"], "outputType": {"i64": {}},
                                  "phase": "AGGREGATION_PHASE_INITIAL_TO_RESULT",
                                  "invocation": "AGGREGATION_INVOCATION_ALL",
                                  "arguments": [{"value": ref(measure_of)}]}}]}}


def join(left: dict, right: dict, expression: dict, type_: str = "INNER") -> dict:
    return {"join": {"type": f"JOIN_TYPE_{type_}", "left": left, "right": right, "expression": expression}}


def plan_of(rel: dict):
    return load_plan(json.dumps({
        "relations": [{"rel": rel}],
        "extensions": [{"extensionFunction": {"functionAnchor": a, "name": n, "extensionUrnReference": 4294967295}}
                       for n, a in ANCHOR.items()]}))


STATS = MemoryStatistics({
    "small": TableStatistics(row_count=100, columns={"s0": ColumnStatistics(ndv=100)}),
    "big": TableStatistics(row_count=1_000_000, columns={"b0": ColumnStatistics(ndv=100_000)}),
})
SMALL = read("small", "s0", "s1")
BIG = read("big", "b0", "b1")
AGG = aggregate(BIG, [0], 1)  # [b0, sum(b1)]


def reduced(rel: dict) -> int:
    """How many semi-joins the rule put under aggregates."""
    result = Optimizer(statistics=STATS, rules=[RULE], config=QUIET).run(plan_of(rel))
    assert check_plan(result.plan) == []
    g = result.graph
    return sum(
        1 for n in g if g.nodes[n]["kind"] == "aggregate"
        for c in g.successors(n) if g.nodes[c]["kind"] == "join" and g.nodes[c]["rel"].join.type == JoinRel.JOIN_TYPE_LEFT_SEMI
    )


@pytest.mark.parametrize("type_,agg_side,fires", [
    ("INNER", "right", True), ("INNER", "left", True),
    ("LEFT_SEMI", "right", True), ("LEFT_SEMI", "left", True),
    ("LEFT", "right", True), ("LEFT", "left", False),  # the preserved side keeps unmatched rows
    ("RIGHT", "left", True), ("RIGHT", "right", False),
    ("LEFT_ANTI", "right", True), ("LEFT_ANTI", "left", False),
    ("OUTER", "right", False), ("LEFT_MARK", "right", False),
])
def test_join_types(type_, agg_side, fires):
    left, right = (SMALL, AGG) if agg_side == "right" else (AGG, SMALL)
    key = (ref(0), ref(2))  # small.s0 = aggregate key (right) / aggregate key = small.s0 (left)
    assert reduced(join(left, right, call("equal", *key), type_)) == int(fires)


def test_only_grouping_keys_of_one_grouping_set():
    on_measure = join(SMALL, AGG, call("equal", ref(0), ref(3)))
    assert reduced(on_measure) == 0
    rollup = join(SMALL, aggregate(BIG, [0], 1, groupings=[[0], []]), call("equal", ref(0), ref(2)))
    assert reduced(rollup) == 0
    not_equal = join(SMALL, AGG, call("gt", ref(0), ref(2)))
    assert reduced(not_equal) == 0


def test_other_side_must_be_deterministic():
    limited = {"fetch": {"input": SMALL, "countExpr": {"literal": {"i64": "10"}}}}
    assert reduced(join(limited, AGG, call("equal", ref(0), ref(2)))) == 0
    # A random filter's rows are not the same twice; the relation under it holds every key value the
    # filter lets through, every time, so it reduces the aggregate instead.
    random_filter = {"filter": {"input": SMALL, "condition": call("gt", call("rand"), ref(0))}}
    result = Optimizer(statistics=STATS, rules=[RULE], config=QUIET).run(
        plan_of(join(random_filter, AGG, call("equal", ref(0), ref(2)))))
    g = result.graph
    (semi,) = [n for n in g if g.nodes[n]["kind"] == "join" and g.nodes[n]["rel"].join.type == JoinRel.JOIN_TYPE_LEFT_SEMI]
    reducer = g.nodes[list(g.successors(inputs(g, semi)[1]))[0]]
    assert reducer["kind"] == "read"


def test_the_reducer_is_the_input_of_the_other_side_that_holds_its_keys():
    """DataFusion's TPC-H Q17 joins the aggregate with ``lineitem ⋈ part``, whose key is ``part``'s:
    ``part`` alone holds every key value the join outputs, and is far cheaper to compute again."""
    other = join(BIG, SMALL, call("equal", ref(0), ref(2)))  # [b0, b1, s0, s1]
    other = {"project": {"input": other, "expressions": [], "common": {"emit": {"outputMapping": [2, 3]}}}}
    result = Optimizer(statistics=STATS, rules=[RULE], config=QUIET).run(
        plan_of(join(other, AGG, call("equal", ref(0), ref(2)))))
    g = result.graph
    (semi,) = [n for n in g if g.nodes[n]["kind"] == "join" and g.nodes[n]["rel"].join.type == JoinRel.JOIN_TYPE_LEFT_SEMI]
    keys_of = list(g.successors(inputs(g, semi)[1]))[0]
    assert g.nodes[keys_of]["kind"] == "read" and list(g.nodes[keys_of]["rel"].read.named_table.names) == ["small"]


def test_a_reducer_across_a_join_equality_with_fewer_keys_reads_less():
    """DataFusion's TPC-H Q20: the aggregate's two keys are compared with ``partsupp ⋉ part``, whose
    partkeys are ``part``'s by the semi-join's equality. ``part`` holds one key's values at a fraction of
    the reads, so the aggregate's input is semi-joined with it on that key alone."""
    agg = aggregate(BIG, [0, 1], 1)  # [b0, b1, sum(b1)]
    other = join(BIG, SMALL, call("equal", ref(0), ref(2)), "LEFT_SEMI")  # [b0, b1]
    result = Optimizer(statistics=STATS, rules=[RULE], config=QUIET).run(
        plan_of(join(other, agg, call("and", call("equal", ref(0), ref(2)), call("equal", ref(1), ref(3))))))
    assert check_plan(result.plan) == []
    g = result.graph
    (semi,) = [n for n in g if g.nodes[n]["kind"] == "join" and g.nodes[n]["rel"].join.type == JoinRel.JOIN_TYPE_LEFT_SEMI
               and any(g.nodes[p]["kind"] == "aggregate" for p in g.predecessors(n))]
    keys_of = list(g.successors(inputs(g, semi)[1]))[0]
    assert list(g.nodes[keys_of]["rel"].read.named_table.names) == ["small"]
    assert g.nodes[semi]["rel"].join.expression.scalar_function.function_reference == ANCHOR["equal"]


def test_a_shared_aggregate_is_left_alone():
    plan = plan_of(join(SMALL, {"reference": {"subtreeOrdinal": 1}}, call("equal", ref(0), ref(2))))
    plan.relations.add().rel.ParseFromString(plan_of(AGG).relations[0].rel.SerializeToString())
    other = plan.relations.add().root
    other.input.reference.subtree_ordinal = 1
    other.names.extend(["k", "s"])
    result = Optimizer(statistics=STATS, rules=[RULE], config=QUIET).run(plan)
    assert not result.events


def test_an_aggregate_written_twice_is_left_alone():
    """Two copies of one aggregate (a CTE a producer inlined twice): Spark computes them once; reduced,
    each by its own join, they would be two computations."""
    once = join(SMALL, AGG, call("equal", ref(0), ref(2)))
    assert reduced(once) == 1
    assert reduced(join(once, AGG, call("equal", ref(0), ref(4)))) == 0


def test_only_when_it_pays():
    # Y as big as the aggregate's input: reading it again would not pay.
    assert reduced(join(BIG, AGG, call("equal", ref(0), ref(2)))) == 0
    # Without statistics nothing is known to be small.
    result = Optimizer(rules=[RULE], config=QUIET).run(plan_of(join(SMALL, AGG, call("equal", ref(0), ref(2)))))
    assert not result.events


def test_applies_once():
    result = Optimizer(statistics=STATS, rules=[RULE], config=QUIET).run(
        plan_of(join(SMALL, AGG, call("equal", ref(0), ref(2)))))
    assert len(result.events) == 1


# ------------------------------------------------------------------------------------------ Spark

QUERIES = {
    "null_keys": """select n_name, t.c from nation join
        (select case when o_orderkey % 5 = 0 then null else o_custkey % 25 end as k, count(*) as c
         from orders group by 1) t on n_nationkey = t.k where n_regionkey = 1""",
    "left_join_null_side": """select c_custkey, t.s from customer left join
        (select o_custkey, sum(o_totalprice) as s from orders group by o_custkey) t
        on c_custkey = t.o_custkey where c_nationkey = 3""",
    "not_exists": """select c_custkey from customer where c_nationkey = 1 and not exists
        (select 1 from (select o_custkey, count(*) as c from orders group by o_custkey) t
         where t.o_custkey = c_custkey and t.c > 10)""",
    "in_with_aggregate_outside": """select * from
        (select o_custkey, count(*) as c, max(o_totalprice) as m from orders group by o_custkey) t
        where o_custkey in (select c_custkey from customer where c_nationkey = 5)""",
    "two_keys_and_residual": """select ps_partkey, ps_suppkey from partsupp, part where ps_partkey = p_partkey
        and p_size = 15 and ps_availqty > (select 0.5 * sum(l_quantity) from lineitem
        where l_partkey = ps_partkey and l_suppkey = ps_suppkey)""",
}


def _check_on_spark(backend, plan, result, label):
    from optimizer.difftest.results import compare_tables

    assert any(e.rule == RULE.name for e in result.events), f"{label}: the rule did not fire"
    assert check_plan(result.plan) == []
    comparison = compare_tables(backend.execute(result.plan), backend.execute(plan))
    assert comparison, f"{label}: {comparison}"


@pytest.mark.spark
@pytest.mark.parametrize("name", sorted(QUERIES))
def test_same_answer_on_spark(backend, tpch_tables, tpch_statistics, monkeypatch, name):
    """Forced to fire (the cost gate aside), the reduced plan gives the original's rows."""
    from workloads.producers import datafusion_plan

    monkeypatch.setattr(reduce_aggregate_input, "_pays", lambda *args: True)
    plan = load_plan(datafusion_plan(QUERIES[name], tpch_tables))
    result = Optimizer(statistics=tpch_statistics, rules=[RULE], config=NO_FIXED_COSTS).run(plan)
    _check_on_spark(backend, plan, result, name)


@pytest.mark.spark
@pytest.mark.parametrize("query", [17, 20])
def test_tpch_decorrelated_subqueries(backend, datafusion_tpch_plans, tpch_statistics, query):
    """DataFusion's Q17 and Q20 aggregate a whole table for a correlated subquery; with the tables'
    statistics the full optimizer reduces that aggregate's input, and the answer stays the same."""
    plan = datafusion_tpch_plans[query]
    result = Optimizer(statistics=tpch_statistics, config=NO_FIXED_COSTS).run(plan)
    _check_on_spark(backend, plan, result, f"Q{query}")


def test_tpch_q2_is_not_reduced(datafusion_tpch_plans, tpch_statistics):
    """Q2's other input is a five-way join that reads far more rows than the aggregate takes in:
    computing it again is bounded out (at SF 1 the rewrite gained nothing measurable on Q2)."""
    result = Optimizer(statistics=tpch_statistics, config=QUIET).run(datafusion_tpch_plans[2])
    assert not any(e.rule == RULE.name for e in result.events)
