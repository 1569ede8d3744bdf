"""Statistics providers: one interface, :class:`StatisticsProvider`, whatever the source, and the
sources that need no Spark, composed by precedence.

Sources (each a :class:`StatisticsProvider`):

* :class:`HintStatistics` -- ``RelCommon.hint.stats`` written into the plan by its producer
  (relation level only: :meth:`~StatisticsProvider.relation_hint`).
* :class:`FileStatistics` -- a JSON file (hand-written, or saved with :func:`save_statistics`; the same
  format as the Spark cache), given on the CLI with ``--stats FILE``.
* :class:`~optimizer.cost.parquet_footers.ParquetStatistics` -- row counts, min/max and null counts
  from the Parquet footers (no Spark, no NDV).
* :class:`MemoryStatistics` -- a mapping built in code.
* Spark's, in :mod:`optimizer.spark.statistics`: ``ANALYZE TABLE`` (cached) and the Spark catalog.

:class:`CompositeStatistics` asks its providers in order and, for every table-level field and every
column field, keeps the first value that is known (not ``None``).
:func:`optimizer.spark.statistics.default_statistics` builds the usual stack, whose precedence is::

    hints on a relation  >  explicit stats file  >  Spark ANALYZE  >  Parquet footers  >  Spark catalog

Hints only answer :meth:`~StatisticsProvider.relation_hint`: the cardinality module asks for a hint first
and, when a relation has one, uses it instead of the estimate derived from the table statistics.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from optimizer.cost.statistics import ColumnStatistics, TableName, TableStatistics, saturate, table_key
from optimizer.cost.statistics_io import (
    parse_document,
    resolve_tables,
    statistics_document,
    write_json_atomic,
)

from optimizer.errors import PlanError

# --------------------------------------------------------------------------------------------------
# Interface
# --------------------------------------------------------------------------------------------------


class StatisticsProvider:
    """What every statistics source answers; ``None`` means "I don't know".

    Table names are matched by :func:`~optimizer.cost.statistics.table_key` (last segment, case-insensitive) and column names
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
    write_json_atomic(Path(path).expanduser(), document)
    return document


class TablePathStatistics(StatisticsProvider):
    """Statistics of tables given by path (:func:`~optimizer.cost.statistics_io.resolve_tables`), each read
    once by the subclass's :meth:`_load` and kept in memory."""

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


__all__ = [
    "CompositeStatistics",
    "FileStatistics",
    "HintStatistics",
    "MemoryStatistics",
    "StatisticsProvider",
    "TablePathStatistics",
    "read_hint",
    "save_statistics",
]
