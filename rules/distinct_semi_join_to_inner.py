"""Rule ``distinct_semi_join_to_inner`` (phase ``join_order``): under a ``DISTINCT``, a semi join becomes an
inner join that the join order can move.

**Matches** an ``AggregateRel`` with grouping expressions and no measures (a ``DISTINCT``), whose input
reaches, through relations read once that keep the set of distinct rows they are given (``ProjectRel``
without window functions, ``FilterRel``, either input of an inner ``JoinRel``, a ``CrossRel`` or of a
semi join being converted), at least one ``JoinRel`` of type ``LEFT_SEMI``. Every expression on the
way (groupings, projections, conditions) is deterministic and has no subquery.

**Produces** the same relations with each such semi join ``L ⋉ R`` replaced by
``Project(emit: the semi join's output)`` over ``JoinRel(INNER, L, R)`` with the same condition and post-join
filter.

**Why it is equivalent**: the inner join projected on ``L``'s columns outputs each row of ``L`` that the
semi join keeps, once per matching row of ``R`` instead of once: the same rows, more copies. Each relation
on the way maps inputs with the same distinct rows to outputs with the same distinct rows (a projection
and a filter row by row, deterministically; a join's output row exists when its two input rows do), and
an aggregate without measures outputs exactly the distinct grouping values of its input. So the copies
are removed where the ``DISTINCT`` was going to remove duplicates anyway.

**Why it pays**: Spark builds only the right input of a left semi join. When that input is large (TPC-DS
Q37 and Q82 as DataFusion writes them: ``item ⋉ catalog_sales``), it is broadcast or both sides are
shuffled, while as an inner join it joins the region of inner joins that ``join_order`` orders, where the
small side can be built and the large one streamed, as Spark's own plan of the SQL does. The phase is
judged with the physical phase after it by the cost model, so the rewrite stays only where the plan it
leads to is estimated cheaper.
"""

from __future__ import annotations

import networkx as nx
from substrait.proto import JoinRel, Rel

from optimizer.dag import inputs, uses
from optimizer.engine import NewRel, Replacement, Rule, RuleContext
from optimizer.expr_utils import has_subquery, has_window_function, is_deterministic
from optimizer.relations import emit_of, rel_copy, width


def distinct_semi_join_to_inner(g: nx.DiGraph, node: int, ctx: RuleContext) -> Replacement | None:
    """The aggregate's input with its semi joins as inner joins (see the module doc).

    Before (left) and after (right): ``SELECT DISTINCT k FROM small WHERE k IN (SELECT k FROM big)``,
    written as a semi join:

    >>> from testing.builder import SEMI, Builder, aggregate, before_after, join, read, ref
    >>> b, small, big = Builder(), read("small", [("k", "i64")], rows=10), read("big", [("j", "i64")], rows=1e7)
    >>> semi = join(small, big, SEMI, b.call("equal", ref(0), ref(1)))
    >>> print(before_after(b.plan(aggregate(semi, [0]), ["k"]), RULE))
    Aggregate(groups=[(k#0)], measures=[]) | Aggregate(groups=[(k#0)], measures=[])
      Join(left_semi, (k#0 = j#1))         |   Project(emit=[0])
        Read(small)                        |     Join(inner, (k#0 = j#1))
        Read(big)                          |       Read(small)
                                           |       Read(big)
    """
    agg = g.nodes[node]["rel"].aggregate
    if (agg.measures or not agg.grouping_expressions or agg.HasField("advanced_extension")
            or not all(_plain(e, ctx) for e in agg.grouping_expressions)):
        return None
    (child,) = inputs(g, node)
    new_child = _rewrite(g, child, ctx)
    if new_child == child:
        return None
    return NewRel(rel_copy(g, node), [new_child])


def _plain(e, ctx: RuleContext) -> bool:
    """Deterministic, without a subquery: evaluated once per row, to the same value for equal rows."""
    return not has_subquery(e) and is_deterministic(e, ctx.functions)


def _rewrite(g: nx.DiGraph, node: int, ctx: RuleContext) -> Replacement:
    """``node`` with the semi joins under it converted where the path to them keeps distinct rows (the
    node itself when there is none)."""
    data = g.nodes[node]
    if uses(g, node) != 1:  # another reader needs the relation as it is
        return node
    kind, rel = data["kind"], data["rel"]
    body = getattr(rel, kind)
    if body.HasField("advanced_extension"):
        return node
    follow: list[int]  # the input slots whose distinct rows alone decide the output's
    if kind == "project":
        if any(has_window_function(e, enter_subqueries=True) or not _plain(e, ctx) for e in body.expressions):
            return node
        follow = [0]
    elif kind == "filter":
        if not _plain(body.condition, ctx):
            return node
        follow = [0]
    elif kind == "cross":
        follow = [0, 1]
    elif kind == "join" and body.type in (JoinRel.JOIN_TYPE_INNER, JoinRel.JOIN_TYPE_LEFT_SEMI):
        if not all(_plain(e, ctx) for e in (body.expression, body.post_join_filter)):
            return node
        follow = [0, 1]  # a semi join's right input too: it becomes an input of an inner join
    else:
        return node
    old_inputs = inputs(g, node)
    new_inputs: list[Replacement] = [(_rewrite(g, c, ctx) if slot in follow else c)
                                     for slot, c in enumerate(old_inputs)]
    if kind == "join" and body.type == JoinRel.JOIN_TYPE_LEFT_SEMI:
        inner = rel_copy(g, node)
        inner.join.type = JoinRel.JOIN_TYPE_INNER
        inner.join.ClearField("common")  # its emit goes to the projection; its hint counted the semi join's rows
        keep = emit_of(rel)
        project = Rel()
        project.project.common.emit.output_mapping.extend(
            keep if keep is not None else range(width(g, old_inputs[0])))
        return NewRel(project, [NewRel(inner, new_inputs)])
    if new_inputs == old_inputs:
        return node
    copy = rel_copy(g, node)
    if getattr(copy, kind).common.HasField("hint"):  # a producer's row count: the copies are more rows now
        getattr(copy, kind).common.ClearField("hint")
    return NewRel(copy, new_inputs)


RULE = Rule(name="distinct_semi_join_to_inner", phase="join_order", kinds=frozenset({"aggregate"}),
            apply=distinct_semi_join_to_inner,
            description="a semi join under a DISTINCT -> an inner join the join order can move")
