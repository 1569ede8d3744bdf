"""Aggregates of DISTINCT values as an aggregate over a grouping by their arguments
(``encoding.distinct_measures = "grouped"``), for a target that reads no ``DISTINCT`` invocation
(pyarrow 26's Acero: ``Unsupported aggregation invocation 'AGGREGATION_INVOCATION_DISTINCT'. Only
AGGREGATION_INVOCATION_ALL is supported``).

**Matches** an ``AggregateRel`` of one grouping set (or none: a global aggregate) with a measure invoked
``DISTINCT``.

**Produces** ``AggregateRel(keys, f(a) ...)`` over ``AggregateRel(input, keys + a, g(b) ...)``: the inner
aggregate groups by the keys and the DISTINCT measures' arguments ``a``; the outer one groups its rows by
the keys again and computes each DISTINCT measure ``f`` over the column of ``a`` (invoked ``ALL``), and
each ``min`` or ``max`` beside them (``g``) over the inner aggregate's ``g`` of its group. The outer
aggregate keeps the original's emit and hint, so the output is the same columns in the same order.

**Why it is equivalent**: ``f(DISTINCT a)`` over a group is ``f`` over the distinct values of ``a`` in
it, and the inner aggregate's rows of a group are exactly those values (NULL one of them: ``f`` skips it
as ``f(DISTINCT a)`` does, and ``count(a)`` does not count it). The minimum of a group's minima per
value of ``a`` is the group's minimum. A global aggregate over no rows gives one row either way (the
outer aggregate is global too). Refused (exit 3, by name): DISTINCT measures over different arguments,
another measure than ``min`` or ``max`` beside them, a measure with a filter or a sort, several
grouping sets.
"""

from __future__ import annotations

from substrait.proto import AggregateFunction, AggregateRel, Plan, Rel

from optimizer.errors import UnsupportedError
from optimizer.expr_utils import field, rels_with_paths
from optimizer.load.functions import FunctionTable
from optimizer.targets import Target

_DISTINCT = AggregateFunction.AGGREGATION_INVOCATION_DISTINCT
_ALL = AggregateFunction.AGGREGATION_INVOCATION_ALL

#: Aggregates whose value over a group is the same over the group's distinct values of another column.
_DUPLICATE_INSENSITIVE = frozenset({"min", "max"})


def distinct_measures_grouped(plan: Plan, target: Target, functions: FunctionTable) -> int:
    """Rewrite, in place, every aggregate with a DISTINCT measure as the module docstring says; the
    number rewritten. ``functions``: the plan's table."""
    names = {info.anchor: info.name for info in functions}
    changed = 0
    for rel, path in list(rels_with_paths(plan)):  # children first: a rewrite keeps its ancestors' paths
        if rel.WhichOneof("rel_type") != "aggregate":
            continue
        agg = rel.aggregate
        for m in agg.measures:  # the minimum of the distinct values is the minimum
            if m.measure.invocation == _DISTINCT and names.get(m.measure.function_reference) in _DUPLICATE_INSENSITIVE:
                m.measure.invocation = _ALL
        distinct = [j for j, m in enumerate(agg.measures) if m.measure.invocation == _DISTINCT]
        if not distinct:
            continue
        at = f"{path}.aggregate"

        def refuse(why: str, where: str = at) -> UnsupportedError:
            return UnsupportedError(f"{why}: target '{target.name}' reads no DISTINCT aggregate, and only "
                                    "DISTINCT aggregates over the same arguments, beside min and max, can be "
                                    "written as a grouping by those arguments", where)

        n_keys = len(agg.grouping_expressions)
        if len(agg.groupings) > 1:
            raise refuse(f"a DISTINCT aggregate in an aggregate of {len(agg.groupings)} grouping sets")
        if sorted(set(r for g in agg.groupings for r in g.expression_references)) != list(range(n_keys)):
            raise refuse("a DISTINCT aggregate in an aggregate whose grouping set leaves out a grouping expression")
        first = agg.measures[distinct[0]].measure
        arguments = [a.value for a in first.arguments if a.WhichOneof("arg_type") == "value"]
        if not arguments:
            raise refuse(f"DISTINCT aggregate '{names.get(first.function_reference, '?')}' of no value",
                         f"{at}.measures[{distinct[0]}]")
        for j, m in enumerate(agg.measures):
            where = f"{at}.measures[{j}]"
            name = names.get(m.measure.function_reference, "?")
            if m.HasField("filter") or len(m.measure.sorts):
                raise refuse(f"aggregate '{name}' with a {'filter' if m.HasField('filter') else 'sort'}", where)
            if m.measure.invocation == _DISTINCT:
                if list(m.measure.arguments) != list(first.arguments):
                    raise refuse(f"DISTINCT aggregates over different arguments ('{name}')", where)
            elif (name not in _DUPLICATE_INSENSITIVE or len(m.measure.arguments) != 1
                  or m.measure.arguments[0].WhichOneof("arg_type") != "value"):
                raise refuse(f"aggregate '{name}' beside a DISTINCT one", where)

        inner = Rel(aggregate=AggregateRel())
        inner.aggregate.input.CopyFrom(agg.input)
        inner.aggregate.grouping_expressions.extend(agg.grouping_expressions)
        inner.aggregate.grouping_expressions.extend(arguments)
        inner.aggregate.groupings.add().expression_references.extend(range(n_keys + len(arguments)))
        outer = Rel(aggregate=AggregateRel())
        outer.aggregate.common.CopyFrom(agg.common)
        outer.aggregate.grouping_expressions.extend(field(k) for k in range(n_keys))
        outer.aggregate.groupings.extend(agg.groupings)
        computed = n_keys + len(arguments)  # the inner aggregate's next output column
        for m in agg.measures:
            measure = outer.aggregate.measures.add()
            measure.CopyFrom(m)
            measure.measure.invocation = _ALL
            if m.measure.invocation == _DISTINCT:
                value = iter(range(n_keys, n_keys + len(arguments)))
                for a in measure.measure.arguments:
                    if a.WhichOneof("arg_type") == "value":
                        a.value.CopyFrom(field(next(value)))
            else:
                below = inner.aggregate.measures.add()
                below.CopyFrom(m)
                measure.measure.arguments[0].value.CopyFrom(field(computed))
                computed += 1
        outer.aggregate.input.CopyFrom(inner)
        rel.CopyFrom(outer)
        changed += 1
    return changed
