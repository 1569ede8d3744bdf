"""Join types by name, for every join relation.

``JoinRel``, ``HashJoinRel``, ``MergeJoinRel`` and ``NestedLoopJoinRel`` each have their own
``JoinType`` enum, with the same names but different numbers (``JOIN_TYPE_LEFT_ANTI`` is 6 in
``JoinRel`` and 7 in ``HashJoinRel``), so join types are compared and converted by name.

>>> from substrait.proto import HashJoinRel, JoinRel
>>> join_type_name(JoinRel(type=JoinRel.JOIN_TYPE_LEFT_ANTI))
'LEFT_ANTI'
>>> join_type_value(HashJoinRel, "LEFT_ANTI") == HashJoinRel.JOIN_TYPE_LEFT_ANTI
True
>>> join_type_name(JoinRel()) is None
True
"""

from __future__ import annotations

from google.protobuf.message import Message

_PREFIX = "JOIN_TYPE_"


def join_type_name(body: Message) -> str | None:
    """The join type of a join relation's body without its prefix (``INNER``, ``LEFT_SEMI``...).

    None when it is unspecified or a number its enum does not have.
    """
    enum = body.DESCRIPTOR.fields_by_name["type"].enum_type
    value = enum.values_by_number.get(body.type)
    if value is None or value.number == 0:
        return None
    return value.name.removeprefix(_PREFIX)


def join_type_value(rel_type: type[Message], name: str) -> int:
    """The number of join type ``name`` (as :func:`join_type_name` gives it) in ``rel_type``'s enum."""
    return rel_type.JoinType.Value(_PREFIX + name)
