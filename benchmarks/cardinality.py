"""Cardinality benchmark: q-error of every relation of the 22 DataFusion TPC-H plans (or the 99 TPC-DS
ones) against Spark.

    .venv/bin/python benchmarks/cardinality.py [--suite tpch|tpcds] [--scale 1] [--queries 1,3,5]
        [--learn [--learn-from 3,7]] [--out docs/benchmarks]

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

``--suite tpcds``: DataFusion's plans of the TPC-DS queries over DuckDB's ``dsdgen`` data
(:func:`workloads.tpcds.generate_tpcds`); the report is ``<out>/cardinality-tpcds.md`` (and ``.png``).

``--learn``: learned cardinalities (:mod:`optimizer.cost.learned`). A first pass estimates every relation
and records the rows Spark counted for it into a learned store in a temporary directory; a second pass
reads that store from its file and estimates every relation again with it. The report
(``<out>/cardinality[-tpcds]-learned.md``) gives both passes' median and 95th percentile overall, at
joins, by relation kind and by join depth, and how many relations had a learned entry. With
``--learn-from QUERIES`` the store learns from those queries' plans instead, and the passes estimate
``--queries`` without and with it: what subtrees learned from some plans do for others that share them.
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
if __package__ in (None, "") and str(ROOT) not in sys.path:  # `python benchmarks/cardinality.py`: workloads/
    sys.path.insert(0, str(ROOT))


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


SUITES = ("tpch", "tpcds")
_JOINS = {"join", "hash_join", "merge_join", "nested_loop_join", "cross", "lateral_join"}


def suite_data(suite: str, scale: float, queries: list[int], log=print) -> tuple[Path, dict[str, str], dict[int, bytes]]:
    """``(data dir, {table: path}, {query: DataFusion's plan})`` of ``suite`` at ``scale`` (a query DataFusion
    cannot write is logged and left out)."""
    if suite == "tpch":
        from workloads.producers import datafusion_plan
        from workloads.tpch import generate_tpch, table_paths, tpch_query

        data_dir = generate_tpch(scale)
        tables = {k: str(v) for k, v in table_paths(data_dir, include_t=False).items()}
        return data_dir, tables, {q: datafusion_plan(tpch_query(q), tables) for q in queries}
    from workloads.producers import ProducerError
    from workloads.tpcds import datafusion_tpcds_plans, generate_tpcds, tpcds_table_paths

    data_dir = generate_tpcds(scale)
    tables = {k: str(v) for k, v in tpcds_table_paths(data_dir).items()}
    plans = {}
    for q, plan in datafusion_tpcds_plans(data_dir, tuple(queries)).items():
        if isinstance(plan, ProducerError):
            log(f"Q{q:02d}: no plan: {plan}")
        else:
            plans[q] = plan
    return data_dir, tables, plans


def collect(scale: float, queries: list[int], master: str | None = None, use_cache: bool = True,
            log=print, spark=None, *, suite: str = "tpch", learned=None, record_into=None,
            actuals: dict[str, int] | None = None) -> list[dict]:
    """One record per relation of each query's plan: estimate, actual rows, q-error. ``learned``: a
    :class:`~optimizer.cost.learned.LearnedRows` the estimates read; ``record_into``: one the actual rows
    are recorded into; ``actuals``: the counts already known (the cache; filled as subtrees are counted)."""
    from optimizer.cost.cardinality import CardinalityEstimator
    from optimizer.cost.estimates import q_error

    from optimizer.dag import annotate_schemas, to_dag
    from optimizer.explain.estimates import count_rows, join_depth, relation_paths, subtree_plan
    from optimizer.load.functions import function_table
    from optimizer.plan_io import load_plan
    from optimizer.spark import SparkBackend
    from optimizer.spark.session import get_spark
    from optimizer.spark.statistics import default_statistics

    data_dir, tables, plans = suite_data(suite, scale, queries, log)
    spark = spark if spark is not None else get_spark(master)
    statistics = default_statistics(spark=spark, tables=tables)
    if learned is not None:
        from optimizer.cost.learned import LearnedStatistics

        statistics = LearnedStatistics(statistics, learned)
    backend = SparkBackend(spark, tables=tables)
    cache_path = Path(data_dir) / "_cardinality_actuals.json"
    cache = actuals if actuals is not None else _load_cache(cache_path) if use_cache else {}
    records: list[dict] = []
    for q, plan_bytes in plans.items():
        t0 = time.perf_counter()
        plan = load_plan(plan_bytes)
        g = to_dag(plan)
        annotate_schemas(g)
        estimator = CardinalityEstimator(g, statistics, function_table(g.graph["plan"]))
        depths: dict[int, int] = {}
        counts: dict[int, int] = {}
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
            counts[node] = actual
            est = estimator.estimate(node)
            records.append({
                "query": q, "path": path, "kind": g.nodes[node]["kind"], "join_depth": join_depth(g, node, depths),
                "estimated": est.rows, "actual": actual, "q_error": q_error(est.rows, actual), "counted": counted,
            })
        if record_into is not None:
            record_into.record(g, counts)
        if ran and use_cache:
            _save_cache(cache_path, cache)
        worst = max((r for r in records if r["query"] == q), key=lambda r: r["q_error"])
        log(f"Q{q:02d}: {sum(1 for r in records if r['query'] == q)} relations, {ran} counted on Spark, "
            f"{time.perf_counter() - t0:.1f} s; worst q={worst['q_error']:.2f} at {worst['kind']} ({worst['path']})")
    return records


def learn_passes(scale: float, queries: list[int], master: str | None = None, use_cache: bool = True,
                 log=print, spark=None, *, suite: str = "tpch",
                 learn_from: list[int] | None = None, keep_store: Path | None = None) -> tuple[list[dict], list[dict], int]:
    """``--learn``: the records of a first pass, which records every relation's actual rows into a learned
    store (a file in a temporary directory), and of a second pass estimating with that store read back
    from its file; and how many of the second pass's relations found a learned entry. ``learn_from``:
    the queries whose rows are learned (default ``queries``); the first pass then estimates ``queries``
    without learning, and the second estimates them with what ``learn_from`` taught. ``keep_store``: the
    store is also copied there (for ``benchmarks/tpch.py --learned``: the plans optimized with it)."""
    import shutil
    import tempfile

    from optimizer.cost.learned import FILE_NAME, LearnedRows

    from workloads.tpcds import generate_tpcds
    from workloads.tpch import generate_tpch

    data_dir = generate_tpch(scale) if suite == "tpch" else generate_tpcds(scale)
    actuals = _load_cache(Path(data_dir) / "_cardinality_actuals.json") if use_cache else {}
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / FILE_NAME
        tables = data_dir  # the store locates the plans' tables under the data directory
        store = LearnedRows(path, tables)
        if learn_from is None:
            first = collect(scale, queries, master, use_cache, log, spark, suite=suite, record_into=store,
                            actuals=actuals)
        else:
            collect(scale, learn_from, master, use_cache, log, spark, suite=suite, record_into=store,
                    actuals=actuals)
            first = collect(scale, queries, master, use_cache, log, spark, suite=suite, actuals=actuals)
        store.save()
        log(f"learned: {len(store.document['entries'])} subtrees in {path.stat().st_size} bytes")
        if keep_store is not None:
            shutil.copyfile(path, keep_store)
            log(f"learned store kept in {keep_store}")
        reread = LearnedRows(path, tables)
        second = collect(scale, queries, master, use_cache, log, spark, suite=suite, learned=reread,
                         actuals=actuals)
    return first, second, reread.hits


def _describe(g, node: int) -> str:
    from optimizer.explain import describe_rel
    from optimizer.load.functions import function_table

    return describe_rel(g, node, function_table(g.graph["plan"]), max_len=10_000)


def _row(label: str, s: dict[str, float]) -> str:
    return f"| {label} | {s['n']} | {s['median']:.2f} | {s['p90']:.2f} | {s['p95']:.2f} | {s['max']:.2f} |"


_LABELS = {"tpch": ("TPC-H", "22 TPC-H plans"), "tpcds": ("TPC-DS", "TPC-DS plans")}


def markdown(records: list[dict], scale: float, seconds: float | None = None, suite: str = "tpch") -> str:
    head = "| | relations | median | p90 | p95 | max |\n|---|---:|---:|---:|---:|---:|"
    overall = summarize([r["q_error"] for r in records])
    name, plans = _LABELS[suite]
    if suite != "tpch":
        plans = f"{len({r['query'] for r in records})} {plans}"
    lines = [
        f"# Cardinality estimates: q-error on {name} SF {scale:g}",
        "",
        f"Every relation of the {plans} produced by DataFusion, estimated by `cost.cardinality` with "
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


def learned_markdown(first: list[dict], second: list[dict], hits: int, scale: float, suite: str = "tpch",
                     seconds: float | None = None, learn_from: list[int] | None = None) -> str:
    """Both passes of ``--learn``: the estimates before any learning and with the rows the first pass
    learned, side by side."""
    name = _LABELS[suite][0]
    head = ("| | relations | median before | p95 before | median learned | p95 learned |\n"
            "|---|---:|---:|---:|---:|---:|")

    def row(label: str, keep) -> str:
        a = summarize([r["q_error"] for r in first if keep(r)])
        b = summarize([r["q_error"] for r in second if keep(r)])
        return f"| {label} | {a['n']} | {a['median']:.2f} | {a['p95']:.2f} | {b['median']:.2f} | {b['p95']:.2f} |"

    lines = [
        f"# Learned cardinalities: q-error on {name} SF {scale:g}, before and after one run",
        "",
        f"Every relation of {len({r['query'] for r in first})} {name} plans produced by DataFusion. First pass: "
        "estimated with Spark ANALYZE statistics, "
        + ("the rows Spark counted for each subtree recorded into a learned store (`optimizer.cost.learned`); "
           if learn_from is None else
           f"and the rows Spark counted for each subtree of queries {', '.join(map(str, learn_from))} (other "
           "plans) recorded into a learned store (`optimizer.cost.learned`); ")
        + "second pass: the same plans estimated with that store, read "
        f"back from its file. {hits} of {len(second)} relations found a learned entry in the second pass "
        "(one whose subtree ran, relation for relation, in the learning pass; a subtree with a subquery in an "
        "expression never has one). Generated by `benchmarks/cardinality.py --learn`"
        + (f" in {seconds:.0f} s" if seconds else "") + ".",
        "",
        "## Overall",
        "",
        head,
        row("all", lambda r: True),
        row("joins", lambda r: r["kind"] in _JOINS),
        "",
        "## By relation kind",
        "",
        head,
    ]
    kinds: dict[str, int] = defaultdict(int)
    depths: set[int] = set()
    for r in first:
        kinds[r["kind"]] += 1
        depths.add(r["join_depth"])
    lines += [row(kind, lambda r, kind=kind: r["kind"] == kind) for kind in sorted(kinds, key=lambda k: -kinds[k])]
    lines += ["", "## By join depth (joins from the relation down to a leaf)", "", head]
    lines += [row(str(d), lambda r, d=d: r["join_depth"] == d) for d in sorted(depths)]
    return "\n".join(lines) + "\n"


def plot(records: list[dict], scale: float, path: Path, suite: str = "tpch") -> None:
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
    ax1.set_title(f"{_LABELS[suite][0]} SF {scale:g}: estimated vs actual rows per relation")
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


def _numbers(text: str) -> list[int]:
    """``1,3,5-7`` -> ``[1, 3, 5, 6, 7]``."""
    out: list[int] = []
    for part in text.split(","):
        if "-" in part:
            a, b = part.split("-")
            out.extend(range(int(a), int(b) + 1))
        elif part.strip():
            out.append(int(part))
    return out


def main(argv: list[str] | None = None, spark=None) -> dict:
    parser = argparse.ArgumentParser(prog="benchmarks/cardinality.py", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--suite", choices=SUITES, default="tpch", help="TPC-H (default) or TPC-DS plans")
    parser.add_argument("--scale", type=float, default=1.0, help="scale factor (default 1)")
    parser.add_argument("--queries", default=None,
                        help="query numbers, e.g. 1,3,5 or 1-22 (default all: 1-22, TPC-DS 1-99)")
    parser.add_argument("--learn", action="store_true",
                        help="two passes: record every relation's actual rows into a learned store, then "
                             "estimate with it (report <out>/cardinality[-tpcds]-learned.md)")
    parser.add_argument("--learn-from", default=None, metavar="QUERIES",
                        help="with --learn: learn from these queries' plans instead (e.g. 42,52), and estimate "
                             "--queries before and after: what a learned subtree does for other plans")
    parser.add_argument("--keep-store", default=None, metavar="FILE",
                        help="with --learn: also write the learned store to FILE (benchmarks/tpch.py --learned "
                             "optimizes with it)")
    parser.add_argument("--out", default=str(ROOT / "docs" / "benchmarks"), help="directory of the report")
    parser.add_argument("--master", default=None, help="Spark master URL (default local[*])")
    parser.add_argument("--no-cache", action="store_true", help="count every subtree again")
    parser.add_argument("--json", help="also write every record to this JSON file")
    args = parser.parse_args(argv)
    queries = _numbers(args.queries or ("1-22" if args.suite == "tpch" else "1-99"))
    learn_from = _numbers(args.learn_from) if args.learn_from else None
    if learn_from is not None and not args.learn:
        parser.error("--learn-from needs --learn")
    if args.keep_store is not None and not args.learn:
        parser.error("--keep-store needs --learn")
    stem = "cardinality" if args.suite == "tpch" else f"cardinality-{args.suite}"
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    start = time.perf_counter()
    if args.learn:
        first, second, hits = learn_passes(args.scale, queries, args.master, use_cache=not args.no_cache,
                                           spark=spark, suite=args.suite, learn_from=learn_from,
                                           keep_store=Path(args.keep_store) if args.keep_store else None)
        seconds = time.perf_counter() - start
        (out / f"{stem}-learned.md").write_text(learned_markdown(first, second, hits, args.scale, args.suite,
                                                                 seconds, learn_from))
        if args.json:
            Path(args.json).write_text(json.dumps({"first": first, "second": second}, indent=1))
        summaries = {}
        for label, records in (("before", first), ("learned", second)):
            overall = summarize([r["q_error"] for r in records])
            joins = summarize([r["q_error"] for r in records if r["kind"] in _JOINS])
            summaries[label] = {"all": overall, "joins": joins}
            print(f"{label}: {len(records)} relations: median q-error {overall['median']:.2f}, "
                  f"p95 {overall['p95']:.2f}; joins p95 {joins['p95']:.2f}")
        print(f"{hits} of {len(second)} relations learned -> {out / f'{stem}-learned.md'}")
        return {"scale": args.scale, "suite": args.suite, "summary": summaries, "first": first, "second": second,
                "hits": hits}
    records = collect(args.scale, queries, args.master, use_cache=not args.no_cache, spark=spark, suite=args.suite)
    seconds = time.perf_counter() - start
    text = markdown(records, args.scale, seconds, args.suite)
    (out / f"{stem}.md").write_text(text)
    plot(records, args.scale, out / f"{stem}.png", args.suite)
    if args.json:
        Path(args.json).write_text(json.dumps(records, indent=1))
    overall = summarize([r["q_error"] for r in records])
    print(f"\n{len(records)} relations: median q-error {overall['median']:.2f}, p90 {overall['p90']:.2f}, "
          f"p95 {overall['p95']:.2f}, max {overall['max']:.2f} -> {out / f'{stem}.md'}")
    return {"scale": args.scale, "summary": overall, "records": records}


if __name__ == "__main__":
    main()
    sys.exit(0)
