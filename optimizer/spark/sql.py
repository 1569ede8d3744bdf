"""Columns and relations as one Spark SQL query: the builders the Spark backend compiles a plan with.

The backend compiles a whole Substrait plan into **one** Spark SQL text and runs it with one
``spark.sql`` call. A table is a name in the text (:meth:`Frame.named`: a catalog table, a temporary view)
or a DataFrame bound to the call (:meth:`Frame.table`: ``spark.sql(text, t0=df0, ...)``, ``{t0}`` in the
text). The text is built
with sqlglot's expression tree and printed in its Spark dialect, which quotes identifiers, escapes string
literals and places parentheses; nothing is pasted together from strings.

* :class:`Col` -- a column expression. It has the operators and methods of a PySpark ``Column`` that the
  backend uses (``+``, ``==``, ``&``, ``isNull``, ``cast``, ``alias``, ``isin``, ``over``, sort orders...),
  and :data:`functions` mirrors ``pyspark.sql.functions``: ``F.xyz(args)`` is the Spark SQL function
  ``xyz(args)`` (the names PySpark uses are Spark's SQL names; the few that differ are written out below).
  Python values are literals of the type ``F.lit`` gives them (``int``: INT or BIGINT by range,
  ``float``: DOUBLE, ``Decimal``: its own precision and scale).
* :class:`Window` -- ``Window.partitionBy(...).orderBy(...).rowsBetween(...)`` as an ``OVER (...)`` clause.
* :class:`Frame` -- a relation: ``select``, ``filter``, ``join``, ``crossJoin``, ``orderBy``, ``limit``,
  ``offset``, ``hint``, ``distinct``, ``groupBy().agg()``, ``groupingSets().agg()``, ``repartition``, the set
  operations, ``exists`` and ``scalar``, with a DataFrame's meaning. :meth:`Frame.sql` is the query.

Equivalence with the DataFrame API: each method's SQL is the logical plan PySpark's own call builds, over
its input as a subquery with a fresh alias (``SELECT <cols> FROM (<input>) AS _q7``): ``filter`` is
``WHERE``, ``join(how)`` the SQL join of that type, ``hint(h)`` the ``/*+ H(_q7) */`` hint on the input's
alias, ``groupBy(k).agg(m)`` is ``SELECT k, m ... GROUP BY k``, ``union`` is ``UNION ALL`` (both by
position). A clause joins the ``SELECT`` below it when SQL applies it after that query's own clauses
anyway, so the text has few levels. The backend names every column uniquely (``_c<n>``), so unqualified
names resolve as they would on a DataFrame, outer references of correlated subqueries included. SQL rules
that a DataFrame does not have are kept out: an integer literal in ``ORDER BY`` or ``GROUP BY`` would be a
column position, so it is written as a cast.

Spark substitutes ``${...}`` in SQL text before parsing it (``spark.sql.variable.substitute``, on by
default): every ``$`` in a string literal is written ``\\u0024``, which Spark unescapes only afterwards,
and a name that contains ``${`` is refused (:func:`render`). With tables bound, Spark formats the text
with Python's ``str.format``, so braces are doubled.

>>> ctx = Context(None)
>>> t = Frame.table(ctx, ctx.bind("a DataFrame"))
>>> x = col("`a`")
>>> render(t.filter(x > 1).select(x.alias("b")))
('SELECT `a` AS `b` FROM {t0} WHERE `a` > 1', {'t0': 'a DataFrame'})
>>> render(t.orderBy(x.desc_nulls_last()).limit(5))[0]  # Spark's DESC puts nulls last
'SELECT * FROM {t0} ORDER BY `a` DESC LIMIT 5'
>>> functions.when(x.isNull(), "none").otherwise(x.cast("string")).alias("b").sql()
"CASE WHEN `a` IS NULL THEN 'none' ELSE CAST(`a` AS string) END AS `b`"
>>> lit("${env:HOME}").sql()
"'\\\\u0024{env:HOME}'"
"""

from __future__ import annotations

import datetime as _dt
import decimal
import itertools
import math
import re
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from pyspark.sql import types as T
from sqlglot import exp
from sqlglot.dialects.spark import Spark

from optimizer.errors import UnsupportedError

__all__ = ["Col", "Context", "Frame", "Window", "col", "functions", "lit", "render", "type_sql", "when"]

_INT_MIN, _INT_MAX = -(2**31), 2**31 - 1
_LONG_MIN, _LONG_MAX = -(2**63), 2**63 - 1


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


def _sql(e: exp.Expression) -> str:
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


def _data_type(dt: T.DataType | str) -> exp.Expression:
    """A cast target: the type's SQL text as it is (no parsing: Spark reads it)."""
    return exp.Var(this=type_sql(dt))


def _typed_as(e: exp.Expression, to: exp.Var) -> bool:
    """Whether ``e`` is already of the type ``to``: a cast (or try-cast) to it, or a double literal
    (``1.5D``) cast to ``double``. Casting it again changes nothing, and the compiler casts to be sure
    of a type at each call it nests (``CAST(CAST(x AS double) AS double)``), which Spark's analyzer and
    optimizer then walk once per copy."""
    if isinstance(e, exp.Cast):  # exp.TryCast too
        target = e.args.get("to")
        return isinstance(target, exp.Var) and target.this == to.this
    return to.this == "double" and isinstance(e, exp.Literal) and not e.is_string and e.this.endswith("D")


# ---------------------------------------------------------------------------------------- columns

# Nodes that print as one operand (no parentheses needed around them inside an operator). A whitelist:
# sqlglot's AND, OR and several operators are also function nodes (``exp.Func``).
_ATOMIC = (exp.Column, exp.Literal, exp.Null, exp.Boolean, exp.Anonymous, exp.Cast, exp.Case, exp.Paren,
           exp.Subquery, exp.Dot, exp.Window, exp.Exists, exp.Identifier, exp.Star)


def _w(e: exp.Expression) -> exp.Expression:
    """``e`` as an operand: parenthesised unless it prints as one unit."""
    if isinstance(e, exp.Literal) and not e.is_string and e.this.startswith("-"):
        return exp.Paren(this=e)
    return e if type(e) in _ATOMIC_TYPES else exp.Paren(this=e)


_ATOMIC_TYPES = frozenset(_ATOMIC) | {exp.TryCast}


class Col:
    """A column expression (sqlglot node) and its alias, with PySpark ``Column``'s operators."""

    __slots__ = ("e", "_alias", "stype")

    def __init__(self, e: exp.Expression, alias: str | None = None) -> None:
        self.e = e
        self._alias = alias
        self.stype: Any = None  # the Substrait type, where the compiler knows it and cannot derive it again

    def named(self) -> exp.Expression:
        """The expression as a select-list item (``AS`` its alias when it has one)."""
        if self._alias is None:
            return self.e
        return exp.Alias(this=self.e, alias=exp.to_identifier(self._alias, quoted=True))

    def sql(self) -> str:
        return _sql(self.named())

    def __repr__(self) -> str:
        return f"Col<{self.sql()}>"

    def __bool__(self) -> bool:
        raise TypeError("a column has no truth value: use & | ~ for and, or, not")

    __hash__ = None  # type: ignore[assignment] -- == builds an expression

    # ---------------------------------------------------------------------------------- operators

    def _bin(self, cls: type[exp.Expression], other: Any, reflected: bool = False) -> Col:
        a, b = _w(self.e), _w(_operand(other))
        if reflected:
            a, b = b, a
        return Col(cls(this=a, expression=b))

    def __add__(self, o: Any) -> Col:
        return self._bin(exp.Add, o)

    def __radd__(self, o: Any) -> Col:
        return self._bin(exp.Add, o, True)

    def __sub__(self, o: Any) -> Col:
        return self._bin(exp.Sub, o)

    def __rsub__(self, o: Any) -> Col:
        return self._bin(exp.Sub, o, True)

    def __mul__(self, o: Any) -> Col:
        return self._bin(exp.Mul, o)

    def __rmul__(self, o: Any) -> Col:
        return self._bin(exp.Mul, o, True)

    def __truediv__(self, o: Any) -> Col:
        return self._bin(exp.Div, o)

    def __rtruediv__(self, o: Any) -> Col:
        return self._bin(exp.Div, o, True)

    def __mod__(self, o: Any) -> Col:
        return self._bin(exp.Mod, o)

    def __rmod__(self, o: Any) -> Col:
        return self._bin(exp.Mod, o, True)

    def __eq__(self, o: Any) -> Col:  # type: ignore[override]
        return self._bin(exp.EQ, o)

    def __ne__(self, o: Any) -> Col:  # type: ignore[override]
        return self._bin(exp.NEQ, o)

    def __lt__(self, o: Any) -> Col:
        return self._bin(exp.LT, o)

    def __le__(self, o: Any) -> Col:
        return self._bin(exp.LTE, o)

    def __gt__(self, o: Any) -> Col:
        return self._bin(exp.GT, o)

    def __ge__(self, o: Any) -> Col:
        return self._bin(exp.GTE, o)

    def __and__(self, o: Any) -> Col:
        return self._bin(exp.And, o)

    def __rand__(self, o: Any) -> Col:
        return self._bin(exp.And, o, True)

    def __or__(self, o: Any) -> Col:
        return self._bin(exp.Or, o)

    def __ror__(self, o: Any) -> Col:
        return self._bin(exp.Or, o, True)

    def __invert__(self) -> Col:
        return Col(exp.Not(this=_w(self.e)))

    def __neg__(self) -> Col:
        return Col(exp.Neg(this=_w(self.e)))

    def eqNullSafe(self, o: Any) -> Col:
        return self._bin(exp.NullSafeEQ, o)

    def bitwiseAND(self, o: Any) -> Col:
        return self._bin(exp.BitwiseAnd, o)

    def bitwiseOR(self, o: Any) -> Col:
        return self._bin(exp.BitwiseOr, o)

    def bitwiseXOR(self, o: Any) -> Col:
        return self._bin(exp.BitwiseXor, o)

    # ------------------------------------------------------------------------------------ methods

    def isNull(self) -> Col:
        return Col(exp.Is(this=_w(self.e), expression=exp.Null()))

    def isNotNull(self) -> Col:
        return Col(exp.Not(this=exp.Paren(this=exp.Is(this=_w(self.e), expression=exp.Null()))))

    def cast(self, data_type: T.DataType | str) -> Col:
        to = _data_type(data_type)
        if _typed_as(self.e, to):
            return Col(self.e)
        return Col(exp.Cast(this=self.e, to=to))

    def try_cast(self, data_type: T.DataType | str) -> Col:
        to = _data_type(data_type)
        if _typed_as(self.e, to):
            return Col(self.e)
        return Col(exp.TryCast(this=self.e, to=to, safe=True))

    def alias(self, name: str) -> Col:
        return Col(self.e, name)

    name = alias

    def outer(self) -> Col:
        """An outer reference: the same name (names are unique, so it resolves to the enclosing query)."""
        return self

    def isin(self, *values: Any) -> Col:
        if len(values) == 1 and isinstance(values[0], Frame):
            needle = self.e if not isinstance(self, _StructCol) else exp.Tuple(expressions=list(self.members))
            return Col(exp.In(this=_w(needle), query=exp.Subquery(this=values[0].query())))
        if len(values) == 1 and isinstance(values[0], list | set | tuple):
            values = tuple(values[0])
        return Col(exp.In(this=_w(self.e), expressions=[_operand(v) for v in values]))

    def getField(self, name: str) -> Col:
        return Col(exp.Dot(this=_w(self.e) if not isinstance(self.e, exp.Column) else exp.Paren(this=self.e),
                           expression=exp.to_identifier(name, quoted=True)))

    def __getitem__(self, key: Any) -> Col:
        if isinstance(key, str):
            return self.getField(key)
        # try_element_at: null past the end, as getItem without ANSI mode (element_at raises with it)
        return functions.try_element_at(self, key + 1 if isinstance(key, int) else key)

    def startswith(self, other: Any) -> Col:
        return _call("startswith", self, other)

    def endswith(self, other: Any) -> Col:
        return _call("endswith", self, other)

    def contains(self, other: Any) -> Col:
        return _call("contains", self, other)

    def like(self, other: Any) -> Col:
        return _call("like", self, other)

    def substr(self, start: Any, length: Any) -> Col:
        return _call("substring", self, start, length)

    def over(self, window: WindowSpec) -> Col:
        return Col(window.over(self.e))

    # -------------------------------------------------------------------------------- sort orders

    def _order(self, desc: bool, nulls_first: bool) -> SortOrder:
        return SortOrder(self, desc, nulls_first)

    def asc(self) -> SortOrder:
        return self._order(False, True)

    def desc(self) -> SortOrder:
        return self._order(True, False)

    def asc_nulls_first(self) -> SortOrder:
        return self._order(False, True)

    def asc_nulls_last(self) -> SortOrder:
        return self._order(False, False)

    def desc_nulls_first(self) -> SortOrder:
        return self._order(True, True)

    def desc_nulls_last(self) -> SortOrder:
        return self._order(True, False)

    # ------------------------------------------------------------------------------ CASE branches

    def when(self, condition: Any, value: Any) -> Col:
        raise TypeError("when() extends a CASE started by functions.when")

    def otherwise(self, value: Any) -> Col:
        raise TypeError("otherwise() ends a CASE started by functions.when")


class SortOrder:
    """A sort key: a column, its direction and where nulls go (``ORDER BY`` item)."""

    __slots__ = ("base", "desc", "nulls_first")

    def __init__(self, base: Col, desc: bool, nulls_first: bool) -> None:
        self.base, self.desc, self.nulls_first = base, desc, nulls_first

    def ordered(self) -> exp.Ordered:
        e = self.base.e
        if isinstance(e, exp.Literal) and not e.is_string:  # ORDER BY 1 would be a position
            e = exp.Cast(this=e, to=_data_type("int" if _is_int_text(e.this) else "double"))
        return exp.Ordered(this=e, desc=self.desc, nulls_first=self.nulls_first)


class _Case(Col):
    """``CASE WHEN ... END`` under construction."""

    __slots__ = ("ifs", "default", "closed")

    def __init__(self, ifs: list[exp.If], default: exp.Expression | None = None, closed: bool = False) -> None:
        super().__init__(exp.Case(ifs=ifs, default=default))
        self.ifs, self.default, self.closed = ifs, default, closed

    def when(self, condition: Any, value: Any) -> Col:
        if self.closed:
            raise TypeError("when() after otherwise()")
        return _Case([*self.ifs, exp.If(this=_operand(condition), true=_operand(value))])

    def otherwise(self, value: Any) -> Col:
        if self.closed:
            raise TypeError("otherwise() given twice")
        return _Case(self.ifs, _operand(value), True)


class _StructCol(Col):
    """``struct(a, b)``: also a row of values for a multi-column ``IN``."""

    __slots__ = ("members",)

    def __init__(self, e: exp.Expression, members: list[exp.Expression]) -> None:
        super().__init__(e)
        self.members = members


def _is_int_text(text: str) -> bool:
    return re.fullmatch(r"-?\d+", text) is not None


def _operand(value: Any) -> exp.Expression:
    """A column's expression (its alias dropped, as Spark drops inner aliases) or a Python literal."""
    if isinstance(value, Col):
        return value.e
    if isinstance(value, SortOrder):
        raise TypeError("a sort order is not an expression")
    if isinstance(value, Frame):
        raise TypeError("a relation is not an expression: use exists() or scalar()")
    return lit(value).e


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
    return exp.Cast(this=_string(f"{value:f}"), to=_data_type(f"decimal({precision},{scale})"))


def _literal(value: Any) -> exp.Expression:
    if value is None:
        return exp.Null()
    if isinstance(value, bool):
        return exp.Boolean(this=value)
    if isinstance(value, int):
        if value == _INT_MIN:  # -2147483648 is read as -(2147483648), a BIGINT
            return exp.Cast(this=exp.Literal.number(str(value)), to=_data_type("int"))
        if _LONG_MIN < value <= _LONG_MAX:
            return exp.Literal.number(str(value))  # INT when it fits, else BIGINT: F.lit's types
        if value == _LONG_MIN:
            return exp.Cast(this=exp.Literal.number(str(value)), to=_data_type("bigint"))
        raise UnsupportedError(f"integer {value} does not fit a Spark BIGINT")
    if isinstance(value, float):
        if math.isnan(value):
            return exp.Cast(this=_string("NaN"), to=_data_type("double"))
        if math.isinf(value):
            return exp.Cast(this=_string("Infinity" if value > 0 else "-Infinity"), to=_data_type("double"))
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
        return exp.Cast(this=_string(value.isoformat()), to=_data_type("date"))
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


def lit(value: Any) -> Col:
    """``F.lit``: a literal of the type PySpark gives the Python value."""
    if isinstance(value, Col):
        return value
    return Col(_literal(value))


def col(name: str) -> Col:
    """``F.col``: a back-quoted name (``\\`a\\```) or a plain one."""
    if len(name) >= 2 and name[0] == "`" and name[-1] == "`":
        name = name[1:-1].replace("``", "`")
    return Col(exp.Column(this=exp.to_identifier(name, quoted=True)))


def when(condition: Any, value: Any) -> Col:
    return _Case([exp.If(this=_operand(condition), true=_operand(value))])


def _call(name: str, *args: Any) -> Col:
    return Col(exp.Anonymous(this=name, expressions=[_operand(a) for a in args]))


_lambda_names = itertools.count(1)


def _lambda(fn: Callable[..., Col], n: int) -> exp.Expression:
    names = [f"_lv{next(_lambda_names)}" for _ in range(n)]
    body = fn(*[Col(exp.Column(this=exp.to_identifier(x))) for x in names])
    return exp.Lambda(this=_operand(body), expressions=[exp.to_identifier(x) for x in names])


class _Functions:
    """``pyspark.sql.functions`` for :class:`Col`: ``F.xyz(*args)`` is the SQL function ``xyz(args)``."""

    col = staticmethod(col)
    lit = staticmethod(lit)
    when = staticmethod(when)

    @staticmethod
    def call_function(name: str, *args: Any) -> Col:
        return _call(name, *args)

    @staticmethod
    def broadcast(frame: Frame) -> Frame:
        return frame.hint("broadcast")

    @staticmethod
    def struct(*cols: Any) -> Col:
        items = [c.named() if isinstance(c, Col) else _operand(c) for c in cols]
        return _StructCol(exp.Anonymous(this="struct", expressions=items), [_operand(c) for c in cols])

    @staticmethod
    def count_distinct(*cols: Any) -> Col:
        return Col(exp.Anonymous(this="count", expressions=[exp.Distinct(expressions=[_operand(c) for c in cols])]))

    @staticmethod
    def sum_distinct(c: Any) -> Col:
        return Col(exp.Anonymous(this="sum", expressions=[exp.Distinct(expressions=[_operand(c)])]))

    @staticmethod
    def string_agg(c: Any, delimiter: Any) -> Col:
        return _call("string_agg", c, delimiter)

    @staticmethod
    def string_agg_distinct(c: Any, delimiter: Any) -> Col:
        return Col(exp.Anonymous(this="string_agg",
                                 expressions=[exp.Distinct(expressions=[_operand(c)]), _operand(delimiter)]))

    @staticmethod
    def first(c: Any, ignorenulls: bool = False) -> Col:
        return _call("first", c, ignorenulls)

    @staticmethod
    def last(c: Any, ignorenulls: bool = False) -> Col:
        return _call("last", c, ignorenulls)

    @staticmethod
    def nth_value(c: Any, offset: Any, ignoreNulls: bool = False) -> Col:
        out = _call("nth_value", c, offset)
        if ignoreNulls:
            raise UnsupportedError("nth_value IGNORE NULLS is not used by the backend")
        return out

    @staticmethod
    def mode(c: Any, deterministic: bool = False) -> Col:
        return _call("mode", c, deterministic)

    @staticmethod
    def sort_array(c: Any, asc: bool = True) -> Col:
        return _call("sort_array", c, asc)

    @staticmethod
    def array_sort(c: Any, comparator: Callable[[Col, Col], Col] | None = None) -> Col:
        if comparator is None:
            return _call("array_sort", c)
        return Col(exp.Anonymous(this="array_sort", expressions=[_operand(c), _lambda(comparator, 2)]))

    @staticmethod
    def transform(c: Any, fn: Callable[[Col], Col]) -> Col:
        return Col(exp.Anonymous(this="transform", expressions=[_operand(c), _lambda(fn, 1)]))

    @staticmethod
    def aggregate(c: Any, initial: Any, merge: Callable[[Col, Col], Col],
                  finish: Callable[[Col], Col] | None = None) -> Col:
        args = [_operand(c), _operand(initial), _lambda(merge, 2)]
        if finish is not None:
            args.append(_lambda(finish, 1))
        return Col(exp.Anonymous(this="aggregate", expressions=args))

    @staticmethod
    def extract(field: Any, source: Any) -> Col:
        return _call("date_part", field, source)

    @staticmethod
    def timestamp_diff(unit: str, start: Any, end: Any) -> Col:
        return Col(exp.Anonymous(this="timestampdiff", expressions=[exp.Var(this=unit.upper()), _operand(start),
                                                                     _operand(end)]))

    # Spark SQL's two-argument trim, ltrim and rtrim take the characters first (PySpark's take them second).
    @staticmethod
    def trim(c: Any, chars: Any = None) -> Col:
        return _call("trim", c) if chars is None else _call("btrim", c, chars)

    @staticmethod
    def ltrim(c: Any, chars: Any = None) -> Col:
        return _call("ltrim", c) if chars is None else _call("ltrim", chars, c)

    @staticmethod
    def rtrim(c: Any, chars: Any = None) -> Col:
        return _call("rtrim", c) if chars is None else _call("rtrim", chars, c)

    @staticmethod
    def bitwise_not(c: Any) -> Col:
        return Col(exp.BitwiseNot(this=_w(_operand(c))))

    @staticmethod
    def array(*cols: Any) -> Col:
        return _call("array", *cols)

    @staticmethod
    def create_map(*cols: Any) -> Col:
        return _call("map", *cols)

    @staticmethod
    def convert_timezone(source_tz: Any, target_tz: Any, ts: Any) -> Col:
        if source_tz is None:
            return _call("convert_timezone", target_tz, ts)
        return _call("convert_timezone", source_tz, target_tz, ts)

    @staticmethod
    def concat_ws(sep: str, *cols: Any) -> Col:
        return _call("concat_ws", sep, *cols)

    @staticmethod
    def array_join(c: Any, delimiter: Any, null_replacement: Any = None) -> Col:
        if null_replacement is None:
            return _call("array_join", c, delimiter)
        return _call("array_join", c, delimiter, null_replacement)

    @staticmethod
    def split(c: Any, pattern: Any, limit: Any = -1) -> Col:
        return _call("split", c, pattern, limit)

    @staticmethod
    def rand(seed: Any = None) -> Col:
        return _call("rand") if seed is None else _call("rand", seed)

    @staticmethod
    def round(c: Any, scale: Any = 0) -> Col:
        return _call("round", c, scale)

    @staticmethod
    def bround(c: Any, scale: Any = 0) -> Col:
        return _call("bround", c, scale)

    @staticmethod
    def any_value(c: Any, ignore_nulls: Any = None) -> Col:
        return _call("any_value", c) if ignore_nulls is None else _call("any_value", c, ignore_nulls)

    @staticmethod
    def regexp_extract_all(s: Any, pattern: Any, idx: Any = None) -> Col:
        return _call("regexp_extract_all", s, pattern) if idx is None else _call("regexp_extract_all", s, pattern, idx)

    @staticmethod
    def to_date(c: Any, fmt: Any = None) -> Col:
        return _call("to_date", c) if fmt is None else _call("to_date", c, fmt)

    @staticmethod
    def to_timestamp_ntz(c: Any, fmt: Any = None) -> Col:
        return _call("to_timestamp_ntz", c) if fmt is None else _call("to_timestamp_ntz", c, fmt)

    def __getattr__(self, name: str) -> Callable[..., Col]:
        if name.startswith("_"):
            raise AttributeError(name)

        def call(*args: Any) -> Col:
            return _call(name, *args)

        call.__name__ = name
        return call


#: Drop-in for ``from pyspark.sql import functions as F`` in the backend.
functions = _Functions()


# ------------------------------------------------------------------------------------------ windows


class WindowSpec:
    """``OVER (PARTITION BY ... ORDER BY ... frame)``."""

    def __init__(self, partition: tuple[exp.Expression, ...] = (), order: tuple[SortOrder, ...] = (),
                 frame: tuple[str, int, int] | None = None) -> None:
        self.partition, self.order, self.frame = partition, order, frame

    def partitionBy(self, *cols: Any) -> WindowSpec:
        return WindowSpec(tuple(_operand(c) for c in _flat(cols)), self.order, self.frame)

    def orderBy(self, *cols: Any) -> WindowSpec:
        return WindowSpec(self.partition, tuple(_sort_order(c) for c in _flat(cols)), self.frame)

    def rowsBetween(self, start: int, end: int) -> WindowSpec:
        return WindowSpec(self.partition, self.order, ("ROWS", start, end))

    def rangeBetween(self, start: int, end: int) -> WindowSpec:
        return WindowSpec(self.partition, self.order, ("RANGE", start, end))

    def over(self, e: exp.Expression) -> exp.Expression:
        args: dict[str, Any] = {"this": e}
        if self.partition:
            args["partition_by"] = list(self.partition)
        if self.order:
            args["order"] = exp.Order(expressions=[o.ordered() for o in self.order])
        if self.frame is not None:
            kind, lo, hi = self.frame
            start, start_side = _bound(lo)
            end, end_side = _bound(hi)
            args["spec"] = exp.WindowSpec(kind=kind, start=start, start_side=start_side, end=end, end_side=end_side)
        return exp.Window(**args)


def _bound(value: int) -> tuple[Any, str | None]:
    if value <= Window.unboundedPreceding:
        return "UNBOUNDED", "PRECEDING"
    if value >= Window.unboundedFollowing:
        return "UNBOUNDED", "FOLLOWING"
    if value == 0:
        return "CURRENT ROW", None
    return exp.Literal.number(str(abs(value))), ("PRECEDING" if value < 0 else "FOLLOWING")


class Window:
    """``pyspark.sql.Window`` for :class:`Col` (same bound constants)."""

    unboundedPreceding = _LONG_MIN
    unboundedFollowing = _LONG_MAX
    currentRow = 0

    @staticmethod
    def partitionBy(*cols: Any) -> WindowSpec:
        return WindowSpec().partitionBy(*cols)

    @staticmethod
    def orderBy(*cols: Any) -> WindowSpec:
        return WindowSpec().orderBy(*cols)


def _flat(cols: Sequence[Any]) -> list[Any]:
    return list(cols[0]) if len(cols) == 1 and isinstance(cols[0], list | tuple) else list(cols)


def _sort_order(c: Any) -> SortOrder:
    if isinstance(c, SortOrder):
        return c
    if isinstance(c, str):
        return SortOrder(col(c), False, True)
    return SortOrder(c if isinstance(c, Col) else lit(c), False, True)


# ---------------------------------------------------------------------------------------- relations


class Context:
    """What one compiled query shares: its aliases, the tables it binds, the session it runs on."""

    def __init__(self, spark) -> None:
        self.spark = spark
        self._aliases = itertools.count(1)
        self.tables: dict[str, Any] = {}  # placeholder -> DataFrame (spark.sql keyword argument)
        self._by_id: dict[int, tuple[Any, str]] = {}
        self.token = f"{id(self):x}"

    def alias(self) -> str:
        return f"_q{next(self._aliases)}"

    def bind(self, df: Any) -> str:
        """The placeholder name of a table DataFrame (one per DataFrame)."""
        hit = self._by_id.get(id(df))
        if hit is not None and hit[0] is df:
            return hit[1]
        name = f"t{len(self.tables)}"
        self.tables[name] = df
        self._by_id[id(df)] = (df, name)
        return name

    def placeholder(self, name: str) -> str:
        """The identifier a bound table has in the printed text, replaced by ``{name}`` at the end."""
        return f"__substrait_opt_{self.token}_{name}__"


_JOINS: dict[str, tuple[str | None, str | None]] = {
    "inner": (None, None),
    "cross": (None, "CROSS"),
    "full": ("FULL", "OUTER"),
    "outer": ("FULL", "OUTER"),
    "left": ("LEFT", "OUTER"),
    "right": ("RIGHT", "OUTER"),
    "left_semi": ("LEFT", "SEMI"),
    "left_anti": ("LEFT", "ANTI"),
}


@dataclass(frozen=True)
class _Query:
    """One ``SELECT`` (SQL applies its clauses in the order WHERE, GROUP BY, SELECT, DISTINCT, ORDER BY,
    OFFSET, LIMIT), or a set operation (``setop``) that any further clause wraps."""

    source: exp.Expression | None  # the first FROM item (None: no FROM, one row)
    joins: tuple[exp.Join, ...] = ()
    select: tuple[exp.Expression, ...] | None = None  # None: *
    where: exp.Expression | None = None
    group: tuple[exp.Expression, ...] | None = None  # () : a global aggregate
    grouping_sets: tuple[tuple[exp.Expression, ...], ...] | None = None
    distinct: bool = False
    hints: tuple[exp.Expression, ...] = ()
    order: tuple[exp.Ordered, ...] | None = None
    offset: int | None = None
    limit: int | None = None
    setop: exp.Expression | None = None

    @property
    def plain(self) -> bool:
        """``SELECT * FROM source [WHERE ...]``: more clauses may be added to it."""
        return (self.setop is None and self.select is None and self.group is None and not self.distinct
                and not self.hints and self.order is None and self.offset is None and self.limit is None)

    def expr(self) -> exp.Expression:
        if self.setop is not None:
            return self.setop
        args: dict[str, Any] = {"expressions": list(self.select) if self.select is not None else [exp.Star()]}
        if self.source is not None:
            args["from_"] = exp.From(this=self.source)
        if self.joins:
            args["joins"] = list(self.joins)
        if self.where is not None:
            args["where"] = exp.Where(this=self.where)
        if self.grouping_sets is not None:
            sets = [exp.Tuple(expressions=list(s)) for s in self.grouping_sets]
            args["group"] = exp.Group(grouping_sets=[exp.GroupingSets(expressions=sets)])
        elif self.group:
            args["group"] = exp.Group(expressions=[_no_ordinal(g) for g in self.group])
        if self.distinct:
            args["distinct"] = exp.Distinct()
        if self.hints:
            args["hint"] = exp.Hint(expressions=list(self.hints))
        if self.order is not None:
            args["order"] = exp.Order(expressions=list(self.order))
        if self.limit is not None:
            args["limit"] = exp.Limit(expression=exp.Literal.number(str(self.limit)))
        if self.offset is not None:
            args["offset"] = exp.Offset(expression=exp.Literal.number(str(self.offset)))
        return exp.Select(**args)


def _no_ordinal(e: exp.Expression) -> exp.Expression:
    if isinstance(e, exp.Literal) and not e.is_string:  # GROUP BY 1 would be a position
        return exp.Cast(this=e, to=_data_type("int" if _is_int_text(e.this) else "double"))
    return e


_HINTS = {"broadcast", "shuffle_hash", "merge", "shuffle_merge", "shuffle_replicate_nl"}


# A projection that only renames columns is merged into the query below it rather than wrapped
# around it: the backend writes a SELECT per relation (a read names every column of its table,
# projections and emits rename), and merged, a plan's text reads like the SQL a person would write
# (TPC-DS: 40 % shorter). Only columns and constants are substituted: no expression is repeated, and
# no clause moves past a window, an aggregate, DISTINCT, ORDER BY or LIMIT.


def _selects_last(q: _Query) -> bool:
    """Nothing applies after ``q``'s select list (no DISTINCT, ORDER BY, OFFSET, LIMIT or set
    operation; hints only those of joins)."""
    if q.setop is not None or q.distinct or q.order is not None or q.offset is not None or q.limit is not None:
        return False
    return all(isinstance(h, exp.Anonymous) and str(h.this).lower() in _HINTS for h in q.hints)


def _only_joined(q: _Query) -> bool:
    """``SELECT ... FROM ... [JOIN ...] [WHERE ...]``, hints only those of its joins."""
    return _selects_last(q) and q.group is None and q.grouping_sets is None and bool(q.joins or not q.hints)


def _named(item: exp.Expression) -> tuple[str, exp.Expression] | None:
    """A select item's output name and expression: ``e AS name`` or an unqualified column."""
    if isinstance(item, exp.Alias):
        return item.alias, item.this
    if isinstance(item, exp.Column) and not item.table:
        return item.name, item
    return None  # an unnamed expression: Spark names it by its text, which a rewrite would change


def _outputs(q: _Query) -> dict[str, exp.Expression] | None:
    """``q``'s output names and what each is (None when an item is unnamed or a name repeats)."""
    out: dict[str, exp.Expression] = {}
    for item in q.select or ():
        named = _named(item)
        if named is None or named[0] in out:
            return None
        out[named[0]] = named[1]
    return out


def _column_outputs(q: _Query) -> dict[str, exp.Expression] | None:
    """``q``'s outputs when every one is a column of its FROM or a constant."""
    out = _outputs(q)
    if out is None or not all(
        (isinstance(e, exp.Column) and not e.table and isinstance(e.this, exp.Identifier))
        or isinstance(e, exp.Literal | exp.Null | exp.Boolean)
        for e in out.values()
    ):
        return None
    return out


def _reads_only(e: exp.Expression, names: Collection[str], *barred: type[exp.Expression]) -> bool:
    """Whether the columns ``e`` reads are all among ``names`` (unqualified), with no subquery,
    lambda, star or node of the ``barred`` types in it."""
    for node in e.walk():
        if isinstance(node, (exp.Subquery, exp.Select, exp.Exists, exp.Lambda, exp.Star, *barred)):
            return False
        if isinstance(node, exp.Column) and (node.table or node.name not in names):
            return False
    return True


def _substituted(e: exp.Expression, names: dict[str, exp.Expression]) -> exp.Expression | None:
    """``e`` with each column replaced by what ``names`` says it is; None when ``e`` reads another
    column (an outer reference, a lambda variable) or holds a subquery."""
    if not _reads_only(e, names):
        return None

    def swap(node: exp.Expression) -> exp.Expression:
        if isinstance(node, exp.Column):
            return _w(names[node.name].copy())
        return node

    return e.transform(swap)


def _as(e: exp.Expression, name: str) -> exp.Expression:
    """``e`` as a select item named ``name`` (a column of that name as it is)."""
    if isinstance(e, exp.Column) and e.name == name:
        return e
    return exp.Alias(this=e, alias=exp.to_identifier(name, quoted=True))


def _merged_select(q: _Query, items: list[exp.Expression]) -> _Query | None:
    """``SELECT items FROM (q)`` as one query: when ``items`` only name outputs of ``q`` (``q``'s select
    list is cut and renamed; ``q`` may group), or when ``q`` only names columns of its FROM (``items``
    are rewritten over them)."""
    if q.select is None:
        return None
    picked = _picked(q, items)
    if picked is not None:
        return replace(q, select=picked)
    names = _column_outputs(q) if _only_joined(q) else None
    if names is None:
        return None
    merged = []
    for item in items:
        named = _named(item)
        if named is None:
            return None
        new = _substituted(named[1], names)
        if new is None:
            return None
        merged.append(_as(new, named[0]))
    return replace(q, select=tuple(merged))


def _picked(q: _Query, items: list[exp.Expression]) -> tuple[exp.Expression, ...] | None:
    """``q``'s select list cut to ``items`` when each item names one of its outputs (an expression of
    ``q`` is picked at most once, so none is computed twice)."""
    outputs = _outputs(q) if _selects_last(q) else None
    if outputs is None:
        return None
    # Spark computes the other items of a select with a window function below the window
    # (ExtractWindowExpressions): a column renamed there is a new column, which a filter inferred above
    # (IS NOT NULL of a join key) cannot pass the window by, though it is a partition key. One copy of a
    # repeated subtree filtered and another not, Spark no longer reuses one's exchange for the other
    # (TPC-DS Q47/Q57 computed store_sales' aggregate twice).
    windowed = any(item.find(exp.Window) for item in q.select or ())
    picked, used = [], set()
    for item in items:
        named = _named(item)
        if named is None or not isinstance(named[1], exp.Column) or named[1].table:
            return None
        e = outputs.get(named[1].name)
        if e is None:
            return None
        if windowed and isinstance(e, exp.Column) and named[0] != named[1].name:
            return None
        if not isinstance(e, exp.Column):
            if named[1].name in used:
                return None
            used.add(named[1].name)
        picked.append(_as(e.copy(), named[0]))
    return tuple(picked)


def _orders_outputs(q: _Query, order: tuple[exp.Ordered, ...]) -> bool:
    """Whether ``order`` may be ``q``'s own ORDER BY: ``q`` is not DISTINCT, ordered or limited, and
    the keys read only ``q``'s output names (no subquery, no aggregate or window of their own)."""
    outputs = _outputs(q) if _selects_last(q) else None
    return outputs is not None and all(
        _reads_only(o, outputs, exp.Window, exp.AggFunc, exp.Anonymous) for o in order)


def _conjoined(where: exp.Expression | None, cond: exp.Expression) -> exp.Expression:
    return cond if where is None else exp.And(this=_w(where), expression=_w(cond))


class Frame:
    """A relation as a SQL query under construction, with a DataFrame's methods."""

    def __init__(self, ctx: Context, query: _Query, pending_hint: str | None = None) -> None:
        self.ctx = ctx
        self._query = query
        self._hint = pending_hint  # a join hint for this relation, placed by the join that reads it

    # --------------------------------------------------------------------------------- sources

    @classmethod
    def table(cls, ctx: Context, name: str) -> Frame:
        """All columns of the bound table ``name`` (a placeholder from :meth:`Context.bind`)."""
        return cls(ctx, _Query(exp.Table(this=exp.to_identifier(ctx.placeholder(name)))))

    @classmethod
    def named(cls, ctx: Context, table: exp.Table) -> Frame:
        """All columns of a table the query text names: a catalog table, or ``parquet.`path```."""
        return cls(ctx, _Query(table.copy()))

    @classmethod
    def one_row(cls, ctx: Context) -> Frame:
        """One row and no columns (``SELECT`` without ``FROM``)."""
        return cls(ctx, _Query(None))

    @classmethod
    def rows(cls, ctx: Context, n: int) -> Frame:
        """``n`` rows (of one column ``id``: select the columns wanted)."""
        return cls(ctx, _Query(exp.Anonymous(this="range", expressions=[exp.Literal.number(str(n))])))

    # ----------------------------------------------------------------------------------- output

    def query(self) -> exp.Expression:
        """The query (a pending hint becomes a ``SELECT /*+ H(alias) */ *`` over this one)."""
        return self._settled()._query.expr()

    def sql(self) -> str:
        return _sql(self.query())

    def __repr__(self) -> str:
        return f"Frame<{self.sql()[:200]}>"

    # ---------------------------------------------------------------------------------- helpers

    def _new(self, query: _Query) -> Frame:
        return Frame(self.ctx, query)

    def _settled(self) -> Frame:
        if self._hint is None:
            return self
        alias = self.ctx.alias()
        hint = exp.Anonymous(this=self._hint.upper(), expressions=[exp.to_identifier(alias)])
        return Frame(self.ctx, _Query(self._aliased(alias), hints=(hint,)))

    def _aliased(self, alias: str) -> exp.Expression:
        """This query as a FROM item called ``alias`` (without a pending hint)."""
        q = self._query
        if q.plain and q.where is None and not q.joins and isinstance(q.source, exp.Table):
            table = q.source.copy()
            table.set("alias", exp.TableAlias(this=exp.to_identifier(alias)))
            return table
        return exp.Subquery(this=q.expr(), alias=exp.TableAlias(this=exp.to_identifier(alias)))

    def _from(self) -> exp.Expression:
        return self._settled()._aliased(self.ctx.alias())

    def _wrapped(self) -> _Query:
        return _Query(self._from())

    def _open(self) -> _Query:
        s = self._settled()
        return s._query if s._query.plain else s._wrapped()

    # ---------------------------------------------------------------------------------- methods

    def select(self, *cols: Any) -> Frame:
        items = [c.named() if isinstance(c, Col) else col(c).e for c in _flat(cols)]
        if not items:
            items = [exp.alias_(exp.Null(), f"_none{self.ctx.alias()}", quoted=True)]
        q = self._query if self._hint is None else None
        if q is not None and q.select is None and q.joins and _only_joined(q):
            return self._new(replace(q, select=tuple(items)))  # a join's hints stay with its select
        merged = _merged_select(q, items) if q is not None else None
        if merged is not None:
            return self._new(merged)
        return self._new(replace(self._open(), select=tuple(items)))

    def filter(self, condition: Col) -> Frame:
        cond = _operand(condition)
        q = self._query if self._hint is None else None
        if q is not None and q.select is not None and _only_joined(q):
            names = _column_outputs(q)
            moved = _substituted(cond, names) if names is not None else None
            if moved is not None:  # WHERE runs before SELECT: the condition reads the columns renamed
                return self._new(replace(q, where=_conjoined(q.where, moved)))
        q = self._open()
        return self._new(replace(q, where=_conjoined(q.where, cond)))

    where = filter

    def orderBy(self, *cols: Any) -> Frame:
        order = tuple(_sort_order(c).ordered() for c in _flat(cols))
        q = self._query if self._hint is None else None
        if q is not None and q.select is not None and _orders_outputs(q, order):
            return self._new(replace(q, order=order))  # ORDER BY reads the select list's names
        return self._new(replace(self._open(), order=order))

    sort = orderBy

    def limit(self, num: int) -> Frame:
        s = self._settled()
        q = s._query
        if q.setop is not None or q.limit is not None:
            q = s._wrapped()
        return self._new(replace(q, limit=num))  # after ORDER BY and OFFSET, as SQL applies them

    def offset(self, num: int) -> Frame:
        s = self._settled()
        q = s._query
        if q.setop is not None or q.limit is not None or q.offset is not None:
            q = s._wrapped()  # SQL's OFFSET comes before its LIMIT
        return self._new(replace(q, offset=num))

    def hint(self, name: str) -> Frame:
        if name.lower() not in _HINTS:
            raise UnsupportedError(f"join hint '{name}' is not supported")
        return Frame(self.ctx, self._settled()._query, name)

    def distinct(self) -> Frame:
        s = self._settled()
        q = s._query
        if (q.setop is not None or q.group is not None or q.grouping_sets is not None or q.distinct
                or q.order is not None or q.offset is not None or q.limit is not None):
            q = s._wrapped()
        return self._new(replace(q, distinct=True))

    def repartition(self, n: int, *cols: Col) -> Frame:
        """``/*+ REPARTITION(n, cols) */``: columns by name (the backend passes plain columns)."""
        names = []
        for c in cols:
            if not isinstance(c.e, exp.Column):
                raise UnsupportedError("repartitioning by an expression: project it to a column first")
            names.append(c.e.copy())
        hint = exp.Anonymous(this="REPARTITION", expressions=[exp.Literal.number(str(n)), *names])
        return self._new(replace(self._wrapped(), hints=(hint,)))

    def join(self, other: Frame, on: Col | None = None, how: str = "inner") -> Frame:
        how = how.lower()
        if how not in _JOINS:
            raise UnsupportedError(f"join type '{how}' has no SQL join here")
        side, kind = _JOINS[how]
        if on is None and how == "inner":
            kind = "CROSS"
        hints = []
        # The left input: a plain join chain continues (SQL joins associate to the left).
        lq = self._query
        if self._hint is None and lq.plain and lq.where is None and lq.source is not None:
            source, joins, hints = lq.source, list(lq.joins), list(lq.hints)
        else:
            alias = self.ctx.alias()
            source, joins = self._aliased_raw(alias), []
            if self._hint is not None:
                hints.append(exp.Anonymous(this=self._hint.upper(), expressions=[exp.to_identifier(alias)]))
        ralias = self.ctx.alias()
        if other._hint is not None:
            hints.append(exp.Anonymous(this=other._hint.upper(), expressions=[exp.to_identifier(ralias)]))
        args: dict[str, Any] = {"this": other._aliased_raw(ralias)}
        if side:
            args["side"] = side
        if kind:
            args["kind"] = kind
        if on is not None and kind != "CROSS":
            args["on"] = _operand(on)
        joins.append(exp.Join(**args))
        return self._new(_Query(source, joins=tuple(joins), hints=tuple(hints)))

    def _aliased_raw(self, alias: str) -> exp.Expression:
        return Frame(self.ctx, self._query)._aliased(alias)

    def crossJoin(self, other: Frame) -> Frame:
        return self.join(other, None, "inner")

    def _set_operation(self, other: Frame, cls: type[exp.Expression], distinct: bool) -> Frame:
        left = exp.Select(expressions=[exp.Star()], from_=exp.From(this=self._from()))
        right = exp.Select(expressions=[exp.Star()], from_=exp.From(this=other._from()))
        return self._new(_Query(None, setop=cls(this=left, expression=right, distinct=distinct)))

    def union(self, other: Frame) -> Frame:
        return self._set_operation(other, exp.Union, False)

    def intersect(self, other: Frame) -> Frame:
        return self._set_operation(other, exp.Intersect, True)

    def intersectAll(self, other: Frame) -> Frame:
        return self._set_operation(other, exp.Intersect, False)

    def subtract(self, other: Frame) -> Frame:
        return self._set_operation(other, exp.Except, True)

    def exceptAll(self, other: Frame) -> Frame:
        return self._set_operation(other, exp.Except, False)

    def groupBy(self, *cols: Col) -> _Grouped:
        return _Grouped(self, [c for c in _flat(cols)], None)

    def groupingSets(self, sets: Sequence[Sequence[Col]], *cols: Col) -> _Grouped:
        return _Grouped(self, list(cols), [list(s) for s in sets])

    def agg(self, *exprs: Col) -> Frame:
        return self.select(*exprs)

    # ------------------------------------------------------------------------------------ Spark

    def to_spark(self):
        """The query as a Spark DataFrame: one ``spark.sql`` call (Spark analyses the query; a
        correlated subquery alone fails with a ``PySparkException``)."""
        text, tables = render(self)
        return self.ctx.spark.sql(text, **tables)

    @property
    def schema(self) -> T.StructType:
        return self.to_spark().schema

    def collect(self) -> list:
        return self.to_spark().collect()

    def first(self):
        return self.to_spark().first()

    def toArrow(self):
        return self.to_spark().toArrow()

    # ------------------------------------------------------------------------------- subqueries

    def exists(self) -> Col:
        return Col(exp.Exists(this=self.query()))

    def scalar(self) -> Col:
        return Col(exp.Subquery(this=self.query()))


@dataclass
class _Grouped:
    """``groupBy(keys)`` / ``groupingSets(sets, keys)``: ``agg`` builds ``SELECT keys, measures ... GROUP BY``."""

    frame: Frame
    keys: list[Col]
    sets: list[list[Col]] | None = field(default=None)

    def agg(self, *exprs: Col) -> Frame:
        items = [k.named() for k in self.keys] + [c.named() for c in _flat(exprs)]
        q = self.frame._open()
        if self.sets is not None:
            sets = tuple(tuple(_operand(c) for c in s) for s in self.sets)
            return self.frame._new(replace(q, select=tuple(items), grouping_sets=sets))
        return self.frame._new(replace(q, select=tuple(items), group=tuple(_operand(k) for k in self.keys)))


# ------------------------------------------------------------------------------------------- output


def render(frame: Frame) -> tuple[str, dict[str, Any]]:
    """The query's text for ``spark.sql`` and its keyword arguments (the bound tables).

    With tables bound, Spark reads the text with ``str.format``: braces are doubled and each table's
    placeholder becomes ``{tN}``.
    """
    text = frame.sql()
    if "${" in text:
        raise UnsupportedError("a name in the plan contains '${', which Spark SQL would substitute")
    ctx = frame.ctx
    used = {name: df for name, df in ctx.tables.items() if ctx.placeholder(name) in text}
    if not used:
        return text, {}
    text = text.replace("{", "{{").replace("}", "}}")
    for name in used:
        text = text.replace(ctx.placeholder(name), "{" + name + "}")
    return text, used
