"""Reading and writing Substrait plans: JSON or binary protobuf, detected automatically.

Older encodings are upgraded losslessly on the way in (see :mod:`optimizer.upgrade`).
"""

from __future__ import annotations

import io
import json
import os
import sys
from pathlib import Path
from typing import IO, Any

from google.protobuf import json_format
from google.protobuf.message import DecodeError
from substrait.proto import Plan

from optimizer.errors import PlanError
from optimizer.upgrade import parse_json_plan, upgrade_binary_plan

FORMATS = ("json", "binpb", "text")


def _allow_deep_messages() -> None:
    """Lift protobuf's nesting limit of 100 for decoding (and for ``CopyFrom``, which decodes).

    A left-deep tree of 30 joins, or a long chain of nested ORs, is deeper than 100 messages: with the
    default limit such a real plan fails to load or to copy ("Error parsing message").
    """
    for module in ("google._upb._message", "google.protobuf.pyext._message"):
        try:
            __import__(module, fromlist=["SetAllowOversizeProtos"]).SetAllowOversizeProtos(True)
            return
        except (ImportError, AttributeError):
            continue


_allow_deep_messages()

Source = str | os.PathLike | bytes | bytearray | IO[Any] | Plan


def _read_source(source: Source) -> tuple[bytes, str]:
    """The raw bytes of a source and a name for messages."""
    if isinstance(source, bytes | bytearray):
        return bytes(source), "<bytes>"
    if isinstance(source, os.PathLike) or (isinstance(source, str) and not source.lstrip().startswith("{")):
        name = os.fspath(source)
        if name == "-":
            return sys.stdin.buffer.read(), "<stdin>"
        try:
            return Path(name).read_bytes(), name
        except FileNotFoundError:
            raise PlanError("no such file", name) from None
        except IsADirectoryError:
            raise PlanError("is a directory, not a plan file", name) from None
        except OSError as exc:
            raise PlanError(f"cannot read: {exc.strerror}", name) from None
    if isinstance(source, str):
        return source.encode("utf-8"), "<string>"
    if hasattr(source, "read"):
        data = source.read()
        return (data.encode("utf-8") if isinstance(data, str) else bytes(data)), getattr(source, "name", "<stream>")
    raise PlanError(f"cannot read a plan from a {type(source).__name__}")


def _looks_like_json(data: bytes) -> bool:
    head = data.lstrip()[:1]
    return head in (b"{", b"[", b'"') or head.isdigit()


def parse_plan(data: bytes, name: str = "<input>") -> Plan:
    """Parse plan bytes (JSON or binary protobuf) and upgrade older encodings."""
    if not data.strip():
        raise PlanError("empty input: no plan", name)
    if _looks_like_json(data):
        try:
            doc = json.loads(data.decode("utf-8"))
        except UnicodeDecodeError:
            raise PlanError("JSON input is not UTF-8", name) from None
        except json.JSONDecodeError as exc:
            raise PlanError(f"invalid JSON at line {exc.lineno} column {exc.colno}: {exc.msg}", name) from None
        try:
            plan = parse_json_plan(doc)
        except PlanError as exc:
            raise PlanError(exc.message, f"{name}: {exc.path}" if exc.path else name) from None
    else:
        plan = Plan()
        try:
            plan.ParseFromString(data)
        except DecodeError as exc:
            raise PlanError(f"not a Substrait plan: truncated or malformed protobuf ({exc})", name) from None
        try:
            upgrade_binary_plan(plan)
        except PlanError as exc:
            raise PlanError(exc.message, f"{name}: {exc.path}" if exc.path else name) from None
        except DecodeError as exc:
            raise PlanError(f"not a Substrait plan: malformed protobuf ({exc})", name) from None
    if not plan.relations:
        raise PlanError("the plan has no relations", name)
    _conform_producer_quirks(plan, name)
    for i, rel in enumerate(plan.relations):
        kind = rel.WhichOneof("rel_type")
        if kind is None:
            raise PlanError("a plan relation is neither a root nor a rel", f"{name}: relations[{i}]")
        if kind == "root" and not rel.root.HasField("input"):
            raise PlanError("the root has no input relation", f"{name}: relations[{i}].root")
    return plan


def _conform_producer_quirks(plan: Plan, name: str) -> None:
    """Make known producer quirks explicit, so the plan says what its producer meant.

    DuckDB 1.1.3 (and DataFusion before 2024) write a ``ProjectRel`` without emit meaning "only the
    expressions"; Substrait reads it as "input columns, then expressions". See
    :func:`optimizer.schema.conform_legacy_projects`. DataFusion's simple CASE (an ``IfThen`` whose first
    clause is the operand, without ``then``) becomes the spec's searched CASE: see
    :mod:`optimizer.producer_quirks`. DataFusion numbers the output of an aggregate with several grouping
    sets its own way: see :func:`optimizer.grouping_sets.conform_grouping_sets`.
    """
    from optimizer.grouping_sets import conform_grouping_sets
    from optimizer.producer_quirks import conform_simple_case
    from optimizer.schema import conform_legacy_projects

    try:
        conform_simple_case(plan)
        conform_grouping_sets(plan)  # before the projects: those above read the aggregates' widths
        conform_legacy_projects(plan)
    except PlanError as exc:
        raise PlanError(exc.message, f"{name}: {exc.path}" if exc.path else name) from None


def load_plan(source: Source) -> Plan:
    """Load a plan from a path, ``-`` (stdin), bytes, a JSON string or a file object.

    JSON and binary protobuf are told apart by their first byte. Older Substrait encodings are
    upgraded to the current one without losing meaning; anything that cannot be is a
    :class:`~optimizer.errors.PlanError` naming the field and where it is.
    """
    if isinstance(source, Plan):
        return source
    data, name = _read_source(source)
    return parse_plan(data, name)


def dump_plan(plan: Plan, format: str = "json") -> bytes:
    """Serialise a plan: ``json`` (camelCase, as the spec's JSON), ``binpb``, or ``text`` (explain tree)."""
    if format == "json":
        return (json_format.MessageToJson(plan, indent=2) + "\n").encode("utf-8")
    if format == "binpb":
        return plan.SerializeToString(deterministic=True)
    if format == "text":
        from optimizer.explain import explain_plan

        return (explain_plan(plan) + "\n").encode("utf-8")
    raise PlanError(f"unknown format '{format}' (choose from {', '.join(FORMATS)})")


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
        Path(dest).write_bytes(data)
        return
    if isinstance(dest, io.TextIOBase):
        dest.write(data.decode("utf-8") if format != "binpb" else data.decode("latin-1"))
    else:
        dest.write(data)
