"""Aggregates with several grouping sets as a union of one aggregate per set (``encoding.grouping_sets =
"union"``), for a target that cannot read several grouping sets but reads ``UNION ALL``.

**Matches** an ``AggregateRel`` with more than one grouping set. The spec's output: every grouping
expression (NULL in a row whose set lacks it), the measures, then the ``i32`` index of the row's set.

**Produces** ``SetRel(UNION_ALL)`` of one branch per set ``i``: ``ProjectRel`` over
``AggregateRel(input, set i's expressions, the measures)`` that outputs the expressions in the original
order (a typed NULL for one the set lacks), the measures and the literal ``i``.

**Why it is equivalent**: SQL and the spec define ``GROUP BY GROUPING SETS (s_1, ..., s_n)`` as the union
of the ``GROUP BY s_i``, the expressions outside ``s_i`` NULL; the index column is the constant ``i`` of
each branch. An empty set is a global aggregate, one row even over no input, as the grouping set ``()``.
The input is computed once per set (the target reads no shared subtree). A branch of the set ``()``
whose measures nobody reads (the columns above prune them) counts its rows, a column not output: an
aggregate of no column is read by no engine ("SELECT list is empty").
"""

from __future__ import annotations

from substrait.proto import AggregateRel, Plan, Rel, SetRel

from optimizer.expr_utils import field, rels_with_paths
from optimizer.load.functions import FunctionTable


def grouping_sets_as_union(plan: Plan, functions: FunctionTable) -> int:
    """Rewrite, in place, every aggregate with several grouping sets as the module docstring says; the
    number rewritten. ``functions``: the plan's table."""
    from optimizer.schema import plan_schemas

    schemas = None
    changed = 0
    for rel, path in list(rels_with_paths(plan)):  # children first: a rewrite keeps its ancestors' paths
        if rel.WhichOneof("rel_type") != "aggregate" or len(rel.aggregate.groupings) < 2:
            continue
        if schemas is None:
            schemas = plan_schemas(plan, functions)
        out_types = schemas[path].types
        agg = rel.aggregate
        n_keys, n_measures = len(agg.grouping_expressions), len(agg.measures)
        union = Rel()
        union.set.op = SetRel.SET_OP_UNION_ALL
        for index, grouping in enumerate(agg.groupings):
            keys = list(dict.fromkeys(grouping.expression_references))
            one = Rel(aggregate=AggregateRel())
            one.aggregate.input.CopyFrom(agg.input)
            one.aggregate.grouping_expressions.extend(agg.grouping_expressions[k] for k in keys)
            one.aggregate.groupings.add().expression_references.extend(range(len(keys)))
            one.aggregate.measures.extend(agg.measures)
            width = len(keys) + n_measures
            if not width:  # the set () with no measure read: an aggregate of no column, which no engine reads
                one.aggregate.measures.add().measure.CopyFrom(_count_star(plan, functions))
                width = 1
            branch = Rel()
            branch.project.input.CopyFrom(one)
            for k in range(n_keys):
                e = branch.project.expressions.add()
                if k in keys:
                    e.CopyFrom(field(keys.index(k)))
                else:
                    e.literal.null.CopyFrom(out_types[k])
            branch.project.expressions.extend(field(len(keys) + m) for m in range(n_measures))
            branch.project.expressions.add().literal.i32 = index
            branch.project.common.emit.output_mapping.extend(range(width, width + n_keys + n_measures + 1))
            union.set.inputs.add().CopyFrom(branch)
        if agg.common.WhichOneof("emit_kind") == "emit":
            union.set.common.emit.CopyFrom(agg.common.emit)
        rel.CopyFrom(union)
        changed += 1
    return changed


def _count_star(plan: Plan, functions: FunctionTable):
    """``count(*)``, declared in ``plan``: the one column of a branch whose set and measures give none (its
    value is not output)."""
    from substrait.proto import AggregateFunction, AggregationPhase, Type

    from optimizer.expr_utils import FunctionRegistrar

    count = AggregateFunction(function_reference=FunctionRegistrar(plan, functions).anchor(
        "count", "functions_aggregate_generic", "count:"))
    count.output_type.i64.nullability = Type.NULLABILITY_REQUIRED
    count.phase = AggregationPhase.AGGREGATION_PHASE_INITIAL_TO_RESULT
    count.invocation = AggregateFunction.AGGREGATION_INVOCATION_ALL
    return count
