"""Statistics on disk: the JSON document of ``docs/statistics.md`` (parsed, built, written atomically as
indented text), and the tables given by location (their files, and a fingerprint of those files).

No Spark here: a location is a plain path or a URI (:func:`optimizer.paths.local_path`); only local
tables are listed.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import re
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from optimizer.cost.statistics import ColumnStatistics, TableStatistics

from optimizer.errors import PlanError
from optimizer.paths import FileAccess, local_path, special_file

log = logging.getLogger(__name__)

FORMAT_VERSION = 1


# --------------------------------------------------------------------------------------------------
# The JSON document
# --------------------------------------------------------------------------------------------------


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
    """The JSON document (dict) of ``tables``, as :class:`~optimizer.cost.providers.FileStatistics` reads it."""
    return {"version": FORMAT_VERSION, "tables": {name: s.to_json() for name, s in tables.items()}}


_INNER_LIST_RE = re.compile(r"\[([^\[\]{}]*)\]")


def dump_json(document: Any) -> str:
    """JSON text, indented, with each innermost list (a histogram bin, a file entry) on one line."""
    text = json.dumps(document, indent=1)

    def one_line(m: re.Match[str]) -> str:
        # JSON strings never hold a raw newline: every newline here is indentation.
        return "[" + re.sub(r",\n\s*", ", ", m.group(1)).strip() + "]"

    return _INNER_LIST_RE.sub(one_line, text) + "\n"


def write_json_atomic(path: Path, document: Any) -> None:
    """Write :func:`dump_json` of ``document`` to ``path`` through a temporary file in the same folder:
    a reader sees the old file or the new one, never half of it."""
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


def is_uri(path: str) -> bool:
    """A location with a scheme (``file://`` included): not listed or fingerprinted here."""
    return "://" in path


def resolve_tables(tables: Mapping[str, str | os.PathLike[str]] | str | os.PathLike[str]) -> dict[str, str]:
    """``name -> absolute path`` of the Parquet tables given as a mapping, or as a directory in which
    ``<name>.parquet`` (a file or a folder) and ``<name>/`` (a folder holding ``.parquet`` files) are
    tables. A single ``.parquet`` file is one table named after it. A ``file://`` URI is its local path;
    other URIs (``s3a://...``) are kept as is in a mapping, and a directory given as such a URI has no
    tables here (it cannot be listed without Spark: see ``docs/statistics.md``).
    """
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
    inside = FileAccess.under([root])
    for entry in sorted(os.listdir(root)):
        if _is_hidden(entry):
            continue
        full = os.path.join(root, entry)
        if special_file(full):  # a FIFO read for its footer waits forever: no table, no statistics
            continue
        if not inside.allows(full):  # a link out of the folder (or a folder holding one): never opened
            continue
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
        found.extend(os.path.join(dirpath, f) for f in sorted(filenames)
                     if not _is_hidden(f) and not special_file(os.path.join(dirpath, f)))
    return found


def fingerprint(path: str) -> list[list[Any]] | None:
    """``[[relative path, size, mtime_ns], ...]`` of a table's files; ``None`` if it cannot be listed."""
    if is_uri(path) or not os.path.exists(path):
        return None
    base = path if os.path.isdir(path) else os.path.dirname(path)
    out = []
    for file in data_files(path):
        st = os.stat(file)
        out.append([os.path.relpath(file, base), st.st_size, st.st_mtime_ns])
    return out


__all__ = [
    "FORMAT_VERSION",
    "data_files",
    "dump_json",
    "fingerprint",
    "is_uri",
    "parse_document",
    "resolve_tables",
    "statistics_document",
    "write_json_atomic",
]
