"""Relation helpers shared by the rules: copies, output widths, emits, column selection, filters.

An emit (``common.emit.output_mapping``) selects and orders a relation's output columns; these
helpers read it, compose it and move expressions through it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import networkx as nx
from substrait.proto import Expression, JoinRel, Rel

from optimizer.dag import inputs, rel_body, uses
from optimizer.engine import NewRel, Replacement
from optimizer.expr_utils import conjuncts, field, make_and, remap_fields


def rel_copy(g: nx.DiGraph, node: int) -> Rel:
    """A copy of a node's ``Rel`` (its own fields; inputs are given separately to :class:`NewRel`)."""
    out = Rel()
    out.CopyFrom(g.nodes[node]["rel"])
    return out


def width(g: nx.DiGraph, node: int) -> int:
    """The number of output columns of an existing node."""
    return len(g.nodes[node]["schema"].types)


def emit_of(rel: Rel) -> list[int] | None:
    """The relation's ``common.emit.output_mapping`` (None for a direct output)."""
    common = getattr(rel_body(rel), "common", None)
    if common is not None and common.WhichOneof("emit_kind") == "emit":
        return list(common.emit.output_mapping)
    return None


def through_emit(rel: Rel, e):
    """``e`` (reading the relation's output) rewritten to read the relation's direct output."""
    mapping = emit_of(rel)
    return e if mapping is None else remap_fields(e, lambda i: mapping[i])


def with_emit(rel: Rel, mapping: Sequence[int] | None) -> Rel:
    """A copy of ``rel`` whose output is ``old_output[mapping[0]], old_output[mapping[1]], ...``."""
    out = Rel()
    out.CopyFrom(rel)
    if mapping is None:
        return out
    old = emit_of(out)
    new = list(mapping) if old is None else [old[m] for m in mapping]
    emit = rel_body(out).common.emit
    emit.ClearField("output_mapping")
    emit.output_mapping.extend(new)
    return out


def apply_emit(g: nx.DiGraph, repl: Replacement, mapping: Sequence[int] | None) -> Replacement:
    """``repl`` with only the columns ``mapping`` selected (as an emit on a new relation)."""
    if mapping is None:
        return repl
    if isinstance(repl, NewRel):
        return NewRel(with_emit(repl.rel, mapping), repl.inputs)
    return select_columns(g, repl, mapping)


def select_columns(g: nx.DiGraph, node: int, mapping: Sequence[int] | None) -> Replacement:
    """A replacement that outputs ``node``'s columns ``mapping`` (``node`` itself when that is all of them).

    A node read only by the relation being replaced is rewritten with the composed emit; a shared
    node gets a ``ProjectRel`` of field references above it instead (it must stay as it is).
    """
    n = width(g, node)
    if mapping is None or list(mapping) == list(range(n)):
        return node
    if uses(g, node) <= 1:
        return NewRel(with_emit(rel_copy(g, node), mapping), list(inputs(g, node)))
    project = Rel()
    for m in mapping:
        project.project.expressions.add().CopyFrom(field(m))
    project.project.common.emit.output_mapping.extend(range(n, n + len(mapping)))
    return NewRel(project, [node])


def filter_rel(condition: Expression, emit: Sequence[int] | None = None) -> Rel:
    """A ``FilterRel`` (input left to :class:`NewRel`)."""
    rel = Rel()
    rel.filter.condition.CopyFrom(condition)
    if emit is not None:
        rel.filter.common.emit.output_mapping.extend(emit)
    return rel


#: What a rule makes of one conjunct of a filter over ``x`` (``n_x`` columns): the join of ``x`` with
#: something (``x`` its left input, as the given node), and the conjunct left in its place (or None).
ConjunctJoin = Callable[[Expression, int, int], "tuple[NewRel, Expression | None] | None"]


def conjunct_to_join(g: nx.DiGraph, node: int, ctx, attempt: ConjunctJoin) -> Replacement | None:
    """A ``FilterRel`` (without emit) whose first conjunct ``attempt`` turns into a join: the filter's
    other conjuncts (and what ``attempt`` left) above that join, and, when the join adds columns to
    ``x``'s, a projection back to ``x``'s columns."""
    rel = g.nodes[node]["rel"]
    if emit_of(rel) is not None:
        return None
    x = inputs(g, node)[0]
    n_x = width(g, x)
    conds = conjuncts(rel.filter.condition, ctx.functions)
    for i, c in enumerate(conds):
        made = attempt(c, x, n_x)
        if made is None:
            continue
        joined, left = made
        out = filter_over(g, joined, conds[:i] + ([left] if left is not None else []) + conds[i + 1:], ctx)
        if joined.rel.join.type in (JoinRel.JOIN_TYPE_LEFT_SEMI, JoinRel.JOIN_TYPE_LEFT_ANTI):
            return out
        only_x = Rel()
        only_x.project.common.emit.output_mapping.extend(range(n_x))
        return NewRel(only_x, [out])
    return None


def filter_over(g: nx.DiGraph, child: Replacement, conjs: Sequence[Expression], ctx) -> Replacement:
    """``Filter(and(conjs))`` over ``child`` (``child`` itself when there is no conjunct)."""
    if not conjs:
        return child
    return NewRel(filter_rel(make_and(list(conjs), ctx.registrar)), [child])
