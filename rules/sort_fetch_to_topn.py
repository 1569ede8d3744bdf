"""Sort + Fetch -> TopNRel: ``ORDER BY ... LIMIT n [OFFSET m]`` as one top-N operator.

**Matches** a ``FetchRel`` whose count is a non-null integer literal (and whose offset is an
integer literal or absent) over a ``SortRel`` with at least one sort field, directly or through
``ProjectRel``s (``Fetch(Project*(Sort(x)))``). A fetch without a count (or with a null count,
"ALL") keeps every row: it is not a top-N and is left alone. The sort and the projections must be
read by this chain only (a shared sort is still needed in full by its other reader), must carry
no ``advanced_extension``, and the projections must hold no window function (a window function
reads the whole input, so it must see every row, not the top ``n``) and no non-deterministic call.

**Produces** ``Project*(TopN(x))``: a ``TopNRel`` with the sort's fields, ``offset`` and
``count`` as i64 literals and ``mode`` ``FETCH_MODE_ROWS_ONLY``, under the same projections. The
sort's ``common`` (its emit) goes to the top-N; the fetch's emit is composed into the topmost
relation's emit, so the output columns are exactly the fetch's.

**Why it is equivalent**: a projection maps each row to one row and keeps the rows' order, so
``Fetch(Project(Sort(x))) = Project(Fetch(Sort(x)))``; and ``Fetch(Sort(x))`` with offset ``m``
and count ``n`` is by definition the top-N of ``x`` in that order, skipping ``m`` rows. A top-N
only keeps ``m + n`` rows per partition instead of sorting the whole input (Spark plans
``orderBy().limit()`` as ``TakeOrderedAndProject``).
"""

from __future__ import annotations

import networkx as nx
from substrait.proto import Expression, FetchMode, Rel

from optimizer.dag import inputs, rel_body, uses
from optimizer.engine import NewRel, Replacement, Rule, RuleContext
from optimizer.expr_utils import has_window_function, is_deterministic


def sort_fetch_to_topn(g: nx.DiGraph, node: int, ctx: RuleContext) -> Replacement | None:
    """Replace ``Fetch(Project*(Sort(x)))`` by ``Project*(TopN(x))`` (see the module docstring).

    Before (left) and after (right), on ``SELECT a, b, b + 1 FROM t ORDER BY b DESC LIMIT 5 OFFSET 2``:

    >>> from testing.builder import DESC_NL, Builder, before_after, fetch, lit, project, read, ref, sort
    >>> b, t = Builder(), read("t", [("a", "i64"), ("b", "i64")])
    >>> b_plus_1 = b.call("add", ref(1), lit(1), out="i64")
    >>> print(before_after(b.plan(fetch(project(sort(t, (1, DESC_NL)), b_plus_1), 5, 2), ["a", "b", "b1"]), RULE))
    Fetch(offset=2, count=5)      | Project((b#1 + 1))
      Project((b#1 + 1))          |   TopN(b#1 DESC NULLS LAST, offset=2, count=5)
        Sort(b#1 DESC NULLS LAST) |     Read(t)
          Read(t)                 |
    """
    fetch = g.nodes[node]["rel"].fetch
    if fetch.HasField("advanced_extension") or not fetch.HasField("count_expr"):
        return None
    count = literal_int(fetch.count_expr, null_as=None)
    offset = literal_int(fetch.offset_expr, null_as=0) if fetch.HasField("offset_expr") else 0
    if count is None or offset is None or count < 0 or offset < 0:
        return None

    chain: list[int] = []  # projections between the fetch and the sort, top first
    (child,) = inputs(g, node)
    while g.nodes[child]["kind"] == "project":
        project = g.nodes[child]["rel"].project
        if uses(g, child) != 1 or project.HasField("advanced_extension"):
            return None
        functions = ctx.functions if ctx is not None else None
        if any(has_window_function(e, enter_subqueries=False) for e in project.expressions):
            return None
        if functions is not None and not all(is_deterministic(e, functions) for e in project.expressions):
            return None
        chain.append(child)
        (child,) = inputs(g, child)
    if g.nodes[child]["kind"] != "sort" or uses(g, child) != 1:
        return None
    sort = g.nodes[child]["rel"].sort
    if sort.HasField("advanced_extension") or not sort.sorts:
        return None
    (source,) = inputs(g, child)

    top_n = Rel()
    body = top_n.top_n
    body.common.CopyFrom(sort.common)
    body.sorts.extend(sort.sorts)
    body.offset.CopyFrom(_i64(offset))
    body.count.CopyFrom(_i64(count))
    body.mode = FetchMode.FETCH_MODE_ROWS_ONLY
    new = NewRel(top_n, [source])
    for project_node in reversed(chain):
        rel = Rel()
        rel.CopyFrom(g.nodes[project_node]["rel"])
        new = NewRel(rel, [new])

    # The fetch's own common: its emit narrows the topmost relation's output, its hint describes it.
    top = rel_body(new.rel)
    if fetch.common.HasField("emit"):
        if top.common.HasField("emit"):
            inner = list(top.common.emit.output_mapping)
        elif chain:  # a projection without emit outputs its input's columns, then its expressions
            (below,) = inputs(g, chain[0])
            inner = list(range(len(ctx.schema(below).types) + len(g.nodes[chain[0]]["rel"].project.expressions)))
        else:  # a top-N without emit outputs its input's columns
            inner = list(range(len(ctx.schema(source).types)))
        mapping = _compose_emit(inner, list(fetch.common.emit.output_mapping))
        top.common.emit.ClearField("output_mapping")
        top.common.emit.output_mapping.extend(mapping)
    if fetch.common.HasField("hint"):
        top.common.hint.CopyFrom(fetch.common.hint)
    return new


RULE = Rule(name="sort_fetch_to_topn", phase="physical", kinds=frozenset({"fetch"}), apply=sort_fetch_to_topn,
            description="Fetch with a literal count over a Sort (through projections) -> TopNRel")


_INT_LITERALS = ("i8", "i16", "i32", "i64")


def literal_int(e: Expression, *, null_as: int | None) -> int | None:
    """The value of an integer literal (a typed null gives ``null_as``); None for anything else."""
    if e.WhichOneof("rex_type") != "literal":
        return None
    which = e.literal.WhichOneof("literal_type")
    if which in _INT_LITERALS:
        return getattr(e.literal, which)
    if which == "null":
        return null_as
    return None


def _i64(value: int) -> Expression:
    e = Expression()
    e.literal.i64 = value
    return e



def _compose_emit(inner: list[int], outer: list[int]) -> list[int]:
    """The emit of a relation with emit ``inner`` whose output is then narrowed by ``outer``."""
    return [inner[i] for i in outer]
