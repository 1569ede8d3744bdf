"""Rule ``exists_to_semi_join`` (phase ``normalise``): a correlated ``EXISTS`` in a filter becomes a semi
join, ``NOT EXISTS`` an anti join.

**Matches** a ``FilterRel`` (no emit) over ``X`` one of whose conjuncts is ``EXISTS (S)`` or
``NOT EXISTS (S)`` (``subquery.set_predicate``, ``PREDICATE_OP_EXISTS``; ``not`` around it) where ``S`` is
``Project* (Filter(B, c_1 AND ... AND c_n))``: the projections (if any) compute nothing the rest
needs (no subquery in them), ``B`` reads nothing of the enclosing query and no shared relation, and
each conjunct ``c_i`` either reads only ``B`` or reads ``B`` and ``X`` (outer references one level
out), without a subquery and deterministically; at least one does the latter (the correlation).

**Produces** ``Filter(other conjuncts)`` (none: no filter) over
``JoinRel(LEFT_SEMI | LEFT_ANTI, X, Filter(B, conjuncts reading B only), correlated conjuncts)``, the
correlated conjuncts reading ``X`` as the join's left input and ``B`` as its right.

**Why it is equivalent**: ``EXISTS (S)`` is true for a row ``x`` exactly when some row ``b`` of ``B`` makes
every conjunct true (the projections keep the rows they get, and EXISTS looks only at whether there is
one), which is when the semi join keeps ``x`` with ``Filter(B, ...)`` as its right input; ``NOT EXISTS``
is true exactly when there is none, when the anti join keeps ``x``. Neither is ever NULL, and each
keeps a row of ``X`` at most once, as the filter does. This is Spark's own ``RewritePredicateSubquery``;
in the plan, the subquery's relations and its join become ones the other rules see (Isthmus writes
TPC-H Q4, Q21 and Q22 with EXISTS; DataFusion and DuckDB hand them over as joins).
"""

from __future__ import annotations

import networkx as nx
from substrait.proto import Expression, JoinRel, Rel

from optimizer.engine import NewRel, Replacement, Rule, RuleContext, new_subtree
from optimizer.expr_utils import (
    call_args,
    conjuncts,
    escapes_scope,
    function_name,
    has_subquery,
    is_deterministic,
    make_and,
    outer_to_own,
    reads_scopes,
    reads_shared_relation,
    shift_fields,
)
from optimizer.load.functions import FunctionTable
from optimizer.relations import conjunct_to_join, emit_of, filter_over


def exists_to_semi_join(g: nx.DiGraph, node: int, ctx: RuleContext) -> Replacement | None:
    """The filter's first correlated ``[NOT] EXISTS`` conjunct as a semi (anti) join (see the module doc).

    Before (left) and after (right): orders with a late line item, ``EXISTS (SELECT * FROM li WHERE
    l_o = o AND l_late)``:

    >>> from testing.builder import Builder, before_after, exists, filter_, outer, read, ref
    >>> b = Builder()
    >>> li = read("li", [("l_o", "i64"), ("l_late", "bool")], rows=6e6)
    >>> late = filter_(li, b.call("and", b.call("equal", ref(0), outer(0)), ref(1)))
    >>> plan = b.plan(filter_(read("orders", [("o", "i64")], rows=1.5e6), exists(late)), ["o"])
    >>> print(before_after(plan, RULE))
    Filter(subquery.set_predicate(...)) | Join(left_semi, (l_o#1 = o#0))
      Read(orders)                      |   Read(orders)
                                        |   Filter(l_late#1)
                                        |     Read(li)
    """
    def attempt(c: Expression, x: int, n_x: int) -> tuple[NewRel, None] | None:
        found = _exists(c, ctx.functions)
        split = _split(found[0], ctx.functions) if found is not None else None
        if split is None:
            return None
        base, local, correlated = split
        joined = Rel()
        joined.join.type = JoinRel.JOIN_TYPE_LEFT_ANTI if found[1] else JoinRel.JOIN_TYPE_LEFT_SEMI
        joined.join.expression.CopyFrom(
            make_and([outer_to_own(shift_fields(e, n_x)) for e in correlated], ctx.registrar))
        return NewRel(joined, [x, filter_over(g, new_subtree(base), local, ctx)]), None

    return conjunct_to_join(g, node, ctx, attempt)


RULE = Rule(name="exists_to_semi_join", phase="normalise", kinds=frozenset({"filter"}), apply=exists_to_semi_join,
            description="[NOT] EXISTS (correlated subquery) in a filter -> a semi (anti) join with the subquery")


def _exists(c: Expression, functions: FunctionTable) -> tuple[Rel, bool] | None:
    """``(S, negated)`` if ``c`` is ``EXISTS (S)`` or ``NOT EXISTS (S)``."""
    negated = False
    if function_name(c, functions) == "not":
        args = call_args(c)
        if args is None or len(args) != 1:
            return None
        c, negated = args[0], True
    if c.WhichOneof("rex_type") != "subquery" or c.subquery.WhichOneof("subquery_type") != "set_predicate":
        return None
    predicate = c.subquery.set_predicate
    if predicate.predicate_op != Expression.Subquery.SetPredicate.PREDICATE_OP_EXISTS:
        return None
    return predicate.tuples, negated


def _split(tuples: Rel, functions: FunctionTable) -> tuple[Rel, list[Expression], list[Expression]] | None:
    """``(B, conjuncts reading B only, correlated conjuncts)`` of ``Project*(Filter(B, ...))``, or None."""
    r = tuples
    while r.WhichOneof("rel_type") == "project":
        if any(has_subquery(e) for e in r.project.expressions):
            return None
        r = r.project.input
    if r.WhichOneof("rel_type") != "filter" or emit_of(r) is not None:
        return None
    base = r.filter.input
    if escapes_scope(base) or reads_shared_relation(base):
        return None
    local: list[Expression] = []
    correlated: list[Expression] = []
    for c in conjuncts(r.filter.condition, functions):
        scopes = reads_scopes(c)
        if "outer" not in scopes:
            if escapes_scope(c):
                return None
            local.append(c)
        elif scopes <= {"own", "outer"} and not has_subquery(c) and is_deterministic(c, functions):
            correlated.append(c)
        else:
            return None
    return (base, local, correlated) if correlated else None
