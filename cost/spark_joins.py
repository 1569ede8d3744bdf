"""How Spark executes a join, by join type: the build sides its hash joins support, and which side it
would build or broadcast. The cost model prices a logical ``JoinRel`` with it (as what Spark will do
with it) and :mod:`rules.implement_joins` chooses the physical join with it, so both agree.

(Spark 4's ``JoinSelectionHelper.canBuildShuffledHashJoinLeft/Right`` and ``canBuildBroadcastLeft/Right``.)

And in which order Spark joins a region of inner joins written with a cross product
(:func:`spark_join_region`, Spark's ``ReorderJoin``), which the cost model prices instead of the
written order.
"""

from __future__ import annotations

from dataclasses import dataclass

import networkx as nx
from substrait.proto import Expression, JoinRel

from optimizer.dag import inputs
from optimizer.expr_utils import conjuncts, movable, referenced_fields

LEFT, RIGHT = "LEFT", "RIGHT"

#: Build sides Spark's shuffled hash join supports, by join type (Substrait name without prefix).
SHUFFLED_HASH_BUILD: dict[str, frozenset[str]] = {
    "INNER": frozenset({LEFT, RIGHT}),
    "LEFT": frozenset({LEFT, RIGHT}),
    "RIGHT": frozenset({LEFT, RIGHT}),
    "OUTER": frozenset({LEFT, RIGHT}),
    **{f"LEFT_{k}": frozenset({RIGHT}) for k in ("SEMI", "ANTI", "SINGLE", "MARK")},
    **{f"RIGHT_{k}": frozenset({LEFT}) for k in ("SEMI", "ANTI", "SINGLE", "MARK")},
}
#: Build sides Spark's broadcast hash join supports, by join type.
BROADCAST_BUILD: dict[str, frozenset[str]] = {
    "INNER": frozenset({LEFT, RIGHT}),
    "LEFT": frozenset({RIGHT}),
    "RIGHT": frozenset({LEFT}),
    "OUTER": frozenset(),
    **{f"LEFT_{k}": frozenset({RIGHT}) for k in ("SEMI", "ANTI", "SINGLE", "MARK")},
    **{f"RIGHT_{k}": frozenset({LEFT}) for k in ("SEMI", "ANTI", "SINGLE", "MARK")},
}
#: Building the side an outer join preserves (Spark's build-side outer join: a bitmap of matched build
#: rows, then a pass over the whole hash table for the unmatched ones) is counted this much bigger.
#: Measured on TPC-H SF 1 Q13 (``customer LEFT JOIN orders``), medians of 6 runs: building customer
#: (150,000 rows, 1.2 MB) took 3.55 s, building the filtered orders (1.48 M rows, 24 MB) 2.91 s and
#: Spark's sort-merge join 3.03 s: the preserved side at a twentieth of the other's size was the slower build.
PRESERVED_BUILD_PENALTY = 32.0
_PRESERVED = {"LEFT": {LEFT}, "RIGHT": {RIGHT}, "OUTER": {LEFT, RIGHT}}


def builds_preserved(type_name: str | None, side: str) -> bool:
    """Whether a hash join of this type building ``side`` builds the side its outer join preserves.

    >>> builds_preserved("LEFT", "LEFT"), builds_preserved("LEFT", "RIGHT"), builds_preserved("INNER", "LEFT")
    (True, False, False)
    """
    return side in _PRESERVED.get(type_name or "", set())


def choose_build(type_name: str, left_bytes: float, right_bytes: float, threshold: float) -> tuple[str, bool] | None:
    """``(side, broadcast)`` for a hash join of this type and these input sizes; None if no side is valid.

    >>> choose_build("INNER", 8e9, 2e6, 10e6)
    ('RIGHT', True)
    >>> choose_build("INNER", 1e6, 8e9, 0)
    ('LEFT', False)
    >>> choose_build("LEFT", 1e3, 8e9, 10e6)   # a LEFT join broadcasts only its right side
    ('LEFT', False)
    >>> choose_build("LEFT_ANTI", 1e3, 8e9, 10e6)
    ('RIGHT', False)
    """
    sides = SHUFFLED_HASH_BUILD.get(type_name, frozenset())
    if not sides:
        return None
    size = {LEFT: left_bytes, RIGHT: right_bytes}
    broadcastable = [s for s in BROADCAST_BUILD.get(type_name, ()) if size[s] <= threshold]
    if broadcastable:
        return min(broadcastable, key=lambda s: (size[s], s != RIGHT)), True

    def weight(side: str) -> tuple[float, bool]:
        return (size[side] * (PRESERVED_BUILD_PENALTY if builds_preserved(type_name, side) else 1.0), side != RIGHT)

    return min(sides, key=weight), False


@dataclass
class JoinRegion:
    """A left-deep region of inner joins that Spark's ``ReorderJoin`` reorders (see :func:`spark_join_region`)."""

    #: the region's relations (its joins, cross products and filters), top first
    nodes: list[int]
    #: the inputs, in the written order (the columns of the region are theirs, concatenated)
    leaves: list[int]
    #: the movable conjuncts of the joins' and filters' conditions over those columns, each with the
    #: bit mask of the leaves it reads
    conditions: list[tuple[Expression, int]]
    #: the conjuncts that cannot move (a subquery, a nondeterministic call): evaluated at the top
    fixed: list[Expression]
    #: the order Spark joins the leaves in (left-deep), by position in ``leaves``
    order: list[int]


def _region_member(g: nx.DiGraph, node: int) -> bool:
    """An inner join or cross product Spark flattens (a logical one: a physical join carries a hint,
    which stops Spark's reordering), or a filter over one."""
    data = g.nodes[node]
    kind = data["kind"]
    if kind == "filter":
        below = inputs(g, node)
        return len(below) == 1 and g.nodes[below[0]]["kind"] in ("join", "cross") and _region_member(g, below[0])
    if kind not in ("join", "cross"):
        return False
    body = getattr(data["rel"], kind)
    if body.HasField("advanced_extension"):
        return False
    return kind == "cross" or (body.type == JoinRel.JOIN_TYPE_INNER and not body.HasField("post_join_filter"))


def joins_without_condition(g: nx.DiGraph, node: int) -> bool:
    """A cross product or a logical join without a condition: every region (:func:`spark_join_region`)
    holds one."""
    kind = g.nodes[node]["kind"]
    return kind == "cross" or (kind == "join" and not g.nodes[node]["rel"].join.HasField("expression"))


def _continues(g: nx.DiGraph, node: int) -> bool:
    """Does the region go on below into ``node`` (the left input of a member): a member read once,
    without an emit (a projection between joins stops Spark's flattening)?"""
    if not _region_member(g, node) or g.in_degree(node) != 1 or any(r["node"] == node for r in g.graph["roots"]):
        return False
    (parent,) = g.predecessors(node)
    if len(g.edges[parent, node]["slots"]) != 1:
        return False
    body = getattr(g.nodes[node]["rel"], g.nodes[node]["kind"])
    return not body.common.HasField("emit")


def spark_join_region(g: nx.DiGraph, top: int, functions) -> JoinRegion | None:
    """The region whose top is ``top`` if Spark joins it in another order than written, else None.

    Spark's optimizer (``ReorderJoin``, on whatever the cost-based settings) flattens a left-deep tree
    of inner joins, cross products and filters over them (the left input is followed, a right input
    is an input of the region) and joins the inputs again left-deep: from the first, each time the
    first input in the written order that a condition joins with the inputs joined so far, the next
    one in the written order when none is. So a cross product written in the ``FROM`` order
    (Isthmus' TPC-H Q2: ``part, supplier, partsupp``, no condition between part and supplier) runs as
    ``(part JOIN partsupp) JOIN supplier``, and the written order is what it is only when each of its
    joins has a condition. Conjuncts that read one input are pushed to that input."""
    if not _region_member(g, top) or (_continues(g, top) and _region_member(g, next(iter(g.predecessors(top))))
                                      and inputs(g, next(iter(g.predecessors(top))))[0] == top):
        return None  # not the top: the region above holds it
    nodes: list[int] = []
    rights: list[int] = []
    raw: list[Expression] = []
    keyless = False
    current = top
    while True:
        nodes.append(current)
        data = g.nodes[current]
        body = getattr(data["rel"], data["kind"])
        below = inputs(g, current)
        if data["kind"] == "filter":
            raw += conjuncts(body.condition, functions)
        else:
            rights.append(below[1])
            if data["kind"] == "cross" or not body.HasField("expression"):
                keyless = True
            else:
                raw += conjuncts(body.expression, functions)
        if not _continues(g, below[0]):
            first = below[0]
            break
        current = below[0]
    leaves = [first, *reversed(rights)]
    if not keyless or len(leaves) < 3:
        return None
    owner: list[int] = []
    for i, leaf in enumerate(leaves):
        owner += [i] * len(g.nodes[leaf]["schema"].types)
    conditions: list[tuple[Expression, int]] = []
    fixed: list[Expression] = []
    for c in raw:
        refs = referenced_fields(c)
        if not movable(c, functions) or any(r >= len(owner) for r in refs):
            fixed.append(c)
            continue
        conditions.append((c, sum({1 << owner[r] for r in refs})))
    order = reorder_joins(len(leaves), [m for _, m in conditions])
    if order == list(range(len(leaves))):
        return None
    return JoinRegion(nodes, leaves, conditions, fixed, order)


def reorder_joins(n: int, masks: list[int]) -> list[int]:
    """Spark's ``ReorderJoin.createOrderedJoin`` order of ``n`` inputs joined by conditions reading the
    inputs of each bit mask: from input 0, the first input (in order) a condition joins with those
    joined so far, else the next one.

    >>> reorder_joins(5, [0b00101, 0b00110, 0b01010, 0b11000])  # part, supplier, partsupp, nation, region
    [0, 2, 1, 3, 4]
    """
    order, joined = [0], 1
    rest = list(range(1, n))
    while rest:
        pick = next((i for i in rest if any(m & ~(joined | 1 << i) == 0 and m & joined and m & 1 << i
                                            for m in masks)), rest[0])
        order.append(pick)
        joined |= 1 << pick
        rest.remove(pick)
    return order
