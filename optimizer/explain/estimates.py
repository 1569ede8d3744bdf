"""``explain`` with estimates: rows, width and cost per relation, and with ``--analyze`` actual rows.

``substrait-opt explain PLAN --tables DIR | --stats FILE | --analyze | --format json`` lands here
(:func:`explain_with_estimates`). The text output is the tree of :mod:`optimizer.explain` with, per
relation, ``rows=`` (estimated output rows), ``width=`` (bytes per row), ``cost=`` (cumulative cost of
the subtree, :mod:`cost.model`), and with ``--analyze`` ``actual=`` (rows Spark produced for that
subtree) and ``q=`` (q-error, ``max(est/act, act/est)`` with both floored at 1)::

    |-+ Join(inner, ...) -> [...]  rows=6.0K width=24 cost=1.2M  actual=5.9K q=1.02

``--format json`` prints a JSON list, one object per relation (shared subtrees once, in tree order):
``{"path", "relation", "estimated_rows", "estimated_width", "estimated_cost", "actual_rows", "q_error"}``
(``actual_rows``/``q_error`` are ``null`` without ``--analyze``).

Statistics: those of every format and of ``optimize`` (:func:`optimizer.cli.args.statistics_from_args`):
``--stats FILE`` (:class:`~optimizer.cost.providers.FileStatistics`) wins over ``--tables DIR``, whose
tables give Spark ANALYZE statistics (cached; not with ``--no-spark-stats``) and the Parquet footers;
hints in the plan override both for their relation.

``--analyze`` runs every subtree as a plan of its own (:func:`subtree_plan`) on Spark
(:class:`optimizer.spark.SparkBackend`) and counts its rows; with ``--learn`` those counts are learned
(:mod:`optimizer.cost.learned`), and ``run --learn`` counts the subtrees of the plans it ran the same way
(:func:`learn_from_run`).

:func:`explain_before_after` is what ``optimize --explain`` and the demo print.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Mapping
from typing import Any

import networkx as nx
from substrait.proto import Plan

from optimizer.dag import from_dag, input_fields, inputs, to_dag
from optimizer.errors import OptimizerError, spark_errors
from optimizer.explain import WIDTH, human
from optimizer.expr_utils import has_subquery

# --------------------------------------------------------------------------------------------------
# Subtrees and actual rows
# --------------------------------------------------------------------------------------------------


def subtree_plan(g: nx.DiGraph, node: int, names: list[str] | None = None) -> Plan:
    """A plan whose root is the subtree at ``node`` (shared nodes inside it stay shared).

    The root's names are ``names``, else the node's schema names, else ``c0, c1, ...``.
    """
    nodes = {node} | nx.descendants(g, node)
    sub = g.subgraph(nodes).copy()
    for n in sub.nodes:
        sub.nodes[n].pop("plan_rel", None)
    for u, v in sub.edges:
        sub.edges[u, v]["via"] = {}
    if names is None:
        names = _names(g, node)
    sub.graph = {"plan": g.graph["plan"], "roots": [{"node": node, "kind": "root", "names": names, "via": None}]}
    return from_dag(sub)


def _names(g: nx.DiGraph, node: int) -> list[str]:
    schema = g.nodes[node].get("schema")
    if schema is None:
        try:
            from optimizer.dag import annotate_schemas

            sub = g.subgraph({node} | nx.descendants(g, node)).copy()
            sub.graph = dict(g.graph)
            annotate_schemas(sub)
            schema = sub.nodes[node].get("schema")
        except OptimizerError:  # types that cannot be derived: names from the estimate's width
            schema = None
    if schema is not None:
        return schema.depth_first_names()
    from optimizer.cost.cardinality import CardinalityEstimator

    n = len(CardinalityEstimator(g).estimate(node).columns)
    return [f"c{i}" for i in range(n)]


def count_rows(backend, plan: Plan) -> int:
    """Rows the plan's first root produces on Spark."""
    from optimizer.spark.failures import _execution_error

    try:
        return int(backend.to_dataframe(plan).count())
    except spark_errors() as exc:  # the Spark job failed
        raise _execution_error(exc) from None


def _finite(value: Any) -> Any:
    """``value`` with every infinite or NaN float as ``null``: JSON has no Infinity (an unknown or
    unbounded estimate)."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_finite(v) for v in value]
    return value


def actual_rows(g: nx.DiGraph, backend, nodes: list[int] | None = None,
                on_error: Callable[[int, Exception], None] | None = None) -> dict[int, int | None]:
    """Rows Spark produces for the subtree of each node (``None`` where it could not run)."""
    out: dict[int, int | None] = {}
    for node in nodes if nodes is not None else tree_order(g):
        try:
            out[node] = count_rows(backend, subtree_plan(g, node))
        except OptimizerError as exc:  # a subtree Spark cannot run alone (or fails on): no count
            out[node] = None
            if on_error is not None:
                on_error(node, exc)
    return out


def learn_from_run(plan: Plan, backend, learned) -> int:
    """Learn (into ``learned``, a :class:`~optimizer.cost.learned.LearnedRows`) the rows of every
    relation of ``plan``, each subtree counted on Spark as ``explain --analyze`` counts it
    (:func:`actual_rows`); returns how many were recorded. ``run --learn`` calls it after a plan ran:
    the backend compiles a whole plan into one Spark SQL query, so no DataFrame per relation exists to
    count its rows with ``DataFrame.observe`` during that run."""
    g = prepared_dag(plan)
    return learned.record(g, actual_rows(g, backend))


# --------------------------------------------------------------------------------------------------
# Tree order, paths, depths
# --------------------------------------------------------------------------------------------------


def relation_paths(g: nx.DiGraph) -> dict[int, str]:
    """The proto path of every relation (the first one, for a shared node), e.g.
    ``relations[0].root.input.join.left.read``-style prefixes: ``relations[0].root.input``,
    ``relations[0].root.input.join.left``..."""
    paths: dict[int, str] = {}

    def walk(node: int, path: str) -> None:
        if node in paths:
            return
        paths[node] = path
        kind = g.nodes[node]["kind"]
        fields = input_fields(kind)
        children = inputs(g, node)
        slot = 0
        for f in fields:
            if f.repeated:
                for k in range(len(children) - slot):
                    walk(children[slot + k], f"{path}.{kind}.{f.name}[{k}]")
                slot = len(children)
            elif slot < len(children):
                walk(children[slot], f"{path}.{kind}.{f.name}")
                slot += 1

    for i, root in enumerate(g.graph["roots"]):
        walk(root["node"], f"relations[{i}].root.input" if root["kind"] == "root" else f"relations[{i}].rel")
    return paths


def tree_order(g: nx.DiGraph) -> list[int]:
    """Nodes in the order the explain tree prints them (shared nodes once)."""
    return list(relation_paths(g))


_JOIN_KINDS = {"join", "hash_join", "merge_join", "nested_loop_join", "cross", "lateral_join"}


def join_depth(g: nx.DiGraph, node: int, memo: dict[int, int] | None = None) -> int:
    """The most joins on a path from ``node`` (included) down to a leaf."""
    memo = {} if memo is None else memo
    for n in nx.dfs_postorder_nodes(g, node):
        if n not in memo:
            below = max((memo[c] for c in g.successors(n)), default=0)
            memo[n] = below + (1 if g.nodes[n]["kind"] in _JOIN_KINDS else 0)
    return memo[node]


# --------------------------------------------------------------------------------------------------
# Formatting
# --------------------------------------------------------------------------------------------------


def _relation_title(g: nx.DiGraph, node: int, functions) -> str:
    from optimizer.explain import describe_rel

    try:
        return describe_rel(g, node, functions, max_len=80)
    except OptimizerError:  # an expression explain cannot render: the kind alone
        return g.nodes[node]["kind"]


class _Annotator:
    """Estimates (and actual rows) per node as the text the explain tree appends."""

    def __init__(self, g: nx.DiGraph, statistics: Any, config: Any = None) -> None:
        from optimizer.cost.cardinality import CardinalityEstimator
        from optimizer.cost.model import CostModel
        from optimizer.engine import OptimizerConfig

        self.g = g
        self.functions = g.graph["functions"]
        self.estimator = CardinalityEstimator(g, statistics, self.functions)
        self.model = CostModel(config or OptimizerConfig())
        self.actual: dict[int, int | None] = {}

    def rows(self, node: int) -> float:
        return self.estimator.estimate(node).rows

    def cost(self, node: int) -> float | None:
        try:
            return self.model.total(self.g, node, self.estimator)
        except OptimizerError:  # a relation the model cannot price
            return None

    def q(self, node: int) -> float | None:
        from optimizer.cost.estimates import q_error

        act = self.actual.get(node)
        return None if act is None else q_error(self.rows(node), act)

    def __call__(self, g: nx.DiGraph, node: int) -> str:
        est = self.estimator.estimate(node)
        text = f"rows={human(est.rows)} width={est.width:.0f} cost={human(self.cost(node))}"
        if node in self.actual:
            act = self.actual[node]
            text += "  actual=error" if act is None else f"  actual={human(act)} q={self.q(node):.2f}"
        return text

    def records(self) -> list[dict[str, Any]]:
        paths = relation_paths(self.g)
        out = []
        for node, path in paths.items():
            est = self.estimator.estimate(node)
            q = self.q(node)
            out.append({
                "path": path,
                "relation": _relation_title(self.g, node, self.functions),
                "kind": self.g.nodes[node]["kind"],
                "estimated_rows": est.rows,
                "estimated_width": est.width,
                "estimated_cost": self.cost(node),
                "actual_rows": self.actual.get(node),
                "q_error": None if q is None else round(q, 4),
            })
        return out


def prepared_dag(plan: Plan) -> nx.DiGraph:
    """The DAG of ``plan`` with schemas where they can be derived (else shown without columns)."""
    from optimizer.dag import annotate_schemas

    g = to_dag(plan)
    try:
        annotate_schemas(g)
    except OptimizerError:
        pass  # relations whose schema we cannot know are shown without columns
    return g


def relation_records(g: nx.DiGraph, statistics: Any,
                     actual: Mapping[int, int | None] | None = None) -> list[dict[str, Any]]:
    """One record per relation of ``g`` in tree order (``path``, ``relation``, ``kind``, estimated rows,
    width and cost, ``actual_rows`` and ``q_error`` from ``actual``), infinite or NaN values as None."""
    ann = _Annotator(g, statistics)
    ann.actual = dict(actual or {})
    return _finite(ann.records())


def explain_with_estimates(plan: Plan, statistics: Any, backend: Any = None, format: str = "text",
                           width: int | None = WIDTH) -> str:
    """``explain`` with estimates over ``statistics``, and with a ``backend`` the actual rows of every
    subtree; ``format`` ``text`` (the tree, lines held to ``width``, ``None``: whole) or ``json`` (one record per relation).
    Statistics with learned rows (:class:`~optimizer.cost.learned.LearnedStatistics`) correct the
    estimates of the subtrees that ran before, and learn the actual rows counted here (after the
    estimates shown are made: they are the ones the plan had before this run); the caller saves them."""
    g = prepared_dag(plan)
    ann = _Annotator(g, statistics)
    if backend is not None:
        ann.actual = actual_rows(g, backend)
    if format == "json":
        out = json.dumps(_finite(ann.records()), indent=1, allow_nan=False) + "\n"
    else:
        from optimizer.explain import explain_dag

        out = explain_dag(g, ann, width)
        if ann.actual:
            qs = sorted(q for q in (ann.q(n) for n in ann.actual) if q is not None)
            if qs:
                out += (f"\n\nq-error over {len(qs)} relations: median {qs[len(qs) // 2]:.2f}, "
                        f"max {qs[-1]:.2f}")
        out += "\n"
    learned = getattr(statistics, "learned", None)
    if learned is not None and ann.actual:
        learned.record(g, ann.actual)
    return out


def explain_before_after(plan: Plan, result: Any, statistics: Any = None, *, verbose: bool = False,
                         width: int | None = WIDTH) -> str:
    """The plan before and after optimization, each with estimates and total cost, then per phase what
    fired, the plan's cost before and after and per rule the cost of what it replaced (``result`` is an
    :class:`optimizer.driver.OptimizeResult`); with ``verbose`` also the plan after each phase (kept
    when the optimizer ran with ``keep_plans``)."""
    from optimizer.explain import explain_dag

    parts = []
    for title, p in (("before", plan), ("after", result.plan)):
        g = prepared_dag(p)
        ann = _Annotator(g, statistics)
        total = sum((ann.cost(r["node"]) or 0.0) for r in g.graph["roots"])
        priced = f"estimated cost {human(total)}"
        if has_subquery(p):
            # The tree prices a subquery at nothing where it stands; the optimizer prices the plan with
            # its subqueries as the joins they become (the normalise phase), the figure "after" compares to.
            from optimizer.driver import estimated_cost

            priced = (f"estimated cost {human(estimated_cost(p, statistics=statistics))} with its subqueries "
                      f"priced as the joins they become; {human(total)} in the tree below, which prices "
                      "them at nothing")
        parts.append(f"-- {title} ({priced})\n{explain_dag(g, ann, width)}")
        if title == "before" and verbose:
            for report in getattr(result, "phases", []):
                if report.plan_text is not None:
                    undone = " (its rewrites undone afterwards)" if report.undone else ""
                    parts.append(f"-- after phase {report.phase}{undone}\n{report.plan_text}")
    summary = result.summary() if hasattr(result, "summary") else ""
    return "\n\n".join(parts + ([summary] if summary else []))


__all__ = [
    "actual_rows",
    "count_rows",
    "explain_before_after",
    "explain_with_estimates",
    "human",
    "join_depth",
    "learn_from_run",
    "prepared_dag",
    "relation_records",
    "relation_paths",
    "subtree_plan",
    "tree_order",
]
