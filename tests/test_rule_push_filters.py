"""push_filters: hand-built, DataFusion and corpus plans before and after; the ``spark`` tests
run both on Spark (TPC-H SF 0.01) and compare the answers.
"""

from __future__ import annotations

import filter_rule_plans as plans
import pytest
from filter_rule_plans import FN, REQ, call, col, emit, filt, i32, join, read, s

from optimizer.difftest.results import compare_tables
from optimizer.explain import explain_plan
from optimizer.plan_io import load_plan


@pytest.mark.spark
def test_push_left_join_keeps_null_side_conjuncts_above(backend):
    """A filter on the right (null-supplying) side of a LEFT join must stay above it: below, it would
    remove region rows and let their nations through padded with NULLs instead of removing them."""
    on = call("equal", col(2), col(4))
    cond = call("and", call("not_equal", col(4), i32(2)), call("lt", col(0), i32(20)))
    before = plans.plan_of(filt(join("LEFT", read("nation"), read("region"), on), cond), plans.NATION_REGION)
    result = plans.optimize(before, "push_filters")
    after = result.plan
    assert plans.shape(after) == "filter(join(filter(read),read))"
    top, below = plans.nodes_of(after, "filter")
    assert "r_regionkey#4 <> 2" in explain_plan(after).splitlines()[1]  # stays above the join
    assert plans.n_conjuncts(after, top.condition) == 1 and plans.n_conjuncts(after, below.condition) == 1
    expected = plans.same_answer(backend, before, after)
    assert expected.num_rows == 16
    # the wrong rewrite (the right-side conjunct below the join) gives another answer on this data
    wrong = plans.plan_of(join("LEFT", filt(read("nation"), call("lt", col(0), i32(20))),
                               filt(read("region"), call("not_equal", col(0), i32(2))), on),
                          plans.NATION_REGION)
    assert not compare_tables(backend.execute(wrong), expected)


@pytest.mark.spark
def test_push_left_join_on_conjuncts(backend):
    """ON conjuncts: the right side's go into the right input; the left (preserved) side's stay."""
    on = call("and", call("equal", col(2), col(4)), call("equal", col(5), s("ASIA")), call("lt", col(0), i32(5)))
    before = plans.plan_of(join("LEFT", read("nation"), read("region"), on), plans.NATION_REGION)
    after = plans.optimize(before, "push_filters").plan
    assert plans.shape(after) == "join(read,filter(read))"
    (j,) = plans.nodes_of(after, "join")
    assert plans.n_conjuncts(after, j.expression) == 2  # the equality and n_nationkey < 5
    plans.same_answer(backend, before, after)


@pytest.mark.spark
def test_push_semi_and_anti_joins(backend):
    on = call("and", call("equal", col(2), col(4)), call("equal", col(5), s("ASIA")), call("lt", col(0), i32(10)))
    semi = plans.plan_of(filt(join("LEFT_SEMI", read("nation"), read("region"), on),
                              call("gt", col(0), i32(2))), plans.NATION_NAMES)
    after = plans.optimize(semi, "push_filters").plan
    # the filter above goes left; ON: r_name = 'ASIA' right, n_nationkey < 10 left (a semi join drops
    # the left rows without a match anyway)
    assert plans.shape(after) == "join(filter(read),filter(read))"
    plans.same_answer(backend, semi, after)
    anti = plans.plan_of(join("LEFT_ANTI", read("nation"), read("region"), on), plans.NATION_NAMES)
    after = plans.optimize(anti, "push_filters").plan
    # an anti join outputs the left rows WITHOUT a match: n_nationkey < 10 must stay in ON
    assert plans.shape(after) == "join(read,filter(read))"
    (j,) = plans.nodes_of(after, "join")
    assert plans.n_conjuncts(after, j.expression) == 2
    assert plans.same_answer(backend, anti, after).num_rows == 23


@pytest.mark.spark
def test_push_through_project_substitutes_expressions(backend):
    plus = call("add", col(0), i32(1), out={"i32": {"nullability": REQ}})
    project = {"project": {"input": read("nation"), "expressions": [plus], **emit(4, 1)}}  # k1, n_name
    cond = call("and", call("gt", col(0), i32(10)), call("lt", col(1), s("M")))
    before = plans.plan_of(filt(project, cond), ["k1", "n_name"])
    after = plans.optimize(before, "push_filters").plan
    assert plans.shape(after) == "project(filter(read))"
    assert "((n_nationkey#0 + 1) > 10)" in explain_plan(after)
    plans.same_answer(backend, before, after)


def test_push_stops_at_window_functions_fetch_and_measures():
    window = {"windowFunction": {"functionReference": FN["row_number"], "outputType": {"i64": {"nullability": REQ}},
                                 "partitions": [col(2)], "phase": "AGGREGATION_PHASE_INITIAL_TO_RESULT",
                                 "invocation": "AGGREGATION_INVOCATION_ALL"}}
    project = {"project": {"input": read("nation"), "expressions": [window]}}
    before = plans.plan_of(filt(project, call("lt", col(0), i32(3))), plans.NATION_NAMES + ["rn"])
    assert plans.fired(plans.optimize(before, "push_filters")) == []
    fetch = {"fetch": {"input": read("nation"), "count": "5"}}
    assert plans.fired(plans.optimize(plans.plan_of(filt(fetch, call("lt", col(0), i32(3))), plans.NATION_NAMES), "push_filters")) == []


@pytest.mark.spark
def test_push_below_aggregate_on_keys_only(backend):
    count = {"measure": {"functionReference": FN["count"], "outputType": {"i64": {"nullability": REQ}},
                         "arguments": [{"value": col(0)}], "phase": "AGGREGATION_PHASE_INITIAL_TO_RESULT",
                         "invocation": "AGGREGATION_INVOCATION_ALL"}}
    agg = {"aggregate": {"input": read("nation"), "groupingExpressions": [col(2)],
                         "groupings": [{"expressionReferences": [0]}], "measures": [count]}}
    cond = call("and", call("gt", col(0), i32(0)), call("gte", col(1), {"literal": {"i64": "5"}}))
    before = plans.plan_of(filt(agg, cond), ["n_regionkey", "n"])
    after = plans.optimize(before, "push_filters").plan
    assert plans.shape(after) == "filter(aggregate(filter(read)))"
    assert "(n_regionkey#2 > 0)" in explain_plan(after)
    plans.same_answer(backend, before, after)


@pytest.mark.spark
@pytest.mark.parametrize("op", ["SET_OP_UNION_ALL", "SET_OP_UNION_DISTINCT", "SET_OP_MINUS_PRIMARY",
                                "SET_OP_INTERSECTION_MULTISET"])
def test_push_into_every_input_of_a_set_operation(backend, op):
    second = filt(read("nation"), call("equal", col(2), i32(3)))
    before = plans.plan_of(filt({"set": {"op": op, "inputs": [read("nation"), second]}},
                                call("lte", col(2), i32(3))), plans.NATION_NAMES)
    after = plans.optimize(before, "push_filters").plan
    assert plans.shape(after) == "set(filter(read),filter(read))"  # the second one merged with its filter
    plans.same_answer(backend, before, after)


@pytest.mark.spark
def test_push_through_sort_and_merge_filters(backend):
    sort = {"sort": {"input": filt(read("nation"), call("lt", col(0), i32(20))),
                     "sorts": [{"expr": col(1), "direction": "SORT_DIRECTION_ASC_NULLS_LAST"}]}}
    before = plans.plan_of(filt(sort, call("equal", col(2), i32(1))), plans.NATION_NAMES)
    after = plans.optimize(before, "push_filters").plan
    assert plans.shape(after) == "sort(filter(read))"
    (f,) = plans.nodes_of(after, "filter")
    assert plans.n_conjuncts(after, f.condition) == 2
    plans.same_answer(backend, before, after)


def test_push_never_moves_subqueries_or_nondeterminism():
    exists = {"subquery": {"setPredicate": {"predicateOp": "PREDICATE_OP_EXISTS", "tuples": filt(
        read("region"), call("equal", col(0), {"selection": {"directReference": {"structField": {"field": 2}},
                                                             "outerReference": {"stepsOut": 1}}}))}}}
    rnd = call("lt", call("random", out={"fp64": {"nullability": REQ}}), {"literal": {"fp64": 0.5}})
    before = plans.plan_of(filt(join("INNER", read("nation"), read("region"), call("equal", col(2), col(4))),
                                call("and", exists, rnd, call("lt", col(4), i32(2)))), plans.NATION_REGION)
    after = plans.optimize(before, "push_filters").plan
    assert plans.shape(after) == "filter(join(read,filter(read)))"
    (top, _) = plans.nodes_of(after, "filter")
    assert plans.n_conjuncts(after, top.condition) == 2  # EXISTS and random() stay above the join


@pytest.mark.spark
def test_push_on_datafusion_unoptimised_q19(backend, tpch_tables):
    """Q19's three ORed blocks share ``p_partkey = l_partkey`` and the l_shipmode/l_shipinstruct tests:
    factored out, they become an equi-join key and filters on lineitem."""
    from workloads.tpch import tpch_query

    before = plans.datafusion_unoptimised_plan(tpch_query(19), tpch_tables)
    result = plans.optimize(before, *plans.MY_RULES)
    after = result.plan
    assert plans.shape(after).endswith("join(read,read)))")
    reads = plans.nodes_of(after, "read")
    assert all(r.HasField("filter") for r in reads)
    plans.same_answer(backend, before, after)


@pytest.mark.spark
@pytest.mark.parametrize("name", ["q03-isthmus_plan.json", "q13-isthmus_plan.json"])
def test_push_on_corpus_plans(backend, name):
    before = plans.corpus_plan(name)
    result = plans.optimize(before, "simplify_predicates", "extract_join_conditions", "push_filters")
    assert "push_filters" in plans.fired(result)
    plans.same_answer(backend, before, result.plan)


def test_push_filters_on_datafusion_tpch_finds_nothing(datafusion_tpch_plans):
    """DataFusion's optimiser pushes filters down itself: on its 22 plans push_filters has nothing to do."""
    for q, data in datafusion_tpch_plans.items():
        assert plans.fired(plans.optimize(load_plan(data), "push_filters")) == [], q
