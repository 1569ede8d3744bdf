"""Plans on the engines that read Substrait (DataFusion, DuckDB, Acero): right / refused / error, and speed.

For every plan of every producer -- DataFusion 55's TPC-H 22 and TPC-DS 99, DuckDB 1.1.3's TPC-H and
TPC-DS plans (those it writes and that mean their query), Isthmus' TPC-H plans from the repository's
corpus (``tests/data/corpus/consumer-testing``) -- and every target engine (:mod:`optimizer.engines`),
the plan runs in two forms:

* ``original``: as the producer wrote it (DataFusion's and DuckDB's bytes; Isthmus' corpus JSON read
  with :func:`optimizer.plan_io.load_plan`, the one way to turn it into a binary plan);
* ``optimized``: ``optimizer.driver.optimize(plan, target=<engine>, statistics=<Parquet footers>)``.

Each answer is judged against DuckDB's answer to the SQL text (:class:`workloads.tpch.DuckDBOracle`,
:class:`workloads.tpcds.TPCDSOracle`; Isthmus' plans against the corpus SQL they were made from) with
:func:`optimizer.difftest.results.compare_tables` (decimals within one unit of their last place; TPC-H
in the order of its ORDER BY), DataFusion's plans with :func:`benchmarks.tpch.judge_datafusion_answer`.
Verdicts: ``right``; ``refused`` (an :class:`~optimizer.errors.UnsupportedError`, exit 3, naming what the
engine lacks); ``wrong`` (the engine answered, the answer is not DuckDB's); ``error`` (anything else).

Speed (TPC-H only): each plan that runs right in both forms is timed on ``--speed-scale`` data
(DataFusion and DuckDB) and ``--acero-scale`` data (Acero): ``--warmup`` untimed runs, then ``--reps``
interleaved runs of both forms (the order alternates), the median of each; the ratio is optimized /
original, with geometric means per producer and target.

Writes ``docs/benchmarks/engines.json`` and ``engines.md`` (date, commit, engine versions).

Usage: ``python benchmarks/engines.py [--scale 0.01] [--speed-scale 1] [--acero-scale 1] [--reps 5]
[--suites tpch,tpcds] [--producers datafusion,duckdb,isthmus] [--targets datafusion,duckdb,acero]``;
``--scale 0.01 --speed-scale 0.01 --acero-scale 0.01 --reps 1 --warmup 0`` runs in about a minute.
"""

from __future__ import annotations

import argparse
import inspect
import re
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks import common  # noqa: E402

TARGETS = ("datafusion", "duckdb", "acero")
SUITE_PRODUCERS = {"tpch": ("datafusion", "duckdb", "isthmus"), "tpcds": ("datafusion", "duckdb")}
VERDICTS = ("right", "refused", "error", "wrong")
FORMS = ("original", "optimized")
#: No optimized plan may take longer than SPEED_LIMIT times its baseline (issue 43).
SPEED_LIMIT = 1.1
#: A ratio above CONFIRM_ABOVE in the main runs is timed CONFIRM_REPS more times, both forms alternating
#: (as benchmarks/tpch.py does for Spark): on 2 shared cores one slow run among 5 moves a median by 20 %.
CONFIRM_ABOVE = SPEED_LIMIT
CONFIRM_REPS = 9


# ---------------------------------------------------------------------------------------------- plans


class Plans:
    """The plans of one suite: ``{(producer, query): bytes}`` to hand to an engine, the loaded plan
    to optimize, the SQL each is judged by, and the plans left out with the reason."""

    def __init__(self) -> None:
        self.raw: dict[tuple[str, int], bytes] = {}
        self.sql: dict[tuple[str, int], str] = {}
        self.excluded: dict[str, str] = {}

    def loaded(self, key: tuple[str, int]):
        from optimizer.plan_io import load_plan

        return load_plan(self.raw[key])


def tpch_plans(data_dir: Path, tables: dict[str, Path], producers: list[str], queries: list[int]) -> Plans:
    from benchmarks.tpch import _own_sql
    from optimizer.plan_io import load_plan
    from workloads.producers import (
        DUCKDB_TPCH_EXCLUDED,
        DUCKDB_TPCH_QUERIES,
        ProducerError,
        datafusion_plan,
        duckdb_plan,
    )
    from workloads.tpch import tpch_queries

    texts = tpch_queries()
    out = Plans()
    for q in queries:
        if "datafusion" in producers:
            try:
                out.raw[("datafusion", q)] = datafusion_plan(texts[q], tables)
            except ProducerError as exc:
                out.excluded[f"datafusion Q{q}"] = common.one_line(exc)
        if "duckdb" in producers:
            if q not in DUCKDB_TPCH_QUERIES:
                out.excluded[f"duckdb Q{q}"] = DUCKDB_TPCH_EXCLUDED.get(q, "not produced")
            else:
                try:
                    out.raw[("duckdb", q)] = duckdb_plan(texts[q], tables)
                except ProducerError as exc:
                    out.excluded[f"duckdb Q{q}"] = common.one_line(exc)
    if "isthmus" in producers:
        from workloads.corpus import corpus_plans

        found = {p.tpch_query: p for p in corpus_plans(producer="isthmus", category="integration/tpch")}
        for q in queries:
            if q not in found:
                out.excluded[f"isthmus Q{q}"] = "no Isthmus plan in the corpus"
                continue
            out.raw[("isthmus", q)] = load_plan(found[q].path.read_text()).SerializeToString()
    for key in out.raw:
        out.sql[key] = texts[key[1]]
    out.sql.update(_own_sql({k: None for k in out.raw}, texts))
    return out


def tpcds_plans(data_dir: Path, producers: list[str], queries: list[int]) -> Plans:
    from workloads.tpcds import datafusion_tpcds_plans, duckdb_tpcds_plans, producer_bug, tpcds_queries

    texts = tpcds_queries()
    out = Plans()
    makers = {"datafusion": datafusion_tpcds_plans, "duckdb": duckdb_tpcds_plans}
    for producer in producers:
        if producer not in makers:
            continue
        for q, plan in makers[producer](data_dir, tuple(queries)).items():
            if not isinstance(plan, bytes):
                out.excluded[f"{producer} Q{q}"] = f"not produced: {common.one_line(plan)}"
            elif bug := producer_bug(q, producer):
                out.excluded[f"{producer} Q{q}"] = bug
            else:
                out.raw[(producer, q)] = plan
                out.sql[(producer, q)] = texts[q]
    return out


# --------------------------------------------------------------------------------------------- judging


def targets_api() -> bool:
    """Whether :func:`optimizer.driver.optimize` takes a ``target``."""
    from optimizer.driver import optimize

    return "target" in inspect.signature(optimize).parameters


def optimize_for(plan, target: str, statistics):
    """The plan optimized for ``target`` (``optimize(plan, target=...)``), as bytes for the engine."""
    from optimizer.driver import optimize

    return optimize(plan, target=target, statistics=statistics).SerializeToString()


def written_for(plan, target: str):
    """The plan written for ``target`` without rewrites (no rules, then the write stage), as bytes: the
    baseline of a plan whose original the engine cannot run (on Acero, none runs as its producer wrote it)."""
    from optimizer.driver import Optimizer

    return Optimizer(rules=[], target=target).run(plan).plan.SerializeToString()


class Judge:
    """Runs a plan on an engine and says how its answer compares with DuckDB's answer to the SQL."""

    def __init__(self, suite: str, data_dir: Path, tables: dict[str, Path]) -> None:
        if suite == "tpcds":
            from workloads.tpcds import TPCDSOracle

            self.oracle = TPCDSOracle(data_dir)
        else:
            from workloads.tpch import DuckDBOracle

            self.oracle = DuckDBOracle(data_dir)
        self.suite = suite
        self.tables = {k: str(v) for k, v in tables.items()}
        self._expected: dict[str, Any] = {}
        self._datafusion: dict[str, Any] = {}

    def expected(self, sql: str):
        if sql not in self._expected:
            self._expected[sql] = self.oracle(sql)
        return self._expected[sql]

    def datafusion_answer(self, sql: str):
        if sql not in self._datafusion:
            from workloads.producers import datafusion_context

            self._datafusion[sql] = datafusion_context(self.tables).sql(sql).to_arrow_table()
        return self._datafusion[sql]

    def judge(self, runner, data: bytes, producer: str, query: int, sql: str) -> dict:
        from benchmarks.tpch import judge_datafusion_answer
        from optimizer.difftest.results import compare_tables
        from optimizer.errors import UnsupportedError
        from workloads.tpch import TPCH_ORDER_BY

        start = time.perf_counter()
        try:
            actual = runner.execute(data)
        except UnsupportedError as exc:
            return {"status": "refused", "detail": str(exc)}
        except Exception as exc:  # noqa: BLE001 -- anything else is the verdict "error", with its name
            return {"status": "error", "detail": common.one_line(exc)}
        seconds = time.perf_counter() - start
        order_by = TPCH_ORDER_BY.get(query) if self.suite == "tpch" else None
        expected = self.expected(sql)
        if producer == "datafusion":
            equal, how = judge_datafusion_answer(actual, expected, lambda: self.datafusion_answer(sql), order_by)
        else:
            verdict = compare_tables(actual, expected, ordered_by=order_by, decimal_ulp=True)
            equal, how = (True if verdict.equal else str(verdict).split("\n")[0]), None
        out: dict[str, Any] = {"status": "right" if equal is True else "wrong", "seconds": round(seconds, 4)}
        if equal is not True:
            out["detail"] = equal
        if how:
            out["judged_by"] = how
        return out


# ------------------------------------------------------------------------------------------------ run


def _data(suite: str, scale: float) -> tuple[Path, dict[str, Path]]:
    if suite == "tpcds":
        from workloads.tpcds import generate_tpcds, tpcds_table_paths

        data_dir = generate_tpcds(scale)
        return data_dir, tpcds_table_paths(data_dir)
    return common.tpch_data(scale)


def _runners(targets: list[str], data_dir: Path) -> dict[str, Any]:
    from optimizer.engines import runner
    from optimizer.paths import FileAccess

    return {t: runner(t, data_dir, files=FileAccess.under([data_dir])) for t in targets}


def matrix(suite: str, scale: float, producers: list[str], targets: list[str], queries: list[int] | None,
           log) -> tuple[list[dict], dict[str, str], Plans]:
    """One row per (producer, query, target) with the verdict of both forms."""
    from optimizer.spark.statistics import default_statistics

    data_dir, tables = _data(suite, scale)
    queries = queries or list(range(1, 23 if suite == "tpch" else 100))
    producers = [p for p in producers if p in SUITE_PRODUCERS[suite]]
    plans = (tpch_plans(data_dir, tables, producers, queries) if suite == "tpch"
             else tpcds_plans(data_dir, producers, queries))
    judge = Judge(suite, data_dir, tables)
    statistics = default_statistics(tables=tables)
    runners = _runners(targets, data_dir)
    has_targets = targets_api()
    rows = []
    for (producer, q), raw in sorted(plans.raw.items()):
        for target in targets:
            row: dict[str, Any] = {"suite": suite, "producer": producer, "query": q, "target": target}
            row["original"] = judge.judge(runners[target], raw, producer, q, plans.sql[(producer, q)])
            if not has_targets:
                row["optimized"] = {"status": "n/a", "detail": "optimizer.driver.optimize has no target yet"}
            else:
                try:
                    optimized = optimize_for(plans.loaded((producer, q)), target, statistics)
                except Exception as exc:  # noqa: BLE001 -- the optimizer's refusal or failure is a verdict
                    from optimizer.errors import UnsupportedError

                    status = "refused" if isinstance(exc, UnsupportedError) else "error"
                    row["optimized"] = {"status": status, "detail": f"optimize: {common.one_line(exc)}"}
                else:
                    row["optimized"] = judge.judge(runners[target], optimized, producer, q, plans.sql[(producer, q)])
                if suite == "tpch" and row["optimized"]["status"] == "right" and row["original"]["status"] != "right":
                    row["written"] = _written_verdict(judge, runners[target], plans, producer, q, target)
            rows.append(row)
            log(f"{suite} {producer} Q{q} on {target}: original {row['original']['status']}, "
                f"optimized {row['optimized']['status']}")
    for r in runners.values():
        r.close()
    return rows, dict(plans.excluded), plans


def _written_verdict(judge: Judge, engine, plans: Plans, producer: str, q: int, target: str) -> dict:
    """The verdict of the plan written for ``target`` without rewrites (:func:`written_for`)."""
    from optimizer.errors import UnsupportedError

    try:
        written = written_for(plans.loaded((producer, q)), target)
    except UnsupportedError as exc:
        return {"status": "refused", "detail": f"write: {common.one_line(exc)}"}
    return judge.judge(engine, written, producer, q, plans.sql[(producer, q)])


def _interleaved(engine, forms: dict[str, bytes], reps: int, warmup: int = 0,
                 cpu: dict[str, list[float]] | None = None) -> dict[str, list[float]]:
    """``warmup`` untimed then ``reps`` timed runs of each form, alternating which goes first; the
    engine's own time of each run (:attr:`optimizer.engines.base.EngineRunner.last_seconds`, tables bound
    before it starts). ``cpu`` collects the process's CPU time of each run (every engine runs in this
    process): on shared cores it usually moves less than the time does."""
    times: dict[str, list[float]] = {form: [] for form in forms}
    for rep in range(warmup + reps):
        order = list(forms) if (rep - warmup) % 2 == 0 else list(reversed(forms))
        for form in order:
            started = time.process_time()
            engine.execute(forms[form])
            if rep >= warmup:
                times[form].append(engine.last_seconds)
                if cpu is not None:
                    cpu.setdefault(form, []).append(time.process_time() - started)
    return times


def _same_engine_plan(engine, forms: dict[str, bytes]) -> bool | None:
    """Whether the engine makes the same physical plan of both forms (then a difference in their times is
    the machine's, not the optimizer's), or None where the engine does not show its plan (DuckDB, Acero)."""
    from optimizer.errors import UnsupportedError

    try:
        shown = {form: engine.engine_plan(data) for form, data in forms.items()}
    except UnsupportedError:
        return None
    return len(set(shown.values())) == 1


def speed(plans: Plans, producers: list[str], targets: list[str], scales: dict[str, float], reps: int,
          warmup: int, baselines: dict[tuple[str, int, str], str], log, confirm: int = CONFIRM_REPS) -> list[dict]:
    """Optimized / baseline time per plan (TPC-H) of ``baselines``: ``{(producer, query, target): "original"
    | "written"}``, the plans that run right optimized and in the baseline form: the original as its
    producer wrote it, or, where the engine cannot run that, the plan written for the target without
    rewrites (:func:`written_for`). A ratio above :data:`CONFIRM_ABOVE` is timed ``confirm`` more times."""
    from optimizer.spark.statistics import default_statistics

    rows = []
    if not targets_api():
        return rows
    for target in targets:
        data_dir, tables = _data("tpch", scales[target])
        statistics = default_statistics(tables=tables)
        engine = _runners([target], data_dir)[target]
        for (producer, q), raw in sorted(plans.raw.items()):
            baseline = baselines.get((producer, q, target))
            if producer not in producers or baseline is None:
                continue
            row: dict[str, Any] = {"producer": producer, "query": q, "target": target, "scale": scales[target],
                                   "baseline": baseline}
            try:
                plan = plans.loaded((producer, q))
                forms = {"original": raw if baseline == "original" else written_for(plan, target),
                         "optimized": optimize_for(plan, target, statistics)}
                same = _same_engine_plan(engine, forms)
                if same is not None:
                    row["same_engine_plan"] = same
                cpu: dict[str, list[float]] = {}
                times = _interleaved(engine, forms, reps, warmup, cpu)
                ratio = common.ratio(common.median(times["optimized"]), common.median(times["original"]))
                if confirm > 0 and ratio is not None and ratio > CONFIRM_ABOVE:
                    row["confirm_times_s"] = _interleaved(engine, forms, confirm, cpu=cpu)
            except Exception as exc:  # noqa: BLE001 -- reported in the row
                row["error"] = common.one_line(exc)
            else:
                row["original_s"] = common.median(times["original"])
                row["optimized_s"] = common.median(times["optimized"])
                row["times_s"] = times
                row["ratio"] = ratio
                row["cpu_s"] = cpu
                row["cpu_ratio"] = common.ratio(common.median(cpu["optimized"]), common.median(cpu["original"]))
                text = f"{ratio:.3f} (CPU {row['cpu_ratio']:.3f})"
                if "confirm_times_s" in row:
                    again = row["confirm_times_s"]
                    row["confirmed_ratio"] = common.ratio(common.median(again["optimized"]),
                                                          common.median(again["original"]))
                    text += f", confirmed {row['confirmed_ratio']:.3f}"
                log(f"speed {producer} Q{q} on {target} SF {scales[target]:g} ({baseline}): {text}")
            rows.append(row)
        engine.close()
    return rows


def summarize(rows: list[dict]) -> dict:
    """``{suite: {producer: {target: {form: {verdict: count}}}}}``."""
    out: dict[str, Any] = {}
    for row in rows:
        cell = out.setdefault(row["suite"], {}).setdefault(row["producer"], {}).setdefault(row["target"], {})
        for form in FORMS:
            counts = cell.setdefault(form, {v: 0 for v in VERDICTS})
            counts[row[form]["status"]] = counts.get(row[form]["status"], 0) + 1
    return out


def final_ratio(row: dict) -> float | None:
    """A plan's ratio: the confirmation runs' where it was confirmed, else the main runs'."""
    return row.get("confirmed_ratio", row.get("ratio"))


def speed_summary(rows: list[dict]) -> dict:
    """``{producer: {target: {baseline: ...}}}``: the geomean and max of each plan's ratio (confirmed where
    it was), and how many plans were above 1.1 in the main runs and after confirmation."""
    out: dict[str, Any] = {}
    for producer in sorted({r["producer"] for r in rows}):
        for target in sorted({r["target"] for r in rows}):
            for baseline in ("original", "written"):
                timed = [r for r in rows if r["producer"] == producer and r["target"] == target
                         and r["baseline"] == baseline and r.get("ratio") is not None]
                if timed:
                    ratios = [final_ratio(r) for r in timed]
                    out.setdefault(producer, {}).setdefault(target, {})[baseline] = {
                        "geomean": common.geomean(ratios), "plans": len(ratios), "max": max(ratios),
                        "cpu_geomean": common.geomean(r.get("cpu_ratio") for r in timed),
                        "above_1_1_main": sum(1 for r in timed if r["ratio"] > SPEED_LIMIT),
                        "above_1_1": sum(1 for r in ratios if r > SPEED_LIMIT),
                        "above_1_1_same_engine_plan": sum(1 for r in timed if final_ratio(r) > SPEED_LIMIT
                                                          and r.get("same_engine_plan"))}
    return out


def versions() -> dict[str, str]:
    out = {}
    for module in ("datafusion", "duckdb", "pyarrow"):
        try:
            out[module] = __import__(module).__version__
        except ImportError:
            out[module] = "not installed"
    return out


def run(args: argparse.Namespace) -> dict:
    started = time.time()
    producers = args.producers.split(",")
    targets = args.targets.split(",")
    queries = common.parse_queries(args.queries) if args.queries else None

    def log(text: str) -> None:
        if not args.quiet:
            print(text, file=sys.stderr, flush=True)

    rows: list[dict] = []
    excluded: dict[str, dict[str, str]] = {}
    tpch = None
    for suite in args.suites.split(","):
        scale = args.tpcds_scale if suite == "tpcds" else args.scale
        suite_rows, excluded[suite], plans = matrix(suite, scale, producers, targets, queries, log)
        rows.extend(suite_rows)
        if suite == "tpch":
            tpch = plans
    baselines = {}
    for r in rows:
        if r["suite"] == "tpch" and r["optimized"]["status"] == "right":
            for form in ("original", "written"):
                if r.get(form, {}).get("status") == "right":
                    baselines[(r["producer"], r["query"], r["target"])] = form
                    break
    scales = {t: (args.acero_scale if t == "acero" else args.speed_scale) for t in targets}
    speed_rows = (speed(tpch, producers, targets, scales, args.reps, args.warmup, baselines, log, args.confirm)
                  if tpch is not None and args.reps > 0 else [])
    report = {
        "machine": common.machine(),
        "versions": versions(),
        "config": {"scale": args.scale, "tpcds_scale": args.tpcds_scale, "speed_scales": scales,
                   "reps": args.reps, "warmup": args.warmup, "confirm": {"reps": args.confirm, "above": CONFIRM_ABOVE}, "producers": producers, "targets": targets,
                   "suites": args.suites.split(","), "queries": args.queries or "all",
                   "targets_api": targets_api()},
        "summary": summarize(rows),
        "wrong": sum(1 for r in rows for f in FORMS if r[f]["status"] == "wrong"),
        "wrong_optimized": sum(1 for r in rows if r["optimized"]["status"] == "wrong"),
        "speed_summary": speed_summary(speed_rows),
        "excluded": excluded,
        "plans": rows,
        "speed": speed_rows,
        "seconds": round(time.time() - started, 1),
    }
    if args.out:
        common.write_report(args.out, args.name, report, markdown)
    return report


# --------------------------------------------------------------------------------------------- report


def _refusals(rows: list[dict], target: str, form: str, limit: int = 6) -> list[tuple[str, int]]:
    """The most common things ``target`` refused (the engine's message without plan-specific detail)."""
    counter: Counter[str] = Counter()
    for r in rows:
        if r["target"] == target and r[form]["status"] in ("refused", "error"):
            text = re.sub(r"\s+", " ", r[form].get("detail", ""))
            text = re.sub(r"\d+", "N", text)[:140]
            counter[f"{r[form]['status']}: {text}"] += 1
    return counter.most_common(limit)


def markdown(report: dict) -> str:
    m, c = report["machine"], report["config"]
    lines = [
        "# Plans on the engines that read Substrait",
        "",
        f"Written by `benchmarks/engines.py` on {m.get('date')} at commit {m.get('commit', '?')} "
        f"({', '.join(f'{k} {v}' for k, v in report['versions'].items())}; {m.get('cpus')} CPUs, "
        f"load {m.get('load_average_1_5_15min')}); {report['seconds']:.0f} s.",
        "",
        f"TPC-H SF {c['scale']:g}, TPC-DS SF {c['tpcds_scale']:g}. Each plan runs on each engine as the "
        "producer wrote it (*original*) and as `optimize(plan, target=<engine>)` writes it (*optimized*); "
        "the answer is compared with DuckDB's answer to the SQL. *right*: the same answer; *refused*: exit 3, "
        "the engine (or the optimizer for that target) names what it lacks; *error*: any other failure; "
        "*wrong*: an answer that is not DuckDB's.",
        "",
    ]
    if not c["targets_api"]:
        lines += ["**The optimized column is empty: `optimizer.driver.optimize` takes no `target` at this "
                  "commit.**", ""]
    lines += [f"Wrong answers: {report['wrong']} in all ({report['wrong_optimized']} of optimized plans).", ""]
    headers = (["suite", "producer", "target", "plans"] + [f"{f} {v}" for f in FORMS for v in VERDICTS]
               + ["optimized right >= original right"])
    table = []
    for suite, by_producer in report["summary"].items():
        for producer, by_target in by_producer.items():
            for target, forms in by_target.items():
                n = sum(forms["original"].values())
                at_least = "yes" if forms["optimized"].get("right", 0) >= forms["original"].get("right", 0) else "**no**"
                table.append([suite, producer, target, n] + [forms[f].get(v, 0) for f in FORMS for v in VERDICTS]
                             + [at_least])
    lines += [common.markdown_table(headers, table), ""]
    lines += ["## What each engine refused or failed on (most common, original form)", ""]
    for target in c["targets"]:
        lines.append(f"**{target}**")
        lines.append("")
        for text, n in _refusals(report["plans"], target, "original"):
            lines.append(f"- {n} x {text}")
        lines.append("")
    wrong = [r for r in report["plans"] for f in FORMS if r[f]["status"] == "wrong"]
    if wrong:
        lines += ["## Wrong answers", ""]
        by_form = Counter(f for r in report["plans"] for f in FORMS if r[f]["status"] == "wrong")
        lines += [f"{by_form['original']} of plans run as their producer wrote them (*original*), "
                  f"{by_form['optimized']} of plans optimized for the engine. A wrong original is the engine's "
                  "reading of the producer's plan as written, not the optimizer's answer; the causes per engine "
                  "are in docs/targets/<engine>.md.", ""]
        for r in report["plans"]:
            for f in FORMS:
                if r[f]["status"] == "wrong":
                    lines.append(f"- {r['suite']} {r['producer']} Q{r['query']} on {r['target']}, {f}: "
                                 f"{r[f].get('detail', '')[:200]}")
        lines.append("")
    lines += ["## Speed: optimized / baseline time (TPC-H)", ""]
    if report["speed_summary"]:
        confirm = c.get("confirm", {})
        lines += [f"Median of {c['reps']} interleaved runs (the order of the two forms alternates) after "
                  f"{c['warmup']} warm-up run(s), the engine's own time; scale per engine: "
                  + ", ".join(f"{t} SF {s:g}" for t, s in c["speed_scales"].items()) + ". "
                  f"A plan above {confirm.get('above', CONFIRM_ABOVE):g} is timed {confirm.get('reps', 0)} more "
                  "times, alternating, and its confirmed ratio (in brackets) is the one counted. The baseline is "
                  "the *original* plan as its producer wrote it where the engine runs that right; else the "
                  "plan *written* for the engine without rewrites (no rules, then the write stage): no "
                  "original runs on Acero, which reads no column mask. *CPU*: the same ratio of the process's "
                  "CPU time (median of every timed run), which shared cores usually disturb less. *=* after a ratio, "
                  "and *of which the same engine plan*: the engine makes the same physical plan of both forms "
                  "(DataFusion's `execution_plan()`, compared as text; DuckDB and Acero do not show theirs), so "
                  "the two run alike and their difference in time is the machine's."]
        if c["reps"] < 5 or any(s < 1 for t, s in c["speed_scales"].items() if t != "acero"):
            lines.append("**A development run**: milliseconds at this scale and repetition count say little; the "
                         "figures to judge come from `python benchmarks/engines.py` (SF 1, 5 runs).")
        lines.append("")
        srows = [[p, t, b, s["plans"], common.fmt(s["geomean"]), common.fmt(s["max"]),
                  s.get("above_1_1_main", ""), s["above_1_1"], s.get("above_1_1_same_engine_plan", ""),
                  common.fmt(s.get("cpu_geomean"))]
                 for p, by_t in report["speed_summary"].items() for t, by_b in by_t.items()
                 for b, s in by_b.items()]
        lines += [common.markdown_table(["producer", "target", "baseline", "plans", "geomean", "max",
                                         "above 1.1 (main runs)", "above 1.1 (confirmed)",
                                         "of which the same engine plan", "CPU geomean"], srows), ""]

        def ratio_text(r: dict) -> str:
            text = common.fmt(r.get("ratio"))
            text += f" ({common.fmt(r['confirmed_ratio'])})" if "confirmed_ratio" in r else ""
            return text + (" =" if r.get("same_engine_plan") else "")

        prows = [[r["producer"], f"Q{r['query']}", r["target"], r.get("baseline", "original"),
                  common.fmt_ms(r.get("original_s")), common.fmt_ms(r.get("optimized_s")), ratio_text(r),
                  common.fmt(r.get("cpu_ratio")), r.get("error", "")]
                 for r in report["speed"]]
        lines += [common.markdown_table(["producer", "query", "target", "baseline", "baseline ms", "optimized ms",
                                         "ratio", "CPU", "error"], prows), ""]
    else:
        lines += ["Not measured: no plan runs right in both forms (or `--reps 0`).", ""]
    lines += ["## Plans left out", ""]
    for suite, items in report["excluded"].items():
        for key, why in items.items():
            lines.append(f"- {suite} {key}: {why}")
    lines.append("")
    return "\n".join(lines)


def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--scale", type=float, default=0.01, help="TPC-H scale of the matrix (default 0.01)")
    p.add_argument("--tpcds-scale", type=float, default=0.01, help="TPC-DS scale of the matrix (default 0.01)")
    p.add_argument("--speed-scale", type=float, default=1.0,
                   help="TPC-H scale of the timings on DataFusion and DuckDB (default 1)")
    p.add_argument("--acero-scale", type=float, default=1.0,
                   help="TPC-H scale of the timings on Acero (default 1: the plans it runs take about a second there)")
    p.add_argument("--reps", type=int, default=5, help="timed runs of each form (median; default 5; 0: no timings)")
    p.add_argument("--warmup", type=int, default=1, help="untimed runs first (default 1)")
    p.add_argument("--confirm", type=int, default=CONFIRM_REPS,
                   help=f"timed runs more of a plan above {CONFIRM_ABOVE:g} (default {CONFIRM_REPS}; 0: none)")
    p.add_argument("--suites", default="tpch,tpcds", help="tpch,tpcds (default both)")
    p.add_argument("--producers", default="datafusion,duckdb,isthmus")
    p.add_argument("--targets", default=",".join(TARGETS))
    p.add_argument("--queries", default=None, help="query numbers, e.g. 1,3,5-7 (default all)")
    p.add_argument("--out", default=str(common.REPORT_DIR), help="report directory ('' for none)")
    p.add_argument("--name", default="engines", help="report file stem (default engines)")
    p.add_argument("--quiet", action="store_true", help="no progress lines on stderr")
    args = p.parse_args(argv)
    for t in args.targets.split(","):
        if t not in TARGETS:
            p.error(f"--targets: unknown engine '{t}' (choose from {', '.join(TARGETS)})")
    for s in args.suites.split(","):
        if s not in SUITE_PRODUCERS:
            p.error(f"--suites: unknown suite '{s}' (choose from tpch, tpcds)")
    return args


def main(argv=None) -> dict:
    return run(parse_args(argv))


if __name__ == "__main__":
    main()
