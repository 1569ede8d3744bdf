"""Rule ``push_filters`` (phase ``logical``): predicate pushdown.

Matches a ``FilterRel`` (and an inner/outer/semi ``JoinRel`` for its own ``ON`` conjuncts). The
filter's condition is split into conjuncts; each conjunct sinks as deep as it may go, in one
application, and what cannot go further becomes a filter at the level where it stopped:

========================  =========================================================================
below the conjunct        where it goes
========================  =========================================================================
``FilterRel``             merged into it (one filter with both conditions), then further down
``ProjectRel``            below it, the project's expressions substituted for the columns they
                          define — only deterministic, subquery-free, small expressions; nothing
                          passes a project that computes a window function
``SortRel``,              below it (a filter does not care about order or partitioning)
``ExchangeRel``
inner ``JoinRel``,        one-side conjuncts into that input; two-side conjuncts into the join
``CrossRel``              expression (a cross product becomes an inner join)
``LEFT``/``LEFT_SINGLE``  left-only conjuncts into the left (preserved) input; conjuncts on the
                          right (null-supplying) columns stay above: below they would remove right
                          rows instead of the left rows padded with NULLs
``RIGHT``/...             the mirror image
``OUTER``                 nothing passes
semi/anti/mark joins      into the side whose rows are output (the mark column stays above)
``AggregateRel``          conjuncts on grouping keys only (one grouping set with at least one key),
                          the key expressions substituted; never conjuncts on measures
``SetRel``                into every input (union, intersect and minus alike)
anything else             stays above (``FetchRel``/``TopN`` in particular: filtering before a limit
                          changes which rows are counted)
========================  =========================================================================

A join's own expression is split the same way (also when no filter is above it): a conjunct of
``ON`` that reads one side only goes into that input when that side is not preserved — both sides of
an inner or semi join, the right side of a ``LEFT``/``LEFT_SINGLE``/``LEFT_ANTI`` join, the left of
their mirror images; a preserved side's rows are output even without a match, so its ON conjuncts
stay. The emptied expression of a join is ``true``.

Never moved: a conjunct with a subquery (it is not duplicated either), with a nondeterministic call,
with an expression-based field reference, or reading no column. A relation read by more than one
parent (a shared subtree) is never rewritten: filters stop above it. Every ``emit`` is honoured: the
conjuncts are mapped through the emit of each relation they pass and the filter's own emit stays on
the relation that replaces it.

Why it is equivalent (deterministic conjuncts): a filter commutes with anything that processes rows
independently of the other rows (project, sort, exchange), with an inner join on either input (the
pairs with a failing row are exactly the ones removed), with an outer join on its preserved side only,
with an aggregate on its keys (all rows of a group share the key values: the whole group is kept or
removed), and with a set operation on every input: whether a set operation outputs a row depends only
on how often *equal* rows occur in each input, and a deterministic predicate has the same value on
equal rows, so ``filter(A - B) = filter(A) - filter(B)`` (and likewise for union and intersect).
(This assumes predicates that respect the set operation's equality, as comparisons do.)
"""

from __future__ import annotations

from collections.abc import Callable

import networkx as nx
from optimizer.rules.extract_join_conditions import as_inner_join, join_conjuncts
from substrait.proto import Expression, JoinRel, SetRel

from optimizer.dag import inputs, uses
from optimizer.engine import NewRel, Replacement, Rule, RuleContext
from optimizer.expr_utils import (
    bool_literal,
    conjuncts,
    expressions,
    field_index,
    has_subquery,
    has_unresolvable_refs,
    has_window_function,
    is_deterministic,
    make_and,
    movable,
    referenced_fields,
    shift_fields,
)
from optimizer.relations import apply_emit, emit_of, filter_over, rel_copy, through_emit, width


def push_filters(g: nx.DiGraph, node: int, ctx: RuleContext) -> Replacement | None:
    """Push a filter's conjuncts (or a join's one-side ON conjuncts) down; None if none moves.

    Before (left) and after (right): ``b > 1`` reads the left side only and goes below the left join;
    ``c > b`` reads the null-supplying side and stays above it:

    >>> from testing.builder import LEFT, Builder, before_after, filter_, join, lit, read, ref
    >>> b = Builder()
    >>> lj = join(read("l", [("a", "i64"), ("b", "i64")]), read("r", [("c", "i64")]), LEFT, b.call("gt", ref(0), ref(2)))
    >>> cond = b.call("and", b.call("gt", ref(1), lit(1)), b.call("gt", ref(2), ref(1)))
    >>> print(before_after(b.plan(filter_(lj, cond), ["a", "b", "c"]), RULE))
    Filter(((b#1 > 1) AND (c#2 > b#1))) | Filter((c#2 > b#1))
      Join(left, (a#0 > c#2))           |   Join(left, (a#0 > c#2))
        Read(l)                         |     Filter((b#1 > 1))
        Read(r)                         |       Read(l)
                                        |     Read(r)
    """
    pusher = _Pusher(g, ctx)
    rel = g.nodes[node]["rel"]
    if g.nodes[node]["kind"] == "filter":
        child = inputs(g, node)[0]
        parts = [c for c in conjuncts(rel.filter.condition, ctx.functions) if bool_literal(c) is not True]
        new, moved = pusher.sink(child, parts)
        return apply_emit(g, new, emit_of(rel)) if moved else None
    new, _, moved = pusher._join(node, [])
    return new if moved else None


RULE = Rule(name="push_filters", phase="logical", kinds=frozenset({"filter", "join"}), apply=push_filters,
            description="predicate pushdown through projects, sorts, exchanges, joins, aggregates and set operations")


#: The largest expression (in expression nodes) substituted for a column when a conjunct passes a
#: project or an aggregate: a conjunct on ``a * (1 - b)`` may go below, a long CASE stays above.
MAX_SUBSTITUTED_SIZE = 24

_J = JoinRel
_LEFT_ONLY_OUTPUT = {_J.JOIN_TYPE_LEFT_SEMI, _J.JOIN_TYPE_LEFT_ANTI, _J.JOIN_TYPE_LEFT_MARK}
_RIGHT_ONLY_OUTPUT = {_J.JOIN_TYPE_RIGHT_SEMI, _J.JOIN_TYPE_RIGHT_ANTI, _J.JOIN_TYPE_RIGHT_MARK}
#: Join type -> the inputs a conjunct of a filter ABOVE the join may go into ("both": the expression).
_FROM_ABOVE = {
    _J.JOIN_TYPE_INNER: {"left", "right", "both"},
    _J.JOIN_TYPE_LEFT: {"left"},
    _J.JOIN_TYPE_LEFT_SINGLE: {"left"},
    _J.JOIN_TYPE_RIGHT: {"right"},
    _J.JOIN_TYPE_RIGHT_SINGLE: {"right"},
    _J.JOIN_TYPE_LEFT_SEMI: {"left"},
    _J.JOIN_TYPE_LEFT_ANTI: {"left"},
    _J.JOIN_TYPE_LEFT_MARK: {"left"},
    _J.JOIN_TYPE_RIGHT_SEMI: {"right"},
    _J.JOIN_TYPE_RIGHT_ANTI: {"right"},
    _J.JOIN_TYPE_RIGHT_MARK: {"right"},
}
#: Join type -> the inputs a one-side conjunct of the join's OWN expression may go into: the sides
#: whose rows are not output without a match. Mark joins: none (a NULL comparison makes the mark
#: NULL rather than false, so even a right row that never matches counts).
_FROM_ON = {
    _J.JOIN_TYPE_INNER: {"left", "right"},
    _J.JOIN_TYPE_LEFT_SEMI: {"left", "right"},
    _J.JOIN_TYPE_RIGHT_SEMI: {"left", "right"},
    _J.JOIN_TYPE_LEFT: {"right"},
    _J.JOIN_TYPE_LEFT_SINGLE: {"right"},
    _J.JOIN_TYPE_LEFT_ANTI: {"right"},
    _J.JOIN_TYPE_RIGHT: {"left"},
    _J.JOIN_TYPE_RIGHT_SINGLE: {"left"},
    _J.JOIN_TYPE_RIGHT_ANTI: {"left"},
}
_SET_OPS = {
    SetRel.SET_OP_UNION_ALL,
    SetRel.SET_OP_UNION_DISTINCT,
    SetRel.SET_OP_INTERSECTION_PRIMARY,
    SetRel.SET_OP_INTERSECTION_MULTISET,
    SetRel.SET_OP_INTERSECTION_MULTISET_ALL,
    SetRel.SET_OP_MINUS_PRIMARY,
    SetRel.SET_OP_MINUS_PRIMARY_ALL,
    SetRel.SET_OP_MINUS_MULTISET,
}


def _substitutable(e: Expression, functions) -> bool:
    """May ``e`` be copied into a conjunct in place of the column it defines?"""
    return (
        is_deterministic(e, functions)
        and not has_subquery(e)
        and not has_unresolvable_refs(e)
        and not has_window_function(e, enter_subqueries=True)
        and sum(1 for _ in expressions(e, enter_subqueries=True)) <= MAX_SUBSTITUTED_SIZE
    )


def substitute(e: Expression, definition: Callable[[int], Expression | int | None]) -> Expression | None:
    """``e`` with each column ``i`` it reads replaced by ``definition(i)``.

    ``definition`` gives an expression (copied in), an int (a plain column of the new input) or None
    (the conjunct cannot be rewritten: None is returned). Only for conjuncts without subqueries.
    """
    out = Expression()
    out.CopyFrom(e)
    for x in list(expressions(out, enter_subqueries=True)):
        if x.WhichOneof("rex_type") != "selection":
            continue
        sel = x.selection
        if sel.WhichOneof("root_type") not in (None, "root_reference"):
            continue  # an outer reference: the same record wherever the conjunct goes
        i = sel.direct_reference.struct_field.field
        target = definition(i)
        if target is None:
            return None
        if isinstance(target, int):
            sel.direct_reference.struct_field.field = target
        elif field_index(x) is None:
            return None  # a nested field of a computed column
        else:
            x.CopyFrom(target)
    return out


class _Pusher:
    """Sinks conjuncts into the subtree of one node; builds the replacement."""

    def __init__(self, g: nx.DiGraph, ctx: RuleContext) -> None:
        self.g = g
        self.ctx = ctx
        self.functions = ctx.functions

    # -- entry points ---------------------------------------------------------------------------

    def sink(self, n: int, conjs: list[Expression]) -> tuple[Replacement, bool]:
        """A replacement of ``Filter(and(conjs)) over n``; True if a conjunct went below ``n``."""
        if not conjs:
            return n, False
        go = [c for c in conjs if movable(c, self.functions)]
        handler = getattr(self, "_" + self.g.nodes[n]["kind"], None)
        if not go or handler is None or uses(self.g, n) > 1:
            return filter_over(self.g, n, conjs, self.ctx), False
        new, kept, moved = handler(n, go)
        kept_ids = {id(c) for c in kept}
        rest = [c for c in conjs if id(c) in kept_ids or not movable(c, self.functions)]
        return filter_over(self.g, new, rest, self.ctx), moved

    def _one_input(self, n: int, mapped: list[Expression]) -> Replacement:
        child = inputs(self.g, n)[0]
        new_child, _ = self.sink(child, mapped)
        return NewRel(rel_copy(self.g, n), [new_child])

    def _substituted(self, n: int, go: list[Expression], definition: Callable[[int], Expression | int | None]):
        """The conjuncts of ``go`` that ``definition`` rewrites over ``n``'s input pushed below ``n``, the
        others kept above (a handler's result)."""
        rel = self.g.nodes[n]["rel"]
        pushed, kept = [], []
        for c in go:
            s = substitute(through_emit(rel, c), definition)
            (kept if s is None else pushed).append(c if s is None else s)
        if not pushed:
            return n, go, False
        return self._one_input(n, pushed), kept, True

    # -- handlers: (n, movable conjuncts over n's output) -> (new n, conjuncts kept above, moved) ----

    def _filter(self, n: int, go: list[Expression]):
        rel = self.g.nodes[n]["rel"]
        merged = conjuncts(rel.filter.condition, self.functions) + [through_emit(rel, c) for c in go]
        new, _ = self.sink(inputs(self.g, n)[0], merged)
        return apply_emit(self.g, new, emit_of(rel)), [], True

    def _sort(self, n: int, go: list[Expression]):
        rel = self.g.nodes[n]["rel"]
        return self._one_input(n, [through_emit(rel, c) for c in go]), [], True

    _exchange = _sort

    def _project(self, n: int, go: list[Expression]):
        rel = self.g.nodes[n]["rel"]
        exprs = list(rel.project.expressions)
        # Conservative: a window function inside a subquery also keeps conjuncts above.
        if any(has_window_function(e, enter_subqueries=True) for e in exprs):
            return n, go, False
        n_in = width(self.g, inputs(self.g, n)[0])

        def definition(i: int):
            if i < n_in:
                return i
            e = exprs[i - n_in]
            return e if _substitutable(e, self.functions) else None

        return self._substituted(n, go, definition)

    def _aggregate(self, n: int, go: list[Expression]):
        rel = self.g.nodes[n]["rel"]
        agg = rel.aggregate
        if len(agg.groupings) != 1 or not agg.groupings[0].expression_references:
            return n, go, False
        keys = set(agg.groupings[0].expression_references)

        def definition(i: int):
            if i not in keys:
                return None  # a measure (or a key outside the grouping set)
            e = agg.grouping_expressions[i]
            return e if _substitutable(e, self.functions) else None

        return self._substituted(n, go, definition)

    def _set(self, n: int, go: list[Expression]):
        rel = self.g.nodes[n]["rel"]
        if rel.set.op not in _SET_OPS:
            return n, go, False
        mapped = [through_emit(rel, c) for c in go]
        children = [self.sink(child, list(mapped))[0] for child in inputs(self.g, n)]
        return NewRel(rel_copy(self.g, n), children), [], True

    def _cross(self, n: int, go: list[Expression]):
        return self._join(n, go)

    def _join(self, n: int, go: list[Expression]):
        """Conjuncts from above (``go``) and the join's own one-side ON conjuncts go into the inputs."""
        g = self.g
        rel = g.nodes[n]["rel"]
        is_cross = rel.WhichOneof("rel_type") == "cross"
        jt = _J.JOIN_TYPE_INNER if is_cross else rel.join.type
        left, right = inputs(g, n)
        n_left = width(g, left)
        from_above = _FROM_ABOVE.get(jt, set())
        to_left: list[Expression] = []
        to_right: list[Expression] = []
        on_kept: list[Expression] = []
        on_added: list[Expression] = []
        kept: list[Expression] = []
        for c in go:
            d = through_emit(rel, c)
            refs = referenced_fields(d)
            if jt in _LEFT_ONLY_OUTPUT:
                side = "left" if all(i < n_left for i in refs) else None
            elif jt in _RIGHT_ONLY_OUTPUT:
                side = "right" if all(i < width(g, right) for i in refs) else None
                d = shift_fields(d, n_left)  # as if over left ++ right
            else:
                side = "left" if all(i < n_left for i in refs) else "right" if all(i >= n_left for i in refs) else "both"
            if side is None or side not in from_above:
                kept.append(c)
            elif side == "left":
                to_left.append(d)
            elif side == "right":
                to_right.append(shift_fields(d, -n_left))
            else:
                on_added.append(d)
        from_on = _FROM_ON.get(jt, set())
        for c in join_conjuncts(rel, self.functions):
            refs = referenced_fields(c)
            if movable(c, self.functions) and "left" in from_on and all(i < n_left for i in refs):
                to_left.append(c)
            elif movable(c, self.functions) and "right" in from_on and all(i >= n_left for i in refs):
                to_right.append(shift_fields(c, -n_left))
            else:
                on_kept.append(c)
        if not (to_left or to_right or on_added):
            return n, go, False
        new_left, _ = self.sink(left, to_left)
        new_right, _ = self.sink(right, to_right)
        conds = on_kept + on_added
        if is_cross and not conds:
            new = rel_copy(g, n)
        elif is_cross or jt == _J.JOIN_TYPE_INNER:
            new = as_inner_join(rel, conds, self.ctx.registrar)
            if not conds and rel.join.HasField("expression"):
                new.join.expression.literal.boolean = True
        else:
            new = rel_copy(g, n)
            new.join.expression.CopyFrom(make_and(conds, self.ctx.registrar))
        return NewRel(new, [new_left, new_right]), kept, True
