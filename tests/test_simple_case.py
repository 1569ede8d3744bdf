"""DataFusion writes a simple CASE (``CASE x WHEN v THEN r ... END``, TPC-DS q39) as an ``IfThen`` whose
first clause is the operand without ``then`` ("if_then condition must be boolean" before): loaded as
the spec's searched CASE ``WHEN x = v THEN r``, with the meaning DataFusion's own consumer gives it."""

from __future__ import annotations

import pytest
from substrait.proto import Plan

from optimizer.difftest.results import compare_tables
from optimizer.driver import optimize
from optimizer.plan_io import load_plan
from optimizer.schema.check import check_plan
from workloads.producers import datafusion_context, datafusion_plan

pytestmark = pytest.mark.spark

QUERIES = {
    "strings": "select n_nationkey, case n_regionkey when 0 then 'zero' when 1 then 'one' else 'other' end as r "
               "from nation",
    # q39's shape: CASE mean WHEN 0 THEN NULL ELSE stdev/mean END, in a projection and in a filter
    "q39_shape": "select n_nationkey, case n_regionkey when 0 then null else n_nationkey / cast(n_regionkey as double) end as c "
                 "from nation where case n_regionkey when 0 then 0 else n_nationkey / cast(n_regionkey as double) end > 1",
    "null_operand": "select x, case x when 1 then 'a' when 2 then 'b' end as r "
                    "from (values (1), (2), (3), (null)) as t(x)",
}


def _if_thens(msg, out):
    for field, value in msg.ListFields():
        if field.type == field.TYPE_MESSAGE and not field.message_type.GetOptions().map_entry:
            for item in value if field.label == field.LABEL_REPEATED else [value]:
                _if_thens(item, out)
    if msg.DESCRIPTOR.full_name == "substrait.Expression.IfThen":
        out.append(msg)
    return out


@pytest.mark.parametrize("name", QUERIES)
def test_datafusion_simple_case(name, spark, tpch_dir, tpch_tables, duckdb_oracle):
    from datafusion.substrait import Consumer, Serde

    from optimizer.spark import SparkBackend

    sql = QUERIES[name]
    raw = datafusion_plan(sql, tpch_tables)
    written = Plan.FromString(raw)
    cases = _if_thens(written, [])
    assert cases and all(not c.ifs[0].HasField("then") for c in cases)  # the producer's shape
    plan = load_plan(raw)
    assert all(c.ifs[0].HasField("then") for c in _if_thens(plan, []))
    assert check_plan(plan) == []
    # DataFusion's own consumer of the plan as written: what the producer meant.
    ctx = datafusion_context(tpch_tables)
    logical = Consumer.from_substrait_plan(ctx, Serde.deserialize_bytes(raw))
    meant = ctx.create_dataframe_from_logical_plan(logical).to_arrow_table()
    expected = duckdb_oracle(sql)
    assert compare_tables(meant, expected).equal
    backend = SparkBackend(spark, tables=tpch_dir)
    for which, p in (("original", plan), ("optimized", optimize(plan))):
        result = compare_tables(backend.execute(p), expected)
        assert result.equal, (name, which, result)
