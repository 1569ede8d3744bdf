"""The metadata query (:mod:`optimizer.cost.metadata`): one cache keyed by kind and relation, forgotten in
one place.

Over real plans of the corpus, with the TPC-H statistics, a rewrite is made the way the engine makes one
(:func:`optimizer.engine.add_subgraph`, then :func:`optimizer.engine.replace_node`): every value the
relations above the new one had is forgotten, the new relation's own values and those of every other
relation are kept as they were (the same objects), and a fork for a copy of the DAG holds the values of
the relations of the copy and only those.
"""

from __future__ import annotations

import networkx as nx
import pytest
from optimizer.cost import properties
from optimizer.cost.cardinality import CardinalityEstimator
from optimizer.cost.metadata import (
    BELOW,
    DISTRIBUTION,
    FILTER_STEPS,
    ORDERING,
    REFS,
    ROWS,
    SCHEMA,
    SELECTIVITY,
    TABLE,
)

from optimizer.dag import annotate_schemas, copy_dag, inputs, to_dag
from optimizer.engine import NewRel, add_subgraph, replace_node
from optimizer.plan_io import load_plan


def _plan_with_a_filter(corpus_plans):
    """The first corpus plan (by id) with a filter read by a join that has another input: its DAG and that
    filter."""
    for p in sorted(corpus_plans, key=lambda p: p.id):
        g = to_dag(load_plan(p.path.read_bytes()))
        for n in sorted(g):
            if g.nodes[n]["kind"] != "filter":
                continue
            readers = list(g.predecessors(n))
            if any(g.nodes[r]["kind"] == "join" and len(inputs(g, r)) == 2 for r in readers):
                annotate_schemas(g)
                return p.id, g, n
    pytest.fail("no corpus plan has a filter read by a join")


def _everything_known(est: CardinalityEstimator) -> None:
    """Ask the estimator for every kind it keeps, for every relation."""
    g = est.g
    for root in g.graph["roots"]:
        est.estimate(root["node"])
    for n in g:
        properties.distribution(g, n, est.distributions, est.functions)
        properties.ordering(g, n, memo=est.metadata.entries(ORDERING))
        est.types_of(n)
        if g.nodes[n]["kind"] in ("filter", "read"):
            est.marginal_selectivities(n)
        if g.nodes[n]["kind"] == "read":
            est.table_estimate(n)


def _snapshot(est: CardinalityEstimator) -> dict[str, dict[int, object]]:
    return {kind: dict(est.metadata.entries(kind)) for kind in (*BELOW, REFS)}


def _same_filter(g: nx.DiGraph, node: int) -> int:
    """A new relation in the place of the filter ``node``: the same condition over the same input, added
    and put in place as the engine does it."""
    new = add_subgraph(g, NewRel(g.nodes[node]["rel"], list(inputs(g, node))))
    g.nodes[new]["schema"] = g.nodes[node]["schema"]
    return new


def test_a_rewrite_forgets_the_values_of_the_relations_above_and_keeps_the_others(corpus_plans, tpch_statistics):
    plan_id, g, old = _plan_with_a_filter(corpus_plans)
    est = CardinalityEstimator(g, tpch_statistics)
    _everything_known(est)
    new = _same_filter(g, old)
    est.estimate(new)  # a candidate is priced before it replaces the relation
    before = _snapshot(est)
    for kind in (ROWS, DISTRIBUTION, ORDERING, SCHEMA, FILTER_STEPS, SELECTIVITY, TABLE):
        assert before[kind], (plan_id, kind)  # each kind has values to keep or forget
    replace_node(g, old, new, clean=True)
    est.invalidate(new)

    above = nx.ancestors(g, new)
    assert above, plan_id
    after = _snapshot(est)
    for kind in BELOW:
        assert not above & after[kind].keys(), (plan_id, kind)
        kept = {n: v for n, v in before[kind].items() if n not in above}
        assert after[kind].keys() == kept.keys(), (plan_id, kind)
        assert all(after[kind][n] is v for n, v in kept.items()), (plan_id, kind)
    assert new in after[ROWS]
    assert after[REFS] == before[REFS]  # a relation's own references hold while it keeps its Rel
    # What is asked for again is what a fresh estimator gives.
    fresh = CardinalityEstimator(g, tpch_statistics)
    fresh.metadata.origin_ids = dict(est.metadata.origin_ids)
    for root in g.graph["roots"]:
        assert est.estimate(root["node"]) == fresh.estimate(root["node"]), plan_id


def test_a_relation_estimated_as_the_one_it_replaced_keeps_the_values_above(corpus_plans, tpch_statistics):
    plan_id, g, old = _plan_with_a_filter(corpus_plans)
    est = CardinalityEstimator(g, tpch_statistics)
    _everything_known(est)
    new = _same_filter(g, old)
    assert est.estimate(new) == est.estimate(old), plan_id
    before = _snapshot(est)
    replace_node(g, old, new, clean=True)
    est.invalidate(new, replaced=old)
    assert _snapshot(est) == before


def test_invalidate_without_a_relation_forgets_every_value(corpus_plans, tpch_statistics):
    plan_id, g, _ = _plan_with_a_filter(corpus_plans)
    est = CardinalityEstimator(g, tpch_statistics)
    _everything_known(est)
    assert est.needed(g.graph["roots"][0]["node"]) is not None
    refs = dict(est.metadata.entries(REFS))
    est.invalidate()
    assert all(not est.metadata.entries(kind) for kind in BELOW), plan_id
    assert est.metadata.entries(REFS) == refs


def test_a_fork_holds_the_values_of_the_relations_of_the_copy_only(corpus_plans, tpch_statistics):
    plan_id, g, old = _plan_with_a_filter(corpus_plans)
    est = CardinalityEstimator(g, tpch_statistics)
    _everything_known(est)
    new = _same_filter(g, old)
    est.estimate(new)
    replace_node(g, old, new, clean=True)  # ``old`` and nothing else leaves the DAG
    est.invalidate(new)
    assert old not in g and old in est.metadata.entries(ROWS)

    copy = copy_dag(g)
    fork = est.fork(copy)
    assert fork.g is copy and fork.metadata is not est.metadata
    for kind in (*BELOW, REFS):
        ours = est.metadata.entries(kind)
        theirs = fork.metadata.entries(kind)
        assert theirs.keys() == {n for n in ours if n in copy}, (plan_id, kind)
        assert all(theirs[n] is ours[n] for n in theirs), (plan_id, kind)
    assert old not in fork.metadata.entries(ROWS)
    # The fork computes what it lacks with its own handlers, over the copy; the original is untouched.
    known = dict(est.metadata.entries(ROWS))
    fresh = CardinalityEstimator(copy, tpch_statistics)
    fresh.metadata.origin_ids = dict(fork.metadata.origin_ids)
    for root in copy.graph["roots"]:
        assert fork.estimate(root["node"]) == fresh.estimate(root["node"]), plan_id
    assert est.metadata.entries(ROWS) == known
