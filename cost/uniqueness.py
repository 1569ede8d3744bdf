"""The unique keys of a relation: sets of its output columns on which no two of its rows agree, derived
from the plan alone, as Calcite's ``RelMdUniqueKeys`` / ``RelMdColumnUniqueness`` derive them.

A Substrait plan declares no primary or foreign key (``ReadRel`` and ``RelCommon.Hint`` have no field
for one), so a key comes from a relation that makes its rows distinct, and is carried up through the
relations that keep it:

* an ``AggregateRel`` with one grouping set: its grouping columns (one output row per group); with one
  empty grouping set, or none and no grouping expression: the empty set (one row);
* an ``AggregateRel`` with several grouping sets: its grouping columns and the grouping-set column;
* a ``SetRel`` that removes duplicates (``UNION_DISTINCT``, ``MINUS_PRIMARY``, ``INTERSECTION_PRIMARY``,
  ``INTERSECTION_MULTISET``): all its columns;
* a ``FetchRel`` or ``TopNRel`` whose count is the literal 0 or 1: the empty set (at most one row);
* ``FilterRel``, ``SortRel``, ``FetchRel``, ``TopNRel`` keep their input's keys (a subset of its rows);
  ``ProjectRel`` and ``ConsistentPartitionWindowRel`` too (one row per input row, the input's columns
  first, a field reference a copy of its column);
* a ``JoinRel`` (or ``CrossRel``): a key of its left input and one of its right input together, for an
  inner, left or right join; a key of the left input alone where each left row meets at most one right
  row (the right input is unique on its equi-join columns) and the join keeps left rows once (inner,
  left, left semi, left anti); the same the other way round;
* every relation's emit carries a key whose columns it outputs (renumbered).

"No two rows agree" is by the identity grouping uses: two nulls agree. A key is then also one for
``equal`` (which never matches a null) and for ``is_not_distinct_from``. The empty set as a key means the
relation has at most one row. Floating-point columns are keys by the identity of the engine that
groups them, which may tell ``-0.0`` from ``0.0`` where ``equal`` does not: a reader that compares them
with ``equal`` must not take a floating-point key as unique for it.

>>> from testing.builder import Builder, aggregate, read
>>> from optimizer.dag import annotate_schemas, to_dag
>>> b = Builder()
>>> t = read("t", [("a", "i64"), ("b", "i64"), ("c", "i64")])
>>> g = annotate_schemas(to_dag(b.plan(aggregate(t, [1, 0], b.agg("count")), ["b", "a", "n"])))
>>> sorted(sorted(k) for k in unique_keys(g, g.graph["roots"][0]["node"]))
[[0, 1]]
"""

from __future__ import annotations

from collections.abc import Iterable

import networkx as nx
from optimizer.cost.estimates import equi_pairs
from substrait.proto import Expression, JoinRel, SetRel, Type

from optimizer.dag import inputs
from optimizer.expr_utils import field_index

#: A relation's unique keys: minimal sets of output columns, none a subset of another.
Keys = frozenset[frozenset[int]]

NONE: Keys = frozenset()
#: At most one row: every set of columns, the empty one too, is a key.
ONE_ROW: Keys = frozenset({frozenset()})

#: Keys kept per relation (the smallest): a join of keyed inputs makes products of their keys.
MAX_KEYS = 8

_DISTINCT_SETS = frozenset({SetRel.SET_OP_UNION_DISTINCT, SetRel.SET_OP_MINUS_PRIMARY,
                            SetRel.SET_OP_INTERSECTION_PRIMARY, SetRel.SET_OP_INTERSECTION_MULTISET})
_SUBSET_OF_ROWS = frozenset({"filter", "sort"})
_KEEPS_LEFT = frozenset({JoinRel.JOIN_TYPE_INNER, JoinRel.JOIN_TYPE_LEFT})
_KEEPS_RIGHT = frozenset({JoinRel.JOIN_TYPE_INNER, JoinRel.JOIN_TYPE_RIGHT})
#: The comparisons an equi-join key is: both match only values a grouping puts in one group.


def is_unique(keys: Keys, columns: Iterable[int]) -> bool:
    """Whether a relation with ``keys`` is unique on ``columns`` (some key is among them)."""
    cols = set(columns)
    return any(k <= cols for k in keys)


def unique_keys(g: nx.DiGraph, node: int, memo: dict[int, Keys] | None = None) -> Keys:
    """The unique keys of ``node``'s output (see the module doc). ``memo`` keeps each relation's keys
    (those of the relations below ``node`` too), and gives those already known."""
    memo = {} if memo is None else memo
    # Inputs first, without recursion: a plan may be deep.
    stack = [node]
    while stack:
        n = stack[-1]
        if n in memo:
            stack.pop()
            continue
        missing = [c for c in inputs(g, n) if c not in memo]
        if missing:
            stack.extend(missing)
            continue
        stack.pop()
        memo[n] = _keys(g, n, memo)
    return memo[node]




def exact_equality(t: Type) -> bool:
    """Whether ``equal`` on values of type ``t`` matches only values a grouping puts in one group (not
    so for floating point: ``-0.0 = 0.0``)."""
    return t.WhichOneof("kind") not in ("fp32", "fp64")


def _width(g: nx.DiGraph, node: int) -> int | None:
    schema = g.nodes[node].get("schema")
    return len(schema.types) if schema is not None else None


def _minimal(keys: Iterable[frozenset[int]]) -> Keys:
    """The keys none of which holds another, at most :data:`MAX_KEYS` of them (the smallest)."""
    out: list[frozenset[int]] = []
    for k in sorted(set(keys), key=lambda k: (len(k), sorted(k))):
        if not any(o <= k for o in out):
            out.append(k)
    return frozenset(out[:MAX_KEYS])


def _through(keys: Keys, positions: dict[int, int]) -> Keys:
    """``keys`` over internal columns as keys over output columns: ``positions`` gives an output column
    of each internal column output (a key with a column not output is lost)."""
    return _minimal(frozenset(positions[c] for c in k) for k in keys if all(c in positions for c in k))


def _small_count(e: Expression) -> bool:
    """Whether ``e`` is an integer literal 0 or 1."""
    if e.WhichOneof("rex_type") != "literal":
        return False
    kind = e.literal.WhichOneof("literal_type")
    return kind in ("i8", "i16", "i32", "i64") and getattr(e.literal, kind) in (0, 1)


def _keys(g: nx.DiGraph, node: int, memo: dict[int, Keys]) -> Keys:
    """The keys of ``node``, its inputs' in ``memo``."""
    kind = g.nodes[node]["kind"]
    body = getattr(g.nodes[node]["rel"], kind)
    children = inputs(g, node)
    if "advanced_extension" in body.DESCRIPTOR.fields_by_name and body.advanced_extension.HasField("enhancement"):
        return NONE  # an enhancement may change what the relation computes (an optimization does not)
    internal: Keys = NONE
    width: int | None = None
    aliases: dict[int, int] = {}  # an internal column that copies another: the copy -> the original
    if kind in _SUBSET_OF_ROWS and len(children) == 1:
        internal, width = memo[children[0]], _width(g, children[0])
    elif kind == "fetch" and len(children) == 1:
        one = body.HasField("count_expr") and _small_count(body.count_expr)
        internal, width = (ONE_ROW if one else memo[children[0]]), _width(g, children[0])
    elif kind == "top_n" and len(children) == 1:
        one = body.HasField("count") and _small_count(body.count)
        internal, width = (ONE_ROW if one else memo[children[0]]), _width(g, children[0])
    elif kind == "project" and len(children) == 1:
        n_in = _width(g, children[0])
        if n_in is not None:
            internal, width = memo[children[0]], n_in + len(body.expressions)
            for k, e in enumerate(body.expressions):
                i = field_index(e)
                if i is not None and i < n_in:
                    aliases[n_in + k] = i
    elif kind == "window" and len(children) == 1:
        n_in = _width(g, children[0])
        if n_in is not None:
            internal, width = memo[children[0]], n_in + len(body.window_functions)
    elif kind == "aggregate" and len(children) == 1:
        internal, width = _aggregate_keys(body)
    elif kind == "set" and body.op in _DISTINCT_SETS and children:
        width = _width(g, children[0])
        if width is not None:
            internal = frozenset({frozenset(range(width))})
    elif kind in ("join", "cross") and len(children) == 2:
        internal, width = _join_keys(g, node, kind, body, children, memo)
    if not internal or width is None:
        return NONE
    emit = _emit(body)
    if emit is None:
        return internal
    positions: dict[int, int] = {}
    for j, m in enumerate(emit):
        positions.setdefault(m, j)
        if m in aliases:
            positions.setdefault(aliases[m], j)
    return _through(internal, positions)


def _emit(body) -> list[int] | None:
    common = getattr(body, "common", None)
    if common is not None and common.WhichOneof("emit_kind") == "emit":
        return list(common.emit.output_mapping)
    return None


def _aggregate_keys(body) -> tuple[Keys, int]:
    """An aggregate's keys over its output (grouping expressions, measures, the grouping-set column if
    several sets) and the output's width."""
    n_keys = len(body.grouping_expressions)
    sets = [frozenset(gr.expression_references) for gr in body.groupings]
    width = n_keys + len(body.measures) + (1 if len(sets) > 1 else 0)
    if not sets:
        # No grouping set: one group of every grouping expression (none: the whole input, one row).
        return frozenset({frozenset(range(n_keys))}), width
    if any(r >= n_keys for s in sets for r in s):
        return NONE, width  # a set naming an expression the aggregate lacks: not a plan to reason about
    if len(sets) == 1:
        return frozenset({sets[0]}), width
    # Each set's rows differ on its own columns (the others are null in them) or in the set column.
    return frozenset({frozenset(range(n_keys)) | {width - 1}}), width


def _join_keys(g: nx.DiGraph, node: int, kind: str, body, children: list[int], memo: dict[int, Keys]
               ) -> tuple[Keys, int | None]:
    left, right = children
    n_left, n_right = _width(g, left), _width(g, right)
    if n_left is None or n_right is None:
        return NONE, None
    left_keys, right_keys = memo[left], memo[right]
    shifted = frozenset(frozenset(c + n_left for c in k) for k in right_keys)
    jt = JoinRel.JOIN_TYPE_INNER if kind == "cross" else body.type
    pairs: list[tuple[int, int]] = []
    if kind == "join" and body.HasField("expression"):
        pairs, _ = equi_pairs(body.expression, n_left, g.graph["functions"], column=field_index)
        # ``equal`` matches -0.0 with 0.0, which a grouping may keep apart: not a key's column to join on.
        types = [*g.nodes[left]["schema"].types, *g.nodes[right]["schema"].types]
        pairs = [(a, b) for a, b in pairs if exact_equality(types[a]) and exact_equality(types[n_left + b])]
    # Each left row meets at most one right row when the right input is unique on its equi columns.
    left_once = is_unique(right_keys, (r for _, r in pairs))
    right_once = is_unique(left_keys, (lc for lc, _ in pairs))
    if jt in (JoinRel.JOIN_TYPE_LEFT_SEMI, JoinRel.JOIN_TYPE_LEFT_ANTI):
        return left_keys, n_left
    if jt in (JoinRel.JOIN_TYPE_RIGHT_SEMI, JoinRel.JOIN_TYPE_RIGHT_ANTI):
        return right_keys, n_right
    if jt not in _KEEPS_LEFT | _KEEPS_RIGHT:
        return NONE, n_left + n_right  # full outer, single and mark joins: not derived
    keys: set[frozenset[int]] = {lk | rk for lk in left_keys for rk in shifted}
    if left_once and jt in _KEEPS_LEFT:
        keys |= left_keys
    if right_once and jt in _KEEPS_RIGHT:
        keys |= shifted
    return _minimal(keys), n_left + n_right


__all__ = ["MAX_KEYS", "NONE", "ONE_ROW", "Keys", "exact_equality", "is_unique", "unique_keys"]
