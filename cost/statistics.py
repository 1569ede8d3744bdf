"""Table and column statistics behind one interface, from several sources composed by precedence.

Sources (each a :class:`StatisticsProvider`):

* :class:`HintStatistics` -- ``RelCommon.hint.stats`` written into the plan by its producer
  (relation level only: :meth:`~StatisticsProvider.relation_hint`).
* :class:`FileStatistics` -- a JSON file (hand-written, or saved with :func:`save_statistics`; the same
  format as the Spark cache), given on the CLI with ``--stats FILE``.
* :class:`SparkStatistics` -- ``ANALYZE TABLE ... COMPUTE STATISTICS FOR ALL COLUMNS`` with histograms,
  cached in a JSON file keyed by the data files' paths, sizes and modification times.
* :class:`ParquetStatistics` -- row counts, min/max and null counts from the Parquet footers (no Spark,
  no NDV).
* :class:`CatalogStatistics` -- tables of the Spark catalog: what the catalog holds (``DESCRIBE TABLE
  EXTENDED ... AS JSON``, and per column ``DESCRIBE TABLE EXTENDED t col``), optionally after ``ANALYZE
  TABLE`` (``analyze=True``, the CLI's ``--analyze-tables``).

:class:`CompositeStatistics` asks its providers in order and, for every table-level field and every
column field, keeps the first value that is known (not ``None``). :func:`default_statistics` builds the
usual stack, whose precedence is::

    hints on a relation  >  explicit stats file  >  Spark ANALYZE  >  Parquet footers  >  Spark catalog

Hints only answer :meth:`~StatisticsProvider.relation_hint`: the cardinality module asks for a hint first
and, when a relation has one, uses it instead of the estimate derived from the table statistics.

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

import contextlib
import datetime
import decimal
import glob as globlib
import hashlib
import json
import logging
import math
import os
import re
import tempfile
import urllib.parse
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from functools import cached_property, lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

from optimizer.errors import PlanError, spark_errors

if TYPE_CHECKING:
    from optimizer.paths import FileAccess

log = logging.getLogger(__name__)

FORMAT_VERSION = 1
DEFAULT_DATABASE = "substrait_opt_stats"
HISTOGRAM_CONF = "spark.sql.statistics.histogram.enabled"

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


def _parse_timestamp(text: str) -> datetime.datetime | None:
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
        parsed = _parse_timestamp(text)
        return _timestamp_micros(parsed) if parsed is not None else None
    if dtype and dtype != "boolean":
        try:
            return float(text)
        except ValueError:
            return None
    if dtype == "boolean" and text.lower() in ("true", "false"):
        return float(text.lower() == "true")
    return None


def _json_value(value: Any) -> Any:
    """A Python statistics value (as pyarrow gives them) in the JSON convention of this module."""
    if value is None or isinstance(value, bool | int | str):
        return value
    if isinstance(value, float):
        return value + 0.0  # normalises -0.0
    if isinstance(value, decimal.Decimal):
        return float(value)
    if isinstance(value, datetime.datetime):
        return value.isoformat()
    if isinstance(value, datetime.date):
        return value.isoformat()
    return None  # bytes and other values that JSON cannot carry


def _opt_float(value: Any) -> float | None:
    return None if value is None else float(value)


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

    @property
    def row_count(self) -> float:
        """The number of non-null rows the histogram describes (``height * num_bins``)."""
        return self.height * len(self.bins)

    def to_json(self) -> dict[str, Any]:
        return {"height": self.height, "bins": [[lo, hi, ndv] for lo, hi, ndv in self.bins]}

    @classmethod
    def from_json(cls, data: Mapping[str, Any] | str) -> Histogram:
        if isinstance(data, str):
            data = json.loads(data)
        if not isinstance(data, Mapping):
            raise ValueError(f"histogram must be an object with 'height' and 'bins', not {type(data).__name__}")
        unknown = set(data) - {"height", "bins"}
        if unknown:
            raise ValueError(f"unknown histogram field(s): {', '.join(sorted(map(str, unknown)))}")
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
        if isinstance(data, str):
            data = json.loads(data)
        if not isinstance(data, Mapping):
            raise ValueError(f"column statistics must be an object, not {type(data).__name__}")
        unknown = set(data) - set(_COLUMN_FIELDS)
        if unknown:
            raise ValueError(f"unknown column statistics field(s): {', '.join(sorted(unknown))}")
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
        if isinstance(data, str):
            data = json.loads(data)
        if not isinstance(data, Mapping):
            raise ValueError(f"table statistics must be an object, not {type(data).__name__}")
        unknown = set(data) - {"row_count", "size_bytes", "file_bytes", "columns", "name", "source"}
        if unknown:
            raise ValueError(f"unknown table statistics field(s): {', '.join(sorted(unknown))}")
        columns = data.get("columns") or {}
        if not isinstance(columns, Mapping):
            raise ValueError("'columns' must be an object mapping column names to statistics")
        return cls(
            row_count=_opt_count(data.get("row_count"), "row_count"),
            size_bytes=_opt_count(data.get("size_bytes"), "size_bytes"),
            file_bytes=_opt_count(data.get("file_bytes"), "file_bytes"),
            columns={str(name): ColumnStatistics.from_json(col) for name, col in columns.items()},
        )


# --------------------------------------------------------------------------------------------------
# Interface
# --------------------------------------------------------------------------------------------------


class StatisticsProvider:
    """What every statistics source answers; ``None`` means "I don't know".

    Table names are matched by :func:`table_key` (last segment, case-insensitive) and column names
    case-insensitively.
    """

    def table(self, name: TableName) -> TableStatistics | None:
        return None

    def column(self, table: TableName, column_name: str) -> ColumnStatistics | None:
        stats = self.table(table)
        return stats.column(column_name) if stats is not None else None

    def relation_hint(self, rel: Any) -> tuple[float, float | None] | None:
        """``(row_count, record_size)`` that a plan states for a relation, or ``None``."""
        return None

    def names(self) -> list[str]:
        """The table names this provider can answer for (may be empty when it cannot list them)."""
        return []


class HintStatistics(StatisticsProvider):
    """Reads ``RelCommon.hint.stats`` of a relation.

    ``relation_hint`` takes a ``Rel`` message (or the inner message such as a ``ReadRel``) and returns
    ``(row_count, record_size)``. Proto3 cannot tell an unset double from ``0``: ``row_count == 0`` with
    ``record_size == 0`` (or no hint at all) means "absent" and gives ``None``; a row count of 0 with a
    positive record size is an empty relation. A ``record_size`` of 0 (or negative) with a positive row
    count is reported as ``None`` (unknown). Negative row counts are ignored.
    """

    def relation_hint(self, rel: Any) -> tuple[float, float | None] | None:
        return read_hint(rel)


def read_hint(rel: Any) -> tuple[float, float | None] | None:
    """``(row_count, record_size)`` from ``rel``'s ``common.hint.stats``; see :class:`HintStatistics`."""
    message = rel
    descriptor = getattr(rel, "DESCRIPTOR", None)
    if descriptor is None:
        return None
    if "rel_type" in descriptor.oneofs_by_name:  # a Rel: open its oneof
        kind = rel.WhichOneof("rel_type")
        if kind is None:
            return None
        message = getattr(rel, kind)
        descriptor = message.DESCRIPTOR
    if "common" not in descriptor.fields_by_name or not message.HasField("common"):
        return None
    common = message.common
    if not common.HasField("hint") or not common.hint.HasField("stats"):
        return None
    stats = common.hint.stats
    row_count, record_size = float(stats.row_count), float(stats.record_size)
    if (row_count == 0 and record_size == 0) or row_count < 0 or math.isnan(row_count):
        return None
    return saturate(row_count), (saturate(record_size) if record_size > 0 else None)


class MemoryStatistics(StatisticsProvider):
    """Statistics given as a mapping ``name -> TableStatistics`` (later duplicates of a key win)."""

    def __init__(self, tables: Mapping[str, TableStatistics] | None = None) -> None:
        self._tables: dict[str, TableStatistics] = {}
        self._names: dict[str, str] = {}
        for name, stats in (tables or {}).items():
            self.add(name, stats)

    def add(self, name: str, stats: TableStatistics) -> None:
        key = table_key(name)
        self._tables[key] = stats
        self._names[key] = name

    def table(self, name: TableName) -> TableStatistics | None:
        return self._tables.get(table_key(name))

    def names(self) -> list[str]:
        return list(self._names.values())


class FileStatistics(MemoryStatistics):
    """Statistics from a JSON file in the format of ``docs/statistics.md`` (also the Spark cache's).

    ``{"version": 1, "tables": {"<key>": {"row_count": ..., "size_bytes": ..., "columns": {...}}}}``;
    an entry is named by its ``"name"`` field if it has one (the Spark cache's keys are data paths),
    else by its key. Problems in the file raise :class:`~optimizer.errors.PlanError` naming the file.
    """

    def __init__(self, path: str | os.PathLike[str]) -> None:
        super().__init__()
        self.path = Path(path).expanduser()
        where = f"statistics file {self.path}"
        try:
            document = json.loads(self.path.read_text(encoding="utf-8"))
        except OSError as e:
            raise PlanError(f"cannot read statistics file: {e.strerror or e}", where) from None
        except UnicodeDecodeError:
            raise PlanError("statistics file is not UTF-8 text", where) from None
        except json.JSONDecodeError as e:
            raise PlanError(f"statistics file is not valid JSON: {e}", where) from None
        except (ValueError, RecursionError) as e:  # a 5000-digit integer, nesting too deep
            raise PlanError(f"statistics file is not usable JSON: {' '.join(str(e).split())[:120]}", where) from None
        for name, stats in parse_document(document, where).items():
            self.add(name, stats)


def parse_document(document: Any, where: str = "statistics") -> dict[str, TableStatistics]:
    """The tables of a statistics JSON document, by name; raises ``PlanError`` on a malformed one."""
    if not isinstance(document, Mapping) or not isinstance(document.get("tables"), Mapping):
        raise PlanError("statistics JSON must be an object with a 'tables' object", where)
    version = document.get("version", FORMAT_VERSION)
    if version != FORMAT_VERSION:
        raise PlanError(f"unsupported statistics format version {version!r} (expected 1)", where)
    out: dict[str, TableStatistics] = {}
    for key, entry in document["tables"].items():
        columns = entry.get("columns") if isinstance(entry, Mapping) else None
        for column, col in (columns.items() if isinstance(columns, Mapping) else ()):
            try:  # each column on its own first: the message names it
                ColumnStatistics.from_json(col)
            except (ValueError, TypeError, OverflowError) as e:
                raise PlanError(f"tables.{key}.columns.{column}: {e}", where) from None
        try:
            stats = TableStatistics.from_json(entry)
        except (ValueError, TypeError, KeyError, IndexError, OverflowError) as e:
            raise PlanError(f"tables.{key}: {e}", where) from None
        name = entry.get("name", key)
        if not isinstance(name, str) or not name:
            raise PlanError(f"tables.{key}.name: expected a table name (a non-empty string), not {json.dumps(name)[:40]}",
                            where) from None
        out.pop(name, None)  # a later entry of the same name wins (and moves last)
        out[name] = stats
    return out


def statistics_document(tables: Mapping[str, TableStatistics]) -> dict[str, Any]:
    """The JSON document (dict) of ``tables``, as :class:`FileStatistics` reads it."""
    return {"version": FORMAT_VERSION, "tables": {name: s.to_json() for name, s in tables.items()}}


def save_statistics(
    provider: StatisticsProvider,
    tables: Iterable[str] | Mapping[str, Any] | None,
    path: str | os.PathLike[str],
) -> dict[str, Any]:
    """Write what ``provider`` knows about ``tables`` (names; a mapping's keys; ``None``: all the
    provider lists) to ``path`` in the :class:`FileStatistics` format. Returns the document."""
    names = list(provider.names() if tables is None else tables)
    found: dict[str, TableStatistics] = {}
    for name in names:
        stats = provider.table(name)
        if stats is not None:
            found[name] = stats
    document = statistics_document(found)
    _write_json_atomic(Path(path).expanduser(), document)
    return document


_INNER_LIST_RE = re.compile(r"\[([^\[\]{}]*)\]")


def dump_json(document: Any) -> str:
    """JSON text, indented, with each innermost list (a histogram bin, a file entry) on one line."""
    text = json.dumps(document, indent=1)

    def one_line(m: re.Match[str]) -> str:
        # JSON strings never hold a raw newline: every newline here is indentation.
        return "[" + re.sub(r",\n\s*", ", ", m.group(1)).strip() + "]"

    return _INNER_LIST_RE.sub(one_line, text) + "\n"


def _write_json_atomic(path: Path, document: Any) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w") as f:
            f.write(dump_json(document))
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


# --------------------------------------------------------------------------------------------------
# Table locations and file fingerprints
# --------------------------------------------------------------------------------------------------


def _is_hidden(name: str) -> bool:
    """Files Spark/Hadoop skip when reading a folder: ``.crc``, ``_SUCCESS``, ``_temporary``..."""
    return name.startswith((".", "_"))


def _is_uri(path: str) -> bool:
    return "://" in path


def resolve_tables(tables: Mapping[str, str | os.PathLike[str]] | str | os.PathLike[str]) -> dict[str, str]:
    """``name -> absolute path`` of the Parquet tables given as a mapping, or as a directory in which
    ``<name>.parquet`` (a file or a folder) and ``<name>/`` (a folder holding ``.parquet`` files) are
    tables. A single ``.parquet`` file is one table named after it. A ``file://`` URI is its local path;
    other URIs (``s3a://...``) are kept as is in a mapping, and a directory given as such a URI has no
    tables here (it cannot be listed without Spark: see ``docs/statistics.md``).
    """
    from optimizer.paths import local_path

    if isinstance(tables, Mapping):
        out = {}
        for name, path in tables.items():
            text = os.fspath(path)
            local = local_path(text)
            out[str(name)] = text if local is None else os.path.abspath(os.path.expanduser(local))
        return out
    local = local_path(os.fspath(tables))
    if local is None:
        return {}
    root = os.path.abspath(os.path.expanduser(local))
    if os.path.isfile(root):
        return {Path(root).stem: root}
    if not os.path.isdir(root):
        raise FileNotFoundError(f"table directory not found: {root}")
    out = {}
    for entry in sorted(os.listdir(root)):
        if _is_hidden(entry):
            continue
        full = os.path.join(root, entry)
        if entry.endswith(".parquet"):
            name = entry[: -len(".parquet")]
        elif os.path.isdir(full) and any(f.endswith(".parquet") for f in data_files(full)):
            name = entry
        else:
            continue
        if name in out:  # `x.parquet` sorts after `x/`: prefer the explicit .parquet
            log.warning("table %s found twice in %s; using %s", name, root, entry)
        out[name] = full
    return out


def data_files(path: str) -> list[str]:
    """The files of a table: the path itself, or every non-hidden file under a folder (sorted)."""
    if os.path.isfile(path):
        return [path]
    found = []
    for dirpath, dirnames, filenames in os.walk(path):
        dirnames[:] = sorted(d for d in dirnames if not _is_hidden(d))
        found.extend(os.path.join(dirpath, f) for f in sorted(filenames) if not _is_hidden(f))
    return found


def fingerprint(path: str) -> list[list[Any]] | None:
    """``[[relative path, size, mtime_ns], ...]`` of a table's files; ``None`` if it cannot be listed."""
    if _is_uri(path) or not os.path.exists(path):
        return None
    base = path if os.path.isdir(path) else os.path.dirname(path)
    out = []
    for file in data_files(path):
        st = os.stat(file)
        out.append([os.path.relpath(file, base), st.st_size, st.st_mtime_ns])
    return out


def default_cache_path() -> Path:
    """``$XDG_CACHE_HOME/substrait-optimizer/spark-stats.json`` (default ``~/.cache/...``)."""
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "substrait-optimizer" / "spark-stats.json"


# --------------------------------------------------------------------------------------------------
# Spark ANALYZE
# --------------------------------------------------------------------------------------------------

_INT_TYPES = ("tinyint", "smallint", "int", "bigint", "byte", "short", "integer", "long")
_STATS_RE = re.compile(r"(\d+)\s+bytes(?:,\s*(\d+)\s+rows)?")


def _read_statistics_row(rows: Iterable[Any], stats: TableStatistics) -> None:
    """Size and row count from the ``Statistics`` row of ``DESCRIBE [TABLE] EXTENDED`` into ``stats``."""
    for row in rows:
        if row[0] == "Statistics":
            m = _STATS_RE.search(row[1] or "")
            if m:
                stats.size_bytes = stats.file_bytes = float(m.group(1))
                stats.row_count = float(m.group(2)) if m.group(2) is not None else None
_HEIGHT_RE = re.compile(r"height:\s*([^,]+),\s*num_of_bins:\s*(\d+)")
_BIN_RE = re.compile(r"lower_bound:\s*([^,]+),\s*upper_bound:\s*([^,]+),\s*distinct_count:\s*(\S+)")


def _spark_value(text: str | None, dtype: str) -> Any:
    """A min/max as ``DESCRIBE EXTENDED t col`` prints it, in this module's JSON convention."""
    if text is None or text == "NULL":
        return None
    dtype = dtype.lower()
    try:
        if dtype in _INT_TYPES:
            return int(text)
        if dtype in ("float", "double", "real") or dtype.startswith("decimal"):
            return float(text)
        if dtype == "boolean":
            return text.strip().lower() == "true"
        if dtype == "date":
            return datetime.date.fromisoformat(text.strip()).isoformat()
        if dtype.startswith("timestamp"):
            parsed = _parse_timestamp(text)
            return parsed.isoformat() if parsed is not None else None
    except ValueError:
        return None
    return text


def _spark_number(text: str | None) -> float | None:
    if text is None or text == "NULL":
        return None
    try:
        return float(text)
    except ValueError:
        return None


def _sql_string(text: str) -> str:
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"


def _quote_ident(name: str) -> str:
    return "`" + name.replace("`", "``") + "`"


class _TablePathStatistics(StatisticsProvider):
    """Statistics of tables given by path, each read once by :meth:`_load` and kept in memory."""

    def __init__(self, tables: Mapping[str, str | os.PathLike[str]] | str | os.PathLike[str]) -> None:
        self.paths = resolve_tables(tables)
        self._keys = {table_key(name): name for name in self.paths}
        self._memo: dict[str, TableStatistics | None] = {}

    def names(self) -> list[str]:
        return list(self.paths)

    def clear(self) -> None:
        """Forget the in-memory results (the next request reads the tables again)."""
        self._memo.clear()

    def table(self, name: TableName) -> TableStatistics | None:
        key = table_key(name)
        if key not in self._keys:
            return None
        if key not in self._memo:
            table_name = self._keys[key]
            self._memo[key] = self._load(table_name, self.paths[table_name])
        return self._memo[key]

    def _load(self, name: str, path: str) -> TableStatistics | None:
        raise NotImplementedError


class SparkStatistics(_TablePathStatistics):
    """Statistics from Spark's ``ANALYZE TABLE ... COMPUTE STATISTICS FOR ALL COLUMNS``.

    ``tables``: see :func:`resolve_tables`. A table is analysed on first request: it is registered as
    an external table ``<database>.<name>_<hash of path>`` (``CREATE TABLE ... USING parquet LOCATION``;
    dropping it never touches the data), analysed with ``spark.sql.statistics.histogram.enabled=true``
    (set for the call, then restored), and read back with ``DESCRIBE EXTENDED``.

    What was found is cached in the JSON file ``cache_path`` (default :func:`default_cache_path`;
    ``use_cache=False`` disables it), keyed by the table's absolute path and checked against the
    paths, sizes and modification times of all its files: while they are unchanged no Spark call is
    made at all. Results are also kept in memory for the life of the provider (:meth:`clear` forgets
    them). ``analyze_count`` counts the tables analysed. If Spark fails, the table is logged and
    reported unknown (``strict=True`` raises instead).
    """

    def __init__(
        self,
        spark: Any,
        tables: Mapping[str, str | os.PathLike[str]] | str | os.PathLike[str],
        cache_path: str | os.PathLike[str] | None = None,
        *,
        use_cache: bool = True,
        database: str = DEFAULT_DATABASE,
        strict: bool = False,
    ) -> None:
        super().__init__(tables)
        self.spark = spark
        self.cache_path = Path(cache_path).expanduser() if cache_path is not None else default_cache_path()
        self.use_cache = use_cache
        self.database = database
        self.strict = strict
        self.analyze_count = 0
        self._cache_doc: tuple[tuple[int, int], dict[str, Any]] | None = None

    def _load(self, name: str, path: str) -> TableStatistics | None:
        if not _is_uri(path) and not os.path.exists(path):
            log.warning("statistics: table %s: %s does not exist", name, path)
            return None
        files = fingerprint(path)
        if self.use_cache and files is not None:
            cached = self._cache_lookup(path, files)
            if cached is not None:
                return cached
        try:
            stats = self.analyze(name, path)
        except spark_errors() as e:  # statistics are advisory: fall back to the next provider
            if self.strict:
                raise
            log.warning("statistics: ANALYZE of %s (%s) failed: %s", name, path, e)
            return None
        if self.use_cache and files is not None:
            try:
                self._cache_store(name, path, files, stats)
            except OSError as e:
                log.warning("statistics: cannot write the cache %s: %s", self.cache_path, e)
        return stats

    # -- cache ------------------------------------------------------------------------------------

    def _read_cache(self, fresh: bool = False) -> dict[str, Any]:
        """The cache document; parsed again only when the file changed, unless ``fresh`` (a copy
        the caller may modify)."""
        try:
            st = self.cache_path.stat()
            stamp = (st.st_mtime_ns, st.st_size)
            if not fresh and self._cache_doc is not None and self._cache_doc[0] == stamp:
                return self._cache_doc[1]
            document = json.loads(self.cache_path.read_text())
        except FileNotFoundError:
            return {"version": FORMAT_VERSION, "tables": {}}
        except (OSError, json.JSONDecodeError) as e:
            log.warning("statistics: ignoring unreadable cache %s: %s", self.cache_path, e)
            return {"version": FORMAT_VERSION, "tables": {}}
        if (
            not isinstance(document, dict)
            or document.get("version") != FORMAT_VERSION
            or not isinstance(document.get("tables"), dict)
        ):
            return {"version": FORMAT_VERSION, "tables": {}}
        if not fresh:
            self._cache_doc = (stamp, document)
        return document

    def _cache_lookup(self, path: str, files: list[list[Any]]) -> TableStatistics | None:
        entry = self._read_cache()["tables"].get(path)
        if not isinstance(entry, dict):
            return None
        source = entry.get("source") or {}
        if source.get("provider") != "spark" or source.get("files") != files:
            return None
        try:
            return TableStatistics.from_json(entry)
        except (ValueError, TypeError, KeyError):
            return None

    def _cache_store(self, name: str, path: str, files: list[list[Any]], stats: TableStatistics) -> None:
        document = self._read_cache(fresh=True)  # another process may have added tables meanwhile
        tables = document["tables"]
        tables.pop(path, None)  # the newest entry goes last
        tables[path] = {
            "name": name,
            **stats.to_json(),
            "source": {"provider": "spark", "path": path, "files": files},
        }
        _write_json_atomic(self.cache_path, document)

    # -- Spark --------------------------------------------------------------------------------------

    def catalog_name(self, name: str, path: str) -> str:
        """The qualified, quoted name under which the table is registered for ANALYZE."""
        safe = re.sub(r"[^a-z0-9_]", "_", name.lower()) or "t"
        digest = hashlib.sha1(path.encode()).hexdigest()[:12]
        return f"{_quote_ident(self.database)}.{_quote_ident(f'{safe}_{digest}')}"

    def analyze(self, name: str, path: str) -> TableStatistics:
        """Register, ANALYZE and describe one table (always calls Spark; no cache)."""
        spark = self.spark
        ident = self.catalog_name(name, path)
        self.analyze_count += 1
        spark.sql(f"CREATE DATABASE IF NOT EXISTS {_quote_ident(self.database)}")
        # Re-create: the files (and so the schema) may have changed since it was registered. The table
        # is EXTERNAL (it has a LOCATION), so dropping it leaves the data alone.
        spark.sql(f"DROP TABLE IF EXISTS {ident}")
        spark.sql(f"CREATE TABLE {ident} USING parquet LOCATION {_sql_string(path)}")
        previous = spark.conf.get(HISTOGRAM_CONF, None)
        spark.conf.set(HISTOGRAM_CONF, "true")
        try:
            spark.sql(f"ANALYZE TABLE {ident} COMPUTE STATISTICS FOR ALL COLUMNS")
        finally:
            if previous is None:
                spark.conf.unset(HISTOGRAM_CONF)
            else:
                spark.conf.set(HISTOGRAM_CONF, previous)

        stats = TableStatistics()
        _read_statistics_row(spark.sql(f"DESCRIBE EXTENDED {ident}").collect(), stats)
        for f in spark.table(ident).schema.fields:
            try:
                rows = spark.sql(f"DESCRIBE EXTENDED {ident} {_quote_ident(f.name)}").collect()
            except spark_errors() as e:  # e.g. a nested column
                log.debug("statistics: no column statistics for %s.%s: %s", name, f.name, e)
                continue
            stats.columns[f.name] = _column_from_describe(rows, f.dataType.simpleString())
        return stats


def _column_from_describe(rows: list[Any], dtype: str) -> ColumnStatistics:
    info: dict[str, str | None] = {}
    bins: list[tuple[float, float, float]] = []
    for row in rows:
        key, value = row[0], row[1]
        if key.startswith("bin_"):
            m = _BIN_RE.search(value or "")
            if m:
                bins.append((float(m.group(1)), float(m.group(2)), float(m.group(3))))
        else:
            info[key] = value
    histogram = None
    m = _HEIGHT_RE.search(info.get("histogram") or "")
    if m:
        histogram = Histogram(height=float(m.group(1)), bins=bins)
    max_len = _spark_number(info.get("max_col_len"))
    return ColumnStatistics(
        ndv=_spark_number(info.get("distinct_count")),
        min=_spark_value(info.get("min"), dtype),
        max=_spark_value(info.get("max"), dtype),
        null_count=_spark_number(info.get("num_nulls")),
        avg_len=_spark_number(info.get("avg_col_len")),
        max_len=None if max_len is None else int(max_len),
        histogram=histogram,
        data_type=info.get("data_type") or dtype,
    )


# --------------------------------------------------------------------------------------------------
# Spark catalog
# --------------------------------------------------------------------------------------------------


class CatalogStatistics(StatisticsProvider):
    """Statistics of tables of the Spark catalog, as the catalog holds them.

    A name resolves like :class:`~optimizer.spark.tables.TableResolver` resolves it: the dotted name
    (``db.lineitem``), then ``<database>.<name>`` (``database`` given) or the name in the current
    database. The table's ``num_rows``/``size_in_bytes`` come from ``DESCRIBE TABLE EXTENDED ... AS
    JSON`` (Spark 4; older servers: the ``Statistics`` row of ``DESCRIBE TABLE EXTENDED``); when the
    catalog has a row count (``ANALYZE TABLE`` was run), each column's distinct count, min/max, null
    count, lengths and histogram come from ``DESCRIBE TABLE EXTENDED t col``. Nothing is created in
    the catalog; ``analyze=True`` first runs ``ANALYZE TABLE ... COMPUTE STATISTICS FOR ALL COLUMNS``
    (once per table), which writes statistics into it. A name not in the catalog has no statistics
    (``None``). ``lookups`` counts the tables described.
    """

    def __init__(self, spark: Any, database: str | None = None, *, analyze: bool = False) -> None:
        self.spark = spark
        self.database = database or None
        self.analyze = analyze
        self.lookups = 0
        self._memo: dict[tuple[str, ...], TableStatistics | None] = {}
        self._seen: dict[str, str] = {}

    def names(self) -> list[str]:
        return list(self._seen.values())

    def clear(self) -> None:
        self._memo.clear()

    def candidates(self, name: TableName) -> list[str]:
        parts = [p for p in (name.split(".") if isinstance(name, str) else [str(x) for x in name]) if p]
        if not parts:
            return []
        out = [".".join(parts)] if len(parts) > 1 else []
        out.append(f"{self.database}.{parts[-1]}" if self.database else parts[-1])
        return list(dict.fromkeys(out))

    def _find(self, name: TableName) -> str | None:
        from pyspark.errors import AnalysisException

        for candidate in self.candidates(name):
            try:
                if self.spark.catalog.tableExists(candidate):
                    return candidate
            except AnalysisException:  # not an identifier Spark parses: not in the catalog
                continue
        return None

    def table(self, name: TableName) -> TableStatistics | None:
        key = tuple(self.candidates(name))
        if not key:
            return None
        if key not in self._memo:
            found = self._find(name)
            try:
                self._memo[key] = None if found is None else self.describe(found)
            except spark_errors() as e:  # statistics are advisory: unknown, like a table not analysed
                log.warning("statistics: cannot describe %s: %s", found, e)
                self._memo[key] = None
            if found is not None:
                self._seen.setdefault(table_key(found), found)
        return self._memo[key]

    def describe(self, identifier: str) -> TableStatistics:
        """The catalog's statistics of ``identifier`` (a dotted name the catalog knows)."""
        from pyspark.errors import ParseException

        ident = ".".join(_quote_ident(p) for p in identifier.split("."))
        spark = self.spark
        self.lookups += 1
        if self.analyze:
            spark.sql(f"ANALYZE TABLE {ident} COMPUTE STATISTICS FOR ALL COLUMNS")
        stats = TableStatistics()
        try:
            document = json.loads(spark.sql(f"DESCRIBE TABLE EXTENDED {ident} AS JSON").collect()[0][0])
            found = document.get("statistics") or {}
            stats.row_count = _opt_float(found.get("num_rows"))
            stats.size_bytes = stats.file_bytes = _opt_float(found.get("size_in_bytes"))
            columns = [c["name"] for c in document.get("columns", [])]
        except ParseException:  # a server before Spark 4: no AS JSON
            _read_statistics_row(spark.sql(f"DESCRIBE TABLE EXTENDED {ident}").collect(), stats)
            columns = spark.table(identifier).columns
        if stats.row_count is None:  # never analysed: the catalog has no column statistics either
            return stats
        for column in columns:
            rows = spark.sql(f"DESCRIBE TABLE EXTENDED {ident} {_quote_ident(column)}").collect()
            info = {row[0]: row[1] for row in rows}
            stats.columns[column] = _column_from_describe(rows, info.get("data_type") or "")
        return stats


# --------------------------------------------------------------------------------------------------
# Parquet footers
# --------------------------------------------------------------------------------------------------


def _spark_type_name(arrow_type: Any) -> str | None:
    """The Spark SQL type name of an Arrow type (the vocabulary of ``ColumnStatistics.data_type``)."""
    import pyarrow as pa
    import pyarrow.types as t

    if t.is_boolean(arrow_type):
        return "boolean"
    for check, name in (
        (t.is_int8, "tinyint"),
        (t.is_int16, "smallint"),
        (t.is_int32, "int"),
        (t.is_int64, "bigint"),
        (t.is_uint8, "smallint"),
        (t.is_uint16, "int"),
        (t.is_uint32, "bigint"),
        (t.is_uint64, "decimal(20,0)"),
        (t.is_float16, "float"),
        (t.is_float32, "float"),
        (t.is_float64, "double"),
    ):
        if check(arrow_type):
            return name
    if t.is_decimal(arrow_type):
        return f"decimal({arrow_type.precision},{arrow_type.scale})"
    if t.is_date(arrow_type):
        return "date"
    if t.is_timestamp(arrow_type):
        return "timestamp" if arrow_type.tz is not None else "timestamp_ntz"
    if t.is_string(arrow_type) or t.is_large_string(arrow_type) or arrow_type == pa.string_view():
        return "string"
    if t.is_binary(arrow_type) or t.is_large_binary(arrow_type) or t.is_fixed_size_binary(arrow_type):
        return "binary"
    return None


def _fixed_width(dtype: str | None) -> int | None:
    """Spark's ``defaultSize`` of fixed-width types (what its avgLen/maxLen report for them)."""
    if dtype is None:
        return None
    sizes = {"boolean": 1, "tinyint": 1, "smallint": 2, "int": 4, "bigint": 8, "float": 4, "double": 8,
             "date": 4, "timestamp": 8, "timestamp_ntz": 8}
    if dtype in sizes:
        return sizes[dtype]
    m = re.match(r"decimal\((\d+),", dtype)
    if m:
        return 8 if int(m.group(1)) <= 18 else 16
    return None


class _ColumnAccumulator:
    def __init__(self, dtype: str | None) -> None:
        self.dtype = dtype
        self.null_count: float | None = 0.0
        self.min: Any = None
        self.max: Any = None
        self.min_max_known = True
        self.row_count = 0

    def add(self, stats: Any, rows: int) -> None:
        self.row_count += rows
        if stats is None:
            self.null_count = None
            self.min_max_known = False
            return
        if stats.has_null_count and self.null_count is not None:
            self.null_count += stats.null_count
        else:
            self.null_count = None
        if stats.num_values == 0:  # only nulls in this row group: no bounds needed
            return
        if not stats.has_min_max:
            self.min_max_known = False
            return
        try:
            if self.min is None or stats.min < self.min:
                self.min = stats.min
            if self.max is None or stats.max > self.max:
                self.max = stats.max
        except TypeError:
            self.min_max_known = False

    def result(self) -> ColumnStatistics:
        known = self.min_max_known
        width = _fixed_width(self.dtype)
        return ColumnStatistics(
            ndv=0.0 if self.null_count is not None and self.null_count >= self.row_count else None,
            min=_json_value(self.min) if known else None,
            max=_json_value(self.max) if known else None,
            null_count=self.null_count,
            avg_len=None if width is None else float(width),
            max_len=width,
            data_type=self.dtype,
        )


class ParquetStatistics(_TablePathStatistics):
    """Row counts, min/max and null counts from the Parquet footers (pyarrow; no Spark, fast).

    ``tables``: see :func:`resolve_tables`. NDV is unknown (``None``: Parquet writers rarely store
    distinct counts; it is 0 only for a column that is all nulls) and there are no histograms.
    ``size_bytes`` is the sum of the row groups' uncompressed sizes. ``avg_len``/``max_len`` are given for fixed-width types only (their byte width,
    as Spark reports them). Min/max are over the row groups that have non-null values; a row group
    without bounds makes them unknown. Binary bounds are dropped (not JSON).
    """

    def _load(self, name: str, path: str) -> TableStatistics | None:
        import pyarrow as pa

        try:
            return read_parquet_statistics(path)
        except (OSError, pa.ArrowException) as e:  # a file pyarrow cannot read: unknown
            log.warning("statistics: cannot read Parquet footers of %s: %s", name, e)
            return None


def read_parquet_statistics(path: str) -> TableStatistics | None:
    """:class:`TableStatistics` of a Parquet file or folder from its footers (``None`` if no files)."""
    import pyarrow.parquet as pq

    if _is_uri(path) or not os.path.exists(path):
        return None
    files = data_files(path)
    if not files:
        return None
    row_count = 0
    size = 0
    stored = 0
    columns: dict[str, _ColumnAccumulator] = {}
    for file in files:
        stored += os.path.getsize(file)
        meta = pq.ParquetFile(file).metadata
        arrow_schema = meta.schema.to_arrow_schema()
        top_level = {f.name: f for f in arrow_schema}
        for name, f in top_level.items():
            if name not in columns:
                columns[name] = _ColumnAccumulator(_spark_type_name(f.type))
        row_count += meta.num_rows
        for g in range(meta.num_row_groups):
            group = meta.row_group(g)
            size += group.total_byte_size
            for c in range(group.num_columns):
                chunk = group.column(c)
                acc = columns.get(chunk.path_in_schema)
                if acc is not None:  # a top-level primitive column
                    acc.add(chunk.statistics if chunk.is_stats_set else None, group.num_rows)
    return TableStatistics(
        row_count=float(row_count),
        size_bytes=float(size),
        file_bytes=float(stored),
        columns={name: acc.result() for name, acc in columns.items()},
    )


def _local_path(uri: str) -> str | None:
    """``file:///x/y`` -> ``/x/y``; a plain path as it is; None for any other URI."""
    if uri.startswith("file://"):
        return urllib.parse.unquote(urllib.parse.urlparse(uri).path)
    if "://" in uri:
        return None
    return uri


@lru_cache(maxsize=256)
def _cached_parquet_statistics(path: str, mtime: float) -> TableStatistics | None:
    """:func:`read_parquet_statistics` once per file version (``mtime``); None for unreadable footers."""
    import pyarrow as pa

    try:
        return read_parquet_statistics(path)
    except (OSError, pa.ArrowException) as e:  # unreadable footers: unknown
        log.debug("statistics: cannot read %s: %s", path, e)
        return None


def merge_file_statistics(parts: list[TableStatistics]) -> TableStatistics:
    """The statistics of a table made of these files (row counts and sizes add; min/max widen)."""
    rows = sum(p.row_count or 0.0 for p in parts)
    size = sum(p.size_bytes or 0.0 for p in parts)
    stored = None if any(p.file_bytes is None for p in parts) else sum(p.file_bytes or 0.0 for p in parts)
    columns: dict[str, ColumnStatistics] = {}
    for p in parts:
        for name, c in p.columns.items():
            if name not in columns:
                columns[name] = replace(c)
                continue
            m = columns[name]
            try:
                m.min = c.min if m.min is None or (c.min is not None and c.min < m.min) else m.min
                m.max = c.max if m.max is None or (c.max is not None and c.max > m.max) else m.max
            except TypeError:
                m.min = m.max = None
            m.null_count = None if m.null_count is None or c.null_count is None else m.null_count + c.null_count
    return TableStatistics(row_count=rows, size_bytes=size, file_bytes=stored, columns=columns)


def local_files_statistics(local_files: Any, files: FileAccess | None) -> TableStatistics | None:
    """Statistics of a ``ReadRel.local_files`` from its Parquet footers; None unless every item is a
    readable Parquet file (or glob) that ``files`` allows (``files`` None: any file)."""
    from optimizer.paths import text_normalised

    parts: list[TableStatistics] = []
    for item in local_files.items:
        if item.WhichOneof("file_format") != "parquet":
            return None
        which = item.WhichOneof("path_type")
        path = _local_path(getattr(item, which)) if which else None
        if path is None:
            return None
        if files is not None and not files.allows(path):
            return None  # outside the table roots: never opened (docs/security.md)
        path = text_normalised(path)  # '..' resolved as Spark resolves it: the file Spark reads
        if files is not None and files.any_path and (which == "uri_folder" or os.path.isdir(path)):
            return None  # unconfined (--allow-any-path): a folder is not walked for statistics
        paths = sorted(globlib.glob(path)) if which == "uri_path_glob" else [path]
        for p in paths:
            if not os.path.exists(p) or (files is not None and not files.allows(p)):
                return None
            stats = _cached_parquet_statistics(p, os.path.getmtime(p))
            if stats is None:
                return None
            parts.append(stats)
    return merge_file_statistics(parts) if parts else None


# --------------------------------------------------------------------------------------------------
# Composition
# --------------------------------------------------------------------------------------------------


class CompositeStatistics(StatisticsProvider):
    """Asks ``providers`` in order; for each field, the first provider that knows it wins.

    Per table: ``row_count`` and ``size_bytes`` come from the first provider that has them; per column,
    every field (``ndv``, ``min``, ..., ``histogram`` as a whole) likewise, so a stats file that gives
    only a table's row count, or one column's NDV, overrides just that and the rest comes from the next
    providers. ``relation_hint`` is the first provider's hint that is not ``None``. Results are memoised.
    """

    def __init__(self, providers: Iterable[StatisticsProvider], files: Any = None) -> None:
        self.providers = list(providers)
        self.files = files  # FileAccess for the plan's local files (None: any file)
        self._memo: dict[str, TableStatistics | None] = {}

    def table(self, name: TableName) -> TableStatistics | None:
        key = table_key(name)
        if key in self._memo:
            return self._memo[key]
        merged: TableStatistics | None = None
        for provider in self.providers:
            stats = provider.table(name)
            if stats is None:
                continue
            merged = stats.merged(TableStatistics()) if merged is None else merged.merged(stats)
        self._memo[key] = merged
        return merged

    def relation_hint(self, rel: Any) -> tuple[float, float | None] | None:
        for provider in self.providers:
            hint = provider.relation_hint(rel)
            if hint is not None:
                return hint
        return None

    def names(self) -> list[str]:
        seen: dict[str, str] = {}
        for provider in self.providers:
            for name in provider.names():
                seen.setdefault(table_key(name), name)
        return list(seen.values())

    def clear(self) -> None:
        self._memo.clear()
        for provider in self.providers:
            clear = getattr(provider, "clear", None)
            if clear is not None:
                clear()


def default_statistics(
    spark: Any = None,
    tables: Mapping[str, str | os.PathLike[str]] | str | os.PathLike[str] | None = None,
    stats_file: str | os.PathLike[str] | None = None,
    cache_path: str | os.PathLike[str] | None = None,
    *,
    catalog: str | bool | None = None,
    analyze_tables: bool = False,
    files: Any = None,
) -> CompositeStatistics:
    """The usual stack, in precedence order: plan hints (relation level), the explicit ``stats_file``,
    Spark ANALYZE (when both ``spark`` and ``tables`` are given), Parquet footers (when ``tables``
    is given), the Spark catalog (when ``spark`` and ``catalog`` are given: a database name, or
    ``True`` for the current database; ``analyze_tables`` runs ANALYZE TABLE on them first).
    ``files`` (:class:`~optimizer.paths.FileAccess`): the files a plan's ``local_files`` may be read
    for statistics (``None``: any); files outside it are not opened (no statistics)."""
    providers: list[StatisticsProvider] = [HintStatistics()]
    if stats_file is not None:
        providers.append(FileStatistics(stats_file))
    if tables is not None:
        resolved = resolve_tables(tables)
        if spark is not None:
            providers.append(SparkStatistics(spark, resolved, cache_path))
        providers.append(ParquetStatistics(resolved))
    if spark is not None and catalog:
        providers.append(CatalogStatistics(spark, None if catalog is True else catalog, analyze=analyze_tables))
    composite = CompositeStatistics(providers)
    composite.files = files
    return composite


__all__ = [
    "CatalogStatistics",
    "ColumnStatistics",
    "CompositeStatistics",
    "FileStatistics",
    "Histogram",
    "HintStatistics",
    "MemoryStatistics",
    "ParquetStatistics",
    "SparkStatistics",
    "StatisticsProvider",
    "TableStatistics",
    "default_cache_path",
    "default_statistics",
    "dump_json",
    "fingerprint",
    "parse_document",
    "read_hint",
    "read_parquet_statistics",
    "resolve_tables",
    "save_statistics",
    "statistics_document",
    "table_key",
    "to_numeric",
]
