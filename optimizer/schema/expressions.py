"""The type of an expression evaluated on a record (:func:`expr_type`), literals included; a
function's output type where the plan omits it (:func:`derive_output_type`)."""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence

from substrait.proto import AggregateFunction, ConsistentPartitionWindowRel, Expression, SortField, Type

from optimizer.errors import UnsupportedError
from optimizer.schema.calls import argument_kind, call_problem, kind_problem, signature_problem
from optimizer.schema.derivation import Derivation
from optimizer.schema.record import Schema
from optimizer.schema.types import (
    NULLABLE,
    REQUIRED,
    UNKNOWN,
    is_known,
    is_nullable,
    make_type,
    merge_nullability,
    same_type_class,
    struct_type,
    type_kind,
    type_name,
    with_nullability,
)

#: A call whose arguments :func:`type_arguments` types.
Call = Expression.ScalarFunction | Expression.WindowFunction | AggregateFunction | \
    ConsistentPartitionWindowRel.WindowRelFunction

#: Literal kinds whose type has no parameters, and that type's kind.
SIMPLE_LITERAL_KINDS = {
    "boolean": "bool",
    "i8": "i8",
    "i16": "i16",
    "i32": "i32",
    "i64": "i64",
    "fp32": "fp32",
    "fp64": "fp64",
    "string": "string",
    "binary": "binary",
    "date": "date",
    "uuid": "uuid",
    "interval_year_to_month": "interval_year",
}


#: The width of the integer types a literal's wider protobuf field holds (i8 and i16 are int32 there).
_INT_BITS = {"i8": 8, "i16": 16}


def _literal_problem(lit: Expression.Literal, kind: str) -> str | None:
    """What makes a literal's value contradict its own type (a 3-byte UUID, decimal(39, 40)), if anything."""
    if kind == "uuid" and len(lit.uuid) != 16:
        return f"a UUID literal of {len(lit.uuid)} bytes (a UUID is 16)"
    if kind == "decimal":
        d = lit.decimal
        if not 1 <= d.precision <= 38 or not 0 <= d.scale <= d.precision:
            return f"decimal literal of precision {d.precision} and scale {d.scale} (precision 1 to 38, scale 0 to it)"
        if len(d.value) != 16:
            return f"decimal literal value of {len(d.value)} bytes (16, little-endian)"
        unscaled = int.from_bytes(d.value, "little", signed=True)
        if abs(unscaled) >= 10**d.precision:
            return (f"decimal literal of {len(str(abs(unscaled)))} digits, more than its precision "
                    f"{d.precision}")
    if kind in _INT_BITS and not -(2 ** (_INT_BITS[kind] - 1)) <= getattr(lit, kind) < 2 ** (_INT_BITS[kind] - 1):
        return f"{kind} literal {getattr(lit, kind)} outside the {kind} range"
    if kind in ("precision_time", "precision_timestamp", "precision_timestamp_tz"):
        if not 0 <= getattr(lit, kind).precision <= 12:
            return f"{kind} literal of precision {getattr(lit, kind).precision} (0 to 12)"
    if kind == "var_char" and lit.var_char.length > 2**31 - 1:  # a varchar type's length is an int32
        return f"varchar literal of length {lit.var_char.length} (at most {2**31 - 1})"
    if kind == "var_char" and len(lit.var_char.value) > lit.var_char.length:
        return f"varchar literal of {len(lit.var_char.value)} characters, longer than its length {lit.var_char.length}"
    return None


def _same_types(types: list[Type], path: str, what: str, ctx: Derivation) -> None:
    """A PlanError (through ``ctx``) when the elements of a list or map literal differ in type (nullability
    aside): the literal has no one element type (DataFusion panics on ``[1, 'x']``)."""
    other = next((i for i, t in enumerate(types) if not same_type_class(t, types[0])), None)
    if other is not None:
        ctx.fail(path, f"{what} of elements of different types: {type_name(types[0], False)} and "
                       f"{type_name(types[other], False)} (element {other})")


def literal_type(lit: Expression.Literal, path: str = "", ctx: Derivation | None = None) -> Type:
    """The type of a literal (its ``nullable`` flag gives the nullability; typed nulls are nullable).

    >>> lit = Expression.Literal(decimal=Expression.Literal.Decimal(value=bytes(16), precision=15, scale=2))
    >>> type_name(literal_type(lit))
    'decimal<15,2>'
    """
    ctx = ctx or Derivation()
    kind = lit.WhichOneof("literal_type")
    nullable = lit.nullable
    variation = lit.type_variation_reference

    def done(t: Type) -> Type:
        sub = getattr(t, type_kind(t))
        if "type_variation_reference" in sub.DESCRIPTOR.fields_by_name and variation:
            sub.type_variation_reference = variation
        return t

    if kind is None:
        return ctx.fail(path, "literal has no value")
    problem = _literal_problem(lit, kind)
    if problem:
        return ctx.fail(f"{path}.{kind}", problem)
    if kind in SIMPLE_LITERAL_KINDS:
        return done(make_type(SIMPLE_LITERAL_KINDS[kind], nullable))
    if kind == "interval_day_to_second":
        return done(make_type("interval_day", nullable, precision=lit.interval_day_to_second.precision))
    if kind == "interval_compound":
        return done(
            make_type(
                "interval_compound",
                nullable,
                precision=lit.interval_compound.interval_day_to_second.precision,
            )
        )
    if kind == "fixed_char":
        return done(make_type("fixed_char", nullable, length=len(lit.fixed_char)))
    if kind == "var_char":
        return done(make_type("varchar", nullable, length=lit.var_char.length))
    if kind == "fixed_binary":
        return done(make_type("fixed_binary", nullable, length=len(lit.fixed_binary)))
    if kind == "decimal":
        return done(make_type("decimal", nullable, precision=lit.decimal.precision, scale=lit.decimal.scale))
    if kind in ("precision_time", "precision_timestamp", "precision_timestamp_tz"):
        return done(make_type(kind, nullable, precision=getattr(lit, kind).precision))
    if kind == "struct":
        types = [literal_type(f, f"{path}.struct.fields[{i}]", ctx) for i, f in enumerate(lit.struct.fields)]
        return done(struct_type(types, nullable))
    if kind == "list":
        values = lit.list.values
        if not values:
            return ctx.fail(f"{path}.list", "list literal has no values (use empty_list)")
        elems = [literal_type(v, f"{path}.list.values[{i}]", ctx) for i, v in enumerate(values)]
        _same_types(elems, f"{path}.list.values", "list literal", ctx)
        return done(make_type("list", nullable, type=merge_nullability(elems)))
    if kind == "map":
        kvs = lit.map.key_values
        if not kvs:
            return ctx.fail(f"{path}.map", "map literal has no entries (use empty_map)")
        keys = [literal_type(kv.key, f"{path}.map.key_values[{i}].key", ctx) for i, kv in enumerate(kvs)]
        values = [
            literal_type(kv.value, f"{path}.map.key_values[{i}].value", ctx) for i, kv in enumerate(kvs)
        ]
        _same_types(keys, f"{path}.map.key_values", "map literal keys", ctx)
        _same_types(values, f"{path}.map.key_values", "map literal values", ctx)
        return done(
            make_type("map", nullable, key=merge_nullability(keys), value=merge_nullability(values))
        )
    if kind in ("empty_list", "empty_map"):
        t = Type()
        target = t.list if kind == "empty_list" else t.map
        target.CopyFrom(getattr(lit, kind))
        if nullable:
            target.nullability = NULLABLE
        elif target.nullability == Type.NULLABILITY_UNSPECIFIED:
            target.nullability = REQUIRED
        return t
    if kind == "null":
        if not is_known(lit.null):
            return UNKNOWN
        return with_nullability(lit.null, NULLABLE)
    if kind == "user_defined":
        ud = lit.user_defined
        t = Type()
        if ud.WhichOneof("type_anchor_type") == "type_alias_reference":
            t.alias.type_alias_reference = ud.type_alias_reference
            t.alias.nullability = NULLABLE if nullable else REQUIRED
            return t
        t.user_defined.type_reference = ud.type_reference
        t.user_defined.type_parameters.extend(ud.type_parameters)
        t.user_defined.nullability = NULLABLE if nullable else REQUIRED
        return done(t)
    return ctx.fail(path, f"unsupported literal kind {kind}")


def direct_field_index(expr: Expression) -> int | None:
    """The column index of a plain top-level field reference (``selection`` of the input record), else None.

    >>> e = Expression()
    >>> e.selection.direct_reference.struct_field.field = 3
    >>> direct_field_index(e)
    3
    """
    if expr.WhichOneof("rex_type") != "selection":
        return None
    ref = expr.selection
    if ref.WhichOneof("root_type") not in (None, "root_reference"):
        return None
    if ref.WhichOneof("reference_type") != "direct_reference":
        return None
    seg = ref.direct_reference
    if seg.WhichOneof("reference_type") != "struct_field" or seg.struct_field.HasField("child"):
        return None
    return seg.struct_field.field


def select_type(select: Expression.MaskExpression.Select, t: Type, ctx: Derivation, path: str) -> Type:
    """Apply a mask ``Select`` to a type (struct selects narrow the struct; list/map keep their type)."""
    which = select.WhichOneof("type")
    kind = type_kind(t)
    if not is_known(t) or which is None:
        return t
    if which == "struct":
        if kind != "struct":
            return ctx.fail(path, f"struct select on a {type_name(t)} value")
        return _struct_select(
            select.struct, list(t.struct.types), ctx, f"{path}.struct", nullable=is_nullable(t)
        )
    if which == "list":
        if kind != "list":
            return ctx.fail(path, f"list select on a {type_name(t)} value")
        if select.list.HasField("child"):
            elem = select_type(select.list.child, t.list.type, ctx, f"{path}.list.child")
            return make_type("list", is_nullable(t), type=elem)
        return t
    if kind != "map":
        return ctx.fail(path, f"map select on a {type_name(t)} value")
    if select.map.HasField("child"):
        value = select_type(select.map.child, t.map.value, ctx, f"{path}.map.child")
        return make_type("map", is_nullable(t), key=t.map.key, value=value)
    return t


def _struct_select(
    sel: Expression.MaskExpression.StructSelect, types: list[Type], ctx: Derivation, path: str, nullable: bool
) -> Type:
    out: list[Type] = []
    for j, item in enumerate(sel.struct_items):
        ipath = f"{path}.struct_items[{j}]"
        if not 0 <= item.field < len(types):
            out.append(ctx.fail(ipath, f"field {item.field} of {len(types)}"))
            continue
        t = types[item.field]
        if item.HasField("child"):
            t = select_type(item.child, t, ctx, f"{ipath}.child")
        out.append(t)
    return struct_type(out, nullable)


def _segment_type(seg: Expression.ReferenceSegment, t: Type, ctx: Derivation, path: str) -> Type:
    """Follow a reference segment chain into a (nested) type."""
    while True:
        which = seg.WhichOneof("reference_type")
        if which is None or not is_known(t):
            return t
        kind = type_kind(t)
        parent_nullable = is_nullable(t)
        if which == "struct_field":
            if kind != "struct":
                return ctx.fail(path, f"struct_field reference into a {type_name(t)} value")
            n = len(t.struct.types)
            index = seg.struct_field.field
            if not 0 <= index < n:
                return ctx.fail(path, f"nested field {index} of {n}")
            t = t.struct.types[index]
            seg_next = seg.struct_field
        elif which == "list_element":
            if kind != "list":
                return ctx.fail(path, f"list_element reference into a {type_name(t)} value")
            t = t.list.type
            seg_next = seg.list_element
        else:
            if kind != "map":
                return ctx.fail(path, f"map_key reference into a {type_name(t)} value")
            t = with_nullability(t.map.value, NULLABLE)  # the key may be missing
            seg_next = seg.map_key
        if parent_nullable:
            t = with_nullability(t, NULLABLE)
        if not seg_next.HasField("child"):
            return t
        seg = seg_next.child


def field_ref_type(ref: Expression.FieldReference, schema: Schema, ctx: Derivation, path: str) -> Type:
    """Type of a ``FieldReference`` whose path is ``path`` against the record ``schema``."""
    root = ref.WhichOneof("root_type")
    record: Schema | None = None
    root_t: Type | None = None
    if root in (None, "root_reference"):
        record = schema
    elif root == "expression":
        root_t = expr_type(ref.expression, schema, ctx, f"{path}.expression")
    elif root == "outer_reference":
        outer = ref.outer_reference
        if outer.WhichOneof("outer_reference_type") == "rel_reference":
            anchor = outer.rel_reference
            if anchor not in ctx.anchors:
                return ctx.fail(
                    path, f"outer reference to rel_anchor {anchor}, which no enclosing relation defines"
                )
            record = ctx.anchors[anchor]
        else:
            steps = outer.steps_out
            if steps < 1 or steps > len(ctx.outer):
                return ctx.fail(
                    path,
                    f"outer reference steps_out={steps}, but there are {len(ctx.outer)} enclosing queries",
                )
            record = ctx.outer[-steps]
    elif root == "lambda_parameter_reference":
        steps = ref.lambda_parameter_reference.steps_out
        if steps >= len(ctx.lambdas):
            return ctx.fail(
                path,
                f"lambda parameter reference steps_out={steps}, but there are {len(ctx.lambdas)} lambdas",
            )
        params = ctx.lambdas[-1 - steps]
        root_t = struct_type(list(params.types))

    which = ref.WhichOneof("reference_type")
    if which == "masked_reference":
        mask = ref.masked_reference
        if record is not None:
            types, nullable = list(record.types), False
        elif root_t is not None and type_kind(root_t) == "struct":
            types, nullable = list(root_t.struct.types), is_nullable(root_t)
        elif root_t is not None and not is_known(root_t):
            return UNKNOWN
        else:
            return ctx.fail(path, "masked reference into a non-struct value")
        out = _struct_select(mask.select, types, ctx, f"{path}.masked_reference.select", nullable)
        if len(out.struct.types) == 1 and not mask.maintain_singular_struct:
            return out.struct.types[0]
        return out
    if which is None:  # the whole root
        return record.struct_type() if record is not None else root_t
    seg = ref.direct_reference
    if record is not None:
        if seg.WhichOneof("reference_type") != "struct_field":
            return ctx.fail(path, "a reference into the input record must start with struct_field")
        index = seg.struct_field.field
        if not 0 <= index < len(record):
            return ctx.fail(path, f"field {index} of {len(record)}")
        t = record.types[index]
        if seg.struct_field.HasField("child"):
            return _segment_type(seg.struct_field.child, t, ctx, path)
        return t
    return _segment_type(seg, root_t, ctx, path)


def type_arguments(fn: Call, schema: Schema, ctx: Derivation, path: str) -> None:
    """Type a call's value arguments (for their problems), and report a call of a standard function that
    none of its overloads takes (:func:`optimizer.schema.calls.call_problem`), that has another number of
    arguments than the overload its compound name declares (:func:`~optimizer.schema.calls.signature_problem`),
    or whose declared output type is of another kind than the one its overload returns for these arguments
    (``add(i32, i32)`` declared a string: each engine answers with its own type)."""
    types = [
        expr_type(arg.value, schema, ctx, f"{path}.arguments[{i}].value")
        for i, arg in enumerate(fn.arguments)
        if arg.WhichOneof("arg_type") == "value"
    ]
    if ctx.functions is None or fn.function_reference not in ctx.functions:
        return
    info = ctx.functions.get(fn.function_reference)
    if not info.is_standard:
        return
    values = [arg.value for arg in fn.arguments if arg.WhichOneof("arg_type") == "value"]
    problem = call_problem(info.name, [_BOOLEAN if _is_predicate(v, ctx) else t
                                       for v, t in zip(values, types, strict=True)])
    if problem is None and info.signature is not None:
        problem = signature_problem(info.signature, len(fn.arguments))
    if problem is None and fn.HasField("output_type") and info.name not in _BOOLEAN_FUNCTIONS:
        problem = _output_problem(info.declared_name, fn, types, info.urn)
    if problem is not None:
        ctx.fail(path, problem)


_BOOLEAN = make_type("bool", nullable=True)


def _is_predicate(value: Expression, ctx: Derivation) -> bool:
    """Whether ``value`` is a call of a comparison or another predicate: a boolean whatever output type its
    producer declares (DuckDB 1.1.3 declares the comparisons of its table filters with the column's type,
    ``gte:i64_i64`` -> i64, under an ``and``); every engine computes it as a boolean."""
    if value.WhichOneof("rex_type") != "scalar_function" or ctx.functions is None:
        return False
    reference = value.scalar_function.function_reference
    return reference in ctx.functions and ctx.functions.get(reference).name in _BOOLEAN_FUNCTIONS


def call_signature(fn: Call, value_types: Sequence[Type]) -> list[Type | str]:
    """A call's arguments as :func:`derive_output_type` takes them: each value argument's type (of
    ``value_types``, in order), an enumeration as its option, a type argument as ``""``."""
    values = iter(value_types)
    out: list[Type | str] = []
    for a in fn.arguments:
        which = a.WhichOneof("arg_type")
        out.append(next(values) if which == "value" else a.enum if which == "enum" else "")
    return out


def _output_problem(declared: str, fn: Call, types: list[Type], urn: str | None) -> str | None:
    """Why ``fn``'s declared output type cannot be what its standard overload returns for arguments of
    ``types``: of another kind (numeric, text, temporal...). None when no overload derives a type for them,
    or either type is unknown: the precision, width and nullability producers write are theirs to choose.
    Predicates are not asked (see :func:`_is_predicate`)."""
    derived = derive_output_type(declared.split(":", 1)[0], call_signature(fn, types), urn)
    kinds = argument_kind(derived), argument_kind(fn.output_type)
    if None in kinds or kinds[0] == kinds[1]:
        return None
    return (f"'{declared}' returns {type_name(derived, False)} for these arguments; the plan declares its "
            f"output {type_name(fn.output_type, False)}")


def type_sorts(
    sorts: Sequence[SortField], schema: Schema, ctx: Derivation, path: str, field_name: str = "sorts"
) -> None:
    """Type sort keys and check their comparison functions' anchors (for their problems)."""
    for i, s in enumerate(sorts):
        spath = f"{path}.{field_name}[{i}]"
        expr_type(s.expr, schema, ctx, f"{spath}.expr")
        if s.WhichOneof("sort_kind") == "comparison_function_reference":
            ctx.function(s.comparison_function_reference, spath)
        elif s.direction == SortField.SORT_DIRECTION_UNSPECIFIED:
            ctx.warn(f"{spath}.direction", "sort direction is unspecified")


# Fallbacks when the extension YAMLs cannot derive a missing output type (non-standard argument types).
_BOOLEAN_FUNCTIONS = frozenset(
    "equal not_equal lt gt lte gte between is_null is_not_null is_nan is_finite is_infinite is_true "
    "is_false is_not_true is_not_false is_distinct_from is_not_distinct_from and or not xor and_not "
    "like ilike starts_with ends_with contains regexp_like".split()
)
_NEVER_NULL_BOOLEAN = frozenset("is_null is_not_null is_true is_false is_not_true is_not_false".split())
_COUNT_FUNCTIONS = frozenset(
    "count count_star approx_count_distinct row_number rank dense_rank ntile".split()
)
# Statistics computed in double precision whatever their argument (DataFusion writes ``stddev``,
# ``var_samp`` and the like without an output type; its Consumer reads them as Float64).
_DOUBLE_FUNCTIONS = frozenset(
    "std_dev stddev stddev_samp stddev_pop variance var var_samp var_pop corr".split()
)


def function_output_type(fn, ctx: Derivation, path: str, what: str, schema: Schema | None = None) -> Type:
    """A function's declared ``output_type``. When the plan omits it (DataFusion does for measures),
    the type is derived from the standard extension YAMLs and the argument types, else unknown."""
    if fn.HasField("output_type") and is_known(fn.output_type):
        return fn.output_type
    if ctx.functions is None or schema is None or fn.function_reference not in ctx.functions:
        return UNKNOWN
    info = ctx.functions.get(fn.function_reference)
    quiet = ctx.quiet()
    signature = call_signature(fn, [expr_type(a.value, schema, quiet, path) for a in fn.arguments
                                    if a.WhichOneof("arg_type") == "value"])
    derived = derive_output_type(info.name, signature, info.urn)
    if is_known(derived):
        return derived
    if info.name in _COUNT_FUNCTIONS:
        return make_type("i64")
    if info.name in _DOUBLE_FUNCTIONS:
        return make_type("fp64", True)  # null over no rows (one row, for a sample statistic)
    if info.name in _BOOLEAN_FUNCTIONS:
        args = [t for t in signature if not isinstance(t, str)]
        nullable = info.name not in _NEVER_NULL_BOOLEAN and any(not is_known(t) or is_nullable(t) for t in args)
        return make_type("bool", nullable)
    return UNKNOWN


@functools.lru_cache(maxsize=4096)
def _derive_cached(name: str, urn: str | None, key: tuple[bytes | str, ...]) -> bytes | None:
    from optimizer.load.functions import _registry

    signature: list[Type | str] = [k if isinstance(k, str) else Type.FromString(k) for k in key]
    registry = _registry()
    try:
        match = registry.lookup_function(urn, name, signature) if urn is not None else None
        if match is None:
            matches = registry.list_functions_across_urns(name, signature)
            match = matches[0] if matches else None
    # substrait's derivation-expression evaluator raises bare Exception ("Unknown scalar type ..."),
    # besides TypeError/ValueError, on types it does not handle: nothing narrower names them.
    except Exception:
        return None
    if match is None or not isinstance(match[1], Type) or not is_known(match[1]):
        return None
    return match[1].SerializeToString()


def derive_output_type(name: str, signature: Sequence[Type | str], urn: str | None = None) -> Type:
    """The output type of standard function ``name`` for argument types ``signature`` (enum arguments as
    strings), per the standard extension YAMLs (the ``urn`` one first); an unknown type if none matches.

    >>> type_name(derive_output_type("sum", [make_type("decimal", precision=15, scale=2)]))
    'decimal<38,2>?'
    >>> type_name(derive_output_type("count", [make_type("i64", nullable=True)]))
    'i64'
    """
    if any(not isinstance(t, str) and not is_known(t) for t in signature):
        return UNKNOWN
    key = tuple(t if isinstance(t, str) else t.SerializeToString(deterministic=True) for t in signature)
    raw = _derive_cached(name, urn, key)
    return Type.FromString(raw) if raw is not None else UNKNOWN


def type_bounds(fn, schema: Schema, ctx: Derivation, path: str) -> None:
    """Type a window function's bound offsets (for their problems). A bound other than unbounded needs a
    bounds type: the spec asks a consumer to refuse ``BOUNDS_TYPE_UNSPECIFIED`` there rather than assume
    one (ibis-substrait writes it meaning ROWS; read as RANGE over a sort, ties summed together)."""
    kinds = [getattr(fn, n).WhichOneof("kind") if fn.HasField(n) else None for n in ("lower_bound", "upper_bound")]
    if fn.bounds_type == Expression.WindowFunction.BOUNDS_TYPE_UNSPECIFIED and any(
            k not in (None, "unbounded") for k in kinds):
        ctx.fail(f"{path}.bounds_type", "BOUNDS_TYPE_UNSPECIFIED with a CurrentRow, Preceding or Following bound: "
                 "the frame may be ROWS or RANGE and the plan does not say which")
    for name in ("lower_bound", "upper_bound"):
        if not fn.HasField(name):
            continue
        bound = getattr(fn, name)
        which = bound.WhichOneof("kind")
        if which in ("preceding", "following") and getattr(bound, which).HasField("offset_expr"):
            expr_type(getattr(bound, which).offset_expr, schema, ctx, f"{path}.{name}.{which}.offset_expr")


def _clauses_type(body, schema: Schema, ctx: Derivation, kpath: str,
                  check_if: Callable[[Expression, str], object]) -> Type:
    """The type of an ``if_then`` or ``switch_expression`` (``body``, with at least one clause): of its
    branches, each clause's ``then`` and the ``else``. ``check_if(expr, path)`` checks a clause's
    ``if`` in a full check (a condition, or a switch's literal)."""
    thens: list[Type] = []
    for i, clause in enumerate(body.ifs):
        cpath = f"{kpath}.ifs[{i}]"
        if ctx.full:
            check_if(getattr(clause, "if"), f"{cpath}.if")
        thens.append(expr_type(clause.then, schema, ctx, f"{cpath}.then"))
        if i:
            _same_kind(ctx, f"{cpath}.then", "this branch", thens[-1], "the first branch", thens[0])
    has_else = body.HasField("else")
    if has_else:
        thens.append(expr_type(getattr(body, "else"), schema, ctx, f"{kpath}.else"))
        _same_kind(ctx, f"{kpath}.else", "the else branch", thens[-1], "the first branch", thens[0])
    return _branches(thens, not has_else)


def _same_kind(ctx: Derivation, path: str, what: str, actual: Type, other: str, expected: Type) -> None:
    """Report a value of another kind than its expression's others (:func:`optimizer.schema.calls.kind_problem`)."""
    problem = kind_problem(what, actual, other, expected) if ctx.full else None
    if problem is not None:
        ctx.fail(path, problem)


def _branches(types: list[Type], may_be_missing: bool) -> Type:
    """Result type of a conditional: the first branch's type, nullable if any branch (or no else) is."""
    known = [t for t in types if is_known(t)]
    if not known:
        return UNKNOWN
    first = known[0]
    if may_be_missing or any(is_nullable(t) for t in known):
        return with_nullability(first, NULLABLE)
    return first


def _bool_result(nullable: bool) -> Type:
    return make_type("bool", nullable)


def expr_type(expr: Expression, schema: Schema, ctx: Derivation, path: str) -> Type:
    """Type of ``expr`` (whose path is ``path``) evaluated on records of ``schema``."""
    kind = expr.WhichOneof("rex_type")
    if kind is None:
        return ctx.fail(path, "expression is empty")
    kpath = f"{path}.{kind}"
    body = getattr(expr, kind)

    if kind == "literal":
        return literal_type(body, kpath, ctx)
    if kind == "selection":
        return field_ref_type(body, schema, ctx, kpath)
    if kind == "scalar_function":
        ctx.function(body.function_reference, kpath)
        if ctx.full:
            type_arguments(body, schema, ctx, kpath)
        result = function_output_type(body, ctx, kpath, "scalar function", schema)
        if ctx.unstated is not None and body.output_type.WhichOneof("kind") is None:
            ctx.unstated.append((body, result))
        if ctx.calls is not None:
            quiet = ctx.quiet()
            ctx.calls.append((body, [expr_type(a.value, schema, quiet, kpath) for a in body.arguments
                                     if a.WhichOneof("arg_type") == "value"]))
        return result
    if kind == "window_function":
        ctx.function(body.function_reference, kpath)
        if ctx.full:
            type_arguments(body, schema, ctx, kpath)
            for i, p in enumerate(body.partitions):
                expr_type(p, schema, ctx, f"{kpath}.partitions[{i}]")
            type_sorts(body.sorts, schema, ctx, kpath)
            type_bounds(body, schema, ctx, kpath)
        return function_output_type(body, ctx, kpath, "window function", schema)
    if kind == "cast":
        if ctx.full:
            source = expr_type(body.input, schema, ctx, f"{kpath}.input")
            if ctx.casts is not None:
                ctx.casts.append((kpath, source, body.type))
        if not is_known(body.type):
            return ctx.fail(kpath, "cast has no target type")
        return body.type
    if kind == "if_then":
        if not body.ifs:
            return ctx.fail(kpath, "if_then has no if clauses")
        result = _clauses_type(body, schema, ctx, kpath,
                               lambda cond, path: check_condition(cond, schema, ctx, path, "if_then condition"))
        if ctx.unstated is not None and not body.HasField("else"):
            ctx.unstated.append((body, result))
        return result
    if kind == "switch_expression":
        match = expr_type(body.match, schema, ctx, f"{kpath}.match") if ctx.full else UNKNOWN
        if not body.ifs:
            return ctx.fail(kpath, "switch_expression has no if clauses")
        return _clauses_type(
            body, schema, ctx, kpath,
            lambda value, path: _same_kind(ctx, path, "the case's value", literal_type(value, path, ctx), "the match", match))
    if kind == "singular_or_list":
        types = [expr_type(body.value, schema, ctx, f"{kpath}.value")]
        types += [expr_type(o, schema, ctx, f"{kpath}.options[{i}]") for i, o in enumerate(body.options)]
        for i, t in enumerate(types[1:]):
            _same_kind(ctx, f"{kpath}.options[{i}]", "the IN list's option", t, "the value", types[0])
        return _bool_result(any(is_nullable(t) for t in types if is_known(t)))
    if kind == "multi_or_list":
        values = [expr_type(v, schema, ctx, f"{kpath}.value[{i}]") for i, v in enumerate(body.value)]
        types = list(values)
        for i, rec in enumerate(body.options):
            if ctx.full and len(rec.fields) != len(body.value):
                ctx.warn(
                    f"{kpath}.options[{i}]",
                    f"record has {len(rec.fields)} fields, the value has {len(body.value)}",
                )
            options = [
                expr_type(f, schema, ctx, f"{kpath}.options[{i}].fields[{j}]") for j, f in enumerate(rec.fields)
            ]
            for j, (value, option) in enumerate(zip(values, options, strict=False)):
                _same_kind(ctx, f"{kpath}.options[{i}].fields[{j}]", "the IN list's field", option, "the value's", value)
            types += options
        return _bool_result(any(is_nullable(t) for t in types if is_known(t)))
    if kind == "subquery":
        return _subquery_type(body, schema, ctx, kpath)
    if kind == "nested":
        which = body.WhichOneof("nested_type")
        if which == "struct":
            types = [
                expr_type(f, schema, ctx, f"{kpath}.struct.fields[{i}]") for i, f in enumerate(body.struct.fields)
            ]
            return struct_type(types, body.nullable)
        if which == "list":
            if not body.list.values:
                return ctx.fail(
                    f"{kpath}.list", "list constructor has no values (its element type is unknown)"
                )
            elems = [
                expr_type(v, schema, ctx, f"{kpath}.list.values[{i}]") for i, v in enumerate(body.list.values)
            ]
            return make_type("list", body.nullable, type=merge_nullability(elems))
        if which == "map":
            kvs = body.map.key_values
            if not kvs:
                return ctx.fail(f"{kpath}.map", "map constructor has no entries (its types are unknown)")
            keys = [
                expr_type(kv.key, schema, ctx, f"{kpath}.map.key_values[{i}].key") for i, kv in enumerate(kvs)
            ]
            values = [
                expr_type(kv.value, schema, ctx, f"{kpath}.map.key_values[{i}].value") for i, kv in enumerate(kvs)
            ]
            return make_type(
                "map", body.nullable, key=merge_nullability(keys), value=merge_nullability(values)
            )
        return ctx.fail(kpath, "nested expression has no struct, list or map")
    if kind == "dynamic_parameter":
        if not is_known(body.type):
            return ctx.fail(kpath, "dynamic parameter has no type")
        return body.type
    if kind == "lambda":
        ctx.lambdas.append(body.parameters)
        try:
            ret = expr_type(body.body, schema, ctx, f"{kpath}.body")
        finally:
            ctx.lambdas.pop()
        return make_type("func", False, parameter_types=list(body.parameters.types), return_type=ret)
    if kind == "lambda_invocation":
        if ctx.full:
            for i, a in enumerate(body.arguments.fields):
                expr_type(a, schema, ctx, f"{kpath}.arguments.fields[{i}]")
        lam = getattr(body, "lambda")
        ctx.lambdas.append(lam.parameters)
        try:
            return expr_type(lam.body, schema, ctx, f"{kpath}.lambda.body")
        finally:
            ctx.lambdas.pop()
    if kind == "execution_context_variable":
        which = body.WhichOneof("execution_context_variable_type")
        if which is None:
            return ctx.fail(kpath, "execution context variable has no type")
        t = Type()
        target = {
            "current_timestamp": t.precision_timestamp_tz,
            "current_timezone": t.string,
            "current_date": t.date,
        }[which]
        target.CopyFrom(getattr(body, which))
        return t
    if kind == "detached_expression_ordinal":
        ordinal = body
        if ctx.detached is None:
            raise UnsupportedError("detached expression outside a plan relation", kpath)
        if not 0 <= ordinal < len(ctx.detached):
            return ctx.fail(kpath, f"detached expression {ordinal} of {len(ctx.detached)}")
        if ordinal in ctx.detached_active:
            return ctx.fail(kpath, f"detached expression {ordinal} refers to itself")
        ctx.detached_active.add(ordinal)
        try:
            return expr_type(ctx.detached[ordinal], schema, ctx, f"detached_expressions[{ordinal}]")
        finally:
            ctx.detached_active.discard(ordinal)
    return ctx.fail(kpath, f"unsupported expression kind {kind}")


def check_condition(expr: Expression, schema: Schema, ctx: Derivation, path: str, what: str) -> None:
    """Type-check a boolean condition (checking mode)."""
    t = expr_type(expr, schema, ctx, path)
    if is_known(t) and type_kind(t) != "bool":
        ctx.warn(path, f"{what} must be boolean, not {type_name(t)}")


def _subquery_type(sub: Expression.Subquery, schema: Schema, ctx: Derivation, path: str) -> Type:
    which = sub.WhichOneof("subquery_type")
    spath = f"{path}.{which}"
    if which == "scalar":
        inner = ctx.subtree(sub.scalar.input, schema, f"{spath}.input")
        if inner is None:
            return UNKNOWN
        if len(inner) != 1:
            return ctx.fail(spath, f"scalar subquery returns {len(inner)} columns, not 1")
        return with_nullability(inner.types[0], NULLABLE)
    if which == "in_predicate":
        if ctx.full:
            needles = [
                expr_type(n, schema, ctx, f"{spath}.needles[{i}]") for i, n in enumerate(sub.in_predicate.needles)
            ]
            inner = ctx.subtree(sub.in_predicate.haystack, schema, f"{spath}.haystack")
            if inner is not None and len(inner) != len(needles):
                ctx.warn(spath, f"IN subquery compares {len(needles)} values with {len(inner)} columns")
        return _bool_result(True)
    if which == "set_predicate":
        if ctx.full:
            ctx.subtree(sub.set_predicate.tuples, schema, f"{spath}.tuples")
        return _bool_result(False)
    if which == "set_comparison":
        if ctx.full:
            expr_type(sub.set_comparison.left, schema, ctx, f"{spath}.left")
            inner = ctx.subtree(sub.set_comparison.right, schema, f"{spath}.right")
            if inner is not None and len(inner) != 1:
                ctx.warn(f"{spath}.right", f"ANY/ALL subquery returns {len(inner)} columns, not 1")
        return _bool_result(True)
    return ctx.fail(path, "subquery has no kind")


def aggregate_type(fn: AggregateFunction, src: Schema, ctx: Derivation, path: str) -> Type:
    """The type of an aggregate function (a measure) on records of ``src``: its output type."""
    ctx.function(fn.function_reference, path)
    if ctx.full:
        type_arguments(fn, src, ctx, path)
        type_sorts(fn.sorts, src, ctx, path)
    return function_output_type(fn, ctx, path, "aggregate function", src)

