"""How long the optimizer takes: TPC-H plans of three producers, and synthetic join graphs of 2 to 30 relations.

* TPC-H: DataFusion's (22) and DuckDB's (14) plans produced live, Isthmus' (21) from the corpus; statistics
  from the Parquet footers (no Spark); a warm-up run, then the median of ``--reps``.
* Synthetic: chain, star, cycle and clique join graphs of n = 2..30 named tables (``t0``...), written as a
  left-deep tree of inner joins in table order, each join carrying the equality predicates of the graph
  edges it closes (``t_i.k_j = t_j.k_i``); row counts in ``hint.stats`` (between 100 and 20M rows). The
  optimizer runs on these hints alone (no Spark). Up to ``dp_join_limit`` (14) relations the join order is
  found by DPccp, beyond by greedy operator ordering.

* Wide: a chain join graph of ``--wide`` (1,000) relations, written as a balanced tree of cross products with
  every equality in the top join (a left-deep tree that wide would be nested past the loader's depth limit);
  a warm-up, then ``--reps`` runs: the median wall time (``OptimizeResult.seconds``) and the median CPU time
  of the process (the machine may be shared: its wall time then grows, its CPU time much less), with the
  phases and the time outside them of the median run (``join_order`` is where the order is searched,
  greedily; ``pricing`` the whole plan priced between phases). Each run's result is dropped before the next
  run, as a caller optimizing one plan holds one.

Targets: TPC-H plans median under 20 ms; a 12-relation clique under 1 s; 30 relations under 2 s (greedy);
1,000 relations under 2 s.
Where a target is missed, one run is profiled (cProfile) and the report lists where the time goes.
Writes ``docs/benchmarks/optimizer_latency.json``, ``.md`` and ``.png``.

Usage: ``python benchmarks/optimizer_latency.py [--max-relations 30] [--shapes chain,star,cycle,clique] [--wide 1000]``.
"""

from __future__ import annotations

import argparse
import cProfile
import io
import json
import pstats
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks import common  # noqa: E402

SHAPES = ("chain", "star", "cycle", "clique")
TARGET_TPCH_MEDIAN_MS = 20.0
TARGET_CLIQUE12_S = 1.0
TARGET_30_S = 2.0
TARGET_WIDE_S = 2.0
#: A DP size whose run takes longer than this is not followed by bigger DP sizes of the same shape.
GIVE_UP_S = 120.0


# ------------------------------------------------------------------------------------------ synthetic plans


def graph_edges(shape: str, n: int) -> list[tuple[int, int]]:
    """The edges ``(i, j)``, ``i < j``, of a join graph over tables ``0..n-1``.

    >>> graph_edges("chain", 4), graph_edges("star", 4)
    ([(0, 1), (1, 2), (2, 3)], [(0, 1), (0, 2), (0, 3)])
    >>> graph_edges("cycle", 4), len(graph_edges("clique", 5))
    ([(0, 1), (1, 2), (2, 3), (0, 3)], 10)
    """
    if shape == "chain":
        return [(i, i + 1) for i in range(n - 1)]
    if shape == "star":
        return [(0, i) for i in range(1, n)]
    if shape == "cycle":
        return [(i, i + 1) for i in range(n - 1)] + ([(0, n - 1)] if n >= 3 else [])
    if shape == "clique":
        return [(i, j) for i in range(n) for j in range(i + 1, n)]
    raise ValueError(f"unknown shape {shape!r}")


def table_rows(i: int) -> int:
    """A fixed, varied row count per table: 100 .. 20M."""
    return (10 ** (2 + (i * 7) % 6)) * (1 + i % 3) * (2 if i % 5 == 0 else 1)


def csg_cmp_pairs(shape: str, n: int) -> int:
    """The number of csg-cmp pairs DPccp considers on ``shape`` with ``n`` relations (Moerkotte and
    Neumann, VLDB 2006, section 2.3).

    >>> [csg_cmp_pairs(s, 12) for s in ("chain", "star", "cycle", "clique")]
    [286, 11264, 726, 261625]
    """
    if n < 2:
        return 0
    if shape == "chain":
        return (n**3 - n) // 6
    if shape == "star":
        return (n - 1) * 2 ** (n - 2)
    if shape == "cycle":
        return (n**3 - 2 * n**2 + n) // 2 if n > 2 else 1
    return (3**n - 2 ** (n + 1) + 1) // 2


def algorithm(shape: str, n: int, config) -> str:
    """Which join enumeration the optimizer uses: DPccp, or greedy (beyond the size limit), or greedy
    after DPccp ran into the pair budget (``greedy*``)."""
    if n > config.dp_join_limit:
        return "greedy"
    return "dpccp" if csg_cmp_pairs(shape, n) <= config.dp_pair_budget else "greedy*"


def synthetic_plan(shape: str, n: int) -> dict:
    """The Substrait plan (JSON dict) of ``n`` tables joined along ``shape``'s edges, written left-deep."""
    edges = graph_edges(shape, n)
    neighbors = {i: sorted({b for a, b in edges if a == i} | {a for a, b in edges if b == i}) for i in range(n)}
    columns = {i: [f"t{i}_k{j}" for j in neighbors[i]] or [f"t{i}_id"] for i in range(n)}
    offsets, total = {}, 0
    for i in range(n):
        offsets[i] = total
        total += len(columns[i])

    def col(i: int, j: int) -> int:  # global position of t_i's key towards t_j
        return offsets[i] + neighbors[i].index(j)

    def read(i: int) -> dict:
        cols = columns[i]
        return {"read": {"common": {"hint": {"stats": {"rowCount": table_rows(i), "recordSize": 8 * len(cols)}}},
                         "namedTable": {"names": [f"t{i}"]},
                         "baseSchema": {"names": cols, "struct": {
                             "types": [{"i64": {"nullability": "NULLABILITY_REQUIRED"}}] * len(cols),
                             "nullability": "NULLABILITY_REQUIRED"}}}}

    def ref(pos: int) -> dict:
        return {"selection": {"directReference": {"structField": {"field": pos}}, "rootReference": {}}}

    def eq(a: int, b: int) -> dict:
        return {"scalarFunction": {"functionReference": 1, "outputType": {"bool": {"nullability": "NULLABILITY_REQUIRED"}},
                                   "arguments": [{"value": ref(a)}, {"value": ref(b)}]}}

    tree = read(0)
    for k in range(1, n):
        preds = [eq(col(j, k), col(k, j)) for j in neighbors[k] if j < k]
        if not preds:
            condition = None
        elif len(preds) == 1:
            condition = preds[0]
        else:
            condition = {"scalarFunction": {"functionReference": 2,
                                            "outputType": {"bool": {"nullability": "NULLABILITY_REQUIRED"}},
                                            "arguments": [{"value": p} for p in preds]}}
        join: dict[str, Any] = {"type": "JOIN_TYPE_INNER", "left": tree, "right": read(k)}
        if condition is not None:
            join["expression"] = condition
        tree = {"join": join}
    names = [c for i in range(n) for c in columns[i]]
    return {
        "version": {"minorNumber": 75, "producer": "substrait-optimizer benchmarks"},
        "extensionUrns": [{"extensionUrnAnchor": 1, "urn": "extension:io.substrait:functions_comparison"},
                          {"extensionUrnAnchor": 2, "urn": "extension:io.substrait:functions_boolean"}],
        "extensions": [
            {"extensionFunction": {"extensionUrnReference": 1, "functionAnchor": 1, "name": "equal:any_any"}},
            {"extensionFunction": {"extensionUrnReference": 2, "functionAnchor": 2, "name": "and:bool"}},
        ],
        "relations": [{"root": {"input": tree, "names": names}}],
    }


def wide_plan(shape: str, n: int) -> dict:
    """:func:`synthetic_plan`'s tables and equalities, written as a balanced tree of cross products (nested
    about 2 log2(n) relations deep) under one inner join that holds every equality."""
    plan = synthetic_plan(shape, n)
    tree = plan["relations"][0]["root"]["input"]
    reads, preds = [], []
    while "join" in tree:
        join = tree["join"]
        reads.append(join["right"])
        condition = join.get("expression")
        if condition is not None:
            call = condition["scalarFunction"]
            preds += [a["value"] for a in call["arguments"]] if call["functionReference"] == 2 else [condition]
        tree = join["left"]
    reads.append(tree)
    reads.reverse()
    condition = {"scalarFunction": {"functionReference": 2, "outputType": {"bool": {"nullability": "NULLABILITY_REQUIRED"}},
                                    "arguments": [{"value": p} for p in preds]}}
    plan["relations"][0]["root"]["input"] = balanced_join(reads, condition)
    return plan


def balanced_join(reads: list[dict], condition: dict) -> dict:
    """The JSON relations ``reads`` (two or more) as a balanced tree of cross products (nested about
    log2(n) deep) under one inner join on ``condition``, in their order."""

    def tree(lo: int, hi: int) -> dict:
        if hi - lo == 1:
            return reads[lo]
        mid = (lo + hi) // 2
        return {"cross": {"left": tree(lo, mid), "right": tree(mid, hi)}}

    top = tree(0, len(reads))["cross"]
    return {"join": {"type": "JOIN_TYPE_INNER", "left": top["left"], "right": top["right"], "expression": condition}}


# ------------------------------------------------------------------------------------------ measuring


def _measure(run: Callable[[], Any], reps: int, budget_s: float) -> tuple[list[float], Any]:
    """A warm-up run, then up to ``reps`` timed runs (fewer once ``budget_s`` is spent)."""
    result = run()
    first = result.seconds
    times: list[float] = []
    spent = 0.0
    if first > budget_s:  # one slow run is measurement enough
        return [first], result
    for _ in range(max(1, reps)):
        result = run()
        times.append(result.seconds)
        spent += result.seconds
        if spent > budget_s:
            break
    return times, result


def _profile(run: Callable[[], Any], top: int = 18) -> list[dict]:
    """cProfile one run; the functions with the most cumulative time (project code first)."""
    prof = cProfile.Profile()
    prof.enable()
    try:
        run()
    except Exception:  # a failing run is profiled up to its failure
        pass
    finally:
        prof.disable()
    stream = io.StringIO()
    st = pstats.Stats(prof, stream=stream)
    rows = []
    for (filename, line, func), (_cc, ncalls, tottime, cumtime, _callers) in st.stats.items():  # type: ignore[attr-defined]
        rows.append({"function": f"{_short(filename)}:{line}({func})", "calls": ncalls,
                     "tottime_s": round(tottime, 4), "cumtime_s": round(cumtime, 4)})
    ours = [r for r in rows if r["function"].startswith(("rules/", "cost/", "optimizer/"))]
    by_cum = sorted(ours, key=lambda r: -r["cumtime_s"])[:top]
    by_self = sorted(rows, key=lambda r: -r["tottime_s"])[:8]
    return [{"view": "cumulative (project code)", "rows": by_cum}, {"view": "self time (all code)", "rows": by_self}]


def _short(filename: str) -> str:
    for marker in ("/rules/", "/cost/", "/optimizer/"):
        if marker in filename and "site-packages" not in filename:
            return marker[1:] + filename.split(marker, 1)[1]
    return filename.rsplit("/site-packages/", 1)[-1]


def _phases(result) -> dict[str, float]:
    return {p.phase: round(p.seconds * 1000, 2) for p in result.phases}


def run(max_relations: int = 30, shapes: list[str] | None = None, producers: list[str] | None = None,
        queries: list[int] | None = None, reps: int = 5, scale: float = 0.01, budget_s: float = 5.0,
        out_dir: Path | str | None = common.REPORT_DIR, name: str = "optimizer_latency",
        progress: bool = True, profile: bool = True, min_relations: int = 2, wide: int = 1000,
        disabled_rules: frozenset[str] = frozenset()) -> dict:
    from optimizer.capabilities import default_capabilities
    from optimizer.driver import Optimizer, OptimizerConfig
    from optimizer.plan_io import load_plan
    from optimizer.spark.statistics import default_statistics

    shapes = shapes or list(SHAPES)
    producers = producers if producers is not None else list(common.PRODUCERS)
    queries = queries or list(range(1, 23))
    from optimizer.rules import RULES

    unknown = disabled_rules - {r.name for r in RULES}
    if unknown:
        raise SystemExit(f"--disable-rules: no rule named {sorted(unknown)[0]!r}")
    config = OptimizerConfig(disabled_rules=disabled_rules)
    started = time.time()
    capabilities = default_capabilities()

    # TPC-H plans
    tpch_rows = []
    errors: dict = {}
    plans = {}
    statistics = None
    if producers:
        _, tables = common.tpch_data(scale)
        plans = common.tpch_plans(tables, producers, queries, errors)
        statistics = default_statistics(tables=tables)
    sizes = list(range(min_relations, max_relations + 1))
    bar = common.progress_bar(len(plans) + len(shapes) * len(sizes), "optimizer latency", progress)
    for (producer, q), plan in sorted(plans.items()):
        bar.set_postfix_str(f"{producer} Q{q}")
        optimizer = Optimizer(statistics=statistics, capabilities=capabilities, config=config)
        try:
            times, result = _measure(lambda optimizer=optimizer, plan=plan: optimizer.run(plan), reps, budget_s)
            tpch_rows.append({"producer": producer, "query": q, "ms": round(common.median(times) * 1000, 2),
                              "runs": len(times), "phases_ms": _phases(result),
                              "join_order_fired": any(e.rule == "join_order" for e in result.events)})
        except Exception as exc:
            tpch_rows.append({"producer": producer, "query": q, "error": common.one_line(exc)})
        bar.update()

    # Synthetic join graphs (hints only: no statistics provider but the plan's own hints)
    synthetic = []
    hint_stats = default_statistics()
    for shape in shapes:
        given_up = False
        for n in sizes:
            bar.set_postfix_str(f"{shape} {n}")
            entry: dict[str, Any] = {"shape": shape, "relations": n, "edges": len(graph_edges(shape, n)),
                                     "csg_cmp_pairs": csg_cmp_pairs(shape, n),
                                     "algorithm": algorithm(shape, n, config)}
            if given_up and n <= config.dp_join_limit:
                entry["skipped"] = f"a smaller DP size took over {GIVE_UP_S:g} s"
                synthetic.append(entry)
                bar.update()
                continue
            plan = load_plan(json.dumps(synthetic_plan(shape, n)))
            optimizer = Optimizer(statistics=hint_stats, capabilities=capabilities, config=config)
            t0 = time.perf_counter()
            try:
                times, result = _measure(lambda optimizer=optimizer, plan=plan: optimizer.run(plan), reps, budget_s)
                entry["seconds"] = common.median(times)
                entry["runs"] = len(times)
                entry["phases_ms"] = _phases(result)
                entry["join_order_fired"] = any(e.rule == "join_order" for e in result.events)
                if entry["seconds"] > GIVE_UP_S:
                    given_up = True
            except Exception as exc:
                entry["error"] = common.one_line(exc)
                entry["seconds_until_error"] = round(time.perf_counter() - t0, 4)
            synthetic.append(entry)
            bar.update()
    bar.close()

    # A wide join graph: a warm-up, then ``reps`` runs (wall and CPU medians).
    wide_entry: dict[str, Any] | None = None
    wide_plan_loaded = None
    if wide:
        wide_entry = {"shape": "chain", "relations": wide}
        wide_plan_loaded = load_plan(json.dumps(wide_plan("chain", wide)))
        optimizer = Optimizer(statistics=hint_stats, capabilities=capabilities, config=config)
        try:
            optimizer.run(wide_plan_loaded)
            runs = []
            for _ in range(max(1, reps)):
                cpu = time.process_time()
                result = optimizer.run(wide_plan_loaded)
                cpu = time.process_time() - cpu
                # What the report needs of the run, not the run's result: a result holds its plan's DAG
                # (about 100,000 objects here), and the results of earlier runs kept alive would be
                # walked by every later run's garbage collections, which no caller's single run pays.
                runs.append((result.seconds, cpu, {
                    "phases_ms": _phases(result),
                    "outside_phases_ms": {k: round(v * 1000, 2) for k, v in result.timings.items()},
                    "join_order_fired": any(e.rule == "join_order" for e in result.events)}))
                del result
            by_wall = sorted(runs, key=lambda r: r[0])
            median_run = by_wall[(len(by_wall) - 1) // 2][2]
            wide_entry.update(seconds=common.median([r[0] for r in runs]), cpu_seconds=common.median([r[1] for r in runs]),
                              runs=len(runs), **median_run)
        except Exception as exc:
            wide_entry["error"] = common.one_line(exc)

    tpch_ok = [r["ms"] for r in tpch_rows if "ms" in r]

    def find(shape: str, n: int) -> dict | None:
        return next((e for e in synthetic if e["shape"] == shape and e["relations"] == n), None)

    clique12 = find("clique", 12)
    at30 = {s: (find(s, 30) or {}).get("seconds") for s in shapes if find(s, 30)}
    # A run that failed: how long it took until the failure (the optimizer's work, minus what was left).
    until_error30 = {s: find(s, 30).get("seconds_until_error") for s in shapes
                     if find(s, 30) and "error" in find(s, 30)}
    summary: dict[str, Any] = {
        "tpch_plans": len(tpch_ok),
        "tpch_median_ms": common.median(tpch_ok),
        "tpch_max_ms": max(tpch_ok, default=None),
        "tpch_median_ms_by_producer": {p: common.median([r["ms"] for r in tpch_rows if r["producer"] == p and "ms" in r])
                                       for p in producers},
        "clique12_seconds": (clique12 or {}).get("seconds"),
        "relations30_seconds": at30,
        "relations30_seconds_until_error": until_error30,
        "dp_join_limit": config.dp_join_limit,
        "dp_pair_budget": config.dp_pair_budget,
        "wide": wide_entry,
    }
    targets = {
        f"tpch_median<{TARGET_TPCH_MEDIAN_MS:g}ms": None if not tpch_ok else summary["tpch_median_ms"] < TARGET_TPCH_MEDIAN_MS,
        f"clique12<{TARGET_CLIQUE12_S:g}s": None if summary["clique12_seconds"] is None
        else summary["clique12_seconds"] < TARGET_CLIQUE12_S,
        f"30_relations<{TARGET_30_S:g}s": None if not at30 else all(v is not None and v < TARGET_30_S for v in at30.values()),
        f"wide<{TARGET_WIDE_S:g}s": None if not wide_entry or "seconds" not in wide_entry
        else wide_entry["seconds"] < TARGET_WIDE_S,
    }
    summary["targets"] = targets

    profiles: dict[str, Any] = {}
    if profile:
        if targets.get(f"tpch_median<{TARGET_TPCH_MEDIAN_MS:g}ms") is False:
            slowest = max((r for r in tpch_rows if "ms" in r), key=lambda r: r["ms"])
            plan = plans[(slowest["producer"], slowest["query"])]
            opt = Optimizer(statistics=statistics, capabilities=capabilities, config=config)
            opt.run(plan)  # warm, as in the timed runs
            profiles[f"tpch {slowest['producer']} Q{slowest['query']}"] = _profile(lambda: opt.run(plan))
        if targets.get(f"clique12<{TARGET_CLIQUE12_S:g}s") is False:
            plan = load_plan(json.dumps(synthetic_plan("clique", 12)))
            opt = Optimizer(statistics=hint_stats, capabilities=capabilities, config=config)
            profiles["clique 12"] = _profile(lambda: opt.run(plan))
        if targets.get(f"30_relations<{TARGET_30_S:g}s") is False:
            worst = max(at30, key=lambda s: at30[s] if at30[s] is not None else until_error30.get(s) or 0.0)
            plan = load_plan(json.dumps(synthetic_plan(worst, 30)))
            opt = Optimizer(statistics=hint_stats, capabilities=capabilities, config=config)
            profiles[f"{worst} 30"] = _profile(lambda: opt.run(plan))
        if targets.get(f"wide<{TARGET_WIDE_S:g}s") is False and wide_plan_loaded is not None:
            opt = Optimizer(statistics=hint_stats, capabilities=capabilities, config=config)
            opt.run(wide_plan_loaded)  # warm, as in the timed runs
            profiles[f"chain {wide}"] = _profile(lambda: opt.run(wide_plan_loaded))

    report = {"summary": summary,
              "config": {"reps": reps, "budget_s": budget_s, "statistics_scale": scale,
                         "disabled_rules": sorted(disabled_rules),
                         "machine": common.machine(), "wall_seconds": round(time.time() - started, 1)},
              "tpch": tpch_rows, "synthetic": synthetic, "profiles": profiles}
    if out_dir is not None:
        out = common.write_report(out_dir, name, report, markdown)
        try:
            plot(report, out / f"{name}.png")
        except ImportError:
            pass
    return report


# ------------------------------------------------------------------------------------------ reports


def markdown(report: dict) -> str:
    s = report["summary"]
    t = s["targets"]

    def verdict(v):
        return "–" if v is None else ("met" if v else "**missed**")

    lines = [
        "# Optimizer latency",
        "",
        f"Median of up to {report['config']['reps']} runs after a warm-up (`OptimizeResult.seconds`: load, all "
        f"phases, write back). {report['config']['machine'].get('cpus')} cores, Python "
        f"{report['config']['machine'].get('python')}; commit {report['config']['machine'].get('commit')}, "
        f"load average (1, 5, 15 min) {report['config']['machine'].get('load_average_1_5_15min')} at the end: "
        "on a shared machine wall times grow with the load, CPU times less.",
        "",
        "| target | value | |",
        "| --- | --- | --- |",
        f"| TPC-H plans, median < {TARGET_TPCH_MEDIAN_MS:g} ms | {common.fmt(s['tpch_median_ms'])} ms "
        f"(max {common.fmt(s['tpch_max_ms'])} ms, {s['tpch_plans']} plans) | {verdict(t[f'tpch_median<{TARGET_TPCH_MEDIAN_MS:g}ms'])} |",
        f"| 12-relation clique < {TARGET_CLIQUE12_S:g} s (DPccp to its pair budget, then greedy) | {common.fmt(s['clique12_seconds'])} s | "
        f"{verdict(t[f'clique12<{TARGET_CLIQUE12_S:g}s'])} |",
        f"| 30 relations < {TARGET_30_S:g} s (greedy) | "
        + ", ".join(f"{k} {common.fmt(v)} s" if v is not None
                    else f"{k} failed after {common.fmt(s['relations30_seconds_until_error'].get(k))} s"
                    for k, v in s["relations30_seconds"].items())
        + f" | {verdict(t[f'30_relations<{TARGET_30_S:g}s'])} |",
    ]
    w = s.get("wide")
    if w:
        phases = ", ".join(f"{k} {common.fmt(v / 1000)} s"
                           for k, v in {**(w.get("phases_ms") or {}), **(w.get("outside_phases_ms") or {})}.items())
        cpu = f", CPU {common.fmt(w['cpu_seconds'])} s" if "cpu_seconds" in w else ""
        lines.append(f"| {w['relations']:,}-relation {w['shape']} < {TARGET_WIDE_S:g} s (greedy) | "
                     + (f"{common.fmt(w['seconds'])} s (median of {w.get('runs', 1)}{cpu}; median run: {phases}; "
                        f"join order {'changed' if w.get('join_order_fired') else 'kept'})" if "seconds" in w
                        else f"error: {w.get('error')}")
                     + f" | {verdict(t.get(f'wide<{TARGET_WIDE_S:g}s'))} |")
    lines.append("")
    if report["tpch"]:
        by_p = s["tpch_median_ms_by_producer"]
        lines += ["## TPC-H plans (ms)", ""]
        producers = list(by_p)
        rows = []
        for q in sorted({r["query"] for r in report["tpch"]}):
            row = [f"Q{q}"]
            for p in producers:
                r = next((x for x in report["tpch"] if x["producer"] == p and x["query"] == q), None)
                row.append("–" if r is None else (common.fmt(r["ms"]) if "ms" in r else "error"))
            rows.append(row)
        rows.append(["**median**", *[f"**{common.fmt(by_p[p])}**" for p in producers]])
        lines += [common.markdown_table(["query", *producers], rows), ""]
        errs = [r for r in report["tpch"] if "error" in r]
        if errs:
            lines += [f"* {r['producer']} Q{r['query']}: {r['error']}" for r in errs] + [""]
    if report["synthetic"]:
        shapes = list(dict.fromkeys(e["shape"] for e in report["synthetic"]))
        sizes = sorted({e["relations"] for e in report["synthetic"]})
        lines += ["## Synthetic join graphs (seconds)", "",
                  f"DPccp up to {s['dp_join_limit']} relations while it considers at most "
                  f"{s.get('dp_pair_budget', 0):,} join pairs (csg-cmp pairs), greedy (GOO) beyond: sizes marked "
                  "(greedy*) are cliques whose DP ran into the pair budget and fell back to greedy "
                  "(the time includes the abandoned DP).", ""]
        rows = []
        for n in sizes:
            row = [str(n)]
            for shape in shapes:
                e = next((x for x in report["synthetic"] if x["shape"] == shape and x["relations"] == n), None)
                if e is None:
                    row.append("–")
                elif "seconds" in e:
                    row.append(common.fmt(e["seconds"])
                               + ("" if e.get("join_order_fired", True) else " (kept)")
                               + (" (greedy*)" if e.get("algorithm") == "greedy*" else ""))
                else:
                    row.append("skipped" if "skipped" in e else "error")
            rows.append(row)
        lines += [common.markdown_table(["relations", *shapes], rows), ""]
        errs = [e for e in report["synthetic"] if "error" in e]
        if errs:
            lines += [f"* {e['shape']} {e['relations']}: {e['error']} (after {common.fmt(e.get('seconds_until_error'))} s)"
                      for e in errs] + [""]
    if report["profiles"]:
        lines += ["## Where the time goes (cProfile of one run)", ""]
        for case, views in report["profiles"].items():
            lines += [f"### {case}", ""]
            for view in views:
                lines += [f"{view['view']}:", "",
                          common.markdown_table(["function", "calls", "self s", "cumulative s"],
                                                [[f"`{r['function']}`", r["calls"], r["tottime_s"], r["cumtime_s"]]
                                                 for r in view["rows"]]), ""]
    return "\n".join(lines)


def plot(report: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(13, 4.6), gridspec_kw={"width_ratios": [3, 2]})
    shapes = list(dict.fromkeys(e["shape"] for e in report["synthetic"]))
    for shape in shapes:
        pts = [(e["relations"], e["seconds"]) for e in report["synthetic"] if e["shape"] == shape and "seconds" in e]
        if pts:
            ax1.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", markersize=3, label=shape)
    limit = report["summary"]["dp_join_limit"]
    ax1.axvline(limit + 0.5, color="#999999", linestyle=":", linewidth=1)
    ax1.text(limit + 0.7, 0.02, "greedy →", transform=ax1.get_xaxis_transform(), fontsize=8, color="#666666")
    ax1.axhline(TARGET_CLIQUE12_S, color="#d9534f", linestyle="--", linewidth=0.8)
    ax1.axhline(TARGET_30_S, color="#f0ad4e", linestyle="--", linewidth=0.8)
    ax1.set_yscale("log")
    ax1.set_xlabel("relations")
    ax1.set_ylabel("optimize time (s, log)")
    ax1.set_title("synthetic join graphs", fontsize=10)
    ax1.grid(alpha=0.3, which="both")
    ax1.legend(fontsize=8)
    producers = list(report["summary"].get("tpch_median_ms_by_producer", {}))
    data = [[r["ms"] for r in report["tpch"] if r["producer"] == p and "ms" in r] for p in producers]
    if any(data):
        ax2.boxplot([d or [0] for d in data], tick_labels=producers)
        ax2.axhline(TARGET_TPCH_MEDIAN_MS, color="#d9534f", linestyle="--", linewidth=0.8)
        ax2.set_ylabel("optimize time (ms)")
        ax2.set_title("TPC-H plans", fontsize=10)
        ax2.grid(axis="y", alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def parse_args(argv=None) -> argparse.Namespace:
    # --scale: the TPC-H data whose footers give the plans' statistics
    p = common.report_parser(__doc__, "optimizer_latency", scale=0.01, reps=5, warmup=False, queries=True, spark=False)
    p.add_argument("--max-relations", type=int, default=30)
    p.add_argument("--min-relations", type=int, default=2)
    p.add_argument("--shapes", default=",".join(SHAPES))
    p.add_argument("--producers", default=",".join(common.PRODUCERS),
                   help="TPC-H plan producers ('' for none)")
    p.add_argument("--budget", type=float, default=5.0, help="seconds of timed runs per case at most")
    p.add_argument("--no-profile", action="store_true")
    p.add_argument("--wide", type=int, default=1000, help="relations of the wide chain join graph (0: none)")
    p.add_argument("--disable-rules", default="",
                   help="rules to leave out, comma-separated (what the others cost without them)")
    return p.parse_args(argv)


def main(argv=None, spark: Any = None) -> dict:
    """``spark`` is accepted for symmetry with the other benchmarks and not used (no Spark here)."""
    args = parse_args(argv)
    report = run(max_relations=args.max_relations, min_relations=args.min_relations,
                 shapes=[s for s in args.shapes.split(",") if s],
                 producers=[p for p in args.producers.split(",") if p],
                 queries=common.parse_queries(args.queries),
                 reps=args.reps, scale=args.scale, budget_s=args.budget,
                 out_dir=Path(args.out) if args.out else None, name=args.name, progress=not args.no_progress,
                 profile=not args.no_profile, wide=args.wide,
                 disabled_rules=frozenset(r for r in args.disable_rules.split(",") if r))
    s = report["summary"]
    print(f"optimizer latency: TPC-H median {common.fmt(s['tpch_median_ms'])} ms "
          f"(max {common.fmt(s['tpch_max_ms'])}), "
          f"clique 12 {common.fmt(s['clique12_seconds'])} s, 30 relations "
          + ", ".join(f"{k} {common.fmt(v)} s" if v is not None else f"{k} failed" for k, v in s["relations30_seconds"].items())
          + (f", {s['wide']['relations']} relations {common.fmt(s['wide'].get('seconds'))} s "
             f"(CPU {common.fmt(s['wide'].get('cpu_seconds'))} s, join_order "
             f"{common.fmt((s['wide'].get('phases_ms') or {}).get('join_order', 0) / 1000)} s)"
             if s.get("wide") else ""))
    return report


if __name__ == "__main__":
    main()
