"""The fixed costs of a shuffle and of a broadcast in Spark on this machine (``cost.model`` constants).

Each series stacks 1, 2 and 3 of one operation over a tiny table (TPC-DS ``store``, a few rows), so the
bytes moved are nothing and the slope of the median time over the count is the operation's fixed cost:

* ``distinct``: ``SELECT DISTINCT`` on a narrower column set each time, one shuffle (stage) each;
* ``broadcast``: inner joins with another read of ``store`` under a ``BROADCAST`` hint, one broadcast
  job each;
* ``merge``: the same joins under ``MERGE``: a sort-merge join shuffles the new side (the first one
  shuffles both; adaptive execution may still change the join, as it would in a query);
* ``nested``: the broadcast joins, each inside the broadcast side of the one before: a broadcast's job
  reads the result of the broadcast below it, so the jobs run one after another, where the
  ``broadcast`` series' jobs are independent of each other.

The runs are interleaved (each round runs every query once), after a warm-up round. The report gives the
medians and each series' slope in ms per added operation, against ``CostConstants.shuffle_stage`` and
``broadcast_job``. Writes ``docs/benchmarks/stage_costs.json`` and ``.md``.

Usage: ``python benchmarks/stage_costs.py [--reps 40] [--scale 0.1]`` (``--scale``: TPC-DS's).
"""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Any

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks import common  # noqa: E402

_JOIN = " JOIN (SELECT * FROM store) {a} ON s.s_store_sk = {a}.s_store_sk"
_ALIASES = ("r", "t", "u")
_DISTINCT_COLUMNS = ("s_store_sk", "s_store_sk, s_store_id", "s_store_sk, s_store_id, s_store_name")


def queries() -> dict[str, list[str]]:
    """Per series, its queries with 1, 2 and 3 of the operation."""
    series: dict[str, list[str]] = {"distinct": [], "broadcast": [], "merge": [], "nested": []}
    for n in (1, 2, 3):
        side = "(SELECT * FROM store)"
        for i in range(n - 1, 0, -1):
            side = (f"(SELECT /*+ BROADCAST(b{i}) */ a{i}.* FROM store a{i} JOIN {side} b{i}"
                    f" ON a{i}.s_store_sk = b{i}.s_store_sk)")
        series["nested"].append(f"SELECT /*+ BROADCAST(b0) */ count(*) FROM store s JOIN {side} b0 ON s.s_store_sk = b0.s_store_sk")
        inner = "store"
        for columns in reversed(_DISTINCT_COLUMNS[:n]):
            inner = f"(SELECT DISTINCT {columns} FROM {inner})"
        series["distinct"].append(f"SELECT count(*) FROM {inner}")
        for hint, name in (("BROADCAST", "broadcast"), ("MERGE", "merge")):
            hints = ", ".join(f"{hint}({a})" for a in _ALIASES[:n])
            joins = "".join(_JOIN.format(a=a) for a in _ALIASES[:n])
            series[name].append(f"SELECT /*+ {hints} */ count(*) FROM store s{joins}")
    return series


def slope(values: list[float]) -> float:
    """Least-squares slope of ``values`` over 1, 2, 3, ..."""
    n = len(values)
    xs = range(1, n + 1)
    mx, my = sum(xs) / n, sum(values) / n
    return sum((x - mx) * (y - my) for x, y in zip(xs, values, strict=True)) / sum((x - mx) ** 2 for x in xs)


def run(reps: int = 40, scale: float = 0.1, spark: Any = None) -> dict:
    from optimizer.cost.model import DEFAULT_CONSTANTS

    from workloads.tpcds import generate_tpcds, tpcds_table_paths

    spark = common.get_session(spark)
    common.register_temp_views(spark, {"store": tpcds_table_paths(generate_tpcds(scale))["store"]})
    series = queries()
    flat = [(name, i, q) for name, qs in series.items() for i, q in enumerate(qs)]
    for _, _, q in flat:  # warm-up
        spark.sql(q).collect()
    times: dict[tuple[str, int], list[float]] = {(name, i): [] for name, i, _ in flat}
    for _ in range(reps):
        for name, i, q in flat:
            start = time.perf_counter()
            spark.sql(q).collect()
            times[(name, i)].append(time.perf_counter() - start)
    report: dict[str, Any] = {"machine": common.machine(), "reps": reps, "series": {}}
    for name, qs in series.items():
        medians = [common.median(times[(name, i)]) * 1000 for i in range(len(qs))]
        report["series"][name] = {"median_ms": [round(m, 1) for m in medians],
                                  "ms_per_added": round(slope(medians), 1), "queries": qs}
    report["model_ms"] = {"shuffle_stage": DEFAULT_CONSTANTS.shuffle_stage / 1e6,
                          "broadcast_job": DEFAULT_CONSTANTS.broadcast_job / 1e6}
    return report


def markdown(report: dict) -> str:
    m = report["machine"]
    rows = [(name, " / ".join(f"{v:.1f}" for v in s["median_ms"]), f"{s['ms_per_added']:.1f}")
            for name, s in report["series"].items()]
    return "\n".join([
        "# Fixed costs of a shuffle and a broadcast",
        "",
        f"{m.get('date')}, commit {m.get('commit')}, {m.get('cpus')} CPUs, load {m.get('load_average_1_5_15min')}; "
        f"{report['reps']} interleaved runs after a warm-up, medians.",
        "",
        common.markdown_table(["series", "1 / 2 / 3 operations (ms)", "ms per added operation"], rows),
        "",
        f"The model: `shuffle_stage` {report['model_ms']['shuffle_stage']:g} ms, "
        f"`broadcast_job` {report['model_ms']['broadcast_job']:g} ms (`cost.model.CostConstants`).",
        "",
    ])


def main(argv: list[str] | None = None, spark: Any = None) -> dict:
    p = common.report_parser(__doc__, "stage_costs", scale=0.1, reps=40, warmup=False)
    args = p.parse_args(argv)
    report = run(args.reps, args.scale, spark)
    out = common.write_report(args.out, args.name, report, markdown)
    for name, s in report["series"].items():
        print(f"{name}: {s['median_ms']} ms, {s['ms_per_added']} ms per added operation")
    print(f"wrote {out / args.name}.json and .md")
    return report


if __name__ == "__main__":
    main()
