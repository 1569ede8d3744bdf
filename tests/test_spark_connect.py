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


def test_cli_run_remote_failure_is_one_line(connect_url, tmp_path):
    """A plan whose Spark job fails (a cast of 'x' to int) over Connect: exit 3 and one line on stderr, as in
    local mode; the Connect client wrote the JVM's stack trace as a 6 KB JSON log record before it."""
    import pyarrow as pa

    from optimizer.plan_io import load_plan, save_plan
    from workloads.producers import datafusion_plan

    data = tmp_path / "t"
    data.mkdir()
    pq.write_table(pa.table({"id": [1, 2], "s": ["1", "x"]}), data / "t.parquet")
    plan = tmp_path / "p.json"
    save_plan(load_plan(datafusion_plan("SELECT id FROM t WHERE cast(s AS int) < 2", {"t": str(data / "t.parquet")})),
              str(plan))
    done = subprocess.run(
        [sys.executable, "-m", "optimizer", "run", str(plan), "--remote", connect_url, "--tables", str(data)],
        capture_output=True, text=True, timeout=600, cwd=REPO,
    )
    assert done.returncode == 3, done.stderr[-2000:]
    assert len(done.stderr.strip().splitlines()) == 1, done.stderr[:2000]
    assert "CAST_INVALID_INPUT" in done.stderr or "cast" in done.stderr.lower()

