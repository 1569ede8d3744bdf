"""The rule engine: rules match a node of the DAG and return a replacement subgraph.

A rule is a pure function ``apply(g, node, ctx) -> Replacement | None``: it reads the DAG and the
statistics and never changes them; the engine applies what it returns. A replacement is either
an existing node id (the matched node is replaced by it, e.g. a trivially true filter by its
input) or a :class:`NewRel` tree whose leaves may be existing node ids.

The engine checks every replacement: the new subgraph's output must have the same number of
columns, of the same types, as the node it replaces. A rule that breaks this is a bug, reported as
such instead of silently changing the plan's answer.

Phases run in order; within a phase the rules run over the nodes, parents first, until none fires
(a fixed point) or the iteration cap is reached. How the driver judges each phase by the cost model is
declared with the phases, with its reason (:data:`PHASE_POLICIES`).
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from enum import Enum
from typing import Any, Protocol

import networkx as nx
from substrait.proto import Rel

from optimizer.cost.cardinality import CardinalityEstimator
from optimizer.cost.estimates import RelEstimate
from optimizer.cost.model import CostModel
from optimizer.dag import (
    copy_dag,
    drop_subtree_keys,
    forget_subtree_keys,
    inputs,
    is_broadcast,
    note_added,
    rel_inputs,
    reused_broadcasts,
    strip_inputs,
    subtree_key,
    written_like,
)
from optimizer.errors import OptimizerError
from optimizer.expr_utils import FunctionRegistrar
from optimizer.load.functions import FunctionTable
from optimizer.schema import rel_schema
from optimizer.schema.record import Schema


class Policy(Enum):
    """How the driver judges a phase by the cost model (:class:`optimizer.driver.Optimizer`)."""

    #: Not judged: the model prices the plan as this phase leaves it, from here on. Such a phase comes
    #: before every phase that is judged.
    PRICED_AFTER = "priced after"
    #: The whole plan priced before and after the phase: a phase that leaves it costlier is undone.
    WHOLE = "whole"
    #: Each rewrite applied only if it does not raise the cost of what it replaces (the others are
    #: declined, :func:`run_phase` ``priced``), and the phase judged as a whole too.
    PER_REWRITE = "per rewrite"
    #: Kept if the plan, its logical joins priced as the cheaper of Spark's choice and the join
    #: ``implement_joins`` can bind, is not costlier; then judged by what the next phase makes of it: that
    #: phase runs on the plan without this one's rewrites instead if its result is costlier than the plan
    #: before both. Only for a target that reads physical relations (where the next phase binds joins);
    #: elsewhere the phase is judged as a whole.
    WITH_NEXT = "with the next phase"


@dataclass(frozen=True)
class Phase:
    """A phase of rules: its name (a :class:`Rule`'s ``phase``), how the driver judges it and why."""

    name: str
    policy: Policy
    reason: str


#: The phases in the order they run, each with its policy and the reason for it.
PHASE_POLICIES: tuple[Phase, ...] = (
    Phase("normalise", Policy.PRICED_AFTER,
          "Spark applies these rewrites to any plan before planning it: the model prices a plan normalised"),
    Phase("logical", Policy.WHOLE,
          "a logical rewrite may pay only later (a filter moved to where a read can take it): none is judged alone"),
    Phase("join_order", Policy.WITH_NEXT,
          "an order is chosen for the joins the physical phase can bind: it is worth what that phase makes of it"),
    Phase("physical", Policy.PER_REWRITE,
          "physical choices are final and local (a join left logical is priced as what Spark would run)"),
    Phase("annotate", Policy.WHOLE,
          "it replaces no relation (it writes the final plan's estimates into hint.stats): no rewrite to price"),
)

#: The phase names, in order.
PHASES = tuple(p.name for p in PHASE_POLICIES)

#: Relative difference of estimated cost below which two plans count as equally costly (float noise).
COST_TOLERANCE = 1e-9


def plan_price(g: nx.DiGraph, estimator: CardinalityEstimator, cost_model: CostModel, bindable: bool = False) -> float:
    """The estimated cost of the whole plan in ``g``: every relation reachable from a root, once (a
    subtree shared by several parents, or written as a plan relation of its own for ``ReferenceRel``s to
    read, is computed once). ``bindable``: each logical join priced as the cheaper of what Spark would
    run and what ``implement_joins`` can bind (:meth:`cost.model.CostModel.node_cost`); a region of inner
    joins written with a cross product is priced in the order Spark joins it (:meth:`cost.model.CostModel.price`)."""
    nodes: set[int] = set()
    for root in g.graph["roots"]:
        nodes.add(root["node"])
        nodes |= nx.descendants(g, root["node"])
    priced = nodes - reused_broadcasts(g, nodes)  # a broadcast Spark reuses costs nothing again
    return cost_model.price(g, priced, estimator, bindable=bindable)


def costlier(after: float, before: float) -> bool:
    """Whether cost ``after`` is above cost ``before`` by more than :data:`COST_TOLERANCE`."""
    return after > before * (1 + COST_TOLERANCE)


@dataclass(frozen=True)
class OptimizerConfig:
    """Knobs of the optimizer (defaults suit Spark on a small cluster)."""

    max_iterations: int = 10
    #: Join graphs up to this many relations are ordered by dynamic programming, larger ones greedily.
    dp_join_limit: int = 14
    #: ... and while dynamic programming considers at most this many join pairs (csg-cmp pairs), as
    #: DuckDB's plan enumerator does: each pair is priced by the cost model (about 10 us), a 10-relation
    #: clique has 28,501, a 12-clique 261,625; the largest TPC-H / TPC-DS join region 1,044. Beyond, greedy.
    dp_pair_budget: int = 10_000
    #: Beyond, greedy ordering spends at most this many seconds of the thread's CPU time on one join
    #: graph (a chain of 1,000 relations takes about 0.5 s; a 200-relation clique, whose every estimate
    #: carries 39,800 columns, a minute); past it the graph keeps its written order.
    greedy_seconds: float = 1.0
    #: A hash join's build side under this many bytes is broadcast (Spark's default threshold is 10 MiB).
    broadcast_threshold_bytes: float = 10 * 1024 * 1024
    #: ``share_repeated_subtrees`` shares copies of a subtree only where it reads a table of at least this
    #: many rows (estimated, after the read's filter): copies of smaller ones cost less to compute again
    #: than to share (TPC-DS SF 1 on Spark: Q1, Q30, Q81 over the returns tables ran slower shared).
    share_min_rows: float = 1_000_000
    #: Rule names to skip.
    disabled_rules: frozenset[str] = frozenset()
    #: Write estimates into every relation's hint.stats.
    annotate_estimates: bool = True
    #: The cost model's constants (a ``cost.model.CostConstants``); None: its defaults.
    cost_constants: Any = None


class RuleContext(Protocol):
    """What a rule may read: the DAG, schemas, statistics, estimates, costs, the capability profile.

    Rules must not change anything they are given; they return replacements. The one exception is
    declaring a function they need (``registrar``), which adds an extension declaration to the plan.
    :class:`optimizer.driver.PlanContext` is the implementation the driver passes.
    """

    g: nx.DiGraph
    statistics: Any
    capabilities: Any
    config: OptimizerConfig
    registrar: FunctionRegistrar

    @property
    def functions(self) -> FunctionTable: ...

    @property
    def estimator(self) -> CardinalityEstimator: ...

    @property
    def cost_model(self) -> CostModel: ...

    def schema(self, node: int) -> Schema:
        """The output schema of ``node``."""
        ...

    def derive_schema(self, node: int) -> Schema:
        """The output schema of ``node`` derived from its relation and its inputs' schemas."""
        ...

    def estimate(self, node: int) -> RelEstimate:
        """The estimated rows, width and columns of ``node``."""
        ...

    def cost(self, node: int) -> float:
        """Total estimated cost of the subtree at ``node`` (shared subtrees counted once)."""
        ...

    def invalidate(self, changed: int | None = None, replaced: int | None = None) -> None:
        """Forget the estimates a rewrite changed (``replaced``: the relation ``changed`` took the place
        of, with the same schema)."""
        ...


class RuleBug(OptimizerError):
    """A rule produced a subgraph that is not equivalent in shape to what it replaced."""

    exit_code = 3


@dataclass
class NewRel:
    """A relation to add: its own fields (``rel``; input fields are ignored) and its inputs."""

    rel: Rel
    inputs: list[NewRel | int] = field(default_factory=list)


Replacement = NewRel | int


def new_subtree(rel: Rel) -> NewRel:
    """A relation tree given whole (a subquery's relation) as relations to add to the DAG."""
    return NewRel(strip_inputs(rel), [new_subtree(r) for r in rel_inputs(rel)])


@dataclass(frozen=True)
class Rule:
    """A rewrite: which node kinds it looks at, the phase it runs in and the function that rewrites."""

    name: str
    phase: str
    kinds: frozenset[str]
    apply: Callable[[nx.DiGraph, int, RuleContext], Replacement | None]
    description: str = ""


@dataclass
class RuleEvent:
    rule: str
    phase: str
    node: int
    before: str
    after: str
    new_node: int
    #: In a priced phase, the estimated cost of what the rewrite replaced and of what replaced it (the
    #: relations only one side has); ``None`` where the phase is not priced rewrite by rewrite.
    cost_before: float | None = None
    cost_after: float | None = None


def _next_id(g: nx.DiGraph) -> int:
    counter = g.graph.get("_ids")
    if counter is None:
        counter = itertools.count(max(g.nodes, default=-1) + 1)
        g.graph["_ids"] = counter
    return next(counter)


def _kind(rel: Rel) -> str:
    kind = rel.WhichOneof("rel_type")
    if kind is None:
        raise RuleBug("a rule produced an empty relation")
    return kind


def add_subgraph(g: nx.DiGraph, new: Replacement, schema_of: Callable[[int], Any] | None = None,
                 added: list[int] | None = None, _made: dict[int, tuple[NewRel, int]] | None = None) -> int:
    """Add a :class:`NewRel` tree to ``g`` and return its root node (an int is returned as is). ``added``
    collects the nodes added. A :class:`NewRel` object the tree holds in several places is one node,
    which each of them reads (a subtree the rule shares)."""
    if isinstance(new, int):
        if new not in g:
            raise RuleBug(f"a rule referred to node {new}, which is not in the plan")
        return new
    made = {} if _made is None else _made
    seen = made.get(id(new))
    if seen is not None and seen[0] is new:
        return seen[1]
    children = [add_subgraph(g, child, schema_of, added, made) for child in new.inputs]
    node = _next_id(g)
    made[id(new)] = (new, node)
    g.add_node(node, kind=_kind(new.rel), rel=strip_inputs(new.rel))
    note_added(g, node)
    if added is not None:
        added.append(node)
    for slot, child in enumerate(children):
        if g.has_edge(node, child):
            g.edges[node, child]["slots"].append(slot)
        else:
            g.add_edge(node, child, slot=slot, slots=[slot], via={})
    if schema_of is not None:
        g.nodes[node]["schema"] = schema_of(node)
    return node


def replace_node(g: nx.DiGraph, old: int, new_root: int, *, clean: bool = False) -> None:
    """Make every reader of ``old`` read ``new_root``, then drop what nothing reads any more. ``clean``:
    every node but those under ``new_root`` was reachable from a root, so only ``old`` and what is below
    it can be left unread."""
    if old == new_root:
        return
    readers = list(g.predecessors(old))
    forget_subtree_keys(g, readers)  # they read another subtree now
    for parent in readers:
        if parent == new_root:
            continue  # the replacement reads the old node itself (e.g. a filter put above it)
        data = dict(g.edges[parent, old])
        g.remove_edge(parent, old)
        data["via"] = {}
        if g.has_edge(parent, new_root):
            slots = sorted(g.edges[parent, new_root]["slots"] + data["slots"])
            g.edges[parent, new_root].update(slots=slots, slot=slots[0])
        else:
            g.add_edge(parent, new_root, **data)
    for root in g.graph["roots"]:
        if root["node"] == old:
            root["node"] = new_root
            root["via"] = None
    collect_garbage(g, [old] if clean else None)


@dataclass
class Trial:
    """A replacement applied to a copy of the DAG (:func:`trial`): what a rule prices before it rewrites."""

    g: nx.DiGraph
    estimator: CardinalityEstimator
    root: int
    #: The nodes the replacement added, children first.
    added: list[int]

    def price(self, cost_model: CostModel, bindable: bool = False) -> float:
        return plan_price(self.g, self.estimator, cost_model, bindable=bindable)


def trial(g: nx.DiGraph, node: int, replacement: Replacement, ctx: RuleContext, *,
          scratch: nx.DiGraph | None = None, functions: FunctionTable | None = None) -> Trial:
    """``replacement`` in the place of ``node`` in a copy of ``g`` (``scratch``: the copy, when the caller
    made it to declare a function in it; ``functions``: then its table), estimated by a fork of the rule
    context's estimator: every estimate known is kept but those above the rewrite, which change with it
    (not only those of the relations it replaces)."""
    scratch = copy_dag(g) if scratch is None else scratch
    table = ctx.functions if functions is None else functions
    estimator = ctx.estimator.fork(scratch)
    ctx.cost_model.adopt(ctx.estimator, estimator)

    def derive(n: int):
        return rel_schema(scratch.nodes[n]["rel"], [scratch.nodes[c]["schema"] for c in inputs(scratch, n)], table)

    added: list[int] = []
    root = add_subgraph(scratch, replacement, derive, added)
    replace_node(scratch, node, root)
    estimator.invalidate(root)
    return Trial(scratch, estimator, root, added)


def not_costlier(g: nx.DiGraph, node: int, replacement: Replacement, ctx: RuleContext, rule: str) -> bool:
    """Whether the whole plan with ``replacement`` in the place of ``node`` is priced at most as high as
    the plan as it is (:func:`costlier`; the rewrite priced on a :func:`trial`). A rewrite found costlier
    is remembered by the subtree's digest, per ``rule``: the phase's next passes do not price it again."""
    declined = g.graph.setdefault(f"{rule}_declined", set())
    key = subtree_key(g, node)
    if key in declined:
        return False
    if costlier(trial(g, node, replacement, ctx).price(ctx.cost_model), plan_price(g, ctx.estimator, ctx.cost_model)):
        declined.add(key)
        return False
    return True


def collect_garbage(g: nx.DiGraph, among: list[int] | None = None) -> None:
    """Remove nodes no root reaches. ``among``: only these and the nodes below them can be unreached
    (all others are reached, or read by nothing but these): a node of a DAG is unreached when nothing
    reads it and no root names it, or when all that read it are unreached."""
    if among is not None:
        roots = {root["node"] for root in g.graph["roots"]}
        dead: list[int] = []
        stack = list(among)
        while stack:
            n = stack.pop()
            if n in g and n not in roots and not g.pred[n]:
                stack.extend(g.successors(n))
                g.remove_node(n)
                dead.append(n)
        drop_subtree_keys(g, dead)
        return
    live: set[int] = set()
    for root in g.graph["roots"]:
        live.add(root["node"])
        live |= nx.descendants(g, root["node"])
    dead = [n for n in g.nodes if n not in live]
    g.remove_nodes_from(dead)
    drop_subtree_keys(g, dead)


def same_shape(old_schema, new_schema) -> str | None:
    """Why two output schemas are not interchangeable (None if they are)."""
    if old_schema is None or new_schema is None:
        return None
    if len(old_schema.types) != len(new_schema.types):
        return f"{len(old_schema.types)} columns became {len(new_schema.types)}"
    for i, (a, b) in enumerate(zip(old_schema.types, new_schema.types, strict=True)):
        if a.WhichOneof("kind") != b.WhichOneof("kind"):
            return f"column {i} changed type from {a.WhichOneof('kind')} to {b.WhichOneof('kind')}"
    return None


@dataclass
class PhaseReport:
    phase: str
    iterations: int = 0
    seconds: float = 0.0
    events: list[RuleEvent] = field(default_factory=list)
    #: Why the phase's rewrites were undone (the plan they made was estimated costlier), or None.
    undone: str | None = None
    #: Rewrites not applied because the cost model priced them above what they would replace.
    declined: list[str] = field(default_factory=list)
    #: The whole plan's estimated cost before and after the phase (its rewrites undone or not), where the
    #: driver prices it; ``None`` where it does not (before the plan is normalised).
    cost_before: float | None = None
    cost_after: float | None = None
    #: The plan as the phase left it (the explain tree), kept only when the driver is asked to.
    plan_text: str | None = None


def _only_under(g: nx.DiGraph, node: int, new_root: int, added: list[int]) -> tuple[set[int], set[int]] | None:
    """The relations only the subtree at ``node`` has and those only the one at ``new_root`` has, where
    ``added`` are the nodes just added (all of them under ``new_root``) and every other node is reached
    from a root; None where that takes more than a walk near ``node``. The added nodes read, besides each
    other, only ``node`` and its inputs: those and all below are in both subtrees, and a node under
    ``node`` that is read only along one path from it avoiding them is in the old subtree alone."""
    fresh = set(added)
    if new_root not in fresh:
        return None
    kept = {c for f in added for c in g.successors(f) if c not in fresh}
    if not kept <= set(g.successors(node)) | {node}:
        return None
    if node in kept:
        return set(), fresh
    old_only = {node}
    stack = [node]
    while stack:
        for c in g.successors(stack.pop()):
            if c in kept or c in old_only:
                continue
            if len(g.pred[c]) != 1:
                return None
            old_only.add(c)
            stack.append(c)
    return old_only, fresh


def _replaced_costs(g: nx.DiGraph, node: int, new_root: int, ctx: RuleContext,
                    added: list[int] | None = None) -> tuple[float, float]:
    """The estimated costs of the relations only the subtree at ``node`` has and of those only the one
    at ``new_root`` has: what they share (the inputs both read) costs the same on either side. The new
    relations are read as ``node`` is (their widths count the same columns). ``added``: the nodes just
    added, where every other node is reached from a root."""
    found = _only_under(g, node, new_root, added) if added is not None else None
    if found is not None:
        return _priced_apart(g, node, new_root, ctx, *found)
    old = {node} | nx.descendants(g, node)
    new = {new_root} | nx.descendants(g, new_root)
    ctx.estimator.same_needs(new_root, node)  # the new relations are read as the old ones are
    rest: set[int] = set()

    def price(nodes: set[int], bindable: bool) -> float:
        if any(g.nodes[n]["kind"] == "exchange" for n in nodes):
            # A broadcast written like one the rest of the plan computes is Spark's ReusedExchange: free.
            if not rest:
                for root in g.graph["roots"]:
                    rest.update({root["node"]} | nx.descendants(g, root["node"]))
                rest.difference_update(old ^ new)
            nodes = nodes - reused_broadcasts(g, nodes, rest)
        return sum(ctx.cost_model.node_cost(g, n, ctx.estimator, bindable=bindable).total for n in nodes)

    # A logical join the rewrite creates is offered to implement_joins later in the phase: priced as the
    # cheaper of Spark's own choice and the join that rule can bind.
    return price(old - new, False), price(new - old, True)


def _priced_apart(g: nx.DiGraph, node: int, new_root: int, ctx: RuleContext, old_only: set[int],
                  new_only: set[int]) -> tuple[float, float]:
    """:func:`_replaced_costs` from the relations only each side has (:func:`_only_under`), the rest of
    the plan being every node but those: a broadcast written like one of the rest is found by digest
    (:func:`optimizer.dag.written_like`) instead of by listing the rest."""
    ctx.estimator.same_needs(new_root, node)  # the new relations are read as the old ones are

    def price(nodes: set[int], bindable: bool) -> float:
        if any(g.nodes[n]["kind"] == "exchange" for n in nodes):
            # :func:`optimizer.dag.reused_broadcasts` over ``nodes``, the rest of the plan elsewhere.
            computed: set[bytes] = set()
            reused: set[int] = set()
            for n in sorted(n for n in nodes if is_broadcast(g, n)):
                key = subtree_key(g, n)
                if key in computed or any(m not in old_only and m not in new_only and is_broadcast(g, m)
                                          for m in written_like(g, key)):
                    reused.add(n)
                computed.add(key)
            nodes = nodes - reused
        return sum(ctx.cost_model.node_cost(g, n, ctx.estimator, bindable=bindable).total for n in nodes)

    return price(old_only, False), price(new_only, True)


def run_phase(g: nx.DiGraph, phase: str, rules: list[Rule], ctx: RuleContext | None, max_iterations: int = 10,
              priced: bool = False, before_change: Callable[[], None] | None = None) -> PhaseReport:
    """Apply ``rules`` to ``g`` (in place) until a fixed point or ``max_iterations`` passes.

    ``priced``: a rewrite is applied only if the cost model (``ctx.cost``) prices the new subtree at most
    as high as the one it replaces (both read the same inputs, so the rest of the plan is unchanged);
    otherwise the relation stays as it is and the rewrite is listed in ``report.declined``.
    ``before_change``: called once, before the first relation is added to ``g`` (the plan as the phase
    found it, for the caller to keep).
    """
    report = PhaseReport(phase)
    start = time.perf_counter()
    # Whether every node is reached from a root (after the first collection): then only what a rewrite
    # replaced or added can be left unreached, and found without walking the whole plan.
    clean = False
    for _ in range(max_iterations):
        report.iterations += 1
        changed = False
        for node in list(nx.topological_sort(g)):
            if node not in g:
                continue
            # A rule that does not rewrite the node leaves its relation as it is (a declined rewrite's
            # relations are removed again, and with them, before the first collection, the node if no
            # root reaches it): its kind holds while it is in the plan.
            kind = g.nodes[node]["kind"]
            for rule in rules:
                if kind not in rule.kinds or node not in g:
                    continue
                result = rule.apply(g, node, ctx)
                if result is None or result == node:
                    continue
                if before_change is not None:
                    before_change()
                    before_change = None
                before = g.nodes[node]["kind"]
                old_schema = g.nodes[node].get("schema")
                added: list[int] = []
                new_root = add_subgraph(g, result, ctx.derive_schema if ctx is not None else None, added)
                problem = same_shape(old_schema, g.nodes[new_root].get("schema"))
                if problem:
                    raise RuleBug(f"rule {rule.name} changed the output of a {before} relation: {problem}")
                old_cost = new_cost = None
                if priced and new_root != node:
                    old_cost, new_cost = _replaced_costs(g, node, new_root, ctx, added if clean else None)
                    if costlier(new_cost, old_cost):
                        collect_garbage(g, added if clean else None)  # the new relations: nothing reads them
                        clean = True
                        report.declined.append(f"{rule.name} at node {node} ({before} -> "
                                               f"{g.nodes[new_root]['kind'] if new_root in g else '?'}): "
                                               f"{new_cost:.4g} > {old_cost:.4g}")
                        continue
                replace_node(g, node, new_root, clean=clean)
                clean = True
                if ctx is not None:
                    # Same schema: the readers may keep their estimates if the estimator finds the new
                    # relation estimated and partitioned as the old one.
                    ctx.invalidate(new_root, node if old_schema is not None
                                   and old_schema == g.nodes[new_root].get("schema") else None)
                report.events.append(RuleEvent(rule.name, phase, node, before, g.nodes[new_root]["kind"], new_root,
                                               old_cost, new_cost))
                changed = True
                break
        if not changed:
            break
    report.seconds = time.perf_counter() - start
    return report


def input_schemas(g: nx.DiGraph, node: int) -> list:
    return [g.nodes[c].get("schema") for c in inputs(g, node)]
