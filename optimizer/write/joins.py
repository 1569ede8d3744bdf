"""Join conditions a target reads only as one key comparison (``join_condition = "single_key"``: Acero).

Acero takes a ``JoinRel`` whose expression is one ``equal`` (or ``is_not_distinct_from``) of a column of
each input ("Only `equal` or `is_not_distinct_from` are supported for join key comparison but got
and_kleene"). An inner join on ``k AND rest`` is the inner join on ``k`` with ``rest`` applied to its
output by a ``FilterRel`` above (the same rows: an inner join outputs exactly the pairs its condition
holds for), which also takes the join's ``post_join_filter`` and emit. Any other join type whose
condition is not one key comparison is refused: moving part of an outer, semi or anti join's condition
above it changes its answer.
"""

from __future__ import annotations

from substrait.proto import Expression, JoinRel, Plan, Rel

from optimizer.errors import UnsupportedError
from optimizer.expr_utils import (
    FunctionRegistrar,
    boolean_type,
    call_args,
    conjuncts,
    field,
    field_index,
    function_name,
    join_type_name,
    make_and,
    referenced_fields,
    rels_with_paths,
    remap_fields,
)
from optimizer.load.functions import FunctionTable
from optimizer.targets import Target

_KEY_COMPARISONS = ("equal", "is_not_distinct_from")


def _key(c, functions, n_left: int) -> bool:
    """Is ``c`` a key comparison of a column of each side?"""
    if function_name(c, functions) not in _KEY_COMPARISONS:
        return False
    args = call_args(c)
    if args is None or len(args) != 2:
        return False
    a, b = (field_index(x) for x in args)
    return a is not None and b is not None and (a < n_left) != (b < n_left)


def semi_join_emits(plan: Plan, functions: FunctionTable) -> int:
    """Every ``LEFT_SEMI`` / ``LEFT_ANTI`` join without an emit gets the emit of its left input's columns
    (its whole output, as the spec says), in place; the number changed. Acero's consumer takes such a join's
    output to be both inputs' columns, while the join outputs the left ones only, so a relation above reads
    columns that are not there (DataFusion's TPC-H Q4: "No match for FieldRef.FieldPath(2) in
    FieldPath(0)"); with the emit it counts the left ones."""
    from optimizer.schema import plan_schemas

    schemas = None
    changed = 0
    for rel, path in rels_with_paths(plan):
        if (rel.WhichOneof("rel_type") != "join" or rel.join.common.WhichOneof("emit_kind") == "emit"
                or rel.join.type not in (JoinRel.JOIN_TYPE_LEFT_SEMI, JoinRel.JOIN_TYPE_LEFT_ANTI)):
            continue
        if schemas is None:
            schemas = plan_schemas(plan, functions)
        rel.join.common.emit.output_mapping.extend(range(len(schemas[f"{path}.join.left"].types)))
        changed += 1
    return changed


def _left_column_first(key: Expression, n_left: int) -> None:
    """Put the left input's column first in the key comparison ``key`` (both are symmetric), in place: Acero
    takes the first argument as the left key and the second as the right one, whatever they reference
    (``l_orderkey = o_orderkey`` with orders on the left: "No match for FieldRef.FieldPath(2) in
    FieldPath(0)")."""
    args = key.scalar_function.arguments
    if field_index(args[0].value) >= n_left:
        first, second = type(args[0])(), type(args[1])()
        first.CopyFrom(args[1])
        second.CopyFrom(args[0])
        args[0].CopyFrom(first)
        args[1].CopyFrom(second)


def single_key_joins(plan: Plan, target: Target, functions: FunctionTable) -> int:
    """Rewrite, in place, every join whose condition is more than one key comparison (see the module
    docstring); the number of joins changed. ``functions``: the plan's table (``and`` is declared in it
    where the plan lacks it)."""
    from optimizer.schema import plan_schemas

    registrar = FunctionRegistrar(plan, functions)
    schemas = None
    changed = 0
    for rel, path in list(rels_with_paths(plan)):  # children first: a rewrite keeps its ancestors' paths
        if rel.WhichOneof("rel_type") != "join":
            continue
        join = rel.join
        conds = conjuncts(join.expression, functions) if join.HasField("expression") else []
        if schemas is None:
            schemas = plan_schemas(plan, functions)
        n_left = len(schemas[f"{path}.join.left"].types)
        if len(conds) == 1 and _key(conds[0], functions, n_left) and not join.HasField("post_join_filter"):
            _left_column_first(join.expression, n_left)
            continue
        jt = join_type_name(join)
        keys = [i for i, c in enumerate(conds) if _key(c, functions, n_left)]
        if join.type != JoinRel.JOIN_TYPE_INNER or not keys:
            raise UnsupportedError(f"JoinRel of type {jt} on a condition that is not one comparison of a column "
                                   f"of each side: target '{target.name}' joins on one key only", path)
        rest = [c for i, c in enumerate(conds) if i != keys[0]]
        if join.HasField("post_join_filter"):
            rest.append(join.post_join_filter)
        emit = list(join.common.emit.output_mapping) if join.common.WhichOneof("emit_kind") == "emit" else None
        join.expression.CopyFrom(conds[keys[0]])
        _left_column_first(join.expression, n_left)
        join.ClearField("post_join_filter")
        join.common.ClearField("emit_kind")
        top = Rel()
        top.filter.input.CopyFrom(rel)
        top.filter.condition.CopyFrom(make_and(rest, registrar))
        if emit is not None:
            top.filter.common.emit.output_mapping.extend(emit)
        rel.CopyFrom(top)
        changed += 1
    return changed


def explicit_join_conditions(plan: Plan) -> int:
    """Every ``JoinRel`` without an expression gets the condition ``true``, in place; the number changed.
    DuckDB 1.1.3 reads a join without one as an expression of kind 0 ("Unsupported expression type 0":
    DataFusion's cross products, TPC-DS Q28, Q88). The same rows for every join type: the spec joins each
    pair of rows of the two inputs when there is no condition, and ``true`` holds for each pair."""
    changed = 0
    for rel, _path in rels_with_paths(plan):
        if rel.WhichOneof("rel_type") == "join" and not rel.join.HasField("expression"):
            rel.join.expression.literal.boolean = True
            changed += 1
    return changed


def semi_join_conditions_true(plan: Plan, target: Target, functions: FunctionTable) -> int:
    """Each conjunct of a ``LEFT_SEMI`` join's condition that may be NULL, other than a key equality of a
    column of each side, gets ``IS NOT NULL`` of itself beside it, in place; the number of joins changed.
    DuckDB 1.1.3 takes a left row whose condition is NULL for a right row as matched: EXISTS (SELECT 1 FROM
    t2 b WHERE b.k = a.k AND b.v > a.v) gave 3 rows where SQL gives 2 (b.v NULL). ``c AND c IS NOT NULL`` is
    true exactly where ``c`` is, so the rows the spec keeps are the same."""
    from optimizer.schema import expression_type, plan_schemas
    from optimizer.schema.types import is_nullable

    joins = [(rel, path) for rel, path in rels_with_paths(plan)
             if rel.WhichOneof("rel_type") == "join" and rel.join.type == JoinRel.JOIN_TYPE_LEFT_SEMI
             and rel.join.HasField("expression")]
    if not joins:
        return 0
    schemas = plan_schemas(plan, functions)
    registrar = FunctionRegistrar(plan, functions)
    changed = 0
    for rel, path in joins:
        left, right = schemas[f"{path}.join.left"], schemas[f"{path}.join.right"]
        both = left.concat(right)
        parts = conjuncts(rel.join.expression, registrar.table)
        added = [registrar.call("is_not_null", "functions_comparison", [c], boolean_type(nullable=False),
                                "is_not_null:any")
                 for c in parts if not _key(c, registrar.table, len(left.types))
                 and is_nullable(expression_type(c, both, registrar.table))]
        if added:
            rel.join.expression.CopyFrom(make_and(parts + added, registrar))
            changed += 1
    return changed


def post_join_filters_above(plan: Plan) -> int:
    """Every ``JoinRel``'s ``post_join_filter`` becomes a ``FilterRel`` above it that takes the join's emit
    too; in place, the number changed. The spec applies the filter to the join's output, which is what a
    filter above does. DuckDB 1.1.3 ignores the field (an inner join on true of 3 x 3 rows, a post-join
    filter and a filter above: 3 rows instead of 2; found by the fuzzer with ``--reference spark``);
    DataFusion 55 refuses it ("JoinRel with post_join_filter is not yet supported")."""
    changed = 0
    for rel, _path in list(rels_with_paths(plan)):  # children first: a rewrite keeps its ancestors' paths
        if rel.WhichOneof("rel_type") != "join" or not rel.join.HasField("post_join_filter"):
            continue
        join = rel.join
        emit = list(join.common.emit.output_mapping) if join.common.WhichOneof("emit_kind") == "emit" else None
        top = Rel()
        top.filter.condition.CopyFrom(join.post_join_filter)
        join.ClearField("post_join_filter")
        join.common.ClearField("emit_kind")
        top.filter.input.CopyFrom(rel)
        if emit is not None:
            top.filter.common.emit.output_mapping.extend(emit)
        rel.CopyFrom(top)
        changed += 1
    return changed


#: A right join and the left join of the same kind it is, its inputs swapped.
_MIRRORED = {JoinRel.JOIN_TYPE_RIGHT_SEMI: JoinRel.JOIN_TYPE_LEFT_SEMI,
             JoinRel.JOIN_TYPE_RIGHT_ANTI: JoinRel.JOIN_TYPE_LEFT_ANTI}


def right_outer_joins_as_left(plan: Plan, target: Target, functions: FunctionTable) -> int:
    """Every ``RIGHT`` (outer) join becomes the ``LEFT`` join of its inputs swapped, its condition's
    columns renumbered and an emit putting the columns back in their order (composed with the join's
    own); in place, the number changed. The same rows: a right join keeps every right row, the left join
    of the swapped inputs every new-left row. DataFusion 55 answers a filter above a RIGHT join whose
    inputs share a column name (``s``) with rows the filter rejects (3 rows for 0, its own SQL too; the
    random SQL sweep), and the LEFT join right."""
    from optimizer.schema import plan_schemas

    schemas = None
    changed = 0
    for rel, path in list(rels_with_paths(plan)):  # children first: a rewrite keeps its ancestors' paths
        if rel.WhichOneof("rel_type") != "join" or rel.join.type != JoinRel.JOIN_TYPE_RIGHT:
            continue
        if rel.join.HasField("post_join_filter"):
            continue  # written as a filter above first (post_join_filters), else left as it is
        if schemas is None:
            schemas = plan_schemas(plan, functions)
        join = rel.join
        n_left = len(schemas[f"{path}.join.left"].types)
        n_right = len(schemas[f"{path}.join.right"].types)

        def renumber(i: int, n_left: int = n_left, n_right: int = n_right) -> int:
            return i + n_right if i < n_left else i - n_left

        emitted = (list(join.common.emit.output_mapping) if join.common.WhichOneof("emit_kind") == "emit"
                   else list(range(n_left + n_right)))
        left, right = Rel(), Rel()
        left.CopyFrom(join.left)
        right.CopyFrom(join.right)
        join.left.CopyFrom(right)
        join.right.CopyFrom(left)
        join.type = JoinRel.JOIN_TYPE_LEFT
        if join.HasField("expression"):
            join.expression.CopyFrom(remap_fields(join.expression, renumber))
        del join.common.emit.output_mapping[:]
        join.common.emit.output_mapping.extend(renumber(i) for i in emitted)
        changed += 1
    return changed


def right_joins_mirrored(plan: Plan, target: Target, functions: FunctionTable) -> int:
    """Every ``RIGHT_SEMI`` / ``RIGHT_ANTI`` join the target does not read becomes the ``LEFT_SEMI`` /
    ``LEFT_ANTI`` join with its inputs swapped, the column references of its condition renumbered (its
    ``post_join_filter`` reads the output, the same columns); in place, the number changed. The same rows in the same columns:
    both output the rows of the right input (the new left) that have (or have no) match. DuckDB 1.1.3
    reads neither right form ("Unsupported join type": DataFusion's TPC-DS Q54)."""
    from optimizer.schema import plan_schemas

    readable = target.join_types
    if readable is None:  # it reads every join type
        return 0
    schemas = None
    changed = 0
    for rel, path in list(rels_with_paths(plan)):  # children first: a rewrite keeps its ancestors' paths
        if rel.WhichOneof("rel_type") != "join" or rel.join.type not in _MIRRORED:
            continue
        join = rel.join
        mirror = _MIRRORED[join.type]
        mirrored_read = (join_type_name(JoinRel(type=mirror)) in readable
                         or (mirror == JoinRel.JOIN_TYPE_LEFT_ANTI and target.anti_joins == "left_join"))
        if join_type_name(join) in readable or not mirrored_read:
            continue
        if schemas is None:
            schemas = plan_schemas(plan, functions)
        n_left = len(schemas[f"{path}.join.left"].types)
        n_right = len(schemas[f"{path}.join.right"].types)

        def renumber(i: int, n_left: int = n_left, n_right: int = n_right) -> int:
            return i + n_right if i < n_left else i - n_left

        left, right = Rel(), Rel()
        left.CopyFrom(join.left)
        right.CopyFrom(join.right)
        join.left.CopyFrom(right)
        join.right.CopyFrom(left)
        join.type = mirror
        if join.HasField("expression"):
            join.expression.CopyFrom(remap_fields(join.expression, renumber))
        # A post_join_filter reads the join's output, the same columns before and after: left as it is.
        changed += 1
    return changed


def anti_joins_as_left_joins(plan: Plan, target: Target, functions: FunctionTable) -> int:
    """Every ``LEFT_ANTI`` join becomes a ``LEFT`` join on the same condition to its right input with a
    constant ``true`` column appended, under a ``FilterRel`` keeping the rows where that column is NULL and
    outputting the left input's columns (the anti join's emit, if any); in place, the number changed.

    The same rows: a left row with a match satisfying the condition appears only with the constant set,
    and is dropped; a left row without one appears exactly once, its right side (the constant too) NULL.
    For DuckDB 1.1.3, which reads ``LEFT`` joins but refuses anti joins ("INTERNAL Error: Unsupported
    join type": DataFusion's TPC-H Q16, Q21, Q22). A ``post_join_filter`` is refused: where the spec
    applies it to an anti join's output is not what a filter above the left join would apply it to."""
    from optimizer.schema import plan_schemas

    registrar = FunctionRegistrar(plan, functions)
    changed = 0
    schemas = None
    for rel, path in list(rels_with_paths(plan)):  # children first: a rewrite keeps its ancestors' paths
        if rel.WhichOneof("rel_type") != "join" or rel.join.type != JoinRel.JOIN_TYPE_LEFT_ANTI:
            continue
        join = rel.join
        if join.HasField("post_join_filter"):
            raise UnsupportedError(f"JoinRel of type LEFT_ANTI with a post_join_filter: target '{target.name}' "
                                   "reads no anti join, and its rewrite as a left join keeps no such filter", path)
        if schemas is None:
            schemas = plan_schemas(plan, functions)
        n_left = len(schemas[f"{path}.join.left"].types)
        n_right = len(schemas[f"{path}.join.right"].types)
        emit = list(join.common.emit.output_mapping) if join.common.WhichOneof("emit_kind") == "emit" else None
        marked = Rel()
        marked.project.input.CopyFrom(join.right)
        marked.project.expressions.add().literal.boolean = True
        join.right.CopyFrom(marked)
        join.type = JoinRel.JOIN_TYPE_LEFT
        join.common.ClearField("emit_kind")
        top = Rel()
        top.filter.input.CopyFrom(rel)
        top.filter.condition.CopyFrom(registrar.call("is_null", "functions_comparison", [field(n_left + n_right)],
                                                     boolean_type(nullable=False), "is_null:any"))
        top.filter.common.emit.output_mapping.extend(emit if emit is not None else range(n_left))
        rel.CopyFrom(top)
        changed += 1
    return changed


def nest_set_inputs(plan: Plan, target: Target) -> int:
    """A ``UNION ALL`` / ``UNION DISTINCT`` of more inputs than the target takes becomes nested unions of
    that many (the same rows: both are associative, and a distinct union of distinct unions is the
    distinct union of all); another set operation with too many inputs is refused. In place; the number
    of set relations changed."""
    from substrait.proto import SetRel

    limit = target.max_set_inputs
    changed = 0
    for rel, path in list(rels_with_paths(plan)):
        if rel.WhichOneof("rel_type") != "set" or limit is None or len(rel.set.inputs) <= limit:
            continue
        body = rel.set
        if body.op not in (SetRel.SET_OP_UNION_ALL, SetRel.SET_OP_UNION_DISTINCT):
            raise UnsupportedError(f"SetRel ({SetRel.SetOp.Name(body.op)}) of {len(body.inputs)} inputs: target "
                                   f"'{target.name}' takes at most {limit}", path)
        inputs = list(body.inputs)
        while len(inputs) > limit:  # level by level: nested log(n) deep, in the inputs' order
            level = []
            for i in range(0, len(inputs), limit):
                chunk = inputs[i:i + limit]
                if len(chunk) == 1:
                    level.append(chunk[0])
                    continue
                inner = Rel()
                inner.set.op = body.op
                inner.set.inputs.extend(chunk)
                level.append(inner)
            inputs = level
        del body.inputs[:]
        body.inputs.extend(inputs)
        changed += 1
    return changed


def set_inputs_projected(plan: Plan, functions: FunctionTable) -> int:
    """Each input of each ``SetRel`` becomes a ``ProjectRel`` of its columns in order (expressions
    ``field(0) .. field(n-1)``, emit ``[n .. 2n-1]``): the same rows. Acero compares its inputs' schemas
    with their column names, which it derives from the expressions that made them (a cast column is
    ``cast(FieldPath(0), ...)``, a column read is its table's name): ``SELECT k FROM t UNION ALL SELECT v
    FROM t`` of an i32 k failed with 'UnionNode input schemas must all match' (found by the random SQL
    sweep). Over such a project every input's columns are named alike. In place; the inputs wrapped."""
    from optimizer.write.walk import LazySchemas, rels_of_kind

    schemas = LazySchemas(plan, functions)
    changed = 0
    for rel, path in rels_of_kind(plan, "set"):
        for i, source in enumerate(rel.set.inputs):
            n = schemas.width(f"{path}.set.inputs[{i}]")
            wrapped = Rel()
            wrapped.project.input.CopyFrom(source)
            wrapped.project.expressions.extend(field(j) for j in range(n))
            wrapped.project.common.emit.output_mapping.extend(range(n, 2 * n))
            source.CopyFrom(wrapped)
            changed += 1
    return changed


def distinct_key(rel: Rel, path: str, schemas) -> frozenset[int] | None:
    """Output columns of ``rel`` no two of its rows agree on (so its rows are all distinct), or None when
    that is not known. Known from: an aggregate of one grouping set (its keys; of none: at most one
    row); a ``UNION DISTINCT``; filters, sorts and fetches keep their input's; a project keeps its
    input's where it outputs those columns; an inner join pairs its inputs' keys, a semi or anti join
    keeps its left input's. Each relation's emit then selects from it."""
    from substrait.proto import SetRel

    kind = rel.WhichOneof("rel_type")
    body = getattr(rel, kind)
    key: frozenset[int] | None = None
    if kind == "aggregate":
        if not body.groupings:
            key = frozenset()
        elif len(body.groupings) == 1:
            key = frozenset(body.groupings[0].expression_references)
    elif kind in ("filter", "sort", "fetch"):
        key = distinct_key(body.input, f"{path}.{kind}.input", schemas)
    elif kind == "project":
        inner = distinct_key(body.input, f"{path}.project.input", schemas)
        if inner is None:
            return None
        n_in = len(schemas[f"{path}.project.input"].types)
        sources = [*range(n_in), *(field_index(e) for e in body.expressions)]
        outputs = (list(body.common.emit.output_mapping) if body.common.WhichOneof("emit_kind") == "emit"
                   else list(range(len(sources))))
        found: dict[int, int] = {}
        for position, o in enumerate(outputs):
            if sources[o] is not None:
                found.setdefault(sources[o], position)
        return frozenset(found[c] for c in inner) if inner <= set(found) else None
    elif kind == "join":
        left = distinct_key(body.left, f"{path}.join.left", schemas)
        jt = join_type_name(body)
        if jt in ("LEFT_SEMI", "LEFT_ANTI"):
            key = left
        elif jt == "INNER" and left is not None:
            right = distinct_key(body.right, f"{path}.join.right", schemas)
            n_left = len(schemas[f"{path}.join.left"].types)
            key = None if right is None else left | {n_left + c for c in right}
    elif kind == "set" and body.op == SetRel.SET_OP_UNION_DISTINCT:
        key = frozenset(range(len(schemas[path].types)))
    common = getattr(body, "common", None)
    if key is None or common is None or common.WhichOneof("emit_kind") != "emit":
        return key
    mapping = list(common.emit.output_mapping)
    if not key <= set(mapping):
        return None
    return frozenset(mapping.index(c) for c in key)


def set_ops_as_distinct(plan: Plan, target: Target, functions: FunctionTable) -> int:
    """Write ``UNION ALL`` and ``UNION DISTINCT`` for a consumer that reads ``SET_OP_UNION_ALL`` as a
    distinct union and reads no other union (DuckDB 1.1.3: its own producer writes SQL's ``UNION`` and
    ``UNION ALL`` both as ``SET_OP_UNION_ALL``, its consumer reads that as ``UNION``; ``UNION_DISTINCT``
    is "not implemented"). In place, so that both readings, the spec's and the target's, give the
    same rows:

    * ``UNION DISTINCT``: ``SET_OP_UNION_ALL`` of the inputs under an aggregate grouping by every column
      (the distinct rows of either reading);
    * ``UNION ALL`` of inputs whose rows are each known to be distinct (:func:`distinct_key`): each input
      gets a constant column of its own number, so no two inputs share a row and a distinct union
      removes nothing; a project above drops that column;
    * ``UNION ALL`` of an input that may repeat a row: no set operation at all, full outer joins that
      match nothing (:func:`_union_all_as_outer_joins`), which keep every row as often as it comes;

    * ``MINUS_PRIMARY`` / ``INTERSECTION_PRIMARY`` of two inputs (``EXCEPT`` / ``INTERSECT``: the
      distinct rows of the primary input not in / in the other) are read so by both: kept.

    Unions of more than two inputs are written as nested unions of two. Another set operation is
    refused. ``functions``: the plan's table (the outer joins' functions are declared in it). Returns the
    set relations changed."""
    from substrait.proto import SetRel

    from optimizer.schema import plan_schemas

    changed = 0
    while True:
        schemas = plan_schemas(plan, functions)
        todo = [(rel, path) for rel, path in rels_with_paths(plan)
                if rel.WhichOneof("rel_type") == "set" and not rel.set.HasField("advanced_extension")
                and not _written(rel)]
        if not todo:
            for rel, _path in rels_with_paths(plan):
                if rel.WhichOneof("rel_type") == "set" and _written(rel):
                    rel.set.common.hint.ClearField("alias")
                    if rel.set.common.hint.ByteSize() == 0:
                        rel.set.common.ClearField("hint")
            return changed
        # An outermost one first, so that a UNION ALL of UNION ALLs is read as one of all their inputs.
        rel, path = min(todo, key=lambda item: len(item[1]))
        body = rel.set
        op = SetRel.SetOp.Name(body.op) if body.op in SetRel.SetOp.values() else str(body.op)
        width = len(schemas[f"{path}.set.inputs[0]"].types)  # the set's columns before its emit
        emit = list(body.common.emit.output_mapping) if body.common.WhichOneof("emit_kind") == "emit" else None
        if body.op == SetRel.SET_OP_UNION_DISTINCT:
            union = _binary_union(list(body.inputs))
            top = Rel()
            top.aggregate.input.CopyFrom(union)
            top.aggregate.grouping_expressions.extend(field(c) for c in range(width))
            top.aggregate.groupings.add().expression_references.extend(range(width))
        elif body.op == SetRel.SET_OP_UNION_ALL:
            inputs = _union_all_inputs(rel, path)
            if any(distinct_key(child, child_path, schemas) is None for child, child_path in inputs):
                top = _union_all_as_outer_joins([child for child, _ in inputs], width,
                                                FunctionRegistrar(plan, functions))
            else:
                tagged = []
                for i, (child, _child_path) in enumerate(inputs):
                    tag = Rel()
                    tag.project.input.CopyFrom(child)
                    tag.project.expressions.add().literal.i32 = i
                    tagged.append(tag)
                top = Rel()
                top.project.input.CopyFrom(_binary_union(tagged))
                top.project.common.emit.output_mapping.extend(range(width))
        elif body.op in (SetRel.SET_OP_MINUS_PRIMARY, SetRel.SET_OP_INTERSECTION_PRIMARY) and len(body.inputs) == 2:
            # EXCEPT / INTERSECT DISTINCT: the distinct rows of the primary input in (not in) the other;
            # the same in both readings.
            body.common.hint.alias = _WRITTEN
            changed += 1
            continue
        else:
            raise UnsupportedError(f"SetRel {op.removeprefix('SET_OP_')} of {len(body.inputs)} inputs: target "
                                   f"'{target.name}' reads every set operation as its distinct form, of two "
                                   "inputs, and has no other", path)
        if emit is not None:
            outer = Rel()
            outer.project.input.CopyFrom(top)
            outer.project.common.emit.output_mapping.extend(emit)
            top = outer
        rel.CopyFrom(top)
        changed += 1


def _union_all_inputs(rel: Rel, path: str) -> list[tuple[Rel, str]]:
    """The inputs of a ``UNION ALL``, with those of each ``UNION ALL`` input (without emit) in its place:
    the same rows (the operation is associative). Each with its path in the plan."""
    from substrait.proto import SetRel

    out = []
    for i, child in enumerate(rel.set.inputs):
        child_path = f"{path}.set.inputs[{i}]"
        if (child.WhichOneof("rel_type") == "set" and child.set.op == SetRel.SET_OP_UNION_ALL and not _written(child)
                and child.set.common.WhichOneof("emit_kind") != "emit"):
            out.extend(_union_all_inputs(child, child_path))
        else:
            out.append((child, child_path))
    return out


def _union_all_as_outer_joins(inputs: list[Rel], width: int, registrar: FunctionRegistrar) -> Rel:
    """``UNION ALL`` of ``inputs`` (each ``width`` columns) without a set operation: each step is a full
    outer join of ``A + (0)`` and ``B + (1)`` on their constant columns being equal, which never holds,
    so every row of either side comes out once (repeats kept), the other side's columns NULL; a project
    above takes each column from the side whose constant is not NULL. A hash join on a key: linear."""
    def tagged(child: Rel, tag: int) -> Rel:
        out = Rel()
        out.project.input.CopyFrom(child)
        out.project.expressions.add().literal.i32 = tag
        return out

    def combine(acc: Rel, child: Rel) -> Rel:
        join = Rel()
        join.join.type = JoinRel.JOIN_TYPE_OUTER
        join.join.left.CopyFrom(tagged(acc, 0))
        join.join.right.CopyFrom(tagged(child, 1))
        join.join.expression.CopyFrom(registrar.call("equal", "functions_comparison",
                                                     [field(width), field(2 * width + 1)],
                                                     boolean_type(), "equal:any_any"))
        left_present = registrar.call("is_not_null", "functions_comparison", [field(width)],
                                      boolean_type(nullable=False), "is_not_null:any")
        top = Rel()
        top.project.input.CopyFrom(join)
        for c in range(width):
            pick = top.project.expressions.add().if_then
            clause = pick.ifs.add()
            getattr(clause, "if").CopyFrom(left_present)
            clause.then.CopyFrom(field(c))
            getattr(pick, "else").CopyFrom(field(width + 1 + c))
        top.project.common.emit.output_mapping.extend(range(2 * width + 2, 3 * width + 2))
        return top

    return balanced(inputs, combine)


def balanced(items: list[Rel], combine) -> Rel:
    """``items`` combined two at a time as a balanced tree (``combine(left, right)``; the order of the
    items kept): a union of n inputs nests log2(n) deep, not n (a left-deep chain of 200 nested past
    Python's recursion limit, and copied itself at every step: quadratic)."""
    while len(items) > 1:
        items = [combine(items[i], items[i + 1]) if i + 1 < len(items) else items[i]
                 for i in range(0, len(items), 2)]
    return items[0]


#: Marks a union this module wrote (so it is not rewritten again): ``SetRel.common.hint.alias``.
_WRITTEN = "substrait-optimizer: distinct union"


def _written(rel: Rel) -> bool:
    return rel.set.common.hint.alias == _WRITTEN


def _binary_union(inputs: list[Rel]) -> Rel:
    """``SET_OP_UNION_ALL`` of ``inputs``, nested two at a time (a balanced tree), each marked written."""
    from substrait.proto import SetRel

    def combine(left: Rel, right: Rel) -> Rel:
        union = Rel()
        union.set.op = SetRel.SET_OP_UNION_ALL
        union.set.inputs.extend([left, right])
        union.set.common.hint.alias = _WRITTEN
        return union

    return balanced(inputs, combine)


def _equal_columns(cond, functions: FunctionTable) -> list[tuple[int, int]]:
    """The ``equal`` conjuncts of ``cond`` between two plain columns."""
    pairs = []
    for c in conjuncts(cond, functions):
        args = call_args(c) if function_name(c, functions) == "equal" else None
        if args is not None and len(args) == 2:
            a, b = (field_index(x) for x in args)
            if a is not None and b is not None:
                pairs.append((a, b))
    return pairs


def _classes(rel: Rel, path: str, schemas, functions: FunctionTable) -> list[set[int]]:
    """Sets of ``rel``'s output columns known equal on every row: those an inner join's equalities make
    equal, seen through its emit, or through a project over it whose expressions are plain columns.
    ``path``: ``rel``'s; ``schemas``: the plan's."""
    project = None
    if rel.WhichOneof("rel_type") == "project" and rel.project.input.WhichOneof("rel_type") == "join":
        refs = [field_index(e) for e in rel.project.expressions]
        if any(r is None for r in refs):
            return []
        project, rel, path = (rel.project, refs), rel.project.input, f"{path}.project.input"
    if rel.WhichOneof("rel_type") != "join" or rel.join.type != JoinRel.JOIN_TYPE_INNER:
        return []
    join = rel.join
    pairs = _equal_columns(join.expression, functions) if join.HasField("expression") else []
    classes: list[set[int]] = []
    for a, b in pairs:  # the join's own columns (before its emit) that its equalities make equal
        merged = {a, b}
        for c in [c for c in classes if c & merged]:
            merged |= c
            classes.remove(c)
        classes.append(merged)
    # Each output position of the join, then of the project over it, as the join's own column.
    out = (list(join.common.emit.output_mapping) if join.common.WhichOneof("emit_kind") == "emit"
           else list(range(len(schemas[path].types))))
    if project is not None:
        body, refs = project
        columns = out + [out[r] for r in refs]
        out = ([columns[m] for m in body.common.emit.output_mapping]
               if body.common.WhichOneof("emit_kind") == "emit" else columns)
    found = []
    for c in classes:
        positions = {j for j, m in enumerate(out) if m in c}
        if len(positions) > 1:
            found.append(positions)
    return found


def transitive_join_keys(plan: Plan, target: Target, functions: FunctionTable) -> int:
    """Every join condition ``a = b`` where ``b`` belongs to a class of columns an inner join directly
    below makes equal (``b = c``) also gets ``a = c``, for each such ``c`` it lacks; in place, the number
    of joins changed. The rows are the same: for each row of that input ``b = c``, so ``a = b`` holds
    exactly where ``a = b AND a = c`` does. DataFusion 55's optimizer turns a join on ``l_partkey =
    p_partkey AND l_suppkey = ps_suppkey`` over ``partsupp JOIN part ON ps_partkey = p_partkey`` into a
    join of lineitem and partsupp on the supplier key alone (480 M rows: DuckDB's TPC-H Q9 optimized ran
    8.6 s instead of 0.27 s); with ``l_partkey = ps_partkey`` written too it keys on both (0.9 s)."""
    from optimizer.expr_utils import FunctionRegistrar, boolean_type

    registrar = FunctionRegistrar(plan, functions)
    schemas = None
    changed = 0
    for rel, path in list(rels_with_paths(plan)):
        if rel.WhichOneof("rel_type") != "join" or not rel.join.HasField("expression"):
            continue
        join = rel.join
        pairs = set(_equal_columns(join.expression, functions))
        if not pairs or not any(join_input.WhichOneof("rel_type") in ("join", "project")
                                for join_input in (join.left, join.right)):
            continue
        if schemas is None:
            from optimizer.schema import plan_schemas

            schemas = plan_schemas(plan, functions)
        n_left = len(schemas[f"{path}.join.left"].types)
        classes = ([c for c in _classes(join.left, f"{path}.join.left", schemas, functions)]
                   + [{i + n_left for i in c} for c in _classes(join.right, f"{path}.join.right", schemas, functions)])
        if not classes:
            continue
        known = pairs | {(b, a) for a, b in pairs}
        added = []
        for a, b in sorted(pairs):
            for x, y in ((a, b), (b, a)):
                for c in classes:
                    if y in c:
                        for z in sorted(c - {y}):
                            if (x, z) not in known and x != z and (x < n_left) != (z < n_left):
                                known |= {(x, z), (z, x)}
                                added.append(registrar.call("equal", "functions_comparison", [field(x), field(z)],
                                                            boolean_type(), "equal:any_any"))
        if added:
            join.expression.CopyFrom(make_and([join.expression, *added], registrar))
            changed += 1
    return changed


_MARK_TYPES = (JoinRel.JOIN_TYPE_LEFT_MARK, JoinRel.JOIN_TYPE_RIGHT_MARK)


def refuse_null_marks(plan: Plan, target: Target, functions: FunctionTable) -> None:
    """Refuse each mark join whose mark the target gives as false where Substrait gives NULL (DataFusion 55:
    its mark is true or false; the spec's is NULL where no row matches and the condition was NULL for one),
    unless that cannot change the answer: the condition is never NULL, or the mark is read only by filters,
    as a conjunct or a disjunct of their condition (where NULL and false both drop the row), or as
    ``coalesce(mark, false)`` (how the loader reads DataFusion's own marks), and no relation above outputs
    it otherwise. DataFusion writes its EXISTS and IN under an OR or a NOT so (TPC-DS Q10, Q35, Q45)."""
    from optimizer.schema import expression_type, plan_schemas
    from optimizer.schema.types import is_nullable

    schemas = None
    by_path = {path: rel for rel, path in rels_with_paths(plan)}
    for path, rel in by_path.items():
        if rel.WhichOneof("rel_type") != "join" or rel.join.type not in _MARK_TYPES:
            continue
        if schemas is None:
            schemas = plan_schemas(plan, functions)
        join = rel.join
        left, right = schemas[f"{path}.join.left"], schemas[f"{path}.join.right"]
        both = left.concat(right)
        conditions = [getattr(join, f) for f in ("expression", "post_join_filter") if join.HasField(f)]
        if not any(is_nullable(expression_type(c, both, functions)) for c in conditions):
            continue
        mark = len(left.types) if join.type == JoinRel.JOIN_TYPE_LEFT_MARK else len(right.types)
        if not _mark_read_by_filters_only(by_path, schemas, path, mark, functions):
            raise UnsupportedError(f"JoinRel of type {join_type_name(join)} whose mark is read where NULL and false "
                                   f"differ: target '{target.name}' gives false where Substrait gives NULL (no row "
                                   "matches and the condition was NULL for one)", path)


#: The relations a mark column may pass through, by (kind, input field).
_PASSING = frozenset({("project", "input"), ("filter", "input"), ("join", "left"), ("join", "right")})
#: The inputs whose columns a join outputs, by join type (left's, then right's; a mark join adds its mark).
_JOIN_OUTPUT = {
    JoinRel.JOIN_TYPE_INNER: ("left", "right"), JoinRel.JOIN_TYPE_LEFT: ("left", "right"),
    JoinRel.JOIN_TYPE_RIGHT: ("left", "right"), JoinRel.JOIN_TYPE_OUTER: ("left", "right"),
    JoinRel.JOIN_TYPE_LEFT_SINGLE: ("left", "right"), JoinRel.JOIN_TYPE_RIGHT_SINGLE: ("left", "right"),
    JoinRel.JOIN_TYPE_LEFT_SEMI: ("left",), JoinRel.JOIN_TYPE_LEFT_ANTI: ("left",),
    JoinRel.JOIN_TYPE_LEFT_MARK: ("left",), JoinRel.JOIN_TYPE_RIGHT_SEMI: ("right",),
    JoinRel.JOIN_TYPE_RIGHT_ANTI: ("right",), JoinRel.JOIN_TYPE_RIGHT_MARK: ("right",),
}


def _mark_read_by_filters_only(by_path: dict[str, Rel], schemas, path: str, mark: int,
                               functions: FunctionTable) -> bool:
    """Whether every relation above the mark join at ``path`` that has its column ``mark`` (or a copy of it)
    is a filter reading it only as a conjunct or a disjunct, or a project or a join passing it on without
    reading it, and the mark is dropped below the root."""
    from optimizer.relations import emit_of

    def emitted(rel: Rel, has: list[bool]) -> set[int]:
        emit = emit_of(rel)
        kept = [has[i] for i in emit if 0 <= i < len(has)] if emit is not None else has
        return {i for i, h in enumerate(kept) if h}

    rel = by_path[path]
    side = "left" if rel.join.type == JoinRel.JOIN_TYPE_LEFT_MARK else "right"
    width = len(schemas[f"{path}.join.{side}"].types) + 1  # the side's columns, then the mark
    columns = emitted(rel, [i == mark for i in range(width)])
    child = path
    while columns:
        head, _, input_field = child.rpartition(".")
        parent_path, _, kind = head.rpartition(".")
        if parent_path not in by_path or (kind, input_field) not in _PASSING:
            return False  # the root, or another relation, has the mark
        parent = by_path[parent_path]
        width = len(schemas[child].types)
        has = [i in columns for i in range(width)]
        if kind == "join":
            n_left = len(schemas[f"{parent_path}.join.left"].types)
            n_right = len(schemas[f"{parent_path}.join.right"].types)
            read = {c + (n_left if input_field == "right" else 0) for c in columns}
            for name in ("expression", "post_join_filter"):
                if parent.join.HasField(name) and referenced_fields(getattr(parent.join, name)) & read:
                    return False
            sides = _JOIN_OUTPUT.get(parent.join.type)
            if sides is None or input_field not in sides:
                return False
            left_part = [i in columns for i in range(n_left)] if input_field == "left" else [False] * n_left
            right_part = [i in columns for i in range(n_right)] if input_field == "right" else [False] * n_right
            has = (left_part if "left" in sides else []) + (right_part if "right" in sides else [])
            has += [False] * (parent.join.type in _MARK_TYPES)
        elif kind == "filter":
            if not _only_as_condition(parent.filter.condition, columns, functions):
                return False
        else:
            for e in parent.project.expressions:
                i = field_index(e)
                if i is None and _read_as_three_valued(e, columns, functions):
                    return False
                has.append(i is not None and i in columns)
        columns = emitted(parent, has)
        child = parent_path
    return True


def _false_for_null(e: Expression, columns: set[int], functions: FunctionTable) -> bool:
    """Whether ``e`` is ``coalesce(mark, false)`` of a column of ``columns``: true or false, the same for a
    NULL mark as for a false one (how the loader reads a mark of DataFusion's own plans)."""
    args = call_args(e) if function_name(e, functions) == "coalesce" else None
    return (args is not None and len(args) == 2 and field_index(args[0]) in columns
            and args[1].WhichOneof("rex_type") == "literal" and args[1].literal.WhichOneof("literal_type") == "boolean"
            and not args[1].literal.boolean)


def _read_as_three_valued(e: Expression, columns: set[int], functions: FunctionTable) -> bool:
    """Whether ``e`` reads one of ``columns`` other than through ``coalesce(mark, false)``."""
    if _false_for_null(e, columns, functions):
        return False
    i = field_index(e)
    if i is not None:
        return i in columns
    args = call_args(e) if e.WhichOneof("rex_type") == "scalar_function" else None
    if args is not None:
        return any(_read_as_three_valued(a, columns, functions) for a in args)
    return bool(referenced_fields(e) & columns)


def _only_as_condition(e: Expression, columns: set[int], functions: FunctionTable) -> bool:
    """Whether ``e`` reads ``columns`` only as whole conjuncts or disjuncts (under AND and OR only) or
    through ``coalesce(mark, false)``."""
    if field_index(e) is not None or not _read_as_three_valued(e, columns, functions):
        return True
    if function_name(e, functions) in ("and", "or"):
        return all(_only_as_condition(a, columns, functions) for a in call_args(e) or ())
    return False
