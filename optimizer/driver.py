"""The optimizer driver: load the plan into a DAG, run the rule phases, write the plan back.

Phases (each to a fixed point, capped): ``normalise`` -> ``logical`` (predicate pushdown, ...) ->
``join_order`` -> ``physical`` (join implementation, top-N, windows, filters into reads) ->
``annotate`` (estimates written into ``hint.stats``). The rules, with their phases, are listed in
:mod:`rules`. Then each uncorrelated subquery left in an expression is optimized the same way, as a
plan of its own (:func:`uncorrelated_subqueries`).

Never costlier: each phase is judged by the cost model as its policy says
(:data:`optimizer.engine.PHASE_POLICIES`, each with its reason). The model prices a plan normalised;
from there it prices the plan before and after each phase, and a phase whose rewrites leave the plan
estimated costlier than it found it is undone (its report says so); in the physical phase a rewrite is
applied only if it does not raise the estimated cost of what it replaces; ``join_order`` is judged with
the physical phase after it. So the plan that comes out is never estimated costlier than the plan that
went in, by the same model that priced each rule's choice.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import networkx as nx
from substrait.proto import Plan

from optimizer.dag import annotate_schemas, copy_dag, from_dag, inputs, to_dag
from optimizer.engine import (  # noqa: F401  (COST_TOLERANCE: the tests' and benchmarks' name)
    COST_TOLERANCE,
    PHASE_POLICIES,
    OptimizerConfig,
    Phase,
    PhaseReport,
    Policy,
    Rule,
    costlier,
    plan_price,
    run_phase,
)
from optimizer.expr_utils import FunctionRegistrar, walk
from optimizer.load.pipeline import LoadedPlan, load
from optimizer.plan_io import deep_messages

if TYPE_CHECKING:
    from optimizer.cost.cardinality import CardinalityEstimator
    from optimizer.cost.estimates import RelEstimate
    from optimizer.cost.model import CostModel
    from optimizer.load.functions import FunctionTable
    from optimizer.schema.record import Schema


class PlanContext:
    """The :class:`~optimizer.engine.RuleContext` the driver gives the rules: the DAG, its schemas, the
    statistics, estimates and costs (computed on first use, kept until a rewrite invalidates them), the
    capability profile.
    """

    def __init__(self, g: nx.DiGraph, statistics: Any = None, capabilities: Any = None,
                 config: OptimizerConfig | None = None) -> None:
        self.g = g
        self.statistics = statistics
        self.capabilities = capabilities
        self.config = config or OptimizerConfig()
        self.registrar = FunctionRegistrar(g.graph["plan"], g.graph["functions"])
        self._estimator: CardinalityEstimator | None = None
        self._cost_model: CostModel | None = None

    @property
    def functions(self) -> FunctionTable:
        return self.registrar.table

    def schema(self, node: int) -> Schema:
        return self.g.nodes[node]["schema"]

    def derive_schema(self, node: int) -> Schema:
        from optimizer.schema import rel_schema

        data = self.g.nodes[node]
        return rel_schema(data["rel"], [self.g.nodes[c]["schema"] for c in inputs(self.g, node)], self.functions,
                          path=f"node {node} ({data['kind']})")

    @property
    def estimator(self) -> CardinalityEstimator:
        if self._estimator is None:
            from optimizer.cost.cardinality import CardinalityEstimator

            self._estimator = CardinalityEstimator(self.g, self.statistics, self.functions)
        return self._estimator

    @property
    def cost_model(self) -> CostModel:
        if self._cost_model is None:
            from optimizer.cost.model import CostModel

            self._cost_model = CostModel(self.config)
        return self._cost_model

    def snapshot(self) -> PlanContext:
        """A context over a copy of the DAG as it is now (:func:`copy_dag`), which no later rewrite of
        this one changes, with the estimates and costs known so far (the copy has the same relations)."""
        copy = PlanContext(copy_dag(self.g), self.statistics, self.capabilities, self.config)
        if self._estimator is not None:
            copy._estimator = self._estimator.fork(copy.g)
            copy._estimator.functions = copy.functions  # the copy's table, which this plan's declarations miss
            copy._cost_model = self.cost_model
            self.cost_model.adopt(self._estimator, copy._estimator)
        return copy

    def estimate(self, node: int) -> RelEstimate:
        return self.estimator.estimate(node)

    def cost(self, node: int) -> float:
        """Total estimated cost of the subtree at ``node`` (shared subtrees counted once)."""
        return self.cost_model.total(self.g, node, self.estimator)

    def invalidate(self, changed: int | None = None, replaced: int | None = None) -> None:
        """Forget the estimates the last rewrite changed: all, or those of ``changed`` (the relation
        that replaced another, ``replaced`` where its schema is the same) and of the relations that read
        it (:meth:`CardinalityEstimator.invalidate`, which is given ``replaced`` where the rows of
        ``changed`` are partitioned as its were)."""
        if self._estimator is not None:
            if replaced is not None and not self._partitioned_alike(changed, replaced):
                replaced = None
            self._estimator.invalidate(changed, replaced)

    def _partitioned_alike(self, changed: int, replaced: int) -> bool:
        """Whether the rows of ``changed`` are partitioned as those of ``replaced`` were
        (:func:`cost.properties.distribution`; not known for ``replaced``: no)."""
        from optimizer.cost import properties

        known = self.estimator.distributions
        old = known.get(replaced)
        return (old is not None and changed in self.g
                and properties.distribution(self.g, changed, known, self.functions) == old)


#: The name callers build a context by (``RuleContext(g, statistics, capabilities, config)``).
RuleContext = PlanContext


@dataclass
class OptimizeResult:
    plan: Plan
    phases: list[PhaseReport] = field(default_factory=list)
    seconds: float = 0.0
    graph: nx.DiGraph | None = None
    #: Seconds outside the phases: ``load`` (the plan read, its DAG and schemas), ``pricing`` (the whole
    #: plan priced between phases), ``write`` (the DAG written back as a plan, for the target); with the
    #: phases' seconds and ``other`` they add up to :attr:`seconds`.
    timings: dict[str, float] = field(default_factory=dict)

    @property
    def events(self):
        """What the rules did, in order (the rewrites of an undone phase left out)."""
        return [e for p in self.phases if not p.undone for e in p.events]

    def summary(self) -> str:
        """The time taken, where (the phases, and load, pricing and write), and per phase what fired with
        the plan's estimated cost before and after, per rule the cost of what it replaced and of what
        replaced it (summed over its rewrites, in phases priced rewrite by rewrite)."""
        return "\n".join(self.summary_lines())

    def summary_lines(self) -> list[str]:
        accounted = sum(self.timings.values()) + sum(p.seconds for p in self.phases)
        lines = [f"optimized in {self.seconds * 1000:.1f} ms"]
        if "load" in self.timings:
            lines.append(f"  {'load':<10} {self.timings['load'] * 1000:7.1f} ms  the plan read, its DAG and schemas")
        for p in self.phases:
            fired: dict[str, list] = {}
            for e in p.events:
                fired.setdefault(e.rule, []).append(e)
            text = ", ".join(f"{k} x{len(v)}" for k, v in fired.items()) or "nothing fired"
            if p.cost_before is not None and p.cost_after is not None and p.events:
                text += f"; plan cost {_human(p.cost_before)} -> {_human(p.cost_after)}"
            elif p.cost_after is not None and p.cost_before is None:
                text += f"; plan cost {_human(p.cost_after)} (the model prices the plan from here)"
            if p.undone:
                text += f" (undone: {p.undone})"
            lines.append(f"  {p.phase:<10} {p.seconds * 1000:7.1f} ms  {text}")
            for rule, events in fired.items():
                priced = [e for e in events if e.cost_before is not None and e.cost_after is not None]
                if priced:
                    before = sum(e.cost_before for e in priced)
                    after = sum(e.cost_after for e in priced)
                    lines.append(f"  {'':<10} {'':>10}    {rule}: replaced {_human(before)} by {_human(after)} "
                                 f"({_delta(before, after)})")
            if p.declined:
                lines.append(f"  {'':<10} {'':>10}    declined (costlier): {len(p.declined)}")
        for key, what in (("pricing", "the plan priced between phases (statistics read on first use)"),
                          ("learned", "the plan optimized the other way, with or without the learned rows, "
                                      "not kept (priced higher with them)"),
                          ("write", "the plan written back")):
            if key in self.timings:
                lines.append(f"  {key:<10} {self.timings[key] * 1000:7.1f} ms  {what}")
        if self.timings:
            lines.append(f"  {'other':<10} {(self.seconds - accounted) * 1000:7.1f} ms")
        return lines


def _human(x: float) -> str:
    from optimizer.explain import human

    return human(x)


def _delta(before: float, after: float) -> str:
    if before <= 0:
        return "no cost before"
    return f"{(after - before) / before * 100:+.0f}%"


#: Rules of the physical phase whose rewrites are logical: for a target that reads logical relations
#: only they run (priced one rewrite at a time, as in that phase), the others do not.
#: ``reduce_aggregate_input`` adds a semi join and shares a deterministic subtree (inlined for a target
#: without ``ReferenceRel``: the subtree is read twice, which the rule already requires to pay);
#: ``order_conjuncts`` reorders a filter's conjuncts.
LOGICAL_IN_PHYSICAL = frozenset({"reduce_aggregate_input", "order_conjuncts"})


@dataclass
class _Run:
    """One run of the phases over a plan: its context (``ctx.g`` is the plan as it stands), the reports,
    the plan's estimated cost as the last judged phase left it (None until the model prices the plan),
    and, until the next phase has judged it, the plan a :attr:`Policy.WITH_NEXT` phase found with its cost.
    """

    ctx: PlanContext
    result: OptimizeResult
    cost: float | None = None
    before_with_next: tuple[PlanContext, float] | None = None


class Optimizer:
    """Runs the rule phases over a plan. ``run`` also reports what each rule did and the time taken."""

    def __init__(self, statistics: Any = None, capabilities: Any = None, config: OptimizerConfig | None = None,
                 rules: list[Rule] | None = None, target: Any = None, *, keep_plans: bool = False) -> None:
        from optimizer.targets import as_target

        self.statistics = statistics
        self.target = as_target(target)
        # The target's reader capabilities unless the caller names others (the Spark target's are the
        # default profile filter_into_read falls back to).
        self.capabilities = capabilities if capabilities is not None else self.target.capabilities
        self.config = config or OptimizerConfig()
        #: Keep the plan each phase leaves, as the explain tree (``PhaseReport.plan_text``): ``--verbose``.
        self.keep_plans = keep_plans
        if rules is None:
            from optimizer.rules import RULES

            rules = RULES
        self.rules = [r for r in rules if r.name not in self.config.disabled_rules and self._fits_target(r)]

    def _fits_target(self, rule: Rule) -> bool:
        """A rule of the physical phase runs for a target that reads logical relations only if what it
        writes is logical (:data:`LOGICAL_IN_PHYSICAL`); ``filter_into_read`` only if the target applies
        ``ReadRel.filter`` and its engine does not move filters into its scans itself,
        ``order_conjuncts`` only if its engine evaluates conjuncts in the order written (the order the
        rule prices). ``share_repeated_subtrees`` runs only for a target that reads ``ReferenceRel`` s (for
        another, the writer would write each copy again, reading every column any copy reads)."""
        if rule.name == "share_repeated_subtrees":
            return self.target.reference_rel
        if rule.phase != "physical" or self.target.physical_relations:
            return True
        if rule.name == "filter_into_read":
            return self.target.read_filter == "applied" and self.target.scan_filters == "written"
        if rule.name == "order_conjuncts":
            return self.target.conjunct_order == "written"
        return rule.name in LOGICAL_IN_PHYSICAL

    @deep_messages()
    def run(self, plan: Plan | LoadedPlan | Any) -> OptimizeResult:
        """Optimize ``plan`` (anything :func:`optimizer.load.pipeline.load` reads, or what it returned) and
        write it for the target (:func:`optimizer.write.write_for_target`)."""
        from optimizer.write import write_for_target

        start = time.perf_counter()
        loaded = load(plan)
        # A field past its input or a call no overload takes would reach the rules as an IndexError or
        # a rewrite of a plan that means nothing: refused here, with its path, as every command refuses it.
        loaded.check()
        if getattr(self.statistics, "learned", None) is not None:
            result, functions = self._learned_or_not(loaded)
        else:
            result, functions = self._run(loaded)
        written = time.perf_counter()
        result.plan = write_for_target(LoadedPlan(result.plan, functions), self.target)
        result.seconds = time.perf_counter() - start
        result.timings["write"] = result.timings.get("write", 0.0) + time.perf_counter() - written
        return result

    def _run(self, plan: Plan | LoadedPlan | Any) -> tuple[OptimizeResult, FunctionTable]:
        """The plan optimized (not yet written for the target) and its function table, which the rules kept
        (the loaded plan's, with what they declared)."""
        start = time.perf_counter()
        loaded = load(plan)
        g = to_dag(loaded.plan, loaded.functions)
        annotate_schemas(g)
        run = _Run(PlanContext(g, self.statistics, self.capabilities, self.config), OptimizeResult(loaded.plan))
        result = run.result
        result.timings["load"] = time.perf_counter() - start
        phases_start = time.perf_counter()
        for phase in PHASE_POLICIES:
            rules = [r for r in self.rules if r.phase == phase.name]
            if rules:
                report = self._judged(run, phase, rules)
                result.phases.append(report)
                self._keep_plan(report, run.ctx.g)
        self._judge_unfollowed(run)
        written = time.perf_counter()
        result.timings["pricing"] = written - phases_start - sum(p.seconds for p in result.phases)
        result.plan = from_dag(run.ctx.g)
        result.timings["write"] = time.perf_counter() - written
        result.graph = run.ctx.g
        functions = self._optimize_subqueries(result, run.ctx.functions)
        result.seconds = time.perf_counter() - start
        return result, functions

    def _learned_or_not(self, loaded: LoadedPlan) -> tuple[OptimizeResult, FunctionTable]:
        """With learned rows (:class:`cost.learned.LearnedStatistics`): the plan optimized with them and the
        plan optimized without them, whichever the model prices lower with them (a tie keeps the
        learned one). The search is not exhaustive: each phase is judged on its own, and the learned rows
        correct only the subtrees that ran, so other numbers may lead it to a plan that, priced over the
        better numbers, is dearer than the one it finds without them. Priced by the same model, the
        plan kept is never costlier than the plan the optimizer gives without the learned rows. Each is
        priced without the row counts in its hints (:func:`_without_row_hints`): those are the estimates
        its own run wrote (the annotate phase), which would stand in for the learned model's. A run that
        found no learned subtree estimated as the other would: its plan is the other's, made once."""
        store = self.statistics.learned
        hits = store.hits
        learned, functions = self._run(loaded)
        if store.hits == hits:
            return learned, functions
        plain_optimizer = Optimizer(self.statistics.without_learned, self.capabilities, self.config,
                                    self.rules, self.target, keep_plans=self.keep_plans)
        plain, plain_functions = plain_optimizer._run(loaded)
        learned_cost, plain_cost = (
            estimated_cost(LoadedPlan(_without_row_hints(r.plan), table), statistics=self.statistics,
                           config=self.config)
            for r, table in ((learned, functions), (plain, plain_functions)))
        if learned_cost > plain_cost:
            plain.timings["learned"] = learned.seconds
            return plain, plain_functions
        learned.timings["learned"] = plain.seconds
        return learned, functions

    def _policy(self, phase: Phase) -> Policy:
        """The phase's policy for this target: :attr:`Policy.WITH_NEXT` only where the next phase runs as
        priced (a target that reads physical relations); elsewhere the phase is judged as a whole."""
        if phase.policy is Policy.WITH_NEXT and not self.target.physical_relations:
            return Policy.WHOLE
        return phase.policy

    def _judged(self, run: _Run, phase: Phase, rules: list[Rule]) -> PhaseReport:
        """Run ``phase`` on the plan and judge it by its policy, or as the phase after a
        :attr:`Policy.WITH_NEXT` one; its report has the plan's cost before and after, where priced."""
        policy = self._policy(phase)
        if policy is Policy.PRICED_AFTER:
            return self._phase(run.ctx, phase, rules)
        if run.cost is None:
            run.cost = plan_cost(run.ctx)
            if run.result.phases:  # phases priced after, all of them: the plan as priced from here on
                run.result.phases[-1].cost_after = run.cost
        cost_before = run.cost
        if run.before_with_next is not None:
            report = self._after_with_next(run, phase, rules)
        elif policy is Policy.WITH_NEXT:
            report = self._with_next(run, phase, rules)
        else:  # WHOLE, and PER_REWRITE (whose rewrites run_phase priced one by one)
            report = self._whole(run, phase, rules)
        report.cost_before, report.cost_after = cost_before, run.cost
        return report

    def _whole(self, run: _Run, phase: Phase, rules: list[Rule]) -> PhaseReport:
        """:attr:`Policy.WHOLE`: the phase's rewrites are undone if they leave the plan costlier."""
        saved = _Saved(run.ctx)
        report = self._phase(run.ctx, phase, rules, saved.take)
        if report.events:
            kept = saved.ctx
            cost_after = plan_cost(run.ctx)
            if costlier(cost_after, run.cost):
                report.undone = (f"its plan was estimated costlier ({cost_after:.4g} > {run.cost:.4g}): "
                                 "the phase's rewrites are undone")
                run.ctx, saved.ctx = kept, run.ctx
            else:
                run.cost = cost_after
        saved.discard()
        return report

    def _with_next(self, run: _Run, phase: Phase, rules: list[Rule]) -> PhaseReport:
        """:attr:`Policy.WITH_NEXT`: the phase's rewrites are undone if, its joins priced as the next phase
        can bind them, they leave the plan costlier; else the next phase judges them
        (:meth:`_after_with_next`)."""
        saved = _Saved(run.ctx)
        report = self._phase(run.ctx, phase, rules, saved.take)
        if report.events:
            kept = saved.ctx
            bound_after, bound_before = plan_cost(run.ctx, bindable=True), plan_cost(kept, bindable=True)
            if costlier(bound_after, bound_before):
                report.undone = (f"its plan was estimated costlier with its joins bound ({bound_after:.4g} > "
                                 f"{bound_before:.4g}): its rewrites are undone")
                _discard(run.ctx)
                run.ctx = kept
            else:
                run.before_with_next = (kept, run.cost)
                run.cost = plan_cost(run.ctx)
        else:
            saved.discard()
        return report

    def _after_with_next(self, run: _Run, phase: Phase, rules: list[Rule]) -> PhaseReport:
        """The phase after a :attr:`Policy.WITH_NEXT` one, whatever its own policy: if it leaves the plan
        costlier than it was before both, it runs on the plan without the previous phase's rewrites
        instead (and neither phase's rewrites are kept if that is costlier too)."""
        found, cost_found = run.before_with_next
        run.before_with_next = None
        report = self._phase(run.ctx, phase, rules)
        cost_after = plan_cost(run.ctx) if report.events else run.cost
        if costlier(cost_after, cost_found):
            saved = _Saved(found)
            alternative = self._phase(found, phase, rules, saved.take)
            alternative_cost = plan_cost(found) if alternative.events else cost_found
            previous = run.result.phases[-1]
            previous.undone = (f"with the {phase.name} phase after it, its plan was estimated costlier "
                               f"({cost_after:.4g} > {cost_found:.4g}): its rewrites are undone")
            previous.cost_after = previous.cost_before
            _discard(run.ctx)
            run.ctx, report, cost_after = found, alternative, alternative_cost
            if costlier(cost_after, cost_found):
                report.undone = (f"its plan was estimated costlier ({cost_after:.4g} > "
                                 f"{cost_found:.4g}): the phase's rewrites are undone")
                run.ctx, found, cost_after = saved.ctx, run.ctx, cost_found  # events: it was taken
                saved.ctx = found
            saved.discard()
        else:
            _discard(found)
        run.cost = cost_after
        return report

    def _judge_unfollowed(self, run: _Run) -> None:
        """A :attr:`Policy.WITH_NEXT` phase no phase ran after (no later phase had rules): its rewrites are
        undone if they leave the plan costlier than it found it."""
        if run.before_with_next is None or run.cost is None:
            return
        found, cost_found = run.before_with_next
        if costlier(run.cost, cost_found):
            last = run.result.phases[-1]
            last.undone = (f"its plan was estimated costlier ({run.cost:.4g} > {cost_found:.4g}): "
                           "the phase's rewrites are undone")
            last.cost_after = cost_found
            run.ctx, found = found, run.ctx
        run.before_with_next = None
        _discard(found)

    def _optimize_subqueries(self, result: OptimizeResult, functions: FunctionTable) -> FunctionTable:
        """Optimize each subquery the rules left in an expression as a plan of its own (the rules see its
        relations only as part of the expression). Only a subquery that reads nothing from outside
        itself, no outer reference and no ``ReferenceRel``, is one; a correlated one stays as it is.
        The functions the optimized subquery declares are added to the plan's own (the registrar keeps
        every anchor the plan had, so both can share them). Its phases' reports follow the plan's.
        ``functions``: the table of ``result.plan``; returned as the subqueries' runs left it."""
        plan = result.plan
        for i, rel in enumerate(uncorrelated_subqueries(plan)):
            sub = Plan()
            sub.CopyFrom(plan)
            sub.ClearField("relations")
            sub.relations.add().root.input.CopyFrom(rel)
            # Loaded already, as part of the plan: its header and table are the plan's as they stand.
            done, functions = self._run(LoadedPlan(sub, functions))
            rel.CopyFrom(done.plan.relations[0].root.input)
            for name in ("extension_urns", "extensions", "type_aliases"):
                plan.ClearField(name)
                getattr(plan, name).extend(getattr(done.plan, name))
            for report in done.phases:
                report.phase = f"subquery {i}: {report.phase}"
                result.phases.append(report)
        return functions

    def _keep_plan(self, report: PhaseReport, g: nx.DiGraph) -> None:
        if self.keep_plans:
            from optimizer.explain import explain_dag

            report.plan_text = explain_dag(g)

    def _phase(self, ctx: PlanContext, phase: Phase, rules: list[Rule],
               before_change: Callable[[], None] | None = None) -> PhaseReport:
        return run_phase(ctx.g, phase.name, rules, ctx, self.config.max_iterations,
                         priced=phase.policy is Policy.PER_REWRITE, before_change=before_change)


class _Saved:
    """The plan of a context as a phase found it (:meth:`PlanContext.snapshot`), taken when the phase
    first changes the plan: most phases change nothing, and a copy then would be made for nothing.
    ``ctx``: the copy once taken (None before), or whatever the caller puts in its place to drop."""

    def __init__(self, of: PlanContext) -> None:
        self.of = of
        self.ctx: PlanContext | None = None

    def take(self) -> None:
        if self.ctx is None:
            self.ctx = self.of.snapshot()

    def discard(self) -> None:
        if self.ctx is not None:
            _discard(self.ctx)


def _discard(ctx: PlanContext) -> None:
    """Empty the DAG of a context the run no longer uses (a phase's saved plan, or the plan a phase left
    when its rewrites are undone). A networkx graph refers to itself (through the views it caches), so
    dropped, it and all it holds would wait for the garbage collector's next full pass, which walks
    every object alive: emptied, its relations, estimates and schemas go at once."""
    ctx.g.clear()


def _without_row_hints(plan: Plan) -> Plan:
    """A copy of ``plan`` without ``hint.stats`` in any relation (each ``RelCommon`` of the plan)."""
    out = Plan()
    out.CopyFrom(plan)
    for message in walk(out, enter_subqueries=True):
        if message.DESCRIPTOR.full_name == "substrait.RelCommon" and message.HasField("hint"):
            message.hint.ClearField("stats")
    return out


def plan_cost(ctx: PlanContext, bindable: bool = False) -> float:
    """The estimated cost of the whole plan in ``ctx.g`` (:func:`optimizer.engine.plan_price`)."""
    return plan_price(ctx.g, ctx.estimator, ctx.cost_model, bindable)


def estimated_cost(plan: Plan | LoadedPlan | Any, *, statistics: Any = None, config: OptimizerConfig | None = None) -> float:
    """The cost model's estimate for a whole plan, as the driver prices it: normalised (the phases whose
    policy is :attr:`Policy.PRICED_AFTER`, with the standard rules), then :func:`plan_cost`."""
    from optimizer.rules import RULES

    loaded = load(plan)
    g = to_dag(loaded.plan, loaded.functions)
    annotate_schemas(g)
    ctx = PlanContext(g, statistics, config=config)
    for phase in PHASE_POLICIES:
        if phase.policy is Policy.PRICED_AFTER:
            run_phase(g, phase.name, [r for r in RULES if r.phase == phase.name], ctx, ctx.config.max_iterations)
    return plan_cost(ctx)


def optimize(plan: Plan | LoadedPlan | Any, *, target: Any = "spark", statistics: Any = None, capabilities: Any = None,
             config: OptimizerConfig | None = None) -> Plan:
    """Rewrite a logical plan into a cheaper one that gives the same answer, written for ``target`` (a
    name of :data:`optimizer.targets.TARGETS`, a profile path or a :class:`~optimizer.targets.Target`):
    physical relations for ``spark``, logical ones read the way the target reads them elsewhere."""
    return Optimizer(statistics, capabilities, config, target=target).run(plan).plan


#: The relation of each kind of subquery, by ``Expression.Subquery`` field.
_SUBQUERY_RELS = {"scalar": "input", "in_predicate": "haystack", "set_predicate": "tuples",
                  "set_comparison": "right"}


def uncorrelated_subqueries(plan: Plan) -> list[Any]:
    """The relations (``Rel`` messages of ``plan``, to change in place) of the subqueries in the plan's
    expressions that read nothing from outside themselves: no outer reference, no ``ReferenceRel``.
    Subqueries inside these are left to the optimization of their own."""
    found: list[Any] = []

    def walk(message: Any) -> None:
        for fd, value in message.ListFields():
            if fd.type != fd.TYPE_MESSAGE or fd.message_type.full_name in _NO_EXPRESSIONS:
                continue
            for item in value if fd.label == fd.LABEL_REPEATED else (value,):
                if fd.message_type.full_name == "substrait.Expression.Subquery":
                    kind = item.WhichOneof("subquery_type")
                    rel = getattr(getattr(item, kind), _SUBQUERY_RELS[kind]) if kind in _SUBQUERY_RELS else None
                    if rel is not None and _self_contained(rel):
                        found.append(rel)
                        continue
                walk(item)

    try:
        for plan_rel in plan.relations:
            walk(plan_rel)
    finally:
        # It refers to itself: cleared here, it is freed on return, not at the garbage collector's next pass.
        walk = None  # type: ignore[assignment]
    return found


#: Messages that hold no expression, so no subquery (types, literals, a relation's emit and hints, the
#: plan's extension declarations): not walked.
_NO_EXPRESSIONS = frozenset({
    "substrait.Type", "substrait.NamedStruct", "substrait.Expression.Literal", "substrait.RelCommon",
    "substrait.extensions.SimpleExtensionURI", "substrait.extensions.SimpleExtensionURN",
    "substrait.extensions.SimpleExtensionDeclaration", "substrait.extensions.AdvancedExtension", "substrait.Version",
})

#: What a subquery reads from outside itself: a column of an enclosing query, a relation of the plan.
_OUTSIDE = frozenset({"substrait.Expression.FieldReference.OuterReference", "substrait.ReferenceRel"})


def _self_contained(message: Any) -> bool:
    """No outer reference and no ``ReferenceRel`` anywhere in ``message``."""
    for fd, value in message.ListFields():
        if fd.type != fd.TYPE_MESSAGE:
            continue
        if fd.message_type.full_name in _OUTSIDE:
            return False
        for item in value if fd.label == fd.LABEL_REPEATED else (value,):
            if not _self_contained(item):
                return False
    return True
