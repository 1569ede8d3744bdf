"""Plans produced live by DataFusion (22 TPC-H) and DuckDB 1.1.3 (the 15 it can write), as binary and
JSON, load, pass check_plan and round-trip through the DAG."""

from __future__ import annotations

import pytest
from google.protobuf import json_format
from substrait.proto import Plan

from optimizer.dag import from_dag, to_dag
from optimizer.plan_io import dump_plan, load_plan
from optimizer.schema.check import check_plan
from workloads.producers import DUCKDB_TPCH_PRODUCIBLE, duckdb_plan, duckdb_plan_json
from workloads.tpch import table_paths, tpch_query


def _round_trips(plan: Plan) -> None:
    assert not check_plan(plan), check_plan(plan)[:3]
    assert from_dag(to_dag(plan)) == plan
    assert load_plan(dump_plan(plan, "binpb")) == plan
    assert load_plan(dump_plan(plan, "json")) == plan


@pytest.mark.parametrize("query", range(1, 23))
def test_datafusion_plans_binary_and_json(datafusion_tpch_plans, query):
    raw = datafusion_tpch_plans[query]
    plan = load_plan(raw)
    _round_trips(plan)
    # DataFusion's own JSON form of the same plan (protobuf JSON) loads to the same plan.
    assert load_plan(json_format.MessageToJson(Plan.FromString(raw))) == plan


@pytest.mark.parametrize("query", DUCKDB_TPCH_PRODUCIBLE)
def test_duckdb_plans_binary_and_json(tpch_dir, query):
    tables = {k: str(v) for k, v in table_paths(tpch_dir).items()}
    from_binary = load_plan(duckdb_plan(tpch_query(query), tables))
    from_json = load_plan(duckdb_plan_json(tpch_query(query), tables))  # DuckDB's own (old-encoding) JSON
    assert from_binary == from_json
    _round_trips(from_binary)


def test_duckdb_writes_fifteen_tpch_plans():
    assert len(DUCKDB_TPCH_PRODUCIBLE) == 15


def test_duckdb_producer_recovers_from_an_internal_error(tmp_path):
    """DuckDB invalidates its database after an internal error of its substrait extension; the next plan
    of the same tables comes from a new connection instead of failing with 'database has been
    invalidated'."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from optimizer.load.producers import ProducerError

    pq.write_table(pa.table({"a": [3, 1, 2]}), tmp_path / "t.parquet")
    tables = {"t": str(tmp_path / "t.parquet")}
    assert load_plan(duckdb_plan("select a from t where a > 1", tables))
    with pytest.raises(ProducerError, match="INTERNAL"):
        duckdb_plan("select a from t order by a limit 0", tables)
    assert load_plan(duckdb_plan("select a from t where a > 1", tables))
