"""``substrait-opt run A B C``: every plan runs; each failure is one line naming its file; the last line
is ``N ok, M failed``; inputs of the same file name do not overwrite each other's result."""

from __future__ import annotations

import json
import shutil

import pyarrow.parquet as pq
import pytest

from optimizer.cli import main
from optimizer.cli.run import result_names
from optimizer.difftest.results import compare_tables
from workloads.corpus import corpus_root

TPCH = corpus_root() / "substrait_consumer/snapshots/producer/integration/tpch"
Q6_SQL = """select sum(l_extendedprice * l_discount) as revenue from lineitem
where l_shipdate >= date '1994-01-01' and l_shipdate < date '1995-01-01'
  and l_discount between 0.05 and 0.07 and l_quantity < 24"""
Q1_ROWS = 4


def test_result_names_tell_same_file_names_apart():
    assert result_names(["a/q1.json", "b/q1.json", "q2.json"]) == ["a-q1", "b-q1", "q2"]
    assert result_names(["x/a/q1.json", "y/a/q1.json"]) == ["x-a-q1", "y-a-q1"]
    assert result_names(["q1.json", "q1.json", "-", "-"]) == ["q1", "q1-2", "stdin", "stdin-2"]


@pytest.mark.spark
def test_run_many_reports_each_failure_and_runs_the_rest(spark, tpch_dir, duckdb_oracle, tmp_path, capsys):
    for folder in "abcd":
        (tmp_path / folder).mkdir()
    # Two real plans of the same file name (DuckDB's and Isthmus's Q6 and Q1), a bad one, an unsupported one.
    shutil.copy(TPCH / "q06-duckdb_plan.json", tmp_path / "a" / "q.json")
    shutil.copy(TPCH / "q01-isthmus_plan.json", tmp_path / "b" / "q.json")
    (tmp_path / "c" / "q.json").write_text('{"relations": [{"root": {"input": {"filter": {}}}}]')
    doc = json.loads((TPCH / "q06-isthmus_plan.json").read_text())
    for ext in doc["extensions"]:
        if ext["extensionFunction"]["name"].startswith("multiply"):
            ext["extensionFunction"]["name"] = "frobnicate:dec_dec"
    (tmp_path / "d" / "q.json").write_text(json.dumps(doc))
    inputs = [str(tmp_path / f / "q.json") for f in "cabd"]
    out = tmp_path / "out"
    code = main(["run", *inputs, "--tables", str(tpch_dir), "--out", str(out), "--show", "0"])
    captured = capsys.readouterr()
    errors = captured.err.strip().splitlines()
    assert code == 3, captured  # one plan failed to execute: the worst failure's code
    assert len(errors) == 2
    assert str(tmp_path / "c" / "q.json") in errors[0] and str(tmp_path / "d" / "q.json") in errors[1]
    assert "frobnicate" in errors[1]
    lines = captured.out.strip().splitlines()
    assert lines[-1] == "2 ok, 2 failed"
    assert sorted(p.name for p in out.iterdir()) == ["a-q.parquet", "b-q.parquet"]
    assert compare_tables(pq.read_table(out / "a-q.parquet"), duckdb_oracle(Q6_SQL)).equal
    assert pq.read_table(out / "b-q.parquet").num_rows == Q1_ROWS


def test_run_only_bad_input_is_exit_2_without_spark(tmp_path, capsys):
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    missing = tmp_path / "missing.json"
    code = main(["run", str(bad), str(missing)])
    captured = capsys.readouterr()
    assert code == 2
    errors = captured.err.strip().splitlines()
    assert len(errors) == 2 and str(bad) in errors[0] and str(missing) in errors[1]
    assert captured.out.strip().splitlines()[-1] == "0 ok, 2 failed"
