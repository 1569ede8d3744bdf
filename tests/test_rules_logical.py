"""The filter rules: simplify_predicates, extract_join_conditions, push_filters, filter_into_read.

Each rule is shown rewriting hand-built plans and real ones (DataFusion's TPC-H plans, optimised and
unoptimised, and the consumer-testing corpus), with assertions on the rewritten structure; the tests
marked ``spark`` also run the plan before and after on Spark (TPC-H SF 0.01) and compare the answers.
"""

from __future__ import annotations

import importlib
import json

import pytest

from optimizer.capabilities import as_capabilities, default_capabilities, from_dict, load_capabilities
from optimizer.dag import inputs, to_dag
from optimizer.difftest.results import compare_tables
from optimizer.driver import Optimizer, OptimizerConfig
from optimizer.errors import PlanError
from optimizer.explain import explain_plan
from optimizer.expr_utils import conjuncts
from optimizer.functions import function_table
from optimizer.plan_io import load_plan
from workloads.tpch import TPCH_SCHEMAS

MY_RULES = ("simplify_predicates", "extract_join_conditions", "push_filters", "filter_into_read")

# ------------------------------------------------------------------------------------ plan builder

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


# --------------------------------------------------------------------------------------- helpers


def optimize(plan, *rule_names: str, capabilities=None):
    rules = [importlib.import_module(f"rules.{n}").RULE for n in rule_names]
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


@pytest.fixture(scope="module")
def backend(spark, tpch_dir):
    from optimizer.spark import SparkBackend

    return SparkBackend(spark, tables=tpch_dir)


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


def test_rules_are_registered_in_their_phases():
    from rules import RULES

    phases = {r.name: r.phase for r in RULES}
    assert phases["simplify_predicates"] == "normalise"
    assert phases["extract_join_conditions"] == "normalise"
    assert phases["push_filters"] == "logical"
    assert phases["filter_into_read"] == "physical"


# --------------------------------------------------------------------------- simplify_predicates


def test_simplify_drops_true_and_flattens():
    cond = call("and", call("and", boolean(True), call("lt", col(0), i32(5))),
                call("or", boolean(False), call("equal", col(2), i32(1))))
    before = plan_of(filt(read("nation"), cond), NATION_NAMES)
    after = optimize(before, "simplify_predicates").plan
    (f,) = nodes_of(after, "filter")
    text = explain_plan(after)
    assert "((n_nationkey#0 < 5) AND (n_regionkey#2 = 1))" in text, text
    assert n_conjuncts(after, f.condition) == 2


def test_simplify_keeps_nondeterministic_duplicates():
    rnd = call("lt", call("random", out={"fp64": {"nullability": REQ}}), {"literal": {"fp64": 0.5}})
    before = plan_of(filt(read("nation"), call("and", rnd, rnd, boolean(True))), NATION_NAMES)
    (f,) = nodes_of(optimize(before, "simplify_predicates").plan, "filter")
    assert len(f.condition.scalar_function.arguments) == 2  # random() < 0.5 twice is not random() < 0.5


@pytest.mark.spark
def test_simplify_removes_an_always_true_filter_keeping_its_emit(backend):
    before = plan_of(filt(read("nation"), call("or", boolean(True), call("lt", col(0), i32(3))), **emit(1, 0)),
                     ["n_name", "n_nationkey"])
    after = optimize(before, "simplify_predicates").plan
    assert shape(after) == "read"
    (r,) = nodes_of(after, "read")
    assert list(r.common.emit.output_mapping) == [1, 0]
    assert same_answer(backend, before, after).num_rows == 25


@pytest.mark.spark
@pytest.mark.parametrize("dead", [boolean(False), {"literal": {"null": NBOOL}}], ids=["false", "null"])
def test_simplify_turns_a_filter_that_keeps_nothing_into_an_empty_table(backend, dead):
    before = plan_of(filt(join("INNER", read("nation"), read("region"), call("equal", col(2), col(4))),
                          call("and", call("lt", col(0), i32(10)), dead)), NATION_REGION)
    after = optimize(before, "simplify_predicates").plan
    assert shape(after) == "read"
    (r,) = nodes_of(after, "read")
    assert r.WhichOneof("read_type") == "virtual_table" and not r.virtual_table.expressions
    assert len(r.base_schema.struct.types) == 7
    same_answer(backend, before, after, min_rows=0)
    assert backend.execute(after).num_rows == 0


@pytest.mark.spark
def test_simplify_factors_the_common_conjunct_out_of_an_or(backend):
    # (n_regionkey = r_regionkey AND r_name = 'ASIA') OR (n_regionkey = r_regionkey AND n_nationkey < 3)
    eq = call("equal", col(2), col(4))
    cond = call("or", call("and", eq, call("equal", col(5), s("ASIA"))), call("and", eq, call("lt", col(0), i32(3))))
    before = plan_of(filt({"cross": {"left": read("nation"), "right": read("region")}}, cond), NATION_REGION)
    after = optimize(before, "simplify_predicates", "extract_join_conditions").plan
    # -> n_regionkey = r_regionkey AND (r_name = 'ASIA' OR n_nationkey < 3): both read both sides
    assert shape(after) == "join(read,read)"
    (j,) = nodes_of(after, "join")
    assert "(n_regionkey#2 = r_regionkey#4) AND" in explain_plan(after).splitlines()[1]
    assert n_conjuncts(after, j.expression) == 2
    same_answer(backend, before, after)


def test_simplify_absorption():
    a = call("lt", col(0), i32(3))
    before = plan_of(filt(read("nation"), call("or", a, call("and", a, call("equal", col(2), i32(1))))), NATION_NAMES)
    after = optimize(before, "simplify_predicates").plan
    assert "Filter((n_nationkey#0 < 3))" in explain_plan(after)


def test_simplify_on_datafusion_tpch_only_flattens(datafusion_tpch_plans):
    """DataFusion's optimised plans have no constant to fold: the rule only flattens nested ANDs/ORs,
    in Q6, Q12, Q16 and Q19 (twice)."""
    counts = {}
    for q, data in datafusion_tpch_plans.items():
        result = optimize(load_plan(data), "simplify_predicates")
        counts[q] = fired(result).count("simplify_predicates")
        for f in nodes_of(result.plan, "filter"):
            top = f.condition
            fns = function_table(result.plan)
            args = [a.value for a in top.scalar_function.arguments]
            name = fns.get(top.scalar_function.function_reference).name if top.HasField("scalar_function") else None
            if name in ("and", "or"):  # no nested call of the same connective is left
                for a in args:
                    if a.HasField("scalar_function"):
                        assert fns.get(a.scalar_function.function_reference).name != name
    assert {q for q, n in counts.items() if n} == {6, 12, 16, 19}


# ----------------------------------------------------------------------- extract_join_conditions


@pytest.mark.spark
def test_extract_moves_the_join_predicate_into_a_cross_product(backend):
    cond = call("and", call("equal", col(2), col(4)), call("equal", col(5), s("ASIA")), call("lt", col(0), i32(20)))
    before = plan_of(filt({"cross": {"left": read("nation"), "right": read("region")}}, cond), NATION_REGION)
    result = optimize(before, "extract_join_conditions")
    after = result.plan
    assert fired(result) == ["extract_join_conditions"]
    assert shape(after) == "filter(join(read,read))"
    (j,) = nodes_of(after, "join")
    (f,) = nodes_of(after, "filter")
    assert j.type == 1  # INNER
    assert n_conjuncts(after, j.expression) == 1 and n_conjuncts(after, f.condition) == 2  # one-side stay
    assert len(same_answer(backend, before, after)) == 4  # the nations of ASIA below key 20


@pytest.mark.spark
def test_extract_through_nested_joins_with_emits(backend):
    # (nation x region) with emit, x supplier; the filter has an emit too.
    inner = {"cross": {"left": read("nation"), "right": read("region"), **emit(0, 2, 4, 5)}}  # nk, rk, r_rk, r_name
    cond = call("and", call("equal", col(1), col(2)), call("equal", col(0), col(7)), call("equal", col(3), s("ASIA")))
    rel = filt({"cross": {"left": inner, "right": read("supplier")}}, cond, **emit(4, 3))  # s_suppkey, r_name
    before = plan_of(rel, ["s_suppkey", "r_name"])
    after = optimize(before, "extract_join_conditions").plan
    assert shape(after) == "filter(join(join(read,read),read))"
    outer, lower = nodes_of(after, "join")
    assert "(n_regionkey#2 = r_regionkey#4), emit=[0, 2, 4, 5]" in explain_plan(after)  # its direct columns
    assert list(lower.common.emit.output_mapping) == [0, 2, 4, 5]
    assert n_conjuncts(after, outer.expression) == 1
    same_answer(backend, before, after)


def test_extract_leaves_subqueries_nondeterminism_and_shared_inputs_alone():
    rnd = call("lt", call("random", out={"fp64": {"nullability": REQ}}), col(4))  # reads both sides? no: right only
    both_rnd = call("lt", call("add", col(0), col(4), out={"i32": {"nullability": REQ}}),
                    call("random", out={"fp64": {"nullability": REQ}}))
    cross = {"cross": {"left": read("nation"), "right": read("region")}}
    before = plan_of(filt(cross, call("and", rnd, both_rnd)), NATION_REGION)
    result = optimize(before, "extract_join_conditions")
    assert fired(result) == [] and shape(result.plan) == "filter(cross(read,read))"
    # a cross product read twice (a shared subtree) is not rewritten for one of its readers
    shared = plan_of({"set": {"op": "SET_OP_UNION_ALL", "inputs": [
        filt({"reference": {"subtreeOrdinal": 0}}, call("equal", col(2), col(4))),
        {"reference": {"subtreeOrdinal": 0}}]}}, NATION_REGION, extra_relations=[{"rel": cross}])
    assert fired(optimize(shared, "extract_join_conditions")) == []


def test_extract_on_datafusion_unoptimised_q5_comma_joins(tpch_tables):
    """DataFusion's optimised Q5 already has its join conditions (nothing to extract: checked below);
    its unoptimised plan is the comma-join shape: five inner JoinRels without an expression under one
    filter. One application puts each equality at the lowest join that pairs its tables."""
    from workloads.tpch import tpch_query

    before = datafusion_unoptimised_plan(tpch_query(5), tpch_tables)
    assert all(not j.HasField("expression") for j in nodes_of(before, "join"))
    result = optimize(before, "simplify_predicates", "extract_join_conditions")
    after = result.plan
    assert "extract_join_conditions" in fired(result)
    joins = nodes_of(after, "join")
    assert len(joins) == 5 and all(j.HasField("expression") for j in joins)
    assert sum(n_conjuncts(after, j.expression) for j in joins) == 6  # the six equalities of Q5
    (f,) = nodes_of(after, "filter")  # left: r_name = 'ASIA' and the two dates
    assert n_conjuncts(after, f.condition) == 3


COMMA_JOIN_SQL = """
SELECT n_name, count(*) AS suppliers, sum(s_acctbal) AS balance
FROM supplier, nation, region
WHERE s_nationkey = n_nationkey AND n_regionkey = r_regionkey AND r_name = 'EUROPE' AND s_acctbal > 0
GROUP BY n_name
"""


@pytest.mark.spark
def test_extract_on_a_datafusion_comma_join_on_spark(backend, tpch_tables):
    before = datafusion_unoptimised_plan(COMMA_JOIN_SQL, tpch_tables)
    assert "filter(join(join(read,read),read))" in shape(before)
    result = optimize(before, *MY_RULES)
    after = result.plan
    assert {"extract_join_conditions", "push_filters", "filter_into_read"} <= set(fired(result))
    assert "join(join(read,read),read)" in shape(after)  # both filters went into the reads
    assert all(j.HasField("expression") for j in nodes_of(after, "join"))
    assert same_answer(backend, before, after).num_rows == 5


def test_extract_finds_nothing_in_datafusion_optimised_plans(datafusion_tpch_plans):
    for q, data in datafusion_tpch_plans.items():
        assert "extract_join_conditions" not in fired(optimize(load_plan(data), "extract_join_conditions")), q


def test_extract_and_push_on_isthmus_q5_corpus_plan():
    before = corpus_plan("q05-isthmus_plan.json")
    assert shape(before).count("cross") == 5
    result = optimize(before, "simplify_predicates", "extract_join_conditions", "push_filters")
    after = result.plan
    assert fired(result) == ["extract_join_conditions", "push_filters"]
    assert "cross" not in shape(after) and shape(after).count("join") == 5
    assert not any(f for f in nodes_of(after, "filter") if n_conjuncts(after, f.condition) > 2)
    assert shape(after).count("filter(read)") == 2  # the date range on ORDERS and r_name on REGION


# ---------------------------------------------------------------------------------- push_filters


@pytest.mark.spark
def test_push_left_join_keeps_null_side_conjuncts_above(backend):
    """A filter on the right (null-supplying) side of a LEFT join must stay above it: below, it would
    remove region rows and let their nations through padded with NULLs instead of removing them."""
    on = call("equal", col(2), col(4))
    cond = call("and", call("not_equal", col(4), i32(2)), call("lt", col(0), i32(20)))
    before = plan_of(filt(join("LEFT", read("nation"), read("region"), on), cond), NATION_REGION)
    result = optimize(before, "push_filters")
    after = result.plan
    assert shape(after) == "filter(join(filter(read),read))"
    top, below = nodes_of(after, "filter")
    assert "r_regionkey#4 <> 2" in explain_plan(after).splitlines()[1]  # stays above the join
    assert n_conjuncts(after, top.condition) == 1 and n_conjuncts(after, below.condition) == 1
    expected = same_answer(backend, before, after)
    assert expected.num_rows == 16
    # the wrong rewrite (the right-side conjunct below the join) gives another answer on this data
    wrong = plan_of(join("LEFT", filt(read("nation"), call("lt", col(0), i32(20))),
                         filt(read("region"), call("not_equal", col(0), i32(2))), on), NATION_REGION)
    assert not compare_tables(backend.execute(wrong), expected)


@pytest.mark.spark
def test_push_left_join_on_conjuncts(backend):
    """ON conjuncts: the right side's go into the right input; the left (preserved) side's stay."""
    on = call("and", call("equal", col(2), col(4)), call("equal", col(5), s("ASIA")), call("lt", col(0), i32(5)))
    before = plan_of(join("LEFT", read("nation"), read("region"), on), NATION_REGION)
    after = optimize(before, "push_filters").plan
    assert shape(after) == "join(read,filter(read))"
    (j,) = nodes_of(after, "join")
    assert n_conjuncts(after, j.expression) == 2  # the equality and n_nationkey < 5
    same_answer(backend, before, after)


@pytest.mark.spark
def test_push_semi_and_anti_joins(backend):
    on = call("and", call("equal", col(2), col(4)), call("equal", col(5), s("ASIA")), call("lt", col(0), i32(10)))
    semi = plan_of(filt(join("LEFT_SEMI", read("nation"), read("region"), on), call("gt", col(0), i32(2))),
                   NATION_NAMES)
    after = optimize(semi, "push_filters").plan
    # the filter above goes left; ON: r_name = 'ASIA' right, n_nationkey < 10 left (a semi join drops
    # the left rows without a match anyway)
    assert shape(after) == "join(filter(read),filter(read))"
    same_answer(backend, semi, after)
    anti = plan_of(join("LEFT_ANTI", read("nation"), read("region"), on), NATION_NAMES)
    after = optimize(anti, "push_filters").plan
    # an anti join outputs the left rows WITHOUT a match: n_nationkey < 10 must stay in ON
    assert shape(after) == "join(read,filter(read))"
    (j,) = nodes_of(after, "join")
    assert n_conjuncts(after, j.expression) == 2
    assert same_answer(backend, anti, after).num_rows == 23


@pytest.mark.spark
def test_push_through_project_substitutes_expressions(backend):
    plus = call("add", col(0), i32(1), out={"i32": {"nullability": REQ}})
    project = {"project": {"input": read("nation"), "expressions": [plus], **emit(4, 1)}}  # k1, n_name
    cond = call("and", call("gt", col(0), i32(10)), call("lt", col(1), s("M")))
    before = plan_of(filt(project, cond), ["k1", "n_name"])
    after = optimize(before, "push_filters").plan
    assert shape(after) == "project(filter(read))"
    assert "((n_nationkey#0 + 1) > 10)" in explain_plan(after)
    same_answer(backend, before, after)


def test_push_stops_at_window_functions_fetch_and_measures():
    window = {"windowFunction": {"functionReference": FN["row_number"], "outputType": {"i64": {"nullability": REQ}},
                                 "partitions": [col(2)], "phase": "AGGREGATION_PHASE_INITIAL_TO_RESULT",
                                 "invocation": "AGGREGATION_INVOCATION_ALL"}}
    project = {"project": {"input": read("nation"), "expressions": [window]}}
    before = plan_of(filt(project, call("lt", col(0), i32(3))), NATION_NAMES + ["rn"])
    assert fired(optimize(before, "push_filters")) == []
    fetch = {"fetch": {"input": read("nation"), "count": "5"}}
    assert fired(optimize(plan_of(filt(fetch, call("lt", col(0), i32(3))), NATION_NAMES), "push_filters")) == []


@pytest.mark.spark
def test_push_below_aggregate_on_keys_only(backend):
    count = {"measure": {"functionReference": FN["count"], "outputType": {"i64": {"nullability": REQ}},
                         "arguments": [{"value": col(0)}], "phase": "AGGREGATION_PHASE_INITIAL_TO_RESULT",
                         "invocation": "AGGREGATION_INVOCATION_ALL"}}
    agg = {"aggregate": {"input": read("nation"), "groupingExpressions": [col(2)],
                         "groupings": [{"expressionReferences": [0]}], "measures": [count]}}
    cond = call("and", call("gt", col(0), i32(0)), call("gte", col(1), {"literal": {"i64": "5"}}))
    before = plan_of(filt(agg, cond), ["n_regionkey", "n"])
    after = optimize(before, "push_filters").plan
    assert shape(after) == "filter(aggregate(filter(read)))"
    assert "(n_regionkey#2 > 0)" in explain_plan(after)
    same_answer(backend, before, after)


@pytest.mark.spark
@pytest.mark.parametrize("op", ["SET_OP_UNION_ALL", "SET_OP_UNION_DISTINCT", "SET_OP_MINUS_PRIMARY",
                                "SET_OP_INTERSECTION_MULTISET"])
def test_push_into_every_input_of_a_set_operation(backend, op):
    second = filt(read("nation"), call("equal", col(2), i32(3)))
    before = plan_of(filt({"set": {"op": op, "inputs": [read("nation"), second]}},
                          call("lte", col(2), i32(3))), NATION_NAMES)
    after = optimize(before, "push_filters").plan
    assert shape(after) == "set(filter(read),filter(read))"  # the second one merged with its filter
    same_answer(backend, before, after)


@pytest.mark.spark
def test_push_through_sort_and_merge_filters(backend):
    sort = {"sort": {"input": filt(read("nation"), call("lt", col(0), i32(20))),
                     "sorts": [{"expr": col(1), "direction": "SORT_DIRECTION_ASC_NULLS_LAST"}]}}
    before = plan_of(filt(sort, call("equal", col(2), i32(1))), NATION_NAMES)
    after = optimize(before, "push_filters").plan
    assert shape(after) == "sort(filter(read))"
    (f,) = nodes_of(after, "filter")
    assert n_conjuncts(after, f.condition) == 2
    same_answer(backend, before, after)


def test_push_never_moves_subqueries_or_nondeterminism():
    exists = {"subquery": {"setPredicate": {"predicateOp": "PREDICATE_OP_EXISTS", "tuples": filt(
        read("region"), call("equal", col(0), {"selection": {"directReference": {"structField": {"field": 2}},
                                                             "outerReference": {"stepsOut": 1}}}))}}}
    rnd = call("lt", call("random", out={"fp64": {"nullability": REQ}}), {"literal": {"fp64": 0.5}})
    before = plan_of(filt(join("INNER", read("nation"), read("region"), call("equal", col(2), col(4))),
                          call("and", exists, rnd, call("lt", col(4), i32(2)))), NATION_REGION)
    after = optimize(before, "push_filters").plan
    assert shape(after) == "filter(join(read,filter(read)))"
    (top, _) = nodes_of(after, "filter")
    assert n_conjuncts(after, top.condition) == 2  # EXISTS and random() stay above the join


@pytest.mark.spark
def test_push_on_datafusion_unoptimised_q19(backend, tpch_tables):
    """Q19's three ORed blocks share ``p_partkey = l_partkey`` and the l_shipmode/l_shipinstruct tests:
    factored out, they become an equi-join key and filters on lineitem."""
    from workloads.tpch import tpch_query

    before = datafusion_unoptimised_plan(tpch_query(19), tpch_tables)
    result = optimize(before, *MY_RULES)
    after = result.plan
    assert shape(after).endswith("join(read,read)))")
    reads = nodes_of(after, "read")
    assert all(r.HasField("filter") for r in reads)
    same_answer(backend, before, after)


@pytest.mark.spark
@pytest.mark.parametrize("name", ["q03-isthmus_plan.json", "q13-isthmus_plan.json"])
def test_push_on_corpus_plans(backend, name):
    before = corpus_plan(name)
    result = optimize(before, "simplify_predicates", "extract_join_conditions", "push_filters")
    assert "push_filters" in fired(result)
    same_answer(backend, before, result.plan)


def test_push_filters_on_datafusion_tpch_finds_nothing(datafusion_tpch_plans):
    """DataFusion's optimiser pushes filters down itself: on its 22 plans push_filters has nothing to do."""
    for q, data in datafusion_tpch_plans.items():
        assert fired(optimize(load_plan(data), "push_filters")) == [], q


# ------------------------------------------------------------------------------ filter_into_read

SPEC_PROFILE = {"name": "spec-example", "default": "none", "rules": [
    {"function": ["and", "or", "not"], "support": "full"},
    {"function": ["lt", "gt", "equal"], "args": ["integer", "integer"], "support": "full"},
    {"function": ["lt", "gt", "equal"], "args": ["text", "text"], "support": "best_effort"}]}


def test_filter_into_read_spec_example_exactly():
    """The specification's example: integers fully, strings best effort;
    ``my_int < 10 and my_string < 'x' and upper(my_string) > 'B'``."""
    rel = filt({"read": {"namedTable": {"names": ["t"]}, "baseSchema": {"names": ["my_int", "my_string"], "struct": {
        "types": [{"i32": {"nullability": REQ}}, {"string": {"nullability": REQ}}]}}}},
        call("and", call("lt", col(0), i32(10)), call("lt", col(1), s("x")),
             call("gt", call("upper", col(1), out={"string": {"nullability": REQ}}), s("B"))))
    after = optimize(plan_of(rel, ["my_int", "my_string"]), "filter_into_read", capabilities=from_dict(SPEC_PROFILE)).plan
    assert explain_plan(after).splitlines()[1:] == [
        "|-+ Filter(((my_string#1 < 'x') AND (upper(my_string#1) > 'B'))) -> [my_int: i32, my_string: string]",
        "  |-+ Read(t, filter=(my_int#0 < 10), best_effort_filter=(my_string#1 < 'x')) -> [my_int: i32, my_string: string]",
    ]


@pytest.mark.spark
@pytest.mark.parametrize("ignore_best_effort", [False, True])
def test_filter_into_read_spec_example_on_spark(spark, tpch_dir, ignore_best_effort):
    """The same split on nation (n_nationkey as my_int, n_name as my_string), run with the best-effort
    filter applied and ignored: both give the answer of the original plan."""
    from optimizer.spark import SparkBackend

    cond = call("and", call("lt", col(0), i32(10)), call("lt", col(1), s("M")),
                call("gt", call("upper", col(1), out={"string": {"nullability": REQ}}), s("B")))
    before = plan_of(filt(read("nation"), cond), NATION_NAMES)
    after = optimize(before, "filter_into_read", capabilities=from_dict(SPEC_PROFILE)).plan
    assert shape(after) == "filter(read)"
    (r,) = nodes_of(after, "read")
    assert r.HasField("filter") and r.HasField("best_effort_filter")
    be = SparkBackend(spark, tables=tpch_dir, ignore_best_effort_filter=ignore_best_effort)
    same_answer(be, before, after)


@pytest.mark.spark
def test_filter_into_read_maps_through_projection_and_emit_and_ands_existing_filters(backend):
    """The filter reads projected columns; ReadRel.filter reads base_schema columns. An existing read
    filter is kept (ANDed), and the filter's emit moves onto the read."""
    projected = read("nation", projection={"select": {"structItems": [{"field": 2}, {"field": 1}, {"field": 0}]}},
                     filter=call("lt", col(0), i32(20)), **emit(1, 0, 2))  # n_name, n_regionkey, n_nationkey
    cond = call("and", call("equal", col(1), i32(1)), call("gt", col(2), i32(3)))
    before = plan_of(filt(projected, cond, **emit(0, 2)), ["n_name", "n_nationkey"])
    after = optimize(before, "filter_into_read").plan
    assert shape(after) == "read"
    (r,) = nodes_of(after, "read")
    text = explain_plan(after)
    assert "filter=((n_nationkey#0 < 20) AND (n_regionkey#2 = 1) AND (n_nationkey#0 > 3))" in text, text
    assert list(r.common.emit.output_mapping) == [1, 2]
    same_answer(backend, before, after)


def test_default_profile_models_what_spark_pushes_into_parquet():
    caps = default_capabilities()
    schema_plan = plan_of(read("nation"), NATION_NAMES)
    fns = function_table(schema_plan)
    from optimizer.schema import Schema

    nation = Schema.from_named_struct(schema_plan.relations[0].root.input.read.base_schema)

    def support(e: dict) -> str:
        from google.protobuf import json_format
        from substrait.proto import Expression

        return caps.conjunct_support(json_format.ParseDict(e, Expression()), nation, fns)

    assert support(call("lt", col(0), i32(3))) == "full"
    assert support(call("equal", s("x"), col(1))) == "full"  # constant on the left
    assert support(call("or", call("lt", col(0), i32(3)), call("is_null", col(1)))) == "full"
    assert support(call("like", col(1), s("AR%"))) == "full"  # a prefix: Spark's StartsWith
    assert support(call("like", col(1), s("AR%"), {"literal": {"null": {"string": {}}}})) == "full"  # DataFusion
    assert support(call("like", col(1), s("A_%"))) == "none"
    assert support(call("like", col(1), s("%AR%"))) == "none"
    assert support(call("contains", col(1), s("AR"))) == "none"
    assert support(call("lt", col(0), col(2))) == "none"  # column against column
    assert support(call("lt", call("add", col(0), i32(1), out={"i32": {"nullability": REQ}}), i32(3))) == "none"
    assert support(call("gt", call("upper", col(1), out={"string": {"nullability": REQ}}), s("B"))) == "none"
    rnd = call("lt", call("random", out={"fp64": {"nullability": REQ}}), {"literal": {"fp64": 0.5}})
    assert support(rnd) == "none"


def test_capability_profiles_load_and_validate(tmp_path):
    path = tmp_path / "p.json"
    path.write_text(json.dumps(SPEC_PROFILE))
    caps = load_capabilities(path)
    assert caps.name == "spec-example" and as_capabilities(str(path)).name == "spec-example"
    assert caps.call_support("lt", ["i64", "i8"]) == "full"
    assert caps.call_support("lt", ["varchar", "string"]) == "best_effort"
    assert caps.call_support("lt", ["date", "date"]) == "none"
    variadic = from_dict({"rules": [{"function": "and", "args": ["boolean", "..."], "support": "full"}]})
    assert variadic.call_support("and", ["bool"] * 5) == "full"
    assert variadic.call_support("and", ["bool", "i32"]) == "none"
    for bad in ({"rules": [{"function": "lt", "support": "always"}]},
                {"rules": [{"function": "lt", "args": ["integr"], "support": "full"}]},
                {"rules": [{"function": "lt", "shape": "odd", "support": "full"}]}):
        with pytest.raises(PlanError):
            from_dict(bad)
    with pytest.raises(PlanError):
        load_capabilities(tmp_path / "missing.json")


def test_filter_into_read_on_the_22_datafusion_plans(datafusion_tpch_plans):
    """DataFusion writes each pushed filter twice: in ReadRel.filter and in a FilterRel above the read.
    With Spark's profile every such FilterRel goes (its conjuncts are already applied by the read) except
    Q22's, whose conjunct holds a subquery; Q18 has no filter over a read."""
    fired_in = set()
    for q, data in datafusion_tpch_plans.items():
        result = optimize(load_plan(data), "filter_into_read")
        if "filter_into_read" in fired(result):
            fired_in.add(q)
        g = to_dag(result.plan)
        left = [n for n in g if g.nodes[n]["kind"] == "filter" and g.nodes[inputs(g, n)[0]]["kind"] == "read"]
        assert len(left) == (1 if q == 22 else 0), (q, explain_plan(result.plan))
    assert fired_in == set(range(1, 23)) - {18}


@pytest.mark.spark
@pytest.mark.parametrize("q", [19])  # Q19: projection masks, OR-heavy read filters (Q5: see docs/rules.md)
def test_all_filter_rules_on_datafusion_plans_on_spark(backend, datafusion_tpch_plans, q):
    before = load_plan(datafusion_tpch_plans[q])
    result = optimize(before, *MY_RULES)
    assert "filter_into_read" in fired(result)
    assert shape(result.plan).count("filter") < shape(before).count("filter")
    same_answer(backend, before, result.plan)


def test_filter_into_read_on_a_names_only_base_schema():
    """Older DataFusion plans give the read's column names without types: no conjunct can be classified,
    so nothing moves (and nothing breaks)."""
    from workloads.corpus import corpus_root

    path = corpus_root() / "substrait_consumer/snapshots/producer/relation/filter/where_and-datafusion_plan.json"
    before = load_plan(path)
    assert fired(optimize(before, *MY_RULES)) == []
