"""Tables of the Spark catalog (``--catalog DB``, ``SparkBackend(spark, tables=None)``) and tables by URI.

TPC-H SF 0.01 is registered as external tables of a database of the suite's session, whose location
is a temporary folder (the data stay where they are; the database is dropped afterwards). Plans run
with no ``--tables``; their answers equal DuckDB's; the statistics the optimizer sees come from the
catalog, and exist only after ``--analyze-tables``.
"""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from optimizer.cli import main
from optimizer.difftest.results import compare_tables
from workloads.tpch import tpch_query

pytestmark = pytest.mark.spark

DB = "substrait_opt_test_tpch"
TABLES = ("region", "nation", "supplier", "customer", "part", "partsupp", "orders", "lineitem")


@pytest.fixture(scope="module")
def tpch_catalog(spark, tpch_dir, tmp_path_factory):
    location = tmp_path_factory.mktemp("catalog") / f"{DB}.db"
    spark.sql(f"CREATE DATABASE {DB} LOCATION '{location}'")
    try:
        for name in TABLES:
            spark.sql(f"CREATE TABLE {DB}.{name} USING parquet LOCATION '{Path(tpch_dir) / (name + '.parquet')}'")
        yield DB
    finally:
        spark.sql(f"DROP DATABASE IF EXISTS {DB} CASCADE")


@pytest.fixture(scope="module")
def plan_files(datafusion_tpch_plans, tmp_path_factory):
    folder = tmp_path_factory.mktemp("plans")
    out = {}
    for q in (3, 5):
        out[q] = folder / f"q{q}.binpb"
        out[q].write_bytes(datafusion_tpch_plans[q])
    return out


def _databases(spark) -> set[str]:
    return {d.name for d in spark.catalog.listDatabases()}


def test_catalog_tables_run_without_tables(spark, tpch_catalog, plan_files, duckdb_oracle, tmp_path, capsys,
                                          session_args):
    code = main(["run", *session_args, str(plan_files[3]), str(plan_files[5]), "--catalog", tpch_catalog, "--out", str(tmp_path),
                 "--show", "0"])
    out = capsys.readouterr().out
    assert code == 0, out
    for q in (3, 5):
        got = pq.read_table(tmp_path / f"q{q}.parquet")
        assert compare_tables(got, duckdb_oracle(tpch_query(q))).equal, q


def test_catalog_statistics_and_diff(spark, tpch_catalog, plan_files, duckdb_oracle, tmp_path, capsys, session_args):
    from optimizer.cli import build_parser
    from optimizer.cli.optimize import statistics_from_args
    from optimizer.spark.statistics import CatalogStatistics

    before = _databases(spark)
    lineitem_rows = duckdb_oracle("select count(*) from lineitem").column(0)[0].as_py()
    expected = {"customer": 1500, "orders": 15000, "lineitem": lineitem_rows}

    # Never analysed: the catalog has no row counts, and reading it creates nothing.
    assert CatalogStatistics(spark, tpch_catalog).table("lineitem").row_count is None
    code = main(["explain", *session_args, str(plan_files[3]), "--catalog", tpch_catalog, "--format", "json",
                 "-o", str(tmp_path / "before.json")])
    assert code == 0 and _databases(spark) == before

    # --analyze-tables writes statistics into the catalog; the optimizer's reads see its row counts.
    code = main(["explain", *session_args, str(plan_files[3]), "--catalog", tpch_catalog, "--analyze-tables", "--format", "json",
                 "-o", str(tmp_path / "after.json")])
    assert code == 0
    def read_estimates(name):
        return [r["estimated_rows"] for r in json.loads((tmp_path / name).read_text()) if r["kind"] == "read"]

    assert read_estimates("after.json") != read_estimates("before.json")  # the reads' filters estimated
    args = build_parser().parse_args(["optimize", *session_args, str(plan_files[3]), "--catalog", tpch_catalog])
    seen = statistics_from_args(args)  # what `optimize --catalog` gives the optimizer
    assert {name: seen.table([name]).row_count for name in expected} == expected
    stats = CatalogStatistics(spark, tpch_catalog)
    for name, rows in expected.items():
        assert stats.table([name.upper()]).row_count == rows
    orderkey = stats.table(f"{tpch_catalog}.orders").column("o_orderkey")
    assert orderkey.ndv and orderkey.min == 1 and orderkey.null_count == 0
    assert _databases(spark) == before  # no statistics database, no registered copies

    # diff: optimized with the catalog's statistics, both plans run on the catalog's tables.
    capsys.readouterr()
    code = main(["diff", *session_args, str(plan_files[3]), "--catalog", tpch_catalog, "--out", str(tmp_path / "diff")])
    out = capsys.readouterr().out
    assert code == 0 and "1 passed, 0 failed" in out, out


def test_table_not_found_names_where_it_looked(spark, tpch_catalog, tmp_path, capsys):
    from optimizer.spark.tables import TableResolver

    resolver = TableResolver(spark, None, database=tpch_catalog)
    assert resolver.raw_table(["LINEITEM"]).count() > 0
    assert resolver.raw_table([tpch_catalog, "nation"]).count() == 25
    with pytest.raises(Exception, match=rf"table 'nowhere' not found \(looked in database '{tpch_catalog}'"):
        resolver.raw_table(["nowhere"])


def test_tables_by_uri(spark, tpch_dir, tmp_path):
    """A file:// directory is listed like a local one; a directory only Spark can list is probed by
    reading each candidate once (exercised here on a file:// root: the same Spark calls as s3a://)."""
    from optimizer.errors import PlanError
    from optimizer.spark.tables import TableResolver

    uri = Path(tpch_dir).as_uri()
    local = TableResolver(spark, uri)
    assert local.directory == Path(tpch_dir) and local.raw_table(["NATION"]).count() == 25

    remote = TableResolver(spark, "s3a://bucket/tpch")
    assert remote.location == "s3a://bucket/tpch" and remote.directory is None
    remote.location = uri  # the probing path, on a root Spark can read here
    assert remote.raw_table(["NATION"]).count() == 25  # NATION.parquet is missing, nation.parquet found
    assert remote.raw_table(["nation"]) is remote.raw_table(["Nation"])  # read once per table
    with pytest.raises(PlanError, match=rf"table 'nowhere' not found \(looked in {uri}, the Spark catalog\)"):
        remote.raw_table(["nowhere"])


def test_uri_without_connector_is_named(spark):
    """A scheme Spark has no file system for (no hadoop-aws here) is an execution error naming the table,
    the location and the JVM's reason."""
    from optimizer.errors import ExecutionError
    from optimizer.spark.tables import TableResolver

    with pytest.raises(ExecutionError, match=r"table 'nation': Spark cannot read s3a://bucket/tpch/nation.parquet: "
                                             r".*S3AFileSystem not found"):
        TableResolver(spark, "s3a://bucket/tpch").raw_table(["nation"])
