"""Untrusted plans (issue 14): no variable substitution, no file access beyond the tables, no crash.

See docs/security.md. Each test names the item of the issue it covers.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pyarrow as pa
import pyarrow.parquet as pq

from optimizer.cli import main
from optimizer.cli.interrupt import child_processes
from optimizer.plan_io import load_plan
from testing.hostile import nested_filters

SECRET = "${env:HOME} ${system:java.home} ${sparkconf:spark.app.name} $x \\ ' ${"
_REQ = {"nullability": "NULLABILITY_REQUIRED"}


def _sel(field: int) -> dict:
    return {"selection": {"directReference": {"structField": {"field": field}}, "rootReference": {}}}


def _vt_plan(value: str, names: list[str]) -> dict:
    """A VirtualTable of one string row, then the column and a string literal, under ``names``."""
    read = {"read": {"baseSchema": {"names": [names[0]], "struct": {"types": [{"string": _REQ}]}},
                     "virtualTable": {"values": [{"fields": [{"string": value}]}]}}}
    project = {"project": {"common": {"emit": {"outputMapping": [1, 2]}}, "input": read,
                           "expressions": [_sel(0), {"literal": {"string": value}}]}}
    return {"relations": [{"root": {"input": project, "names": names}}]}


# -- 1. Spark variable substitution -----------------------------------------------------------


def test_item1_literals_and_names_are_not_substituted(spark, tmp_path):
    from optimizer.spark import SparkBackend

    names = ["${env:HOME} col", "${system:java.home}"]
    table = SparkBackend(spark).execute(load_plan(json.dumps(_vt_plan(SECRET, names))))
    assert table.column_names == names
    assert table.to_pylist() == [{names[0]: SECRET, names[1]: SECRET}]

    # A table whose column is called ${env:HOME}: found under its own name, not the home directory.
    pq.write_table(pa.table({"${env:HOME}": [1, 2]}), tmp_path / "t.parquet")
    read = {"read": {"namedTable": {"names": ["t"]},
                     "baseSchema": {"names": ["${env:HOME}"], "struct": {"types": [{"i64": _REQ}]}}}}
    plan = {"relations": [{"root": {"input": read, "names": ["${sparkconf:spark.master}"]}}]}
    table = SparkBackend(spark, tables=str(tmp_path)).execute(load_plan(json.dumps(plan)))
    assert table.column_names == ["${sparkconf:spark.master}"]
    assert table.column(0).to_pylist() == [1, 2]


# -- 3. Depth: no input crashes the process ------------------------------------------------------


def _cli(*args: str, stdin: bytes | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "optimizer", *args], input=stdin, capture_output=True,
                          timeout=120)


def test_item3_deep_plans_exit_2_and_real_deep_plans_load(tmp_path):
    from datafusion import SessionContext
    from datafusion.substrait import Producer

    from optimizer.plan_io import MAX_PLAN_DEPTH

    deep = tmp_path / "deep.binpb"
    deep.write_bytes(nested_filters(10_000))
    proc = _cli("explain", str(deep))
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.decode().strip().splitlines()
    assert lines == [f"substrait-opt: error: {deep}: plan nested too deeply (more than {MAX_PLAN_DEPTH} messages)"]
    deep_json = tmp_path / "deep.json"
    nested = '{"filter": {"condition": {"literal": {"boolean": true}}, "input": ' * 10_000
    deep_json.write_text('{"relations": [{"root": {"input": ' + nested + '{"read": {"virtualTable": {}}}'
                         + "}}" * 10_000 + "}}]}")
    proc = _cli("optimize", str(deep_json))
    assert proc.returncode == 2 and len(proc.stderr.decode().strip().splitlines()) == 1, proc.stderr

    # A left-deep tree of 100 joins written by DataFusion (about 200 messages deep) loads and optimizes.
    ctx = SessionContext()
    for i in range(101):
        ctx.register_record_batches(f"t{i}", [[pa.record_batch({f"k{i}": [1, 2], f"v{i}": [i, i]})]])
    sql = "SELECT t0.v0, t100.v100 FROM t0 " + " ".join(f"JOIN t{i} ON t{i - 1}.k{i - 1} = t{i}.k{i}"
                                                          for i in range(1, 101))
    joins = tmp_path / "joins.binpb"
    joins.write_bytes(Producer.to_substrait_plan(ctx.sql(sql).logical_plan(), ctx).encode())
    assert main(["optimize", str(joins), "-o", str(tmp_path / "out.binpb")]) == 0
    assert len(load_plan(str(tmp_path / "out.binpb")).relations) == 1


# -- 2. Files a plan names lie under --tables ------------------------------------------------------


def _files_plan(**item) -> str:
    read = {"read": {"baseSchema": {"names": ["a"], "struct": {"types": [{"i64": _REQ}]}},
                     "localFiles": {"items": [{**item, "parquet": {}}]}}}
    return json.dumps({"relations": [{"root": {"input": read, "names": ["a"]}}]})


def test_item2_files_are_confined_to_the_tables(spark, tmp_path, capsys):
    import time

    tables = tmp_path / "tables"
    tables.mkdir()
    pq.write_table(pa.table({"a": list(range(3))}), tables / "t.parquet")
    pq.write_table(pa.table({"a": list(range(12345))}), tmp_path / "secret.parquet")
    (tables / "link.parquet").symlink_to(tmp_path / "secret.parquet")
    outside = [
        {"uriFile": str(tables / ".." / "secret.parquet")},
        {"uriFile": f"file://{tmp_path}/secret.parquet"},
        {"uriFile": str(tables / "link.parquet")},
        {"uriPathGlob": str(tmp_path / "*.parquet")},
        {"uriFolder": "/"},
    ]
    for item in outside:
        plan = tmp_path / "p.json"
        plan.write_text(_files_plan(**item))
        capsys.readouterr()
        assert main(["run", str(plan), "--tables", str(tables)]) == 2, item
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and "is outside the table roots" in err[0] and "--allow-any-path" in err[0], err
        # Statistics: the footer of a file outside the roots is never read (no 12345 rows shown).
        assert main(["explain", str(plan), "--tables", str(tables), "--format", "json"]) == 0
        assert "12345" not in capsys.readouterr().out
    # optimize without --tables on uri_folder "/" does not walk the filesystem.
    plan.write_text(_files_plan(uriFolder="/"))
    start = time.perf_counter()
    assert main(["optimize", str(plan), "-o", str(tmp_path / "o.json")]) == 0
    assert time.perf_counter() - start < 10
    # Inside the roots, and anything with --allow-any-path.
    plan.write_text(_files_plan(uriFile=str(tables / "t.parquet")))
    assert main(["run", str(plan), "--tables", str(tables)]) == 0
    plan.write_text(_files_plan(uriFile=str(tables / ".." / "secret.parquet")))
    capsys.readouterr()
    assert main(["run", str(plan), "--tables", str(tables), "--allow-any-path"]) == 0
    assert "12345 rows" in capsys.readouterr().out


# -- 4. Atomic writes ----------------------------------------------------------------------------


def test_item4_a_failed_write_leaves_the_old_file(tmp_path):

    from workloads.corpus import corpus_root

    plan = tmp_path / "q3.json"
    original = (corpus_root() / "substrait_consumer/snapshots/producer/integration/tpch/q03-isthmus_plan.json"
                ).read_bytes()
    plan.write_bytes(original)
    limit = len(original)  # the optimized JSON is longer than the input: its write hits the limit

    # The limit is set by the child itself: a preexec_fn runs in the forked copy of this process, where
    # the fork handlers of a library another test loaded (gRPC, by a Spark Connect test) may write to
    # the child's stderr before it runs the CLI.
    launcher = (f"import resource, runpy, sys; resource.setrlimit(resource.RLIMIT_FSIZE, ({limit}, {limit})); "
                "sys.argv = ['substrait-opt', *sys.argv[1:]]; runpy.run_module('optimizer', run_name='__main__')")
    proc = subprocess.run([sys.executable, "-c", launcher, "optimize", str(plan), "-o", str(plan)],
                          capture_output=True, timeout=120)
    err = proc.stderr.decode().strip().splitlines()
    assert proc.returncode == 3 and len(err) == 1 and "cannot write" in err[0] and str(plan) in err[0], err
    assert plan.read_bytes() == original
    assert sorted(p.name for p in tmp_path.iterdir()) == ["q3.json"]  # no temporary file left


# -- 5. Costs saturate -----------------------------------------------------------------------------


def _with_hints(rows: float) -> dict:
    from workloads.corpus import corpus_root

    doc = json.loads((corpus_root() / "substrait_consumer/snapshots/producer/integration/tpch/"
                      "q03-isthmus_plan.json").read_text())
    stack = [doc]
    while stack:
        x = stack.pop()
        if isinstance(x, dict):
            if isinstance(x.get("read"), dict):
                x["read"].setdefault("common", {})["hint"] = {"stats": {"rowCount": rows, "recordSize": 1e300}}
            stack.extend(x.values())
        elif isinstance(x, list):
            stack.extend(x)
    return doc


def test_item5_huge_hints_and_statistics_saturate(tmp_path, capsys):
    for rows in (1e200, 1.7e308):
        plan = tmp_path / "p.json"
        plan.write_text(json.dumps(_with_hints(rows)))
        assert main(["optimize", str(plan), "-o", str(tmp_path / "o.json")]) == 0, capsys.readouterr().err
        assert load_plan(str(tmp_path / "o.json")).relations
    stats = tmp_path / "s.json"
    stats.write_text(json.dumps({"tables": {t: {"row_count": 1e308, "size_bytes": 1e308}
                                            for t in ("customer", "orders", "lineitem")}}))
    plan.write_text(json.dumps(_with_hints(0)))
    assert main(["optimize", str(plan), "--stats", str(stats), "-o", str(tmp_path / "o.json")]) == 0


# -- 8. Usage mistakes are exit 2 with one line ---------------------------------------------------


def test_item8_usage_mistakes_are_exit_2(tmp_path, capsys):
    plan = tmp_path / "p.json"
    plan.write_text(json.dumps(_vt_plan("x", ["a", "b"])))
    (tmp_path / "file").write_text("x")
    stats = tmp_path / "s.json"
    cases = [
        (["convert", str(plan), "-o", str(tmp_path / "missing" / "o.json")], "no such directory"),
        (["convert", str(plan), "-o", str(tmp_path)], "is a directory"),
        (["optimize", str(plan), "-o", str(tmp_path)], "is a directory"),
        (["run", str(plan), "--out", str(tmp_path / "file")], "--out is not a directory"),
        (["convert", str(tmp_path / "a\x00b.json")], "NUL"),
        (["convert", str(plan), "-o", str(tmp_path / "o\x00.json")], "NUL"),
    ]
    for args, words in cases:
        capsys.readouterr()
        assert main(args) == 2, args
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and words in err[0] and "internal error" not in err[0], (args, err)
    for content, words in ((b"\xff\xfe{", "not UTF-8"), (b'{"tables": {"t": {"row_count": ' + b"9" * 5000 + b"}}}",
                                                          "not usable JSON")):
        stats.write_bytes(content)
        capsys.readouterr()
        assert main(["optimize", str(plan), "--stats", str(stats)]) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and words in err[0], err


# -- 9. Statistics are validated --------------------------------------------------------------------


def test_item9_bad_statistics_are_refused(tmp_path, capsys):
    from optimizer.cost.providers import read_hint
    from optimizer.cost.statistics import TableStatistics
    from substrait.proto import ReadRel

    plan = tmp_path / "p.json"
    plan.write_text(json.dumps(_with_hints(0)))
    stats = tmp_path / "s.json"
    bad = [
        ({"row_count": -5}, "non-negative"),
        ({"row_count": True}, "must be a number"),
        ({"row_count": 10, "columns": {"c_custkey": {"avg_len": -8}}}, "non-negative"),
        ({"row_count": 10, "columns": {"c_custkey": {"data_type": "bigint", "min": "a"}}}, "not a number"),
        ({"row_count": 10, "columns": {"c_name": {"data_type": "string", "max": 5}}}, "not a string"),
        ({"row_count": 10, "columns": {"c_custkey": {"ndv": "many"}}}, "must be a number"),
    ]
    for entry, words in bad:
        stats.write_text(json.dumps({"tables": {"customer": entry}}))
        capsys.readouterr()
        assert main(["optimize", str(plan), "--stats", str(stats)]) == 2, entry
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and words in err[0] and "tables.customer" in err[0], err
    # A table the plan does not read: a warning, and the plan still optimizes.
    stats.write_text(json.dumps({"tables": {"custmer": {"row_count": 10}}}))
    capsys.readouterr()
    assert main(["optimize", str(plan), "--stats", str(stats), "-o", str(tmp_path / "o.json")]) == 0
    assert "custmer" in capsys.readouterr().err
    # Hints: negative, NaN and infinite row counts never make a negative or NaN estimate.
    read = ReadRel()
    for rows in (-1.0, float("nan")):
        read.common.hint.stats.row_count = rows
        read.common.hint.stats.record_size = 8
        assert read_hint(read) is None
    read.common.hint.stats.row_count = float("inf")
    assert read_hint(read)[0] == 1e18
    assert TableStatistics.from_json({"row_count": 1e308}).row_count == 1e18


# -- 10. JSON output, and a path that exists is a path ---------------------------------------------


def test_item10_explain_json_is_json_and_paths_are_paths(tmp_path, capsys):
    plan = tmp_path / "{a}.json"
    plan.write_text(json.dumps(_with_hints(1.7e308)))
    capsys.readouterr()
    assert main(["explain", str(plan), "--format", "json"]) == 0
    out = capsys.readouterr().out

    def refuse(constant):
        raise AssertionError(f"not JSON: {constant}")

    records = json.loads(out, parse_constant=refuse)
    assert records
    # A file whose name starts with "{" is read from disk, not parsed as JSON text.
    brace = tmp_path / "{b"
    brace.write_text(json.dumps(_vt_plan("x", ["a", "b"])))
    import os

    cwd = os.getcwd()
    os.chdir(tmp_path)
    try:
        assert load_plan("{b").relations
    finally:
        os.chdir(cwd)


# -- 7. Fetch beyond Spark's int --------------------------------------------------------------------


def test_item7_fetch_above_int_max(spark, tmp_path, capsys):
    from optimizer.spark import SparkBackend

    def plan(**fetch) -> dict:
        read = {"read": {"baseSchema": {"names": ["a"], "struct": {"types": [{"i64": _REQ}]}},
                         "virtualTable": {"values": [{"fields": [{"i64": str(i)}]} for i in range(3)]}}}
        return {"relations": [{"root": {"input": {"fetch": {"input": read, **fetch}}, "names": ["a"]}}]}

    big = {"literal": {"i64": str(3 * 10**9)}}
    table = SparkBackend(spark).execute(load_plan(json.dumps(plan(countExpr=big))))
    assert sorted(table.column(0).to_pylist()) == [0, 1, 2]
    path = tmp_path / "p.json"
    path.write_text(json.dumps(plan(offsetExpr=big, countExpr={"literal": {"i64": "1"}})))
    capsys.readouterr()
    assert main(["run", str(path)]) == 3
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "above Spark's largest OFFSET" in err[0] and "offset_expr" in err[0], err


# -- 6. Exponential DAGs and signals ---------------------------------------------------------------


def test_item6_exponential_dag_is_refused(tmp_path, capsys):
    from optimizer.plan_io import MAX_EXPANDED_RELATIONS

    def doubling(levels: int) -> str:
        schema = {"names": ["a"], "struct": {"types": [{"i64": _REQ}]}}
        rels = [{"rel": {"read": {"baseSchema": schema, "virtualTable": {"values": [{"fields": [{"i64": "1"}]}]}}}}]
        for i in range(1, levels + 1):
            refs = [{"reference": {"subtreeOrdinal": i - 1}}] * 2
            rels.append({"rel": {"set": {"op": "SET_OP_UNION_ALL", "inputs": refs}}})
        rels.append({"root": {"input": {"reference": {"subtreeOrdinal": levels}}, "names": ["a"]}})
        return json.dumps({"relations": rels})

    plan = tmp_path / "p.json"
    plan.write_text(doubling(20))  # 2^21 relations expanded
    for command in (["run", str(plan)], ["optimize", str(plan)], ["explain", str(plan)]):
        capsys.readouterr()
        assert main(command) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and f"expands to more than {MAX_EXPANDED_RELATIONS} relations" in err[0], err
    plan.write_text(doubling(10))  # 2^11: shared subtrees of a fair size still load
    assert main(["explain", str(plan)]) == 0


def _task_threads(pids: list[int]) -> list[str]:
    """The names of the threads of ``pids`` that run Spark tasks (Linux truncates a name to 15 bytes)."""
    import glob

    names = []
    for pid in pids:
        for comm in glob.glob(f"/proc/{pid}/task/*/comm"):
            try:
                with open(comm) as f:
                    name = f.read().strip()
            except OSError:  # the thread ended
                continue
            if name.startswith("Executor task"):
                names.append(name)
    return names


def test_item6_sigterm_stops_run_and_its_jvm(tpch_dir, tmp_path):
    import os
    import signal
    import time

    from datafusion import SessionContext
    from datafusion.substrait import Producer

    ctx = SessionContext()
    ctx.register_parquet("lineitem", str(tpch_dir / "lineitem.parquet"))
    # 3.6 billion pairs, no equi-key: minutes of work.
    sql = ("SELECT count(*) AS n FROM lineitem a JOIN lineitem b "
           "ON a.l_orderkey + b.l_orderkey = -1 OR a.l_partkey = -b.l_partkey")
    plan = tmp_path / "slow.binpb"
    plan.write_bytes(Producer.to_substrait_plan(ctx.sql(sql).logical_plan(), ctx).encode())
    proc = subprocess.Popen([sys.executable, "-m", "optimizer", "run", str(plan), "--tables", str(tpch_dir)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    start = time.monotonic()
    while not child_processes(proc.pid) and time.monotonic() - start < 60:
        time.sleep(0.2)
    jvms = child_processes(proc.pid)
    assert jvms, "Spark's JVM did not start"
    # The join is running once the JVM has a task thread ("Executor task launch worker ...": the only
    # job of the run is the join's); then the signal comes while Spark works, not while it starts.
    while not _task_threads(jvms) and time.monotonic() - start < 90:
        time.sleep(0.2)
    assert _task_threads(jvms), "no Spark task ran within 90 s"
    time.sleep(1)
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 143, err.decode()[-2000:]
    # Spark's JVM may still log while it shuts down: our line is there once, and no traceback.
    lines = err.decode().strip().splitlines()
    assert lines.count("substrait-opt: interrupted by SIGTERM") == 1, lines[-20:]
    assert "Traceback" not in err.decode()
    deadline = time.monotonic() + 20
    while any(os.path.exists(f"/proc/{p}") for p in jvms) and time.monotonic() < deadline:
        time.sleep(0.5)
    assert not [p for p in jvms if os.path.exists(f"/proc/{p}")], "orphaned JVM"


# -- The hostile fuzz profile (a small run; make fuzz-hostile runs 2,000) ------------------------------


def test_hostile_profile_small():
    from testing.hostile import fuzz, summary

    outcomes = fuzz(inputs=100, seed=7, subprocesses=4)
    failures = [o for o in outcomes if o.verdict.startswith("FAIL")]
    assert not failures, summary(outcomes, 0)
    assert {o.kind for o in outcomes} >= {"deep", "literal", "names", "bytes", "json", "hints", "dag", "files",
                                          "casts", "quiet"}
    assert any(o.kind == "quiet" and o.command == "subprocess run" for o in outcomes)
    assert any(o.verdict == "answer" for o in outcomes) and any(o.verdict == "exit 2" for o in outcomes)


def test_item3_old_fields_are_depth_checked_too():
    """An old-encoding field holding an Expression is parsed by the upgrader: its depth is checked first
    (in a subprocess: before the check, 20,000 nested casts segfaulted)."""
    code = """
from substrait.proto import Expression
from optimizer.errors import PlanError
from optimizer.plan_io import deep_messages
from optimizer.load.upgrade import _Context, _parse_upgraded
e = Expression(); x = e
for _ in range(20000):
    x = x.cast.input
x.literal.boolean = True
with deep_messages():
    try:
        _parse_upgraded(Expression, e.SerializeToString(), "p", _Context())
    except PlanError as exc:
        print(exc)
"""
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.decode().strip() == "p: plan nested too deeply (more than 1000 messages)"


def test_statistics_open_no_footer_a_link_in_the_tables_folder_leads_out_to(tmp_path, capsys):
    """A table of the --tables folder that is a link out of it (``lnk -> ../outside``), or a folder holding
    one, gives no statistics: ``explain`` printed the outside file's row count (12345), where ``run``
    refuses to read it. docs/security.md: statistics obey the table roots."""

    import pyarrow as pa
    import pyarrow.parquet as pq

    from optimizer.cli import main
    from optimizer.spark.statistics import default_statistics
    from testing.builder import Builder, read

    tables, outside = tmp_path / "tables", tmp_path / "outside"
    (tables / "sub").mkdir(parents=True)
    outside.mkdir()
    pq.write_table(pa.table({"a": pa.array(range(3), pa.int64())}), tables / "t.parquet")
    pq.write_table(pa.table({"a": pa.array(range(3), pa.int64())}), tables / "sub" / "t.parquet")
    pq.write_table(pa.table({"a": pa.array(range(12345), pa.int64())}), outside / "secret.parquet")
    (tables / "lnk").symlink_to("../outside")
    (tables / "sub" / "s.parquet").symlink_to("../../outside/secret.parquet")
    stats = default_statistics(tables=tables)
    assert stats.table("t").row_count == 3
    assert stats.table("lnk") is None and stats.table("sub") is None
    for name in ("lnk", "sub"):
        plan = tmp_path / f"{name}.binpb"
        plan.write_bytes(Builder().plan(read(name, [("a", "i64")]), ["a"]).SerializeToString())
        capsys.readouterr()
        assert main(["explain", str(plan), "--tables", str(tables), "--no-spark-stats", "--format", "json"]) == 0
        assert "12345" not in capsys.readouterr().out


def test_a_plans_strings_in_an_error_are_inert(tmp_path, tpch_dir, capsys):
    """A table named with a carriage return, ESC and a line separator: the error is one line by any reader's
    splitting (\\r and U+2028 split it before) and holds no escape sequence a terminal would act on."""
    from optimizer.cli import main
    from testing.builder import Builder, read

    plan = tmp_path / "p.binpb"
    plan.write_bytes(Builder().plan(read("nat\rion\x1b[31mRED\u2028", [("a", "i64")]), ["a"]).SerializeToString())
    capsys.readouterr()
    assert main(["run", str(plan), "--tables", str(tpch_dir), "--engine", "duckdb"]) == 2
    err = capsys.readouterr().err
    assert len(err.splitlines()) == 1 and "\x1b" not in err, repr(err)
    assert "table 'nat\\rion\\x1b[31mRED\\u2028' not found" in err, err


def test_explain_writes_a_plans_strings_inert(capsys):
    """explain's tree holds a plan's names as written, but ESC and line breaks as their escapes: the tree
    keeps its lines and nothing reaches the terminal as a control sequence."""
    from optimizer.explain import explain_plan
    from testing.builder import Builder, read

    text = explain_plan(Builder().plan(read("a\x1b[31mRED\nb", [("x", "i64")]), ["x"]))
    assert "\x1b" not in text and len(text.splitlines()) == 2, text
    assert "Read(a\\x1b[31mRED\\nb)" in text
