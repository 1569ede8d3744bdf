"""Aggregates with several grouping sets written in DataFusion's numbering (``encoding.grouping_sets =
"datafusion"``): the inverse of the loader's :func:`optimizer.load.grouping_sets.conform_grouping_sets`.

The spec's aggregate outputs its grouping expressions, its measures, then the ``i32`` index of the
grouping set that made the row. DataFusion 55's consumer reads its own convention (the one its producer
writes, tabulated in :mod:`optimizer.load.grouping_sets`): each set's expressions listed one set after
the other, and an output of the distinct expressions (in order of first appearance), then its
``__grouping_id`` bitmask (bit ``n-1-i`` set when distinct expression ``i`` of ``n`` is not in the row's
set; unsigned, 8/16/32/64 bits), then the measures. The writer lists the sets so and puts a
``ProjectRel`` above that turns the grouping id back into the set index and emits the columns in the
spec's order, so the relations above read what they read before.

Refused (exit 3): a grouping expression in no set (the spec outputs it, always null; DataFusion has no
column for it) and two sets with the same expressions (one grouping id for two set indexes).
"""

from __future__ import annotations

from substrait.proto import Expression, Plan, Rel

from optimizer.errors import UnsupportedError
from optimizer.expr_utils import field, rels_with_paths
from optimizer.load.grouping_sets import _DATAFUSION_UNSIGNED, _id_width, _int_literal


def write_datafusion_grouping_sets(plan: Plan, target_name: str = "datafusion") -> int:
    """Rewrite, in place, every aggregate with several grouping sets into DataFusion's numbering under a
    project that restores the spec's output; the number rewritten."""
    changed = 0
    for rel, path in list(rels_with_paths(plan)):
        if rel.WhichOneof("rel_type") == "aggregate" and len(rel.aggregate.groupings) > 1:
            _rewrite(rel, path, target_name)
            changed += 1
    return changed


def _rewrite(rel: Rel, path: str, target_name: str) -> None:
    agg = rel.aggregate
    n_exprs, n_measures = len(agg.grouping_expressions), len(agg.measures)
    sets = [list(dict.fromkeys(g.expression_references)) for g in agg.groupings]
    order = list(dict.fromkeys(r for refs in sets for r in refs))  # distinct keys by first appearance
    if sorted(order) != list(range(n_exprs)):
        raise UnsupportedError(f"AggregateRel with a grouping expression in none of its sets: target "
                               f"'{target_name}' has no output column for it", path)
    n = len(order)
    masks = [sum(1 << (n - 1 - i) for i, r in enumerate(order) if r not in refs) for refs in sets]
    if len(set(masks)) != len(masks):
        raise UnsupportedError(f"AggregateRel with two identical grouping sets: target '{target_name}' "
                               "tells their rows apart by the expressions they group, not by their place", path)
    emit = list(agg.common.emit.output_mapping) if agg.common.WhichOneof("emit_kind") == "emit" else None
    exprs = list(agg.grouping_expressions)
    listed: list[Expression] = []
    for g, refs in zip(agg.groupings, sets, strict=True):
        del g.expression_references[:]
        g.expression_references.extend(range(len(listed), len(listed) + len(refs)))
        listed.extend(exprs[r] for r in refs)
    del agg.grouping_expressions[:]
    agg.grouping_expressions.extend(listed)
    agg.common.ClearField("emit_kind")
    # DataFusion's output: [keys in `order`, grouping id, measures].
    width = _id_width(n)
    switch = Expression()
    sw = switch.switch_expression
    sw.match.CopyFrom(field(n))
    for index, mask in enumerate(masks[:-1]):
        clause = sw.ifs.add()
        getattr(clause, "if").CopyFrom(_int_literal(mask, width, _DATAFUSION_UNSIGNED))
        clause.then.literal.CopyFrom(Expression.Literal(i32=index, nullable=False))
    getattr(sw, "else").literal.CopyFrom(Expression.Literal(i32=len(masks) - 1, nullable=False))
    n_out = n + 1 + n_measures
    spec = [order.index(k) for k in range(n_exprs)] + [n + 1 + j for j in range(n_measures)] + [n_out]
    project = Rel()
    project.project.input.CopyFrom(rel)
    project.project.expressions.append(switch)
    project.project.common.emit.output_mapping.extend(spec if emit is None else [spec[m] for m in emit])
    rel.CopyFrom(project)
