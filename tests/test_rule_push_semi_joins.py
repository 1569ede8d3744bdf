"""push_semi_joins: a semi join goes below the inner join under it, to the input its condition reads;
the ``spark`` tests run both plans on Spark (TPC-H SF 0.01) and compare the answers. Where it must not
fire: a condition reading both inputs, a shared inner join, a nondeterministic condition, a costlier plan.
"""

from __future__ import annotations

import filter_rule_plans as plans
import pytest
from filter_rule_plans import call, col, emit, filt, join, read
from optimizer.rules import RULES
from optimizer.rules.push_semi_joins import RULE

from optimizer.driver import Optimizer, OptimizerConfig
from optimizer.explain import explain_plan
from optimizer.schema.check import check_plan

# nation: n_nationkey#0, n_name#1, n_regionkey#2, n_comment#3; region: r_regionkey#0, r_name#1, r_comment#2;
# supplier: s_suppkey#0, s_name#1, s_address#2, s_nationkey#3, s_phone#4, s_acctbal#5, s_comment#6.


def _few_suppliers() -> dict:
    """The suppliers 1-9: their nations are a few of the 25 (the semi join removes rows)."""
    return filt(read("supplier"), call("lt", col(0), {"literal": {"i64": 10}}))


def _nation_region() -> dict:
    return join("INNER", read("nation"), read("region"), call("equal", col(2), col(4)))


def _pushed(result) -> int:
    return sum(1 for e in result.events if e.rule == RULE.name)


def test_rule_is_in_the_logical_phase():
    assert RULE.phase == "logical"


@pytest.mark.spark
def test_pushed_to_the_left_input(backend):
    """``(nation ⋈ region) ⋉ supplier`` on ``n_nationkey``: the semi join goes onto ``nation``."""
    before = plans.plan_of(join("LEFT_SEMI", _nation_region(), _few_suppliers(), call("equal", col(0), col(10))),
                           plans.NATION_REGION)
    result = plans.optimize(before, "push_semi_joins")
    assert _pushed(result) == 1
    assert plans.shape(result.plan) == "join(join(read,filter(read)),read)"
    assert check_plan(result.plan) == []
    answer = plans.same_answer(backend, before, result.plan)
    assert 0 < answer.num_rows < 25  # the semi join removed nations


@pytest.mark.spark
def test_pushed_to_the_right_input_columns_renumbered(backend):
    """``(region ⋈ nation) ⋉ supplier`` on ``n_nationkey`` (column 3 of the join, 0 of ``nation``): the
    semi join goes onto ``nation``, its condition reading ``nation`` as columns 0-3 and ``supplier`` from 4."""
    rn = join("INNER", read("region"), read("nation"), call("equal", col(0), col(5)))
    before = plans.plan_of(join("LEFT_SEMI", rn, _few_suppliers(), call("equal", col(3), col(10))),
                           ["r_regionkey", "r_name", "r_comment"] + plans.NATION_NAMES)
    result = plans.optimize(before, "push_semi_joins")
    assert _pushed(result) == 1
    assert plans.shape(result.plan) == "join(read,join(read,filter(read)))"
    (semi,) = [j for j in plans.nodes_of(result.plan, "join") if j.type == 5]
    assert "n_nationkey#0 = s_nationkey#7" in explain_plan(result.plan)
    assert semi.expression.scalar_function.arguments[1].value.selection.direct_reference.struct_field.field == 7
    plans.same_answer(backend, before, result.plan)


@pytest.mark.spark
def test_emits_and_a_column_selecting_project_are_followed(backend):
    """DataFusion's shape: the semi join (with an emit) over a project of field references (with an
    emit) over an inner join with an emit. The condition reads ``r_name`` (the semi join's column 0,
    the project's input column 1, the join's column 5: region's 1) and a post-join filter (over the
    semi join's output: its left columns) ``n_regionkey = 2`` (semi join's 2 -> project's 0 -> join's 2:
    nation's 2); the output keeps its order."""
    nr = join("INNER", read("nation"), read("region"), call("equal", col(2), col(4)), **emit(2, 5, 0, 1))
    # the join outputs n_regionkey, r_name, n_nationkey, n_name; the project r_name, n_name, n_regionkey
    pruned = {"project": {"input": nr, "expressions": [col(1), col(3), col(0)], **emit(4, 5, 6)}}
    asia = {"project": {"input": filt(read("region"), call("equal", col(1), plans.s("ASIA"))),
                        "expressions": [col(1), col(0)], **emit(3, 4)}}  # r_name, r_regionkey
    cond = call("equal", col(0), col(3))
    post = call("equal", col(2), {"literal": {"i32": 2}})
    semi = join("LEFT_SEMI", pruned, asia, cond, postJoinFilter=post, **emit(1, 0))
    before = plans.plan_of(semi, ["n_name", "r_name"])
    result = plans.optimize(before, "push_semi_joins")
    # the condition reads region's r_name and, through the post-join filter, nation's n_regionkey: both inputs
    assert _pushed(result) == 0
    # without the post-join filter it reads region's column only: pushed onto region
    semi = join("LEFT_SEMI", pruned, asia, cond, **emit(1, 0))
    before = plans.plan_of(semi, ["n_name", "r_name"])
    result = plans.optimize(before, "push_semi_joins")
    assert _pushed(result) == 1
    assert plans.shape(result.plan) == "project(join(read,join(read,project(filter(read)))))"
    assert check_plan(result.plan) == []
    answer = plans.same_answer(backend, before, result.plan)
    assert answer.num_rows == 5 and answer.column_names == ["n_name", "r_name"]
    assert set(answer.column("r_name").to_pylist()) == {"ASIA"}
    # a post-join filter over columns of the same input goes along, renumbered
    post_left = call("not_equal", col(0), plans.s("EUROPE"))
    semi = join("LEFT_SEMI", pruned, asia, call("equal", col(0), col(3)), postJoinFilter=post_left, **emit(1, 0))
    before = plans.plan_of(semi, ["n_name", "r_name"])
    result = plans.optimize(before, "push_semi_joins")
    assert _pushed(result) == 1
    assert plans.same_answer(backend, before, result.plan).num_rows == 5


def test_a_condition_reading_both_inputs_is_not_pushed():
    """``n_nationkey = s_nationkey AND r_regionkey = s_suppkey``: nation's and region's columns."""
    cond = call("and", call("equal", col(0), col(10)),
                call("equal", call("add", col(4), col(4), out={"i32": {"nullability": plans.REQ}}), col(10)))
    before = plans.plan_of(join("LEFT_SEMI", _nation_region(), _few_suppliers(), cond), plans.NATION_REGION)
    assert _pushed(plans.optimize(before, "push_semi_joins")) == 0


def test_a_nondeterministic_condition_is_not_pushed():
    """Evaluated once per row of the join before, once per row of ``nation`` after: not the same draws."""
    rnd = call("lt", call("random", out={"fp64": {"nullability": plans.REQ}}), {"literal": {"fp64": 0.5}})
    cond = call("and", call("equal", col(0), col(10)), rnd)
    before = plans.plan_of(join("LEFT_SEMI", _nation_region(), _few_suppliers(), cond), plans.NATION_REGION)
    assert _pushed(plans.optimize(before, "push_semi_joins")) == 0


@pytest.mark.spark
def test_a_shared_inner_join_is_not_rewritten(backend):
    """The inner join is read by the semi join and by a union: the union needs all its rows. The rule
    leaves it (and a copy of the join for the semi join alone, computing it twice, is priced costlier)."""
    from optimizer.rules.push_semi_joins import push_semi_joins

    from optimizer.dag import annotate_schemas, to_dag
    from optimizer.driver import PlanContext

    shared = {"reference": {"subtreeOrdinal": 0}}
    union = {"set": {"op": "SET_OP_UNION_ALL", "inputs": [
        join("LEFT_SEMI", shared, _few_suppliers(), call("equal", col(0), col(10))), shared]}}
    before = plans.plan_of(union, plans.NATION_REGION, extra_relations=[{"rel": _nation_region()}])
    g = annotate_schemas(to_dag(before))
    (semi,) = [n for n in g if g.nodes[n]["kind"] == "join" and g.nodes[n]["rel"].join.type == 5]
    assert push_semi_joins(g, semi, PlanContext(g)) is None
    result = plans.optimize(before, "push_semi_joins")
    assert _pushed(result) == 0
    assert plans.same_answer(backend, before, result.plan).num_rows > 25


@pytest.mark.spark
def test_a_shared_input_is_read_not_rewritten(backend):
    """``nation`` is read by the inner join and by the union: the semi join goes above the union's
    ``nation`` as a new relation; the union still reads all 25 nations."""
    shared = {"reference": {"subtreeOrdinal": 0}}
    nr = join("INNER", shared, read("region"), call("equal", col(2), col(4)))
    semi = join("LEFT_SEMI", nr, _few_suppliers(), call("equal", col(0), col(7)))
    narrow = {"project": {"input": semi, "expressions": [col(0), col(1), col(2), col(3)], **emit(7, 8, 9, 10)}}
    union = {"set": {"op": "SET_OP_UNION_ALL", "inputs": [narrow, shared]}}
    before = plans.plan_of(union, plans.NATION_NAMES, extra_relations=[{"rel": read("nation")}])
    result = plans.optimize(before, "push_semi_joins")
    assert _pushed(result) == 1
    answer = plans.same_answer(backend, before, result.plan)
    assert 25 < answer.num_rows < 50


def test_not_pushed_where_the_model_prices_it_costlier():
    """``(lineitem ⋈ part) ⋉ supplier`` with 600M line items and 100M suppliers (hints): below the join
    the semi join would join two large inputs (shuffled) where above it the model finds fewer rows; with
    1,000 line items the same plan is pushed."""
    from testing.builder import INNER, SEMI, Builder, ref
    from testing.builder import join as rel_join
    from testing.builder import read as rel_read

    def plan_with(line_items: float):
        b = Builder()
        li = rel_read("lineitem", [("l_partkey", "i64"), ("l_suppkey", "i64")], rows=line_items)
        part = rel_read("part", [("p_partkey", "i64"), ("p_size", "i64")], rows=2e7)
        lp = rel_join(li, part, INNER, b.call("equal", ref(0), ref(2)))
        supp = rel_read("supplier", [("s_suppkey", "i64")], rows=1e8)
        return b.plan(rel_join(lp, supp, SEMI, b.call("equal", ref(1), ref(4))), ["a", "b", "c", "d"])

    quiet = OptimizerConfig(annotate_estimates=False)
    assert _pushed(Optimizer(config=quiet, rules=[RULE]).run(plan_with(6e8))) == 0
    assert _pushed(Optimizer(config=quiet, rules=[RULE]).run(plan_with(1e3))) == 1


def _with_rule() -> list:
    rules = list(RULES)
    if RULE not in rules:
        rules.insert([r.name for r in rules].index("push_filters") + 1, RULE)
    return rules


@pytest.mark.spark
def test_tpch_q18_semi_join_goes_onto_orders(backend, tpch_statistics, datafusion_tpch_plans):
    """DataFusion's Q18 applies ``o_orderkey IN (... HAVING sum(l_quantity) > 300)`` above ``customer ⋈
    orders ⋈ lineitem``; with all rules the semi join reads ``orders`` and the plan is priced cheaper."""
    plan = datafusion_tpch_plans[18]
    base = Optimizer(statistics=tpch_statistics, rules=[r for r in RULES if r is not RULE]).run(plans.load_plan(plan))
    result = Optimizer(statistics=tpch_statistics, rules=_with_rule()).run(plans.load_plan(plan))
    assert _pushed(result) == 2
    assert "Read(orders" in explain_plan(result.plan).split("left_semi", 1)[1].splitlines()[1]
    assert result.phases[-1].cost_after < base.phases[-1].cost_after
    answer = plans.same_answer(backend, plans.load_plan(plan), result.plan)
    assert answer.num_rows > 0


@pytest.mark.spark
def test_isthmus_tpch_q18(backend, tpch_statistics):
    """Isthmus writes Q18's IN as a subquery: it becomes a semi join (normalise), which then goes down."""
    from workloads.corpus import corpus_plans

    found = next(p for p in corpus_plans(producer="isthmus", category="integration/tpch") if p.tpch_query == 18)
    result = Optimizer(statistics=tpch_statistics, rules=_with_rule()).run(plans.load_plan(found.path))
    assert _pushed(result) >= 1
    assert check_plan(result.plan) == []
    assert plans.same_answer(backend, plans.load_plan(found.path), result.plan).num_rows > 0
