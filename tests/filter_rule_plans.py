"""Hand-built plans (JSON dicts over the TPC-H tables) and helpers for the tests of the filter rules."""

from __future__ import annotations

import importlib
import json

from optimizer.dag import inputs, to_dag
from optimizer.difftest.results import compare_tables
from optimizer.driver import Optimizer, OptimizerConfig
from optimizer.explain import explain_plan
from optimizer.expr_utils import conjuncts
from optimizer.load.functions import function_table
from optimizer.plan_io import load_plan
from workloads.tpch import TPCH_SCHEMAS

MY_RULES = ("simplify_predicates", "extract_join_conditions", "push_filters", "filter_into_read")


FN = {name: i + 1 for i, name in enumerate([
    "and", "or", "not", "equal", "not_equal", "lt", "gt", "lte", "gte", "upper", "random", "like", "add",
    "is_null", "count", "row_number", "contains",
])}


REQ = "NULLABILITY_REQUIRED"


BOOL = {"bool": {"nullability": REQ}}


NBOOL = {"bool": {"nullability": "NULLABILITY_NULLABLE"}}


def _arrow_type(t) -> dict:
    import pyarrow as pa

    if pa.types.is_int32(t):
        return {"i32": {"nullability": REQ}}
    if pa.types.is_int64(t):
        return {"i64": {"nullability": REQ}}
    if pa.types.is_decimal(t):
        return {"decimal": {"precision": t.precision, "scale": t.scale, "nullability": REQ}}
    if pa.types.is_date32(t):
        return {"date": {"nullability": REQ}}
    return {"string": {"nullability": REQ}}


def read(table: str, **extra) -> dict:
    schema = TPCH_SCHEMAS[table]
    body = {"namedTable": {"names": [table]},
            "baseSchema": {"names": schema.names, "struct": {"types": [_arrow_type(f.type) for f in schema],
                                                               "nullability": REQ}}}
    body.update(extra)
    return {"read": body}


def col(i: int) -> dict:
    return {"selection": {"directReference": {"structField": {"field": i}}, "rootReference": {}}}


def i32(v: int) -> dict:
    return {"literal": {"i32": v}}


def s(v: str) -> dict:
    return {"literal": {"string": v}}


def boolean(v: bool) -> dict:
    return {"literal": {"boolean": v}}


def call(name: str, *args: dict, out: dict = BOOL) -> dict:
    return {"scalarFunction": {"functionReference": FN[name], "outputType": out,
                               "arguments": [{"value": a} for a in args]}}


def emit(*mapping: int) -> dict:
    return {"common": {"emit": {"outputMapping": list(mapping)}}}


def filt(input_: dict, condition: dict, **extra) -> dict:
    return {"filter": {"input": input_, "condition": condition, **extra}}


def join(kind: str, left: dict, right: dict, expression: dict | None = None, **extra) -> dict:
    body = {"type": f"JOIN_TYPE_{kind}", "left": left, "right": right, **extra}
    if expression is not None:
        body["expression"] = expression
    return {"join": body}


def plan_of(rel: dict, names: list[str], extra_relations: list[dict] | None = None):
    return load_plan(json.dumps({
        "extensions": [{"extensionFunction": {"functionAnchor": a, "name": n, "extensionUrnReference": 4294967295}}
                       for n, a in FN.items()],
        "relations": (extra_relations or []) + [{"root": {"input": rel, "names": names}}]}))


def optimize(plan, *rule_names: str, capabilities=None):
    rules = [importlib.import_module(f"optimizer.rules.{n}").RULE for n in rule_names]
    config = OptimizerConfig(annotate_estimates=False)
    return Optimizer(capabilities=capabilities, rules=rules, config=config).run(plan)


def fired(result) -> list[str]:
    return [e.rule for e in result.events]


def shape(plan) -> str:
    """``filter(join(read,read))``: the relation kinds of the (first) root, nested."""
    g = to_dag(plan)

    def walk(n: int) -> str:
        kids = inputs(g, n)
        kind = g.nodes[n]["kind"]
        return kind + ("(" + ",".join(walk(c) for c in kids) + ")" if kids else "")

    return walk(g.graph["roots"][-1]["node"])


def nodes_of(plan, kind: str) -> list:
    """The relation messages (``rel.<kind>``) of one kind, parents first."""
    g = to_dag(plan)
    order = list(__import__("networkx").topological_sort(g))
    return [getattr(g.nodes[n]["rel"], kind) for n in order if g.nodes[n]["kind"] == kind]


def n_conjuncts(plan, expr) -> int:
    return len(conjuncts(expr, function_table(plan)))


def same_answer(backend, before, after, min_rows: int = 1):
    """Run both plans on Spark; they must give the same rows (and at least ``min_rows`` of them)."""
    expected = backend.execute(before)
    actual = backend.execute(after)
    verdict = compare_tables(actual, expected)
    assert verdict, f"{verdict}\nbefore:\n{explain_plan(before)}\nafter:\n{explain_plan(after)}"
    assert expected.num_rows >= min_rows
    return expected


def datafusion_unoptimised_plan(sql: str, tables):
    """DataFusion's Substrait plan of its *unoptimised* logical plan: comma joins are inner JoinRels
    without an expression under one FilterRel (the optimised plans already have their join conditions)."""
    from datafusion.substrait import Producer

    from workloads.producers import datafusion_context

    ctx = datafusion_context(tables)
    return load_plan(Producer.to_substrait_plan(ctx.sql(sql).logical_plan(), ctx).encode())


def corpus_plan(name: str):
    from workloads.corpus import corpus_root

    path = corpus_root() / "substrait_consumer" / "snapshots" / "producer" / "integration" / "tpch" / name
    return load_plan(path)


# nation: n_nationkey#0 i32, n_name#1, n_regionkey#2 i32, n_comment#3; region: r_regionkey#0, r_name#1, r_comment#2
NATION_NAMES = ["n_nationkey", "n_name", "n_regionkey", "n_comment"]


NATION_REGION = NATION_NAMES + ["r_regionkey", "r_name", "r_comment"]
