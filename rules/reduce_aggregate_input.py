"""Rule ``reduce_aggregate_input`` (phase ``physical``, before joins are implemented): semi-join
reduction of an aggregate whose groups are mostly thrown away by the join above it.

**Matches** a ``JoinRel`` one of whose inputs is an ``AggregateRel`` (possibly under ``ProjectRel``
and ``FilterRel`` relations that pass its grouping keys through unchanged), when

* the join drops the rows of that side which have no match: an inner or semi join (either side), or
  the null-supplying side of a left/right (or single) join, or the non-output side of an anti join;
* the join expression has ``equal(g, y)`` conjuncts between a grouping key ``g`` of the aggregate
  (one grouping set; ``g`` read as a column of the join's input, the key any deterministic expression
  ``e`` of the aggregate's input) and a deterministic expression ``y`` of the other input ``Y`` alone;
* no other relation of the plan is the same subtree (:func:`optimizer.dag.written_elsewhere`): Spark
  computes such copies once (a producer inlines a CTE read twice as two), and reducing one copy by its
  own join would make two computations of one (TPC-DS Q2 and Q59 reduce two copies by two years);
* the relation ``R`` the keys are read from (below) is deterministic (no fetch or top-N, no
  nondeterministic function) and the aggregate and the relations between it and the join are read
  only there;
* by the estimates, ``R`` keeps few groups (at most ``MAX_KEPT_FRACTION`` of them), is smaller than
  the aggregate's input, and its table reads produce at most ``MAX_REREAD_RATIO`` times the rows the
  aggregate takes in: reading ``R`` a second time must pay.

**Produces** the same join, with the aggregate's input ``I`` replaced by
``JoinRel(LEFT_SEMI, I, project(R: y1, ...), e1 = y1 AND ...)``: only the rows whose keys ``R`` has
are aggregated. ``R`` is the deepest relation under ``Y`` (through projections, filters and the input of
an inner join, cross product or semi join that all key columns come from) whose output holds every key
value of ``Y``'s and which passes the estimates' checks above, else ``Y`` itself: DataFusion's TPC-H
Q17 joins the aggregate with ``lineitem ⋈ part``, whose keys are ``part``'s. A relation that holds the
values of only some keys, or is reached across an ``equal(a, b)`` conjunct of an inner or semi join
(every ``a`` the join outputs is a ``b`` of its other input), replaces it when it passes the same checks
(for the groups of those keys) and its reads produce fewer rows; the semi-join then compares those keys
only. DataFusion's Q20 compares ``(l_partkey, l_suppkey)`` with ``partsupp ⋉ part`` (partkeys of
``forest`` parts): ``part`` alone is read again (200,000 rows at SF 1 against 1,000,000 with ``partsupp``), and every
lineitem's pair is in ``partsupp`` anyway.
``R`` becomes a shared input (a ``ReferenceRel`` when written out).

**Why it is equivalent**: the semi-join keeps or drops the rows of ``I`` by the value of
grouping keys alone, so every group is kept whole (same measures) or dropped whole. A dropped
group's keys (those compared) equal no ``y`` of ``R``, whose key values include ``Y``'s (a projection,
a filter and a join output only key values their input has, and across ``a = b`` only values ``b``
has), so none of ``Y``'s; ``equal`` is never true on NULL, so
its row would have met no row of ``Y`` in the join's equality either, and the join drops rows of this
side that have no match. The relations in between pass the key through unchanged and act on each row
alone. ``R`` is deterministic, so it has the same rows each time it is read. This is the rewrite Spark
applies to Q17 and Q20 when it decorrelates their subqueries itself; DataFusion and Isthmus hand us the
plan already decorrelated, with the aggregate over the whole table.
"""

from __future__ import annotations

from dataclasses import dataclass

import networkx as nx
from substrait.proto import Expression, JoinRel, Rel

from optimizer.dag import inputs, uses, written_elsewhere
from optimizer.engine import NewRel, Replacement, Rule, RuleContext
from optimizer.expr_utils import (
    call_args,
    conjuncts,
    field,
    field_index,
    function_name,
    has_subquery,
    has_unresolvable_refs,
    is_deterministic,
    make_and,
    referenced_fields,
    shift_fields,
)
from optimizer.relations import emit_of, rel_copy, width


def reduce_aggregate_input(g: nx.DiGraph, node: int, ctx: RuleContext) -> Replacement | None:
    """A ``JoinRel`` with an aggregate below one input, that aggregate's input semi-joined with the
    other input on the grouping keys the join compares (see the module docstring).

    Before (left) and after (right), with 100 parts against 6,000,000 lineitems: only the parts' keys
    are aggregated. ``part`` is then read by both joins (written out: a plan relation both read by
    ``ReferenceRel``).

    >>> from testing.builder import INNER, Builder, aggregate, before_after, join, read, ref
    >>> b, part, li = Builder(), read("part", [("p", "i64")], rows=100), read("lineitem", [("l_partkey", "i64"), ("l_quantity", "fp64")], rows=6e6)
    >>> print(before_after(b.plan(join(part, aggregate(li, [0], b.agg("avg", ref(1), out="fp64")), INNER, b.call("equal", ref(0), ref(1))), ["p", "k", "q"]), RULE))
    Join(inner, (p#0 = l_partkey#1))                                  | Join(inner, (p#0 = l_partkey#1))
      Read(part)                                                      |   Read(part)
      Aggregate(groups=[(l_partkey#0)], measures=[avg(l_quantity#1)]) |   Aggregate(groups=[(l_partkey#0)], measures=[avg(l_quantity#1)])
        Read(lineitem)                                                |     Join(left_semi, (p#2 = l_partkey#0))
                                                                      |       Read(lineitem)
                                                                      |       Project(emit=[0])
                                                                      |         Read(part)
    """
    rel: Rel = g.nodes[node]["rel"]
    join = rel.join
    if not join.HasField("expression") or join.HasField("post_join_filter"):
        return None
    sides = inputs(g, node)
    if len(sides) != 2:
        return None
    n_left = width(g, sides[0])
    for side in _REDUCIBLE.get(join.type, ()):
        x, y = (sides[0], sides[1]) if side == "left" else (sides[1], sides[0])
        x_offset, y_offset = (0, n_left) if side == "left" else (n_left, 0)
        n_x, n_y = width(g, x), width(g, y)
        keys: list[_Key] = []
        seen: set[tuple[int, bytes]] = set()
        chain: list[int] | None = None
        for conj in conjuncts(join.expression, ctx.functions):
            if function_name(conj, ctx.functions) != "equal":
                continue
            args = call_args(conj)
            if args is None or len(args) != 2:
                continue
            for x_position in (0, 1):
                xc, y_arg = field_index(args[x_position]), args[1 - x_position]
                if xc is None or not x_offset <= xc < x_offset + n_x:
                    continue
                y_fields = referenced_fields(y_arg)
                if not y_fields or not all(y_offset <= f < y_offset + n_y for f in y_fields):
                    continue
                if not _plain(y_arg, ctx.functions):
                    continue
                found = _key_source(g, x, xc - x_offset)
                if found is None or (chain is not None and found[0] != chain):
                    continue
                chain = found[0]
                y_expr = shift_fields(y_arg, -y_offset)
                fingerprint = (found[1], y_expr.SerializeToString(deterministic=True))
                if fingerprint not in seen:
                    seen.add(fingerprint)
                    keys.append(_Key(found[1], y_expr, conj, x_position))
                break
        if not keys or chain is None:
            continue
        aggregate = chain[-1]
        if written_elsewhere(g, aggregate):
            continue
        grouping = g.nodes[aggregate]["rel"].aggregate.grouping_expressions
        if not all(_plain(grouping[k.grouping], ctx.functions) for k in keys):
            continue
        (agg_input,) = inputs(g, aggregate)
        # The reducer: the relation under Y, deepest first, whose values of every key include Y's (a
        # subtree of Y cheaper to compute again) if it keeps few enough groups, else Y itself; replaced by
        # one reached across a join's equality or holding fewer keys that keeps few enough groups too
        # and reads fewer rows (DataFusion's Q20: ``part`` rather than ``partsupp ⋉ part``).
        usable = [(r, r_keys, direct) for r, r_keys, direct in _key_providers(g, y, keys, ctx.functions)
                  if not _already_reduced(g, agg_input, r) and _deterministic_subtree(g, r, ctx.functions)]
        reducer = next(((r, r_keys) for r, r_keys, direct in reversed(usable)
                        if direct and _pays(ctx, aggregate, agg_input, r, r_keys, len(keys))), None)
        others = [(_read_rows(ctx, r), -i, r, r_keys) for i, (r, r_keys, direct) in enumerate(usable)
                  if not direct and _pays(ctx, aggregate, agg_input, r, r_keys, len(keys))]
        if others:
            rows, _, r, r_keys = min(others, key=lambda c: (c[0], c[1]))
            if reducer is None or rows < _read_rows(ctx, reducer[0]):
                reducer = r, r_keys
        if reducer is None:
            continue
        reducer_node, reducer_keys = reducer
        n_in = width(g, agg_input)
        n_r = width(g, reducer_node)
        # The reducer's key values, one column per key (a narrower build side than all of it).
        y_keys = Rel()
        mapping = []
        for k in reducer_keys:
            column = field_index(k.y_expr)
            if column is None:
                y_keys.project.expressions.add().CopyFrom(k.y_expr)
                column = n_r + len(y_keys.project.expressions) - 1
            mapping.append(column)
        y_keys.project.common.emit.output_mapping.extend(mapping)
        equalities = []
        for i, k in enumerate(reducer_keys):
            eq = Expression()
            eq.CopyFrom(k.equality)
            eq.scalar_function.arguments[k.x_position].value.CopyFrom(grouping[k.grouping])
            eq.scalar_function.arguments[1 - k.x_position].value.CopyFrom(field(n_in + i))
            equalities.append(eq)
        semi = Rel()
        semi.join.type = _J.JOIN_TYPE_LEFT_SEMI
        semi.join.expression.CopyFrom(make_and(equalities, ctx.registrar))
        new_child: NewRel | int = NewRel(rel_copy(g, aggregate),
                                         [NewRel(semi, [agg_input, NewRel(y_keys, [reducer_node])])])
        for n in reversed(chain[:-1]):
            new_child = NewRel(rel_copy(g, n), [new_child])
        return NewRel(rel_copy(g, node), [new_child, y] if side == "left" else [y, new_child])
    return None


RULE = Rule(name="reduce_aggregate_input", phase="physical", kinds=frozenset({"join"}), apply=reduce_aggregate_input,
            description="Join over an aggregate -> the aggregate's input semi-joined with the other side first")


#: Apply only if the other input's keys are estimated to keep at most this fraction of the groups.
MAX_KEPT_FRACTION = 0.25
#: ... and if the rows read by the other input's table reads are at most this many times the rows
#: the aggregate takes in (reading Y again must be cheaper than the aggregation it saves).
MAX_REREAD_RATIO = 2.0

_J = JoinRel
#: Join type -> the inputs whose unmatched rows the join drops (the side that may be reduced).
_REDUCIBLE = {
    _J.JOIN_TYPE_INNER: ("left", "right"),
    _J.JOIN_TYPE_LEFT_SEMI: ("left", "right"),
    _J.JOIN_TYPE_RIGHT_SEMI: ("left", "right"),
    _J.JOIN_TYPE_LEFT: ("right",),
    _J.JOIN_TYPE_LEFT_SINGLE: ("right",),
    _J.JOIN_TYPE_LEFT_ANTI: ("right",),
    _J.JOIN_TYPE_RIGHT: ("left",),
    _J.JOIN_TYPE_RIGHT_SINGLE: ("left",),
    _J.JOIN_TYPE_RIGHT_ANTI: ("left",),
}
#: Relations allowed in the other input (it is read twice: it must give the same rows both times).
_DETERMINISTIC_KINDS = frozenset({"read", "filter", "project", "join", "cross", "aggregate", "sort", "set",
                                  "hash_join", "merge_join", "nested_loop_join", "exchange"})


def _key_source(g: nx.DiGraph, node: int, column: int) -> tuple[list[int], int] | None:
    """``(chain, k)``: the relations from ``node`` down to an aggregate (its last element) through
    which output ``column`` is the aggregate's grouping expression ``k``; None if it is not one."""
    chain: list[int] = []
    while True:
        if uses(g, node) != 1:
            return None
        chain.append(node)
        rel: Rel = g.nodes[node]["rel"]
        kind = g.nodes[node]["kind"]
        passed = _input_column(g, node, column)
        children = inputs(g, node)
        if passed is None or len(children) != 1:
            return None
        column = passed
        if kind in ("filter", "project"):
            node = children[0]
            continue
        if kind == "aggregate":
            agg = rel.aggregate
            if len(agg.groupings) != 1 or not agg.grouping_expressions:
                return None
            refs = set(agg.groupings[0].expression_references)
            if refs != set(range(len(agg.grouping_expressions))) or column >= len(agg.grouping_expressions):
                return None
            return chain, column
        return None


def _input_column(g: nx.DiGraph, node: int, column: int) -> int | None:
    """The column of ``node``'s inputs (side by side) that its output ``column`` passes on unchanged:
    through its emit, and for a projection through a field reference; None if it computes the column."""
    rel: Rel = g.nodes[node]["rel"]
    mapping = emit_of(rel)
    if mapping is not None:
        if not 0 <= column < len(mapping):
            return None
        column = mapping[column]
    if g.nodes[node]["kind"] == "project":
        n_in = width(g, inputs(g, node)[0])
        if column >= n_in:
            k = column - n_in
            return field_index(rel.project.expressions[k]) if k < len(rel.project.expressions) else None
    return column


def _key_providers(g: nx.DiGraph, y: int, keys: list[_Key], functions) -> list[tuple[int, list[_Key], bool]]:
    """``Y`` and the relations under it whose output holds every value ``Y`` outputs of some of the keys,
    each with those keys as its own columns (a non-empty subset, in the keys' order): through a
    projection or filter; into an input of an inner join, cross product or (left) semi join for the key
    columns that come from it; and across an ``equal(a, b)`` conjunct of an inner or semi join's
    expression between plain columns of its two inputs, since every ``a`` value the join outputs equals
    a ``b`` of the other input (DataFusion's TPC-H Q20: ``partsupp ⋉ part`` on ``ps_partkey = p_partkey``
    holds its partkeys in ``part``). Only keys that are plain columns are followed; each relation is
    listed once (top down), with the most keys found for it and whether it holds them all without
    crossing an equality (``direct``)."""
    found: dict[int, tuple[list[_Key], bool]] = {}
    order: list[int] = []

    def visit(node: int, ks: list[_Key], columns: list[int], direct: bool) -> None:
        if node in found and (found[node][1], len(found[node][0])) >= (direct, len(ks)):
            return
        if node not in found:
            order.append(node)
        found[node] = ks, direct
        passed = [_input_column(g, node, c) for c in columns]
        kept = [(k, c) for k, c in zip(ks, passed, strict=True) if c is not None]
        if not kept:
            return
        data = g.nodes[node]
        kind, rel = data["kind"], data["rel"]
        children = inputs(g, node)
        if kind in ("filter", "project"):
            if len(kept) == len(ks):
                visit(children[0], [_Key(k.grouping, field(c), k.equality, k.x_position) for k, c in kept],
                      [c for _, c in kept], direct)
            return
        inner = kind == "join" and rel.join.type in (_J.JOIN_TYPE_INNER, _J.JOIN_TYPE_LEFT_SEMI)
        if kind != "cross" and not inner:
            return
        n_left = width(g, children[0])
        partner: dict[int, int] = {}
        if inner and rel.join.HasField("expression"):
            for conj in conjuncts(rel.join.expression, functions):
                args = call_args(conj) if function_name(conj, functions) == "equal" else None
                pair = [field_index(a) for a in args] if args is not None and len(args) == 2 else []
                if len(pair) == 2 and None not in pair and (pair[0] < n_left) != (pair[1] < n_left):
                    partner.setdefault(pair[0], pair[1])
                    partner.setdefault(pair[1], pair[0])
        for side, child in enumerate(children):
            lo, hi = (0, n_left) if side == 0 else (n_left, n_left + width(g, child))
            sub = []
            crossed = False
            for k, c in kept:
                own = c if lo <= c < hi else partner.get(c)
                if own is not None and lo <= own < hi:
                    crossed = crossed or not lo <= c < hi
                    sub.append((_Key(k.grouping, field(own - lo), k.equality, k.x_position), own - lo))
            if sub:
                visit(child, [k for k, _ in sub], [c for _, c in sub],
                      direct and not crossed and len(sub) == len(ks))

    columns = [field_index(k.y_expr) for k in keys]
    if all(c is not None for c in columns):
        visit(y, keys, columns, True)
    else:
        found[y], order[:] = (keys, True), [y]
    return [(n, *found[n]) for n in order]


def _deterministic_subtree(g: nx.DiGraph, node: int, functions) -> bool:
    for n in {node} | nx.descendants(g, node):
        if g.nodes[n]["kind"] not in _DETERMINISTIC_KINDS:
            return False
        if not is_deterministic(g.nodes[n]["rel"], functions):
            return False
    return True


def _plain(e: Expression, functions) -> bool:
    """Deterministic, no subquery, only plain column references."""
    return is_deterministic(e, functions) and not has_subquery(e) and not has_unresolvable_refs(e)


@dataclass
class _Key:
    grouping: int  # index of the aggregate's grouping expression
    y_expr: Expression  # the other side of the equality, over Y's columns
    equality: Expression  # the join's conjunct
    x_position: int  # which argument of the conjunct is the grouping key


def _already_reduced(g: nx.DiGraph, agg_input: int, y: int) -> bool:
    data = g.nodes[agg_input]
    if data["kind"] != "join" or data["rel"].join.type != _J.JOIN_TYPE_LEFT_SEMI:
        return False
    right = inputs(g, agg_input)[1]
    return right == y or y in inputs(g, right)


def _pays(ctx: RuleContext, aggregate: int, agg_input: int, y: int, keys: list[_Key], n_keys: int) -> bool:
    """Whether reducing by ``y``'s values of ``keys`` (of the ``n_keys`` the join compares) pays by the
    estimates (see the module docstring)."""
    groups = max(1.0, float(ctx.estimate(aggregate).rows))
    in_est = ctx.estimate(agg_input)
    input_rows = float(in_est.rows)
    y_est = ctx.estimate(y)
    distinct = float(y_est.rows)
    if len(keys) == 1:
        distinct = min(distinct, _ndv(y_est, keys[0].y_expr) or distinct)
    if len(keys) < n_keys:
        # Fewer keys than the aggregate groups by: the fraction kept is of those keys' own values.
        grouping = ctx.g.nodes[aggregate]["rel"].aggregate.grouping_expressions
        values = 1.0
        for k in keys:
            ndv = _ndv(in_est, grouping[k.grouping])
            if ndv is None:
                return False
            values *= ndv
        groups = min(groups, max(1.0, values))
    # Y is computed again: the rows its reads produce must not outweigh the rows the aggregate takes
    # in (a bound on the extra work; DataFusion's Q2 has a five-way join as Y over a 160,000-row
    # aggregate, and gained nothing measurable from the rewrite).
    read_rows = _read_rows(ctx, y)
    return (distinct <= MAX_KEPT_FRACTION * groups and float(y_est.rows) < input_rows
            and read_rows <= MAX_REREAD_RATIO * input_rows)


def _ndv(est, column: Expression) -> float | None:
    """The estimated distinct values of ``column`` (a field reference into ``est``'s columns), if known."""
    index = field_index(column)
    stats = est.columns[index] if index is not None and index < len(est.columns) else None
    ndv = getattr(stats, "ndv", None)
    return float(ndv) if ndv else None


def _read_rows(ctx: RuleContext, node: int) -> float:
    """The rows the table reads of ``node``'s subtree produce: the work of computing it again."""
    return sum(float(ctx.estimate(n).rows) for n in {node} | nx.descendants(ctx.g, node)
               if ctx.g.nodes[n]["kind"] == "read")
