"""The output columns of each relation that something above reads: what Spark keeps after its column
pruning, so the bytes the cost model moves, holds and reads are those of these columns only.

Producers differ here (Isthmus reads every column of a table and projects late, DataFusion prunes at
the read); Spark prunes both the same way, so the estimates should not depend on it.

Top-down from the roots (every root column is needed): a relation needs, of its inputs, the columns its
needed outputs come from and every column its own expressions read (conditions, keys, sort fields,
measures). A relation read by several parents needs the union of what they need. Where the rules are
not sure (an aggregate's measures, set operations other than ``UNION ALL``, expressions with subqueries,
kinds not listed), every input column is needed: never fewer than Spark keeps.

A relation no root reaches (a rewrite's candidate, priced before it replaces a relation) takes the
needs of the relation it would replace (:func:`add_candidate`); one with neither is left out (all its columns count).

After rewrites, :func:`update_needed` recomputes only what they can have changed: the needs of the
relations below a new one, and below one that lost a reader.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

import networkx as nx

from optimizer.dag import inputs
from optimizer.expr_utils import join_type_name, reads_and_unsure, referenced_fields

#: Body fields that are not expressions of the relation itself.
_NOT_EXPRESSIONS = frozenset({"input", "left", "right", "inputs", "common", "advanced_extension",
                              "keys", "left_keys", "right_keys"})
_JOIN_KINDS = frozenset({"join", "hash_join", "merge_join", "nested_loop_join", "cross"})
_PASS_THROUGH = frozenset({"filter", "fetch", "sort", "top_n", "exchange"})


#: What :func:`_facts` gives a relation that is not a projection, and one that is not a hash or merge join.
_NO_EXPRESSIONS: tuple[set[int], ...] = ()
_NO_KEYS: tuple[frozenset[int], frozenset[int]] = (frozenset(), frozenset())

#: Per node: its ``Rel`` and what :func:`_facts` found in it (valid while the node keeps that ``Rel``).
RefCache = dict[int, tuple[object, tuple]]


class Readers(dict[int, frozenset[int]]):
    """``{node: its readers when its needs were computed}``, and :attr:`of`, the other way round
    (``{reader: the nodes it was recorded reading}``), so that :func:`update_needed` finds the relations
    that lost a reader from the readers that are gone instead of by looking at every relation. Changed
    only through :func:`needed_columns` and :func:`update_needed` (a plain dict works too: then every
    relation is looked at)."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.of: dict[int, set[int]] = {}
        for n, ps in self.items():
            for p in ps:
                self.of.setdefault(p, set()).add(n)


def _record(readers: dict[int, frozenset[int]], n: int, ps: frozenset[int] | None) -> None:
    """Set (``ps``) or drop (None) the readers recorded for ``n``, the reverse index too."""
    old = readers.pop(n, None) if ps is None else readers.get(n)
    if ps is not None:
        readers[n] = ps
    of = getattr(readers, "of", None)
    if of is None:
        return
    if old is not None:
        for p in old if ps is None else old - ps:
            users = of.get(p)
            if users is not None:
                users.discard(n)
                if not users:
                    del of[p]
    if ps is not None:
        for p in ps if old is None else ps - old:
            of.setdefault(p, set()).add(n)


def needed_columns(g: nx.DiGraph, cache: RefCache | None = None,
                   readers: dict[int, frozenset[int]] | None = None) -> dict[int, set[int]]:
    """``{node: output columns read above}`` for every node reachable from a root (a candidate is added
    with :func:`add_candidate`). ``cache`` keeps each relation's own column references between calls;
    ``readers``, if given, is filled with each node's readers, for :func:`update_needed`."""
    width = _Widths(g)
    needed: dict[int, set[int]] = {}
    for root in g.graph.get("roots", []):
        n = root["node"]
        if n in g and width[n] is not None:  # a relation of unknown width is left out: all its columns count
            needed.setdefault(n, set()).update(_all(width[n]))
    _propagate(g, needed, width, nx.topological_sort(g), cache)
    if readers is not None:
        readers.clear()
        readers.update((n, frozenset(g.predecessors(n))) for n in needed)
        if isinstance(readers, Readers):
            readers.of = Readers(readers).of
    return needed


def update_needed(g: nx.DiGraph, needed: dict[int, set[int]], readers: dict[int, frozenset[int]],
                  changed: Iterable[int], cache: RefCache | None = None,
                  removed: Iterable[int] | None = None) -> set[int]:
    """Bring ``needed`` and ``readers`` (as :func:`needed_columns` or this function left them) up to date,
    in place, after rewrites that put the relations ``changed`` in place of others; the nodes whose
    needs changed (removed ones included). ``removed``: every node removed from ``g`` since ``needed``
    was last brought up to date (:func:`optimizer.dag.removed_since`; None: found by comparing with ``g``).

    What a relation needs depends only on what its readers need and read, so only two kinds of
    relation can need other columns: those below a new relation (it reads them, or a new relation
    below it does), and those below one that lost a reader (the replaced relation). Nodes ids are never
    given twice in a DAG (:func:`optimizer.engine.add_subgraph`), so a reader gone from ``g`` is one
    that was removed. The others keep their needs: recomputed, they would be the same.
    """
    # Set operations run in C: this runs once per rewrite of the plan.
    present = dict.fromkeys(g).keys() if removed is None else None
    gone = set(removed) if removed is not None else None
    out = needed.keys() - present if present is not None else needed.keys() & gone
    for n in out:
        del needed[n]
        _record(readers, n, None)
    new = {n for n in changed if n in g}
    of = getattr(readers, "of", None)
    if of is not None:
        start = new.union(*(of[p] for p in (of.keys() - present if present is not None else of.keys() & gone)))
    else:
        present = present if present is not None else dict.fromkeys(g).keys()
        start = new | {n for n, ps in readers.items() if not present >= ps}
    # Recomputed: a relation in ``start``, and one read by a relation whose contribution may differ
    # (a new one, or one whose needs changed); the needs of the others stay what they were.
    touched = set(new)
    width = _Widths(g)
    roots = {root["node"] for root in g.graph.get("roots", [])}
    # What each reader needs of each of its inputs, computed once per reader (readers come first, so
    # a reader's needs are final when its inputs are reached).
    given: dict[int, list[tuple[int, set[int]]]] = {}

    def needs_given(p: int) -> list[tuple[int, set[int]]]:
        if p not in given:
            children = inputs(g, p)
            given[p] = ([] if any(width[c] is None for c in children) else
                        list(zip(children, _input_needs(g, p, needed[p], children, width, cache), strict=True)))
        return given[p]

    for n in _readers_first(g, start):
        if n not in start and not any(p in touched for p in g.predecessors(n)):
            continue
        cols: set[int] | None = set(_all(width[n])) if n in roots and width[n] is not None else None
        for p in g.predecessors(n):
            if p not in needed:
                continue
            for child, need in needs_given(p):
                if child == n:
                    cols = set(need) if cols is None else cols | need
        old = needed.get(n)
        if cols is None:
            needed.pop(n, None)
            _record(readers, n, None)
        else:
            needed[n] = cols
            _record(readers, n, frozenset(g.predecessors(n)))
        if old != cols:
            out.add(n)
            touched.add(n)
    return out


def _readers_first(g: nx.DiGraph, start: Iterable[int], within: Callable[[int], bool] | None = None) -> list[int]:
    """``start`` and the nodes below (only those ``within`` accepts, if given), each before the nodes
    it reads: the reverse postorder of a depth-first search, a topological order of what it visits."""
    order: list[int] = []
    seen: set[int] = set()
    for s in start:
        if s in seen:
            continue
        seen.add(s)
        stack = [(s, iter(g.successors(s)))]
        while stack:
            node, children = stack[-1]
            for c in children:
                if c not in seen and (within is None or within(c)):
                    seen.add(c)
                    stack.append((c, iter(g.successors(c))))
                    break
            else:
                stack.pop()
                order.append(node)
    order.reverse()
    return order


def add_candidate(g: nx.DiGraph, needed: dict[int, set[int]], candidate: int, replaced: int,
                  cache: RefCache | None = None) -> None:
    """Give the relations of ``candidate``'s subtree that no root reaches the needs they have when
    ``candidate`` is read as ``replaced`` is (in place; relations a root reaches keep theirs)."""
    if candidate not in g or replaced not in needed or g.in_degree(candidate):
        return
    order = _readers_first(g, [candidate], lambda n: n not in needed)
    needed[candidate] = set(needed[replaced])
    _propagate(g, needed, _Widths(g), order, cache, only=set(order))


class _Widths(dict):
    """``{node: number of output columns}`` (None where its schema is unknown), each looked up when
    first asked for."""

    def __init__(self, g: nx.DiGraph) -> None:
        super().__init__()
        self.g = g

    def __missing__(self, n: int) -> int | None:
        schema = self.g.nodes[n].get("schema")
        value = self[n] = len(schema.types) if schema is not None else None
        return value


def _propagate(g: nx.DiGraph, needed: dict[int, set[int]], width: dict[int, int | None], order: Iterable[int],
               cache: RefCache | None, only: set[int] | None = None) -> None:
    for node in order:
        if node not in needed:
            continue
        children = inputs(g, node)
        if not children or any(width[c] is None for c in children):
            continue
        applied: set[tuple[int, int]] = set()
        for child, cols in zip(children, _input_needs(g, node, needed[node], children, width, cache), strict=True):
            if (only is None or child in only) and (child, id(cols)) not in applied:
                applied.add((child, id(cols)))  # (the one set of an input that comes many times, once)
                needed.setdefault(child, set()).update(cols)


def _all(width: int | None) -> set[int]:
    return set(range(width or 0))


def _own_refs(body) -> tuple[set[int], bool]:
    """Columns the relation's own expressions read (over its direct input columns), and whether they
    read anything the rule cannot follow (a subquery, an outer reference)."""
    refs: set[int] = set()
    unsure = False
    for fd, value in body.ListFields():
        if fd.name in _NOT_EXPRESSIONS:
            continue
        items: Iterable = value if fd.label == fd.LABEL_REPEATED else [value]
        for item in items:
            if not hasattr(item, "ListFields"):
                continue
            own, cannot_follow = reads_and_unsure(item)
            refs |= own
            unsure = unsure or cannot_follow
    return refs, unsure


def _facts(g: nx.DiGraph, node: int, body, cache: RefCache | None):
    """``((own refs, unsure), per-expression refs of a projection, (left keys, right keys))`` of a
    relation, kept in ``cache`` while the node keeps its ``Rel``."""
    rel = g.nodes[node]["rel"]
    if cache is not None:
        found = cache.get(node)
        if found is not None and found[0] is rel:
            return found[1]
    kind = g.nodes[node]["kind"]
    # Only read: the relations that have none share one empty value (the cache holds an entry for
    # every relation of the plan, and of the candidates priced, which the garbage collector walks).
    expression_refs = [referenced_fields(e) for e in body.expressions] if kind == "project" else _NO_EXPRESSIONS
    keys = _key_columns(body) if kind in ("hash_join", "merge_join") else _NO_KEYS
    result = (_own_refs(body), expression_refs, keys)
    if cache is not None:
        cache[node] = (rel, result)
    return result


def _direct(body, out: set[int]) -> set[int] | None:
    """The needed columns before the relation's emit (None: the emit names a column it does not have)."""
    common = getattr(body, "common", None)
    if common is None or common.WhichOneof("emit_kind") != "emit":
        return set(out)
    mapping = list(common.emit.output_mapping)
    if any(i >= len(mapping) for i in out):
        return None
    return {mapping[i] for i in out}


def _input_needs(g: nx.DiGraph, node: int, out: set[int], children: list[int],
                 width: dict[int, int | None], cache: RefCache | None = None) -> list[set[int]]:
    data = g.nodes[node]
    kind = data["kind"]
    # one set per distinct input: a union of one shared subtree has it as input many times
    alls = {c: _all(width[c]) for c in dict.fromkeys(children)}
    everything = [alls[c] for c in children]
    body = getattr(data["rel"], kind)
    direct = _direct(body, out)
    (refs, unsure), expression_refs, (key_left, key_right) = _facts(g, node, body, cache)
    if direct is None or unsure:
        return everything
    if kind in _PASS_THROUGH and len(children) == 1:
        return [(direct | refs) & everything[0]]
    if kind == "project" and len(children) == 1:
        n_in = width[children[0]] or 0
        need = {i for i in direct if i < n_in}
        for i in direct:
            if i >= n_in and i - n_in < len(expression_refs):
                need |= expression_refs[i - n_in]
        if any(i >= n_in for i in need):  # an expression reading an earlier expression
            return everything
        return [need]
    if kind in _JOIN_KINDS and len(children) == 2:
        n_left = width[children[0]] or 0
        type_name = join_type_name(body) if kind != "cross" else "INNER"
        if type_name in ("RIGHT_SEMI", "RIGHT_ANTI", "RIGHT_MARK", "LEFT_MARK", "RIGHT_SINGLE", "LEFT_SINGLE"):
            return everything
        left = {i for i in direct if i < n_left}
        right = {i - n_left for i in direct if i >= n_left}
        for i in refs:
            if i < n_left:
                left.add(i)
            else:
                right.add(i - n_left)
        return [(left | key_left) & everything[0], (right | key_right) & everything[1]]
    if kind == "window" and len(children) == 1:  # ConsistentPartitionWindowRel: input ++ window functions
        n_in = width[children[0]] or 0
        return [({i for i in direct if i < n_in} | refs) & everything[0]]
    if kind == "aggregate" and len(children) == 1:  # every grouping and measure is computed
        return [refs & everything[0]]
    if kind == "set":
        from substrait.proto import SetRel

        if body.op == SetRel.SET_OP_UNION_ALL:
            kept = {id(e): set(direct) & e for e in alls.values()}
            return [kept[id(e)] for e in everything]
        return everything
    return everything


def _key_columns(body) -> tuple[set[int], set[int]]:
    """Key columns of a hash or merge join, each relative to its own input."""
    left: set[int] = set()
    right: set[int] = set()
    for key in getattr(body, "keys", []):
        left |= referenced_fields(key.left)
        right |= referenced_fields(key.right)
    for ref in getattr(body, "left_keys", []):
        left |= referenced_fields(ref)
    for ref in getattr(body, "right_keys", []):
        right |= referenced_fields(ref)
    return left, right
