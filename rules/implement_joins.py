"""JoinRel -> HashJoinRel / MergeJoinRel / NestedLoopJoinRel: choose how each join is executed.

**Matches** a logical ``JoinRel`` (every join type; an unspecified type or an
``advanced_extension`` is left alone). ``CrossRel`` is not touched.

**Produces**, from the conjuncts of the join expression:

* *column keys*: each ``equal(l, r)`` / ``is_not_distinct_from(l, r)`` conjunct whose two arguments
  are plain field references, one to each input (either way round) and of the same type, becomes a
  ``ComparisonJoinKey`` (``SIMPLE_COMPARISON_TYPE_EQ`` / ``..._IS_NOT_DISTINCT_FROM``) with field
  references relative to each input;
* *expression keys*: any other ``equal`` / ``is_not_distinct_from`` conjunct of an expression over
  the left input only and one over the right input only (deterministic, no subquery or outer
  reference), of any types with a common type (:func:`common_type`: Spark's widening, e.g. i32 and
  i64 -> i64; DataFusion writes ``CAST(o_orderkey AS i64) = l_orderkey``): a ``ProjectRel`` over that
  input appends each side, cast to the common type, and the key compares the appended columns. The
  residual and post-join filter are renumbered and the join's emit hides the appended columns, so the
  join's output is unchanged. No merge join is chosen then (the appended columns have no ordering);
* except an expression other than a column under casts (``d_week_seq1 = d_week_seq2 - 53``) when an
  input holds a subtree the plan repeats (:func:`~optimizer.dag.repeats_within`: a CTE read twice,
  TPC-DS Q2 and Q59). Appended as a column, Spark infers ``IS NOT NULL`` of it and pushes the
  expression down into that copy only, which then differs from the other: Spark no longer computes
  the copies once. That equality stays in the condition; with no other key the join stays a
  ``JoinRel``, on which Spark hashes on the expressions itself. Its side that a hash join would
  broadcast (the same test of sizes) goes under an ``ExchangeRel(broadcast)``: Spark sizes an
  aggregate by the files under it and would sort-merge two aggregates of a few rows (TPC-DS Q2);
  the hint leaves the copies alike (Spark drops it before it compares them);
* the other conjuncts, ANDed, become the ``residual_expression`` (field indexes over the
  concatenated left + right columns, as in the ``JoinRel``): part of the match condition, so outer,
  semi and anti joins keep their meaning. The ``post_join_filter`` is carried over unchanged.

With at least one key the join becomes a **HashJoinRel**, unless a **MergeJoinRel** is free (see
below). The ``build_input`` is the cheaper *valid* side: the one with fewer estimated bytes
(rows x width), among the sides Spark can build a hash table on for that join type; building the
row-preserving side of an outer join (which must remember matched rows and then walk its whole
hash table) counts ``PRESERVED_BUILD_PENALTY`` (32) times its size, so it is built only when far smaller:

=============================  =========================  ==========================
join type                      shuffled hash build sides  broadcast build sides
=============================  =========================  ==========================
INNER                          left, right                left, right
LEFT                           right, left                right
RIGHT                          left, right                left
OUTER (full)                   left, right                none
LEFT_SEMI/ANTI/SINGLE/MARK     right                      right
RIGHT_SEMI/ANTI/SINGLE/MARK    left                       left
=============================  =========================  ==========================

(Spark 4's ``JoinSelectionHelper.canBuildShuffledHashJoinLeft/Right`` and
``canBuildBroadcastLeft/Right``; the right-hand variants are the left-hand ones with the inputs
swapped.) When the chosen side's estimated size is under ``ctx.config.broadcast_threshold_bytes``
and the join type allows broadcasting it, the build input is wrapped in an
``ExchangeRel(broadcast)``: a broadcast hash join, no shuffle of the other side. A side that is
itself the result of joins is broadcast only if ``BROADCAST_UNCERTAINTY`` to the power of the joins
below it (at most ``MAX_UNCERTAINTY``) times its estimated size fits: join estimates compound their
errors, and a broadcast hint is binding (Spark cannot fall back at run time), where an unneeded
shuffle costs little. A join on a unique key of one input is not counted: it keeps at most the rows of
the other input, so its estimate is as sure as that input's. When both sides may be broadcast and only
the larger is a subtree the plan broadcasts (or joins) elsewhere on the same key columns, the larger is
built: Spark computes both broadcasts once (:func:`_reused_build`). The logical join the rule replaces is
priced as Spark would run it, by Spark's own sizes (:mod:`cost.spark_size`), so a broadcast Spark would
not choose (a filtered table it sizes by its files) is bound where it pays.

A **MergeJoinRel** is chosen, with no sort added, when both inputs are already ordered on the keys
(``cost.properties.ordering`` of each input starts with its key columns, in the same key order and
compatible directions) and no side is small enough to broadcast: the merge then costs a single
pass over each input. When the join's only reader is a ``SortRel`` whose leading sort fields are
the join's key columns, a merge join over sorted inputs is priced against the hash join (with the
cost model) and chosen only if it is cheaper.

Without any key the join becomes a **NestedLoopJoinRel** of the same type with the same expression
(a ``JoinRel`` without expression keeps none: the cross-product semantics of its type). The smaller
side Spark may broadcast for that join type is wrapped in an ``ExchangeRel(broadcast)`` when it is
under the threshold, by the same test as a hash join's build side: a broadcast nested-loop join.
Without it, an inner nested-loop join is Spark's ``CartesianProduct``, which computes the right
input once for each partition of the left one (a one-row aggregate under TPC-DS Q23's ``HAVING``
ran its whole subtree again per partition). A
``NestedLoopJoinRel`` has no ``post_join_filter``: one is applied by a ``FilterRel`` above it,
which then carries the join's emit.

Join types are mapped **by name** (``JOIN_TYPE_LEFT_ANTI`` is 6 in ``JoinRel`` and 7 in the
physical relations). Mark and single joins are representable in all three physical relations.
The ``common`` (emit, hints) is carried over, so the output columns are the ``JoinRel``'s.

**Why it is equivalent**: the join expression is the conjunction of the key comparisons and the
residual, evaluated on the same pairs of rows; hash, merge and nested-loop joins all return the
pairs for which the whole condition holds, with the join type's treatment of unmatched rows. The
build side and the broadcast exchange only decide where the hash table is built.
"""

from __future__ import annotations

from dataclasses import dataclass

import networkx as nx
from optimizer.cost.properties import ordering
from optimizer.cost.spark_joins import BROADCAST_BUILD, LEFT, RIGHT, choose_build
from substrait.proto import (
    ComparisonJoinKey,
    Expression,
    HashJoinRel,
    JoinRel,
    NestedLoopJoinRel,
    Rel,
    SortField,
    Type,
)

from optimizer.dag import inputs, is_broadcast, repeats_within, subtree_key, uses, written_like
from optimizer.engine import NewRel, Replacement, Rule, RuleContext, add_subgraph
from optimizer.errors import OptimizerError
from optimizer.expr_utils import (
    call_args,
    conjuncts,
    field_index,
    function_name,
    has_outer_refs,
    has_subquery,
    has_unresolvable_refs,
    is_deterministic,
    join_type_name,
    join_type_value,
    make_and,
    referenced_fields,
    remap_fields,
    shift_fields,
)


def implement_join(g: nx.DiGraph, node: int, ctx: RuleContext) -> Replacement | None:
    """Replace a ``JoinRel`` by a hash, merge or nested-loop join (see the module docstring).

    Before (left) and after (right), on ``orders JOIN customer ON o_custkey = c_custkey AND
    o_total > c_bal``: customer is small, so it is broadcast and built:

    >>> from testing.builder import INNER, Builder, before_after, join, read, ref
    >>> b, o = Builder(), read("orders", [("o_orderkey", "i64"), ("o_custkey", "i64"), ("o_total", "fp64")], rows=1.5e6)
    >>> c = read("customer", [("c_custkey", "i64"), ("c_bal", "fp64")], rows=1e3)
    >>> on = b.call("and", b.call("equal", ref(1), ref(3)), b.call("gt", ref(2), ref(4)))
    >>> print(before_after(b.plan(join(o, c, INNER, on), list("abcde")), RULE))
    Join(inner, ((o_custkey#1 = c_custkey#3) AND (o_total#2 > c_bal#4))) | HashJoin(inner, keys=[o_custkey#1 = c_custkey#3], build=right, residual=(o_total#2 > c_bal#4))
      Read(orders)                                                       |   Read(orders)
      Read(customer)                                                     |   Exchange(broadcast)
                                                                         |     Read(customer)
    """
    join = g.nodes[node]["rel"].join
    type_name = join_type_name(join)
    if type_name is None or join.HasField("advanced_extension"):
        return None
    left, right = inputs(g, node)
    left_types = ctx.schema(left).types
    right_types = ctx.schema(right).types

    keys: list[Key] = []
    rest: list[Expression] = []
    if join.HasField("expression"):
        keys, rest = split_condition(join.expression, len(left_types), left_types, right_types, ctx.functions)

    expr_keys: list[ExprKey] = []
    computed_keys = True
    if rest:
        conds = rest
        expr_keys, rest = expression_keys(conds, len(left_types), ctx.schema(left), ctx.schema(right), ctx.functions)
        if any(not (_column_under_casts(k.left) and _column_under_casts(k.right)) for k in expr_keys) and (
                repeats_within(g, left) or repeats_within(g, right)):
            computed_keys = False
            expr_keys, rest = expression_keys(conds, len(left_types), ctx.schema(left), ctx.schema(right),
                                              ctx.functions, computed=False)

    if not keys and not expr_keys:
        if not computed_keys:
            return _broadcast_logical(g, ctx, join, type_name, left, right)
        return _nested_loop(join, type_name, left, right, _broadcast_side(g, ctx, type_name, left, right))

    left_child: NewRel | int = left
    right_child: NewRel | int = right
    if expr_keys:
        join, keys, rest, left_child, right_child = _project_keys(
            join, type_name, keys, expr_keys, rest, left, right, len(left_types), len(right_types))

    residual = make_and(rest, ctx.registrar) if rest else None
    hash_rel = _keyed_join("hash_join", join, type_name, keys, residual)
    body = hash_rel.hash_join

    left_bytes, right_bytes = _bytes(ctx, left), _bytes(ctx, right)
    threshold = float(ctx.config.broadcast_threshold_bytes)
    choice = choose_build(type_name, left_bytes, right_bytes, threshold)
    if choice is None:
        return None
    side, broadcast = choice
    if broadcast:
        size = left_bytes if side == LEFT else right_bytes
        if size * broadcast_uncertainty(g, left if side == LEFT else right, ctx) > threshold:
            # the estimate of a join result is too uncertain to bind Spark to a broadcast
            side, broadcast = choose_build(type_name, left_bytes, right_bytes, -1.0) or (side, False)
    if broadcast and not expr_keys:
        side = _reused_build(g, ctx, type_name, left, right, (left_bytes, right_bytes), side, keys)

    if not broadcast and not expr_keys:
        in_order = merge_key_order(g, left, right, keys)
        if in_order is not None:
            return NewRel(_merge_rel(join, type_name, in_order, residual), [left, right])

    body.build_input = HashJoinRel.BUILD_INPUT_LEFT if side == LEFT else HashJoinRel.BUILD_INPUT_RIGHT
    children: list[NewRel | int] = [left_child, right_child]
    if broadcast:
        exchange = Rel()
        exchange.exchange.broadcast.SetInParent()
        index = 0 if side == LEFT else 1
        children[index] = NewRel(exchange, [children[index]])
    hashed = NewRel(hash_rel, children)

    if not broadcast and not expr_keys and _sorted_on_keys_above(g, node, join, keys):
        direction = SortField.SORT_DIRECTION_ASC_NULLS_FIRST
        sorted_merge = NewRel(_merge_rel(join, type_name, keys, residual), [NewRel(_sort_rel([k.left for k in keys], direction), [left]),
                                      NewRel(_sort_rel([k.right for k in keys], direction), [right])])
        if _merge_is_cheaper(g, node, hashed, sorted_merge, ctx):
            return sorted_merge
    return hashed


RULE = Rule(name="implement_joins", phase="physical", kinds=frozenset({"join"}), apply=implement_join,
            description="JoinRel -> HashJoinRel (cheaper valid build side, broadcast when small) / MergeJoinRel / NestedLoopJoinRel")


_KEY_FUNCTIONS = {
    "equal": ComparisonJoinKey.SIMPLE_COMPARISON_TYPE_EQ,
    "is_not_distinct_from": ComparisonJoinKey.SIMPLE_COMPARISON_TYPE_IS_NOT_DISTINCT_FROM,
}


@dataclass(frozen=True)
class Key:
    left: int  # column of the left input
    right: int  # column of the right input
    comparison: int  # ComparisonJoinKey.SimpleComparisonType


def split_condition(e: Expression, n_left: int, left_types, right_types, functions) -> tuple[list[Key], list[Expression]]:
    """The equi-keys of a join expression and the remaining conjuncts."""
    keys: list[Key] = []
    rest: list[Expression] = []
    for c in conjuncts(e, functions):
        comparison = _KEY_FUNCTIONS.get(function_name(c, functions) or "")
        args = call_args(c) if comparison is not None else None
        if args is not None and len(args) == 2:
            a, b = field_index(args[0]), field_index(args[1])
            if a is not None and b is not None:
                if b < a:
                    a, b = b, a
                if a < n_left <= b < n_left + len(right_types):
                    r = b - n_left
                    if left_types[a].WhichOneof("kind") == right_types[r].WhichOneof("kind"):
                        key = Key(a, r, comparison)
                        if key not in keys:
                            keys.append(key)
                        continue
        rest.append(c)
    return keys, rest


@dataclass(frozen=True)
class ExprKey:
    """An equality of an expression of the left input and one of the right input that are not two plain
    columns of one type: each side is evaluated, cast to their common type, by a ProjectRel below the join."""

    left: Expression  # over the left input's columns
    right: Expression  # over the right input's columns
    common: Type  # the type both are compared in
    comparison: int


_INT_WIDTH = {"i8": 1, "i16": 2, "i32": 3, "i64": 4}
#: Digits of each integer type as a decimal (Spark's DecimalType.forType).
_INT_DIGITS = {"i8": 3, "i16": 5, "i32": 10, "i64": 20}
_MAX_DECIMAL = 38


def common_type(a: Type, b: Type) -> Type | None:
    """The type Spark compares ``a`` and ``b`` in (its implicit widening), or None if there is none here.

    >>> from optimizer.schema.types import make_type, type_name
    >>> type_name(common_type(make_type("i32"), make_type("i64", nullable=True)))
    'i64'
    >>> type_name(common_type(make_type("i32"), make_type("decimal", precision=15, scale=2)))
    'decimal<15,2>'
    >>> common_type(make_type("string"), make_type("i64")) is None
    True
    """
    from optimizer.schema.types import make_type

    ka, kb = a.WhichOneof("kind"), b.WhichOneof("kind")
    if ka is None or kb is None:
        return None
    if ka == kb and ka != "decimal":
        return make_type(ka) if ka in _INT_WIDTH or ka in ("fp32", "fp64", "string", "date", "bool") else None
    if ka in _INT_WIDTH and kb in _INT_WIDTH:
        return make_type(max(ka, kb, key=_INT_WIDTH.__getitem__))
    numeric = {"fp32", "fp64", "decimal", *_INT_WIDTH}
    if ka not in numeric or kb not in numeric:
        return None
    if "fp32" in (ka, kb) or "fp64" in (ka, kb):
        return make_type("fp64")

    def digits(t: Type, kind: str) -> tuple[int, int]:  # (integer digits, scale)
        if kind == "decimal":
            return t.decimal.precision - t.decimal.scale, t.decimal.scale
        return _INT_DIGITS[kind], 0

    (ia, sa), (ib, sb) = digits(a, ka), digits(b, kb)
    scale = max(sa, sb)
    precision = max(ia, ib) + scale
    if precision > _MAX_DECIMAL:
        return None
    return make_type("decimal", precision=precision, scale=scale)


def expression_keys(conds: list[Expression], n_left: int, left_schema, right_schema, functions, *,
                    computed: bool = True) -> tuple[list[ExprKey], list[Expression]]:
    """The conjuncts (not plain same-type keys: see :func:`split_condition`) that equate an expression of
    the left input with one of the right input, as :class:`ExprKey`; the others unchanged. Not
    ``computed``: only columns under casts."""
    from optimizer.schema import expression_type

    keys: list[ExprKey] = []
    rest: list[Expression] = []
    for c in conds:
        comparison = _KEY_FUNCTIONS.get(function_name(c, functions) or "")
        args = call_args(c) if comparison is not None else None
        key = None
        if args is not None and len(args) == 2 and all(
                _movable_key(a, functions) and (computed or _column_under_casts(a)) for a in args):
            sides = [referenced_fields(a) for a in args]
            if sides[0] and sides[1] and max(sides[1]) < n_left <= min(sides[0]):
                args = args[::-1]
                sides = sides[::-1]
            n_right = len(right_schema.types)
            if sides[0] and sides[1] and max(sides[0]) < n_left <= min(sides[1]) and max(sides[1]) < n_left + n_right:
                left = args[0]
                right = shift_fields(args[1], -n_left)
                try:
                    lt = expression_type(left, left_schema, functions)
                    rt = expression_type(right, right_schema, functions)
                except OptimizerError:  # a type that cannot be derived (unknown columns): no key
                    lt = rt = Type()
                common = common_type(lt, rt)
                if common is not None:
                    key = ExprKey(_cast_to(left, lt, common), _cast_to(right, rt, common), common, comparison)
        if key is None:
            rest.append(c)
        elif key not in keys:
            keys.append(key)
    return keys, rest


def _column_under_casts(e: Expression) -> bool:
    """A column, possibly cast (a key Spark's inferred ``IS NOT NULL`` reduces to the column's)."""
    while e.WhichOneof("rex_type") == "cast":
        e = e.cast.input
    return field_index(e) is not None


def _movable_key(e: Expression, functions) -> bool:
    """Can the expression be computed below the join, once per input row (no subquery, no outer or
    expression-based reference, deterministic)?"""
    return not has_outer_refs(e) and not has_subquery(e) and not has_unresolvable_refs(e) and is_deterministic(e, functions)


def _cast_to(e: Expression, t: Type, common: Type) -> Expression:
    """``e`` (of type ``t``) as ``common``: unchanged when already of that type."""
    from optimizer.schema.types import is_nullable, type_name, with_nullability

    target = with_nullability(common, is_nullable(t))
    if type_name(target) == type_name(t):
        return e
    out = Expression()
    out.cast.type.CopyFrom(target)
    out.cast.input.CopyFrom(e)
    return out


def _field_reference(index: int) -> Expression.FieldReference:
    ref = Expression.FieldReference()
    ref.direct_reference.struct_field.field = index
    ref.root_reference.SetInParent()
    return ref


def _comparison_key(key: Key) -> ComparisonJoinKey:
    out = ComparisonJoinKey()
    out.left.CopyFrom(_field_reference(key.left))
    out.right.CopyFrom(_field_reference(key.right))
    out.comparison.simple = key.comparison
    return out


def _reused_build(g: nx.DiGraph, ctx: RuleContext, type_name: str, left: int, right: int,
                  sizes: tuple[float, float], side: str, keys: list[Key]) -> str:
    """The side to broadcast: ``side`` (the smaller), or the other side when only that one is a subtree
    the plan writes alike and broadcasts elsewhere (or joins there, logically) on the same key
    columns, and it may be broadcast too. Spark computes broadcasts of subtrees written alike and
    hashed on the same keys once (a ``ReusedExchange``, which :func:`optimizer.dag.reused_broadcasts`
    prices as free; other keys make it infer other ``IS NOT NULL`` filters), so a producer's copies of
    a CTE keep building on the same side (TPC-DS Q33, Q56, Q60: the ``item`` filter joined on
    ``i_item_sk`` in three channels)."""
    other = RIGHT if side == LEFT else LEFT
    if other not in BROADCAST_BUILD.get(type_name, frozenset()):
        return side
    nodes = {LEFT: left, RIGHT: right}
    columns = {LEFT: sorted(k.left for k in keys), RIGHT: sorted(k.right for k in keys)}
    size = sizes[0] if other == LEFT else sizes[1]
    if size * broadcast_uncertainty(g, nodes[other], ctx) > float(ctx.config.broadcast_threshold_bytes):
        return side
    if (_broadcast_elsewhere(g, ctx, nodes[other], columns[other])
            and not _broadcast_elsewhere(g, ctx, nodes[side], columns[side])):
        return other
    return side


def _broadcast_elsewhere(g: nx.DiGraph, ctx: RuleContext, node: int, columns: list[int]) -> bool:
    """Whether a subtree written like the one at ``node`` is, elsewhere in the plan, the build side of a
    broadcast hash join on the same key ``columns``, or an input of a logical join on them (which
    :func:`_reused_build` makes build on it the same way)."""
    for n in written_like(g, subtree_key(g, node)):
        if n == node:
            continue
        for parent in g.predecessors(n):
            if g.nodes[parent]["kind"] == "join" and _join_columns(g, ctx, parent, n) == columns:
                return True
            if not is_broadcast(g, parent):
                continue
            for join in g.predecessors(parent):
                if g.nodes[join]["kind"] != "hash_join":
                    continue
                body = g.nodes[join]["rel"].hash_join
                built = inputs(g, join).index(parent)
                refs = [k.left if built == 0 else k.right for k in body.keys]
                if sorted(r.direct_reference.struct_field.field for r in refs) == columns:
                    return True
    return False


def _join_columns(g: nx.DiGraph, ctx: RuleContext, join: int, side: int) -> list[int] | None:
    """The key columns of input ``side`` in the equalities of the logical join at ``join``."""
    body = g.nodes[join]["rel"].join
    pair = inputs(g, join)
    if not body.HasField("expression") or len(pair) != 2:
        return None
    left_types, right_types = ctx.schema(pair[0]).types, ctx.schema(pair[1]).types
    keys, _ = split_condition(body.expression, len(left_types), left_types, right_types, ctx.functions)
    return sorted(k.left if pair.index(side) == 0 else k.right for k in keys)


def _bytes(ctx: RuleContext, node: int) -> float:
    est = ctx.estimate(node)
    return max(float(est.rows), 0.0) * max(float(est.width), 1.0)


#: Each join below a candidate broadcast side whose estimate is not bounded by a unique key multiplies
#: its estimated size by this (for the broadcast decision only), up to MAX_UNCERTAINTY.
BROADCAST_UNCERTAINTY = 2.0
MAX_UNCERTAINTY = 16.0

_JOIN_KINDS = frozenset({"join", "hash_join", "merge_join", "nested_loop_join", "cross"})


def broadcast_uncertainty(g: nx.DiGraph, node: int, ctx: RuleContext) -> float:
    """``BROADCAST_UNCERTAINTY ** joins`` over the joins in the subtree of ``node`` (capped), not counting
    a join on a unique key of one input (the estimator records it as a functional dependency): each row
    of the other input meets at most one row there, so its estimate is as sure as that input's."""
    joins = 0
    for n in {node, *nx.descendants(g, node)}:
        if g.nodes[n].get("kind") not in _JOIN_KINDS:
            continue
        below = frozenset().union(*(ctx.estimate(c).fds for c in inputs(g, n)))
        if not ctx.estimate(n).fds - below:
            joins += 1
    return min(BROADCAST_UNCERTAINTY ** joins, MAX_UNCERTAINTY)


# ------------------------------------------------------------------------------------ merge joins


def _sort_column(s) -> tuple[int, int] | None:
    """``(column, direction)`` of a sort field on a plain column (a SortField or an ordering pair)."""
    if isinstance(s, SortField):
        i = field_index(s.expr)
        return None if i is None or s.WhichOneof("sort_kind") != "direction" else (i, s.direction)
    return int(s[0]), int(s[1])


def merge_key_order(g: nx.DiGraph, left: int, right: int, keys: list[Key]) -> list[Key] | None:
    """The keys in the order both inputs are sorted on (None unless both are, the same way).

    The leading fields of the left input's ordering must be the left key columns (in any order, each
    with a definite direction); the right input's leading fields must then be the matching right key
    columns, in the same order and directions.
    """
    left_order = ordering(g, left)[: len(keys)]
    right_order = ordering(g, right)[: len(keys)]
    if len(left_order) < len(keys) or len(right_order) < len(keys):
        return None
    by_left = {k.left: k for k in keys}
    if len(by_left) != len(keys):
        return None
    ordered: list[Key] = []
    for (lc, ld), (rc, rd) in zip(left_order, right_order, strict=True):
        key = by_left.get(lc)
        if key is None or key in ordered or key.right != rc or ld != rd or ld == SortField.SORT_DIRECTION_CLUSTERED:
            return None
        ordered.append(key)
    return ordered


def _sorted_on_keys_above(g: nx.DiGraph, node: int, join: JoinRel, keys: list[Key]) -> bool:
    """Is the join's only reader a SortRel whose leading fields are the join's left key columns?"""
    if uses(g, node) != 1 or g.in_degree(node) != 1:
        return False  # read by a plan root (no parent relation) or by several relations
    (parent,) = g.predecessors(node)
    if g.nodes[parent]["kind"] != "sort":
        return False
    emit = list(join.common.emit.output_mapping) if join.common.HasField("emit") else None
    wanted = [k.left for k in keys]
    got: list[int] = []
    for s in g.nodes[parent]["rel"].sort.sorts[: len(keys)]:
        sc = _sort_column(s)
        if sc is None:
            return False
        column = emit[sc[0]] if emit is not None and sc[0] < len(emit) else sc[0]
        got.append(column)
    return sorted(got) == sorted(wanted) and len(got) == len(wanted)


def _merge_is_cheaper(g: nx.DiGraph, node: int, hash_rel: NewRel, merge_rel: NewRel, ctx: RuleContext) -> bool:
    """Price both alternatives in a scratch copy of the graph with the cost model."""
    try:
        from optimizer.cost.cardinality import CardinalityEstimator
    except ImportError:  # pragma: no cover
        return False
    costs = []
    for alternative in (hash_rel, merge_rel):
        scratch = g.copy()
        scratch.graph = dict(g.graph)
        scratch.graph.pop("_ids", None)
        root = add_subgraph(scratch, alternative, _schema_deriver(scratch, ctx))
        estimator = CardinalityEstimator(scratch, ctx.statistics, ctx.functions)
        try:
            costs.append(ctx.cost_model.total(scratch, root, estimator))
        except OptimizerError:  # an alternative the model cannot price is not chosen
            return False
    return costs[1] < costs[0]


def _schema_deriver(g: nx.DiGraph, ctx: RuleContext):
    from optimizer.schema import rel_schema

    def derive(node: int):
        data = g.nodes[node]
        return rel_schema(data["rel"], [g.nodes[c]["schema"] for c in inputs(g, node)], ctx.functions)

    return derive


def _sort_rel(columns: list[int], direction: int) -> Rel:
    rel = Rel()
    for c in columns:
        s = rel.sort.sorts.add()
        s.expr.selection.CopyFrom(_field_reference(c))
        s.direction = direction
    return rel


def _project_keys(join: JoinRel, type_name: str, keys: list[Key], expr_keys: list[ExprKey], rest: list[Expression],
                  left: int, right: int, n_left: int, n_right: int):
    """Compute the key expressions of ``expr_keys`` (cast to their common type) in a ProjectRel over each
    input that needs one, so that every key is a pair of columns of one type. The join reads the wider
    inputs: ``rest`` (over left + right) and the post-join filter (over the join's output) are renumbered
    and the emit hides the added columns, so the join's output is the same. Returns the new JoinRel (for
    its common and post-join filter), all keys, the renumbered conjuncts and the two inputs."""
    added: list[list[Expression]] = [[], []]

    def column(e: Expression, side: int, width: int) -> int:
        i = field_index(e)
        if i is not None:
            return i
        for j, existing in enumerate(added[side]):
            if existing == e:
                return width + j
        added[side].append(e)
        return width + len(added[side]) - 1

    all_keys = list(keys)
    for k in expr_keys:
        key = Key(column(k.left, 0, n_left), column(k.right, 1, n_right), k.comparison)
        if key not in all_keys:
            all_keys.append(key)
    add_left, add_right = len(added[0]), len(added[1])

    def child(node: int, exprs: list[Expression]) -> NewRel | int:
        if not exprs:
            return node
        rel = Rel()
        rel.project.expressions.extend(exprs)
        return NewRel(rel, [node])

    shifted = [shift_fields(c, add_left, n_left) for c in rest]
    # The join's output before its emit: [left][right][mark], each block kept or not by the join type.
    blocks = {"LEFT_SEMI": "L", "LEFT_ANTI": "L", "RIGHT_SEMI": "R", "RIGHT_ANTI": "R",
              "LEFT_MARK": "LM", "RIGHT_MARK": "RM"}.get(type_name, "LR")
    old_map: list[int] = []
    position = 0
    for block in blocks:
        width, extra = {"L": (n_left, add_left), "R": (n_right, add_right), "M": (1, 0)}[block]
        old_map.extend(range(position, position + width))
        position += width + extra
    new_join = JoinRel()
    new_join.CopyFrom(join)
    new_join.ClearField("expression")
    mapping = dict(enumerate(old_map))
    if join.HasField("post_join_filter"):
        new_join.post_join_filter.CopyFrom(remap_fields(join.post_join_filter, mapping))
    emit = list(join.common.emit.output_mapping) if join.common.HasField("emit") else range(len(old_map))
    new_join.common.emit.ClearField("output_mapping")
    new_join.common.emit.output_mapping.extend(old_map[i] for i in emit)
    return new_join, all_keys, shifted, child(left, added[0]), child(right, added[1])


def _keyed_join(field: str, join: JoinRel, type_name: str, keys: list[Key], residual: Expression | None) -> Rel:
    """A ``HashJoinRel`` (``field`` ``hash_join``) or ``MergeJoinRel`` (``merge_join``) with ``join``'s
    common, type, post-join filter and these keys and residual (inputs and build side left to the caller)."""
    rel = Rel()
    body = getattr(rel, field)
    body.common.CopyFrom(join.common)
    body.type = join_type_value(type(body), type_name)
    body.keys.extend(_comparison_key(k) for k in keys)
    if residual is not None:
        body.residual_expression.CopyFrom(residual)
    if join.HasField("post_join_filter"):
        body.post_join_filter.CopyFrom(join.post_join_filter)
    return rel


def _merge_rel(join: JoinRel, type_name: str, keys: list[Key], residual: Expression | None) -> Rel:
    return _keyed_join("merge_join", join, type_name, keys, residual)


def _broadcast_side(g: nx.DiGraph, ctx: RuleContext, type_name: str, left: int, right: int) -> str | None:
    """The side of a keyless join to broadcast: the smaller one Spark may broadcast for this join type,
    if its estimate (times :func:`broadcast_uncertainty`) is under the threshold; else None."""
    left_bytes, right_bytes = _bytes(ctx, left), _bytes(ctx, right)
    threshold = float(ctx.config.broadcast_threshold_bytes)
    choice = choose_build(type_name, left_bytes, right_bytes, threshold)
    if choice is None or not choice[1]:
        return None
    side = choice[0]
    node, size = (left, left_bytes) if side == LEFT else (right, right_bytes)
    return side if size * broadcast_uncertainty(g, node, ctx) <= threshold else None


def _broadcast_logical(g: nx.DiGraph, ctx: RuleContext, join: JoinRel, type_name: str, left: int,
                       right: int) -> Replacement | None:
    """The ``JoinRel`` kept for its expression keys, with the side to broadcast (as a hash join's build
    side is chosen) under an ``ExchangeRel(broadcast)``: Spark's planner sizes a join's input by its
    files, never by its rows (:mod:`cost.spark_size`), so it sort-merges two aggregates of a few rows
    with two shuffles (TPC-DS Q2) unless told. The hint leaves the subtrees as they are (Spark drops it
    from the plan before it compares the copies). None when no side fits, or one is broadcast already."""
    if is_broadcast(g, left) or is_broadcast(g, right):
        return None
    side = _broadcast_side(g, ctx, type_name, left, right)
    if side is None:
        return None
    rel = Rel()
    rel.join.CopyFrom(join)
    rel.join.ClearField("left")
    rel.join.ClearField("right")
    exchange = Rel()
    exchange.exchange.broadcast.SetInParent()
    children: list[NewRel | int] = [left, right]
    index = 0 if side == LEFT else 1
    children[index] = NewRel(exchange, [children[index]])
    return NewRel(rel, children)


def _nested_loop(join: JoinRel, type_name: str, left: int, right: int, broadcast: str | None) -> Replacement:
    rel = Rel()
    body = rel.nested_loop_join
    body.type = join_type_value(NestedLoopJoinRel, type_name)
    if join.HasField("expression"):
        body.expression.CopyFrom(join.expression)
    children: list[NewRel | int] = [left, right]
    if broadcast is not None:
        exchange = Rel()
        exchange.exchange.broadcast.SetInParent()
        index = 0 if broadcast == LEFT else 1
        children[index] = NewRel(exchange, [children[index]])
    if not join.HasField("post_join_filter"):
        body.common.CopyFrom(join.common)
        return NewRel(rel, children)
    # The post-join filter reads the join's output before its emit: a filter above, with the emit.
    if join.common.HasField("hint"):
        body.common.hint.CopyFrom(join.common.hint)
    filter_rel = Rel()
    filter_rel.filter.condition.CopyFrom(join.post_join_filter)
    if join.common.HasField("emit"):
        filter_rel.filter.common.emit.CopyFrom(join.common.emit)
    return NewRel(filter_rel, [NewRel(rel, children)])
