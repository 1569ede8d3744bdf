"""A Substrait plan as a networkx DAG, and back.

One node per relation. A node holds:

* ``kind``: the ``Rel`` oneof name (``"read"``, ``"join"``, ``"hash_join"``, ...);
* ``rel``: the ``Rel`` message with its input fields cleared (its own fields only);
* ``schema``: the output schema, once derived (:func:`annotate_schemas`);
* ``plan_rel``: the index in ``plan.relations`` of the ``PlanRel`` this node was written as, if
  a ``ReferenceRel`` pointed at it (kept so that the plan is written back as it came).

Edges go from a relation to its inputs. ``slots`` lists the input positions the child fills
(left 0, right 1; set inputs in order); a relation that reads the same shared subtree twice (a
self-join of a common table expression) has one edge with two slots. ``slot`` is the first one.

A ``ReferenceRel`` becomes an edge to the shared node, so a subtree used twice is one node with two
parents. :func:`from_dag` writes such a node once, as a ``PlanRel.rel``, and each use as a
``ReferenceRel``. ``g.graph["plan"]`` keeps the plan's other fields, ``g.graph["roots"]`` its
relations in order, ``g.graph["functions"]`` its function table (a copy of the loaded plan's: a rule
that declares a function declares it there too, :class:`optimizer.expr_utils.FunctionRegistrar`).

>>> from substrait.proto import Plan
>>> from optimizer.plan_io import load_plan
>>> plan = load_plan('''{"relations": [{"root": {"input": {"filter": {
...   "input": {"read": {"namedTable": {"names": ["t"]},
...                    "baseSchema": {"names": ["a"], "struct": {"types": [{"i64": {}}]}}}},
...   "condition": {"literal": {"boolean": true}}}}, "names": ["a"]}}]}''')
>>> g = to_dag(plan)
>>> [(g.nodes[n]["kind"], [g.nodes[c]["kind"] for c in inputs(g, n)]) for n in g]
[('filter', ['read']), ('read', [])]
>>> from_dag(g) == plan
True
"""

from __future__ import annotations

import hashlib
import itertools
import weakref
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field

import networkx as nx
from google.protobuf.descriptor import FieldDescriptor
from substrait.proto import Plan, PlanRel, Rel

from optimizer.errors import PlanError
from optimizer.load.functions import FunctionTable
from optimizer.load.protobuf_depth import deep_messages
from optimizer.schema.derivation import plan_functions

_REL = Rel.DESCRIPTOR.full_name


@dataclass(frozen=True)
class InputField:
    """Where an input relation sits in a relation message."""

    name: str
    repeated: bool


def input_fields(kind: str) -> list[InputField]:
    """The fields of a relation kind that hold input relations, in slot order."""
    return _INPUT_FIELDS.get(kind, [])


def _compute_input_fields() -> dict[str, list[InputField]]:
    out: dict[str, list[InputField]] = {}
    for oneof_field in Rel.DESCRIPTOR.oneofs_by_name["rel_type"].fields:
        body = oneof_field.message_type
        out[oneof_field.name] = [
            InputField(f.name, f.label == FieldDescriptor.LABEL_REPEATED)
            for f in body.fields
            if f.type == FieldDescriptor.TYPE_MESSAGE and f.message_type.full_name == _REL
        ]
    return out


_INPUT_FIELDS = _compute_input_fields()


def rel_body(rel: Rel):
    """The message inside a ``Rel`` (``rel.join`` for a join, ...)."""
    kind = rel.WhichOneof("rel_type")
    if kind is None:
        raise PlanError("relation has no type (empty Rel)")
    return getattr(rel, kind)


def rel_inputs(rel: Rel) -> list[Rel]:
    """The input relations of a ``Rel`` message, in slot order."""
    kind = rel.WhichOneof("rel_type")
    body = getattr(rel, kind)
    out: list[Rel] = []
    for f in input_fields(kind):
        value = getattr(body, f.name)
        if f.repeated:
            out.extend(value)
        elif body.HasField(f.name):
            out.append(value)
    return out


def strip_inputs(rel: Rel) -> Rel:
    """A copy of ``rel`` with its input fields cleared."""
    out = Rel()
    out.CopyFrom(rel)
    kind = out.WhichOneof("rel_type")
    body = getattr(out, kind)
    for f in input_fields(kind):
        body.ClearField(f.name)
    return out


def to_dag(plan: Plan, functions: FunctionTable | None = None) -> nx.DiGraph:
    """Convert a plan into a DAG (see the module docstring). ``functions``: the plan's function table
    where the caller has it (a loaded plan's, :class:`optimizer.load.pipeline.LoadedPlan`): the DAG
    takes a copy, which its rules' declarations change, not the plan's; built from the plan if None."""
    g = nx.DiGraph()
    header = Plan()
    header.CopyFrom(plan)
    header.ClearField("relations")
    g.graph["plan"] = header
    g.graph["functions"] = functions.copy() if functions is not None else plan_functions(header)
    g.graph["roots"] = []
    counter = iter(range(1 << 62))
    # plan.relations index -> node, filled as ReferenceRels are followed (and for every PlanRel).
    by_ordinal: dict[int, int] = {}
    in_progress: set[int] = set()

    def top_rel(index: int) -> tuple[Rel, str]:
        entry = plan.relations[index]
        if entry.WhichOneof("rel_type") == "root":
            return entry.root.input, f"relations[{index}].root.input"
        return entry.rel, f"relations[{index}].rel"

    def visit_ordinal(index: int, path: str) -> int:
        if index in by_ordinal:
            return by_ordinal[index]
        if index < 0 or index >= len(plan.relations):
            raise PlanError(f"ReferenceRel points at subtree {index}, but the plan has {len(plan.relations)} relations", path)
        if index in in_progress:
            raise PlanError(f"cycle of references through subtree {index}", path)
        in_progress.add(index)
        rel, rel_path = top_rel(index)
        node = visit(rel, rel_path)
        in_progress.discard(index)
        by_ordinal[index] = node
        if rel.WhichOneof("rel_type") != "reference":  # this entry holds the node itself
            g.nodes[node]["plan_rel"] = index
        return node

    def visit(rel: Rel, path: str) -> int:
        kind = rel.WhichOneof("rel_type")
        if kind is None:
            raise PlanError("relation has no type (empty Rel)", path)
        if kind == "reference":
            return visit_ordinal(rel.reference.subtree_ordinal, f"{path}.reference")
        return visit_body(rel, kind, path)

    def via(rel: Rel) -> int | None:
        """The ordinal a ReferenceRel names (kept: a chain of references is written back as it was)."""
        return rel.reference.subtree_ordinal if rel.WhichOneof("rel_type") == "reference" else None

    def visit_body(rel: Rel, kind: str, path: str) -> int:
        node = next(counter)
        g.add_node(node, kind=kind, rel=strip_inputs(rel))
        body = getattr(rel, kind)
        slot = 0
        for f in input_fields(kind):
            if f.repeated:
                children = [(child, f"{path}.{kind}.{f.name}[{i}]") for i, child in enumerate(getattr(body, f.name))]
            elif body.HasField(f.name):
                children = [(getattr(body, f.name), f"{path}.{kind}.{f.name}")]
            else:
                children = []
            for child, child_path in children:
                child_node = visit(child, child_path)
                if g.has_edge(node, child_node):
                    g.edges[node, child_node]["slots"].append(slot)
                else:
                    g.add_edge(node, child_node, slot=slot, slots=[slot], via={})
                if via(child) is not None:
                    g.edges[node, child_node]["via"][slot] = via(child)
                slot += 1
        return node

    try:
        for index, entry in enumerate(plan.relations):
            which = entry.WhichOneof("rel_type")
            if which is None:
                raise PlanError("a plan relation is neither a root nor a rel", f"relations[{index}]")
            node = visit_ordinal(index, f"relations[{index}]")
            top = entry.root.input if which == "root" else entry.rel
            g.graph["roots"].append(
                {"node": node, "kind": which, "names": list(entry.root.names) if which == "root" else None,
                 "via": via(top)}
            )
    finally:
        # The recursive closures refer to themselves: cleared here, they are freed on return instead of at the
        # garbage collector's next pass.
        top_rel = visit_ordinal = visit = via = visit_body = None  # type: ignore[assignment]
    # PlanRel nodes that nothing referenced need no marker: they are written back at their index.
    for node in list(g.nodes):
        index = g.nodes[node].get("plan_rel")
        if index is not None and uses(g, node) <= 1:
            del g.nodes[node]["plan_rel"]
    return g


def inputs(g: nx.DiGraph, node: int) -> list[int]:
    """The input nodes of ``node`` in slot order (a node read twice appears twice)."""
    below = list(g.successors(node))
    # Most relations read one or two inputs, each in one slot: those without building and sorting pairs
    # (this runs for every relation priced or estimated).
    edges = g.edges
    if len(below) == 1:
        return below * len(edges[node, below[0]]["slots"])
    if len(below) == 2:
        a, b = below
        slots_a, slots_b = edges[node, a]["slots"], edges[node, b]["slots"]
        if len(slots_a) == 1 and len(slots_b) == 1:
            return below if slots_a[0] < slots_b[0] else [b, a]
    slots: list[tuple[int, int]] = []
    for child in below:
        for s in edges[node, child]["slots"]:
            slots.append((s, child))
    return [child for _, child in sorted(slots)]


def parents(g: nx.DiGraph, node: int) -> list[int]:
    return list(g.predecessors(node))


def uses(g: nx.DiGraph, node: int) -> int:
    """How many times a node's output is read: by parents (per slot) and by plan roots (``RelRoot``)."""
    n = sum(len(g.edges[p, node]["slots"]) for p in g.predecessors(node))
    return n + sum(1 for r in g.graph["roots"] if r["node"] == node and r["kind"] == "root")


@dataclass
class _GraphIndex:
    """What is kept about one graph between rewrites (:func:`subtree_key`, :func:`written_like`)."""

    #: node -> its subtree digest.
    keys: dict[int, bytes] = field(default_factory=dict)
    #: The nodes of the graph by subtree digest, and those whose digest is not known (None: the nodes are
    #: not listed yet).
    by_key: dict[bytes, set[int]] = field(default_factory=dict)
    unkeyed: set[int] | None = None
    #: node -> (its relation, the bytes its digest starts with): a digest forgotten because something
    #: below changed is computed again from these, while the node keeps that relation.
    own: dict[int, tuple[Rel, bytes]] = field(default_factory=dict)
    #: The nodes removed (:func:`drop_subtree_keys`) and the number added (:func:`note_added`) since the
    #: index was made: what :func:`removed_since` answers from.
    removed: list[int] = field(default_factory=list)
    added: int = 0


#: Per graph, by graph identity: a copy of a graph (``g.copy()``, :func:`copy_dag`, a rule's scratch
#: graph) starts with nothing known. The one place the inputs of a kept node change,
#: :func:`optimizer.engine.replace_node`, forgets the digests of the nodes above
#: (:func:`forget_subtree_keys`); :func:`optimizer.engine.add_subgraph` and the removal of nodes tell
#: the index (:func:`note_added`, :func:`drop_subtree_keys`).
_INDEX: weakref.WeakKeyDictionary[nx.DiGraph, _GraphIndex] = weakref.WeakKeyDictionary()


def _index(g: nx.DiGraph) -> _GraphIndex:
    index = _INDEX.get(g)
    if index is None:
        index = _INDEX.setdefault(g, _GraphIndex())
    return index


def _unkey(index: _GraphIndex, node: int, key: bytes) -> None:
    same = index.by_key.get(key)
    if same is not None and node in same:
        same.discard(node)
        if not same:
            del index.by_key[key]
        if index.unkeyed is not None:
            index.unkeyed.add(node)


def forget_subtree_keys(g: nx.DiGraph, nodes: Iterable[int]) -> None:
    """Forget the digests of ``nodes`` and of every node above them, for inputs that changed under
    ``nodes``. A node has a digest only once all below it have one, so the walk up stops at a node
    without one."""
    index = _INDEX.get(g)
    if index is None or not index.keys:
        return
    stack = list(nodes)
    while stack:
        node = stack.pop()
        key = index.keys.pop(node, None)
        if key is not None:
            _unkey(index, node, key)
            if node in g:
                stack.extend(g.predecessors(node))


def note_added(g: nx.DiGraph, node: int) -> None:
    """Tell the index of ``g`` of a node just added."""
    index = _INDEX.get(g)
    if index is not None:
        index.added += 1
        if index.unkeyed is not None:
            index.unkeyed.add(node)


#: What :func:`removed_since` compares with: the graph's node count, and the nodes added and removed so far.
ChangeMark = tuple[int, int, int]


def change_mark(g: nx.DiGraph) -> ChangeMark:
    """A mark of the nodes of ``g`` as they are now, for :func:`removed_since`."""
    index = _index(g)
    return len(g), index.added, len(index.removed)


def removed_since(g: nx.DiGraph, mark: ChangeMark) -> list[int] | None:
    """The nodes removed from ``g`` since ``mark`` (:func:`change_mark`) without looking at every node,
    or None where not every change since went through :func:`optimizer.engine.add_subgraph` and
    :func:`optimizer.engine.collect_garbage` (the node count says otherwise): then the caller compares."""
    index = _INDEX.get(g)
    if index is None:
        return None
    nodes, added, removed = mark
    gone = index.removed[removed:]
    if len(g) != nodes + index.added - added - len(gone):
        return None
    return gone


def drop_subtree_keys(g: nx.DiGraph, nodes: Iterable[int]) -> None:
    """Forget what is known of ``nodes``, removed from ``g`` (their ids may be given again)."""
    index = _INDEX.get(g)
    if index is None:
        return
    nodes = list(nodes)
    index.removed.extend(nodes)
    for node in nodes:
        key = index.keys.pop(node, None)
        if key is not None:
            _unkey(index, node, key)
        if index.unkeyed is not None:
            index.unkeyed.discard(node)
        index.own.pop(node, None)


def written_like(g: nx.DiGraph, key: bytes) -> set[int]:
    """The nodes of ``g`` whose subtree digest is ``key`` (:func:`subtree_key`); the set is the index's
    own (not to be changed)."""
    index = _index(g)
    if index.unkeyed is None:
        index.unkeyed = set()
        for n in g:
            known = index.keys.get(n)
            if known is None:
                index.unkeyed.add(n)
            else:
                index.by_key.setdefault(known, set()).add(n)
    while index.unkeyed:
        subtree_key(g, next(iter(index.unkeyed)))  # files it under its digest
    return index.by_key.get(key, set())


def subtree_key(g: nx.DiGraph, node: int) -> bytes:
    """A digest of the subtree at ``node``, equal for two subtrees written alike: the same relations
    (their hints aside) over the same inputs in the same order. Producers inline a CTE read twice as two
    such copies; Spark plans them alike and computes them once (its exchange reuse). Digests are kept
    per graph until a rewrite changes what is below (:func:`forget_subtree_keys`)."""
    index = _index(g)
    memo, own = index.keys, index.own
    found = memo.get(node)
    if found is not None:
        return found
    # Children before parents, without recursion: a subtree may be deeper than Python's stack.
    stack: list[tuple[int, list[int] | None]] = [(node, None)]
    while stack:
        n, children = stack.pop()
        if n in memo:
            continue
        if children is None:  # first visit: its inputs go first, then the node again with them
            children = inputs(g, n)
            stack.append((n, children))
            stack.extend((c, None) for c in children if c not in memo)
            continue
        written = g.nodes[n]["rel"]
        seen = own.get(n)
        if seen is not None and seen[0] is written:
            data = seen[1]
        else:
            rel = Rel()
            rel.CopyFrom(written)
            body = rel_body(rel)
            if body.HasField("common"):
                body.common.ClearField("hint")
                if body.common.ByteSize() == 0:  # an empty RelCommon means what none does
                    body.ClearField("common")
            data = rel.SerializeToString(deterministic=True)
            own[n] = (written, data)
        digest = hashlib.blake2b(data, digest_size=16)
        for child in children:
            digest.update(memo[child])
        memo[n] = key = digest.digest()
        if index.unkeyed is not None and n in index.unkeyed:
            index.unkeyed.discard(n)
            index.by_key.setdefault(key, set()).add(n)
    return memo[node]


def written_elsewhere(g: nx.DiGraph, node: int) -> bool:
    """Whether another node of the plan is the root of a subtree written like the one at ``node``
    (:func:`subtree_key`)."""
    return any(n != node for n in written_like(g, subtree_key(g, node)))


def is_broadcast(g: nx.DiGraph, node: int) -> bool:
    """Whether the relation at ``node`` is an ``ExchangeRel`` that broadcasts its input."""
    data = g.nodes[node]
    return data["kind"] == "exchange" and data["rel"].exchange.WhichOneof("exchange_kind") == "broadcast"


def reused_broadcasts(g: nx.DiGraph, nodes: set[int], elsewhere: set[int] | None = None) -> set[int]:
    """The broadcast ``ExchangeRel``s of ``nodes`` that Spark reuses instead of computing: Spark computes
    broadcast exchanges over subtrees written alike (:func:`subtree_key`) once, and reads
    the others as a ``ReusedExchange``. Of such exchanges among ``nodes`` the one with the lowest id is
    computed, unless one of ``elsewhere`` (the rest of the plan) already is; the others are reused."""
    def broadcasts(among: set[int]) -> list[int]:
        return sorted(n for n in among if is_broadcast(g, n))

    own = broadcasts(nodes)
    if not own:
        return set()
    computed = {subtree_key(g, n) for n in broadcasts(elsewhere or set())}
    reused: set[int] = set()
    for n in own:
        key = subtree_key(g, n)
        if key in computed:
            reused.add(n)
        computed.add(key)
    return reused


#: Relations below which Spark exchanges rows: a repeated one is computed once (its exchange reused).
_EXCHANGING = frozenset({"aggregate", "join", "hash_join", "merge_join", "nested_loop_join", "cross", "set"})


def repeats_within(g: nx.DiGraph, top: int) -> bool:
    """Whether the subtree at ``top`` holds an aggregate, join or set operation that the plan repeats
    elsewhere, written alike (:func:`subtree_key`), as a producer writes each read of a CTE."""
    inside = {top} | nx.descendants(g, top)
    keys = {subtree_key(g, n) for n in inside if g.nodes[n]["kind"] in _EXCHANGING}
    if not keys:
        return False
    return any(subtree_key(g, n) in keys for n in g.nodes
               if n not in inside and g.nodes[n]["kind"] in _EXCHANGING)


def topological_from_roots(g: nx.DiGraph) -> Iterator[int]:
    """Nodes parents-first."""
    return iter(nx.topological_sort(g))


@deep_messages()
def from_dag(g: nx.DiGraph) -> Plan:
    """Write a DAG back as a plan; shared nodes become a ``PlanRel.rel`` and ``ReferenceRel``s."""
    if not nx.is_directed_acyclic_graph(g):
        raise PlanError("the relation graph has a cycle")
    plan = Plan()
    plan.CopyFrom(g.graph["plan"])
    plan.ClearField("relations")
    roots = g.graph["roots"]
    ordinal: dict[int, int] = {}
    for index, entry in enumerate(roots):
        node = entry["node"]
        if g.nodes[node].get("plan_rel") == index or (entry["kind"] == "rel" and node not in ordinal):
            ordinal[node] = index
    extra: list[int] = []
    for node in nx.topological_sort(g):
        if node in ordinal:
            continue
        if g.nodes[node].get("plan_rel") is not None or uses(g, node) > 1:
            ordinal[node] = len(roots) + len(extra)
            extra.append(node)

    def resolves_to(index: int | None, node: int) -> bool:
        return index is not None and 0 <= index < len(roots) and roots[index]["node"] == node

    def reference(node: int, original: int | None) -> Rel:
        ref = Rel()
        ref.reference.subtree_ordinal = original if resolves_to(original, node) else ordinal[node]
        return ref

    def build(node: int, top: bool) -> Rel:
        if node in ordinal and not top:
            return reference(node, None)
        data = g.nodes[node]
        rel = Rel()
        rel.CopyFrom(data["rel"])
        kind = data["kind"]
        body = getattr(rel, kind)
        children = inputs(g, node)
        fields = input_fields(kind)
        # Single-input fields take one slot each, in declaration order; a repeated field takes the rest.
        def child_rel(slot: int) -> Rel:
            child = children[slot]
            original = g.edges[node, child].get("via", {}).get(slot)
            if original is not None and resolves_to(original, child):
                return reference(child, original)
            return build(child, False)

        slot = 0
        for f in fields:
            if f.repeated:
                for s in range(slot, len(children)):
                    getattr(body, f.name).add().CopyFrom(child_rel(s))
                slot = len(children)
            elif slot < len(children):
                getattr(body, f.name).CopyFrom(child_rel(slot))
                slot += 1
        if slot < len(children):
            raise PlanError(f"a {kind} relation cannot hold {len(children)} inputs")
        return rel

    try:
        for index, entry in enumerate(roots):
            node = entry["node"]
            top = ordinal.get(node) == index
            original = entry.get("via")
            rel = reference(node, original) if not top and resolves_to(original, node) else build(node, top)
            if entry["kind"] == "root":
                plan_rel = PlanRel()
                plan_rel.root.input.CopyFrom(rel)
                plan_rel.root.names.extend(entry["names"] or [])
            else:
                plan_rel = PlanRel(rel=rel)
            plan.relations.append(plan_rel)
        for node in extra:
            plan.relations.append(PlanRel(rel=build(node, True)))
    finally:
        resolves_to = reference = build = None  # type: ignore[assignment]  # as in to_dag
    return plan


def annotate_schemas(g: nx.DiGraph) -> nx.DiGraph:
    """Derive every node's output schema into ``g.nodes[n]["schema"]`` (children first)."""
    from optimizer.schema import rel_schema

    functions = g.graph["functions"]
    for node in reversed(list(nx.topological_sort(g))):
        data = g.nodes[node]
        data["schema"] = rel_schema(
            data["rel"], [g.nodes[c]["schema"] for c in inputs(g, node)], functions, path=f"node {node} ({data['kind']})"
        )
    return g


def copy_dag(g: nx.DiGraph) -> nx.DiGraph:
    """A copy of ``g`` that no rewrite of ``g`` changes (rules replace relations, never edit them, so the
    relation messages are shared; edges, roots, the plan header and its function table are copied). An
    edge's ``slots`` list is shared too: it is filled while the edge is made (:func:`to_dag`,
    :func:`optimizer.engine.add_subgraph`) and replaced, never changed, after."""
    # ``g.copy()`` and a second pass over the edges for their ``via`` in one: networkx copies each
    # node's and edge's attribute dict as it adds it.
    h = g.__class__()
    h.graph.update(g.graph)
    h.add_nodes_from(g.nodes(data=True))
    h.add_edges_from((u, v, {**data, "via": dict(data.get("via") or {})}) for u, v, data in g.edges(data=True))
    h.graph["roots"] = [dict(root) for root in g.graph["roots"]]
    header = Plan()
    header.CopyFrom(g.graph["plan"])
    h.graph["plan"] = header
    h.graph["functions"] = g.graph["functions"].copy()
    counter = h.graph.pop("_ids", None)
    if counter is not None:
        # New ids in the copy start above every id ``g`` ever gave (its discarded candidates' too), so
        # what was remembered about a node id in ``g`` (CardinalityEstimator.fork) never names a new node.
        h.graph["_ids"] = itertools.count(next(counter))
    return h
