"""TPC-DS on Spark: does each producer's plan, original and optimized, give DuckDB's answer?

For each of the 99 queries of DuckDB's ``tpcds_queries()``, over the TPC-DS tables of DuckDB's
``CALL dsdgen(sf=...)`` (SF 0.01 by default, cached beside the TPC-H data), in one Spark session:

* DataFusion 55's plan and DuckDB 1.1.3's plan (both produced live; a query a producer cannot write is
  ``not produced`` with its reason);
* each plan run through :class:`optimizer.spark.SparkBackend` as written, and optimized with Parquet-footer
  statistics; each answer compared with DuckDB's answer to the SQL as a multiset (floats to 1e-9 relative,
  decimals within one unit of their last place).

Writes ``docs/benchmarks/tpcds.json`` and ``docs/benchmarks/tpcds.md`` (per query, per producer, original /
optimized, with the date and the commit).

Usage: ``python benchmarks/tpcds.py [--scale 0.01] [--queries 1-99] [--out docs/benchmarks]``.
"""

from __future__ import annotations

import argparse
import datetime
import json
import subprocess
import sys
import time
from pathlib import Path

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.common import get_session, parse_queries  # noqa: E402
from workloads.tpcds import PRODUCERS, Outcome, generate_tpcds, producer_bug, run_tpcds  # noqa: E402


def _commit() -> str:
    root = Path(__file__).resolve().parent.parent
    try:
        out = subprocess.run(
            ["git", "-C", str(root), "rev-parse", "--short", "HEAD"], capture_output=True, text=True, check=True
        )
    except (OSError, subprocess.CalledProcessError):
        return "unknown"
    return out.stdout.strip()


def _cell(outcome: Outcome, bug: str | None) -> str:
    cell = {"equal": "equal", "not produced": "—"}.get(outcome.status, outcome.status)
    return f"{cell} (producer bug)" if bug and outcome.status != "not produced" else cell


def write_report(results, out: Path, scale: float, seconds: float) -> None:
    out.mkdir(parents=True, exist_ok=True)
    today = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d")
    commit = _commit()
    counts = {}
    for producer in PRODUCERS:
        produced = [r[producer] for r in results.values() if r[producer][0].status != "not produced"]
        meant = [
            r[producer]
            for n, r in results.items()
            if r[producer][0].status != "not produced" and not producer_bug(n, producer)
        ]
        counts[producer] = {
            "produced": len(produced),
            "compared": len(meant),
            "compared_both_equal": sum(o[0].status == o[1].status == "equal" for o in meant),
            "original_equal": sum(o[0].status == "equal" for o in produced),
            "optimized_equal": sum(o[1].status == "equal" for o in produced),
            "both_equal": sum(o[0].status == o[1].status == "equal" for o in produced),
        }
    doc = {
        "date": today,
        "commit": commit,
        "scale": scale,
        "seconds": round(seconds, 1),
        "summary": counts,
        "queries": {
            str(n): {p: [{"status": o.status, "detail": o.detail} for o in r[p]] for p in PRODUCERS}
            for n, r in results.items()
        },
    }
    (out / "tpcds.json").write_text(json.dumps(doc, indent=1) + "\n")
    lines = [
        "# TPC-DS: each producer's plan on Spark against DuckDB's answer",
        "",
        f"Produced by `benchmarks/tpcds.py` (`write_report`, here from a run of tests/test_tpcds.py or the script) on {today} at commit `{commit}`: TPC-DS SF {scale:g} from "
        "DuckDB's `CALL dsdgen`, the 99 queries of DuckDB's `tpcds_queries()`, plans written live by "
        "DataFusion 55 and DuckDB 1.1.3, run through the Spark backend as written (*original*) and after "
        "`optimize` with Parquet-footer statistics (*optimized*). *equal*: the same multiset of rows as "
        "DuckDB's answer to the SQL (floats to 1e-9 relative, decimals within one unit of their last place); "
        "*—*: the producer writes no plan for the query (reason below). "
        f"The whole run took {seconds:.0f} s.",
        "",
        "| producer | plans | original equal | optimized equal | plans without producer bug | of those, both equal |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for producer in PRODUCERS:
        c = counts[producer]
        lines.append(
            f"| {producer} | {c['produced']} | {c['original_equal']} | {c['optimized_equal']} "
            f"| {c['compared']} | {c['compared_both_equal']} |"
        )
    lines += [
        "",
        "| query | DataFusion original | DataFusion optimized | DuckDB original | DuckDB optimized |",
        "|---:|---|---|---|---|",
    ]
    for n, r in results.items():
        cells = [_cell(o, producer_bug(n, p)) for p in PRODUCERS for o in r[p]]
        lines.append(f"| q{n:02d} | " + " | ".join(cells) + " |")
    lines += ["", "## Why a plan is not equal or not produced", ""]
    for n, r in results.items():
        for producer in PRODUCERS:
            original, optimized = r[producer]
            for stage, o in (("original", original), ("optimized", optimized)):
                if o.status == "equal" or (stage == "optimized" and o == original):
                    continue
                bug = producer_bug(n, producer)
                note = f" -- producer bug: {bug}" if bug and o.status != "not produced" else ""
                lines.append(f"- q{n:02d} {producer} {stage if o != optimized else 'both'}: {o}{note}")
    (out / "tpcds.md").write_text("\n".join(lines) + "\n")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scale", type=float, default=0.01)
    parser.add_argument("--queries", default="1-99")
    parser.add_argument("--out", type=Path, default=Path(__file__).resolve().parent.parent / "docs" / "benchmarks")
    args = parser.parse_args(argv)
    queries = parse_queries(args.queries)
    data_dir = generate_tpcds(args.scale)
    spark = get_session()
    start = time.perf_counter()
    results = run_tpcds(spark, data_dir, queries, log=print)
    write_report(results, args.out, args.scale, time.perf_counter() - start)
    return 0


if __name__ == "__main__":
    sys.exit(main())
