"""``order_conjuncts``: which conditions it reorders and how (filters and read filters), which it must
leave as written (a conjunct that may fail), that the cost model prices the order it picks lower, and
that the reordered plans give the same rows on Spark (hand-built, and DuckDB's TPC-H Q6)."""

from __future__ import annotations

import pytest
from optimizer.rules.order_conjuncts import RULE
from substrait.proto import Expression, Type

from optimizer.driver import Optimizer, OptimizerConfig
from optimizer.expr_utils import conjuncts, referenced_fields
from optimizer.load.functions import function_table
from optimizer.plan_io import load_plan
from testing.builder import Builder, filter_, lit, read, ref

QUIET = OptimizerConfig(annotate_estimates=False)
COLUMNS = [("name", "string"), ("day", "i64"), ("price", "fp64")]


def _run(plan):
    return Optimizer(rules=[RULE], config=QUIET).run(plan)


def _fired(result) -> bool:
    return any(e.rule == RULE.name for e in result.events)


def _condition(result) -> Expression:
    rel = result.plan.relations[0].root.input
    while rel.WhichOneof("rel_type") != "filter":
        rel = getattr(rel, rel.WhichOneof("rel_type")).input
    return rel.filter.condition


def _order(result) -> list[int]:
    """The column each conjunct of the filter reads, in order."""
    return [min(referenced_fields(c)) for c in conjuncts(_condition(result), function_table(result.plan))]


def _rels(rel):
    yield rel
    body = getattr(rel, rel.WhichOneof("rel_type"))
    for name in ("input", "left", "right"):
        if body.DESCRIPTOR.fields_by_name.get(name) is not None and body.HasField(name):
            yield from _rels(getattr(body, name))


def _plan(b: Builder, *parts: Expression, source=None):
    source = source if source is not None else read("t", COLUMNS, rows=1e6)
    return b.plan(filter_(source, b.call("and", *parts)), [c for c, _ in COLUMNS])


def test_an_integer_range_goes_before_a_string_comparison():
    b = Builder()
    result = _run(_plan(b, b.call("equal", ref(0), lit("x", "string")), b.call("gte", ref(1), lit(9000))))
    assert _fired(result)
    assert _order(result) == [1, 0]
    assert not _fired(_run(result.plan))  # the ranked order is a fixed point


def test_a_filter_on_a_small_table_is_left_as_written():
    # 100 rows: the better order saves the model far less than MIN_SAVING.
    b = Builder()
    small = read("t", COLUMNS, rows=100)
    assert not _fired(_run(_plan(b, b.call("equal", ref(0), lit("x", "string")), b.call("gte", ref(1), lit(9000)),
                                 source=small)))


def test_a_read_filter_is_ordered_too():
    b = Builder()
    on = b.call("and", b.call("equal", ref(0), lit("x", "string")), b.call("gte", ref(1), lit(9000)))
    plan = b.plan(read("t", COLUMNS, rows=1e6, filter=on), [c for c, _ in COLUMNS])
    result = _run(plan)
    assert _fired(result)
    got = result.plan.relations[0].root.input.read.filter
    assert [min(referenced_fields(c)) for c in conjuncts(got, function_table(result.plan))] == [1, 0]


def test_a_condition_with_a_conjunct_that_may_fail_stays_as_written():
    b = Builder()
    # price / day could be guarded by the conjunct before it in a producer's plan: nothing moves.
    guarded = b.call("gt", b.call("divide", ref(2), ref(1), out="fp64"), lit(0.5, "fp64"))
    assert not _fired(_run(_plan(b, b.call("equal", ref(0), lit("x", "string")), guarded, b.call("gte", ref(1), lit(9000)))))


def test_literals_cast_to_the_column_type_are_safe_and_a_cast_that_can_fail_is_not():
    b = Builder()

    def cast(e: Expression, t: Type) -> Expression:
        return Expression(cast=Expression.Cast(type=t, input=e))

    i64, date = Type(i64=Type.I64()), Type(date=Type.Date())
    decimal_lit = Expression(literal=Expression.Literal(decimal=Expression.Literal.Decimal(
        value=(2400).to_bytes(16, "little", signed=True), precision=4, scale=2)))
    fits = cast(cast(decimal_lit, Type(decimal=Type.Decimal(precision=4, scale=2))), Type(fp64=Type.FP64()))
    name_first = [b.call("equal", ref(0), lit("x", "string")), b.call("lt", ref(2), fits)]
    assert _fired(_run(_plan(b, *name_first)))
    # An ISO date string cast to a date cannot fail; any other string can.
    from optimizer.rules.order_conjuncts import _literal_cast_cannot_fail

    assert _literal_cast_cannot_fail(cast(lit("1994-01-01", "string"), date).cast)
    assert not _literal_cast_cannot_fail(cast(lit("1994-13-01", "string"), date).cast)
    assert not _literal_cast_cannot_fail(cast(lit(2**40), Type(i32=Type.I32())).cast)
    assert _literal_cast_cannot_fail(cast(lit(7), i64).cast)
    too_wide = Type(decimal=Type.Decimal(precision=3, scale=2))  # 24.00 needs 4 digits
    assert not _literal_cast_cannot_fail(cast(decimal_lit, too_wide).cast)
    # A cast of a column may fail: the condition stays as written.
    column_cast = b.call("gte", cast(ref(0), i64), lit(9000))
    assert not _fired(_run(_plan(b, b.call("equal", ref(0), lit("x", "string")), column_cast)))


def test_the_model_prices_the_ranked_order_lower():
    from optimizer.dag import annotate_schemas, to_dag
    from optimizer.driver import RuleContext

    b = Builder()
    plan = _plan(b, b.call("equal", ref(0), lit("x", "string")), b.call("gte", ref(1), lit(9000)))
    ordered = _run(plan).plan

    def filter_cost(p) -> float:
        g = to_dag(p)
        annotate_schemas(g)
        ctx = RuleContext(g, None, None, QUIET)
        (node,) = [n for n in g if g.nodes[n]["kind"] == "filter"]
        return ctx.cost_model.node_cost(g, node, ctx.estimator).total

    assert filter_cost(ordered) < filter_cost(plan)


@pytest.mark.spark
def test_reordered_conditions_give_the_same_rows_on_spark(backend):
    """lineitem (SF 0.01, hinted as a million rows so that the reorder pays): a string comparison, an
    integer range and null tests, ordered, give the same rows, as a read filter and as a filter."""
    from optimizer.difftest.results import compare_tables

    b = Builder()
    cols = [("l_orderkey", "i64"), ("l_partkey", "i64"), ("l_shipmode", "string"), ("l_comment", "string")]
    on = b.call("and", b.call("equal", ref(2), lit("AIR", "string")), b.call("not", b.call("is_null", ref(3))),
                b.call("gte", ref(1), lit(100)), b.call("lt", ref(0), lit(30000)))
    names = [c for c, _ in cols]
    for plan in (b.plan(filter_(read("lineitem", cols, rows=1e6), on), names),
                 b.plan(read("lineitem", cols, rows=1e6, filter=on), names)):
        result = _run(plan)
        assert _fired(result)
        expected = backend.execute(plan)
        assert expected.num_rows > 0
        assert compare_tables(backend.execute(result.plan), expected)


@pytest.mark.spark
def test_duckdb_tpch_q6_reads_its_date_range_first(backend, tpch_statistics):
    """DuckDB writes Q6's filter quantity first; ordered, the date range comes first (the cheapest,
    most selective conjunct), and the answer is the same."""
    from optimizer.difftest.results import compare_tables
    from workloads.corpus import corpus_root

    path = corpus_root() / "substrait_consumer/snapshots/producer/integration/tpch/q06-duckdb_plan.json"
    plan = load_plan(path)
    result = Optimizer(statistics=tpch_statistics, config=QUIET).run(plan)
    assert any(e.rule == RULE.name for e in result.events)
    reads = [r for r in _rels(result.plan.relations[0].root.input) if r.WhichOneof("rel_type") == "read"]
    (lineitem,) = [r.read for r in reads if list(r.read.named_table.names) == ["lineitem"]]
    names = list(lineitem.base_schema.names)
    first = conjuncts(lineitem.filter, function_table(result.plan))[0]
    assert {names[i] for i in referenced_fields(first)} == {"l_shipdate"}
    expected = backend.execute(plan)
    assert compare_tables(backend.execute(result.plan), expected)
