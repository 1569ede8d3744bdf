"""Output schemas of Substrait relations, types of expressions, and a cheap plan checker.

A :class:`Schema` is the record a relation produces: one top-level name and one ``substrait.proto.Type``
per column. Names come from the plan where it has them (``ReadRel.base_schema``, ``RelRoot.names``,
``RelCommon.hint.output_names``); a plain field reference keeps the referenced column's name; other
computed columns get stable invented names: ``expr_<i>`` (project expression ``i``), ``group_<i>``,
``measure_<i>``, ``grouping_set``, ``window_<i>``, ``expand_<i>``, ``mark``, ``count``. Names need not
be unique (a self-join repeats its columns' names): address columns by position.

This package derives them; its front door is here:

* :func:`rel_schema` derives the output of ONE relation from its inputs' schemas (it never looks at
  the relation's input fields, so it works on the DAG nodes of :mod:`optimizer.dag`); the relation's
  ``common.emit`` is applied.
* :func:`tree_schema` derives the output of a whole ``Rel`` tree (subqueries, ``ReferenceRel`` via
  ``plan_relations``); :func:`plan_schemas` the schema of every relation of a plan, by path.
* :func:`expression_type` types one expression against its input record.

Its modules, each on the one below it:

* :mod:`~optimizer.schema.types`: building, reading and printing ``Type`` (the one type printer,
  :func:`~optimizer.schema.types.type_name`, which explain's tree uses too).
* :mod:`~optimizer.schema.record`: :class:`~optimizer.schema.record.Schema`, the record.
* :mod:`~optimizer.schema.derivation`: the state of one derivation, strict or checking.
* :mod:`~optimizer.schema.expressions`: the type of an expression, literals included.
* :mod:`~optimizer.schema.relations`: the output of each kind of relation, of a tree and of a plan.
* :mod:`~optimizer.schema.check`: :func:`~optimizer.schema.check.check_plan` lists the problems it can
  find cheaply (out-of-range field references and emits, unknown function anchors, non-boolean
  conditions, set inputs of different widths, RelRoot name counts, ...), each as a
  :class:`~optimizer.schema.derivation.Problem` with the path of the offending message;
  :func:`~optimizer.schema.check.raise_for_problems` raises the first as a
  :class:`~optimizer.errors.PlanError`.

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
  from its argument types (:func:`~optimizer.schema.expressions.derive_output_type`); a ``base_schema`` with names but no types
  (older DataFusion) gives columns of unknown type (an empty ``Type()``, ``type_name`` "unknown"); a
  virtual table without ``base_schema`` (older DuckDB) takes its rows' types, columns ``col_<i>``.
* DuckDB and DataFusion before 2024 write a ``ProjectRel`` without ``emit`` meaning "only the
  expressions". check_plan reports such projects;
  :func:`optimizer.load.producer_quirks.conform_legacy_projects` rewrites them with the explicit emit
  when the plan is loaded.
* Outer references: ``outer_schemas`` is a stack, innermost (the record the subquery expression is
  evaluated on) last; ``steps_out = 1`` is ``outer_schemas[-1]``. ``rel_reference`` resolves to the
  input record of the relation whose ``common.rel_anchor`` it names (for a ``lateral_join``, its
  left input).

>>> from optimizer.plan_io import load_plan
>>> from optimizer.schema.check import check_plan
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
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from substrait.proto import AggregateFunction, Expression, Plan, PlanRel, Rel, Type

from optimizer.errors import OptimizerError, PlanError
from optimizer.load.functions import FunctionTable
from optimizer.schema.derivation import Derivation, plan_functions
from optimizer.schema.expressions import aggregate_type, expr_type
from optimizer.schema.record import Schema
from optimizer.schema.relations import rel_output, tree_output, walk_plan

__all__ = ["expression_type", "measure_type", "plan_schemas", "rel_schema", "tree_schema"]

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
    typed (use :func:`~optimizer.schema.check.check_plan` to validate the rest). ``outer_schemas`` (innermost last) and
    ``anchors`` (``rel_anchor`` -> record) resolve outer references of correlated subtrees.

    >>> from substrait.proto import JoinRel
    >>> from optimizer.schema.types import make_type
    >>> left = Schema(["a"], [make_type("i64")])
    >>> right = Schema(["b"], [make_type("string")])
    >>> join = Rel(join=JoinRel(type=JoinRel.JOIN_TYPE_LEFT))
    >>> str(rel_schema(join, [left, right]))
    'a: i64, b: string?'
    >>> join.join.common.emit.output_mapping.extend([1])
    >>> str(rel_schema(join, [left, right]))
    'b: string?'
    """
    ctx = Derivation(functions, outer=outer_schemas, anchors=anchors, tree=tree_output)
    return rel_output(rel, list(input_schemas), ctx, path)


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
    ctx = Derivation(
        functions, plan_relations=plan_relations, outer=outer_schemas, anchors=anchors, tree=tree_output
    )
    schema = tree_output(rel, ctx, path)
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

    >>> from optimizer.schema.types import make_type, type_name
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
    ctx = Derivation(
        functions, plan_relations=plan_relations, outer=outer_schemas, anchors=anchors, tree=tree_output
    )
    return expr_type(expr, input_schema, ctx, path)


@_guard("path")
def measure_type(
    fn: AggregateFunction, input_schema: Schema, functions: FunctionTable | None = None, path: str = ""
) -> Type:
    """The type of an aggregate function (an ``AggregateRel`` measure): its ``output_type``."""
    return aggregate_type(fn, input_schema, Derivation(functions, tree=tree_output), path)


def _derive(plan: Plan, functions: FunctionTable | None, **hooks) -> None:
    """Walk ``plan`` deriving every schema and type in full, as :func:`plan_schemas` does; ``hooks``: the
    :class:`Derivation` lists to fill (``schemas``, ``casts``, ``unstated``, ``calls``)."""
    hooks.setdefault("schemas", {})
    ctx = Derivation(
        functions if functions is not None else plan_functions(plan), full=True, plan_relations=plan.relations,
        tree=tree_output, **hooks
    )
    walk_plan(plan, ctx)


@_guard("path")
def plan_casts(plan: Plan, functions: FunctionTable | None = None) -> list[tuple[str, Type, Type]]:
    """Every cast of ``plan``'s expressions as (path, the type of its input, the type it casts to), derived
    as :func:`plan_schemas` derives the schemas (a shared subtree's casts once, at its first use)."""
    casts: list[tuple[str, Type, Type]] = []
    _derive(plan, functions, casts=casts)
    return casts


@_guard("path")
def plan_unstated_types(
    plan: Plan, functions: FunctionTable | None = None
) -> list[tuple[Expression.IfThen | Expression.ScalarFunction, Type]]:
    """Every ``if_then`` of ``plan``'s expressions without an ``else`` and every scalar function without
    an ``output_type``, as (the message itself, in the plan, and its derived type), derived as
    :func:`plan_schemas` derives the schemas (a shared subtree's once)."""
    found: list[tuple[Expression.IfThen | Expression.ScalarFunction, Type]] = []
    _derive(plan, functions, unstated=found)
    return found


@_guard("path")
def plan_calls(plan: Plan, functions: FunctionTable | None = None) -> list[tuple[Expression.ScalarFunction, list[Type]]]:
    """Every scalar function of ``plan``'s expressions, as (the message itself, in the plan, and the types
    of its value arguments), derived as :func:`plan_schemas` derives the schemas."""
    found: list[tuple[Expression.ScalarFunction, list[Type]]] = []
    _derive(plan, functions, calls=found)
    return found


def plan_schemas(plan: Plan, functions: FunctionTable | None = None) -> dict[str, Schema]:
    """The schema of every relation of ``plan`` (subqueries included), keyed by path; ``functions``: the
    plan's table, where the caller has it (built from the plan when not given).

    Keys are relation paths such as ``relations[0].root.input.join.left``; each ``RelRoot`` also gets
    ``relations[i].root``: its input's schema renamed with ``RelRoot.names``. Raises
    :class:`~optimizer.errors.PlanError` on the first problem.
    """
    schemas: dict[str, Schema] = {}
    _derive(plan, functions, schemas=schemas)
    return schemas

