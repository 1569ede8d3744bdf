"""Lossless upgrade of older Substrait encodings to the current one (substrait-protobuf 0.106).

Real producers still write fields that today's protos no longer have. Parsed strictly they fail;
parsed leniently they vanish, and with them the meaning of the plan (a LIMIT, a group key, the rows
of a VALUES list). Every such field is converted here, from JSON and from binary alike:

=========================================  ====================================================
old field                                   current encoding
=========================================  ====================================================
``Plan.extension_uris``                     ``Plan.extension_urns`` (standard YAML URIs map to
                                            ``extension:io.substrait:<stem>``)
``*.extension_uri_reference``               ``*.extension_urn_reference``
``FetchRel.offset`` / ``count``             ``offset_expr`` / ``count_expr`` (i64 literals;
                                            ``count = -1`` means ALL: no ``count_expr``)
``Grouping.grouping_expressions``           ``AggregateRel.grouping_expressions`` +
                                            ``Grouping.expression_references``
``VirtualTable.values``                     ``VirtualTable.expressions`` (literal structs)
``ScalarFunction/AggregateFunction.args``,  ``arguments`` (``FunctionArgument.value``; an old
``WindowFunction.args``                     ``Expression.enum`` becomes ``FunctionArgument.enum``)
``JOIN_TYPE_SEMI/ANTI/SINGLE``              ``JOIN_TYPE_LEFT_SEMI/LEFT_ANTI/LEFT_SINGLE``
``Type.timestamp/timestamp_tz/time``        ``precision_timestamp[_tz]/precision_time`` (6)
``Literal.timestamp/timestamp_tz/time``     the precision literals with precision 6
``IntervalDayToSecond.microseconds``        ``precision = 6`` + ``subseconds``
``Type.user_defined_type_reference``        ``Type.user_defined.type_reference``
``FileOrFiles.format``                      ``parquet`` (the only format the old enum named)
``HashJoinRel/MergeJoinRel.left_keys`` +    ``keys`` (``ComparisonJoinKey`` pairs compared with
``right_keys`` (removed in 0.98)            ``SIMPLE_COMPARISON_TYPE_EQ``, as the old fields meant)
=========================================  ====================================================

When a plan carries both fields of a pair (producers in transition write both), an empty old repeated
field or an old scalar at its default says nothing and is dropped; otherwise both must say the same
thing, or the plan is rejected naming the place ("... disagree").

Binary plans keep the old fields as unknown fields when parsed; they are read from there. A field
that survives none of this is an error naming it and its place: nothing is silently dropped.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any

from google.protobuf import descriptor as _descriptor
from google.protobuf import json_format, unknown_fields
from google.protobuf.message import DecodeError, Message
from google.protobuf.message_factory import GetMessageClass
from substrait.proto import ComparisonJoinKey, Expression, FunctionArgument, Plan, Type

from optimizer.errors import PlanError
from optimizer.load.functions import NO_EXTENSION, uri_to_urn
from optimizer.load.protobuf_depth import read_varint

_JOIN_RENAMES = {
    "JOIN_TYPE_SEMI": "JOIN_TYPE_LEFT_SEMI",
    "JOIN_TYPE_ANTI": "JOIN_TYPE_LEFT_ANTI",
    "JOIN_TYPE_SINGLE": "JOIN_TYPE_LEFT_SINGLE",
    "JOIN_TYPE_MARK": "JOIN_TYPE_LEFT_MARK",
}
_TYPE_RENAMES = {"timestamp": "precisionTimestamp", "timestampTz": "precisionTimestampTz", "time": "precisionTime"}
_LITERAL_RENAMES = _TYPE_RENAMES


class _Context:
    """What the upgrade of one plan needs to know across messages."""

    def __init__(self) -> None:
        self.uri_anchor_to_urn_anchor: dict[int, int] = {}


# --------------------------------------------------------------------------------------------
# JSON: upgrade the parsed document, walking it alongside the message descriptors.
# --------------------------------------------------------------------------------------------


def _int(value: Any, path: str) -> int:
    try:
        return int(value)
    except (TypeError, ValueError):
        raise PlanError(f"expected an integer, got {value!r}", path) from None


def _json_key(obj: dict, *names: str) -> str | None:
    for name in names:
        if name in obj:
            return name
    return None


def _i64_literal(value: int) -> dict:
    return {"literal": {"i64": str(value)}}


def upgrade_json(doc: Any, descriptor: _descriptor.Descriptor = Plan.DESCRIPTOR) -> dict:
    """Upgrade a JSON plan document (already parsed) in place and return it."""
    if not isinstance(doc, dict):
        raise PlanError(f"a Substrait plan is a JSON object, not {type(doc).__name__}", "<root>")
    ctx = _Context()
    if descriptor is Plan.DESCRIPTOR:
        _upgrade_plan_uris_json(doc, ctx)
    _walk_json(doc, descriptor, "", ctx)
    return doc


def _upgrade_plan_uris_json(doc: dict, ctx: _Context) -> None:
    key = _json_key(doc, "extensionUris", "extension_uris")
    if key is None:
        return
    uris = doc.pop(key)
    if not isinstance(uris, list):
        raise PlanError("extension_uris must be a list", key)
    urns = doc.setdefault("extensionUrns", doc.pop("extension_urns", []))
    used = {_int(u.get("extensionUrnAnchor", u.get("extension_urn_anchor", 0)), "extension_urns") for u in urns}
    by_urn = {u.get("urn"): _int(u.get("extensionUrnAnchor", u.get("extension_urn_anchor", 0)), "") for u in urns}
    for i, entry in enumerate(uris):
        path = f"extension_uris[{i}]"
        if not isinstance(entry, dict):
            raise PlanError("an extension URI must be an object", path)
        unknown = set(entry) - {"extensionUriAnchor", "extension_uri_anchor", "uri"}
        if unknown:
            raise PlanError(f"unknown field '{sorted(unknown)[0]}'", path)
        anchor = _int(entry.get("extensionUriAnchor", entry.get("extension_uri_anchor", 0)), path)
        urn = uri_to_urn(str(entry.get("uri", "")))
        if urn in by_urn:
            ctx.uri_anchor_to_urn_anchor[anchor] = by_urn[urn]
            continue
        new_anchor = anchor if anchor not in used else max(used | {0}) + 1
        used.add(new_anchor)
        by_urn[urn] = new_anchor
        urns.append({"extensionUrnAnchor": new_anchor, "urn": urn})
        ctx.uri_anchor_to_urn_anchor[anchor] = new_anchor


def _fields_by_json(descriptor: _descriptor.Descriptor) -> dict[str, _descriptor.FieldDescriptor]:
    out = {}
    for f in descriptor.fields:
        out[f.json_name] = f
        out[f.name] = f
    return out


def _walk_json(obj: dict, descriptor: _descriptor.Descriptor, path: str, ctx: _Context) -> None:
    if descriptor.full_name in _WELL_KNOWN:
        return
    handler = _JSON_UPGRADES.get(descriptor.full_name)
    if handler is not None:
        handler(obj, path, ctx)
    fields = _fields_by_json(descriptor)
    for key in list(obj):
        field = fields.get(key)
        if field is None:
            raise PlanError(f"unknown field '{key}' (not in {descriptor.full_name}, nor an older encoding)", path or "<root>")
        value = obj[key]
        sub = f"{path}.{field.name}" if path else field.name
        if field.type == field.TYPE_ENUM:
            _check_enum_json(obj, key, field, sub)
            continue
        if field.type != field.TYPE_MESSAGE:
            continue
        msg_desc = field.message_type
        if msg_desc.GetOptions().map_entry:
            value_field = msg_desc.fields_by_name["value"]
            if value_field.type == value_field.TYPE_MESSAGE and isinstance(value, dict):
                for k, v in value.items():
                    if isinstance(v, dict):
                        _walk_json(v, value_field.message_type, f"{sub}[{k!r}]", ctx)
            continue
        if field.label == field.LABEL_REPEATED:
            if not isinstance(value, list):
                raise PlanError(f"expected a list, got {type(value).__name__}", sub)
            for i, item in enumerate(value):
                if isinstance(item, dict):
                    _walk_json(item, msg_desc, f"{sub}[{i}]", ctx)
        elif isinstance(value, dict):
            _walk_json(value, msg_desc, sub, ctx)


_WELL_KNOWN = {"google.protobuf.Any", "google.protobuf.Empty", "google.protobuf.Struct", "google.protobuf.Value"}


def _check_enum_json(obj: dict, key: str, field: _descriptor.FieldDescriptor, path: str) -> None:
    if field.enum_type.full_name.endswith("JoinRel.JoinType"):
        value = obj[key]
        if isinstance(value, str) and value in _JOIN_RENAMES:
            obj[key] = _JOIN_RENAMES[value]


def _rename_uri_reference_json(obj: dict, path: str, ctx: _Context) -> None:
    key = _json_key(obj, "extensionUriReference", "extension_uri_reference")
    if key is None:
        return
    old = _int(obj.pop(key), f"{path}.extension_uri_reference")
    if old == NO_EXTENSION:  # DataFusion: "no extension declared"; keep saying so
        mapped = NO_EXTENSION
    elif old in ctx.uri_anchor_to_urn_anchor:
        mapped = ctx.uri_anchor_to_urn_anchor[old]
    elif old == 0:
        return  # the old field's default says nothing
    else:
        raise PlanError(f"extension_uri_reference {old} names no declared extension URI", path)
    new_key = _json_key(obj, "extensionUrnReference", "extension_urn_reference")
    if new_key is not None and _int(obj[new_key], path) not in (0, mapped):
        raise PlanError("the old 'extension_uri_reference' and the new 'extension_urn_reference' disagree", path)
    if new_key is not None:
        del obj[new_key]
    obj["extensionUrnReference"] = mapped


def _fetch_json(obj: dict, path: str, ctx: _Context) -> None:
    for old, new in (("offset", "offsetExpr"), ("count", "countExpr")):
        if old not in obj:
            continue
        value = _int(obj.pop(old), f"{path}.{old}")
        new_key = _json_key(obj, new, "offset_expr" if old == "offset" else "count_expr")
        if new_key is not None:
            # A transitional producer writes both: 0 is the old field's default (it says nothing);
            # any other value must be the new field's.
            if value != 0 and _normalised(obj[new_key], Expression) != _normalised(_i64_literal(value), Expression):
                raise PlanError(f"the old '{old}' ({value}) and the new '{new}' disagree", path)
            continue
        if old == "count" and value == -1:
            continue  # -1 meant "all records": the new encoding says so by leaving count_expr unset
        if value < 0:
            raise PlanError(f"negative {old} {value}", path)
        obj[new] = _i64_literal(value)


def _aggregate_json(obj: dict, path: str, ctx: _Context) -> None:
    groupings = obj.get("groupings")
    if not isinstance(groupings, list):
        return
    if not any(isinstance(g, dict) and _json_key(g, "groupingExpressions", "grouping_expressions") for g in groupings):
        return
    shared = obj.setdefault("groupingExpressions", obj.pop("grouping_expressions", []))
    for i, grouping in enumerate(groupings):
        key = _json_key(grouping, "groupingExpressions", "grouping_expressions")
        if key is None:
            continue
        existing = grouping.get("expressionReferences", grouping.get("expression_references"))
        if existing and not grouping[key]:
            del grouping[key]  # an empty old list beside the new references says nothing
            continue
        if existing:
            # Producers in transition write both encodings: the old one must say the same.
            old_exprs = grouping.pop(key)
            current = [shared[int(j)] for j in existing if int(j) < len(shared)]
            if [_normalised_expr(e) for e in old_exprs] != [_normalised_expr(e) for e in current]:
                raise PlanError("grouping_expressions and expression_references disagree", f"{path}.groupings[{i}]")
            continue
        refs = []
        for expr in grouping.pop(key):
            # The same key in several grouping sets is one column of the output: share it.
            for j, existing in enumerate(shared):
                if existing == expr:
                    refs.append(j)
                    break
            else:
                shared.append(expr)
                refs.append(len(shared) - 1)
        grouping["expressionReferences"] = refs


def _normalised_expr(doc: Any) -> Any:
    """An expression document in a canonical form (the old and new encodings of it compare equal)."""
    return _normalised(doc, Expression)


def _normalised(doc: Any, message_class: type[Message]) -> Any:
    """A message document in a canonical form (the old and new encodings of it compare equal)."""
    msg = message_class()
    try:
        json_format.ParseDict(upgrade_json(json.loads(json.dumps(doc)), message_class.DESCRIPTOR), msg)
    except (json_format.ParseError, PlanError):
        return doc
    return msg.SerializeToString(deterministic=True)


def _virtual_table_json(obj: dict, path: str, ctx: _Context) -> None:
    if "values" not in obj:
        return
    values = obj.pop("values")
    if not isinstance(values, list):
        raise PlanError("virtual_table.values must be a list", path)
    converted = []
    for i, row in enumerate(values):
        if not isinstance(row, dict):
            raise PlanError("a VALUES row must be an object", f"{path}.values[{i}]")
        converted.append({"fields": [{"literal": lit} for lit in row.get("fields", [])]})
    rows = obj.get("expressions")
    if rows and converted:
        _same_or_fail(converted, rows, Expression.Nested.Struct, "the old 'values' and the new 'expressions' disagree", path)
        return
    if converted:
        obj["expressions"] = converted


def _args_json(obj: dict, path: str, ctx: _Context) -> None:
    if "args" not in obj:
        return
    args = obj.pop("args")
    if not isinstance(args, list):
        raise PlanError("args must be a list", f"{path}.args")
    arguments = []
    for i, arg in enumerate(args):
        if isinstance(arg, dict) and "enum" in arg:
            arguments.append({"enum": _old_enum_value(arg["enum"], f"{path}.args[{i}].enum")})
        else:
            arguments.append({"value": arg})
    current = obj.get("arguments")
    if not args:
        return  # an empty repeated field says nothing (Isthmus wrote "args": [] beside "arguments")
    if current:
        _same_or_fail(arguments, current, FunctionArgument, "the old 'args' and the new 'arguments' disagree", path)
        return
    obj["arguments"] = arguments


def _same_or_fail(old: list, new: list, message_class: type[Message], what: str, path: str) -> None:
    """Both encodings of one repeated field are given: they must say the same thing."""
    if [_normalised(d, message_class) for d in old] != [_normalised(d, message_class) for d in new]:
        raise PlanError(what, path)


def _old_enum_value(value: Any, path: str) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, dict) and "specified" in value:
        return str(value["specified"])
    raise PlanError("an unspecified enum argument has no current encoding", path)


def _function_argument_json(obj: dict, path: str, ctx: _Context) -> None:
    if isinstance(obj.get("enum"), dict):
        obj["enum"] = _old_enum_value(obj["enum"], f"{path}.enum")


def _expression_json(obj: dict, path: str, ctx: _Context) -> None:
    if "enum" in obj:
        raise PlanError("an enum expression outside a function's arguments has no current encoding", path)


def _rename_precision(obj: dict, renames: dict[str, str], path: str, literal: bool) -> None:
    for old, new in renames.items():
        snake = {"timestampTz": "timestamp_tz"}.get(old, old)
        key = _json_key(obj, old, snake)
        if key is None:
            continue
        value = obj.pop(key)
        if literal:
            converted: Any = {"precision": 6, "value": str(_int(value, f"{path}.{key}"))}
        else:
            converted = dict(value) if isinstance(value, dict) else {}
            converted["precision"] = 6
        if new in obj:
            # Both encodings given: they must say the same thing.
            descriptor = Expression.Literal if literal else Type
            sub = GetMessageClass(descriptor.DESCRIPTOR.fields_by_camelcase_name[new].message_type)
            if _normalised(obj[new], sub) != _normalised(converted, sub):
                raise PlanError(f"the old '{key}' and the new '{new}' disagree", path)
            continue
        obj[new] = converted


def _type_json(obj: dict, path: str, ctx: _Context) -> None:
    _rename_precision(obj, _TYPE_RENAMES, path, literal=False)
    key = _json_key(obj, "userDefinedTypeReference", "user_defined_type_reference")
    if key is not None:
        obj["userDefined"] = {"typeReference": _int(obj.pop(key), path), "nullability": "NULLABILITY_NULLABLE"}


def _literal_json(obj: dict, path: str, ctx: _Context) -> None:
    _rename_precision(obj, _LITERAL_RENAMES, path, literal=True)


def _interval_day_json(obj: dict, path: str, ctx: _Context) -> None:
    if "microseconds" in obj:
        micros = _int(obj.pop("microseconds"), f"{path}.microseconds")
        if "subseconds" in obj or "precision" in obj:
            # Both encodings given: the same fraction of a second, or a disagreement.
            precision = _int(obj.get("precision", 0), f"{path}.precision")
            subseconds = _int(obj.get("subseconds", 0), f"{path}.subseconds")
            if micros != 0 and (precision > 18 or subseconds * 10 ** 6 != micros * 10 ** precision):
                raise PlanError("the old 'microseconds' and the new 'subseconds' disagree", path)
            return
        obj["precision"] = 6
        obj["subseconds"] = str(micros)


def _file_json(obj: dict, path: str, ctx: _Context) -> None:
    if "format" in obj:
        fmt = obj.pop("format")
        if fmt in ("FILE_FORMAT_PARQUET", 1):
            obj["parquet"] = {}
        elif fmt not in ("FILE_FORMAT_UNSPECIFIED", 0):
            raise PlanError(f"unknown file format {fmt!r}", f"{path}.format")


def _join_keys_json(obj: dict, path: str, ctx: _Context) -> None:
    left_key = _json_key(obj, "leftKeys", "left_keys")
    right_key = _json_key(obj, "rightKeys", "right_keys")
    if left_key is None and right_key is None:
        return
    left = obj.pop(left_key) if left_key else []
    right = obj.pop(right_key) if right_key else []
    if not isinstance(left, list) or not isinstance(right, list):
        raise PlanError("left_keys and right_keys must be lists", path)
    if len(left) != len(right):
        raise PlanError(f"{len(left)} left_keys but {len(right)} right_keys", path)
    if not left:
        return  # empty old lists say nothing
    keys = [{"left": lk, "right": rk, "comparison": {"simple": "SIMPLE_COMPARISON_TYPE_EQ"}}
            for lk, rk in zip(left, right, strict=True)]
    current = obj.get("keys")
    if current:
        _same_or_fail(keys, current, ComparisonJoinKey, "the old 'left_keys'/'right_keys' and the new 'keys' disagree", path)
        return
    obj["keys"] = keys


_JSON_UPGRADES: dict[str, Callable[[dict, str, _Context], None]] = {
    "substrait.HashJoinRel": _join_keys_json,
    "substrait.MergeJoinRel": _join_keys_json,
    "substrait.extensions.SimpleExtensionDeclaration.ExtensionFunction": _rename_uri_reference_json,
    "substrait.extensions.SimpleExtensionDeclaration.ExtensionType": _rename_uri_reference_json,
    "substrait.extensions.SimpleExtensionDeclaration.ExtensionTypeVariation": _rename_uri_reference_json,
    "substrait.FetchRel": _fetch_json,
    "substrait.AggregateRel": _aggregate_json,
    "substrait.ReadRel.VirtualTable": _virtual_table_json,
    "substrait.Expression.ScalarFunction": _args_json,
    "substrait.AggregateFunction": _args_json,
    "substrait.Expression.WindowFunction": _args_json,
    "substrait.FunctionArgument": _function_argument_json,
    "substrait.Expression": _expression_json,
    "substrait.Type": _type_json,
    "substrait.Expression.Literal": _literal_json,
    "substrait.Expression.Literal.IntervalDayToSecond": _interval_day_json,
    "substrait.ReadRel.LocalFiles.FileOrFiles": _file_json,
}


def parse_json_plan(doc: Any) -> Plan:
    """Upgrade a parsed JSON document and build the Plan (strictly: no unknown field survives)."""
    plan = Plan()
    try:
        upgrade_json(doc)
        # protobuf's default of 100 levels refuses real plans (30 joins left-deep, long OR chains).
        try:
            json_format.ParseDict(doc, plan, ignore_unknown_fields=False, max_recursion_depth=JSON_MAX_DEPTH)
        except json_format.ParseError as exc:
            if "Float value too" not in str(exc) or not _clamp_float32(doc, Plan.DESCRIPTOR):
                raise
            plan = Plan()
            json_format.ParseDict(doc, plan, ignore_unknown_fields=False, max_recursion_depth=JSON_MAX_DEPTH)
    except json_format.ParseError as exc:
        path, message = _json_error_place(str(exc))
        located = _locate_json_error(doc, Plan.DESCRIPTOR, "", [200])
        raise PlanError(f"not a valid Substrait plan: {_short(message).rstrip('.')}", located or path) from None
    except (TypeError, ValueError, AttributeError) as exc:  # protobuf's JSON parser leaks a few of these
        raise PlanError(f"not a valid Substrait plan: {_short(str(exc))}", "<root>") from None
    except RecursionError:
        raise PlanError("the plan is nested too deeply to read (Python's recursion limit)", "<root>") from None
    return plan


_FLOAT32_MAX = 3.4028234663852886e38
#: protobuf writes FLT_MAX as 3.4028235e+38 (the shortest text that reads back as FLT_MAX in float32),
#: then refuses to read that text back ("Float value too large": it compares as a double).
_FLOAT32_PRINTED_MAX = 3.4028235e38


def _clamp_float32(doc: Any, descriptor) -> bool:
    """Set every float (fp32) field of the JSON ``doc`` written as +-3.4028235e38 to +-FLT_MAX, walking
    it with the message ``descriptor``; True if any was changed. Other out-of-range values stay (an error)."""
    changed = False
    if not isinstance(doc, dict):
        return False
    fields = {f.json_name: f for f in descriptor.fields}
    fields.update({f.name: f for f in descriptor.fields})
    for key, value in doc.items():
        field = fields.get(key)
        if field is None:
            continue
        values = value if isinstance(value, list) else [value]
        if field.cpp_type == field.CPPTYPE_MESSAGE and field.message_type.GetOptions().map_entry:
            value_field = field.message_type.fields_by_name["value"]
            if value_field.cpp_type == value_field.CPPTYPE_MESSAGE and isinstance(value, dict):
                for item in value.values():
                    changed |= _clamp_float32(item, value_field.message_type)
        elif field.cpp_type == field.CPPTYPE_MESSAGE:
            for item in values:
                changed |= _clamp_float32(item, field.message_type)
        elif field.cpp_type == field.CPPTYPE_FLOAT:
            fixed = [(_FLOAT32_MAX if v > 0 else -_FLOAT32_MAX)
                     if isinstance(v, int | float) and _FLOAT32_MAX < abs(v) <= _FLOAT32_PRINTED_MAX else v
                     for v in values]
            if fixed != values:
                doc[key] = fixed if isinstance(value, list) else fixed[0]
                changed = True
    return changed


#: How deeply nested a JSON plan may be (messages within messages).
JSON_MAX_DEPTH = 2000

_FAILED_FIELD = re.compile(r"Failed to parse (\w+) field: ")


def _json_error_place(text: str) -> tuple[str, str]:
    """protobuf's "Failed to parse relations field: Failed to parse input field: ... reason" as
    (``relations.input...``, ``reason``); a long path keeps its two ends.

    >>> _json_error_place("Failed to parse relations field: Failed to parse root field: bad")
    ('relations.root', 'bad')
    """
    names: list[str] = []
    pos = 0
    while (m := _FAILED_FIELD.match(text, pos)) is not None:
        names.append(m.group(1))
        pos = m.end()
    if not names:
        return "<root>", text
    if len(names) > 10:
        names = [*names[:3], f"...({len(names) - 7} more)...", *names[-4:]]
    return ".".join(names), text[pos:]


def _locate_json_error(doc: Any, descriptor, path: str, budget: list[int]) -> str | None:
    """The path, indices and oneof names included, of the first value in ``doc`` protobuf's JSON reader
    refuses as a ``descriptor`` message (its own message names fields without their indices): each field
    of ``doc`` is read alone, and the first that fails is searched the same way. ``budget``: the reads
    still allowed (a huge document is not read again and again); None when it runs out."""
    if not isinstance(doc, dict):
        return path or None
    cls = GetMessageClass(descriptor)
    for key, value in doc.items():
        field = descriptor.fields_by_camelcase_name.get(key) or descriptor.fields_by_name.get(key)
        here = f"{path}.{field.name if field else key}" if path else (field.name if field else key)
        if field is None:
            return here
        if budget[0] <= 0:
            return None
        budget[0] -= 1
        try:
            json_format.ParseDict({key: value}, cls(), max_recursion_depth=JSON_MAX_DEPTH)
            continue
        except (json_format.ParseError, TypeError, ValueError, AttributeError):
            pass
        if field.message_type is None or field.message_type.GetOptions().map_entry:
            return here
        if field.message_type.full_name.startswith("google.protobuf."):
            return here
        if isinstance(value, list):
            for i, item in enumerate(value):
                if budget[0] <= 0:
                    return None
                budget[0] -= 1
                try:
                    json_format.ParseDict({key: [item]}, cls(), max_recursion_depth=JSON_MAX_DEPTH)
                except (json_format.ParseError, TypeError, ValueError, AttributeError):
                    return _locate_json_error(item, field.message_type, f"{here}[{i}]", budget) or f"{here}[{i}]"
            return here
        return _locate_json_error(value, field.message_type, here, budget) or here
    return path or None


def _short(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) < 300 else text[:297] + "..."


# --------------------------------------------------------------------------------------------
# Binary: old fields arrive as unknown fields; decode them from the wire format.
# --------------------------------------------------------------------------------------------


def _wire_fields(data: bytes) -> list[tuple[int, int, Any]]:
    """Decode one message's fields: (number, wire type, value) with value int or bytes."""
    out = []
    pos = 0
    while pos < len(data):
        key, pos = read_varint(data, pos, len(data), "")
        number, wire = key >> 3, key & 7
        if wire == 0:
            value, pos = read_varint(data, pos, len(data), "")
        elif wire == 2:
            length, pos = read_varint(data, pos, len(data), "")
            value = data[pos : pos + length]
            if len(value) != length:
                raise DecodeError("truncated field")
            pos += length
        elif wire == 1:
            value, pos = int.from_bytes(data[pos : pos + 8], "little"), pos + 8
        elif wire == 5:
            value, pos = int.from_bytes(data[pos : pos + 4], "little"), pos + 4
        else:
            raise DecodeError(f"unsupported wire type {wire}")
        out.append((number, wire, value))
    return out


def _signed64(value: int) -> int:
    if not isinstance(value, int):  # an old varint field written with another wire type
        raise PlanError(f"malformed old integer field (wire data {bytes(value)[:16]!r}, expected a varint)")
    return value - (1 << 64) if value >= 1 << 63 else value


def _unknown(msg: Message) -> list[tuple[int, int, Any]]:
    return [(f.field_number, f.wire_type, f.data) for f in unknown_fields.UnknownFieldSet(msg)]


def upgrade_binary(plan: Plan) -> Plan:
    """Convert old fields kept as unknown fields of a parsed binary plan, in place."""
    ctx = _Context()
    uris = [v for n, w, v in _unknown(plan) if n == 1 and w == 2]
    if uris:
        used = {u.extension_urn_anchor for u in plan.extension_urns}
        by_urn = {u.urn: u.extension_urn_anchor for u in plan.extension_urns}
        for raw in uris:
            fields = {n: v for n, _, v in _wire_fields(raw)}
            anchor = int(fields.get(1, 0))
            urn = uri_to_urn(bytes(fields.get(2, b"")).decode("utf-8", "replace"))
            if urn not in by_urn:
                new_anchor = anchor if anchor not in used else max(used | {0}) + 1
                used.add(new_anchor)
                by_urn[urn] = new_anchor
                plan.extension_urns.add(extension_urn_anchor=new_anchor, urn=urn)
            ctx.uri_anchor_to_urn_anchor[anchor] = by_urn[urn]
    _walk_binary(plan, "", ctx, top=True)
    return plan


def _walk_binary(msg: Message, path: str, ctx: _Context, top: bool = False) -> None:
    # Children first: DiscardUnknownFields below is recursive.
    for field, value in msg.ListFields():
        if field.type != field.TYPE_MESSAGE:
            continue
        sub = f"{path}.{field.name}" if path else field.name
        if field.message_type.GetOptions().map_entry:
            for k in value:
                if isinstance(value[k], Message):
                    _walk_binary(value[k], f"{sub}[{k!r}]", ctx)
        elif field.label == field.LABEL_REPEATED:
            for i, item in enumerate(value):
                _walk_binary(item, f"{sub}[{i}]", ctx)
        else:
            _walk_binary(value, sub, ctx)
    unknown = _unknown(msg)
    if not unknown:
        return
    name = msg.DESCRIPTOR.full_name
    handler = _BINARY_UPGRADES.get(name)
    handled: set[int] = set()
    if top and name == "substrait.Plan":
        handled.add(1)
    if handler is not None:
        handled |= handler(msg, unknown, path, ctx)
    for number, _, _ in unknown:
        if number not in handled:
            raise PlanError(
                f"unknown field number {number} (not in {name}, nor an older encoding)", path or "<root>"
            )
    msg.DiscardUnknownFields()


def _parse_upgraded(cls: type[Message], raw: bytes, path: str, ctx: _Context) -> Message:
    from optimizer.load.protobuf_depth import check_depth

    check_depth(raw, cls.DESCRIPTOR, path)  # protobuf's own limit may be lifted (protobuf_depth.deep_messages)
    sub = cls()
    try:
        sub.ParseFromString(raw)
    except DecodeError as exc:
        raise PlanError(f"malformed {cls.DESCRIPTOR.name} in an old field: {exc}", path) from None
    _walk_binary(sub, path, ctx)
    return sub


def _uri_reference_bin(msg, unknown, path, ctx) -> set[int]:
    done = set()
    for number, _, value in unknown:
        if number == 1:
            if value == NO_EXTENSION:
                mapped = NO_EXTENSION
            elif value in ctx.uri_anchor_to_urn_anchor:
                mapped = ctx.uri_anchor_to_urn_anchor[value]
            else:
                raise PlanError(f"extension_uri_reference {value} names no declared extension URI", path)
            if msg.extension_urn_reference not in (0, mapped):
                raise PlanError("the old 'extension_uri_reference' and the new 'extension_urn_reference' disagree", path)
            msg.extension_urn_reference = mapped
            done.add(1)
    return done


def _fetch_bin(msg, unknown, path, ctx) -> set[int]:
    done = set()
    for number, wire, value in unknown:
        if number not in (3, 4):
            continue
        if wire != 0:
            raise PlanError(f"old field {'offset' if number == 3 else 'count'} is not an integer (wire type {wire})", path)
        done.add(number)
        value = _signed64(value)
        if number == 4 and value == -1:
            continue
        name = "offset" if number == 3 else "count"
        if msg.HasField(f"{name}_expr"):
            # A transitional producer writes both: the old field must say the same.
            expr = getattr(msg, f"{name}_expr")
            if value != 0 and (expr.literal.WhichOneof("literal_type") not in ("i64", "i32", "i16", "i8")
                               or getattr(expr.literal, expr.literal.WhichOneof("literal_type")) != value):
                raise PlanError(f"the old '{name}' ({value}) and the new '{name}_expr' disagree", path)
            continue
        if value < 0:
            raise PlanError(f"negative {name} {value}", path)
        target = msg.offset_expr if number == 3 else msg.count_expr
        target.literal.i64 = value
    return done


def _upgrade_aggregate_groupings(agg, path: str, ctx: _Context) -> None:
    for i, grouping in enumerate(agg.groupings):
        old = [v for n, w, v in _unknown(grouping) if n == 1 and w == 2]
        others = [n for n, _, _ in _unknown(grouping) if n != 1]
        if others:
            raise PlanError(f"unknown field number {others[0]} (not in substrait.AggregateRel.Grouping)", f"{path}.groupings[{i}]")
        if not old:
            continue
        exprs = [_parse_upgraded(Expression, raw, f"{path}.groupings[{i}].grouping_expressions", ctx) for raw in old]
        if len(grouping.expression_references):
            # Producers in transition (DataFusion) write both encodings: the old one must say the same.
            current = [agg.grouping_expressions[j] for j in grouping.expression_references
                       if j < len(agg.grouping_expressions)]
            if current != exprs:
                raise PlanError("grouping_expressions and expression_references disagree", f"{path}.groupings[{i}]")
            grouping.DiscardUnknownFields()
            continue
        for expr in exprs:
            for j, existing in enumerate(agg.grouping_expressions):
                if existing == expr:
                    grouping.expression_references.append(j)
                    break
            else:
                agg.grouping_expressions.append(expr)
                grouping.expression_references.append(len(agg.grouping_expressions) - 1)
        grouping.DiscardUnknownFields()


def _virtual_table_bin(msg, unknown, path, ctx) -> set[int]:
    done = set()
    current = list(msg.expressions)
    if any(n == 1 and w == 2 for n, w, _ in unknown):
        del msg.expressions[:]
    for number, wire, value in unknown:
        if number != 1 or wire != 2:
            continue
        done.add(1)
        row = msg.expressions.add()
        for n, w, lit in _wire_fields(value):
            if n != 1 or w != 2:
                raise PlanError(f"unknown field number {n} in an old VALUES row", f"{path}.values")
            literal = _parse_upgraded(Expression.Literal, lit, f"{path}.values", ctx)
            row.fields.add().literal.CopyFrom(literal)
    if current and current != list(msg.expressions):
        raise PlanError("the old 'values' and the new 'expressions' disagree", path)
    return done


def _args_bin(number: int):
    def handler(msg, unknown, path, ctx) -> set[int]:
        olds = [v for n, w, v in unknown if n == number and w == 2]
        if not olds:
            return set()
        current = list(msg.arguments)
        del msg.arguments[:]
        for i, raw in enumerate(olds):
            fields = _wire_fields(raw)
            enum = [v for n, w, v in fields if n == 10 and w == 2]
            if enum:
                spec = {n: v for n, _, v in _wire_fields(enum[0])}
                if 1 not in spec:
                    raise PlanError("an unspecified enum argument has no current encoding", f"{path}.args[{i}]")
                msg.arguments.add().enum = bytes(spec[1]).decode("utf-8")
            else:
                expr = _parse_upgraded(Expression, raw, f"{path}.args[{i}]", ctx)
                msg.arguments.add().value.CopyFrom(expr)
        if current and current != list(msg.arguments):
            raise PlanError("the old 'args' and the new 'arguments' disagree", path)
        return {number}

    return handler


def _simple_type_fields(raw: bytes) -> tuple[int, int]:
    fields = {n: v for n, _, v in _wire_fields(raw)}
    return int(fields.get(1, 0)), int(fields.get(2, 0))  # type_variation_reference, nullability


def _type_bin(msg, unknown, path, ctx) -> set[int]:
    done = set()
    for number, wire, value in unknown:
        if number in (14, 29, 17) and wire == 2:
            variation, nullability = _simple_type_fields(value)
            target = {14: msg.precision_timestamp, 29: msg.precision_timestamp_tz, 17: msg.precision_time}[number]
            target.precision = 6
            target.type_variation_reference = variation
            target.nullability = nullability
            done.add(number)
        elif number == 31 and wire == 0:
            msg.user_defined.type_reference = value
            msg.user_defined.nullability = 1
            done.add(number)
    return done


def _literal_bin(msg, unknown, path, ctx) -> set[int]:
    done = set()
    for number, wire, value in unknown:
        if number in (14, 27, 17) and wire == 0:
            target = {14: msg.precision_timestamp, 27: msg.precision_timestamp_tz, 17: msg.precision_time}[number]
            target.precision = 6
            target.value = _signed64(value)
            done.add(number)
    return done


def _interval_day_bin(msg, unknown, path, ctx) -> set[int]:
    for number, wire, value in unknown:
        if number == 3 and wire == 0:
            msg.precision = 6
            msg.subseconds = _signed64(value) if value >= 1 << 63 else (value - (1 << 32) if value >= 1 << 31 else value)
            return {3}
    return set()


def _file_bin(msg, unknown, path, ctx) -> set[int]:
    for number, wire, value in unknown:
        if number == 5 and wire == 0:
            if value == 1:
                msg.parquet.SetInParent()
            elif value != 0:
                raise PlanError(f"unknown file format {value}", f"{path}.format")
            return {5}
    return set()


def _join_keys_bin(msg, unknown, path, ctx) -> set[int]:
    left = [v for n, w, v in unknown if n == 4 and w == 2]
    right = [v for n, w, v in unknown if n == 5 and w == 2]
    if not left and not right:
        return set()
    if len(left) != len(right):
        raise PlanError(f"{len(left)} left_keys but {len(right)} right_keys", path)
    keys = []
    for i, (lraw, rraw) in enumerate(zip(left, right, strict=True)):
        key = ComparisonJoinKey(comparison=ComparisonJoinKey.ComparisonType(
            simple=ComparisonJoinKey.SIMPLE_COMPARISON_TYPE_EQ))
        key.left.CopyFrom(_parse_upgraded(Expression.FieldReference, lraw, f"{path}.left_keys[{i}]", ctx))
        key.right.CopyFrom(_parse_upgraded(Expression.FieldReference, rraw, f"{path}.right_keys[{i}]", ctx))
        keys.append(key)
    if len(msg.keys):
        if list(msg.keys) != keys:
            raise PlanError("the old 'left_keys'/'right_keys' and the new 'keys' disagree", path)
    else:
        msg.keys.extend(keys)
    return {4, 5}


_BINARY_UPGRADES: dict[str, Callable[..., set[int]]] = {
    "substrait.HashJoinRel": _join_keys_bin,
    "substrait.MergeJoinRel": _join_keys_bin,
    "substrait.extensions.SimpleExtensionDeclaration.ExtensionFunction": _uri_reference_bin,
    "substrait.extensions.SimpleExtensionDeclaration.ExtensionType": _uri_reference_bin,
    "substrait.extensions.SimpleExtensionDeclaration.ExtensionTypeVariation": _uri_reference_bin,
    "substrait.FetchRel": _fetch_bin,
    "substrait.ReadRel.VirtualTable": _virtual_table_bin,
    "substrait.Expression.ScalarFunction": _args_bin(2),
    "substrait.AggregateFunction": _args_bin(2),
    "substrait.Expression.WindowFunction": _args_bin(8),
    "substrait.Type": _type_bin,
    "substrait.Expression.Literal": _literal_bin,
    "substrait.Expression.Literal.IntervalDayToSecond": _interval_day_bin,
    "substrait.ReadRel.LocalFiles.FileOrFiles": _file_bin,
}


def _pre_aggregate(msg: Message, path: str, ctx: _Context) -> None:
    """Groupings must be moved before the generic walk discards a Grouping's unknown fields."""
    for field, value in msg.ListFields():
        if field.type != field.TYPE_MESSAGE:
            continue
        sub = f"{path}.{field.name}" if path else field.name
        if field.message_type.GetOptions().map_entry:
            continue
        items = list(enumerate(value)) if field.label == field.LABEL_REPEATED else [(None, value)]
        for i, item in items:
            _pre_aggregate(item, f"{sub}[{i}]" if i is not None else sub, ctx)
    if msg.DESCRIPTOR.full_name == "substrait.AggregateRel":
        _upgrade_aggregate_groupings(msg, path, ctx)


def upgrade_binary_plan(plan: Plan) -> Plan:
    """Full binary upgrade: groupings first (they move across messages), then the rest."""
    ctx = _Context()
    _pre_aggregate(plan, "", ctx)
    return upgrade_binary(plan)
