"""Reading and writing Substrait plans: JSON or binary protobuf, detected automatically.

Reading is the loading pipeline's (:mod:`optimizer.load.pipeline`: parse, size and depth checks, upgrade,
producers' quirks, legacy conversions); :func:`load_plan` is its public face and returns the plan.
Writing (:func:`save_plan`, :func:`dump_plan`, :func:`write_file`) is here.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import stat
import sys
import threading
from pathlib import Path
from typing import IO, Any

from google.protobuf import json_format, unknown_fields
from substrait.proto import Plan

from optimizer.errors import ExecutionError, PlanError
from optimizer.load.limits import Limits
from optimizer.load.limits import current as current_limits
from optimizer.load.pipeline import (  # noqa: F401 - the names the API documents here
    MAX_EXPANDED_RELATIONS,
    PRODUCER,
    Source,
    check_expanded_size,
    is_conformed,
    load,
    load_bytes,
    mark_conformed,
    parse_binary,
)
from optimizer.load.protobuf_depth import MAX_PLAN_DEPTH, deep_messages  # noqa: F401 - the API documents them here

FORMATS = ("json", "binpb", "text")


def output_kind(dest: str | os.PathLike) -> str:
    """How an output is written (docs/security.md, "Writing files"): ``"file"`` (a regular file or a
    new name: atomically, by a rename), ``"stdout"``/``"stderr"`` (``-``, or a path that is the
    process's own stdout or stderr, such as ``/dev/stdout``: to that stream), ``"fifo"`` (a named pipe,
    or ``>(cmd)``: written in place, as a stream), ``"null"`` (the null device: written in place). Any
    other existing kind (a device, a socket, a directory) is a :class:`PlanError`: a rename would
    replace it.
    """
    name = os.fspath(dest)
    if name == "-":
        return "stdout"
    if not name:
        raise PlanError("the output file name is empty ('-' is stdout)", "''")
    if "\x00" in name:
        raise PlanError("output file name contains a NUL byte", repr(name))
    try:
        st = os.stat(name)
    except FileNotFoundError:
        return "file"
    except OSError as exc:
        raise PlanError(f"cannot use as the output file: {exc.strerror or exc}", name) from None
    if stat.S_ISREG(st.st_mode):
        for fd, stream in ((1, "stdout"), (2, "stderr")):
            with contextlib.suppress(OSError):
                if os.path.samestat(st, os.fstat(fd)):
                    return stream
        return "file"
    if stat.S_ISDIR(st.st_mode):
        raise PlanError("is a directory, not an output file", name)
    for fd, stream in ((1, "stdout"), (2, "stderr")):
        with contextlib.suppress(OSError):
            if os.path.samestat(st, os.fstat(fd)):
                return stream
    if stat.S_ISFIFO(st.st_mode):
        return "fifo"
    if stat.S_ISCHR(st.st_mode) and st.st_rdev == os.stat(os.devnull).st_rdev:
        return "null"
    kind = ("a character device" if stat.S_ISCHR(st.st_mode) else "a block device" if stat.S_ISBLK(st.st_mode)
            else "a socket" if stat.S_ISSOCK(st.st_mode) else "not a regular file")
    raise PlanError(f"is {kind}: -o writes a regular file (replaced atomically), a FIFO, /dev/stdout, "
                    "/dev/stderr or /dev/null", name)


def check_output(dest: str | os.PathLike) -> None:
    """Refuse an output path that cannot be written, before any work: exit 2 naming it."""
    name = os.fspath(dest)
    if output_kind(name) != "file":
        return
    target = Path(name)
    parent = target.parent
    if not parent.is_dir():
        raise PlanError("no such directory for the output file", name)
    if not os.access(parent, os.W_OK | os.X_OK):
        raise PlanError("the output file's directory is not writable", name)


@contextlib.contextmanager
def atomic_path(dest: str | os.PathLike):
    """A temporary path beside ``dest`` to write to; renamed onto ``dest`` when the block succeeds.

    On failure the temporary file is removed and ``dest`` is as it was: an ``OSError`` (disk full,
    file-size limit) is an :class:`~optimizer.errors.ExecutionError` (exit 3) naming ``dest``.
    """
    check_output(dest)
    if output_kind(dest) != "file":  # a rename would put a regular file in place of a pipe or stream
        raise PlanError("is not a regular file: this output is written as a new file (atomically)",
                        os.fspath(dest))
    target = Path(os.fspath(dest))
    tmp = target.parent / f".{target.name}.{os.getpid()}.{threading.get_ident()}.tmp"
    try:
        yield tmp
        os.replace(tmp, target)
    except OSError as exc:
        raise ExecutionError(f"cannot write: {exc.strerror or exc}; the file is unchanged", os.fspath(dest)) from None
    finally:
        if tmp.exists():
            with contextlib.suppress(OSError):
                tmp.unlink()


def write_file(dest: str | os.PathLike, data: bytes) -> None:
    """Write ``data`` to ``dest`` atomically: all of it, or the old file unchanged (see :func:`atomic_path`).

    A stream (stdout, stderr, a FIFO, the null device: :func:`output_kind`) is written in place.
    """
    kind = output_kind(dest)
    if kind in ("stdout", "stderr"):
        stream = sys.stdout if kind == "stdout" else sys.stderr
        stream.flush()
        stream.buffer.write(data)
        stream.flush()
        return
    if kind != "file":
        try:
            with open(dest, "wb") as f:  # no O_CREAT effect: the FIFO or device exists
                f.write(data)
        except OSError as exc:
            raise ExecutionError(f"cannot write: {exc.strerror or exc}", os.fspath(dest)) from None
        return
    with atomic_path(dest) as tmp:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())


def parse_plan(data: bytes, name: str = "<input>", limits: Limits | None = None) -> Plan:
    """Parse plan bytes (JSON or binary protobuf) and upgrade older encodings: the loading pipeline
    (:func:`optimizer.load.pipeline.load_bytes`) from the bytes on.

    The plan is held to ``limits`` (:func:`optimizer.load.limits.current` by default): its size before it
    is parsed, what it holds (relations, expression nodes, arguments, rows) before its messages are built.
    """
    return load_bytes(data, name, limits).plan


def load_plan(source: Source, limits: Limits | None = None) -> Plan:
    """Load a plan from a path, ``-`` (stdin), bytes, a JSON string or a file object: the plan of the
    loading pipeline's :class:`~optimizer.load.pipeline.LoadedPlan` (:func:`optimizer.load.pipeline.load`).

    Plan bytes are held to ``limits`` (:func:`optimizer.load.limits.current` by default: see
    :mod:`optimizer.load.limits`); a ``Plan`` message is the caller's own and is not counted.

    JSON and binary protobuf are told apart by their first byte. Older Substrait encodings are
    upgraded to the current one without losing meaning; anything that cannot be is a
    :class:`~optimizer.errors.PlanError` naming the field and where it is. A ``Plan`` message is
    conformed like a parsed one, on a copy (unless this tool loaded it: :func:`is_conformed`).

    The plan loaded is in the spec's conventions, and its ``version`` says so (:func:`mark_conformed`):
    written and loaded again, it means the same.
    """
    return load(source, limits).plan


def dump_plan(plan: Plan, format: str = "json") -> bytes:
    """Serialise a plan: ``json`` (camelCase, as the spec's JSON), ``binpb``, or ``text`` (explain tree)."""
    if format == "json":
        where = _first_unknown_field(plan)
        if where is not None:  # JSON would drop them, and the plan would mean another query to its reader
            raise PlanError("the plan holds fields of an older Substrait encoding (written for a consumer that "
                            "reads them, e.g. --target duckdb) that JSON cannot carry: write it as binpb", where)
        try:
            text = (json_format.MessageToJson(plan, indent=2) + "\n").encode("utf-8")
            # Indented, a wide plan's JSON is three times its size: past the input limit, the tool would not
            # read back what it wrote (under the limits it read the plan with), so it goes without indentation.
            if len(text) > current_limits().input_bytes:
                text = (json.dumps(json_format.MessageToDict(plan), separators=(",", ":")) + "\n").encode("utf-8")
        except RecursionError:  # protobuf's JSON writer recurses several frames per message
            raise PlanError("the plan is nested too deeply to write as JSON (Python's recursion limit, about 400 "
                            "messages deep): write it as binpb (1,000)") from None
        return text
    if format == "binpb":
        return plan.SerializeToString(deterministic=True)
    if format == "text":
        from optimizer.explain import explain_plan

        return (explain_plan(plan) + "\n").encode("utf-8")
    raise PlanError(f"unknown format '{format}' (choose from {', '.join(FORMATS)})")


def _first_unknown_field(plan: Plan) -> str | None:
    """The path of the first message of ``plan`` holding fields today's protos do not know, else None."""
    stack: list[tuple[Any, str]] = [(plan, "")]
    while stack:
        message, path = stack.pop()
        if len(unknown_fields.UnknownFieldSet(message)):
            return path or "plan"
        for fd, value in message.ListFields():
            if fd.message_type is None:
                continue
            if fd.is_repeated:
                if fd.message_type.GetOptions().map_entry:
                    continue  # the plan's messages hold no map of messages
                stack.extend((item, f"{path}{'.' if path else ''}{fd.name}[{i}]") for i, item in enumerate(value))
            else:
                stack.append((value, f"{path}{'.' if path else ''}{fd.name}"))
    return None


def save_plan(plan: Plan, dest: str | os.PathLike | IO[Any], format: str | None = None) -> None:
    """Write a plan to a path, ``-`` (stdout) or a file object.

    ``format`` defaults from the file name (``.json`` -> json, ``.txt`` -> text, else binpb; stdout: json).
    """
    if format is None:
        name = os.fspath(dest) if isinstance(dest, str | os.PathLike) else ""
        format = "json" if name in ("", "-") or name.endswith(".json") else "text" if name.endswith(".txt") else "binpb"
    data = dump_plan(plan, format)
    if isinstance(dest, str | os.PathLike):
        if os.fspath(dest) == "-":
            sys.stdout.buffer.write(data)
            sys.stdout.flush()
            return
        write_file(dest, data)
        return
    if isinstance(dest, io.TextIOBase):
        dest.write(data.decode("utf-8") if format != "binpb" else data.decode("latin-1"))
    else:
        dest.write(data)
