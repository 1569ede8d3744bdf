"""Rule ``filter_into_read`` (phase ``physical``): a filter over a read goes into the read, per reader profile.

Matches a ``FilterRel`` directly over a ``ReadRel`` (read by nothing else) of a kind the reader
profile covers (``named_table`` and ``local_files`` for Spark's Parquet reader). Each conjunct of
the filter is classified by the profile (:mod:`optimizer.capabilities`, from ``ctx.capabilities``,
Spark's Parquet reader when none is given):

* ``full``: ANDed into ``ReadRel.filter`` — the reader applies it exactly — and dropped from the
  ``FilterRel``;
* ``best_effort``: ANDed into ``ReadRel.best_effort_filter`` and *also kept* in the ``FilterRel``: a
  consumer may ignore a best-effort filter, so the rows it would remove must still be removed;
* ``none`` (and anything with a subquery, a nondeterministic call or an outer reference): kept in
  the ``FilterRel``.

A conjunct the read already applies (it is in ``ReadRel.filter`` — DataFusion writes its pushed
filters both there and in a ``FilterRel`` above) is dropped from the ``FilterRel`` as well. The
``FilterRel`` disappears when nothing is left in it (its emit moves onto the read).

Columns: the filter reads the read's *output* — ``base_schema`` after the ``projection`` mask and the
read's emit — but ``ReadRel.filter`` and ``best_effort_filter`` are "interpreted against the direct
schema before the projection expression has been applied" (the spec's Read Operator): every column
reference is mapped back through the emit and the mask to its ``base_schema`` field. A conjunct on
a column the mask selects only part of (a nested field) stays in the ``FilterRel``. Existing read
filters are kept: the new conjuncts are ANDed to them, never written over them.

Why it is equivalent: a read with ``filter = f`` outputs exactly the rows of its table for which
``f`` is true, which is what ``Filter(f, Read)`` outputs; a best-effort filter removes only rows
that the kept ``FilterRel`` conjunct removes anyway.
"""

from __future__ import annotations

import networkx as nx
from substrait.proto import Expression, ReadRel, Type

from optimizer.capabilities import BEST_EFFORT, FULL, as_capabilities
from optimizer.dag import inputs, uses
from optimizer.engine import NewRel, Replacement, Rule, RuleContext
from optimizer.expr_utils import (
    bool_literal,
    conjuncts,
    fold,
    key,
    make_and,
    movable,
    referenced_fields,
    remap_fields,
)
from optimizer.relations import emit_of, filter_rel, rel_copy, with_emit
from optimizer.schema.record import Schema


def filter_into_read(g: nx.DiGraph, node: int, ctx: RuleContext) -> Replacement | None:
    """Split a filter over a read into ``ReadRel.filter``, ``best_effort_filter`` and a residual filter.

    Before (left) and after (right), with the default profile (Spark's Parquet reader): the
    comparisons go into the read, ``upper(...)`` stays in the filter:

    >>> from testing.builder import Builder, before_after, filter_, lit, read, ref
    >>> b, t = Builder(), read("t", [("i", "i32"), ("s", "string")])
    >>> upper_s = b.call("upper", ref(1), out="string")
    >>> cond = b.call("and", b.call("lt", ref(0), lit(10, "i32")), b.call("gt", upper_s, lit("B", "string")))
    >>> print(before_after(b.plan(filter_(t, cond), ["i", "s"]), RULE))
    Filter(((i#0 < 10) AND (upper(s#1) > 'B'))) | Filter((upper(s#1) > 'B'))
      Read(t)                                   |   Read(t, filter=(i#0 < 10))
    """
    rel = g.nodes[node]["rel"]
    child = inputs(g, node)[0]
    if g.nodes[child]["kind"] != "read" or uses(g, child) > 1:
        return None
    caps = as_capabilities(ctx.capabilities)
    read = g.nodes[child]["rel"].read
    if read.WhichOneof("read_type") not in caps.read_types or not read.HasField("base_schema"):
        return None
    base = base_schema(read)
    cols = base_columns(read, base)
    emit = emit_of(g.nodes[child]["rel"])
    out_cols = cols if emit is None else [cols[m] for m in emit]
    functions = ctx.functions

    full = _read_conjuncts(read, "filter", functions)
    best = _read_conjuncts(read, "best_effort_filter", functions)
    def norm(e: Expression) -> bytes:  # AND/OR nesting does not make two conjuncts different
        return key(fold(e, functions))

    full_keys = {norm(c) for c in full}
    best_keys = {norm(c) for c in best}
    n_full, n_best = len(full), len(best)
    residual: list[Expression] = []
    dropped = False
    for c in conjuncts(rel.filter.condition, functions):
        refs = referenced_fields(c)
        if not movable(c, functions) or any(out_cols[i] is None for i in refs):
            residual.append(c)
            continue
        b = remap_fields(c, lambda i: out_cols[i])
        k = norm(b)
        if k in full_keys:
            dropped = True  # the read applies it already
            continue
        level = caps.conjunct_support(b, base, functions)
        if level == FULL:
            full.append(b)
            full_keys.add(k)
            continue
        residual.append(c)
        if level == BEST_EFFORT and k not in best_keys:
            best.append(b)
            best_keys.add(k)
    if not dropped and len(full) == n_full and len(best) == n_best:
        return None
    new_read = rel_copy(g, child)
    if len(full) != n_full:
        new_read.read.filter.CopyFrom(make_and(full, ctx.registrar))
    if len(best) != n_best:
        new_read.read.best_effort_filter.CopyFrom(make_and(best, ctx.registrar))
    if residual:
        return NewRel(filter_rel(make_and(residual, ctx.registrar), emit_of(rel)), [NewRel(new_read)])
    return NewRel(with_emit(new_read, emit_of(rel)))


RULE = Rule(name="filter_into_read", phase="physical", kinds=frozenset({"filter"}), apply=filter_into_read,
            description="filter conjuncts into ReadRel.filter / best_effort_filter per the reader's capability profile")


def base_schema(read: ReadRel) -> Schema:
    """The read's ``base_schema`` (types unknown — empty — when an older producer wrote names only)."""
    ns = read.base_schema
    if ns.names and not ns.struct.types:
        return Schema(list(ns.names), [Type() for _ in ns.names])
    return Schema.from_named_struct(ns)


def base_columns(read, base: Schema) -> list[int | None]:
    """For each output column of a read (before its emit), the ``base_schema`` field it is (None for
    a nested part of a field)."""
    if not read.HasField("projection"):
        return list(range(len(base.types)))
    return [None if item.HasField("child") else item.field for item in read.projection.select.struct_items]


def _read_conjuncts(read, name: str, functions) -> list[Expression]:
    if not read.HasField(name):
        return []
    return [c for c in conjuncts(getattr(read, name), functions) if bool_literal(c) is not True]
