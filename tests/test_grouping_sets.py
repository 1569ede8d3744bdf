"""Aggregates with several grouping sets: each producer's plan means what its producer meant.

* DataFusion 55 (live): ROLLUP, CUBE and GROUPING SETS plans (with ``grouping()``, repeated sets, a window
  over ``grouping()``) give on Spark the answer DataFusion's own consumer gives for the same plan, which is
  also DuckDB's answer to the SQL;
* a plan written as the spec says (Isthmus-style: distinct grouping expressions, measures, then the i32
  grouping-set index) gives the spec's answer, index included, also under the producer name "datafusion"
  with a later Substrait version;
* DuckDB 1.1.3 writes every grouping-set aggregate with one grouping (the union of the keys): its plan
  means ``GROUP BY`` all keys, and so it runs.
"""

from __future__ import annotations

import json
import re

import pyarrow as pa
import pytest
from substrait.proto import Plan as SubstraitPlan

from optimizer.difftest.results import compare_tables
from optimizer.driver import optimize
from optimizer.load.grouping_sets import conform_grouping_sets, grouping_set_convention
from optimizer.plan_io import load_plan
from optimizer.schema.check import check_plan

pytestmark = pytest.mark.spark

DATA = {
    "a": [1, 1, 2, None, 2, 3, 1],
    "b": [1, 2, 3, 3, None, 3, 1],
    "c": [1.0, 2.0, 3.0, 4.0, 5.0, 6.5, -1.0],
}
SCHEMA = pa.schema([("a", pa.int64()), ("b", pa.int64()), ("c", pa.float64())])

QUERIES = [
    "select a, b, count(*), sum(c) from t group by rollup(a, b)",
    "select b, a, sum(c) from t group by grouping sets ((a, b), (b), (a, b))",
    "select a, b, grouping(a) ga, grouping(b) gb, count(*) from t group by cube(a, b)",
    "select b, sum(c), grouping(b) + grouping(a) g from t group by grouping sets ((b), (a, b), ())",
    "select a, sum(c), rank() over (partition by grouping(a) order by sum(c)) r from t group by rollup(a)",
    "select b, max(c) from t group by grouping sets ((b), ()) having max(c) > 2",
    "select a + 1 k, count(*) from t group by rollup(a + 1)",
]


@pytest.fixture(scope="module")
def table() -> pa.Table:
    return pa.table(DATA, schema=SCHEMA)


@pytest.fixture(scope="module")
def backend(spark, table):
    from optimizer.spark import SparkBackend

    frame = spark.createDataFrame([tuple(r.values()) for r in table.to_pylist()], "a bigint, b bigint, c double")
    return SparkBackend(spark, tables={"t": frame})


@pytest.fixture(scope="module")
def datafusion_ctx(table):
    from datafusion import SessionContext

    ctx = SessionContext()
    ctx.register_record_batches("t", [table.to_batches()])
    return ctx


@pytest.fixture(scope="module")
def duck(table):
    import duckdb

    con = duckdb.connect()
    con.register("t", table)
    yield con
    con.close()


@pytest.mark.parametrize("sql", QUERIES)
def test_datafusion_plan_equals_datafusion_consumer(sql, datafusion_ctx, backend, duck):
    from datafusion.substrait import Consumer, Producer

    plan = Producer.to_substrait_plan(datafusion_ctx.sql(sql).optimized_logical_plan(), datafusion_ctx)
    theirs = datafusion_ctx.create_dataframe_from_logical_plan(
        Consumer.from_substrait_plan(datafusion_ctx, plan)
    ).to_arrow_table()
    written = SubstraitPlan()
    written.ParseFromString(plan.encode())
    assert grouping_set_convention(written) == "datafusion-grouping-id"
    loaded = load_plan(plan.encode())
    assert grouping_set_convention(loaded) is None  # conformed: read again, nothing is conformed twice
    assert check_plan(loaded) == []
    ours = backend.execute(loaded)
    assert compare_tables(ours, theirs), compare_tables(ours, theirs)
    assert compare_tables(ours, duck.execute(sql).fetch_arrow_table())
    optimized = backend.execute(optimize(loaded))
    assert compare_tables(optimized, theirs), compare_tables(optimized, theirs)


@pytest.mark.parametrize("sql", [q for q in QUERIES if "grouping(" in q])
def test_datafusion_grouping_function_is_read_as_the_set_bitmask(sql, datafusion_ctx, backend, duck):
    """DataFusion's unoptimized logical plan keeps SQL's ``grouping(x, ...)`` as an aggregate measure of
    its own (no Substrait function); it is read as the bitmask of the row's grouping set, a switch on the
    set index: Spark answers DuckDB's answer, and the plan written for DataFusion runs on its consumer
    (whose analyzer hides ``__grouping_id`` behind a ``grouping()`` measure: 'No field named
    __grouping_id' when a project above reads it)."""
    from datafusion.substrait import Consumer, Producer, Serde

    from optimizer.expr_utils import rels_with_paths

    plan = Producer.to_substrait_plan(datafusion_ctx.sql(sql).logical_plan(), datafusion_ctx).encode()
    loaded = load_plan(plan)
    assert check_plan(loaded) == []
    assert not [e for e in loaded.extensions if e.extension_function.name.startswith("grouping")
                and any(m.measure.function_reference == e.extension_function.function_anchor
                        for r, _ in rels_with_paths(loaded) if r.WhichOneof("rel_type") == "aggregate"
                        for m in r.aggregate.measures)]
    want = duck.execute(sql).fetch_arrow_table()
    assert compare_tables(backend.execute(loaded), want)
    assert compare_tables(backend.execute(optimize(loaded)), want)
    written = optimize(plan, target="datafusion")
    theirs = datafusion_ctx.create_dataframe_from_logical_plan(
        Consumer.from_substrait_plan(datafusion_ctx, Serde.deserialize_bytes(written.SerializeToString()))
    ).to_arrow_table()
    assert compare_tables(theirs, want), compare_tables(theirs, want)


def _spec_plan(producer: str, minor: int) -> str:
    """``rollup(a, b)`` with ``count(*)`` and ``sum(c)``, written as the spec says: grouping expressions
    [a, b], sets [[0, 1], [0], []], output [a, b, count, sum, grouping set index]."""

    def field(i):
        return {"selection": {"directReference": {"structField": {"field": i}}, "rootReference": {}}}

    doc = {
        "version": {"minorNumber": minor, "producer": producer},
        "extensionUrns": [{"extensionUrnAnchor": 1, "urn": "extension:io.substrait:functions_aggregate_generic"},
                          {"extensionUrnAnchor": 2, "urn": "extension:io.substrait:functions_arithmetic"}],
        "extensions": [
            {"extensionFunction": {"extensionUrnReference": 1, "functionAnchor": 1, "name": "count:"}},
            {"extensionFunction": {"extensionUrnReference": 2, "functionAnchor": 2, "name": "sum:fp64"}},
        ],
        "relations": [{"root": {"names": ["a", "b", "n", "s", "g"], "input": {"aggregate": {
            "input": {"read": {"namedTable": {"names": ["t"]}, "baseSchema": {
                "names": ["a", "b", "c"],
                "struct": {"types": [{"i64": {"nullability": "NULLABILITY_NULLABLE"}},
                                     {"i64": {"nullability": "NULLABILITY_NULLABLE"}},
                                     {"fp64": {"nullability": "NULLABILITY_NULLABLE"}}],
                           "nullability": "NULLABILITY_REQUIRED"}}}},
            "groupingExpressions": [field(0), field(1)],
            "groupings": [{"expressionReferences": [0, 1]}, {"expressionReferences": [0]}, {}],
            "measures": [
                {"measure": {"functionReference": 1, "outputType": {"i64": {"nullability": "NULLABILITY_REQUIRED"}},
                             "invocation": "AGGREGATION_INVOCATION_ALL"}},
                {"measure": {"functionReference": 2, "outputType": {"fp64": {"nullability": "NULLABILITY_NULLABLE"}},
                             "invocation": "AGGREGATION_INVOCATION_ALL", "arguments": [{"value": field(2)}]}},
            ],
        }}}}],
    }
    return json.dumps(doc)


SPEC_SQL = (
    "select a, b, count(*), sum(c), case grouping(a, b) when 0 then 0 when 1 then 1 else 2 end::int "
    "from t group by rollup(a, b)"
)


@pytest.mark.parametrize(("producer", "minor"), [("isthmus", 75), ("", 85), ("datafusion", 86)])
def test_spec_written_plan(producer, minor, backend, duck):
    plan = load_plan(_spec_plan(producer, minor))
    assert grouping_set_convention(plan) is None
    assert conform_grouping_sets(plan) == 0
    assert check_plan(plan) == []
    expected = duck.execute(SPEC_SQL).fetch_arrow_table()
    for candidate in (plan, optimize(plan)):
        result = compare_tables(backend.execute(candidate), expected)
        assert result, result


def test_conformed_datafusion_aggregate_is_spec_shaped(datafusion_ctx):
    from datafusion.substrait import Producer

    sql = "select b, a, sum(c) from t group by grouping sets ((a, b), (b), (a, b))"
    raw = Producer.to_substrait_plan(datafusion_ctx.sql(sql).optimized_logical_plan(), datafusion_ctx).encode()
    plan = load_plan(raw)
    project = plan.relations[0].root.input.project.input.project  # DataFusion's project, then ours
    agg = project.input.aggregate
    assert len(agg.grouping_expressions) == 2  # DataFusion wrote a, b, b, a, b
    assert [list(g.expression_references) for g in agg.groupings] == [[0, 1], [1], [0, 1]]
    # [a, b, sum, set index] -> [a, b, grouping id, sum] as DataFusion's parents read it
    assert list(project.common.emit.output_mapping) == [0, 1, 4, 2]
    switch = project.expressions[0].switch_expression
    masks = [c.then.literal.i8 for c in switch.ifs] + [getattr(switch, "else").literal.i8]
    assert masks == [0, 2, 0]  # a is the high bit: left out of the set (b)


def test_duckdb_grouping_sets_plan_keeps_one_set(backend, duck, tmp_path, table):
    import pyarrow.parquet as pq

    from workloads.producers import duckdb_plan

    path = tmp_path / "t.parquet"
    pq.write_table(table, path)
    sql = "select a, b, count(*) from t group by rollup(a, b)"
    plan = load_plan(duckdb_plan(sql, {"t": path}))
    assert [len(rel.aggregate.groupings) for rel in _aggregates(plan)] == [1]
    # The plan says GROUP BY a, b, and that is what it gives (not the ROLLUP the SQL asked for).
    result = compare_tables(backend.execute(plan), duck.execute("select a, b, count(*) from t group by a, b").arrow())
    assert result, result


def _aggregates(plan):
    from optimizer.expr_utils import rels_with_paths

    return [rel for rel, _ in rels_with_paths(plan) if rel.WhichOneof("rel_type") == "aggregate"]


@pytest.mark.parametrize("sql", QUERIES)
def test_grouping_sets_over_no_rows(sql, datafusion_ctx, backend, duck):
    """Over no input rows the empty grouping set () still makes its row (count 0, sum NULL), which Spark's
    GROUPING SETS (an Expand under a grouped aggregate) does not: every set's answer is DuckDB's."""
    from datafusion.substrait import Producer

    empty = sql.replace(" from t ", " from t where c > 100 ")
    plan = load_plan(Producer.to_substrait_plan(datafusion_ctx.sql(empty).optimized_logical_plan(),
                                                datafusion_ctx).encode())
    want = duck.execute(empty).fetch_arrow_table()
    got = backend.execute(plan)
    assert compare_tables(got, want), (empty, got.to_pylist(), want.to_pylist())
    assert compare_tables(backend.execute(optimize(plan)), want)


@pytest.mark.parametrize("where", ["", " where c > 100"])
def test_the_input_of_a_grand_total_is_written_once(where, datafusion_ctx, backend, duck):
    """The empty set's row over no input reads the input twice more (a filter to nothing, an EXISTS): the
    text names it once, a WITH query Spark inlines, so the answer is the same and Spark parses and
    analyses the input once."""
    from datafusion.substrait import Producer

    sql = f"select a, b, count(*), sum(c) from t{where} group by rollup(a, b)"
    plan = load_plan(Producer.to_substrait_plan(datafusion_ctx.sql(sql).optimized_logical_plan(),
                                                datafusion_ctx).encode())
    text, _ = backend.to_sql(plan)
    assert text.startswith("WITH _w") and len(re.findall(r"substrait_opt_\w+", text)) == 1, text
    assert compare_tables(backend.execute(plan), duck.execute(sql).fetch_arrow_table())

