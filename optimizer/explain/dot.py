"""Plan pictures: the relation DAG of a plan as Graphviz DOT, and as SVG through Graphviz's ``dot``.

Every relation is one box: its kind and key properties (as in :mod:`optimizer.explain`), then the
annotation lines (estimated rows and cost, actual rows). Edges go from a relation to its inputs and
are labelled with the input slot where it matters (``L``/``R`` for the two sides of a join). A
subtree read twice (a ``ReferenceRel``, or a self-join of one node) is drawn **once**, with one
incoming edge per use. Output columns are drawn as the plan's roots (``Root(names=[...])``).

* :func:`dag_to_dot` -- DOT text of a DAG (no Graphviz binary needed);
* :func:`before_after_dot` -- two plans side by side, one cluster each ("before", "after");
* :func:`render_svg` -- DOT to SVG with Graphviz's ``dot`` (``apt-get install graphviz``);
* :func:`explain_dot` -- what ``substrait-opt explain IN --format dot|svg`` prints (estimates with
  ``--tables``/``--stats``, actual rows with ``--analyze``);
* :func:`estimate_annotator`, :func:`hint_annotator` -- the per-node annotations (actual rows from
  :func:`optimizer.explain.estimates.actual_rows`).

>>> from optimizer.plan_io import load_plan
>>> plan = load_plan('{"relations": [{"root": {"input": {"read": {"namedTable": {"names": ["nation"]},'
...     ' "baseSchema": {"names": ["n"], "struct": {"types": [{"i64": {"nullability": "NULLABILITY_REQUIRED"}}]}}}},'
...     ' "names": ["n"]}}]}')
>>> print(dag_to_dot(to_dag(plan)))  # doctest: +NORMALIZE_WHITESPACE
digraph plan {
  graph [rankdir=TB, fontname="Helvetica", fontsize=11, nodesep=0.3, ranksep=0.35];
  node [shape=box, style="rounded,filled", fillcolor="#ffffff", fontname="Helvetica", fontsize=10];
  edge [dir=back, arrowtail=normal, color="#555555", fontsize=9];
  "root0" [label="Root(names=[n])", shape=plaintext, style=""];
  "root0" -> "n0";
  "n0" [label="Read\\nnation", fillcolor="#e8f1fb"];
}
"""

from __future__ import annotations

import shutil
import subprocess
import textwrap
from collections.abc import Callable, Mapping
from typing import Any

import networkx as nx
from substrait.proto import Plan

from optimizer.dag import inputs, to_dag
from optimizer.errors import ExecutionError, OptimizerError, UnsupportedError
from optimizer.explain import _title, describe_rel
from optimizer.explain.estimates import actual_rows, human

Annotate = Callable[[nx.DiGraph, int], str]

_FILL = {
    "read": "#e8f1fb",
    "filter": "#fff6dd",
    "project": "#f2f2f2",
    "aggregate": "#e9f7ea",
    "join": "#fde8e8",
    "hash_join": "#fde8e8",
    "merge_join": "#fde8e8",
    "nested_loop_join": "#fde8e8",
    "cross": "#fbd5d5",
    "sort": "#efe8fb",
    "top_n": "#efe8fb",
    "fetch": "#efe8fb",
    "set": "#e6f6f6",
    "window": "#e9f7ea",
}

_WRAP = 48
_MAX_DETAIL_LINES = 4


# ------------------------------------------------------------------------------------------ DOT text


def _quote(text: str) -> str:
    """A DOT double-quoted string; ``\\n`` in ``text`` (a real newline) becomes a centred line break, and
    other control characters (a NUL in a name, which Graphviz cannot read) are written as ``\\xNN``."""
    text = "".join(c if c == "\n" or 32 <= ord(c) != 127 else f"\\x{ord(c):02x}" for c in text)
    text = text.replace("\\", "\\\\").replace('"', '\\"')
    return '"' + text.replace("\n", "\\n") + '"'


def _node_label(g: nx.DiGraph, node: int, functions, annotate: Annotate | None) -> str:
    kind = g.nodes[node]["kind"]
    try:
        described = describe_rel(g, node, functions, max_len=_WRAP * _MAX_DETAIL_LINES)
    except OptimizerError:  # a picture never fails on a relation explain cannot describe
        described = f"{_title(kind)}()"
    title = _title(kind)
    detail = described[len(title) + 1 : -1] if described.startswith(title + "(") else described
    lines = [title]
    if detail:
        wrapped = textwrap.wrap(detail, _WRAP, break_long_words=True, break_on_hyphens=False)
        if len(wrapped) > _MAX_DETAIL_LINES:
            wrapped = wrapped[:_MAX_DETAIL_LINES]
            wrapped[-1] = wrapped[-1][: _WRAP - 3] + "..."
        lines.extend(wrapped)
    if annotate is not None:
        extra = annotate(g, node)
        if extra:
            lines.extend(part.strip() for part in extra.split("\n") if part.strip())
    return "\n".join(lines)


def _slot_label(g: nx.DiGraph, parent: int, slot: int) -> str:
    kind = g.nodes[parent]["kind"]
    if kind in ("join", "hash_join", "merge_join", "nested_loop_join", "cross"):
        return "L" if slot == 0 else "R"
    if kind == "set" or kind.startswith("extension_multi"):
        return str(slot)
    return ""


def _body(g: nx.DiGraph, annotate: Annotate | None, prefix: str, indent: str,
          marked: set[int] | frozenset[int] = frozenset()) -> list[str]:
    """Node and edge statements of ``g`` (node ids prefixed by ``prefix``; the ``marked`` nodes with a
    thick green border)."""
    functions = g.graph["functions"]
    lines: list[str] = []
    seen: set[int] = set()

    def name(node: int) -> str:
        return _quote(f"{prefix}n{node}")

    # Parents first, then each node's inputs in slot order: a stable, readable layout.
    order: list[int] = []
    stack = [r["node"] for r in reversed(g.graph.get("roots", []))]
    stack += sorted((n for n in g if g.in_degree(n) == 0 and n not in stack), reverse=True)
    while stack:
        node = stack.pop()
        if node in seen:
            continue
        seen.add(node)
        order.append(node)
        stack.extend(reversed(inputs(g, node)))

    for i, root in enumerate(g.graph.get("roots", [])):
        if root["kind"] == "rel" and g.in_degree(root["node"]) > 0:
            continue  # a PlanRel that only holds a subtree other relations reference: drawn via them
        rid = _quote(f"{prefix}root{i}")
        if root["kind"] == "root":
            names = ", ".join(root.get("names") or [])
            if len(names) > _WRAP * 2:
                names = names[: _WRAP * 2 - 3] + "..."
            label = "\n".join(textwrap.wrap(f"Root(names=[{names}])", _WRAP)) or "Root"
        else:
            label = f"Relation[{i}]"
        lines.append(f"{indent}{rid} [label={_quote(label)}, shape=plaintext, style=\"\"];")
        lines.append(f"{indent}{rid} -> {name(root['node'])};")
    for node in order:
        data = g.nodes[node]
        label = _node_label(g, node, functions, annotate)
        attrs = [f"label={_quote(label)}", f"fillcolor=\"{_FILL.get(data['kind'], '#ffffff')}\""]
        if g.in_degree(node) > 1 or sum(len(g.edges[p, node]["slots"]) for p in g.predecessors(node)) > 1:
            attrs.append("penwidth=2")  # shared: read by several parents (or twice by one)
        if node in marked:
            attrs.extend(["color=\"#2e7d32\"", "penwidth=3", "class=\"changed\""])
        lines.append(f"{indent}{name(node)} [{', '.join(attrs)}];")
        for slot, child in enumerate(inputs(g, node)):
            text = _slot_label(g, node, slot)
            edge_attrs = f" [label={_quote(text)}]" if text else ""
            lines.append(f"{indent}{name(node)} -> {name(child)}{edge_attrs};")
    return lines


_HEADER = [
    '  graph [rankdir=TB, fontname="Helvetica", fontsize=11, nodesep=0.3, ranksep=0.35];',
    '  node [shape=box, style="rounded,filled", fillcolor="#ffffff", fontname="Helvetica", fontsize=10];',
    '  edge [dir=back, arrowtail=normal, color="#555555", fontsize=9];',
]


def dag_to_dot(g: nx.DiGraph, annotate: Annotate | None = None, title: str | None = None,
               marked: set[int] | frozenset[int] = frozenset()) -> str:
    """The DOT text of a plan DAG (:func:`optimizer.dag.to_dag`): one box per relation, edges to inputs.

    ``annotate(g, node) -> str`` adds lines under a relation (``"\\n"`` separates lines), e.g. estimates
    from :func:`estimate_annotator`. A shared node is drawn once, with a thick border and one incoming
    edge per use; the ``marked`` nodes (the relations an optimization made) with a thick green one.
    Schemas are not needed (derived ones make the descriptions name columns).
    """
    lines = ["digraph plan {", *_HEADER]
    if title:
        lines.append(f"  label={_quote(title)}; labelloc=t;")
    lines.extend(_body(g, annotate, "", "  ", marked))
    lines.append("}")
    return "\n".join(lines) + "\n"


def clusters_to_dot(parts: list[tuple[str, nx.DiGraph, Annotate | None]], title: str | None = None) -> str:
    """Several DAGs side by side in one picture, one ``cluster`` subgraph each (``(title, g, annotate)``)."""
    lines = ["digraph plans {", *_HEADER, "  newrank=true;"]
    if title:
        lines.append(f"  label={_quote(title)}; labelloc=t;")
    for i, (name, g, annotate) in enumerate(parts):
        lines.append(f"  subgraph cluster_{i} {{")
        lines.append(f"    label={_quote(name)}; style=\"rounded\"; color=\"#999999\";")
        lines.extend(_body(g, annotate, f"p{i}_", "    "))
        lines.append("  }")
    lines.append("}")
    return "\n".join(lines) + "\n"


# ------------------------------------------------------------------------------------------ SVG


def render_svg(dot_text: str, timeout: float = 60.0) -> str:
    """The SVG picture of ``dot_text``, drawn by Graphviz's ``dot`` binary.

    Raises :class:`UnsupportedError` when ``dot`` is not installed, :class:`ExecutionError` when it fails.
    """
    exe = shutil.which("dot")
    if exe is None:
        raise UnsupportedError("svg output needs Graphviz's 'dot' (apt-get install graphviz)")
    try:
        done = subprocess.run([exe, "-Tsvg"], input=dot_text, capture_output=True, text=True, timeout=timeout)
    except (OSError, subprocess.SubprocessError) as exc:
        raise ExecutionError(f"graphviz dot failed: {exc}") from exc
    if done.returncode != 0:
        raise ExecutionError(f"graphviz dot failed: {' '.join(done.stderr.split())[:300]}")
    return done.stdout


def picture(dot_text: str, fmt: str) -> str:
    """``dot_text`` as is for ``fmt == "dot"``, rendered by :func:`render_svg` for ``"svg"``."""
    if fmt == "svg":
        return render_svg(dot_text)
    if fmt == "dot":
        return dot_text
    raise UnsupportedError(f"unknown picture format {fmt!r} (dot or svg)")


# ------------------------------------------------------------------------------------------ annotations


def _hint_rows(g: nx.DiGraph, node: int) -> float | None:
    data = g.nodes[node]
    body = getattr(data["rel"], data["kind"])
    common = getattr(body, "common", None)
    if common is None or not common.HasField("hint") or not common.hint.HasField("stats"):
        return None
    rows = common.hint.stats.row_count
    return rows if rows > 0 else None


def estimate_annotator(g: nx.DiGraph, statistics: Any = None, capabilities: Any = None, config: Any = None,
                       *, actual: Mapping[int, int | None] | None = None) -> Annotate:
    """An annotation per node: estimated rows (``est``), the estimated cost of the subtree (``cost``; the
    cost model's unit, nanoseconds of one core) and of the node alone (``self``) and,
    when ``actual`` is given (:func:`~optimizer.explain.estimates.actual_rows`), the actual rows and the q-error.

    Estimates come from the cardinality estimator and cost model (:class:`optimizer.driver.RuleContext`)
    over ``statistics``; when these are not available (or fail on a relation), the relation's own
    ``hint.stats.row_count`` is shown instead (``hint``).
    """
    from optimizer.cost.estimates import q_error

    ctx = None
    try:
        from optimizer.dag import annotate_schemas
        from optimizer.driver import RuleContext

        if any("schema" not in g.nodes[n] for n in g):
            annotate_schemas(g)
        ctx = RuleContext(g, statistics, capabilities, config)
    except (ImportError, OptimizerError):
        ctx = None

    def annotate(graph: nx.DiGraph, node: int) -> str:
        parts: list[str] = []
        est_rows: float | None = None
        if ctx is not None:
            try:
                est_rows = float(ctx.estimate(node).rows)
                parts.append(f"est {human(est_rows)} rows")
            except OptimizerError:  # a relation the estimator refuses: the hint, if any
                est_rows = None
            if est_rows is not None:
                try:
                    own = ctx.cost_model.node_cost(graph, node, ctx.estimator).total
                    parts.append(f"cost {human(ctx.cost(node))} (self {human(own)})")
                except OptimizerError:  # a relation the model cannot price
                    pass
        if est_rows is None:
            hint = _hint_rows(graph, node)
            if hint is not None:
                est_rows = hint
                parts.append(f"hint {human(hint)} rows")
        line = ", ".join(parts)
        if actual is not None and actual.get(node) is not None:
            act = actual[node]
            extra = f"actual {human(act)} rows"
            if est_rows is not None:
                extra += f" (q-error {q_error(est_rows, act):.2g})"
            line = f"{line}\n{extra}" if line else extra
        return line

    return annotate


def hint_annotator(g: nx.DiGraph, node: int) -> str:
    """The rows and row width the plan itself carries in ``hint.stats`` (e.g. after ``optimize``)."""
    data = g.nodes[node]
    body = getattr(data["rel"], data["kind"])
    common = getattr(body, "common", None)
    if common is None or not common.HasField("hint") or not common.hint.HasField("stats"):
        return ""
    stats = common.hint.stats
    text = f"est {human(stats.row_count)} rows"
    if stats.record_size:
        text += f", {human(stats.record_size)} B/row"
    return text


# ------------------------------------------------------------------------------------------ CLI entries


def explain_dot(plan: Plan, statistics: Any = None, backend: Any = None, title: str | None = None) -> str:
    """What ``substrait-opt explain IN --format dot|svg`` draws, as DOT text (see :func:`picture`).

    With ``statistics`` every node shows estimated rows and subtree cost, with a Spark ``backend``
    also the actual rows (each subtree runs on it); without either, the plan's own ``hint.stats``
    when it has them.
    """
    g = to_dag(plan)
    try:
        from optimizer.dag import annotate_schemas

        annotate_schemas(g)
    except OptimizerError:
        pass  # drawn without column names
    actual = actual_rows(g, backend) if backend is not None else None
    if statistics is None and backend is None:
        annotate: Annotate = hint_annotator
    else:
        annotate = estimate_annotator(g, statistics, actual=actual)
    return dag_to_dot(g, annotate, title=title)


def before_after_dot(before_plan: Plan, after_plan: Plan, statistics: Any = None, title: str | None = None) -> str:
    """The plan before and after optimization side by side (DOT; two clusters in one graph).

    The "before" plan is annotated with estimates over ``statistics`` (or its hints), the "after" plan
    with the estimates the optimizer wrote into its ``hint.stats``, and the subtree cost when
    ``statistics`` is given.
    """
    before = to_dag(before_plan)
    after = to_dag(after_plan)
    for g in (before, after):
        try:
            from optimizer.dag import annotate_schemas

            annotate_schemas(g)
        except OptimizerError:
            pass
    before_note = estimate_annotator(before, statistics)
    after_note = estimate_annotator(after, statistics) if statistics is not None else hint_annotator
    return clusters_to_dot([("before", before, before_note), ("after", after, after_note)], title=title)
