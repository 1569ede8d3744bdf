"""The engines that read Substrait themselves (optimizer/engines/): DataFusion 55, DuckDB 1.1.3 with its
substrait extension, and Acero, run for real over TPC-H SF 0.01 and tiny tables; answers checked against
DuckDB's SQL answers."""

from __future__ import annotations

import pytest
from substrait.proto import Plan
from test_difftest import EXTENSIONS, LEFT_JOIN_FILTER, LEFT_JOIN_TABLES, plan_of, read, write_tables

from optimizer.difftest.results import compare_tables
from optimizer.engines import runner
from optimizer.errors import ExecutionError, PlanError, UnsupportedError
from optimizer.paths import FileAccess
from optimizer.plan_io import load_plan
from workloads.tpch import TPCH_ORDER_BY, tpch_query

QUERIES = (1, 3)


def _right(table, expected, query: int) -> None:
    verdict = compare_tables(table, expected, ordered_by=TPCH_ORDER_BY.get(query), decimal_ulp=True)
    assert verdict.equal, verdict


@pytest.fixture(scope="module")
def engines(tpch_dir):
    made = {name: runner(name, tpch_dir, files=FileAccess.under([tpch_dir]))
            for name in ("datafusion", "duckdb", "acero")}
    yield made
    for engine in made.values():
        engine.close()


@pytest.mark.parametrize("query", QUERIES)
def test_datafusion_runs_its_own_tpch_plans(query, engines, datafusion_tpch_plans, duckdb_oracle):
    _right(engines["datafusion"].execute(datafusion_tpch_plans[query]), duckdb_oracle(tpch_query(query)), query)


@pytest.mark.parametrize("query", QUERIES)
def test_duckdb_runs_its_own_tpch_plans(query, engines, duckdb_tpch_plans, duckdb_oracle):
    _right(engines["duckdb"].execute(duckdb_tpch_plans[query]), duckdb_oracle(tpch_query(query)), query)


def test_isthmus_upper_case_names_bind_on_datafusion(engines, corpus_plans, duckdb_oracle):
    """Isthmus writes LINEITEM and L_ORDERKEY; the data says lineitem and l_orderkey (DataFusion matches
    column names case-sensitively: the runner registers the table under the plan's spelling)."""
    from workloads.corpus import sql_for

    found = next(p for p in corpus_plans if p.producer == "isthmus" and p.tpch_query == 6)
    table = engines["datafusion"].execute(load_plan(found.path.read_text()))
    _right(table, duckdb_oracle(sql_for(found)), 6)


@pytest.mark.parametrize("engine", ["datafusion", "duckdb", "acero"])
def test_each_engine_runs_a_left_join_over_tables_by_name(engine, tmp_path):
    tables = write_tables(tmp_path, LEFT_JOIN_TABLES)
    plan = plan_of(LEFT_JOIN_FILTER, ["a", "ba", "bb"])
    table = runner(engine, tables).execute(plan)
    assert table.to_pylist() == [{"a": 2, "ba": None, "bb": None}]


def test_acero_refuses_a_column_mask_naming_it(engines, datafusion_tpch_plans):
    with pytest.raises(UnsupportedError) as info:
        engines["acero"].execute(datafusion_tpch_plans[6])  # no aggregate keys: the mask comes first
    assert str(info.value) == "acero does not support: substrait::ReadRel::projection"


def _hash_join_plan(datafusion_tpch_plans, tpch_statistics) -> Plan:
    """DataFusion's Q3 optimized for Spark: its joins are HashJoinRels, which only Spark's backend reads."""
    from optimizer.driver import optimize

    plan = optimize(load_plan(datafusion_tpch_plans[3]), statistics=tpch_statistics)
    assert "hash_join" in str(plan)
    return plan


def test_physical_relations_are_refused_naming_them(engines, datafusion_tpch_plans, tpch_statistics):
    plan = _hash_join_plan(datafusion_tpch_plans, tpch_statistics)
    with pytest.raises(UnsupportedError, match=r"^datafusion does not support: .*(HashJoin|a relation its Substrait version does not know .*top_n)"):
        engines["datafusion"].execute(plan)
    with pytest.raises(UnsupportedError, match=r"^duckdb does not support: .*Unsupported relation type"):
        engines["duckdb"].execute(plan)
    # DuckDB gets a new database after its internal error: the next plan runs
    assert engines["duckdb"].execute(plan_of(read("nation", "n_nationkey"), ["k"])).num_rows == 25


def test_datafusion_shows_the_physical_plan_it_makes_and_the_others_say_they_do_not(engines, datafusion_tpch_plans):
    engine = engines["datafusion"]
    original = load_plan(datafusion_tpch_plans[3])
    shown = engine.engine_plan(original)
    assert "HashJoinExec" in shown and "DataSourceExec" in shown
    assert engine.engine_plan(original.SerializeToString()) == shown  # the same plan: the same text
    assert engine.engine_plan(load_plan(datafusion_tpch_plans[6])) != shown  # another query: another text
    for name in ("duckdb", "acero"):
        with pytest.raises(UnsupportedError, match=f"^the {name} engine does not show its physical plan$"):
            engines[name].engine_plan(load_plan(datafusion_tpch_plans[6]))


def test_a_table_found_nowhere_is_a_plan_error(engines):
    with pytest.raises(PlanError, match=r"table 'no_such_table' not found \(looked in .*sf0\.01\)") as info:
        engines["duckdb"].execute(plan_of(read("no_such_table", "a"), ["a"]))
    assert info.value.exit_code == 2 and info.value.path.endswith("read.named_table")


def test_files_outside_the_table_roots_are_refused_before_the_engine_reads_them(tmp_path, tpch_dir):
    outside = tmp_path / "secret"
    write_tables(outside, {"secret": [(1,)]})
    plan = plan_of(read("secret", "a"), ["a"])
    for engine in ("datafusion", "duckdb", "acero"):
        confined = runner(engine, {"secret": outside / "secret.parquet"}, files=FileAccess.under([tpch_dir]))
        with pytest.raises(PlanError, match="is outside the table roots"):
            confined.execute(plan)
    local_files = load_plan(plan.SerializeToString())
    rel = local_files.relations[0].root.input.read
    rel.ClearField("named_table")
    rel.local_files.items.add().uri_file = f"file://{outside / 'secret.parquet'}"
    rel.local_files.items[0].parquet.SetInParent()
    with pytest.raises(PlanError, match="is outside the table roots"):
        runner("duckdb", tpch_dir, files=FileAccess.under([tpch_dir])).execute(local_files)


@pytest.mark.parametrize("engine", ["datafusion", "duckdb", "acero"])
def test_a_missing_file_under_the_roots_is_one_line(engine, tmp_path, capfd):
    """A plan naming a file that is not there: each engine's failure is one line; Acero's worker died
    with its Python traceback on stderr before (pyarrow raised FileNotFoundError, not an ArrowException)."""
    tables = write_tables(tmp_path / "t", {"a": [(1,)]})
    plan = plan_of(read("a", "a"), ["a"])
    rel = plan.relations[0].root.input.read
    rel.ClearField("named_table")
    rel.local_files.items.add().uri_file = f"file://{tmp_path / 't' / 'nope.parquet'}"
    rel.local_files.items[0].parquet.SetInParent()
    with pytest.raises((ExecutionError, PlanError)) as info:
        runner(engine, tables, files=FileAccess.under([tmp_path / "t"])).execute(plan)
    assert "\n" not in str(info.value)
    assert "Traceback" not in capfd.readouterr().err


def test_best_effort_filters_are_removed_in_the_mode_that_ignores_them(tmp_path):
    """A consumer may skip ``best_effort_filter``: the runner's ignoring mode hands the engine a plan
    without it (so a rewrite that relies on it shows in ``diff``)."""
    tables = write_tables(tmp_path, {"b": [(1, 10), (2, None)]})
    plan = plan_of(read("b", "a", "b"), ["a", "b"])
    rel = plan.relations[0].root.input.read
    rel.best_effort_filter.CopyFrom(plan_of({"filter": {"input": read("b", "a", "b"), "condition": {
        "scalarFunction": {"functionReference": 2, "outputType": {"bool": {"nullability": "NULLABILITY_REQUIRED"}},
                           "arguments": [{"value": {"selection": {"directReference": {"structField": {"field": 1}},
                                                                  "rootReference": {}}}}]}}}},
        ["a", "b"]).relations[0].root.input.filter.condition)
    ignoring = runner("duckdb", tables, ignore_best_effort_filter=True)
    assert not ignoring.prepared(plan).relations[0].root.input.read.HasField("best_effort_filter")
    assert ignoring.execute(plan).num_rows == 2
    assert runner("duckdb", tables).prepared(plan) is plan


def test_engine_failures_are_one_line_execution_errors(tmp_path):
    tables = write_tables(tmp_path, {"a": [(1,)]})
    plan = plan_of(read("a", "a"), ["a"])
    plan.relations[0].root.input.read.base_schema.struct.types[0].date.SetInParent()  # i64 data read as date
    with pytest.raises((ExecutionError, PlanError)) as info:
        runner("datafusion", tables).execute(plan)
    assert "\n" not in str(info.value)


def test_bytes_that_are_not_a_plan_are_a_plan_error():
    with pytest.raises(PlanError, match="not a binary Substrait plan"):
        runner("acero", None).execute(b"\xff\xff\xff")


# ------------------------------------------------------------------------------------- diff --engine


@pytest.fixture
def left_join_files(tmp_path):
    from optimizer.plan_io import save_plan

    tables = tmp_path / "tables"
    write_tables(tables, LEFT_JOIN_TABLES)
    plan = tmp_path / "left_join.json"
    save_plan(plan_of(LEFT_JOIN_FILTER, ["a", "ba", "bb"]), plan)
    return plan, tables


@pytest.mark.parametrize("engine", ["datafusion", "duckdb"])
def test_diff_on_an_engine_is_0_when_equal_and_1_when_a_rewrite_is_wrong(engine, left_join_files, tmp_path,
                                                                          monkeypatch, capsys):
    import optimizer.rules as rules
    from test_difftest import BROKEN_PUSHDOWN

    from optimizer.cli import main

    plan, tables = left_join_files
    out = tmp_path / "out"
    argv = ["diff", str(plan), "--tables", str(tables), "--engine", engine, "--out", str(out)]
    assert main(argv) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("left_join: equal  [original ") and lines[-1] == "1 passed, 0 failed"

    monkeypatch.setattr(rules, "RULES", [BROKEN_PUSHDOWN])  # a wrong rewrite, run for real on the engine
    assert main(argv) == 1
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("left_join: DIFFERENT (row count differs: optimized 2, original 1)")
    assert lines[-1] == "0 passed, 1 failed"
    assert (out / "left_join.optimized.json").exists()


def test_a_reference_backend_catches_what_the_write_stage_gets_wrong(tmp_path):
    """compare(reference_backend=...) takes the expected answer from the original as given, run on the
    reference, and checks the original as written for the target against it too. DuckDB 1.1.3 ignores a
    read's emit: as its own reference (the plan unwritten) its runner refuses the plan, naming the emit,
    instead of answering without it; DataFusion, which reads the emit as the spec says, agrees with the
    plan written for DuckDB."""
    from optimizer.difftest.harness import EQUAL, compare

    tables = write_tables(tmp_path, {"b": [(1, 10), (2, 20)]})
    plan = plan_of(read("b", "a", "b", common={"emit": {"outputMapping": [1, 0]}}), ["x", "y"])
    duckdb = runner("duckdb", tables)
    refused = compare(plan, backend=duckdb, target="duckdb", reference_backend=runner("duckdb", tables))
    assert refused.status != EQUAL and "duckdb reads past the emit of a read relation" in refused.verdict()
    right = compare(plan, backend=duckdb, target="duckdb", reference_backend=runner("datafusion", tables))
    assert right.status == EQUAL, right.verdict()


def _cli(*argv: str):
    import subprocess
    import sys

    return subprocess.run([sys.executable, "-m", "optimizer", *argv], capture_output=True, text=True)


def test_diff_engine_bad_values_are_exit_2_before_anything_runs(left_join_files):
    plan, tables = left_join_files
    proc = _cli("diff", str(plan), "--tables", str(tables), "--engine", "velox")
    assert proc.returncode == 2
    assert proc.stderr.count("\n") == 1 and "--engine" in proc.stderr and "velox" in proc.stderr
    proc = _cli("diff", str(plan), "--tables", str(tables), "--engine", "duckdb", "--catalog", "tpch")
    assert proc.returncode == 2
    assert proc.stderr == ("substrait-opt: error: --catalog: a Spark option; --engine duckdb does not read it\n")


def test_acero_is_not_given_a_plan_that_would_crash_it(tmp_path):
    """Acero trusts the plan: DuckDB's TPC-H Q1 optimized for acero at bc7da3c (an aggregate over a
    project whose field reference is past the end of its input) ended the process with SIGSEGV. The
    runner refuses a plan that is not valid by the spec with a PlanError naming the place (here a
    simpler invalid plan, which Acero would only have failed on)."""
    tables = write_tables(tmp_path, LEFT_JOIN_TABLES)
    plan = plan_of(LEFT_JOIN_FILTER, ["a", "ba", "bb"])
    condition = plan.relations[0].root.input.filter.condition.scalar_function
    condition.arguments[0].value.selection.direct_reference.struct_field.field = 7
    with pytest.raises(PlanError, match="not given to acero.*field 7 of 3") as info:
        runner("acero", tables).execute(plan)
    assert info.value.path.endswith("filter.condition.scalar_function.arguments[0].value.selection")


def test_acero_refuses_grouping_keys_it_would_drop(tmp_path):
    """Acero reads an aggregate's keys from the deprecated ``Grouping.grouping_expressions`` only: keys
    given as ``expression_references`` (the spec's form today) would be dropped."""
    import json

    tables = write_tables(tmp_path, {"b": [(1, 10), (1, 5), (2, 3)]})
    extensions = {"extensionUrns": [{"extensionUrnAnchor": 1, "urn": "extension:io.substrait:functions_arithmetic"}],
                  "extensions": [{"extensionFunction": {"extensionUrnReference": 1, "functionAnchor": 1,
                                                        "name": "sum"}}]}
    column = {"selection": {"directReference": {"structField": {"field": 1}}, "rootReference": {}}}
    key = {"selection": {"directReference": {"structField": {"field": 0}}, "rootReference": {}}}
    aggregate = {"aggregate": {
        "input": read("b", "a", "b"), "groupingExpressions": [key], "groupings": [{"expressionReferences": [0]}],
        "measures": [{"measure": {"functionReference": 1, "phase": "AGGREGATION_PHASE_INITIAL_TO_RESULT",
                                  "outputType": {"i64": {"nullability": "NULLABILITY_NULLABLE"}},
                                  "arguments": [{"value": column}]}}]}}
    plan = load_plan(json.dumps({**extensions, "relations": [{"root": {"input": aggregate, "names": ["a", "s"]}}]}))
    assert sorted(runner("datafusion", tables).execute(plan).to_pylist(), key=lambda r: r["a"]) == [
        {"a": 1, "s": 15}, {"a": 2, "s": 3}]
    with pytest.raises(UnsupportedError, match="acero does not support: grouping keys given as") as info:
        runner("acero", tables).execute(plan)
    assert info.value.path == "relations[0].root.input.aggregate.groupings[0]"
    # Written for acero, the keys are in the old field as well (optimizer.write.encoding): it runs, with
    # its keys (every aggregate of TPC-H and TPC-DS was refused before; Q12 runs right so).
    from optimizer.write import write_for_target

    written = runner("acero", tables).execute(write_for_target(plan, "acero")).to_pylist()
    assert sorted(written, key=lambda r: r["a"]) == [{"a": 1, "s": 15}, {"a": 2, "s": 3}]


def test_acero_ending_its_process_is_an_execution_error_and_the_runner_goes_on(tmp_path):
    """pyarrow 26's Acero ends its process (SIGSEGV) on a sum of decimal products (Isthmus' TPC-H Q6
    optimized for acero is such a plan): the runner's worker process dies, not the caller."""
    import decimal
    import json

    from optimizer.difftest.harness import ColumnSpec, Database, TableSpec

    d = decimal.Decimal
    tables = Database({"b": TableSpec("b", [ColumnSpec("x", "decimal(15,2)"), ColumnSpec("y", "decimal(15,2)")],
                                      [(d("1.50"), d("0.05")), (d("2.00"), d("0.06"))])}).write_parquet(tmp_path)

    def dec(p: int, s: int) -> dict:
        return {"decimal": {"precision": p, "scale": s, "nullability": "NULLABILITY_NULLABLE"}}

    def field(i: int) -> dict:
        return {"selection": {"directReference": {"structField": {"field": i}}, "rootReference": {}}}

    urn = "extension:io.substrait:functions_arithmetic_decimal"
    product = {"project": {
        "input": {"read": {"namedTable": {"names": ["b"]},
                           "baseSchema": {"names": ["x", "y"], "struct": {"types": [dec(15, 2), dec(15, 2)]}}}},
        "expressions": [{"scalarFunction": {"functionReference": 1, "outputType": dec(30, 4),
                                            "arguments": [{"value": field(0)}, {"value": field(1)}]}}],
        "common": {"emit": {"outputMapping": [2]}}}}
    total = {"aggregate": {"input": product, "groupings": [{}], "measures": [{"measure": {
        "functionReference": 2, "phase": "AGGREGATION_PHASE_INITIAL_TO_RESULT", "outputType": dec(30, 4),
        "arguments": [{"value": field(0)}]}}]}}
    plan = load_plan(json.dumps({
        "extensionUrns": [{"extensionUrnAnchor": 1, "urn": urn}],
        "extensions": [{"extensionFunction": {"functionAnchor": 1, "name": "multiply:dec_dec", "extensionUrnReference": 1}},
                       {"extensionFunction": {"functionAnchor": 2, "name": "sum:dec", "extensionUrnReference": 1}}],
        "relations": [{"root": {"input": total, "names": ["s"]}}]}))
    acero = runner("acero", tables)
    try:
        try:
            answer = acero.execute(plan).to_pylist()
        except ExecutionError as exc:  # pyarrow 26
            assert str(exc) == "acero failed: the engine ended its process (signal SIGSEGV) on this plan"
        else:  # an Acero that no longer crashes must give the right sum
            assert answer == [{"s": d("0.1950")}]
        product_only = load_plan(json.dumps({
            "extensionUrns": [{"extensionUrnAnchor": 1, "urn": urn}],
            "extensions": [{"extensionFunction": {"functionAnchor": 1, "name": "multiply:dec_dec",
                                                  "extensionUrnReference": 1}}],
            "relations": [{"root": {"input": product, "names": ["p"]}}]}))
        assert acero.execute(product_only).to_pylist() == [{"p": d("0.0750")}, {"p": d("0.1200")}]  # a new worker
    finally:
        acero.close()


# ------------------------------------------------------------------------------------- run --engine


def test_run_on_an_engine_gives_the_file_as_it_is_and_refuses_unsupported_relations_with_exit_3(
        tmp_path, tpch_dir, duckdb_tpch_plans, datafusion_tpch_plans, tpch_statistics, capsys):
    from optimizer.cli import main
    from optimizer.plan_io import save_plan

    own = tmp_path / "q6_duckdb.binpb"
    own.write_bytes(duckdb_tpch_plans[6])  # DuckDB's encoding: loaded and upgraded, DuckDB would misread it
    physical = tmp_path / "q3_spark.binpb"
    save_plan(_hash_join_plan(datafusion_tpch_plans, tpch_statistics), physical, format="binpb")

    assert main(["run", str(own), "--tables", str(tpch_dir), "--engine", "duckdb", "--show", "1"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith("q6_duckdb: 1 rows in ") and out[-1] == "1 ok, 0 failed"
    assert "1193053.2253" in out[3]  # revenue, DuckDB's SQL answer at SF 0.01

    assert main(["run", str(physical), "--tables", str(tpch_dir), "--engine", "duckdb"]) == 3
    err = capsys.readouterr().err.splitlines()
    assert err == [f"substrait-opt: error: {physical}: duckdb does not support: INTERNAL Error: "
                   "Unsupported relation type 0"]
    assert main(["run", str(physical), "--tables", str(tpch_dir), "--engine", "datafusion"]) == 3
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 1 and "datafusion does not support: a relation its Substrait version does not know" in err[0]
    assert "hash_join" in err[0] and "top_n" in err[0]


def test_run_on_an_engine_refuses_spark_options_and_bad_files_with_exit_2(tmp_path, tpch_dir):
    plan = tmp_path / "bad.json"
    plan.write_text('{"relations": [{"nope": 1}]}')
    proc = _cli("run", str(plan), "--tables", str(tpch_dir), "--engine", "acero")
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1 and str(plan) in proc.stderr
    proc = _cli("run", str(plan), "--engine", "datafusion", "--ui")
    assert proc.returncode == 2
    assert proc.stderr == "substrait-opt: error: --ui: a Spark option; --engine datafusion does not read it\n"


def test_the_engines_benchmark_writes_its_matrix_and_timings(tmp_path):
    """``benchmarks/engines.py`` at its smallest: one query, one producer, two engines, one timed run."""
    import json

    from benchmarks import engines

    args = engines.parse_args(["--suites", "tpch", "--queries", "6", "--producers", "datafusion",
                               "--targets", "datafusion,duckdb", "--scale", "0.01", "--speed-scale", "0.01",
                               "--reps", "1", "--warmup", "0", "--out", str(tmp_path), "--quiet"])
    engines.run(args)
    report = json.loads((tmp_path / "engines.json").read_text())
    cell = report["summary"]["tpch"]["datafusion"]
    assert cell["datafusion"]["original"]["right"] == 1 and cell["datafusion"]["optimized"]["right"] == 1
    assert cell["duckdb"]["optimized"]["right"] == 1  # DuckDB 1.1.3 reads DataFusion's Q6 written for it
    assert [(r["target"], r["ratio"] > 0) for r in report["speed"]] == [("datafusion", True), ("duckdb", True)]
    # DataFusion shows its physical plan: Q6's two forms are compared (DuckDB's is not shown: no key)
    assert [("same_engine_plan" in r) for r in report["speed"]] == [True, False]
    text = (tmp_path / "engines.md").read_text()
    assert f"at commit {report['machine']['commit']}" in text and "| tpch | datafusion | duckdb | 1 |" in text


def test_the_engines_benchmark_times_acero_against_the_plan_written_without_rewrites(tmp_path):
    """No original plan runs on Acero (it reads no column mask): the speed baseline there is the plan
    written for Acero without rewrites, judged right first; the summary keeps the baselines apart."""
    import json

    from benchmarks import engines

    args = engines.parse_args(["--suites", "tpch", "--queries", "12", "--producers", "datafusion",
                               "--targets", "acero", "--scale", "0.01", "--acero-scale", "0.01",
                               "--reps", "3", "--warmup", "0", "--out", str(tmp_path), "--quiet"])
    engines.run(args)
    report = json.loads((tmp_path / "engines.json").read_text())
    [row] = report["plans"]
    assert row["original"]["status"] == "refused" and row["optimized"]["status"] == "right"
    assert row["written"]["status"] == "right"
    [timed] = report["speed"]
    assert timed["baseline"] == "written" and len(timed["times_s"]["original"]) == 3 and timed["ratio"] > 0
    cell = report["speed_summary"]["datafusion"]["acero"]
    assert list(cell) == ["written"] and cell["written"]["plans"] == 1
    assert report["config"]["confirm"] == {"reps": engines.CONFIRM_REPS, "above": 1.1}
    assert "| datafusion | Q12 | acero | written |" in (tmp_path / "engines.md").read_text()


def test_a_missing_engine_package_is_exit_3_naming_the_extra(left_join_files):
    """Without the ``datafusion`` package (``sys.modules`` says it cannot be imported, as when it is not
    installed) ``diff --engine datafusion`` stops with one line naming the extra that installs it."""
    import subprocess
    import sys

    plan, tables = left_join_files
    code = ("import sys; sys.modules['datafusion'] = None; from optimizer.cli import main; "
            f"sys.exit(main(['diff', {str(plan)!r}, '--tables', {str(tables)!r}, '--engine', 'datafusion']))")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert proc.returncode == 3
    assert proc.stderr == ("substrait-opt: error: the datafusion engine needs the 'datafusion' package: "
                           "pip install 'substrait-optimizer[datafusion]'\n")


def test_duckdb_reads_a_tables_columns_by_the_names_the_read_gives_them(tmp_path):
    """DuckDB's consumer reads a table's columns by position, whatever the read's base_schema names: a read
    of t as (b, a) got a and b, exit 0. The runner's view selects the plan's columns by name; two orders
    of one table are refused, a name the table lacks too (exit 2)."""
    tables = tmp_path / "tables"
    tables.mkdir()
    write_tables(tables, {"t": [(1, 10, 100), (2, 20, 200)]})
    duckdb = runner("duckdb", tables, files=FileAccess.under([tables]))
    datafusion = runner("datafusion", tables, files=FileAccess.under([tables]))
    try:
        swapped = plan_of(read("t", "c", "a"), ["c", "a"])
        for engine in (duckdb, datafusion):
            assert sorted(engine.execute(swapped).to_pylist(), key=str) == [{"c": 100, "a": 1}, {"c": 200, "a": 2}]
        as_stored = plan_of(read("t", "a", "b"), ["a", "b"])  # the first columns in order: the plain view
        assert duckdb.execute(as_stored).to_pylist() == [{"a": 1, "b": 10}, {"a": 2, "b": 20}]
        both = plan_of({"cross": {"left": read("t", "b", "a"), "right": read("t", "c", "b")}}, ["b", "a", "c", "b2"])
        with pytest.raises(UnsupportedError, match="reads a table's columns by position"):
            duckdb.execute(both)
        with pytest.raises(PlanError, match="table 't' has no column 'nope'"):
            duckdb.execute(plan_of(read("t", "nope"), ["nope"]))
    finally:
        duckdb.close()
        datafusion.close()


def test_acero_errors_and_crashes_are_one_line(tmp_path):
    """A table provider's error (a column the table lacks) was printed by pyarrow as a traceback twice
    ("Exception ignored in"), and Arrow's "Check failed" line reached the terminal before an abort: the
    worker's stderr goes to a file, its last line into the one-line error of a crash."""
    import json
    import subprocess
    import sys

    tables = tmp_path / "tables"
    tables.mkdir()
    write_tables(tables, {"t": [(1, 10)]})
    plan = tmp_path / "p.json"
    plan.write_text(json.dumps({**EXTENSIONS, "relations": [
        {"root": {"input": read("t", "nope"), "names": ["nope"]}}]}))
    done = subprocess.run([sys.executable, "-m", "optimizer", "run", str(plan), "--engine", "acero", "--tables",
                           str(tables)], capture_output=True, text=True)
    assert done.returncode == 2, done.stderr
    assert done.stderr.splitlines() == [f"substrait-opt: error: {plan}: column 'nope' not found in table 't' "
                                        "(it has: a, b)"], done.stderr


def test_a_column_declared_of_another_kind_than_its_data_is_refused(tmp_path):
    """A read declaring an integer column a string: every engine reads the data's integers whatever the plan
    declares (DuckDB then compared them with the plan's string literals by its own casts). Refused by name
    before the engine sees the plan (exit 2), as the Spark backend refuses it; another width of one kind
    (``i32`` over ``i64``, as Isthmus declares) is read as before: DuckDB answers it, DataFusion refuses it
    itself ("a different type (Int32) than ... the table schema")."""
    tables = tmp_path / "tables"
    tables.mkdir()
    write_tables(tables, {"t": [(1, 10), (2, 20)]})
    as_text = read("t", "a", "b")
    as_text["read"]["baseSchema"]["struct"]["types"][1] = {"string": {"nullability": "NULLABILITY_NULLABLE"}}
    narrower = read("t", "a")
    narrower["read"]["baseSchema"]["struct"]["types"][0] = {"i32": {"nullability": "NULLABILITY_NULLABLE"}}
    for name in ("duckdb", "datafusion"):
        engine = runner(name, tables, files=FileAccess.under([tables]))
        try:
            with pytest.raises(PlanError) as refused:
                engine.execute(plan_of(as_text, ["a", "b"]))
            assert refused.value.message == "column 'b' of table 't' is int64 in the data but string in the plan"
            assert refused.value.path.endswith("read.base_schema.struct.types[1]")
            if name == "duckdb":
                assert sorted(engine.execute(plan_of(narrower, ["a"])).column(0).to_pylist()) == [1, 2]
        finally:
            engine.close()


def test_duckdb_reads_one_table_named_in_two_cases_by_two_plans(tmp_path):
    """One runner, plans of several producers (``diff``, ``run a b``): Isthmus names LINEITEM what DataFusion
    names lineitem. Each plan gets its answer (the second was refused: 'tables lineitem and LINEITEM differ
    only in case', every Isthmus TPC-H plan after a DataFusion one); within one plan, two names differing
    only in case are still refused (DuckDB's catalog cannot hold both)."""
    tables = tmp_path / "tables"
    tables.mkdir()
    write_tables(tables, {"t": [(1, 10), (2, 20)]})
    duckdb = runner("duckdb", tables, files=FileAccess.under([tables]))
    try:
        for name in ("t", "T", "t"):
            assert sorted(duckdb.execute(plan_of(read(name, "a"), ["a"])).column(0).to_pylist()) == [1, 2], name
        both = plan_of({"cross": {"left": read("t", "a"), "right": read("T", "a")}}, ["a", "a2"])
        with pytest.raises(UnsupportedError, match="differ only in case"):
            duckdb.execute(both)
    finally:
        duckdb.close()
