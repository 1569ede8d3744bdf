"""The metadata of a plan DAG's relations, kept the way Calcite's ``RelMetadataQuery`` keeps it: one
query object per DAG (:class:`MetadataQuery`), one cache keyed by kind and relation, one handler per
kind, and invalidation in one place.

A value of every kind but the needed columns depends only on the relation and the subtree below it: a
rewrite that puts a new relation in place makes stale the values of the relations that read it (its
ancestors) and no others, and :meth:`MetadataQuery.invalidate` forgets those. The needed columns flow
the other way, from the roots down: the query brings them up to date when they are next read, and
forgets the row estimates of the relations whose needs (so whose widths) changed.

================  ===================================================  ============================================
kind              value of a relation                                  handler
================  ===================================================  ============================================
``ROWS``          :class:`~cost.estimates.RelEstimate`: rows, width,   ``CardinalityEstimator.estimate`` (children
                  columns, Spark's size (``spark_bytes``)              first; per relation kind its ``_rel_<kind>``)
``TABLE``         a read's table before its filters and projection     ``CardinalityEstimator.table_estimate``
``FILTER_STEPS``  the conjuncts a filter or read applies, in order,    recorded by the ``ROWS`` handler as it
                  each one's selectivity after those before, the types applies them
``SELECTIVITY``   each of those conjuncts' selectivity on its own      ``CardinalityEstimator.marginal_selectivities``
``DISTRIBUTION``  :class:`~cost.properties.Distribution`               :func:`cost.properties.distribution`, which
                                                                       reads and fills :meth:`entries`
``ORDERING``      the columns the output is sorted on (not ``strict``) :func:`cost.properties.ordering`, likewise
``SCHEMA``        the output schema (None where it cannot be derived)  the estimator's, read by ``types_of``
``ROW_SIZE``      Spark's bytes per row                                :func:`cost.spark_size.row_size`
``NEEDED``        the output columns something above reads             :mod:`cost.needed_columns`, the whole DAG
                                                                       once, then what rewrites changed
``REFS``          the columns a relation's own expressions read        :mod:`cost.needed_columns`; valid while the
                                                                       relation keeps its ``Rel``: never forgotten
``UNIQUE_KEYS``   the sets of output columns no two rows agree on      :mod:`cost.uniqueness`, inputs first
``LEARNED``       the key of the subtree in the learned rows           ``CardinalityEstimator`` with a store
                  (:meth:`cost.learned.LearnedRows.relation_key`)      (:attr:`MetadataQuery.learned`) only
================  ===================================================  ============================================

The learned rows (:mod:`cost.learned`) come with the statistics (a
:class:`~cost.learned.LearnedStatistics`' ``learned``, :attr:`MetadataQuery.learned`); without them the
``ROWS`` handler never asks for a ``LEARNED`` key.

Besides, plan-wide and not per relation: the numbers given to column origins in predicate fingerprints
(:attr:`MetadataQuery.origin_ids`), the fingerprints by function table (:meth:`fingerprints`) and the
estimated values of scalar subqueries (:attr:`MetadataQuery.scalar_values`).

>>> from optimizer.plan_io import load_plan
>>> from optimizer.dag import to_dag
>>> from optimizer.cost.cardinality import CardinalityEstimator
>>> g = to_dag(load_plan('''{"relations": [{"root": {"input": {"fetch": {"count": "5", "input": {"read": {
...   "namedTable": {"names": ["t"]},
...   "baseSchema": {"names": ["x"], "struct": {"types": [{"i64": {}}]}}}}}}, "names": ["x"]}}]}'''))
>>> fetch = g.graph["roots"][0]["node"]
>>> (read,) = g.successors(fetch)
>>> est = CardinalityEstimator(g)
>>> est.estimate(fetch).rows, sorted(est.metadata.entries(ROWS)) == sorted([read, fetch])
(5.0, True)
>>> est.metadata.invalidate(read)      # a new relation at ``read``: the fetch that reads it is forgotten
>>> list(est.metadata.entries(ROWS)) == [read]
True
"""

from __future__ import annotations

import weakref
from collections.abc import Callable, Iterable, Mapping
from typing import Any

import networkx as nx
from optimizer.cost.needed_columns import Readers, add_candidate, needed_columns, update_needed
from optimizer.cost.uniqueness import Keys, unique_keys

from optimizer.dag import ChangeMark, change_mark, removed_since
from optimizer.load.functions import FunctionTable

ROWS = "rows"
TABLE = "table"
FILTER_STEPS = "filter_steps"
SELECTIVITY = "selectivity"
DISTRIBUTION = "distribution"
ORDERING = "ordering"
SCHEMA = "schema"
ROW_SIZE = "row_size"
NEEDED = "needed"
REFS = "refs"
UNIQUE_KEYS = "unique_keys"
LEARNED = "learned"

#: The kinds whose value depends on the subtree below the relation: forgotten for the readers of a
#: relation put in place of another.
BELOW = (ROWS, DISTRIBUTION, ORDERING, FILTER_STEPS, TABLE, SELECTIVITY, SCHEMA, ROW_SIZE, LEARNED, UNIQUE_KEYS)
KINDS = (*BELOW, NEEDED, REFS)

_UNKNOWN = object()


def _nobody() -> None:
    return None


class MetadataQuery:
    """The metadata of the relations of ``g`` (see the module docstring): the one cache, the handlers
    that fill it, and what invalidates it. ``statistics``: a :class:`~cost.providers.StatisticsProvider`
    or None; ``functions``: the plan's function table (the DAG's when not given)."""

    def __init__(self, g: nx.DiGraph, statistics: Any = None, functions: FunctionTable | None = None) -> None:
        self.g = g
        self.statistics = statistics
        if functions is None:
            functions = g.graph.get("functions", FunctionTable([]))
        self.functions = functions
        #: The learned rows of subtrees (:class:`cost.learned.LearnedRows`) the statistics carry, or None.
        self.learned = getattr(statistics, "learned", None)
        #: kind -> relation -> value. A kind's dict is never replaced (only cleared), so a handler may
        #: hold it (the ``ROWS`` handler does, on the estimator's hot path).
        self._cache: dict[str, dict[int, Any]] = {kind: {} for kind in KINDS}
        #: whether the ``NEEDED`` entries are those of the DAG (computed, and brought up to date since)
        self._needs_known = False
        #: the object whose methods compute the kinds (:meth:`serve`), held weakly: it holds this query,
        #: and a cycle would keep both alive after their last use, until the garbage collector runs
        self._server: Callable[[], Any] = _nobody
        #: kind -> the name of the server's method that computes it
        self._handlers: Mapping[str, str] = {}
        #: each node's readers when its needs were computed, and the relations put in place since
        self._readers = Readers()
        self._needs_changed: set[int] = set()
        #: The DAG's nodes when the needs were last brought up to date (:func:`optimizer.dag.change_mark`;
        #: None: unknown), and the nodes removed before that the needs still list.
        self._needs_mark: ChangeMark | None = None
        self._removed_before: list[int] = []
        #: Column origins ``(read node, column)`` numbered as first seen (predicate fingerprints name
        #: columns by these numbers, so a fork keeps them).
        self.origin_ids: dict[tuple[int, int], int] = {}
        self._fingerprints: tuple[FunctionTable, dict[tuple[bytes, tuple], bytes | None]] | None = None
        #: The estimated value of each uncorrelated scalar subquery (by its relation's bytes), made with
        #: this query's function table, which a fork's owner may replace: not carried into a fork.
        self.scalar_values: dict[bytes, float | None] = {}

    # -- the cache ------------------------------------------------------------------------------------

    def serve(self, server: object, handlers: Mapping[str, str]) -> None:
        """Make ``server``'s methods, by name per kind in ``handlers``, the computations of the kinds for
        :meth:`get`: ``getattr(server, handlers[kind])(node)``."""
        self._server = weakref.ref(server)
        self._handlers = handlers

    def get(self, kind: str, node: int) -> Any:
        """The value of ``kind`` for ``node``: kept, or computed by the kind's handler and kept."""
        entries = self._cache[kind]
        found = entries.get(node, _UNKNOWN)
        if found is _UNKNOWN:
            found = entries[node] = getattr(self._server(), self._handlers[kind])(node)
        return found

    def entries(self, kind: str) -> dict[int, Any]:
        """The values of ``kind`` known now, by relation: for the handlers that compute a relation's
        children first and keep each as they go (``ROWS``, ``DISTRIBUTION``, ``ORDERING``), and that record a value
        while computing another's (``FILTER_STEPS``)."""
        return self._cache[kind]

    def forget(self, nodes: Iterable[int], kinds: Iterable[str] = BELOW) -> None:
        """Forget the values of ``kinds`` of ``nodes``."""
        caches = [self._cache[kind] for kind in kinds]
        for n in nodes:
            for cache in caches:
                cache.pop(n, None)

    def invalidate(self, changed: int | None = None, replaced: int | None = None) -> None:
        """Forget every value (the DAG changed), or, with ``changed`` (a relation put in the place of
        another), those of the relations that read it: a value depends only on the relation's inputs,
        so the others hold, ``changed``'s own too (they were made for its inputs as they are; if it is
        now read for other columns, bringing the needs up to date forgets its estimate). ``replaced``:
        the relation ``changed`` took the place of, with the same schema and partitioning (the caller's
        to compare); where the two are estimated alike too (a logical join and the physical join bound
        for it), the readers' values hold. The needed columns are brought up to date when next read
        (several rewrites may come first)."""
        if changed is None or changed not in self.g:
            for kind in (*BELOW, NEEDED):
                self._cache[kind].clear()
            self._needs_known = False
            self._needs_changed = set()
            return
        if replaced is None or not self.estimated_alike(changed, replaced):
            self.forget(nx.ancestors(self.g, changed))
        if self._needs_known:
            self._needs_changed.add(changed)

    def estimated_alike(self, changed: int, replaced: int) -> bool:
        """Whether ``changed`` has the estimate ``replaced`` had (equal values, field by field). A reader's
        estimate depends on its inputs only through their estimates, schemas and partitionings (the
        cost model re-prices the direct readers: their inputs' estimates are other objects)."""
        rows = self._cache[ROWS]
        old, new = rows.get(replaced), rows.get(changed)
        return old is not None and new is not None and old == new

    def fork(self, g: nx.DiGraph) -> MetadataQuery:
        """A query for ``g``, a copy of this one's DAG as it is now (:func:`optimizer.dag.copy_dag`: the
        same node ids and relation messages), that starts with the values known so far for the
        relations ``g`` has: each depends only on the relation and the subtree below, the same in the
        copy. Entries of relations the copy lacks (a rewrite's discarded candidates) are left behind.
        Handlers are not carried over: the fork's owner serves them."""
        out = MetadataQuery(g, self.statistics, self.functions)
        # Nothing holds the fork's dicts yet: made here. A relation's set of needed columns is replaced,
        # never changed (update_needed): shared.
        out._cache = {kind: {n: v for n, v in entries.items() if n in g} for kind, entries in self._cache.items()}
        if self._needs_known:
            out._needs_known = True
            out._readers = Readers({n: ps for n, ps in self._readers.items() if n in g})
            out._needs_changed = set(self._needs_changed)
            removed = removed_since(self.g, self._needs_mark) if self._needs_mark is not None else None
            if removed is not None:
                out._needs_mark = change_mark(g)
                out._removed_before = [*self._removed_before, *removed]
        out.origin_ids = dict(self.origin_ids)
        if self._fingerprints is not None:
            out._fingerprints = (self._fingerprints[0], dict(self._fingerprints[1]))
        return out

    # -- plan-wide --------------------------------------------------------------------------------------

    def fingerprints(self) -> dict[tuple[bytes, tuple], bytes | None]:
        """Predicate fingerprints by (conjunct bytes, column numbers), for the current function table
        (kept until the table is replaced)."""
        memo = self._fingerprints
        if memo is None or memo[0] is not self.functions:
            memo = self._fingerprints = (self.functions, {})
        return memo[1]

    def unique_keys(self, node: int) -> Keys:
        """The unique keys of ``node``'s output (:mod:`cost.uniqueness`), its inputs' kept as they are found."""
        return unique_keys(self.g, node, self._cache[UNIQUE_KEYS])

    # -- needed columns ---------------------------------------------------------------------------------

    def needed(self, node: int) -> set[int] | None:
        """The output columns of ``node`` something above reads (:mod:`cost.needed_columns`; None:
        unknown, all count)."""
        self.renew_needs()
        needed = self._cache[NEEDED]
        if not self._needs_known:
            needed.update(needed_columns(self.g, cache=self._cache[REFS], readers=self._readers))
            self._needs_known = True
            self._needs_mark, self._removed_before = change_mark(self.g), []
        return needed.get(node)

    def same_needs(self, candidate: int, replaced: int) -> None:
        """Price ``candidate`` (a new relation nothing reads yet) as read like ``replaced``."""
        self.renew_needs()
        if self._needs_known:
            add_candidate(self.g, self._cache[NEEDED], candidate, replaced, self._cache[REFS])

    def renew_needs(self) -> None:
        """Update the needed columns if the plan changed since, and forget the row estimates of the
        relations whose needs changed (a width changed: their estimates, not those above them)."""
        if not self._needs_changed or not self._needs_known:
            return
        changed, self._needs_changed = self._needs_changed, set()
        removed = removed_since(self.g, self._needs_mark) if self._needs_mark is not None else None
        if removed is not None and self._removed_before:
            removed = [*self._removed_before, *removed]
        self._needs_mark, self._removed_before = change_mark(self.g), []
        rows = self._cache[ROWS]
        for n in update_needed(self.g, self._cache[NEEDED], self._readers, changed, self._cache[REFS], removed):
            rows.pop(n, None)


__all__ = ["BELOW", "DISTRIBUTION", "FILTER_STEPS", "KINDS", "LEARNED", "NEEDED", "ORDERING", "REFS", "ROWS", "ROW_SIZE",
           "SCHEMA", "SELECTIVITY", "TABLE", "UNIQUE_KEYS", "MetadataQuery"]
