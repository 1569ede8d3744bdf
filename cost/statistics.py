"""The statistics model: what is known of a table and its columns, in one numeric domain for comparisons.

:class:`TableStatistics` holds a table's row count, sizes and :class:`ColumnStatistics` (distinct count,
bounds, nulls, lengths, an equi-height :class:`Histogram`); ``None`` means unknown everywhere. Where
statistics come from is :mod:`optimizer.cost.providers` (hints, files, Parquet footers) and
:mod:`optimizer.spark.statistics` (Spark); their JSON document is :mod:`optimizer.cost.statistics_io`.

Value conventions (see ``docs/statistics.md``):

* ``min``/``max`` keep JSON types: integers as ``int``, floating point and decimals as ``float``, booleans
  as ``bool``, strings as ``str``, dates as ISO strings ``"1994-01-01"``, timestamps as ISO strings
  ``"1994-01-01T00:00:00"`` (``+00:00`` suffix for time-zone-aware timestamps).
* :attr:`ColumnStatistics.numeric_min`/:attr:`~ColumnStatistics.numeric_max` and :func:`to_numeric`
  map them to one float domain to compare with literals: dates become days since 1970-01-01 (Substrait's
  ``date`` literal), timestamps microseconds since the epoch (UTC), decimals and booleans floats; strings
  have no numeric value (``None``). Histogram bounds are in that same domain (as Spark stores them).

>>> ColumnStatistics(min="1970-01-11", max="1970-02-01", data_type="date").numeric_max
31.0
>>> table_key(["TPCH", "LineItem"]), table_key("lineitem")
('lineitem', 'lineitem')
"""

from __future__ import annotations

import datetime
import decimal
import json
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

TableName = str | Sequence[str]

_EPOCH_DAY = datetime.date(1970, 1, 1)
_EPOCH = datetime.datetime(1970, 1, 1, tzinfo=datetime.UTC)
_DATE_RE = re.compile(r"^\d{4}-\d{2}-\d{2}$")
_TIMESTAMP_RE = re.compile(
    r"^(\d{4}-\d{2}-\d{2})[T ](\d{2}:\d{2}(?::\d{2}(?:\.\d{1,9})?)?)\s*(Z|[+-]\d{2}:?\d{2})?$"
)
_TEXT_TYPES = ("string", "varchar", "char", "binary", "fixedchar", "varbinary", "fixedbinary")


# --------------------------------------------------------------------------------------------------
# Value conversions
# --------------------------------------------------------------------------------------------------


def table_key(name: TableName) -> str:
    """The lookup key of a table name: the last segment, lower-cased.

    A list is a Substrait ``NamedTable.names`` (``["tpch", "lineitem"]``); a string may be dotted
    (``"tpch.lineitem"``). Returns ``""`` for an empty name.
    """
    if isinstance(name, str):
        last = name.rsplit(".", 1)[-1]
    else:
        parts = list(name)
        last = str(parts[-1]) if parts else ""
    return last.strip().lower()


def parse_timestamp(text: str) -> datetime.datetime | None:
    """An ISO date-time (``T`` or space, optional fraction and zone), or ``None``."""
    m = _TIMESTAMP_RE.match(text.strip())
    if not m:
        return None
    date_part, time_part, zone = m.groups()
    if "." in time_part:  # Python accepts at most 6 fractional digits
        main, frac = time_part.split(".")
        time_part = f"{main}.{frac[:6].ljust(6, '0')}"
    iso = f"{date_part}T{time_part}"
    if zone:
        iso += "+00:00" if zone == "Z" else (zone if ":" in zone else f"{zone[:3]}:{zone[3:]}")
    try:
        return datetime.datetime.fromisoformat(iso)
    except ValueError:
        return None


def _timestamp_micros(value: datetime.datetime) -> float:
    if value.tzinfo is None:
        value = value.replace(tzinfo=datetime.UTC)
    delta = value - _EPOCH
    return float((delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds)


def to_numeric(value: Any, data_type: str | None = None) -> float | None:
    """Map a statistics value or a literal to the float domain used for comparisons and histograms.

    Numbers (``int``, ``float``, ``Decimal``) and booleans become floats; ``datetime.date`` and ISO date
    strings become days since 1970-01-01; ``datetime.datetime`` and ISO timestamp strings become
    microseconds since the epoch (naive values are taken as UTC). Strings of a text ``data_type``, and
    anything else, give ``None``. ``data_type`` is a Spark type name (``"date"``, ``"decimal(15,2)"``...);
    without it, a string that looks like an ISO date or timestamp is converted.

    >>> to_numeric("1970-01-02"), to_numeric(datetime.date(1970, 1, 3)), to_numeric("2.5", "decimal(4,1)")
    (1.0, 2.0, 2.5)
    >>> to_numeric("1970-01-01T00:00:01"), to_numeric("abc"), to_numeric("1970-01-02", "string")
    (1000000.0, None, None)
    """
    if value is None:
        return None
    if isinstance(value, bool):
        return float(value)
    if isinstance(value, int | float | decimal.Decimal):
        return float(value)
    if isinstance(value, datetime.datetime):
        return _timestamp_micros(value)
    if isinstance(value, datetime.date):
        return float((value - _EPOCH_DAY).days)
    if not isinstance(value, str):
        return None
    dtype = (data_type or "").strip().lower()
    if dtype.startswith(_TEXT_TYPES):
        return None
    text = value.strip()
    if dtype == "date" or (not dtype and _DATE_RE.match(text)):
        try:
            return float((datetime.date.fromisoformat(text[:10]) - _EPOCH_DAY).days)
        except ValueError:
            return None
    if dtype.startswith("timestamp") or (not dtype and _TIMESTAMP_RE.match(text)):
        parsed = parse_timestamp(text)
        return _timestamp_micros(parsed) if parsed is not None else None
    if dtype and dtype != "boolean":
        try:
            return float(text)
        except ValueError:
            return None
    if dtype == "boolean" and text.lower() in ("true", "false"):
        return float(text.lower() == "true")
    return None


#: The largest row count, byte size or record size the cost model works with: anything above (a hint of
#: 1e200 rows, a stats file's 1e308) is read as this much, so products and sums of estimates stay finite.
MAX_QUANTITY = 1e18


def saturate(value: float) -> float:
    """``value`` capped at :data:`MAX_QUANTITY` (NaN counts as the cap: unknown but huge)."""
    return MAX_QUANTITY if not value <= MAX_QUANTITY else value


def _opt_count(value: Any, name: str) -> float | None:
    """A non-negative, finite number from a statistics document (saturated), or ``None``; else ValueError."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ValueError(f"{name} must be a number, not {json.dumps(value)[:40]}")
    number = float(value)
    if math.isnan(number) or number < 0:
        raise ValueError(f"{name} must be a non-negative number, not {value}")
    return saturate(number)


_NUMERIC_TYPES = ("tinyint", "smallint", "int", "bigint", "byte", "short", "integer", "long", "float", "double",
                  "real", "decimal")


def _check_bound(value: Any, data_type: Any, name: str) -> Any:
    """``min``/``max`` of a column: a JSON scalar that fits the column's ``data_type``; else ValueError."""
    if value is None:
        return None
    if not isinstance(value, str | int | float | bool):
        raise ValueError(f"{name} must be a number, string or boolean")
    if isinstance(value, float) and not math.isfinite(value):
        raise ValueError(f"{name} must be finite")
    dtype = str(data_type or "").lower().replace(" ", "")
    numeric = dtype.startswith(_NUMERIC_TYPES)
    if numeric and not (isinstance(value, int | float) and not isinstance(value, bool)):
        raise ValueError(f"{name} {json.dumps(value)[:40]} is not a number but the column is {data_type}")
    if dtype.startswith(("string", "varchar", "char", "date", "timestamp")) and not isinstance(value, str):
        raise ValueError(f"{name} {json.dumps(value)[:40]} is not a string but the column is {data_type}")
    return value


# --------------------------------------------------------------------------------------------------
# Data model
# --------------------------------------------------------------------------------------------------


def _json_object(data: Mapping[str, Any] | str, what: str, fields: set[str], shape: str = "an object") -> Mapping:
    """``data`` (or the JSON text of it) as a mapping of only ``fields``; ``ValueError`` naming ``what``."""
    if isinstance(data, str):
        data = json.loads(data)
    if not isinstance(data, Mapping):
        raise ValueError(f"{what} must be {shape}, not {type(data).__name__}")
    unknown = set(data) - fields
    if unknown:
        raise ValueError(f"unknown {what} field(s): {', '.join(sorted(map(str, unknown)))}")
    return data


@dataclass
class Histogram:
    """Spark's equi-height histogram: every bin holds ``height`` rows (non-null values).

    ``bins`` are ``(lo, hi, ndv)`` tuples in ascending order, bounds in the :func:`to_numeric` domain.
    """

    height: float
    bins: list[tuple[float, float, float]] = field(default_factory=list)

    @property
    def num_bins(self) -> int:
        return len(self.bins)

    @cached_property
    def upper_bounds(self) -> list[float] | None:
        """The bins' upper bounds, when the bins are ordered (lower and upper bounds ascending, each bin's
        lower bound at most its upper): for a bisection. None otherwise. (``bins`` is not changed after
        construction.)"""
        bins = self.bins
        ordered = all(lo <= hi for lo, hi, _ in bins) and all(
            a[0] <= b[0] and a[1] <= b[1] for a, b in zip(bins, bins[1:], strict=False))
        return [hi for _, hi, _ in bins] if ordered else None

    @cached_property
    def memo(self) -> dict[Any, Any]:
        """Results computed from the bins, by what was computed (masses and moments of ranges,
        :mod:`cost.selectivity`): a filter's estimate asks for the same ranges of a column again and again."""
        return {}

    @property
    def row_count(self) -> float:
        """The number of non-null rows the histogram describes (``height * num_bins``)."""
        return self.height * len(self.bins)

    def to_json(self) -> dict[str, Any]:
        return {"height": self.height, "bins": [[lo, hi, ndv] for lo, hi, ndv in self.bins]}

    @classmethod
    def from_json(cls, data: Mapping[str, Any] | str) -> Histogram:
        data = _json_object(data, "histogram", {"height", "bins"}, "an object with 'height' and 'bins'")
        height = _opt_count(data.get("height"), "histogram.height")
        if height is None:
            raise ValueError("histogram.height is missing")
        raw = data.get("bins", [])
        if not isinstance(raw, list):
            raise ValueError("histogram.bins must be a list of [lo, hi, ndv]")
        bins = []
        for i, b in enumerate(raw):
            if (not isinstance(b, list) or len(b) != 3
                    or any(isinstance(x, bool) or not isinstance(x, int | float) for x in b)):
                raise ValueError(f"histogram.bins[{i}] must be [lo, hi, ndv] (three numbers), not {json.dumps(b)[:40]}")
            bins.append((float(b[0]), float(b[1]), float(b[2])))
        return cls(height=height, bins=bins)


_COLUMN_FIELDS = ("ndv", "min", "max", "null_count", "avg_len", "max_len", "histogram", "data_type")


@dataclass
class ColumnStatistics:
    """Statistics of one column; ``None`` means unknown.

    ``ndv`` distinct non-null values, ``null_count`` null rows, ``avg_len``/``max_len`` bytes per value
    (Spark's avgLen/maxLen), ``data_type`` the Spark SQL type name (``"bigint"``, ``"date"``,
    ``"decimal(15,2)"``, ``"string"``...), which tells how to read ``min``/``max``.
    """

    ndv: float | None = None
    min: Any = None
    max: Any = None
    null_count: float | None = None
    avg_len: float | None = None
    max_len: int | None = None
    histogram: Histogram | None = None
    data_type: str | None = None

    @property
    def numeric_min(self) -> float | None:
        """``min`` as a float (dates: days since epoch, timestamps: microseconds), or ``None``."""
        return to_numeric(self.min, self.data_type)

    @property
    def numeric_max(self) -> float | None:
        """``max`` as a float (dates: days since epoch, timestamps: microseconds), or ``None``."""
        return to_numeric(self.max, self.data_type)

    def merged(self, fallback: ColumnStatistics) -> ColumnStatistics:
        """A copy where every unknown field is taken from ``fallback``."""
        values = {}
        for name in _COLUMN_FIELDS:
            mine = getattr(self, name)
            values[name] = mine if mine is not None else getattr(fallback, name)
        return ColumnStatistics(**values)

    def to_json(self) -> dict[str, Any]:
        """A dict of JSON types; unknown fields are left out."""
        out: dict[str, Any] = {}
        for name in _COLUMN_FIELDS:
            value = getattr(self, name)
            if value is None:
                continue
            out[name] = value.to_json() if isinstance(value, Histogram) else value
        return out

    @classmethod
    def from_json(cls, data: Mapping[str, Any] | str) -> ColumnStatistics:
        data = _json_object(data, "column statistics", set(_COLUMN_FIELDS))
        hist = data.get("histogram")
        max_len = _opt_count(data.get("max_len"), "max_len")
        data_type = data.get("data_type")
        if data_type is not None and not isinstance(data_type, str):
            raise ValueError("data_type must be a string")
        return cls(
            ndv=_opt_count(data.get("ndv"), "ndv"),
            min=_check_bound(data.get("min"), data_type, "min"),
            max=_check_bound(data.get("max"), data_type, "max"),
            null_count=_opt_count(data.get("null_count"), "null_count"),
            avg_len=_opt_count(data.get("avg_len"), "avg_len"),
            max_len=None if max_len is None else int(max_len),
            histogram=None if hist is None else Histogram.from_json(hist),
            data_type=data_type,
        )


@dataclass
class TableStatistics:
    """Statistics of one table; ``None`` means unknown.

    ``size_bytes`` is what the source measures: Spark's ``sizeInBytes`` (bytes of the data files),
    the Parquet footers' uncompressed size, or whatever a stats file says. ``file_bytes`` is the bytes
    of the table's files as stored: the size Spark itself plans a file table by
    (:mod:`cost.spark_size`).
    """

    row_count: float | None = None
    size_bytes: float | None = None
    file_bytes: float | None = None
    columns: dict[str, ColumnStatistics] = field(default_factory=dict)

    def column(self, name: str) -> ColumnStatistics | None:
        """The statistics of a column, matched case-insensitively."""
        found = self.columns.get(name)
        if found is not None:
            return found
        lower = name.lower()
        for key, value in self.columns.items():
            if key.lower() == lower:
                return value
        return None

    def merged(self, fallback: TableStatistics) -> TableStatistics:
        """A copy where unknown table fields and column fields are taken from ``fallback``.

        Columns only ``fallback`` knows are added; names match case-insensitively and keep this
        table's spelling.
        """
        columns = dict(self.columns)
        lower = {k.lower(): k for k in columns}
        for name, stats in fallback.columns.items():
            mine = lower.get(name.lower())
            if mine is None:
                columns[name] = stats
                lower[name.lower()] = name
            else:
                columns[mine] = columns[mine].merged(stats)
        return TableStatistics(
            row_count=self.row_count if self.row_count is not None else fallback.row_count,
            size_bytes=self.size_bytes if self.size_bytes is not None else fallback.size_bytes,
            file_bytes=self.file_bytes if self.file_bytes is not None else fallback.file_bytes,
            columns=columns,
        )

    def to_json(self) -> dict[str, Any]:
        """A dict of JSON types; unknown fields are left out (``columns`` is always present)."""
        out: dict[str, Any] = {}
        if self.row_count is not None:
            out["row_count"] = self.row_count
        if self.size_bytes is not None:
            out["size_bytes"] = self.size_bytes
        if self.file_bytes is not None:
            out["file_bytes"] = self.file_bytes
        out["columns"] = {name: stats.to_json() for name, stats in self.columns.items()}
        return out

    @classmethod
    def from_json(cls, data: Mapping[str, Any] | str) -> TableStatistics:
        """Read :meth:`to_json`'s dict (or its JSON text); the keys ``name`` and ``source`` of a stats
        file entry are ignored."""
        data = _json_object(data, "table statistics", {"row_count", "size_bytes", "file_bytes", "columns", "name",
                                                        "source"})
        columns = data.get("columns") or {}
        if not isinstance(columns, Mapping):
            raise ValueError("'columns' must be an object mapping column names to statistics")
        return cls(
            row_count=_opt_count(data.get("row_count"), "row_count"),
            size_bytes=_opt_count(data.get("size_bytes"), "size_bytes"),
            file_bytes=_opt_count(data.get("file_bytes"), "file_bytes"),
            columns={str(name): ColumnStatistics.from_json(col) for name, col in columns.items()},
        )


__all__ = [
    "MAX_QUANTITY",
    "ColumnStatistics",
    "Histogram",
    "TableName",
    "TableStatistics",
    "parse_timestamp",
    "saturate",
    "table_key",
    "to_numeric",
]
