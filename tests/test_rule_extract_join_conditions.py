"""extract_join_conditions: hand-built, DataFusion and corpus plans before and after; the
``spark`` tests run both on Spark (TPC-H SF 0.01) and compare the answers.
"""

from __future__ import annotations

import filter_rule_plans as plans
import pytest
from filter_rule_plans import REQ, call, col, emit, filt, i32, read, s

from optimizer.explain import explain_plan
from optimizer.plan_io import load_plan


@pytest.mark.spark
def test_extract_moves_the_join_predicate_into_a_cross_product(backend):
    cond = call("and", call("equal", col(2), col(4)), call("equal", col(5), s("ASIA")), call("lt", col(0), i32(20)))
    before = plans.plan_of(filt({"cross": {"left": read("nation"), "right": read("region")}}, cond),
                           plans.NATION_REGION)
    result = plans.optimize(before, "extract_join_conditions")
    after = result.plan
    assert plans.fired(result) == ["extract_join_conditions"]
    assert plans.shape(after) == "filter(join(read,read))"
    (j,) = plans.nodes_of(after, "join")
    (f,) = plans.nodes_of(after, "filter")
    assert j.type == 1  # INNER
    assert plans.n_conjuncts(after, j.expression) == 1
    assert plans.n_conjuncts(after, f.condition) == 2  # one-side stay
    assert len(plans.same_answer(backend, before, after)) == 4  # the nations of ASIA below key 20


@pytest.mark.spark
def test_extract_through_nested_joins_with_emits(backend):
    # (nation x region) with emit, x supplier; the filter has an emit too.
    inner = {"cross": {"left": read("nation"), "right": read("region"), **emit(0, 2, 4, 5)}}  # nk, rk, r_rk, r_name
    cond = call("and", call("equal", col(1), col(2)), call("equal", col(0), col(7)), call("equal", col(3), s("ASIA")))
    rel = filt({"cross": {"left": inner, "right": read("supplier")}}, cond, **emit(4, 3))  # s_suppkey, r_name
    before = plans.plan_of(rel, ["s_suppkey", "r_name"])
    after = plans.optimize(before, "extract_join_conditions").plan
    assert plans.shape(after) == "filter(join(join(read,read),read))"
    outer, lower = plans.nodes_of(after, "join")
    assert "(n_regionkey#2 = r_regionkey#4), emit=[0, 2, 4, 5]" in explain_plan(after)  # its direct columns
    assert list(lower.common.emit.output_mapping) == [0, 2, 4, 5]
    assert plans.n_conjuncts(after, outer.expression) == 1
    plans.same_answer(backend, before, after)


def test_extract_leaves_subqueries_nondeterminism_and_shared_inputs_alone():
    rnd = call("lt", call("random", out={"fp64": {"nullability": REQ}}), col(4))  # reads both sides? no: right only
    both_rnd = call("lt", call("add", col(0), col(4), out={"i32": {"nullability": REQ}}),
                    call("random", out={"fp64": {"nullability": REQ}}))
    cross = {"cross": {"left": read("nation"), "right": read("region")}}
    before = plans.plan_of(filt(cross, call("and", rnd, both_rnd)), plans.NATION_REGION)
    result = plans.optimize(before, "extract_join_conditions")
    assert plans.fired(result) == [] and plans.shape(result.plan) == "filter(cross(read,read))"
    # a cross product read twice (a shared subtree) is not rewritten for one of its readers
    shared = plans.plan_of({"set": {"op": "SET_OP_UNION_ALL", "inputs": [
        filt({"reference": {"subtreeOrdinal": 0}}, call("equal", col(2), col(4))),
        {"reference": {"subtreeOrdinal": 0}}]}}, plans.NATION_REGION, extra_relations=[{"rel": cross}])
    assert plans.fired(plans.optimize(shared, "extract_join_conditions")) == []


def test_extract_on_datafusion_unoptimised_q5_comma_joins(tpch_tables):
    """DataFusion's optimised Q5 already has its join conditions (nothing to extract: checked below);
    its unoptimised plan is the comma-join shape: five inner JoinRels without an expression under one
    filter. One application puts each equality at the lowest join that pairs its tables."""
    from workloads.tpch import tpch_query

    before = plans.datafusion_unoptimised_plan(tpch_query(5), tpch_tables)
    assert all(not j.HasField("expression") for j in plans.nodes_of(before, "join"))
    result = plans.optimize(before, "simplify_predicates", "extract_join_conditions")
    after = result.plan
    assert "extract_join_conditions" in plans.fired(result)
    joins = plans.nodes_of(after, "join")
    assert len(joins) == 5 and all(j.HasField("expression") for j in joins)
    assert sum(plans.n_conjuncts(after, j.expression) for j in joins) == 6  # the six equalities of Q5
    (f,) = plans.nodes_of(after, "filter")  # left: r_name = 'ASIA' and the two dates
    assert plans.n_conjuncts(after, f.condition) == 3


COMMA_JOIN_SQL = """
SELECT n_name, count(*) AS suppliers, sum(s_acctbal) AS balance
FROM supplier, nation, region
WHERE s_nationkey = n_nationkey AND n_regionkey = r_regionkey AND r_name = 'EUROPE' AND s_acctbal > 0
GROUP BY n_name
"""


@pytest.mark.spark
def test_extract_on_a_datafusion_comma_join_on_spark(backend, tpch_tables):
    before = plans.datafusion_unoptimised_plan(COMMA_JOIN_SQL, tpch_tables)
    assert "filter(join(join(read,read),read))" in plans.shape(before)
    result = plans.optimize(before, *plans.MY_RULES)
    after = result.plan
    assert {"extract_join_conditions", "push_filters", "filter_into_read"} <= set(plans.fired(result))
    assert "join(join(read,read),read)" in plans.shape(after)  # both filters went into the reads
    assert all(j.HasField("expression") for j in plans.nodes_of(after, "join"))
    assert plans.same_answer(backend, before, after).num_rows == 5


def test_extract_finds_nothing_in_datafusion_optimised_plans(datafusion_tpch_plans):
    for q, data in datafusion_tpch_plans.items():
        result = plans.optimize(load_plan(data), "extract_join_conditions")
        assert "extract_join_conditions" not in plans.fired(result), q


def test_extract_and_push_on_isthmus_q5_corpus_plan():
    before = plans.corpus_plan("q05-isthmus_plan.json")
    assert plans.shape(before).count("cross") == 5
    result = plans.optimize(before, "simplify_predicates", "extract_join_conditions", "push_filters")
    after = result.plan
    assert plans.fired(result) == ["extract_join_conditions", "push_filters"]
    assert "cross" not in plans.shape(after) and plans.shape(after).count("join") == 5
    assert not any(f for f in plans.nodes_of(after, "filter") if plans.n_conjuncts(after, f.condition) > 2)
    assert plans.shape(after).count("filter(read)") == 2  # the date range on ORDERS and r_name on REGION
