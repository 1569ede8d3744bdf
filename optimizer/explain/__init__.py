"""The indented tree of a plan: one line per relation, its key properties and its output columns.

::

    Root(names=[l_returnflag, sum_qty])
    |-+ Sort(l_returnflag#0 ASC NULLS LAST) -> [l_returnflag: string?, sum_qty: decimal(38,2)?]
      |-+ Aggregate(groups=[l_returnflag#8], measures=[sum(l_quantity#4)]) -> [...]
        |-+ Read(lineitem) -> [l_orderkey: i64, ...]

A subtree used twice (an entry of ``plan.relations`` that a ``ReferenceRel`` also reads counts as one use) is
printed once; later uses say ``|-> shared #N (above)``. ``annotate`` adds
text per node (estimates, costs, actual rows).
"""

from __future__ import annotations

import math
import sys
from collections import Counter
from collections.abc import Callable

import networkx as nx
from substrait.proto import Plan

from optimizer.dag import inputs, to_dag
from optimizer.errors import UnsupportedError, inert
from optimizer.explain.expr_format import ExpressionFormatter
from optimizer.schema.types import type_name

Annotate = Callable[[nx.DiGraph, int], str]

_JOIN_TYPE_NAMES = {}


def _enum_name(message, field: str) -> str:
    desc = message.DESCRIPTOR.fields_by_name[field]
    value = getattr(message, field)
    name = desc.enum_type.values_by_number[value].name if value in desc.enum_type.values_by_number else str(value)
    for prefix in ("JOIN_TYPE_", "SET_OP_", "BUILD_INPUT_", "AGGREGATION_INVOCATION_"):
        name = name.removeprefix(prefix)
    return name.lower()


def _title(kind: str) -> str:
    special = {"top_n": "TopN", "hash_join": "HashJoin", "merge_join": "MergeJoin", "nested_loop_join": "NestedLoopJoin",
               "window": "ConsistentPartitionWindow", "extension_single": "ExtensionSingle",
               "extension_multi": "ExtensionMulti", "extension_leaf": "ExtensionLeaf"}
    return special.get(kind, kind.replace("_", " ").title().replace(" ", ""))


def describe_rel(g: nx.DiGraph, node: int, functions, max_len: int = 160) -> str:
    """``Kind(properties)`` for one node."""
    data = g.nodes[node]
    kind = data["kind"]
    rel = data["rel"]
    body = getattr(rel, kind)
    children = inputs(g, node)
    in_names: list[str] | None = None
    if len(children) == 1 and "schema" in g.nodes[children[0]]:
        in_names = list(g.nodes[children[0]]["schema"].names)
    elif len(children) == 2 and all("schema" in g.nodes[c] for c in children):
        in_names = list(g.nodes[children[0]]["schema"].names) + list(g.nodes[children[1]]["schema"].names)
    fmt = ExpressionFormatter(functions, in_names)
    props: list[str] = []
    if kind == "read":
        which = body.WhichOneof("read_type")
        if which == "named_table":
            props.append(".".join(body.named_table.names))
        elif which == "local_files":
            props.append(f"files={len(body.local_files.items)}")
        elif which == "virtual_table":
            props.append(f"values={len(body.virtual_table.expressions)} rows")
        else:
            props.append(which or "?")
        read_fmt = ExpressionFormatter(functions, list(body.base_schema.names))
        if body.HasField("filter"):
            props.append(f"filter={read_fmt(body.filter)}")
        if body.HasField("best_effort_filter"):
            props.append(f"best_effort_filter={read_fmt(body.best_effort_filter)}")
        if body.HasField("projection"):
            props.append("projection=[" + ", ".join(str(i.field) for i in body.projection.select.struct_items) + "]")
    elif kind == "filter":
        props.append(fmt(body.condition))
    elif kind == "project":
        props.extend(fmt(e) for e in body.expressions)
    elif kind == "aggregate":
        groups = ["(" + ", ".join(fmt(body.grouping_expressions[i]) for i in g_.expression_references) + ")" for g_ in body.groupings]
        if groups:
            props.append("groups=[" + ", ".join(groups) + "]")
        props.append("measures=[" + ", ".join(fmt.aggregate(m.measure) + (f" FILTER ({fmt(m.filter)})" if m.HasField("filter")
                                              else "") for m in body.measures) + "]")
    elif kind == "sort":
        props.extend(fmt.sort(s) for s in body.sorts)
    elif kind == "fetch":
        if body.HasField("offset_expr"):
            props.append(f"offset={fmt(body.offset_expr)}")
        props.append(f"count={fmt(body.count_expr)}" if body.HasField("count_expr") else "count=ALL")
    elif kind == "top_n":
        props.extend(fmt.sort(s) for s in body.sorts)
        if body.HasField("offset"):
            props.append(f"offset={fmt(body.offset)}")
        props.append(f"count={fmt(body.count)}" if body.HasField("count") else "count=ALL")
    elif kind in ("join", "hash_join", "merge_join", "nested_loop_join"):
        props.append(_enum_name(body, "type"))
        if kind == "join" and body.HasField("expression"):
            props.append(fmt(body.expression))
        if kind == "nested_loop_join" and body.HasField("expression"):
            props.append(fmt(body.expression))
        if kind in ("hash_join", "merge_join"):
            left_n = len(g.nodes[children[0]]["schema"].names) if children and "schema" in g.nodes[children[0]] else 0
            keys = []
            for k in body.keys:
                lf = k.left.direct_reference.struct_field.field
                rf = k.right.direct_reference.struct_field.field
                op = "=" if k.comparison.simple in (0, 1) else "IS NOT DISTINCT FROM"
                keys.append(f"{fmt.field(lf)} {op} {fmt.field(left_n + rf)}")
            props.append("keys=[" + ", ".join(keys) + "]")
            if kind == "hash_join":
                props.append(f"build={_enum_name(body, 'build_input') or 'unspecified'}")
        if "residual_expression" in body.DESCRIPTOR.fields_by_name and body.HasField("residual_expression"):
            props.append(f"residual={fmt(body.residual_expression)}")
        if "post_join_filter" in body.DESCRIPTOR.fields_by_name and body.HasField("post_join_filter"):
            props.append(f"post_join_filter={fmt(body.post_join_filter)}")
    elif kind == "set":
        props.append(_enum_name(body, "op"))
    elif kind == "window":
        if body.partition_expressions:
            props.append("partition=[" + ", ".join(fmt(e) for e in body.partition_expressions) + "]")
        if body.sorts:
            props.append("order=[" + ", ".join(fmt.sort(s) for s in body.sorts) + "]")
        props.append("functions=[" + ", ".join(f"{fmt.function_name(w.function_reference)}({', '.join(fmt.args(w.arguments))})" for w in body.window_functions) + "]")
    elif kind == "exchange":
        props.append(body.WhichOneof("exchange_kind") or "?")
        if body.partition_count:
            props.append(f"partitions={body.partition_count}")
    elif kind.startswith("extension"):
        props.append(body.detail.type_url or "?")
    common = getattr(body, "common", None)
    if common is not None and common.HasField("emit"):
        props.append("emit=[" + ", ".join(str(i) for i in common.emit.output_mapping) + "]")
    text = ", ".join(props)
    if len(text) > max_len:
        text = text[: max_len - 3] + "..."
    return f"{_title(kind)}({text})"


def _columns(g: nx.DiGraph, node: int, keep: int | None = 7) -> str:
    """The output columns, the first ``keep`` of them and a count of the others (``None``: all)."""
    schema = g.nodes[node].get("schema")
    if schema is None:
        return "[?]"
    cols = [f"{n}: {type_name(t, explain=True)}" for n, t in zip(schema.names, schema.types, strict=False)]
    if keep == 0 and len(cols) > 1:
        return f"[{len(cols)} columns]"
    if keep is not None and len(cols) > keep + 1:
        cols = cols[:keep] + [f"... {len(cols) - keep} more"]
    return "[" + ", ".join(cols) + "]"


#: The width explain's tree lines are held to (``--wide``: none). A line longer than this has its
#: column list and then its relation's properties elided with ``...``; the indentation and the estimates
#: appended to the line are kept whole, and a relation keeps at least :data:`MIN_DETAIL` characters.
WIDTH = 120
MIN_DETAIL = 40


def human(x: float | None) -> str:
    """``1234567`` -> ``1.2M``.

    >>> human(12), human(1234), human(2.5e9), human(None)
    ('12', '1.2K', '2.5G', '?')
    """
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "?"
    for unit, size in (("T", 1e12), ("G", 1e9), ("M", 1e6), ("K", 1e3)):
        if abs(x) >= size:
            return f"{x / size:.1f}{unit}"
    return f"{x:.0f}" if abs(x) >= 1 or x == 0 else f"{x:.2g}"


def _tree_line(g: nx.DiGraph, node: int, functions, head: str, extra: str, width: int | None) -> str:
    """``head`` (indentation and label), the relation, its columns and ``extra``, within ``width``."""
    tail = ("  " + extra) if extra else ""
    if width is None:
        return f"{head}{describe_rel(g, node, functions, max_len=sys.maxsize)} -> {_columns(g, node, None)}{tail}"
    described = describe_rel(g, node, functions)
    line = f"{head}{described} -> {_columns(g, node)}{tail}"
    keep = 7
    while len(line) > width and keep > 0:  # fewer columns first
        keep -= 1
        line = f"{head}{described} -> {_columns(g, node, keep)}{tail}"
    if len(line) > width:  # then the relation's properties
        columns = _columns(g, node, 0)
        room = width - len(head) - len(tail) - len(columns) - 4 - len(_title(g.nodes[node]["kind"])) - 2
        described = describe_rel(g, node, functions, max_len=max(MIN_DETAIL, room))
        line = f"{head}{described} -> {columns}{tail}"
    return line


def _try_schemas(g: nx.DiGraph) -> None:
    try:
        from optimizer.dag import annotate_schemas

        annotate_schemas(g)
    except UnsupportedError:
        pass  # relations whose schema we cannot know are shown without columns


def explain_dag(g: nx.DiGraph, annotate: Annotate | None = None, width: int | None = WIDTH) -> str:
    """The indented tree of ``g``, its lines held to ``width`` characters where eliding can (``None``: whole)."""
    functions = g.graph["functions"]
    lines: list[str] = []
    shown: dict[int, int] = {}
    # A relation of plan.relations that others also read (a ReferenceRel's subtree) counts that entry as one
    # use: printed once, under its Relation[i], and named as shared where read (a chain of n shared relations is
    # n lines, not n^2 / 2).
    listed = Counter(root["node"] for root in g.graph["roots"])
    shared = {n for n in g if listed[n] + sum(len(g.edges[p, n]["slots"]) for p in g.predecessors(n)) > 1}

    def walk(node: int, depth: int) -> None:
        pad = "  " * depth
        if node in shown:
            lines.append(f"{pad}|-> shared #{shown[node]} (above)")
            return
        label = ""
        if node in shared:
            shown[node] = len(shown) + 1
            label = f"#{shown[node]} "
        extra = annotate(g, node) if annotate else ""
        lines.append(_tree_line(g, node, functions, f"{pad}|-+ {label}", extra, width))
        for child in inputs(g, node):
            walk(child, depth + 1)

    for i, root in enumerate(g.graph["roots"]):
        if root["kind"] == "root":
            names = ", ".join(root["names"] or [])
            if width is not None and len(names) > width - 13:
                names = names[: max(MIN_DETAIL, width - 16)] + "..."
            lines.append(f"Root(names=[{names}])")
        else:
            lines.append(f"Relation[{i}]")
        walk(root["node"], 0)
    # A plan's strings (names, literals) are written inert: a line stays one line, and ESC cannot reach
    # the terminal (optimizer.errors.inert).
    return "\n".join(inert(line) for line in lines)


def explain_plan(plan: Plan, annotate: Annotate | None = None, width: int | None = WIDTH) -> str:
    """The indented tree of a plan (see the module docstring), lines held to ``width`` (``None``: whole)."""
    g = to_dag(plan)
    _try_schemas(g)
    return explain_dag(g, annotate, width)
