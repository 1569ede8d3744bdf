"""Session-wide fixtures: one SparkSession for the whole test session (per pytest-xdist worker under
``make test``), and the shared ground truth.

* ``spark``: the session-wide SparkSession (classic, or Spark Connect with ``SUBSTRAIT_OPT_TEST_SPARK=connect``);
  ``connect_url`` / ``connect_spark``: a Spark Connect server on 127.0.0.1 started for the session, and
  a client of it.
* ``tpch_dir``: TPC-H SF 0.01 parquet files (+ table ``t``), generated once under ``.cache/tpch/sf0.01``
  (or ``$SUBSTRAIT_OPT_DATA/sf0.01``) and reused across runs; ``tpch_tables``: ``{name: parquet path}``;
  ``tpch_small_dir``: SF 0.0001, for the corpus' ``X_small.parquet`` tables (``workloads.corpus.sql_for``).
* ``duckdb_oracle``: ``sql -> pyarrow.Table`` run by DuckDB on those tables (views ``lineitem``..., ``t``).
* ``datafusion_tpch_plans`` / ``duckdb_tpch_plans``: ``{query number: plan bytes}`` produced live
  (22 DataFusion plans; DuckDB's usable 14, see ``workloads.producers.DUCKDB_TPCH_QUERIES``).
* ``plan_answers``: the answers of plans run on Spark, memoised for the session (a plan the acceptance
  tests ran is not run again to compare its optimized form with; ``tests/plan_answers.py``).
* ``corpus_plans``: the consumer-testing corpus plans (``workloads.corpus.CorpusPlan``), without the
  substrait-java "validate" copies.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

#: The files that take longest under ``make test`` (seconds on 2 cores with both workers busy, 2026-11-30,
#: TEST_JVM's settings): handed out first, longest first; the others follow in collection order.
LONGEST = {
    "test_tpcds": 270, "test_backend_acceptance": 210, "test_tutorial": 115, "test_written_plans": 95,
    "test_benchmarks_smoke": 75, "test_function_cases": 65, "test_install": 65, "test_spark_backend": 55,
    "test_standalone_cluster": 45, "test_spark_sql": 45, "test_spark_expressions": 40,
    "test_rule_merge_global_aggregates": 40, "test_spark_connect": 35, "test_lossy_casts": 30, "test_security": 30,
}


def pytest_collection_modifyitems(items):
    """Order the test files longest first (:data:`LONGEST`), each file's tests in their own order:
    with ``--dist loadfile --no-loadscope-reorder`` pytest-xdist hands the files out in this order, so
    no long file starts while the other worker is nearly done."""
    items.sort(key=lambda item: -LONGEST.get(Path(str(item.path)).stem, 0))  # stable: a file stays whole


@pytest.fixture(scope="session")
def spark(request):
    """The session of the Spark tests: classic ``local[2]``; with ``SUBSTRAIT_OPT_TEST_SPARK=connect``
    (``make test-connect``) a Spark Connect client of the server the tests start."""
    if os.environ.get("SUBSTRAIT_OPT_TEST_SPARK") == "connect":
        yield request.getfixturevalue("connect_spark")
        return
    from optimizer.spark.session import get_spark

    # This JVM lives for the whole run and answers thousands of queries: C2 compiles its hot code (the
    # launcher puts this option after TEST_JVM's C1-only one, which the short-lived JVMs keep). 99 TPC-DS
    # plans run a second time in the same JVM, beside a second such JVM: 152 s with C1 only, 99 s with C2;
    # the first time 176 s and 179 s.
    # Two shuffle partitions, the two task threads: AQE coalesces a small query's shuffles to the
    # parallelism anyway (at least 2 partitions here, so answers still come from several partitions), but
    # with 4 every map task wrote 4 outputs and stages AQE does not coalesce ran 4 tasks. TPC-DS' plans
    # on one core: 237-248 s with 4, 215 s with 2.
    session = get_spark(master="local[2]", conf={"spark.sql.shuffle.partitions": "2",
                                                 "spark.driver.extraJavaOptions": "-XX:TieredStopAtLevel=4"})
    yield session


@pytest.fixture(scope="session")
def session_args(request) -> list[str]:
    """CLI arguments that reach the ``spark`` fixture's session from ``main([...])`` in this process:
    ``--remote URL`` under ``SUBSTRAIT_OPT_TEST_SPARK=connect``, none for the classic session (the CLI
    takes the process's active session)."""
    if os.environ.get("SUBSTRAIT_OPT_TEST_SPARK") == "connect":
        return ["--remote", request.getfixturevalue("connect_url")]
    return []


@pytest.fixture(scope="session")
def connect_url():
    """``sc://127.0.0.1:PORT`` of a Spark Connect server started for the session (tests/spark_servers.py)."""
    from spark_servers import connect_server

    with connect_server() as url:
        yield url


@pytest.fixture(scope="session")
def connect_spark(connect_url):
    """A Spark Connect client session of :func:`connect_url`'s server (beside the classic session: the
    Connect client's own builder, which pyspark.sql.SparkSession's refuses while a classic one runs)."""
    from pyspark.sql.connect.session import SparkSession

    session = SparkSession.builder.remote(connect_url).getOrCreate()
    yield session
    session.stop()


@pytest.fixture(scope="session")
def tpch_dir():
    from workloads.tpch import generate_tpch

    return generate_tpch(0.01)


@pytest.fixture(scope="session")
def tpch_small_dir():
    """TPC-H SF 0.0001 (15 customers, 150 orders), for the corpus tests that read ``X_small.parquet``."""
    from workloads.tpch import generate_tpch

    return generate_tpch(0.0001)


@pytest.fixture(scope="session")
def tpch_tables(tpch_dir):
    from workloads.tpch import table_paths

    return table_paths(tpch_dir)


@pytest.fixture(scope="session")
def backend(spark, tpch_dir):
    """The Spark backend over the TPC-H SF 0.01 tables (a test module may define its own ``backend``)."""
    from optimizer.spark import SparkBackend

    return SparkBackend(spark, tables=tpch_dir)


@pytest.fixture(scope="session")
def tpch_statistics(tpch_tables):
    """Statistics of the TPC-H SF 0.01 tables read from their Parquet files (no Spark)."""
    from optimizer.spark.statistics import default_statistics

    return default_statistics(tables={k: str(v) for k, v in tpch_tables.items()})


@pytest.fixture(scope="session")
def plan_answers():
    """Answers of plans run on the session's Spark, each plan once (``tests/plan_answers.py``)."""
    from plan_answers import PlanAnswers

    return PlanAnswers()


@pytest.fixture(scope="session")
def duckdb_oracle(tpch_dir):
    from workloads.tpch import DuckDBOracle

    oracle = DuckDBOracle(tpch_dir)
    yield oracle
    oracle.close()


@pytest.fixture(scope="session")
def datafusion_tpch_plans(tpch_dir):
    from workloads.producers import datafusion_tpch_plans as produce

    return produce(tpch_dir)


@pytest.fixture(scope="session")
def duckdb_tpch_plans(tpch_dir):
    from workloads.producers import duckdb_tpch_plans as produce

    return produce(tpch_dir)


@pytest.fixture(scope="session")
def corpus_plans():
    from workloads.corpus import corpus_plans as load

    return load()  # a missing corpus raises, naming the folder: missing data fails, never skips


@pytest.fixture(scope="session")
def valid_corpus_plans(corpus_plans):
    """The corpus plans the optimizer takes: all but the producer bugs every command refuses (exit 2)."""
    from optimizer.load.pipeline import load

    return [p for p in corpus_plans if not load(p.path.read_bytes()).problems]
