"""window_to_consistent_partition: hand-built plans before and after (window groups, their
stacking order, column order); the ``spark`` tests run window queries with several partitionings
before and after on Spark and compare the answers.
"""

from __future__ import annotations

import json
from collections import Counter

import pytest
from physical_rule_plans import ANCHOR, PHYSICAL, QUIET, A, _same_answer, call, kinds, lit, optimize, ref, top

from optimizer.dag import inputs
from optimizer.driver import Optimizer
from optimizer.expr_utils import field_index, has_window_function
from optimizer.plan_io import load_plan
from optimizer.schema.check import check_plan


def window(name: str, partitions: list[int], sorts: list[int], args: list[dict] = (), *,
           bounds: str = "BOUNDS_TYPE_RANGE", lower: str = "unbounded", upper: str = "currentRow",
           partition_exprs: list[dict] = ()) -> dict:
    return {"windowFunction": {
        "functionReference": ANCHOR[name], "arguments": [{"value": a} for a in args],
        "partitions": [ref(p) for p in partitions] + list(partition_exprs),
        "sorts": [{"expr": ref(s), "direction": "SORT_DIRECTION_ASC_NULLS_LAST"} for s in sorts],
        "outputType": {"i64": {"nullability": "NULLABILITY_NULLABLE"}},
        "phase": "AGGREGATION_PHASE_INITIAL_TO_RESULT",
        "boundsType": bounds, "lowerBound": {lower: {}}, "upperBound": {upper: {}}}}


def window_stack(g, node) -> list:
    """The ConsistentPartitionWindowRels under ``node``, top first."""
    out = []
    while True:
        children = inputs(g, node)
        if not children:
            return out
        node = children[0]
        if g.nodes[node]["kind"] == "window":
            out.append(g.nodes[node]["rel"].window)


def test_windows_grouped_by_partitioning_and_order():
    exprs = [
        window("rank", [1], [0]),
        window("sum", [1], [], [ref(2)], bounds="BOUNDS_TYPE_ROWS", upper="unbounded"),
        window("row_number", [1], [0, 2]),
        window("count", [1], [0], [ref(2)], bounds="BOUNDS_TYPE_ROWS", lower="unbounded"),  # same group as rank
        window("sum", [2], [0], [ref(1)]),
        call("add", lit(1), window("sum", [1], [], [ref(2)], bounds="BOUNDS_TYPE_ROWS", upper="unbounded"),
             out="i64"),  # the same window function as the second one, nested
    ]
    result = optimize({"project": {"input": A, "expressions": exprs}})
    g, node = top(result)
    assert g.nodes[node]["kind"] == "project"
    stack = window_stack(g, node)
    assert len(stack) == 4  # (b | a), (b | -), (b | a, c), (c | a)
    specs = [([field_index(p) for p in w.partition_expressions], [field_index(s.expr) for s in w.sorts],
              len(w.window_functions)) for w in reversed(stack)]  # bottom first
    # same partitioning adjacent; sorts sharing a prefix adjacent, the longer below
    assert specs == [([1], [0, 2], 1), ([1], [0], 2), ([1], [], 1), ([2], [0], 1)]
    group = next(w for w in stack if len(w.window_functions) == 2)
    bounds = [(w.bounds_type, w.lower_bound.WhichOneof("kind"), w.upper_bound.WhichOneof("kind"))
              for w in group.window_functions]
    assert bounds == [(2, "unbounded", "current_row"), (1, "unbounded", "current_row")]
    # the output columns are the project's: 3 input columns, then the 6 expressions in order
    assert len(result.graph.nodes[node]["schema"].types) == 9


def test_window_partition_expression_kept():
    w = window("rank", [], [0], partition_exprs=[call("add", ref(1), lit(1), out="i64")])
    g, node = top(optimize({"project": {"input": A, "expressions": [w], "common": {"emit": {"outputMapping": [3, 0]}}}}))
    stack = window_stack(g, node) if g.nodes[node]["kind"] == "project" else [g.nodes[node]["rel"].window]
    assert len(stack) == 1
    assert stack[0].partition_expressions[0].WhichOneof("rex_type") == "scalar_function"


def test_project_of_plain_windows_needs_no_project():
    g, node = top(optimize({"project": {"input": A, "expressions": [window("rank", [1], [0])]}}))
    assert g.nodes[node]["kind"] == "window"


def test_project_without_windows_is_untouched():
    g, node = top(optimize({"project": {"input": A, "expressions": [call("add", ref(0), lit(1), out="i64")]}}))
    assert kinds(g) == Counter({"project": 1, "read": 1})


WINDOW_QUERIES = {
    "three_partitionings": """
        select o_custkey, o_orderkey,
          row_number() over (partition by o_custkey order by o_orderdate, o_orderkey) as rn,
          sum(o_totalprice) over (partition by o_custkey) as total,
          rank() over (partition by o_orderstatus order by o_totalprice desc) as rk,
          1 + count(*) over (partition by o_custkey order by o_orderdate, o_orderkey
                             rows between 2 preceding and current row) as c3
        from orders where o_orderkey < 3000""",
    "shared_prefix": """
        select l_orderkey, l_linenumber,
          sum(l_quantity) over (partition by l_orderkey order by l_linenumber) as running,
          count(*) over (partition by l_orderkey) as lines,
          max(l_extendedprice) over (partition by l_orderkey order by l_linenumber
                                     rows between unbounded preceding and unbounded following) as biggest,
          min(l_discount) over (partition by l_suppkey order by l_shipdate, l_orderkey, l_linenumber) as m
        from lineitem where l_orderkey < 1000""",
    "expression_partition": """
        select n_name, n_regionkey,
          count(*) over (partition by n_regionkey % 2) as parity_count,
          dense_rank() over (partition by n_regionkey % 2 order by n_name) as dr,
          lag(n_name) over (order by n_nationkey) as previous
        from nation""",
}


@pytest.mark.spark
@pytest.mark.parametrize("name", sorted(WINDOW_QUERIES))
def test_window_queries_same_answer_on_spark(backend, tpch_tables, name):
    from workloads.producers import datafusion_plan

    plan = load_plan(datafusion_plan(WINDOW_QUERIES[name], tpch_tables))
    result = Optimizer(rules=PHYSICAL, config=QUIET).run(plan)
    after = kinds(result.graph)
    assert after["window"] >= 2, name
    assert not any(
        has_window_function(e, enter_subqueries=False)
        for x in result.graph if result.graph.nodes[x]["kind"] == "project"
        for e in result.graph.nodes[x]["rel"].project.expressions)
    _same_answer(backend, plan, result.plan, name)


def _nation() -> dict:
    names = ["n_nationkey", "n_name", "n_regionkey", "n_comment"]
    types = ["i32", "string", "i32", "string"]
    return {"read": {"namedTable": {"names": ["nation"]}, "baseSchema": {
        "names": names, "struct": {"types": [{t: {"nullability": "NULLABILITY_REQUIRED"}} for t in types]}}}}


@pytest.mark.spark
def test_one_project_with_several_window_groups_on_spark(backend):
    """A single projection holding four window specifications, nested and duplicated window functions,
    an expression partition and an emit that reorders: one window relation per group, same rows."""
    parity = call("modulus", ref(2), {"literal": {"i32": 2}}, out="i32")
    exprs = [
        call("add", lit(100), window("rank", [2], [0]), out="i64"),
        window("sum", [2], [], [ref(0)], bounds="BOUNDS_TYPE_ROWS", upper="unbounded"),
        window("row_number", [2], [1, 0]),
        window("count", [], [0], [ref(0)], partition_exprs=[parity], bounds="BOUNDS_TYPE_ROWS",
               lower="unbounded"),
        window("sum", [2], [], [ref(0)], bounds="BOUNDS_TYPE_ROWS", upper="unbounded"),
        window("rank", [2], [0]),
    ]
    rel = {"project": {"input": _nation(), "expressions": exprs,
                       "common": {"emit": {"outputMapping": [9, 1, 4, 5, 6, 7, 8, 0]}}}}
    doc = {"relations": [{"root": {"input": rel, "names": [f"c{i}" for i in range(8)]}}],
           "extensions": [{"extensionFunction": {"functionAnchor": a, "name": n, "extensionUrnReference": 4294967295}}
                          for n, a in ANCHOR.items()]}
    plan = load_plan(json.dumps(doc))
    result = Optimizer(rules=PHYSICAL, config=QUIET).run(plan)
    assert check_plan(result.plan) == []
    assert kinds(result.graph)["window"] == 4
    _same_answer(backend, plan, result.plan, "several window groups")
