"""Which files a plan may name: confinement to the table roots (see docs/security.md).

A plan's ``ReadRel.local_files`` and its named tables resolve to files. Read from an untrusted plan,
such a file must lie under one of the roots the operator gave (``--tables``), judged after resolving
``..`` and symbolic links, or it is a :class:`~optimizer.errors.PlanError` naming the file. A URI
with a scheme other than ``file:`` (``s3a://b/t``, ``hdfs://nn/t``) is judged by its normalised text:
scheme and host in lower case, ``.`` and ``..`` segments resolved, then a prefix check on whole
segments. ``FileAccess.anywhere()`` (``--allow-any-path``) lifts the check.

>>> access = FileAccess.under(["/data/tables"])
>>> access.allows("/data/tables/x.parquet"), access.allows("/data/tables/../secret.parquet")
(True, False)
>>> FileAccess.under(["s3a://Bucket/t"]).allows("s3a://bucket/t/../t/a.parquet")
True
"""

from __future__ import annotations

import os
import posixpath
import re
import urllib.parse
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from optimizer.errors import PlanError

__all__ = ["FileAccess", "glob_base", "normalise"]

_SCHEME = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*):")
_GLOB_CHARS = re.compile(r"[*?\[{]")


def _remote(location: str) -> bool:
    m = _SCHEME.match(location)
    return bool(m) and m.group(1).lower() != "file" and len(m.group(1)) > 1  # C:\ is a path


def normalise(location: str) -> str:
    """A local path made absolute with ``..`` and links resolved; a remote URI normalised as text."""
    if "\x00" in location:
        raise PlanError(f"file name contains a NUL byte: {location!r}")
    if _remote(location):
        parsed = urllib.parse.urlsplit(location)
        path = posixpath.normpath(urllib.parse.unquote(parsed.path) or "/")
        return f"{parsed.scheme.lower()}://{parsed.netloc.lower()}{'' if path == '/' else path}"
    if location.lower().startswith("file:"):
        location = urllib.parse.unquote(urllib.parse.urlsplit(location).path)
    return os.path.realpath(os.path.expanduser(location))


def glob_base(pattern: str) -> str:
    """The part of a glob before its first segment with a wildcard (``/t/*/x.parquet`` -> ``/t``)."""
    parts = pattern.split("/")
    for i, part in enumerate(parts):
        if _GLOB_CHARS.search(part):
            return "/".join(parts[:i]) or "/"
    return pattern


def _under(location: str, root: str) -> bool:
    if location == root:
        return True
    return location.startswith(root if root.endswith("/") else root + "/")


@dataclass(frozen=True)
class FileAccess:
    """The roots files must lie under (normalised), or ``any_path`` for no check."""

    roots: tuple[str, ...] = ()
    any_path: bool = False

    @classmethod
    def anywhere(cls) -> FileAccess:
        return cls((), True)

    @classmethod
    def under(cls, roots: Iterable[str | os.PathLike]) -> FileAccess:
        return cls(tuple(normalise(os.fspath(r)) for r in roots))

    @classmethod
    def for_tables(cls, tables: Any, allow_any_path: bool = False) -> FileAccess:
        """The access the CLI gives: the ``--tables`` location(s), or anywhere with ``--allow-any-path``.

        ``tables``: ``None`` (no files allowed), a directory or URI, a list of them, or a mapping
        ``{name: path}`` (its paths are the roots; DataFrame values name no file).
        """
        if allow_any_path:
            return cls.anywhere()
        if tables is None:
            return cls()
        if isinstance(tables, Mapping):
            return cls.under(os.fspath(v) for v in tables.values() if isinstance(v, str | os.PathLike))
        if isinstance(tables, str | os.PathLike):
            return cls.under([tables])
        return cls.under(tables)

    def allows(self, location: str) -> bool:
        if self.any_path:
            return True
        target = normalise(glob_base(location) if _GLOB_CHARS.search(location) else location)
        return any(_under(target, root) for root in self.roots)

    def check(self, location: str, path: str | None = None) -> str:
        """``location`` itself if it may be read; else a PlanError naming it and the rule."""
        if not self.allows(location):
            where = ", ".join(self.roots) if self.roots else "no --tables given"
            raise PlanError(
                f"file '{location}' is outside the table roots ({where}); --allow-any-path allows it", path
            )
        return location


ALLOW_ANY_PATH_HELP = ("let the plan read files anywhere (default: only under --tables, after resolving "
                       "'..' and links; see docs/security.md)")


def add_path_argument(parser) -> None:
    """``--allow-any-path`` for a CLI command that reads the files a plan names."""
    parser.add_argument("--allow-any-path", action="store_true", help=ALLOW_ANY_PATH_HELP)


def file_access(args) -> FileAccess:
    """The CLI's :class:`FileAccess`: the ``--tables`` roots, or anywhere with ``--allow-any-path``."""
    return FileAccess.for_tables(getattr(args, "tables", None) or None, getattr(args, "allow_any_path", False))
