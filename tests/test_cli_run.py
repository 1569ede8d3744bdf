"""``substrait-opt run``: real plans on the session's Spark, results written and equal to DuckDB's."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from optimizer.cli import main
from optimizer.difftest.results import compare_tables
from workloads.corpus import corpus_root

CORPUS = corpus_root()
TPCH = CORPUS / "substrait_consumer/snapshots/producer/integration/tpch"

pytestmark = pytest.mark.spark


def _corpus_sql(path: Path) -> str:
    from workloads.corpus import corpus_plans, sql_for

    (plan,) = [p for p in corpus_plans() if Path(p.path).name == path.name]
    return sql_for(plan)


def test_run_writes_results_equal_to_duckdb(spark, tpch_dir, duckdb_oracle, tmp_path, capsys):

    plans = [TPCH / "q01-isthmus_plan.json", TPCH / "q06-duckdb_plan.json"]
    code = main(["run", *map(str, plans), "--tables", str(tpch_dir), "--out", str(tmp_path), "--show", "2"])
    captured = capsys.readouterr()
    out = captured.out
    assert code == 0, out + captured.err
    assert "q01-isthmus_plan: 4 rows" in out and "q06-duckdb_plan: 1 rows" in out
    q1 = pq.read_table(tmp_path / "q01-isthmus_plan.parquet")
    assert compare_tables(q1, duckdb_oracle(_corpus_sql(plans[0])), ordered_by=[0, 1]).equal
    q6 = pq.read_table(tmp_path / "q06-duckdb_plan.parquet")
    assert compare_tables(q6, duckdb_oracle(_corpus_sql(plans[1]))).equal


def test_run_unsupported_function_is_exit_3_named(spark, tpch_dir, tmp_path, capsys):
    doc = json.loads((TPCH / "q06-isthmus_plan.json").read_text())
    for ext in doc["extensions"]:
        if ext["extensionFunction"]["name"].startswith("multiply"):
            ext["extensionFunction"]["name"] = "frobnicate:dec_dec"
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(doc))
    code = main(["run", str(path), "--tables", str(tpch_dir)])
    err = capsys.readouterr().err.strip()
    assert code == 3
    assert len(err.splitlines()) == 1 and "frobnicate" in err and "relations[0]" in err


def test_run_missing_table_is_exit_2(spark, tmp_path, capsys):
    # A name no other test can have put into the session catalog.
    path = tmp_path / "missing.json"
    path.write_text((TPCH / "q06-isthmus_plan.json").read_text().replace('"LINEITEM"', '"NO_SUCH_TABLE_Q6"'))
    code = main(["run", str(path), "--tables", str(tmp_path)])
    err = capsys.readouterr().err.strip()
    assert code == 2 and "NO_SUCH_TABLE_Q6" in err.upper() and len(err.splitlines()) == 1
