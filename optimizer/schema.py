"""Output schemas of Substrait relations, types of expressions, and a cheap plan checker.

A :class:`Schema` is the record a relation produces: one top-level name and one ``substrait.proto.Type``
per column. Names come from the plan where it has them (``ReadRel.base_schema``, ``RelRoot.names``,
``RelCommon.hint.output_names``); a plain field reference keeps the referenced column's name; other
computed columns get stable invented names: ``expr_<i>`` (project expression ``i``), ``group_<i>``,
``measure_<i>``, ``grouping_set``, ``window_<i>``, ``expand_<i>``, ``mark``, ``count``. Names need not
be unique (a self-join repeats its columns' names): address columns by position.

* :func:`rel_schema` derives the output of ONE relation from its inputs' schemas (it never looks at
  the relation's input fields, so it works on the DAG nodes of :mod:`optimizer.dag`); the relation's
  ``common.emit`` is applied.
* :func:`tree_schema` derives the output of a whole ``Rel`` tree (subqueries, ``ReferenceRel`` via
  ``plan_relations``); :func:`plan_schemas` the schema of every relation of a plan, by path.
* :func:`expression_type` types one expression against its input record.
* :func:`check_plan` lists the problems it can find cheaply (out-of-range field references and
  emits, unknown function anchors, non-boolean conditions, set inputs of different widths, RelRoot
  name counts, ...), each as a :class:`Problem` with the path of the offending message;
  :func:`raise_for_problems` raises the first as a :class:`~optimizer.errors.PlanError`.

Paths use proto field names, e.g. ``relations[0].root.input.project.expressions[2].selection``.
A malformed plan raises :class:`~optimizer.errors.PlanError` (never a bare ``IndexError``...);
relations whose output cannot be known (``extension_multi``, ``extension_leaf``) raise
:class:`~optimizer.errors.UnsupportedError`.

Choices where the specification leaves room (documented here once):

* ``extension_single`` passes its input's schema through (its detail is opaque).
* ``write``: ``OUTPUT_MODE_MODIFIED_RECORDS`` -> the ``table_schema`` columns (the input's when there
  is no ``table_schema``); ``OUTPUT_MODE_NO_OUTPUT`` -> no columns; unspecified -> one required
  ``i64`` column ``count`` (rows written). ``update`` -> ``count`` as well; ``ddl`` -> no columns.
* ``expand``: one column per ``ExpandField`` (as substrait-java; the proto comment's extra
  duplicate-ordinal column is not added). A switching field has its first duplicate's type,
  nullable if any duplicate is.
* Join outputs follow the join type: outer sides become nullable, semi/anti keep one side,
  ``*_single`` makes the other side nullable, ``*_mark`` appends a nullable boolean ``mark``.
  ``HashJoinRel``/``MergeJoinRel``/``NestedLoopJoinRel`` enums are mapped by name.
* Aggregates: grouping expressions in declaration order (nullable when not in every grouping set),
  then measures, then, with 2+ grouping sets, a required ``i32`` ``grouping_set`` column (the spec's
  rule; DataFusion 55 and Isthmus write grouping-set plans without it, which check_plan then flags).
* Lenient derivation for real producers' omissions, not reported as problems: a function without
  ``output_type`` (DataFusion omits it on measures) gets the type the standard extension YAMLs derive
  from its argument types (:func:`derive_output_type`); a ``base_schema`` with names but no types
  (older DataFusion) gives columns of unknown type (an empty ``Type()``, ``type_name`` "unknown"); a
  virtual table without ``base_schema`` (older DuckDB) takes its rows' types, columns ``col_<i>``.
* DuckDB and DataFusion before 2024 write a ``ProjectRel`` without ``emit`` meaning "only the
  expressions". check_plan reports such projects; :func:`conform_legacy_projects` rewrites them with
  the explicit emit (it should run right after loading such a plan).
* Outer references: ``outer_schemas`` is a stack, innermost (the record the subquery expression is
  evaluated on) last; ``steps_out = 1`` is ``outer_schemas[-1]``. ``rel_reference`` resolves to the
  input record of the relation whose ``common.rel_anchor`` it names (for a ``lateral_join``, its
  left input).

>>> from optimizer.plan_io import load_plan
>>> plan = load_plan('''{"relations": [{"root": {"names": ["a", "total"], "input": {"aggregate": {
...   "input": {"read": {"namedTable": {"names": ["t"]}, "baseSchema": {"names": ["a", "b"],
...     "struct": {"types": [{"i64": {"nullability": "NULLABILITY_REQUIRED"}},
...                          {"fp64": {"nullability": "NULLABILITY_NULLABLE"}}]}}}},
...   "groupingExpressions": [{"selection": {"directReference": {"structField": {"field": 0}}}}],
...   "groupings": [{"expressionReferences": [0]}],
...   "measures": [{"measure": {"functionReference": 1, "outputType": {"fp64": {"nullability": "NULLABILITY_NULLABLE"}},
...     "arguments": [{"value": {"selection": {"directReference": {"structField": {"field": 1}}}}}]}}]}}}}],
...   "extensions": [{"extensionFunction": {"functionAnchor": 1, "name": "sum", "extensionUrnReference": 4294967295}}]}''')
>>> for path, schema in plan_schemas(plan).items():
...     print(f"{path}: {schema}")
relations[0].root.input.aggregate.input: a: i64, b: fp64?
relations[0].root.input: a: i64, measure_0: fp64?
relations[0].root: a: i64, total: fp64?
>>> check_plan(plan)
[]
>>> plan.relations[0].root.input.aggregate.grouping_expressions[0].selection.direct_reference.struct_field.field = 7
>>> [str(p) for p in check_plan(plan)]
['relations[0].root.input.aggregate.grouping_expressions[0].selection: field 7 of 2']
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

from google.protobuf.descriptor import FieldDescriptor
from substrait.proto import (
    AggregateFunction,
    Expression,
    FunctionArgument,
    NamedStruct,
    Plan,
    PlanRel,
    Rel,
    SortField,
    Type,
)

from optimizer.errors import OptimizerError, PlanError, UnsupportedError
from optimizer.expr_utils import join_type_name, rels_with_paths
from optimizer.load.functions import FunctionTable, function_table

__all__ = [
    "Problem",
    "Schema",
    "check_plan",
    "conform_legacy_projects",
    "count_nested_names",
    "top_level_names",
    "derive_output_type",
    "direct_field_index",
    "expression_type",
    "is_nullable",
    "legacy_project_producer",
    "make_type",
    "measure_type",
    "plan_schemas",
    "raise_for_problems",
    "rel_schema",
    "root_schema",
    "same_type_class",
    "tree_schema",
    "type_name",
    "with_nullability",
]

NULLABLE = Type.NULLABILITY_NULLABLE
REQUIRED = Type.NULLABILITY_REQUIRED

# ---------------------------------------------------------------------------------------------
# Types
# ---------------------------------------------------------------------------------------------

_TYPE_NAMES = {
    "bool": "boolean",
    "fixed_char": "fixedchar",
    "fixed_binary": "fixedbinary",
}


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


def _struct_type(types: Sequence[Type], nullable: bool = False) -> Type:
    t = Type()
    t.struct.SetInParent()
    for item in types:
        t.struct.types.add().CopyFrom(item)
    t.struct.nullability = NULLABLE if nullable else REQUIRED
    return t


BOOLEAN = make_type("bool")
UNKNOWN = Type()  # placeholder for a type that could not be derived (check_plan only)


def _known(t: Type) -> bool:
    return type_kind(t) is not None


def type_name(t: Type, with_nullability: bool = True) -> str:
    """A short readable name: ``i64``, ``string?``, ``decimal<15,2>``, ``struct<i64, list<fp64?>>``.

    >>> type_name(make_type("struct", types=[make_type("i64"), make_type("string", nullable=True)]))
    'struct<i64, string?>'
    """
    kind = type_kind(t)
    if kind is None:
        return "unknown"
    sub = getattr(t, kind)
    name = _TYPE_NAMES.get(kind, kind)

    def inner(x: Type) -> str:
        return type_name(x, with_nullability)

    if kind == "decimal":
        name = f"decimal<{sub.precision},{sub.scale}>"
    elif kind in ("fixed_char", "varchar", "fixed_binary"):
        name = f"{name}<{sub.length}>"
    elif kind in ("precision_time", "precision_timestamp", "precision_timestamp_tz", "interval_compound"):
        name = f"{name}<{sub.precision}>"
    elif kind == "interval_day" and sub.HasField("precision"):
        name = f"interval_day<{sub.precision}>"
    elif kind == "struct":
        name = "struct<" + ", ".join(inner(x) for x in sub.types) + ">"
    elif kind == "list":
        name = f"list<{inner(sub.type)}>"
    elif kind == "map":
        name = f"map<{inner(sub.key)}, {inner(sub.value)}>"
    elif kind == "func":
        params = ", ".join(inner(x) for x in sub.parameter_types)
        name = f"func<({params}) -> {inner(sub.return_type)}>"
    elif kind == "user_defined":
        name = f"u!{sub.type_reference}"
    elif kind == "alias":
        name = f"alias<{sub.type_alias_reference}>"
    if with_nullability and _has_nullability(sub) and sub.nullability == NULLABLE:
        name += "?"
    return name


def same_type_class(a: Type, b: Type) -> bool:
    """Same type, ignoring nullability (at every level) — unknown types match anything."""
    if not _known(a) or not _known(b):
        return True
    return type_name(a, False) == type_name(b, False)


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


def _merge_nullability(types: Sequence[Type]) -> Type:
    """The first type, nullable if any of ``types`` is."""
    first = types[0]
    if any(is_nullable(x) for x in types if _known(x)) and _known(first):
        return with_nullability(first, NULLABLE)
    return first


# ---------------------------------------------------------------------------------------------
# Schema and Problem
# ---------------------------------------------------------------------------------------------


@dataclass
class Schema:
    """The record a relation produces: top-level column names and types.

    ``nested_names`` (not compared) keeps, per column, the names of its nested struct fields in
    depth-first order when the plan gave them, so that :meth:`to_named_struct` round-trips.

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
        return _struct_type(self.types, nullable)

    def concat(self, other: Schema) -> Schema:
        return Schema(self.names + other.names, self.types + other.types, self._nested() + other._nested())

    def select(self, indices: Sequence[int]) -> Schema:
        """The columns at ``indices`` (in that order; must be in range)."""
        nested = self._nested()
        return Schema(
            [self.names[i] for i in indices], [self.types[i] for i in indices], [nested[i] for i in indices]
        )

    def nullable(self) -> Schema:
        """Every column made nullable (the outer side of a join)."""
        return Schema(self.names, [with_nullability(t, NULLABLE) for t in self.types], self._nested())

    def with_names(self, names: Sequence[str]) -> Schema:
        """Rename the columns: ``names`` is either top-level or depth-first (nested fields included)."""
        names = list(names)
        if len(names) == self.flat_name_count:
            return Schema.from_depth_first_names(names, self.types)
        if len(names) == len(self):
            return Schema(names, self.types, self._nested())
        raise PlanError(
            f"{len(names)} names for a schema of {len(self)} columns ({self.flat_name_count} fields)"
        )

    def _nested(self) -> list[list[str]]:
        return list(self.nested_names) if self.nested_names is not None else [[] for _ in self.types]


@dataclass(frozen=True)
class Problem:
    """One problem found by :func:`check_plan`: where (a path) and what. A ``quirk`` is a known producer
    habit with a clear meaning (read as documented in docs/semantics.md): reported, never an error."""

    path: str
    message: str
    quirk: bool = False

    def __str__(self) -> str:
        return f"{self.path}: {self.message}" if self.path else self.message


# ---------------------------------------------------------------------------------------------
# Derivation context
# ---------------------------------------------------------------------------------------------


class _Ctx:
    """State of one derivation: strict (raise) or checking (collect problems and walk everything)."""

    def __init__(
        self,
        functions: FunctionTable | None = None,
        *,
        problems: list[Problem] | None = None,
        full: bool = False,
        plan_relations: Sequence[PlanRel] | None = None,
        outer: Sequence[Schema] | None = None,
        anchors: dict[int, Schema] | None = None,
        schemas: dict[str, Schema] | None = None,
        detached: Sequence[Expression] | None = None,
    ) -> None:
        self.functions = functions
        self.problems = problems
        self.full = full or problems is not None
        self.plan_relations = plan_relations
        self.outer: list[Schema] = list(outer or [])
        self.anchors: dict[int, Schema] = dict(anchors or {})
        self.schemas = schemas
        self.detached = detached
        self.lambdas: list[Type.Struct] = []
        self.ref_cache: dict[int, Schema | None] = {}
        self.ref_active: set[int] = set()
        self.detached_active: set[int] = set()

    @property
    def checking(self) -> bool:
        return self.problems is not None

    def fail(self, path: str, message: str) -> Type:
        """Report a problem: raise in strict mode, record it (and go on with an unknown type) when checking."""
        if self.problems is None:
            raise PlanError(message, path)
        self.problems.append(Problem(path, message))
        return UNKNOWN

    def warn(self, path: str, message: str) -> None:
        """Report a problem that does not prevent deriving schemas: recorded when checking, else ignored."""
        if self.problems is not None:
            self.problems.append(Problem(path, message))

    def function(self, anchor: int, path: str) -> None:
        if self.functions is None:
            return
        try:
            self.functions.get(anchor, path)
        except PlanError as exc:
            self.fail(path, exc.message)


_T = TypeVar("_T")


def _guard(path_arg: str) -> Callable[[Callable[..., _T]], Callable[..., _T]]:
    """Turn stray Python errors from a malformed message into a PlanError (never a bare IndexError)."""

    def deco(fn: Callable[..., _T]) -> Callable[..., _T]:
        @functools.wraps(fn)
        def wrapper(*args: Any, **kwargs: Any) -> _T:
            try:
                return fn(*args, **kwargs)
            except OptimizerError:
                raise
            except (IndexError, KeyError, AttributeError, TypeError, ValueError) as exc:
                path = kwargs.get(path_arg, "")
                raise PlanError(f"malformed plan ({type(exc).__name__}: {exc})", path or None) from exc

        return wrapper

    return deco


# ---------------------------------------------------------------------------------------------
# Literals
# ---------------------------------------------------------------------------------------------

#: Literal kinds whose type has no parameters, and that type's kind.
SIMPLE_LITERAL_KINDS = {
    "boolean": "bool",
    "i8": "i8",
    "i16": "i16",
    "i32": "i32",
    "i64": "i64",
    "fp32": "fp32",
    "fp64": "fp64",
    "string": "string",
    "binary": "binary",
    "date": "date",
    "uuid": "uuid",
    "interval_year_to_month": "interval_year",
}


def literal_type(lit: Expression.Literal, path: str = "", ctx: _Ctx | None = None) -> Type:
    """The type of a literal (its ``nullable`` flag gives the nullability; typed nulls are nullable).

    >>> lit = Expression.Literal(decimal=Expression.Literal.Decimal(value=bytes(16), precision=15, scale=2))
    >>> type_name(literal_type(lit))
    'decimal<15,2>'
    """
    ctx = ctx or _Ctx()
    kind = lit.WhichOneof("literal_type")
    nullable = lit.nullable
    variation = lit.type_variation_reference

    def done(t: Type) -> Type:
        sub = getattr(t, type_kind(t))
        if "type_variation_reference" in sub.DESCRIPTOR.fields_by_name and variation:
            sub.type_variation_reference = variation
        return t

    if kind is None:
        return ctx.fail(path, "literal has no value")
    if kind in SIMPLE_LITERAL_KINDS:
        return done(make_type(SIMPLE_LITERAL_KINDS[kind], nullable))
    if kind == "interval_day_to_second":
        return done(make_type("interval_day", nullable, precision=lit.interval_day_to_second.precision))
    if kind == "interval_compound":
        return done(
            make_type(
                "interval_compound",
                nullable,
                precision=lit.interval_compound.interval_day_to_second.precision,
            )
        )
    if kind == "fixed_char":
        return done(make_type("fixed_char", nullable, length=len(lit.fixed_char)))
    if kind == "var_char":
        return done(make_type("varchar", nullable, length=lit.var_char.length))
    if kind == "fixed_binary":
        return done(make_type("fixed_binary", nullable, length=len(lit.fixed_binary)))
    if kind == "decimal":
        return done(make_type("decimal", nullable, precision=lit.decimal.precision, scale=lit.decimal.scale))
    if kind in ("precision_time", "precision_timestamp", "precision_timestamp_tz"):
        return done(make_type(kind, nullable, precision=getattr(lit, kind).precision))
    if kind == "struct":
        types = [literal_type(f, f"{path}.struct.fields[{i}]", ctx) for i, f in enumerate(lit.struct.fields)]
        return done(_struct_type(types, nullable))
    if kind == "list":
        values = lit.list.values
        if not values:
            return ctx.fail(f"{path}.list", "list literal has no values (use empty_list)")
        elems = [literal_type(v, f"{path}.list.values[{i}]", ctx) for i, v in enumerate(values)]
        return done(make_type("list", nullable, type=_merge_nullability(elems)))
    if kind == "map":
        kvs = lit.map.key_values
        if not kvs:
            return ctx.fail(f"{path}.map", "map literal has no entries (use empty_map)")
        keys = [literal_type(kv.key, f"{path}.map.key_values[{i}].key", ctx) for i, kv in enumerate(kvs)]
        values = [
            literal_type(kv.value, f"{path}.map.key_values[{i}].value", ctx) for i, kv in enumerate(kvs)
        ]
        return done(
            make_type("map", nullable, key=_merge_nullability(keys), value=_merge_nullability(values))
        )
    if kind in ("empty_list", "empty_map"):
        t = Type()
        target = t.list if kind == "empty_list" else t.map
        target.CopyFrom(getattr(lit, kind))
        if nullable:
            target.nullability = NULLABLE
        elif target.nullability == Type.NULLABILITY_UNSPECIFIED:
            target.nullability = REQUIRED
        return t
    if kind == "null":
        if not _known(lit.null):
            return UNKNOWN
        return with_nullability(lit.null, NULLABLE)
    if kind == "user_defined":
        ud = lit.user_defined
        t = Type()
        if ud.WhichOneof("type_anchor_type") == "type_alias_reference":
            t.alias.type_alias_reference = ud.type_alias_reference
            t.alias.nullability = NULLABLE if nullable else REQUIRED
            return t
        t.user_defined.type_reference = ud.type_reference
        t.user_defined.type_parameters.extend(ud.type_parameters)
        t.user_defined.nullability = NULLABLE if nullable else REQUIRED
        return done(t)
    return ctx.fail(path, f"unsupported literal kind {kind}")


# ---------------------------------------------------------------------------------------------
# Expressions
# ---------------------------------------------------------------------------------------------


def direct_field_index(expr: Expression) -> int | None:
    """The column index of a plain top-level field reference (``selection`` of the input record), else None.

    >>> e = Expression()
    >>> e.selection.direct_reference.struct_field.field = 3
    >>> direct_field_index(e)
    3
    """
    if expr.WhichOneof("rex_type") != "selection":
        return None
    ref = expr.selection
    if ref.WhichOneof("root_type") not in (None, "root_reference"):
        return None
    if ref.WhichOneof("reference_type") != "direct_reference":
        return None
    seg = ref.direct_reference
    if seg.WhichOneof("reference_type") != "struct_field" or seg.struct_field.HasField("child"):
        return None
    return seg.struct_field.field


def _select_type(select: Expression.MaskExpression.Select, t: Type, ctx: _Ctx, path: str) -> Type:
    """Apply a mask ``Select`` to a type (struct selects narrow the struct; list/map keep their type)."""
    which = select.WhichOneof("type")
    kind = type_kind(t)
    if not _known(t) or which is None:
        return t
    if which == "struct":
        if kind != "struct":
            return ctx.fail(path, f"struct select on a {type_name(t)} value")
        return _struct_select(
            select.struct, list(t.struct.types), ctx, f"{path}.struct", nullable=is_nullable(t)
        )
    if which == "list":
        if kind != "list":
            return ctx.fail(path, f"list select on a {type_name(t)} value")
        if select.list.HasField("child"):
            elem = _select_type(select.list.child, t.list.type, ctx, f"{path}.list.child")
            return make_type("list", is_nullable(t), type=elem)
        return t
    if kind != "map":
        return ctx.fail(path, f"map select on a {type_name(t)} value")
    if select.map.HasField("child"):
        value = _select_type(select.map.child, t.map.value, ctx, f"{path}.map.child")
        return make_type("map", is_nullable(t), key=t.map.key, value=value)
    return t


def _struct_select(
    sel: Expression.MaskExpression.StructSelect, types: list[Type], ctx: _Ctx, path: str, nullable: bool
) -> Type:
    out: list[Type] = []
    for j, item in enumerate(sel.struct_items):
        ipath = f"{path}.struct_items[{j}]"
        if not 0 <= item.field < len(types):
            out.append(ctx.fail(ipath, f"field {item.field} of {len(types)}"))
            continue
        t = types[item.field]
        if item.HasField("child"):
            t = _select_type(item.child, t, ctx, f"{ipath}.child")
        out.append(t)
    return _struct_type(out, nullable)


def _segment_type(seg: Expression.ReferenceSegment, t: Type, ctx: _Ctx, path: str) -> Type:
    """Follow a reference segment chain into a (nested) type."""
    while True:
        which = seg.WhichOneof("reference_type")
        if which is None or not _known(t):
            return t
        kind = type_kind(t)
        parent_nullable = is_nullable(t)
        if which == "struct_field":
            if kind != "struct":
                return ctx.fail(path, f"struct_field reference into a {type_name(t)} value")
            n = len(t.struct.types)
            index = seg.struct_field.field
            if not 0 <= index < n:
                return ctx.fail(path, f"nested field {index} of {n}")
            t = t.struct.types[index]
            seg_next = seg.struct_field
        elif which == "list_element":
            if kind != "list":
                return ctx.fail(path, f"list_element reference into a {type_name(t)} value")
            t = t.list.type
            seg_next = seg.list_element
        else:
            if kind != "map":
                return ctx.fail(path, f"map_key reference into a {type_name(t)} value")
            t = with_nullability(t.map.value, NULLABLE)  # the key may be missing
            seg_next = seg.map_key
        if parent_nullable:
            t = with_nullability(t, NULLABLE)
        if not seg_next.HasField("child"):
            return t
        seg = seg_next.child


def _field_ref_type(ref: Expression.FieldReference, schema: Schema, ctx: _Ctx, path: str) -> Type:
    """Type of a ``FieldReference`` whose path is ``path`` against the record ``schema``."""
    root = ref.WhichOneof("root_type")
    record: Schema | None = None
    root_t: Type | None = None
    if root in (None, "root_reference"):
        record = schema
    elif root == "expression":
        root_t = _expr(ref.expression, schema, ctx, f"{path}.expression")
    elif root == "outer_reference":
        outer = ref.outer_reference
        if outer.WhichOneof("outer_reference_type") == "rel_reference":
            anchor = outer.rel_reference
            if anchor not in ctx.anchors:
                return ctx.fail(
                    path, f"outer reference to rel_anchor {anchor}, which no enclosing relation defines"
                )
            record = ctx.anchors[anchor]
        else:
            steps = outer.steps_out
            if steps < 1 or steps > len(ctx.outer):
                return ctx.fail(
                    path,
                    f"outer reference steps_out={steps}, but there are {len(ctx.outer)} enclosing queries",
                )
            record = ctx.outer[-steps]
    elif root == "lambda_parameter_reference":
        steps = ref.lambda_parameter_reference.steps_out
        if steps >= len(ctx.lambdas):
            return ctx.fail(
                path,
                f"lambda parameter reference steps_out={steps}, but there are {len(ctx.lambdas)} lambdas",
            )
        params = ctx.lambdas[-1 - steps]
        root_t = _struct_type(list(params.types))

    which = ref.WhichOneof("reference_type")
    if which == "masked_reference":
        mask = ref.masked_reference
        if record is not None:
            types, nullable = list(record.types), False
        elif root_t is not None and type_kind(root_t) == "struct":
            types, nullable = list(root_t.struct.types), is_nullable(root_t)
        elif root_t is not None and not _known(root_t):
            return UNKNOWN
        else:
            return ctx.fail(path, "masked reference into a non-struct value")
        out = _struct_select(mask.select, types, ctx, f"{path}.masked_reference.select", nullable)
        if len(out.struct.types) == 1 and not mask.maintain_singular_struct:
            return out.struct.types[0]
        return out
    if which is None:  # the whole root
        return record.struct_type() if record is not None else root_t
    seg = ref.direct_reference
    if record is not None:
        if seg.WhichOneof("reference_type") != "struct_field":
            return ctx.fail(path, "a reference into the input record must start with struct_field")
        index = seg.struct_field.field
        if not 0 <= index < len(record):
            return ctx.fail(path, f"field {index} of {len(record)}")
        t = record.types[index]
        if seg.struct_field.HasField("child"):
            return _segment_type(seg.struct_field.child, t, ctx, path)
        return t
    return _segment_type(seg, root_t, ctx, path)


def _arguments(args: Sequence[FunctionArgument], schema: Schema, ctx: _Ctx, path: str) -> None:
    for i, arg in enumerate(args):
        if arg.WhichOneof("arg_type") == "value":
            _expr(arg.value, schema, ctx, f"{path}.arguments[{i}].value")


def _sorts(
    sorts: Sequence[SortField], schema: Schema, ctx: _Ctx, path: str, field_name: str = "sorts"
) -> None:
    for i, s in enumerate(sorts):
        spath = f"{path}.{field_name}[{i}]"
        _expr(s.expr, schema, ctx, f"{spath}.expr")
        if s.WhichOneof("sort_kind") == "comparison_function_reference":
            ctx.function(s.comparison_function_reference, spath)


# Fallbacks when the extension YAMLs cannot derive a missing output type (non-standard argument types).
_BOOLEAN_FUNCTIONS = frozenset(
    "equal not_equal lt gt lte gte between is_null is_not_null is_nan is_finite is_infinite is_true "
    "is_false is_not_true is_not_false is_distinct_from is_not_distinct_from and or not xor and_not "
    "like ilike starts_with ends_with contains regexp_like".split()
)
_NEVER_NULL_BOOLEAN = frozenset("is_null is_not_null is_true is_false is_not_true is_not_false".split())
_COUNT_FUNCTIONS = frozenset(
    "count count_star approx_count_distinct row_number rank dense_rank ntile".split()
)
# Statistics computed in double precision whatever their argument (DataFusion writes ``stddev``,
# ``var_samp`` and the like without an output type; its Consumer reads them as Float64).
_DOUBLE_FUNCTIONS = frozenset(
    "std_dev stddev stddev_samp stddev_pop variance var var_samp var_pop corr".split()
)


def _output_type(fn, ctx: _Ctx, path: str, what: str, schema: Schema | None = None) -> Type:
    """A function's declared ``output_type``. When the plan omits it (DataFusion does for measures),
    the type is derived from the standard extension YAMLs and the argument types, else unknown."""
    if fn.HasField("output_type") and _known(fn.output_type):
        return fn.output_type
    if ctx.functions is None or schema is None or fn.function_reference not in ctx.functions:
        return UNKNOWN
    info = ctx.functions.get(fn.function_reference)
    quiet = _Ctx(ctx.functions, problems=[], outer=ctx.outer, anchors=ctx.anchors)
    quiet.lambdas = ctx.lambdas
    signature: list[Type | str] = []
    for a in fn.arguments:
        which = a.WhichOneof("arg_type")
        if which == "value":
            signature.append(_expr(a.value, schema, quiet, path))
        elif which == "enum":
            signature.append(a.enum)
        else:
            signature.append("")
    derived = derive_output_type(info.name, signature, info.urn)
    if _known(derived):
        return derived
    if info.name in _COUNT_FUNCTIONS:
        return make_type("i64")
    if info.name in _DOUBLE_FUNCTIONS:
        return make_type("fp64", True)  # null over no rows (one row, for a sample statistic)
    if info.name in _BOOLEAN_FUNCTIONS:
        args = [t for t in signature if not isinstance(t, str)]
        nullable = info.name not in _NEVER_NULL_BOOLEAN and any(not _known(t) or is_nullable(t) for t in args)
        return make_type("bool", nullable)
    return UNKNOWN


@functools.lru_cache(maxsize=4096)
def _derive_cached(name: str, urn: str | None, key: tuple[bytes | str, ...]) -> bytes | None:
    from optimizer.load.functions import _registry

    signature: list[Type | str] = [k if isinstance(k, str) else Type.FromString(k) for k in key]
    registry = _registry()
    try:
        match = registry.lookup_function(urn, name, signature) if urn is not None else None
        if match is None:
            matches = registry.list_functions_across_urns(name, signature)
            match = matches[0] if matches else None
    # substrait's derivation-expression evaluator raises bare Exception ("Unknown scalar type ..."),
    # besides TypeError/ValueError, on types it does not handle: nothing narrower names them.
    except Exception:
        return None
    if match is None or not isinstance(match[1], Type) or not _known(match[1]):
        return None
    return match[1].SerializeToString()


def derive_output_type(name: str, signature: Sequence[Type | str], urn: str | None = None) -> Type:
    """The output type of standard function ``name`` for argument types ``signature`` (enum arguments as
    strings), per the standard extension YAMLs (the ``urn`` one first); an unknown type if none matches.

    >>> type_name(derive_output_type("sum", [make_type("decimal", precision=15, scale=2)]))
    'decimal<38,2>?'
    >>> type_name(derive_output_type("count", [make_type("i64", nullable=True)]))
    'i64'
    """
    if any(not isinstance(t, str) and not _known(t) for t in signature):
        return UNKNOWN
    key = tuple(t if isinstance(t, str) else t.SerializeToString(deterministic=True) for t in signature)
    raw = _derive_cached(name, urn, key)
    return Type.FromString(raw) if raw is not None else UNKNOWN


def _bounds(fn, schema: Schema, ctx: _Ctx, path: str) -> None:
    for name in ("lower_bound", "upper_bound"):
        if not fn.HasField(name):
            continue
        bound = getattr(fn, name)
        which = bound.WhichOneof("kind")
        if which in ("preceding", "following") and getattr(bound, which).HasField("offset_expr"):
            _expr(getattr(bound, which).offset_expr, schema, ctx, f"{path}.{name}.{which}.offset_expr")


def _branches(types: list[Type], may_be_missing: bool) -> Type:
    """Result type of a conditional: the first branch's type, nullable if any branch (or no else) is."""
    known = [t for t in types if _known(t)]
    if not known:
        return UNKNOWN
    first = known[0]
    if may_be_missing or any(is_nullable(t) for t in known):
        return with_nullability(first, NULLABLE)
    return first


def _bool_result(nullable: bool) -> Type:
    return make_type("bool", nullable)


def _expr(expr: Expression, schema: Schema, ctx: _Ctx, path: str) -> Type:
    """Type of ``expr`` (whose path is ``path``) evaluated on records of ``schema``."""
    kind = expr.WhichOneof("rex_type")
    if kind is None:
        return ctx.fail(path, "expression is empty")
    kpath = f"{path}.{kind}"
    body = getattr(expr, kind)

    if kind == "literal":
        return literal_type(body, kpath, ctx)
    if kind == "selection":
        return _field_ref_type(body, schema, ctx, kpath)
    if kind == "scalar_function":
        ctx.function(body.function_reference, kpath)
        if ctx.full:
            _arguments(body.arguments, schema, ctx, kpath)
        return _output_type(body, ctx, kpath, "scalar function", schema)
    if kind == "window_function":
        ctx.function(body.function_reference, kpath)
        if ctx.full:
            _arguments(body.arguments, schema, ctx, kpath)
            for i, p in enumerate(body.partitions):
                _expr(p, schema, ctx, f"{kpath}.partitions[{i}]")
            _sorts(body.sorts, schema, ctx, kpath)
            _bounds(body, schema, ctx, kpath)
        return _output_type(body, ctx, kpath, "window function", schema)
    if kind == "cast":
        if ctx.full:
            _expr(body.input, schema, ctx, f"{kpath}.input")
        if not _known(body.type):
            return ctx.fail(kpath, "cast has no target type")
        return body.type
    if kind == "if_then":
        if not body.ifs:
            return ctx.fail(kpath, "if_then has no if clauses")
        thens: list[Type] = []
        for i, clause in enumerate(body.ifs):
            cpath = f"{kpath}.ifs[{i}]"
            if ctx.full:
                _condition(getattr(clause, "if"), schema, ctx, f"{cpath}.if", "if_then condition")
            thens.append(_expr(clause.then, schema, ctx, f"{cpath}.then"))
        has_else = body.HasField("else")
        if has_else:
            thens.append(_expr(getattr(body, "else"), schema, ctx, f"{kpath}.else"))
        return _branches(thens, not has_else)
    if kind == "switch_expression":
        if ctx.full:
            _expr(body.match, schema, ctx, f"{kpath}.match")
        if not body.ifs:
            return ctx.fail(kpath, "switch_expression has no if clauses")
        thens = []
        for i, clause in enumerate(body.ifs):
            cpath = f"{kpath}.ifs[{i}]"
            if ctx.full:
                literal_type(getattr(clause, "if"), f"{cpath}.if", ctx)
            thens.append(_expr(clause.then, schema, ctx, f"{cpath}.then"))
        has_else = body.HasField("else")
        if has_else:
            thens.append(_expr(getattr(body, "else"), schema, ctx, f"{kpath}.else"))
        return _branches(thens, not has_else)
    if kind == "singular_or_list":
        types = [_expr(body.value, schema, ctx, f"{kpath}.value")]
        types += [_expr(o, schema, ctx, f"{kpath}.options[{i}]") for i, o in enumerate(body.options)]
        return _bool_result(any(is_nullable(t) for t in types if _known(t)))
    if kind == "multi_or_list":
        types = [_expr(v, schema, ctx, f"{kpath}.value[{i}]") for i, v in enumerate(body.value)]
        for i, rec in enumerate(body.options):
            if ctx.full and len(rec.fields) != len(body.value):
                ctx.warn(
                    f"{kpath}.options[{i}]",
                    f"record has {len(rec.fields)} fields, the value has {len(body.value)}",
                )
            types += [
                _expr(f, schema, ctx, f"{kpath}.options[{i}].fields[{j}]") for j, f in enumerate(rec.fields)
            ]
        return _bool_result(any(is_nullable(t) for t in types if _known(t)))
    if kind == "subquery":
        return _subquery_type(body, schema, ctx, kpath)
    if kind == "nested":
        which = body.WhichOneof("nested_type")
        if which == "struct":
            types = [
                _expr(f, schema, ctx, f"{kpath}.struct.fields[{i}]") for i, f in enumerate(body.struct.fields)
            ]
            return _struct_type(types, body.nullable)
        if which == "list":
            if not body.list.values:
                return ctx.fail(
                    f"{kpath}.list", "list constructor has no values (its element type is unknown)"
                )
            elems = [
                _expr(v, schema, ctx, f"{kpath}.list.values[{i}]") for i, v in enumerate(body.list.values)
            ]
            return make_type("list", body.nullable, type=_merge_nullability(elems))
        if which == "map":
            kvs = body.map.key_values
            if not kvs:
                return ctx.fail(f"{kpath}.map", "map constructor has no entries (its types are unknown)")
            keys = [
                _expr(kv.key, schema, ctx, f"{kpath}.map.key_values[{i}].key") for i, kv in enumerate(kvs)
            ]
            values = [
                _expr(kv.value, schema, ctx, f"{kpath}.map.key_values[{i}].value") for i, kv in enumerate(kvs)
            ]
            return make_type(
                "map", body.nullable, key=_merge_nullability(keys), value=_merge_nullability(values)
            )
        return ctx.fail(kpath, "nested expression has no struct, list or map")
    if kind == "dynamic_parameter":
        if not _known(body.type):
            return ctx.fail(kpath, "dynamic parameter has no type")
        return body.type
    if kind == "lambda":
        ctx.lambdas.append(body.parameters)
        try:
            ret = _expr(body.body, schema, ctx, f"{kpath}.body")
        finally:
            ctx.lambdas.pop()
        return make_type("func", False, parameter_types=list(body.parameters.types), return_type=ret)
    if kind == "lambda_invocation":
        if ctx.full:
            for i, a in enumerate(body.arguments.fields):
                _expr(a, schema, ctx, f"{kpath}.arguments.fields[{i}]")
        lam = getattr(body, "lambda")
        ctx.lambdas.append(lam.parameters)
        try:
            return _expr(lam.body, schema, ctx, f"{kpath}.lambda.body")
        finally:
            ctx.lambdas.pop()
    if kind == "execution_context_variable":
        which = body.WhichOneof("execution_context_variable_type")
        if which is None:
            return ctx.fail(kpath, "execution context variable has no type")
        t = Type()
        target = {
            "current_timestamp": t.precision_timestamp_tz,
            "current_timezone": t.string,
            "current_date": t.date,
        }[which]
        target.CopyFrom(getattr(body, which))
        return t
    if kind == "detached_expression_ordinal":
        ordinal = body
        if ctx.detached is None:
            raise UnsupportedError("detached expression outside a plan relation", kpath)
        if not 0 <= ordinal < len(ctx.detached):
            return ctx.fail(kpath, f"detached expression {ordinal} of {len(ctx.detached)}")
        if ordinal in ctx.detached_active:
            return ctx.fail(kpath, f"detached expression {ordinal} refers to itself")
        ctx.detached_active.add(ordinal)
        try:
            return _expr(ctx.detached[ordinal], schema, ctx, f"detached_expressions[{ordinal}]")
        finally:
            ctx.detached_active.discard(ordinal)
    return ctx.fail(kpath, f"unsupported expression kind {kind}")


def _condition(expr: Expression, schema: Schema, ctx: _Ctx, path: str, what: str) -> None:
    """Type-check a boolean condition (checking mode)."""
    t = _expr(expr, schema, ctx, path)
    if _known(t) and type_kind(t) != "bool":
        ctx.warn(path, f"{what} must be boolean, not {type_name(t)}")


def _subquery_type(sub: Expression.Subquery, schema: Schema, ctx: _Ctx, path: str) -> Type:
    which = sub.WhichOneof("subquery_type")
    spath = f"{path}.{which}"
    if which == "scalar":
        inner = _subtree(sub.scalar.input, schema, ctx, f"{spath}.input")
        if inner is None:
            return UNKNOWN
        if len(inner) != 1:
            return ctx.fail(spath, f"scalar subquery returns {len(inner)} columns, not 1")
        return with_nullability(inner.types[0], NULLABLE)
    if which == "in_predicate":
        if ctx.full:
            needles = [
                _expr(n, schema, ctx, f"{spath}.needles[{i}]") for i, n in enumerate(sub.in_predicate.needles)
            ]
            inner = _subtree(sub.in_predicate.haystack, schema, ctx, f"{spath}.haystack")
            if inner is not None and len(inner) != len(needles):
                ctx.warn(spath, f"IN subquery compares {len(needles)} values with {len(inner)} columns")
        return _bool_result(True)
    if which == "set_predicate":
        if ctx.full:
            _subtree(sub.set_predicate.tuples, schema, ctx, f"{spath}.tuples")
        return _bool_result(False)
    if which == "set_comparison":
        if ctx.full:
            _expr(sub.set_comparison.left, schema, ctx, f"{spath}.left")
            inner = _subtree(sub.set_comparison.right, schema, ctx, f"{spath}.right")
            if inner is not None and len(inner) != 1:
                ctx.warn(f"{spath}.right", f"ANY/ALL subquery returns {len(inner)} columns, not 1")
        return _bool_result(True)
    return ctx.fail(path, "subquery has no kind")


def _subtree(rel: Rel, outer: Schema, ctx: _Ctx, path: str) -> Schema | None:
    """Schema of a subquery's relation tree, with ``outer`` pushed as the innermost enclosing record."""
    ctx.outer.append(outer)
    try:
        return _tree(rel, ctx, path)
    finally:
        ctx.outer.pop()


# ---------------------------------------------------------------------------------------------
# Relations
# ---------------------------------------------------------------------------------------------

_REL_NAME = Rel.DESCRIPTOR.full_name


@functools.cache
def _input_fields(kind: str) -> tuple[tuple[str, bool], ...]:
    """(field name, repeated) of the ``Rel`` fields of a relation kind, in slot order."""
    body = Rel.DESCRIPTOR.fields_by_name[kind].message_type
    return tuple(
        (f.name, f.label == FieldDescriptor.LABEL_REPEATED)
        for f in body.fields
        if f.type == FieldDescriptor.TYPE_MESSAGE and f.message_type.full_name == _REL_NAME
    )


# Number of inputs per kind: exact count, or (minimum, None) for "at least".
_ARITY: dict[str, int | tuple[int, None]] = {
    "read": 0,
    "extension_leaf": 0,
    "update": 0,
    "ddl": (0, None),
    "filter": 1,
    "fetch": 1,
    "aggregate": 1,
    "sort": 1,
    "project": 1,
    "extension_single": 1,
    "window": 1,
    "exchange": 1,
    "expand": 1,
    "top_n": 1,
    "write": 1,
    "reference": 1,
    "join": 2,
    "lateral_join": 2,
    "cross": 2,
    "hash_join": 2,
    "merge_join": 2,
    "nested_loop_join": 2,
    "set": (1, None),
    "extension_multi": (0, None),
}


def _join_output(jt: str | None, left: Schema, right: Schema, ctx: _Ctx, path: str) -> Schema:
    mark = Schema(["mark"], [make_type("bool", True)])
    if jt == "INNER":
        return left.concat(right)
    if jt == "OUTER":
        return left.nullable().concat(right.nullable())
    if jt in ("LEFT", "LEFT_SINGLE"):
        return left.concat(right.nullable())
    if jt in ("RIGHT", "RIGHT_SINGLE"):
        return left.nullable().concat(right)
    if jt in ("LEFT_SEMI", "LEFT_ANTI"):
        return left
    if jt in ("RIGHT_SEMI", "RIGHT_ANTI"):
        return right
    if jt == "LEFT_MARK":
        return left.concat(mark)
    if jt == "RIGHT_MARK":
        return right.concat(mark)
    ctx.fail(f"{path}.type", "join type is unspecified or not a known join type")
    return left.concat(right)


def _name_for(expr: Expression, schema: Schema, default: str) -> str:
    index = direct_field_index(expr)
    if index is not None and 0 <= index < len(schema):
        return schema.names[index]
    return default


def _arity_ok(kind: str, n: int) -> bool:
    want = _ARITY.get(kind, (0, None))
    if isinstance(want, tuple):
        return n >= want[0]
    return n == want


def _arity_text(kind: str) -> str:
    want = _ARITY.get(kind, (0, None))
    if isinstance(want, tuple):
        return f"at least {want[0]}"
    return str(want)


def _rel(rel: Rel, inputs: Sequence[Schema], ctx: _Ctx, path: str) -> Schema:
    """The output schema of one relation (emit applied) given its inputs' schemas."""
    kind = rel.WhichOneof("rel_type")
    if kind is None:
        raise PlanError("relation has no type (empty Rel)", path or None)
    body = getattr(rel, kind)
    bpath = f"{path}.{kind}" if path else kind
    if not _arity_ok(kind, len(inputs)):
        raise PlanError(f"a {kind} relation needs {_arity_text(kind)} input(s), got {len(inputs)}", bpath)
    common = body.common if "common" in body.DESCRIPTOR.fields_by_name else None
    if common is not None and common.HasField("rel_anchor") and inputs:
        record = inputs[0] if len(inputs) == 1 else functools.reduce(Schema.concat, inputs)
        ctx.anchors[common.rel_anchor] = record

    out = _direct_output(kind, body, list(inputs), ctx, bpath)

    if common is not None and common.WhichOneof("emit_kind") == "emit":
        picked: list[int] = []
        for j, m in enumerate(common.emit.output_mapping):
            if 0 <= m < len(out):
                picked.append(m)
            else:
                ctx.fail(f"{bpath}.common.emit.output_mapping[{j}]", f"field {m} of {len(out)}")
        out = out.select(picked)
    if common is not None and common.HasField("hint") and common.hint.output_names:
        names = list(common.hint.output_names)
        if len(names) in (len(out), out.flat_name_count):
            out = out.with_names(names)
        elif ctx.full:
            ctx.warn(f"{bpath}.common.hint.output_names", f"{len(names)} output names for {len(out)} columns")
    return out


def _direct_output(kind: str, body, inputs: list[Schema], ctx: _Ctx, bpath: str) -> Schema:
    full = ctx.full
    if kind == "read":
        return _read_output(body, ctx, bpath)
    if kind == "filter":
        if full:
            _condition(body.condition, inputs[0], ctx, f"{bpath}.condition", "filter condition")
        return inputs[0]
    if kind == "fetch":
        if full:
            for name in ("offset_expr", "count_expr"):
                if body.HasField(name):
                    _expr(getattr(body, name), inputs[0], ctx, f"{bpath}.{name}")
        return inputs[0]
    if kind == "sort":
        if full:
            _sorts(body.sorts, inputs[0], ctx, bpath)
        return inputs[0]
    if kind == "top_n":
        if full:
            _sorts(body.sorts, inputs[0], ctx, bpath)
            for name in ("offset", "count"):
                if body.HasField(name):
                    _expr(getattr(body, name), inputs[0], ctx, f"{bpath}.{name}")
        return inputs[0]
    if kind == "exchange":
        if full:
            _exchange_check(body, inputs[0], ctx, bpath)
        return inputs[0]
    if kind == "project":
        src = inputs[0]
        names = list(src.names)
        types = list(src.types)
        for i, e in enumerate(body.expressions):
            types.append(_expr(e, src, ctx, f"{bpath}.expressions[{i}]"))
            names.append(_name_for(e, src, f"expr_{i}"))
        return Schema(names, types, src._nested() + [[] for _ in body.expressions])
    if kind == "aggregate":
        return _aggregate_output(body, inputs[0], ctx, bpath)
    if kind in ("join", "lateral_join"):
        both = inputs[0].concat(inputs[1])
        out = _join_output(join_type_name(body), inputs[0], inputs[1], ctx, bpath)
        if full:
            if body.HasField("expression"):
                _condition(body.expression, both, ctx, f"{bpath}.expression", "join expression")
            elif kind == "join":
                # DataFusion writes CROSS JOIN as an inner JoinRel without expression: read as true.
                if ctx.problems is not None:
                    ctx.problems.append(Problem(
                        f"{bpath}.expression",
                        "producer quirk: join has no expression, read as true (a cross product)", quirk=True))
            if body.HasField("post_join_filter"):
                _condition(body.post_join_filter, out, ctx, f"{bpath}.post_join_filter", "post-join filter")
        return out
    if kind in ("hash_join", "merge_join"):
        left, right = inputs
        out = _join_output(join_type_name(body), left, right, ctx, bpath)
        if full:
            for k, key in enumerate(body.keys):
                kp = f"{bpath}.keys[{k}]"
                lt = _field_ref_type(key.left, left, ctx, f"{kp}.left")
                rt = _field_ref_type(key.right, right, ctx, f"{kp}.right")
                if not same_type_class(lt, rt) and type_kind(lt) != type_kind(rt):
                    ctx.warn(kp, f"join key compares {type_name(lt)} with {type_name(rt)}")
                if key.comparison.WhichOneof("inner_type") == "custom_function_reference":
                    ctx.function(key.comparison.custom_function_reference, f"{kp}.comparison")
            if body.HasField("residual_expression"):
                _condition(
                    body.residual_expression,
                    left.concat(right),
                    ctx,
                    f"{bpath}.residual_expression",
                    "residual expression",
                )
            if body.HasField("post_join_filter"):
                _condition(body.post_join_filter, out, ctx, f"{bpath}.post_join_filter", "post-join filter")
        return out
    if kind == "nested_loop_join":
        out = _join_output(join_type_name(body), inputs[0], inputs[1], ctx, bpath)
        if full and body.HasField("expression"):
            _condition(
                body.expression, inputs[0].concat(inputs[1]), ctx, f"{bpath}.expression", "join expression"
            )
        return out
    if kind == "cross":
        return inputs[0].concat(inputs[1])
    if kind == "set":
        return _set_output(body, inputs, ctx, bpath)
    if kind == "reference":
        return inputs[0]
    if kind == "extension_single":
        return inputs[0]
    if kind in ("extension_multi", "extension_leaf"):
        raise UnsupportedError(f"the output of an {kind} relation is not known (opaque extension)", bpath)
    if kind == "window":
        return _window_output(body, inputs[0], ctx, bpath)
    if kind == "expand":
        return _expand_output(body, inputs[0], ctx, bpath)
    if kind == "write":
        return _write_output(body, inputs[0], ctx, bpath)
    if kind == "update":
        return _update_output(body, ctx, bpath)
    if kind == "ddl":
        return Schema.empty()
    raise UnsupportedError(f"relation kind {kind} is not supported", bpath)


def _read_output(body, ctx: _Ctx, bpath: str) -> Schema:
    if not body.HasField("base_schema"):
        rows = body.virtual_table.expressions if body.WhichOneof("read_type") == "virtual_table" else []
        if not rows:
            ctx.fail(f"{bpath}.base_schema", "read has no base_schema")
            return Schema.empty()
        # Older DuckDB wrote virtual tables without a schema: take the types of the rows' values.
        width = len(rows[0].fields)
        columns: list[list[Type]] = [[] for _ in range(width)]
        for r, row in enumerate(rows):
            for c, e in enumerate(row.fields[:width]):
                columns[c].append(
                    _expr(e, Schema.empty(), ctx, f"{bpath}.virtual_table.expressions[{r}].fields[{c}]")
                )
        return Schema([f"col_{c}" for c in range(width)], [_merge_nullability(ts) for ts in columns])
    ns = body.base_schema
    if ns.names and not ns.struct.types:
        # Older DataFusion wrote names only: the columns are known, their types are not.
        base = Schema(list(ns.names), [Type() for _ in ns.names])
    else:
        base = Schema.from_named_struct(ns, f"{bpath}.base_schema")
    if ctx.full:
        for name in ("filter", "best_effort_filter"):
            if body.HasField(name):
                _condition(
                    getattr(body, name), base, ctx, f"{bpath}.{name}", f"read {name.replace('_', ' ')}"
                )
        if body.WhichOneof("read_type") == "virtual_table":
            for r, row in enumerate(body.virtual_table.expressions):
                rpath = f"{bpath}.virtual_table.expressions[{r}]"
                if len(row.fields) != len(base):
                    ctx.warn(rpath, f"virtual table row has {len(row.fields)} values for {len(base)} columns")
                for c, e in enumerate(row.fields):
                    _expr(e, Schema.empty(), ctx, f"{rpath}.fields[{c}]")
    if not body.HasField("projection"):
        return base
    items = body.projection.select.struct_items
    picked: list[int] = []
    types: list[Type] = []
    nested = base._nested()
    nested_out: list[list[str]] = []
    for j, item in enumerate(items):
        ipath = f"{bpath}.projection.select.struct_items[{j}]"
        if not 0 <= item.field < len(base):
            ctx.fail(ipath, f"field {item.field} of {len(base)}")
            continue
        t = base.types[item.field]
        picked.append(item.field)
        if item.HasField("child"):
            t2 = _select_type(item.child, t, ctx, f"{ipath}.child")
            nested_out.append(nested[item.field] if type_name(t2) == type_name(t) else [])
            t = t2
        else:
            nested_out.append(nested[item.field])
        types.append(t)
    return Schema([base.names[i] for i in picked], types, nested_out)


def _aggregate_output(body, src: Schema, ctx: _Ctx, bpath: str) -> Schema:
    n_keys = len(body.grouping_expressions)
    key_types = [
        _expr(e, src, ctx, f"{bpath}.grouping_expressions[{i}]")
        for i, e in enumerate(body.grouping_expressions)
    ]
    in_all = [True] * n_keys
    used = [False] * n_keys
    for g, grouping in enumerate(body.groupings):
        refs = set()
        for j, r in enumerate(grouping.expression_references):
            if r >= n_keys:
                ctx.fail(
                    f"{bpath}.groupings[{g}].expression_references[{j}]",
                    f"grouping expression {r} of {n_keys}",
                )
                continue
            refs.add(r)
            used[r] = True
        for i in range(n_keys):
            if i not in refs:
                in_all[i] = False
    if ctx.full:
        for i in range(n_keys):
            if not used[i]:
                ctx.warn(
                    f"{bpath}.grouping_expressions[{i}]", "grouping expression is not used by any grouping"
                )
    names: list[str] = []
    types: list[Type] = []
    for i, e in enumerate(body.grouping_expressions):
        t = key_types[i]
        if not in_all[i] and len(body.groupings) > 1:
            t = with_nullability(t, NULLABLE)
        types.append(t)
        names.append(_name_for(e, src, f"group_{i}"))
    for m, measure in enumerate(body.measures):
        mpath = f"{bpath}.measures[{m}]"
        types.append(_measure_type(measure.measure, src, ctx, f"{mpath}.measure"))
        names.append(f"measure_{m}")
        if ctx.full and measure.HasField("filter"):
            _condition(measure.filter, src, ctx, f"{mpath}.filter", "measure filter")
    if len(body.groupings) > 1:
        types.append(make_type("i32"))
        names.append("grouping_set")
    if ctx.full and not types:
        ctx.warn(bpath, "aggregate has neither grouping expressions nor measures (zero columns)")
    return Schema(names, types)


def _measure_type(fn: AggregateFunction, src: Schema, ctx: _Ctx, path: str) -> Type:
    ctx.function(fn.function_reference, path)
    if ctx.full:
        _arguments(fn.arguments, src, ctx, path)
        _sorts(fn.sorts, src, ctx, path)
    return _output_type(fn, ctx, path, "aggregate function", src)


def _set_output(body, inputs: list[Schema], ctx: _Ctx, bpath: str) -> Schema:
    first = inputs[0]
    if ctx.full and len(inputs) < 2:
        ctx.warn(f"{bpath}.inputs", f"a set operation needs at least 2 inputs, got {len(inputs)}")
    same_width = [first]
    for i, s in enumerate(inputs[1:], start=1):
        if len(s) != len(first):
            ctx.fail(f"{bpath}.inputs[{i}]", f"set input {i} has {len(s)} columns, input 0 has {len(first)}")
            continue
        same_width.append(s)
        if ctx.full:
            for c, (a, b) in enumerate(zip(first.types, s.types, strict=True)):
                if _known(a) and _known(b) and type_kind(a) != type_kind(b):
                    ctx.warn(
                        f"{bpath}.inputs[{i}]",
                        f"set input {i} column {c} is {type_name(b)}, input 0 has {type_name(a)}",
                    )
    op = body.op
    if op == body.SET_OP_UNSPECIFIED and ctx.full:
        ctx.warn(f"{bpath}.op", "set operation is unspecified")
    types: list[Type] = []
    for c, t in enumerate(first.types):
        flags = [is_nullable(s.types[c]) for s in same_width]
        if op in (body.SET_OP_MINUS_PRIMARY, body.SET_OP_MINUS_PRIMARY_ALL, body.SET_OP_MINUS_MULTISET):
            nullable = flags[0]
        elif op == body.SET_OP_INTERSECTION_PRIMARY:
            nullable = flags[0] and (len(flags) == 1 or any(flags[1:]))
        elif op in (body.SET_OP_INTERSECTION_MULTISET, body.SET_OP_INTERSECTION_MULTISET_ALL):
            nullable = all(flags)
        else:  # unions (and unspecified): nullable if any input is
            nullable = any(flags)
        types.append(with_nullability(t, nullable) if _known(t) else t)
    return Schema(first.names, types, first._nested())


def _window_output(body, src: Schema, ctx: _Ctx, bpath: str) -> Schema:
    if ctx.full:
        for i, p in enumerate(body.partition_expressions):
            _expr(p, src, ctx, f"{bpath}.partition_expressions[{i}]")
        _sorts(body.sorts, src, ctx, bpath)
    names = list(src.names)
    types = list(src.types)
    for i, fn in enumerate(body.window_functions):
        fpath = f"{bpath}.window_functions[{i}]"
        ctx.function(fn.function_reference, fpath)
        if ctx.full:
            _arguments(fn.arguments, src, ctx, fpath)
            _bounds(fn, src, ctx, fpath)
        types.append(_output_type(fn, ctx, fpath, "window function", src))
        names.append(f"window_{i}")
    return Schema(names, types, src._nested() + [[] for _ in body.window_functions])


def _expand_output(body, src: Schema, ctx: _Ctx, bpath: str) -> Schema:
    names: list[str] = []
    types: list[Type] = []
    n_dups: int | None = None
    for i, f in enumerate(body.fields):
        fpath = f"{bpath}.fields[{i}]"
        which = f.WhichOneof("field_type")
        if which == "consistent_field":
            types.append(_expr(f.consistent_field, src, ctx, f"{fpath}.consistent_field"))
            names.append(_name_for(f.consistent_field, src, f"expand_{i}"))
        elif which == "switching_field":
            dups = f.switching_field.duplicates
            if not dups:
                types.append(ctx.fail(f"{fpath}.switching_field", "switching field has no duplicates"))
                names.append(f"expand_{i}")
                continue
            if n_dups is None:
                n_dups = len(dups)
            elif ctx.full and len(dups) != n_dups:
                ctx.warn(
                    f"{fpath}.switching_field",
                    f"switching field has {len(dups)} duplicates, others have {n_dups}",
                )
            dtypes = [
                _expr(d, src, ctx, f"{fpath}.switching_field.duplicates[{j}]") for j, d in enumerate(dups)
            ]
            if ctx.full:
                for j, t in enumerate(dtypes[1:], start=1):
                    if _known(t) and _known(dtypes[0]) and type_kind(t) != type_kind(dtypes[0]):
                        ctx.warn(
                            f"{fpath}.switching_field.duplicates[{j}]",
                            f"duplicate is {type_name(t)}, duplicate 0 is {type_name(dtypes[0])}",
                        )
            types.append(_merge_nullability(dtypes))
            names.append(_name_for(dups[0], src, f"expand_{i}"))
        else:
            types.append(ctx.fail(fpath, "expand field is neither a switching nor a consistent field"))
            names.append(f"expand_{i}")
    return Schema(names, types)


def _write_output(body, src: Schema, ctx: _Ctx, bpath: str) -> Schema:
    table = (
        Schema.from_named_struct(body.table_schema, f"{bpath}.table_schema")
        if body.HasField("table_schema")
        else None
    )
    if ctx.full and table is not None and len(src) != len(table):
        ctx.warn(bpath, f"write input has {len(src)} columns, table_schema has {len(table)}")
    mode = body.output
    if mode == body.OUTPUT_MODE_NO_OUTPUT:
        return Schema.empty()
    if mode == body.OUTPUT_MODE_MODIFIED_RECORDS:
        return table if table is not None else src
    return Schema(["count"], [make_type("i64")])


def _update_output(body, ctx: _Ctx, bpath: str) -> Schema:
    if ctx.full:
        if not body.HasField("table_schema"):
            ctx.fail(f"{bpath}.table_schema", "update has no table_schema")
        else:
            table = Schema.from_named_struct(body.table_schema, f"{bpath}.table_schema")
            if body.HasField("condition"):
                _condition(body.condition, table, ctx, f"{bpath}.condition", "update condition")
            for i, tr in enumerate(body.transformations):
                tpath = f"{bpath}.transformations[{i}]"
                if not 0 <= tr.column_target < len(table):
                    ctx.fail(f"{tpath}.column_target", f"field {tr.column_target} of {len(table)}")
                _expr(tr.transformation, table, ctx, f"{tpath}.transformation")
    return Schema(["count"], [make_type("i64")])


def _exchange_check(body, src: Schema, ctx: _Ctx, bpath: str) -> None:
    which = body.WhichOneof("exchange_kind")
    if which == "scatter_by_fields":
        for i, f in enumerate(body.scatter_by_fields.fields):
            _field_ref_type(f, src, ctx, f"{bpath}.scatter_by_fields.fields[{i}]")
    elif which in ("single_target", "multi_target"):
        _expr(getattr(body, which).expression, src, ctx, f"{bpath}.{which}.expression")


def _tree(rel: Rel, ctx: _Ctx, path: str) -> Schema | None:
    """Schema of a whole relation tree; None (checking mode) when a problem already made it unknowable."""
    kind = rel.WhichOneof("rel_type")
    if kind is None:
        ctx.fail(path, "relation has no type (empty Rel)")
        return None
    body = getattr(rel, kind)
    bpath = f"{path}.{kind}"
    if kind == "reference":
        schema = _reference(body.subtree_ordinal, ctx, bpath)
        if schema is not None and ctx.schemas is not None:
            ctx.schemas[path] = schema
        return schema

    inputs: list[Schema] = []
    missing = False
    for name, repeated in _input_fields(kind):
        if repeated:
            children = [(c, f"{bpath}.{name}[{i}]") for i, c in enumerate(getattr(body, name))]
        elif body.HasField(name):
            children = [(getattr(body, name), f"{bpath}.{name}")]
        elif kind == "ddl":
            children = []
        else:
            ctx.fail(f"{bpath}.{name}", f"{kind} relation has no {name} relation")
            missing = True
            continue
        for child, child_path in children:
            if kind == "lateral_join" and name == "right" and inputs:
                common = body.common
                if common.HasField("rel_anchor"):
                    ctx.anchors[common.rel_anchor] = inputs[0]
            s = _tree(child, ctx, child_path)
            if s is None:
                missing = True
            else:
                inputs.append(s)
    if missing:
        return None
    if kind == "ddl":
        inputs = []  # the view definition is not an input of the DDL's output
    if not ctx.checking:
        schema = _rel(rel, inputs, ctx, path)
    else:
        try:
            schema = _rel(rel, inputs, ctx, path)
        except UnsupportedError:
            return None
        except PlanError as exc:
            ctx.problems.append(Problem(exc.path or path, exc.message))
            return None
    if ctx.schemas is not None:
        ctx.schemas[path] = schema
    return schema


def _plan_rel_tree(entry: PlanRel, index: int) -> tuple[Rel, str]:
    if entry.WhichOneof("rel_type") == "root":
        return entry.root.input, f"relations[{index}].root.input"
    return entry.rel, f"relations[{index}].rel"


def _reference(ordinal: int, ctx: _Ctx, path: str) -> Schema | None:
    if ctx.plan_relations is None:
        ctx.fail(path, "ReferenceRel outside a plan (no plan relations to resolve it)")
        return None
    if not 0 <= ordinal < len(ctx.plan_relations):
        ctx.fail(f"{path}.subtree_ordinal", f"subtree {ordinal} of {len(ctx.plan_relations)} plan relations")
        return None
    if ordinal in ctx.ref_cache:
        return ctx.ref_cache[ordinal]
    if ordinal in ctx.ref_active:
        ctx.fail(f"{path}.subtree_ordinal", f"cycle of references through subtree {ordinal}")
        return None
    entry = ctx.plan_relations[ordinal]
    if entry.WhichOneof("rel_type") is None:
        ctx.fail(f"relations[{ordinal}]", "plan relation is neither a root nor a rel")
        return None
    rel, rel_path = _plan_rel_tree(entry, ordinal)
    saved_outer, saved_detached = ctx.outer, ctx.detached
    ctx.outer, ctx.detached = [], list(entry.detached_expressions)
    ctx.ref_active.add(ordinal)
    try:
        schema = _tree(rel, ctx, rel_path)
    finally:
        ctx.ref_active.discard(ordinal)
        ctx.outer, ctx.detached = saved_outer, saved_detached
    ctx.ref_cache[ordinal] = schema
    return schema


# ---------------------------------------------------------------------------------------------
# Public API
# ---------------------------------------------------------------------------------------------


@_guard("path")
def rel_schema(
    rel: Rel,
    input_schemas: Sequence[Schema],
    functions: FunctionTable | None = None,
    path: str = "",
    *,
    outer_schemas: Sequence[Schema] | None = None,
    anchors: dict[int, Schema] | None = None,
) -> Schema:
    """The output schema of ONE relation, given its inputs' output schemas (in slot order).

    The relation's own input fields are ignored (they may be cleared); a ``reference`` takes the
    referenced subtree's schema as ``input_schemas[0]``. ``common.emit`` and
    ``common.hint.output_names`` are applied. Only the expressions that define output columns are
    typed (use :func:`check_plan` to validate the rest). ``outer_schemas`` (innermost last) and
    ``anchors`` (``rel_anchor`` -> record) resolve outer references of correlated subtrees.

    >>> from substrait.proto import JoinRel
    >>> left = Schema(["a"], [make_type("i64")])
    >>> right = Schema(["b"], [make_type("string")])
    >>> join = Rel(join=JoinRel(type=JoinRel.JOIN_TYPE_LEFT))
    >>> str(rel_schema(join, [left, right]))
    'a: i64, b: string?'
    >>> join.join.common.emit.output_mapping.extend([1])
    >>> str(rel_schema(join, [left, right]))
    'b: string?'
    """
    ctx = _Ctx(functions, outer=outer_schemas, anchors=anchors)
    return _rel(rel, list(input_schemas), ctx, path)


@_guard("path")
def tree_schema(
    rel: Rel,
    functions: FunctionTable | None = None,
    path: str = "",
    outer_schemas: Sequence[Schema] | None = None,
    plan_relations: Sequence[PlanRel] | None = None,
    *,
    anchors: dict[int, Schema] | None = None,
) -> Schema:
    """The output schema of a whole ``Rel`` tree (recursing into inputs; ``ReferenceRel`` resolved
    against ``plan_relations``, e.g. ``plan.relations``)."""
    ctx = _Ctx(functions, plan_relations=plan_relations, outer=outer_schemas, anchors=anchors)
    schema = _tree(rel, ctx, path)
    assert schema is not None  # strict mode raises instead
    return schema


@_guard("path")
def expression_type(
    expr: Expression,
    input_schema: Schema,
    functions: FunctionTable | None = None,
    path: str = "",
    outer_schemas: Sequence[Schema] | None = None,
    *,
    plan_relations: Sequence[PlanRel] | None = None,
    anchors: dict[int, Schema] | None = None,
) -> Type:
    """The type of ``expr`` evaluated on records of ``input_schema``.

    ``outer_schemas`` are the records of the enclosing queries for outer references, innermost last.

    >>> e = Expression()
    >>> e.selection.direct_reference.struct_field.field = 1
    >>> type_name(expression_type(e, Schema(["a", "b"], [make_type("i64"), make_type("date", nullable=True)])))
    'date?'
    >>> e.selection.direct_reference.struct_field.field = 5
    >>> expression_type(e, Schema(["a"], [make_type("i64")]), path="x")
    Traceback (most recent call last):
    ...
    optimizer.errors.PlanError: x.selection: field 5 of 1
    """
    ctx = _Ctx(functions, plan_relations=plan_relations, outer=outer_schemas, anchors=anchors)
    return _expr(expr, input_schema, ctx, path)


@_guard("path")
def measure_type(
    fn: AggregateFunction, input_schema: Schema, functions: FunctionTable | None = None, path: str = ""
) -> Type:
    """The type of an aggregate function (an ``AggregateRel`` measure): its ``output_type``."""
    return _measure_type(fn, input_schema, _Ctx(functions), path)


def root_schema(schema: Schema, names: Sequence[str]) -> Schema:
    """``schema`` renamed with ``RelRoot.names`` (depth-first, nested names included; top-level-only
    lists are tolerated); names that fit neither way are ignored."""
    names = list(names)
    if names and len(names) in (len(schema), schema.flat_name_count):
        return schema.with_names(names)
    return schema


def _plan_walk(plan: Plan, ctx: _Ctx) -> None:
    for index, entry in enumerate(plan.relations):
        which = entry.WhichOneof("rel_type")
        if which is None:
            ctx.fail(f"relations[{index}]", "plan relation is neither a root nor a rel")
            continue
        if index in ctx.ref_cache:
            schema = ctx.ref_cache[index]
        else:
            schema = _reference(index, ctx, f"relations[{index}]")
        if which != "root" or schema is None:
            continue
        names = list(entry.root.names)
        if ctx.full and len(names) != schema.flat_name_count:
            detail = f"{len(schema)} columns"
            if schema.flat_name_count != len(schema):
                nested = schema.flat_name_count - len(schema)
                detail = f"{schema.flat_name_count} named fields ({len(schema)} columns and {nested} nested struct fields)"
            ctx.warn(
                f"relations[{index}].root.names", f"RelRoot has {len(names)} names but its input has {detail}"
            )
        if ctx.schemas is not None:
            ctx.schemas[f"relations[{index}].root"] = root_schema(schema, names)


#: Producers whose ``ProjectRel`` without ``emit`` outputs only its expressions, where Substrait says input
#: columns + expressions: DataFusion before apache/datafusion#12495 (2024) and DuckDB's substrait extension
#: (1.1.3 included, see substrait-io/duckdb-substrait-extension#135). Compared with ``plan.version.producer``.
LEGACY_PROJECT_PRODUCERS: tuple[str, ...] = (
    "duckdb", "datafusion",
    "substrait-optimizer for duckdb",  # a plan this tool wrote for the duckdb target (optimizer.write)
)


def legacy_project_producer(plan: Plan) -> str | None:
    """The producer name when ``plan`` comes from a producer of :data:`LEGACY_PROJECT_PRODUCERS`, else None."""
    producer = plan.version.producer.strip()
    if producer.lower() not in LEGACY_PROJECT_PRODUCERS:
        return None
    # DataFusion writes explicit emits since apache/datafusion#12495 (Substrait 0.5x era); its plans
    # of today (minor 85 with DataFusion 55) mean what the spec says. DuckDB 1.1.3 writes minor 53.
    if producer.lower() == "datafusion" and plan.version.major_number == 0 and plan.version.minor_number >= 60:
        return None
    return producer


def _legacy_projects(plan: Plan) -> Iterator[tuple[Rel, str]]:
    if legacy_project_producer(plan) is None:
        return
    for rel, path in rels_with_paths(plan):
        if rel.WhichOneof("rel_type") == "project" and rel.project.common.WhichOneof("emit_kind") != "emit":
            yield rel, path


def conform_legacy_projects(plan: Plan) -> int:
    """Make the projects of a DuckDB / older DataFusion plan say what their producer meant, in place.

    Those producers write a ``ProjectRel`` without ``emit`` meaning "only the expressions"; Substrait reads
    it as "input columns, then the expressions". This gives each such project the explicit
    ``emit = [n_in .. n_in + n_expr - 1]`` (children first, so the widths are right). Plans of other
    producers are left alone. Returns the number of projects changed.
    """
    if legacy_project_producer(plan) is None:
        return 0
    try:
        functions: FunctionTable | None = function_table(plan)
    except PlanError:
        functions = None
    changed = 0
    for rel, path in list(_legacy_projects(plan)):
        ctx = _Ctx(functions, problems=[], plan_relations=plan.relations)
        width = _tree(rel.project.input, ctx, f"{path}.project.input")
        if width is None:
            raise PlanError(
                "cannot tell how many columns the project's input has: "
                + "; ".join(map(str, ctx.problems[:1])),
                f"{path}.project",
            )
        n = len(width)
        # SetInParent: a project of no expressions outputs no columns, which an empty emit must say.
        rel.project.common.emit.SetInParent()
        rel.project.common.emit.output_mapping.extend(range(n, n + len(rel.project.expressions)))
        changed += 1
    return changed


@_guard("path")
def plan_schemas(plan: Plan) -> dict[str, Schema]:
    """The schema of every relation of ``plan`` (subqueries included), keyed by path.

    Keys are relation paths such as ``relations[0].root.input.join.left``; each ``RelRoot`` also gets
    ``relations[i].root``: its input's schema renamed with ``RelRoot.names``. Raises
    :class:`~optimizer.errors.PlanError` on the first problem.
    """
    schemas: dict[str, Schema] = {}
    ctx = _Ctx(function_table(plan), full=True, plan_relations=plan.relations, schemas=schemas)
    _plan_walk(plan, ctx)
    return schemas


def check_plan(plan: Plan) -> list[Problem]:
    """Every problem found cheaply in ``plan`` (empty when none), children before parents.

    Relations whose schema cannot be known (opaque extensions) and everything above them are skipped.
    """
    problems: list[Problem] = []
    try:
        functions: FunctionTable | None = function_table(plan)
    except PlanError as exc:
        problems.append(Problem(exc.path or "extensions", exc.message))
        functions = None
    if not plan.relations:
        problems.append(Problem("relations", "plan has no relations"))
        return problems
    producer = legacy_project_producer(plan)
    for _rel_msg, path in _legacy_projects(plan):
        problems.append(
            Problem(
                f"{path}.project",
                f"ProjectRel without emit written by {producer}, which means only its expressions while "
                "Substrait means input columns + expressions (conform_legacy_projects() makes it explicit)",
            )
        )
    ctx = _Ctx(functions, problems=problems, plan_relations=plan.relations)
    try:
        _plan_walk(plan, ctx)
    except OptimizerError as exc:  # pragma: no cover - defensive: checking mode records instead
        problems.append(Problem(exc.path or "", exc.message))
    except (IndexError, KeyError, AttributeError, TypeError, ValueError) as exc:  # pragma: no cover
        problems.append(Problem("", f"malformed plan ({type(exc).__name__}: {exc})"))
    return problems


def raise_for_problems(plan: Plan) -> None:
    """Raise a one-line :class:`~optimizer.errors.PlanError` for the first problem of ``plan`` that is not a
    producer quirk, if any."""
    problems = [p for p in check_plan(plan) if not p.quirk]
    if not problems:
        return
    first = problems[0]
    more = len(problems) - 1
    suffix = f" (and {more} more problem{'s' if more > 1 else ''})" if more else ""
    raise PlanError(first.message + suffix, first.path or None)
