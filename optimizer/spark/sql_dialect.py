"""Spark SQL as sqlglot prints it for the Spark backend: the dialect, Spark types as SQL text, and Python
values as literals of the type ``F.lit`` gives them (``int``: INT or BIGINT by range, ``float``: DOUBLE,
``Decimal``: its own precision and scale).

Spark substitutes ``${...}`` in SQL text before parsing it (``spark.sql.variable.substitute``, on by
default): every ``$`` in a string literal is written ``\\u0024``, which Spark unescapes only afterwards.

>>> sql_text(literal("${env:HOME}"))
"'\\\\u0024{env:HOME}'"
>>> sql_text(literal(2**31))  # past INT: a BIGINT, as F.lit types it
'2147483648'
"""

from __future__ import annotations

import datetime as _dt
import decimal
import math
import re
from typing import Any

from pyspark.sql import types as T
from sqlglot import exp
from sqlglot.dialects.spark import Spark

from optimizer.errors import UnsupportedError

__all__ = ["LONG_MAX", "LONG_MIN", "cast_target", "is_int_text", "literal", "sql_text", "type_sql", "typed_as"]

_INT_MIN, _INT_MAX = -(2**31), 2**31 - 1
LONG_MIN, LONG_MAX = -(2**63), 2**63 - 1


class _SparkSQL(Spark):
    """Spark's dialect with ``$`` in string literals written ``\\u0024`` (no ``${`` for substitution)."""

    class Generator(Spark.Generator):
        # The builders write plain Spark SQL: no rewrites of the tree while printing (sqlglot's Spark
        # dialect would look for QUALIFY, DISTINCT ON, UNNEST and ANY in every SELECT, and for JSON in
        # every cast), which halves the time to print a TPC-H plan.
        TRANSFORMS = {k: v for k, v in Spark.Generator.TRANSFORMS.items() if k is not exp.Select}

        def cast_sql(self, expression: exp.Cast, safe_prefix: str | None = None) -> str:
            prefix = "TRY_" if expression.args.get("safe") else ""
            return f"{prefix}CAST({self.sql(expression, 'this')} AS {self.sql(expression, 'to')})"

        def trycast_sql(self, expression: exp.TryCast) -> str:
            return f"TRY_CAST({self.sql(expression, 'this')} AS {self.sql(expression, 'to')})"

        def escape_str(self, text: str, *args: Any, **kwargs: Any) -> str:
            return super().escape_str(text, *args, **kwargs).replace("$", "\\u0024")


_DIALECT = _SparkSQL()


def sql_text(e: exp.Expression) -> str:
    # Each tree is printed once and dropped: no defensive deep copy (half of the printing time)
    return _DIALECT.generate(e, copy=False)


# ------------------------------------------------------------------------------------------ types


def _quote(name: str) -> str:
    return "`" + name.replace("`", "``") + "`"


def type_sql(dt: T.DataType | str) -> str:
    """A Spark type as SQL text (struct field names back-quoted).

    >>> type_sql(T.StructType([T.StructField("a b", T.DecimalType(15, 2))]))
    'struct<`a b`:decimal(15,2)>'
    """
    if isinstance(dt, str):
        return dt
    if isinstance(dt, T.StructType):
        return "struct<" + ",".join(f"{_quote(f.name)}:{type_sql(f.dataType)}" for f in dt.fields) + ">"
    if isinstance(dt, T.ArrayType):
        return f"array<{type_sql(dt.elementType)}>"
    if isinstance(dt, T.MapType):
        return f"map<{type_sql(dt.keyType)},{type_sql(dt.valueType)}>"
    if isinstance(dt, T.CalendarIntervalType):
        return "interval"
    if isinstance(dt, T.StringType):
        return "string"
    return dt.simpleString()


def cast_target(dt: T.DataType | str) -> exp.Expression:
    """A cast target: the type's SQL text as it is (no parsing: Spark reads it)."""
    return exp.Var(this=type_sql(dt))


def typed_as(e: exp.Expression, to: exp.Var) -> bool:
    """Whether ``e`` is already of the type ``to``: a cast (or try-cast) to it, or a double literal
    (``1.5D``) cast to ``double``. Casting it again changes nothing, and the compiler casts to be sure
    of a type at each call it nests (``CAST(CAST(x AS double) AS double)``), which Spark's analyzer and
    optimizer then walk once per copy."""
    if isinstance(e, exp.Cast):  # exp.TryCast too
        target = e.args.get("to")
        return isinstance(target, exp.Var) and target.this == to.this
    return to.this == "double" and isinstance(e, exp.Literal) and not e.is_string and e.this.endswith("D")


def is_int_text(text: str) -> bool:
    return re.fullmatch(r"-?\d+", text) is not None



def _string(value: str) -> exp.Expression:
    return exp.Literal.string(value)


def _decimal(value: decimal.Decimal) -> exp.Expression:
    """``F.lit(Decimal)``: the Java BigDecimal's type (negative scales become scale 0)."""
    if not value.is_finite():
        raise UnsupportedError(f"decimal value {value} has no Spark literal")
    sign, digits, exponent = value.as_tuple()
    assert isinstance(exponent, int)
    scale = max(0, -exponent)
    precision = max(len(digits) + max(0, exponent), scale, 1)
    if precision > 38:
        raise UnsupportedError(f"decimal value {value} has more than 38 digits")
    return exp.Cast(this=_string(f"{value:f}"), to=cast_target(f"decimal({precision},{scale})"))


def literal(value: Any) -> exp.Expression:
    if value is None:
        return exp.Null()
    if isinstance(value, bool):
        return exp.Boolean(this=value)
    if isinstance(value, int):
        if value == _INT_MIN:  # -2147483648 is read as -(2147483648), a BIGINT
            return exp.Cast(this=exp.Literal.number(str(value)), to=cast_target("int"))
        if LONG_MIN < value <= LONG_MAX:
            return exp.Literal.number(str(value))  # INT when it fits, else BIGINT: F.lit's types
        if value == LONG_MIN:
            return exp.Cast(this=exp.Literal.number(str(value)), to=cast_target("bigint"))
        raise UnsupportedError(f"integer {value} does not fit a Spark BIGINT")
    if isinstance(value, float):
        if math.isnan(value):
            return exp.Cast(this=_string("NaN"), to=cast_target("double"))
        if math.isinf(value):
            return exp.Cast(this=_string("Infinity" if value > 0 else "-Infinity"), to=cast_target("double"))
        text = repr(value)
        if "e" not in text and "." not in text:
            text += ".0"
        return exp.Literal.number(text + "D")  # without D, 0.5 is a DECIMAL in Spark SQL
    if isinstance(value, str):
        return _string(value)
    if isinstance(value, decimal.Decimal):
        return _decimal(value)
    if isinstance(value, bytes | bytearray):
        return exp.Anonymous(this="unhex", expressions=[_string(bytes(value).hex())])
    if isinstance(value, _dt.datetime):
        raise UnsupportedError("datetime values are written by the backend as typed casts")
    if isinstance(value, _dt.date):
        return exp.Cast(this=_string(value.isoformat()), to=cast_target("date"))
    if isinstance(value, _dt.timedelta):
        micros = (value.days * 86_400 + value.seconds) * 1_000_000 + value.microseconds
        days, rest = divmod(micros, 86_400_000_000)  # days may be negative, rest is not
        secs = decimal.Decimal(rest).scaleb(-6)
        return exp.Anonymous(
            this="make_dt_interval",
            expressions=[exp.Literal.number(str(days)), exp.Literal.number("0"), exp.Literal.number("0"),
                         _decimal(secs.quantize(decimal.Decimal("0.000001")))],
        )
    raise UnsupportedError(f"no Spark SQL literal for a {type(value).__name__}")
