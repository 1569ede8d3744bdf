"""Rule ``eager_aggregation`` (phase ``physical``, before joins are implemented): an aggregate over an inner equi-join is computed in part
below the join, on the input its measures read (eager aggregation, Yan and Larson, VLDB 1995; Calcite's
``AggregateJoinTransposeRule`` for one side).

**Matches** an ``AggregateRel`` with one grouping set (or none: a global aggregate) that uses each of its
grouping expressions, whose input is, through ``ProjectRel`` s of deterministic expressions without
subquery or window function (each read once and by nothing else), an inner ``JoinRel`` read only there
whose condition is a conjunction of ``equal`` between a column of each input and which has no post-join
filter, and which Spark shuffles: by the estimates neither input is under the broadcast threshold, as the
cost model decides a join's strategy (:func:`optimizer.cost.spark_joins.choose_build`). Every measure is
``sum``, ``count``, ``min`` or ``max``, not DISTINCT, without sorts, of phase initial-to-result; its
arguments and its filter, deterministic, read the columns of one input ``S`` of the join only (or none). A ``sum`` is over integers or over a decimal of scale ``s`` giving ``decimal(38,
s)`` (Substrait's sum type), its overflow option not ``SATURATE``; a ``count`` gives ``i64`` and the aggregate has grouping
keys. A computed grouping expression reads no floating-point column of ``S``. The aggregate is not
written elsewhere in the plan (copies Spark computes once). By the estimates, ``S``'s keys below (each
with a known number of distinct values) leave at most ``MAX_GROUP_FRACTION`` of its rows, and the cost
model prices the whole plan with the rewrite no higher than without it.

**Produces** ``Aggregate(G; M) over (L ⋈ R) -> Aggregate(G; M') over (Aggregate(K; P) over L) ⋈ R`` (or
the mirror image for ``R``): the projects between the aggregate and the join substituted into its
expressions; ``K`` the columns of ``S`` that the join condition and the grouping expressions read, as
plain columns, in column order; ``P`` the measures over ``S`` (the same functions, arguments and filters
renumbered, output types the original's); ``M'`` per measure: ``sum`` of the partial ``sum`` or ``count``,
``min`` of ``min``, ``max`` of ``max``, each with the original output type. The join condition is
renumbered; the aggregate keeps its ``common`` (emit and hint: its rows are the same). A ``sum`` over a
``count`` uses a ``sum`` the plan declares for ``i64`` (or by bare name), else declares one if the plan
declares none.

**Why it is equivalent**: the join condition reads of ``S`` only columns of ``K``, so a row of ``S``
meets the same rows of the other input as its pre-aggregated group does, and the final grouping
expressions, deterministic functions of ``K`` and of the other input's columns, put every original
joined row of a group of ``K`` and a row ``r`` into the group of that group's row joined with ``r``. So
each final group takes, for each pair (group of ``K``, matching ``r``), the whole multiset of the
measure's values over that group's rows: ``sum`` and ``count`` add them up by parts, ``min`` and ``max``
take the extreme of extremes; NULLs are skipped by parts as in the whole (a partial ``sum`` is NULL only
when all its values are). A ``count`` of an empty group is 0 where a ``sum`` of nothing is NULL; but a
group of an aggregate with keys exists only if it has a row, and each joined row of the rewrite carries a
partial count, never NULL, so the final ``sum`` is never NULL, as the count. A global aggregate over an
empty join has one row, with ``count`` 0: not rewritten when it has a ``count``. The sums are exact:
integer and decimal addition are associative, and the partial sums have the final sum's type. An
overflow (an error, or undefined) can come only from a partial sum, as from the partial sums Spark forms
itself, one per partition: a decimal of precision ``p <= 19`` (TPC-H's, TPC-DS') summed over fewer than
2^63 rows stays below ``10^(38-s)`` whatever the grouping. A floating-point sum would round differently:
not rewritten; nor ``avg`` (its rounding is the engine's), DISTINCT, ordered or other measures.

**Why it pays**: the shuffled join then moves and reads one row per group of ``K`` instead of every row of
``S`` (line items summed per order before their join with the orders, both too large to broadcast), or
``S``'s groups become small enough to broadcast; Spark's partial aggregation does not move below a join on
its own. Not over a join with a broadcast input: Spark streams the other input through it, its partial
aggregation above the join already runs before the first shuffle, and the pre-aggregation adds a shuffle
(at SF 1 on Spark, TPC-DS Q8 and Q43 ran 0.99 to 1.17 times as long with it). Nor always over a
shuffled one: a pre-aggregation that keeps most rows adds a hash and a shuffle for nothing, and one below a
join that filters away most groups aggregates rows the original dropped: the estimates' threshold and the
price of the whole plan decline those (the cost model prices the pre-aggregation's shuffle of its partial
rows, and the join's shuffle of its groups unless they are partitioned on the join's keys already).

**Where it runs**: first in the physical phase, on the join order ``join_order`` chose: in the logical
phase the new aggregate would split the join region before its order is chosen, and the order
``join_order`` then finds for the parts can make the plan costlier than the one it finds without the
rewrite (DataFusion's TPC-H Q9 and DuckDB's Q11 with SF 1 statistics). Before ``implement_joins``: the
join below must be logical, and visited parents first the aggregate is tried before its joins are
implemented; ``implement_joins`` then sizes the new join by the groups. One level per aggregate: the
joins below the new one are implemented in the same pass. The logical joins of both plans are priced as
the cheaper of Spark's choice and what ``implement_joins`` can bind, and the phase prices the rewrite
locally too.
"""

from __future__ import annotations

from dataclasses import dataclass

import networkx as nx
from optimizer.cost.estimates import RelEstimate
from optimizer.cost.spark_joins import choose_build
from optimizer.rules.push_filters import substitute
from substrait.proto import AggregateFunction, AggregateRel, AggregationPhase, Expression, JoinRel, Rel, Type

from optimizer.dag import copy_dag, inputs, subtree_key, uses, written_elsewhere
from optimizer.engine import (
    NewRel,
    Replacement,
    Rule,
    RuleContext,
    costlier,
    plan_price,
    trial,
)
from optimizer.expr_utils import (
    FunctionRegistrar,
    call_args,
    conjuncts,
    expressions,
    field,
    field_index,
    function_name,
    has_subquery,
    has_unresolvable_refs,
    has_window_function,
    is_deterministic,
    referenced_fields,
    remap_fields,
)
from optimizer.relations import emit_of, width
from optimizer.schema import expression_type, measure_type
from optimizer.schema.types import type_kind

#: The pre-aggregation must leave at most this fraction of its input's rows (by the estimates).
MAX_GROUP_FRACTION = 0.5
#: An expression substituted from the projects into the aggregate has at most this many nodes.
MAX_EXPRESSION_SIZE = 64

_FLOATS = frozenset({"fp32", "fp64"})
#: The final aggregate function of each partial one.
_FINAL = {"sum": "sum", "count": "sum", "min": "min", "max": "max"}
_RESULT_PHASES = (AggregationPhase.AGGREGATION_PHASE_UNSPECIFIED, AggregationPhase.AGGREGATION_PHASE_INITIAL_TO_RESULT)
_ALL = (AggregateFunction.AGGREGATION_INVOCATION_UNSPECIFIED, AggregateFunction.AGGREGATION_INVOCATION_ALL)


def eager_aggregation(g: nx.DiGraph, node: int, ctx: RuleContext) -> Replacement | None:
    """The aggregate computed in part below the inner join under it (see the module doc); None where it
    does not apply or does not pay.

    Before (left) and after (right): the quantities of 6M line items summed per order before their join
    with the 1.5M orders (96 and 24 MB: Spark shuffles both), then per order priority:

    >>> from testing.builder import INNER, Builder, aggregate, before_after, join, read, ref
    >>> from optimizer.cost.providers import MemoryStatistics as M; from optimizer.cost.statistics import ColumnStatistics as C, TableStatistics as T
    >>> stats = M({"lineitem": T(6e6, columns={"l_orderkey": C(ndv=1.5e6)}), "orders": T(1.5e6, columns={"o_orderkey": C(ndv=1.5e6), "o_orderpriority": C(ndv=5)})})
    >>> b, li, o = Builder(), read("lineitem", [("l_orderkey", "i64"), ("l_quantity", "i64")]), read("orders", [("o_orderkey", "i64"), ("o_orderpriority", "string")])
    >>> print(before_after(b.plan(aggregate(join(li, o, INNER, b.call("equal", ref(0), ref(2))), [3], b.agg("sum", ref(1))), ["p", "q"]), RULE, stats))
    Aggregate(groups=[(o_orderpriority#3)], measures=[sum(l_quantity#1)]) | Aggregate(groups=[(o_orderpriority#3)], measures=[sum(measure_0#1)])
      Join(inner, (l_orderkey#0 = o_orderkey#2))                          |   Join(inner, (l_orderkey#0 = o_orderkey#2))
        Read(lineitem)                                                    |     Aggregate(groups=[(l_orderkey#0)], measures=[sum(l_quantity#1)])
        Read(orders)                                                      |       Read(lineitem)
                                                                          |     Read(orders)

    With 10,000 suppliers (160 kB) in the place of the orders, Spark broadcasts them: not rewritten.

    >>> stats = M({"lineitem": T(6e6, columns={"l_suppkey": C(ndv=1e4)}), "supplier": T(1e4, columns={"s_suppkey": C(ndv=1e4), "s_nationkey": C(ndv=25)})})
    >>> li, s = read("lineitem", [("l_suppkey", "i64"), ("l_quantity", "i64")]), read("supplier", [("s_suppkey", "i64"), ("s_nationkey", "i64")])
    >>> print(before_after(b.plan(aggregate(join(li, s, INNER, b.call("equal", ref(0), ref(2))), [3], b.agg("sum", ref(1))), ["n", "q"]), RULE, stats))
    Aggregate(groups=[(s_nationkey#3)], measures=[sum(l_quantity#1)]) | Aggregate(groups=[(s_nationkey#3)], measures=[sum(l_quantity#1)])
      Join(inner, (l_suppkey#0 = s_suppkey#2))                        |   Join(inner, (l_suppkey#0 = s_suppkey#2))
        Read(lineitem)                                                |     Read(lineitem)
        Read(supplier)                                                |     Read(supplier)
    """
    rel = g.nodes[node]["rel"]
    body = rel.aggregate
    if body.HasField("advanced_extension") or not _one_grouping_set(body):
        return None
    (agg_input,) = inputs(g, node)
    found = _join_below(g, agg_input)
    if found is None:
        return None
    join, chain = found
    if not _shuffled(g, join, ctx):
        return None  # a broadcast join: Spark's partial aggregation above it runs before the first shuffle
    columns = _columns(g, join, chain, ctx)
    if columns is None:
        return None
    left, right = inputs(g, join)
    n_left = width(g, left)
    keys = _equi_keys(g, join, n_left, ctx)
    if keys is None:
        return None
    in_schema = ctx.schema(agg_input)
    groups = [_composed(e, columns) for e in body.grouping_expressions]
    measures = []
    for m in body.measures:
        spec = _measure(m, in_schema, columns, ctx)
        if spec is None:
            return None
        measures.append(spec)
    if None in groups or any(not _plain(e, ctx) for e in groups):
        return None
    if not groups and any(s.name == "count" for s in measures):
        return None  # a global count over an empty join is 0; a sum of partial counts NULL
    if written_elsewhere(g, node):
        return None  # Spark computes copies written alike once: rewriting one makes two computations
    read = {c for s in measures for c in s.reads}
    n_right = width(g, right)
    best: tuple[float, _Rewrite] | None = None
    for side, lo, hi in ((0, 0, n_left), (1, n_left, n_left + n_right)):
        if not all(lo <= c < hi for c in read):
            continue
        target = (left, right)[side]
        kept = _pre_keys(g, join, side, keys, groups, ctx)
        if kept is None or not _distinct_known(ctx.estimate(target), kept):
            continue  # the keys' distinct values unknown: the number of groups below is a guess

        def build(registrar: FunctionRegistrar, side: int = side) -> _Rewrite | None:
            return _rewrite(g, node, join, side, keys, groups, measures, ctx, registrar)

        price = _price(g, node, side, build, ctx)
        if price is not None and (best is None or price < best[0]):
            best = (price, build(ctx.registrar))
    return best[1].replacement if best is not None and best[1] is not None else None


RULE = Rule(name="eager_aggregation", phase="physical", kinds=frozenset({"aggregate"}), apply=eager_aggregation,
            description="an aggregate over an inner equi-join computed in part below it, on the input its measures read")


@dataclass
class _Measure:
    name: str  # sum, count, min, max
    measure: AggregateRel.Measure  # the original, its expressions over the join's columns
    out: Type  # the original's output type
    reads: set[int]  # the join's columns its arguments and filter read
    fn_anchor: int  # the original's function


@dataclass
class _Rewrite:
    replacement: NewRel
    pre_input: int  # the input pre-aggregated


def _one_grouping_set(body: AggregateRel) -> bool:
    """One grouping set using every grouping expression, or a global aggregate."""
    n = len(body.grouping_expressions)
    if not body.groupings:
        return n == 0
    return len(body.groupings) == 1 and set(body.groupings[0].expression_references) == set(range(n))


def _join_below(g: nx.DiGraph, top: int) -> tuple[int, list[int]] | None:
    """Down the projects from ``top`` to an inner join with a condition and no post-join filter, each
    read once: the join and the projects on the way, top first."""
    chain: list[int] = []
    current = top
    while True:
        if uses(g, current) != 1 or any(r["node"] == current for r in g.graph["roots"]):
            return None  # another reader needs the relation as it is
        kind = g.nodes[current]["kind"]
        if kind == "join":
            break
        if kind != "project" or g.nodes[current]["rel"].project.HasField("advanced_extension"):
            return None
        chain.append(current)
        (current,) = inputs(g, current)
    join = g.nodes[current]["rel"].join
    if (join.type != JoinRel.JOIN_TYPE_INNER or join.HasField("advanced_extension")
            or join.HasField("post_join_filter") or not join.HasField("expression")):
        return None
    return current, chain


def _shuffled(g: nx.DiGraph, join: int, ctx: RuleContext) -> bool:
    """Whether Spark shuffles both inputs of the inner ``join`` rather than broadcast one: the choice
    the cost model prices a join by (:func:`optimizer.cost.spark_joins.choose_build`, on the inputs'
    estimated sizes and the cost model's broadcast threshold). An inner join broadcasts either input,
    so both are above the threshold."""
    left, right = (ctx.estimate(n).bytes for n in inputs(g, join))
    choice = choose_build("INNER", left, right, ctx.cost_model.broadcast_threshold)
    return choice is not None and not choice[1]


def _columns(g: nx.DiGraph, join: int, chain: list[int], ctx: RuleContext) -> list[Expression] | None:
    """For each column of the top of ``chain`` (the projects over ``join``, top first), its expression
    over the join's columns (its inputs' side by side, before its emit); None where a project computes
    what cannot move below the aggregate."""
    mapping = emit_of(g.nodes[join]["rel"])
    columns = [field(i) for i in (mapping if mapping is not None else range(width(g, join)))]
    for project in reversed(chain):
        body = g.nodes[project]["rel"].project
        if not all(_substitutable(e, ctx) for e in body.expressions):
            return None
        below = columns
        own = list(below) + [substitute(e, lambda i, b=below: b[i]) for e in body.expressions]
        mapping = emit_of(g.nodes[project]["rel"])
        columns = [own[i] for i in mapping] if mapping is not None else own
        if any(c is None or _size(c) > MAX_EXPRESSION_SIZE for c in columns):
            return None
    return columns


def _substitutable(e: Expression, ctx: RuleContext) -> bool:
    return (is_deterministic(e, ctx.functions) and not has_subquery(e) and not has_unresolvable_refs(e)
            and not has_window_function(e, enter_subqueries=True))


def _size(e: Expression) -> int:
    return sum(1 for _ in expressions(e, enter_subqueries=False))


def _composed(e: Expression, columns: list[Expression]) -> Expression | None:
    """``e`` over the aggregate's input, rewritten over the join's columns."""
    if has_subquery(e) or has_unresolvable_refs(e):
        return None
    out = substitute(e, lambda i: columns[i] if i < len(columns) else None)
    return out if out is not None and _size(out) <= MAX_EXPRESSION_SIZE else None


def _plain(e: Expression, ctx: RuleContext) -> bool:
    return is_deterministic(e, ctx.functions) and not has_window_function(e, enter_subqueries=True)


def _equi_keys(g: nx.DiGraph, join: int, n_left: int, ctx: RuleContext) -> list[tuple[int, int]] | None:
    """The join's condition as ``(left column, right column)`` pairs (the right one counted from the
    right input's first), if it is a conjunction of ``equal`` between a column of each input."""
    body = g.nodes[join]["rel"].join
    keys = []
    for conj in conjuncts(body.expression, ctx.functions):
        args = call_args(conj)
        if function_name(conj, ctx.functions) != "equal" or args is None or len(args) != 2:
            return None
        a, b = field_index(args[0]), field_index(args[1])
        if a is None or b is None:
            return None
        a, b = min(a, b), max(a, b)
        if not a < n_left <= b:
            return None
        keys.append((a, b - n_left))
    return keys or None


def _measure(m: AggregateRel.Measure, in_schema, columns: list[Expression], ctx: RuleContext) -> _Measure | None:
    """A measure that splits into a partial and a final one, its expressions over the join's columns."""
    fn = m.measure
    if fn.function_reference not in ctx.functions:
        return None
    name = ctx.functions.get(fn.function_reference).name
    if (name not in _FINAL or fn.invocation not in _ALL or fn.phase not in _RESULT_PHASES or fn.sorts
            or any(a.WhichOneof("arg_type") != "value" for a in fn.arguments)):
        return None
    if any(o.name == "overflow" and "SATURATE" in list(o.preference)[:1] for o in fn.options):
        return None  # a saturated partial sum is not the saturated total
    out = measure_type(fn, in_schema, ctx.functions)
    kind = type_kind(out)
    if name == "count" and kind != "i64":
        return None
    if name == "sum":
        if kind == "decimal":
            arg = _argument_type(fn, in_schema, ctx)
            if out.decimal.precision != 38 or type_kind(arg) != "decimal" or arg.decimal.scale != out.decimal.scale:
                return None
        elif kind != "i64":
            return None  # floating point sums round by the order of addition
    split = AggregateRel.Measure()
    split.CopyFrom(m)
    for a in split.measure.arguments:
        composed = _composed(a.value, columns)
        if composed is None or not _substitutable(composed, ctx):
            return None
        a.value.CopyFrom(composed)
    if m.HasField("filter"):
        composed = _composed(m.filter, columns)
        if composed is None or not _substitutable(composed, ctx):
            return None
        split.filter.CopyFrom(composed)
    reads = set().union(*(referenced_fields(a.value) for a in split.measure.arguments))
    if m.HasField("filter"):
        reads |= referenced_fields(split.filter)
    return _Measure(name, split, out, reads, fn.function_reference)


def _argument_type(fn: AggregateFunction, in_schema, ctx: RuleContext) -> Type | None:
    """The type of a one-argument measure's argument."""
    if len(fn.arguments) != 1:
        return None
    return expression_type(fn.arguments[0].value, in_schema, ctx.functions)


def _rewrite(g: nx.DiGraph, node: int, join: int, side: int, keys: list[tuple[int, int]], groups: list[Expression],
             measures: list[_Measure], ctx: RuleContext, registrar: FunctionRegistrar) -> _Rewrite | None:
    """The rewrite pre-aggregating input ``side`` (0: left, 1: right) of ``join``; None where it cannot be
    written. ``registrar``: where a ``sum`` of counts is declared if the plan declares none."""
    join_inputs = inputs(g, join)
    n_left = width(g, join_inputs[0])
    target = join_inputs[side]
    offset = 0 if side == 0 else n_left
    kept = _pre_keys(g, join, side, keys, groups, ctx)
    if kept is None:
        return None
    position = {c: i for i, c in enumerate(kept)}
    pre = Rel()
    agg = pre.aggregate
    agg.grouping_expressions.extend(field(c) for c in kept)
    agg.groupings.add(expression_references=list(range(len(kept))))
    for s in measures:
        partial = agg.measures.add()
        partial.CopyFrom(s.measure)
        for a in partial.measure.arguments:
            a.value.CopyFrom(remap_fields(a.value, lambda c: c - offset))
        if partial.HasField("filter"):
            partial.filter.CopyFrom(remap_fields(partial.filter, lambda c: c - offset))
        partial.measure.output_type.CopyFrom(s.out)
    n_pre = len(kept) + len(measures)

    def renumber(c: int) -> int:
        """A column of the old join, in the new one."""
        if side == 0:
            return position[c] if c < n_left else n_pre + c - n_left
        return c if c < n_left else n_left + position[c - n_left]

    new_join = Rel()
    new_join.join.type = JoinRel.JOIN_TYPE_INNER
    new_join.join.expression.CopyFrom(remap_fields(g.nodes[join]["rel"].join.expression, renumber))
    pre_new = NewRel(pre, [target])
    joined = NewRel(new_join, [pre_new, join_inputs[1]] if side == 0 else [join_inputs[0], pre_new])
    body = g.nodes[node]["rel"].aggregate
    final = Rel()
    final.aggregate.common.CopyFrom(body.common)  # the same rows: its emit and its hint hold
    final.aggregate.grouping_expressions.extend(remap_fields(e, renumber) for e in groups)
    final.aggregate.groupings.extend(body.groupings)
    first_measure = (0 if side == 0 else n_left) + len(kept)
    for j, s in enumerate(measures):
        anchor = _final_anchor(s, registrar.table)
        if anchor is None:
            return None
        fn = final.aggregate.measures.add().measure
        fn.function_reference = anchor if anchor >= 0 else registrar.anchor("sum", "functions_arithmetic", "sum:i64")
        fn.arguments.add().value.CopyFrom(field(first_measure + j))
        fn.output_type.CopyFrom(s.out)  # a sum of counts: never NULL (see the module doc)
        fn.phase = s.measure.measure.phase
        fn.invocation = AggregateFunction.AGGREGATION_INVOCATION_ALL
        if s.name != "count":
            fn.options.extend(s.measure.measure.options)
    return _Rewrite(NewRel(final, [joined]), target)


def _pre_keys(g: nx.DiGraph, join: int, side: int, keys: list[tuple[int, int]], groups: list[Expression],
              ctx: RuleContext) -> list[int] | None:
    """``K``: the columns of input ``side`` of ``join`` that its condition (``keys``) and the grouping
    expressions read, counted from the input's first, ascending; None where a computed grouping
    expression reads a floating-point column of it."""
    join_inputs = inputs(g, join)
    target = join_inputs[side]
    offset = 0 if side == 0 else width(g, join_inputs[0])
    n_side = width(g, target)
    local = {k[side] for k in keys}  # the side's join keys, counted from its first column
    target_schema = ctx.schema(target)
    for e in groups:
        mine = {c - offset for c in referenced_fields(e) if offset <= c < offset + n_side}
        if mine and field_index(e) is None and any(type_kind(target_schema.types[c]) in _FLOATS for c in mine):
            return None  # grouped by the column first: -0.0 and 0.0 (NaNs) would become one value
        local |= mine
    return sorted(local)


def _distinct_known(source: RelEstimate, columns: list[int]) -> bool:
    """Whether the estimate ``source`` knows the number of distinct values of each of ``columns``."""
    return all(c < len(source.columns) and source.columns[c] is not None and source.columns[c].ndv is not None
               for c in columns)


def _final_anchor(s: _Measure, functions) -> int | None:
    """The function of the final measure: the original's, or for a count (and a sum of small integers
    declared for their type) a ``sum`` of ``i64`` the plan declares; -1: none declared, one to declare;
    None: the plan declares ``sum`` only for other types."""
    if s.name in ("min", "max") or (s.name == "sum" and type_kind(s.out) == "decimal"):
        return s.fn_anchor
    info = functions.get(s.fn_anchor)
    if s.name == "sum" and (info.signature is None or info.signature.split(":", 1)[-1] == "i64"):
        return s.fn_anchor
    sums = [f for f in functions if f.name == "sum"]
    for f in sums:
        if f.signature is None or f.signature.split(":", 1)[-1] == "i64":
            return f.anchor
    return None if sums else -1


def _price(g: nx.DiGraph, node: int, side: int, build, ctx: RuleContext) -> float | None:
    """The price of the whole plan with the rewrite ``build`` makes, if the pre-aggregation keeps few
    enough rows and the plan is no costlier than without it; else None.
    Priced on a copy of the DAG (a ``sum`` the rewrite declares, declared in the copy), every relation
    above the rewrite estimated again. A rewrite declined is remembered by the subtree's digest and side:
    the phase's next passes do not price it again."""
    declined = g.graph.setdefault("eager_aggregation_declined", set())
    key = (subtree_key(g, node), side)
    if key in declined:
        return None
    scratch = copy_dag(g)
    registrar = FunctionRegistrar(scratch.graph["plan"], scratch.graph["functions"])
    rewrite = build(registrar)
    price = None
    if rewrite is not None:
        price = _priced(g, node, scratch, rewrite, registrar.table, ctx)
    if price is None:
        declined.add(key)
    return price


def _priced(g: nx.DiGraph, node: int, scratch: nx.DiGraph, rewrite: _Rewrite, functions, ctx: RuleContext) -> float | None:
    t = trial(g, node, rewrite.replacement, ctx, scratch=scratch, functions=functions)
    (pre,) = [n for n in t.added if t.g.nodes[n]["kind"] == "aggregate" and inputs(t.g, n) == [rewrite.pre_input]]
    if t.estimator.estimate(pre).rows > MAX_GROUP_FRACTION * ctx.estimate(rewrite.pre_input).rows:
        return None
    after = t.price(ctx.cost_model, bindable=True)
    return None if costlier(after, plan_price(g, ctx.estimator, ctx.cost_model, bindable=True)) else after
