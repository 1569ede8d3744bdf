"""A plan the tool writes means, read back, what the plan it read meant.

Users run the CLI in steps: ``optimize -o FILE``, then ``run FILE`` in another process. The loader conforms
producers' conventions to the spec's (DataFusion's grouping-set numbering, DuckDB's emit-less projects, a
producer's simple CASE, older encodings); the plan it returns, written and read again, must not be
conformed a second time. Over every plan the tests have (the corpus, TPC-H from DataFusion and DuckDB,
TPC-DS from DataFusion and DuckDB, the official function cases):

* ``load(save(load(p))) == load(p)`` as a plan, in JSON and in binary;
* the optimized plan, written and read back, is the plan ``optimize`` returned;
* ``substrait-opt optimize P -o FILE`` then ``substrait-opt run FILE`` (separate processes) gives DuckDB's
  answer, for DataFusion's TPC-DS plans with ROLLUP, CUBE and GROUPING SETS (which a second conformation
  got wrong) and for two of DuckDB's. The whole TPC-DS set in separate processes is measured by
  ``python -m workloads.written_plans`` (docs/benchmarks.md).
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from substrait.proto import Plan

from optimizer.errors import OptimizerError
from optimizer.plan_io import PRODUCER, dump_plan, load_plan

#: DataFusion's TPC-DS plans with several grouping sets, one of each shape: a ROLLUP of eight keys (Q67),
#: grouping() under a window (Q70), a ROLLUP over a union of channels (Q77). Every TPC-DS plan runs
#: written and read back in one process in tests/test_tpcds.py; these check the CLI's two processes.
GROUPING_SET_QUERIES = (67, 70, 77)
#: A DuckDB TPC-DS plan of a query it writes right (emit-less projects throughout).
DUCKDB_QUERIES = (7,)


def _reread(plan: Plan, fmt: str) -> Plan:
    return load_plan(dump_plan(plan, fmt))


def _assert_rereads(source: bytes | str | Plan, label: str, formats: tuple[str, ...] = ("json", "binpb")) -> Plan:
    loaded = load_plan(source)
    assert loaded.version.producer == PRODUCER, label
    for fmt in formats:
        again = _reread(loaded, fmt)
        assert again == loaded, f"{label}: {fmt} written and read back is another plan"
    return loaded


def test_corpus_plans_read_back_the_same(corpus_plans):
    checked = 0
    for cp in corpus_plans:
        try:
            load_plan(str(cp.path))
        except OptimizerError:
            continue  # a plan the tool refuses: nothing is written
        _assert_rereads(str(cp.path), str(cp.path))
        checked += 1
    assert checked >= 300


def test_tpch_plans_read_back_the_same(datafusion_tpch_plans, duckdb_tpch_plans, tpch_statistics):
    from optimizer.driver import optimize

    plans = [(f"datafusion q{n}", p) for n, p in datafusion_tpch_plans.items()]
    plans += [(f"duckdb q{n}", p) for n, p in duckdb_tpch_plans.items()]
    assert len(plans) >= 36
    for label, data in plans:
        loaded = _assert_rereads(data, label)
        better = optimize(loaded, statistics=tpch_statistics)
        for fmt in ("json", "binpb"):
            assert _reread(better, fmt) == better, f"{label}: optimized, {fmt}"


@pytest.fixture(scope="module")
def tpcds_dir():
    from workloads.tpcds import generate_tpcds

    return generate_tpcds(0.01)


@pytest.fixture(scope="module")
def tpcds_plans(tpcds_dir):
    from workloads.tpcds import datafusion_tpcds_plans, duckdb_tpcds_plans

    return {"datafusion": datafusion_tpcds_plans(tpcds_dir), "duckdb": duckdb_tpcds_plans(tpcds_dir)}


def test_tpcds_plans_read_back_the_same(tpcds_dir, tpcds_plans):
    from optimizer.driver import optimize
    from optimizer.spark.statistics import default_statistics
    from workloads.tpcds import tpcds_table_paths

    statistics = default_statistics(tables=tpcds_table_paths(tpcds_dir))
    counts = {}
    for producer, plans in tpcds_plans.items():
        counts[producer] = 0
        for n, data in plans.items():
            if not isinstance(data, bytes):
                continue  # the producer wrote no plan
            label = f"{producer} TPC-DS q{n}"
            # JSON of every third query: writing JSON with indentation is Python's slow encoder (half of
            # this test's time), and what JSON could get wrong (64-bit integers, enums, bytes) is no matter
            # of a plan's shape; the corpus' 300 plans are all read back from JSON too.
            formats = ("json", "binpb") if n % 3 == 1 else ("binpb",)
            loaded = _assert_rereads(data, label, formats)
            better = optimize(loaded, statistics=statistics)
            for fmt in formats:
                assert _reread(better, fmt) == better, f"{label}: optimized, {fmt}"
            counts[producer] += 1
    assert counts["datafusion"] == 99 and counts["duckdb"] >= 40, counts


def test_function_case_plans_read_back_the_same():
    from function_cases import all_cases
    from test_function_cases import NotBuildable, PlanBuilder, aggregate_rel, scalar_expression, scalar_rel

    checked = 0
    for case in all_cases():
        if case.test_kind == "window" or case.expected.kind == "undefined":
            continue
        b = PlanBuilder()
        try:
            rel = scalar_rel([scalar_expression(b, case)]) if case.test_kind == "scalar" else aggregate_rel(b, [[case]])
        except NotBuildable:
            continue
        plan = b.plan(rel, ["r0"])
        try:
            load_plan(plan)
        except OptimizerError:
            continue
        _assert_rereads(plan, case.id)
        checked += 1
    assert checked >= 1000


def test_a_plan_message_is_conformed_like_a_file(tpcds_plans):
    """A producer's ``Plan`` message given to ``load_plan`` (or ``optimize``) is read in its producer's
    conventions, as the same plan read from a file is; the caller's message is left as it was."""
    data = tpcds_plans["datafusion"][70]
    message = Plan()
    message.ParseFromString(data)
    before = message.SerializeToString(deterministic=True)
    assert load_plan(message) == load_plan(data)
    assert message.SerializeToString(deterministic=True) == before
    loaded = load_plan(data)
    assert load_plan(loaded) is loaded  # already the tool's reading: not copied again


def test_a_written_plan_says_who_wrote_it(tpcds_plans):
    from substrait.version import substrait_version

    written = _reread(load_plan(tpcds_plans["datafusion"][70]), "binpb")
    v = written.version
    assert v.producer == PRODUCER
    assert f"{v.major_number}.{v.minor_number}.{v.patch_number}" == substrait_version


# ------------------------------------------------------------------------- separate processes


def _cli(*args: str) -> list[str]:
    return [sys.executable, "-m", "optimizer", *args]


def _optimize_to_files(sources: dict[str, Path], tables: Path, out: Path) -> dict[str, Path]:
    """``substrait-opt optimize SRC --tables TABLES -o OUT/<name>.binpb``, one process each."""
    written = {}
    for name, src in sources.items():
        dest = out / f"{name}.binpb"
        proc = subprocess.run(_cli("optimize", str(src), "--tables", str(tables), "--no-spark-stats",
                                   "-o", str(dest)), capture_output=True, text=True, timeout=300)
        assert proc.returncode == 0, f"{name}: {proc.stderr}"
        written[name] = dest
    return written


def _run_files(files: dict[str, Path], tables: Path, out: Path) -> dict[str, object]:
    """``substrait-opt run FILE... --tables TABLES --out OUT`` in one process; each plan's answer."""
    proc = subprocess.run(_cli("run", *map(str, files.values()), "--tables", str(tables), "--out", str(out),
                               "--show", "0", "--master", "local[2]", "--conf", "spark.sql.shuffle.partitions=4"),
                          capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stderr
    return {name: pq.read_table(out / f"{name}.parquet") for name in files}


@pytest.mark.spark
def test_optimize_then_run_in_separate_processes(tmp_path, tpcds_dir, tpcds_plans):
    """The CLI's two steps in their own processes give DuckDB's answers: DataFusion's TPC-DS plans with
    several grouping sets (a second conformation of the written plan answered ``total_sum 3`` for Q70)
    and DuckDB's plans of two queries (its emit-less projects are conformed on loading). One ``run``
    process: one Spark start."""
    from optimizer.difftest.results import compare_tables
    from workloads.tpcds import TPCDSOracle, tpcds_queries

    src = tmp_path / "src"
    src.mkdir()
    sources, queries = {}, {}
    for producer, numbers in (("datafusion", GROUPING_SET_QUERIES), ("duckdb", DUCKDB_QUERIES)):
        for n in numbers:
            path = src / f"{producer}_q{n:02d}.binpb"
            path.write_bytes(tpcds_plans[producer][n])
            sources[path.stem], queries[path.stem] = path, n
    opt = tmp_path / "opt"
    opt.mkdir()
    answers = _run_files(_optimize_to_files(sources, tpcds_dir, opt), tpcds_dir, tmp_path / "out")
    oracle = TPCDSOracle(tpcds_dir)
    texts = tpcds_queries()
    try:
        expected = {name: oracle(texts[n]) for name, n in queries.items()}
    finally:
        oracle.close()
    wrong = {}
    for name, table in answers.items():
        result = compare_tables(table, expected[name], decimal_ulp=True)
        if not result.equal:
            wrong[name] = str(result)[:300]
    assert len(answers) == len(sources) and wrong == {}


@pytest.mark.spark
def test_a_plan_written_for_a_target_means_the_same_read_back(spark, tpcds_dir, tpcds_plans, backend, duckdb_oracle,
                                                             datafusion_tpch_plans, duckdb_tpch_plans):
    """A plan written in a target's conventions (DataFusion's grouping-set numbering, DuckDB's projects,
    the joins the write stage puts for subqueries and anti joins) says so in its version; read back by
    this tool it gives, on Spark, the answer it gives on the target."""
    from optimizer.difftest.results import compare_tables
    from optimizer.driver import optimize
    from optimizer.spark import SparkBackend
    from workloads.tpcds import TPCDSOracle, tpcds_queries
    from workloads.tpch import tpch_query

    cases = [("datafusion", 70, tpcds_plans["datafusion"][70], SparkBackend(spark, tables=tpcds_dir), None)]
    cases += [("duckdb", n, plans[n], backend, duckdb_oracle(tpch_query(n)))
              for plans in (duckdb_tpch_plans, datafusion_tpch_plans) for n in (1, 3)]
    # the write stage's joins for DuckDB: a scalar subquery and an anti join (Q22), NOT EXISTS (Q16); for
    # DataFusion: extract as date_part and the join keys implied below (DuckDB's Q9)
    cases += [("duckdb", n, datafusion_tpch_plans[n], backend, duckdb_oracle(tpch_query(n))) for n in (16, 22)]
    cases += [("datafusion", 9, duckdb_tpch_plans[9], backend, duckdb_oracle(tpch_query(9)))]
    oracle = TPCDSOracle(tpcds_dir)
    try:
        cases[0] = cases[0][:4] + (oracle(tpcds_queries()[70]),)
    finally:
        oracle.close()
    for target, n, data, on, expected in cases:
        written = optimize(load_plan(data), target=target)
        assert written.version.producer == f"{PRODUCER} for {target}"
        read_back = load_plan(dump_plan(written, "binpb"))
        result = compare_tables(on.execute(read_back), expected, decimal_ulp=True)
        assert result.equal, f"written for {target}, q{n}: {result}"


def test_a_plan_with_older_fields_is_not_written_as_json(tmp_path, duckdb_tpch_plans):
    """A plan written for DuckDB 1.1.3 carries Substrait 0.53's fields beside today's (DuckDB reads only
    those): JSON would drop them and DuckDB would read another plan, so JSON is refused, exit 2 naming
    where; binary keeps them."""
    from optimizer.driver import optimize
    from optimizer.errors import PlanError

    written = optimize(load_plan(duckdb_tpch_plans[1]), target="duckdb")
    with pytest.raises(PlanError, match="write it as binpb"):
        dump_plan(written, "json")
    assert load_plan(dump_plan(written, "binpb")) == load_plan(dump_plan(written, "binpb"))
    src = tmp_path / "q1.binpb"
    src.write_bytes(duckdb_tpch_plans[1])
    proc = subprocess.run(_cli("optimize", str(src), "--target", "duckdb", "--format", "json", "-o",
                               str(tmp_path / "q1.json")), capture_output=True, text=True)
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1 and "binpb" in proc.stderr, proc.stderr
    assert not (tmp_path / "q1.json").exists()
