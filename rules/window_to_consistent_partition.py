"""Window functions in a ProjectRel -> stacked ConsistentPartitionWindowRels.

**Matches** a ``ProjectRel`` whose expressions contain window functions
(``Expression.WindowFunction``), at the top of an expression or nested in one (``1 + count(*)
OVER (...)``); window functions inside subqueries belong to the subquery and are not looked at.
A window function nested in another window function's arguments, or a projection with an
``advanced_extension``, is left alone.

**Produces** one ``ConsistentPartitionWindowRel`` per distinct (partition expressions, sorts)
pair, stacked over the projection's input, and a ``ProjectRel`` on top:

* each window relation holds the window functions of its group, each as a
  ``WindowRelFunction`` with the function's own arguments, options, output type, phase,
  invocation and frame (``lower_bound``, ``upper_bound``, ``bounds_type``); identical window
  functions are computed once. Partition expressions are kept as written (expressions are
  allowed there), with partitions compared as a set (``PARTITION BY a, b`` = ``PARTITION BY b, a``);
* the groups are stacked so that groups with the same partitioning are adjacent and, among them,
  groups whose sorts share a prefix are adjacent, the longer sort below (``ORDER BY a, b`` then
  ``ORDER BY a``): an engine that keeps the order of its input (Spark's ``WindowExec`` does)
  then sorts once per partitioning;
* a window relation outputs its input's columns then one column per window function, so the
  stack outputs the projection's input, then every window column; the top ``ProjectRel`` holds
  the expressions that are not plain window functions, with each window function replaced by a
  reference to its column, and an emit that puts the columns back in the projection's order
  (the original emit, or all input columns then the expressions). Plain window functions and
  plain references to input columns need no expression: the emit reads them from the stack. When
  nothing else is left, no projection is added and the top window relation carries the emit.

**Why it is equivalent**: a window function's value for a row depends only on the input
relation, its partitioning, its order and its frame, all of which are carried over unchanged, and
a window relation passes every input row and column through. Evaluating the functions in
separate relations, in any order, gives each row the same values, and the top projection computes
the remaining expressions from the same input columns and window values.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import networkx as nx
from google.protobuf.message import Message
from substrait.proto import ConsistentPartitionWindowRel, Expression, Rel

from optimizer.dag import inputs
from optimizer.engine import NewRel, Replacement, Rule, RuleContext
from optimizer.expr_utils import field as field_ref
from optimizer.expr_utils import field_index, has_window_function, is_window_call, sub_messages


def window_to_consistent_partition(g: nx.DiGraph, node: int, ctx: RuleContext) -> Replacement | None:
    """Rewrite a projection's window functions as ConsistentPartitionWindowRels (see the module docstring).

    Before (left) and after (right), on ``SELECT a, rank() OVER (PARTITION BY b ORDER BY a),
    1 + sum(a) OVER (PARTITION BY b) FROM t``: one window relation per partitioning and order:

    >>> from testing.builder import Builder, before_after, emit, lit, project, read, ref
    >>> b, t = Builder(), read("t", [("a", "i64"), ("b", "i64")])
    >>> rank, total = b.window("rank", partition=[1], order=[0]), b.window("sum", ref(0), partition=[1])
    >>> p = project(t, rank, b.call("add", lit(1), total, out="i64"), common=emit(0, 2, 3))
    >>> print(before_after(b.plan(p, ["a", "r", "s"]), RULE))
    Project(rank() OVER (...), (1 + sum(a#0) OVER (...)), emit=[0, 2, 3]) | Project((1 + window_0#3), emit=[0, 2, 4])
      Read(t)                                                             |   ConsistentPartitionWindow(partition=[b#1], functions=[sum(a#0)])
                                                                          |     ConsistentPartitionWindow(partition=[b#1], order=[a#0 ASC NULLS LAST], functions=[rank()])
                                                                          |       Read(t)
    """
    project = g.nodes[node]["rel"].project
    if project.HasField("advanced_extension"):
        return None
    found: dict[bytes, Expression.WindowFunction] = {}
    try:
        for e in project.expressions:
            _collect(e, found)
    except _Nested:
        return None
    if not found:
        return None
    (source,) = inputs(g, node)
    n_in = len(ctx.schema(source).types)

    # Group by (partitions as a set, sorts); keep the order of first appearance of partitionings.
    groups: dict[tuple, _Group] = {}
    partition_rank: dict[tuple, int] = {}
    for key, wf in found.items():
        pkey = tuple(sorted(_key(p) for p in wf.partitions))
        skey = tuple(_key(s) for s in wf.sorts)
        partition_rank.setdefault(pkey, len(partition_rank))
        group = groups.setdefault((pkey, skey), _Group(list(wf.partitions), list(wf.sorts)))
        group.functions.append(key)
    # Same partitioning together; within it the sort lists in descending lexicographic order,
    # which keeps lists sharing a prefix adjacent and puts the longer one first (lower).
    ordered = sorted(groups.items(), key=lambda kv: partition_rank[kv[0][0]])
    by_partition: dict[tuple, list[tuple[tuple, _Group]]] = {}
    for (pkey, skey), group in ordered:
        by_partition.setdefault(pkey, []).append((skey, group))
    stack: list[_Group] = []
    for members in by_partition.values():
        members.sort(key=lambda sg: sg[0], reverse=True)
        stack.extend(group for _, group in members)

    column: dict[bytes, int] = {}
    new: NewRel | int = source
    for group in stack:
        rel = Rel()
        window = rel.window
        window.partition_expressions.extend(group.partitions)
        window.sorts.extend(group.sorts)
        for key in group.functions:
            wf = found[key]
            out = window.window_functions.add()
            for name in _FUNCTION_FIELDS:
                value = getattr(wf, name)
                if name in ("arguments", "options"):
                    getattr(out, name).extend(value)
                elif hasattr(value, "CopyFrom"):
                    if wf.HasField(name):
                        getattr(out, name).CopyFrom(value)
                else:
                    setattr(out, name, value)
            column[key] = n_in + len(column)
        new = NewRel(rel, [new])
    n_windows = len(column)

    # The projection on top: the expressions that are neither a plain window function nor a plain
    # reference to an input column (those two are read straight from the stack's output by the emit).
    top = Rel()
    top.project.common.CopyFrom(project.common)
    position: list[int] = []  # column of each original expression in the new top's pre-emit output
    for e in project.expressions:
        if is_window_call(e):
            position.append(column[_key(e.window_function)])
            continue
        i = field_index(e)
        if i is not None and i < n_in:
            position.append(i)
            continue
        rewritten = Expression()
        rewritten.CopyFrom(e)
        _replace(rewritten, column)
        top.project.expressions.append(rewritten)
        position.append(n_in + n_windows + len(top.project.expressions) - 1)
    old_columns = (
        list(project.common.emit.output_mapping)
        if project.common.HasField("emit")
        else list(range(n_in + len(project.expressions)))
    )
    mapping = [c if c < n_in else position[c - n_in] for c in old_columns]
    if top.project.expressions:
        top.project.common.emit.ClearField("output_mapping")
        top.project.common.emit.output_mapping.extend(mapping)
        return NewRel(top, [new])
    # Nothing left to compute: the top window relation takes the projection's emit and hints.
    window = new.rel.window
    if project.common.HasField("hint"):
        window.common.hint.CopyFrom(project.common.hint)
    if mapping != list(range(n_in + n_windows)):
        window.common.emit.output_mapping.extend(mapping)
    return new


RULE = Rule(name="window_to_consistent_partition", phase="physical", kinds=frozenset({"project"}), apply=window_to_consistent_partition,
            description="ProjectRel window functions -> one ConsistentPartitionWindowRel per (partition, order)")


#: The fields a WindowFunction shares with a ConsistentPartitionWindowRel.WindowRelFunction.
_FUNCTION_FIELDS = tuple(f.name for f in ConsistentPartitionWindowRel.WindowRelFunction.DESCRIPTOR.fields)


def _key(msg: Message) -> bytes:
    return msg.SerializeToString(deterministic=True)


class _Nested(Exception):
    """A window function inside a window function."""


def _collect(msg: Message, out: dict[bytes, Expression.WindowFunction]) -> None:
    """Add every window function of ``msg`` (outside subqueries) to ``out``, by content."""
    if is_window_call(msg):
        if has_window_function(msg.window_function, enter_subqueries=False):
            raise _Nested
        out.setdefault(_key(msg.window_function), msg.window_function)
        return
    for child in sub_messages(msg, enter_subqueries=False):
        _collect(child, out)



def _replace(msg: Message, column: dict[bytes, int]) -> None:
    """Replace (in place) every window function under ``msg`` by a reference to its column."""
    for child in sub_messages(msg, enter_subqueries=False):
        if is_window_call(child):
            child.CopyFrom(field_ref(column[_key(child.window_function)]))
        else:
            _replace(child, column)


@dataclass
class _Group:
    partitions: list[Expression]
    sorts: list
    functions: list[bytes] = field(default_factory=list)
