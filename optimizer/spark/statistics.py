"""Statistics from Spark, and the usual stack of providers (:func:`default_statistics`).

* :class:`SparkStatistics` -- ``ANALYZE TABLE ... COMPUTE STATISTICS FOR ALL COLUMNS`` with histograms,
  cached in a JSON file keyed by the data files' paths, sizes and modification times.
* :class:`CatalogStatistics` -- tables of the Spark catalog: what the catalog holds (``DESCRIBE TABLE
  EXTENDED ... AS JSON``, and per column ``DESCRIBE TABLE EXTENDED t col``), optionally after ``ANALYZE
  TABLE`` (``analyze=True``, the CLI's ``--analyze-tables``).

Both speak Spark SQL through the session they are given; PySpark is imported only when they call it.
The providers that need no Spark, and how providers compose, are in :mod:`optimizer.cost.providers`.
"""

from __future__ import annotations

import datetime
import hashlib
import json
import logging
import os
import re
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from optimizer.cost.parquet_footers import ParquetStatistics
from optimizer.cost.providers import (
    CompositeStatistics,
    FileStatistics,
    HintStatistics,
    StatisticsProvider,
    TablePathStatistics,
)
from optimizer.cost.statistics import (
    ColumnStatistics,
    Histogram,
    TableName,
    TableStatistics,
    parse_timestamp,
    table_key,
)
from optimizer.cost.statistics_io import (
    FORMAT_VERSION,
    fingerprint,
    is_uri,
    resolve_tables,
    write_json_atomic,
)
from optimizer.errors import spark_errors

log = logging.getLogger(__name__)

DEFAULT_DATABASE = "substrait_opt_stats"
#: Tables the cache keeps: the most recently analysed. An entry holds a table's column histograms (tens of
#: KB) and every ANALYZE reads and rewrites the whole file, so an unbounded cache (one entry per folder ever
#: analysed: a test's or a tutorial's temporary copies) made each ANALYZE slower: 409 entries, 21 MB, added
#: 14 s to a first `optimize --tables` of three tables.
CACHE_TABLES = 128
HISTOGRAM_CONF = "spark.sql.statistics.histogram.enabled"


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
    """A min/max as ``DESCRIBE EXTENDED t col`` prints it, in the JSON convention of
    :mod:`optimizer.cost.statistics`."""
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
            parsed = parse_timestamp(text)
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


def _opt_float(value: Any) -> float | None:
    return None if value is None else float(value)


def _sql_string(text: str) -> str:
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"


def _quote_ident(name: str) -> str:
    return "`" + name.replace("`", "``") + "`"


class SparkStatistics(TablePathStatistics):
    """Statistics from Spark's ``ANALYZE TABLE ... COMPUTE STATISTICS FOR ALL COLUMNS``.

    ``tables``: see :func:`~optimizer.cost.statistics_io.resolve_tables`. A table is analysed on first
    request: it is registered as an external table ``<database>.<name>_<hash of path>`` (``CREATE TABLE
    ... USING parquet LOCATION``; dropping it never touches the data), analysed with
    ``spark.sql.statistics.histogram.enabled=true`` (set for the call, then restored), and read back with
    ``DESCRIBE EXTENDED``.

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
        if not is_uri(path) and not os.path.exists(path):
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
        document["tables"] = _kept_entries(tables)
        write_json_atomic(self.cache_path, document)

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


def _kept_entries(tables: dict[str, Any]) -> dict[str, Any]:
    """The cache's entries worth keeping, oldest first: not those of a local table that no longer exists
    (its entry can never be used again), and of the rest the newest :data:`CACHE_TABLES`."""
    live = [(path, entry) for path, entry in tables.items() if is_uri(path) or os.path.exists(path)]
    return dict(live[-CACHE_TABLES:])


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
# The usual stack
# --------------------------------------------------------------------------------------------------


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
    "SparkStatistics",
    "default_cache_path",
    "default_statistics",
]
