"""What the estimator keeps between rewrites gives what computing afresh gives.

The driver saves a phase's plan with the estimates known so far (``PlanContext.snapshot``), and the
estimator brings the needed columns up to date after rewrites (``update_needed``) instead of computing
them for the whole plan again. Over real plans of every producer in the corpus, optimized with
statistics, both are checked at every use against a fresh computation.
"""

from __future__ import annotations

import optimizer.cost.metadata as metadata
from optimizer.cost.cardinality import CardinalityEstimator
from optimizer.cost.needed_columns import needed_columns

from optimizer.driver import Optimizer, PlanContext
from optimizer.plan_io import load_plan

#: Every corpus plan (446, of four producers).
STRIDE = 1


def _plans(plans):
    return [p for i, p in enumerate(sorted(plans, key=lambda p: p.id)) if i % STRIDE == 0]


def test_needed_columns_brought_up_to_date_equal_a_full_computation(valid_corpus_plans, tpch_statistics, monkeypatch):
    update = metadata.update_needed
    checked: list[int] = []
    told_removed = 0

    def checked_update(g, needed, readers, changed, cache=None, removed=None):
        nonlocal told_removed
        before = {n: set(cols) for n, cols in needed.items()}
        if removed is not None:
            # The removed nodes the estimator was told of are all those its needs list that are gone.
            assert {n for n in needed if n not in g} <= set(removed)
            told_removed += 1
        out = update(g, needed, readers, changed, cache, removed)
        full = needed_columns(g)
        assert needed == full
        assert {n for n in before.keys() | full.keys() if before.get(n) != full.get(n)} <= out
        checked.append(len(changed))
        return out

    monkeypatch.setattr(metadata, "update_needed", checked_update)
    for p in _plans(valid_corpus_plans):
        Optimizer(statistics=tpch_statistics).run(load_plan(p.path.read_bytes()))
    assert len(checked) > 300, len(checked)
    # The removed nodes come from the DAG's record of its rewrites (not a comparison with every node):
    # all updates but a snapshot's first.
    assert told_removed > 0.8 * len(checked), (told_removed, len(checked))


def test_a_snapshot_estimates_as_a_fresh_estimator_does(valid_corpus_plans, tpch_statistics, monkeypatch):
    snapshot = PlanContext.snapshot
    compared: list[int] = []

    def checked_snapshot(self):
        copy = snapshot(self)
        fresh = CardinalityEstimator(copy.g, self.statistics, copy.functions)
        for root in copy.g.graph["roots"]:
            for n in [root["node"], *copy.g.successors(root["node"])]:
                kept, new = copy.estimator.estimate(n), fresh.estimate(n)
                assert (kept.rows, kept.width, kept.spark_bytes) == (new.rows, new.width, new.spark_bytes)
                assert [c.ndv if c else None for c in kept.columns] == [c.ndv if c else None for c in new.columns]
                compared.append(n)
        return copy

    monkeypatch.setattr(PlanContext, "snapshot", checked_snapshot)
    for p in _plans(valid_corpus_plans):
        Optimizer(statistics=tpch_statistics).run(load_plan(p.path.read_bytes()))
    # A snapshot is taken by each phase that changes the plan, before its first change.
    assert len(compared) > 300, len(compared)
