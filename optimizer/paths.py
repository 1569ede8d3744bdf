"""Table locations as the user gives them, and which files a plan may name: confinement to the table
roots (see docs/security.md).

A table location is a plain path, a ``file://`` URI or any URI Spark reads (``s3a://``, ``hdfs://``,
``abfss://``...); :func:`local_path` and :func:`join_location` read and extend one without Spark.

A plan's ``ReadRel.local_files`` and its named tables resolve to files. Read from an untrusted plan,
such a file must lie under one of the roots the operator gave (``--tables``), or it is a
:class:`~optimizer.errors.PlanError` naming the file. Two readers resolve a location differently, and
it must be inside the roots for both:

* Spark (Hadoop's ``Path``) resolves ``.`` and ``..`` as text, wildcards included
  (``t/*/../../x`` is ``x``), expands braces holding a ``/`` into several paths and unescapes
  ``\\``-escaped segments; only then does the file system follow links;
* the kernel (pyarrow, the statistics' footer reads) follows links first, then ``..`` physically.

So every reading is judged: the text with ``..`` resolved (before the glob base is taken), its
glob base with links resolved, the text as the kernel reads it, each brace alternative, and, for a
local location, every file or folder its glob matches and every entry of a folder it reads (a link
inside the roots to a place outside them is outside). A URI with a scheme other than ``file:``
(``s3a://b/t``, ``hdfs://nn/t``) is judged by its normalised text: scheme and host in lower case,
``.`` and ``..`` resolved, then a prefix check on whole segments. ``FileAccess.anywhere()``
(``--allow-any-path``) lifts the check.

>>> access = FileAccess.under(["/data/tables"])
>>> access.allows("/data/tables/x.parquet"), access.allows("/data/tables/../secret.parquet")
(True, False)
>>> access.allows("/data/tables/*/../../secret.parquet"), access.allows("/data/tables/{a/../..,b}/s")
(False, False)
>>> FileAccess.under(["s3a://Bucket/t"]).allows("s3a://bucket/t/../t/a.parquet")
True
"""

from __future__ import annotations

import glob as _glob
import os
import posixpath
import re
import stat
import urllib.parse
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from optimizer.errors import PlanError

__all__ = [
    "FileAccess", "expand_braces", "glob_base", "join_location", "local_path", "normalise", "text_normalised",
]

_SCHEME = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*):")
_GLOB_CHARS = re.compile(r"[*?\[{]")
_ESCAPE = re.compile(r"\\(.)", re.DOTALL)

#: Brace alternatives a location may expand to before it is refused (``{a,b}{c,d}`` is 4).
MAX_ALTERNATIVES = 256


def _location_scheme(location: str) -> str:
    """The URI scheme (``"s3a"``, ``"file"``...), ``""`` for a plain path."""
    return urllib.parse.urlparse(location).scheme.lower() if "://" in location else ""


def local_path(location: str) -> str | None:
    """The local path of a plain path or ``file:`` URI; ``None`` for any other scheme.

    >>> local_path("file:///data/tpch%20sf1"), local_path("data/tpch"), local_path("s3a://bucket/tpch")
    ('/data/tpch sf1', 'data/tpch', None)
    """
    kind = _location_scheme(location) if "://" in location else ("file" if location.startswith("file:") else "")
    if kind == "file":
        return urllib.parse.unquote(urllib.parse.urlparse(location).path)
    if kind:
        return None
    return location


def join_location(root: str, name: str) -> str:
    """``root`` / ``name``, for paths and URIs alike.

    >>> join_location("s3a://bucket/tpch/", "lineitem.parquet"), join_location("/data", "x")
    ('s3a://bucket/tpch/lineitem.parquet', '/data/x')
    """
    if local_path(root) is not None and "://" not in root:
        return os.path.join(root, name)
    return root.rstrip("/") + "/" + name


def _remote(location: str) -> bool:
    m = _SCHEME.match(location)
    return bool(m) and m.group(1).lower() != "file" and len(m.group(1)) > 1  # C:\ is a path


def _decoded(location: str) -> str:
    """A ``file:`` URI's local path (unquoted); a plain path or remote URI as written."""
    if "\x00" in location:
        raise PlanError(f"file name contains a NUL byte: {location!r}")
    if not _remote(location) and location.lower().startswith("file:"):
        return urllib.parse.unquote(urllib.parse.urlsplit(location).path)
    return location


def _split_remote(location: str) -> tuple[str, str, str]:
    """Scheme, authority and path of a URI as Hadoop's ``Path`` splits it: everything after the
    authority is the path (a ``?`` or ``#`` is part of it, not a query or fragment).

    >>> _split_remote("s3a://b/t/?/../x#y")
    ('s3a', 'b', '/t/?/../x#y')
    """
    m = _SCHEME.match(location)
    assert m is not None
    rest = location[m.end():]
    if not rest.startswith("//"):
        return m.group(1), "", rest
    netloc, slash, path = rest[2:].partition("/")
    return m.group(1), netloc, slash + path


def normalise(location: str) -> str:
    """A local path made absolute with ``..`` and links resolved (as the kernel does); a remote URI
    normalised as text (percent-decoded)."""
    location = _decoded(location)
    if _remote(location):
        scheme, netloc, path = _split_remote(location)
        path = posixpath.normpath(urllib.parse.unquote(path) or "/")
        return f"{scheme.lower()}://{netloc.lower()}{'' if path == '/' else path}"
    return os.path.realpath(os.path.expanduser(location))


def text_normalised(location: str) -> str:
    """A local path made absolute with ``.`` and ``..`` resolved as text, as Hadoop's ``Path`` does
    (no ``~``, no links); a remote URI's path likewise.

    >>> text_normalised("/t/?/../../secret.parquet"), text_normalised("s3a://b/t/*/../x")
    ('/secret.parquet', 's3a://b/t/x')
    """
    location = _decoded(location)
    if _remote(location):
        scheme, netloc, path = _split_remote(location)
        path = posixpath.normpath(path or "/")
        return f"{scheme}://{netloc}{'' if path == '/' else path}"
    return os.path.abspath(location)  # abspath is normpath of the joined text: links are not followed


def glob_base(pattern: str) -> str:
    """The part of a glob before its first segment with a wildcard (``/t/*/x.parquet`` -> ``/t``)."""
    parts = pattern.split("/")
    for i, part in enumerate(parts):
        if _GLOB_CHARS.search(part):
            return "/".join(parts[:i]) or "/"
    return pattern


def expand_braces(text: str, limit: int = MAX_ALTERNATIVES) -> list[str] | None:
    """Every alternative of ``{a,b}`` groups (nested, any number), or ``None`` past ``limit``.

    Hadoop expands only groups that hold a ``/``; expanding all of them judges a superset of what it
    reads. An unmatched brace is a literal.

    >>> expand_braces("t/{a,b{c,d}}/x")
    ['t/a/x', 't/bc/x', 't/bd/x']
    >>> expand_braces("t/{../..,a}/x")
    ['t/../../x', 't/a/x']
    """
    start = text.find("{")
    while start != -1:
        depth, commas, end = 0, [], -1
        for i in range(start, len(text)):
            c = text[i]
            if c == "{":
                depth += 1
            elif c == "}":
                depth -= 1
                if depth == 0:
                    end = i
                    break
            elif c == "," and depth == 1:
                commas.append(i)
        if end == -1:  # unmatched: a literal brace; look for a later group
            start = text.find("{", start + 1)
            continue
        rests = expand_braces(text[end + 1:], limit)
        if rests is None:
            return None
        cuts = [start, *commas, end]
        out: list[str] = []
        for a, b in zip(cuts, cuts[1:], strict=False):
            options = expand_braces(text[a + 1:b], limit)
            if options is None or len(out) + len(options) * len(rests) > limit:
                return None
            out.extend(text[:start] + option + rest for option in options for rest in rests)
        return out
    return [text]


def _under(location: str, root: str) -> bool:
    if location == root:
        return True
    return location.startswith(root if root.endswith("/") else root + "/")


#: Why a FIFO, a device or a socket is not read: a reader opening one may wait forever (a FIFO no one
#: writes), uninterruptibly, or read without end (``/dev/zero``).
SPECIAL_FILE = "it is not a regular file or folder (a FIFO, a device or a socket, which a reader may wait on forever)"


def special_file(path: str | os.PathLike[str]) -> bool:
    """``path`` (links followed) exists and is neither a regular file nor a folder. ``stat`` opens
    nothing, so a FIFO is found without waiting on it."""
    try:
        mode = os.stat(path).st_mode
    except (OSError, ValueError):  # missing, a dangling link, a name the system refuses
        return False
    return not (stat.S_ISREG(mode) or stat.S_ISDIR(mode))


def _python_glob(pattern: str) -> str:
    """A Hadoop glob as Python's ``glob`` reads it (``[^a]`` is ``[!a]``)."""
    return pattern.replace("[^", "[!")


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

    def _inside(self, normalised: str) -> bool:
        return any(_under(normalised, root) for root in self.roots)

    def _readings(self, location: str) -> Iterator[str] | None:
        """The texts a reader may resolve ``location`` to, before links: as written (the kernel) and
        unescaped, each brace alternative with ``..`` resolved as text (Hadoop). None: too many."""
        decoded = _decoded(location)
        forms = dict.fromkeys((decoded, _ESCAPE.sub(r"\1", decoded)))
        # Hadoop reads the text as written; a store, or another engine's URL parser (file:///t/%2e%2e
        # is file:///t/.. to a WHATWG URL), may decode it
        m = _SCHEME.match(decoded) if _remote(decoded) else None
        forms.update(dict.fromkeys([f"{m.group(1)}:{urllib.parse.unquote(decoded[m.end():])}" if m else
                                    urllib.parse.unquote(decoded)]))
        readings: dict[str, None] = {}
        for form in forms:
            alternatives = expand_braces(form)
            if alternatives is None or len(readings) + len(alternatives) > 2 * MAX_ALTERNATIVES:
                return None
            readings.update(dict.fromkeys(alternatives))
        return iter(readings)

    def refusal(self, location: str) -> str | None:
        """Why ``location`` may not be read (None: it may)."""
        if self.any_path:
            _decoded(location)  # a NUL byte is refused even so
            return None
        readings = self._readings(location)
        if readings is None:
            return f"may not be read: its braces expand to more than {MAX_ALTERNATIVES} paths"
        outside = "it is outside the table roots"
        walked: set[str] = set()  # folders already found inside: the alternatives and matches share them
        listed: set[str] = set()  # texts already globbed (alternatives often resolve to one text)
        for reading in readings:
            if _remote(reading):
                text = text_normalised(reading)
                if not self._inside(normalise(glob_base(text) if _GLOB_CHARS.search(text) else text)):
                    return outside
                continue
            # the kernel's reading (links, then ..) and Hadoop's (.. as text, then links); then what
            # each one's glob matches, or the folder it names, with every entry a folder holds
            for text in (os.path.expanduser(reading), text_normalised(reading)):
                globbed = bool(_GLOB_CHARS.search(text))
                if not self._inside(normalise(glob_base(text) if globbed else text)):
                    return outside
                if text in listed:
                    continue
                listed.add(text)
                # recursive: "**" matches any depth, none included, as DuckDB reads it (Hadoop: one level)
                matches = (_glob.iglob(_python_glob(text), include_hidden=True, recursive=True) if globbed
                           else iter([text]))
                for match in matches:
                    reason = self._tree_refusal(match, walked)
                    if reason is not None:
                        return reason
        return None

    def _tree_refusal(self, path: str, walked: set[str]) -> str | None:
        """Why ``path`` may not be read: it or, for a folder, an entry under it (links followed, as Spark
        lists a folder) resolves outside the roots, or is neither a file nor a folder. ``walked``:
        folders known to be inside (each is walked once)."""
        outside = "it is outside the table roots"
        real = os.path.realpath(path)
        if not self._inside(real):
            return outside
        if special_file(real):
            return SPECIAL_FILE
        if real in walked or not os.path.isdir(real):
            return None
        walked.add(real)
        for folder, dirs, names in os.walk(real, followlinks=True):
            for name in names:
                entry = os.path.realpath(os.path.join(folder, name))
                if not self._inside(entry):
                    return outside
                if special_file(entry):
                    return SPECIAL_FILE
            kept = []
            for name in dirs:
                target = os.path.realpath(os.path.join(folder, name))
                if not self._inside(target):
                    return outside
                if target not in walked:  # a link loop or a second link to one folder: walked once
                    walked.add(target)
                    kept.append(name)
            dirs[:] = kept
        return None

    def allows(self, location: str) -> bool:
        return self.refusal(location) is None

    def check(self, location: str, path: str | None = None) -> str:
        """The location to read if ``location`` may be read; else a PlanError naming it and the rule.

        A local location is returned as Spark resolves it (:func:`text_normalised`: absolute, ``.``
        and ``..`` resolved as text), so that every reader given it (Spark, pyarrow, an existence
        check) reads the same file; a remote URI as written.
        """
        reason = self.refusal(location)
        if reason is not None:
            where = ", ".join(self.roots) if self.roots else "no --tables given"
            if reason == SPECIAL_FILE:
                raise PlanError(f"file '{location}': {reason}", path)
            raise PlanError(f"file '{location}' {reason} (table roots: {where}); --allow-any-path allows it"
                            if reason.startswith("may") else
                            f"file '{location}' is outside the table roots ({where}); --allow-any-path allows it",
                            path)
        return location if _remote(_decoded(location)) else text_normalised(location)


ALLOW_ANY_PATH_HELP = ("let the plan read files anywhere (default: only under --tables, after resolving "
                       "'..' as Spark does and links; see docs/security.md)")


def add_path_argument(parser) -> None:
    """``--allow-any-path`` for a CLI command that reads the files a plan names."""
    parser.add_argument("--allow-any-path", action="store_true", help=ALLOW_ANY_PATH_HELP)


def file_access(args) -> FileAccess:
    """The CLI's :class:`FileAccess`: the ``--tables`` roots, or anywhere with ``--allow-any-path``."""
    return FileAccess.for_tables(getattr(args, "tables", None) or None, getattr(args, "allow_any_path", False))


def table_in_directory(directory: Path, name: str) -> Path | None:
    """``directory/<name>.parquet``, else the folder ``directory/<name>/`` (names compared
    case-insensitively, a name of the same case first: ``T`` is ``T.parquet`` beside ``t.parquet``);
    ``None`` when neither is there."""
    if not directory.is_dir():
        return None
    wanted = name.lower()
    candidates = {}
    for entry in directory.iterdir():
        low = entry.name.lower()
        if low == wanted + ".parquet":
            if special_file(entry):
                raise PlanError(f"table '{name}': {entry}: {SPECIAL_FILE}")
            candidates.setdefault((0, entry.name != name + ".parquet"), entry)
        elif low == wanted and entry.is_dir():
            candidates.setdefault((1, entry.name != name), entry)
    return candidates[min(candidates)] if candidates else None


def table_places(mapping: Mapping[str, Any], directory: Path | None) -> list[str]:
    """Where a table is looked for, for a message: the given mapping, then the tables' directory."""
    return (["the given table mapping"] if mapping else []) + ([str(directory)] if directory is not None else [])
