"""Random table data for differential tests: values of each column type, small tables and databases of
them, and those values as Substrait literals.

* :func:`values` -- non-null values of a column type (small shared pools first, so that joins and
  filters match rows; then the extremes: NaN, +-inf, -0.0, the integer limits, the widest decimals,
  the first and last dates; then anything).
* :func:`tables`, :func:`databases` -- small tables (0..N rows, duplicates, nulls in nullable columns) of
  the types the Spark backend supports: ``i8``..``i64``, ``fp32``/``fp64``, ``decimal(p,s)``,
  ``string`` (empty and non-ASCII included), ``bool``, ``date``, ``timestamp`` (``precision_timestamp<6>``).
* :func:`literal` -- a value as a Substrait literal of its column type.

Every optional feature is drawn so that Hypothesis shrinks it away (choices shrink to the first option).
"""

from __future__ import annotations

import datetime
import decimal
import math
from collections.abc import Sequence

from hypothesis import strategies as st
from substrait.proto import (
    Expression,
)

from optimizer.difftest.harness import (
    TYPE_SPECS,
    ColumnSpec,
    Database,
    TableSpec,
    spec_type,
)

#: The decimal types generated tables use (one per database, so that columns of two tables compare).
DECIMAL_TYPES = ((9, 2), (18, 4), (38, 10), (5, 0))

_D = decimal.Context(prec=80)
_EPOCH = datetime.datetime(1970, 1, 1)
_EPOCH_DAY = datetime.date(1970, 1, 1)
_MIN_DATE, _MAX_DATE = datetime.date(1, 1, 1), datetime.date(9999, 12, 31)
_MIN_TS, _MAX_TS = datetime.datetime(1, 1, 1), datetime.datetime(9999, 12, 31, 23, 59, 59, 999999)

_SMALL_STRINGS = ["a", "", "b", "ab", "A", "é", "日本語", "a%_b", " ", "😀", "a\nb"]
_FP32_MAX = 3.4028234663852886e38
_INTS = ("i8", "i16", "i32", "i64")
_FLOATS = ("fp32", "fp64")

__all__ = ["DECIMAL_TYPES", "databases", "tables", "values"]



def _maybe(draw, percent: int) -> bool:
    """True with about ``percent`` % probability; shrinks to False."""
    return draw(st.integers(0, 99)) >= 100 - percent


def _pick(draw, options: Sequence):
    """One of ``options`` (shrinks to the first)."""
    return draw(st.sampled_from(list(options)))


def _weighted(draw, options: Sequence[tuple[str, int]]) -> str:
    flat = [name for name, weight in options for _ in range(weight) if weight > 0]
    return draw(st.sampled_from(flat))


# ------------------------------------------------------------------------------------------ values


def _decimal_ps(spec: str) -> tuple[int, int]:
    inner = spec[len("decimal(") : -1]
    p, s = inner.split(",")
    return int(p), int(s)


def _quantize(v: decimal.Decimal, scale: int) -> decimal.Decimal:
    return v.quantize(decimal.Decimal(1).scaleb(-scale), context=_D)


def values(spec: str) -> st.SearchStrategy:
    """Non-null Python values of a column type spec (``i32``, ``decimal(9,2)``, ``timestamp``...):
    half from a small pool shared by all tables (so that filters and joins match rows), a quarter
    extremes, a quarter anything."""
    pool, extremes, anything = _value_parts(spec)
    return st.one_of(pool, pool, extremes, anything)


def _value_parts(spec: str) -> tuple[st.SearchStrategy, st.SearchStrategy, st.SearchStrategy]:
    if spec in ("i8", "i16", "i32", "i64"):
        bits = int(spec[1:])
        lo, hi = -(2 ** (bits - 1)), 2 ** (bits - 1) - 1
        return st.sampled_from([0, 1, 2, -1, 3]), st.sampled_from([lo, hi, lo + 1, hi - 1]), st.integers(lo, hi)
    if spec == "fp64":
        return (
            st.sampled_from([0.0, 1.0, 2.5, -1.0, 0.5]),
            st.sampled_from([math.nan, math.inf, -math.inf, -0.0, 1.7976931348623157e308, -1.7976931348623157e308,
                             5e-324]),
            st.floats(allow_nan=True, allow_infinity=True),
        )
    if spec == "fp32":
        return (
            st.sampled_from([0.0, 1.0, 2.5, -1.0, 0.5]),
            st.sampled_from([math.nan, math.inf, -math.inf, -0.0, _FP32_MAX, -_FP32_MAX, 1.401298464324817e-45]),
            st.floats(width=32, allow_nan=True, allow_infinity=True),
        )
    if spec.startswith("decimal("):
        p, s = _decimal_ps(spec)
        biggest = decimal.Decimal(10**p - 1).scaleb(-s, context=_D)
        small = [decimal.Decimal(x) for x in ("0", "1", "2", "-1")] + ([decimal.Decimal("1.5")] if s else [])
        return (
            st.sampled_from([_quantize(v, s) for v in small]),
            st.sampled_from([biggest, biggest.copy_negate()]),
            st.integers(-(10**p - 1), 10**p - 1).map(lambda u: _quantize(decimal.Decimal(u).scaleb(-s, context=_D), s)),
        )
    if spec == "string":
        return st.sampled_from(_SMALL_STRINGS), st.sampled_from(["", "\x00", "\U0010ffff", "zzzz"]), st.text(max_size=6)
    if spec == "bool":
        return st.booleans(), st.booleans(), st.booleans()
    if spec == "date":
        return (
            st.sampled_from([datetime.date(2000, 1, 1), _EPOCH_DAY, datetime.date(1969, 12, 31),
                             datetime.date(2024, 2, 29)]),
            st.sampled_from([_MIN_DATE, _MAX_DATE]),
            st.dates(_MIN_DATE, _MAX_DATE),
        )
    if spec == "timestamp":
        return (
            st.sampled_from([datetime.datetime(2000, 1, 1), _EPOCH, datetime.datetime(1999, 12, 31, 23, 59, 59, 999999)]),
            st.sampled_from([_MIN_TS, _MAX_TS]),
            st.datetimes(_MIN_TS, _MAX_TS),
        )
    raise ValueError(f"unknown column type {spec!r}")


def pool_values(spec: str) -> st.SearchStrategy:
    """The small shared pool of values of a column type only (see :func:`values`)."""
    return _value_parts(spec)[0]


def _column_values(spec: str, nullable: bool, pooled: bool = False) -> st.SearchStrategy:
    """A column's values: about one in four null when nullable; from the pool only when ``pooled``."""
    base = pool_values(spec) if pooled else values(spec)
    return st.one_of(base, base, base, st.none()) if nullable else base


def _is_pool_value(spec: str, value) -> bool:
    """Whether ``value`` is one of the pool values of ``spec`` (pooled data: exact float sums)."""
    if value is None:
        return True
    if spec in _FLOATS:
        return isinstance(value, float) and math.isfinite(value) and abs(value) <= 3 and (value * 2).is_integer()
    if spec in _INTS:
        return abs(value) <= 3
    return True


@st.composite
def tables(draw, name: str = "t0", *, types: Sequence[str] | None = None, max_columns: int = 4,
           max_rows: int = 8, pooled: bool = False) -> TableSpec:
    """A small table: 1..``max_columns`` columns of ``types`` (type specs; default: every type, with
    ``decimal(9,2)``), 3..``max_rows`` rows plus duplicates (none in 1 %), nulls in the nullable
    columns; ``pooled``: every value from the small shared pool (joins match, float sums are exact)."""
    palette = list(types) if types else [t if t != "decimal" else "decimal(9,2)" for t in TYPE_SPECS]
    n = draw(st.integers(1, max_columns))
    columns = [
        ColumnSpec(f"c{i}", _pick(draw, palette), nullable=not _maybe(draw, 25)) for i in range(n)
    ]
    row = st.tuples(*[_column_values(c.type, c.nullable, pooled) for c in columns])
    rows = draw(st.lists(row, min_size=0 if _maybe(draw, 1) else min(3, max_rows), max_size=max_rows))
    if rows and _maybe(draw, 30):  # duplicates
        rows += draw(st.lists(st.sampled_from(rows), min_size=1, max_size=3))
    return TableSpec(name, columns, rows)


@st.composite
def databases(draw, *, max_tables: int = 3, max_columns: int = 4, max_rows: int = 8,
              types: Sequence[str] = TYPE_SPECS) -> Database:
    """1..``max_tables`` tables ``t0``, ``t1``...; their columns share a palette of 1..4 types (one
    decimal type), so that columns of different tables can be compared and joined. Three in five
    databases hold pool values only (see :func:`tables`)."""
    pooled = _maybe(draw, 60)
    p, s = _pick(draw, DECIMAL_TYPES)
    palette = draw(st.lists(st.sampled_from(list(types)), min_size=1, max_size=4, unique=True))
    palette = [f"decimal({p},{s})" if t == "decimal" else t for t in palette]
    n = draw(st.integers(1, max_tables))
    out = Database()
    for i in range(n):
        out.tables[f"t{i}"] = draw(tables(f"t{i}", types=palette, max_columns=max_columns, max_rows=max_rows,
                                          pooled=pooled))
    return out


# ---------------------------------------------------------------------------------------- literals


def literal(spec: str, value) -> Expression:
    """A literal expression of a column type spec (``value`` None: a typed null)."""
    e = Expression()
    lit = e.literal
    if value is None:
        lit.null.CopyFrom(spec_type(spec, True))
        return e
    if spec in ("i8", "i16", "i32", "i64", "fp32", "fp64", "string"):
        setattr(lit, spec, value)
    elif spec == "bool":
        lit.boolean = value
    elif spec == "date":
        lit.date = (value - _EPOCH_DAY).days
    elif spec == "timestamp":
        lit.precision_timestamp.precision = 6
        lit.precision_timestamp.value = (value - _EPOCH) // datetime.timedelta(microseconds=1)
    elif spec.startswith("decimal("):
        p, s = _decimal_ps(spec)
        unscaled = int(value.scaleb(s, context=_D))
        lit.decimal.value = unscaled.to_bytes(16, "little", signed=True)
        lit.decimal.precision = p
        lit.decimal.scale = s
    else:
        raise ValueError(f"unknown column type {spec!r}")
    return e


def _literal_value(e: Expression):
    """A sortable stand-in for a literal's value (numbers, strings, booleans, dates; NaN and others as 0)."""
    lit = e.literal
    kind = lit.WhichOneof("literal_type")
    if kind == "decimal":
        return int.from_bytes(lit.decimal.value, "little", signed=True)
    if kind == "precision_timestamp":
        return lit.precision_timestamp.value
    value = getattr(lit, kind) if kind and kind != "null" else 0
    if isinstance(value, float) and math.isnan(value):
        return 0.0
    return value if isinstance(value, int | float | str) else 0


def _bool_literal(value: bool | None) -> Expression:
    return literal("bool", value)
