"""eager_aggregation: an aggregate over an inner equi-join is computed in part below the join, on the input
its measures read. The ``spark`` tests run the original and the rewritten plan on Spark (TPC-H SF 0.01)
and compare the answers, with statistics that say the tables are SF 1's (the rule fires where the
pre-aggregation shrinks its input by the estimates) and a broadcast threshold of 0 (``SHUFFLED``: the rule
fires only over a join Spark shuffles, and SF 1's suppliers would be broadcast). Where it must not fire:
avg, DISTINCT, a float sum, measures on both inputs, a non-equi or outer join, a shared join, a global
count, unknown distinct counts, a pre-aggregation that keeps most rows, a join with a broadcast input.
"""

from __future__ import annotations

import json

import filter_rule_plans as plans
import pytest
from filter_rule_plans import col, join, read
from optimizer.cost.providers import MemoryStatistics
from optimizer.cost.statistics import ColumnStatistics, TableStatistics
from optimizer.rules import RULES
from optimizer.rules.eager_aggregation import RULE

from optimizer.dag import annotate_schemas, to_dag
from optimizer.driver import Optimizer, OptimizerConfig
from optimizer.plan_io import load_plan
from optimizer.schema.check import check_plan

# lineitem: l_orderkey#0, l_partkey#1, l_suppkey#2, l_linenumber#3, l_quantity#4, l_extendedprice#5,
# l_discount#6, l_tax#7, l_returnflag#8, l_linestatus#9, l_shipdate#10, ... l_comment#15 (16 columns);
# supplier: s_suppkey#0, s_name#1, s_address#2, s_nationkey#3, s_phone#4, s_acctbal#5, s_comment#6.
FN = ["equal", "lt", "sum", "count", "min", "max", "avg", "multiply", "subtract"]
REQ = "NULLABILITY_REQUIRED"
N_LINEITEM = 16

#: SF 1's sizes: 6M line items over 10,000 suppliers in 25 nations (the data run is SF 0.01's).
SF1 = MemoryStatistics({
    "lineitem": TableStatistics(row_count=6e6, columns={
        "l_orderkey": ColumnStatistics(ndv=1.5e6), "l_suppkey": ColumnStatistics(ndv=1e4),
        "l_linenumber": ColumnStatistics(ndv=7), "l_returnflag": ColumnStatistics(ndv=3)}),
    "supplier": TableStatistics(row_count=1e4, columns={
        "s_suppkey": ColumnStatistics(ndv=1e4), "s_nationkey": ColumnStatistics(ndv=25)}),
})


#: The optimizer's settings for these tests: no input under the broadcast threshold, every join shuffled.
SHUFFLED = OptimizerConfig(annotate_estimates=False, broadcast_threshold_bytes=0)


def fn(name: str) -> int:
    return FN.index(name) + 1


def call(name: str, *args: dict, out: dict | None = None) -> dict:
    body = {"functionReference": fn(name), "arguments": [{"value": a} for a in args],
            "outputType": out or {"bool": {"nullability": REQ}}}
    return {"scalarFunction": body}


def measure(name: str, *args: dict, distinct: bool = False, out: dict | None = None, **extra) -> dict:
    body = {"functionReference": fn(name), "arguments": [{"value": a} for a in args],
            "phase": "AGGREGATION_PHASE_INITIAL_TO_RESULT",
            "invocation": "AGGREGATION_INVOCATION_DISTINCT" if distinct else "AGGREGATION_INVOCATION_ALL"}
    if out is not None:
        body["outputType"] = out
    return {"measure": body, **extra}


def aggregate(input_: dict, keys: list[dict], *measures: dict, **extra) -> dict:
    body = {"input": input_, "groupingExpressions": keys, "measures": list(measures), **extra}
    if keys:
        body["groupings"] = [{"expressionReferences": list(range(len(keys)))}]
    return {"aggregate": body}


def plan_of(rel: dict, names: list[str], extra_relations: list[dict] | None = None,
            declared: dict[str, str] | None = None):
    """``declared``: the functions the plan declares, by name, with the name it declares (default: all of
    ``FN`` by bare name)."""
    declared = declared if declared is not None else {n: n for n in FN}
    return load_plan(json.dumps({
        "extensions": [{"extensionFunction": {"functionAnchor": fn(n), "name": d, "extensionUrnReference": 4294967295}}
                       for n, d in declared.items()],
        "relations": (extra_relations or []) + [{"root": {"input": rel, "names": names}}]}))


def lineitem_supplier(kind: str = "INNER", condition: dict | None = None) -> dict:
    return join(kind, read("lineitem"), read("supplier"),
                condition or call("equal", col(2), col(N_LINEITEM)))


def run(plan, statistics=SF1, rules=None, config=SHUFFLED):
    return Optimizer(statistics=statistics, rules=rules or [RULE], config=config).run(plan)


def fired(result) -> int:
    return sum(1 for e in result.events if e.rule == RULE.name)


def root_types(plan) -> list:
    g = annotate_schemas(to_dag(plan))
    return list(g.nodes[g.graph["roots"][-1]["node"]]["schema"].types)


def rewritten(before, min_rows: int = 1, **kw):
    """The rule's rewrite of ``before``: fired once, a valid plan with the same output types."""
    result = run(before, **kw)
    assert fired(result) == 1, plans.fired(result)
    assert check_plan(result.plan) == []
    assert root_types(result.plan) == root_types(before)
    return result.plan


def test_rule_runs_after_join_order_before_joins_are_implemented():
    names = [r.name for r in RULES]
    assert RULE.phase == "physical"
    assert names.index("join_order") < names.index(RULE.name) < names.index("implement_joins")


def _by_nation(*measures: dict, keys=(N_LINEITEM + 3,)) -> dict:
    return aggregate(lineitem_supplier(), [col(k) for k in keys], *measures)


@pytest.mark.spark
def test_decimal_sum_counts_min_max_pre_aggregated_per_supplier(backend):
    """Per nation and return flag: sum(l_extendedprice) (decimal(15,2) -> decimal(38,2)), count(l_quantity),
    count(*), min(l_shipdate), max(l_discount). Below the join the line items are aggregated per
    (l_suppkey, l_returnflag); above, sums of the sums and of the counts, min of min, max of max."""
    before = plan_of(_by_nation(measure("sum", col(5)), measure("count", col(4)), measure("count"),
                                measure("min", col(10)), measure("max", col(6)), keys=(N_LINEITEM + 3, 8)),
                     ["nation", "flag", "price", "n", "rows", "first", "top"])
    after = rewritten(before)
    assert plans.shape(after) == "aggregate(join(aggregate(read),read))"
    (top, pre) = plans.nodes_of(after, "aggregate")
    assert [e.selection.direct_reference.struct_field.field for e in pre.grouping_expressions] == [2, 8]
    answer = plans.same_answer(backend, before, after)
    assert answer.num_rows == 3 * 25  # SF 0.01's 100 suppliers cover the 25 nations
    assert sum(answer.column("rows").to_pylist()) == 60175  # every line item counted once


@pytest.mark.spark
def test_measures_on_the_right_input(backend):
    """``supplier ⋈ lineitem``: the line items (right) are pre-aggregated; the join's condition and the
    grouping key renumbered (the supplier columns first, then the pre-aggregate's)."""
    sl = join("INNER", read("supplier"), read("lineitem"), call("equal", col(0), col(7 + 2)))
    before = plan_of(aggregate(sl, [col(3)], measure("sum", col(7 + 5)), measure("count")),
                     ["nation", "price", "rows"])
    after = rewritten(before)
    assert plans.shape(after) == "aggregate(join(read,aggregate(read)))"
    plans.same_answer(backend, before, after)


@pytest.mark.spark
def test_through_a_computing_project(backend):
    """DataFusion's shape: the aggregate over a project computing ``l_extendedprice * (1 - l_discount)``
    over the join (with an emit). The project is substituted into the measure, computed below the join."""
    dec = {"decimal": {"precision": 38, "scale": 4, "nullability": REQ}}
    one = {"literal": {"decimal": {"value": "ZAAAAAAAAAAAAAAAAAAAAA==", "precision": 15, "scale": 2}}}
    revenue = call("multiply", col(5), call("subtract", one, col(6), out=dec), out=dec)
    project = {"project": {"input": lineitem_supplier(), "expressions": [col(N_LINEITEM + 3), revenue],
                           "common": {"emit": {"outputMapping": [N_LINEITEM + 7, N_LINEITEM + 8]}}}}
    before = plan_of(aggregate(project, [col(0)], measure("sum", col(1))), ["nation", "revenue"])
    after = rewritten(before)
    assert plans.shape(after) == "aggregate(join(aggregate(read),read))"
    plans.same_answer(backend, before, after)


@pytest.mark.spark
def test_a_measure_filter_goes_to_the_partial_measure(backend):
    """``count(*) FILTER (l_quantity < 10)`` and ``sum(l_quantity) FILTER (...)``: the filter reads line
    items only and is applied below; a supplier with no such line item still counts 0, not NULL."""
    small = call("lt", col(4), {"literal": {"decimal": {"value": "6AMAAAAAAAAAAAAAAAAAAA==", "precision": 15,
                                                          "scale": 2}}})
    before = plan_of(_by_nation(measure("count", filter=small), measure("sum", col(4), filter=small)),
                     ["nation", "n", "q"])
    after = rewritten(before)
    assert all(m.HasField("filter") for m in plans.nodes_of(after, "aggregate")[1].measures)
    answer = plans.same_answer(backend, before, after)
    assert None not in answer.column("n").to_pylist()


def _not_fired(before, **kw) -> None:
    assert fired(run(before, **kw)) == 0


def _fires(before, **kw) -> None:
    """The control of a test that it does not fire: the same plan but for the one thing tested."""
    assert fired(run(before, **kw)) == 1


def test_avg_is_not_split():
    _not_fired(plan_of(_by_nation(measure("sum", col(5)), measure("avg", col(5))), ["n", "s", "a"]))
    _fires(plan_of(_by_nation(measure("sum", col(5)), measure("count", col(5))), ["n", "s", "c"]))


def test_distinct_is_not_split():
    _not_fired(plan_of(_by_nation(measure("count", col(1), distinct=True)), ["n", "c"]))
    _fires(plan_of(_by_nation(measure("count", col(1))), ["n", "c"]))


def test_measures_on_both_inputs_are_not_split():
    """sum(l_extendedprice) and max(s_acctbal): no input holds every measure's columns."""
    _not_fired(plan_of(_by_nation(measure("sum", col(5)), measure("max", col(N_LINEITEM + 5))), ["n", "s", "m"]))
    _fires(plan_of(_by_nation(measure("sum", col(5)), measure("max", col(6))), ["n", "s", "m"]))


def test_a_float_sum_is_not_split():
    """A sum of doubles rounds by the order of addition: the partial sums would change its last bits."""
    from testing.builder import INNER, Builder, ref
    from testing.builder import aggregate as agg
    from testing.builder import join as rel_join
    from testing.builder import read as rel_read

    b = Builder()
    li = rel_read("lineitem", [("l_suppkey", "i64"), ("l_price", "fp64")])
    su = rel_read("supplier", [("s_suppkey", "i64"), ("s_nationkey", "i64")])
    joined = rel_join(li, su, INNER, b.call("equal", ref(0), ref(2)))
    _not_fired(b.plan(agg(joined, [3], b.agg("sum", ref(1), out="fp64")), ["n", "s"]))
    assert fired(run(b.plan(agg(joined, [3], b.agg("max", ref(1), out="fp64")), ["n", "s"]))) == 1


def test_a_non_equi_join_is_not_rewritten():
    cond = call("lt", col(2), col(N_LINEITEM))
    _not_fired(plan_of(aggregate(lineitem_supplier(condition=cond), [col(N_LINEITEM + 3)], measure("sum", col(5))),
                       ["n", "s"]))
    _fires(plan_of(aggregate(lineitem_supplier(), [col(N_LINEITEM + 3)], measure("sum", col(5))), ["n", "s"]))


def test_an_outer_join_is_not_rewritten():
    _not_fired(plan_of(aggregate(lineitem_supplier("LEFT"), [col(N_LINEITEM + 3)], measure("sum", col(5))),
                       ["n", "s"]))


def test_a_global_count_is_not_rewritten():
    """Over an empty join a global count is 0 where a sum of partial counts would be NULL; a global sum
    is NULL both ways, and is rewritten."""
    _not_fired(plan_of(aggregate(lineitem_supplier(), [], measure("count")), ["c"]))
    assert fired(run(plan_of(aggregate(lineitem_supplier(), [], measure("sum", col(5))), ["s"]))) == 1


def test_a_shared_join_is_not_rewritten():
    """The join is read by the aggregate and by a union: the union needs all its rows."""
    shared = {"reference": {"subtreeOrdinal": 0}}
    narrow = {"project": {"input": shared, "expressions": [col(N_LINEITEM + 3)],
                          "common": {"emit": {"outputMapping": [N_LINEITEM + 7]}}}}
    agg = aggregate(shared, [col(N_LINEITEM + 3)])
    union = {"set": {"op": "SET_OP_UNION_ALL", "inputs": [agg, narrow]}}
    _not_fired(plan_of(union, ["n"], extra_relations=[{"rel": lineitem_supplier()}]))
    assert fired(run(plan_of(aggregate(lineitem_supplier(), [col(N_LINEITEM + 3)]), ["n"]))) == 1  # alone


def test_unknown_distinct_counts_do_not_fire():
    """Without statistics the number of groups below would be the estimator's default guess."""
    _not_fired(plan_of(_by_nation(measure("sum", col(5))), ["n", "s"]), statistics=None)


def test_a_pre_aggregation_keeping_most_rows_does_not_fire():
    """Grouped by (l_orderkey, l_linenumber), nearly one line item each: nothing to gain."""
    before = plan_of(_by_nation(measure("sum", col(5)), keys=(N_LINEITEM + 3, 0, 3)), ["n", "o", "l", "s"])
    _not_fired(before)


def test_with_all_rules_the_plan_is_priced_lower():
    """In the whole optimizer (after join_order, the physical phase priced rewrite by rewrite) the rewrite
    is kept, the join below it implemented, and the plan's price is below the one without the rule."""
    before = plan_of(_by_nation(measure("sum", col(5)), measure("count")), ["n", "s", "c"])
    on = Optimizer(statistics=SF1, config=SHUFFLED).run(before)
    off = Optimizer(statistics=SF1, config=SHUFFLED, rules=[r for r in RULES if r is not RULE]).run(before)
    assert fired(on) == 1
    assert plans.shape(on.plan).startswith("aggregate(hash_join(aggregate(read),")
    assert on.phases[-1].cost_after < off.phases[-1].cost_after


@pytest.mark.spark
def test_a_count_in_a_plan_without_sum_declares_one(backend):
    """The final sum of the partial counts: the plan declares ``count`` and ``equal`` only, so the rewrite
    declares the standard ``sum:i64``; the output stays the count's ``i64`` (not NULL)."""
    before = plan_of(_by_nation(measure("count")), ["nation", "rows"], declared={"equal": "equal", "count": "count"})
    after = rewritten(before)
    declared = {e.extension_function.name for e in after.extensions}
    assert declared == {"equal", "count", "sum:i64"}
    answer = plans.same_answer(backend, before, after)
    assert sum(answer.column("rows").to_pylist()) == 60175
    # declined (no distinct counts known): priced on a copy, the plan declares nothing more
    untouched = run(before, statistics=None)
    assert fired(untouched) == 0
    assert {e.extension_function.name for e in untouched.plan.extensions} == {"equal", "count"}


def test_a_count_is_not_summed_by_a_sum_declared_for_decimals():
    """The plan declares ``sum:dec`` only: the final sum of i64 counts would call it with an i64."""
    declared = {"equal": "equal", "count": "count", "sum": "sum:dec"}
    _not_fired(plan_of(_by_nation(measure("count")), ["nation", "rows"], declared=declared))
    fires = plan_of(_by_nation(measure("sum", col(5))), ["nation", "s"], declared=declared)
    assert fired(run(fires)) == 1  # a decimal sum uses it


def test_a_join_with_a_broadcast_input_is_not_rewritten():
    """At Spark's 10 MiB threshold SF 1's 10,000 suppliers are broadcast: Spark's partial aggregation above
    the join already runs before the first shuffle, and a pre-aggregation would add one. Controls: every
    join shuffled (threshold 0), and at the same threshold suppliers too many to broadcast (SF 100's)."""
    before = plan_of(_by_nation(measure("sum", col(5)), measure("count")), ["n", "s", "c"])
    spark_default = OptimizerConfig(annotate_estimates=False)
    _not_fired(before, config=spark_default)
    _fires(before)
    sf100 = MemoryStatistics({
        "lineitem": TableStatistics(row_count=6e8, columns={"l_suppkey": ColumnStatistics(ndv=1e6)}),
        "supplier": TableStatistics(row_count=1e6, columns={
            "s_suppkey": ColumnStatistics(ndv=1e6), "s_nationkey": ColumnStatistics(ndv=25)}),
    })
    _fires(before, statistics=sf100, config=spark_default)


def test_the_pre_aggregation_is_priced_with_its_shuffle():
    """Spark's aggregate below the join exchanges its partial rows by ``K`` between its partial and final
    aggregation: the cost model prices that shuffle on the new aggregate (a stage and the bytes moved)."""
    from optimizer.cost.cardinality import CardinalityEstimator
    from optimizer.cost.model import CostModel

    from optimizer.dag import inputs

    after = rewritten(plan_of(_by_nation(measure("sum", col(5))), ["n", "s"]))
    g = annotate_schemas(to_dag(after))
    (pre,) = [n for n in g.nodes if g.nodes[n]["kind"] == "aggregate"
              and g.nodes[inputs(g, n)[0]]["kind"] == "read"]
    model = CostModel(SHUFFLED)
    assert model.node_cost(g, pre, CardinalityEstimator(g, SF1)).network > model.k.shuffle_stage
