"""Physical properties of a relation's output: its ordering and its distribution.

:func:`ordering` ``(g, node) -> [(column, direction), ...]``: the output columns the relation's output
is sorted on, most significant first (``direction`` is a ``SortField.SortDirection`` value;
``SORT_DIRECTION_CLUSTERED`` means equal values are adjacent without a defined order). An empty list
means no known order. :func:`distribution` ``(g, node) -> Distribution``: how the rows are spread over
partitions (hash on columns, broadcast, single, round robin, by an expression, or any).

Both follow the property-maintenance rules of the Substrait specification
(``site/docs/relations/logical_relations.md`` and ``physical_relations.md``), remapped through
``common.emit``, choosing the conservative reading where the specification leaves room or claims
more than an executor such as Spark delivers (claiming an order that is not there could let a rule
drop a sort; claiming none only costs a sort). The choices, relation by relation:

==========================  ==============================================  ===========================
relation                    ordering                                        distribution
==========================  ==============================================  ===========================
read                        none (Substrait has no output properties here)  any
filter, fetch               input's                                         input's
sort, top_n                 the sort fields (a prefix, up to the first      input's
                            field that is not a plain column)
project                     input's, also through columns that copy a       input's (remapped)
                            column; none if an expression has a window
                            function
aggregate                   none                                            input's if every hash column
                                                                            is a key of every grouping
join, cross, hash join,     none (the spec keeps the left order of an       hash on the left keys (right
nested loop join            INNER hash join; we do not: a partitioned       keys for right-preserving
                            hash join reshuffles the probe side)            types) unless a side is
                                                                            broadcast: the other side's
merge join                  the left input's ordering on the keys (the      as hash join
                            right's for RIGHT types), none for OUTER
                            (the spec says "eliminated"; ``strict=True``
                            follows it)
ConsistentPartitionWindow   partition columns (CLUSTERED), then the sorts   input's
                            (``strict=True``: none, as the spec's window
                            operations)
exchange                    none (the spec says maintained; a shuffle       from its kind: scatter ->
                            does not keep a total order)                    hash, broadcast, single
                                                                            target/partition_count 1 ->
                                                                            single, round robin,
                                                                            multi target -> expression
set, expand, extensions     none                                            any (set: input's if all
                                                                            inputs have the same)
==========================  ==============================================  ===========================

>>> from optimizer.plan_io import load_plan
>>> from optimizer.dag import to_dag
>>> plan = load_plan('''{"relations": [{"root": {"input": {"fetch": {"countExpr": {"literal": {"i64": "5"}},
...   "input": {"sort": {"sorts": [{"expr": {"selection": {"directReference": {"structField": {"field": 1}}}},
...                                 "direction": "SORT_DIRECTION_DESC_NULLS_LAST"}],
...     "input": {"read": {"namedTable": {"names": ["t"]},
...        "baseSchema": {"names": ["a", "b"], "struct": {"types": [{"i64": {}}, {"i64": {}}]}}}}}}}},
...   "names": ["a", "b"]}}]}''')
>>> g = to_dag(plan)
>>> ordering(g, g.graph["roots"][0]["node"])
[(1, 4)]
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import networkx as nx
from substrait.proto import SortField

from optimizer.dag import inputs
from optimizer.errors import OptimizerError
from optimizer.expr_utils import field_index, has_window_function, join_type_name, reference_field

ASC_NULLS_FIRST = SortField.SORT_DIRECTION_ASC_NULLS_FIRST
ASC_NULLS_LAST = SortField.SORT_DIRECTION_ASC_NULLS_LAST
DESC_NULLS_FIRST = SortField.SORT_DIRECTION_DESC_NULLS_FIRST
DESC_NULLS_LAST = SortField.SORT_DIRECTION_DESC_NULLS_LAST
CLUSTERED = SortField.SORT_DIRECTION_CLUSTERED

Ordering = list[tuple[int, int]]


@dataclass(frozen=True)
class Distribution:
    """How a relation's rows are spread over partitions.

    ``kind``: ``"any"`` (unknown), ``"hash"`` (rows with equal ``columns`` are in the same partition),
    ``"broadcast"`` (every partition has all rows), ``"single"`` (one partition), ``"round_robin"``,
    ``"expression"`` (by an expression we do not model).
    """

    kind: str = "any"
    columns: tuple[int, ...] = ()
    partitions: int | None = None

    def __str__(self) -> str:
        if self.kind == "hash":
            return f"hash({', '.join(f'${c}' for c in self.columns)})"
        return self.kind


ANY = Distribution()

_JOINS = ("join", "hash_join", "merge_join", "nested_loop_join", "lateral_join")


# --------------------------------------------------------------------------------------------------
# Helpers
# --------------------------------------------------------------------------------------------------


def _body(g: nx.DiGraph, node: int):
    data = g.nodes[node]
    return getattr(data["rel"], data["kind"])


def _emit(body) -> list[int] | None:
    if "common" not in body.DESCRIPTOR.fields_by_name or not body.HasField("common"):
        return None
    if body.common.WhichOneof("emit_kind") != "emit":
        return None
    return list(body.common.emit.output_mapping)


def output_width(g: nx.DiGraph, node: int) -> int | None:
    """Number of output columns of a node (from its schema, else derived; None if unknown)."""
    schema = g.nodes[node].get("schema")
    if schema is not None:
        return len(schema.types)
    from optimizer.cost.cardinality import CardinalityEstimator

    try:
        return len(CardinalityEstimator(g).estimate(node).columns)
    except OptimizerError:  # a plan the estimator refuses (undeclared function anchors): width unknown
        return None


def _sort_prefix(sorts) -> Ordering:
    out: Ordering = []
    for s in sorts:
        i = field_index(s.expr)
        if i is None or s.WhichOneof("sort_kind") != "direction" or s.direction == 0:
            break
        out.append((i, s.direction))
    return out


def _remap_ordering(order: Ordering, mapping: dict[int, list[int]]) -> Ordering:
    """An ordering over internal columns expressed over output columns (the prefix that survives)."""
    out: Ordering = []
    for col, direction in order:
        targets = mapping.get(col)
        if not targets:
            break
        out.append((targets[0], direction))
    return out


def _emit_mapping(emit: list[int] | None, width: int | None, aliases: dict[int, list[int]] | None = None
                  ) -> dict[int, list[int]] | None:
    """internal column -> output positions (through ``emit``; ``aliases`` adds internal columns that
    copy another one)."""
    if emit is None:
        if width is None:
            return None
        mapping = {i: [i] for i in range(width)}
    else:
        mapping = {}
        for j, m in enumerate(emit):
            mapping.setdefault(m, []).append(j)
    if aliases:
        for src, copies in aliases.items():
            for c in copies:
                for j in mapping.get(c, []):
                    mapping.setdefault(src, []).append(j)
    return mapping


def join_keys(g: nx.DiGraph, node: int, functions: Any = None) -> list[tuple[int, int]]:
    """Equi-join keys ``(left column, right column relative to the right input)`` of a join node.
    ``functions``: the plan's function table (the DAG's, ``g.graph["functions"]``, when not given)."""
    kind = g.nodes[node]["kind"]
    body = _body(g, node)
    if kind in ("hash_join", "merge_join"):
        keys = []
        for k in body.keys:
            lf, rf = reference_field(k.left), reference_field(k.right)
            if lf is not None and rf is not None:
                keys.append((lf, rf))
        return keys
    if kind in ("join", "nested_loop_join") and body.HasField("expression"):
        children = inputs(g, node)
        n_left = output_width(g, children[0]) if children else None
        if n_left is None:
            return []
        from optimizer.cost.estimates import equi_pairs

        return equi_pairs(body.expression, n_left, g.graph["functions"] if functions is None else functions)[0]
    return []


def _children_first(g: nx.DiGraph, node: int, memo: dict[int, Any], compute: Callable[[int], Any]) -> Any:
    """``memo[node]``, computed with ``compute`` for it and for every relation below it not in ``memo`` yet,
    children first (a relation's value reads its inputs' from ``memo``); a loop, not recursion: plans nest
    deeper than Python's stack."""
    found = memo.get(node)
    if found is not None:
        return found
    stack = [node]
    while stack:  # not below a relation whose value is known
        n = stack[-1]
        missing = [c for c in g.successors(n) if c not in memo]
        if missing:
            stack.extend(missing)
            continue
        stack.pop()
        if n not in memo:
            memo[n] = compute(n)
    return memo[node]


# --------------------------------------------------------------------------------------------------
# Ordering
# --------------------------------------------------------------------------------------------------


def ordering(g: nx.DiGraph, node: int, *, strict: bool = False, memo: dict[int, Ordering] | None = None) -> Ordering:
    """The ``(output column, direction)`` list the relation's output is sorted on (see the module
    docstring); ``strict=True`` claims only what the Substrait specification guarantees. ``memo``: the
    orderings of relations known already for this ``strict`` (a relation's depends only on the subtree
    below it), filled in with those computed here."""
    memo = {} if memo is None else memo
    return _children_first(g, node, memo, lambda n: _ordering(g, n, memo, strict))


def _ordering(g: nx.DiGraph, node: int, memo: dict[int, Ordering], strict: bool) -> Ordering:
    kind = g.nodes[node]["kind"]
    body = _body(g, node)
    children = inputs(g, node)
    child = memo.get(children[0], []) if children else []
    emit = _emit(body)
    if kind in ("filter", "fetch"):
        internal = child
        width = output_width(g, children[0])
    elif kind in ("sort", "top_n"):
        internal = _sort_prefix(body.sorts)
        width = output_width(g, children[0])
    elif kind == "project":
        # Conservative: a window function inside a subquery also drops the ordering.
        if any(has_window_function(e, enter_subqueries=True) for e in body.expressions):
            return []
        n_in = output_width(g, children[0])
        if n_in is None:
            return []
        aliases: dict[int, list[int]] = {}
        for k, e in enumerate(body.expressions):
            i = field_index(e)
            if i is not None:
                aliases.setdefault(i, []).append(n_in + k)
        mapping = _emit_mapping(emit, n_in + len(body.expressions), aliases)
        return _remap_ordering(child, mapping or {})
    elif kind == "window":
        if strict:
            return []
        internal = [(i, CLUSTERED) for i in (field_index(e) for e in body.partition_expressions) if i is not None]
        if len(internal) != len(body.partition_expressions):
            return []
        internal += _sort_prefix(body.sorts)
        width = None if emit is None else output_width(g, children[0])
    elif kind == "merge_join":
        if strict:
            return []
        jt = join_type_name(body) or "INNER"
        keys = join_keys(g, node)
        if not keys or jt == "OUTER":
            return []
        if jt.startswith("RIGHT"):
            side = memo.get(children[1], [])
            wanted = {r for _, r in keys}
            shift = 0 if jt in ("RIGHT_SEMI", "RIGHT_ANTI", "RIGHT_MARK") else (output_width(g, children[0]) or 0)
            if jt not in ("RIGHT_SEMI", "RIGHT_ANTI", "RIGHT_MARK") and output_width(g, children[0]) is None:
                return []
        else:
            side = memo.get(children[0], [])
            wanted = {lk for lk, _ in keys}
            shift = 0
        prefix: Ordering = []
        for col, direction in side:
            if col not in wanted:
                break
            prefix.append((col + shift, direction))
        if {c - shift for c, _ in prefix} != wanted:
            return []
        internal = prefix
        width = None
    else:
        return []
    if emit is None:
        return list(internal)
    mapping = _emit_mapping(emit, width)
    return _remap_ordering(internal, mapping or {})


def satisfies(have: Ordering, need: Ordering) -> bool:
    """Does an output ordered on ``have`` meet the requirement ``need``? A ``CLUSTERED`` requirement is
    met by any direction; a leading block of ``CLUSTERED`` requirements may come in any order.

    >>> satisfies([(0, 1), (2, 3)], [(0, 1)]), satisfies([(0, 1)], [(0, 2)])
    (True, False)
    >>> satisfies([(1, 1), (0, 5), (2, 3)], [(0, 5), (1, 5), (2, 3)])
    True
    """
    if len(have) < len(need):
        return False
    k = 0
    while k < len(need) and need[k][1] == CLUSTERED:
        k += 1
    if {c for c, _ in have[:k]} != {c for c, _ in need[:k]}:
        return False
    for (hc, hd), (nc, nd) in zip(have[k:], need[k:], strict=False):
        if hc != nc or (nd != CLUSTERED and hd != nd):
            return False
    return True


def window_requirement(g: nx.DiGraph, node: int) -> Ordering | None:
    """The input ordering a ConsistentPartitionWindowRel needs: partition columns (CLUSTERED), then its
    sorts; None if they are not plain columns."""
    body = _body(g, node)
    need: Ordering = []
    for e in body.partition_expressions:
        i = field_index(e)
        if i is None:
            return None
        need.append((i, CLUSTERED))
    sorts = _sort_prefix(body.sorts)
    if len(sorts) != len(body.sorts):
        return None
    return need + sorts


# --------------------------------------------------------------------------------------------------
# Distribution
# --------------------------------------------------------------------------------------------------


def distribution(g: nx.DiGraph, node: int, memo: dict[int, Distribution] | None = None,
                 functions: Any = None) -> Distribution:
    """How the relation's output rows are partitioned (see the module docstring). ``memo``: the
    distributions of relations known already (a relation's depends only on the subtree below it),
    filled in with those computed here; ``functions``: the plan's function table."""
    memo = {} if memo is None else memo
    return _children_first(g, node, memo, lambda n: _distribution(g, n, memo, functions))


def _remap_distribution(d: Distribution, mapping: dict[int, list[int]] | None) -> Distribution:
    if d.kind != "hash":
        return d
    if mapping is None:
        return ANY
    cols = []
    for c in d.columns:
        targets = mapping.get(c)
        if not targets:
            return ANY
        cols.append(targets[0])
    return Distribution("hash", tuple(cols), d.partitions)


def _distribution(g: nx.DiGraph, node: int, memo: dict[int, Distribution], functions: Any) -> Distribution:
    kind = g.nodes[node]["kind"]
    body = _body(g, node)
    children = inputs(g, node)
    child = memo.get(children[0], ANY) if children else ANY
    emit = _emit(body)
    if kind == "exchange":
        which = body.WhichOneof("exchange_kind")
        parts = body.partition_count or None
        if parts == 1 and which != "broadcast":
            internal = Distribution("single", (), 1)
        elif which == "scatter_by_fields":
            cols = [reference_field(f) for f in body.scatter_by_fields.fields]
            internal = Distribution("hash", tuple(cols), parts) if None not in cols and cols else \
                Distribution("expression", (), parts)
        elif which == "broadcast":
            internal = Distribution("broadcast", (), parts)
        elif which == "round_robin":
            internal = Distribution("round_robin", (), parts)
        elif which in ("single_target", "multi_target"):
            internal = Distribution("expression", (), parts)
        else:
            internal = ANY
        width = output_width(g, children[0]) if children else None
    elif kind == "window":
        # Spark's window operator needs its input clustered by the partition keys: hash-partitioned on
        # plain-column keys (unless already so), everything in one partition without keys.
        parts = [field_index(e) for e in body.partition_expressions]
        if child.kind == "single" or (parts and None not in parts and hash_partitioned_on(child, parts)):
            internal = child
        elif not parts:
            internal = Distribution("single", (), 1)
        elif None in parts:
            internal = Distribution("expression", ())
        else:
            internal = Distribution("hash", tuple(parts))
        n_in = output_width(g, children[0]) if children else None
        width = None if n_in is None else n_in + len(body.window_functions)
    elif kind in ("filter", "fetch", "sort", "top_n", "extension_single"):
        internal = child
        width = output_width(g, children[0]) if children else None
    elif kind == "project":
        n_in = output_width(g, children[0])
        aliases: dict[int, list[int]] = {}
        if n_in is not None:
            for k, e in enumerate(body.expressions):
                i = field_index(e)
                if i is not None:
                    aliases.setdefault(i, []).append(n_in + k)
        mapping = _emit_mapping(emit, None if n_in is None else n_in + len(body.expressions), aliases)
        return _remap_distribution(child, mapping)
    elif kind == "aggregate":
        if child.kind != "hash":
            return child if child.kind in ("single", "broadcast") else ANY
        key_cols = [field_index(e) for e in body.grouping_expressions]
        groupings = [set(gr.expression_references) for gr in body.groupings] or [set(range(len(key_cols)))]
        out_cols = []
        for c in child.columns:
            positions = [k for k, kc in enumerate(key_cols) if kc == c]
            if not positions or not all(any(p in gr for p in positions) for gr in groupings):
                return ANY
            out_cols.append(positions[0])
        internal = Distribution("hash", tuple(out_cols), child.partitions)
        width = len(key_cols) + len(body.measures) + (1 if len(body.groupings) > 1 else 0)
    elif kind in _JOINS or kind == "cross":
        left = memo.get(children[0], ANY) if children else ANY
        right = memo.get(children[1], ANY) if len(children) > 1 else ANY
        jt = (join_type_name(body) if kind != "cross" else None) or "INNER"
        n_left = output_width(g, children[0]) if children else None
        right_only = jt in ("RIGHT_SEMI", "RIGHT_ANTI", "RIGHT_MARK")
        left_only = jt in ("LEFT_SEMI", "LEFT_ANTI", "LEFT_MARK")
        shift = 0 if right_only else (n_left or 0)
        if right.kind == "broadcast" and left.kind != "broadcast":
            internal = left if not right_only else ANY
        elif left.kind == "broadcast" and right.kind != "broadcast":
            if left_only or (not right_only and n_left is None):
                internal = ANY
            else:
                internal = Distribution(right.kind, tuple(c + shift for c in right.columns), right.partitions)
        elif left.kind == "broadcast" and right.kind == "broadcast":
            internal = left
        else:
            keys = join_keys(g, node, functions) if kind != "cross" else []
            if keys and kind == "join":
                # Spark picks the strategy of a logical join: a broadcast join keeps the probe side's
                # partitioning, a shuffled one partitions on the keys; neither is promised.
                return ANY
            if keys and kind in ("hash_join", "merge_join"):
                if jt.startswith("RIGHT"):
                    if not right_only and n_left is None:
                        return ANY
                    internal = Distribution("hash", tuple(r + shift for _, r in keys))
                elif jt == "OUTER":
                    internal = ANY
                else:
                    internal = Distribution("hash", tuple(lk for lk, _ in keys))
            elif left.kind in ("hash", "single") and not right_only:
                internal = left
            else:
                internal = ANY
        width = None
    elif kind == "set":
        dists = [memo.get(c, ANY) for c in children]
        internal = dists[0] if dists and all(d == dists[0] for d in dists) else ANY
        width = output_width(g, children[0]) if children else None
    else:
        return ANY
    if emit is None:
        return internal
    if width is None and internal.kind == "hash":
        mapping = {}
        for j, m in enumerate(emit):
            mapping.setdefault(m, []).append(j)
        return _remap_distribution(internal, mapping)
    return _remap_distribution(internal, _emit_mapping(emit, width))


def hash_partitioned_on(d: Distribution, columns: list[int]) -> bool:
    """Is ``d`` a hash distribution whose columns are a non-empty subset of ``columns`` (rows equal on
    ``columns`` are then in the same partition)?"""
    return d.kind == "hash" and bool(d.columns) and set(d.columns) <= set(columns)


__all__ = [
    "ANY",
    "ASC_NULLS_FIRST",
    "ASC_NULLS_LAST",
    "CLUSTERED",
    "DESC_NULLS_FIRST",
    "DESC_NULLS_LAST",
    "Distribution",
    "Ordering",
    "distribution",
    "hash_partitioned_on",
    "join_keys",
    "ordering",
    "output_width",
    "satisfies",
    "window_requirement",
]
