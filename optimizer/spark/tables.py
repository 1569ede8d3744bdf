"""Where the data of a ``ReadRel`` comes from, and Substrait types as Spark types.

:class:`TableResolver` turns the leaves of a plan into Spark DataFrames whose columns are, positionally,
the ``ReadRel.base_schema`` (its top-level columns, in order, cast to the declared types):

* ``named_table``: a table name (the last of ``names``, case-insensitively, so Isthmus's ``LINEITEM``
  finds ``lineitem.parquet``) is bound, in this order, by

  1. the ``tables`` mapping given to the resolver (``{name: path or DataFrame}``; a key may also be the
     whole dotted name),
  2. the ``tables`` location: ``DIR/<name>.parquet`` (a file or a Spark-written folder) or ``DIR/<name>/``.
     A plain path or ``file://`` URI is listed (names match case-insensitively); any other URI
     (``s3a://``, ``hdfs://``...) is asked to Spark, once per table: it reads ``DIR/<name>.parquet``, then
     ``DIR/<name>``, with the name as written and lower-cased, and only Spark's ``PATH_NOT_FOUND`` means
     "not there",
  3. the Spark catalog: the dotted name (``db.lineitem``), then ``<database>.<name>`` when the resolver
     has a ``database`` (``--catalog DB``), else the last segment in the current database (a table or a
     temporary view).

  A table found nowhere is a :class:`~optimizer.errors.PlanError`
  ``table 'x' not found (looked in DIR, the Spark catalog)``.
* ``local_files``: parquet, ORC, Arrow IPC and delimiter-separated text files, given as files, folders
  or globs (``file://`` URIs or plain paths). A byte slice (``start``/``length``) of a parquet file
  reads the row groups whose first byte lies in ``[start, start + length)`` (pyarrow metadata), so
  slices that cover a file read each row group exactly once; a slice of any other format is an
  :class:`~optimizer.errors.UnsupportedError`.

Columns are matched to the base schema by name, exactly or else case-insensitively (the plan may
say ``L_ORDERKEY``); a base schema without names is matched by position. A missing column is a
``PlanError`` naming it. Types are checked and cast where the data differs from the plan within a
compatible family (integers, decimals and floats among each other; ``varchar``/``fixedchar``/``string``
are all Spark strings; timestamps with and without zone); anything else (a string column declared
``i64``) is a ``PlanError``.

Substrait types map to Spark types with :func:`optimizer.spark.expressions.substrait_type_to_spark`
(the one mapping of the package).
"""

from __future__ import annotations

import collections
import glob as _glob
import itertools
import os
import re
import threading
import urllib.parse
import uuid
import weakref
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from py4j.protocol import Py4JError, Py4JJavaError
from pyspark.errors import AnalysisException, PySparkException
from pyspark.sql import DataFrame
from pyspark.sql import types as T
from sqlglot import exp
from sqlglot.errors import ParseError
from substrait.proto import NamedStruct, ReadRel

from optimizer.errors import ExecutionError, PlanError, UnsupportedError
from optimizer.paths import FileAccess, join_location, table_in_directory, table_places
from optimizer.paths import local_path as _location_path
from optimizer.schema.record import top_level_names
from optimizer.spark.expressions import named_struct_to_spark, quote, substrait_type_to_spark
from optimizer.spark.session_settings import utc_zone
from optimizer.spark.sql import Context, Frame
from optimizer.spark.sql_columns import functions as F

__all__ = ["TableResolver", "top_level_names"]


# ---------------------------------------------------------------------------------------------
# Names
# ---------------------------------------------------------------------------------------------


def _family(dt: T.DataType) -> str:
    if isinstance(dt, T.IntegralType | T.DecimalType | T.FloatType | T.DoubleType):
        return "numeric"
    if isinstance(dt, T.StringType | T.CharType | T.VarcharType):
        return "string"
    if isinstance(dt, T.TimestampType | T.TimestampNTZType):
        return "timestamp"
    return type(dt).__name__


def _type_text(dt: T.DataType) -> str:
    return dt.simpleString()


# Integer types: bits, and the decimal digits every value fits in (127: 3 digits).
_INT_BITS = {T.ByteType: 8, T.ShortType: 16, T.IntegerType: 32, T.LongType: 64}
_INT_DIGITS = {T.ByteType: 3, T.ShortType: 5, T.IntegerType: 10, T.LongType: 19}
# Integer types: the most decimal digits d such that every d-digit integer fits (10^d - 1 <= max).
_INT_WHOLE_DIGITS = {T.ByteType: 2, T.ShortType: 4, T.IntegerType: 9, T.LongType: 18}
# Binary floats: the significand's bits (every integer up to 2^bits is exact) and the decimal digits
# d such that every d-digit integer is exact.
_FLOAT_BITS = {T.FloatType: 24, T.DoubleType: 53}
_FLOAT_DIGITS = {T.FloatType: 7, T.DoubleType: 15}


def lossless_cast(source: T.DataType, target: T.DataType, fixed_zone: bool = True) -> bool:
    """Whether casting every value of ``source`` to ``target`` keeps it exactly (equal values stay equal,
    distinct ones distinct, none becomes NULL or an error). ``fixed_zone``: the session's time zone has
    a fixed offset (UTC), so timestamps with and without a zone convert one to one.

    >>> lossless_cast(T.DecimalType(15, 2), T.DecimalType(19, 2)), lossless_cast(T.DecimalType(15, 2), T.DecimalType(19, 0))
    (True, False)
    >>> lossless_cast(T.IntegerType(), T.LongType()), lossless_cast(T.LongType(), T.IntegerType())
    (True, False)
    >>> lossless_cast(T.IntegerType(), T.DecimalType(10, 0)), lossless_cast(T.IntegerType(), T.DecimalType(10, 1))
    (True, False)
    """
    if source == target:
        return True
    s, t = type(source), type(target)
    if s in _INT_BITS:
        if t in _INT_BITS:
            return _INT_BITS[t] >= _INT_BITS[s]
        if t is T.DecimalType:
            return target.precision - target.scale >= _INT_DIGITS[s]
        if t in _FLOAT_BITS:
            return _FLOAT_BITS[t] >= _INT_BITS[s] - 1  # the sign bit is not a significand bit
        return False
    if s is T.DecimalType:
        if t is T.DecimalType:
            return target.scale >= source.scale and target.precision - target.scale >= source.precision - source.scale
        if t in _INT_WHOLE_DIGITS:
            return source.scale == 0 and source.precision <= _INT_WHOLE_DIGITS[t]
        if t in _FLOAT_DIGITS:  # 0.06 has no binary float: only whole numbers are exact
            return source.scale == 0 and source.precision <= _FLOAT_DIGITS[t]
        return False
    if s in _FLOAT_BITS:
        return t in _FLOAT_BITS and _FLOAT_BITS[t] >= _FLOAT_BITS[s]
    if isinstance(source, T.StringType | T.CharType | T.VarcharType):
        # Spark has no declared lengths: every Substrait string type is a Spark string, which holds
        # any value (a collation change keeps the text)
        return isinstance(target, T.StringType)
    if isinstance(source, T.TimestampType | T.TimestampNTZType):
        return isinstance(target, T.TimestampType | T.TimestampNTZType) and fixed_zone
    if isinstance(source, T.ArrayType) and isinstance(target, T.ArrayType):
        return lossless_cast(source.elementType, target.elementType, fixed_zone)
    if isinstance(source, T.MapType) and isinstance(target, T.MapType):
        return (lossless_cast(source.keyType, target.keyType, fixed_zone)
                and lossless_cast(source.valueType, target.valueType, fixed_zone))
    if isinstance(source, T.StructType) and isinstance(target, T.StructType):
        return len(source.fields) == len(target.fields) and all(
            lossless_cast(a.dataType, b.dataType, fixed_zone) for a, b in zip(source.fields, target.fields, strict=True))
    return False


def fixed_offset_zone(zone: str) -> bool:
    """Whether the time zone ``zone`` (a Spark session time zone) has one offset all year: UTC, GMT, Z,
    ``+HH:MM`` / ``-HH:MM``, ``Etc/GMT+N``.

    >>> fixed_offset_zone("UTC"), fixed_offset_zone("+05:30"), fixed_offset_zone("Europe/Paris")
    (True, True, False)
    """
    text = zone.strip()
    return utc_zone(text) or bool(
        re.fullmatch(r"(?:(?:UTC|GMT|UT|Etc/GMT)?[+-]\d{1,2}(?::?\d{2})?)", text, flags=re.IGNORECASE))


# ---------------------------------------------------------------------------------------------
# Resolver
# ---------------------------------------------------------------------------------------------




def check_reads(plan, tables: str | None, files: FileAccess, *, empty_catalog: bool) -> None:
    """The checks of a plan's reads that need no Spark, raising the ``PlanError`` reading would: every
    ``local_files`` location is one ``files`` allows and, when local and without wildcards, exists;
    when ``empty_catalog`` (the session is still to be started and its catalog will hold no table),
    every named table is a file or folder of the local ``tables`` directory (and allowed)."""
    directory = None
    if tables is not None:
        local = _location_path(os.fspath(tables))
        if local is None:  # only Spark can list it
            empty_catalog = False
        else:
            directory = Path(local)
    stack = [(plan, "")]
    while stack:  # every message, without recursion (plans may nest deeply)
        message, path = stack.pop()
        if message.DESCRIPTOR.full_name == "substrait.Rel" and message.WhichOneof("rel_type") == "read":
            _check_read(message.read, f"{path}.read", directory, files, empty_catalog)
        for fd, value in message.ListFields():
            if fd.message_type is None:
                continue
            where = f"{path}.{fd.name}" if path else fd.name
            if fd.is_repeated:
                if fd.message_type.GetOptions().map_entry:
                    continue
                stack.extend((item, f"{where}[{i}]") for i, item in enumerate(value))
            else:
                stack.append((value, where))


def _check_read(read: ReadRel, path: str, directory: Path | None, files: FileAccess, empty_catalog: bool) -> None:
    which = read.WhichOneof("read_type")
    if which == "local_files":
        for i, item in enumerate(read.local_files.items):
            ipath = f"{path}.local_files.items[{i}]"
            kind = item.WhichOneof("path_type")
            if kind is None:
                raise PlanError("file item has no path", ipath)
            location = files.check(_local_path(getattr(item, kind)), f"{ipath}.{kind}")
            local = _location_path(location)
            if local is not None and not _WILDCARD.search(local) and not os.path.exists(local):
                raise PlanError(f"no such file: {location}", f"{ipath}.{kind}")
    elif which == "named_table" and empty_catalog:
        names = list(read.named_table.names)
        tpath = f"{path}.named_table"
        if not names:
            raise PlanError("named_table has no names", tpath)
        found = table_in_directory(directory, names[-1]) if directory is not None else None
        if found is None:
            where = f"{directory}, the Spark catalog" if directory is not None else "the Spark catalog"
            raise PlanError(f"table '{'.'.join(names)}' not found (looked in {where})", tpath)
        files.check(str(found), tpath)


_WILDCARD = re.compile(r"[*?\[{]")


def _local_path(uri: str) -> str:
    """``file:///x/y`` -> ``/x/y``; plain paths unchanged."""
    if uri.startswith("file:"):
        parsed = urllib.parse.urlparse(uri)
        return urllib.parse.unquote(parsed.path)
    return uri


class TableResolver:
    """Binds the tables and files of ``ReadRel`` leaves to Spark DataFrames.

    ``tables``: ``None``, a directory (a path, ``file://`` or any URI Spark reads) or a mapping
    ``{name: path | DataFrame | StructType}`` (a ``StructType`` describes a table for
    :meth:`~optimizer.spark.SparkBackend.to_sql` alone: the SQL text is built without Spark). ``database``: the catalog database of unqualified names.
    ``files``: the files a plan may read (:class:`~optimizer.paths.FileAccess`, see docs/security.md);
    ``None`` reads any file (the CLI always confines, to ``--tables`` unless ``--allow-any-path``).
    ``allow_lossy_casts``: conform a column to a declared type that cannot hold all its values
    (``decimal(15,2)`` declared ``decimal(19,0)``) by casting; by default that is a ``PlanError``.
    """

    def __init__(
        self, spark, tables: str | os.PathLike | Mapping[str, Any] | None = None, database: str | None = None,
        files: FileAccess | None = None, *, allow_lossy_casts: bool = False,
    ) -> None:
        self.spark = spark
        self.allow_lossy_casts = allow_lossy_casts
        self.database = database or None
        self.files = files if files is not None else FileAccess.anywhere()
        self.directory: Path | None = None
        self.location: str | None = None  # a directory only Spark can read (s3a://, hdfs://...)
        self._probed: dict[str, str | None] = {}  # table name -> the location Spark read, or None
        self.mapping: dict[str, Any] = {}
        # Parquet DataFrames (and their schemas) by path and modification stamp: reading a parquet
        # table lists its files and reads a footer (~50 ms), once per backend rather than per read.
        self._parquet: dict[tuple[str, tuple[int, int] | None], DataFrame] = {}
        self._schemas: dict[int, tuple[DataFrame, Any]] = {}
        self._safe: dict[int, tuple[DataFrame, DataFrame]] = {}  # tables whose names hold "${", renamed
        # how the query text names a table DataFrame (by id(df)): a catalog table by its name, any other
        # by a temporary view this resolver registers once (spark.sql(text, t0=df) would create and
        # drop a view on every call: 3-10 ms per table); close() drops the views
        self._names: dict[int, tuple[DataFrame, exp.Table]] = {}
        self._views: list[str] = []
        self._token = uuid.uuid4().hex[:12]
        # one backend serves several threads (a view name taken twice would let one table replace
        # another): names come from a counter, registration holds a lock
        self._numbers = itertools.count()
        self._lock = threading.Lock()
        # a resolver dropped without close() has its views dropped after it is collected (not at exit:
        # the session ends with the process)
        weakref.finalize(self, _orphan_views, spark, self._views).atexit = False
        _drop_orphaned_views()
        if isinstance(tables, Mapping):
            self.mapping = {str(k).lower(): v for k, v in tables.items()}
        elif tables is not None:
            text = os.fspath(tables)
            local = _location_path(text)
            if local is None:
                self.location = text
            else:
                self.directory = Path(local)

    # -- named tables ------------------------------------------------------------------------

    def _where(self) -> str:
        places = table_places(self.mapping, self.directory)
        if self.location is not None:
            places.append(self.location)
        places.append(f"database '{self.database}' of the Spark catalog" if self.database else "the Spark catalog")
        return ", ".join(places)

    def _from_directory(self, name: str) -> Path | None:
        return None if self.directory is None else table_in_directory(self.directory, name)

    def _from_location(self, name: str, path: str | None = None) -> DataFrame | None:
        """The table ``name`` under a directory only Spark can list: each candidate location is read
        once; ``PATH_NOT_FOUND`` means "not there", any other failure is an error naming the table.
        The name is the plan's: a candidate it makes outside the roots (``../x``) is a PlanError."""
        key = name.lower()
        if key in self._probed:
            found = self._probed[key]
            return None if found is None else self._parquet[(found, None)]
        assert self.location is not None
        for spelling in dict.fromkeys((name, key)):
            for candidate in (f"{spelling}.parquet", spelling):
                uri = self.files.check(join_location(self.location, candidate), path)
                try:
                    df = self._parquet_reader().parquet(uri)
                    df.schema  # noqa: B018 -- Spark resolves the path here (a Connect reader is lazy)
                except AnalysisException as exc:
                    if exc.getCondition() == "PATH_NOT_FOUND":
                        continue
                    raise PlanError(f"table '{name}': cannot read {uri}: {_first_line(exc)}") from None
                except (PySparkException, Py4JJavaError) as exc:  # e.g. no connector for the scheme
                    raise ExecutionError(f"table '{name}': Spark cannot read {uri}: {_java_failure(exc)}") from None
                self._parquet[(uri, None)] = df
                self._probed[key] = uri
                return df
        self._probed[key] = None
        return None

    def catalog_candidates(self, names: Sequence[str]) -> list[str]:
        """The catalog identifiers a table name may be, in the order they are tried."""
        out = [".".join(names)] if len(names) > 1 else []
        out.append(f"{self.database}.{names[-1]}" if self.database else names[-1])
        return list(dict.fromkeys(out))

    def _from_catalog(self, names: Sequence[str]) -> DataFrame | None:
        for candidate in self.catalog_candidates(names):
            try:
                if not self.spark.catalog.tableExists(candidate):
                    continue
            except AnalysisException:  # not an identifier Spark parses: not in the catalog
                continue
            df = self.spark.table(candidate)
            try:
                self._names[id(df)] = (df, exp.to_table(candidate, dialect="spark"))
            except ParseError:  # Spark parsed it, sqlglot does not: the DataFrame is bound instead
                pass
            return df
        return None

    def raw_table(self, names: Sequence[str], path: str | None = None) -> DataFrame:
        """The DataFrame bound to a table name, columns as stored."""
        if not names:
            raise PlanError("named_table has no names", path)
        last = names[-1]
        for key in (".".join(names).lower(), last.lower()):
            if key in self.mapping:
                value = self.mapping[key]
                if isinstance(value, DataFrame | T.StructType):
                    return value
                return self._read_parquet(self.files.check(_local_path(os.fspath(value)), path), path)
        found = self._from_directory(last)
        if found is not None:
            return self._read_parquet(self.files.check(str(found), path), path)
        if self.location is not None:
            df = self._from_location(last, path)
            if df is not None:
                return df
        df = self._from_catalog(list(names))
        if df is not None:
            return df
        raise PlanError(f"table '{'.'.join(names)}' not found (looked in {self._where()})", path)

    def _parquet_reader(self):
        """``spark.read`` for Parquet, its dates and timestamps in the proleptic Gregorian calendar (Arrow's
        and Substrait's) whatever the session's rebase settings: with
        ``spark.sql.parquet.datetimeRebaseModeInRead=LEGACY`` Spark read pyarrow's 1000-01-01 as 0999-12-27.
        Files Spark 2 wrote keep the calendar their metadata names (Spark reads it there)."""
        return self.spark.read.option("datetimeRebaseMode", "CORRECTED").option("int96RebaseMode", "CORRECTED")

    def _read_parquet(self, location: str, path: str | None = None) -> DataFrame:
        """``spark.read.parquet(location)``, reused while the path's modification time and size stay; a
        file Spark cannot read is a ``PlanError`` naming it."""
        try:
            st = os.stat(location)
            stamp: tuple[int, int] | None = (st.st_mtime_ns, st.st_size)
        except OSError:  # not a local path (hdfs://, s3a://...): Spark resolves it
            stamp = None
        key = (location, stamp)
        df = self._parquet.get(key)
        if df is None:
            try:
                df = self._parquet_reader().parquet(location)
            except (PySparkException, Py4JJavaError) as exc:  # not parquet, unreadable, gone
                raise PlanError(f"cannot read {location}: {_spark_failure(exc)}", path) from None
            if stamp is not None:
                self._parquet[key] = df
        return df

    def _kept(self, df: DataFrame) -> bool:
        """Whether the resolver reuses ``df`` from call to call (a table it read, given or renamed)."""
        return (any(df is v for v in self._parquet.values()) or any(df is v for v in self.mapping.values())
                or any(df is v[1] for v in self._safe.values()))

    def table_name(self, df: DataFrame) -> exp.Table | None:
        """How the query text names the table DataFrame ``df``: a catalog table by its own name, a table
        the resolver reuses by a temporary view of the session registered on first use (see
        :meth:`close`); ``None`` for a DataFrame of one call (files of a ``local_files`` read), which
        is bound to the ``spark.sql`` call."""
        with self._lock:
            hit = self._names.get(id(df))
            if hit is not None and hit[0] is df:
                return hit[1]
            if not self._kept(df):
                return None
            _drop_orphaned_views()
            view = f"substrait_opt_{self._token}_{next(self._numbers)}"
            try:
                df.createOrReplaceTempView(view)
            except PySparkException as exc:
                raise ExecutionError(
                    f"Spark cannot register a table as a temporary view: {_first_line(exc)}"
                ) from None
            self._views.append(view)
            self._names[id(df)] = (df, exp.Table(this=exp.to_identifier(view)))
            return self._names[id(df)][1]

    def close(self) -> None:
        """Drop the temporary views this resolver registered in the session (it registers them again
        when used after that)."""
        with self._lock:
            _drop_views(self.spark, self._views)
            self._names.clear()
        _drop_orphaned_views()

    def _schema(self, df: DataFrame):
        """``df.schema`` (a JVM round trip and a JSON parse), remembered for the cached tables."""
        if isinstance(df, T.StructType):  # a table described by its schema only (to_sql without Spark)
            return df
        cached = self._schemas.get(id(df))
        if cached is not None and cached[0] is df:
            return cached[1]
        schema = df.schema
        if self._kept(df):
            self._schemas[id(df)] = (df, schema)
        return schema

    def named_table(
        self,
        read: ReadRel,
        ctx: Context,
        path: str | None = None,
        columns: Sequence[str] | None = None,
        keep: Sequence[int] | None = None,
    ) -> Frame:
        """The table of a ``named_table`` read, conformed to its ``base_schema`` (see :meth:`conform`),
        as a query of ``ctx`` (the table's DataFrame is bound to it)."""
        names = list(read.named_table.names)
        df = self.raw_table(names, f"{path}.named_table" if path else None)
        return self.conform(df, read.base_schema, f"table '{'.'.join(names)}'", ctx, path, columns, keep)

    def _renamed(self, df: DataFrame, n: int) -> DataFrame:
        """``df`` with its columns called ``_s0``, ``_s1``... (once per DataFrame)."""
        hit = self._safe.get(id(df))
        if hit is None or hit[0] is not df:
            hit = (df, df.toDF(*[f"_s{i}" for i in range(n)]))
            self._safe[id(df)] = hit
        return hit[1]

    # -- local files ---------------------------------------------------------------------------

    def local_files(self, read: ReadRel, ctx: Context, path: str | None = None,
                    columns: Sequence[str] | None = None) -> Frame:
        """The union of a ``local_files`` read's items, conformed to its ``base_schema``."""
        items = list(read.local_files.items)
        lpath = f"{path}.local_files" if path else None
        if not items:
            raise PlanError("local_files has no items", lpath)
        frames: list[DataFrame] = []
        whole: dict[str, list[str]] = {}  # format -> paths read in one go
        for i, item in enumerate(items):
            ipath = f"{lpath}.items[{i}]" if lpath else None
            which = item.WhichOneof("path_type")
            if which is None:
                raise PlanError("file item has no path", ipath)
            location = self.files.check(_local_path(getattr(item, which)), f"{ipath}.{which}" if ipath else None)
            fmt = item.WhichOneof("file_format")
            if fmt in (None, "extension", "dwrf"):
                raise UnsupportedError(f"file format '{fmt or 'unspecified'}' is not supported", ipath)
            sliced = item.start != 0 or item.length != 0
            if fmt == "parquet" and sliced:
                frames.append(self._parquet_slice(location, which, item.start, item.length, ipath))
            elif sliced:
                raise UnsupportedError(f"byte slices of {fmt} files are not supported", ipath)
            elif fmt == "arrow":
                frames.append(self._arrow_files(location, which, ipath))
            elif fmt == "text":
                frames.append(self._text(location, item.text, read.base_schema, ipath))
            else:
                whole.setdefault(fmt, []).append(location)
        for fmt, paths in whole.items():
            reader = self._parquet_reader().parquet if fmt == "parquet" else self.spark.read.orc
            try:
                frames.append(reader(*paths))
            except (PySparkException, Py4JError) as exc:  # missing files, unreadable data
                raise PlanError(f"cannot read {fmt} files {paths}: {_first_line(exc)}", lpath) from None
        conformed = [self.conform(f, read.base_schema, "local files", ctx, path, columns) for f in frames]
        out = conformed[0]
        for other in conformed[1:]:
            out = out.union(other)
        return out

    def _expand(self, location: str, which: str, path: str | None) -> list[str]:
        if which == "uri_path_glob":
            files = sorted(_glob.glob(location))
        elif which == "uri_folder" or os.path.isdir(location):
            files = sorted(
                str(p) for p in Path(location).rglob("*") if p.is_file() and not p.name.startswith((".", "_"))
            )
        else:
            files = [location]
        if not files or not all(os.path.exists(f) for f in files):
            raise PlanError(f"no such file: {location}", path)
        return [self.files.check(f, path) for f in files]

    def _parquet_slice(self, location: str, which: str, start: int, length: int, path: str | None) -> DataFrame:
        import pyarrow as pa
        import pyarrow.parquet as pq

        end = start + length if length else None
        tables = []
        for file in self._expand(location, which, path):
            pf = pq.ParquetFile(file)
            md = pf.metadata
            groups = []
            for g in range(md.num_row_groups):
                rg = md.row_group(g)
                offsets = []
                for c in range(rg.num_columns):
                    col = rg.column(c)
                    offsets.append(col.dictionary_page_offset if col.has_dictionary_page else col.data_page_offset)
                first = min(offsets) if offsets else 0
                if first >= start and (end is None or first < end):
                    groups.append(g)
            tables.append(pf.read_row_groups(groups) if groups else pf.schema_arrow.empty_table())
        return self.spark.createDataFrame(pa.concat_tables(tables, promote_options="permissive"))

    def _arrow_files(self, location: str, which: str, path: str | None) -> DataFrame:
        import pyarrow as pa
        import pyarrow.ipc as ipc

        tables = []
        for file in self._expand(location, which, path):
            with pa.memory_map(file) as source:
                try:
                    tables.append(ipc.open_file(source).read_all())
                except pa.ArrowInvalid:
                    source.seek(0)
                    tables.append(ipc.open_stream(source).read_all())
        return self.spark.createDataFrame(pa.concat_tables(tables, promote_options="permissive"))

    def _text(self, location: str, options, base: NamedStruct, path: str | None) -> DataFrame:
        if options.header_lines_to_skip > 1:
            raise UnsupportedError("skipping more than one header line is not supported", path)
        reader = self.spark.read.schema(named_struct_to_spark(base, path))
        opts: dict[str, Any] = {"header": options.header_lines_to_skip == 1}
        if options.field_delimiter:
            opts["sep"] = options.field_delimiter
        if options.quote:
            opts["quote"] = options.quote
        if options.escape:
            opts["escape"] = options.escape
        if options.HasField("value_treated_as_null"):
            opts["nullValue"] = options.value_treated_as_null
        return reader.csv(location, **opts)

    # -- schema conformance --------------------------------------------------------------------

    @property
    def _zone_is_fixed(self) -> bool:
        """Whether the session's time zone has a fixed offset, asked when a cast needs it (a user may change
        the zone between plans; without a session, the tool's default, UTC)."""
        return fixed_offset_zone("UTC" if self.spark is None else str(self.spark.conf.get("spark.sql.session.timeZone")))

    def conform(
        self,
        df: DataFrame,
        base: NamedStruct,
        what: str,
        ctx: Context,
        path: str | None = None,
        columns: Sequence[str] | None = None,
        keep: Sequence[int] | None = None,
    ) -> Frame:
        """``df`` (bound to ``ctx``) with exactly the base schema's columns, in its order, cast to its types.

        The columns are called ``columns`` (default ``_b0``, ``_b1``, ...); ``keep`` (distinct
        positions) selects only those columns, in that order: a projection mask in the same select.
        """
        spath = f"{path}.base_schema" if path else None
        names = top_level_names(base, spath)
        fields = self._schema(df).fields
        bound = df
        if isinstance(df, DataFrame) and any("${" in f.name for f in fields):
            # Spark would substitute ${...} in the SQL text: such a table's columns are renamed by
            # position with the DataFrame API, which no SQL parser reads.
            bound = self._renamed(df, len(fields))
        if not any(names):
            if len(fields) < len(names):
                raise PlanError(f"{what} has {len(fields)} columns, the plan declares {len(names)}", spath)
            chosen = list(range(len(names)))
        else:
            exact = {f.name: i for i, f in enumerate(fields)}
            folded: dict[str, list[int]] = {}
            for i, f in enumerate(fields):
                folded.setdefault(f.name.lower(), []).append(i)
            chosen = []
            for name in names:
                if name in exact:
                    chosen.append(exact[name])
                    continue
                matches = folded.get(name.lower(), [])
                if len(matches) == 1:
                    chosen.append(matches[0])
                elif matches:
                    raise PlanError(f"column '{name}' of {what} is ambiguous (differs only in case)", spath)
                else:
                    have = ", ".join(f.name for f in fields)
                    raise PlanError(f"column '{name}' not found in {what} (it has: {have})", spath)
        out = []
        types = list(base.struct.types) or [None] * len(chosen)  # names without types: no casts
        if columns is not None and len(columns) != len(chosen):
            raise PlanError(f"{what}: {len(columns)} column names for {len(chosen)} columns", spath)
        wanted = set(range(len(chosen)) if keep is None else keep)
        by_position = {}
        for k, (i, t) in enumerate(zip(chosen, types, strict=True)):
            if k not in wanted:
                continue
            name = columns[k] if columns is not None else f"_b{k}"
            field = fields[i]
            column = F.col(quote(field.name) if bound is df else f"`_s{i}`")
            if t is None:
                by_position[k] = column.alias(name)
                continue
            target = substrait_type_to_spark(t, path=f"{spath}.struct.types[{k}]" if spath else None)
            if field.dataType != target:
                if _family(field.dataType) != _family(target):
                    raise PlanError(
                        f"column '{field.name}' of {what} is {_type_text(field.dataType)} in the data "
                        f"but {_type_text(target)} in the plan",
                        spath,
                    )
                if not self.allow_lossy_casts and not lossless_cast(field.dataType, target, self._zone_is_fixed):
                    raise PlanError(
                        f"column '{field.name}' of {what} is {_type_text(field.dataType)} in the data but "
                        f"{_type_text(target)} in the plan, a cast that can change values "
                        f"(--allow-lossy-casts allows it)",
                        spath,
                    )
                column = column.cast(target)
            by_position[k] = column.alias(name)
        out = [by_position[k] for k in (range(len(chosen)) if keep is None else keep)]
        # a table described by its schema only (to_sql without Spark) is bound to a placeholder
        named = self.table_name(bound) if isinstance(bound, DataFrame) else None
        source = Frame.named(ctx, named) if named is not None else Frame.table(ctx, ctx.bind(bound))
        return source.select(*out)


# Views of resolvers collected without close(), dropped by the next resolver that is created or closed
# or registers a view: never from the garbage collector itself, which can run in the middle of another
# Spark call (a Spark Connect client called from there waits forever on the call it interrupted).
_ORPHANED_VIEWS: collections.deque[tuple[Any, list[str]]] = collections.deque()


def _orphan_views(spark, views: list[str]) -> None:
    """The finalizer of a :class:`TableResolver`: hands its views over, calls no Spark."""
    if views:
        _ORPHANED_VIEWS.append((spark, views))


def _drop_orphaned_views() -> None:
    """Drop the views of the resolvers collected so far."""
    while True:
        try:
            spark, views = _ORPHANED_VIEWS.popleft()
        except IndexError:  # none left (another thread may have taken the last one)
            return
        _drop_views(spark, views)


def _drop_views(spark, views: list[str]) -> None:
    """Drop the temporary ``views`` of ``spark`` (nothing when the session has stopped)."""
    while views:
        view = views.pop()
        try:
            spark.catalog.dropTempView(view)
        except (PySparkException, Py4JError):  # the session or its JVM is gone: so are its views
            views.clear()


def _java_failure(exc: BaseException) -> str:
    """The JVM's own message of a failure (``java.lang.X: ...``), not py4j's "An error occurred while
    calling o105.parquet" nor the stack.

    >>> _java_failure(Exception("An error occurred while calling o1.parquet.\\n: java.io.IOException: no\\n\\tat x"))
    'java.io.IOException: no'
    """
    for line in str(exc).splitlines():
        text = line.strip().lstrip(":").strip()
        if text and not text.startswith("An error occurred while calling"):
            return text[:300]
    return type(exc).__name__


def _spark_failure(exc: BaseException) -> str:
    """The first line of a PySpark error, or the JVM's own message of a py4j one."""
    return _java_failure(exc) if isinstance(exc, Py4JJavaError) else _first_line(exc)[:300]


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return text[0] if text else type(exc).__name__
