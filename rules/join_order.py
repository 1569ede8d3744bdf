"""Cost-based join ordering: dynamic programming over connected subgraphs (DPccp), greedy beyond.

**Matches** the top of a region of inner joins and cross products (``JoinRel`` of type INNER,
``CrossRel``) with at least three inputs. Outer, semi, anti, single and mark joins, joins with a
``post_join_filter``, relations with an emit (other than the region's top) and shared subtrees are
*barriers*: they end the region and become its inputs (their own insides are ordered separately).

**Produces** the cheapest bushy tree of inner joins over the same inputs, found by DPccp
(Moerkotte & Neumann, "Analysis of two existing and one new dynamic programming algorithm for the
generation of optimal bushy join trees without cross products", VLDB 2006) for up to
``config.dp_join_limit`` inputs (14 by default) and by greedy operator ordering (GOO, Fegaras 1998)
beyond, or when DPccp would consider more than ``config.dp_pair_budget`` join pairs (dense graphs: a
10-relation clique has 28,501 pairs, a chain of 14 only 455). Greedy ordering stops after
``config.greedy_seconds`` of CPU time on one region, which then keeps its written order. Only pairs connected by a predicate are joined, so no cross product is introduced unless the
query has one (then its components are joined, smallest first, at the end). Every conjunct of the
region's join conditions is placed at the lowest join that has all the columns it reads; a conjunct
that reads one input only becomes a filter on that input. Column equalities are closed transitively
first (``a = b AND b = c`` also joins ``a`` and ``c`` directly), and each join evaluates one equality
per class of equal columns (see :meth:`JoinGraph._closure`), so the written choice among equivalent
equalities (producers differ there) does not limit the orders considered. A ``ProjectRel`` with an emit on top puts
the columns back in the original order (and applies the top join's own emit).

**Why it is equivalent**: inner joins and cross products are commutative and associative, and a
conjunction of predicates over their inputs may be evaluated at any join whose inputs hold all the
columns it reads. Predicates with subqueries or non-deterministic functions stay at the top.
The rewrite is made only if its estimated cost is lower than the written order's.

Cost of a join tree: the sum over its joins of :meth:`cost.model.CostModel.logical_join`, the price
the driver gives a logical ``JoinRel`` (what Spark runs: a broadcast hash join under the threshold, else
a shuffled hash join, nested loops without an equi-key). The rows, widths and column statistics of
every subset of inputs come from the shared cardinality estimator
(:meth:`cost.cardinality.CardinalityEstimator.join` on the predicates between the two sides, the
inputs' own predicates applied as filters), so join ordering and every other decision use one model.
"""

from __future__ import annotations

import bisect
import heapq
import itertools
import math
import time
from collections.abc import Iterator
from dataclasses import dataclass

import networkx as nx
from optimizer.cost.estimates import RelEstimate, evolve
from optimizer.cost.model import saturate_cost
from substrait.proto import Expression, JoinRel, Rel

from optimizer.dag import inputs
from optimizer.engine import NewRel, Rule, RuleContext
from optimizer.expr_utils import (
    call_args,
    conjuncts,
    field_index,
    function_name,
    has_subquery,
    is_deterministic,
    make_and,
    referenced_fields,
    remap_fields,
)


def order_joins(g: nx.DiGraph, node: int, ctx: RuleContext) -> NewRel | None:
    """Reorder the inner-join region whose top is ``node`` if a cheaper order exists.

    Before (left) and after (right), on ``lineitem x orders x customer`` written largest first
    (6M, 1.5M and 150k rows): orders meets customer first, and lineitem meets the smaller result.

    >>> from testing.builder import INNER, Builder, before_after, join, read, ref
    >>> b, li = Builder(), read("lineitem", [("l_orderkey", "i64")], rows=6e6)
    >>> lo = join(li, read("orders", [("o_orderkey", "i64"), ("o_custkey", "i64")], rows=1.5e6), INNER, b.call("equal", ref(0), ref(1)))
    >>> loc = join(lo, read("customer", [("c_custkey", "i64")], rows=1.5e5), INNER, b.call("equal", ref(2), ref(3)))
    >>> print(before_after(b.plan(loc, ["l", "o", "oc", "c"]), RULE))
    Join(inner, (o_custkey#2 = c_custkey#3))     | Join(inner, (l_orderkey#0 = o_orderkey#1))
      Join(inner, (l_orderkey#0 = o_orderkey#1)) |   Read(lineitem)
        Read(lineitem)                           |   Join(inner, (o_custkey#1 = c_custkey#2))
        Read(orders)                             |     Read(orders)
      Read(customer)                             |     Read(customer)
    """
    if not _is_region_top(g, node):
        return None
    region = collect_region(g, node, ctx)
    if len(region.leaves) < 3:
        return None
    # A region searched once in this phase (the tree this rule built, or one it found best as written)
    # is not searched again when the phase's next pass visits it: its inputs are the same relations
    # (reordering a region below one of them keeps its estimated rows), so the search would find the
    # same tree again.
    done = g.graph.setdefault("join_order_searched", set())
    signature = _signature(region)
    if signature in done:
        return None
    done.add(signature)
    jg = JoinGraph(region, ctx)
    if len(region.leaves) > ctx.config.dp_join_limit:
        # Ordered greedily: the estimates are bounded in CPU time (a region DP orders never is).
        jg.deadline = time.thread_time() + ctx.config.greedy_seconds
    try:
        _, written_cost = jg.tree_cost(region.shape)
        best_cost, best = jg.best_tree(ctx.config.dp_join_limit, ctx.config.dp_pair_budget)
    except _OverBudget:  # a join graph too wide to order in the time: it stays as written
        return None
    if not best_cost < written_cost * (1 - 1e-9):
        return None
    new_root, cols = build_tree(jg, best, ctx)
    position = {gcol: i for i, gcol in enumerate(cols)}
    mapping = [position[w] for w in region.output]
    if mapping == list(range(len(cols))):
        return new_root if isinstance(new_root, NewRel) else None
    rel = Rel()
    rel.project.common.emit.output_mapping.extend(mapping)
    return NewRel(rel, [new_root])


RULE = Rule(name="join_order", phase="join_order", kinds=frozenset({"join", "cross"}), apply=order_joins,
            description="reorder regions of inner joins by cost (DPccp up to dp_join_limit inputs, greedy beyond)")


INNER = JoinRel.JOIN_TYPE_INNER

#: A join order: an input by its index in the region, or a join of two trees (left, right).
JoinTree = int | tuple["JoinTree", "JoinTree"]


def _signature(region: Region) -> tuple[frozenset[int], tuple[bytes, ...]]:
    """The region whatever its join order: its inputs and its predicates with each column named by
    (input node, column of that input) instead of its position in the written order."""
    starts = _offsets(region.widths)

    def named(i: int) -> int:
        k = bisect.bisect_right(starts, i) - 1
        return region.leaves[k] * _COLUMNS_PER_NODE + (i - starts[k])

    predicates = sorted(remap_fields(p, named).SerializeToString(deterministic=True) for p in region.predicates)
    return frozenset(region.leaves), tuple(predicates)


#: Column numbering of :func:`_signature` (an input of more columns than this is not expected).
_COLUMNS_PER_NODE = 10_000


def _offsets(widths: list[int]) -> list[int]:
    """The first global column of each leaf."""
    return [0, *itertools.accumulate(widths)][:len(widths)]


def _is_join(g: nx.DiGraph, node: int) -> bool:
    """An inner join or cross product that the region may reorder."""
    data = g.nodes[node]
    kind = data["kind"]
    if kind not in ("join", "cross"):
        return False
    body = getattr(data["rel"], kind)
    if kind == "join" and (body.type != INNER or body.HasField("post_join_filter")):
        return False
    return not body.HasField("advanced_extension")


def _pruning_project(g: nx.DiGraph, node: int) -> list[int] | None:
    """For a Project that only selects input columns (field references, an emit), the input columns
    it outputs, in order; None for any other relation."""
    data = g.nodes[node]
    if data["kind"] != "project":
        return None
    body = data["rel"].project
    if body.HasField("advanced_extension"):
        return None
    width = len(g.nodes[inputs(g, node)[0]]["schema"].types)
    cols = list(range(width))
    for e in body.expressions:
        i = field_index(e)
        if i is None:
            return None
        cols.append(i)
    if body.common.HasField("emit"):
        cols = [cols[j] for j in body.common.emit.output_mapping]
    return cols


def _single_use(g: nx.DiGraph, node: int) -> bool:
    if g.in_degree(node) != 1:
        return False
    (parent,) = g.predecessors(node)
    return len(g.edges[parent, node]["slots"]) == 1 and not any(r["node"] == node for r in g.graph["roots"])


def _below_projects(g: nx.DiGraph, node: int) -> int | None:
    """The join under a chain of column-selecting projects (each read once), if there is one."""
    while _pruning_project(g, node) is not None:
        (node,) = inputs(g, node)
        if not _single_use(g, node):
            return None
    return node if _is_join(g, node) else None


def _is_region_top(g: nx.DiGraph, node: int) -> bool:
    """A reorderable join whose readers are not, through column-selecting projects, another one."""
    if not _is_join(g, node):
        return False
    current = node
    while _single_use(g, current):
        (parent,) = g.predecessors(current)
        if _is_join(g, parent):
            return False
        if _pruning_project(g, parent) is None:
            return True
        current = parent
    return True


def _includable(g: nx.DiGraph, node: int, top: bool) -> bool:
    return _is_join(g, node) and (top or _single_use(g, node))


@dataclass
class Region:
    leaves: list[int]  # input nodes, in the order their columns appear in the region's output
    widths: list[int]  # number of columns of each leaf
    predicates: list[Expression]  # over the concatenated columns of all leaves (global numbering)
    shape: object  # the written tree: leaf index or (left, right)
    output: list[int] = None  # the global columns the region's top outputs, in order


def collect_region(g: nx.DiGraph, top: int, ctx: RuleContext) -> Region:
    """Leaves, predicates and written shape of the region whose top is ``top``.

    Columns are numbered globally over all leaves' full outputs. Emits and column-selecting projects
    inside the region only choose among those columns: they are followed, not kept (the rewritten
    region ends in one project that outputs what the top output).
    """
    walk = _RegionWalk(g, ctx)
    shape, output = walk.visit(top, True)
    return Region(walk.leaves, walk.widths, walk.predicates, shape, output)


class _RegionWalk:
    """:func:`collect_region`'s walk down the region. Methods, not nested functions: a nested function that
    calls itself is a reference cycle, which would keep ``ctx`` (the plan's estimates and costs) after the
    run until the garbage collector's next full pass instead of freeing it then."""

    def __init__(self, g: nx.DiGraph, ctx: RuleContext) -> None:
        self.g, self.ctx = g, ctx
        self.leaves: list[int] = []
        self.widths: list[int] = []
        self.predicates: list[Expression] = []
        self.total = 0  # columns of the leaves so far

    def leaf(self, node: int):
        self.leaves.append(node)
        self.widths.append(len(self.ctx.schema(node).types))
        first = self.total
        self.total += self.widths[-1]
        return len(self.leaves) - 1, list(range(first, first + self.widths[-1]))

    def visit(self, node: int, is_top: bool):
        g = self.g
        if not is_top and _single_use(g, node) and _below_projects(g, node) is not None and not _is_join(g, node):
            # A column-selecting project between joins: follow it.
            shape, cols = self.visit(inputs(g, node)[0], False)
            return shape, [cols[i] for i in _pruning_project(g, node)]
        if not _includable(g, node, is_top):
            return self.leaf(node)
        left, right = inputs(g, node)
        ls, lcols = self.visit(left, False)
        rs, rcols = self.visit(right, False)
        cols = lcols + rcols
        data = g.nodes[node]
        if data["kind"] == "join" and data["rel"].join.HasField("expression"):
            for c in conjuncts(data["rel"].join.expression, self.ctx.functions):
                self.predicates.append(remap_fields(c, lambda i, cols=cols: cols[i]))
        body = getattr(data["rel"], data["kind"])
        if body.common.HasField("emit"):
            cols = [cols[j] for j in body.common.emit.output_mapping]
        return (ls, rs), cols


def _bits(mask: int) -> Iterator[int]:
    while mask:
        low = mask & -mask
        yield low.bit_length() - 1
        mask ^= low


def _subsets(mask: int) -> Iterator[int]:
    """Non-empty subsets of ``mask``, smallest numbers first."""
    sub = 0
    while True:
        sub = (sub - mask) & mask
        if not sub:
            return
        yield sub


#: The most columns a class of equal columns may have for :meth:`JoinGraph._closure` to close it (more
#: than any region dynamic programming orders: one column per input).
CLOSED_CLASS_LIMIT = 16


class JoinGraph:
    """Leaves, predicates with the leaves they read, cardinalities and the DP over them."""

    def __init__(self, region: Region, ctx: RuleContext) -> None:
        self.region = region
        self.n = len(region.leaves)
        self.offsets = _offsets(region.widths)
        owner: list[int] = []
        for i, w in enumerate(region.widths):
            owner.extend([i] * w)
        self.owner = owner
        self.functions = ctx.functions
        self.pred_masks: list[int] = []
        self.movable: list[bool] = []
        self.pred_equi: list[bool] = []
        self.neighbors = [0] * self.n
        self.predicates, self.pred_class = self._closure(region, ctx)
        for p in self.predicates:
            mask = 0
            for f in referenced_fields(p):
                if 0 <= f < len(owner):
                    mask |= 1 << owner[f]
            movable = not has_subquery(p) and is_deterministic(p, ctx.functions)
            if not movable:
                mask = (1 << self.n) - 1
            self.pred_masks.append(mask)
            self.movable.append(movable)
            self.pred_equi.append(movable and bin(mask).count("1") == 2
                                  and function_name(p, ctx.functions) in ("equal", "is_not_distinct_from"))
            if movable and bin(mask).count("1") >= 2:
                for a in _bits(mask):
                    self.neighbors[a] |= mask & ~(1 << a)
        #: Per leaf, the movable predicates that read it (in order); the predicates that cannot move.
        #: :meth:`_between` looks only at those of the smaller side's leaves, not at every predicate.
        self.preds_of: list[list[int]] = [[] for _ in range(self.n)]
        self.fixed_preds: list[int] = []
        for i, (pm, mv) in enumerate(zip(self.pred_masks, self.movable, strict=True)):
            if not mv:
                self.fixed_preds.append(i)
                continue
            for a in _bits(pm):
                self.preds_of[a].append(i)
        #: Per leaf, the leaves it has an equi-key with; the predicates that are not equi-keys.
        #: join_cost reads a pair's kind of condition from them without listing its predicates.
        self.equi_adj = [0] * self.n
        self.other_preds: list[tuple[int, bool]] = []
        for pm, mv, eq in zip(self.pred_masks, self.movable, self.pred_equi, strict=True):
            if eq:
                a, b = _bits(pm)
                self.equi_adj[a] |= 1 << b
                self.equi_adj[b] |= 1 << a
            else:
                self.other_preds.append((pm, mv))
        self.estimator = ctx.estimator
        self.model = ctx.cost_model
        #: ``time.thread_time()`` past which a new estimate raises :class:`_OverBudget` (None: no limit).
        self.deadline: float | None = None
        #: The estimate of every subset of leaves priced so far (columns in leaf order), and its rows.
        self.est: dict[int, RelEstimate] = {}
        self.card: dict[int, float] = {}
        for i, leaf in enumerate(region.leaves):
            est = ctx.estimate(leaf)
            local = self._local(i)
            shift = {g: g - self.offsets[i] for g in range(self.offsets[i], self.offsets[i] + region.widths[i])}
            for p in local:
                est = self.estimator.apply_filter(remap_fields(p, shift), est)
            self._keep(1 << i, est)

    def _local(self, leaf: int) -> list[Expression]:
        """The movable predicates that read ``leaf`` only, in order: a filter on it."""
        return [self.predicates[i] for i in self.preds_of[leaf] if self.pred_masks[i] == 1 << leaf]

    def _keep(self, mask: int, est: RelEstimate) -> None:
        est = evolve(est, rows=max(1.0, saturate_cost(est.rows)))
        self.est[mask] = est
        self.card[mask] = est.rows

    def _columns(self, mask: int) -> list[int]:
        """The global column numbers of a subset's estimate, in leaf order."""
        return [c for leaf in _bits(mask) for c in range(self.offsets[leaf], self.offsets[leaf] + self.region.widths[leaf])]

    def _between(self, s1: int, s2: int, one_per_class: bool = False) -> list[int]:
        """The predicates a join of ``s1`` and ``s2`` evaluates: those reading both and nothing else
        (a predicate that cannot move waits for the join of every leaf). ``one_per_class``: of the
        equalities of one class of equal columns, only the first (the others are implied: inside
        each side the class's columns are already equal)."""
        both = s1 | s2
        full = (1 << self.n) - 1
        out = []
        seen: set[int] = set()
        # A movable predicate reading both sides reads a leaf of the smaller one.
        small = s1 if s1.bit_count() <= s2.bit_count() else s2
        candidates = {i for leaf in _bits(small) for i in self.preds_of[leaf]}
        if both == full:
            candidates.update(self.fixed_preds)
        for i in sorted(candidates):
            pm, mv = self.pred_masks[i], self.movable[i]
            if (mv and pm & both == pm and pm & s1 != pm and pm & s2 != pm) or (not mv and both == full):
                cls = self.pred_class[i]
                if one_per_class and cls is not None:
                    if cls in seen:
                        continue
                    seen.add(cls)
                out.append(i)
        return out

    def _closure(self, region: Region, ctx: RuleContext) -> tuple[list[Expression], list[int | None]]:
        """The region's predicates plus the equalities their column equalities imply (transitive
        closure: ``a = b AND b = c`` gives ``a = c``), and each predicate's class of equal columns
        (None outside one). Producers write different members of a class (DuckDB's TPC-H Q5 has
        ``c_nationkey = n_nationkey`` where DataFusion has ``s_nationkey = n_nationkey``); with the
        closure both give the same join graph. Only ``equal`` between plain columns of two inputs,
        in classes where every input has at most one column (so that one equality per class at each
        join keeps every member equal); an implied equality holds wherever the written ones do, so
        adding it, or leaving out one a join's other equalities of the class imply, keeps the answer."""
        owner = [i for i, w in enumerate(region.widths) for _ in range(w)]
        parent: dict[int, int] = {}

        def find(x: int) -> int:
            while parent.setdefault(x, x) != x:
                parent[x] = parent[parent[x]]
                x = parent[x]
            return x

        pairs: dict[int, tuple[int, int]] = {}
        for i, p in enumerate(region.predicates):
            if function_name(p, ctx.functions) != "equal" or has_subquery(p) or not is_deterministic(p, ctx.functions):
                continue
            cols = [field_index(a) for a in call_args(p) or []]
            if len(cols) != 2 or None in cols or max(cols) >= len(owner) or owner[cols[0]] == owner[cols[1]]:
                continue
            pairs[i] = (cols[0], cols[1])
            parent[find(cols[0])] = find(cols[1])
        members: dict[int, list[int]] = {}
        for a, b in pairs.values():
            for c in (a, b):
                if c not in members.setdefault(find(c), []):
                    members[find(c)].append(c)
        # A class of more columns than CLOSED_CLASS_LIMIT is left as written (its equalities are ordinary
        # predicates): its closure grows with the square of its size (a 1,000-way join on one key would
        # have 499,500 equalities), and a region that wide is ordered greedily anyway.
        usable = {r for r, cols in members.items()
                  if len(cols) <= CLOSED_CLASS_LIMIT and len({owner[c] for c in cols}) == len(cols)}
        predicates = list(region.predicates)
        classes: list[int | None] = [None] * len(predicates)
        written: set[frozenset[int]] = set()
        template: dict[int, tuple[Expression, int, int]] = {}
        for i, (a, b) in pairs.items():
            root = find(a)
            if root in usable:
                classes[i] = root
                written.add(frozenset((a, b)))
                template.setdefault(root, (region.predicates[i], a, b))
        for root in sorted(usable):
            cols = sorted(members[root])
            p, a, b = template[root]
            for x_i, x in enumerate(cols):
                for y in cols[x_i + 1:]:
                    if frozenset((x, y)) not in written:
                        predicates.append(remap_fields(p, lambda i, a=a, x=x, y=y: x if i == a else y))
                        classes.append(root)
        return predicates, classes

    def cardinality(self, s1: int, s2: int) -> float:
        """The rows of the join of ``s1`` and ``s2``, by the shared cardinality estimator (the first
        split of a subset priced gives its estimate)."""
        both = s1 | s2
        if both in self.card:
            return self.card[both]
        if self.deadline is not None and time.thread_time() > self.deadline:
            raise _OverBudget
        left, right = self.est[s1], self.est[s2]
        # Where each leaf's columns start in the join's output (s1's leaves, then s2's): a column's
        # place is found from its leaf, without listing the columns.
        widths = self.region.widths
        start: dict[int, int] = {}
        n = 0
        for side in (s1, s2):
            for leaf in _bits(side):
                start[leaf] = n
                n += widths[leaf]
        n_left = sum(widths[leaf] for leaf in _bits(s1))
        offsets, owner = self.offsets, self.owner

        def position(g: int) -> int:
            return start[owner[g]] + g - offsets[owner[g]]

        keys: list[tuple[int, int]] = []
        residual: list[Expression] = []
        for i in self._between(s1, s2, one_per_class=True):
            k, r = self.estimator.join_keys(remap_fields(self.predicates[i], position), n_left)
            keys += k
            residual += r
        est = self.estimator.join("INNER", left, right, keys, residual)
        # The columns in leaf order: each leaf's block of the join's output, in place.
        out = est.columns
        if len(out) == n:
            columns = []
            for leaf in _bits(both):
                columns += out[start[leaf]:start[leaf] + widths[leaf]]
        else:
            columns = [out[j] if j < len(out) else None for g in self._columns(both) for j in (position(g),)]
        self._keep(both, evolve(est, columns=columns, width=left.width + right.width))
        return self.card[both]

    def join_cost(self, s1: int, s2: int) -> float:
        """The cost model's price of joining ``s1`` and ``s2`` as a logical join (what Spark runs:
        broadcast or shuffled hash join by the estimated sizes, nested loops without an equi-key)."""
        self.cardinality(s1, s2)
        has_keys, residual = self._condition(s1, s2)
        cost = self.model.logical_join("INNER", self.est[s1], self.est[s2], self.est[s1 | s2], has_keys=has_keys,
                                       residual=residual, has_condition=has_keys or residual)
        return saturate_cost(cost.total)

    def _condition(self, s1: int, s2: int) -> tuple[bool, bool]:
        """Does the join of ``s1`` and ``s2`` evaluate an equi-key, and another predicate (of
        :meth:`_between`)?"""
        small, large = (s1, s2) if s1.bit_count() <= s2.bit_count() else (s2, s1)
        reach = 0
        for a in _bits(small):
            reach |= self.equi_adj[a]
        both = s1 | s2
        full = (1 << self.n) - 1
        residual = any((mv and pm & both == pm and pm & s1 != pm and pm & s2 != pm) or (not mv and both == full)
                       for pm, mv in self.other_preds)
        return bool(reach & large), residual

    def neighborhood(self, mask: int, exclude: int) -> int:
        n = 0
        for v in _bits(mask):
            n |= self.neighbors[v]
        return n & ~exclude & ~mask

    def components(self) -> list[int]:
        seen = 0
        out = []
        for v in range(self.n):
            if seen >> v & 1:
                continue
            comp = 1 << v
            frontier = comp
            while frontier:
                nxt = self.neighborhood(frontier, comp)
                comp |= nxt
                frontier = nxt
            seen |= comp
            out.append(comp)
        return out

    # -- DPccp ---------------------------------------------------------------------------------

    def dpccp(self, component: int, pair_budget: int | None = None) -> tuple[dict[int, float], dict[int, object]]:
        """The cheapest tree of every connected subset of ``component``; raises :class:`_OverBudget`
        after ``pair_budget`` csg-cmp pairs."""
        cost: dict[int, float] = {}
        pairs = 0
        tree: dict[int, object] = {}
        for v in _bits(component):
            cost[1 << v] = 0.0
            tree[1 << v] = v
        vertices = sorted(_bits(component))
        allowed = component

        def emit_ccp(s1: int, s2: int) -> None:
            nonlocal pairs
            pairs += 1
            if pair_budget is not None and pairs > pair_budget:
                raise _OverBudget
            c = saturate_cost(cost[s1] + cost[s2] + self.join_cost(s1, s2))
            both = s1 | s2
            if c < cost.get(both, math.inf):
                cost[both] = c
                tree[both] = (tree[s1], tree[s2])

        def enumerate_cmp_rec(s1: int, s2: int, x: int) -> None:
            n = self.neighborhood(s2, x | ~allowed)
            if not n:
                return
            for sub in _subsets(n):
                if s2 | sub in cost:
                    emit_ccp(s1, s2 | sub)
            for sub in _subsets(n):
                enumerate_cmp_rec(s1, s2 | sub, x | n)

        def emit_csg(s1: int) -> None:
            low = (s1 & -s1).bit_length() - 1
            x = s1 | ((1 << (low + 1)) - 1)
            n = self.neighborhood(s1, x | ~allowed)
            for v in sorted(_bits(n), reverse=True):
                s2 = 1 << v
                emit_ccp(s1, s2)
                enumerate_cmp_rec(s1, s2, x | (n & ((1 << (v + 1)) - 1)))

        def enumerate_csg_rec(s: int, x: int) -> None:
            n = self.neighborhood(s, x | ~allowed)
            if not n:
                return
            for sub in _subsets(n):
                emit_csg(s | sub)
            for sub in _subsets(n):
                enumerate_csg_rec(s | sub, x | n)

        try:
            for v in reversed(vertices):
                emit_csg(1 << v)
                enumerate_csg_rec(1 << v, (1 << (v + 1)) - 1)
        finally:
            # The recursive closures refer to themselves (and to this graph and its estimates): cleared here,
            # all of it is freed on return instead of at the garbage collector's next pass.
            emit_ccp = enumerate_cmp_rec = emit_csg = enumerate_csg_rec = None  # type: ignore[assignment]
        return cost, tree

    # -- greedy (GOO) --------------------------------------------------------------------------

    def greedy(self, component: int) -> tuple[float, object]:
        """Greedy operator ordering (GOO): join the two connected parts whose join has the fewest
        estimated rows (ties: the parts made first) until one is left. Each pair is priced once, when
        its parts are made, and kept in a heap: about (edges + joins x degree) estimates in all."""
        parts: dict[int, tuple[float, object]] = {}
        made: dict[int, int] = {}  # part -> the order it was made in
        around: dict[int, int] = {}  # part -> the leaves next to it
        root: dict[int, int] = {}  # leaf -> a leaf of its part (union-find), and a root's part:
        part_at: dict[int, int] = {}
        for v in _bits(component):
            parts[1 << v] = (0.0, v)
            made[1 << v] = len(made)
            around[1 << v] = self.neighbors[v] & component & ~(1 << v)
            root[v] = v
            part_at[v] = 1 << v

        def find(v: int) -> int:
            while root[v] != v:
                root[v] = root[root[v]]
                v = root[v]
            return v

        heap: list[tuple[float, int, int, int, int]] = []

        def offer(a: int, b: int) -> None:
            if made[a] > made[b]:
                a, b = b, a
            heapq.heappush(heap, (self.cardinality(a, b), made[a], made[b], a, b))

        for a in list(parts):
            for b in {part_at[find(v)] for v in _bits(around[a])}:
                if made[a] < made[b]:
                    offer(a, b)
        while len(parts) > 1:
            while heap and not (heap[0][3] in parts and heap[0][4] in parts):
                heapq.heappop(heap)
            if heap:
                _, _, _, a, b = heapq.heappop(heap)
            else:  # disconnected inside a component cannot happen; be safe
                a, b = list(parts)[:2]
                self.cardinality(a, b)
            # The estimates of the other pairs of a or b go: neither part is joined again, and no later
            # part holds a's relations without b's (nor b's without a's), so nothing asks for them.
            # Dropped now, not when the search ends: a wide graph's are thousands of objects.
            for part, other in ((a, b), (b, a)):
                for c in {part_at[find(v)] for v in _bits(around[part])}:
                    if c != other:
                        self.est.pop(part | c, None)
            (ca, ta), (cb, tb) = parts.pop(a), parts.pop(b)
            both = a | b
            parts[both] = (ca + cb + self.join_cost(a, b), (ta, tb))
            made[both] = len(made)
            around[both] = (around.pop(a) | around.pop(b)) & ~both
            ra, rb = find(a.bit_length() - 1), find(b.bit_length() - 1)
            root[rb] = ra
            part_at[ra] = both
            for c in sorted({part_at[find(v)] for v in _bits(around[both])}, key=made.__getitem__):
                offer(c, both)
        ((_, (c, t)),) = parts.items()
        return c, t

    def tree_cost(self, shape: JoinTree) -> tuple[int, float]:
        """(mask, cost) of a given tree."""
        if isinstance(shape, int):
            return 1 << shape, 0.0
        lm, lc = self.tree_cost(shape[0])
        rm, rc = self.tree_cost(shape[1])
        return lm | rm, lc + rc + self.join_cost(lm, rm)

    def best_tree(self, dp_limit: int, pair_budget: int | None = None) -> tuple[float, object]:
        """The cheapest tree found: DPccp for a component of up to ``dp_limit`` inputs while it prices
        at most ``pair_budget`` pairs, greedy beyond."""
        results = []
        for comp in self.components():
            if bin(comp).count("1") == 1:
                results.append((comp, 0.0, comp.bit_length() - 1))
                continue
            if bin(comp).count("1") <= dp_limit:
                try:
                    cost, tree = self.dpccp(comp, pair_budget)
                    results.append((comp, cost[comp], tree[comp]))
                    continue
                except _OverBudget:
                    pass
            c, t = self.greedy(comp)
            results.append((comp, c, t))
        # The query's own cross products: join the components, smallest first.
        results.sort(key=lambda r: self.card[r[0]])
        mask, total, tree = results[0]
        for comp, c, t in results[1:]:
            total += c + self.join_cost(mask, comp)
            mask |= comp
            tree = (tree, t)
        return total, tree


class _OverBudget(Exception):
    """DPccp has considered more join pairs than the budget allows, or the estimates of a region
    ordered greedily have taken longer than ``greedy_seconds``."""


def _leaf_order(shape: JoinTree) -> list[int]:
    return [shape] if isinstance(shape, int) else _leaf_order(shape[0]) + _leaf_order(shape[1])


def _mask(shape: JoinTree) -> int:
    return 1 << shape if isinstance(shape, int) else _mask(shape[0]) | _mask(shape[1])


def build_tree(jg: JoinGraph, shape: JoinTree, ctx: RuleContext) -> tuple[NewRel | int, list[int]]:
    """The NewRel for a tree and the global column numbers of its output, in order."""
    region = jg.region
    if isinstance(shape, int):
        cols = list(range(jg.offsets[shape], jg.offsets[shape] + region.widths[shape]))
        local = jg._local(shape)
        node: NewRel | int = region.leaves[shape]
        if local:
            position = {g: i for i, g in enumerate(cols)}
            rel = Rel()
            rel.filter.condition.CopyFrom(make_and([remap_fields(p, position) for p in local], ctx.registrar))
            node = NewRel(rel, [node])
        return node, cols
    left, lcols = build_tree(jg, shape[0], ctx)
    right, rcols = build_tree(jg, shape[1], ctx)
    lm, rm = _mask(shape[0]), _mask(shape[1])
    cols = lcols + rcols
    position = {g: i for i, g in enumerate(cols)}
    here = [remap_fields(jg.predicates[i], position) for i in jg._between(lm, rm, one_per_class=True)]
    rel = Rel()
    if here:
        rel.join.type = INNER
        rel.join.expression.CopyFrom(make_and(here, ctx.registrar))
    else:
        rel.cross.SetInParent()
    return NewRel(rel, [left, right]), cols
