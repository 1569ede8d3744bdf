"""comma_join_order: a comma join Spark reorders is written in Spark's order; hand-built plans, and
Isthmus' TPC-H Q9 (``FROM part, supplier, lineitem, partsupp, orders, nation``) optimized with the
Spark statistics of SF 0.01 and run on Spark against the original."""

from __future__ import annotations

import filter_rule_plans as plans
import pytest

from optimizer.dag import to_dag
from optimizer.driver import Optimizer, estimated_cost
from testing.builder import INNER, Builder, cross, filter_, join, lit, read, ref


def _three_tables(b: Builder, top_emit: list[int] | None = None):
    """``(a x b) JOIN c ON a = ca AND b = cb`` under ``b = 1 AND 1 = 1``: nothing joins ``a`` and ``b``."""
    ab = cross(read("a", [("a", "i64")], rows=100), read("b", [("b", "i64")], rows=10))
    abc = join(ab, read("c", [("ca", "i64"), ("cb", "i64")], rows=1000), INNER,
               b.call("and", b.call("equal", ref(0), ref(2)), b.call("equal", ref(1), ref(3))))
    cond = b.call("and", b.call("equal", ref(1), lit(1)), b.call("equal", lit(1), lit(1)))
    top = filter_(abc, cond)
    if top_emit is not None:
        top.filter.common.emit.output_mapping.extend(top_emit)
    names = ["a", "b", "ca", "cb"] if top_emit is None else [["a", "b", "ca", "cb"][i] for i in top_emit]
    return b.plan(top, names)


def _kinds(plan) -> list[str]:
    g = to_dag(plan)
    return [g.nodes[n]["kind"] for n in g.nodes]


def test_the_region_is_joined_in_spark_order_and_keeps_its_columns():
    b = Builder()
    before = _three_tables(b, top_emit=[3, 0])
    result = plans.optimize(before, "comma_join_order")
    assert plans.fired(result) == ["comma_join_order"]
    # a JOIN c, then b (filtered by its own conjunct); the conjunct of no input stays on top, which
    # outputs the written columns cb, a through its emit
    assert plans.shape(result.plan) == "filter(join(join(read,read),filter(read)))"
    (top,) = plans.nodes_of(result.plan, "filter")[:1]
    assert list(top.common.emit.output_mapping) == [2, 0]  # (a, ca, cb, b): cb is 2, a is 0
    assert "cross" not in _kinds(result.plan)


def test_a_region_spark_joins_as_written_is_left_alone():
    b = Builder()
    # (a JOIN c ON a = ca) x b: Spark joins a, c, then b, as written
    ac = join(read("a", [("a", "i64")]), read("c", [("ca", "i64")]), INNER, b.call("equal", ref(0), ref(1)))
    plan = b.plan(cross(join(ac, read("d", [("d", "i64")]), INNER, b.call("equal", ref(1), ref(2))),
                        read("b", [("b", "i64")])), ["a", "ca", "d", "b"])
    assert plans.fired(plans.optimize(plan, "comma_join_order")) == []


def test_a_nondeterministic_condition_below_the_top_stays_where_it_is_written():
    b = Builder()
    ab = cross(read("a", [("a", "i64")]), read("b", [("b", "i64")]))
    rnd = b.call("lt", b.call("random", out="fp64"), lit(0.5, "fp64"))
    abc = join(ab, read("c", [("ca", "i64"), ("cb", "i64")]), INNER,
               b.call("and", b.call("equal", ref(0), ref(2)), b.call("equal", ref(1), ref(3)), rnd))
    plan = b.plan(filter_(abc, b.call("equal", ref(1), lit(1))), ["a", "b", "ca", "cb"])
    assert plans.fired(plans.optimize(plan, "comma_join_order")) == []
    # the same plan with the random conjunct on top is rewritten, the conjunct kept on top
    abc = join(ab, read("c", [("ca", "i64"), ("cb", "i64")]), INNER,
               b.call("and", b.call("equal", ref(0), ref(2)), b.call("equal", ref(1), ref(3))))
    plan = b.plan(filter_(abc, b.call("and", b.call("equal", ref(1), lit(1)), rnd)), ["a", "b", "ca", "cb"])
    result = plans.optimize(plan, "comma_join_order")
    assert plans.fired(result) == ["comma_join_order"]
    assert plans.shape(result.plan) == "filter(join(join(read,read),filter(read)))"


def test_the_rewrite_is_priced_as_the_written_plan():
    """The model prices the written region in Spark's order already: written in that order, the plan
    costs the same."""
    b = Builder()
    before = _three_tables(b)
    after = plans.optimize(before, "comma_join_order").plan
    assert estimated_cost(after) == pytest.approx(estimated_cost(before), rel=0.05)


@pytest.mark.spark
def test_isthmus_q9_is_optimized_whole_with_spark_statistics(spark, backend, tpch_tables):
    """Written ``part x supplier`` joined to ``lineitem`` on both keys, Isthmus' Q9 was estimated by the
    pairs of keys the product holds, which the filter on ``part`` does not thin out once pushed: the
    logical, join order and physical phases were each judged costlier and undone (no physical join)."""
    from optimizer.plan_io import load_plan
    from optimizer.spark.statistics import default_statistics
    from workloads.corpus import corpus_plans

    (found,) = [p for p in corpus_plans(producer="isthmus", category="integration/tpch") if p.tpch_query == 9]
    original = load_plan(found.path.read_text())
    statistics = default_statistics(spark=spark, tables={k: str(v) for k, v in tpch_tables.items()})
    result = Optimizer(statistics=statistics).run(original)
    assert [(p.phase, p.undone) for p in result.phases if p.undone] == []
    assert "comma_join_order" in {e.rule for e in result.events}
    kinds = _kinds(result.plan)
    assert "join" not in kinds and "cross" not in kinds, kinds  # every join has its implementation
    assert estimated_cost(result.plan, statistics=statistics) < estimated_cost(original, statistics=statistics)
    plans.same_answer(backend, original, result.plan, min_rows=100)
