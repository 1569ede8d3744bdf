"""DataFusion writes ``stddev``, ``var_samp``, ``corr``... measures without an output type, and no standard
extension YAML derives one for its names: they are Float64 (what DataFusion's Consumer reads). The schema
says fp64, so the backend compiles an expression over them (TPC-DS Q17 divides ``stddev_samp`` by an
average) from the plan alone, without asking Spark to analyse a query for the type of each argument (each
such question is a ``spark.sql`` call), and both plans give DataFusion's answer."""

from __future__ import annotations

import pytest

from optimizer.difftest.results import compare_tables
from optimizer.driver import optimize
from optimizer.plan_io import load_plan
from optimizer.schema import plan_schemas
from optimizer.schema.types import type_name
from optimizer.spark.expressions import ExpressionCompiler
from workloads.producers import datafusion_context, datafusion_plan

pytestmark = pytest.mark.spark

SQL = (
    "select l_returnflag, stddev(l_quantity) as sd, stddev_pop(l_quantity) as sdp, "
    "var_samp(l_extendedprice) as vs, var_pop(l_extendedprice) as vp, "
    "corr(l_quantity, l_extendedprice) as c, stddev(l_quantity) / var_pop(l_discount) as r "
    "from lineitem group by l_returnflag order by l_returnflag"
)


def test_statistics_are_double_and_compile_without_spark(tpch_dir, spark, monkeypatch):
    from optimizer.spark import SparkBackend

    tables = {"lineitem": tpch_dir / "lineitem.parquet"}
    plan = load_plan(datafusion_plan(SQL, tables))
    root = plan_schemas(plan)["relations[0].root"]
    assert [type_name(t) for t in root.types[1:6]] == ["fp64?"] * 5

    def no_analysis(self, col, scope):
        raise AssertionError(f"Spark asked for the type of {col}")

    backend = SparkBackend(spark, tables={"lineitem": tables["lineitem"]})
    optimized = optimize(plan)
    with monkeypatch.context() as m:
        m.setattr(ExpressionCompiler, "spark_type_of", no_analysis)
        compiled = [backend.to_sql(p) for p in (plan, optimized)]
    assert all("STDDEV_SAMP" in text.upper() for text, _ in compiled)

    # DataFusion's own answer: what its plan means.
    expected = datafusion_context({"lineitem": str(tables["lineitem"])}).sql(SQL).to_arrow_table()
    for which, p in (("original", plan), ("optimized", optimized)):
        result = compare_tables(backend.execute(p), expected)
        assert result.equal, (which, result)
