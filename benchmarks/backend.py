"""The PySpark backend against Spark SQL: same queries, same session, same sink.

For every TPC-H query: the producer's plan (default DataFusion, not optimized) through
:class:`optimizer.spark.SparkBackend` next to Spark SQL running the query text on the same parquet files
(temporary views) in the same session, interleaved (a warm-up, then the median of ``--reps``), both
timed to a full result (``DataFrame.toArrow()``). Also the backend's own overhead: ``to_sql(plan)``
(Substrait to the Spark SQL text, no Spark involved once the tables are read), ``to_dataframe(plan)``
(the text run by ``spark.sql``: includes Spark's parse and analysis), next to ``spark.sql(text)`` of the
TPC-H query itself. Answers are checked equal. ``--remote sc://HOST:PORT`` measures over Spark Connect.

Targets (issue 13): ``to_dataframe`` median under 20 ms, the SQL text built in under 10 ms, backend /
Spark SQL geomean at most 1.02 (TPC-H SF 1).
Writes ``docs/benchmarks/backend.json`` and ``backend.md``.

Usage: ``python benchmarks/backend.py [--scale 1] [--queries 1-22] [--producer datafusion] [--reps 9]``.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks import common  # noqa: E402

TARGET_OVERHEAD_MS = 20.0
TARGET_SQL_MS = 10.0
TARGET_GEOMEAN = 1.02
TARGET_RATIO = 1.2


def parse_args(argv=None) -> argparse.Namespace:
    p = common.report_parser(__doc__, "backend", reps=9, queries=True)
    p.add_argument("--producer", default="datafusion", choices=["datafusion", "duckdb", "isthmus"])
    p.add_argument("--overhead-reps", type=int, default=10, help="to_dataframe calls per plan (median)")
    p.add_argument("--remote", default=None, metavar="sc://HOST:PORT", help="a Spark Connect server")
    return p.parse_args(argv)


def run(scale: float = 1.0, queries: list[int] | None = None, producer: str = "datafusion", reps: int = 9,
        warmup: int = 1, overhead_reps: int = 10, spark: Any = None,
        out_dir: Path | str | None = common.REPORT_DIR, name: str = "backend", progress: bool = True) -> dict:
    from optimizer.difftest.results import compare_tables
    from optimizer.spark import SparkBackend
    from workloads.tpch import TPCH_ORDER_BY, tpch_queries

    queries = queries or list(range(1, 23))
    spark = common.get_session(spark)
    started = time.time()
    _, tables = common.tpch_data(scale)
    texts = tpch_queries()
    errors: dict = {}
    plans = common.tpch_plans(tables, [producer], queries, errors)
    common.register_temp_views(spark, tables)
    backend = SparkBackend(spark, tables=tables)

    # JIT warm-up for the JVM's parser and analyzer: build every plan and analyse every query once, so
    # that the first queries' overhead is not the JVM's start-up (Q1 took 55 ms cold, 40 warm).
    for q in queries:
        plan = plans.get((producer, q))
        for build in (lambda plan=plan: backend.to_dataframe(plan), lambda q=q: spark.sql(texts[q])):
            try:
                build()
            except Exception:  # reported by the timed runs below
                pass

    rows = []
    bar = common.progress_bar(len(queries) * (2 * (warmup + reps) + 1), f"backend SF {scale:g}", progress)
    for q in queries:
        entry: dict[str, Any] = {"query": q}
        rows.append(entry)
        plan = plans.get((producer, q))
        if plan is None:
            entry["error"] = errors.get((producer, q), "no plan")
            bar.update(2 * (warmup + reps) + 1)
            continue
        sql = texts[q]
        variants = {"spark_sql": lambda sql=sql: common.collect(spark.sql(sql)),
                    "backend": lambda plan=plan: common.collect(backend.to_dataframe(plan))}
        times: dict[str, list[float]] = {k: [] for k in variants}
        answers: dict[str, Any] = {}
        for rep in range(warmup + reps):
            order = list(variants) if rep % 2 == 0 else list(reversed(variants))
            for key in order:
                bar.set_postfix_str(f"Q{q} {key}")
                if f"{key}_error" in entry:
                    bar.update()
                    continue
                try:
                    seconds, table = common.timed(variants[key])
                except Exception as exc:
                    entry[f"{key}_error"] = common.one_line(exc)
                    bar.update()
                    continue
                answers.setdefault(key, table)
                if rep >= warmup:
                    times[key].append(seconds)
                bar.update()
        # Overhead: Substrait -> DataFrame (the backend) vs SQL text -> DataFrame (Spark's parser/analyzer).
        overhead, sql_overhead, build = [], [], []
        if "backend_error" not in entry:
            for _ in range(max(1, overhead_reps)):
                build.append(common.timed(lambda plan=plan: backend.to_sql(plan))[0])
                overhead.append(common.timed(lambda plan=plan: backend.to_dataframe(plan))[0])
                sql_overhead.append(common.timed(lambda sql=sql: spark.sql(sql))[0])
        bar.update()
        entry["spark_sql_s"] = common.median(times["spark_sql"])
        entry["backend_s"] = common.median(times["backend"])
        entry["backend_vs_spark_sql"] = common.ratio(entry["backend_s"], entry["spark_sql_s"])
        entry["to_dataframe_ms"] = None if not overhead else round(common.median(overhead) * 1000, 2)
        entry["to_sql_ms"] = None if not build else round(common.median(build) * 1000, 2)
        entry["spark_sql_parse_ms"] = (None if not sql_overhead
                                       else round(common.median(sql_overhead) * 1000, 2))
        if "backend" in answers and "spark_sql" in answers:
            verdict = compare_tables(answers["backend"], answers["spark_sql"], ordered_by=TPCH_ORDER_BY.get(q))
            entry["equal"] = verdict.equal
            if not verdict.equal:
                entry["difference"] = str(verdict).split("\n")[0]
        else:
            entry["equal"] = False
    bar.close()

    ok = [e for e in rows if e.get("backend_s") is not None and e.get("spark_sql_s") is not None]
    overheads = [e["to_dataframe_ms"] for e in rows if e.get("to_dataframe_ms") is not None]
    summary = {
        "scale_factor": scale,
        "producer": producer,
        "plans": len(ok),
        "equal": sum(1 for e in rows if e.get("equal")),
        "geomean_backend_vs_spark_sql": common.geomean(e["backend_vs_spark_sql"] for e in ok),
        "max_backend_vs_spark_sql": max((e["backend_vs_spark_sql"] for e in ok), default=None),
        "median_to_dataframe_ms": common.median(overheads),
        "max_to_dataframe_ms": max(overheads, default=None),
        "median_to_sql_ms": common.median([e["to_sql_ms"] for e in rows if e.get("to_sql_ms") is not None]),
        "max_to_sql_ms": max((e["to_sql_ms"] for e in rows if e.get("to_sql_ms") is not None), default=None),
        "median_spark_sql_parse_ms": common.median([e["spark_sql_parse_ms"] for e in rows if e.get("spark_sql_parse_ms")]),
        "over_overhead_target": [e["query"] for e in rows if (e.get("to_dataframe_ms") or 0) > TARGET_OVERHEAD_MS],
        "over_ratio_target": [e["query"] for e in ok if e["backend_vs_spark_sql"] > TARGET_RATIO],
        "failed": {e["query"]: e.get("error") or e.get("backend_error") or e.get("spark_sql_error")
                   for e in rows if e.get("backend_s") is None},
    }
    report = {"summary": summary,
              "config": {"scale_factor": scale, "producer": producer, "reps": reps, "warmup": warmup,
                         "remote": type(spark).__module__.startswith("pyspark.sql.connect"),
                         "overhead_reps": overhead_reps, "sink": "DataFrame.toArrow()",
                         "machine": common.machine(), "wall_seconds": round(time.time() - started, 1)},
              "queries": rows}
    if out_dir is not None:
        common.write_report(out_dir, name, report, markdown)
    return report


def markdown(report: dict) -> str:
    s = report["summary"]
    cfg = report["config"]
    lines = common.report_head(
        f"PySpark backend vs Spark SQL, TPC-H SF {s['scale_factor']:g} ({s['producer']} plans, not optimized)", cfg,
        "`to_dataframe` is the backend's own overhead (Substrait plan to a lazy DataFrame), `spark.sql` the same "
        "step for the SQL text; both after every plan and query was built once (the JVM's JIT warm, as in a "
        "session that runs many plans).")
    lines += [
        "| summary | value | target |",
        "| --- | --- | --- |",
        f"| geomean backend / Spark SQL | {common.fmt(s['geomean_backend_vs_spark_sql'])} "
        f"| <= {TARGET_GEOMEAN} |",
        f"| worst backend / Spark SQL | {common.fmt(s['max_backend_vs_spark_sql'])} | <= {TARGET_RATIO} |",
        f"| median `to_dataframe` | {common.fmt(s['median_to_dataframe_ms'])} ms "
        f"| < {TARGET_OVERHEAD_MS:g} ms |",
        f"| worst `to_dataframe` | {common.fmt(s['max_to_dataframe_ms'])} ms | < {TARGET_OVERHEAD_MS:g} ms |",
        f"| median `to_sql` (SQL text built) | {common.fmt(s.get('median_to_sql_ms'))} ms "
        f"| < {TARGET_SQL_MS:g} ms |",
        f"| worst `to_sql` | {common.fmt(s.get('max_to_sql_ms'))} ms | |",
        f"| median `spark.sql(text)` | {common.fmt(s['median_spark_sql_parse_ms'])} ms | |",
        f"| answers equal | {s['equal']} of {s['plans']} | all |",
        "",
    ]
    rows = []
    for e in report["queries"]:
        if e.get("error"):
            rows.append([f"Q{e['query']}", "–", "–", "–", "–", "–", e["error"]])
            continue
        rows.append([f"Q{e['query']}", common.fmt(e.get("spark_sql_s")), common.fmt(e.get("backend_s")),
                     common.fmt(e.get("backend_vs_spark_sql")),
                     common.fmt_ms((e.get("to_dataframe_ms") or 0) / 1000)
                     if e.get("to_dataframe_ms") is not None else "–",
                     common.fmt(e.get("spark_sql_parse_ms")),
                     "yes" if e.get("equal") else f"**no** {e.get('difference') or e.get('backend_error') or ''}"])
    lines.append(common.markdown_table(["query", "Spark SQL s", "backend s", "ratio", "to_dataframe ms",
                                        "spark.sql ms", "equal"], rows))
    if s["over_overhead_target"] or s["over_ratio_target"]:
        lines += ["", "Over target: overhead " + (", ".join(f"Q{q}" for q in s["over_overhead_target"]) or "none")
                  + "; execution ratio " + (", ".join(f"Q{q}" for q in s["over_ratio_target"]) or "none")
                  + ". See [../benchmarks.md](../benchmarks.md)."]
    lines.append("")
    return "\n".join(lines)


def main(argv=None, spark: Any = None) -> dict:
    args = parse_args(argv)
    if spark is None and (args.master or args.remote):
        from optimizer.spark.session import get_spark

        spark = get_spark(args.master, remote=args.remote)
    report = run(scale=args.scale, queries=common.parse_queries(args.queries), producer=args.producer,
                 reps=args.reps, warmup=args.warmup, overhead_reps=args.overhead_reps, spark=spark,
                 out_dir=Path(args.out) if args.out else None, name=args.name, progress=not args.no_progress)
    s = report["summary"]
    print(f"backend SF {s['scale_factor']:g}: "
          f"geomean backend/SQL {common.fmt(s['geomean_backend_vs_spark_sql'])}, "
          f"worst {common.fmt(s['max_backend_vs_spark_sql'])}, "
          f"median to_dataframe {common.fmt(s['median_to_dataframe_ms'])} ms, "
          f"worst {common.fmt(s['max_to_dataframe_ms'])} ms, equal {s['equal']}/{s['plans']}")
    return report


if __name__ == "__main__":
    main()
