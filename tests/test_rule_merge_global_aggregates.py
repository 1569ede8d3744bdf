"""merge_global_aggregates: where cross-joined global aggregates over inputs alike but for their filters
become one aggregate with measure filters (filters in reads, filter relations and below inner joins and
projects), where they must not (other relations, grouping keys, a nondeterministic condition, an
aggregate that does not skip filtered rows, a shared leaf), and that the rewritten plans give the
original's rows on Spark (NULL conditions, empty branches, DISTINCT; TPC-DS Q28, Q88 and Q90 as
DataFusion and DuckDB write them)."""

from __future__ import annotations

import random

import pytest
from optimizer.rules.merge_global_aggregates import RULE
from substrait.proto import ReadRel

from optimizer.dag import to_dag
from optimizer.driver import Optimizer, OptimizerConfig
from optimizer.schema.check import check_plan
from testing.builder import (
    INNER,
    Builder,
    aggregate,
    cross,
    fetch,
    filter_,
    join,
    lit,
    project,
    read,
    ref,
    values,
)

QUIET = OptimizerConfig(annotate_estimates=False)

#: (a, b, c): NULLs in the columns the conditions read, rows in no branch, rows in two.
ROWS = [(1, 10, 100), (2, None, 200), (None, 30, 300), (4, 40, None), (5, 50, 500), (6, 60, 600), (9, 90, 900)]
COLS = [("a", "i64"), ("b", "i64"), ("c", "i64")]
#: (k, name) rows a branch joins its rows with.
DIM = [(1, 1), (2, 2), (5, 5), (6, 6), (None, 7)]


def optimized(plan, rules=None):
    return Optimizer(config=QUIET, rules=rules or [RULE]).run(plan)


def fired(result) -> int:
    return sum(1 for e in result.events if e.rule == RULE.name)


def kinds(plan) -> list[str]:
    g = to_dag(plan)
    return sorted(g.nodes[n]["kind"] for n in g)


def table():
    return values(COLS, ROWS)


def dim():
    return values([("k", "i64"), ("v", "i64")], DIM)


def branch(b: Builder, lo: int, *measures):
    """Measures over the rows with ``a > lo`` joined with the dimension on ``a = k`` where ``v < 6``."""
    t = filter_(table(), b.call("gt", ref(0), lit(lo)))
    d = filter_(dim(), b.call("lt", ref(1), lit(6)))
    return aggregate(project(join(t, d, INNER, b.call("equal", ref(0), ref(3)))), [], *measures)


def test_counts_by_range_become_one_aggregate():
    b = Builder()
    plan = b.plan(cross(branch(b, 1, b.agg("count")), branch(b, 4, b.agg("count"))), ["n1", "n4"])
    result = optimized(plan)
    assert fired(result) == 1
    assert kinds(result.plan).count("aggregate") == 1 and "cross" not in kinds(result.plan)
    assert check_plan(result.plan) == []
    measures = [m for r in to_dag(result.plan).nodes.values() if r["kind"] == "aggregate"
                for m in r["rel"].aggregate.measures]
    assert [m.HasField("filter") for m in measures] == [True, True]


def test_a_read_filter_that_differs_is_merged_with_the_read_widened():
    """Filters in the reads (as DataFusion writes them, on a column the read does not output)."""
    b = Builder()

    def counted(lo):
        r = read("t", COLS)
        r.read.filter.CopyFrom(b.call("gt", ref(2), lit(lo)))
        r.read.projection.select.struct_items.add().field = 0
        return aggregate(r, [], b.agg("count"))

    result = optimized(b.plan(cross(counted(100), counted(300)), ["x", "y"]))
    assert fired(result) == 1
    assert check_plan(result.plan) == []
    reads = [r["rel"].read for r in to_dag(result.plan).nodes.values() if r["kind"] == "read"]
    assert len(reads) == 1 and [i.field for i in reads[0].projection.select.struct_items] == [0, 2]


def test_three_leaves_and_another_one_through_fetches():
    """DataFusion's Q28: a fetch of 100 over each cross product; a leaf over another table stays."""
    b = Builder()
    other = aggregate(read("u", [("z", "i64")]), [], b.agg("count"))
    tree = fetch(cross(fetch(cross(branch(b, 1, b.agg("count")), other), 100), branch(b, 2, b.agg("count"))), 100)
    plan = b.plan(cross(tree, branch(b, 4, b.agg("sum", ref(1)))), ["n1", "z", "n2", "s4"])
    result = optimized(plan)
    assert fired(result) == 1
    assert kinds(result.plan).count("aggregate") == 2
    assert check_plan(result.plan) == []


@pytest.mark.parametrize("case", ["other table", "grouping keys", "random", "not null-skipping"])
def test_not_merged(case):
    b = Builder()
    left, right = branch(b, 1, b.agg("count")), branch(b, 4, b.agg("count"))
    if case == "other table":
        right = aggregate(filter_(read("u", COLS), b.call("gt", ref(0), lit(4))), [], b.agg("count"))
    elif case == "grouping keys":
        right = aggregate(filter_(table(), b.call("gt", ref(0), lit(4))), [1], b.agg("count"))
    elif case == "random":
        right = aggregate(filter_(table(), b.call("gt", b.call("random", out="fp64"), lit(0.5, "fp64"))), [],
                          b.agg("count"))
        left = aggregate(filter_(table(), b.call("gt", ref(0), lit(1))), [], b.agg("count"))
    elif case == "not null-skipping":
        right = branch(b, 4, b.agg("first_value", ref(0)))
    names = ["x", "k", "y"] if case == "grouping keys" else ["x", "y"]  # the grouping key is a column
    assert fired(optimized(b.plan(cross(left, right), names))) == 0


def test_leaves_written_alike_share_one_aggregate_without_filters():
    b = Builder()
    result = optimized(b.plan(cross(branch(b, 1, b.agg("count")), branch(b, 1, b.agg("sum", ref(1)))), ["n", "s"]))
    assert fired(result) == 1
    measures = [m for r in to_dag(result.plan).nodes.values() if r["kind"] == "aggregate"
                for m in r["rel"].aggregate.measures]
    assert len(measures) == 2 and not any(m.HasField("filter") for m in measures)


# -- the answers on Spark ---------------------------------------------------------------------------------


@pytest.mark.spark
def test_answers_on_spark(backend):
    """Every mergeable aggregate, DISTINCT too, a branch no row reaches (count 0, sum NULL), conditions
    NULL on some rows, a measure with its own filter: the same row before and after."""
    from filter_rule_plans import same_answer

    b = Builder()
    measures = [b.agg("count"), b.agg("sum", ref(1)), b.agg("avg", ref(2), out="fp64"), b.agg("min", ref(2)),
                b.agg("max", ref(1)), b.agg("count", ref(2), distinct=True)]
    own_filter = b.agg("sum", ref(2))
    leaves = [branch(b, lo, *measures) for lo in (0, 1, 4, 100)]
    filtered = aggregate(filter_(table(), b.call("gt", ref(1), lit(15))), [], own_filter)
    filtered.aggregate.measures[0].filter.CopyFrom(b.call("lt", ref(0), lit(6)))
    also = aggregate(filter_(table(), b.call("lt", ref(2), lit(600))), [], b.agg("count"))
    tree = cross(cross(cross(leaves[0], leaves[1]), cross(leaves[2], filtered)), cross(also, leaves[3]))
    names = [f"c{i}" for i in range(4 * len(measures) + 2)]
    plan = b.plan(tree, names)
    result = optimized(plan)
    assert fired(result) == 1
    assert kinds(result.plan).count("aggregate") == 2
    answer = same_answer(backend, plan, result.plan)
    assert answer.num_rows == 1


def random_condition(b: Builder, rng: random.Random, depth: int = 0) -> object:
    """A predicate over ``a``, ``b``, ``c``: comparisons, IS NULL, AND, OR, NOT (NULL where a column is)."""
    if depth < 2 and rng.random() < 0.4:
        name = rng.choice(["and", "or"])
        return b.call(name, random_condition(b, rng, depth + 1), random_condition(b, rng, depth + 1))
    if depth < 2 and rng.random() < 0.1:
        return b.call("not", random_condition(b, rng, depth + 1))
    column = rng.randrange(3)
    if rng.random() < 0.15:
        return b.call("is_null", ref(column))
    return b.call(rng.choice(["gt", "lt", "equal"]), ref(column), lit(rng.choice([0, 2, 5, 30, 60, 200, 600])))


def random_measures(b: Builder, rng: random.Random) -> list:
    pool = [lambda: b.agg("count"), lambda: b.agg("sum", ref(1)), lambda: b.agg("min", ref(2)),
            lambda: b.agg("max", ref(0)), lambda: b.agg("avg", ref(1), out="fp64"),
            lambda: b.agg("count", ref(2), distinct=True), lambda: b.agg("sum", ref(0), distinct=True)]
    return [rng.choice(pool)() for _ in range(rng.randint(1, 3))]


@pytest.mark.spark
def test_random_cases_on_spark(backend):
    """30 seeded random cross products of 2 to 4 aggregates over the same input with random conditions
    (NULLs, AND, OR, NOT): in a filter over the table, or in filters on both inputs of a join under a
    project; now and then a leaf over another input. Where the rule fires, the same row on Spark."""
    from filter_rule_plans import same_answer

    rng = random.Random(46)
    merged = 0
    for case in range(30):
        b = Builder()
        joined = rng.random() < 0.5

        def leaf(joined: bool, b: Builder = b) -> object:
            t = filter_(table(), random_condition(b, rng))
            if not joined:
                return aggregate(t, [], *random_measures(b, rng))
            d = filter_(dim(), b.call(rng.choice(["lt", "gt"]), ref(1), lit(rng.choice([2, 5, 6]))))
            return aggregate(project(join(t, d, INNER, b.call("equal", ref(0), ref(3)))), [], *random_measures(b, rng))

        leaves = [leaf(joined if rng.random() < 0.85 else not joined) for _ in range(rng.randint(2, 4))]
        tree = leaves[0]
        for other in leaves[1:]:
            tree = cross(tree, other)
        width = sum(len(x.aggregate.measures) for x in leaves)
        plan = b.plan(tree, [f"m{i}" for i in range(width)])
        result = optimized(plan)
        if fired(result):
            merged += 1
            assert check_plan(result.plan) == [], case
            same_answer(backend, plan, result.plan)
    assert merged >= 20


@pytest.mark.spark
@pytest.mark.parametrize("producer", ["datafusion", "duckdb"])
def test_tpcds_plans_on_spark(spark, producer):
    """TPC-DS Q28 (six aggregates of store_sales by quantity range, DISTINCT counts among them), Q88 (eight
    counts of a four-table join by time slot) and Q90 (two): one aggregate each, the same row on Spark."""
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
    for q, written in make(data, (28, 88, 90)).items():
        plan = load_plan(written)
        result = Optimizer(statistics=statistics, config=QUIET).run(plan)
        assert fired(result) == 1, q
        assert kinds(result.plan).count("aggregate") == 1, q
        assert check_plan(result.plan) == [], q
        same_answer(backend, plan, result.plan)


def test_a_virtual_table_read_is_not_widened():
    """Rows written in the plan (a virtual table) with filters that differ: merged over one copy."""
    b = Builder()
    plan = b.plan(cross(aggregate(filter_(table(), b.call("gt", ref(0), lit(1))), [], b.agg("count")),
                        aggregate(filter_(table(), b.call("gt", ref(0), lit(4))), [], b.agg("count"))), ["x", "y"])
    result = optimized(plan)
    assert fired(result) == 1
    reads = [r["rel"].read for r in to_dag(result.plan).nodes.values() if r["kind"] == "read"]
    assert len(reads) == 1 and reads[0].WhichOneof("read_type") == "virtual_table"
    assert isinstance(reads[0], ReadRel)


@pytest.mark.parametrize(("levels", "merged"), [(30, 1), (80, 0)])
def test_inputs_that_differ_deep_down(levels, merged):
    """The filters differ under ``levels`` filters written alike: merged within MAX_DEPTH levels, left as
    they are below it (the merge recurses; an input may be deeper than Python's stack)."""
    import json

    from optimizer.plan_io import dump_plan, load_plan

    b = Builder()
    t = read("t", COLS)
    plan = b.plan(cross(aggregate(filter_(t, b.call("gt", ref(0), lit(1))), [], b.agg("count")),
                        aggregate(filter_(t, b.call("gt", ref(0), lit(5))), [], b.agg("count"))), ["x", "y"])
    doc = json.loads(dump_plan(plan, "json"))
    for side in ("left", "right"):
        aggregate_body = doc["relations"][0]["root"]["input"]["cross"][side]["aggregate"]
        for _ in range(levels):
            aggregate_body["input"] = {"filter": {"input": aggregate_body["input"],
                                                  "condition": {"literal": {"boolean": True}}}}
    assert fired(optimized(load_plan(json.dumps(doc)))) == merged
