"""Substrait types: build them, read their nullability, print them (the one type printer: schemas,
check_plan's messages and explain's tree all print through :func:`type_name`)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from substrait.proto import Type

NULLABLE = Type.NULLABILITY_NULLABLE
REQUIRED = Type.NULLABILITY_REQUIRED


def type_kind(t: Type | None) -> str | None:
    """The ``Type.kind`` oneof name (``"i64"``, ``"decimal"``, ...), None for no, an unknown or an empty type."""
    return t.WhichOneof("kind") if t is not None else None


def _has_nullability(sub) -> bool:
    return "nullability" in sub.DESCRIPTOR.fields_by_name


def nullability(t: Type | None) -> int:
    """The ``Type.Nullability`` of a type (UNSPECIFIED for no or an empty type)."""
    kind = type_kind(t)
    if kind is None:
        return Type.NULLABILITY_UNSPECIFIED
    sub = getattr(t, kind)
    return sub.nullability if _has_nullability(sub) else Type.NULLABILITY_UNSPECIFIED


def is_nullable(t: Type | None) -> bool:
    """True unless the type is declared required (an unspecified nullability or type counts as nullable)."""
    return nullability(t) != REQUIRED


def with_nullability(t: Type, value: int | bool) -> Type:
    """A copy of ``t`` with top-level nullability ``value`` (a ``Type.Nullability`` or a bool: nullable?).

    >>> type_name(with_nullability(make_type("i32"), True))
    'i32?'
    """
    if isinstance(value, bool):
        value = NULLABLE if value else REQUIRED
    out = Type()
    out.CopyFrom(t)
    kind = type_kind(out)
    if kind is not None:
        sub = getattr(out, kind)
        if _has_nullability(sub):
            sub.nullability = value
    return out


def make_type(kind: str, nullable: bool = False, **fields: Any) -> Type:
    """Build a ``Type`` of oneof ``kind`` (``"i64"``, ``"decimal"``, ``"bool"``...).

    >>> type_name(make_type("decimal", precision=15, scale=2, nullable=True))
    'decimal<15,2>?'
    """
    t = Type()
    sub = getattr(t, kind)
    sub.SetInParent()
    for name, value in fields.items():
        target = getattr(sub, name)
        if isinstance(value, Type) or hasattr(value, "DESCRIPTOR"):
            target.CopyFrom(value)
        elif isinstance(value, list):
            for item in value:
                target.add().CopyFrom(item)
        else:
            setattr(sub, name, value)
    if _has_nullability(sub):
        sub.nullability = NULLABLE if nullable else REQUIRED
    return t


def struct_type(types: Sequence[Type], nullable: bool = False) -> Type:
    """A struct ``Type`` of ``types``."""
    t = Type()
    t.struct.SetInParent()
    for item in types:
        t.struct.types.add().CopyFrom(item)
    t.struct.nullability = NULLABLE if nullable else REQUIRED
    return t


#: Groups of ``Type.kind`` names: what reader capability profiles match (``optimizer.capabilities``) and what
#: ``optimizer.schema.calls`` compares the values of one expression by.
TYPE_GROUPS: dict[str, frozenset[str]] = {
    "integer": frozenset({"i8", "i16", "i32", "i64"}),
    "float": frozenset({"fp32", "fp64"}),
    "numeric": frozenset({"i8", "i16", "i32", "i64", "fp32", "fp64", "decimal"}),
    "text": frozenset({"string", "varchar", "fixed_char"}),
    "temporal": frozenset({"date", "time", "timestamp", "timestamp_tz", "precision_time", "precision_timestamp",
                           "precision_timestamp_tz"}),
    "boolean": frozenset({"bool"}),
    "binary": frozenset({"binary", "fixed_binary"}),
    "interval": frozenset({"interval_year", "interval_day", "interval_compound"}),
}


UNKNOWN = Type()  # placeholder for a type that could not be derived (check_plan only)


def is_known(t: Type) -> bool:
    """False for an empty ``Type()`` (:data:`UNKNOWN`: a type that could not be derived)."""
    return type_kind(t) is not None


#: The spec's names of the kinds whose ``Type.kind`` oneof name differs.
_TYPE_NAMES = {
    "bool": "boolean",
    "fixed_char": "fixedchar",
    "fixed_binary": "fixedbinary",
}


def type_name(t: Type, with_nullability: bool = True, *, explain: bool = False) -> str:
    """A short readable name: ``i64``, ``string?``, ``decimal<15,2>``, ``struct<i64, list<fp64?>>``.

    ``explain=True`` gives the notation of explain's tree, which is read beside SQL: parameters in
    parentheses as SQL writes them (``decimal(15,2)``, ``varchar(10)``, ``precision_timestamp(6)``), the
    kinds by their proto names (``fixed_char``), ``?`` for an unknown type, and none of the parameters SQL
    has no syntax for (interval precisions, function signatures, user-defined type references).

    >>> type_name(make_type("struct", types=[make_type("i64"), make_type("string", nullable=True)]))
    'struct<i64, string?>'
    >>> t = make_type("list", type=make_type("decimal", precision=15, scale=2, nullable=True))
    >>> type_name(t), type_name(t, explain=True), type_name(UNKNOWN, explain=True)
    ('list<decimal<15,2>?>', 'list<decimal(15,2)?>', '?')
    """
    kind = type_kind(t)
    if kind is None:
        return "?" if explain else "unknown"
    sub = getattr(t, kind)
    name = ("boolean" if kind == "bool" else kind) if explain else _TYPE_NAMES.get(kind, kind)

    def inner(x: Type) -> str:
        return type_name(x, with_nullability, explain=explain)

    def params(*values: int) -> str:
        text = ",".join(map(str, values))
        return f"({text})" if explain else f"<{text}>"

    if kind == "decimal":
        name += params(sub.precision, sub.scale)
    elif kind in ("fixed_char", "varchar", "fixed_binary"):
        name += params(sub.length)
    elif kind in ("precision_time", "precision_timestamp", "precision_timestamp_tz"):
        name += params(sub.precision)
    elif kind == "struct":
        name = "struct<" + ", ".join(inner(x) for x in sub.types) + ">"
    elif kind == "list":
        name = f"list<{inner(sub.type)}>"
    elif kind == "map":
        name = f"map<{inner(sub.key)}, {inner(sub.value)}>"
    elif explain:
        pass  # the kinds below have parameters SQL does not write
    elif kind == "interval_compound" or (kind == "interval_day" and sub.HasField("precision")):
        name += params(sub.precision)
    elif kind == "func":
        parameters = ", ".join(inner(x) for x in sub.parameter_types)
        name = f"func<({parameters}) -> {inner(sub.return_type)}>"
    elif kind == "user_defined":
        name = f"u!{sub.type_reference}"
    elif kind == "alias":
        name = f"alias<{sub.type_alias_reference}>"
    if with_nullability and _has_nullability(sub) and sub.nullability == NULLABLE:
        name += "?"
    return name


def same_type_class(a: Type, b: Type) -> bool:
    """Same type, ignoring nullability (at every level) — unknown types match anything."""
    if not is_known(a) or not is_known(b):
        return True
    return type_name(a, False) == type_name(b, False)


def count_nested_names(t: Type) -> int:
    """How many names a ``NamedStruct`` needs for the fields nested inside a column of type ``t``.

    Depth-first: a struct names each of its fields (and their nested fields); lists and maps name the
    fields of the structs they contain (map keys before values).

    >>> count_nested_names(make_type("i64"))
    0
    >>> count_nested_names(make_type("struct", types=[make_type("i64"), make_type("struct", types=[make_type("i64")])]))
    3
    """
    kind = type_kind(t)
    if kind == "struct":
        return sum(1 + count_nested_names(x) for x in t.struct.types)
    if kind == "list":
        return count_nested_names(t.list.type)
    if kind == "map":
        return count_nested_names(t.map.key) + count_nested_names(t.map.value)
    return 0


def merge_nullability(types: Sequence[Type]) -> Type:
    """The first type, nullable if any of ``types`` is."""
    first = types[0]
    if any(is_nullable(x) for x in types if is_known(x)) and is_known(first):
        return with_nullability(first, NULLABLE)
    return first

