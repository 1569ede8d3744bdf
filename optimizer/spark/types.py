"""Substrait types and literals as Spark sees them: Spark types of Substrait types and back, a
literal's Python value and Substrait type, and a column that fails the query with a plan path.
The expression compiler and the function translations both use them."""

from __future__ import annotations

import datetime as _dt
import decimal
from collections.abc import Callable, Iterator
from typing import Any

from pyspark.sql import types as T
from substrait.proto import Expression, NamedStruct, Type

from optimizer.errors import PlanError, UnsupportedError
from optimizer.schema.expressions import SIMPLE_LITERAL_KINDS
from optimizer.schema.types import is_nullable, make_type, type_kind
from optimizer.spark.sql_columns import Col
from optimizer.spark.sql_columns import functions as F

# ----------------------------------------------------------------------------------------------- types

SIMPLE_SPARK_TYPES: dict[str, Callable[[], T.DataType]] = {
    "bool": T.BooleanType,
    "i8": T.ByteType,
    "i16": T.ShortType,
    "i32": T.IntegerType,
    "i64": T.LongType,
    "fp32": T.FloatType,
    "fp64": T.DoubleType,
    "string": T.StringType,
    "varchar": T.StringType,
    "fixed_char": T.StringType,
    "binary": T.BinaryType,
    "fixed_binary": T.BinaryType,
    "uuid": T.StringType,
    "date": T.DateType,
    "precision_timestamp": T.TimestampNTZType,
    "precision_timestamp_tz": T.TimestampType,
    "interval_year": T.YearMonthIntervalType,
    "interval_day": T.DayTimeIntervalType,
    "interval_compound": T.CalendarIntervalType,
}


def substrait_type_to_spark(
    t: Type, names: Iterator[str] | None = None, path: str | None = None
) -> T.DataType:
    """The Spark type that holds values of the Substrait type ``t``.

    ``names`` (an iterator over a ``NamedStruct``'s depth-first names) names the fields of nested
    structs; without it they are ``f0``, ``f1``, ...  Types Spark cannot hold raise
    :class:`UnsupportedError`: ``precision_time`` (Spark's TIME type is disabled by default), user-defined
    types and type expressions. Timestamp precisions above 6 map to Spark's microsecond timestamps
    (sub-microsecond digits cannot be represented; see docs/semantics.md).
    """
    kind = t.WhichOneof("kind")
    if kind in SIMPLE_SPARK_TYPES:
        return SIMPLE_SPARK_TYPES[kind]()
    if kind == "decimal":
        p, s = t.decimal.precision, t.decimal.scale
        if not 0 < p <= 38 or not 0 <= s <= p:
            raise PlanError(f"invalid decimal type DECIMAL({p},{s})", path)
        return T.DecimalType(p, s)
    if kind == "struct":
        fields = []
        for i, ft in enumerate(t.struct.types):
            name = next(names, None) if names is not None else f"f{i}"
            if name is None:
                raise PlanError("the schema has fewer names than fields (nested ones counted)", path)
            fields.append(T.StructField(name, substrait_type_to_spark(ft, names, path), is_nullable(ft)))
        return T.StructType(fields)
    if kind == "list":
        return T.ArrayType(substrait_type_to_spark(t.list.type, names, path), is_nullable(t.list.type))
    if kind == "map":
        return T.MapType(
            substrait_type_to_spark(t.map.key, names, path),
            substrait_type_to_spark(t.map.value, names, path),
            is_nullable(t.map.value),
        )
    if kind == "precision_time":
        raise UnsupportedError(
            "the time type is not supported by the Spark backend (Spark's TIME is disabled)", path
        )
    if kind is None:
        raise PlanError("type is not set", path)
    raise UnsupportedError(f"type '{kind}' is not supported by the Spark backend", path)


def named_struct_to_spark(ns: NamedStruct, path: str | None = None) -> T.StructType:
    """A ``NamedStruct`` (a schema) as a Spark ``StructType`` with its names (nested ones too)."""
    names = iter(ns.names)
    # Top-level names only (tolerated as top_level_names tolerates them): nested fields are f0, f1, ...
    nested = None if len(ns.names) == len(ns.struct.types) else names
    fields = []
    for ft in ns.struct.types:
        try:
            name = next(names)
        except StopIteration:
            raise PlanError("the schema has fewer names than fields", path) from None
        fields.append(T.StructField(name, substrait_type_to_spark(ft, nested, path), is_nullable(ft)))
    return T.StructType(fields)


def spark_type_to_kind(dt: T.DataType | None) -> str | None:
    """The Substrait kind name of a Spark type (the reverse of the mapping above, coarsely)."""
    if dt is None:
        return None
    table = [
        (T.BooleanType, "bool"),
        (T.ByteType, "i8"),
        (T.ShortType, "i16"),
        (T.IntegerType, "i32"),
        (T.LongType, "i64"),
        (T.FloatType, "fp32"),
        (T.DoubleType, "fp64"),
        (T.DecimalType, "decimal"),
        (T.StringType, "string"),
        (T.BinaryType, "binary"),
        (T.DateType, "date"),
        (T.TimestampNTZType, "precision_timestamp"),
        (T.TimestampType, "precision_timestamp_tz"),
        (T.YearMonthIntervalType, "interval_year"),
        (T.DayTimeIntervalType, "interval_day"),
        (T.CalendarIntervalType, "interval_compound"),
        (T.StructType, "struct"),
        (T.ArrayType, "list"),
        (T.MapType, "map"),
    ]
    for cls, kind in table:
        if isinstance(dt, cls):
            return kind
    return None


def _spark_to_substrait_type(dt: T.DataType) -> Type | None:
    """A nullable Substrait type for a Spark type, where one is obvious (used when the plan gives none)."""
    kind = spark_type_to_kind(dt)
    if kind is None:
        return None
    if kind == "decimal":
        return make_type(kind, True, precision=dt.precision, scale=dt.scale)
    if kind in ("precision_timestamp", "precision_timestamp_tz", "interval_day"):
        return make_type(kind, True, precision=6)  # Spark's are microseconds
    if kind == "struct":
        return make_type(kind, True, types=[_spark_to_substrait_type(f.dataType) or Type() for f in dt.fields])
    if kind == "list":
        return make_type(kind, True, type=_spark_to_substrait_type(dt.elementType) or Type())
    if kind == "map":
        return make_type(kind, True, key=_spark_to_substrait_type(dt.keyType) or Type(),
                         value=_spark_to_substrait_type(dt.valueType) or Type())
    return make_type(kind, True)


# -------------------------------------------------------------------------------------------- literals


class _NotLiteral:
    def __repr__(self) -> str:
        return "NOT_LITERAL"


NOT_LITERAL: Any = _NotLiteral()

EPOCH = _dt.datetime(1970, 1, 1)
EXACT_DECIMAL = decimal.Context(prec=100)  # (the default context rounds to 28 digits; decimals have up to 38)


def decimal_value(d: Expression.Literal.Decimal) -> decimal.Decimal:
    unscaled = int.from_bytes(d.value, "little", signed=True)
    return decimal.Decimal(unscaled).scaleb(-d.scale, EXACT_DECIMAL)


def to_micros(value: int, precision: int, path: str | None) -> int:
    if not 0 <= precision <= 12:
        raise PlanError(f"invalid timestamp precision {precision}", path)
    if precision <= 6:
        return value * 10 ** (6 - precision)
    factor = 10 ** (precision - 6)
    if value % factor:
        raise UnsupportedError(
            f"a literal with sub-microsecond digits (precision {precision}) cannot be represented in Spark",
            path,
        )
    return value // factor


def interval_day_micros(iv: Expression.Literal.IntervalDayToSecond, path: str | None) -> int:
    precision = iv.precision
    sub = iv.subseconds  # (older plans' "microseconds" are upgraded to precision 6 subseconds)
    return (iv.days * 86_400 + iv.seconds) * 1_000_000 + to_micros(sub, precision, path)


def literal_value(expr: Expression) -> Any:
    """The Python value of a literal expression (None for a null literal), else :data:`NOT_LITERAL`.

    Only scalar literals are returned (numbers, strings, bytes, booleans, decimals, dates); other
    literal kinds give :data:`NOT_LITERAL` too. A literal wrapped in a cast is looked through when the
    cast does not change its meaning (producers cast literals to the column type).
    """
    kind = expr.WhichOneof("rex_type")
    if kind == "cast" and expr.cast.input.WhichOneof("rex_type") == "literal":
        value = literal_value(expr.cast.input)
        target = type_kind(expr.cast.type)
        if value is None:
            return None
        if isinstance(value, bool) or value is NOT_LITERAL:
            return value if target == "bool" else NOT_LITERAL
        if isinstance(value, int) and target in ("i8", "i16", "i32", "i64"):
            return value
        if isinstance(value, int | float) and target in ("fp32", "fp64"):
            return float(value)
        if isinstance(value, str) and target in ("string", "varchar"):
            return value
        return NOT_LITERAL
    if kind != "literal":
        return NOT_LITERAL
    lit = expr.literal
    lk = lit.WhichOneof("literal_type")
    if lk in (
        "boolean",
        "i8",
        "i16",
        "i32",
        "i64",
        "fp32",
        "fp64",
        "string",
        "binary",
        "fixed_char",
        "fixed_binary",
    ):
        return getattr(lit, lk)
    if lk == "var_char":
        return lit.var_char.value
    if lk == "decimal":
        return decimal_value(lit.decimal)
    if lk == "date":
        return EPOCH.date() + _dt.timedelta(days=lit.date)
    if lk == "null":
        return None
    return NOT_LITERAL


def literal_type(lit: Expression.Literal) -> Type | None:
    """The Substrait type of a literal."""
    lk = lit.WhichOneof("literal_type")
    n = Type.NULLABILITY_NULLABLE if lit.nullable else Type.NULLABILITY_REQUIRED
    if lk in SIMPLE_LITERAL_KINDS:
        return make_type(SIMPLE_LITERAL_KINDS[lk], lit.nullable)
    if lk == "interval_compound":
        return make_type(lk, lit.nullable)
    if lk == "interval_day_to_second":
        return make_type("interval_day", lit.nullable, precision=lit.interval_day_to_second.precision)
    if lk in ("fixed_char", "fixed_binary"):
        return make_type(lk, lit.nullable, length=len(getattr(lit, lk)))
    if lk == "var_char":
        return make_type("varchar", lit.nullable, length=lit.var_char.length)
    if lk == "decimal":
        return make_type("decimal", lit.nullable, precision=lit.decimal.precision, scale=lit.decimal.scale)
    if lk in ("precision_time", "precision_timestamp", "precision_timestamp_tz"):
        return make_type(lk, lit.nullable, precision=getattr(lit, lk).precision)
    if lk == "null":
        return lit.null if lit.null.WhichOneof("kind") else None
    if lk == "empty_list":
        return Type(list=lit.empty_list)
    if lk == "empty_map":
        return Type(map=lit.empty_map)
    if lk == "list" and lit.list.values:
        et = literal_type(lit.list.values[0])
        return Type(list=Type.List(type=et, nullability=n)) if et is not None else None
    if lk == "map" and lit.map.key_values:
        kv = lit.map.key_values[0]
        kt, vt = literal_type(kv.key), literal_type(kv.value)
        if kt is None or vt is None:
            return None
        return Type(map=Type.Map(key=kt, value=vt, nullability=n))
    if lk == "struct":
        types = [literal_type(f) for f in lit.struct.fields]
        if any(t is None for t in types):
            return None
        return Type(struct=Type.Struct(types=types, nullability=n))
    return None


def raise_at(message: str, path: str | None) -> Col:
    """A column that fails the query with ``path: message`` when evaluated."""
    text = f"{path}: {message}" if path else message
    return F.raise_error(F.lit(text))


def or_fail(value: Col, null_is_right: Col, failure: Col) -> Col:
    """``value``; where it is null, null if ``null_is_right`` (never null itself) holds, else ``failure``.

    ``COALESCE(value, CASE WHEN null_is_right THEN NULL ELSE failure END)``: ``value`` is written once
    (checks nest, and a ``CASE`` that tests and returns it doubles the text at each level) and the
    check runs only on the rows where ``value`` is null."""
    return F.coalesce(value, F.when(null_is_right, F.lit(None)).otherwise(failure))
