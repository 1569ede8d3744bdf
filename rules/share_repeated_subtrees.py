"""Rule ``share_repeated_subtrees`` (phase ``logical``, after ``merge_global_aggregates``): subtrees
the plan computes twice or more, alike but for the columns each keeps, become one subtree every place
reads (a plan relation and ``ReferenceRel`` s), which the Spark backend computes once.

**Matches** a plan root whose tree holds two or more subtrees, none inside another, that give the same
rows: written alike but for the columns they keep (a read's projection, a relation's emit, the
expressions a projection or aggregate computes) and for where each column stands, so that every
condition, key and expression two of them both have reads the same columns. Compared relation by
relation (reads, filters, projections, inner / outer / semi / anti joins, cross products and
aggregates of one grouping set; anything else only when written exactly alike). Each relation of such
a subtree is deterministic, without subqueries, outer references or window functions, and nothing in
it sorts or fetches (a sort's order would not survive the shuffle that shares the rows; a fetch
without an order may keep other rows in each copy). The largest such subtrees are taken (the root's
tree from the top), where they join or aggregate, read a table of at least
``OptimizerConfig.share_min_rows`` rows (estimated; a million by default) and are not all written
exactly alike: Spark plans copies written alike alike and reuses their exchanges itself, and copies
of small tables cost less to compute again than to share (both measured on TPC-DS SF 1, below). The
cost model prices the whole plan with them shared no higher than without: a shared relation costs its
rows shuffled once and read by each reader (:meth:`cost.model.CostModel.computed_once`).

**Produces** the plan with each group of such subtrees replaced by one subtree that keeps the columns
any of them keeps (a read's projection the union of theirs, a projection's or aggregate's expressions
the union of theirs, each once), read by every place one of them stood through a projection that
picks that copy's columns in its order.

**Why it is equivalent**: a projection's expressions and a relation's emit choose columns, not rows, so
each copy's rows are the shared subtree's rows with some of its columns; a condition or key reads the
same columns in each (compared with every column named by how it is computed), and deterministic
relations without outer references give the same rows wherever they stand. So every place reads the
rows, and the columns, it read before.

**Why it pays**: producers inline a CTE that a query reads several times (TPC-DS Q27's ``results``, read
by three aggregates; Q47 and Q57's ``v1``), each copy pruned to the columns its reader needs, and Spark
inlines it too, so each copy scans and joins its tables again; Spark reuses a copy's exchange only where
the copies' plans come out alike after its own optimizer, which prunes and orders each copy apart.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field

import networkx as nx
from optimizer.rules.filter_into_read import base_columns, base_schema
from substrait.proto import JoinRel, ProjectRel, Rel, RelCommon

from optimizer.dag import inputs, is_broadcast, parents, subtree_key
from optimizer.engine import NewRel, Replacement, Rule, RuleContext, not_costlier
from optimizer.expr_utils import (
    escapes_scope,
    field_index,
    has_subquery,
    has_unresolvable_refs,
    has_window_function,
    is_deterministic,
    remap_fields,
)
from optimizer.relations import emit_of

#: Relations a shared subtree may not hold: their rows' order, or which rows they keep, is not the same
#: in every copy once shared.
_ORDERED = frozenset({"sort", "top_n", "fetch"})
#: Joins whose output is the left input's columns then the right's (or the left's alone).
_BOTH_SIDES = (JoinRel.JOIN_TYPE_INNER, JoinRel.JOIN_TYPE_LEFT, JoinRel.JOIN_TYPE_RIGHT, JoinRel.JOIN_TYPE_OUTER)
_LEFT_ONLY = (JoinRel.JOIN_TYPE_LEFT_SEMI, JoinRel.JOIN_TYPE_LEFT_ANTI)
#: Relations that make a subtree worth computing once.
_WORK = frozenset({"join", "cross", "aggregate", "hash_join", "merge_join", "nested_loop_join", "set"})
#: Kinds compared but for their columns; every other kind is compared as written.
_COMPARED = frozenset({"read", "filter", "project", "join", "cross", "aggregate"})


def share_repeated_subtrees(g: nx.DiGraph, node: int, ctx: RuleContext) -> Replacement | None:
    """Rewrite the tree of the plan root ``node`` with its repeated subtrees shared (see the module
    docstring).

    Two copies of a join of ``t`` (two million rows) and ``u``, one keeping ``b`` and the other ``c``,
    joined with each other, become one join both read: a plan relation of its own, each copy a
    projection of its columns over it.

    >>> from testing.builder import INNER, Builder, emit, join, project, read, ref
    >>> from optimizer.driver import Optimizer
    >>> b, u = Builder(), read("u", [("d", "i64")])
    >>> t = read("t", [("a", "i64"), ("b", "i64"), ("c", "i64")], rows=2e6)
    >>> copy = lambda *keep: project(join(t, u, INNER, b.call("equal", ref(0), ref(3))), common=emit(*keep))
    >>> plan = b.plan(join(copy(0, 1), copy(0, 2), INNER, b.call("equal", ref(0), ref(2))), list("abcd"))
    >>> after = Optimizer(rules=[RULE]).run(plan).plan
    >>> [r.WhichOneof("rel_type") for r in after.relations], after.relations[1].rel.WhichOneof("rel_type")
    (['root', 'rel'], 'join')
    """
    if not any(r["node"] == node for r in g.graph["roots"]) or not _large_table_read_twice(g, node, ctx):
        return None
    builder = _Unifier(g, ctx)
    groups = _repeated(g, node, builder)
    if not groups:
        return None
    substitutions: dict[int, NewRel | int] = {}
    for members in groups:
        built = builder.unify(members)
        if built is None:
            continue
        shared, out_ids = built
        position = {c: i for i, c in enumerate(out_ids)}
        for m in members:
            mapping = [position[c] for c in builder.ids(m)]
            if mapping == list(range(len(out_ids))):
                substitutions[m] = shared
            else:
                project = Rel(project=ProjectRel(common=RelCommon()))
                project.project.common.emit.output_mapping.extend(mapping)
                substitutions[m] = NewRel(project, [shared])
    if not substitutions:
        return None
    new = _rebuilt(g, node, substitutions)
    if isinstance(new, int) or not not_costlier(g, node, new, ctx, RULE.name):
        return None
    return new


def _rebuilt(g: nx.DiGraph, top: int, substitutions: dict[int, NewRel | int]) -> NewRel | int:
    """The tree at ``top`` with ``substitutions`` in place of their nodes: the relations on a path to one
    are written anew over their new inputs, everything else is kept."""
    above: set[int] = set()
    for n in substitutions:
        above |= nx.ancestors(g, n)
    memo: dict[int, NewRel | int] = {}
    order = [n for n in nx.dfs_postorder_nodes(g, top) if n in above or n in substitutions or n == top]
    for n in order:
        if n in substitutions:
            memo[n] = substitutions[n]
        elif n in above or n == top:
            children = inputs(g, n)
            if all(memo.get(c, c) == c for c in children):  # nothing below it changes
                memo[n] = n
                continue
            rel = Rel()
            rel.CopyFrom(g.nodes[n]["rel"])
            memo[n] = NewRel(rel, [memo.get(c, c) for c in children])
    return memo.get(top, top)


@dataclass
class _Unifier:
    """What the copies of a subtree are, compared but for their columns: each node's key (equal for
    subtrees that give the same rows) and its columns' ids (equal for columns computed alike)."""

    g: nx.DiGraph
    ctx: RuleContext
    keys: dict[int, bytes | None] = field(default_factory=dict)
    columns: dict[int, list[int]] = field(default_factory=dict)
    #: node -> its columns' ids before its emit (a projection's or aggregate's, which unify reads).
    before_emit: dict[int, list[int]] = field(default_factory=dict)
    interned: dict[bytes, int] = field(default_factory=dict)

    def _id(self, *parts: bytes) -> int:
        digest = hashlib.blake2b(b"\0".join(parts), digest_size=16).digest()
        return self.interned.setdefault(digest, len(self.interned))

    def _joined(self, lists: list[list[int]]) -> list[int]:
        """The columns of several inputs side by side, each input's told apart (a relation joined with a
        copy of itself reads two columns of each id)."""
        if len(lists) == 1:
            return list(lists[0])
        return [self._id(b"input %d" % slot, b"%d" % c) for slot, ids in enumerate(lists) for c in ids]

    def _expression_id(self, e, in_ids: list[int]) -> int:
        """A projection's expression: a plain column is that column; any other is named by what it computes."""
        i = field_index(e)
        if i is not None and 0 <= i < len(in_ids):
            return in_ids[i]
        return self._id(b"expr", remap_fields(e, in_ids.__getitem__).SerializeToString(deterministic=True))

    def ids(self, node: int) -> list[int]:
        self.key(node)
        return self.columns[node]

    def key(self, node: int) -> bytes | None:
        """``node``'s key (None: its rows are not shared: nondeterministic, ordered or with subqueries)."""
        if node in self.keys:
            return self.keys[node]
        for n in nx.dfs_postorder_nodes(self.g, node):
            if n not in self.keys:
                self.keys[n], self.columns[n] = self._own(n)
        return self.keys[node]

    def _own(self, n: int) -> tuple[bytes | None, list[int]]:
        g, data = self.g, self.g.nodes[n]
        kind, rel = data["kind"], data["rel"]
        body = getattr(rel, kind)
        children = inputs(g, n)
        width = len(self.ctx.schema(n).types)
        child_keys = [self.keys[c] for c in children]
        unique = hashlib.blake2b(b"node %d" % n, digest_size=16).digest()
        if (kind in _ORDERED or None in child_keys or has_subquery(rel) or escapes_scope(rel)
                or not is_deterministic(rel, self.ctx.functions) or has_window_function(rel, enter_subqueries=False)):
            return None, [self._id(unique, b"%d" % i) for i in range(width)]
        if kind not in _COMPARED or body.HasField("advanced_extension") or has_unresolvable_refs(rel):
            key = subtree_key(g, n)
            return key, [self._id(key, b"%d" % i) for i in range(width)]
        in_ids = self._joined([self.columns[c] for c in children])
        own = Rel()
        own.CopyFrom(rel)
        own_body = getattr(own, kind)
        own_body.ClearField("common")
        if kind == "read":
            own_body.ClearField("projection")
            key = hashlib.blake2b(b"read" + own.SerializeToString(deterministic=True), digest_size=16).digest()
            base = base_columns(body, base_schema(body))
            if None in base:  # a nested part of a field: compared as written
                key = subtree_key(g, n)
                return key, [self._id(key, b"%d" % i) for i in range(width)]
            pre = [self._id(key, b"%d" % b) for b in base]
        elif kind == "filter":
            condition = remap_fields(body.condition, in_ids.__getitem__)
            key = self._digest(b"filter", child_keys, condition.SerializeToString(deterministic=True))
            pre = list(in_ids)
        elif kind == "project":
            key = child_keys[0]  # a projection keeps its input's rows
            pre = list(in_ids) + [self._expression_id(e, in_ids) for e in body.expressions]
        elif kind in ("join", "cross"):
            own_body.ClearField("left")
            own_body.ClearField("right")
            for name in ("expression", "post_join_filter"):
                if kind == "join" and own_body.HasField(name):
                    getattr(own_body, name).CopyFrom(remap_fields(getattr(body, name), in_ids.__getitem__))
            key = self._digest(kind.encode(), child_keys, own.SerializeToString(deterministic=True))
            if kind == "join" and body.type in _LEFT_ONLY:
                pre = list(self.columns[children[0]])
            elif kind == "cross" or body.type in _BOTH_SIDES:
                pre = list(in_ids)
            else:
                key = subtree_key(g, n)
                return key, [self._id(key, b"%d" % i) for i in range(width)]
        else:  # aggregate
            if not _one_grouping_set(body):
                key = subtree_key(g, n)
                return key, [self._id(key, b"%d" % i) for i in range(width)]
            keys = [remap_fields(e, in_ids.__getitem__).SerializeToString(deterministic=True)
                    for e in body.grouping_expressions]
            key = self._digest(b"aggregate %d" % len(body.groupings), child_keys, *keys)
            pre = [self._id(key, b"key", k) for k in keys]
            pre += [self._id(key, remap_fields(m, in_ids.__getitem__).SerializeToString(deterministic=True))
                    for m in body.measures]
        self.before_emit[n] = pre
        emit = emit_of(rel)
        out = [pre[i] for i in emit if 0 <= i < len(pre)] if emit is not None else pre
        if len(out) != width:  # a relation whose columns are not as modelled here: compared as written
            key = subtree_key(g, n)
            return key, [self._id(key, b"%d" % i) for i in range(width)]
        return key, out

    @staticmethod
    def _digest(tag: bytes, child_keys: list, *parts: bytes) -> bytes:
        digest = hashlib.blake2b(tag, digest_size=16)
        for k in child_keys:
            digest.update(k)
        for p in parts:
            digest.update(hashlib.blake2b(p, digest_size=16).digest())
        return digest.digest()

    # ----------------------------------------------------------------------------- the shared tree

    def unify(self, members: list[int]) -> tuple[NewRel | int, list[int]] | None:
        """One subtree giving the rows of every member with every column any keeps, and its columns'
        ids; None where the members are not compared alike relation by relation."""
        g = self.g
        if len({g.nodes[m]["kind"] for m in members}) > 1:
            # A projection that only picks columns adds none: its input has them all.
            members = [self.below_selection(m) for m in members]
            if len({g.nodes[m]["kind"] for m in members}) > 1:
                return None
        first = members[0]
        kind = g.nodes[first]["kind"]
        if len({subtree_key(g, m) for m in members}) == 1:  # written alike: share the first as it is
            return first, list(self.columns[first])
        if kind not in _COMPARED or any(m not in self.before_emit for m in members):
            return None
        rel = Rel()
        rel.CopyFrom(g.nodes[first]["rel"])
        body = getattr(rel, kind)
        body.ClearField("common")
        if kind == "read":
            reads = [g.nodes[m]["rel"].read for m in members]
            base = sorted({b for r in reads for b in base_columns(r, base_schema(r))})
            key = self.keys[first]
            body.ClearField("projection")
            if len(base) < len(base_schema(body).types):
                for b in base:
                    body.projection.select.struct_items.add().field = b
            return NewRel(rel), [self._id(key, b"%d" % b) for b in base]
        if len({len(inputs(g, m)) for m in members}) != 1:
            return None
        child_lists = list(zip(*[inputs(g, m) for m in members], strict=True))
        unified = [self.unify(list(c)) for c in child_lists]
        if any(u is None for u in unified):
            return None
        new_inputs = [u[0] for u in unified]
        in_ids = self._joined([u[1] for u in unified])
        position = {c: i for i, c in enumerate(in_ids)}

        def remapped(message, member: int):
            ids = self._joined([self.columns[c] for c in inputs(g, member)])
            return remap_fields(message, lambda i: position[ids[i]])

        if kind == "filter":
            body.condition.CopyFrom(remapped(g.nodes[first]["rel"].filter.condition, first))
            out = list(in_ids)
        elif kind == "project":
            body.ClearField("expressions")
            out = list(in_ids)
            for m in members:
                own = g.nodes[m]["rel"].project.expressions
                pre = self.before_emit[m]
                for e, c in zip(own, pre[len(pre) - len(own):], strict=True):
                    if c not in out:
                        body.expressions.add().CopyFrom(remapped(e, m))
                        out.append(c)
            if not body.expressions:  # every column its input's: the input is the subtree
                return new_inputs[0], out
        elif kind in ("join", "cross"):
            if kind == "join":
                source = g.nodes[first]["rel"].join
                for name in ("expression", "post_join_filter"):
                    if source.HasField(name):
                        getattr(body, name).CopyFrom(remapped(getattr(source, name), first))
                out = list(unified[0][1]) if body.type in _LEFT_ONLY else list(in_ids)
            else:
                out = list(in_ids)
        else:  # aggregate
            body.ClearField("measures")
            source = g.nodes[first]["rel"].aggregate
            body.ClearField("grouping_expressions")
            for e in source.grouping_expressions:
                body.grouping_expressions.add().CopyFrom(remapped(e, first))
            n_keys = len(source.grouping_expressions)
            out = list(self.before_emit[first][:n_keys])
            for m in members:
                measures = g.nodes[m]["rel"].aggregate.measures
                for measure, c in zip(measures, self.before_emit[m][n_keys:], strict=True):
                    if c not in out:
                        body.measures.add().CopyFrom(remapped(measure, m))
                        out.append(c)
        return NewRel(rel, new_inputs), out

    def below_selection(self, m: int) -> int:
        """``m`` without the projections over it that only pick columns of their input."""
        g = self.g
        while g.nodes[m]["kind"] == "project":
            body = g.nodes[m]["rel"].project
            if any(field_index(e) is None for e in body.expressions) or body.HasField("advanced_extension"):
                break
            (m,) = inputs(g, m)
        return m


def _one_grouping_set(body) -> bool:
    """An aggregate of one grouping set of all its grouping expressions, in order (or a global one)."""
    n = len(body.grouping_expressions)
    if not body.groupings:
        return n == 0
    return len(body.groupings) == 1 and list(body.groupings[0].expression_references) == list(range(n))


def _works(g: nx.DiGraph, node: int) -> bool:
    """Whether the subtree joins or aggregates: one that only reads a table (filtered, projected) is read
    again at the cost of sharing it, and a small one Spark broadcasts once anyway (its exchange reuse)."""
    return any(g.nodes[n]["kind"] in _WORK for n in {node} | nx.descendants(g, node))


def _large_table_read_twice(g: nx.DiGraph, top: int, ctx: RuleContext) -> bool:
    """Whether two reads under ``top`` read one table of at least ``share_min_rows`` rows: what any group
    of copies needs, found before the copies are compared (most plans read each large table once)."""
    seen: set[bytes] = set()
    for n in {top} | nx.descendants(g, top):
        if g.nodes[n]["kind"] != "read" or ctx.estimator.estimate(n).rows < ctx.config.share_min_rows:
            continue
        read = Rel()
        read.CopyFrom(g.nodes[n]["rel"])
        read.read.ClearField("projection")
        read.read.ClearField("common")
        table = read.SerializeToString(deterministic=True)
        if table in seen:
            return True
        seen.add(table)
    return False


def _written_alike(g: nx.DiGraph, members: list[int]) -> bool:
    """Copies written exactly alike: Spark plans them alike and reuses their exchanges itself (on TPC-DS
    SF 1, sharing such copies was not faster: Q2, Q47, Q57, Q64, Q75, Q95)."""
    return len({subtree_key(g, m) for m in members}) == 1


def _reads_many_rows(g: nx.DiGraph, node: int, unifier: _Unifier) -> bool:
    """Whether the subtree reads a table of at least ``share_min_rows`` rows (estimated)."""
    ctx = unifier.ctx
    least = ctx.config.share_min_rows
    return any(g.nodes[n]["kind"] == "read" and ctx.estimator.estimate(n).rows >= least
               for n in {node} | nx.descendants(g, node))


def _repeated(g: nx.DiGraph, top: int, unifier: _Unifier) -> list[list[int]]:
    """Groups of subtrees under ``top`` that give the same rows, none inside another, largest first."""
    unifier.key(top)
    by_key: dict[bytes, list[int]] = {}
    for n in unifier.keys:
        key = unifier.keys[n]
        if key is not None and inputs(g, n):
            by_key.setdefault(key, []).append(n)
    taken: set[int] = set()
    groups: list[list[int]] = []
    for n in nx.topological_sort(g.subgraph({top} | nx.descendants(g, top))):
        if n in taken:
            continue
        members = [m for m in by_key.get(unifier.keys.get(n) or b"", []) if m not in taken]
        if len(members) < 2:
            continue
        below: set[int] = set()
        for m in members:
            below |= nx.descendants(g, m)
        members = [m for m in members if m not in below]
        if len(members) < 2 or all(is_broadcast(g, p) for m in members for p in parents(g, m)):
            continue
        if not _works(g, members[0]) or _written_alike(g, members) or not _reads_many_rows(g, members[0], unifier):
            for m in members:
                taken |= {m} | nx.descendants(g, m)
            continue
        if len({unifier.below_selection(m) for m in members}) == 1:  # shared already
            for m in members:
                taken |= {m} | nx.descendants(g, m)
            continue
        groups.append(sorted(members))
        for m in members:
            taken |= {m} | nx.descendants(g, m)
    return groups


#: Any relation may be a plan's root.
_ALL_KINDS = frozenset(f.name for f in Rel.DESCRIPTOR.oneofs_by_name["rel_type"].fields)

RULE = Rule(name="share_repeated_subtrees", phase="logical", kinds=_ALL_KINDS, apply=share_repeated_subtrees,
            description="subtrees alike but for their columns -> one shared subtree, computed once")
