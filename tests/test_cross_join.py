"""DataFusion 55 writes ``a CROSS JOIN b`` as an inner ``JoinRel`` without expression (TPC-DS q23, q28,
q61, q77, q88, q90 too): read as ``true``; check_plan names it a producer quirk, not an error; the rules
and the backend treat it as a cross product; the answer equals DuckDB's, original and optimized."""

from __future__ import annotations

import pytest

from optimizer.dag import to_dag
from optimizer.difftest.results import compare_tables
from optimizer.driver import optimize
from optimizer.plan_io import load_plan
from optimizer.schema.check import check_plan, raise_for_problems
from workloads.producers import datafusion_plan

pytestmark = pytest.mark.spark

QUERIES = {
    "plain": "select n_name, r_name from nation cross join region",
    "counted": "select count(*) as n, sum(s_acctbal) as total from supplier cross join nation",
    "three": "select r_name, count(*) as c from region cross join nation, supplier "
             "where s_nationkey = n_nationkey group by r_name",
}


def _joins_without_expression(plan) -> int:
    g = to_dag(plan)
    return sum(1 for n in g.nodes if g.nodes[n]["kind"] == "join" and not g.nodes[n]["rel"].join.HasField("expression"))


@pytest.mark.parametrize("name", QUERIES)
def test_datafusion_cross_join_loads_optimizes_and_runs(name, spark, tpch_dir, tpch_tables, duckdb_oracle):
    from optimizer.spark import SparkBackend

    sql = QUERIES[name]
    plan = load_plan(datafusion_plan(sql, tpch_tables))
    quirks = [p for p in check_plan(plan) if p.quirk]
    if name == "plain":
        assert _joins_without_expression(plan) == 1  # as DataFusion wrote it: kept as written
        assert len(quirks) == 1 and "producer quirk" in quirks[0].message
        assert quirks[0].path.endswith("join.expression")
    assert [p for p in check_plan(plan) if not p.quirk] == []
    raise_for_problems(plan)
    optimized = optimize(plan)
    assert [p for p in check_plan(optimized) if not p.quirk] == []
    kinds = [d["kind"] for _, d in to_dag(optimized).nodes(data=True)]
    assert "join" not in kinds, kinds  # implemented: a physical join or a cross product
    backend = SparkBackend(spark, tables=tpch_dir)
    expected = duckdb_oracle(sql)
    for which, p in (("original", plan), ("optimized", optimized)):
        actual = backend.execute(p)
        result = compare_tables(actual, expected)
        assert result.equal, (name, which, result)
