"""Column expressions of the Spark SQL text (:mod:`optimizer.spark.sql` builds the relations over them).

* :class:`Col` -- a column expression. It has the operators and methods of a PySpark ``Column`` that the
  backend uses (``+``, ``==``, ``&``, ``isNull``, ``cast``, ``alias``, ``isin``, ``over``, sort orders...),
  and :data:`functions` mirrors ``pyspark.sql.functions``: ``F.xyz(args)`` is the Spark SQL function
  ``xyz(args)`` (the names PySpark uses are Spark's SQL names; the few that differ are written out below).
  Python values are literals of the type ``F.lit`` gives them (:func:`optimizer.spark.sql_dialect.literal`).
* :class:`Window` -- ``Window.partitionBy(...).orderBy(...).rowsBetween(...)`` as an ``OVER (...)`` clause.

Each builds a sqlglot node; operands are parenthesised where the printed text needs it. A relation
(:class:`Relation`) is an operand only as a subquery: ``IN (query)``, ``EXISTS``, a scalar subquery.

>>> x = col("`a`")
>>> functions.when(x.isNull(), "none").otherwise(x.cast("string")).alias("b").sql()
"CASE WHEN `a` IS NULL THEN 'none' ELSE CAST(`a` AS string) END AS `b`"
>>> ((x + 1) * 2).sql()
'(`a` + 1) * 2'
"""

from __future__ import annotations

import itertools
from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from typing import Any

from pyspark.sql import types as T
from sqlglot import exp

from optimizer.errors import UnsupportedError
from optimizer.spark.sql_dialect import (
    LONG_MAX,
    LONG_MIN,
    cast_target,
    is_int_text,
    literal,
    sql_text,
    typed_as,
)

__all__ = ["Col", "Relation", "SortOrder", "Window", "WindowSpec", "as_operand", "col", "flat", "functions", "lit",
           "operand", "sort_order", "when"]


class Relation(ABC):
    """What a column expression needs of a relation (:class:`optimizer.spark.sql.Frame`): its query, for
    ``IN (subquery)``, and a join hint, for ``broadcast``."""

    @abstractmethod
    def query(self) -> exp.Expression:
        """The relation as a query (the subquery's text)."""

    @abstractmethod
    def hint(self, name: str) -> Relation:
        """The relation with a join hint for the join that reads it."""


# Nodes that print as one operand (no parentheses needed around them inside an operator). A whitelist:
# sqlglot's AND, OR and several operators are also function nodes (``exp.Func``).
_ATOMIC = (exp.Column, exp.Literal, exp.Null, exp.Boolean, exp.Anonymous, exp.Cast, exp.Case, exp.Paren,
           exp.Subquery, exp.Dot, exp.Window, exp.Exists, exp.Identifier, exp.Star)


def as_operand(e: exp.Expression) -> exp.Expression:
    """``e`` as an operand: parenthesised unless it prints as one unit."""
    if isinstance(e, exp.Literal) and not e.is_string and e.this.startswith("-"):
        return exp.Paren(this=e)
    return e if type(e) in _ATOMIC_TYPES else exp.Paren(this=e)


_ATOMIC_TYPES = frozenset(_ATOMIC) | {exp.TryCast}


def _binary(cls: type[exp.Expression], reflected: bool = False) -> Callable[[Col, Any], Col]:
    """The method ``a.m(b)`` (an operator, or ``eqNullSafe``...) of a :class:`Col`: ``cls(a, b)``, or
    ``cls(b, a)`` when ``reflected`` (``__radd__``: ``b + a``)."""

    def method(self: Col, other: Any) -> Col:
        a, b = as_operand(self.e), as_operand(operand(other))
        if reflected:
            a, b = b, a
        return Col(cls(this=a, expression=b))

    return method


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
        return sql_text(self.named())

    def __repr__(self) -> str:
        return f"Col<{self.sql()}>"

    def __bool__(self) -> bool:
        raise TypeError("a column has no truth value: use & | ~ for and, or, not")

    __hash__ = None  # type: ignore[assignment] -- == builds an expression

    # ---------------------------------------------------------------------------------- operators

    __add__ = _binary(exp.Add)
    __radd__ = _binary(exp.Add, reflected=True)
    __sub__ = _binary(exp.Sub)
    __rsub__ = _binary(exp.Sub, reflected=True)
    __mul__ = _binary(exp.Mul)
    __rmul__ = _binary(exp.Mul, reflected=True)
    __truediv__ = _binary(exp.Div)
    __rtruediv__ = _binary(exp.Div, reflected=True)
    __mod__ = _binary(exp.Mod)
    __rmod__ = _binary(exp.Mod, reflected=True)
    __eq__ = _binary(exp.EQ)  # type: ignore[assignment]
    __ne__ = _binary(exp.NEQ)  # type: ignore[assignment]
    __lt__ = _binary(exp.LT)
    __le__ = _binary(exp.LTE)
    __gt__ = _binary(exp.GT)
    __ge__ = _binary(exp.GTE)
    __and__ = _binary(exp.And)
    __rand__ = _binary(exp.And, reflected=True)
    __or__ = _binary(exp.Or)
    __ror__ = _binary(exp.Or, reflected=True)
    eqNullSafe = _binary(exp.NullSafeEQ)
    bitwiseAND = _binary(exp.BitwiseAnd)
    bitwiseOR = _binary(exp.BitwiseOr)
    bitwiseXOR = _binary(exp.BitwiseXor)

    def __invert__(self) -> Col:
        return Col(exp.Not(this=as_operand(self.e)))

    def __neg__(self) -> Col:
        return Col(exp.Neg(this=as_operand(self.e)))

    # ------------------------------------------------------------------------------------ methods

    def isNull(self) -> Col:
        return Col(exp.Is(this=as_operand(self.e), expression=exp.Null()))

    def isNotNull(self) -> Col:
        return Col(exp.Not(this=exp.Paren(this=exp.Is(this=as_operand(self.e), expression=exp.Null()))))

    def cast(self, data_type: T.DataType | str) -> Col:
        to = cast_target(data_type)
        if typed_as(self.e, to):
            return Col(self.e)
        return Col(exp.Cast(this=self.e, to=to))

    def try_cast(self, data_type: T.DataType | str) -> Col:
        to = cast_target(data_type)
        if typed_as(self.e, to):
            return Col(self.e)
        return Col(exp.TryCast(this=self.e, to=to, safe=True))

    def alias(self, name: str) -> Col:
        return Col(self.e, name)

    name = alias

    def outer(self) -> Col:
        """An outer reference: the same name (names are unique, so it resolves to the enclosing query)."""
        return self

    def isin(self, *values: Any) -> Col:
        if len(values) == 1 and isinstance(values[0], Relation):
            needle = self.e if not isinstance(self, _StructCol) else exp.Tuple(expressions=list(self.members))
            return Col(exp.In(this=as_operand(needle), query=exp.Subquery(this=values[0].query())))
        if len(values) == 1 and isinstance(values[0], list | set | tuple):
            values = tuple(values[0])
        return Col(exp.In(this=as_operand(self.e), expressions=[operand(v) for v in values]))

    def getField(self, name: str) -> Col:
        return Col(exp.Dot(this=as_operand(self.e) if not isinstance(self.e, exp.Column) else exp.Paren(this=self.e),
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

    def rlike(self, pattern: Any) -> Col:
        return _call("rlike", self, pattern)

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
            e = exp.Cast(this=e, to=cast_target("int" if is_int_text(e.this) else "double"))
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
        return _Case([*self.ifs, exp.If(this=operand(condition), true=operand(value))])

    def otherwise(self, value: Any) -> Col:
        if self.closed:
            raise TypeError("otherwise() given twice")
        return _Case(self.ifs, operand(value), True)


class _StructCol(Col):
    """``struct(a, b)``: also a row of values for a multi-column ``IN``."""

    __slots__ = ("members",)

    def __init__(self, e: exp.Expression, members: list[exp.Expression]) -> None:
        super().__init__(e)
        self.members = members



def operand(value: Any) -> exp.Expression:
    """A column's expression (its alias dropped, as Spark drops inner aliases) or a Python literal."""
    if isinstance(value, Col):
        return value.e
    if isinstance(value, SortOrder):
        raise TypeError("a sort order is not an expression")
    if isinstance(value, Relation):
        raise TypeError("a relation is not an expression: use exists() or scalar()")
    return lit(value).e



def lit(value: Any) -> Col:
    """``F.lit``: a literal of the type PySpark gives the Python value."""
    if isinstance(value, Col):
        return value
    return Col(literal(value))


def col(name: str) -> Col:
    """``F.col``: a back-quoted name (``\\`a\\```) or a plain one."""
    if len(name) >= 2 and name[0] == "`" and name[-1] == "`":
        name = name[1:-1].replace("``", "`")
    return Col(exp.Column(this=exp.to_identifier(name, quoted=True)))


def when(condition: Any, value: Any) -> Col:
    return _Case([exp.If(this=operand(condition), true=operand(value))])


def _call(name: str, *args: Any) -> Col:
    return Col(exp.Anonymous(this=name, expressions=[operand(a) for a in args]))


_lambda_names = itertools.count(1)


def _lambda(fn: Callable[..., Col], n: int) -> exp.Expression:
    names = [f"_lv{next(_lambda_names)}" for _ in range(n)]
    body = fn(*[Col(exp.Column(this=exp.to_identifier(x))) for x in names])
    return exp.Lambda(this=operand(body), expressions=[exp.to_identifier(x) for x in names])


class _Functions:
    """``pyspark.sql.functions`` for :class:`Col`: ``F.xyz(*args)`` is the SQL function ``xyz(args)``."""

    col = staticmethod(col)
    lit = staticmethod(lit)
    when = staticmethod(when)

    @staticmethod
    def call_function(name: str, *args: Any) -> Col:
        return _call(name, *args)

    @staticmethod
    def broadcast(frame: Relation) -> Relation:
        return frame.hint("broadcast")

    @staticmethod
    def struct(*cols: Any) -> Col:
        items = [c.named() if isinstance(c, Col) else operand(c) for c in cols]
        return _StructCol(exp.Anonymous(this="struct", expressions=items), [operand(c) for c in cols])

    @staticmethod
    def count_distinct(*cols: Any) -> Col:
        return Col(exp.Anonymous(this="count", expressions=[exp.Distinct(expressions=[operand(c) for c in cols])]))

    @staticmethod
    def sum_distinct(c: Any) -> Col:
        return Col(exp.Anonymous(this="sum", expressions=[exp.Distinct(expressions=[operand(c)])]))

    @staticmethod
    def string_agg(c: Any, delimiter: Any) -> Col:
        return _call("string_agg", c, delimiter)

    @staticmethod
    def string_agg_distinct(c: Any, delimiter: Any) -> Col:
        return Col(exp.Anonymous(this="string_agg",
                                 expressions=[exp.Distinct(expressions=[operand(c)]), operand(delimiter)]))

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
        return Col(exp.Anonymous(this="array_sort", expressions=[operand(c), _lambda(comparator, 2)]))

    @staticmethod
    def transform(c: Any, fn: Callable[[Col], Col]) -> Col:
        return Col(exp.Anonymous(this="transform", expressions=[operand(c), _lambda(fn, 1)]))

    @staticmethod
    def zip_with(a: Any, b: Any, fn: Callable[[Col, Col], Col]) -> Col:
        return Col(exp.Anonymous(this="zip_with", expressions=[operand(a), operand(b), _lambda(fn, 2)]))

    @staticmethod
    def aggregate(c: Any, initial: Any, merge: Callable[[Col, Col], Col],
                  finish: Callable[[Col], Col] | None = None) -> Col:
        args = [operand(c), operand(initial), _lambda(merge, 2)]
        if finish is not None:
            args.append(_lambda(finish, 1))
        return Col(exp.Anonymous(this="aggregate", expressions=args))

    @staticmethod
    def extract(field: Any, source: Any) -> Col:
        return _call("date_part", field, source)

    @staticmethod
    def timestamp_diff(unit: str, start: Any, end: Any) -> Col:
        return Col(exp.Anonymous(this="timestampdiff", expressions=[exp.Var(this=unit.upper()), operand(start),
                                                                     operand(end)]))

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
        return Col(exp.BitwiseNot(this=as_operand(operand(c))))

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
        return WindowSpec(tuple(operand(c) for c in flat(cols)), self.order, self.frame)

    def orderBy(self, *cols: Any) -> WindowSpec:
        return WindowSpec(self.partition, tuple(sort_order(c) for c in flat(cols)), self.frame)

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

    unboundedPreceding = LONG_MIN
    unboundedFollowing = LONG_MAX
    currentRow = 0

    @staticmethod
    def partitionBy(*cols: Any) -> WindowSpec:
        return WindowSpec().partitionBy(*cols)

    @staticmethod
    def orderBy(*cols: Any) -> WindowSpec:
        return WindowSpec().orderBy(*cols)


def flat(cols: Sequence[Any]) -> list[Any]:
    return list(cols[0]) if len(cols) == 1 and isinstance(cols[0], list | tuple) else list(cols)


def sort_order(c: Any) -> SortOrder:
    if isinstance(c, SortOrder):
        return c
    if isinstance(c, str):
        return SortOrder(col(c), False, True)
    return SortOrder(c if isinstance(c, Col) else lit(c), False, True)


