"""What the cardinality estimator estimates, and the defaults it falls back on.

:class:`ColumnEstimate` and :class:`RelEstimate` are the estimates of a column and of a relation;
the ``DEFAULT_*`` values are used when the statistics do not say (why each value:
``docs/cost-model.md``, "Default selectivities"). :func:`q_error` measures an estimate against the
actual row count.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field, fields
from typing import Any

from optimizer.cost.statistics import Histogram, to_numeric
from substrait.proto import Expression, Type

from optimizer.expr_utils import call_args, conjuncts, field_index, function_name
from optimizer.load.functions import FunctionTable
from optimizer.schema.types import type_kind

# --------------------------------------------------------------------------------------------------
# Defaults (why each value: docs/cost-model.md, "Default selectivities")
# --------------------------------------------------------------------------------------------------

#: Rows of a table nothing is known about (large on purpose: an unknown table is never broadcast).
DEFAULT_TABLE_ROWS = 1_000_000.0
#: ``col = value`` when the column's NDV is unknown.
DEFAULT_EQ_SEL = 0.1
#: ``col < value`` (and the other range comparisons) when the column's bounds are unknown.
DEFAULT_RANGE_SEL = 1.0 / 3.0
#: ``col BETWEEN a AND b`` when the column's bounds are unknown.
DEFAULT_BETWEEN_SEL = 0.25
#: Each literal fragment of a LIKE pattern (``'%green%'``: one, ``'%a%b%'``: two, multiplied).
DEFAULT_LIKE_SEL = 0.1
#: Each character of a LIKE fragment beyond 5 multiplies its selectivity by this (fewer: divides).
LIKE_CHAR_FACTOR = 0.8
#: ``col IS NULL`` when the null count is unknown and the type is nullable.
DEFAULT_NULL_SEL = 0.01
#: A boolean expression nothing is known about (a function we do not model, a subquery...).
DEFAULT_SEL = 0.25
#: A boolean column used as a predicate, ``EXISTS (subquery)``, ``x IN (subquery)``.
DEFAULT_BOOL_SEL = 0.5
#: Groups of an aggregate on a key whose NDV is unknown, as a fraction of the input rows.
DEFAULT_GROUP_FRACTION = 0.1
#: Overlap of the inputs of INTERSECT / MINUS when nothing says otherwise.
DEFAULT_SET_OVERLAP = 0.5
#: Bytes of a string/binary value whose average length is unknown.
DEFAULT_STRING_WIDTH = 20.0
#: A column is a unique key of its table when its NDV is at least this fraction of the row count
#: (Spark's HyperLogLog++ NDV has a 5% relative standard error: a key of 15000 rows may say 14240).
UNIQUE_KEY_FRACTION = 0.9

#: Kinds whose values are whole numbers in the numeric domain (a range of them counts its values).
INTEGRAL_KINDS = {"i8", "i16", "i32", "i64", "date", "timestamp", "timestamp_tz", "precision_timestamp",
                  "precision_timestamp_tz", "time", "precision_time"}
_TYPE_WIDTH = {"bool": 1, "i8": 1, "i16": 2, "i32": 4, "i64": 8, "fp32": 4, "fp64": 8, "date": 4, "time": 8,
               "timestamp": 8, "timestamp_tz": 8, "precision_timestamp": 8, "precision_timestamp_tz": 8,
               "precision_time": 8, "interval_year": 4, "interval_day": 8, "interval_compound": 16, "uuid": 16,
               "decimal": 16}
#: Spark's names of the integral types (of statistics read from Spark).
SPARK_INTEGRAL_TYPES = {"tinyint", "smallint", "int", "bigint", "byte", "short", "integer", "long", "date",
                        "timestamp", "timestamp_ntz"}
TEXT_KINDS = ("string", "varchar", "char", "fixed_char", "var_char", "binary", "fixed_binary")

COMPARISONS = {"equal", "not_equal", "lt", "lte", "gt", "gte", "is_not_distinct_from", "is_distinct_from"}
#: The comparison with its operands swapped (``a < b`` is ``b > a``).
FLIPPED_COMPARISON = {"lt": "gt", "lte": "gte", "gt": "lt", "gte": "lte", "equal": "equal", "not_equal": "not_equal",
                      "is_not_distinct_from": "is_not_distinct_from", "is_distinct_from": "is_distinct_from"}
#: What :func:`literal_value` and :func:`literal_of` give for something that is not a usable literal.
NOT_LITERAL = object()


# --------------------------------------------------------------------------------------------------
# Data model
# --------------------------------------------------------------------------------------------------


@dataclass
class ColumnEstimate:
    """What is known about one output column; ``None`` means unknown.

    ``min``/``max`` are floats in the :func:`~cost.statistics.to_numeric` domain, or strings for text
    columns. ``histogram`` is the base table's equi-height histogram (never rescaled: selectivities
    are computed on the part of it between the current ``min`` and ``max``). ``origin`` is
    ``(read node, base column)`` for a column read unchanged from a table; ``key_of`` the read nodes
    of which this column's values identify one row (a unique key, also through equi-joins);
    ``integral`` says the values are discrete (integers, dates). ``domain`` is the number of distinct
    values the column could take (its base column's NDV, kept through filters and joins: a filtered
    key still draws from the whole key domain); ``normal`` ``(mean, sd)`` describes the values of a
    computed aggregate (a sum per group is about normally distributed); ``moments`` ``(mean, variance)``
    those of an arithmetic expression.
    """

    ndv: float | None = None
    min: Any = None
    max: Any = None
    null_fraction: float | None = None
    avg_len: float | None = None
    histogram: Histogram | None = None
    origin: tuple[int, int] | None = None
    key_of: frozenset[int] = frozenset()
    integral: bool = False
    domain: float | None = None
    normal: tuple[float, float] | None = None
    moments: tuple[float, float] | None = None

    @property
    def numeric(self) -> bool:
        return isinstance(self.min, float | int) and isinstance(self.max, float | int)

    def with_ndv(self, ndv: float | None) -> ColumnEstimate:
        """A copy with another ``ndv`` (:func:`evolve`)."""
        return evolve(self, ndv=ndv)


@dataclass
class RelEstimate:
    """Estimated output of a relation: ``rows``, ``width`` in bytes per row, one column estimate each.

    ``applied`` holds fingerprints of the predicates already applied below (in terms of the base
    columns they read), so that a filter repeated above a read (as DataFusion writes them) is not
    counted twice. ``fds`` holds ``(a, b)`` pairs of read nodes: a row of ``a`` determines one row of
    ``b`` (joined on ``b``'s unique key); aggregates use them to drop functionally dependent keys.
    ``source`` is ``"derived"``, ``"hint"`` or ``"default"``. ``exprs`` holds what filters said about
    computed expressions (``substring(c_phone, 1, 2) IN (7 values)`` leaves 7 distinct values), keyed by
    the expression's fingerprint. ``spark_bytes`` is the size Spark plans the relation by when it is
    left to choose (:mod:`cost.spark_size`; None: unknown).
    """

    rows: float
    width: float
    columns: list[ColumnEstimate | None] = field(default_factory=list)
    applied: frozenset = frozenset()
    fds: frozenset[tuple[int, int]] = frozenset()
    source: str = "derived"
    exprs: dict[bytes, ColumnEstimate] = field(default_factory=dict)
    spark_bytes: float | None = None

    @property
    def bytes(self) -> float:
        return self.rows * self.width


def evolve(estimate: Any, **changes: Any) -> Any:
    """A copy of a :class:`ColumnEstimate` or :class:`RelEstimate` with ``changes``: what
    ``dataclasses.replace`` gives (neither class has ``__post_init__`` or init-only fields), in a
    fraction of its time (the estimator makes several per relation and per column)."""
    cls = type(estimate)
    unknown = changes.keys() - _FIELDS[cls]
    if unknown:
        raise TypeError(f"{cls.__name__} has no field {sorted(unknown)[0]!r}")
    new = object.__new__(cls)
    _COPY_FIELDS[cls](estimate, new)
    for name, value in changes.items():
        setattr(new, name, value)
    return new


def _field_copier(cls: type) -> Any:
    """A function that sets each field of ``cls`` on one instance from another, attribute by attribute:
    reading or writing an instance's ``__dict__`` would make Python build one for it (an object of its
    own, which the garbage collector walks: the estimates of a wide join graph are tens of thousands)."""
    lines = [f"    new.{f.name} = old.{f.name}" for f in fields(cls)]
    namespace: dict[str, Any] = {}
    exec("def copy_fields(old, new):\n" + "\n".join(lines) + "\n", namespace)  # noqa: S102 - field names only
    return namespace["copy_fields"]


_FIELDS = {cls: frozenset(f.name for f in fields(cls)) for cls in (ColumnEstimate, RelEstimate)}
_COPY_FIELDS = {cls: _field_copier(cls) for cls in (ColumnEstimate, RelEstimate)}


# --------------------------------------------------------------------------------------------------
# Small helpers
# --------------------------------------------------------------------------------------------------


def type_width(t: Type | None) -> float:
    """Default bytes per value of a type (strings: :data:`DEFAULT_STRING_WIDTH`)."""
    kind = type_kind(t)
    if kind is None:
        return 8.0
    if kind in _TYPE_WIDTH:
        if kind == "decimal":
            return 8.0 if t.decimal.precision <= 18 else 16.0
        return float(_TYPE_WIDTH[kind])
    if kind in ("fixed_char", "fixed_binary"):
        return float(getattr(t, kind).length or DEFAULT_STRING_WIDTH)
    if kind == "varchar":
        return float(min(t.varchar.length, DEFAULT_STRING_WIDTH) if t.varchar.length else DEFAULT_STRING_WIDTH)
    if kind == "struct":
        return sum(type_width(x) for x in t.struct.types) or 8.0
    if kind in ("list", "map"):
        return 4 * DEFAULT_STRING_WIDTH
    return DEFAULT_STRING_WIDTH


def _string_key(s: str) -> float:
    """Strings mapped to [0, 1) preserving order on their first 8 characters (for interpolation)."""
    out = 0.0
    scale = 1.0
    for ch in s[:8]:
        scale /= 256.0
        out += min(ord(ch), 255) * scale
    return out


def as_number(value: Any) -> float | None:
    if isinstance(value, bool):
        return float(value)
    if isinstance(value, int | float):
        return float(value)
    if isinstance(value, str):
        return _string_key(value)
    return None


def distinct_after_sampling(ndv: float, rows: float, fraction: float) -> float:
    """Expected distinct values left when each of ``rows`` rows (``ndv`` distinct, uniform) is kept with
    probability ``fraction``.

    >>> round(distinct_after_sampling(100, 10_000, 0.5), 3)
    100.0
    >>> round(distinct_after_sampling(10_000, 10_000, 0.5))
    5000
    """
    if ndv <= 0 or rows <= 0:
        return 0.0
    fraction = min(max(fraction, 0.0), 1.0)
    per_value = max(rows / ndv, 1.0)
    if fraction >= 1.0:
        return ndv
    return ndv * -math.expm1(per_value * math.log1p(-fraction))


def expected_groups(domain: float, rows: float) -> float:
    """Expected distinct combinations when ``rows`` rows draw uniformly from ``domain`` combinations.

    >>> expected_groups(10, 1_000_000)
    10.0
    >>> round(expected_groups(1e12, 1000))
    1000
    """
    if rows <= 0:
        return 0.0
    if domain <= 1:
        return 1.0
    if domain > 1e15:
        return rows
    return float(min(domain, rows, domain * -math.expm1(rows * math.log1p(-1.0 / domain))))


def cap_column(col: ColumnEstimate | None, rows: float) -> ColumnEstimate | None:
    if col is None or col.ndv is None or col.ndv <= rows:
        return col
    return col.with_ndv(max(rows, 0.0))


def scale_column(col: ColumnEstimate | None, in_rows: float, fraction: float, out_rows: float) -> ColumnEstimate | None:
    """A column of a relation of which a ``fraction`` of the rows survives (``out_rows`` in all)."""
    if col is None or col.ndv is None:
        return col
    ndv = min(distinct_after_sampling(col.ndv, in_rows, fraction), max(out_rows, 0.0))
    if col.ndv >= 1 and out_rows >= 1:
        ndv = max(ndv, 1.0)
    # Column estimates are never changed once made: one whose NDV stays is shared, not copied.
    return col if ndv == col.ndv else col.with_ndv(ndv)


def literal_value(lit: Expression.Literal) -> Any:
    """The comparable value of a literal (float, str, or None for null); ``NOT_LITERAL`` if unsupported."""
    kind = lit.WhichOneof("literal_type")
    if kind in ("i8", "i16", "i32", "i64", "fp32", "fp64"):
        return float(getattr(lit, kind))
    if kind == "boolean":
        return float(lit.boolean)
    if kind in ("string", "var_char", "fixed_char"):
        value = getattr(lit, kind)
        return value.value if kind == "var_char" else value
    if kind == "date":
        return float(lit.date)
    if kind == "decimal":
        raw = int.from_bytes(lit.decimal.value, "little", signed=True)
        return raw / (10 ** lit.decimal.scale)
    if kind == "timestamp" or kind == "timestamp_tz":
        return float(getattr(lit, kind))
    if kind in ("precision_timestamp", "precision_timestamp_tz"):
        ts = getattr(lit, kind)
        return float(ts.value) * 10.0 ** (6 - ts.precision)
    if kind == "null":
        return None
    return NOT_LITERAL


def literal_of(e: Expression) -> Any:
    """The value of a literal expression, or of a cast of a literal (``NOT_LITERAL`` otherwise)."""
    rex = e.WhichOneof("rex_type")
    if rex == "literal":
        return literal_value(e.literal)
    if rex == "cast" and e.cast.input.WhichOneof("rex_type") == "literal":
        value = literal_value(e.cast.input.literal)
        if value is NOT_LITERAL or value is None:
            return value
        target = type_kind(e.cast.type)
        if isinstance(value, str) and target not in (None, *TEXT_KINDS):
            spark = {"date": "date", "timestamp": "timestamp", "precision_timestamp": "timestamp"}.get(target, "double")
            converted = to_numeric(value, spark)
            return converted if converted is not None else NOT_LITERAL
        if isinstance(value, float) and target in TEXT_KINDS:
            return NOT_LITERAL
        return value
    return NOT_LITERAL


def column_of(e: Expression) -> int | None:
    """The input column of a field reference, also under casts (``CAST($3 AS decimal)`` -> 3)."""
    while e.WhichOneof("rex_type") == "cast":
        e = e.cast.input
    return field_index(e)



#: The comparisons that make a join key.
EQUI_FUNCTIONS = frozenset({"equal", "is_not_distinct_from"})


def equi_pairs(condition: Expression, n_left: int, functions: FunctionTable,
               column: Callable[[Expression], int | None] = column_of) -> tuple[list[tuple[int, int]], list[Expression]]:
    """``(pairs, rest)``: the ``(left column, right column relative to the right input)`` of the
    conjuncts of a join condition that compare a column of each input with ``equal`` or
    ``is_not_distinct_from``, and the other conjuncts. ``column``: what a column is (default
    :func:`column_of`, casts looked through; :func:`~optimizer.expr_utils.field_index`: plain references)."""
    pairs: list[tuple[int, int]] = []
    rest: list[Expression] = []
    for c in conjuncts(condition, functions):
        args = call_args(c) if function_name(c, functions) in EQUI_FUNCTIONS else None
        if args is not None and len(args) == 2:
            a, b = column(args[0]), column(args[1])
            if a is not None and b is not None:
                if a < n_left <= b:
                    pairs.append((a, b - n_left))
                    continue
                if b < n_left <= a:
                    pairs.append((b, a - n_left))
                    continue
        rest.append(c)
    return pairs, rest


def q_error(estimated: float, actual: float) -> float:
    """``max(est/act, act/est)`` with both floored at 1 row.

    >>> q_error(10, 100), q_error(0, 0), q_error(50, 5)
    (10.0, 1.0, 10.0)
    """
    e, a = max(float(estimated), 1.0), max(float(actual), 1.0)
    return max(e / a, a / e)
