"""A rewrite that leaves a relation's output as it was leaves its readers' estimates as they were.

``implement_joins`` puts a physical join in the place of each logical one, top down: the join it binds is
estimated and partitioned as the logical one was, so the relations above keep their estimates
(``MetadataQuery.invalidate`` with ``replaced``) instead of being estimated again at each of the
joins below them and once more when the driver prices the plan. Kept estimates equal fresh ones: checked
at every such rewrite of the corpus plans, and ``benchmarks/plan_identity.py`` checks the plans.
"""

from __future__ import annotations

import json

import networkx as nx
from optimizer.cost import properties
from optimizer.cost.cardinality import CardinalityEstimator
from optimizer.cost.metadata import ROWS

from optimizer.driver import Optimizer
from optimizer.plan_io import load_plan


def _wide(n: int):
    from benchmarks.optimizer_latency import wide_plan

    return load_plan(json.dumps(wide_plan("chain", n)))


def test_each_bound_join_of_a_chain_is_estimated_once(monkeypatch):
    """The 100-way chain's 99 joins become hash joins, each with an exchange below it: each of those
    relations is estimated once (re-estimating the ones above at every rewrite and after the phase
    took 185 estimates of hash joins)."""
    compute = CardinalityEstimator._compute
    estimated: dict[str, list[int]] = {"hash_join": [], "exchange": []}

    def counted(self, node):
        kind = self.g.nodes[node]["kind"]
        if kind in estimated:
            estimated[kind].append(node)
        return compute(self, node)

    monkeypatch.setattr(CardinalityEstimator, "_compute", counted)
    result = Optimizer().run(_wide(100))
    g = result.graph
    bound = [n for n in g if g.nodes[n]["kind"] == "hash_join"]
    assert len(bound) == 99
    assert len(estimated["hash_join"]) == len(set(estimated["hash_join"])) == 99, len(estimated["hash_join"])
    assert len(estimated["exchange"]) == len(set(estimated["exchange"])), len(estimated["exchange"])


def test_kept_estimates_equal_fresh_ones(valid_corpus_plans, tpch_statistics, monkeypatch):
    """At every rewrite whose readers keep their estimates, those estimates and partitionings are what
    a fresh estimator of the plan gives."""
    invalidate = CardinalityEstimator.invalidate
    compared: list[int] = []

    def checked(self, changed=None, replaced=None):
        kept = replaced is not None and changed in self.g and self.metadata.estimated_alike(changed, replaced)
        invalidate(self, changed, replaced)
        if not kept:
            return
        self.metadata.renew_needs()
        fresh = CardinalityEstimator(self.g, self.statistics, self.functions)
        # Narrowed columns are numbered as first seen: the fresh estimator numbers them as this one does
        # (as a fork does), so that the fingerprints of the predicates applied compare.
        fresh.metadata.origin_ids = dict(self.metadata.origin_ids)
        rows = self.metadata.entries(ROWS)
        for n in nx.ancestors(self.g, changed):
            if n in rows:
                assert rows[n] == fresh.estimate(n), n
                compared.append(n)
            if n in self.distributions:
                assert self.distributions[n] == properties.distribution(self.g, n, fresh.distributions,
                                                                        fresh.functions)

    monkeypatch.setattr(CardinalityEstimator, "invalidate", checked)
    for p in sorted(valid_corpus_plans, key=lambda p: p.id):
        Optimizer(statistics=tpch_statistics).run(load_plan(p.path.read_bytes()))
    assert len(compared) > 300, len(compared)
