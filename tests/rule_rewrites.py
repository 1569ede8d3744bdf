"""Helpers for the tests of one rule: the rewrite the rule makes on its own, and the joins of a plan."""

from __future__ import annotations

from collections.abc import Callable

from substrait.proto import Plan

from optimizer.dag import annotate_schemas, from_dag, to_dag
from optimizer.driver import PlanContext
from optimizer.engine import Rule, run_phase
from optimizer.plan_io import load_plan


def forced_by(rule: Rule) -> Callable[[object], tuple[Plan, int]]:
    """``forced(plan)``: the plan after ``rule`` alone, applied wherever it matches (no cost judgement):
    the rewrite itself, and how many times it was made."""

    def forced(plan) -> tuple[Plan, int]:
        g = to_dag(load_plan(plan))
        annotate_schemas(g)
        report = run_phase(g, rule.phase, [rule], PlanContext(g, None))
        return from_dag(g), len(report.events)

    return forced


def join_types(plan) -> list[int]:
    """The types of the plan's joins, sorted."""
    g = to_dag(plan)
    return sorted(g.nodes[n]["rel"].join.type for n in g if g.nodes[n]["kind"] == "join")
