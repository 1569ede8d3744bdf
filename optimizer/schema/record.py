"""The record a relation produces: :class:`Schema`, its top-level column names and types."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from substrait.proto import NamedStruct, Type

from optimizer.errors import PlanError
from optimizer.schema.types import (
    NULLABLE,
    REQUIRED,
    count_nested_names,
    struct_type,
    type_name,
    with_nullability,
)


def top_level_names(ns: NamedStruct, path: str | None = None) -> list[str]:
    """The names of the top-level columns of a ``NamedStruct`` (whose names are depth-first).

    An empty name list gives empty names; a list of top-level names only is tolerated.
    """
    types = list(ns.struct.types)
    names = list(ns.names)
    if not names:
        return [""] * len(types)
    if len(names) == len(types) or not types:  # top-level names only; names without types (old DataFusion)
        return names
    out, pos = [], 0
    for t in types:
        if pos >= len(names):
            break
        out.append(names[pos])
        pos += 1 + count_nested_names(t)
    if len(out) != len(types) or pos != len(names):
        raise PlanError(f"base_schema has {len(names)} names for {len(types)} columns", path)
    return out


def unique_names(names: Sequence[str]) -> list[str]:
    """``names`` with each repeat suffixed ``_1``, ``_2``, ... (a suffix no name has), as DuckDB names the
    columns of a table created from a query.

    >>> unique_names(["a", "b", "a", "a_1", "a"])
    ['a', 'b', 'a_2', 'a_1', 'a_3']
    """
    given, used, out = set(names), set(), []
    for name in names:
        new, n = name, 0
        while new in used or (new != name and new in given):
            n += 1
            new = f"{name}_{n}"
        used.add(new)
        out.append(new)
    return out


@dataclass
class Schema:
    """The record a relation produces: top-level column names and types.

    ``nested_names`` (not compared) keeps, per column, the names of its nested struct fields in
    depth-first order when the plan gave them, so that :meth:`to_named_struct` round-trips.

    >>> from optimizer.schema.types import make_type
    >>> s = Schema(["a", "b"], [make_type("i64"), make_type("string", nullable=True)])
    >>> len(s), str(s)
    (2, 'a: i64, b: string?')
    """

    names: list[str]
    types: list[Type]
    nested_names: list[list[str]] | None = field(default=None, compare=False, repr=False)

    def __post_init__(self) -> None:
        self.names = list(self.names)
        self.types = list(self.types)
        if len(self.names) != len(self.types):
            raise PlanError(f"schema has {len(self.names)} names for {len(self.types)} types")
        if self.nested_names is not None and len(self.nested_names) != len(self.types):
            self.nested_names = None

    def __len__(self) -> int:
        return len(self.types)

    def __str__(self) -> str:
        return ", ".join(f"{n}: {type_name(t)}" for n, t in zip(self.names, self.types, strict=True))

    def __repr__(self) -> str:
        return f"Schema({self})"

    @classmethod
    def empty(cls) -> Schema:
        return cls([], [])

    @classmethod
    def from_named_struct(cls, ns: NamedStruct, path: str = "") -> Schema:
        """Top-level names and types of a ``NamedStruct`` (names listed depth-first)."""
        types = list(ns.struct.types)
        needed = sum(1 + count_nested_names(t) for t in types)
        names = list(ns.names)
        if len(names) != needed:
            if len(names) == len(types):  # top-level names only: tolerated
                return cls(names, types)
            raise PlanError(
                f"NamedStruct has {len(names)} names for {len(types)} columns ({needed} names needed, "
                "nested struct fields included)",
                path,
            )
        return cls.from_depth_first_names(names, types)

    @classmethod
    def from_depth_first_names(cls, names: Sequence[str], types: Sequence[Type]) -> Schema:
        top: list[str] = []
        nested: list[list[str]] = []
        pos = 0
        for t in types:
            k = count_nested_names(t)
            top.append(names[pos])
            nested.append(list(names[pos + 1 : pos + 1 + k]))
            pos += 1 + k
        return cls(top, list(types), nested)

    @property
    def flat_name_count(self) -> int:
        """How many names ``RelRoot.names`` needs for this schema (nested struct fields included)."""
        return sum(1 + count_nested_names(t) for t in self.types)

    def depth_first_names(self) -> list[str]:
        """All names depth-first, as ``RelRoot.names``/``NamedStruct.names`` want them (nested names
        invented as ``<column>_<i>`` where the plan gave none)."""
        out: list[str] = []
        for i, (name, t) in enumerate(zip(self.names, self.types, strict=True)):
            out.append(name)
            k = count_nested_names(t)
            given = self.nested_names[i] if self.nested_names is not None else []
            if len(given) == k:
                out.extend(given)
            else:
                out.extend(f"{name}_{j}" for j in range(k))
        return out

    def to_named_struct(self) -> NamedStruct:
        ns = NamedStruct()
        ns.names.extend(self.depth_first_names())
        ns.struct.nullability = REQUIRED
        for t in self.types:
            ns.struct.types.add().CopyFrom(t)
        return ns

    def struct_type(self, nullable: bool = False) -> Type:
        """The record as one struct ``Type``."""
        return struct_type(self.types, nullable)

    def concat(self, other: Schema) -> Schema:
        return Schema(
            self.names + other.names, self.types + other.types, self.nested_name_lists() + other.nested_name_lists()
        )

    def select(self, indices: Sequence[int]) -> Schema:
        """The columns at ``indices`` (in that order; must be in range)."""
        nested = self.nested_name_lists()
        return Schema(
            [self.names[i] for i in indices], [self.types[i] for i in indices], [nested[i] for i in indices]
        )

    def nullable(self) -> Schema:
        """Every column made nullable (the outer side of a join)."""
        return Schema(self.names, [with_nullability(t, NULLABLE) for t in self.types], self.nested_name_lists())

    def with_names(self, names: Sequence[str]) -> Schema:
        """Rename the columns: ``names`` is either top-level or depth-first (nested fields included)."""
        names = list(names)
        if len(names) == self.flat_name_count:
            return Schema.from_depth_first_names(names, self.types)
        if len(names) == len(self):
            return Schema(names, self.types, self.nested_name_lists())
        raise PlanError(
            f"{len(names)} names for a schema of {len(self)} columns ({self.flat_name_count} fields)"
        )

    def nested_name_lists(self) -> list[list[str]]:
        """Per column, the names of its nested struct fields the plan gave (empty lists where none)."""
        return list(self.nested_names) if self.nested_names is not None else [[] for _ in self.types]

