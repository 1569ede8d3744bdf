"""Spark's planning of an optimized plan against Spark CBO's planning of the query text, per query.

What a timed run of ``make bench`` pays before any row is read: for Spark CBO, ``spark.sql(text)`` (parse,
analysis) and the planning ``explain()`` forces (optimization with join reordering, physical planning);
for the optimized plan, the backend's ``to_sql`` (Substrait to Spark SQL text, in Python), ``spark.sql``
of that text and the same ``explain()``. Every query's variants are interleaved, after ``--warmup`` rounds
over all queries (the JVM's JIT warm, as in the benchmark, which runs each query several times).

The report sets these beside the benchmark's own times (``docs/benchmarks/<suite>_sf1.json``, or
``--times``): the geometric mean of optimized / Spark CBO as measured, and as it would read if the
optimized plan's planning cost what CBO's does (each optimized time less the difference of the medians):
how much of the gap to Spark CBO is planning, not execution. Writes
``docs/benchmarks/planning_time_<suite>.json`` and ``.md``.

Usage: ``python benchmarks/planning_time.py [--suite tpcds] [--queries 1-99] [--reps 3]``.
"""

from __future__ import annotations

import contextlib
import io
import json
import re
import sys
import time
from pathlib import Path
from typing import Any

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks import common  # noqa: E402
from benchmarks.tpch import SUITES, suite_data, suite_plans, suite_texts  # noqa: E402


def parse_args(argv=None):
    p = common.report_parser(__doc__, "planning_time", reps=3, queries=True)
    p.set_defaults(queries=None)  # the suite's queries
    p.add_argument("--suite", choices=sorted(SUITES), default="tpcds")
    p.add_argument("--producer", default="datafusion")
    p.add_argument("--times", default=None,
                   help="the benchmark report whose times the effect is read from (default docs/benchmarks/<suite>_sf1.json, "
                        "tpch.json for TPC-H)")
    return p.parse_args(argv)


def _planned(df) -> None:
    """Spark's physical plan of ``df`` (``explain()`` plans it; its text is not kept)."""
    with contextlib.redirect_stdout(io.StringIO()):
        df.explain()


def _times_report(suite: str, path: str | None) -> Path:
    if path:
        return Path(path)
    return common.REPORT_DIR / ("tpch.json" if suite == "tpch" else f"{suite}_sf1.json")


def effect(rows: list[dict], times: dict, producer: str) -> dict:
    """Geomean optimized / Spark CBO from ``times`` (a ``benchmarks/tpch.py`` report), as measured and with
    each optimized time less (its planning - CBO's planning)."""
    measured, adjusted = [], []
    by_query = {q["query"]: q for q in times["queries"]}
    for r in rows:
        q = by_query.get(r["query"])
        info = (q or {}).get("plans", {}).get(producer, {})
        d, b = info.get("optimized_s"), (q or {}).get("spark_cbo_s")
        if not d or not b or r.get("extra_ms") is None:
            continue
        measured.append(d / b)
        adjusted.append(max(d - r["extra_ms"] / 1000, 1e-3) / b)
    return {"plans": len(measured), "geomean_d_b": common.geomean(measured),
            "geomean_d_b_planning_as_cbo": common.geomean(adjusted),
            "times_commit": times.get("config", {}).get("machine", {}).get("commit")}


def run(suite_name: str = "tpcds", queries: list[int] | None = None, producer: str = "datafusion", reps: int = 3,
        warmup: int = 1, spark: Any = None, times_path: str | None = None, scale: float = 1.0,
        out_dir: Path | str | None = common.REPORT_DIR, name: str = "planning_time") -> dict:
    from optimizer.capabilities import default_capabilities
    from optimizer.driver import Optimizer
    from optimizer.spark import SparkBackend
    from optimizer.spark.statistics import default_statistics

    suite = SUITES[suite_name]
    queries = queries or list(suite.queries)
    spark = common.get_session(spark)
    started = time.time()
    data_dir, tables = suite_data(suite, scale)
    texts = suite_texts(suite)
    errors: dict = {}
    plans = suite_plans(suite, data_dir, tables, [producer], queries, errors)
    common.register_temp_views(spark, tables)
    needed = sorted({t for q in queries for t in tables if re.search(rf"\b{t}\b", texts[q], re.IGNORECASE)})
    database = f"bench_{suite.name}_sf{scale:g}".replace(".", "_")
    cbo = common.analyzed_session(spark, tables, database, analyze=needed)
    statistics = default_statistics(spark=spark, tables=tables)
    backend = SparkBackend(spark, tables=tables)
    optimizer = Optimizer(statistics=statistics, capabilities=default_capabilities())
    optimized = {q: optimizer.run(plans[(producer, q)]).plan for q in queries if (producer, q) in plans}
    cbo_conf = {**common.CBO_CONF, **dict(suite.sql_conf)}

    def cbo_planning(q: int) -> float:
        with common.conf_set(cbo, cbo_conf):
            return common.timed(lambda: _planned(cbo.sql(texts[q])))[0]

    def ours(q: int) -> tuple[float, float, float]:
        to_sql, (text, bound) = common.timed(lambda: backend.to_sql(optimized[q]))
        sql, df = common.timed(lambda: spark.sql(text, **bound))
        plan, _ = common.timed(lambda: _planned(df))
        return to_sql, sql, plan

    samples: dict[int, dict[str, list[float]]] = {q: {"cbo": [], "to_sql": [], "sql": [], "plan": []} for q in optimized}
    for rep in range(warmup + reps):
        for q in optimized:
            if rep % 2 == 0:  # each first in turn
                c, (to_sql, sql, plan) = cbo_planning(q), ours(q)
            else:
                (to_sql, sql, plan), c = ours(q), cbo_planning(q)
            if rep >= warmup:
                for key, value in (("cbo", c), ("to_sql", to_sql), ("sql", sql), ("plan", plan)):
                    samples[q][key].append(value)

    rows = []
    for q, s in samples.items():
        med = {k: common.median(v) * 1000 for k, v in s.items()}
        total = med["to_sql"] + med["sql"] + med["plan"]
        rows.append({"query": q, "cbo_ms": round(med["cbo"], 2), "to_sql_ms": round(med["to_sql"], 2),
                     "spark_sql_ms": round(med["sql"], 2), "explain_ms": round(med["plan"], 2),
                     "optimized_ms": round(total, 2), "extra_ms": round(total - med["cbo"], 2)})
    times_file = _times_report(suite.name, times_path)
    summary = {"suite": suite.name, "scale_factor": scale, "producer": producer, "plans": len(rows),
               "median_cbo_ms": common.median([r["cbo_ms"] for r in rows]),
               "median_optimized_ms": common.median([r["optimized_ms"] for r in rows]),
               "median_to_sql_ms": common.median([r["to_sql_ms"] for r in rows]),
               "median_spark_sql_ms": common.median([r["spark_sql_ms"] for r in rows]),
               "median_explain_ms": common.median([r["explain_ms"] for r in rows]),
               "median_extra_ms": common.median([r["extra_ms"] for r in rows]),
               "mean_extra_ms": round(sum(r["extra_ms"] for r in rows) / len(rows), 2) if rows else None,
               "not_planned": {f"Q{q}": m for (_, q), m in errors.items()}}
    if times_file.exists() and scale == 1.0:  # the benchmark's times are at SF 1
        summary["effect"] = {"times": times_file.name, **effect(rows, json.loads(times_file.read_text()), producer)}
    report = {"summary": summary,
              "config": {"reps": reps, "warmup": warmup, "sink": "explain() (no rows read)",
                         "machine": common.machine(), "wall_seconds": round(time.time() - started, 1)},
              "queries": rows}
    if out_dir is not None:
        common.write_report(out_dir, f"{name}_{suite.name}", report, markdown)
    return report


def markdown(report: dict) -> str:
    s = report["summary"]
    lines = common.report_head(
        f"Planning: optimized plans against Spark CBO's SQL ({s['suite'].upper()} SF {s['scale_factor']:g}, "
        f"{s['producer']} plans)",
        report["config"],
        "Times in ms, before any row is read. Spark CBO: `spark.sql(text)` and `explain()` with CBO and join "
        "reordering on ANALYZEd tables. Optimized: the backend's `to_sql` (Python), `spark.sql` of its text "
        "(parse, analysis), `explain()` (optimization, physical planning).")
    rows = [["median Spark CBO planning", f"{common.fmt(s['median_cbo_ms'])} ms"],
            ["median optimized plan's planning", f"{common.fmt(s['median_optimized_ms'])} ms"],
            ["of which `to_sql` / `spark.sql` / `explain()` (medians)",
             f"{common.fmt(s['median_to_sql_ms'])} / {common.fmt(s['median_spark_sql_ms'])} / "
             f"{common.fmt(s['median_explain_ms'])} ms"],
            ["optimized minus CBO, median / mean", f"{common.fmt(s['median_extra_ms'])} / {common.fmt(s['mean_extra_ms'])} ms"]]
    if "effect" in s:
        e = s["effect"]
        rows += [[f"geomean optimized / Spark CBO in `{e['times']}` (commit {e['times_commit']}, {e['plans']} plans)",
                  common.fmt(e["geomean_d_b"])],
                 ["the same, each optimized time less its planning's excess over CBO's",
                  common.fmt(e["geomean_d_b_planning_as_cbo"])]]
    lines += [common.markdown_table(["summary", "value"], rows), ""]
    lines.append(common.markdown_table(
        ["query", "Spark CBO", "optimized", "to_sql", "spark.sql", "explain()", "optimized - CBO"],
        ([f"Q{r['query']}", r["cbo_ms"], r["optimized_ms"], r["to_sql_ms"], r["spark_sql_ms"], r["explain_ms"],
          r["extra_ms"]] for r in sorted(report["queries"], key=lambda r: -r["extra_ms"]))))
    lines.append("")
    return "\n".join(lines)


def main(argv=None, spark: Any = None) -> dict:
    args = parse_args(argv)
    report = run(args.suite, None if args.queries in (None, "all") else common.parse_queries(args.queries),
                 args.producer, args.reps, args.warmup, spark, args.times, args.scale,
                 Path(args.out) if args.out else None, args.name)
    s = report["summary"]
    e = s.get("effect", {})
    print(f"planning {s['suite']}: CBO {s['median_cbo_ms']:.1f} ms, optimized {s['median_optimized_ms']:.1f} ms "
          f"(median); d/b {common.fmt(e.get('geomean_d_b'))} -> {common.fmt(e.get('geomean_d_b_planning_as_cbo'))} "
          f"with CBO's planning")
    return report


if __name__ == "__main__":
    main()
