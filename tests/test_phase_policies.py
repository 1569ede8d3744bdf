"""The phases' policies (:data:`optimizer.engine.PHASE_POLICIES`): the declaration, docs/architecture.md's
phase table against it and :data:`optimizer.rules.RULES`, and how the driver judges a phase by the next one.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from optimizer.rules import RULES
from substrait.proto import Rel

from optimizer.dag import inputs
from optimizer.driver import Optimizer
from optimizer.engine import PHASE_POLICIES, PHASES, NewRel, Policy, Rule
from optimizer.explain import explain_plan
from testing.builder import INNER, Builder, join, project, read, ref

ROOT = Path(__file__).resolve().parents[1]


def _phase_table() -> list[list[str]]:
    """The rows of docs/architecture.md's phase table, as cells."""
    doc = (ROOT / "docs" / "architecture.md").read_text()
    header = "| phase | rules, in order | policy | why |"
    assert header in doc, "docs/architecture.md has no phase table"
    rows = []
    for line in doc.split(header, 1)[1].splitlines()[2:]:
        if not line.startswith("|"):
            break
        rows.append([cell.strip() for cell in line.strip().strip("|").split(" | ")])
    return rows


def test_the_architecture_doc_lists_every_rule_of_each_phase_with_its_policy_and_reason():
    rows = _phase_table()
    assert [row[0] for row in rows] == list(PHASES)
    for (name, rules, policy, why), phase in zip(rows, PHASE_POLICIES, strict=True):
        listed = re.findall(r"`(\w+)`", re.sub(r"\([^)]*\)", "", rules))  # the names, not the notes
        assert listed == [r.name for r in RULES if r.phase == name], f"phase {name}"
        assert policy == phase.policy.value, f"phase {name}"
        assert why == phase.reason, f"phase {name}"


def test_the_python_api_doc_lists_the_rules_in_their_order():
    doc = (ROOT / "docs" / "python-api.md").read_text()
    start = doc.index("`rules.RULES` is the standard list")
    paragraph = doc[start:doc.index("\n\n", start)]
    listed = re.findall(r"`(\w+)`", re.sub(r"\([^)]*\)", "", paragraph))
    assert listed == [r.name for r in RULES] + ["rules", "annotate_estimates"]


def test_every_rule_runs_in_a_declared_phase_and_the_unjudged_phases_come_first():
    assert {r.phase for r in RULES} <= set(PHASES)
    policies = [p.policy for p in PHASE_POLICIES]
    unjudged = [p is Policy.PRICED_AFTER for p in policies]
    # the driver prices the plan once the first judged phase is reached (Optimizer._judged)
    assert unjudged == sorted(unjudged, reverse=True)
    assert all(p.reason for p in PHASE_POLICIES)


# -- a phase judged with the next one ---------------------------------------------------------------------


def _drop_passing_project(g, node, ctx):
    """A join_order-phase rewrite that makes any plan cheaper: a project that computes nothing is
    replaced by its input."""
    rel = g.nodes[node]["rel"].project
    if rel.expressions or rel.common.HasField("emit"):
        return None
    (child,) = g.successors(node)
    return child


def _passing() -> Rel:
    rel = Rel()
    rel.project.SetInParent()
    return rel


def _two_projects(on_any_plan: bool):
    """A rewrite that makes any plan costlier: two projects that compute nothing under a join's right
    input, once per plan; unless ``on_any_plan``, only on a plan that has no project."""

    def apply(g, node, ctx):
        if g.graph.get("two_projects"):
            return None
        if not on_any_plan and any(kind == "project" for _, kind in g.nodes(data="kind")):
            return None
        g.graph["two_projects"] = True
        left, right = inputs(g, node)
        joined = Rel()
        joined.CopyFrom(g.nodes[node]["rel"])
        return NewRel(joined, [left, NewRel(_passing(), [NewRel(_passing(), [right])])])

    return apply


def _plan():
    """orders joined with a project of customer that computes nothing."""
    b = Builder()
    orders = read("orders", [("o_orderkey", "i64"), ("o_custkey", "i64")], rows=1.5e6)
    customer = project(read("customer", [("c_custkey", "i64"), ("c_name", "string")], rows=1.5e5))
    return b.plan(join(orders, customer, INNER, b.call("equal", ref(1), ref(2))), ["k", "c", "ck", "n"])


CHEAPER = Rule("drop_passing_project", "join_order", frozenset({"project"}), _drop_passing_project)


def _costs(text: str) -> tuple[float, float]:
    after, before = (float(x) for x in re.search(r"\((\S+) > (\S+)\)", text).groups())
    return after, before


def test_a_phase_whose_next_phase_makes_its_plan_costlier_is_undone_and_the_next_runs_without_it():
    """The next phase (here annotate, the one with rules after join_order) makes join_order's plan costlier
    than the plan join_order found, and makes nothing of that plan: join_order's rewrites are undone and
    the next phase's result is the plan join_order found."""
    plan = _plan()
    costlier_after = Rule("two_projects", "annotate", frozenset({"join"}), _two_projects(on_any_plan=False))
    result = Optimizer(rules=[CHEAPER, costlier_after]).run(plan)
    ordered, after = result.phases
    assert [e.rule for e in ordered.events] == ["drop_passing_project"]
    assert ordered.undone is not None and ordered.undone.startswith("with the annotate phase after it")
    worse, found = _costs(ordered.undone)  # as printed: 4 significant digits
    assert worse > found == pytest.approx(ordered.cost_before, rel=1e-3)
    assert ordered.cost_after == ordered.cost_before  # the plan it found
    assert after.events == [] and after.undone is None and after.cost_after == ordered.cost_before
    assert result.events == []
    assert explain_plan(result.plan) == explain_plan(Optimizer(rules=[]).run(plan).plan)


def test_when_the_next_phase_makes_both_plans_costlier_neither_phase_is_kept():
    plan = _plan()
    costlier = Rule("two_projects", "annotate", frozenset({"join"}), _two_projects(on_any_plan=True))
    result = Optimizer(rules=[CHEAPER, costlier]).run(plan)
    ordered, after = result.phases
    assert ordered.undone is not None and ordered.undone.startswith("with the annotate phase after it")
    assert [e.rule for e in after.events] == ["two_projects"]
    assert after.undone is not None and after.undone.startswith("its plan was estimated costlier")
    worse, found = _costs(after.undone)
    assert worse > found == pytest.approx(ordered.cost_before, rel=1e-3)
    assert after.cost_after == ordered.cost_after == ordered.cost_before
    assert result.events == []
    assert explain_plan(result.plan) == explain_plan(Optimizer(rules=[]).run(plan).plan)


def test_for_a_target_that_reads_logical_relations_the_phase_is_judged_as_a_whole():
    """DuckDB reads logical relations: no physical phase binds join_order's joins, so its plan is judged
    by itself (cheaper: kept) and the next phase by the plan join_order left (costlier: undone)."""
    plan = _plan()
    costlier_after = Rule("two_projects", "annotate", frozenset({"join"}), _two_projects(on_any_plan=False))
    result = Optimizer(rules=[CHEAPER, costlier_after], target="duckdb").run(plan)
    ordered, after = result.phases
    assert ordered.undone is None and ordered.cost_after < ordered.cost_before
    assert after.undone is not None and after.undone.startswith("its plan was estimated costlier")
    assert after.cost_before == after.cost_after == ordered.cost_after
    assert [e.rule for e in result.events] == ["drop_passing_project"]


def test_the_saved_plans_a_run_no_longer_uses_are_emptied(monkeypatch):
    """Each judged phase that changes the plan saves the plan it starts from (``PlanContext.snapshot``); a
    saved plan the run does not go back to is emptied when the phase is judged, not left (a networkx graph refers to itself)
    for the garbage collector's next full pass: after a run, only the plan it returns has relations."""
    import json

    from benchmarks.optimizer_latency import wide_plan
    from optimizer.driver import PlanContext
    from optimizer.plan_io import load_plan
    from optimizer.spark.statistics import default_statistics

    saved: list = []
    snapshot = PlanContext.snapshot

    def recorded(self):
        copy = snapshot(self)
        saved.append(copy)
        return copy

    monkeypatch.setattr(PlanContext, "snapshot", recorded)
    result = Optimizer(statistics=default_statistics()).run(load_plan(json.dumps(wide_plan("chain", 20))))
    assert len(saved) >= 2
    assert all(len(copy.g) == 0 for copy in saved if copy.g is not result.graph)
    assert len(result.graph) > 0


def test_a_phase_that_changes_nothing_saves_no_copy_of_the_plan(monkeypatch):
    """The plan a phase starts from is copied when the phase first changes it: a plan no rule rewrites is
    never copied (most judged phases of most plans change nothing)."""
    from optimizer.driver import PlanContext
    from optimizer.plan_io import load_plan
    from optimizer.spark.statistics import default_statistics

    saved: list = []
    snapshot = PlanContext.snapshot

    def recorded(self):
        saved.append(snapshot(self))
        return saved[-1]

    monkeypatch.setattr(PlanContext, "snapshot", recorded)
    plan = load_plan('''{"relations": [{"root": {"input": {"read": {"namedTable": {"names": ["t"]},
        "baseSchema": {"names": ["a"], "struct": {"types": [{"i64": {"nullability": "NULLABILITY_REQUIRED"}}]}}}},
        "names": ["a"]}}]}''')
    result = Optimizer(statistics=default_statistics()).run(plan)
    assert [p.phase for p in result.phases if p.events] == []
    assert len(result.phases) >= 3
    assert saved == []
