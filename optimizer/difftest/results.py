"""Result comparison of two Arrow tables: the ground truth of every execution test and benchmark.

:func:`compare_tables` decides whether ``actual`` and ``expected`` hold the same rows:

* columns are matched by position (names are ignored); column count, then row count are checked first;
* rows are compared as a multiset (duplicates count), by sorting both sides on one canonical key
  (O(n log n), vectorised with pyarrow/numpy: 100k rows take well under a second);
* null equals null, NaN equals NaN, ``-0.0`` equals ``0.0``;
* floating point values match within ``rel_tol`` (relative, default 1e-9) or ``abs_tol``;
* numbers of different types compare numerically: integers of any width exactly, decimals of the same scale
  exactly, anything else involving a float or two decimals of different scales as float64 with the tolerance
  above, widened by one unit of the coarsest decimal scale (a decimal(19,6) average of 25.522005 matches the
  double 25.5220051..., a decimal(38,0) matches an int64 exactly);
* strings of any Arrow flavour (``string``, ``large_string``, ``string_view``, dictionary) compare as text;
  dates, timestamps (any unit, with or without time zone), times and durations are normalised to int64
  nanoseconds, so ``date32`` matches ``timestamp`` at midnight;
* ``ordered_by`` (positions of the sort-key columns, as in the query's ORDER BY) additionally checks the order:
  the sequence of key values row by row must be the same on both sides, so ties may come in any order and the
  sort direction needs not be given.

>>> import pyarrow as pa
>>> a = pa.table({"x": [1, 2, 2], "y": [0.1 + 0.2, None, float("nan")]})
>>> b = pa.table({"k": [2, 1, 2], "v": [None, 0.3, float("nan")]})
>>> compare_tables(a, b).equal
True
>>> compare_tables(a, b, ordered_by=[0]).reason
'order differs at row 0 on key columns [0]: actual (1,), expected (2,)'
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass, field
from decimal import Decimal

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

_SAMPLE = 5


@dataclass
class Comparison:
    """The verdict of :func:`compare_tables`; truthy when equal."""

    equal: bool
    reason: str = ""
    #: up to 5 rows found in ``actual`` but not in ``expected`` (canonical values), and the converse.
    actual_only: list[tuple] = field(default_factory=list)
    expected_only: list[tuple] = field(default_factory=list)
    #: for an order difference: the first row (position in both tables) whose keys differ.
    row: int | None = None

    def __bool__(self) -> bool:
        return self.equal

    def __str__(self) -> str:
        if self.equal:
            return "equal"
        lines = [self.reason]
        if self.actual_only:
            lines.append("  only in actual:   " + "; ".join(map(repr, self.actual_only)))
        if self.expected_only:
            lines.append("  only in expected: " + "; ".join(map(repr, self.expected_only)))
        return "\n".join(lines)


@dataclass
class _Column:
    """A pair of columns brought to one canonical Arrow type."""

    actual: pa.Array
    expected: pa.Array
    approx: bool  # compare as float64 with tolerance
    abs_tol: float


# --------------------------------------------------------------------------------------------- typing


def _as_table(data) -> pa.Table:
    if isinstance(data, pa.Table):
        return data
    if isinstance(data, pa.RecordBatch):
        return pa.Table.from_batches([data])
    return pa.table(data)


def _array(col) -> pa.Array:
    if isinstance(col, pa.ChunkedArray):
        col = col.combine_chunks() if col.num_chunks != 1 else col.chunk(0)
    if pa.types.is_dictionary(col.type):
        col = col.dictionary_decode()
    if isinstance(col.type, pa.ExtensionType):
        col = col.storage
    return col


def _family(t: pa.DataType) -> str:
    if pa.types.is_null(t):
        return "null"
    if pa.types.is_boolean(t):
        return "bool"
    if pa.types.is_integer(t):
        return "int"
    if pa.types.is_floating(t):
        return "float"
    if pa.types.is_decimal(t):
        return "decimal"
    if pa.types.is_string(t) or pa.types.is_large_string(t) or _is_string_view(t):
        return "string"
    if (
        pa.types.is_binary(t)
        or pa.types.is_large_binary(t)
        or pa.types.is_fixed_size_binary(t)
        or _is_binary_view(t)
    ):
        return "binary"
    if pa.types.is_date(t) or pa.types.is_timestamp(t) or pa.types.is_time(t):
        return "temporal"
    if pa.types.is_duration(t):
        return "duration"
    return "other"


def _is_string_view(t: pa.DataType) -> bool:
    return hasattr(pa.types, "is_string_view") and pa.types.is_string_view(t)


def _is_binary_view(t: pa.DataType) -> bool:
    return hasattr(pa.types, "is_binary_view") and pa.types.is_binary_view(t)


_NS = {"s": 1_000_000_000, "ms": 1_000_000, "us": 1_000, "ns": 1}


def _to_ns(arr: pa.Array) -> pa.Array:
    """Dates, timestamps, times and durations as int64 nanoseconds (since the epoch or midnight)."""
    t = arr.type
    if pa.types.is_date32(t):
        days = arr.cast(pa.int32()).cast(pa.int64())
        return pc.multiply(days, pa.scalar(86_400 * 1_000_000_000, pa.int64()))
    if pa.types.is_date64(t):
        return pc.multiply(arr.cast(pa.int64()), pa.scalar(1_000_000, pa.int64()))
    unit = getattr(t, "unit", "ns")
    if pa.types.is_time32(t):
        raw = arr.cast(pa.int32()).cast(pa.int64())
    else:
        raw = arr.cast(pa.int64())
    return pc.multiply(raw, pa.scalar(_NS[unit], pa.int64()))


def _repr_array(arr: pa.Array) -> pa.Array:
    """A last-resort canonical form: each value's repr (nested and exotic types)."""
    return pa.array([None if v is None else repr(v) for v in arr.to_pylist()], pa.large_string())


def _canonical_pair(a: pa.Array, b: pa.Array, decimal_ulp: bool = False) -> _Column | str:
    """Bring two columns to one comparable type, or return why they cannot be compared."""
    a, b = _array(a), _array(b)
    fa, fb = _family(a.type), _family(b.type)
    if fa == "null" and fb == "null":
        return _Column(a.cast(pa.int64()), b.cast(pa.int64()), False, 0.0)
    if fa == "null":
        a, fa = pa.nulls(len(a), b.type), fb
    elif fb == "null":
        b, fb = pa.nulls(len(b), a.type), fa
    if fa in _NUMERIC and fb in _NUMERIC:
        return _numeric_pair(a, b, fa, fb, decimal_ulp)
    if fa != fb:
        return f"incompatible types {a.type} and {b.type}"
    if fa == "bool":
        return _Column(a, b, False, 0.0)
    if fa == "string":
        return _Column(a.cast(pa.large_string()), b.cast(pa.large_string()), False, 0.0)
    if fa == "binary":
        return _Column(a.cast(pa.large_binary()), b.cast(pa.large_binary()), False, 0.0)
    if fa in ("temporal", "duration"):
        if pa.types.is_time(a.type) != pa.types.is_time(b.type):
            return f"incompatible types {a.type} and {b.type}"
        return _Column(_to_ns(a), _to_ns(b), False, 0.0)
    return _Column(_repr_array(a), _repr_array(b), False, 0.0)


_NUMERIC = {"int", "float", "decimal"}


def _numeric_pair(a: pa.Array, b: pa.Array, fa: str, fb: str, decimal_ulp: bool = False) -> _Column:
    if fa == fb == "int":
        # uint64 beyond int64's range: compare both as decimal(38, 0), exactly
        target = pa.decimal128(38, 0) if pa.uint64() in (a.type, b.type) else pa.int64()
        return _Column(a.cast(target), b.cast(target), False, 0.0)
    if fa == fb == "decimal" and a.type.scale == b.type.scale and not (decimal_ulp and a.type.scale > 0):
        if max(a.type.precision, b.type.precision) > 38:
            target = pa.decimal256(76, a.type.scale)
        else:
            target = pa.decimal128(38, a.type.scale)
        return _Column(a.cast(target), b.cast(target), False, 0.0)
    scales = [t.scale for t in (a.type, b.type) if pa.types.is_decimal(t)]
    if {fa, fb} == {"int", "decimal"} and scales == [0]:
        try:  # a whole-number decimal (DuckDB's HUGEINT sums) against an integer: exact
            return _Column(a.cast(pa.int64()), b.cast(pa.int64()), False, 0.0)
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
            pass
    positive = [s for s in scales if s > 0]
    # one unit of the last place (a hair more: the difference is computed in float64)
    tol = 10.0 ** -min(positive) * (1 + 1e-6) if positive else 0.0
    return _Column(pc.cast(a, pa.float64(), safe=False), pc.cast(b, pa.float64(), safe=False), True, tol)


# ------------------------------------------------------------------------------------------ comparing


def _equal_mask(a: pa.Array, b: pa.Array, col: _Column, rel_tol: float, abs_tol: float) -> np.ndarray:
    """Element-wise equality of two same-length canonical arrays, as a numpy bool array."""
    na = np.asarray(pc.is_null(a).to_numpy(zero_copy_only=False), dtype=bool)
    nb = np.asarray(pc.is_null(b).to_numpy(zero_copy_only=False), dtype=bool)
    if col.approx:
        va = np.asarray(pc.fill_null(a, 0.0).to_numpy(zero_copy_only=False), dtype=np.float64)
        vb = np.asarray(pc.fill_null(b, 0.0).to_numpy(zero_copy_only=False), dtype=np.float64)
        with np.errstate(invalid="ignore", over="ignore"):
            tol = np.maximum(rel_tol * np.maximum(np.abs(va), np.abs(vb)), max(abs_tol, col.abs_tol))
            close = (va == vb) | (np.abs(va - vb) <= tol) | (np.isnan(va) & np.isnan(vb))
        return (na & nb) | (~na & ~nb & close)
    eq = pc.fill_null(pc.equal(a, b), False)
    return (na & nb) | np.asarray(eq.to_numpy(zero_copy_only=False), dtype=bool)


def _row_values(cols: list[pa.Array], i: int) -> tuple:
    return tuple(_py(c[i].as_py()) for c in cols)


def _py(v):
    if isinstance(v, float) and math.isnan(v):
        return "NaN"
    if isinstance(v, Decimal):
        return v.normalize() if v == v.to_integral_value() else v
    return v


def _rounded(v):
    """A hashable, slightly rounded value for locating differences (diagnostics only)."""
    if isinstance(v, float):
        if math.isnan(v) or math.isinf(v) or v == 0:
            return v if not math.isnan(v) else "NaN"
        return float(f"{v:.6g}")
    return v


def _samples(a_cols: list[pa.Array], e_cols: list[pa.Array]) -> tuple[list[tuple], list[tuple]]:
    rows_a = [
        tuple(_rounded(_py(v)) for v in row) for row in zip(*(c.to_pylist() for c in a_cols), strict=True)
    ]
    rows_e = [
        tuple(_rounded(_py(v)) for v in row) for row in zip(*(c.to_pylist() for c in e_cols), strict=True)
    ]
    ca, ce = Counter(rows_a), Counter(rows_e)
    only_a = list((ca - ce).elements())[:_SAMPLE]
    only_e = list((ce - ca).elements())[:_SAMPLE]
    return only_a, only_e


def compare_tables(
    actual,
    expected,
    *,
    ordered_by: list[int] | None = None,
    rel_tol: float = 1e-9,
    abs_tol: float = 1e-12,
    decimal_ulp: bool = False,
) -> Comparison:
    """Compare two tables as multisets of rows (and their order on ``ordered_by`` key columns).

    ``actual`` and ``expected`` are pyarrow Tables (or RecordBatches); columns match by position.
    Decimals of the same scale compare exactly unless ``decimal_ulp``: then within one unit of their
    last place, as decimals of different scales always do (engines round a decimal average or
    quotient's last digit differently).
    """
    actual, expected = _as_table(actual), _as_table(expected)
    if actual.num_columns != expected.num_columns:
        return Comparison(
            False, f"column count differs: actual {actual.num_columns}, expected {expected.num_columns}"
        )
    if actual.num_rows != expected.num_rows:
        return Comparison(False, f"row count differs: actual {actual.num_rows}, expected {expected.num_rows}")
    columns: list[_Column] = []
    for i in range(actual.num_columns):
        col = _canonical_pair(actual.column(i), expected.column(i), decimal_ulp)
        if isinstance(col, str):
            return Comparison(False, f"column {i}: {col}")
        columns.append(col)
    n = actual.num_rows
    if n == 0 or not columns:
        return Comparison(True)

    # Multiset: sort both sides on the same canonical key (exact columns first, then approximate ones,
    # so that float noise never decides the order of rows that differ elsewhere).
    order = [i for i, c in enumerate(columns) if not c.approx] + [
        i for i, c in enumerate(columns) if c.approx
    ]
    keys = [(f"c{i}", "ascending") for i in order]
    a_tab = pa.table({f"c{i}": c.actual for i, c in enumerate(columns)})
    e_tab = pa.table({f"c{i}": c.expected for i, c in enumerate(columns)})
    a_sorted = a_tab.take(pc.sort_indices(a_tab, sort_keys=keys))
    e_sorted = e_tab.take(pc.sort_indices(e_tab, sort_keys=keys))
    a_cols = [_array(a_sorted.column(i)) for i in range(len(columns))]
    e_cols = [_array(e_sorted.column(i)) for i in range(len(columns))]
    same = np.ones(n, dtype=bool)
    for col, a, e in zip(columns, a_cols, e_cols, strict=True):
        same &= _equal_mask(a, e, col, rel_tol, abs_tol)
    if not same.all():
        bad = int((~same).sum())
        only_a, only_e = _samples(a_cols, e_cols)
        if not only_a and not only_e:  # differences hidden by the diagnostic rounding
            first = int(np.argmin(same))
            only_a, only_e = [_row_values(a_cols, first)], [_row_values(e_cols, first)]
        return Comparison(False, f"rows differ: {bad} of {n} sorted rows do not match", only_a, only_e)

    if ordered_by:
        for pos in ordered_by:
            if not 0 <= pos < len(columns):
                return Comparison(False, f"ordered_by position {pos} out of range")
        same = np.ones(n, dtype=bool)
        for pos in ordered_by:
            col = columns[pos]
            same &= _equal_mask(col.actual, col.expected, col, rel_tol, abs_tol)
        if not same.all():
            first = int(np.argmin(same))
            key_a = _row_values([columns[p].actual for p in ordered_by], first)
            key_e = _row_values([columns[p].expected for p in ordered_by], first)
            return Comparison(
                False,
                f"order differs at row {first} on key columns {list(ordered_by)}: actual {key_a}, expected {key_e}",
                row=first,
            )
    return Comparison(True)


def assert_tables_equal(actual, expected, **kwargs) -> None:
    """``assert compare_tables(...)`` with the differences in the message."""
    result = compare_tables(actual, expected, **kwargs)
    if not result.equal:
        raise AssertionError(str(result))
