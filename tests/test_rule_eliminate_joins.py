"""eliminate_joins and the unique keys it reads (cost/uniqueness.py): where a join to an input unique on its
join columns goes (outer join) or becomes a semi join (inner join), where it must not (an input not
unique, one of its columns read, a condition that is not only equi-comparisons, grouping sets, a shared
join, keys of different types, floating-point keys, a costlier plan), and that the rewritten plans give
the original's rows on Spark (null keys on the kept side; TPC-H SF 0.01; plans DuckDB and DataFusion
write)."""

from __future__ import annotations

import pytest
from optimizer.cost.uniqueness import NONE, ONE_ROW, unique_keys
from optimizer.rules import RULES
from optimizer.rules.eliminate_joins import RULE, eliminate_joins
from rule_rewrites import join_types
from substrait.proto import JoinRel, Rel, SetRel, Type

from optimizer.dag import annotate_schemas, inputs, to_dag
from optimizer.driver import Optimizer, OptimizerConfig, PlanContext
from optimizer.schema.check import check_plan
from testing.builder import (
    INNER,
    LEFT,
    Builder,
    aggregate,
    emit,
    fetch,
    filter_,
    join,
    lit,
    project,
    read,
    ref,
    values,
)

SEMI = JoinRel.JOIN_TYPE_LEFT_SEMI
RIGHT = JoinRel.JOIN_TYPE_RIGHT
QUIET = OptimizerConfig(annotate_estimates=False)

#: The kept side: keys with nulls and a repeated key (x, tag).
KEPT_ROWS = [(1, 100), (None, 101), (2, 102), (None, 103), (7, 104), (1, 105)]
#: The dropped side before its aggregate: repeated keys, null keys, a key no kept row has (k, v).
DROPPED_ROWS = [(1, 10), (1, 11), (2, 20), (None, 30), (None, 31), (9, 90)]


def kept():
    return values([("x", "i64"), ("tag", "i64")], KEPT_ROWS)


def dropped_rows():
    return values([("k", "i64"), ("v", "i64")], DROPPED_ROWS)


def join_names(plan) -> list[str]:
    """The types of the plan's joins, logical and physical, by name, sorted."""
    from optimizer.expr_utils import join_type_name

    g = to_dag(plan)
    return sorted(join_type_name(getattr(g.nodes[n]["rel"], g.nodes[n]["kind"])) for n in g
                  if g.nodes[n]["kind"] in ("join", "hash_join", "merge_join", "nested_loop_join"))


def optimized(plan, rules=None):
    return Optimizer(config=QUIET, rules=rules or [RULE]).run(plan)


def fired(result) -> int:
    return sum(1 for e in result.events if e.rule == RULE.name)


def keys_of(rel: Rel, names: list[str], b: Builder | None = None) -> frozenset:
    b = b or Builder()
    g = annotate_schemas(to_dag(b.plan(rel, names)))
    return unique_keys(g, g.graph["roots"][0]["node"])


# -- unique keys ----------------------------------------------------------------------------------------


def test_an_aggregate_is_unique_on_its_grouping_columns():
    b = Builder()
    assert keys_of(aggregate(dropped_rows(), [0], b.agg("count", ref(1))), ["k", "n"], b=b) == {frozenset({0})}
    assert keys_of(aggregate(dropped_rows(), [1, 0]), ["v", "k"], b=b) == {frozenset({0, 1})}
    assert keys_of(aggregate(dropped_rows(), [], b.agg("count", ref(1))), ["n"], b=b) == ONE_ROW


def test_grouping_sets_are_unique_only_with_the_set_column():
    """``GROUP BY GROUPING SETS ((k), ())``: the total's row has a null ``k``, as a group of null keys
    may: unique on ``k`` and the grouping-set column together, not on ``k``."""
    b = Builder()
    rel = aggregate(dropped_rows(), [0], b.agg("count", ref(1)))
    rel.aggregate.groupings.add()  # the empty set: the total
    assert keys_of(rel, ["k", "n", "set"], b=b) == {frozenset({0, 2})}


def test_the_keys_are_carried_through_filters_projections_emits_and_joins():
    b = Builder()
    agg = aggregate(dropped_rows(), [0], b.agg("count", ref(1)))  # k, n
    # a projection copying k (column 2) and an emit keeping only the copy and n
    moved = project(filter_(agg, b.call("gt", ref(1), lit(1))), ref(0), common=emit(2, 1))
    assert keys_of(moved, ["k2", "n"], b=b) == {frozenset({0})}
    # an emit dropping the key loses it
    assert keys_of(project(agg, common=emit(1)), ["n"], b=b) == NONE
    # joined to a relation without keys on k: the left's rows repeat, no key survives but the pair
    other = aggregate(kept(), [0, 1])  # x, tag: unique on both
    j = join(other, agg, INNER, b.call("equal", ref(0), ref(2)))
    assert keys_of(j, ["x", "tag", "k", "n"], b=b) == {frozenset({0, 1})}  # agg unique on k: the left's key stays
    j = join(agg, other, INNER, b.call("equal", ref(0), ref(2)))
    assert keys_of(j, ["k", "n", "x", "tag"], b=b) == {frozenset({2, 3})}
    # a semi join keeps its left input's keys; a fetch of one row has at most one
    assert keys_of(join(agg, kept(), SEMI, b.call("equal", ref(0), ref(2))), ["k", "n"], b=b) == {frozenset({0})}
    assert keys_of(fetch(kept(), 1), ["x", "tag"], b=b) == ONE_ROW
    assert keys_of(fetch(kept(), 2), ["x", "tag"], b=b) == NONE


def test_distinct_set_operations_are_unique_on_all_columns():
    for op, expected in ((SetRel.SET_OP_UNION_DISTINCT, {frozenset({0, 1})}), (SetRel.SET_OP_UNION_ALL, NONE),
                         (SetRel.SET_OP_MINUS_PRIMARY, {frozenset({0, 1})})):
        rel = Rel(set=SetRel(op=op, inputs=[kept(), dropped_rows()]))
        assert keys_of(rel, ["a", "b"]) == expected, SetRel.SetOp.Name(op)


def test_a_read_has_no_key():
    assert keys_of(read("t", [("a", "i64")]), ["a"]) == NONE


def test_the_metadata_query_keeps_the_keys_and_forgets_them_above_a_rewrite():
    from optimizer.cost.metadata import UNIQUE_KEYS, MetadataQuery

    b = Builder()
    g = annotate_schemas(to_dag(b.plan(filter_(aggregate(dropped_rows(), [0]), b.call("gt", ref(0), lit(0))), ["k"])))
    top = g.graph["roots"][0]["node"]
    (agg,) = inputs(g, top)
    query = MetadataQuery(g)
    assert query.unique_keys(top) == {frozenset({0})}
    assert set(query.entries(UNIQUE_KEYS)) >= {top, agg}
    query.invalidate(agg)
    assert top not in query.entries(UNIQUE_KEYS) and agg in query.entries(UNIQUE_KEYS)


# -- where the rule fires and where it does not -----------------------------------------------------


def left_join_plan(b: Builder, right: Rel, condition=None, read_right: bool = False):
    """``kept ⟕ right ON x = k`` read for ``x, tag`` (and ``right``'s column 1 if ``read_right``)."""
    cond = condition if condition is not None else b.call("equal", ref(0), ref(2))
    cols = (0, 1, 3) if read_right else (0, 1)
    names = ["x", "tag", "r"][: len(cols)]
    return b.plan(project(join(kept(), right, LEFT, cond), common=emit(*cols)), names)


def test_a_left_join_to_an_aggregate_nothing_reads_goes():
    b = Builder()
    plan = left_join_plan(b, aggregate(dropped_rows(), [0], b.agg("count", ref(1))))
    result = optimized(plan)
    assert fired(result) == 1
    assert join_types(result.plan) == []
    assert check_plan(result.plan) == []


def test_not_where_the_dropped_input_is_not_unique_on_the_join_columns():
    b = Builder()
    assert fired(optimized(left_join_plan(b, dropped_rows()))) == 0  # no aggregate: k repeats
    # unique on (k, v) but joined on k alone
    assert fired(optimized(left_join_plan(b, aggregate(dropped_rows(), [0, 1])))) == 0


def test_not_where_a_column_of_the_dropped_input_is_read():
    b = Builder()
    right = aggregate(dropped_rows(), [0], b.agg("count", ref(1)))
    assert fired(optimized(left_join_plan(b, right, read_right=True))) == 0
    # an outer join's key column too: null where no row matched, not the kept side's value
    plan = b.plan(project(join(kept(), right, LEFT, b.call("equal", ref(0), ref(2))), common=emit(0, 2)), ["x", "k"])
    assert fired(optimized(plan)) == 0


def test_not_where_the_condition_has_more_than_equi_comparisons():
    b = Builder()
    right = aggregate(dropped_rows(), [0], b.agg("count", ref(1)))
    extra = b.call("and", b.call("equal", ref(0), ref(2)), b.call("lt", ref(1), ref(3)))
    assert fired(optimized(left_join_plan(b, right, extra))) == 0
    # a comparison of an expression, not of a column
    cast_free = b.call("equal", b.call("add", ref(0), lit(1), out="i64"), ref(2))
    assert fired(optimized(left_join_plan(b, right, cast_free))) == 0


def test_not_over_grouping_sets():
    b = Builder()
    right = aggregate(dropped_rows(), [0], b.agg("count", ref(1)))
    right.aggregate.groupings.add()  # the total's row has a null k too
    assert fired(optimized(left_join_plan(b, right))) == 0


def test_not_a_shared_join():
    """The join is read by both inputs of a union (a plan relation of its own): left as it is. Read once,
    the same join becomes a semi join (every column of the aggregate has a partner)."""
    from substrait.proto import ReferenceRel

    b = Builder()
    j = join(kept(), aggregate(dropped_rows(), [0]), INNER, b.call("equal", ref(0), ref(2)))
    shared = Rel(reference=ReferenceRel(subtree_ordinal=0))
    union = Rel(set=SetRel(op=SetRel.SET_OP_UNION_ALL, inputs=[shared, shared]))
    g = annotate_schemas(to_dag(b.plan(union, ["x", "tag", "k"], shared=[j])))
    (node,) = [n for n in g if g.nodes[n]["kind"] == "join"]
    assert eliminate_joins(g, node, PlanContext(g)) is None
    g = annotate_schemas(to_dag(b.plan(j, ["x", "tag", "k"])))
    (node,) = [n for n in g if g.nodes[n]["kind"] == "join"]
    assert eliminate_joins(g, node, PlanContext(g)) is not None


def test_an_inner_join_becomes_a_semi_join_the_key_read_as_its_partner():
    b = Builder()
    j = join(kept(), aggregate(dropped_rows(), [0]), INNER, b.call("equal", ref(0), ref(2)))
    plan = b.plan(project(j, common=emit(1, 2)), ["tag", "k"])
    result = optimized(plan)
    assert fired(result) == 1
    assert join_types(result.plan) == [SEMI]
    assert check_plan(result.plan) == []


def test_not_an_inner_join_whose_key_partner_has_another_type():
    """``x`` is declared non-nullable, ``k`` nullable: ``k`` read above is not replaced by ``x`` (its type
    would change); not read, the join still becomes a semi join."""
    b = Builder()
    required = values([("x", "i64"), ("tag", "i64")], [(1, 100), (2, 102)])
    for t in required.read.base_schema.struct.types:
        t.i64.nullability = Type.NULLABILITY_REQUIRED
    j = join(required, aggregate(dropped_rows(), [0]), INNER, b.call("equal", ref(0), ref(2)))
    assert fired(optimized(b.plan(project(j, common=emit(1, 2)), ["tag", "k"]))) == 0
    j = join(required, aggregate(dropped_rows(), [0]), INNER, b.call("equal", ref(0), ref(2)))
    assert fired(optimized(b.plan(project(j, common=emit(1)), ["tag"]))) == 1


def test_not_on_floating_point_keys():
    """``equal`` matches -0.0 with 0.0, two groups an engine may keep apart."""
    b = Builder()
    left = values([("x", "fp64")], [(0.0,), (1.5,)])
    right = aggregate(values([("k", "fp64")], [(-0.0,), (0.0,)]), [0])
    plan = b.plan(project(join(left, right, LEFT, b.call("equal", ref(0), ref(1))), common=emit(0)), ["x"])
    assert fired(optimized(plan)) == 0


def test_not_an_inner_join_whose_unread_measure_needs_a_projection_the_model_prices_higher():
    """``count`` has no partner: the semi join would need a projection giving it a null, which the model
    prices above the inner join (it prices the two joins alike)."""
    b = Builder()
    right = aggregate(dropped_rows(), [0], b.agg("count", ref(1)))
    j = join(kept(), right, INNER, b.call("equal", ref(0), ref(2)))
    assert fired(optimized(b.plan(project(j, common=emit(1)), ["tag"]))) == 0


def test_a_right_join_drops_its_left_input_and_an_inner_join_either():
    b = Builder()
    left = aggregate(dropped_rows(), [0], b.agg("count", ref(1)))  # k, n
    plan = b.plan(project(join(left, kept(), RIGHT, b.call("equal", ref(0), ref(2))), common=emit(2, 3)), ["x", "t"])
    result = optimized(plan)
    assert fired(result) == 1 and join_types(result.plan) == []
    j = join(aggregate(dropped_rows(), [0]), kept(), INNER, b.call("equal", ref(2), ref(0)))
    result = optimized(b.plan(project(j, common=emit(0, 2)), ["k", "tag"]))
    assert fired(result) == 1 and join_types(result.plan) == [SEMI]


def test_the_rule_is_in_the_logical_phase_before_push_semi_joins():
    names = [r.name for r in RULES]
    assert RULE.phase == "logical"
    assert names.index("push_filters") < names.index(RULE.name) < names.index("push_semi_joins")


# -- the answers on Spark ---------------------------------------------------------------------------------


@pytest.mark.spark
def test_answers_with_null_keys_on_spark(backend):
    """Each rewrite of the kept side ``(x, tag)`` with null and repeated ``x`` against the groups of ``k``
    (a null group among them): the same rows before and after, on Spark."""
    from filter_rule_plans import same_answer

    b = Builder()
    counted = aggregate(dropped_rows(), [0], b.agg("count", ref(1)))
    cases = {
        "left join goes": (left_join_plan(b, counted), 6),
        "right join goes": (b.plan(project(join(counted, kept(), RIGHT, b.call("equal", ref(0), ref(2))),
                                           common=emit(2, 3)), ["x", "tag"]), 6),
        "inner join to semi": (b.plan(project(join(kept(), aggregate(dropped_rows(), [0]), INNER,
                                                   b.call("equal", ref(0), ref(2))), common=emit(1, 2)),
                                      ["tag", "k"]), 3),
        # null keys match null keys: k is the partner x's value, null too
        "not distinct from": (b.plan(project(join(kept(), aggregate(dropped_rows(), [0]), INNER,
                                                  b.call("is_not_distinct_from", ref(0), ref(2))),
                                             common=emit(1, 2)), ["tag", "k"]), 5),
        # the dropped side on the left of an inner join
        "inner join, left dropped": (b.plan(project(join(aggregate(dropped_rows(), [0]), kept(), INNER,
                                                         b.call("equal", ref(0), ref(1))), common=emit(0, 2)),
                                            ["k", "tag"]), 3),
    }
    for name, (plan, rows) in cases.items():
        result = optimized(plan)
        assert fired(result) == 1, name
        answer = same_answer(backend, plan, result.plan)
        assert answer.num_rows == rows, name


# -- plans the producers write -----------------------------------------------------------------------------

#: A view joined for a column the query does not read: DuckDB keeps the join (a RIGHT join, the
#: aggregate on its left), DataFusion's own optimizer removes it before writing the plan.
VIEW_SQL = """select c_name, c_acctbal from customer
    left join (select o_custkey, count(*) as n from orders group by o_custkey) t on c_custkey = t.o_custkey
    where c_acctbal > 9000"""
#: TPC-H Q18's IN written as a join with the subquery: both producers keep the inner join.
IN_AS_JOIN_SQL = """select o_orderkey, o_totalprice, t.l_orderkey from orders join
    (select l_orderkey from lineitem group by l_orderkey having sum(l_quantity) > 250) t on o_orderkey = t.l_orderkey"""


@pytest.mark.spark
@pytest.mark.parametrize(("producer", "sql", "before", "after"), [
    ("duckdb", VIEW_SQL, ["RIGHT"], []),
    ("duckdb", IN_AS_JOIN_SQL, ["INNER"], ["LEFT_SEMI"]),
    ("datafusion", IN_AS_JOIN_SQL, ["INNER"], ["LEFT_SEMI"]),
], ids=["duckdb-view", "duckdb-in", "datafusion-in"])
def test_producer_plans_on_spark(backend, tpch_tables, tpch_statistics, producer, sql, before, after):
    """The producers' plans of the two SQL shapes: the join goes (or becomes a semi join) with all the
    rules and statistics, and Spark gives the original's rows."""
    from filter_rule_plans import same_answer

    from optimizer.plan_io import load_plan
    from workloads.producers import datafusion_plan, duckdb_plan

    produce = datafusion_plan if producer == "datafusion" else duckdb_plan
    plan = load_plan(produce(sql, tpch_tables))
    assert join_names(plan) == before
    result = Optimizer(statistics=tpch_statistics, config=QUIET).run(plan)
    assert fired(result) == 1
    assert join_names(result.plan) == after
    assert check_plan(result.plan) == []
    assert same_answer(backend, plan, result.plan).num_rows > 0


@pytest.mark.spark
def test_duckdb_tpch_q15_on_spark(backend, tpch_statistics, duckdb_tpch_plans):
    """DuckDB writes Q15's ``total_revenue = (SELECT max(total_revenue) ...)`` as an inner join with the
    one-row aggregate: it becomes a semi join (the maximum read as its partner), the same supplier."""
    from filter_rule_plans import same_answer

    from optimizer.plan_io import load_plan

    plan = load_plan(duckdb_tpch_plans[15])
    result = Optimizer(statistics=tpch_statistics, config=QUIET).run(plan)
    assert fired(result) == 1
    assert "LEFT_SEMI" in join_names(result.plan) and "LEFT_SEMI" not in join_names(plan)
    assert same_answer(backend, plan, result.plan).num_rows == 1


@pytest.mark.spark
def test_duckdb_tpcds_q58_week_on_spark(spark):
    """TPC-DS Q58's ``d_date IN (... d_week_seq = (SELECT d_week_seq ... WHERE d_date = ...))``, which
    DuckDB writes as an inner join to the one-row aggregate (``any_value``), in a query that keeps rows at
    SF 0.01 (Q58 itself keeps none): the join becomes a semi join, the same rows on Spark."""
    from optimizer.difftest.results import compare_tables
    from optimizer.plan_io import load_plan
    from optimizer.spark import SparkBackend
    from optimizer.spark.statistics import default_statistics
    from workloads.producers import duckdb_plan
    from workloads.tpcds import generate_tpcds, tpcds_table_paths

    sql = """select i_item_id, sum(ss_ext_sales_price) as rev from store_sales, item, date_dim
        where ss_item_sk = i_item_sk and ss_sold_date_sk = d_date_sk and d_date in (select d_date from date_dim
            where d_week_seq = (select d_week_seq from date_dim where d_date = '2000-01-03'))
        group by i_item_id"""
    paths = tpcds_table_paths(generate_tpcds(0.01))
    plan = load_plan(duckdb_plan(sql, paths))
    result = Optimizer(statistics=default_statistics(tables=paths), config=QUIET).run(plan)
    assert fired(result) == 1
    backend = SparkBackend(spark, tables={n: spark.read.parquet(str(p)) for n, p in paths.items()})
    original = backend.execute(plan)
    assert original.num_rows > 0
    comparison = compare_tables(backend.execute(result.plan), original)
    assert comparison, comparison
