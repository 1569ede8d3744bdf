"""Rule ``extract_join_conditions`` (phase ``normalise``): a filter's join predicates become join conditions.

Matches a ``FilterRel`` whose input is a ``CrossRel`` (not lateral) or an inner ``JoinRel`` — the
shape of comma joins (``FROM a, b WHERE a.x = b.y``: Isthmus writes nested ``CrossRel``\\ s under
one filter, DataFusion's unoptimised plans inner ``JoinRel``\\ s without an expression).

Each conjunct of the filter that reads columns of both sides of a join is moved into that join's
expression; it descends through a tree of such joins (each read by nothing else) to the lowest join
whose two sides it reads, so one application turns ``Filter(a.x = b.y AND b.z = c.w) over
(a x b) x c`` into ``(a JOIN b ON a.x = b.y) JOIN c ON b.z = c.w``. A ``CrossRel`` that receives a
condition becomes an inner ``JoinRel`` (its ``common``, emit included, is kept). Conjuncts that read
one side only (or no column), and conjuncts with a subquery or a nondeterministic call, stay in the
filter; ``push_filters`` moves the single-side ones later. The filter disappears when nothing is
left in it (its emit, if any, moves onto the join).

Why it is equivalent: for an inner join (and a cross product), ``Filter(p, A JOIN_q B)`` equals
``A JOIN_(q AND p) B``: both keep the pairs of rows for which ``q`` and ``p`` are true; NULL counts
as false in both places. A conjunct reading only ``A`` and ``B`` gives the same answer on a pair
wherever it is evaluated, so it may go to the lowest join that pairs ``A`` and ``B`` rows.
"""

from __future__ import annotations

import networkx as nx
from substrait.proto import Expression, JoinRel, Rel

from optimizer.dag import inputs, uses
from optimizer.engine import NewRel, Replacement, Rule, RuleContext
from optimizer.expr_utils import bool_literal, conjuncts, make_and, movable, referenced_fields, shift_fields
from optimizer.relations import apply_emit, emit_of, filter_rel, through_emit, width


def extract_join_conditions(g: nx.DiGraph, node: int, ctx: RuleContext) -> Replacement | None:
    """Move the filter's conjuncts that join two inputs into the joins below (see the module doc).

    Before (left) and after (right): ``a = b`` joins the cross product's inputs, ``b = 1`` stays:

    >>> from testing.builder import Builder, before_after, cross, filter_, lit, read, ref
    >>> b, ab = Builder(), cross(read("a", [("a", "i64")]), read("b", [("b", "i64")]))
    >>> cond = b.call("and", b.call("equal", ref(0), ref(1)), b.call("equal", ref(1), lit(1)))
    >>> print(before_after(b.plan(filter_(ab, cond), ["a", "b"]), RULE))
    Filter(((a#0 = b#1) AND (b#1 = 1))) | Filter((b#1 = 1))
      Cross()                           |   Join(inner, (a#0 = b#1))
        Read(a)                         |     Read(a)
        Read(b)                         |     Read(b)
    """
    rel = g.nodes[node]["rel"]
    top = inputs(g, node)[0]
    if not is_inner_product(g, top) or uses(g, top) > 1:
        return None
    added: dict[int, list[Expression]] = {}
    changed: set[int] = set()

    def descendable(n: int) -> bool:
        return is_inner_product(g, n) and uses(g, n) == 1

    def place(n: int, c: Expression) -> bool:
        """Put ``c`` (over ``n``'s direct output) at the lowest join below ``n`` that it joins."""
        left, right = inputs(g, n)
        n_left = width(g, left)
        refs = referenced_fields(c)
        if all(i < n_left for i in refs):
            side, c = left, c
        elif all(i >= n_left for i in refs):
            side, c = right, shift_fields(c, -n_left)
        else:
            added.setdefault(n, []).append(c)
            changed.add(n)
            return True
        if descendable(side) and place(side, through_emit(g.nodes[side]["rel"], c)):
            changed.add(n)  # a join below changes: this one is rebuilt over it
            return True
        return False

    kept: list[Expression] = []
    for c in conjuncts(rel.filter.condition, ctx.functions):
        if movable(c, ctx.functions) and place(top, through_emit(g.nodes[top]["rel"], c)):
            continue
        kept.append(c)
    if not added:
        return None

    def rebuild(n: int) -> Replacement:
        if n not in changed:
            return n
        conds = join_conjuncts(g.nodes[n]["rel"], ctx.functions) + added.get(n, [])
        new = as_inner_join(g.nodes[n]["rel"], conds, ctx.registrar)
        return NewRel(new, [rebuild(c) for c in inputs(g, n)])

    joined = rebuild(top)
    if kept:
        return NewRel(filter_rel(make_and(kept, ctx.registrar), emit_of(rel)), [joined])
    return apply_emit(g, joined, emit_of(rel))


RULE = Rule(name="extract_join_conditions", phase="normalise", kinds=frozenset({"filter"}), apply=extract_join_conditions,
            description="conjuncts of a filter that read both sides of a cross product / inner join become its condition")


def is_inner_product(g: nx.DiGraph, node: int) -> bool:
    """A ``CrossRel`` that is not lateral, or an inner ``JoinRel``."""
    kind = g.nodes[node]["kind"]
    rel = g.nodes[node]["rel"]
    if kind == "cross":
        return not getattr(rel.cross, "lateral", False)
    return kind == "join" and rel.join.type == JoinRel.JOIN_TYPE_INNER


def join_conjuncts(rel: Rel, functions) -> list[Expression]:
    """The conjuncts of an inner join's expression (none for a cross product or ``ON true``)."""
    if rel.WhichOneof("rel_type") != "join" or not rel.join.HasField("expression"):
        return []
    return [c for c in conjuncts(rel.join.expression, functions) if bool_literal(c) is not True]


def as_inner_join(rel: Rel, conds: list[Expression], registrar) -> Rel:
    """``rel`` (a cross product or an inner join) as an inner ``JoinRel`` ON ``and(conds)``."""
    out = Rel()
    if rel.WhichOneof("rel_type") == "cross":
        out.join.type = JoinRel.JOIN_TYPE_INNER
        out.join.common.CopyFrom(rel.cross.common)
        if rel.cross.HasField("advanced_extension"):
            out.join.advanced_extension.CopyFrom(rel.cross.advanced_extension)
    else:
        out.CopyFrom(rel)
    if conds:
        out.join.expression.CopyFrom(make_and(conds, registrar))
    return out
