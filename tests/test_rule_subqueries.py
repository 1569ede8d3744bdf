"""``in_subquery_to_semi_join``, ``exists_to_semi_join`` and ``decorrelate_scalar_subquery``: where they apply, where they must
not (the COUNT bug, a constant above the aggregate, a reference to the enclosing query they cannot move,
a comparison under OR), and that the rewritten plans give the original's rows on Spark (NULL keys on
both sides, groups with no match, Isthmus' TPC-H Q4, Q17, Q18, Q20, Q21 and Q22)."""

from __future__ import annotations

import pytest
from optimizer.rules.decorrelate_scalar_subquery import RULE as DECORRELATE
from optimizer.rules.exists_to_semi_join import RULE as EXISTS
from optimizer.rules.in_subquery_to_semi_join import RULE as SEMI_JOIN
from physical_rule_plans import NO_FIXED_COSTS

from optimizer.driver import Optimizer, OptimizerConfig
from optimizer.errors import PlanError
from optimizer.plan_io import load_plan
from optimizer.schema.check import check_plan
from testing.builder import (
    NO_EXTENSION,
    Builder,
    aggregate,
    emit,
    exists,
    filter_,
    in_subquery,
    lit,
    outer,
    project,
    ref,
    scalar,
    values,
)

QUIET = OptimizerConfig(annotate_estimates=False)

#: Outer rows: (key, value); NULL keys and a key no inner row has.
OUTER = [("k", "i64"), ("v", "fp64")]
OUTER_ROWS = [(1, 0.5), (1, 3.0), (2, 1.0), (2, 9.0), (3, 1.0), (None, 0.1), (4, None)]
#: Inner rows: (key, quantity); a NULL key, a NULL quantity, a group (5) the outer side lacks.
INNER = [("ik", "i64"), ("q", "fp64")]
INNER_ROWS = [(1, 1.0), (1, 2.0), (2, 4.0), (2, None), (None, 100.0), (5, 1.0), (4, 2.0)]


def _run(rules, plan):
    return Optimizer(rules=rules, config=QUIET).run(plan)


def _fired(result, rule) -> bool:
    return any(e.rule == rule.name for e in result.events)


def _scalar_plan(b: Builder, measure: str = "avg", above=None, correlation=None, compare: str = "lt"):
    """``SELECT * FROM outer WHERE v <compare> (SELECT <above>(<measure>(q)) FROM inner WHERE ik = k)``."""
    inner = values(INNER, INNER_ROWS)
    cond = correlation if correlation is not None else b.call("equal", ref(0), outer(0))
    agg = aggregate(filter_(inner, cond), [], b.agg(measure, ref(1), out="fp64" if measure != "count" else "i64"))
    sub = agg if above is None else project(agg, above, common=emit(1))
    condition = b.call(compare, ref(1), scalar(sub))
    return b.plan(filter_(values(OUTER, OUTER_ROWS), condition), ["k", "v"])


def test_rules_are_in_the_normalise_phase():
    assert DECORRELATE.phase == SEMI_JOIN.phase == EXISTS.phase == "normalise"


@pytest.mark.parametrize("measure", ["avg", "sum", "min", "max"])
@pytest.mark.parametrize("compare", ["lt", "gte", "equal", "not_equal"])
def test_decorrelates_aggregates_that_are_null_on_no_rows(measure, compare):
    result = _run([DECORRELATE], _scalar_plan(Builder(), measure, compare=compare))
    assert _fired(result, DECORRELATE)
    assert check_plan(result.plan) == []


def test_count_is_not_decorrelated():
    """COUNT is 0, not NULL, on no rows: an inner join would drop rows the subquery keeps."""
    assert not _fired(_run([DECORRELATE], _scalar_plan(Builder(), "count")), DECORRELATE)


def test_a_constant_above_the_aggregate_is_not_decorrelated():
    """``coalesce(avg(q), 0)`` (here: a literal column) is not NULL on no rows."""
    b = Builder()
    assert not _fired(_run([DECORRELATE], _scalar_plan(b, above=lit(1.0, "fp64"))), DECORRELATE)
    b = Builder()
    strict = b.call("multiply", lit(0.5, "fp64"), ref(0), out="fp64")
    assert _fired(_run([DECORRELATE], _scalar_plan(b, above=strict)), DECORRELATE)


def test_other_references_to_the_enclosing_query_stay():
    """A correlation that is not an equality (``q > v``) cannot become a grouping key."""
    b = Builder()
    corr = b.call("and", b.call("equal", ref(0), outer(0)), b.call("gt", ref(1), outer(1)))
    assert not _fired(_run([DECORRELATE], _scalar_plan(b, correlation=corr)), DECORRELATE)


def test_a_subquery_under_or_stays():
    b = Builder()
    plan = _scalar_plan(b)
    cond = plan.relations[-1].root.input.filter.condition
    either = b.call("or", cond, b.call("equal", ref(0), lit(3)))
    plan.relations[-1].root.input.filter.condition.CopyFrom(either)
    declared = plan.extensions.add().extension_function  # 'or' is called after the plan was made
    declared.function_anchor, declared.name, declared.extension_urn_reference = b.anchors["or"], "or", NO_EXTENSION
    assert not _fired(_run([DECORRELATE], plan), DECORRELATE)


def _in_plan(b: Builder, correlated: bool = False):
    inner = values(INNER, INNER_ROWS)
    if correlated:
        inner = filter_(inner, b.call("gt", ref(1), outer(1)))
    haystack = project(inner, common=emit(0))
    return b.plan(filter_(values(OUTER, OUTER_ROWS), b.call("and", in_subquery([ref(0)], haystack),
                                                            b.call("gt", ref(1), lit(0.2, "fp64")))), ["k", "v"])


def test_in_subquery_becomes_a_semi_join():
    result = _run([SEMI_JOIN], _in_plan(Builder()))
    assert _fired(result, SEMI_JOIN)
    assert check_plan(result.plan) == []
    assert not _fired(_run([SEMI_JOIN], _in_plan(Builder(), correlated=True)), SEMI_JOIN)


def _exists_plan(b: Builder, negated: bool = False, correlation=None):
    """``SELECT * FROM outer WHERE [NOT] EXISTS (SELECT * FROM inner WHERE ik = k AND q > 1.5)``."""
    corr = correlation if correlation is not None else b.call("equal", ref(0), outer(0))
    inner = filter_(values(INNER, INNER_ROWS), b.call("and", corr, b.call("gt", ref(1), lit(1.5, "fp64"))))
    cond = exists(project(inner, common=emit(1)))
    if negated:
        cond = b.call("not", cond)
    return b.plan(filter_(values(OUTER, OUTER_ROWS), cond), ["k", "v"])


def test_exists_becomes_a_semi_or_anti_join():
    for negated in (False, True):
        result = _run([EXISTS], _exists_plan(Builder(), negated))
        assert _fired(result, EXISTS)
        assert check_plan(result.plan) == []
    b = Builder()  # a reference two levels out of a subquery one level deep: refused where it stands
    deeper = b.call("equal", ref(0), outer(0, steps_out=2))
    with pytest.raises(PlanError, match=r"set_predicate.*outer reference steps_out=2, but there are 1 enclosing"):
        _run([EXISTS], _exists_plan(b, correlation=deeper))
    b = Builder()  # uncorrelated: no join condition to move (left to Spark)
    assert not _fired(_run([EXISTS], _exists_plan(b, correlation=b.call("gt", ref(0), lit(0)))), EXISTS)


def _same_rows_on_spark(backend, plan, rule):
    from optimizer.difftest.results import compare_tables

    result = _run([rule], plan)
    assert _fired(result, rule)
    expected = backend.execute(plan)
    assert expected.num_rows > 0
    assert compare_tables(backend.execute(result.plan), expected)


@pytest.mark.spark
@pytest.mark.parametrize("measure", ["avg", "sum", "min", "max"])
@pytest.mark.parametrize("compare", ["lt", "gte", "not_equal"])
def test_decorrelated_plans_give_the_same_rows_on_spark(backend, measure, compare):
    _same_rows_on_spark(backend, _scalar_plan(Builder(), measure, compare=compare), DECORRELATE)


@pytest.mark.spark
def test_semi_joined_plan_gives_the_same_rows_on_spark(backend):
    _same_rows_on_spark(backend, _in_plan(Builder()), SEMI_JOIN)


@pytest.mark.spark
@pytest.mark.parametrize("negated", [False, True])
def test_exists_as_a_join_gives_the_same_rows_on_spark(backend, negated):
    _same_rows_on_spark(backend, _exists_plan(Builder(), negated), EXISTS)


@pytest.mark.spark
@pytest.mark.parametrize("query, rules", [(4, {"exists_to_semi_join"}),
                                          (21, {"exists_to_semi_join"}),
                                          (22, {"exists_to_semi_join"}),
                                          (17, {"decorrelate_scalar_subquery", "reduce_aggregate_input"}),
                                          (18, {"in_subquery_to_semi_join"}),
                                          (20, {"in_subquery_to_semi_join", "decorrelate_scalar_subquery",
                                                "reduce_aggregate_input"})])
def test_isthmus_tpch_subqueries_on_spark(backend, tpch_statistics, query, rules):
    """All rules on Isthmus' plans: its subqueries become joins, the aggregate of Q17 and Q20 is then
    reduced as in DataFusion's plans, and the answers stay the same."""

    from optimizer.difftest.results import compare_tables
    from workloads.corpus import corpus_plans

    found = next(p for p in corpus_plans(producer="isthmus", category="integration/tpch") if p.tpch_query == query)
    plan = load_plan(found.path)
    result = Optimizer(statistics=tpch_statistics, config=NO_FIXED_COSTS).run(plan)
    fired = {e.rule for e in result.events}
    assert rules <= fired, fired
    assert check_plan(result.plan) == []
    expected = backend.execute(plan)
    assert expected.num_rows > 0
    assert compare_tables(backend.execute(result.plan), expected)


def _uncorrelated_plan(b: Builder):
    """``SELECT * FROM outer WHERE v < (SELECT max(q) FROM inner JOIN inner2 ON ik = ik2)``: the
    subquery reads nothing of the enclosing query, and has a join to implement."""
    from testing.builder import INNER as INNER_JOIN
    from testing.builder import join

    other = values([("ik2", "i64")], [(1,), (2,), (None,)])
    joined = join(values(INNER, INNER_ROWS), other, INNER_JOIN, b.call("equal", ref(0), ref(2)))
    sub = aggregate(joined, [], b.agg("max", ref(1), out="fp64"))
    return b.plan(filter_(values(OUTER, OUTER_ROWS), b.call("lt", ref(1), scalar(sub))), ["k", "v"])


def _subquery_rel(plan):
    from optimizer.driver import uncorrelated_subqueries

    (rel,) = uncorrelated_subqueries(plan)
    return rel


def test_an_uncorrelated_subquery_is_optimized_as_a_plan_of_its_own():
    plan = _uncorrelated_plan(Builder())
    result = Optimizer(config=QUIET).run(plan)
    sub = _subquery_rel(result.plan)
    assert "hash_join" in str(sub) or "nested_loop_join" in str(sub)
    assert "hash_join" not in str(_subquery_rel(plan))
    assert any(p.phase == "subquery 0: physical" and p.events for p in result.phases)
    assert check_plan(result.plan) == []


def test_a_correlated_subquery_is_not_a_plan_of_its_own():
    from optimizer.driver import uncorrelated_subqueries

    plan = _scalar_plan(Builder())
    assert uncorrelated_subqueries(plan) == []
    result = _run([SEMI_JOIN], plan)
    assert not any(p.phase.startswith("subquery") for p in result.phases)


@pytest.mark.spark
def test_an_optimized_subquery_gives_the_same_rows_on_spark(backend):
    from optimizer.difftest.results import compare_tables

    plan = _uncorrelated_plan(Builder())
    result = Optimizer(config=QUIET).run(plan)
    expected = backend.execute(plan)
    assert expected.num_rows > 0
    assert compare_tables(backend.execute(result.plan), expected)
