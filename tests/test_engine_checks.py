"""What the engine runners refuse before the engine sees a plan, and the problems every command finds
in one: an invalid plan ended DuckDB's process (SIGSEGV) and DataFusion's run (a Rust panic, a Python
traceback, the rest of a batch lost), and post-join filters, read filters and emits were read past,
answering as if they were not there. Found by the spec coverage sweep; plans in tests/data/engine_checks
over the small tables of test_target_readings."""

from __future__ import annotations

from pathlib import Path

import pytest
from test_target_readings import tables  # noqa: F401  (the fixture)

from optimizer.cli import main
from optimizer.errors import OptimizerError, PlanError, UnsupportedError
from optimizer.plan_io import load_plan
from optimizer.schema.check import check_plan

PLANS = Path(__file__).parent / "data" / "engine_checks"


@pytest.mark.parametrize(("plan", "where", "words"), [
    ("sort_unspecified", "sorts[0].direction", "sort direction is unspecified"),
    ("fetch_negative_offset", "fetch.offset_expr", "offset is negative (-1)"),
    ("fetch_fp64_count", "fetch.count_expr", "the count is of type fp64, not an integer"),
    ("fetch_count_reads_a_column", "fetch.count_expr", "the count reads a column of the input"),
    ("set_of_one_input", "set.inputs", "a set operation needs at least 2 inputs"),
])
def test_problems_every_command_finds(plan, where, words, capsys):
    """optimize took these and wrote them (an offset of -1 then answered 2 rows on DuckDB); run refused."""
    problems = check_plan(load_plan((PLANS / f"{plan}.json").read_bytes()))
    assert any(p.path.endswith(where) and words in p.message for p in problems), problems
    assert main(["optimize", str(PLANS / f"{plan}.json"), "-o", "-"]) == 2
    assert words in capsys.readouterr().err


@pytest.mark.parametrize(("engine", "plan", "error", "words"), [
    ("duckdb", "set_of_one_input", PlanError, "not given to duckdb"),  # a SIGSEGV
    ("datafusion", "sort_unspecified", PlanError, "not given to datafusion"),  # a Rust panic
    ("datafusion", "fetch_count_reads_a_column", PlanError, "not given to datafusion"),  # a Rust panic
    ("datafusion", "sort_clustered", UnsupportedError, "not given to datafusion as written: a CLUSTERED sort direc"),
    ("datafusion", "sort_by_comparison_function", UnsupportedError, "not given to datafusion as written: a sort by a"),
    # answered wrong as given (found by the second spec coverage sweep); each refused by its target too
    ("duckdb", "set_UNION_ALL_2", UnsupportedError, "duckdb reads past a set operation other than a distinct one"),
    ("duckdb", "agg_measure_filter_distinct", UnsupportedError, "duckdb reads past AggregateRel.Measure.filter"),
    ("duckdb", "agg_count_INTERMEDIATE_TO_RESULT", UnsupportedError, "not given to duckdb as written: 'count' in aggre"),
    ("datafusion", "set_INTERSECTION_MULTISET_ALL_2", UnsupportedError, "datafusion reads past MINUS_PRIMARY_ALL"),
    ("datafusion", "round_fp64_even", UnsupportedError, "not given to datafusion as written: 'round' with rounding"),
    ("datafusion", "join_LEFT_MARK_plain", UnsupportedError, "not given to datafusion as written: JoinRel of type LEFT_M"),
    ("acero", "agg_count_INTERMEDIATE_TO_RESULT", UnsupportedError, "not given to acero as written: 'count' in aggreg"),
    ("duckdb", "post_join_filter", UnsupportedError, "duckdb reads past JoinRel.post_join_filter"),  # 4 rows, not 2
    ("acero", "post_join_filter", UnsupportedError, "acero reads past JoinRel.post_join_filter"),
    ("acero", "read_filter", UnsupportedError, "acero does not apply ReadRel.filter .* no filter above applies it"),  # 7 rows, not 3
    # DataFusion prunes row groups with the read's filter and returns the rest (4 rows where it keeps 3); its
    # own plans repeat the filter above, a plan optimized for Spark does not
    ("datafusion", "read_filter", UnsupportedError, "datafusion does not apply ReadRel.filter"),
])
def test_runners_refuse_what_the_engine_crashes_on_or_reads_past(engine, plan, error, words, tables):  # noqa: F811
    from optimizer.engines import runner

    engine_runner = runner(engine, tables)
    try:
        with pytest.raises(error, match=words) as info:
            engine_runner.execute(load_plan((PLANS / f"{plan}.json").read_bytes()))
    finally:
        engine_runner.close()
    assert info.value.path


def test_the_datafusion_target_refuses_what_the_runner_refuses():
    """The runner's refusal of a CLUSTERED sort says optimize --target datafusion writes the plan in what
    DataFusion reads: that write refuses it by name (it wrote it through, and DataFusion panicked)."""
    from optimizer.write import write_for_target

    with pytest.raises(UnsupportedError, match="a CLUSTERED sort direction: target 'datafusion' does not read it"):
        write_for_target(load_plan((PLANS / "sort_clustered.json").read_bytes()), "datafusion")
    with pytest.raises(UnsupportedError, match="a sort by a comparison function: target 'datafusion' does not read"):
        write_for_target(load_plan((PLANS / "sort_by_comparison_function.json").read_bytes()), "datafusion")


def test_a_refused_plan_leaves_the_rest_of_a_batch_to_run(tables, capsys, tmp_path):  # noqa: F811
    """A CLUSTERED sort ended `run --engine datafusion` of several plans with a traceback: now that plan
    fails by name and the next one runs."""
    folder = tmp_path / "t"
    folder.mkdir()
    for name, path in tables.items():
        (folder / f"{name}.parquet").write_bytes(Path(path).read_bytes())
    runs = Path(__file__).parent / "data" / "target_readings" / "mark_in_a_disjunct.json"
    code = main(["run", "--engine", "datafusion", "--tables", str(folder), "--out", str(tmp_path / "out"),
                 str(PLANS / "sort_clustered.json"), str(runs)])
    captured = capsys.readouterr()
    assert code == 3 and "Traceback" not in captured.err and "CLUSTERED" in captured.err, captured
    assert "1 ok, 1 failed" in captured.out + captured.err


def test_a_plan_the_loader_conforms_is_checked_as_written():
    """DataFusion's TPC-DS Q10 (EXISTS under OR as mark joins): the loader puts a project over each mark
    join, so the paths of the loaded copy are not the plan's; the DuckDB runner's check took its project
    widths from that copy (an internal KeyError). Now it reads the plan as written and refuses by name
    (its fetch, then its mark joins, DuckDB reads otherwise)."""
    from substrait.proto import Plan

    from optimizer.engines import runner
    from workloads.tpcds import datafusion_tpcds_plans, generate_tpcds, tpcds_table_paths

    data_dir = generate_tpcds(0.01)
    plan = Plan.FromString(datafusion_tpcds_plans(data_dir, (10,))[10])
    duckdb = runner("duckdb", {k: str(v) for k, v in tpcds_table_paths(data_dir).items()})
    try:
        with pytest.raises(OptimizerError) as info:
            duckdb.execute(plan)
        assert info.value.path
    finally:
        duckdb.close()


def test_duckdb_projects_are_not_given_to_datafusion(tables):  # noqa: F811
    """DuckDB 1.1.3 means a ProjectRel without emit as its expressions alone; DataFusion reads it by the spec,
    its input's columns first. sum(x) over DuckDB's project of a * 2 would sum a: its plans given to
    DataFusion are refused by name, naming the project (they failed at the root's names before, by luck)."""
    from optimizer.engines import runner
    from workloads.producers import duckdb_plan

    raw = duckdb_plan("SELECT sum(x) AS s FROM (SELECT v * 2 AS x, k FROM t WHERE k > 1) q", tables)
    engine_runner = runner("datafusion", tables)
    try:
        with pytest.raises(UnsupportedError, match=r"\(DuckDB\) means its expressions alone") as info:
            engine_runner.execute(raw)
    finally:
        engine_runner.close()
    assert info.value.path.endswith("aggregate.input")


def test_grouping_sets_are_not_given_to_duckdb(tables):  # noqa: F811
    """A ROLLUP (k, s) of count(*) in Substrait 0.53's fields, the ones DuckDB 1.1.3 reads: it answered 4 rows
    (k, s, the count of k's group, set index 1) where the spec gives 9, with no error. The runner refuses
    it by name; the duckdb target writes one aggregate per set instead (docs/targets.md)."""
    from optimizer.engines import runner

    engine_runner = runner("duckdb", tables)
    try:
        with pytest.raises(UnsupportedError, match="duckdb reads past an aggregate's grouping sets") as info:
            engine_runner.execute((PLANS / "rollup_old_fields.binpb").read_bytes())
    finally:
        engine_runner.close()
    assert info.value.path == "relations[0].root.input"


def test_a_result_parquet_cannot_hold_fails_its_plan_and_the_batch_goes_on(tmp_path, capsys):
    """An interval result (month_day_nano) written with --out: Parquet has no such type, and the pyarrow
    error ended the batch as an internal error (found by the second spec coverage sweep). Now that plan fails
    by name and the next one is written; --format json holds it."""
    readings = Path(__file__).parent / "data" / "target_readings"
    plans = [str(readings / "literal_interval_year_to_month.json"), str(readings / "literal_precision_timestamp.json")]
    out = tmp_path / "out"
    assert main(["run", "--engine", "datafusion", "--tables", str(tmp_path), "--out", str(out), *plans]) == 3
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "Parquet cannot hold this result" in err[0] and "(--format json can)" in err[0]
    assert sorted(p.name for p in out.iterdir()) == ["literal_precision_timestamp.parquet"]
    assert main(["run", "--engine", "datafusion", "--tables", str(tmp_path), "--out", str(out), "--format", "json",
                 plans[0]]) == 0
    assert (out / "literal_interval_year_to_month.json").read_text() == '[{"x": [14, 0, 0]}]\n'


def test_correlated_subqueries_of_other_producers_are_not_given_to_datafusion():
    """DataFusion 55 answered 5 of 55 hand-built correlated subqueries wrong, with no error (NOT (v >= (SELECT
    COUNT(*) FROM t3 b WHERE b.k = a.k)): 32 rows where SQL gives 4; the random SQL sweep). Its target
    refuses a correlated subquery left in a plan; the runner refuses one in a plan DataFusion did not write."""
    from optimizer.engines import runner

    readings = Path(__file__).parent / "data" / "target_readings"
    engine_runner = runner("datafusion", {"t3": str(readings / "sweep_t3.parquet")})
    try:
        with pytest.raises(UnsupportedError, match="datafusion reads past a correlated subquery's reference") as info:
            engine_runner.execute(load_plan((PLANS / "correlated_count.json").read_bytes()))
    finally:
        engine_runner.close()
    assert ".subquery." in info.value.path
