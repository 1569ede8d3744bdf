"""The CLI's two steps in separate processes over every TPC-DS plan: ``substrait-opt optimize P -o FILE``,
then ``substrait-opt run FILE...``, each answer compared with DuckDB's answer to the SQL.

    python -m workloads.written_plans [--scale 0.01] [--producers datafusion,duckdb] [--queries 5,70]

Each plan is written by its producer (DataFusion 55, DuckDB 1.1.3: those it writes), optimized by one
``substrait-opt optimize`` process of its own (statistics from the Parquet footers), and all optimized files
run in one ``substrait-opt run`` process per producer. Prints one line per plan that is not equal and the
counts; exit 1 when any is not equal. DuckDB's plans of the ROLLUP queries and of
:data:`workloads.producers.DUCKDB_TPCDS_WRONG` mean another query as written and are not compared
(tests/test_tpcds.py skips them for the same reason).
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
from pathlib import Path

import pyarrow.parquet as pq

from workloads.tpcds import (
    TPCDSOracle,
    datafusion_tpcds_plans,
    duckdb_tpcds_plans,
    generate_tpcds,
    producer_bug,
    tpcds_queries,
)


def _cli(*args: str) -> list[str]:
    return [sys.executable, "-m", "optimizer", *args]


def main(argv: list[str] | None = None) -> int:
    from optimizer.difftest.results import compare_tables

    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--scale", type=float, default=0.01)
    p.add_argument("--producers", default="datafusion,duckdb")
    p.add_argument("--queries", default=None, help="comma-separated query numbers (default all 99)")
    args = p.parse_args(argv)
    queries = tuple(int(q) for q in args.queries.split(",")) if args.queries else tuple(range(1, 100))
    data = generate_tpcds(args.scale)
    texts = tpcds_queries()
    produce = {"datafusion": datafusion_tpcds_plans, "duckdb": duckdb_tpcds_plans}
    oracle = TPCDSOracle(data)
    expected = {n: oracle(texts[n]) for n in queries}
    oracle.close()
    failures = 0
    with tempfile.TemporaryDirectory() as tmp:
        for producer in args.producers.split(","):
            plans = produce[producer](data, queries)
            work = Path(tmp) / producer
            work.mkdir()
            files: dict[int, Path] = {}
            not_compared = 0
            for n, plan in plans.items():
                if not isinstance(plan, bytes):
                    continue  # the producer writes no plan
                if producer_bug(n, producer):
                    not_compared += 1
                    continue
                src, dest = work / f"q{n:02d}.binpb", work / f"q{n:02d}.opt.binpb"
                src.write_bytes(plan)
                proc = subprocess.run(_cli("optimize", str(src), "--tables", str(data), "--no-spark-stats",
                                           "-o", str(dest)), capture_output=True, text=True)
                if proc.returncode != 0:
                    print(f"{producer} q{n:02d}: optimize exit {proc.returncode}: {proc.stderr.strip()}")
                    failures += 1
                    continue
                files[n] = dest
            out = work / "out"
            proc = subprocess.run(_cli("run", *map(str, files.values()), "--tables", str(data), "--out", str(out),
                                       "--show", "0"), capture_output=True, text=True)
            if proc.returncode != 0:
                print(f"{producer}: run exit {proc.returncode}: {proc.stderr.strip()}")
                return 1
            equal = 0
            for n, dest in files.items():
                result = compare_tables(pq.read_table(out / f"{dest.stem}.parquet"), expected[n], decimal_ulp=True)
                if result.equal:
                    equal += 1
                else:
                    failures += 1
                    print(f"{producer} q{n:02d}: {' '.join(str(result).split())[:200]}")
            print(f"{producer}: {equal} of {len(files)} optimized plans, written and run in separate processes, "
                  f"give DuckDB's answer ({not_compared} not compared, {len(plans) - len(files) - not_compared} "
                  "not written by the producer or not optimized)")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
