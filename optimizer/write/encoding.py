"""The projection convention of DuckDB 1.1.3's consumer (``encoding.project = expressions_only``).

DuckDB's substrait extension (1.1.3, before substrait-io/duckdb-substrait-extension#135) reads a
``ProjectRel`` as "only its expressions" and ignores the project's emit: ``ProjectRel(read(region),
[r_regionkey])`` gives it one column where the spec says four, and an emit of ``[3, 1]`` on it still
gives one. So every project is written as the list of its output columns, in order: an input column
the emit selects becomes a field reference, an expression stays, and the emit is dropped. It ignores
the emit of every other relation (a ``ReadRel``, ``FilterRel`` or ``JoinRel`` outputs all its columns;
an ``AggregateRel``'s fails to bind: ``SELECT list is empty``), so each relation with an emit gets such a
project above it instead.

A plan written so is in DuckDB's convention, not the spec's: another consumer reads it differently.
"""

from __future__ import annotations

from substrait.proto import Expression, Plan, Rel, Type

from optimizer.errors import UnsupportedError
from optimizer.expr_utils import field, int_literal, rels_with_paths
from optimizer.load.functions import FunctionTable
from optimizer.schema.types import is_known
from optimizer.targets import Target

#: Relations whose emit DuckDB 1.1.3 reads as the spec says: none. It ignores the emit of a read, a filter
#: and a join (region read with emit [1, 0] gives (r_regionkey, r_name); a filter with emit [0, 1, 2] over a
#: join of 4 columns gives 4, and a join above it reads the wrong column), so every emit becomes a project.
EMIT_READ: frozenset[str] = frozenset()


def write_projects_as_expressions(plan: Plan, target: Target | None, functions: FunctionTable) -> int:
    """Rewrite the plan's projects (and the emits DuckDB ignores) into the expressions-only convention, in
    place; the number of relations changed. ``functions``: the plan's table."""
    from optimizer.schema import plan_schemas

    schemas = plan_schemas(plan, functions)
    changed = 0
    for rel, path in list(rels_with_paths(plan)):  # children first: a rewrite keeps its ancestors' paths
        kind = rel.WhichOneof("rel_type")
        body = getattr(rel, kind)
        common = getattr(body, "common", None)
        emit = list(common.emit.output_mapping) if common is not None and common.WhichOneof(
            "emit_kind") == "emit" else None
        if kind == "project":
            n_in = len(schemas[f"{path}.project.input"].types)
            exprs = list(body.expressions)
            mapping = emit if emit is not None else list(range(n_in + len(exprs)))
            if emit is None and not exprs:
                mapping = list(range(n_in))
            new = [field(m) if m < n_in else exprs[m - n_in] for m in mapping]
            del body.expressions[:]
            body.expressions.extend(new)
            common.ClearField("emit_kind")
            changed += 1
        elif emit is not None and kind not in EMIT_READ:
            common.ClearField("emit_kind")
            project = Rel()
            project.project.input.CopyFrom(rel)
            project.project.expressions.extend(field(m) for m in emit)
            rel.CopyFrom(project)
            changed += 1
    changed += _no_empty_projects(plan, target)
    return changed


def _no_empty_projects(plan: Plan, target: Target | None) -> int:
    """A project written with no column at all (the optimizer prunes every column under ``count(*)``)
    fails to bind on DuckDB 1.1.3 (``SELECT list is empty after resolving * expressions``: TPC-DS Q38,
    Q96), and so does a read whose mask keeps no column. Under an aggregate, which then references none of
    its input's columns, each such relation outputs one column instead (a project a constant, a read its
    first column), also where the aggregate reads them through joins, filters, sorts and fetches that
    have no column either (``count(*)`` of a cross join): the aggregate reads the same number of rows and
    no reference moves, as nothing between references a column. Elsewhere the extra column would be
    part of a relation's output: refused. Returns the relations changed."""
    changed = 0
    for rel, _path in rels_with_paths(plan):
        kind = rel.WhichOneof("rel_type")
        if kind in ("aggregate", "project") and getattr(rel, kind).HasField("input"):
            for leaf in _column_free_leaves(getattr(rel, kind).input) or ():
                if leaf.WhichOneof("rel_type") == "project":
                    leaf.project.expressions.add().literal.boolean = True
                elif leaf.read.HasField("virtual_table"):
                    _add_constant_column(leaf.read)
                else:
                    leaf.read.projection.select.struct_items.add().field = 0
                changed += 1
    for rel, path in rels_with_paths(plan):
        kind = rel.WhichOneof("rel_type")
        body = getattr(rel, kind)
        for name in ("input", "left", "right", "inputs"):
            if name not in body.DESCRIPTOR.fields_by_name:
                continue
            children = list(getattr(body, name)) if name == "inputs" else (
                [getattr(body, name)] if body.HasField(name) else [])
            for child in children:
                if child.WhichOneof("rel_type") == "project" and not child.project.expressions:
                    name_of = target.name if target is not None else "duckdb"
                    raise UnsupportedError(f"a ProjectRel with no output column under a {kind} relation: target "
                                           f"'{name_of}' cannot read a relation without columns", path)
                if child.WhichOneof("rel_type") == "read" and (_column_free_read(child.read)
                                                               or not child.read.base_schema.struct.types):
                    name_of = target.name if target is not None else "duckdb"
                    raise UnsupportedError(f"a ReadRel with no output column under a {kind} relation: target "
                                           f"'{name_of}' cannot read a relation without columns", path)
    for root in plan.relations:
        rel = root.root.input if root.HasField("root") else root.rel
        if rel.WhichOneof("rel_type") == "project" and not rel.project.expressions:
            name_of = target.name if target is not None else "duckdb"
            raise UnsupportedError(f"a plan whose output has no column: target '{name_of}' cannot read it")
    return changed


def _column_free_read(read) -> bool:
    """A read of a table with columns whose mask keeps none (a read of no column at all is a virtual
    table of no column, which :func:`_add_constant_column` mends where it can)."""
    return (read.HasField("projection") and not read.projection.select.struct_items
            and bool(read.base_schema.struct.types))


def _add_constant_column(read) -> None:
    """A virtual table of no column (DataFusion's ``SELECT 1``) gets the column ``true`` in every row."""
    read.base_schema.names.append("_")
    read.base_schema.struct.types.add().bool.nullability = Type.NULLABILITY_REQUIRED
    for row in read.virtual_table.expressions:
        row.fields.add().literal.boolean = True


def _column_free_leaves(rel: Rel) -> list[Rel] | None:
    """The projects without expressions and the reads whose mask keeps no column that ``rel`` is made of,
    through joins, cross products, filters, sorts and fetches without an emit, if every relation on the
    way has no column (else None: giving one leaf a column would move another's columns)."""
    kind = rel.WhichOneof("rel_type")
    if kind == "read":
        virtual_empty = rel.read.HasField("virtual_table") and not rel.read.base_schema.struct.types
        return [rel] if _column_free_read(rel.read) or virtual_empty else None
    if kind == "project":
        return [rel] if not rel.project.expressions else None
    body = getattr(rel, kind) if kind in ("join", "cross", "filter", "sort", "fetch") else None
    if body is None or body.common.WhichOneof("emit_kind") == "emit":
        return None
    leaves: list[Rel] = []
    for name in ("left", "right") if kind in ("join", "cross") else ("input",):
        below = _column_free_leaves(getattr(body, name)) if body.HasField(name) else None
        if below is None:
            return None
        leaves += below
    return leaves


def _varint(value: int) -> bytes:
    value &= (1 << 64) - 1  # two's complement, as protobuf writes a negative int64
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        if value:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def write_old_encoding(plan: Plan, target: str) -> int:
    """Write the fields DuckDB 1.1.3's consumer reads in place of today's (it was built against Substrait
    0.53), in place: each grouping's expressions in ``Grouping.grouping_expressions`` (field 1; DuckDB
    reads no ``expression_references`` and sees an aggregate without keys otherwise), a fetch's
    ``offset`` and ``count`` (fields 3 and 4; all rows: the largest count), a virtual table's rows as literal
    structs in ``VirtualTable.values`` (field 1; DuckDB reads no ``expressions``: "SELECT list is empty
    after resolving * expressions"). Today's fields stay: the loader
    (:mod:`optimizer.load.upgrade`) checks that both say the same. These field numbers are no longer in
    the protos, so they are merged in as the wire bytes they were. Returns the relations changed."""
    from optimizer.load.upgrade import _unknown  # the loader's reader of the same wire fields

    changed = 0
    for rel, _path in rels_with_paths(plan):
        kind = rel.WhichOneof("rel_type")
        if kind == "aggregate":
            agg = rel.aggregate
            for grouping in agg.groupings:
                if any(number == 1 for number, _, _ in _unknown(grouping)):
                    continue
                data = bytearray()
                for j in grouping.expression_references:
                    raw = agg.grouping_expressions[j].SerializeToString(deterministic=True)
                    data += _varint((1 << 3) | 2) + _varint(len(raw)) + raw
                grouping.MergeFromString(bytes(data))
            changed += 1
        elif kind == "fetch":
            fetch = rel.fetch
            if any(number in (3, 4) for number, _, _ in _unknown(fetch)):
                continue
            offset = int_literal(fetch.offset_expr) if fetch.HasField("offset_expr") else 0
            # All rows: the largest count, which Acero reads too (it refuses 0.53's -1: "`count` must be
            # non-negative"); DuckDB reads either, and no table has more rows.
            count = int_literal(fetch.count_expr) if fetch.HasField("count_expr") else 2**63 - 1
            if offset is None or count is None:
                raise UnsupportedError(f"FetchRel whose offset or count is not an integer literal: target "
                                       f"'{target}' reads Substrait 0.53's constant counts only", _path)
            fetch.MergeFromString(_varint(3 << 3) + _varint(offset) + _varint(4 << 3) + _varint(count))
            changed += 1
        elif kind == "read" and rel.read.HasField("virtual_table"):
            table = rel.read.virtual_table
            if any(number == 1 for number, _, _ in _unknown(table)):
                continue
            data = bytearray()  # VirtualTable.values (field 1): rows of literals (Literal.Struct, field 1 each)
            for r, row in enumerate(table.expressions):
                struct = bytearray()
                for f, e in enumerate(row.fields):
                    if e.WhichOneof("rex_type") != "literal":
                        raise UnsupportedError("a VALUES row holding an expression that is not a literal: DuckDB "
                                               "1.1.3 reads literal rows only", f"{_path}.read.virtual_table."
                                               f"expressions[{r}].fields[{f}]")
                    raw = e.literal.SerializeToString(deterministic=True)
                    struct += _varint((1 << 3) | 2) + _varint(len(raw)) + raw
                data += _varint((1 << 3) | 2) + _varint(len(struct)) + struct
            table.MergeFromString(bytes(data))
            changed += 1
    return changed


def empty_virtual_tables_as_a_filtered_row(plan: Plan) -> int:
    """Every virtual table without rows becomes one row of NULLs (typed by its schema, made nullable)
    under a ``FilterRel`` that keeps none: the same (no) rows. DuckDB 1.1.3 fails to bind an empty VALUES
    (``SELECT list is empty after resolving * expressions``; the optimizer writes one for a filter that is
    always false). And a column of a virtual table holding a NULL is cast to its declared type by a
    project above: DuckDB types a NULL literal as an integer whatever its type says (a boolean column of
    NULL came back as int32; found by the fuzzer against Spark). In place; the number changed."""
    changed = 0
    for rel, _path in list(rels_with_paths(plan)):
        if rel.WhichOneof("rel_type") != "read" or not rel.read.HasField("virtual_table"):
            continue
        if rel.read.virtual_table.expressions:
            changed += _cast_null_columns(rel)
            continue
        row = rel.read.virtual_table.expressions.add()
        declared = [Type(**{t.WhichOneof("kind"): getattr(t, t.WhichOneof("kind"))})
                    for t in rel.read.base_schema.struct.types]
        for t in rel.read.base_schema.struct.types:  # the NULL row's columns may hold it; no row gets out
            getattr(t, t.WhichOneof("kind")).nullability = Type.NULLABILITY_NULLABLE
            row.fields.add().literal.null.CopyFrom(t)
        _cast_null_columns(rel, declared)  # the read's emit, if any, is the project's now
        top = Rel()
        top.filter.input.CopyFrom(rel)
        top.filter.condition.literal.boolean = False
        rel.CopyFrom(top)
        changed += 1
    return changed


def write_direct_emits(plan: Plan) -> int:
    """Every relation whose ``common`` sets no emit kind says ``direct`` (its whole output), in place.
    Acero rejects a ``RelCommon`` without one ("Invalid emit case"), which the spec reads as direct."""
    changed = 0
    for rel, _path in rels_with_paths(plan):
        body = getattr(rel, rel.WhichOneof("rel_type"))
        common = getattr(body, "common", None)
        if common is not None and common.WhichOneof("emit_kind") is None:
            common.direct.SetInParent()
            changed += 1
    return changed


def _reads_table(rel: Rel) -> bool:
    """``rel`` is a read, under filters only: its columns are the table's, none computed."""
    while rel.WhichOneof("rel_type") == "filter":
        rel = rel.filter.input
    return rel.WhichOneof("rel_type") == "read"


def _refuse_decimal_measures(args, schema, functions: FunctionTable, path: str, target: Target) -> None:
    """Acero (pyarrow 26) dies with a segmentation fault aggregating a decimal column that a relation
    below computes (a ``ProjectRel``: ``sum(l_extendedprice * l_discount)``, even ``+``); which columns
    are computed is not followed through joins, so any decimal argument not read straight from a table
    is refused."""
    from optimizer.schema import expression_type

    for a in args:
        if expression_type(a.value, schema, functions).WhichOneof("kind") == "decimal":
            raise UnsupportedError(f"an aggregate of a decimal expression or computed column: target "
                                   f"'{target.name}' fails on it (Acero, pyarrow 26: the process crashes)", path)


def aggregate_arguments_as_columns(plan: Plan, target: Target | None, functions: FunctionTable) -> int:
    """Each aggregate whose grouping expressions or measure arguments are not plain columns reads them
    from a ``ProjectRel`` below it that computes them (Acero: "Expected an aggregate call to have a direct
    reference"), in place; the number of aggregates changed. The aggregate's output is the same.
    ``functions``: the plan's table."""
    from optimizer.expr_utils import field_index
    from optimizer.schema import plan_schemas

    schemas = plan_schemas(plan, functions)
    changed = 0
    for rel, path in list(rels_with_paths(plan)):
        if rel.WhichOneof("rel_type") != "aggregate":
            continue
        agg = rel.aggregate
        exprs = [*agg.grouping_expressions]
        args = [a for m in agg.measures for a in m.measure.arguments if a.WhichOneof("arg_type") == "value"]
        filters = [m.filter for m in agg.measures if m.HasField("filter")]
        if target is not None and not target.computed_decimal_measures:
            direct = _reads_table(agg.input)
            computed_args = [a for a in args if not direct or field_index(a.value) is None]
            _refuse_decimal_measures(computed_args, schemas[f"{path}.aggregate.input"], functions, path, target)
        if all(field_index(e) is not None for e in exprs) and all(
                field_index(a.value) is not None for a in args) and all(field_index(f) is not None for f in filters):
            continue
        n_in = len(schemas[f"{path}.aggregate.input"].types)
        computed: list = []
        index: dict[bytes, int] = {}

        def column(e, n_in=n_in, computed=computed, index=index) -> int:
            i = field_index(e)
            if i is not None:
                return i
            k = e.SerializeToString(deterministic=True)
            if k not in index:
                index[k] = n_in + len(computed)
                kept = Expression()
                kept.CopyFrom(e)  # ``e`` is the argument itself, which becomes a column reference next
                computed.append(kept)
            return index[k]

        for e in agg.grouping_expressions:
            e.CopyFrom(field(column(e)))
        for a in args:
            a.value.CopyFrom(field(column(a.value)))
        for m in agg.measures:
            if m.HasField("filter"):
                m.filter.CopyFrom(field(column(m.filter)))
        project = Rel()
        project.project.input.CopyFrom(agg.input)
        project.project.expressions.extend(computed)
        agg.input.CopyFrom(project)
        changed += 1
    return changed


def literal_grouping_keys_as_columns(plan: Plan, functions: FunctionTable) -> int:
    """Each aggregate grouping by a literal (DataFusion folds ``GROUP BY 1 + 1`` to ``2``) reads it from a
    ``ProjectRel`` below that computes it as a column; in place, the number of aggregates changed. DuckDB
    1.1.3 binds an integer literal grouping key as a position (``GROUP BY 2``: 'GROUP BY clause cannot
    contain aggregates'; ``1`` would group by the first column). Grouping by a constant column is
    grouping by the constant: one group, none over no rows."""
    from optimizer.schema import plan_schemas

    schemas = None
    changed = 0
    for rel, path in list(rels_with_paths(plan)):
        if rel.WhichOneof("rel_type") != "aggregate":
            continue
        agg = rel.aggregate
        literals = [i for i, e in enumerate(agg.grouping_expressions) if e.WhichOneof("rex_type") == "literal"]
        if not literals:
            continue
        if schemas is None:
            schemas = plan_schemas(plan, functions)
        n_in = len(schemas[f"{path}.aggregate.input"].types)
        project = Rel()
        project.project.input.CopyFrom(agg.input)
        for k, i in enumerate(literals):
            project.project.expressions.add().CopyFrom(agg.grouping_expressions[i])
            agg.grouping_expressions[i].CopyFrom(field(n_in + k))
        agg.input.CopyFrom(project)
        changed += 1
    return changed


def fill_measure_types(plan: Plan, functions: FunctionTable) -> int:
    """Every aggregate measure without an ``output_type`` gets the type the spec derives for it, in place
    (DataFusion leaves ``count``'s empty; Acero then fails: "conversion to arrow::DataType from Substrait
    type"). ``functions``: the plan's table. Returns the number filled."""
    from optimizer.schema import plan_schemas, rel_schema

    schemas = None
    filled = 0
    for rel, path in rels_with_paths(plan):
        if rel.WhichOneof("rel_type") != "aggregate":
            continue
        agg = rel.aggregate
        empty = [j for j, m in enumerate(agg.measures) if m.measure.output_type.WhichOneof("kind") is None]
        if not empty:
            continue
        if schemas is None:
            schemas = plan_schemas(plan, functions)
        bare = Rel()
        bare.aggregate.CopyFrom(agg)
        bare.aggregate.ClearField("input")
        bare.aggregate.common.ClearField("emit_kind")
        out = rel_schema(bare, [schemas[f"{path}.aggregate.input"]], functions, path)
        n_keys = len(out.types) - len(agg.measures) - (1 if len(agg.groupings) > 1 else 0)
        for j in empty:
            derived = out.types[n_keys + j]
            if not is_known(derived):
                derived = _extremum_type(agg.measures[j].measure, schemas[f"{path}.aggregate.input"], functions)
            if derived is None:
                name = functions.get(agg.measures[j].measure.function_reference)
                raise UnsupportedError(f"measure '{name.name if name else '?'}' without an output type the spec "
                                       "derives (its producer left it out): the target needs each measure's type",
                                       f"{path}.aggregate.measures[{j}]")
            agg.measures[j].measure.output_type.CopyFrom(derived)
            filled += 1
    return filled


def _extremum_type(measure, input_schema, functions: FunctionTable):
    """The type of ``min``, ``max`` or ``any_value`` of one argument, which the extensions declare for numbers
    and dates but not for strings (DataFusion writes ``max`` of a string without a type): the argument's
    type, nullable (no row gives NULL). None for another function or an argument of unknown type."""
    from optimizer.schema import expression_type
    from optimizer.schema.types import NULLABLE, with_nullability

    info = functions.get(measure.function_reference)
    if info is None or info.name not in ("min", "max", "any_value") or len(measure.arguments) != 1:
        return None
    argument = expression_type(measure.arguments[0].value, input_schema, functions)
    return with_nullability(argument, NULLABLE) if is_known(argument) else None


def _cast_null_columns(rel: Rel, declared: list[Type] | None = None) -> int:
    """``rel`` (a virtual table) under a project casting each column that holds a NULL literal to its
    declared type (``declared``, else the read's schema's), in place; 1 if it did."""
    types = list(declared if declared is not None else rel.read.base_schema.struct.types)
    nulls = {i for row in rel.read.virtual_table.expressions for i, e in enumerate(row.fields)
             if e.WhichOneof("rex_type") == "literal" and e.literal.WhichOneof("literal_type") == "null"}
    if not nulls:
        return 0
    emit = list(rel.read.common.emit.output_mapping) if rel.read.common.WhichOneof("emit_kind") == "emit" else None
    rel.read.common.ClearField("emit_kind")
    top = Rel()
    top.project.input.CopyFrom(rel)
    for i, t in enumerate(types):
        e = top.project.expressions.add()
        if i in nulls:
            e.cast.type.CopyFrom(t)
            e.cast.input.CopyFrom(field(i))
            e.cast.failure_behavior = Expression.Cast.FAILURE_BEHAVIOR_THROW_EXCEPTION
        else:
            e.CopyFrom(field(i))
    n = len(types)
    top.project.common.emit.output_mapping.extend(n + m for m in (emit if emit is not None else range(n)))
    rel.CopyFrom(top)
    return 1


def sorts_after_window_projects(plan: Plan, functions: FunctionTable) -> int:
    """A ``ProjectRel`` computing window functions over a sorted input (a ``SortRel`` below it, through
    filters and projects without emit) gets a copy of that sort above it, its emit moved to a project
    above the sort, so the rows come out in the order the plan says: the spec's project keeps its input's
    order, and DataFusion 55 computes window functions in an order of its own (the fuzzer against Spark:
    a sort, then rank() over another column, then the root or a fetch: rows in another order, another
    first row). In place; the number changed. ``functions``: the plan's table."""
    from optimizer.expr_utils import has_window_function
    from optimizer.schema import plan_schemas

    schemas = None
    changed = 0
    for rel, path in list(rels_with_paths(plan)):  # children first: a rewrite keeps its ancestors' paths
        if rel.WhichOneof("rel_type") != "project" or not has_window_function(rel.project, enter_subqueries=False):
            continue
        below = rel.project.input
        while below.WhichOneof("rel_type") in ("filter", "project"):
            body = getattr(below, below.WhichOneof("rel_type"))
            if body.common.WhichOneof("emit_kind") == "emit":
                break
            below = body.input
        if below.WhichOneof("rel_type") != "sort" or below.sort.common.WhichOneof("emit_kind") == "emit":
            continue
        if schemas is None:
            schemas = plan_schemas(plan, functions)
        width = len(schemas[f"{path}.project.input"].types) + len(rel.project.expressions)
        emit = (list(rel.project.common.emit.output_mapping) if rel.project.common.WhichOneof("emit_kind") == "emit"
                else None)
        rel.project.common.ClearField("emit_kind")
        sort = Rel()
        sort.sort.input.CopyFrom(rel)
        sort.sort.sorts.extend(below.sort.sorts)
        if emit is not None:
            top = Rel()
            top.project.input.CopyFrom(sort)
            top.project.expressions.extend(field(m) for m in emit)
            top.project.common.emit.output_mapping.extend(range(width, width + len(emit)))
            sort = top
        rel.CopyFrom(sort)
        changed += 1
    return changed


_WINDOW_CALLS = ("substrait.Expression.WindowFunction", "substrait.ConsistentPartitionWindowRel.WindowRelFunction")


def window_offsets_in_old_field(plan: Plan, target: Target) -> int:
    """Every ROWS frame bound's ``offset_expr`` written in the ``offset`` field (an int64, deprecated but
    kept in the protos) it replaced, in place; the number changed. DataFusion 55 reads ``offset`` only:
    ``ROWS BETWEEN 1 PRECEDING AND 1 FOLLOWING`` written with ``offset_expr`` failed with 'Preceding bound
    must be positive', and with ``offset`` answers as Spark (found by the spec coverage sweep), as its own
    producer writes it. A RANGE frame with an offset is refused: with ``offset`` DataFusion answered as
    if the bound were unbounded (``RANGE 100 PRECEDING`` over 100, 200, 201, 400, 500: 1401 for 500
    instead of 900), and its own producer writes that frame as unbounded. So is an offset other than a
    non-negative integer literal. Refusals name the relation's path."""
    from substrait.proto import Expression as E

    from optimizer.dag import strip_inputs
    from optimizer.expr_utils import walk

    def offset_bounds(msg) -> list:
        return [getattr(b, side) for b in (msg.lower_bound, msg.upper_bound)
                for side in ("preceding", "following") if b.WhichOneof("kind") == side]

    for rel, path in rels_with_paths(plan):
        for call in walk(strip_inputs(rel), enter_subqueries=True):
            if call.DESCRIPTOR.full_name not in _WINDOW_CALLS:
                continue
            for bound in offset_bounds(call):
                if call.bounds_type != E.WindowFunction.BOUNDS_TYPE_ROWS:
                    raise UnsupportedError("a window frame with an offset other than ROWS: target "
                                           f"'{target.name}' reads it as unbounded", path)
                value = int_literal(bound.offset_expr) if bound.HasField("offset_expr") else bound.offset
                if value is None or value < 0:
                    raise UnsupportedError("a window frame offset other than a non-negative integer literal: "
                                           f"target '{target.name}' reads integer offsets only", path)
    changed = 0
    for call in walk(plan, enter_subqueries=True):
        if call.DESCRIPTOR.full_name in _WINDOW_CALLS:
            for bound in offset_bounds(call):
                if bound.HasField("offset_expr"):
                    value = int_literal(bound.offset_expr)
                    bound.ClearField("offset_expr")
                    bound.offset = value
                    changed += 1
    return changed
