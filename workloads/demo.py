"""``make demo``: the tutorial's commands (docs/tutorial.md) on TPC-H, then how fast each plan runs on Spark.

Generates TPC-H at SF 0.1 (once; reused) and writes each query's SQL to a file. Then it runs, printing
each command as a user would type it: ``substrait-opt plan`` (DataFusion writes the plans), ``explain``
and ``optimize --explain`` of the first query, ``optimize`` of the others, and ``diff`` of all (the
answers of the original and optimized plans compared). The commands run in this process (the CLI's
``main``), so they share one Spark.

It ends with one table: per query, Spark SQL on the same text, the original plan and the optimized one,
each warm (run once before timing: JVM warm-up, file listing) and timed as the median of ``--runs``
runs, interleaved; and whether the optimized plan's answer equals Spark SQL's.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import shlex
import sys
import time
from statistics import median

DEMO_QUERIES = (3, 5, 10, 18)
#: Timed runs of each query (after one warm-up run), interleaved; the median is shown.
RUNS = 3


def _command(argv: list[str]) -> int:
    """``substrait-opt ARGV``, printed as typed, run by the CLI in this process; its exit code."""
    from optimizer.cli import main

    print(f"\n$ substrait-opt {shlex.join(argv)}", flush=True)
    code = main(argv)
    sys.stdout.flush()
    sys.stderr.flush()
    if code not in (0, 1):
        raise SystemExit(f"demo: substrait-opt {argv[0]} failed (exit {code})")
    return code


def _seconds(run) -> float:
    started = time.perf_counter()
    run()
    return time.perf_counter() - started


def _spread_note(spreads: list[tuple[float, str]], runs: int) -> str:
    """How far the timed runs of one cell lie apart: a gap between two columns smaller than that
    (2 cores, other work on the machine) does not tell which plan is faster."""
    if runs < 2 or not spreads:
        return "(one timed run per cell: no spread measured; --runs 5 for a steadier median)"
    spread, cell = max(spreads)
    return (f"(the runs of a cell lie up to {spread:.2f}x apart, slowest / fastest: {cell}; "
            f"a gap smaller than that may be noise)")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m workloads.demo", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--scale", type=float, default=0.1, help="TPC-H scale factor (default 0.1)")
    parser.add_argument("--queries", default=",".join(map(str, DEMO_QUERIES)), help="TPC-H query numbers")
    parser.add_argument("--runs", type=int, default=RUNS, help=f"timed runs of each query (default {RUNS})")
    parser.add_argument("--master", default=None, help="Spark master URL (default local[*])")
    args = parser.parse_args(argv)
    queries = [int(q) for q in args.queries.split(",") if q.strip()]

    from optimizer.difftest.results import compare_tables
    from optimizer.plan_io import load_plan
    from optimizer.spark import SparkBackend
    from optimizer.spark.session import get_spark
    from workloads.tpch import TPCH_ORDER_BY, default_data_dir, generate_tpch, table_paths, tpch_query

    started = time.perf_counter()
    print(f"TPC-H SF {args.scale:g}: generating the tables (once)...", flush=True)
    data = generate_tpch(args.scale)
    work = default_data_dir(args.scale).parent / f"demo-sf{args.scale:g}"
    work.mkdir(parents=True, exist_ok=True)
    for q in queries:
        (work / f"q{q}.sql").write_text(tpch_query(q))
    print(f"tables in {data}; the commands below run in {work}, beside the SQL files", flush=True)
    print("starting Spark...", flush=True)
    spark = get_spark(args.master)  # the commands below take this session

    # The commands run in the folder of the SQL files, with the names a user would type.
    files = {q: {kind: f"q{q}{suffix}" for kind, suffix in
                 (("sql", ".sql"), ("plan", ".binpb"), ("opt", ".opt.binpb"))} for q in queries}
    tables = os.path.relpath(data, work)
    with contextlib.chdir(work):
        for q in queries:
            _command(["plan", files[q]["sql"], "--tables", tables, "-o", files[q]["plan"]])
        first = queries[0]
        _command(["explain", files[first]["plan"]])
        _command(["optimize", files[first]["plan"], "--tables", tables, "-o", files[first]["opt"], "--explain"])
        for q in queries[1:]:
            _command(["optimize", files[q]["plan"], "--tables", tables, "-o", files[q]["opt"]])
        _command(["diff", *(files[q]["plan"] for q in queries), "--tables", tables])
    tables = str(data)

    # The table: Spark SQL on the same text over the same files, the original and the optimized plan.
    for name, path in table_paths(data).items():
        spark.read.parquet(str(path)).createOrReplaceTempView(name)
    backend = SparkBackend(spark, tables=tables)
    print(f"\ntiming each query warm (one run first), median of {args.runs} runs...", flush=True)
    rows = []
    spreads: list[tuple[float, str]] = []  # per cell: slowest / fastest of its timed runs
    all_equal = True
    for q in queries:
        plans = {kind: load_plan(work / files[q][kind]) for kind in ("plan", "opt")}
        runs = {
            "Spark SQL": lambda q=q: spark.sql(tpch_query(q)).toArrow(),
            "original": lambda p=plans["plan"]: backend.execute(p),
            "optimized": lambda p=plans["opt"]: backend.execute(p),
        }
        answers = {label: run() for label, run in runs.items()}  # the warm-up
        seconds: dict[str, list[float]] = {label: [] for label in runs}
        for _ in range(args.runs):
            for label, run in runs.items():
                seconds[label].append(_seconds(run))
        verdict = compare_tables(answers["optimized"], answers["Spark SQL"], ordered_by=TPCH_ORDER_BY[q])
        all_equal &= verdict.equal
        rows.append((f"Q{q}", *(median(seconds[label]) for label in runs),
                     "yes" if verdict.equal else f"NO: {verdict.reason}"))
        for label, times in seconds.items():
            spreads.append((max(times) / min(times), f"Q{q} {label}"))

    print(f"\nTPC-H SF {args.scale:g} on Spark {spark.version}, seconds (warm, median of {args.runs} runs):")
    print(f"{'query':<6} {'Spark SQL':>10} {'original':>10} {'optimized':>10}  equal")
    for name, sql_s, original_s, optimized_s, equal in rows:
        print(f"{name:<6} {sql_s:>10.2f} {original_s:>10.2f} {optimized_s:>10.2f}  {equal}")
    print(_spread_note(spreads, args.runs))
    print(f"('equal': the optimized plan's answer is Spark SQL's.) Demo finished in "
          f"{time.perf_counter() - started:.0f} s. The commands: docs/tutorial.md")
    return 0 if all_equal else 1


if __name__ == "__main__":
    sys.exit(main())
