"""``substrait-opt plan``: SQL in, a plan out, written by DataFusion or DuckDB; and a SQL file given
where a plan is expected is named as SQL with the command that makes a plan of it.

The plans made are run on Spark (the session's backend) and compared with DuckDB's answer to the same SQL.
"""

from __future__ import annotations

import shutil
import subprocess
import sys

import pytest

from optimizer.cli import main
from optimizer.difftest.results import compare_tables
from optimizer.plan_io import load_plan
from workloads.tpch import TPCH_ORDER_BY, tpch_query

#: A subquery holding NULL (region 0's key as NULL): ``x NOT IN`` it is never true, ``x IN`` it NULL or true.
_WITH_NULL = "(select case when r_regionkey = 0 then null else r_regionkey end from region)"
Q3 = tpch_query(3)
Q6 = tpch_query(6)


def _one_error_line(capsys) -> str:
    err = capsys.readouterr().err
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    return lines[0]


@pytest.mark.spark
@pytest.mark.parametrize("producer", ["datafusion", "duckdb"])
@pytest.mark.parametrize("query", [3, 6])
def test_plan_runs_and_answers_as_the_sql(tmp_path, tpch_dir, duckdb_oracle, backend, producer, query):
    sql = tmp_path / f"q{query}.sql"
    sql.write_text(tpch_query(query))
    out = tmp_path / f"q{query}.json"
    assert main(["plan", str(sql), "--tables", str(tpch_dir), "--producer", producer, "-o", str(out)]) == 0
    plan = load_plan(out)
    assert plan.version.producer == "substrait-optimizer"  # the tool's reading: read back as it is
    got = backend.execute(plan)
    verdict = compare_tables(got, duckdb_oracle(tpch_query(query)), ordered_by=TPCH_ORDER_BY[query])
    assert verdict.equal, verdict.reason


@pytest.mark.spark
@pytest.mark.parametrize("sql", [
    "select count(*) as c from nation where n_regionkey not in "
    "(select case when r_regionkey = 0 then null else r_regionkey end from region)",
    "select n_name from nation left join region on n_regionkey = r_regionkey and r_regionkey > 2 "
    "where r_regionkey not in (select r_regionkey from region where r_regionkey = 4)",
    f"select n_name from nation where n_regionkey in {_WITH_NULL} or n_nationkey = 3",
    f"select n_name from nation where n_nationkey > 3 and n_regionkey not in {_WITH_NULL}",
    "select n_name from nation where not exists (select 1 from region where r_regionkey = n_regionkey "
    "and r_regionkey > 2) or n_nationkey = 3",
])
def test_datafusion_not_in_keeps_its_nulls(tmp_path, tpch_dir, duckdb_oracle, backend, sql):
    """DataFusion's optimizer makes NOT IN (subquery) a null-aware anti join, which its producer writes
    as a plain LEFT_ANTI join (a NULL in the subquery then rejected no row: 25 for 0); `plan` writes the
    anti join NOT IN means. An IN in a WHERE's AND and OR (where NULL drops the row as false does) and
    NOT EXISTS under OR (a mark with no NULL) are written as DataFusion writes them, and mean the SQL."""
    source = tmp_path / "q.sql"
    source.write_text(sql)
    out = tmp_path / "q.binpb"
    assert main(["plan", str(source), "--tables", str(tpch_dir), "-o", str(out)]) == 0
    verdict = compare_tables(backend.execute(load_plan(out)), duckdb_oracle(sql))
    assert verdict.equal, verdict.reason


def test_plan_formats_stdout_and_stdin(tmp_path, tpch_dir, capsys, monkeypatch):
    import io
    import json

    assert main(["plan", "-", "--tables", str(tpch_dir)]) == 0 if _stdin(monkeypatch, Q6) else False
    doc = json.loads(capsys.readouterr().out)  # stdout: JSON
    assert doc["relations"][0]["root"]["names"] == ["revenue"]
    sql = tmp_path / "q6.sql"
    sql.write_text(Q6)
    binary = tmp_path / "q6.plan"
    assert main(["plan", str(sql), "--tables", str(tpch_dir), "--format", "binpb", "-o", str(binary)]) == 0
    data = binary.read_bytes()
    assert not data.lstrip().startswith(b"{")
    assert load_plan(io.BytesIO(data)).relations[0].root.names == ["revenue"]


def _stdin(monkeypatch, text: str) -> bool:
    import io

    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(text.encode())))
    return True


@pytest.mark.spark
def test_tables_as_folders(tmp_path, tpch_dir, duckdb_oracle, spark):
    """DIR/<name>/ (a folder of Parquet files) is a table for both producers."""
    from optimizer.spark import SparkBackend

    tables = tmp_path / "tables"
    (tables / "lineitem").mkdir(parents=True)
    shutil.copy(tpch_dir / "lineitem.parquet", tables / "lineitem" / "part-0.parquet")
    sql = tmp_path / "q6.sql"
    sql.write_text(Q6)
    for producer in ("datafusion", "duckdb"):
        out = tmp_path / f"{producer}.binpb"
        assert main(["plan", str(sql), "--tables", str(tables), "--producer", producer, "-o", str(out)]) == 0
        got = SparkBackend(spark, tables=tables).execute(load_plan(out))
        assert compare_tables(got, duckdb_oracle(Q6)).equal, producer


@pytest.mark.parametrize("producer, says", [
    ("datafusion", "datafusion cannot plan this SQL: Schema error: No field named nope"),
    ("duckdb", 'duckdb cannot plan this SQL: Binder Error: Referenced column "nope" not found'),
])
def test_sql_the_producer_cannot_plan_is_exit_2_one_line(tmp_path, tpch_dir, capsys, producer, says):
    sql = tmp_path / "bad.sql"
    sql.write_text("select nope\nfrom lineitem")
    assert main(["plan", str(sql), "--tables", str(tpch_dir), "--producer", producer]) == 2
    line = _one_error_line(capsys)
    assert line.startswith(f"substrait-opt: error: {sql}: {says}"), line


def test_duckdb_refuses_a_correlated_subquery(tmp_path, tpch_dir, capsys):
    sql = tmp_path / "q17.sql"
    sql.write_text(tpch_query(17))
    assert main(["plan", str(sql), "--tables", str(tpch_dir), "--producer", "duckdb"]) == 2
    assert "duckdb cannot plan this SQL" in _one_error_line(capsys)


@pytest.mark.parametrize("where, says", [
    ("o_comment not like '%special%requests%'", "NOT LIKE as not_equal"),
    ("o_comment similar to '.*special.*'", "SIMILAR TO"),
])
def test_duckdb_refuses_what_it_would_write_as_another_query(tmp_path, tpch_dir, capsys, where, says):
    """DuckDB 1.1.3 writes NOT LIKE as not_equal, leaves an aggregate's FILTER out, writes SIMILAR TO as a
    range its own consumer answers otherwise, UNION as UNION ALL and INTERSECT ALL as INTERSECT: `plan`
    refuses the SQL (exit 2, naming it) rather than hand out a plan of another query. The written-right
    forms pass."""
    from optimizer.load.producers import duckdb_plan

    cases = [(f"select count(*) as c from orders where {where}", says),
             ("select count(*) filter (where o_orderstatus = 'F') as c from orders", "an aggregate's FILTER (WHERE ...)"),
             ("select o_orderstatus from orders union select o_orderstatus from orders", "UNION as UNION ALL"),
             ("select o_orderstatus from orders intersect all select o_orderstatus from orders",
              "INTERSECT ALL as INTERSECT")]
    for text, words in cases:
        sql = tmp_path / "q.sql"
        sql.write_text(text)
        assert main(["plan", str(sql), "--tables", str(tpch_dir), "--producer", "duckdb"]) == 2
        assert f"duckdb 1.1.3 writes {words}" in _one_error_line(capsys)
        if words not in ("SIMILAR TO", "INTERSECT ALL as INTERSECT"):  # which DataFusion 55 cannot plan
            assert main(["plan", str(sql), "--tables", str(tpch_dir)]) == 0
        capsys.readouterr()
    # the refused forms are written as another query by DuckDB itself (the evidence, kept live)
    filtered = load_plan(duckdb_plan(cases[1][0], {"orders": str(tpch_dir / "orders.parquet")}))
    assert not any(m.HasField("filter") for r in [filtered.relations[0].root.input.project.input]
                   for m in r.aggregate.measures)
    sql.write_text("select count(*) as c from orders where not (o_comment like '%special%requests%')")
    assert main(["plan", str(sql), "--tables", str(tpch_dir), "--producer", "duckdb"]) == 0


@pytest.mark.parametrize("args, says", [
    (["plan", "{sql}", "--tables", "{tmp}/nowhere"], "{tmp}/nowhere: not a directory"),
    (["plan", "{sql}", "--tables", "{tmp}/empty"], "no Parquet tables"),
    (["plan", "{tmp}/missing.sql", "--tables", "{tables}"], "{tmp}/missing.sql: no such file"),
    (["plan", "{tmp}/blank.sql", "--tables", "{tables}"], "empty input: no SQL"),
    (["plan", "{tmp}/binary.sql", "--tables", "{tables}"], "the SQL is not UTF-8 text"),
    (["plan", "{sql}", "--tables", "{tables}", "--producer", "spark"], "invalid choice: 'spark'"),
    (["plan", "{sql}"], "the following arguments are required: --tables"),
])
def test_bad_input_is_exit_2_one_line(tmp_path, tpch_dir, capsys, args, says):
    (tmp_path / "empty").mkdir()
    (tmp_path / "blank.sql").write_text("  \n")
    (tmp_path / "binary.sql").write_bytes(b"\xff\xfe\x00select")
    sql = tmp_path / "q6.sql"
    sql.write_text(Q6)
    fill = {"sql": str(sql), "tmp": str(tmp_path), "tables": str(tpch_dir)}
    assert main([a.format(**fill) for a in args]) == 2
    assert says.format(**fill) in _one_error_line(capsys)


def test_a_missing_producer_package_names_the_extra(tmp_path, tpch_dir):
    """In a process where the package cannot be imported (as in an install without the extra)."""
    sql = tmp_path / "q6.sql"
    sql.write_text(Q6)
    for producer, module in (("datafusion", "datafusion"), ("duckdb", "duckdb_extension_substrait")):
        code = (f"import sys; sys.modules[{module!r}] = None\n"
                "from optimizer.cli import main\n"
                f"sys.exit(main(['plan', {str(sql)!r}, '--tables', {str(tpch_dir)!r}, '--producer', {producer!r}]))")
        done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
        assert done.returncode == 3, done.stderr
        assert done.stderr.splitlines() == [
            f"substrait-opt: error: the {producer} producer needs the '{module}' package: "
            f"pip install 'substrait-optimizer[{producer}]'"]


# ------------------------------------------------------------------------- SQL where a plan is expected


@pytest.mark.parametrize("command", ["explain", "convert", "optimize"])
def test_sql_given_as_a_plan_names_the_plan_command(tmp_path, capsys, command):
    sql = tmp_path / "q3.sql"
    sql.write_text("-- TPC-H Q3\n" + Q3)
    assert main([command, str(sql)]) == 2
    assert _one_error_line(capsys) == (
        f"substrait-opt: error: {sql} looks like SQL, not a Substrait plan: make one with "
        f"'substrait-opt plan {sql} --tables DIR -o q3.binpb'")


def test_sql_on_stdin_and_other_bytes(tmp_path, capsys, monkeypatch):
    _stdin(monkeypatch, "WITH x AS (SELECT 1) SELECT * FROM x")
    assert main(["explain", "-"]) == 2
    assert "<stdin> looks like SQL, not a Substrait plan: make one with 'substrait-opt plan - --tables DIR" \
        in _one_error_line(capsys)
    junk = tmp_path / "junk.binpb"
    junk.write_bytes(b"\x1b\x00\x00selection")  # neither a plan nor SQL
    assert main(["explain", str(junk)]) == 2
    line = _one_error_line(capsys)
    assert "not a Substrait plan" in line and "looks like SQL" not in line


def test_output_name_and_format_agree(tmp_path, tpch_dir, capsys):
    """As for convert and optimize: a name saying another format than --format is exit 2, before any work."""
    sql = tmp_path / "q6.sql"
    sql.write_text(Q6)
    assert main(["plan", str(sql), "--tables", str(tpch_dir), "-o", str(tmp_path / "q6.json"), "--format", "binpb"]) == 2
    assert "the file name says json but --format is binpb" in _one_error_line(capsys)
    assert main(["plan", str(sql), "--tables", str(tpch_dir), "-o", str(tmp_path / "q6.txt")]) == 2
    assert "cannot be read back as a plan" in _one_error_line(capsys)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["q6.sql"]  # nothing written


@pytest.mark.parametrize("text, words", [
    ("select n_regionkey from nation except all select r_regionkey from region", "EXCEPT ALL as an anti join"),
    ("select n_regionkey from nation intersect all select r_regionkey from region", "INTERSECT ALL as a semi join"),
    (f"select n_name from nation where n_regionkey not in {_WITH_NULL} or n_nationkey = 3",
     "x IN (subquery) under NOT, or outside a WHERE's AND and OR, as a mark join"),
    (f"select n_name from nation where not (n_regionkey in {_WITH_NULL} and n_nationkey > 0)",
     "x IN (subquery) under NOT, or outside a WHERE's AND and OR, as a mark join"),
])
def test_datafusion_refuses_what_it_would_write_as_another_query(tmp_path, tpch_dir, capsys, text, words):
    """DataFusion 55 answers these as another query, and its plans say so: EXCEPT ALL and INTERSECT ALL as
    an anti and a semi join (every copy of a row dropped or kept), an IN under NOT as a mark join that
    reads NULL as false. `plan` refuses the SQL (exit 2, naming it); DataFusion's own answer differs from
    DuckDB's (the evidence, kept live)."""
    import duckdb

    from optimizer.load.producers import datafusion_context

    sql = tmp_path / "q.sql"
    sql.write_text(text)
    assert main(["plan", str(sql), "--tables", str(tpch_dir)]) == 2
    assert f"datafusion 55 writes {words}" in _one_error_line(capsys)
    tables = {t: str(tpch_dir / f"{t}.parquet") for t in ("nation", "region")}
    theirs = sorted(datafusion_context(tables).sql(text).to_arrow_table().to_pylist(), key=str)
    con = duckdb.connect()
    for name, path in tables.items():
        con.execute(f"create view {name} as select * from read_parquet('{path}')")
    assert theirs != sorted(con.execute(text).arrow().to_pylist(), key=str)
