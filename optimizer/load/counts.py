"""What a plan holds, counted against :class:`optimizer.load.limits.Limits` before its messages are built: in a
parsed JSON document (one pass, no recursion) here, in the protobuf wire format by
:func:`optimizer.load.protobuf_depth.message_depths` with a :class:`Counter`."""

from __future__ import annotations

import functools

from google.protobuf.descriptor import Descriptor
from substrait.proto import AggregateFunction, Expression, Plan, ReadRel, Rel

from optimizer.load.limits import Limits

_REL = Rel.DESCRIPTOR
_EXPRESSION = Expression.DESCRIPTOR
_CALLS = (Expression.ScalarFunction.DESCRIPTOR, AggregateFunction.DESCRIPTOR, Expression.WindowFunction.DESCRIPTOR)
_IN_LISTS = (Expression.SingularOrList.DESCRIPTOR, Expression.MultiOrList.DESCRIPTOR)
_VIRTUAL_TABLE = ReadRel.VirtualTable.DESCRIPTOR

#: Repeated fields whose length is limited: (message, field number) -> the limit. The numbers of fields
#: older encodings had (``args`` of a call, ``values`` of a virtual table) count as their successors do.
COUNTED: dict[tuple[Descriptor, int], str] = {
    **{(d, d.fields_by_name["arguments"].number): "call_arguments" for d in _CALLS},
    (Expression.ScalarFunction.DESCRIPTOR, 2): "call_arguments",
    (AggregateFunction.DESCRIPTOR, 2): "call_arguments",
    (Expression.WindowFunction.DESCRIPTOR, 8): "call_arguments",
    **{(d, d.fields_by_name["options"].number): "call_arguments" for d in _IN_LISTS},
    (_VIRTUAL_TABLE, _VIRTUAL_TABLE.fields_by_name["expressions"].number): "virtual_table_rows",
    (_VIRTUAL_TABLE, 1): "virtual_table_rows",
}

_WHAT = {"call_arguments": "a function call or IN list has more than {n} arguments",
         "virtual_table_rows": "a virtual table has more than {n} rows"}


class Counter:
    """Relations and expression nodes of one plan so far; the first count past its limit raises."""

    __slots__ = ("limits", "name", "relations", "expressions")

    def __init__(self, limits: Limits, name: str) -> None:
        self.limits = limits
        self.name = name
        self.relations = 0
        self.expressions = 0

    def message(self, descriptor: Descriptor) -> None:
        if descriptor is _EXPRESSION:
            self.expressions += 1
            if self.expressions > self.limits.expression_nodes:
                raise self.limits.exceeded("expression_nodes", f"the plan has more than {self.limits.expression_nodes} "
                                           "expression nodes", self.name)
        elif descriptor is _REL:
            self.relations += 1
            if self.relations > self.limits.relations:
                raise self.limits.exceeded("relations", f"the plan has more than {self.limits.relations} relations",
                                           self.name)

    def repeated(self, limit: str, count: int) -> None:
        """``count`` items of one repeated field limited by ``limit``."""
        bound = getattr(self.limits, limit)
        if count > bound:
            raise self.limits.exceeded(limit, _WHAT[limit].format(n=bound), self.name)


@functools.cache
def _json_fields(descriptor: Descriptor) -> dict[str, tuple[Descriptor | None, str | None]]:
    """Per JSON key of a message (its JSON and proto names, and the old names the loader upgrades): the
    message type of the field's values (None for scalars and maps) and the limit on its length."""
    out: dict[str, tuple[Descriptor | None, str | None]] = {}
    for fd in descriptor.fields:
        mt = fd.message_type
        if mt is not None and mt.GetOptions().map_entry:
            mt = None
        entry = (mt, COUNTED.get((descriptor, fd.number)))
        out[fd.json_name] = out[fd.name] = entry
    if descriptor in _CALLS:
        out.setdefault("args", (_EXPRESSION, "call_arguments"))
    if descriptor is _VIRTUAL_TABLE:
        out.setdefault("values", (Expression.Literal.Struct.DESCRIPTOR, "virtual_table_rows"))
    return out


_OPAQUE = frozenset({"google.protobuf.Any", "google.protobuf.Struct", "google.protobuf.Value",
                     "google.protobuf.ListValue"})


def check_json(doc: object, limits: Limits, name: str, descriptor: Descriptor = Plan.DESCRIPTOR) -> Counter:
    """Count a parsed JSON plan against ``limits`` (a PlanError at the first count past one). Keys the
    plan's messages do not have are skipped: the loader names them afterwards."""
    counter = Counter(limits, name)
    stack: list[tuple[object, Descriptor]] = [(doc, descriptor)]
    while stack:
        obj, desc = stack.pop()
        if not isinstance(obj, dict) or desc.full_name in _OPAQUE:
            continue
        counter.message(desc)
        fields = _json_fields(desc)
        for key, value in obj.items():
            entry = fields.get(key)
            if entry is None:
                continue
            mt, limit = entry
            if isinstance(value, list):
                if limit is not None:
                    counter.repeated(limit, len(value))
                if mt is not None:
                    stack.extend((item, mt) for item in value)
            elif mt is not None:
                stack.append((value, mt))
    return counter
