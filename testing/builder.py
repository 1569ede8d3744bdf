"""Substrait plans built by hand, and a compact tree of them: for examples, doctests and tests.

>>> b = Builder()
>>> t = read("t", [("a", "i64"), ("b", "i64")])
>>> print(tree(b.plan(fetch(sort(filter_(t, b.call("gt", ref(1), lit(5))), (1, DESC_NL)), 3), ["a", "b"])))
Fetch(count=3)
  Sort(b#1 DESC NULLS LAST)
    Filter((b#1 > 5))
      Read(t)

Columns are nullable; functions are declared by bare name (as DataFusion writes them), each call
declaring its function in the plan ``Builder.plan`` writes.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from typing import Any

from substrait.proto import (
    AggregateFunction,
    AggregateRel,
    AggregationPhase,
    CrossRel,
    Expression,
    FetchRel,
    FilterRel,
    JoinRel,
    NamedStruct,
    Plan,
    ProjectRel,
    ReadRel,
    Rel,
    RelCommon,
    RelRoot,
    SortField,
    SortRel,
    Type,
)

from optimizer.dag import annotate_schemas, inputs, to_dag
from optimizer.engine import Rule
from optimizer.errors import UnsupportedError
from optimizer.explain import describe_rel
from optimizer.expr_utils import field
from optimizer.plan_io import mark_conformed

#: The extension URN anchor of a function declared by bare name (no extension file).
NO_EXTENSION = 4294967295
N = Type.NULLABILITY_NULLABLE
ASC_NF, ASC_NL = SortField.SORT_DIRECTION_ASC_NULLS_FIRST, SortField.SORT_DIRECTION_ASC_NULLS_LAST
DESC_NF, DESC_NL = SortField.SORT_DIRECTION_DESC_NULLS_FIRST, SortField.SORT_DIRECTION_DESC_NULLS_LAST
INNER, LEFT, SEMI = JoinRel.JOIN_TYPE_INNER, JoinRel.JOIN_TYPE_LEFT, JoinRel.JOIN_TYPE_LEFT_SEMI


def ty(kind: str) -> Type:
    """A nullable type by name: ``i32``, ``i64``, ``string``, ``bool``, ``fp64``."""
    cls = {"i32": Type.I32, "i64": Type.I64, "string": Type.String, "bool": Type.Boolean, "fp64": Type.FP64}[kind]
    return Type(**{kind: cls(nullability=N)})


def lit(value: Any, kind: str = "i64") -> Expression:
    """A literal (``None``: a null of ``kind``)."""
    e = Expression()
    if value is None:
        e.literal.null.CopyFrom(ty(kind))
    elif kind == "string":
        e.literal.string = value
    elif kind == "bool":
        e.literal.boolean = value
    else:
        setattr(e.literal, kind, value)
    return e


def ref(i: int) -> Expression:
    """A reference to input column ``i``."""
    return field(i)


def outer(i: int, steps_out: int = 1) -> Expression:
    """A reference to column ``i`` of the query ``steps_out`` levels out (inside a subquery)."""
    e = field(i)
    e.selection.ClearField("root_reference")
    e.selection.outer_reference.steps_out = steps_out
    return e


def scalar(rel: Rel) -> Expression:
    """A scalar subquery over ``rel`` (one column, at most one row)."""
    e = Expression()
    e.subquery.scalar.input.CopyFrom(rel)
    return e


def in_subquery(needles: Sequence[Expression], rel: Rel) -> Expression:
    """``(needles...) IN (rel)``."""
    e = Expression()
    e.subquery.in_predicate.haystack.CopyFrom(rel)
    for n in needles:
        e.subquery.in_predicate.needles.add().CopyFrom(n)
    return e


def exists(rel: Rel) -> Expression:
    """``EXISTS (rel)``."""
    e = Expression()
    e.subquery.set_predicate.tuples.CopyFrom(rel)
    e.subquery.set_predicate.predicate_op = Expression.Subquery.SetPredicate.PREDICATE_OP_EXISTS
    return e


def fref(i: int) -> Expression.FieldReference:
    return field(i).selection


class Builder:
    """Collects the functions a hand-built plan calls (declared DataFusion-style: bare names)."""

    def __init__(self) -> None:
        self.anchors: dict[str, int] = {}

    def anchor(self, name: str) -> int:
        return self.anchors.setdefault(name, len(self.anchors) + 1)

    def call(self, name: str, *args: Expression, out: str = "bool") -> Expression:
        e = Expression()
        sf = e.scalar_function
        sf.function_reference = self.anchor(name)
        sf.output_type.CopyFrom(ty(out))
        for a in args:
            sf.arguments.add().value.CopyFrom(a)
        return e

    def agg(self, name: str, *args: Expression, out: str = "i64", distinct: bool = False) -> AggregateFunction:
        fn = AggregateFunction(function_reference=self.anchor(name), output_type=ty(out))
        fn.invocation = (
            AggregateFunction.AGGREGATION_INVOCATION_DISTINCT if distinct else AggregateFunction.AGGREGATION_INVOCATION_ALL
        )
        for a in args:
            fn.arguments.add().value.CopyFrom(a)
        return fn

    def window(self, name: str, *args: Expression, partition: Sequence[int] = (), order: Sequence[int] = (),
               out: str = "i64") -> Expression:
        """A window function over the whole partition (rows unbounded both ways), ordered ascending."""
        e = Expression()
        w = e.window_function
        w.function_reference = self.anchor(name)
        w.output_type.CopyFrom(ty(out))
        w.phase = AggregationPhase.AGGREGATION_PHASE_INITIAL_TO_RESULT
        w.invocation = AggregateFunction.AGGREGATION_INVOCATION_ALL
        w.bounds_type = Expression.WindowFunction.BOUNDS_TYPE_ROWS
        w.lower_bound.unbounded.SetInParent()
        w.upper_bound.unbounded.SetInParent()
        for a in args:
            w.arguments.add().value.CopyFrom(a)
        w.partitions.extend(ref(i) for i in partition)
        w.sorts.extend(SortField(expr=ref(i), direction=ASC_NL) for i in order)
        return e

    def plan(self, rel: Rel, names: list[str], shared: Sequence[Rel] = ()) -> Plan:
        """The plan of ``rel`` (its output named ``names``), declaring the functions called so far;
        ``shared``: relations written as plan relations of their own (read by ``ReferenceRel``)."""
        p = Plan()
        mark_conformed(p)  # built in the spec's conventions: what load_plan makes of a plan
        for name, anchor in self.anchors.items():
            decl = p.extensions.add().extension_function
            decl.function_anchor = anchor
            decl.name = name
            decl.extension_urn_reference = NO_EXTENSION
        for s in shared:
            p.relations.add(rel=s)
        p.relations.add(root=RelRoot(input=rel, names=names))
        return p


def emit(*mapping: int) -> RelCommon:
    return RelCommon(emit=RelCommon.Emit(output_mapping=list(mapping)))


def schema(cols: list[tuple[str, str]]) -> NamedStruct:
    return NamedStruct(names=[c for c, _ in cols], struct=Type.Struct(types=[ty(k) for _, k in cols]))


def read(name: str, cols: list[tuple[str, str]], rows: float | None = None, **kw: Any) -> Rel:
    """A read of table ``name`` with columns ``(name, type)``; ``rows``: its row count, as a hint."""
    rel = Rel(read=ReadRel(base_schema=schema(cols), named_table=ReadRel.NamedTable(names=[name]), **kw))
    if rows is not None:
        rel.read.common.hint.stats.row_count = rows
        rel.read.common.hint.stats.record_size = 8.0 * len(cols)
    return rel


def values(cols: list[tuple[str, str]], rows: list[tuple]) -> Rel:
    vt = ReadRel.VirtualTable()
    for row in rows:
        vt.expressions.add(fields=[lit(v, k) for v, (_, k) in zip(row, cols, strict=True)])
    return Rel(read=ReadRel(base_schema=schema(cols), virtual_table=vt))


def ints(*xs: int | None) -> Rel:
    return values([("x", "i64")], [(x,) for x in xs])


def project(inp: Rel, *exprs: Expression, common: RelCommon | None = None) -> Rel:
    return Rel(project=ProjectRel(input=inp, expressions=list(exprs), common=common))


def filter_(inp: Rel, condition: Expression, common: RelCommon | None = None) -> Rel:
    return Rel(filter=FilterRel(input=inp, condition=condition, common=common))


def sort(inp: Rel, *keys: tuple[int, int]) -> Rel:
    """Sorted by ``(column, direction)`` pairs."""
    return Rel(sort=SortRel(input=inp, sorts=[SortField(expr=ref(i), direction=d) for i, d in keys]))


def fetch(inp: Rel, count: int, offset: int | None = None) -> Rel:
    rel = FetchRel(input=inp, count_expr=lit(count))
    if offset is not None:
        rel.offset_expr.CopyFrom(lit(offset))
    return Rel(fetch=rel)


def join(left: Rel, right: Rel, jt: int, cond: Expression | None = None, **kw: Any) -> Rel:
    j = JoinRel(left=left, right=right, type=jt, **kw)
    if cond is not None:
        j.expression.CopyFrom(cond)
    return Rel(join=j)


def cross(left: Rel, right: Rel) -> Rel:
    return Rel(cross=CrossRel(left=left, right=right))


def aggregate(inp: Rel, groups: Sequence[int], *measures: AggregateFunction) -> Rel:
    """Grouped by the input columns ``groups`` (one grouping set), computing ``measures``."""
    body = AggregateRel(input=inp, grouping_expressions=[ref(i) for i in groups])
    body.groupings.add(expression_references=list(range(len(groups))))
    for m in measures:
        body.measures.add().measure.CopyFrom(m)
    return Rel(aggregate=body)


def tree(plan: Plan) -> str:
    """The relations of a plan's root, one line each, indented under their reader (no columns)."""
    g = to_dag(plan)
    try:
        annotate_schemas(g)  # column names in the expressions
    except UnsupportedError:
        pass  # shown with column numbers only
    functions = g.graph["functions"]
    lines: list[str] = []

    def walk(node: int, depth: int) -> None:
        lines.append("  " * depth + describe_rel(g, node, functions))
        for child in inputs(g, node):
            walk(child, depth + 1)

    roots = g.graph["roots"]
    walk(next((r for r in roots if r["kind"] == "root"), roots[-1])["node"], 0)
    return "\n".join(lines)


def rewrite(plan: Plan, rule: Rule, statistics: Any = None, capabilities: Any = None, **config: Any) -> Plan:
    """``plan`` after the driver runs ``rule`` alone; ``config``: :class:`OptimizerConfig` fields
    (``annotate_estimates`` is off unless given)."""
    from optimizer.driver import Optimizer, OptimizerConfig

    settings = OptimizerConfig(**{"annotate_estimates": False, **config})
    return Optimizer(statistics, capabilities, settings, rules=[rule]).run(plan).plan


def before_after(plan: Plan, rule: Rule, statistics: Any = None, capabilities: Any = None, **config: Any) -> str:
    """The :func:`tree` of ``plan`` (left) and of what ``rule`` alone rewrites it into (right), side by side."""
    left = tree(plan).splitlines()
    right = tree(rewrite(plan, rule, statistics, capabilities, **config)).splitlines()
    width = max(map(len, left))
    rows = [f"{a:<{width}} | {b}".rstrip() for a, b in itertools.zip_longest(left, right, fillvalue="")]
    return "\n".join(rows)
