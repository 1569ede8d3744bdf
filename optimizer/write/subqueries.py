"""Scalar subqueries as joins, for a target that reads no subquery expression (``encoding.scalar_subqueries
= "left_join"``: DuckDB 1.1.3, "INTERNAL Error: Unsupported expression type 12").

**Matches** a ``FilterRel`` or ``ProjectRel`` whose own expressions hold a scalar subquery ``S`` that reads
nothing outside itself (no outer reference) and gives at most one row by its shape: an aggregate without
grouping keys, under projects, filters, sorts and fetches only. The optimizer decorrelates correlated
subqueries where it can; what the producers leave is mostly of this kind (TPC-H Q11's
``HAVING sum(...) > (SELECT sum(...) * 0.0001 ...)``, Q15's ``max(total_revenue)``, Q22's average balance).

**Produces** the relation over ``JoinRel(LEFT, input, S, true)`` (one such join per subquery, in the order
they appear), each subquery replaced by a reference to the column its join appends; an emit keeps the
relation's output what it was.

**Why it is equivalent**: ``S`` is evaluated once, whatever the row (it reads nothing of it). Joined on
``true``, each input row meets ``S``'s one row and carries its value; when ``S`` has no row (a filter
above its aggregate rejected it) the left join carries NULL, the value the spec gives a scalar subquery
without rows. A shape that could give several rows (where the subquery would be an error) is not
rewritten: the target then refuses the subquery as before.
"""

from __future__ import annotations

from substrait.proto import Expression, JoinRel, Plan, Rel

from optimizer.expr_utils import (
    escapes_scope,
    field,
    function_name,
    has_subquery,
    is_deterministic,
    walk,
)
from optimizer.load.functions import FunctionTable
from optimizer.write.walk import LazySchemas, rels_of_kind

_PASS_THROUGH = ("project", "filter", "sort", "fetch")


def _at_most_one_row(rel: Rel) -> bool:
    """Is ``rel`` a global aggregate (no grouping keys) under row-preserving or row-removing relations?"""
    kind = rel.WhichOneof("rel_type")
    while kind in _PASS_THROUGH:
        rel = getattr(rel, kind).input
        kind = rel.WhichOneof("rel_type")
    if kind != "aggregate":
        return False
    agg = rel.aggregate
    return (not agg.grouping_expressions and len(agg.groupings) <= 1
            and all(not g.expression_references for g in agg.groupings))


def _scalar_subqueries(rel: Rel) -> list[Expression]:
    """The uncorrelated single-row scalar subquery expressions among ``rel``'s own expressions (not in its
    input, not inside another subquery), in the order met."""
    kind = rel.WhichOneof("rel_type")
    body = getattr(rel, kind)
    roots = [body.condition] if kind == "filter" else list(body.expressions)
    found: list[Expression] = []
    for root in roots:
        for m in walk(root, enter_subqueries=False):
            if (m.DESCRIPTOR.full_name == "substrait.Expression" and m.WhichOneof("rex_type") == "subquery"
                    and m.subquery.WhichOneof("subquery_type") == "scalar"
                    and not escapes_scope(m.subquery.scalar.input)
                    and _at_most_one_row(m.subquery.scalar.input)):
                found.append(m)
    return found


def scalar_subqueries_as_left_joins(plan: Plan, functions: FunctionTable) -> int:
    """Rewrite, in place, every filter and project holding subqueries as the module docstring says; the
    number of subqueries turned into joins. ``functions``: the plan's table."""
    schemas = LazySchemas(plan, functions)
    changed = 0
    for rel, path in rels_of_kind(plan, "filter", "project"):
        found = _scalar_subqueries(rel)
        if not found:
            continue
        kind = rel.WhichOneof("rel_type")
        body = getattr(rel, kind)
        n_in = schemas.width(f"{path}.{kind}.input")
        current = Rel()
        current.CopyFrom(body.input)
        width = n_in
        for e in found:
            join = Rel()
            join.join.type = JoinRel.JOIN_TYPE_LEFT
            join.join.left.CopyFrom(current)
            join.join.right.CopyFrom(e.subquery.scalar.input)
            join.join.expression.literal.boolean = True
            current = join
            e.CopyFrom(field(width))
            width += 1
        body.input.CopyFrom(current)
        emit = list(body.common.emit.output_mapping) if body.common.WhichOneof("emit_kind") == "emit" else None
        added = width - n_in
        if kind == "filter":
            mapping = emit if emit is not None else list(range(n_in))
        else:  # a project outputs its input's columns, then its expressions: the new columns sit between
            n_out = n_in + len(body.expressions)
            mapping = [i if i < n_in else i + added for i in (emit if emit is not None else range(n_out))]
        del body.common.emit.output_mapping[:]
        body.common.emit.output_mapping.extend(mapping)
        changed += len(found)
    return changed


def _in_predicate(c: Expression, functions: FunctionTable) -> tuple[bool, Expression] | None:
    """``(negated, the IN predicate)`` when conjunct ``c`` is ``x IN (S)`` or ``NOT (x IN (S))`` of one needle
    and a subquery ``S`` that reads nothing outside itself."""
    negated = False
    if function_name(c, functions) == "not" and len(c.scalar_function.arguments) == 1:
        c, negated = c.scalar_function.arguments[0].value, True
    if c.WhichOneof("rex_type") != "subquery" or c.subquery.WhichOneof("subquery_type") != "in_predicate":
        return None
    pred = c.subquery.in_predicate
    if (len(pred.needles) != 1 or escapes_scope(pred.haystack) or has_subquery(pred.needles[0])
            or not is_deterministic(pred.needles[0], functions)):  # it is written twice for NOT IN
        return None
    return negated, c


def in_predicates_as_joins(plan: Plan, functions: FunctionTable) -> int:
    """Every conjunct ``x IN (S)`` of a filter becomes a ``LEFT_SEMI`` join to ``S`` on ``x = s``, and every
    ``NOT (x IN (S))`` a ``LEFT_ANTI`` join on ``x = s OR x IS NULL OR s IS NULL``, below a filter of the
    other conjuncts (with the filter's emit), for a target that reads no subquery (DuckDB 1.1.3; Isthmus'
    TPC-H Q16's ``NOT IN``). ``S`` must read nothing of the enclosing query; ``x`` is one expression.

    Why it is equivalent: a filter keeps a row where its condition is true. ``x IN (S)`` is true exactly
    when some ``s`` equals ``x``: the semi join's rows. ``NOT (x IN (S))`` is true exactly when ``S`` is
    empty, or ``x`` is not NULL, no ``s`` is NULL and none equals ``x`` (otherwise it is false or NULL):
    the rows the anti join keeps, as no ``s`` then meets its condition. In place; the number rewritten."""
    from optimizer.expr_utils import FunctionRegistrar, boolean_type, conjuncts, make_and

    registrar = FunctionRegistrar(plan, functions)
    schemas = LazySchemas(plan, functions)
    changed = 0
    for rel, path in rels_of_kind(plan, "filter"):
        found = [(c, _in_predicate(c, functions)) for c in conjuncts(rel.filter.condition, functions)]
        if not any(f is not None for _, f in found):
            continue
        n_in = schemas.width(f"{path}.filter.input")
        current = Rel()
        current.CopyFrom(rel.filter.input)
        rest = []
        for c, match in found:
            if match is None:
                rest.append(c)
                continue
            negated, e = match
            needle, haystack = e.subquery.in_predicate.needles[0], e.subquery.in_predicate.haystack
            equal = registrar.call("equal", "functions_comparison", [needle, field(n_in)], boolean_type(),
                                   "equal:any_any")
            join = Rel()
            join.join.left.CopyFrom(current)
            join.join.right.CopyFrom(haystack)
            if negated:
                join.join.type = JoinRel.JOIN_TYPE_LEFT_ANTI
                nulls = [registrar.call("is_null", "functions_comparison", [x], boolean_type(nullable=False),
                                        "is_null:any") for x in (needle, field(n_in))]
                join.join.expression.CopyFrom(registrar.call("or", "functions_boolean", [equal, *nulls],
                                                             boolean_type(), "or:bool"))
            else:
                join.join.type = JoinRel.JOIN_TYPE_LEFT_SEMI
                join.join.expression.CopyFrom(equal)
            current = join
            changed += 1
        rel.filter.input.CopyFrom(current)
        if rest:
            rel.filter.condition.CopyFrom(make_and(rest, registrar))
        else:
            rel.filter.condition.CopyFrom(Expression(literal=Expression.Literal(boolean=True)))
    return changed
