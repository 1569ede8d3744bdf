"""Columns kept as Spark SQL text until Spark needs them: the backend's answer to Py4J round trips.

Why: every PySpark ``Column`` call is a round trip to the JVM (about 0.15 ms on a 2-core machine), and
a JVM object that Python later frees costs another. Building TPC-H Q1 with plain ``Column`` calls took
about 1,400 round trips. :class:`SqlColumn` is a ``Column`` that holds the expression as SQL text
instead; operators, ``cast``, ``alias``, ``isNull``, ``CASE``, literals, column references and the
common functions (:data:`functions`, a drop-in for ``pyspark.sql.functions``) build more text without
touching the JVM. The text is parsed by Spark only when it is needed: :func:`select` hands a whole
projection to ``Dataset.selectExpr`` in three round trips, and any other PySpark API that reads
``Column._jc`` gets ``functions.expr(text)`` (one round trip), so everything this module does not know
falls back to the ordinary ``Column`` API, with the same meaning.

Equivalence: each rendering is the SQL form of the expression PySpark's own call would build
(``a + b`` is ``Add`` either way; ``CAST(x AS t)`` is ``Column.cast``; ``lit`` renders the literal of
the type PySpark's ``lit`` gives: ``int`` is INT or BIGINT by range, ``float`` DOUBLE, ``Decimal`` its
own precision and scale). Values that have no exact SQL text here (dates, bytes, timedeltas, ...) use
the ordinary API. Text mode needs the default string-literal escaping
(``spark.sql.parser.escapedStringLiterals=false``); :func:`text_mode_supported` checks it.

>>> x = col("`a`")
>>> (x + 1).sql()
'(`a` + 1)'
>>> when(x.isNull(), lit("none")).otherwise(x.cast("string")).alias("b").sql()
"CASE WHEN (`a` IS NULL) THEN 'none' ELSE CAST(`a` AS string) END AS `b`"
>>> render_literal(-2147483648), render_literal(2**40), render_literal(0.5), render_literal("it's")
('CAST(-2147483648 AS INT)', '1099511627776L', '0.5D', "'it\\\\'s'")
"""

from __future__ import annotations

import decimal
import math
import re
import threading
from collections.abc import Iterable
from typing import Any

from pyspark.sql import DataFrame
from pyspark.sql import functions as _F
from pyspark.sql import types as T
from pyspark.sql.classic.column import Column as _ClassicColumn
from pyspark.sql.classic.dataframe import DataFrame as _ClassicDataFrame

__all__ = [
    "SqlColumn",
    "col",
    "functions",
    "install_jvm_caches",
    "lit",
    "render_literal",
    "select",
    "set_session",
    "text_mode_supported",
    "when",
]

_INT_MIN, _INT_MAX = -(2**31), 2**31 - 1
_LONG_MIN, _LONG_MAX = -(2**63), 2**63 - 1
_SEPARATOR = "\x00"  # joins a projection's texts for one round trip; string literals escape it
_FUNCTION_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def render_literal(value: Any) -> str | None:
    """The SQL text of ``F.lit(value)`` (same type and value), or None if there is none here."""
    if value is None:
        return "NULL"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        if 0 <= value <= _INT_MAX:
            return str(value)
        if value == _INT_MIN:  # 2147483648 alone is a BIGINT literal
            return f"CAST({value} AS INT)"
        if _INT_MIN < value < 0:
            return f"({value})"
        if _INT_MAX < value <= _LONG_MAX:
            return f"{value}L"
        if _LONG_MIN < value < 0:
            return f"({value}L)"
        return None
    if isinstance(value, float):
        if math.isnan(value):
            return "CAST('NaN' AS DOUBLE)"
        if math.isinf(value):
            return "CAST('Infinity' AS DOUBLE)" if value > 0 else "CAST('-Infinity' AS DOUBLE)"
        text = repr(value)
        if "e" not in text and "." not in text:
            text += ".0"
        return f"({text}D)" if text.startswith("-") else f"{text}D"
    if isinstance(value, str):
        return _string(value)
    if isinstance(value, decimal.Decimal):
        return _decimal(value)
    return None


#: False when the session reads backslashes in string literals literally (then strings use ``F.lit``).
_backslash_escapes = True


def set_session(spark) -> None:
    """Adapt to ``spark``'s parser settings (called by :class:`~optimizer.spark.SparkBackend`)."""
    global _backslash_escapes
    _backslash_escapes = text_mode_supported(spark)


def _string(value: str) -> str | None:
    """A string literal that Spark reads back exactly: backslash, quote, the separator and ``$`` escaped.

    ``$`` is written ``\\u0024``: Spark substitutes ``${env:X}``, ``${system:X}``, ``${sparkconf:X}`` in
    SQL text before parsing it (``spark.sql.variable.substitute``, on by default) and unescapes
    ``\\u0024`` only afterwards, so no ``${`` is in the text the substitution sees.
    """
    if not _backslash_escapes:
        return None
    escaped = (value.replace("\\", "\\\\").replace("'", "\\'").replace(_SEPARATOR, "\\u0000")
               .replace("$", "\\u0024"))
    return f"'{escaped}'"


def _decimal(value: decimal.Decimal) -> str | None:
    """``F.lit(Decimal)``: Spark's type of the Java BigDecimal (negative scales become scale 0)."""
    if not value.is_finite():
        return None
    sign, digits, exponent = value.as_tuple()
    assert isinstance(exponent, int)
    scale = max(0, -exponent)
    unscaled_digits = len(digits) + max(0, exponent)
    precision = max(unscaled_digits, scale, 1)
    if precision > 38:
        return None
    return f"CAST('{value:f}' AS DECIMAL({precision},{scale}))"


_TYPE_NAMES = {"boolean", "tinyint", "smallint", "int", "integer", "bigint", "float", "double", "string",
               "binary", "date", "timestamp", "timestamp_ntz"}


def _type_sql(data_type: Any) -> str | None:
    """A cast target as SQL, for the atomic types (complex types keep the ordinary API)."""
    if isinstance(data_type, str):
        return data_type if data_type.strip().lower() in _TYPE_NAMES else None
    if isinstance(data_type, T.StringType):
        return "string" if type(data_type) is T.StringType and data_type.collation in (None, "UTF8_BINARY") else None
    if isinstance(data_type, T.DecimalType):
        return f"decimal({data_type.precision},{data_type.scale})"
    if isinstance(data_type, T.DayTimeIntervalType | T.YearMonthIntervalType):
        return data_type.simpleString()
    if isinstance(data_type, T.BooleanType | T.ByteType | T.ShortType | T.IntegerType | T.LongType | T.FloatType
                  | T.DoubleType | T.BinaryType | T.DateType | T.TimestampType | T.TimestampNTZType):
        return data_type.simpleString()
    return None


def _quote(name: str) -> str:
    return "`" + name.replace("`", "``") + "`"


def text_name(name: str) -> bool:
    """Whether a name can be written in SQL text as a back-quoted identifier and read back as written.

    A back-quoted identifier has no escapes, so a ``$`` would reach Spark's variable substitution
    (``${env:HOME}`` in a name becomes the home directory): such names use the DataFrame API
    (``Column.alias``, ``F.col``), which no SQL parser reads. A NUL is the projection separator.
    """
    return "$" not in name and _SEPARATOR not in name


class SqlColumn(_ClassicColumn):
    """A PySpark ``Column`` held as SQL text; ``_jc`` (the JVM column) is parsed on first use."""

    def __new__(cls, *args: Any, **kwargs: Any) -> SqlColumn:
        return object.__new__(cls)

    def __init__(self, text: str, alias: str | None = None) -> None:  # noqa: D107 -- the base sets _jc
        self._text = text
        self._alias = alias
        self._jc_value = None

    def __getnewargs__(self) -> tuple:
        return (self._text, self._alias)

    @property
    def _jc(self):  # type: ignore[override]
        if self._jc_value is None:
            self._jc_value = _F.expr(self.sql())._jc
        return self._jc_value

    def sql(self) -> str:
        """The text as a named expression (with ``AS`` when aliased)."""
        return self._text if self._alias is None else f"{self._text} AS {_quote(self._alias)}"

    def __repr__(self) -> str:
        return f"SqlColumn<{self.sql()}>"

    # ----------------------------------------------------------------------------------- operators

    # The binary operators (``+ - * / % = != < <= > >= <=> AND OR``) are set below the class by _operator().

    def __invert__(self):
        return SqlColumn(f"(NOT {self._text})")

    def __neg__(self):
        return SqlColumn(f"(- {self._text})")

    __hash__ = None  # type: ignore[assignment] -- like Column: == builds an expression

    # ------------------------------------------------------------------------------------- methods

    def isNull(self):  # noqa: N802
        return SqlColumn(f"({self._text} IS NULL)")

    def isNotNull(self):  # noqa: N802
        return SqlColumn(f"({self._text} IS NOT NULL)")

    def cast(self, dataType):  # noqa: N803
        target = _type_sql(dataType)
        if target is None:
            return super().cast(dataType)
        return SqlColumn(f"CAST({self._text} AS {target})")

    def try_cast(self, dataType):  # noqa: N803
        target = _type_sql(dataType)
        if target is None:
            return super().try_cast(dataType)
        return SqlColumn(f"TRY_CAST({self._text} AS {target})")

    def alias(self, *alias: str, **kwargs: Any):
        if len(alias) != 1 or kwargs or not isinstance(alias[0], str) or not text_name(alias[0]):
            return super().alias(*alias, **kwargs)
        return SqlColumn(self._text, alias[0])

    name = alias

    def isin(self, *values: Any):
        if len(values) == 1 and hasattr(type(values[0]), "sql_text"):  # a SqlFrame
            return SqlColumn(f"({self._text} IN ({values[0].sql_text()}))")
        if len(values) == 1 and isinstance(values[0], list | set | tuple):
            values = tuple(values[0])
        texts = [_operand(v) for v in values]
        if not texts or any(t is None for t in texts):
            return super().isin(*values)
        return SqlColumn(f"({self._text} IN ({', '.join(texts)}))")  # type: ignore[arg-type]

    def startswith(self, other: Any):
        return self._string_predicate("startswith", other)

    def endswith(self, other: Any):
        return self._string_predicate("endswith", other)

    def contains(self, other: Any):
        return self._string_predicate("contains", other)

    def _string_predicate(self, name: str, other: Any):
        # Column.<name> builds the expression that the SQL function of the same name resolves to.
        text = _operand(other)
        if text is None:
            return getattr(super(), name)(other)
        return SqlColumn(f"{name}({self._text}, {text})")

    def substr(self, startPos: Any, length: Any):  # noqa: N803
        start, count = _operand(startPos), _operand(length)
        if start is None or count is None or isinstance(startPos, bool) or isinstance(length, bool):
            return super().substr(startPos, length)
        return SqlColumn(f"substring({self._text}, {start}, {count})")

    # Sort orders (asc, desc, asc_nulls_first, ...) are set below SqlSortOrder by _sort_order().


class SqlSortOrder(SqlColumn):
    """A sort order (``x ASC NULLS FIRST``): SQL text for ``ORDER BY``, not an expression."""

    def __init__(self, base: SqlColumn, method: str, sql: str) -> None:
        super().__init__(f"{base._text} {sql}")
        self._base = base
        self._method = method

    def __getnewargs__(self) -> tuple:
        return (self._base, self._method, self._text[len(self._base._text) + 1 :])

    @property
    def _jc(self):  # type: ignore[override]
        if self._jc_value is None:
            self._jc_value = getattr(self._base._jc, self._method)()
        return self._jc_value

    def order_sql(self) -> str:
        """The ``ORDER BY`` item."""
        return self._text


def _sort_order(method: str) -> None:
    """``SqlColumn.<method>``: text for ORDER BY (``order_sql``); as a JVM column, the base column's own
    ``<method>()``."""
    sql = method.replace("_", " ").upper()  # asc_nulls_first -> ASC NULLS FIRST

    def order(self: SqlColumn):
        return SqlSortOrder(self, method, sql)

    order.__name__ = method
    setattr(SqlColumn, method, order)


for _method in ("asc", "desc", "asc_nulls_first", "asc_nulls_last", "desc_nulls_first", "desc_nulls_last"):
    _sort_order(_method)


def _operator(name: str, sql: str, reflected_of: str | None = None) -> None:
    """``SqlColumn.<name>``: text when the other operand has text, else PySpark's own operator.

    A reflected operator (``other + self``) whose left operand is an ordinary Column calls that
    Column's forward operator: PySpark's reflected operators assume the left operand is a literal.
    """

    def method(self: SqlColumn, other: Any):
        text = _operand(other)
        if text is not None:
            left, right = (text, self._text) if reflected_of else (self._text, text)
            return SqlColumn(f"({left} {sql} {right})")
        if reflected_of and isinstance(other, _ClassicColumn):
            return getattr(_ClassicColumn, reflected_of)(other, self)
        return getattr(_ClassicColumn, name)(self, other)

    method.__name__ = name
    setattr(SqlColumn, name, method)


for _name, _sql in {"__add__": "+", "__sub__": "-", "__mul__": "*", "__truediv__": "/", "__mod__": "%",
                    "__eq__": "=", "__ne__": "!=", "__lt__": "<", "__le__": "<=", "__gt__": ">",
                    "__ge__": ">=", "eqNullSafe": "<=>", "__and__": "AND", "__or__": "OR"}.items():
    _operator(_name, _sql)
for _name, (_sql, _forward) in {"__radd__": ("+", "__add__"), "__rsub__": ("-", "__sub__"),
                                "__rmul__": ("*", "__mul__"), "__rtruediv__": ("/", "__truediv__"),
                                "__rmod__": ("%", "__mod__"), "__rand__": ("AND", "__and__"),
                                "__ror__": ("OR", "__or__")}.items():
    _operator(_name, _sql, _forward)


class SqlCase(SqlColumn):
    """``CASE WHEN ... END`` under construction (``when(...).when(...).otherwise(...)``).

    Spark's ``Column.when`` only extends a ``when`` it built itself, so a branch that has no text
    replays the whole chain through ``pyspark.sql.functions.when``.
    """

    def __init__(self, branches: list[tuple[Any, Any]], otherwise: Any = None, has_otherwise: bool = False) -> None:
        self._branches = branches
        self._else = otherwise
        self._has_else = has_otherwise
        body = " ".join(f"WHEN {_operand(c)} THEN {_operand(v)}" for c, v in branches)
        tail = f" ELSE {_operand(otherwise)}" if has_otherwise else ""
        super().__init__(f"CASE {body}{tail} END")

    def _replay(self) -> _ClassicColumn:
        (c0, v0), *rest = self._branches
        out = _F.when(c0, v0)
        for c, v in rest:
            out = out.when(c, v)
        return out.otherwise(self._else) if self._has_else else out

    def when(self, condition: Any, value: Any):
        if self._has_else or _operand(condition) is None or _operand(value) is None:
            return self._replay().when(condition, value)
        return SqlCase([*self._branches, (condition, value)])

    def otherwise(self, value: Any):
        if self._has_else or _operand(value) is None:
            return self._replay().otherwise(value)
        return SqlCase(self._branches, value, True)


def _operand(value: Any) -> str | None:
    """The text of an operand: a SqlColumn (its alias dropped, as Spark drops inner aliases) or a literal."""
    if isinstance(value, SqlSortOrder):  # not an expression: Spark's own API decides
        return None
    if isinstance(value, SqlColumn):
        return value._text
    if isinstance(value, _ClassicColumn):
        return None
    return render_literal(value)


# ------------------------------------------------------------------------------------ functions


def col(name: str) -> _ClassicColumn:
    """``F.col``: a back-quoted name (``quote``) is kept as text; anything else uses PySpark's parser."""
    if (len(name) >= 2 and name[0] == "`" and name[-1] == "`" and "`" not in name[1:-1].replace("``", "")
            and text_name(name)):
        return SqlColumn(name)
    return _F.col(name)


def lit(value: Any) -> _ClassicColumn:
    if isinstance(value, _ClassicColumn):
        return value
    text = render_literal(value)
    return SqlColumn(text) if text is not None else _F.lit(value)


def when(condition: Any, value: Any) -> _ClassicColumn:
    if not isinstance(condition, SqlColumn) or _operand(value) is None:
        return _F.when(condition, value)
    return SqlCase([(condition, value)])


def _call(sql_name: str, fallback, min_args: int = 0, max_args: int | None = None, distinct: bool = False):
    """A function whose arguments are all columns, with the same name and meaning in SQL."""

    def call(*args: Any, **kwargs: Any) -> _ClassicColumn:
        if kwargs:
            return fallback(*args, **kwargs)
        flat = list(args[0]) if len(args) == 1 and isinstance(args[0], list | tuple) else list(args)
        if (
            len(flat) < min_args
            or (max_args is not None and len(flat) > max_args)
            or not all(isinstance(a, SqlColumn) for a in flat)
        ):
            return fallback(*args)
        inner = ", ".join(a._text for a in flat)
        return SqlColumn(f"{sql_name}({'DISTINCT ' if distinct else ''}{inner})")

    call.__name__ = sql_name
    call.__doc__ = f"``{sql_name}(...)`` as text when every argument is a :class:`SqlColumn`."
    return call


def call_function(name: str, *args: Any) -> _ClassicColumn:
    if _FUNCTION_NAME.match(name) and args and all(isinstance(a, SqlColumn) for a in args):
        return SqlColumn(f"{name}({', '.join(a._text for a in args)})")
    return _F.call_function(name, *args)


# PySpark function -> (SQL name, arity): each is `Column.fn(<name>, args)` in Spark, the same function
# the SQL parser resolves for `<name>(args)`.
_SAME_NAME = {
    "abs": 1, "coalesce": None, "greatest": None, "least": None, "isnan": 1, "sum": 1, "avg": 1, "min": 1,
    "max": 1, "count": 1, "floor": 1, "ceil": 1, "sqrt": 1, "exp": 1, "ln": 1, "log10": 1, "log2": 1,
    "char_length": 1, "octet_length": 1, "bit_length": 1, "upper": 1, "lower": 1, "year": 1, "month": 1,
    "dayofmonth": 1, "dayofweek": 1, "dayofyear": 1, "quarter": 1, "hour": 1, "minute": 1, "second": 1,
    "nullif": 2, "pmod": 2, "try_add": 2, "try_subtract": 2, "try_multiply": 2, "try_sum": 1,
    "date_from_unix_date": 1, "timestamp_micros": 1, "unix_date": 1, "unix_micros": 1, "signum": 1,
    "raise_error": 1, "concat": None, "array": None, "any_value": 1, "first": 1, "last": 1,
    "stddev_samp": 1, "stddev_pop": 1, "var_samp": 1, "var_pop": 1, "bool_and": 1, "bool_or": 1,
    "median": 1, "corr": 2, "bit_and": 1, "bit_or": 1, "bit_xor": 1, "collect_list": 1, "collect_set": 1,
    "like": 3, "ilike": 3, "contains": 2, "startswith": 2, "endswith": 2,
}


class _Functions:
    """``pyspark.sql.functions`` with text versions of the functions above (``F.xyz`` drop-in)."""

    col = staticmethod(col)
    lit = staticmethod(lit)
    when = staticmethod(when)
    call_function = staticmethod(call_function)
    count_distinct = staticmethod(_call("count", _F.count_distinct, 1, None, distinct=True))
    sum_distinct = staticmethod(_call("sum", _F.sum_distinct, 1, 1, distinct=True))

    @staticmethod
    def broadcast(df: Any) -> Any:
        """``F.broadcast``: the broadcast hint (a SqlFrame keeps it as text)."""
        return df.hint("broadcast") if hasattr(type(df), "sql_text") else _F.broadcast(df)

    def __getattr__(self, name: str) -> Any:
        return getattr(_F, name)


for _name, _arity in _SAME_NAME.items():
    _fallback = getattr(_F, _name)
    setattr(
        _Functions,
        _name,
        staticmethod(_call(_name, _fallback, 1 if _arity else 0, _arity) if _arity is not None
                     else _call(_name, _fallback, 1)),
    )

#: Drop-in for ``from pyspark.sql import functions as F`` in the backend.
functions = _Functions()


# ------------------------------------------------------------------------------------ DataFrames


def select(df: DataFrame, cols: Iterable[Any]) -> DataFrame:
    """``df.select(*cols)``; when every column is text, one ``selectExpr`` in three round trips."""
    cols = list(cols)
    if type(df) is not _ClassicDataFrame or not cols or not all(isinstance(c, SqlColumn) for c in cols):
        return df.select(*cols)  # a SqlFrame builds text; a Connect DataFrame has no _jdf
    texts = [c.sql() for c in cols]
    jvm = df.sparkSession._jvm
    split = _split_member(jvm)
    jdf = df._jdf.selectExpr(split(_SEPARATOR.join(texts), _SEPARATOR))
    return DataFrame(jdf, df.sparkSession)


_lock = threading.Lock()
_split_cache: dict[int, Any] = {}


def _split_member(jvm) -> Any:
    """``StringUtils.splitByWholeSeparatorPreserveAllTokens`` (a static, cached per JVM view)."""
    hit = _split_cache.get(id(jvm))
    if hit is not None and hit[0] is jvm:
        return hit[1]
    with _lock:
        cls = getattr(jvm, "org.apache.commons.lang3.StringUtils")
        member = cls.splitByWholeSeparatorPreserveAllTokens
        _split_cache[id(jvm)] = (jvm, member)
    return member


def text_mode_supported(spark) -> bool:
    """Whether string literals can be written as text (the session escapes them the default way)."""
    try:
        return str(spark.conf.get("spark.sql.parser.escapedStringLiterals", "false")).lower() != "true"
    except Exception:  # noqa: BLE001 -- unknown: stay on the ordinary API
        return False


# ----------------------------------------------------------------------------- JVM lookup caches

_installed = False


def install_jvm_caches() -> None:
    """Cache the JVM handles PySpark looks up on every call (each lookup is two round trips).

    ``functions.xyz`` resolves ``org.apache.spark.sql.functions`` and then its member ``xyz`` through
    Py4J reflection on every call; the handles never change for a JVM, so they are kept per gateway.
    Casting to a ``DataType`` parses its JSON in the JVM and looks up the active session (four round
    trips); the parsed JVM type is kept per JSON text.
    """
    global _installed
    if _installed:
        return
    import pyspark.sql.classic.column as classic_column
    import pyspark.sql.functions.builtin as builtin

    members: dict[tuple[int, str], Any] = {}
    original_get = builtin._get_jvm_function

    def cached_get_jvm_function(name: str, sc) -> Any:
        key = (id(sc._jvm), name)
        hit = members.get(key)
        if hit is not None and hit[0] is sc._jvm:
            return hit[1]
        member = original_get(name, sc)
        members[key] = (sc._jvm, member)  # the JVM view is kept so that its id is not reused
        return member

    builtin._get_jvm_function = cached_get_jvm_function

    parsed: dict[tuple[int, str], Any] = {}

    def jvm_type(data_type: T.DataType) -> Any:
        from pyspark import SparkContext
        from pyspark.sql import SparkSession

        jvm = SparkContext._active_spark_context._jvm if SparkContext._active_spark_context else None
        key = (id(jvm), data_type.json())
        hit = parsed.get(key)
        if hit is not None and hit[0] is jvm:
            return hit[1]
        spark = SparkSession._getActiveSessionOrCreate()
        jdt = spark._jsparkSession.parseDataType(key[1])
        parsed[key] = (jvm, jdt)  # the JVM view is kept so that its id is not reused
        return jdt

    original_cast, original_try_cast = classic_column.Column.cast, classic_column.Column.try_cast

    def cast(self, dataType):  # noqa: N803
        if isinstance(dataType, T.DataType):
            return classic_column.Column(self._jc.cast(jvm_type(dataType)))
        return original_cast(self, dataType)

    def try_cast(self, dataType):  # noqa: N803
        if isinstance(dataType, T.DataType):
            return classic_column.Column(self._jc.try_cast(jvm_type(dataType)))
        return original_try_cast(self, dataType)

    classic_column.Column.cast = cast
    classic_column.Column.try_cast = try_cast
    _installed = True
