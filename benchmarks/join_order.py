"""Join ordering pays: TPC-H Q5's joins written in a bad order, before and after the optimizer.

The query joins ``lineitem, orders, customer, supplier, nation, region`` in that FROM order (Q5's
predicates). DataFusion's optimized logical plan keeps the written order (checked: the join tree's
leaves come out in FROM order; if DataFusion ever reorders them, its unoptimized ``logical_plan()`` is used
instead), so the plan starts by joining the two biggest tables. Then:

* the estimated cost (``RuleContext.cost``, the cost model's total over the plan) of the written order
  and of the chosen one: the plan optimized with the ``join_order`` rule disabled against the fully
  optimized plan (both are physical plans, priced by the same model);
* the run time on Spark of the original plan, the plan optimized without join ordering and the fully
  optimized plan, through the backend (interleaved, a warm-up and the median of ``--reps``), with the
  answers checked against Spark SQL.

Writes ``docs/benchmarks/join_order.json``, ``join_order.md`` and, when Graphviz is installed, the plan
before and after as ``join_order.svg``.

Usage: ``python benchmarks/join_order.py [--scale 1] [--reps 3]``.
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

WRITTEN_ORDER = ("lineitem", "orders", "customer", "supplier", "nation", "region")

SQL = """select n_name, sum(l_extendedprice * (1 - l_discount)) as revenue
from lineitem, orders, customer, supplier, nation, region
where c_custkey = o_custkey
  and l_orderkey = o_orderkey
  and l_suppkey = s_suppkey
  and c_nationkey = s_nationkey
  and s_nationkey = n_nationkey
  and n_regionkey = r_regionkey
  and r_name = 'ASIA'
  and o_orderdate >= date '1994-01-01'
  and o_orderdate < date '1995-01-01'
group by n_name
order by revenue desc"""

JOIN_KINDS = ("join", "hash_join", "merge_join", "nested_loop_join", "cross")


def join_tree(plan) -> str:
    """The join nesting of a plan by table name: ``((region ⋈ nation) ⋈ customer) ...``."""
    from optimizer.dag import inputs, to_dag

    g = to_dag(plan)

    def render(node: int) -> str | None:
        data = g.nodes[node]
        kids = inputs(g, node)
        if data["kind"] == "read":
            body = data["rel"].read
            return ".".join(body.named_table.names) if body.HasField("named_table") else "read"
        if data["kind"] in JOIN_KINDS and len(kids) == 2:
            left, right = render(kids[0]), render(kids[1])
            return f"({left} ⋈ {right})"
        parts = [r for r in (render(k) for k in kids) if r]
        return parts[0] if len(parts) == 1 else (", ".join(parts) if parts else None)

    text = render(g.graph["roots"][0]["node"]) or ""
    return text[1:-1] if text.startswith("(") and text.endswith(")") else text


def leaf_order(plan) -> list[str]:
    """The tables in the order the join tree reads them (left to right)."""
    import re

    return re.findall(r"[A-Za-z_][A-Za-z_0-9.]*", join_tree(plan))


def produce_plan(tables) -> tuple[Any, str]:
    """DataFusion's plan of :data:`SQL`, in the written join order; and which DataFusion plan was used."""
    from datafusion.substrait import Producer

    from optimizer.plan_io import load_plan
    from workloads.producers import datafusion_context

    ctx = datafusion_context(tables)
    df = ctx.sql(SQL)
    plan = load_plan(Producer.to_substrait_plan(df.optimized_logical_plan(), ctx).encode())
    if tuple(leaf_order(plan)) == WRITTEN_ORDER:
        return plan, "optimized_logical_plan (keeps the FROM order)"
    plan = load_plan(Producer.to_substrait_plan(df.logical_plan(), ctx).encode())
    return plan, "logical_plan (DataFusion's optimized plan reorders the joins)"


def plan_cost(plan, statistics) -> float | None:
    from optimizer.dag import annotate_schemas, to_dag
    from optimizer.driver import RuleContext

    try:
        g = to_dag(plan)
        annotate_schemas(g)
        return float(RuleContext(g, statistics).cost(g.graph["roots"][0]["node"]))
    except Exception:  # reported as unknown
        return None


def run(scale: float = 1.0, reps: int = 3, warmup: int = 1, spark: Any = None,
        out_dir: Path | str | None = common.REPORT_DIR, name: str = "join_order",
        progress: bool = True) -> dict:
    from optimizer.capabilities import default_capabilities
    from optimizer.difftest.results import compare_tables
    from optimizer.driver import Optimizer, OptimizerConfig
    from optimizer.spark import SparkBackend
    from optimizer.spark.statistics import default_statistics

    spark = common.get_session(spark)
    started = time.time()
    _, tables = common.tpch_data(scale)
    plan, source = produce_plan(tables)
    statistics = default_statistics(spark=spark, tables=tables)
    capabilities = default_capabilities()
    optimizer = Optimizer(statistics=statistics, capabilities=capabilities)
    optimizer.run(plan)  # warm-up: statistics fetched (Spark ANALYZE, cached on disk) here
    full = optimizer.run(plan)
    no_jo = Optimizer(statistics=statistics, capabilities=capabilities,
                      config=OptimizerConfig(disabled_rules=frozenset({"join_order"}))).run(plan)
    events = [e for e in full.events if e.rule == "join_order"]

    report: dict[str, Any] = {
        "sql": SQL,
        "producer": f"DataFusion {source}",
        "written_order": join_tree(plan),
        "written_leaf_order": leaf_order(plan),
        "optimized_without_join_order": join_tree(no_jo.plan),
        "chosen_order": join_tree(full.plan),
        "join_order_fired": bool(events),
        "estimated_cost": {
            "original_plan": plan_cost(plan, statistics),
            "written_order": plan_cost(no_jo.plan, statistics),
            "chosen_order": plan_cost(full.plan, statistics),
        },
        "optimize_ms": round(full.seconds * 1000, 1),
    }
    c = report["estimated_cost"]
    report["estimated_cost"]["chosen_vs_written"] = common.ratio(c["chosen_order"], c["written_order"])

    common.register_temp_views(spark, tables)
    backend = SparkBackend(spark, tables=tables)
    variants = {
        "spark_sql": lambda: common.collect(spark.sql(SQL)),
        "original": lambda: common.collect(backend.to_dataframe(plan)),
        "optimized_without_join_order": lambda: common.collect(backend.to_dataframe(no_jo.plan)),
        "optimized": lambda: common.collect(backend.to_dataframe(full.plan)),
    }
    times: dict[str, list[float]] = {k: [] for k in variants}
    answers: dict[str, Any] = {}
    errors: dict[str, str] = {}
    bar = common.progress_bar(len(variants) * (warmup + reps), f"join order SF {scale:g}", progress)
    names = list(variants)
    for rep in range(warmup + reps):
        for key in names[rep % len(names):] + names[: rep % len(names)]:
            bar.set_postfix_str(key)
            if key not in errors:
                try:
                    seconds, table = common.timed(variants[key])
                    answers.setdefault(key, table)
                    if rep >= warmup:
                        times[key].append(seconds)
                except Exception as exc:
                    errors[key] = common.one_line(exc)
            bar.update()
    bar.close()
    run_s = {k: common.median(v) for k, v in times.items()}
    equal = {}
    for key in ("original", "optimized_without_join_order", "optimized"):
        if key in answers and "spark_sql" in answers:
            equal[key] = compare_tables(answers[key], answers["spark_sql"], ordered_by=[1]).equal
        else:
            equal[key] = False
    report.update({
        "seconds": run_s,
        "runs": times,
        "errors": errors,
        "answers_equal": equal,
        "optimized_vs_original": common.ratio(run_s.get("optimized"), run_s.get("original")),
        "optimized_vs_without_join_order": common.ratio(run_s.get("optimized"), run_s.get("optimized_without_join_order")),
        "config": {"scale_factor": scale, "reps": reps, "warmup": warmup, "sink": "DataFrame.toArrow()",
                   "machine": common.machine(), "wall_seconds": round(time.time() - started, 1)},
    })
    report["summary"] = {
        "scale_factor": scale,
        "chosen_cost_lower": (c["chosen_order"] is not None and c["written_order"] is not None
                              and c["chosen_order"] < c["written_order"]),
        "optimized_faster_than_original": (report["optimized_vs_original"] or 9e9) < 1.0,
        "answers_equal": all(equal.values()),
    }
    if out_dir is not None:
        out = common.write_report(out_dir, name, report, markdown)
        try:
            from optimizer.explain.dot import before_after_dot, render_svg

            svg = render_svg(before_after_dot(plan, full.plan, statistics,
                                              title="Q5 joins written lineitem, orders, customer, supplier, "
                                                    "nation, region: before and after"))
            (out / f"{name}.svg").write_text(svg)
        except Exception:  # no Graphviz: no picture
            pass
    return report


def markdown(r: dict) -> str:
    c = r["estimated_cost"]
    s = r["seconds"]
    lines = common.report_head(f"Join order: Q5 written in a bad order (SF {r['config']['scale_factor']:g})",
                               r["config"], f"Plan by {r['producer']}, run through the backend.")
    lines += [
        "```sql",
        r["sql"],
        "```",
        "",
        f"* written order: `{r['written_order']}`",
        f"* optimized without the join_order rule: `{r['optimized_without_join_order']}`",
        f"* chosen order: `{r['chosen_order']}` (join_order fired: {'yes' if r['join_order_fired'] else 'no'}; "
        f"optimize time {common.fmt(r['optimize_ms'])} ms)",
        "",
        "| | estimated cost | Spark seconds | answer equal |",
        "| --- | --- | --- | --- |",
        f"| Spark SQL (default) | | {common.fmt(s.get('spark_sql'))} | (reference) |",
        f"| original plan | {common.fmt(c['original_plan'])} | {common.fmt(s.get('original'))} | {r['answers_equal'].get('original')} |",
        f"| optimized, written order (join_order off) | {common.fmt(c['written_order'])} | "
        f"{common.fmt(s.get('optimized_without_join_order'))} | {r['answers_equal'].get('optimized_without_join_order')} |",
        f"| optimized, chosen order | {common.fmt(c['chosen_order'])} | {common.fmt(s.get('optimized'))} | "
        f"{r['answers_equal'].get('optimized')} |",
        "",
        f"Chosen / written estimated cost: {common.fmt(c.get('chosen_vs_written'))}. "
        "Optimized / original run time: "
        f"{common.fmt(r['optimized_vs_original'])}; optimized / optimized-without-join-order: "
        f"{common.fmt(r['optimized_vs_without_join_order'])}.",
        "",
    ]
    if r["errors"]:
        lines += [f"* {k}: {v}" for k, v in r["errors"].items()] + [""]
    return "\n".join(lines)


def parse_args(argv=None) -> argparse.Namespace:
    return common.report_parser(__doc__, "join_order").parse_args(argv)


def main(argv=None, spark: Any = None) -> dict:
    args = parse_args(argv)
    if spark is None and args.master:
        from optimizer.spark.session import get_spark

        spark = get_spark(args.master)
    r = run(scale=args.scale, reps=args.reps, warmup=args.warmup, spark=spark,
            out_dir=Path(args.out) if args.out else None, name=args.name, progress=not args.no_progress)
    c = r["estimated_cost"]
    print(f"join order SF {args.scale:g}: cost written {common.fmt(c['written_order'])} -> chosen {common.fmt(c['chosen_order'])}; "
          f"Spark original {common.fmt(r['seconds'].get('original'))} s, optimized {common.fmt(r['seconds'].get('optimized'))} s; "
          f"equal {r['answers_equal']}")
    return r


if __name__ == "__main__":
    main()
