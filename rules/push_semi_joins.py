"""Rule ``push_semi_joins`` (phase ``logical``): a semi join goes below an inner join, to the input whose
columns its condition reads.

**Matches** a ``JoinRel`` of type ``LEFT_SEMI`` whose left input is, through a chain of column-selecting
``ProjectRel`` s (field references only), an inner ``JoinRel``, each read once and by nothing else, when every
left column the semi join's ``expression`` and ``post_join_filter`` read comes from one input of that
inner join (after the emits and projections on the way). The conditions are deterministic, read at
least one left column, and hold no subquery and no expression-based reference; neither join has an
advanced extension. The rewrite is made only where the cost model prices the whole plan with it at most
as high as without it.

**Produces** ``(A ⋈ B) ⋉ S -> (A ⋉ S) ⋈ B`` (or ``A ⋈ (B ⋉ S)``): the semi join over that input, its
conditions' columns renumbered to read it and ``S``; the inner join and the projections above it as they
were (their emits included), reading it instead; the semi join's emit on the top one. The output's
columns are the original's, in the same order. Relations rebuilt lose their ``hint.stats`` (the rows
they count change).

**Why it is equivalent**: a semi join outputs each row of its left input for which some row of ``S``
makes the conditions true, once: for deterministic conditions that read, on the left, only columns of
``A``, that is a predicate on ``A``'s columns. An inner join's output row carries its ``A`` row's columns
unchanged (column selection too), so filtering the join's rows by the predicate keeps exactly the rows
built from the ``A`` rows it keeps: the same rows as joining only those ``A`` rows. A relation read by
another reader is not rewritten (that reader needs all its rows); the inputs ``A``, ``B`` and ``S`` are
read, never changed.

**Why it pays**: a semi join that filters few rows of a small input then runs before the joins that
multiply them (TPC-H Q18: ``o_orderkey IN (... HAVING sum(l_quantity) > 300)`` keeps few of the 1.5M orders at
SF 1, where DataFusion's plan applies it to ``customer ⋈ orders ⋈ lineitem``, 6M rows); ``join_order``
then orders the joins over the smaller input, and ``implement_joins`` sizes its joins by it. Not always:
below a join that keeps few rows of a large input the semi join would probe all of them, which the
model's price of the whole plan declines (the estimates of every relation above change too).

**Where it runs**: in the logical phase, with ``push_filters`` (a semi join is a filter by a set), before
``join_order``, which sees the semi join as an input of the join region (a barrier) and orders the inner
joins by the input's filtered size, and before ``implement_joins``, which then chooses strategies and
broadcasts for the sizes Spark will see. Only logical joins are matched: no physical join exists before
the physical phase.
"""

from __future__ import annotations

import networkx as nx
from substrait.proto import JoinRel, Rel

from optimizer.dag import inputs, uses
from optimizer.engine import (
    NewRel,
    Replacement,
    Rule,
    RuleContext,
    not_costlier,
)
from optimizer.expr_utils import (
    field_index,
    has_subquery,
    has_unresolvable_refs,
    is_deterministic,
    referenced_fields,
    remap_fields,
)
from optimizer.relations import apply_emit, emit_of, rel_copy, width


def push_semi_joins(g: nx.DiGraph, node: int, ctx: RuleContext) -> Replacement | None:
    """The semi join below the inner join under it (see the module doc); None where it does not apply.

    Before (left) and after (right): customers with orders who are on a list, ``(customer ⋈ orders) ⋉
    vip`` on ``c_custkey``, a column of ``customer``:

    >>> from testing.builder import INNER, SEMI, Builder, before_after, join, read, ref
    >>> b, o = Builder(), read("orders", [("o_orderkey", "i64"), ("o_custkey", "i64")], rows=1.5e6)
    >>> co = join(read("customer", [("c_custkey", "i64")], rows=1.5e5), o, INNER, b.call("equal", ref(0), ref(2)))
    >>> semi = join(co, read("vip", [("v_custkey", "i64")], rows=1e3), SEMI, b.call("equal", ref(0), ref(3)))
    >>> print(before_after(b.plan(semi, ["c", "o", "oc"]), RULE))
    Join(left_semi, (c_custkey#0 = v_custkey#3)) | Join(inner, (c_custkey#0 = o_custkey#2))
      Join(inner, (c_custkey#0 = o_custkey#2))   |   Join(left_semi, (c_custkey#0 = v_custkey#1))
        Read(customer)                           |     Read(customer)
        Read(orders)                             |     Read(vip)
      Read(vip)                                  |   Read(orders)
    """
    rel = g.nodes[node]["rel"]
    semi = rel.join
    if semi.type != JoinRel.JOIN_TYPE_LEFT_SEMI or semi.HasField("advanced_extension"):
        return None
    conditions = [semi.expression] if semi.HasField("expression") else []
    if semi.HasField("post_join_filter"):
        conditions.append(semi.post_join_filter)
    if any(has_subquery(c) or has_unresolvable_refs(c) or not is_deterministic(c, ctx.functions)
           for c in conditions):
        return None
    left, right = inputs(g, node)
    n_left = width(g, left)
    read_left = {i for c in conditions for i in referenced_fields(c) if i < n_left}
    if not read_left:
        return None  # no left column read: nothing ties the condition to one input
    # Down the column-selecting projects to the inner join: ``cols[i]`` is the column of the current
    # relation's input that the semi join's left column ``i`` is.
    chain: list[int] = []
    cols = list(range(n_left))
    current = left
    while True:
        if uses(g, current) != 1 or any(r["node"] == current for r in g.graph["roots"]):
            return None  # another reader (or a plan relation of its own) needs all its rows
        selected = _selected_columns(g, current)
        if selected is None:
            break
        cols = [selected[c] for c in cols]
        chain.append(current)
        (current,) = inputs(g, current)
    join_rel = g.nodes[current]["rel"]
    if (g.nodes[current]["kind"] != "join" or join_rel.join.type != JoinRel.JOIN_TYPE_INNER
            or join_rel.join.HasField("advanced_extension")):
        return None
    join_emit = emit_of(join_rel)
    if join_emit is not None:
        cols = [join_emit[c] for c in cols]
    a, b = inputs(g, current)
    n_a = width(g, a)
    read = {cols[i] for i in read_left}
    to_left = all(c < n_a for c in read)
    if not to_left and not all(c >= n_a for c in read):
        return None  # it reads both inputs
    target, offset = (a, 0) if to_left else (b, n_a)
    n_target = width(g, target)

    def renumber(i: int) -> int:
        return cols[i] - offset if i < n_left else n_target + i - n_left

    pushed = Rel()
    pushed.join.CopyFrom(semi)
    pushed.join.ClearField("common")  # the emit goes on top; its row count is the original's
    for name in ("expression", "post_join_filter"):
        if semi.HasField(name):
            getattr(pushed.join, name).CopyFrom(remap_fields(getattr(semi, name), renumber))
    below = NewRel(pushed, [target, right])
    top = NewRel(_without_stats(g, current), [below, b] if to_left else [a, below])
    for project in reversed(chain):
        top = NewRel(_without_stats(g, project), [top])
    replacement = apply_emit(g, top, emit_of(rel))
    return replacement if not_costlier(g, node, replacement, ctx, "push_semi_joins") else None


RULE = Rule(name="push_semi_joins", phase="logical", kinds=frozenset({"join"}), apply=push_semi_joins,
            description="a semi join below an inner join, to the input whose columns its condition reads")


def _selected_columns(g: nx.DiGraph, node: int) -> list[int] | None:
    """For a ``ProjectRel`` of field references (an emit choosing among them and the input's columns),
    the input column of each output column; None for any other relation."""
    if g.nodes[node]["kind"] != "project":
        return None
    body = g.nodes[node]["rel"].project
    if body.HasField("advanced_extension"):
        return None
    cols = list(range(width(g, inputs(g, node)[0])))
    for e in body.expressions:
        i = field_index(e)  # a whole top-level column, or None
        if i is None:
            return None
        cols.append(i)
    mapping = emit_of(g.nodes[node]["rel"])
    return cols if mapping is None else [cols[m] for m in mapping]




def _without_stats(g: nx.DiGraph, node: int) -> Rel:
    """A copy of the node's relation without the producer's statistics (its row count changes)."""
    rel = rel_copy(g, node)
    common = getattr(rel, g.nodes[node]["kind"]).common
    if common.HasField("hint"):
        common.hint.ClearField("stats")
    return rel
