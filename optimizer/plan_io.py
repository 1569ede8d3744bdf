"""Reading and writing Substrait plans: JSON or binary protobuf, detected automatically.

Older encodings are upgraded losslessly on the way in (see :mod:`optimizer.load.upgrade`).
"""

from __future__ import annotations

import contextlib
import functools
import io
import json
import os
import stat
import sys
import threading
from pathlib import Path
from typing import IO, Any

from google.protobuf import json_format, unknown_fields
from google.protobuf.descriptor import Descriptor, FieldDescriptor
from google.protobuf.message import DecodeError
from substrait.proto import Plan, Rel

from optimizer.errors import ExecutionError, PlanError, read_user_file
from optimizer.load.counts import Counter
from optimizer.load.counts import check_json as count_json
from optimizer.load.limits import Limits
from optimizer.load.limits import current as limits_in_force
from optimizer.load.protobuf_depth import (  # noqa: F401 - MAX_PLAN_DEPTH, deep_messages: the API documents them here
    MAX_PLAN_DEPTH,
    deep_messages,
    merge_pieces,
    message_depths,
)
from optimizer.load.upgrade import parse_json_plan, upgrade_binary_plan

FORMATS = ("json", "binpb", "text")


#: The most relations a plan may have with every ``ReferenceRel`` replaced by the subtree it names.
#: Spark (and any consumer that does not share subtrees) works on the expanded tree: 20 levels of a
#: union of two references to the level below is 2^20 relations, gigabytes and hours.
MAX_EXPANDED_RELATIONS = 100_000

Source = str | os.PathLike | bytes | bytearray | IO[Any] | Plan


def _read_source(source: Source, max_bytes: int | None = None) -> tuple[bytes, str]:
    """The raw bytes of a source and a name for messages. Past ``max_bytes`` a file or stream is read
    no further than one byte more (:func:`parse_plan` refuses it)."""
    if isinstance(source, bytes | bytearray):
        return bytes(source), "<bytes>"
    if isinstance(source, os.PathLike) or (isinstance(source, str) and (not source.lstrip().startswith("{")
                                                                       or _is_file(source))):
        name = os.fspath(source)
        if name == "-":
            return _read_at_most(sys.stdin.buffer, max_bytes), "<stdin>"
        return read_user_file(name, "a plan file", max_bytes=max_bytes), name
    if isinstance(source, str):
        return source.encode("utf-8"), "<string>"
    if hasattr(source, "read"):
        data = source.read() if max_bytes is None else source.read(max_bytes + 1)
        return (data.encode("utf-8") if isinstance(data, str) else bytes(data)), getattr(source, "name", "<stream>")
    raise PlanError(f"cannot read a plan from a {type(source).__name__}")


def _read_at_most(f: IO[bytes], max_bytes: int | None) -> bytes:
    """All of ``f``, or its first ``max_bytes + 1`` bytes: enough to tell that it is too long."""
    return f.read() if max_bytes is None else f.read(max_bytes + 1)


def _is_file(text: str) -> bool:
    """Whether a string names an existing file (a path that exists is a path, even ``{a}.json``)."""
    try:
        return "\n" not in text and os.path.isfile(text)
    except (ValueError, OSError):
        return False


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


def _looks_like_json(data: bytes) -> bool:
    head = data.lstrip()[:1]
    return head in (b"{", b"[", b'"') or head.isdigit()


def parse_plan(data: bytes, name: str = "<input>", limits: Limits | None = None) -> Plan:
    """Parse plan bytes (JSON or binary protobuf) and upgrade older encodings.

    The plan is held to ``limits`` (:func:`optimizer.load.limits.current` by default): its size before it
    is parsed, what it holds (relations, expression nodes, arguments, rows) before its messages are built.
    """
    limits = limits_in_force() if limits is None else limits
    if len(data) > limits.input_bytes:
        raise limits.exceeded("input_bytes", f"the plan is larger than {limits.input_bytes} bytes", name)
    if not data.strip():
        raise PlanError("empty input: no plan", name)
    if _looks_like_json(data):
        try:
            doc = json.loads(data.decode("utf-8"))
        except RecursionError:
            raise PlanError("JSON nested too deeply for this tool (Python's recursion limit)", name) from None
        except UnicodeDecodeError:
            raise PlanError("JSON input is not UTF-8", name) from None
        except json.JSONDecodeError as exc:
            raise PlanError(f"invalid JSON at line {exc.lineno} column {exc.colno}: {exc.msg}", name) from None
        count_json(doc, limits, name)
        try:
            plan = parse_json_plan(doc)
        except RecursionError:
            raise PlanError("JSON nested too deeply for this tool (Python's recursion limit)", name) from None
        except PlanError as exc:
            raise PlanError(exc.message, f"{name}: {exc.path}" if exc.path else name) from None
    else:
        try:
            plan = parse_binary(data, name, limits)
            _upgrade_binary(plan, name)
            return _conformed(plan, name)
        except PlanError:
            from optimizer.load.producers import looks_like_sql, sql_instead_of_plan

            if looks_like_sql(data):  # looked at only when the bytes are no plan
                raise sql_instead_of_plan(name) from None
            raise
    return _conformed(plan, name)


def _upgrade_binary(plan: Plan, name: str) -> None:
    """Older encodings in a parsed binary plan (fields today's protos do not know) upgraded in place."""
    try:
        upgrade_binary_plan(plan)
    except PlanError as exc:
        raise PlanError(exc.message, f"{name}: {exc.path}" if exc.path else name) from None
    except DecodeError as exc:
        raise PlanError(f"not a Substrait plan: malformed protobuf ({exc})", name) from None


def _conformed(plan: Plan, name: str) -> Plan:
    """The checks and conformations every loaded plan goes through, in place; the plan marked as conformed."""
    if not plan.relations:
        raise PlanError("the plan has no relations", name)
    check_expanded_size(plan, name)
    _conform_producer_quirks(plan, name)  # keyed by the plan's version: a plan this tool wrote has none
    mark_conformed(plan)
    for i, rel in enumerate(plan.relations):
        kind = rel.WhichOneof("rel_type")
        if kind is None:
            raise PlanError("a plan relation is neither a root nor a rel", f"{name}: relations[{i}]")
        if kind == "root" and not rel.root.HasField("input"):
            raise PlanError("the root has no input relation", f"{name}: relations[{i}].root")
    return plan


def parse_binary(data: bytes, name: str = "<input>", limits: Limits | None = None) -> Plan:
    """A binary plan, nested at most :data:`MAX_PLAN_DEPTH` messages deep; anything else is a PlanError.

    The depth is measured first (a scan of the wire format, no recursion), and what the plan holds is
    counted against ``limits`` in the same scan; the plan is then parsed
    piece by piece, each piece within protobuf's own depth limit (100), which is never relied on being
    lifted here: a plan protobuf would recurse into too deeply never reaches it.
    """
    limits = limits_in_force() if limits is None else limits
    spans = message_depths(data, Plan.DESCRIPTOR, name, Counter(limits, name))
    plan = Plan()
    try:
        merge_pieces(plan, memoryview(data), 0, len(data), spans, name)
    except DecodeError as exc:
        raise PlanError(f"not a Substrait plan: truncated or malformed protobuf ({exc})", name) from None
    return plan


_REL = Rel.DESCRIPTOR


@functools.cache
def _rel_holders(descriptor: Descriptor) -> frozenset[FieldDescriptor]:
    """The fields of a message type whose values can hold a ``substrait.Rel`` (at any depth): the
    walk for relations need not enter types, literals, names... which are most of a plan's messages."""
    return frozenset(fd for fd in descriptor.fields if fd.message_type is not None and _may_hold_rel(fd.message_type))


@functools.cache
def _may_hold_rel(descriptor: Descriptor) -> bool:
    seen: set[str] = set()
    stack = [descriptor]
    while stack:
        d = stack.pop()
        if d is _REL:
            return True
        if d.full_name in seen:
            continue
        seen.add(d.full_name)
        stack.extend(fd.message_type for fd in d.fields if fd.message_type is not None)
    return False


def check_expanded_size(plan: Plan, name: str | None = None) -> int:
    """The number of relations of ``plan`` with its references expanded; a PlanError past
    :data:`MAX_EXPANDED_RELATIONS`. Counted without recursion and without expanding anything
    (a cycle of references is left for :func:`optimizer.dag.to_dag` to name)."""
    local: list[int] = []
    refs: list[list[int]] = []
    for entry in plan.relations:
        kind = entry.WhichOneof("rel_type")
        start = entry.root.input if kind == "root" else entry.rel if kind == "rel" else None
        count, named = 0, []
        stack = [start] if start is not None else []
        while stack:
            message = stack.pop()
            descriptor = message.DESCRIPTOR
            if descriptor is _REL:
                count += 1
                if message.WhichOneof("rel_type") == "reference":
                    named.append(message.reference.subtree_ordinal)
            holders = _rel_holders(descriptor)
            for fd, value in message.ListFields():
                if fd in holders:
                    stack.extend(v for v in (value if fd.is_repeated else [value]) if hasattr(v, "DESCRIPTOR"))
        local.append(count)
        refs.append(named)
    size: dict[int, int] = {}
    total = 0
    for first in range(len(local)):
        stack = [(first, False)]
        on_path: set[int] = set()
        while stack:
            index, done = stack.pop()
            if done:
                on_path.discard(index)
                size[index] = min(local[index] + sum(size.get(r, 0) for r in refs[index] if 0 <= r < len(local)),
                                  MAX_EXPANDED_RELATIONS + 1)
                continue
            if index in size or index in on_path:
                continue
            on_path.add(index)
            stack.append((index, True))
            stack.extend((r, False) for r in refs[index] if 0 <= r < len(local) and r not in size)
        if plan.relations[first].WhichOneof("rel_type") == "root":
            total += size[first]
    if total > MAX_EXPANDED_RELATIONS:
        raise PlanError(f"the plan expands to more than {MAX_EXPANDED_RELATIONS} relations when its references "
                        "are replaced by the subtrees they name (a consumer that does not share subtrees "
                        "works on all of them)", name)
    return total


#: ``plan.version.producer`` of every plan this tool has loaded, and so of every plan it writes: such a
#: plan is in the spec's conventions (its producer's were conformed on loading), and reading it again
#: conforms nothing a second time.
PRODUCER = "substrait-optimizer"


@functools.cache
def _written_version() -> tuple[int, int, int]:
    """The Substrait version of the protobuf bindings: the encoding a loaded plan is upgraded to."""
    from substrait.version import substrait_version

    major, minor, patch = (int(part) for part in substrait_version.split(".")[:3])
    return major, minor, patch


def is_conformed(plan: Plan) -> bool:
    """Whether ``plan`` says it is in the spec's conventions because this tool loaded it."""
    return plan.version.producer == PRODUCER


def mark_conformed(plan: Plan) -> None:
    """Say, in ``plan.version``, that the plan is this tool's reading of its input: the Substrait version
    of the bindings (whose encoding the loader upgraded it to) and :data:`PRODUCER`. A producer's own
    version would make the next reader apply that producer's conventions (DataFusion's grouping-set
    numbering) to a plan that no longer follows them."""
    plan.version.major_number, plan.version.minor_number, plan.version.patch_number = _written_version()
    plan.version.producer = PRODUCER
    plan.version.ClearField("git_hash")


def _conform_producer_quirks(plan: Plan, name: str) -> None:
    """Make known producer quirks explicit, so the plan says what its producer meant.

    DuckDB 1.1.3 (and DataFusion before 2024) write a ``ProjectRel`` without emit meaning "only the
    expressions"; Substrait reads it as "input columns, then expressions". See
    :func:`optimizer.load.producer_quirks.conform_legacy_projects`. DataFusion's simple CASE (an
    ``IfThen`` whose first clause is the operand, without ``then``) becomes the spec's searched CASE: see
    :mod:`optimizer.load.producer_quirks`. DataFusion numbers the output of an aggregate with several grouping
    sets its own way: see :func:`optimizer.load.grouping_sets.conform_grouping_sets`.
    """
    from optimizer.load.grouping_sets import conform_grouping_sets
    from optimizer.load.producer_quirks import conform_legacy_projects, conform_simple_case

    try:
        conform_simple_case(plan)
        conform_grouping_sets(plan)  # before the projects: those above read the aggregates' widths
        conform_legacy_projects(plan)
    except PlanError as exc:
        raise PlanError(exc.message, f"{name}: {exc.path}" if exc.path else name) from None


def load_plan(source: Source, limits: Limits | None = None) -> Plan:
    """Load a plan from a path, ``-`` (stdin), bytes, a JSON string or a file object.

    Plan bytes are held to ``limits`` (:func:`optimizer.load.limits.current` by default: see
    :mod:`optimizer.load.limits`); a ``Plan`` message is the caller's own and is not counted.

    JSON and binary protobuf are told apart by their first byte. Older Substrait encodings are
    upgraded to the current one without losing meaning; anything that cannot be is a
    :class:`~optimizer.errors.PlanError` naming the field and where it is. A ``Plan`` message is
    conformed like a parsed one, on a copy (unless this tool loaded it: :func:`is_conformed`).

    The plan loaded is in the spec's conventions, and its ``version`` says so (:func:`mark_conformed`):
    written and loaded again, it means the same.
    """
    if isinstance(source, Plan):
        if is_conformed(source):
            return source
        copy = Plan()
        copy.CopyFrom(source)
        _upgrade_binary(copy, "<plan>")  # a message parsed by older bindings keeps older fields as unknown
        return _conformed(copy, "<plan>")
    limits = limits_in_force() if limits is None else limits
    data, name = _read_source(source, limits.input_bytes)
    return parse_plan(data, name, limits)


def dump_plan(plan: Plan, format: str = "json") -> bytes:
    """Serialise a plan: ``json`` (camelCase, as the spec's JSON), ``binpb``, or ``text`` (explain tree)."""
    if format == "json":
        where = _first_unknown_field(plan)
        if where is not None:  # JSON would drop them, and the plan would mean another query to its reader
            raise PlanError("the plan holds fields of an older Substrait encoding (written for a consumer that "
                            "reads them, e.g. --target duckdb) that JSON cannot carry: write it as binpb", where)
        return (json_format.MessageToJson(plan, indent=2) + "\n").encode("utf-8")
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
