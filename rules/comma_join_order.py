"""Rule ``comma_join_order`` (phase ``normalise``): a comma join is written in the order Spark joins it.

Matches the top of a region of inner joins written with a cross product that Spark's ``ReorderJoin``
joins in another order than written (:func:`cost.spark_joins.spark_join_region`: a left-deep tree of
inner joins, cross products and filters over them, with a cross product or a join without condition
among them). ``extract_join_conditions`` gives each join of a comma join the conditions between its
two sides; a cross product is left where the ``FROM`` order puts side by side two tables that no
condition joins (Isthmus' TPC-H Q8: ``FROM part, supplier, lineitem, ...``, where only ``lineitem``
joins ``part`` and ``supplier``, and the join above the cross product holds both keys).

Produces the region's inputs joined left-deep in Spark's order, each join on the conjuncts between its
two sides (each at the first join that has every input it reads, where Spark places it), a conjunct
that reads one input as a filter on that input (Spark pushes it there), the other conjuncts (reading
no input; a subquery or a nondeterministic call in the top's own condition) in a filter on top, and the
columns put back in the written order (and the top's emit) by a projection. A region with a subquery or
a nondeterministic call in the condition of a join or filter below its top is left as written: such a
conjunct is evaluated where it is written.

Why: Spark runs such a plan in that order anyway, and the cost model prices the region so; the rules
after it, and the estimates they are judged by, see it too. Written as a cross product, the join of
``part x supplier`` with ``lineitem`` on both keys was estimated by the pairs of keys the product
holds, which a filter on ``part`` does not thin out: once ``push_filters`` had moved ``p_type = ...``
below it, the join kept lineitem's 6M rows (39K joined in fact), so the pushed plan was judged
costlier and undone, and with it the join order and every physical join.

Why it is equivalent: inner joins and cross products are commutative and associative, and a conjunct
over their inputs gives the same answer at any join that has every input it reads; the projection on
top restores the written columns.
"""

from __future__ import annotations

import itertools

import networkx as nx
from optimizer.cost.spark_joins import spark_join_region
from substrait.proto import JoinRel, Rel

from optimizer.engine import NewRel, Replacement, Rule, RuleContext
from optimizer.expr_utils import conjuncts, has_subquery, is_deterministic, make_and, remap_fields
from optimizer.relations import emit_of, filter_rel, width


def comma_join_order(g: nx.DiGraph, node: int, ctx: RuleContext) -> Replacement | None:
    """Rewrite the region whose top is ``node`` in the order Spark joins it (see the module doc).

    Before (left) and after (right): nothing joins ``a`` and ``b``, so Spark joins ``a`` with ``c`` first:

    >>> from testing.builder import INNER, Builder, before_after, cross, join, read, ref
    >>> b, ab, c = Builder(), cross(read("a", [("a", "i64")]), read("b", [("b", "i64")])), read("c", [("ca", "i64"), ("cb", "i64")])
    >>> on = b.call("and", b.call("equal", ref(0), ref(2)), b.call("equal", ref(1), ref(3)))
    >>> print(before_after(b.plan(join(ab, c, INNER, on), ["a", "b", "ca", "cb"]), RULE))
    Join(inner, ((a#0 = ca#2) AND (b#1 = cb#3))) | Project(emit=[0, 3, 1, 2])
      Cross()                                    |   Join(inner, (b#3 = cb#2))
        Read(a)                                  |     Join(inner, (a#0 = ca#1))
        Read(b)                                  |       Read(a)
      Read(c)                                    |       Read(c)
                                                 |     Read(b)
    """
    region = spark_join_region(g, node, ctx.functions)
    if region is None or any(_unmovable_below(g, n, ctx) for n in region.nodes[1:]):
        return None
    widths = [width(g, leaf) for leaf in region.leaves]
    starts = [0, *itertools.accumulate(widths)][:len(widths)]

    def columns_of(i: int) -> list[int]:
        return list(range(starts[i], starts[i] + widths[i]))

    def leaf(i: int) -> Replacement:
        local = [remap_fields(c, lambda f, s=starts[i]: f - s) for c, m in region.conditions if m == 1 << i]
        if not local:
            return region.leaves[i]
        return NewRel(filter_rel(make_and(local, ctx.registrar)), [region.leaves[i]])

    first = region.order[0]
    tree, columns, joined = leaf(first), columns_of(first), 1 << first
    for i in region.order[1:]:
        both = joined | 1 << i
        columns = columns + columns_of(i)
        position = {col: j for j, col in enumerate(columns)}
        here = [remap_fields(c, position) for c, m in region.conditions
                if m & ~both == 0 and m & joined and m & 1 << i]
        rel = Rel()
        if here:
            rel.join.type = JoinRel.JOIN_TYPE_INNER
            rel.join.expression.CopyFrom(make_and(here, ctx.registrar))
        else:
            rel.cross.SetInParent()
        tree, joined = NewRel(rel, [tree, leaf(i)]), both
    position = {col: j for j, col in enumerate(columns)}
    mapping = [position[col] for col in range(len(columns))]
    top_emit = emit_of(g.nodes[node]["rel"])
    if top_emit is not None:
        mapping = [mapping[j] for j in top_emit]
    rest = region.fixed + [c for c, m in region.conditions if m == 0]
    if rest:
        return NewRel(filter_rel(make_and([remap_fields(c, position) for c in rest], ctx.registrar), mapping), [tree])
    if mapping == list(range(len(columns))):
        return tree
    rel = Rel()
    rel.project.common.emit.output_mapping.extend(mapping)
    return NewRel(rel, [tree])


def _unmovable_below(g: nx.DiGraph, node: int, ctx: RuleContext) -> bool:
    """Does a member below the region's top hold a conjunct that calls a nondeterministic function or
    holds a subquery? Such a conjunct is evaluated where it is written, never moved to the top."""
    data = g.nodes[node]
    body = getattr(data["rel"], data["kind"])
    condition = body.condition if data["kind"] == "filter" else body.expression if data["kind"] == "join" else None
    if condition is None or not condition.ByteSize():
        return False
    return any(has_subquery(c) or not is_deterministic(c, ctx.functions) for c in conjuncts(condition, ctx.functions))


RULE = Rule(name="comma_join_order", phase="normalise", kinds=frozenset({"join", "cross", "filter"}),
            apply=comma_join_order,
            description="a region of inner joins written with a cross product Spark reorders is written in Spark's order")
