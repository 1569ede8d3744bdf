"""Rule ``eliminate_joins`` (phase ``logical``): a join to an input that is unique on its join columns, of
which nothing above reads more than those columns, goes away (an outer join) or becomes a semi join (an
inner join), as Calcite's ``ProjectJoinRemoveRule`` and ``AggregateJoinRemoveRule`` do.

**Matches** a ``JoinRel`` read by one relation (not a plan relation of its own), without a post-join
filter or advanced extension, whose condition is a conjunction of equi-comparisons ``equal`` or
``is_not_distinct_from`` of a column of each input (field references, no cast), none of a floating-point
column, and whose *dropped* input ``D`` is unique on its columns in them (:mod:`cost.uniqueness`: an
aggregate's grouping columns, a distinct set operation, a fetch of one row, carried up through filters,
projections and joins on a key). The other input ``K`` is kept:

* a ``LEFT`` join (``K`` left) or ``RIGHT`` join (``K`` right) where nothing above reads a column of ``D``
  (:mod:`cost.needed_columns`, through every projection and emit up to the roots);
* an ``INNER`` join (``D`` the right input, else the left) where every column of ``D`` read above is an
  equi-join column with a partner in ``K`` of the same type (nullability included), and, where a column
  of ``D`` nobody reads has no such partner, the price allows a projection for it.

The rewrite is made only where the cost model prices the whole plan with it at most as high as without it.

**Produces** ``K`` (outer join), or ``K ⋉ D`` on the same condition (inner join: ``JoinRel`` ``LEFT_SEMI``,
``K`` its left input, the condition's columns renumbered), under a projection that gives the join's
output: ``K``'s columns as they were, a column of ``D`` as its partner in ``K`` (where it has one), one
nobody reads as a typed null; all in the emit of ``K`` or of the semi join where no null is needed (a
partner may be emitted twice), else in a ``ProjectRel`` above.

**Why it is equivalent**: ``D`` unique on its equi columns means no two of its rows agree on them, so a row
of ``K`` (whose values must equal a ``D`` row's in all of them) matches at most one row of ``D``. An outer
join then outputs each row of ``K`` exactly once (matched, or extended with nulls): ``K``'s rows, with
``D``'s columns that nothing reads. An inner join outputs each row of ``K`` that matches, once: the rows of
``K ⋉ D``; in each, an equi column of ``D`` holds the value of its partner in ``K`` (``equal`` is true only
for equal non-null values, ``is_not_distinct_from`` also for two nulls), which has the same type, so the
partner's value is that column's value. Floating-point columns are left out: ``equal`` matches ``-0.0``
with ``0.0``, two groups of an aggregate an engine may keep apart, and the two values print differently.
A column nothing reads is not looked at, so a null in its place changes no answer. A join read by several
relations is left as it is; ``D`` is only no longer read.

**Why it pays**: Spark removes neither join (its ``EliminateOuterJoin`` narrows outer joins; no rule of
its optimizer knows a key from an aggregate): an outer join to an aggregate nothing reads still computes
the aggregate and shuffles both inputs for it, and an inner join builds ``D``'s rows with all of ``D``'s
columns where a left semi join builds only the keys and outputs each matching row of ``K`` without a
copy of ``D``'s columns. A decorrelated ``x IN (SELECT k ... GROUP BY k)`` written as an inner join with
the aggregate is the common case.

**Where it runs**: in the logical phase, after ``push_filters`` (the filters above a join are in its
condition or below it, so a condition left with a conjunct that is not an equi-comparison is one the
join needs) and before ``push_semi_joins``, which moves the semi join it makes below inner joins, and
before ``join_order``, which then has one input fewer to order.
"""

from __future__ import annotations

import networkx as nx
from optimizer.cost.estimates import equi_pairs
from optimizer.cost.uniqueness import exact_equality, is_unique
from substrait.proto import Expression, JoinRel, Rel, Type

from optimizer.dag import inputs, uses
from optimizer.engine import (
    NewRel,
    Replacement,
    Rule,
    RuleContext,
    not_costlier,
)
from optimizer.expr_utils import field_index, has_subquery, has_unresolvable_refs, remap_fields
from optimizer.relations import apply_emit, emit_of

_INNER, _LEFT, _RIGHT = JoinRel.JOIN_TYPE_INNER, JoinRel.JOIN_TYPE_LEFT, JoinRel.JOIN_TYPE_RIGHT


def eliminate_joins(g: nx.DiGraph, node: int, ctx: RuleContext) -> Replacement | None:
    """``K`` or ``K ⋉ D`` in the place of the join (see the module doc); None where it does not apply.

    Before (left) and after (right): the orders with a line of more than 49 items, ``orders ⋈ (SELECT
    l_orderkey FROM lineitem WHERE l_quantity > 49 GROUP BY l_orderkey)`` (an ``IN`` decorrelated into an
    inner join with the distinct keys):

    >>> from testing.builder import INNER, Builder, aggregate, before_after, filter_, join, lit, read, ref
    >>> b, o = Builder(), read("orders", [("o_orderkey", "i64"), ("o_totalprice", "i64")], rows=1.5e6)
    >>> li = read("lineitem", [("l_orderkey", "i64"), ("l_quantity", "i64")], rows=6e6)
    >>> big = aggregate(filter_(li, b.call("gt", ref(1), lit(49))), [0])
    >>> print(before_after(b.plan(join(o, big, INNER, b.call("equal", ref(0), ref(2))), ["o", "p", "l"]), RULE))
    Join(inner, (o_orderkey#0 = l_orderkey#2))        | Join(left_semi, (o_orderkey#0 = l_orderkey#2), emit=[0, 1, 0])
      Read(orders)                                    |   Read(orders)
      Aggregate(groups=[(l_orderkey#0)], measures=[]) |   Aggregate(groups=[(l_orderkey#0)], measures=[])
        Filter((l_quantity#1 > 49))                   |     Filter((l_quantity#1 > 49))
          Read(lineitem)                              |       Read(lineitem)
    """
    rel = g.nodes[node]["rel"]
    join = rel.join
    if (join.type not in (_INNER, _LEFT, _RIGHT) or join.HasField("advanced_extension")
            or join.HasField("post_join_filter") or not join.HasField("expression")
            or has_subquery(join.expression) or has_unresolvable_refs(join.expression)):
        return None
    if uses(g, node) != 1 or any(r["node"] == node for r in g.graph["roots"] if r.get("kind") != "root"):
        return None  # read by several relations: left as it is
    left, right = inputs(g, node)
    sides = {_LEFT: [True], _RIGHT: [False], _INNER: [True, False]}[join.type]
    unique_keys = ctx.estimator.metadata.unique_keys
    if not any(unique_keys(right if drop_right else left) for drop_right in sides):
        return None  # no input it could drop is unique on any columns
    n_left, n_right = _width(g, left), _width(g, right)
    pairs, rest = equi_pairs(join.expression, n_left, ctx.functions, column=field_index)
    types = [*g.nodes[left]["schema"].types, *g.nodes[right]["schema"].types]
    if rest or not pairs or not all(exact_equality(types[a]) and exact_equality(types[n_left + b]) for a, b in pairs):
        return None
    needed = ctx.estimator.needed(node)
    if needed is None:
        return None  # the readers' columns are unknown: all count
    mapping = emit_of(rel) or list(range(n_left + n_right))
    read = {mapping[i] for i in needed}
    for drop_right in sides:
        made = _without(g, node, ctx, drop_right, pairs, read, types, mapping)
        if made is not None:
            return made
    return None


RULE = Rule(name="eliminate_joins", phase="logical", kinds=frozenset({"join"}), apply=eliminate_joins,
            description="a join to an input unique on the join columns, none of whose other columns is read, "
                        "removed (outer) or made a semi join (inner)")


def _width(g: nx.DiGraph, node: int) -> int:
    return len(g.nodes[node]["schema"].types)


def _without(g: nx.DiGraph, node: int, ctx: RuleContext, drop_right: bool, pairs: list[tuple[int, int]],
             read: set[int], types: list[Type], mapping: list[int]) -> Replacement | None:
    """The join without its right (``drop_right``) or left input (see :func:`eliminate_joins`); None where
    that input is not unique on its join columns, or a column of it is read without a partner."""
    join = g.nodes[node]["rel"].join
    left, right = inputs(g, node)
    n_left = _width(g, left)
    n = n_left + _width(g, right)
    kept, dropped = (left, right) if drop_right else (right, left)
    offset = 0 if drop_right else n_left  # of the kept input's columns in the join's
    # The join's columns of each equi pair, the dropped input's first.
    equi = [(n_left + b, a) if drop_right else (a, n_left + b) for a, b in pairs]
    dropped_cols = {c - (n - _width(g, dropped)) if drop_right else c for c, _ in equi}
    if not is_unique(ctx.estimator.metadata.unique_keys(dropped), dropped_cols):
        return None
    is_dropped = (lambda c: c >= n_left) if drop_right else (lambda c: c < n_left)
    partner: dict[int, int] = {}
    if join.type == _INNER:
        for d, k in equi:
            if d not in partner and types[d] == types[k]:
                partner[d] = k
    if any(is_dropped(c) and c not in partner for c in read):
        return None
    if join.type != _INNER and any(is_dropped(c) for c in read):
        return None  # an outer join's columns of the other input are null where no row matched
    if join.type == _INNER:
        semi = Rel()
        semi.join.CopyFrom(join)
        semi.join.ClearField("common")  # the output is built above; its row count is not the join's
        semi.join.type = JoinRel.JOIN_TYPE_LEFT_SEMI
        if not drop_right:  # the right input becomes the semi join's left: the columns swap places
            n_right = n - n_left
            semi.join.expression.CopyFrom(remap_fields(join.expression,
                                                       lambda i: i + n_right if i < n_left else i - n_left))
        base: Replacement = NewRel(semi, [kept, dropped])
    else:
        base = kept
    # Each output column of the join as a column of ``base`` (the kept input's columns; a column of the
    # dropped input as its partner, read above or not) or a null (read by nothing above).
    columns: list[int] = []
    nulls: list[Expression] = []
    n_base = _width(g, kept)
    for c in mapping:
        if not is_dropped(c) or c in partner:
            columns.append(partner.get(c, c) - offset)
        else:
            nulls.append(_null_of(types[c]))
            columns.append(n_base + len(nulls) - 1)
    if not nulls:
        replacement = apply_emit(g, base, columns)
    else:
        project = Rel()
        project.project.expressions.extend(nulls)
        project.project.common.emit.output_mapping.extend(columns)
        replacement = NewRel(project, [base])
    return replacement if not_costlier(g, node, replacement, ctx, "eliminate_joins") else None


def _null_of(t: Type) -> Expression:
    """A null of type ``t`` (made nullable)."""
    e = Expression()
    e.literal.null.CopyFrom(t)
    kind = e.literal.null.WhichOneof("kind")
    body = getattr(e.literal.null, kind)
    if "nullability" in body.DESCRIPTOR.fields_by_name:
        body.nullability = Type.NULLABILITY_NULLABLE
    e.literal.nullable = True
    return e


