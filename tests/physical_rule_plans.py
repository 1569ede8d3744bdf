"""Hand-built plans (JSON dicts) and helpers for the tests of the physical rules."""

from __future__ import annotations

import json
import time
from collections import Counter
from dataclasses import replace

from optimizer.cost.model import DEFAULT_CONSTANTS
from optimizer.cost.providers import MemoryStatistics
from optimizer.cost.statistics import TableStatistics
from optimizer.rules import implement_joins, sort_fetch_to_topn, window_to_consistent_partition

from optimizer.driver import Optimizer, OptimizerConfig
from optimizer.plan_io import load_plan
from optimizer.schema.check import check_plan

PHYSICAL = [implement_joins.RULE, sort_fetch_to_topn.RULE, window_to_consistent_partition.RULE]


NO_BROADCAST = OptimizerConfig(broadcast_threshold_bytes=0, annotate_estimates=False)


QUIET = OptimizerConfig(annotate_estimates=False)


#: Tests that run a rewrite on Spark use SF 0.01 data, where a semi-join reduction does not pay for the
#: broadcast job it adds: they price it without the fixed costs of a shuffle and a broadcast.
NO_FIXED_COSTS = OptimizerConfig(annotate_estimates=False,
                                 cost_constants=replace(DEFAULT_CONSTANTS, shuffle_stage=0.0, broadcast_job=0.0))


FUNCTIONS = ["equal", "gt", "and", "lt", "is_not_distinct_from", "add", "rank", "sum", "row_number", "count", "modulus"]


ANCHOR = {name: i + 1 for i, name in enumerate(FUNCTIONS)}


def ref(i: int) -> dict:
    return {"selection": {"directReference": {"structField": {"field": i}}, "rootReference": {}}}


def lit(v: int) -> dict:
    return {"literal": {"i64": str(v)}}


def call(name: str, *args: dict, out: str = "bool") -> dict:
    return {"scalarFunction": {"functionReference": ANCHOR[name],
                               "outputType": {out: {"nullability": "NULLABILITY_NULLABLE"}},
                               "arguments": [{"value": a} for a in args]}}


def read(table: str, *columns: str, rows: float | None = None, width: float = 8.0) -> dict:
    body = {"namedTable": {"names": [table]}, "baseSchema": {
        "names": list(columns),
        "struct": {"types": [{"i64": {"nullability": "NULLABILITY_REQUIRED"}} for _ in columns]}}}
    if rows is not None:
        body["common"] = {"hint": {"stats": {"rowCount": rows, "recordSize": width}}}
    return {"read": body}


def join(left: dict, right: dict, expression: dict | None, type_: str = "INNER", **extra) -> dict:
    body = {"type": f"JOIN_TYPE_{type_}", "left": left, "right": right, **extra}
    if expression is not None:
        body["expression"] = expression
    return {"join": body}


def plan_of(rel: dict) -> object:
    doc = {"relations": [{"rel": rel}],
           "extensions": [{"extensionFunction": {"functionAnchor": a, "name": n, "extensionUrnReference": 4294967295}}
                          for n, a in ANCHOR.items()]}
    return load_plan(json.dumps(doc))


def sizes(**tables: float) -> MemoryStatistics:
    return MemoryStatistics({name: TableStatistics(row_count=rows) for name, rows in tables.items()})


def optimize(rel: dict, rules=None, statistics=None, config: OptimizerConfig = QUIET):
    result = Optimizer(statistics=statistics, config=config, rules=rules or PHYSICAL).run(plan_of(rel))
    assert check_plan(result.plan) == []
    return result


def top(result):
    g = result.graph
    node = g.graph["roots"][0]["node"]
    return g, node


def kinds(g) -> Counter:
    return Counter(g.nodes[n]["kind"] for n in g)


def key_pairs(body) -> list[tuple[int, int, int]]:
    return [(k.left.direct_reference.struct_field.field, k.right.direct_reference.struct_field.field,
             k.comparison.simple) for k in body.keys]


A = read("a", "a0", "a1", "a2")  # columns 0..2


B = read("b", "b0", "b1")  # columns 3..4 of the join


def sort(rel: dict, *columns: int) -> dict:
    return {"sort": {"input": rel, "sorts": [{"expr": ref(c), "direction": "SORT_DIRECTION_DESC_NULLS_LAST"}
                                             for c in columns]}}


def fetch(rel: dict, count: dict | None, offset: dict | None = None, **extra) -> dict:
    body = {"input": rel, **extra}
    if count is not None:
        body["countExpr"] = count
    if offset is not None:
        body["offsetExpr"] = offset
    return {"fetch": body}


def _same_answer(backend, plan, rewritten, label: str) -> tuple[float, float]:
    from optimizer.difftest.results import compare_tables

    t0 = time.perf_counter()
    expected = backend.execute(plan)
    t1 = time.perf_counter()
    actual = backend.execute(rewritten)
    t2 = time.perf_counter()
    comparison = compare_tables(actual, expected)
    assert comparison, f"{label}: {comparison}"
    return t1 - t0, t2 - t1
