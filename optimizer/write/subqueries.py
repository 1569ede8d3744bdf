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

from optimizer.expr_utils import escapes_scope, field, rels_with_paths, walk
from optimizer.load.functions import FunctionTable

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
    from optimizer.schema import plan_schemas

    schemas = None
    changed = 0
    for rel, path in list(rels_with_paths(plan)):  # children first: a rewrite keeps its ancestors' paths
        kind = rel.WhichOneof("rel_type")
        if kind not in ("filter", "project"):
            continue
        found = _scalar_subqueries(rel)
        if not found:
            continue
        if schemas is None:
            schemas = plan_schemas(plan, functions)
        body = getattr(rel, kind)
        n_in = len(schemas[f"{path}.{kind}.input"].types)
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
