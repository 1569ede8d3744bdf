"""``run`` and ``diff --time`` on real Spark: warm times that say how they were taken (warm-up run, median
of ``--repeat``, interleaved A/B with Spark SQL on the plan's own SQL beside), and ``run --format
table|csv|json|parquet``."""

from __future__ import annotations

import csv
import io
import json
import re

import pyarrow.parquet as pq
import pytest

from optimizer.cli import main
from optimizer.plan_io import load_plan, save_plan

Q6 = """select sum(l_extendedprice * l_discount) as revenue from lineitem
where l_shipdate >= date '1994-01-01' and l_shipdate < date '1995-01-01'
  and l_discount between 0.05 and 0.07 and l_quantity < 24"""
NATIONS = "select n_nationkey, n_name, n_regionkey from nation where n_regionkey = 1 order by n_nationkey"


@pytest.fixture(scope="module")
def plans(tpch_tables, tmp_path_factory):
    """Q6 and a nation query as DataFusion plans, each with its SQL beside it (q6.json, q6.sql)."""
    from workloads.producers import datafusion_plan

    folder = tmp_path_factory.mktemp("timed")
    for name, sql in (("q6", Q6), ("nations", NATIONS)):
        save_plan(load_plan(datafusion_plan(sql, tpch_tables)), str(folder / f"{name}.json"))
        (folder / f"{name}.sql").write_text(sql)
    return folder


@pytest.mark.spark
def test_run_times_are_warm_medians(spark, session_args, tpch_dir, plans, capsys):
    argv = ["run", *session_args, str(plans / "nations.json"), str(plans / "q6.json"), "--tables", str(tpch_dir)]
    assert main([*argv, "--repeat", "3"]) == 0
    out = capsys.readouterr().out.splitlines()
    timed = [line for line in out if " rows in " in line]
    assert len(timed) == 2 and all(re.fullmatch(r"\w+: \d+ rows in [\d.]+ s \(warm, median of 3 runs\)", t)
                                   for t in timed), timed
    assert main(argv) == 0  # default: one timed run after the warm-up
    out = capsys.readouterr().out
    assert re.search(r"^nations: 5 rows in [\d.]+ s \(warm, 1 run\)$", out, re.M), out


@pytest.mark.spark
def test_run_formats(spark, session_args, tpch_dir, plans, tmp_path, capsys):
    base = ["run", *session_args, str(plans / "nations.json"), "--tables", str(tpch_dir)]
    assert main([*base, "--format", "csv"]) == 0
    captured = capsys.readouterr()
    rows = list(csv.DictReader(io.StringIO(captured.out)))
    assert [r["n_name"] for r in rows] == ["ARGENTINA", "BRAZIL", "CANADA", "PERU", "UNITED STATES"]
    # The rows are the whole of stdout: the tool's lines are on stderr.
    assert "nations: 5 rows in" in captured.err and "1 ok, 0 failed" in captured.err
    assert main([*base, "--format", "json"]) == 0
    captured = capsys.readouterr()
    data = json.loads(captured.out)
    assert data[0] == {"n_nationkey": 1, "n_name": "ARGENTINA", "n_regionkey": 1} and len(data) == 5
    q6 = ["run", *session_args, str(plans / "q6.json"), "--tables", str(tpch_dir), "--format", "json"]
    assert main(q6) == 0
    revenue = json.loads(capsys.readouterr().out)[0]["revenue"]
    assert isinstance(revenue, str) and float(revenue) > 0  # a decimal keeps every digit, as text
    out = tmp_path / "out"
    assert main([*base, "--format", "parquet", "--out", str(out)]) == 0
    assert pq.read_table(out / "nations.parquet").num_rows == 5
    assert main([*base, "--format", "csv", "--out", str(out)]) == 0
    assert (out / "nations.csv").read_text().splitlines()[0] == '"n_nationkey","n_name","n_regionkey"'
    assert "nations: 5 rows" in capsys.readouterr().err


@pytest.mark.parametrize("extra, message", [
    (["--format", "parquet"], "--format parquet writes files: give --out DIR"),
    (["--format", "csv", "{plan}"], "--format csv on stdout takes one plan"),
    (["--repeat", "0"], "expected 1 to 1000 runs"),
])
def test_run_format_refused_before_spark(extra, message, plans, tmp_path, capsys):
    inputs = [str(plans / "nations.json")] + [str(plans / "q6.json") for a in extra if a == "{plan}"]
    argv = ["run", *inputs, *[a for a in extra if a != "{plan}"], "--tables", str(tmp_path)]
    assert main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and message in err[0], err


@pytest.mark.spark
def test_diff_time_interleaved_with_spark_sql(spark, session_args, tpch_dir, plans, capsys):
    argv = ["diff", *session_args, str(plans / "q6.json"), "--tables", str(tpch_dir), "--no-spark-stats", "--time"]
    assert main(argv) == 0
    line = capsys.readouterr().out.splitlines()[0]
    m = re.fullmatch(r"q6: equal  \[original ([\d.]+) s, optimized ([\d.]+) s, optimized/original ([\d.]+), "
                     r"Spark SQL \(q6\.sql\) ([\d.]+) s; warm, median of 3 interleaved runs\]", line)
    assert m, line
    original, optimized, ratio = float(m.group(1)), float(m.group(2)), float(m.group(3))
    assert abs(ratio - optimized / original) < 0.02 + 0.01 * ratio
    # --sql names the SQL; --repeat 1 is one run each.
    assert main([*argv, "--repeat", "1", "--sql", str(plans / "q6.sql")]) == 0
    assert capsys.readouterr().out.splitlines()[0].endswith("s; warm, 1 run]")
    # Without --time the line says its times are single runs.
    assert main(argv[:-1]) == 0
    assert "--time for warm medians" in capsys.readouterr().out


@pytest.mark.parametrize("extra, message", [
    (["--sql", "{sql}"], "--sql is timed beside the plans: give --time too"),
    (["--repeat", "5"], "--repeat counts the timed runs of --time: give --time too"),
    (["--time", "--sql", "{sql}", "{plan}"], "--sql FILE is the SQL of one plan"),
    (["--time", "--sql", "{missing}"], "cannot read the SQL file"),
])
def test_diff_sql_refused_before_spark(extra, message, plans, tmp_path, capsys):
    subst = {"{sql}": str(plans / "q6.sql"), "{plan}": str(plans / "nations.json"),
             "{missing}": str(tmp_path / "none.sql")}
    inputs = [str(plans / "q6.json")] + [subst[a] for a in extra if a == "{plan}"]
    argv = ["diff", *inputs, *[subst.get(a, a) for a in extra if a != "{plan}"], "--tables", str(tmp_path),
            "--out", str(tmp_path / "d")]
    assert main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and message in err[0], err
