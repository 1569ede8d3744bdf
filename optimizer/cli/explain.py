"""``substrait-opt explain``: the plan as a tree (text), a JSON list, or a picture (dot/svg), with
estimates when statistics are given and actual rows with ``--analyze``."""

from __future__ import annotations

import argparse

from optimizer.cli.args import add_plan_command, write_text
from optimizer.paths import add_path_argument


def cmd_explain(args: argparse.Namespace) -> int:
    from optimizer.explain import explain_plan
    from optimizer.plan_io import check_output, load_plan
    from optimizer.schema import raise_for_problems

    check_output(args.output)
    plan = load_plan(args.input)
    raise_for_problems(plan)
    if args.analyze:  # what needs no Spark is checked before it starts
        from optimizer.cli.spark import check_reads_before_spark, check_tables_arg

        check_tables_arg(args.tables)
        check_reads_before_spark(plan, args)
    if args.format in ("dot", "svg"):
        from optimizer.cli.args import statistics_from_args
        from optimizer.explain.dot import explain_dot, picture

        statistics = statistics_from_args(args) if args.tables or args.stats or getattr(args, "catalog", None) else None
        backend = None
        if args.analyze:
            from optimizer.cli.spark import backend_from_args

            backend = backend_from_args(args)
        write_text(args.output, picture(explain_dot(plan, statistics, backend, title=args.input), args.format))
        return 0
    if args.tables or args.stats or args.analyze or args.format in ("json", "html"):
        from optimizer.cli.args import explain_statistics
        from optimizer.explain.estimates import explain_with_estimates

        spark = backend = None
        if args.analyze:
            from optimizer.cli.spark import backend_from_args, spark_from_args

            spark = spark_from_args(args)
        statistics = explain_statistics(args, spark)
        if spark is not None:
            backend = backend_from_args(args, spark)
        if args.format == "html":
            from optimizer.explain.html import explain_html

            write_text(args.output, explain_html(plan, statistics, backend, title=args.input))
            return 0
        write_text(args.output, explain_with_estimates(plan, statistics, backend, args.format))
        return 0
    write_text(args.output, explain_plan(plan) + "\n")
    return 0


def register(sub, name: str, help_text: str) -> None:
    from optimizer.cli.spark import add_cast_argument, add_spark_args

    p = add_plan_command(sub, name, help_text, cmd_explain,
                         description="Print the plan as an indented tree, one line per relation with its key "
                                     "properties and output columns.",
                         formats=["text", "json", "dot", "svg", "html"], default_format="text",
                         format_help="text tree (default), JSON list, a picture of the DAG (Graphviz dot / "
                                     "svg), or an HTML page: the plan and its optimized form, with estimates "
                                     "per relation")
    p.add_argument("--tables", help="directory of the tables, a path or any URI Spark reads (for statistics and "
                                   "--analyze)")
    p.add_argument("--stats", help="statistics JSON file")
    p.add_argument("--analyze", action="store_true", help="also run every subtree on Spark and show actual rows")
    add_spark_args(p)
    add_cast_argument(p)
    add_path_argument(p)
