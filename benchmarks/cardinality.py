"""Cardinality benchmark: q-error of every relation of the 22 DataFusion TPC-H plans against Spark.

    .venv/bin/python benchmarks/cardinality.py [--scale 1] [--queries 1,3,5] [--out docs/benchmarks]

TPC-H data comes from ``tpchgen-cli`` (:func:`workloads.tpch.generate_tpch`, generated once per scale);
the plans from DataFusion (:func:`workloads.producers.datafusion_plan`); statistics from Spark
``ANALYZE`` (cached) and the Parquet footers (:func:`optimizer.spark.statistics.default_statistics`).
Every subtree of every plan is run on Spark (:class:`optimizer.spark.SparkBackend`) and its rows
counted; the counts are cached in ``<data dir>/_cardinality_actuals.json`` keyed by the subtree's plan
bytes, so a second run (after changing the estimator) only estimates.

Reports the q-error (``max(est/act, act/est)``, both floored at 1) median, 90th and 95th percentiles and
maximum, overall, by relation kind and by join depth (joins on the path from the relation down to a
leaf), as a markdown table (``<out>/cardinality.md``) and a plot (``<out>/cardinality.png``).
Target at SF 1: median <= 1.5 and 95th percentile <= 10.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
import time
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def percentile(values: list[float], p: float) -> float:
    """The ``p``-th percentile (0-100) with linear interpolation.

    >>> percentile([1, 2, 3, 4], 50), percentile([5], 95)
    (2.5, 5.0)
    """
    xs = sorted(values)
    if not xs:
        return float("nan")
    pos = (len(xs) - 1) * p / 100.0
    lo = int(pos)
    hi = min(lo + 1, len(xs) - 1)
    return float(xs[lo] + (xs[hi] - xs[lo]) * (pos - lo))


def summarize(qs: list[float]) -> dict[str, float]:
    return {"n": len(qs), "median": percentile(qs, 50), "p90": percentile(qs, 90), "p95": percentile(qs, 95),
            "max": max(qs) if qs else float("nan")}


def _load_cache(path: Path) -> dict[str, int]:
    try:
        return json.loads(path.read_text())
    except (OSError, json.JSONDecodeError):
        return {}


def _save_cache(path: Path, cache: dict[str, int]) -> None:
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(cache, indent=0, sort_keys=True))
    tmp.replace(path)


def collect(scale: float, queries: list[int], master: str | None = None, use_cache: bool = True,
            log=print, spark=None) -> list[dict]:
    """One record per relation of each query's plan: estimate, actual rows, q-error."""
    from optimizer.cost.cardinality import CardinalityEstimator
    from optimizer.cost.estimates import q_error

    from optimizer.dag import annotate_schemas, to_dag
    from optimizer.explain.estimates import count_rows, join_depth, relation_paths, subtree_plan
    from optimizer.load.functions import function_table
    from optimizer.plan_io import load_plan
    from optimizer.spark import SparkBackend
    from optimizer.spark.session import get_spark
    from optimizer.spark.statistics import default_statistics
    from workloads.producers import datafusion_plan
    from workloads.tpch import generate_tpch, table_paths, tpch_query

    data_dir = generate_tpch(scale)
    tables = {k: str(v) for k, v in table_paths(data_dir, include_t=False).items()}
    spark = spark if spark is not None else get_spark(master)
    statistics = default_statistics(spark=spark, tables=tables)
    backend = SparkBackend(spark, tables=tables)
    cache_path = Path(data_dir) / "_cardinality_actuals.json"
    cache = _load_cache(cache_path) if use_cache else {}
    records: list[dict] = []
    for q in queries:
        t0 = time.perf_counter()
        plan = load_plan(datafusion_plan(tpch_query(q), tables))
        g = to_dag(plan)
        annotate_schemas(g)
        estimator = CardinalityEstimator(g, statistics, function_table(g.graph["plan"]))
        depths: dict[int, int] = {}
        ran = 0
        for node, path in relation_paths(g).items():
            # DataFusion's plan bytes vary between runs (anchor order): key by query, path and relation
            key = hashlib.sha1(f"{q}:{path}:{_describe(g, node)}".encode()).hexdigest()
            actual = cache.get(key)
            counted = actual is None
            if counted:
                actual = count_rows(backend, subtree_plan(g, node))
                cache[key] = actual
                ran += 1
            est = estimator.estimate(node)
            records.append({
                "query": q, "path": path, "kind": g.nodes[node]["kind"], "join_depth": join_depth(g, node, depths),
                "estimated": est.rows, "actual": actual, "q_error": q_error(est.rows, actual), "counted": counted,
            })
        if ran and use_cache:
            _save_cache(cache_path, cache)
        worst = max((r for r in records if r["query"] == q), key=lambda r: r["q_error"])
        log(f"Q{q:02d}: {sum(1 for r in records if r['query'] == q)} relations, {ran} counted on Spark, "
            f"{time.perf_counter() - t0:.1f} s; worst q={worst['q_error']:.2f} at {worst['kind']} ({worst['path']})")
    return records


def _describe(g, node: int) -> str:
    from optimizer.explain import describe_rel
    from optimizer.load.functions import function_table

    return describe_rel(g, node, function_table(g.graph["plan"]), max_len=10_000)


def _row(label: str, s: dict[str, float]) -> str:
    return f"| {label} | {s['n']} | {s['median']:.2f} | {s['p90']:.2f} | {s['p95']:.2f} | {s['max']:.2f} |"


def markdown(records: list[dict], scale: float, seconds: float | None = None) -> str:
    head = "| | relations | median | p90 | p95 | max |\n|---|---:|---:|---:|---:|---:|"
    overall = summarize([r["q_error"] for r in records])
    lines = [
        f"# Cardinality estimates: q-error on TPC-H SF {scale:g}",
        "",
        "Every relation of the 22 TPC-H plans produced by DataFusion, estimated by `cost.cardinality` with "
        "Spark ANALYZE statistics (histograms on) and compared with the rows Spark produces for that subtree. "
        "q-error = max(est/act, act/est), both floored at 1 row. Generated by `benchmarks/cardinality.py`"
        + (f" in {seconds:.0f} s" if seconds else "")
        + f" ({sum(1 for r in records if r.get('counted'))} subtrees counted on Spark in this run, the others "
          "from the cache of counts kept next to the data).",
        "",
        f"Target: median <= 1.5 and 95th percentile <= 10. Measured: median **{overall['median']:.2f}**, "
        f"95th percentile **{overall['p95']:.2f}**.",
        "",
        "## Overall",
        "",
        head,
        _row("all", overall),
        "",
        "## By relation kind",
        "",
        head,
    ]
    by_kind: dict[str, list[float]] = defaultdict(list)
    by_depth: dict[int, list[float]] = defaultdict(list)
    by_query: dict[int, list[float]] = defaultdict(list)
    for r in records:
        by_kind[r["kind"]].append(r["q_error"])
        by_depth[r["join_depth"]].append(r["q_error"])
        by_query[r["query"]].append(r["q_error"])
    for kind in sorted(by_kind, key=lambda k: -len(by_kind[k])):
        lines.append(_row(kind, summarize(by_kind[kind])))
    lines += ["", "## By join depth (joins from the relation down to a leaf)", "", head]
    for d in sorted(by_depth):
        lines.append(_row(str(d), summarize(by_depth[d])))
    lines += ["", "## By query", "", head]
    for q in sorted(by_query):
        lines.append(_row(f"Q{q}", summarize(by_query[q])))
    worst = sorted(records, key=lambda r: -r["q_error"])[:15]
    lines += ["", "## Largest errors", "", "| query | relation | path | estimated | actual | q-error |",
              "|---|---|---|---:|---:|---:|"]
    for r in worst:
        lines.append(f"| Q{r['query']} | {r['kind']} | `{r['path']}` | {r['estimated']:.0f} | {r['actual']} | "
                     f"{r['q_error']:.2f} |")
    return "\n".join(lines) + "\n"


def plot(records: list[dict], scale: float, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(13, 5))
    est = [max(r["estimated"], 1.0) for r in records]
    act = [max(r["actual"], 1.0) for r in records]
    kinds = sorted({r["kind"] for r in records})
    for kind in kinds:
        xs = [a for a, r in zip(act, records, strict=True) if r["kind"] == kind]
        ys = [e for e, r in zip(est, records, strict=True) if r["kind"] == kind]
        ax1.scatter(xs, ys, s=12, alpha=0.7, label=kind)
    lo, hi = 1.0, max(est + act) * 2
    ax1.plot([lo, hi], [lo, hi], "k-", lw=0.8)
    ax1.plot([lo, hi], [lo * 10, hi * 10], "k:", lw=0.6)
    ax1.plot([lo, hi], [lo / 10, hi / 10], "k:", lw=0.6)
    ax1.set_xscale("log")
    ax1.set_yscale("log")
    ax1.set_xlim(lo, hi)
    ax1.set_ylim(lo, hi)
    ax1.set_xlabel("actual rows (Spark)")
    ax1.set_ylabel("estimated rows")
    ax1.set_title(f"TPC-H SF {scale:g}: estimated vs actual rows per relation")
    ax1.legend(fontsize=7, loc="upper left")
    qs = sorted(r["q_error"] for r in records)
    ax2.plot(qs, [(i + 1) / len(qs) for i in range(len(qs))], drawstyle="steps-post")
    ax2.set_xscale("log")
    ax2.axvline(1.5, color="g", ls="--", lw=0.8, label="median target 1.5")
    ax2.axvline(10, color="r", ls="--", lw=0.8, label="p95 target 10")
    ax2.axhline(0.5, color="g", ls=":", lw=0.6)
    ax2.axhline(0.95, color="r", ls=":", lw=0.6)
    ax2.set_xlabel("q-error")
    ax2.set_ylabel("fraction of relations")
    ax2.set_title("cumulative distribution of q-error")
    ax2.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main(argv: list[str] | None = None, spark=None) -> dict:
    parser = argparse.ArgumentParser(prog="benchmarks/cardinality.py", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--scale", type=float, default=1.0, help="TPC-H scale factor (default 1)")
    parser.add_argument("--queries", default="1-22", help="query numbers, e.g. 1,3,5 or 1-22 (default all)")
    parser.add_argument("--out", default=str(ROOT / "docs" / "benchmarks"), help="directory of the report")
    parser.add_argument("--master", default=None, help="Spark master URL (default local[*])")
    parser.add_argument("--no-cache", action="store_true", help="count every subtree again")
    parser.add_argument("--json", help="also write every record to this JSON file")
    args = parser.parse_args(argv)
    queries: list[int] = []
    for part in args.queries.split(","):
        if "-" in part:
            a, b = part.split("-")
            queries.extend(range(int(a), int(b) + 1))
        elif part.strip():
            queries.append(int(part))
    start = time.perf_counter()
    records = collect(args.scale, queries, args.master, use_cache=not args.no_cache, spark=spark)
    seconds = time.perf_counter() - start
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    text = markdown(records, args.scale, seconds)
    (out / "cardinality.md").write_text(text)
    plot(records, args.scale, out / "cardinality.png")
    if args.json:
        Path(args.json).write_text(json.dumps(records, indent=1))
    overall = summarize([r["q_error"] for r in records])
    print(f"\n{len(records)} relations: median q-error {overall['median']:.2f}, p90 {overall['p90']:.2f}, "
          f"p95 {overall['p95']:.2f}, max {overall['max']:.2f} -> {out / 'cardinality.md'}")
    return {"scale": args.scale, "summary": overall, "records": records}


if __name__ == "__main__":
    main()
    sys.exit(0)
