"""The Spark backend over Spark Connect: a server started on 127.0.0.1 by the tests
(tests/spark_servers.py), DataFusion's 22 TPC-H plans run through a Connect client session, judged
against DuckDB as on a classic session (tests/test_backend_acceptance.py), and the CLI's ``run
--remote``. ``make test-connect`` runs every Spark test of the suite on Connect, the TPC-H plans of
DuckDB and Isthmus (test_backend_acceptance.py) and the TPC-DS plans (test_tpcds.py) among them.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from plan_answers import PlanAnswers
from test_backend_acceptance import Acceptance, _assert_outcome, evaluate

from optimizer.difftest.results import compare_tables
from optimizer.spark import SparkBackend
from optimizer.spark.session import is_connect_session
from workloads.tpch import TPCH_ORDER_BY, tpch_query

pytestmark = pytest.mark.spark

REPO = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def connect_acceptance(connect_spark, tpch_dir, tpch_small_dir, duckdb_oracle):
    # answers of its own: every plan runs on the Connect session, none is taken from the classic one's
    return Acceptance(connect_spark, tpch_dir, tpch_small_dir, duckdb_oracle, PlanAnswers())


def test_the_session_is_a_connect_client(connect_spark, tpch_dir):
    assert is_connect_session(connect_spark)
    backend = SparkBackend(connect_spark, tables=tpch_dir)
    assert backend.tables.spark is connect_spark


@pytest.mark.parametrize("q", range(1, 23))
def test_datafusion_tpch_plan_on_connect(connect_acceptance, datafusion_tpch_plans, q):
    outcome = evaluate(connect_acceptance, f"datafusion-tpch/q{q:02d}", lambda: datafusion_tpch_plans[q],
                       tpch_query(q), lambda: TPCH_ORDER_BY[q])
    _assert_outcome(f"datafusion q{q}", outcome)


def test_cli_run_remote(connect_url, tpch_dir, datafusion_tpch_plans, duckdb_oracle, tmp_path):
    """``substrait-opt run --remote sc://...``: the CLI as a Connect client gives DuckDB's answer."""
    plan = tmp_path / "q3.binpb"
    plan.write_bytes(datafusion_tpch_plans[3])
    done = subprocess.run(
        [sys.executable, "-m", "optimizer", "run", str(plan), "--remote", connect_url, "--tables", str(tpch_dir),
         "--out", str(tmp_path / "out"), "--show", "0"],
        capture_output=True, text=True, timeout=600, cwd=REPO,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    got = pq.read_table(tmp_path / "out" / "q3.parquet")
    assert compare_tables(got, duckdb_oracle(tpch_query(3)), ordered_by=TPCH_ORDER_BY[3]).equal
