"""Statistics from Parquet footers (pyarrow; no Spark): of the tables given by location
(:class:`ParquetStatistics`), and of a plan's ``ReadRel.local_files`` (:func:`local_files_statistics`).
"""

from __future__ import annotations

import datetime
import decimal
import glob as globlib
import logging
import os
import re
import urllib.parse
from dataclasses import replace
from functools import lru_cache
from typing import Any

from optimizer.cost.providers import TablePathStatistics
from optimizer.cost.statistics import ColumnStatistics, TableStatistics
from optimizer.cost.statistics_io import data_files, is_uri

from optimizer.paths import FileAccess, text_normalised

log = logging.getLogger(__name__)


def _json_value(value: Any) -> Any:
    """A Python statistics value (as pyarrow gives them) in the JSON convention of
    :mod:`optimizer.cost.statistics`."""
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


class ParquetStatistics(TablePathStatistics):
    """Row counts, min/max and null counts from the Parquet footers (pyarrow; no Spark, fast).

    ``tables``: see :func:`~optimizer.cost.statistics_io.resolve_tables`. NDV is unknown (``None``:
    Parquet writers rarely store distinct counts; it is 0 only for a column that is all nulls) and there
    are no histograms. ``size_bytes`` is the sum of the row groups' uncompressed sizes.
    ``avg_len``/``max_len`` are given for fixed-width types only (their byte width, as Spark reports
    them). Min/max are over the row groups that have non-null values; a row group without bounds makes
    them unknown. Binary bounds are dropped (not JSON).
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

    if is_uri(path) or not os.path.exists(path):
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


__all__ = [
    "ParquetStatistics",
    "local_files_statistics",
    "merge_file_statistics",
    "read_parquet_statistics",
]
