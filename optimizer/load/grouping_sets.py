"""Producers' conventions for aggregates with several grouping sets, read into the spec's numbering.

Substrait: an ``AggregateRel`` outputs its grouping expressions, then its measures, then -- with more than
one grouping set -- an ``i32`` column holding the zero-based index of the grouping set that made the row.
Some producers number that output their own way. :func:`conform_grouping_sets` (called by the loader on every
plan) rewrites the aggregates of a plan whose ``plan.version.producer`` has a known convention so that the
aggregate says what the spec says, with a ``ProjectRel`` above it that gives the parent relations the
columns the producer meant, in the producer's order. Everything downstream (schema, optimizer, backend)
then reads spec semantics. The conventions are tabulated in docs/semantics.md.

DataFusion (``producer == "datafusion"``), read from the Substrait version its plan declares:

* Substrait minor 58 .. 85 (DataFusion 43, apache/datafusion#12571, up to 55 at least; 55 writes minor 85):
  ``grouping_expressions`` lists each set's expressions one set after the other (an expression in three
  sets is written three times; references run 0, 1, 2, ...), and the aggregate's output is the *distinct*
  expressions in order of first appearance, then DataFusion's ``__grouping_id``, then the measures. The
  grouping id is a bitmask with bit ``n-1-i`` set when distinct expression ``i`` (of ``n``) is not in the
  row's set, an unsigned integer of 8, 16, 32 or 64 bits (``n`` <= 8, 16, 32, more), which parents read
  with ``bitwise_and`` / ``shift_right`` for SQL's ``grouping()``. The rewrite keeps the distinct
  expressions, remaps the references, and puts above the aggregate a project that computes the bitmask
  from the set index (a ``switch_expression``) and emits ``[keys, grouping id, measures]``.
* Substrait minor < 58 (DataFusion 31 .. 42): the same repeated expressions, and an output of the distinct
  expressions then the measures, without any grouping column: the rewrite dedupes and emits
  ``[keys, measures]``.

Plans of other producers, and DataFusion plans that declare a later Substrait version, are read as the spec
says. DuckDB 1.1.3 writes ``ROLLUP`` as one grouping set (the full one): a producer bug the plan carries;
its plan means what it says, and a DuckDB ROLLUP plan gives only the finest level's rows.
"""

from __future__ import annotations

from substrait.proto import Expression, Plan, Rel

from optimizer.errors import PlanError
from optimizer.expr_utils import field, rels_with_paths

#: ``(producer, lowest Substrait minor, highest Substrait minor, convention)``; compared with
#: ``plan.version`` (major 0). ``datafusion-grouping-id``: ``[distinct keys, __grouping_id, measures]``;
#: ``datafusion-no-id``: ``[distinct keys, measures]``.
GROUPING_SET_CONVENTIONS: tuple[tuple[str, int, int, str], ...] = (
    ("datafusion", 58, 85, "datafusion-grouping-id"),
    ("datafusion", 0, 57, "datafusion-no-id"),
    # A plan this tool wrote for the datafusion target (optimizer.write), whatever version it declares.
    ("substrait-optimizer for datafusion", 0, 2**32 - 1, "datafusion-grouping-id"),
)

#: DataFusion's (unsigned) integer variation of its plans' types: the grouping id is unsigned.
_DATAFUSION_UNSIGNED = 1


def grouping_set_convention(plan: Plan) -> str | None:
    """The producer convention for multi-set aggregates that applies to ``plan``, else None (the spec)."""
    producer = plan.version.producer.strip().lower()
    if plan.version.major_number != 0:
        return None
    minor = plan.version.minor_number
    for name, low, high, convention in GROUPING_SET_CONVENTIONS:
        if producer == name and low <= minor <= high:
            return convention
    return None


def _id_width(n_keys: int) -> int:
    for width in (8, 16, 32):
        if n_keys <= width:
            return width
    return 64


def _int_literal(value: int, width: int, variation: int) -> Expression.Literal:
    """``value`` as a required integer literal of ``width`` bits (two's complement when it only fits
    unsigned: the bit pattern of DataFusion's unsigned grouping id)."""
    if value >= 1 << (width - 1):
        value -= 1 << width
    lit = Expression.Literal(nullable=False, type_variation_reference=variation)
    setattr(lit, {8: "i8", 16: "i16", 32: "i32", 64: "i64"}[width], value)
    return lit


def _conform(rel: Rel, path: str, convention: str) -> bool:
    agg = rel.aggregate
    if len(agg.groupings) < 2:
        return False
    n_exprs = len(agg.grouping_expressions)
    distinct: list[Expression] = []
    keys: dict[bytes, int] = {}
    sets: list[list[int]] = []
    for g, grouping in enumerate(agg.groupings):
        refs: list[int] = []
        for j, r in enumerate(grouping.expression_references):
            if r >= n_exprs:
                raise PlanError(
                    f"grouping expression {r} of {n_exprs}", f"{path}.aggregate.groupings[{g}].expression_references[{j}]"
                )
            expr = agg.grouping_expressions[r]
            key = expr.SerializeToString(deterministic=True)
            if key not in keys:
                keys[key] = len(distinct)
                distinct.append(expr)
            if keys[key] not in refs:
                refs.append(keys[key])
        sets.append(refs)
    n_keys, n_measures, n_sets = len(distinct), len(agg.measures), len(sets)
    old_emit = list(agg.common.emit.output_mapping) if agg.common.WhichOneof("emit_kind") == "emit" else None
    new_exprs = [Expression() for _ in distinct]
    for target, expr in zip(new_exprs, distinct, strict=True):
        target.CopyFrom(expr)
    del agg.grouping_expressions[:]
    agg.grouping_expressions.extend(new_exprs)
    for grouping, refs in zip(agg.groupings, sets, strict=True):
        del grouping.expression_references[:]
        grouping.expression_references.extend(refs)
    keys_out = list(range(n_keys))
    measures_out = list(range(n_keys, n_keys + n_measures))
    if convention == "datafusion-no-id":
        meant = keys_out + measures_out  # the producer's numbering -> spec output columns
        emit = [meant[i] for i in old_emit] if old_emit is not None else meant
        del agg.common.emit.output_mapping[:]
        agg.common.emit.output_mapping.extend(emit)
        return True
    # datafusion-grouping-id: a project above computes the grouping id from the set index.
    width = _id_width(n_keys)
    switch = Expression()
    sw = switch.switch_expression
    sw.match.CopyFrom(field(n_keys + n_measures))
    for index, refs in enumerate(sets):
        mask = sum(1 << (n_keys - 1 - i) for i in range(n_keys) if i not in refs)
        clause = sw.ifs.add()
        getattr(clause, "if").CopyFrom(Expression.Literal(i32=index, nullable=False))
        clause.then.literal.CopyFrom(_int_literal(mask, width, _DATAFUSION_UNSIGNED))
    last = sw.ifs[n_sets - 1].then
    getattr(sw, "else").CopyFrom(last)
    del sw.ifs[n_sets - 1]
    if old_emit is not None:
        agg.common.ClearField("emit_kind")
    meant = keys_out + [n_keys + n_measures + 1] + measures_out
    emit = [meant[i] for i in old_emit] if old_emit is not None else meant
    project = Rel()
    project.project.input.CopyFrom(rel)
    project.project.expressions.append(switch)
    project.project.common.emit.output_mapping.extend(emit)
    rel.CopyFrom(project)
    return True


def conform_grouping_sets(plan: Plan) -> int:
    """Rewrite, in place, the multi-set aggregates of a plan whose producer has a known convention (see the
    module docstring) into the spec's numbering; return how many were rewritten."""
    convention = grouping_set_convention(plan)
    if convention is None:
        return 0
    changed = 0
    aggregates = [(rel, path) for rel, path in rels_with_paths(plan)
                  if rel.WhichOneof("rel_type") == "aggregate"]
    for rel, path in aggregates:
        changed += _conform(rel, path, convention)
    return changed
