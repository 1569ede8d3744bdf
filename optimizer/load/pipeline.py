"""The loading pipeline: a source in, a :class:`LoadedPlan` out (the plan, its function table, its schemas).

:func:`load` is the one place that says in which order a plan is loaded; each step is a function below
or in the module that owns it:

1. **read** the source (a path, ``-``, bytes, a JSON string, a file object): at most ``input_bytes``;
2. **parse** it, JSON or binary protobuf as its first byte says, with the **size and depth checks** done
   before any message is built (JSON: the document counted against the limits; binary: one scan of the
   wire format measures the nesting and counts what the plan holds, :mod:`optimizer.load.protobuf_depth`);
3. **upgrade** older encodings (:mod:`optimizer.load.upgrade`: JSON on the document, while parsing; binary
   from the unknown fields protobuf kept);
4. **shape checks** of the parsed plan: relations present, a major Substrait version the bindings read
   (:func:`check_major_version`), the expanded size (:func:`check_expanded_size`);
5. the **function table** built, once: the later steps are handed this one (and declare what they add in
   it), and so is every consumer: the backend and the checker read it, the DAG (whose table the rules and
   the cost model read) and the write stage, which declare functions, take a copy;
6. **producer quirks** (DataFusion's simple CASE, grouping-set numbering: :mod:`optimizer.load.producer_quirks`,
   :mod:`optimizer.load.grouping_sets`) and **legacy conversions** (the projects without emit of DuckDB
   and older DataFusion) made explicit;
7. the plan **marked conformed** (:func:`mark_conformed`) and its roots checked.

A ``Plan`` message goes through the same steps from 3 on, on a copy (the caller's message is left alone),
unless this tool loaded it already (:func:`is_conformed`): then only its table is built.
"""

from __future__ import annotations

import functools
import json
import os
import sys
from dataclasses import dataclass
from typing import IO, TYPE_CHECKING, Any

from google.protobuf.descriptor import Descriptor, FieldDescriptor
from google.protobuf.message import DecodeError
from substrait.proto import Plan, Rel

from optimizer.errors import PlanError, UnsupportedError, read_user_file
from optimizer.expr_utils import has_enum_field, is_rel_type, type_may_hold
from optimizer.load.counts import Counter
from optimizer.load.counts import check_json as count_json
from optimizer.load.functions import FunctionTable
from optimizer.load.grouping_sets import conform_grouping_sets
from optimizer.load.limits import Limits
from optimizer.load.limits import current as limits_in_force
from optimizer.load.producer_quirks import (
    conform_legacy_projects,
    conform_simple_case,
    conform_substring_start,
    conform_two_valued_marks,
)
from optimizer.load.protobuf_depth import merge_pieces, message_depths
from optimizer.load.upgrade import parse_json_plan, upgrade_binary_plan
from optimizer.schema.derivation import plan_functions

if TYPE_CHECKING:
    from optimizer.schema.derivation import Problem
    from optimizer.schema.record import Schema

#: The most relations a plan may have with every ``ReferenceRel`` replaced by the subtree it names.
#: Spark (and any consumer that does not share subtrees) works on the expanded tree: 20 levels of a
#: union of two references to the level below is 2^20 relations, gigabytes and hours.
MAX_EXPANDED_RELATIONS = 100_000

#: ``plan.version.producer`` of every plan this tool has loaded, and so of every plan it writes: such a
#: plan is in the spec's conventions (its producer's were conformed on loading), and reading it again
#: conforms nothing a second time.
PRODUCER = "substrait-optimizer"

Source = str | os.PathLike | bytes | bytearray | IO[Any] | Plan


@dataclass(frozen=True, eq=False)
class LoadedPlan:
    """A plan as :func:`load` leaves it, with what every consumer of it reads: its function table
    (:attr:`functions`, built once) and the schemas of its relations (:attr:`schemas`, derived on first use).

    ``plan`` is not to be changed in place: a consumer that rewrites it works on a copy, with a copy of the
    table (:meth:`FunctionTable.copy`). ``declared`` is the table, or None when the plan's declarations do
    not resolve (``unresolved`` says why: raised by :attr:`functions`, so a plan that is only converted or
    checked still loads). The driver also makes one for the plan its rules wrote, whose table they kept.
    """

    plan: Plan
    declared: FunctionTable | None
    unresolved: PlanError | None = None

    @property
    def functions(self) -> FunctionTable:
        """The plan's function table; the :class:`PlanError` naming the declaration that does not resolve."""
        if self.declared is None:
            assert self.unresolved is not None
            raise PlanError(self.unresolved.message, self.unresolved.path)
        return self.declared

    @functools.cached_property
    def schemas(self) -> dict[str, Schema]:
        """The schema of every relation, keyed by path (:func:`optimizer.schema.plan_schemas`), derived once."""
        from optimizer.schema import plan_schemas

        return plan_schemas(self.plan, self.functions)

    @functools.cached_property
    def problems(self) -> list[Problem]:
        """The plan's problems that are not a producer's quirk (:func:`optimizer.schema.check.check_plan`),
        found once: every command and the driver refuse a plan that has one."""
        from optimizer.schema.check import check_plan

        return [p for p in check_plan(self.plan, self.declared) if not p.quirk]

    def check(self) -> None:
        """Raise the first of :attr:`problems` as a one-line :class:`PlanError` with its path, if any."""
        from optimizer.schema.check import raise_first

        raise_first(self.problems)


def load(source: Source | LoadedPlan, limits: Limits | None = None) -> LoadedPlan:
    """Load a plan (see the module docstring for the steps); a :class:`LoadedPlan` is returned as it is."""
    if isinstance(source, LoadedPlan):
        return source
    if isinstance(source, Plan):
        if is_conformed(source):
            return LoadedPlan(source, *_resolved(source))
        copy = Plan()
        copy.CopyFrom(source)
        upgrade_binary(copy, "<plan>")  # a message parsed by older bindings keeps older fields as unknown
        return conformed(copy, "<plan>")
    limits = limits_in_force() if limits is None else limits
    data, name = read_source(source, limits.input_bytes)
    return load_bytes(data, name, limits)


def load_bytes(data: bytes, name: str = "<input>", limits: Limits | None = None) -> LoadedPlan:
    """Steps 2 to 7 for the bytes of a plan (JSON or binary protobuf) read from ``name``."""
    limits = limits_in_force() if limits is None else limits
    if len(data) > limits.input_bytes:
        raise limits.exceeded("input_bytes", f"the plan is larger than {limits.input_bytes} bytes", name)
    if not data.strip():
        raise PlanError("empty input: no plan", name)
    if _looks_like_json(data):
        return conformed(parse_json(data, name, limits), name)
    try:
        plan = parse_binary(data, name, limits)
        upgrade_binary(plan, name)
        return conformed(plan, name)
    except PlanError:
        from optimizer.load.sql_text import looks_like_sql, sql_instead_of_plan

        if looks_like_sql(data):  # looked at only when the bytes are no plan
            raise sql_instead_of_plan(name) from None
        raise


def conformed(plan: Plan, name: str) -> LoadedPlan:
    """Steps 4 to 7 on a parsed and upgraded plan, in place."""
    if not plan.relations:
        raise PlanError("the plan has no relations", name)
    check_major_version(plan, name)
    check_expanded_size(plan, name)
    check_enum_values(plan, name)
    declared, unresolved = _resolved(plan)
    try:  # keyed by the plan's version: a plan this tool wrote has none
        conform_simple_case(plan, declared)  # producer quirks
        conform_two_valued_marks(plan, declared)
        conform_substring_start(plan, declared)
        conform_grouping_sets(plan)  # before the projects: those above read the aggregates' widths
        conform_legacy_projects(plan, declared)  # legacy conversions
    except PlanError as exc:
        raise PlanError(exc.message, f"{name}: {exc.path}" if exc.path else name) from None
    mark_conformed(plan)
    for i, rel in enumerate(plan.relations):
        kind = rel.WhichOneof("rel_type")
        if kind is None:
            raise PlanError("a plan relation is neither a root nor a rel", f"{name}: relations[{i}]")
        if kind == "root" and not rel.root.HasField("input"):
            raise PlanError("the root has no input relation", f"{name}: relations[{i}].root")
    return LoadedPlan(plan, declared, unresolved)


def _resolved(plan: Plan) -> tuple[FunctionTable | None, PlanError | None]:
    """The plan's function table, or why its declarations do not resolve (raised where it is needed)."""
    try:
        return plan_functions(plan), None
    except PlanError as exc:
        return None, exc


# ---------------------------------------------------------------------------------------- 1. read


def read_source(source: Source, max_bytes: int | None = None) -> tuple[bytes, str]:
    """The raw bytes of a source and a name for messages. Past ``max_bytes`` a file or stream is read
    no further than one byte more (:func:`load_bytes` refuses it)."""
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


# ------------------------------------------------------------------------ 2, 3. parse, checks, upgrade


def _looks_like_json(data: bytes) -> bool:
    # A UTF-8 byte order mark, as Windows tools (PowerShell, .NET) write before JSON text, is not binary.
    text = data.removeprefix(b"\xef\xbb\xbf").lstrip()
    return text[:1] in (b"{", b"[", b'"') or text[:1].isdigit() or text.startswith((b"null", b"true", b"false"))


class _TooLong(Exception):
    """A JSON integer too long for any field (its number of digits)."""


def _json_int(text: str) -> int:
    """A JSON integer; one of more digits than any field holds (a double's largest value has 309) is
    refused before Python converts it (past 4300 digits its conversion fails with a ValueError)."""
    digits = len(text.lstrip("-"))
    if digits > 309:
        raise _TooLong(digits)
    return int(text)


def parse_json(data: bytes, name: str, limits: Limits) -> Plan:
    """A JSON plan: the document counted against ``limits`` before any message is built, then upgraded
    and parsed (:func:`optimizer.load.upgrade.parse_json_plan`)."""
    try:
        doc = json.loads(data.decode("utf-8-sig"), parse_int=_json_int)
    except _TooLong as exc:
        raise PlanError(f"a JSON number of {exc.args[0]} digits (no Substrait field holds one)", name) from None
    except RecursionError:
        raise PlanError("JSON nested too deeply for this tool (Python's recursion limit)", name) from None
    except UnicodeDecodeError:
        raise PlanError("JSON input is not UTF-8", name) from None
    except json.JSONDecodeError as exc:
        raise PlanError(f"invalid JSON at line {exc.lineno} column {exc.colno}: {exc.msg}", name) from None
    count_json(doc, limits, name)
    try:
        return parse_json_plan(doc)
    except RecursionError:
        raise PlanError("JSON nested too deeply for this tool (Python's recursion limit)", name) from None
    except PlanError as exc:
        raise PlanError(exc.message, f"{name}: {exc.path}" if exc.path else name) from None


def parse_binary(data: bytes, name: str = "<input>", limits: Limits | None = None) -> Plan:
    """A binary plan, nested at most :data:`~optimizer.load.protobuf_depth.MAX_PLAN_DEPTH` messages deep;
    anything else is a PlanError.

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


def upgrade_binary(plan: Plan, name: str) -> None:
    """Older encodings in a parsed binary plan (fields today's protos do not know) upgraded in place."""
    try:
        upgrade_binary_plan(plan)
    except PlanError as exc:
        raise PlanError(exc.message, f"{name}: {exc.path}" if exc.path else name) from None
    except DecodeError as exc:
        raise PlanError(f"not a Substrait plan: malformed protobuf ({exc})", name) from None


# ---------------------------------------------------------------------------------- 4. shape checks

_REL = Rel.DESCRIPTOR


@functools.cache
def _rel_holders(descriptor: Descriptor) -> frozenset[FieldDescriptor]:
    """The fields of a message type whose values can hold a ``substrait.Rel`` (at any depth): the
    walk for relations need not enter types, literals, names... which are most of a plan's messages."""
    return frozenset(fd for fd in descriptor.fields
                     if fd.message_type is not None and type_may_hold(fd.message_type, is_rel_type))


def check_enum_values(plan: Plan, name: str | None = None) -> None:
    """A PlanError naming the first enum field of ``plan`` whose value its enum does not define (a binary
    plan keeps any number: ``SetRel.op`` 99 would otherwise reach a rule or an engine, which can only
    guess). Only the fields whose type can hold an enum are entered."""
    stack: list[tuple[Any, Any]] = [(plan, None)]
    while stack:
        message, at = stack.pop()
        for fd, value in message.ListFields():
            if fd.type == fd.TYPE_ENUM:
                for number in value if fd.is_repeated else (value,):
                    if fd.enum_type.values_by_number.get(number) is None:
                        path = _path((fd.name, None), at)
                        raise PlanError(f"{number} is not a value of {fd.enum_type.name}", f"{name}: {path}" if name else path)
            elif fd.type == fd.TYPE_MESSAGE and type_may_hold(fd.message_type, has_enum_field):
                if fd.is_repeated:
                    stack.extend((item, ((fd.name, i), at)) for i, item in enumerate(value))
                else:
                    stack.append((value, ((fd.name, None), at)))


def _path(step: tuple[str, int | None], at: Any) -> str:
    """The dotted path of a field from the (step, parent) chain :func:`check_enum_values` keeps."""
    parts = [step]
    while at is not None:
        parts.append(at[0])
        at = at[1]
    return ".".join(f"{n}[{i}]" if i is not None else n for n, i in reversed(parts))


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


# ------------------------------------------------------------------------------ 7. marked conformed


@functools.cache
def _written_version() -> tuple[int, int, int]:
    """The Substrait version of the protobuf bindings: the encoding a loaded plan is upgraded to."""
    from substrait.version import substrait_version

    major, minor, patch = (int(part) for part in substrait_version.split(".")[:3])
    return major, minor, patch


def check_major_version(plan: Plan, name: str) -> None:
    """An UnsupportedError for a plan of a later major Substrait version than the bindings': a major version
    may change what a plan's fields mean, and the plan would be read (and marked) as one of today's."""
    major = _written_version()[0]
    if plan.version.major_number > major:
        v = plan.version
        raise UnsupportedError(f"a plan of Substrait {v.major_number}.{v.minor_number}.{v.patch_number}: this tool "
                               f"reads the plans of Substrait {major}.x (its bindings: {'.'.join(map(str, _written_version()))})",
                               f"{name}: version")


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
