"""Rule ``eliminate_outer_joins`` (phase ``normalise``): an outer join whose null-extended rows a predicate
above rejects becomes the join that keeps only the other rows.

**Matches** a ``JoinRel`` of type ``LEFT``, ``RIGHT`` or ``OUTER`` (full) without a post-join filter,
read by one parent, under a chain of relations each read once that pass its rows on one by one --
``FilterRel``, ``ProjectRel`` without window functions, ``SortRel``, ``CrossRel``, either input of an
inner ``JoinRel``, the left input of a ``LEFT``/``LEFT_SEMI``/``LEFT_ANTI`` join, the right input of a
``RIGHT`` join, any input of a ``SetRel`` ``UNION ALL`` (its columns are each input's, by position) --
up to a relation that drops rows where a condition is not true: a ``FilterRel``, an
inner ``JoinRel`` (its expression and post-join filter), a ``LEFT_SEMI`` join (its expression, for the
columns of its left input). One conjunct of that condition must be *null-rejecting* in a column that
comes, unchanged (by field references only), from the outer join's null-supplying side: a comparison
(``equal``, ``not_equal``, ``lt``, ``lte``, ``gt``, ``gte``, ``between``, ``like``) or ``is_not_null``
whose argument is that column, possibly under casts and arithmetic (``add``, ``subtract``, ``multiply``,
``divide``, ``modulus``, ``negate``, ``abs``), all of which are null when their input is.

**Produces** the same join with its type narrowed: ``LEFT`` -> ``INNER`` when the right side's columns are
rejected, ``RIGHT`` -> ``INNER`` for the left side's; ``OUTER`` -> ``LEFT`` (left side's rejected),
``RIGHT`` (right side's) or ``INNER`` (both). Its hint is dropped (it counted the outer join's rows).

**Why it is equivalent**: the rows an outer join adds to the inner join's are those of one side extended
with nulls for every column of the other side. Each relation on the way maps a row to output rows on its
own (no relation on the way looks at other rows: no aggregate, window function or fetch), so a row that
has null in the column keeps null there up to the condition, whose null-rejecting conjunct is then null
or false: the row is dropped. Removing such rows where they are made gives the same rows above the
condition; rows with a non-null value in that column are not touched. Spark applies the same rewrite to
the SQL it is given (``EliminateOuterJoin``).

**Why it matters**: an outer join is a barrier to the join order. DataFusion writes TPC-DS Q93 as
``(store_sales LEFT JOIN store_returns) JOIN reason ON sr_reason_sk = r_reason_sk``: as inner joins the
three can be reordered so that the few returns for one reason are joined to the sales first. And Spark
broadcasts only the side an outer join does not preserve: DataFusion writes TPC-DS Q5's web channel as
``web_sales UNION ALL (web_returns LEFT JOIN web_sales)`` joined to ``web_site`` on a column of the left
join's right side; as a left join it builds on 720,000 ``web_sales`` rows (SF 1), as an inner join on
the 72,000 returns.
"""

from __future__ import annotations

import networkx as nx
from substrait.proto import Expression, JoinRel, SetRel

from optimizer.dag import inputs, parents, uses
from optimizer.engine import NewRel, Replacement, Rule, RuleContext
from optimizer.expr_utils import (
    call_args,
    conjuncts,
    field_index,
    function_name,
    has_window_function,
    join_type_name,
)
from optimizer.relations import emit_of, rel_copy, width

#: Conditions that are null (so not true) when one of their arguments is null.
_NULL_REJECTING = frozenset({"equal", "not_equal", "lt", "lte", "gt", "gte", "between", "like", "is_not_null"})
#: Functions whose result is null when one of their arguments is: a column under them stays rejected.
_NULL_PROPAGATING = frozenset({"add", "subtract", "multiply", "divide", "modulus", "negate", "abs"})

#: (left side rejected, right side rejected) -> the narrowed type, per outer join type.
_NARROWED = {
    "LEFT": {(False, True): "INNER", (True, True): "INNER"},
    "RIGHT": {(True, False): "INNER", (True, True): "INNER"},
    "OUTER": {(True, False): "LEFT", (False, True): "RIGHT", (True, True): "INNER"},
}


def eliminate_outer_joins(g: nx.DiGraph, node: int, ctx: RuleContext) -> Replacement | None:
    """The outer join with its type narrowed where a condition above rejects its null rows (see the
    module doc).

    Before (left) and after (right): ``a LEFT JOIN b ON a.k = b.k`` joined to ``c`` on ``b.v = c.v``:

    >>> from testing.builder import INNER, LEFT, Builder, before_after, join, read, ref
    >>> b, a, c = Builder(), read("a", [("k", "i64")]), read("c", [("v", "i64")])
    >>> outer = join(a, read("b", [("k", "i64"), ("v", "i64")]), LEFT, b.call("equal", ref(0), ref(1)))
    >>> top = join(outer, c, INNER, b.call("equal", ref(2), ref(3)))
    >>> print(before_after(b.plan(top, ["k", "k2", "v", "v2"]), RULE))
    Join(inner, (v#2 = v#3))  | Join(inner, (v#2 = v#3))
      Join(left, (k#0 = k#1)) |   Join(inner, (k#0 = k#1))
        Read(a)               |     Read(a)
        Read(b)               |     Read(b)
      Read(c)                 |   Read(c)
    """
    rel = g.nodes[node]["rel"]
    body = rel.join
    kind = join_type_name(body)
    if kind not in _NARROWED or body.HasField("post_join_filter"):
        return None
    left, right = inputs(g, node)
    n_left = width(g, left)
    direct = range(n_left + width(g, right))
    mapping = emit_of(rel)
    output = list(direct) if mapping is None else mapping
    left_cols = {i for i, c in enumerate(output) if c < n_left}
    right_cols = {i for i, c in enumerate(output) if c >= n_left}
    rejected = (_rejected_above(g, node, left_cols, ctx) if kind != "LEFT" else False,
                _rejected_above(g, node, right_cols, ctx) if kind != "RIGHT" else False)
    narrowed = _NARROWED[kind].get(rejected)
    if narrowed is None:
        return None
    copy = rel_copy(g, node)
    copy.join.type = JoinRel.JoinType.Value(f"JOIN_TYPE_{narrowed}")
    if copy.join.common.HasField("hint"):  # it counted the outer join's rows
        copy.join.common.ClearField("hint")
    return NewRel(copy, [left, right])


def _rejected_above(g: nx.DiGraph, node: int, cols: set[int], ctx: RuleContext) -> bool:
    """Whether a condition above ``node`` drops every row in which one of ``node``'s output columns
    ``cols`` is null, with only relations that pass rows on one by one in between."""
    while cols:
        if uses(g, node) != 1 or not parents(g, node):  # read twice, or a root
            return False
        (parent,) = parents(g, node)
        kind = g.nodes[parent]["kind"]
        prel = g.nodes[parent]["rel"]
        body = getattr(prel, kind)
        slot = inputs(g, parent).index(node)
        conditions: list[Expression] = []
        if kind in ("filter", "sort"):
            space = set(cols)
            if kind == "filter":
                conditions = [body.condition]
        elif kind == "project":
            if any(has_window_function(e, enter_subqueries=False) for e in body.expressions):
                return False  # a window function reads other rows: dropping rows below changes its values
            n_in = width(g, inputs(g, parent)[0])
            space = set(cols) | {n_in + j for j, e in enumerate(body.expressions) if field_index(e) in cols}
        elif kind == "set":
            if body.op != SetRel.SetOp.SET_OP_UNION_ALL:
                return False  # the other set operations compare rows across inputs
            space = set(cols)
        elif kind in ("join", "cross"):
            offset = 0 if slot == 0 else width(g, inputs(g, parent)[0])
            space = {c + offset for c in cols}
            join_kind = join_type_name(body) if kind == "join" else "INNER"
            if join_kind == "INNER":
                conditions = [body.expression, body.post_join_filter] if kind == "join" else []
            elif join_kind == "LEFT_SEMI" and slot == 0:
                conditions = [body.expression]
            elif not ((join_kind in ("LEFT", "LEFT_ANTI") and slot == 0) or (join_kind == "RIGHT" and slot == 1)):
                return False  # this input's rows are not passed on one by one
        else:
            return False
        for condition in conditions:
            if condition.WhichOneof("rex_type") is None:
                continue
            if any(_rejects_null(c, space, ctx) for c in conjuncts(condition, ctx.functions)):
                return True
        mapping = emit_of(prel)
        cols = space if mapping is None else {i for i, m in enumerate(mapping) if m in space}
        node = parent
    return False


def _rejects_null(e: Expression, cols: set[int], ctx: RuleContext) -> bool:
    """``e`` is null or false when one of ``cols`` is null."""
    if function_name(e, ctx.functions) not in _NULL_REJECTING:
        return False
    args = call_args(e)
    return args is not None and any(_null_with(a, cols, ctx) for a in args)


def _null_with(e: Expression, cols: set[int], ctx: RuleContext) -> bool:
    """``e`` is null when one of ``cols`` is null."""
    index = field_index(e)
    if index is not None:
        return index in cols
    if e.WhichOneof("rex_type") == "cast":
        return _null_with(e.cast.input, cols, ctx)
    if function_name(e, ctx.functions) in _NULL_PROPAGATING:
        args = call_args(e)
        return args is not None and any(_null_with(a, cols, ctx) for a in args)
    return False


RULE = Rule(name="eliminate_outer_joins", phase="normalise", kinds=frozenset({"join"}),
            apply=eliminate_outer_joins,
            description="an outer join whose null rows a condition above rejects -> inner (or one-sided)")
