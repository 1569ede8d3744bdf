"""annotate_estimates: the estimates written into every relation's ``hint.stats``, and only when asked."""

from __future__ import annotations

from optimizer.rules import RULES, annotate_estimates

from optimizer.dag import to_dag
from optimizer.driver import Optimizer, OptimizerConfig
from testing.builder import Builder, filter_, ints, join, lit, read, ref


def _plan():
    b = Builder()
    rel = join(filter_(ints(1, 2, 3), b.call("gt", ref(0), lit(1))), read("t", [("k", "i64")], rows=50),
               1, b.call("equal", ref(0), ref(1)))
    return b.plan(rel, ["x", "k"])


def _hints(plan) -> list[tuple[float, float]]:
    g = to_dag(plan)
    stats = [getattr(g.nodes[n]["rel"], g.nodes[n]["kind"]).common.hint.stats for n in g]
    return [(s.row_count, s.record_size) for s in stats]


def test_it_is_the_last_rule_in_the_last_phase():
    assert RULES[-1] is annotate_estimates.RULE and annotate_estimates.RULE.phase == "annotate"


def test_every_relation_gets_its_estimate():
    result = Optimizer().run(_plan())
    assert all(rows > 0 and width > 0 for rows, width in _hints(result.plan))
    assert [p.phase for p in result.phases][-1] == "annotate" and not result.phases[-1].events


def test_off_when_not_asked_for():
    plans = [Optimizer(config=OptimizerConfig(annotate_estimates=False)).run(_plan()).plan,
             Optimizer(config=OptimizerConfig(disabled_rules=frozenset({"annotate_estimates"}))).run(_plan()).plan]
    for plan in plans:
        # the read keeps the row count it was written with; nothing else has a hint
        assert sorted(_hints(plan)) == [(0.0, 0.0)] * (len(_hints(plan)) - 1) + [(50.0, 8.0)]
