"""``substrait-opt explain``: the plan as a tree (text), a JSON list, or a picture (dot/svg/html), with
estimates when statistics are given and actual rows with ``--analyze``; ``--learn`` reads the learned rows
(:mod:`optimizer.cost.learned`) and, with ``--analyze``, records the actual rows of every relation.

Every format reads the same statistics (:func:`optimizer.cli.args.statistics_from_args`, the stack
``optimize`` and ``diff`` read), so a plan's estimated cost is the same in each."""

from __future__ import annotations

import argparse

from optimizer.cli.args import add_plan_command, write_text
from optimizer.paths import add_path_argument

FORMATS = ("text", "json", "dot", "svg", "html")


def explain_format(args: argparse.Namespace) -> str:
    """``--format``, else the output file's extension among explain's formats, else ``text``; a name
    that says another format than ``--format`` is exit 2."""
    from optimizer.cli.args import EXTENSION_FORMATS, output_format

    if args.format is None:
        import os

        named = EXTENSION_FORMATS.get(os.path.splitext(args.output)[1].lower()) if args.output != "-" else None
        return named if named in FORMATS else "text"
    return output_format(args.output, args.format, plan=False) or "text"


def cmd_explain(args: argparse.Namespace) -> int:
    from optimizer.cli.args import statistics_from_args
    from optimizer.load.pipeline import load
    from optimizer.plan_io import check_output

    check_output(args.output)
    fmt = explain_format(args)
    if args.learn and args.analyze and fmt not in ("text", "json"):
        from optimizer.errors import PlanError

        raise PlanError(f"with --analyze it records the actual rows in --format text or json, not {fmt} "
                        "(without --analyze it reads them in every format)", "--learn")
    loaded = load(args.input)
    plan = loaded.plan
    loaded.check()
    if args.analyze:  # what needs no Spark is checked before it starts
        from optimizer.cli.spark import check_reads_before_spark, check_tables_arg

        check_tables_arg(args.tables)
        check_reads_before_spark(plan, args)
    estimates = bool(args.tables or args.stats or args.analyze or args.learn or getattr(args, "catalog", None))
    spark = backend = None
    if args.analyze:
        from optimizer.cli.spark import spark_from_args

        spark = spark_from_args(args)
    # One statistics stack for every format (and the same as optimize's).
    statistics = statistics_from_args(args, spark) if estimates or fmt in ("json", "html") else None
    if spark is not None:
        from optimizer.cli.spark import backend_from_args

        backend = backend_from_args(args, spark)
    from optimizer.explain import WIDTH

    width = None if args.wide else WIDTH
    if fmt in ("dot", "svg"):
        from optimizer.explain.dot import explain_dot, picture

        write_text(args.output, picture(explain_dot(plan, statistics, backend, title=args.input), fmt))
    elif fmt == "html":
        from optimizer.explain.html import explain_html

        write_text(args.output, explain_html(plan, statistics, backend, title=args.input))
    elif statistics is not None:
        from optimizer.explain.estimates import explain_with_estimates

        write_text(args.output, explain_with_estimates(plan, statistics, backend, fmt, width=width))
        if args.learn and backend is not None:
            from optimizer.cli.args import save_learned

            save_learned(statistics.learned)
    else:
        from optimizer.explain import explain_plan

        write_text(args.output, explain_plan(plan, width=width) + "\n")
    return 0


def register(sub, name: str, help_text: str) -> None:
    from optimizer.cli.optimize import add_no_spark_stats_argument
    from optimizer.cli.spark import add_cast_argument, add_spark_args
    from optimizer.explain import WIDTH

    p = add_plan_command(sub, name, help_text, cmd_explain,
                         description="Print the plan as an indented tree, one line per relation with its key "
                                     "properties and output columns.",
                         formats=list(FORMATS), default_format=None,
                         format_help="text tree (default, or from the output file's extension), JSON list, a "
                                     "picture of the DAG (Graphviz dot / svg), or an HTML page: the plan and "
                                     "its optimized form, with estimates per relation")
    p.add_argument("--tables", help="directory of the tables, a path or any URI Spark reads: statistics from "
                                   "Spark ANALYZE (cached) and the Parquet footers, as optimize reads them; "
                                   "tables for --analyze")
    p.add_argument("--stats", help="statistics JSON file (see docs/statistics.md); wins over --tables")
    add_no_spark_stats_argument(p)
    p.add_argument("--analyze", action="store_true", help="also run every subtree on Spark and show actual rows")
    from optimizer.cli.args import add_learn_argument

    add_learn_argument(p, reads=True, records="with --analyze (--format text or json)")
    p.add_argument("--wide", action="store_true",
                   help=f"print tree lines whole (default: held to {WIDTH} characters, long expression and "
                        "column lists elided with '...')")
    add_spark_args(p)
    add_cast_argument(p)
    add_path_argument(p)
