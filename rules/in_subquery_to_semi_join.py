"""Rule ``in_subquery_to_semi_join`` (phase ``normalise``): ``x IN (subquery)`` in a filter becomes a
semi join with the subquery.

**Matches** a ``FilterRel`` (no emit) over ``X`` one of whose conjuncts is an ``IN`` predicate
(``subquery.in_predicate``: needles ``x_1 .. x_n`` reading ``X`` only, no subquery in them) whose
subquery reads nothing of the enclosing query and no shared relation (``ReferenceRel``).

**Produces** ``Filter(other conjuncts)`` (none: no filter) over
``JoinRel(LEFT_SEMI, X, S, x_1 = s_1 AND ... AND x_n = s_n)``, with ``S`` the subquery's relation, now a
relation of the plan, and ``s_i`` its columns.

**Why it is equivalent**: a filter keeps a row only when every conjunct is true; ``x IN (S)`` is true
exactly when some row of ``S`` equals ``x`` column by column (false or NULL otherwise, and both drop
the row), which is when the semi join keeps the row: ``equal`` is true on the same pairs and never on
NULL. A semi join outputs each row of ``X`` at most once, as the filter does. ``S`` reads nothing of
``X``, so it is the same relation for every row. This is Spark's own ``RewritePredicateSubquery``;
done in the plan, the subquery's relations become relations of the DAG that the other rules see (a
correlated scalar subquery inside it, Isthmus' TPC-H Q20, can then be decorrelated).
"""

from __future__ import annotations

import networkx as nx
from substrait.proto import Expression, JoinRel, Rel

from optimizer.engine import NewRel, Replacement, Rule, RuleContext, new_subtree
from optimizer.expr_utils import (
    boolean_type,
    escapes_scope,
    field,
    has_subquery,
    is_deterministic,
    make_and,
    reads_shared_relation,
)
from optimizer.relations import conjunct_to_join


def in_subquery_to_semi_join(g: nx.DiGraph, node: int, ctx: RuleContext) -> Replacement | None:
    """The filter's first uncorrelated ``IN (subquery)`` conjunct as a semi join (see the module doc).

    Before (left) and after (right):

    >>> from testing.builder import Builder, before_after, filter_, in_subquery, read, ref
    >>> b = Builder()
    >>> s = read("s", [("k", "i64")], rows=100)
    >>> plan = b.plan(filter_(read("t", [("x", "i64")], rows=1e4), in_subquery([ref(0)], s)), ["x"])
    >>> print(before_after(plan, RULE))
    Filter(subquery.in_predicate(...)) | Join(left_semi, (x#0 = k#1))
      Read(t)                          |   Read(t)
                                       |   Read(s)
    """
    def attempt(c: Expression, x: int, n_x: int) -> tuple[NewRel, None] | None:
        if c.WhichOneof("rex_type") != "subquery" or c.subquery.WhichOneof("subquery_type") != "in_predicate":
            return None
        needles = list(c.subquery.in_predicate.needles)
        haystack = c.subquery.in_predicate.haystack
        if (not needles or any(has_subquery(n) or not is_deterministic(n, ctx.functions) for n in needles)
                or escapes_scope(haystack) or any(escapes_scope(n) for n in needles)
                or reads_shared_relation(haystack)):
            return None
        equalities = [ctx.registrar.call("equal", "functions_comparison", [n, field(n_x + k)], boolean_type(),
                                         "equal:any_any") for k, n in enumerate(needles)]
        semi = Rel()
        semi.join.type = JoinRel.JOIN_TYPE_LEFT_SEMI
        semi.join.expression.CopyFrom(make_and(equalities, ctx.registrar))
        return NewRel(semi, [x, new_subtree(haystack)]), None

    return conjunct_to_join(g, node, ctx, attempt)


RULE = Rule(name="in_subquery_to_semi_join", phase="normalise", kinds=frozenset({"filter"}),
            apply=in_subquery_to_semi_join,
            description="x IN (uncorrelated subquery) in a filter -> a semi join with the subquery")
