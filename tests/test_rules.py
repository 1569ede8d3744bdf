"""The rules together: the standard list and its phases, the filter rules and the physical rules
on DataFusion's TPC-H plans (structure; the ``spark`` tests compare the answers on Spark).
"""

from __future__ import annotations

from collections import Counter

import pytest
from filter_rule_plans import MY_RULES, fired, optimize, same_answer, shape
from optimizer.cost.spark_joins import BROADCAST_BUILD, SHUFFLED_HASH_BUILD
from optimizer.rules import implement_joins
from physical_rule_plans import PHYSICAL, _same_answer, kinds
from substrait.proto import HashJoinRel

from optimizer.dag import inputs, to_dag
from optimizer.driver import Optimizer, OptimizerConfig
from optimizer.plan_io import load_plan
from optimizer.schema.check import check_plan


def test_rules_are_registered_in_their_phases():
    from optimizer.rules import RULES

    phases = {r.name: r.phase for r in RULES}
    assert phases["simplify_predicates"] == "normalise"
    assert phases["extract_join_conditions"] == "normalise"
    assert phases["push_filters"] == "logical"
    assert phases["filter_into_read"] == "physical"


@pytest.mark.spark
@pytest.mark.parametrize("q", [19])  # Q19: projection masks, OR-heavy read filters (Q5: see docs/rules.md)
def test_all_filter_rules_on_datafusion_plans_on_spark(backend, datafusion_tpch_plans, q):
    before = load_plan(datafusion_tpch_plans[q])
    result = optimize(before, *MY_RULES)
    assert "filter_into_read" in fired(result)
    assert shape(result.plan).count("filter") < shape(before).count("filter")
    same_answer(backend, before, result.plan)



def _has_equi_join(g, node) -> bool:
    from optimizer.load.functions import function_table

    if g.nodes[node]["kind"] != "join":
        return False
    join_rel = g.nodes[node]["rel"].join
    if not join_rel.HasField("expression"):
        return False
    left, right = inputs(g, node)
    keys, _ = implement_joins.split_condition(join_rel.expression, len(g.nodes[left]["schema"].types),
                                              g.nodes[left]["schema"].types, g.nodes[right]["schema"].types,
                                              function_table(g.graph["plan"]))
    return bool(keys)


#: Small enough that SF 0.01 gets both broadcast and shuffled hash joins, on both build sides.
MIXED = OptimizerConfig(broadcast_threshold_bytes=64 * 1024)


def _run_all(plans, statistics, rules, config=None):
    optimizer = Optimizer(statistics=statistics, rules=rules, config=config)
    out = {}
    for n, data in plans.items():
        plan = load_plan(data)
        out[n] = (plan, optimizer.run(plan))
    return out


@pytest.fixture(scope="module")
def tpch_physical(datafusion_tpch_plans, tpch_statistics):
    """``{query: (original plan, OptimizeResult)}``: the 22 DataFusion plans through the physical rules."""
    return _run_all(datafusion_tpch_plans, tpch_statistics, PHYSICAL)


@pytest.fixture(scope="module")
def tpch_mixed(datafusion_tpch_plans, tpch_statistics):
    """The same with a 64 KiB broadcast threshold."""
    return _run_all(datafusion_tpch_plans, tpch_statistics, PHYSICAL, MIXED)


def _check_tpch(results) -> Counter:
    from optimizer.dag import annotate_schemas

    seen: Counter = Counter()
    for n, (plan, result) in results.items():
        before = to_dag(plan)
        annotate_schemas(before)
        top_n_expected = sum(
            1 for x in before if before.nodes[x]["kind"] == "fetch"
            and before.nodes[inputs(before, x)[0]]["kind"] == "sort")
        g = result.graph
        after = kinds(g)
        assert check_plan(result.plan) == [], f"Q{n}"
        # An equi-join stays logical only where the cost model priced every physical form above what
        # Spark itself would run (the rewrite declined, or the phase undone as a whole): "leave it to
        # Spark" is an alternative the model weighs (e.g. a side just under the broadcast threshold
        # whose estimate comes out of joins: binding a shuffled join costs more than letting Spark
        # broadcast it).
        physical = next(p for p in result.phases if p.phase == "physical")
        if physical.undone is None and not physical.declined:
            assert not any(_has_equi_join(g, x) for x in g), f"Q{n}: an equi-join is left"
            assert after["join"] == 0, f"Q{n}"
        else:
            seen["left to Spark"] += after["join"]
        assert after["top_n"] == top_n_expected and after["fetch"] == 0, f"Q{n}"
        for x in g:
            if g.nodes[x]["kind"] == "hash_join":
                body = g.nodes[x]["rel"].hash_join
                type_name = HashJoinRel.JoinType.Name(body.type).removeprefix("JOIN_TYPE_")
                side = HashJoinRel.BuildInput.Name(body.build_input).removeprefix("BUILD_INPUT_")
                broadcast = g.nodes[inputs(g, x)[0 if side == "LEFT" else 1]]["kind"] == "exchange"
                assert side in (BROADCAST_BUILD if broadcast else SHUFFLED_HASH_BUILD)[type_name], f"Q{n}"
                seen[f"{'broadcast' if broadcast else 'shuffled'} {side}"] += 1
        seen["top_n"] += after["top_n"]
        seen["joins"] += sum(after[k] for k in ("hash_join", "merge_join", "nested_loop_join"))
    return seen


def test_tpch_structure(tpch_physical):
    seen = _check_tpch(tpch_physical)
    assert seen["top_n"] == 5  # Q2, Q3, Q10, Q18, Q21
    # every join is bound, or left to Spark where Spark broadcasts it by its own sizes and the model
    # prices that below the join the rule would bind (Q2: an aggregate's estimate is too unsure for a
    # binding broadcast hint)
    assert seen["joins"] + seen["left to Spark"] == 60
    assert seen["left to Spark"] <= 2
    # at SF 0.01 every build side is under Spark's 10 MiB broadcast threshold
    assert seen["broadcast LEFT"] + seen["broadcast RIGHT"] == seen["joins"]


def test_tpch_structure_mixed(tpch_mixed):
    seen = _check_tpch(tpch_mixed)
    assert all(seen[k] > 0 for k in ("broadcast LEFT", "broadcast RIGHT", "shuffled LEFT", "shuffled RIGHT")), seen


def test_tpch_structure_all_rules(datafusion_tpch_plans, tpch_statistics):
    """With every registered rule (the driver's default list) the same holds."""
    from optimizer.rules import RULES

    assert {r.name for r in PHYSICAL} <= {r.name for r in RULES}
    _check_tpch(_run_all(datafusion_tpch_plans, tpch_statistics, RULES))


def test_tpch_build_side_matches_broadcast(tpch_physical):
    # Q5 joins nation and region: tiny, always broadcast, and the broadcast side is the build side
    g = tpch_physical[5][1].graph
    broadcast = [x for x in g if g.nodes[x]["kind"] == "exchange"]
    assert broadcast
    for x in broadcast:
        (parent,) = g.predecessors(x)
        body = g.nodes[parent]["rel"].hash_join
        side = inputs(g, parent).index(x)
        assert body.build_input == (HashJoinRel.BUILD_INPUT_LEFT if side == 0 else HashJoinRel.BUILD_INPUT_RIGHT)




@pytest.mark.spark
@pytest.mark.parametrize("query", range(1, 23))
def test_tpch_same_answer_on_spark(backend, tpch_mixed, query):
    plan, result = tpch_mixed[query]
    if not result.events:  # Q1, Q6: no join, no limit; nothing to compare
        assert query in (1, 6)
        return
    _same_answer(backend, plan, result.plan, f"Q{query}")
