"""Protobuf's depth limit and the plans deeper than it: the nesting depth of a binary message, scanned
without recursion, its decoding in pieces within the limit, and :func:`deep_messages`, which lifts the
limit for copies of messages already checked."""

from __future__ import annotations

import contextlib
import threading

from optimizer.errors import PlanError
from optimizer.load.counts import COUNTED, Counter

#: The deepest nesting of messages a plan may have (a left-deep tree of 100 joins with a projection and a
#: filter per join is about 600 deep). Deeper plans are refused with a PlanError before anything recurses.
MAX_PLAN_DEPTH = 1000

# Protobuf's own decoder (upb) refuses messages nested deeper than 100 unless the limit is lifted for the
# whole process; it stays in place here. A deeper plan is decoded in pieces of at most this depth, each
# piece parsed into the sub-message it belongs to (its depth counts from there).
_PIECE_DEPTH = 90

_deep_lock = threading.Lock()
_deep_users = 0


def _set_oversize(allow: bool) -> None:
    for module in ("google._upb._message", "google.protobuf.pyext._message"):
        try:
            __import__(module, fromlist=["SetAllowOversizeProtos"]).SetAllowOversizeProtos(allow)
            return
        except (ImportError, AttributeError):
            continue


@contextlib.contextmanager
def deep_messages():
    """Within this block (or function, as a decorator), protobuf copies messages deeper than 100.

    Building a message from a deep one (``PlanRel(rel=r)``, ``relations.append(...)``, ``MergeFrom``)
    re-decodes it under protobuf's depth limit of 100, so a left-deep tree of 30 joins could not be
    rebuilt. The optimizer's entry points (the CLI, :meth:`optimizer.driver.Optimizer.run`, :func:`optimizer.dag.from_dag`,
    :meth:`optimizer.spark.SparkBackend.to_dataframe`) lift it while they work on plans that
    :func:`optimizer.plan_io.parse_binary` has checked (at most :data:`MAX_PLAN_DEPTH` deep), and put protobuf's default
    back when the outermost block ends. Nothing else is decoded inside such a block.
    """
    global _deep_users
    with _deep_lock:
        _deep_users += 1
        if _deep_users == 1:
            _set_oversize(True)
    try:
        yield
    finally:
        with _deep_lock:
            _deep_users -= 1
            if _deep_users == 0:
                _set_oversize(False)

def read_varint(data: bytes, pos: int, end: int, name: str) -> tuple[int, int]:
    """The base-128 varint at ``data[pos:end]`` and the position after it; a PlanError naming ``name`` if
    it runs past ``end`` or is longer than protobuf's ten bytes."""
    value = shift = 0
    while True:
        if pos >= end or shift > 63:
            raise PlanError("not a Substrait plan: truncated or malformed protobuf (bad varint)", name)
        byte = data[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return value, pos
        shift += 7


def _fields(data, start: int, end: int, name: str):
    """The fields of one message's bytes: (number, wire type, tag start, value start, value end)."""
    pos = start
    while pos < end:
        tag_start = pos
        tag, pos = read_varint(data, pos, end, name)
        number, wire = tag >> 3, tag & 7
        if wire == 0:
            _, pos = read_varint(data, pos, end, name)
            value_start = pos
        elif wire in (1, 5):
            value_start = pos
            pos += 8 if wire == 1 else 4
        elif wire == 2:
            length, value_start = read_varint(data, pos, end, name)
            pos = value_start + length
        else:  # groups (3, 4) and invalid wire types: a Substrait plan has none
            raise PlanError(f"not a Substrait plan: malformed protobuf (wire type {wire} in field {number})", name)
        if pos > end or number == 0:
            raise PlanError("not a Substrait plan: truncated or malformed protobuf", name)
        yield number, wire, tag_start, value_start, pos


def check_depth(data: bytes, descriptor, name: str) -> int:
    """The nesting depth of ``data`` as a ``descriptor`` message; a PlanError past :data:`MAX_PLAN_DEPTH`."""
    return message_depths(data, descriptor, name)[0]


def message_depths(data: bytes, descriptor, name: str, counter: Counter | None = None) -> dict[int, int]:
    """The depth of every message in ``data`` (by its start offset), scanned without recursion; with a
    ``counter``, the plan's relations, expression nodes and limited repeated fields are counted in the
    same pass (:mod:`optimizer.load.counts`)."""
    depths: dict[int, int] = {}
    # Each frame: the message's start, its field iterator, its descriptor, its deepest child so far, and
    # how many items of a limited repeated field (its COUNTED entry) it holds.
    stack = [[0, _fields(data, 0, len(data), name), descriptor, 0, 0]]
    if counter is not None:
        counter.message(descriptor)
    while stack:
        frame = stack[-1]
        for number, wire, _, value_start, value_end in frame[1]:
            if counter is not None and wire == 2:
                limit = COUNTED.get((frame[2], number))
                if limit is not None:
                    frame[4] += 1
                    counter.repeated(limit, frame[4])
            fd = frame[2].fields_by_number.get(number) if wire == 2 else None
            if fd is not None and fd.type == fd.TYPE_MESSAGE:
                if len(stack) >= MAX_PLAN_DEPTH:
                    raise PlanError(f"plan nested too deeply (more than {MAX_PLAN_DEPTH} messages)", name)
                if counter is not None:
                    counter.message(fd.message_type)
                stack.append([value_start, _fields(data, value_start, value_end, name), fd.message_type, 0, 0])
                break
        else:
            stack.pop()
            depths[frame[0]] = depth = frame[3] + 1
            if stack:
                stack[-1][3] = max(stack[-1][3], depth)
    return depths


def merge_pieces(message, data: memoryview, start: int, end: int, depths: dict[int, int], name: str) -> None:
    """Parse ``data[start:end]`` into ``message``: its shallow fields at once, each deep one on its own."""
    if depths[start] <= _PIECE_DEPTH:
        message.MergeFromString(data[start:end])
        return
    fields = list(_fields(data, start, end, name))
    deep = {number for number, wire, _, vs, _ in fields if wire == 2 and depths.get(vs, 0) >= _PIECE_DEPTH}
    message.MergeFromString(b"".join(data[ts:ve] for number, _, ts, _, ve in fields if number not in deep))
    by_number = message.DESCRIPTOR.fields_by_number
    for number, _, _, value_start, value_end in fields:
        if number not in deep:
            continue
        fd = by_number[number]
        if fd.message_type.GetOptions().map_entry:
            raise PlanError(f"plan nested too deeply in map field '{fd.name}'", name)
        if fd.is_repeated:
            sub = getattr(message, fd.name).add()
        else:
            sub = getattr(message, fd.name)
        merge_pieces(sub, data, value_start, value_end, depths, name)
        if not fd.is_repeated and not message.HasField(fd.name):
            raise PlanError(f"not a Substrait plan: malformed protobuf in field '{fd.name}'", name)
