"""The output schema of a relation from its inputs' schemas (:func:`rel_output`), of a relation tree
(:func:`tree_output`: subqueries and ``ReferenceRel`` resolved) and of every relation of a plan
(:func:`walk_plan`). The choices where the specification leaves room are listed in :mod:`optimizer.schema`."""

from __future__ import annotations

import functools
from collections.abc import Sequence

from google.protobuf.descriptor import FieldDescriptor
from substrait.proto import Expression, Plan, PlanRel, Rel, Type

from optimizer.errors import PlanError, UnsupportedError
from optimizer.expr_utils import join_type_name
from optimizer.schema.derivation import Derivation, Problem
from optimizer.schema.expressions import (
    aggregate_type,
    check_condition,
    direct_field_index,
    expr_type,
    field_ref_type,
    function_output_type,
    select_type,
    type_arguments,
    type_bounds,
    type_sorts,
)
from optimizer.schema.record import Schema
from optimizer.schema.types import (
    NULLABLE,
    is_known,
    is_nullable,
    make_type,
    merge_nullability,
    same_type_class,
    type_kind,
    type_name,
    with_nullability,
)

_REL_NAME = Rel.DESCRIPTOR.full_name


@functools.cache
def _input_fields(kind: str) -> tuple[tuple[str, bool], ...]:
    """(field name, repeated) of the ``Rel`` fields of a relation kind, in slot order."""
    body = Rel.DESCRIPTOR.fields_by_name[kind].message_type
    return tuple(
        (f.name, f.label == FieldDescriptor.LABEL_REPEATED)
        for f in body.fields
        if f.type == FieldDescriptor.TYPE_MESSAGE and f.message_type.full_name == _REL_NAME
    )


# Number of inputs per kind: exact count, or (minimum, None) for "at least".
_ARITY: dict[str, int | tuple[int, None]] = {
    "read": 0,
    "extension_leaf": 0,
    "update": 0,
    "ddl": (0, None),
    "filter": 1,
    "fetch": 1,
    "aggregate": 1,
    "sort": 1,
    "project": 1,
    "extension_single": 1,
    "window": 1,
    "exchange": 1,
    "expand": 1,
    "top_n": 1,
    "write": 1,
    "reference": 1,
    "join": 2,
    "lateral_join": 2,
    "cross": 2,
    "hash_join": 2,
    "merge_join": 2,
    "nested_loop_join": 2,
    "set": (1, None),
    "extension_multi": (0, None),
}


def _join_output(jt: str | None, left: Schema, right: Schema, ctx: Derivation, path: str) -> Schema:
    mark = Schema(["mark"], [make_type("bool", True)])
    if jt == "INNER":
        return left.concat(right)
    if jt == "OUTER":
        return left.nullable().concat(right.nullable())
    if jt in ("LEFT", "LEFT_SINGLE"):
        return left.concat(right.nullable())
    if jt in ("RIGHT", "RIGHT_SINGLE"):
        return left.nullable().concat(right)
    if jt in ("LEFT_SEMI", "LEFT_ANTI"):
        return left
    if jt in ("RIGHT_SEMI", "RIGHT_ANTI"):
        return right
    if jt == "LEFT_MARK":
        return left.concat(mark)
    if jt == "RIGHT_MARK":
        return right.concat(mark)
    ctx.fail(f"{path}.type", "join type is unspecified or not a known join type")
    return left.concat(right)


def _name_for(expr: Expression, schema: Schema, default: str) -> str:
    index = direct_field_index(expr)
    if index is not None and 0 <= index < len(schema):
        return schema.names[index]
    return default


def _arity_ok(kind: str, n: int) -> bool:
    want = _ARITY.get(kind, (0, None))
    if isinstance(want, tuple):
        return n >= want[0]
    return n == want


def _arity_text(kind: str) -> str:
    want = _ARITY.get(kind, (0, None))
    if isinstance(want, tuple):
        return f"at least {want[0]}"
    return str(want)


def rel_output(rel: Rel, inputs: Sequence[Schema], ctx: Derivation, path: str) -> Schema:
    """The output schema of one relation (emit applied) given its inputs' schemas."""
    kind = rel.WhichOneof("rel_type")
    if kind is None:
        raise PlanError("relation has no type (empty Rel)", path or None)
    body = getattr(rel, kind)
    bpath = f"{path}.{kind}" if path else kind
    if not _arity_ok(kind, len(inputs)):
        raise PlanError(f"a {kind} relation needs {_arity_text(kind)} input(s), got {len(inputs)}", bpath)
    common = body.common if "common" in body.DESCRIPTOR.fields_by_name else None
    if common is not None and common.HasField("rel_anchor") and inputs:
        record = inputs[0] if len(inputs) == 1 else functools.reduce(Schema.concat, inputs)
        ctx.anchors[common.rel_anchor] = record

    out = _direct_output(kind, body, list(inputs), ctx, bpath)

    if common is not None and common.WhichOneof("emit_kind") == "emit":
        picked: list[int] = []
        for j, m in enumerate(common.emit.output_mapping):
            if 0 <= m < len(out):
                picked.append(m)
            else:
                ctx.fail(f"{bpath}.common.emit.output_mapping[{j}]", f"field {m} of {len(out)}")
        out = out.select(picked)
    if common is not None and common.HasField("hint") and common.hint.output_names:
        names = list(common.hint.output_names)
        if len(names) in (len(out), out.flat_name_count):
            out = out.with_names(names)
        elif ctx.full:
            ctx.warn(f"{bpath}.common.hint.output_names", f"{len(names)} output names for {len(out)} columns")
    return out


def _type_fields_set(body, names: tuple[str, ...], schema: Schema, ctx: Derivation, bpath: str) -> None:
    """Type those of the optional expression fields ``names`` of ``body`` that are set (a fetch's or
    top-N's offset and count): each an integer (or NULL) that reads no column of the input, an offset not
    negative, a count not below -1 (the old encoding's "all rows")."""
    from optimizer.expr_utils import int_literal, referenced_fields

    for name, least in zip(names, (0, -1), strict=True):
        if not body.HasField(name):
            continue
        e = getattr(body, name)
        where = f"{bpath}.{name}"
        t = expr_type(e, schema, ctx, where)
        what = "offset" if least == 0 else "count"
        if referenced_fields(e):
            ctx.warn(where, f"the {what} reads a column of the input: it is one number for the whole relation")
        elif is_known(t) and type_kind(t) not in ("i8", "i16", "i32", "i64") and not (
                e.WhichOneof("rex_type") == "literal" and e.literal.WhichOneof("literal_type") == "null"):
            ctx.warn(where, f"the {what} is of type {type_name(t)}, not an integer")
        elif (value := int_literal(e)) is not None and value < least:
            ctx.warn(where, f"{what} is negative ({value})")


def _direct_output(kind: str, body, inputs: list[Schema], ctx: Derivation, bpath: str) -> Schema:
    full = ctx.full
    if kind == "read":
        return _read_output(body, ctx, bpath)
    if kind == "filter":
        if full:
            check_condition(body.condition, inputs[0], ctx, f"{bpath}.condition", "filter condition")
        return inputs[0]
    if kind == "fetch":
        if full:
            _type_fields_set(body, ("offset_expr", "count_expr"), inputs[0], ctx, bpath)
        return inputs[0]
    if kind == "sort":
        if full:
            type_sorts(body.sorts, inputs[0], ctx, bpath)
        return inputs[0]
    if kind == "top_n":
        if full:
            type_sorts(body.sorts, inputs[0], ctx, bpath)
            _type_fields_set(body, ("offset", "count"), inputs[0], ctx, bpath)
        return inputs[0]
    if kind == "exchange":
        if full:
            _exchange_check(body, inputs[0], ctx, bpath)
        return inputs[0]
    if kind == "project":
        src = inputs[0]
        names = list(src.names)
        types = list(src.types)
        for i, e in enumerate(body.expressions):
            types.append(expr_type(e, src, ctx, f"{bpath}.expressions[{i}]"))
            names.append(_name_for(e, src, f"expr_{i}"))
        return Schema(names, types, src.nested_name_lists() + [[] for _ in body.expressions])
    if kind == "aggregate":
        return _aggregate_output(body, inputs[0], ctx, bpath)
    if kind in ("join", "lateral_join"):
        both = inputs[0].concat(inputs[1])
        out = _join_output(join_type_name(body), inputs[0], inputs[1], ctx, bpath)
        if full:
            if body.HasField("expression"):
                check_condition(body.expression, both, ctx, f"{bpath}.expression", "join expression")
            elif kind == "join":
                # DataFusion writes CROSS JOIN as an inner JoinRel without expression: read as true.
                if ctx.problems is not None:
                    ctx.problems.append(Problem(
                        f"{bpath}.expression",
                        "producer quirk: join has no expression, read as true (a cross product)", quirk=True))
            if body.HasField("post_join_filter"):
                check_condition(body.post_join_filter, out, ctx, f"{bpath}.post_join_filter", "post-join filter")
        return out
    if kind in ("hash_join", "merge_join"):
        left, right = inputs
        out = _join_output(join_type_name(body), left, right, ctx, bpath)
        if full:
            for k, key in enumerate(body.keys):
                kp = f"{bpath}.keys[{k}]"
                lt = field_ref_type(key.left, left, ctx, f"{kp}.left")
                rt = field_ref_type(key.right, right, ctx, f"{kp}.right")
                if not same_type_class(lt, rt) and type_kind(lt) != type_kind(rt):
                    ctx.warn(kp, f"join key compares {type_name(lt)} with {type_name(rt)}")
                if key.comparison.WhichOneof("inner_type") == "custom_function_reference":
                    ctx.function(key.comparison.custom_function_reference, f"{kp}.comparison")
            if body.HasField("residual_expression"):
                check_condition(
                    body.residual_expression,
                    left.concat(right),
                    ctx,
                    f"{bpath}.residual_expression",
                    "residual expression",
                )
            if body.HasField("post_join_filter"):
                check_condition(body.post_join_filter, out, ctx, f"{bpath}.post_join_filter", "post-join filter")
        return out
    if kind == "nested_loop_join":
        out = _join_output(join_type_name(body), inputs[0], inputs[1], ctx, bpath)
        if full and body.HasField("expression"):
            check_condition(
                body.expression, inputs[0].concat(inputs[1]), ctx, f"{bpath}.expression", "join expression"
            )
        return out
    if kind == "cross":
        return inputs[0].concat(inputs[1])
    if kind == "set":
        return _set_output(body, inputs, ctx, bpath)
    if kind == "reference":
        return inputs[0]
    if kind == "extension_single":
        return inputs[0]
    if kind in ("extension_multi", "extension_leaf"):
        raise UnsupportedError(f"the output of an {kind} relation is not known (opaque extension)", bpath)
    if kind == "window":
        return _window_output(body, inputs[0], ctx, bpath)
    if kind == "expand":
        return _expand_output(body, inputs[0], ctx, bpath)
    if kind == "write":
        return _write_output(body, inputs[0], ctx, bpath)
    if kind == "update":
        return _update_output(body, ctx, bpath)
    if kind == "ddl":
        return Schema.empty()
    raise UnsupportedError(f"relation kind {kind} is not supported", bpath)


#: Kinds a value of one may stand in a column of the other (the text kinds differ only in their length).
_TEXT_KINDS = frozenset({"string", "varchar", "fixed_char"})


def _check_virtual_value(t: Type, e, column: Type, ctx: Derivation, path: str) -> None:
    """A virtual table's value must be of its column's type: an engine would cast it its own way ('5' in
    an i64 column read as 5 by Spark, refused by another), and a NULL needs a nullable column."""
    if not is_known(t) or not is_known(column):
        return
    kt, kc = type_kind(t), type_kind(column)
    if kt != kc and not {kt, kc} <= _TEXT_KINDS:
        ctx.warn(path, f"virtual table value of type {type_name(t)} in a column of type {type_name(column)}")
    elif (e.WhichOneof("rex_type") == "literal" and e.literal.WhichOneof("literal_type") == "null"
          and not is_nullable(column)):
        ctx.warn(path, f"NULL in a virtual table column of type {type_name(column)}, which is not nullable")


def _read_output(body, ctx: Derivation, bpath: str) -> Schema:
    if not body.HasField("base_schema"):
        rows = body.virtual_table.expressions if body.WhichOneof("read_type") == "virtual_table" else []
        if not rows:
            ctx.fail(f"{bpath}.base_schema", "read has no base_schema")
            return Schema.empty()
        # Older DuckDB wrote virtual tables without a schema: take the types of the rows' values.
        width = len(rows[0].fields)
        columns: list[list[Type]] = [[] for _ in range(width)]
        for r, row in enumerate(rows):
            for c, e in enumerate(row.fields[:width]):
                columns[c].append(
                    expr_type(e, Schema.empty(), ctx, f"{bpath}.virtual_table.expressions[{r}].fields[{c}]")
                )
        return Schema([f"col_{c}" for c in range(width)], [merge_nullability(ts) for ts in columns])
    ns = body.base_schema
    if ns.names and not ns.struct.types:
        # Older DataFusion wrote names only: the columns are known, their types are not.
        base = Schema(list(ns.names), [Type() for _ in ns.names])
    else:
        base = Schema.from_named_struct(ns, f"{bpath}.base_schema")
    if ctx.full:
        for name in ("filter", "best_effort_filter"):
            if body.HasField(name):
                check_condition(
                    getattr(body, name), base, ctx, f"{bpath}.{name}", f"read {name.replace('_', ' ')}"
                )
        if body.WhichOneof("read_type") == "virtual_table":
            for r, row in enumerate(body.virtual_table.expressions):
                rpath = f"{bpath}.virtual_table.expressions[{r}]"
                if len(row.fields) != len(base):
                    ctx.warn(rpath, f"virtual table row has {len(row.fields)} values for {len(base)} columns")
                for c, e in enumerate(row.fields):
                    t = expr_type(e, Schema.empty(), ctx, f"{rpath}.fields[{c}]")
                    if c < len(base):
                        _check_virtual_value(t, e, base.types[c], ctx, f"{rpath}.fields[{c}]")
    if not body.HasField("projection"):
        return base
    items = body.projection.select.struct_items
    picked: list[int] = []
    types: list[Type] = []
    nested = base.nested_name_lists()
    nested_out: list[list[str]] = []
    for j, item in enumerate(items):
        ipath = f"{bpath}.projection.select.struct_items[{j}]"
        if not 0 <= item.field < len(base):
            ctx.fail(ipath, f"field {item.field} of {len(base)}")
            continue
        t = base.types[item.field]
        picked.append(item.field)
        if item.HasField("child"):
            t2 = select_type(item.child, t, ctx, f"{ipath}.child")
            nested_out.append(nested[item.field] if type_name(t2) == type_name(t) else [])
            t = t2
        else:
            nested_out.append(nested[item.field])
        types.append(t)
    return Schema([base.names[i] for i in picked], types, nested_out)


def _aggregate_output(body, src: Schema, ctx: Derivation, bpath: str) -> Schema:
    n_keys = len(body.grouping_expressions)
    key_types = [
        expr_type(e, src, ctx, f"{bpath}.grouping_expressions[{i}]")
        for i, e in enumerate(body.grouping_expressions)
    ]
    in_all = [True] * n_keys
    used = [False] * n_keys
    for g, grouping in enumerate(body.groupings):
        refs = set()
        for j, r in enumerate(grouping.expression_references):
            if r >= n_keys:
                ctx.fail(
                    f"{bpath}.groupings[{g}].expression_references[{j}]",
                    f"grouping expression {r} of {n_keys}",
                )
                continue
            refs.add(r)
            used[r] = True
        for i in range(n_keys):
            if i not in refs:
                in_all[i] = False
    if ctx.full:
        for i in range(n_keys):
            if not used[i]:
                ctx.warn(
                    f"{bpath}.grouping_expressions[{i}]", "grouping expression is not used by any grouping"
                )
    names: list[str] = []
    types: list[Type] = []
    for i, e in enumerate(body.grouping_expressions):
        t = key_types[i]
        if not in_all[i] and len(body.groupings) > 1:
            t = with_nullability(t, NULLABLE)
        types.append(t)
        names.append(_name_for(e, src, f"group_{i}"))
    for m, measure in enumerate(body.measures):
        mpath = f"{bpath}.measures[{m}]"
        types.append(aggregate_type(measure.measure, src, ctx, f"{mpath}.measure"))
        names.append(f"measure_{m}")
        if ctx.full and measure.HasField("filter"):
            check_condition(measure.filter, src, ctx, f"{mpath}.filter", "measure filter")
    if len(body.groupings) > 1:
        types.append(make_type("i32"))
        names.append("grouping_set")
    if ctx.full and not types:
        ctx.warn(bpath, "aggregate has neither grouping expressions nor measures (zero columns)")
    return Schema(names, types)



def _set_output(body, inputs: list[Schema], ctx: Derivation, bpath: str) -> Schema:
    first = inputs[0]
    if ctx.full and len(inputs) < 2:
        ctx.warn(f"{bpath}.inputs", f"a set operation needs at least 2 inputs, got {len(inputs)}")
    # Each distinct schema once: the inputs of a union of one shared subtree (ReferenceRels) are one schema,
    # and comparing it with itself column by column made such a plan's work inputs x columns.
    # (A secondary input that is the primary's schema still counts as a secondary: nullability below.)
    same_width = [first]
    seen: set[int] = set()
    for i, s in enumerate(inputs[1:], start=1):
        if len(s) != len(first):
            ctx.fail(f"{bpath}.inputs[{i}]", f"set input {i} has {len(s)} columns, input 0 has {len(first)}")
            continue
        if id(s) in seen:
            continue
        seen.add(id(s))
        same_width.append(s)
        if ctx.full and s is not first:
            for c, (a, b) in enumerate(zip(first.types, s.types, strict=True)):
                if is_known(a) and is_known(b) and type_kind(a) != type_kind(b):
                    ctx.warn(
                        f"{bpath}.inputs[{i}]",
                        f"set input {i} column {c} is {type_name(b)}, input 0 has {type_name(a)}",
                    )
    op = body.op
    if op == body.SET_OP_UNSPECIFIED and ctx.full:
        ctx.warn(f"{bpath}.op", "set operation is unspecified")
    types: list[Type] = []
    for c, t in enumerate(first.types):
        flags = [is_nullable(s.types[c]) for s in same_width]
        if op in (body.SET_OP_MINUS_PRIMARY, body.SET_OP_MINUS_PRIMARY_ALL, body.SET_OP_MINUS_MULTISET):
            nullable = flags[0]
        elif op == body.SET_OP_INTERSECTION_PRIMARY:
            nullable = flags[0] and (len(flags) == 1 or any(flags[1:]))
        elif op in (body.SET_OP_INTERSECTION_MULTISET, body.SET_OP_INTERSECTION_MULTISET_ALL):
            nullable = all(flags)
        else:  # unions (and unspecified): nullable if any input is
            nullable = any(flags)
        types.append(with_nullability(t, nullable) if is_known(t) else t)
    return Schema(first.names, types, first.nested_name_lists())


def _window_output(body, src: Schema, ctx: Derivation, bpath: str) -> Schema:
    if ctx.full:
        for i, p in enumerate(body.partition_expressions):
            expr_type(p, src, ctx, f"{bpath}.partition_expressions[{i}]")
        type_sorts(body.sorts, src, ctx, bpath)
    names = list(src.names)
    types = list(src.types)
    for i, fn in enumerate(body.window_functions):
        fpath = f"{bpath}.window_functions[{i}]"
        ctx.function(fn.function_reference, fpath)
        if ctx.full:
            type_arguments(fn, src, ctx, fpath)
            type_bounds(fn, src, ctx, fpath)
        types.append(function_output_type(fn, ctx, fpath, "window function", src))
        names.append(f"window_{i}")
    return Schema(names, types, src.nested_name_lists() + [[] for _ in body.window_functions])


def _expand_output(body, src: Schema, ctx: Derivation, bpath: str) -> Schema:
    names: list[str] = []
    types: list[Type] = []
    n_dups: int | None = None
    for i, f in enumerate(body.fields):
        fpath = f"{bpath}.fields[{i}]"
        which = f.WhichOneof("field_type")
        if which == "consistent_field":
            types.append(expr_type(f.consistent_field, src, ctx, f"{fpath}.consistent_field"))
            names.append(_name_for(f.consistent_field, src, f"expand_{i}"))
        elif which == "switching_field":
            dups = f.switching_field.duplicates
            if not dups:
                types.append(ctx.fail(f"{fpath}.switching_field", "switching field has no duplicates"))
                names.append(f"expand_{i}")
                continue
            if n_dups is None:
                n_dups = len(dups)
            elif ctx.full and len(dups) != n_dups:
                ctx.warn(
                    f"{fpath}.switching_field",
                    f"switching field has {len(dups)} duplicates, others have {n_dups}",
                )
            dtypes = [
                expr_type(d, src, ctx, f"{fpath}.switching_field.duplicates[{j}]") for j, d in enumerate(dups)
            ]
            if ctx.full:
                for j, t in enumerate(dtypes[1:], start=1):
                    if is_known(t) and is_known(dtypes[0]) and type_kind(t) != type_kind(dtypes[0]):
                        ctx.warn(
                            f"{fpath}.switching_field.duplicates[{j}]",
                            f"duplicate is {type_name(t)}, duplicate 0 is {type_name(dtypes[0])}",
                        )
            types.append(merge_nullability(dtypes))
            names.append(_name_for(dups[0], src, f"expand_{i}"))
        else:
            types.append(ctx.fail(fpath, "expand field is neither a switching nor a consistent field"))
            names.append(f"expand_{i}")
    return Schema(names, types)


def _write_output(body, src: Schema, ctx: Derivation, bpath: str) -> Schema:
    table = (
        Schema.from_named_struct(body.table_schema, f"{bpath}.table_schema")
        if body.HasField("table_schema")
        else None
    )
    if ctx.full and table is not None and len(src) != len(table):
        ctx.warn(bpath, f"write input has {len(src)} columns, table_schema has {len(table)}")
    mode = body.output
    if mode == body.OUTPUT_MODE_NO_OUTPUT:
        return Schema.empty()
    if mode == body.OUTPUT_MODE_MODIFIED_RECORDS:
        return table if table is not None else src
    return Schema(["count"], [make_type("i64")])


def _update_output(body, ctx: Derivation, bpath: str) -> Schema:
    if ctx.full:
        if not body.HasField("table_schema"):
            ctx.fail(f"{bpath}.table_schema", "update has no table_schema")
        else:
            table = Schema.from_named_struct(body.table_schema, f"{bpath}.table_schema")
            if body.HasField("condition"):
                check_condition(body.condition, table, ctx, f"{bpath}.condition", "update condition")
            for i, tr in enumerate(body.transformations):
                tpath = f"{bpath}.transformations[{i}]"
                if not 0 <= tr.column_target < len(table):
                    ctx.fail(f"{tpath}.column_target", f"field {tr.column_target} of {len(table)}")
                expr_type(tr.transformation, table, ctx, f"{tpath}.transformation")
    return Schema(["count"], [make_type("i64")])


def _exchange_check(body, src: Schema, ctx: Derivation, bpath: str) -> None:
    which = body.WhichOneof("exchange_kind")
    if which == "scatter_by_fields":
        for i, f in enumerate(body.scatter_by_fields.fields):
            field_ref_type(f, src, ctx, f"{bpath}.scatter_by_fields.fields[{i}]")
    elif which in ("single_target", "multi_target"):
        expr_type(getattr(body, which).expression, src, ctx, f"{bpath}.{which}.expression")


def tree_output(rel: Rel, ctx: Derivation, path: str) -> Schema | None:
    """Schema of a whole relation tree; None (checking mode) when a problem already made it unknowable."""
    kind = rel.WhichOneof("rel_type")
    if kind is None:
        ctx.fail(path, "relation has no type (empty Rel)")
        return None
    body = getattr(rel, kind)
    bpath = f"{path}.{kind}"
    if kind == "reference":
        schema = _reference(body.subtree_ordinal, ctx, bpath)
        if schema is not None and ctx.schemas is not None:
            ctx.schemas[path] = schema
        return schema

    inputs: list[Schema] = []
    missing = False
    for name, repeated in _input_fields(kind):
        if repeated:
            children = [(c, f"{bpath}.{name}[{i}]") for i, c in enumerate(getattr(body, name))]
        elif body.HasField(name):
            children = [(getattr(body, name), f"{bpath}.{name}")]
        elif kind == "ddl":
            children = []
        else:
            ctx.fail(f"{bpath}.{name}", f"{kind} relation has no {name} relation")
            missing = True
            continue
        for child, child_path in children:
            if kind == "lateral_join" and name == "right" and inputs:
                common = body.common
                if common.HasField("rel_anchor"):
                    ctx.anchors[common.rel_anchor] = inputs[0]
            s = tree_output(child, ctx, child_path)
            if s is None:
                missing = True
            else:
                inputs.append(s)
    if missing:
        return None
    if kind == "ddl":
        inputs = []  # the view definition is not an input of the DDL's output
    if not ctx.checking:
        schema = rel_output(rel, inputs, ctx, path)
    else:
        try:
            schema = rel_output(rel, inputs, ctx, path)
        except UnsupportedError:
            return None
        except PlanError as exc:
            ctx.problems.append(Problem(exc.path or path, exc.message))
            return None
    if ctx.schemas is not None:
        ctx.schemas[path] = schema
    return schema


def _plan_rel_tree(entry: PlanRel, index: int) -> tuple[Rel, str]:
    if entry.WhichOneof("rel_type") == "root":
        return entry.root.input, f"relations[{index}].root.input"
    return entry.rel, f"relations[{index}].rel"


def _reference(ordinal: int, ctx: Derivation, path: str) -> Schema | None:
    if ctx.plan_relations is None:
        ctx.fail(path, "ReferenceRel outside a plan (no plan relations to resolve it)")
        return None
    if not 0 <= ordinal < len(ctx.plan_relations):
        ctx.fail(f"{path}.subtree_ordinal", f"subtree {ordinal} of {len(ctx.plan_relations)} plan relations")
        return None
    if ordinal in ctx.ref_cache:
        return ctx.ref_cache[ordinal]
    if ordinal in ctx.ref_active:
        ctx.fail(f"{path}.subtree_ordinal", f"cycle of references through subtree {ordinal}")
        return None
    entry = ctx.plan_relations[ordinal]
    if entry.WhichOneof("rel_type") is None:
        ctx.fail(f"relations[{ordinal}]", "plan relation is neither a root nor a rel")
        return None
    rel, rel_path = _plan_rel_tree(entry, ordinal)
    saved_outer, saved_detached = ctx.outer, ctx.detached
    ctx.outer, ctx.detached = [], list(entry.detached_expressions)
    ctx.ref_active.add(ordinal)
    try:
        schema = tree_output(rel, ctx, rel_path)
    finally:
        ctx.ref_active.discard(ordinal)
        ctx.outer, ctx.detached = saved_outer, saved_detached
    ctx.ref_cache[ordinal] = schema
    return schema


def root_schema(schema: Schema, names: Sequence[str]) -> Schema:
    """``schema`` renamed with ``RelRoot.names`` (depth-first, nested names included; top-level-only
    lists are tolerated); names that fit neither way are ignored."""
    names = list(names)
    if names and len(names) in (len(schema), schema.flat_name_count):
        return schema.with_names(names)
    return schema


def walk_plan(plan: Plan, ctx: Derivation) -> None:
    """Derive the schema of every relation of ``plan`` (into ``ctx.schemas`` when it has them, the root's
    names applied), checking each ``RelRoot``'s name count when ``ctx`` is full."""
    for index, entry in enumerate(plan.relations):
        which = entry.WhichOneof("rel_type")
        if which is None:
            ctx.fail(f"relations[{index}]", "plan relation is neither a root nor a rel")
            continue
        if index in ctx.ref_cache:
            schema = ctx.ref_cache[index]
        else:
            schema = _reference(index, ctx, f"relations[{index}]")
        if which != "root" or schema is None:
            continue
        names = list(entry.root.names)
        if ctx.full and len(names) != schema.flat_name_count:
            detail = f"{len(schema)} columns"
            if schema.flat_name_count != len(schema):
                nested = schema.flat_name_count - len(schema)
                detail = f"{schema.flat_name_count} named fields ({len(schema)} columns and {nested} nested struct fields)"
            ctx.warn(
                f"relations[{index}].root.names", f"RelRoot has {len(names)} names but its input has {detail}"
            )
        if ctx.schemas is not None:
            ctx.schemas[f"relations[{index}].root"] = root_schema(schema, names)

