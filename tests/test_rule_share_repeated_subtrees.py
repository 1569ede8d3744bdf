"""share_repeated_subtrees: where copies of a subtree, alike but for the columns each keeps, become one
subtree every place reads (projections and emits that differ, reads of other columns, a copy joined
with another, three copies), where they must not (a nondeterministic condition, a fetch, a different
filter, a copy that only reads a table), that the Spark backend computes a shared subtree once (and
still runs one shared subtree over another), and that the rewritten plans give the original's rows on
Spark (seeded random unions and self-joins of copies; TPC-DS Q27 as DataFusion and DuckDB write it)."""

from __future__ import annotations

import random

import pytest
from optimizer.rules.share_repeated_subtrees import RULE
from substrait.proto import JoinRel, ReferenceRel, Rel, RelCommon, SetRel

from optimizer.dag import to_dag, uses
from optimizer.driver import Optimizer, OptimizerConfig
from optimizer.schema.check import check_plan
from testing.builder import INNER, Builder, aggregate, fetch, filter_, join, lit, project, ref, values

#: Tables of any size (the tests' have a few rows; the default shares copies over a million rows).
QUIET = OptimizerConfig(annotate_estimates=False, share_min_rows=0)

#: (a, b, c) sales; (k, v) a dimension: NULL keys on both sides, a key without a match.
SALES = [(1, 10, 100), (2, None, 200), (None, 30, 300), (4, 40, None), (5, 50, 500), (1, 60, 600), (9, 90, 900)]
DIM = [(1, 11), (2, 22), (5, 55), (None, 77), (4, 44)]


def optimized(plan, config: OptimizerConfig = QUIET):
    return Optimizer(config=config, rules=[RULE]).run(plan)


def fired(result) -> int:
    return sum(1 for e in result.events if e.rule == RULE.name)


def shared(plan) -> list[str]:
    """The kinds of the relations read in more than one place."""
    g = to_dag(plan)
    return sorted(g.nodes[n]["kind"] for n in g if uses(g, n) > 1)


def sales():
    return values([("a", "i64"), ("b", "i64"), ("c", "i64")], SALES)


def dim():
    return values([("k", "i64"), ("v", "i64")], DIM)


def joined(b: Builder, keep: list[int] | None = None, lo: int = 0):
    """Sales with ``b > lo`` joined with the dimension on ``a = k``; ``keep``: the columns a projection
    over the join keeps (an emit), as a producer prunes each copy to what its reader needs."""
    j = join(filter_(sales(), b.call("gt", ref(1), lit(lo))), dim(), INNER, b.call("equal", ref(0), ref(3)))
    if keep is None:
        return j
    common = RelCommon()
    common.emit.output_mapping.extend(keep)
    return project(j, common=common)


def union(*inputs):
    return Rel(set=SetRel(op=SetRel.SET_OP_UNION_ALL, inputs=list(inputs)))


def test_copies_pruned_apart_become_one_subtree():
    """Q27's shape: aggregates by other keys over one join, each copy keeping its own columns."""
    b = Builder()
    by_a = aggregate(joined(b, [0, 1]), [0], b.agg("sum", ref(1)))
    by_v = aggregate(joined(b, [4, 1]), [0], b.agg("sum", ref(1)))
    total = aggregate(joined(b, [2]), [], b.agg("count", ref(0)))
    plan = b.plan(union(by_a, by_v, project(total, lit(0), common=_emit(1, 0))), ["k", "s"])
    result = optimized(plan)
    assert fired(result) == 1
    assert shared(result.plan) == ["join"]
    assert check_plan(result.plan) == []


def test_a_copy_joined_with_another():
    """Q47's lag and lead: a copy joined with another copy of itself on other columns."""
    b = Builder()
    left, right = aggregate(joined(b), [0, 4], b.agg("sum", ref(1))), aggregate(joined(b), [0, 4], b.agg("max", ref(2)))
    plan = b.plan(join(left, right, INNER, b.call("equal", ref(1), ref(4))), list("abcdef"))
    result = optimized(plan)
    assert fired(result) == 1
    assert shared(result.plan) == ["aggregate"]


@pytest.mark.parametrize("case", ["random", "fetch", "other filter", "read only", "written alike", "small tables"])
def test_not_shared(case):
    """Not a nondeterministic filter or a fetch (the joins below them are shared), not copies that
    give other rows, not copies that only read a table, not copies written exactly alike (Spark reuses
    their exchanges itself), not copies of small tables (by default)."""
    b = Builder()
    left, right = joined(b, [0, 1]), joined(b, [0, 2])
    config = QUIET
    if case == "random":
        condition = b.call("gt", b.call("random", out="fp64"), lit(0.5, "fp64"))
        left, right = filter_(left, condition), filter_(right, condition)
    elif case == "fetch":
        left, right = fetch(left, 3), fetch(right, 3)
    elif case == "other filter":
        right = joined(b, [0, 2], lo=20)
    elif case == "read only":
        left, right = project(sales(), common=_emit(0, 1)), project(sales(), common=_emit(0, 2))
    elif case == "written alike":
        right = joined(b, [0, 1])
    elif case == "small tables":
        config = OptimizerConfig(annotate_estimates=False)
    result = optimized(b.plan(union(left, right), ["x", "y"]), config)
    assert shared(result.plan) == (["join"] if case in ("random", "fetch") else [])


def _emit(*mapping: int) -> RelCommon:
    common = RelCommon()
    common.emit.output_mapping.extend(mapping)
    return common


# -- the answers on Spark ---------------------------------------------------------------------------------


@pytest.mark.spark
def test_the_backend_computes_a_shared_subtree_once(backend):
    """The shared join is a CTE Spark does not inline: one shuffle of its rows, reused by each reader."""
    from filter_rule_plans import same_answer

    b = Builder()
    plan = b.plan(union(aggregate(joined(b, [0, 1]), [0], b.agg("sum", ref(1))),
                        aggregate(joined(b, [4, 2]), [0], b.agg("sum", ref(1)))), ["k", "s"])
    result = optimized(plan)
    assert shared(result.plan) == ["join"]
    answer = same_answer(backend, plan, result.plan)
    assert answer.num_rows == 6  # a = 1, 4, 5 and v = 11, 44, 55
    text = backend_text(backend, result.plan)
    assert text.startswith("WITH ") and text.count("RAND()") == 1


@pytest.mark.spark
def test_a_shared_subtree_over_another_runs(backend):
    """Spark fails some plans whose non-inlined CTEs read each other (a column lost in its CTE pruning):
    a shared projection over the shared join is written where it is read, the join computed once."""
    from filter_rule_plans import same_answer

    b = Builder()
    join_rel = joined(b)
    over = project(Rel(reference=ReferenceRel(subtree_ordinal=0)), common=_emit(0, 1))
    ref_over, ref_join = Rel(reference=ReferenceRel(subtree_ordinal=1)), Rel(reference=ReferenceRel(subtree_ordinal=0))
    root = union(project(ref_over, common=_emit(0, 1)), project(ref_over, common=_emit(1, 0)),
                 project(ref_join, common=_emit(0, 4)))
    plan = b.plan(root, ["x", "y"], shared=[join_rel, over])
    inlined = b.plan(union(project(joined(b, [0, 1]), common=_emit(0, 1)), project(joined(b, [0, 1]), common=_emit(1, 0)),
                           project(joined(b), common=_emit(0, 4))), ["x", "y"])
    assert backend_text(backend, plan).count("RAND()") == 1  # the join, not the projection over it
    same_answer(backend, inlined, plan)


def backend_text(backend, plan) -> str:
    """The SQL text the backend runs for ``plan``'s root."""
    return backend.to_sql(plan)[0]


def random_case(b: Builder, rng: random.Random):
    """2 to 3 copies of one join (with or without a filter on its sales), each pruned to random columns,
    under an aggregate or as they are; unioned, or two joined on a random key."""
    lo = rng.choice([None, 0, 35])

    def copy():
        j = join(sales() if lo is None else filter_(sales(), b.call("gt", ref(1), lit(lo))), dim(),
                 rng.choice([INNER, JoinRel.JOIN_TYPE_LEFT]), b.call("equal", ref(0), ref(3)))
        keep = sorted(rng.sample(range(5), rng.randint(1, 4)))
        return project(j, common=_emit(*keep)), keep

    copies = [copy() for _ in range(rng.randint(2, 3))]
    if rng.random() < 0.5:
        tops = [project(c, common=_emit(0)) for c, _ in copies]
        return union(*tops), ["x"]
    (left, lk), (right, rk) = copies[0], copies[1]
    condition = b.call("equal", ref(rng.randrange(len(lk))), ref(len(lk) + rng.randrange(len(rk))))
    return join(left, right, INNER, condition), [f"c{i}" for i in range(len(lk) + len(rk))]


@pytest.mark.spark
def test_random_cases_on_spark(backend):
    """30 seeded random plans of copies of a join (inner or left, filtered or not) pruned to random
    columns, unioned or joined with each other: where the rule fires, the same rows on Spark."""
    from filter_rule_plans import same_answer

    rng = random.Random(47)
    fired_in = 0
    for case in range(30):
        b = Builder()
        tree, names = random_case(b, rng)
        plan = b.plan(tree, names)
        result = optimized(plan)
        if fired(result):
            fired_in += 1
            assert check_plan(result.plan) == [], case
            same_answer(backend, plan, result.plan, min_rows=0)
    assert fired_in >= 20


@pytest.mark.spark
@pytest.mark.parametrize("producer", ["datafusion", "duckdb"])
def test_tpcds_plans_on_spark(spark, producer):
    """TPC-DS Q27 (``results`` read by three aggregates, each copy pruned to its columns) and Q65 (``sa``
    read twice), as the producers write them, optimized with every rule: the copies become one subtree,
    the same rows on Spark."""
    from filter_rule_plans import same_answer

    from optimizer.plan_io import load_plan
    from optimizer.spark import SparkBackend
    from optimizer.spark.statistics import default_statistics
    from workloads.tpcds import datafusion_tpcds_plans, duckdb_tpcds_plans, generate_tpcds, tpcds_table_paths

    data = generate_tpcds(0.01)
    paths = tpcds_table_paths(data)
    make = datafusion_tpcds_plans if producer == "datafusion" else duckdb_tpcds_plans
    statistics = default_statistics(tables=paths)
    backend = SparkBackend(spark, tables={n: spark.read.parquet(str(p)) for n, p in paths.items()})
    rows = {}
    for q, written in make(data, (27, 65)).items():
        plan = load_plan(written)
        result = Optimizer(statistics=statistics, config=QUIET).run(plan)
        assert fired(result) >= 1, q
        assert shared(result.plan), q
        assert check_plan(result.plan) == [], q
        rows[q] = same_answer(backend, plan, result.plan, min_rows=0).num_rows
    assert rows[27] > 0, rows  # Q65 selects no row at SF 0.01


@pytest.mark.parametrize(("target", "runs"), [("spark", True), ("datafusion", False), ("duckdb", False)])
def test_runs_only_for_a_target_that_reads_shared_relations(target, runs):
    """A target whose writer writes each reference's subtree again gains nothing from a shared subtree."""
    from optimizer.rules import RULES

    assert (RULE in Optimizer(config=QUIET, target=target).rules) is runs
    assert RULE in RULES
