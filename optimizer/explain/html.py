"""The plan picture as one self-contained HTML page: two plans side by side and a table of estimates.

``substrait-opt explain IN --format html`` (the plan and its optimized form) and
``substrait-opt optimize IN --explain-out PAGE.html`` (the plan before and after) write it.

The page has no outside reference (no script, font or style sheet is fetched; a Content Security
Policy forbids it) and no script at all. It shows:

* each plan's relation DAG as inline SVG, drawn by Graphviz's ``dot`` (:mod:`optimizer.explain.dot`),
  with each relation's estimated rows and cost, and actual rows and q-error when given;
* in the second plan, the relations the first does not have (the optimization's) marked: ``new`` in its
  table (CSS class ``changed``), a thick green border in its picture;
* per plan, a table of its relations (:func:`optimizer.explain.estimates.explain_with_estimates`'s
  records): estimated rows, row width, the cost of the subtree and, with actual rows, the actual rows and
  the q-error (``max(est/act, act/est)``, both floored at 1 row). With actual rows the table is sorted
  by q-error, worst first, the :data:`WORST` worst relations with a q-error above :data:`WORST_Q`
  have the CSS class ``worst``, and q-errors of at least :data:`Q_WARN` and :data:`Q_BAD` are coloured
  (``q-warn``, ``q-bad``); without them it is in the order of the explain tree.

Every string taken from a plan (table names, literals, column names) is escaped with
:func:`html.escape`; the SVG's labels are escaped by ``dot``.

:func:`plans_html` takes the values (plans, statistics, actual rows keyed by relation path);
:func:`explain_html` and :func:`optimize_html` are what the two commands call.
"""

from __future__ import annotations

import html
import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import networkx as nx
from substrait.proto import Plan

from optimizer.errors import OptimizerError
from optimizer.expr_utils import has_subquery

WORST = 3
"""How many relations, at most, the table marks as the worst estimates."""
WORST_Q = 1.25
"""The q-error above which a relation may be marked as one of the worst estimates (within 25% it is not)."""
Q_WARN, Q_BAD = 2.0, 10.0
"""q-errors from which the cell has the CSS class ``q-warn`` and ``q-bad``."""

ActualRows = Mapping[str, int | None]
"""Actual rows per relation path (``relations[0].root.input.join.left``...); ``None``: it could not run."""


@dataclass
class PlanPart:
    """One plan of the page: its heading, the plan, and actual rows per relation path (optional)."""

    heading: str
    plan: Plan
    actual: ActualRows | None = None


# ------------------------------------------------------------------------------------------ values


def actual_rows_by_path(plan: Plan, backend: Any) -> dict[str, int | None]:
    """Rows every subtree of ``plan`` produces on ``backend`` (a :class:`optimizer.spark.SparkBackend`),
    keyed by relation path; ``None`` where the subtree could not run."""
    from optimizer.explain.estimates import actual_rows, prepared_dag, relation_paths

    g = prepared_dag(plan)
    paths = relation_paths(g)
    return {paths[node]: rows for node, rows in actual_rows(g, backend).items()}


def _by_node(g: nx.DiGraph, actual: ActualRows | None) -> dict[int, int | None] | None:
    """``actual`` (by relation path) keyed by the nodes of ``g``."""
    from optimizer.explain.estimates import relation_paths

    if actual is None:
        return None
    return {node: actual[path] for node, path in relation_paths(g).items() if path in actual}


def relation_records(plan: Plan, statistics: Any = None, actual: ActualRows | None = None) -> list[dict[str, Any]]:
    """One record per relation, in the order of the explain tree: the JSON records of ``explain``
    (``path``, ``relation``, ``kind``, ``estimated_rows``, ``estimated_width``, ``estimated_cost``,
    ``actual_rows``, ``q_error``), the actual rows from ``actual``."""
    from optimizer.explain import estimates

    g = estimates.prepared_dag(plan)
    return estimates.relation_records(g, statistics, _by_node(g, actual))


_TOP = re.compile(r"relations\[\d+\]\.(root\.input|rel)")


def total_cost(records: Sequence[Mapping[str, Any]]) -> float | None:
    """The estimated cost of the plan: the sum over its top relations (``None`` if one is unknown)."""
    costs = [r["estimated_cost"] for r in records if _TOP.fullmatch(r["path"])]
    return None if not costs or any(c is None for c in costs) else float(sum(costs))


def _svg(g: nx.DiGraph, statistics: Any, actual: dict[int, int | None] | None, svg_id: str,
         marked: set[int] | frozenset[int] = frozenset()) -> str:
    """The DAG as an inline ``<svg>`` element (the XML prolog and doctype of ``dot``'s file dropped);
    the ``marked`` relations with a green border."""
    from optimizer.explain.dot import dag_to_dot, estimate_annotator, render_svg

    known = None if actual is None else {node: rows for node, rows in actual.items() if rows is not None}
    dot = dag_to_dot(g, estimate_annotator(g, statistics, actual=known), marked=marked)
    # A graph id makes dot prefix every element id with it: the two pictures' ids stay distinct.
    dot = dot.replace("{", "{\n  id=" + json.dumps(svg_id) + ";", 1)
    svg = render_svg(dot)
    return svg[svg.index("<svg"):].strip()


def relation_signatures(g: nx.DiGraph) -> dict[int, str]:
    """Per relation, a digest of what it is: its description (every property, whole) and its inputs'
    digests, so two plans' relations compare equal when they compute the same thing the same way."""
    import hashlib

    from optimizer.dag import inputs
    from optimizer.explain import describe_rel

    functions = g.graph["functions"]
    out: dict[int, str] = {}
    for node in reversed(list(nx.topological_sort(g))):  # inputs first
        try:
            text = describe_rel(g, node, functions, max_len=1 << 30)
        except OptimizerError:  # an expression explain cannot render: the kind and the node's message
            text = g.nodes[node]["kind"] + repr(g.nodes[node].get("rel"))
        key = "\x1f".join([text, *(out[c] for c in inputs(g, node) if c in out)])
        out[node] = hashlib.sha256(key.encode("utf-8")).hexdigest()[:16]
    return out


# ------------------------------------------------------------------------------------------ HTML

_CSS = """
body { font: 14px/1.4 system-ui, -apple-system, "Segoe UI", Helvetica, Arial, sans-serif; margin: 16px;
       color: #1d1d1f; background: #fafafa; }
h1 { font-size: 18px; margin: 0 0 4px; word-break: break-all; }
h2 { font-size: 16px; margin: 0 0 6px; }
h3 { font-size: 15px; margin: 18px 0 6px; }
.note { color: #555; margin: 0 0 12px; }
.plans { display: flex; gap: 12px; align-items: flex-start; }
.plan { flex: 1 1 0; min-width: 0; background: #fff; border: 1px solid #ddd; border-radius: 6px; padding: 8px; }
.picture { overflow: auto; max-height: 80vh; }
.picture svg { max-width: 100%; height: auto; }
table { border-collapse: collapse; background: #fff; font-size: 13px; width: 100%; }
th, td { border: 1px solid #ddd; padding: 3px 6px; vertical-align: top; }
th { background: #f0f0f0; text-align: left; }
td.num { text-align: right; font-variant-numeric: tabular-nums; white-space: nowrap; }
td.rel { font-family: ui-monospace, Menlo, Consolas, monospace; font-size: 12px; word-break: break-word; }
td.path { font-family: ui-monospace, Menlo, Consolas, monospace; font-size: 11px; color: #666; word-break: break-all; }
tr.worst td { background: #fde2e1; }
tr.changed td.rel { border-left: 4px solid #2e7d32; }
td.mark { color: #2e7d32; font-weight: bold; white-space: nowrap; }
tr.worst td.q { font-weight: bold; }
td.q-warn { color: #a15c00; }
td.q-bad { color: #b00020; font-weight: bold; }
pre { background: #fff; border: 1px solid #ddd; padding: 8px; overflow: auto; }
"""

# No script, no outside resource: images only as data URIs, styles only the inline sheet.
_CSP = "default-src 'none'; style-src 'unsafe-inline'; img-src data:"


def _num(value: float | None) -> str:
    from optimizer.explain.estimates import human

    return html.escape(human(value))


def _q_cell(value: float | None) -> str:
    if value is None:
        return '<td class="num q"></td>'
    grade = " q-bad" if value >= Q_BAD else " q-warn" if value >= Q_WARN else ""
    return f'<td class="num q{grade}">{value:.2f}</td>'


def _worst_paths(records: Sequence[Mapping[str, Any]]) -> set[str]:
    ranked = sorted((r for r in records if r["q_error"] is not None and r["q_error"] > WORST_Q),
                    key=lambda r: -r["q_error"])
    return {r["path"] for r in ranked[:WORST]}


def _table(records: list[dict[str, Any]], changed: set[str] | None = None) -> str:
    """The relations' table; the paths in ``changed`` (relations the optimization made) are marked."""
    has_actual = any(r["actual_rows"] is not None for r in records)
    rows = records
    if has_actual:  # worst estimate first; relations without actual rows last, in tree order
        rows = sorted(records, key=lambda r: (r["q_error"] is None, -(r["q_error"] or 0.0)))
    worst = _worst_paths(records)
    head = ([""] if changed is not None else []) + ["relation", "path", "est. rows", "width (B)", "cost"]
    if has_actual:
        head += ["actual rows", "q-error"]
    out = ["<table>", "<thead><tr>" + "".join(f"<th>{h}</th>" for h in head) + "</tr></thead>", "<tbody>"]
    for r in rows:
        classes = (["worst"] if r["path"] in worst else []) + (["changed"] if changed and r["path"] in changed else [])
        cls = f' class="{" ".join(classes)}"' if classes else ""
        cells = [] if changed is None else [f'<td class="mark">{"new" if r["path"] in changed else ""}</td>']
        cells += [
            f'<td class="rel">{html.escape(r["relation"])}</td>',
            f'<td class="path">{html.escape(r["path"])}</td>',
            f'<td class="num">{_num(r["estimated_rows"])}</td>',
            f'<td class="num">{_num(r["estimated_width"])}</td>',
            f'<td class="num">{_num(r["estimated_cost"])}</td>',
        ]
        if has_actual:
            cells.append(f'<td class="num">{_num(r["actual_rows"]) if r["actual_rows"] is not None else ""}</td>')
            cells.append(_q_cell(r["q_error"]))
        out.append(f"<tr{cls}>" + "".join(cells) + "</tr>")
    out.append("</tbody></table>")
    return "\n".join(out)


def plans_html(parts: Sequence[PlanPart], statistics: Any = None, *, title: str = "Substrait plan",
               note: str | None = None, summary: str | None = None) -> str:
    """The HTML page of ``parts`` (usually two: a plan and its optimized form), estimates over ``statistics``.

    ``note`` is a line under the title, ``summary`` preformatted text at the end (e.g. the rules that
    fired). Raises :class:`~optimizer.errors.UnsupportedError` without Graphviz's ``dot``.
    """
    from optimizer.explain import estimates

    columns: list[str] = []
    tables: list[str] = []
    first: set[str] = set()
    for i, part in enumerate(parts):
        g = estimates.prepared_dag(part.plan)  # one DAG for the table and the picture
        signatures = relation_signatures(g)
        paths = estimates.relation_paths(g)
        changed = None
        new_nodes: set[int] = set()
        if i == 0:
            first = set(signatures.values())
        else:  # a relation the first plan has nowhere (itself with the same inputs) is the optimization's
            new_nodes = {n for n, sig in signatures.items() if sig not in first}
            changed = {paths[n] for n in new_nodes if n in paths}
        actual = _by_node(g, part.actual)
        records = estimates.relation_records(g, statistics, actual)
        cost = total_cost(records)
        heading = html.escape(part.heading)
        svg = _svg(g, statistics, actual, f"plan{i}", new_nodes)
        priced = f"estimated cost {_num(cost)}"
        if has_subquery(part.plan):  # priced as the optimizer prices it (see explain_before_after)
            from optimizer.driver import estimated_cost

            priced = (f"estimated cost {_num(estimated_cost(part.plan, statistics=statistics))} with its "
                      f"subqueries priced as the joins they become; {_num(cost)} in the table, which prices "
                      "them at nothing")
        columns.append(f'<section class="plan"><h2>{heading} <small>({priced})</small></h2>'
                       f'<div class="picture">{svg}</div></section>')
        order = "worst estimate first" if any(r["actual_rows"] is not None for r in records) else "tree order"
        marked = "" if changed is None else f", {len(changed)} new (marked: not in the {html.escape(parts[0].heading)} plan)"
        tables.append(f"<h3>{heading}: {len(records)} relations, {order}{marked}</h3>\n{_table(records, changed)}")
    body = [f"<h1>{html.escape(title)}</h1>"]
    if note:
        body.append(f'<p class="note">{html.escape(note)}</p>')
    body.append('<div class="plans">' + "\n".join(columns) + "</div>")
    body.extend(tables)
    if summary:
        body.append(f"<h3>Rules</h3>\n<pre>{html.escape(summary)}</pre>")
    return "\n".join([
        "<!DOCTYPE html>",
        '<html lang="en">',
        "<head>",
        '<meta charset="utf-8">',
        f'<meta http-equiv="Content-Security-Policy" content="{_CSP}">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f"<title>{html.escape(title)}</title>",
        f"<style>{_CSS}</style>",
        "</head>",
        "<body>",
        *body,
        "</body>",
        "</html>",
    ]) + "\n"


_COST_NOTE = ("Estimated rows per relation and the cost of its subtree (the cost model's unit: nanoseconds of "
              "one core).")


def explain_html(plan: Plan, statistics: Any = None, backend: Any = None, title: str | None = None) -> str:
    """What ``explain IN --format html`` writes: the plan and its optimized form over ``statistics``;
    with a Spark ``backend`` every subtree of both runs on it for actual rows and q-errors. A plan the
    optimizer refuses is shown alone, with the reason."""
    from optimizer.driver import Optimizer

    note = _COST_NOTE + (" Actual rows: every subtree run on Spark." if backend is not None else "")
    parts = [PlanPart("plan", plan)]
    summary = None
    try:
        result = Optimizer(statistics=statistics).run(plan)
    except OptimizerError as exc:
        note += f" Not optimized: {exc}"
    else:
        parts.append(PlanPart("optimized", result.plan))
        summary = result.summary()
    if backend is not None:
        for part in parts:
            part.actual = actual_rows_by_path(part.plan, backend)
    return plans_html(parts, statistics, title=title or "Substrait plan", note=note, summary=summary)


def optimize_html(plan: Plan, result: Any, statistics: Any = None, title: str | None = None) -> str:
    """What ``optimize IN --explain-out PAGE.html`` writes: the plan before and after optimization
    (``result``, an :class:`optimizer.driver.OptimizeResult`), the relations the optimization made marked,
    and the rule log (per phase what fired, the plan's cost before and after, the time taken)."""
    parts = [PlanPart("before", plan), PlanPart("after", result.plan)]
    return plans_html(parts, statistics, title=title or "Substrait plan", note=_COST_NOTE,
                      summary=result.summary())


__all__ = [
    "Q_BAD",
    "Q_WARN",
    "WORST",
    "WORST_Q",
    "PlanPart",
    "actual_rows_by_path",
    "explain_html",
    "optimize_html",
    "plans_html",
    "relation_records",
    "relation_signatures",
    "total_cost",
]
