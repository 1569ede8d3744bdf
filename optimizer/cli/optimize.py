"""``substrait-opt optimize``: rewrite a plan into a cheaper physical one."""

from __future__ import annotations

import argparse
import sys

from optimizer.cli.args import add_plan_command, statistics_from_args, write_text
from optimizer.errors import PlanError
from optimizer.paths import add_path_argument


def add_statistics_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--tables", help="directory of the tables (DIR/<name>.parquet or DIR/<name>/; a path, file:// "
                                   "or any URI Spark reads): statistics from Spark ANALYZE (cached) and "
                                   "Parquet footers for local tables")
    p.add_argument("--stats", help="statistics JSON file (see docs/statistics.md); wins over --tables")
    p.add_argument("--no-spark-stats", action="store_true",
                   help="with --tables, read only the Parquet footers (no Spark ANALYZE)")
    from optimizer.cli.spark import add_spark_args

    add_spark_args(p)
    add_path_argument(p)


def warn_unknown_tables(plan, statistics) -> None:
    """One warning line on stderr per table of the ``--stats`` file that the plan does not read."""
    from cost.statistics import FileStatistics, table_key

    read = set()
    stack = list(plan.relations)
    while stack:  # every message of the plan, without recursion
        message = stack.pop()
        if message.DESCRIPTOR.full_name == "substrait.ReadRel" and message.HasField("named_table"):
            read.add(table_key(list(message.named_table.names)))
        for fd, value in message.ListFields():
            if fd.message_type is not None:
                stack.extend(v for v in (value if fd.is_repeated else [value]) if hasattr(v, "DESCRIPTOR"))
    for provider in getattr(statistics, "providers", []):
        if isinstance(provider, FileStatistics):
            for name in provider.names():
                if table_key(name) not in read:
                    print(f"substrait-opt: warning: {provider.path}: table '{name}' is not read by the plan "
                          "(its statistics are not used)", file=sys.stderr)


def cmd_optimize(args: argparse.Namespace) -> int:
    from optimizer.capabilities import default_capabilities, load_capabilities
    from optimizer.driver import Optimizer
    from optimizer.plan_io import check_output, load_plan, save_plan, write_file
    from optimizer.schema import raise_for_problems
    from optimizer.targets import load_target

    check_output(args.output)
    target = load_target(args.target)  # a bad name or profile is exit 2 before any work
    plan = load_plan(args.input)
    raise_for_problems(plan)
    statistics = statistics_from_args(args)
    warn_unknown_tables(plan, statistics)
    # --capabilities names the reader's profile instead of the target's.
    capabilities = load_capabilities(args.capabilities) if args.capabilities else None
    if capabilities is None and target.capabilities is None and target.physical_relations:
        capabilities = default_capabilities()
    result = Optimizer(statistics=statistics, capabilities=capabilities, target=target).run(plan)
    if args.explain and args.format == "html":
        from optimizer.explain.html import optimize_html

        write_text(args.output, optimize_html(plan, result, statistics, title=args.input))
        return 0
    if args.explain and args.format in ("dot", "svg"):
        # The picture is the output: before and after side by side.
        from optimizer.explain.dot import before_after_dot, picture

        text = picture(before_after_dot(plan, result.plan, statistics), args.format)
        if args.output == "-":
            sys.stdout.write(text)
        else:
            write_file(args.output, text.encode("utf-8"))
        return 0
    if args.format in ("dot", "svg", "html"):
        raise PlanError(f"--format {args.format} draws the plans: use it with --explain")
    if args.explain:
        from optimizer.explain.estimates import explain_before_after

        sys.stderr.write(explain_before_after(plan, result, statistics) + "\n")
    save_plan(result.plan, args.output, format=args.format)
    return 0


def add_target_argument(p: argparse.ArgumentParser) -> None:
    """``--target NAME|FILE``: the consumer the optimized plan is written for (docs/targets.md)."""
    p.add_argument("--target", default="spark", metavar="NAME|FILE",
                   help="the engine that will run the optimized plan: spark (default: physical relations for "
                        "the Spark backend), datafusion, duckdb, acero, or a target profile JSON file "
                        "(docs/targets.md); what the target cannot read is refused with exit 3")


def register(sub, name: str, help_text: str) -> None:
    p = add_plan_command(sub, name, help_text, cmd_optimize,
                         description="Rewrite a logical Substrait plan into a physical one chosen by cost "
                                     "(hash/merge/nested-loop joins, top-N, window relations, filters "
                                     "pushed into reads, join order). Without statistics it runs on "
                                     "defaults and hints.",
                         formats=["json", "binpb", "text", "dot", "svg", "html"], default_format=None,
                         format_help="output format (default: from the file name; json on stdout); with "
                                     "--explain, dot/svg draw the plan before and after side by side, html "
                                     "adds their estimates")
    add_statistics_args(p)
    add_target_argument(p)
    p.add_argument("--capabilities", help="reader-capability profile JSON (default: the target's; Spark's Parquet "
                                          "reader for --target spark)")
    p.add_argument("--explain", action="store_true",
                   help="print the plan before and after, with estimates, and each rule that fired (on stderr)")
