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
* SQL's ``grouping(x, ...)``, which DataFusion's unoptimized logical plans keep as an aggregate measure
  (a function ``grouping`` of no extension: no Substrait function), is the bitmask of its arguments not in
  the row's set (bit ``k-1-j`` for argument ``j`` of ``k``), an ``i32``: the measure is dropped and the
  project above computes it with a switch on the set index, like the grouping id (an argument that is
  not a grouping expression is a PlanError naming it).
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


def _set_switch(match: int, sets: list[list[int]], literal_of) -> Expression:
    """A switch on the grouping-set index (column ``match``) giving ``literal_of(refs)`` for each set."""
    switch = Expression()
    sw = switch.switch_expression
    sw.match.CopyFrom(field(match))
    for index, refs in enumerate(sets[:-1]):
        clause = sw.ifs.add()
        getattr(clause, "if").CopyFrom(Expression.Literal(i32=index, nullable=False))
        clause.then.literal.CopyFrom(literal_of(refs))
    getattr(sw, "else").literal.CopyFrom(literal_of(sets[-1]))
    return switch


def _grouping_calls(agg, path: str, keys: dict[bytes, int], grouping_anchors: frozenset[int]
                    ) -> dict[int, list[int]]:
    """DataFusion's ``grouping(x, ...)`` measures: {measure index: the distinct key each argument is}."""
    calls: dict[int, list[int]] = {}
    for m, measure in enumerate(agg.measures):
        if measure.measure.function_reference not in grouping_anchors:
            continue
        args = []
        for a, arg in enumerate(measure.measure.arguments):
            key = arg.value.SerializeToString(deterministic=True) if arg.HasField("value") else None
            if key not in keys:
                raise PlanError("grouping() of an expression that is not a grouping expression of the aggregate",
                                f"{path}.aggregate.measures[{m}].measure.arguments[{a}]")
            args.append(keys[key])
        if not args:
            raise PlanError("grouping() without arguments", f"{path}.aggregate.measures[{m}].measure")
        calls[m] = args
    return calls


def _conform(rel: Rel, path: str, convention: str, grouping_anchors: frozenset[int] = frozenset()) -> bool:
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
    # DataFusion's grouping(x, ...) is not a Substrait function: it is the bitmask of its arguments not
    # in the row's set (bit k-1-j for argument j of k), an i32, so it becomes a switch on the set index.
    calls = _grouping_calls(agg, path, keys, grouping_anchors)
    kept = [m for m in range(len(agg.measures)) if m not in calls]
    if calls:
        measures = [type(agg.measures[0])() for _ in kept]
        for target, m in zip(measures, kept, strict=True):
            target.CopyFrom(agg.measures[m])
        del agg.measures[:]
        agg.measures.extend(measures)
    n_keys, n_measures = len(distinct), len(kept)
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
    set_index = n_keys + n_measures
    expressions: list[Expression] = []
    if convention == "datafusion-grouping-id":
        width = _id_width(n_keys)
        expressions.append(_set_switch(set_index, sets, lambda refs: _int_literal(
            sum(1 << (n_keys - 1 - i) for i in range(n_keys) if i not in refs), width, _DATAFUSION_UNSIGNED)))
    first_call = set_index + 1 + len(expressions)
    for args in calls.values():
        expressions.append(_set_switch(set_index, sets, lambda refs, args=args: Expression.Literal(
            i32=sum(1 << (len(args) - 1 - j) for j, a in enumerate(args) if a not in refs), nullable=False)))
    # Each measure as the producer numbered it: a kept one is an aggregate output, a grouping() one the
    # project's expression.
    out_of = {m: n_keys + k for k, m in enumerate(kept)} | {m: first_call + k for k, m in enumerate(calls)}
    measures_out = [out_of[m] for m in range(len(out_of))]
    meant = keys_out + ([set_index + 1] if convention == "datafusion-grouping-id" else []) + measures_out
    emit = [meant[i] for i in old_emit] if old_emit is not None else meant
    if not expressions:  # datafusion-no-id without grouping(): the aggregate's emit says it
        del agg.common.emit.output_mapping[:]
        agg.common.emit.output_mapping.extend(emit)
        return True
    if old_emit is not None:
        agg.common.ClearField("emit_kind")
    project = Rel()
    project.project.input.CopyFrom(rel)
    project.project.expressions.extend(expressions)
    project.project.common.emit.output_mapping.extend(emit)
    rel.CopyFrom(project)
    return True


def conform_grouping_sets(plan: Plan) -> int:
    """Rewrite, in place, the multi-set aggregates of a plan whose producer has a known convention (see the
    module docstring) into the spec's numbering; return how many were rewritten."""
    changed = _references_once(plan)
    convention = grouping_set_convention(plan)
    if convention is None:
        return changed
    aggregates = [(rel, path) for rel, path in rels_with_paths(plan)
                  if rel.WhichOneof("rel_type") == "aggregate"]
    grouping_anchors = frozenset(
        ext.extension_function.function_anchor for ext in plan.extensions
        if ext.WhichOneof("mapping_type") == "extension_function"
        and ext.extension_function.name.split(":", 1)[0].lower() == "grouping")
    for rel, path in aggregates:
        changed += _conform(rel, path, convention, grouping_anchors)
    return changed


def _references_once(plan: Plan) -> int:
    """Each grouping set's references to one grouping expression made one, in place; the number of sets
    changed. A set folds records with the same values of its expressions, so (k, k) groups as (k) does;
    written twice, engines that read a set's keys as columns (DuckDB, DataFusion, Acero) gave k twice in
    place of the measure."""
    changed = 0
    for rel, _path in rels_with_paths(plan):
        if rel.WhichOneof("rel_type") != "aggregate":
            continue
        for grouping in rel.aggregate.groupings:
            refs = list(grouping.expression_references)
            once = list(dict.fromkeys(refs))
            if once != refs:
                del grouping.expression_references[:]
                grouping.expression_references.extend(once)
                changed += 1
    return changed
