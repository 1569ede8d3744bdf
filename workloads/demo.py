"""``make demo``: TPC-H plans from DataFusion, optimized, run on local Spark before and after.

Generates TPC-H at SF 0.1 (once; reused), produces real plans with DataFusion, optimizes them with
Spark statistics, prints the plan trees before and after with estimates and the rules that fired,
runs both plans on local Spark and shows that the answers are equal and how long each took.
"""

from __future__ import annotations

import argparse
import sys
import time
from statistics import median as statistics_median

DEMO_QUERIES = (3, 5, 10, 18)
#: Timed runs of each plan (after a warm-up), interleaved; the median is shown.
RUNS = 3


def _banner(text: str) -> None:
    print("\n" + "=" * 100 + f"\n{text}\n" + "=" * 100)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m workloads.demo", description=__doc__)
    parser.add_argument("--scale", type=float, default=0.1, help="TPC-H scale factor (default 0.1)")
    parser.add_argument("--queries", default=",".join(map(str, DEMO_QUERIES)), help="TPC-H query numbers")
    parser.add_argument("--master", default=None, help="Spark master URL (default local[*])")
    args = parser.parse_args(argv)
    queries = [int(q) for q in args.queries.split(",") if q.strip()]

    from cost.statistics import default_statistics
    from optimizer.capabilities import default_capabilities
    from optimizer.difftest.results import compare_tables
    from optimizer.driver import Optimizer
    from optimizer.explain.estimates import explain_before_after
    from optimizer.plan_io import load_plan
    from optimizer.spark import SparkBackend
    from optimizer.spark.session import get_spark
    from workloads.producers import datafusion_plan
    from workloads.tpch import generate_tpch, table_paths, tpch_query

    started = time.perf_counter()
    _banner(f"TPC-H SF {args.scale}: data")
    data_dir = generate_tpch(args.scale)
    tables = {k: str(v) for k, v in table_paths(data_dir, include_t=False).items()}
    print(f"tables in {data_dir}")

    spark = get_spark(args.master)
    statistics = default_statistics(spark=spark, tables=tables)
    t0 = time.perf_counter()
    for name in tables:  # ANALYZE once per table (cached on disk), so optimize times are the optimizer's own
        statistics.table(name)
    print(f"statistics for {len(tables)} tables in {time.perf_counter() - t0:.1f} s (Spark ANALYZE, cached)")
    backend = SparkBackend(spark, tables=tables)
    optimizer = Optimizer(statistics=statistics, capabilities=default_capabilities())

    # One-time start-up (loading the extension YAMLs, first imports) is not the optimizer's per-plan time.
    optimizer.run(load_plan(datafusion_plan(tpch_query(queries[0]), tables)))

    all_equal = True
    summary = []
    for q in queries:
        _banner(f"TPC-H Q{q}: plan produced by DataFusion")
        plan = load_plan(datafusion_plan(tpch_query(q), tables))
        result = optimizer.run(plan)
        print(explain_before_after(plan, result, statistics))
        # Warm up each plan once (JIT, file listing), then the median of RUNS interleaved runs.
        before, after = backend.execute(plan), backend.execute(result.plan)
        times: dict[str, list[float]] = {"original": [], "optimized": []}
        for _ in range(RUNS):
            for label, p in (("original", plan), ("optimized", result.plan)):
                t0 = time.perf_counter()
                backend.execute(p)
                times[label].append(time.perf_counter() - t0)
        a, b = statistics_median(times["original"]), statistics_median(times["optimized"])
        verdict = compare_tables(after, before)
        all_equal &= verdict.equal
        summary.append((q, before.num_rows, a, b, result.seconds, verdict.equal))
        print(f"\nQ{q}: original {a:.2f} s, optimized {b:.2f} s (median of {RUNS}), "
              f"{'EQUAL' if verdict.equal else 'DIFFERENT: ' + verdict.reason} ({before.num_rows} rows)")

    _banner("Summary")
    print(f"{'query':>6} {'rows':>8} {'original s':>11} {'optimized s':>12} {'optimize ms':>12}  answers")
    for q, rows, a, b, opt, eq in summary:
        print(f"{'Q' + str(q):>6} {rows:>8} {a:>11.2f} {b:>12.2f} {opt * 1000:>12.1f}  {'equal' if eq else 'DIFFERENT'}")
    print(f"\ndemo finished in {time.perf_counter() - started:.0f} s; all answers equal: {all_equal}")
    return 0 if all_equal else 1


if __name__ == "__main__":
    sys.exit(main())
