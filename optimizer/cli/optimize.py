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
    add_no_spark_stats_argument(p)
    from optimizer.cli.spark import add_spark_args

    add_spark_args(p)
    add_path_argument(p)


def add_no_spark_stats_argument(p: argparse.ArgumentParser) -> None:
    p.add_argument("--no-spark-stats", action="store_true",
                   help="with --tables, read only the Parquet footers (no Spark ANALYZE, no Spark started)")


def warn_unknown_tables(plan, statistics) -> None:
    """One warning line on stderr per table of the ``--stats`` file that the plan does not read."""
    from optimizer.cost.providers import FileStatistics
    from optimizer.cost.statistics import table_key

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


#: What ``--explain-out`` writes: the explanation as text, an HTML page, or a picture of both plans.
EXPLAIN_FORMATS = ("text", "html", "svg", "dot")


def explain_destination(args: argparse.Namespace) -> tuple[str, str] | None:
    """Where the explanation goes and in what format, checked before any work: ``--explain-out FILE``
    (format ``--explain-format``, else FILE's extension, else text), or stderr (text) with ``--explain``;
    ``None`` when none is asked for."""
    import os

    from optimizer.cli.args import EXTENSION_FORMATS

    if args.format in EXPLAIN_FORMATS[1:]:
        raise PlanError(f"--format is the optimized plan's format (json, binpb, text); the {args.format} of the "
                        f"optimization: --explain-out FILE.{args.format}")
    dest = args.explain_out
    if dest is None:
        if args.explain_format not in (None, "text"):
            raise PlanError(f"--explain-format {args.explain_format} needs --explain-out FILE (stderr takes text)")
        return ("-stderr", "text") if args.explain or args.verbose else None
    if dest == "-" and args.output == "-":
        raise PlanError("the plan and its explanation cannot both go to stdout: give -o FILE or --explain-out FILE",
                        "--explain-out")
    named = EXTENSION_FORMATS.get(os.path.splitext(dest)[1].lower()) if dest != "-" else None
    fmt = args.explain_format or (named if named in EXPLAIN_FORMATS else "text")
    if named is not None and named != fmt:
        raise PlanError(f"the file name says {named} but --explain-format is {fmt}", dest)
    from optimizer.plan_io import check_output

    check_output(dest)
    return dest, fmt


def explanation(plan, result, statistics, fmt: str, *, verbose: bool, title: str, wide: bool) -> str:
    """The explanation of one optimization in ``fmt``: the plans before and after with estimates, per phase
    and rule what fired and the cost before and after (text; the page's rule log), with ``verbose`` the
    plan after each phase (text)."""
    if fmt == "html":
        from optimizer.explain.html import optimize_html

        return optimize_html(plan, result, statistics, title=title)
    if fmt in ("dot", "svg"):
        from optimizer.explain.dot import before_after_dot, picture

        return picture(before_after_dot(plan, result.plan, statistics), fmt)
    from optimizer.explain import WIDTH
    from optimizer.explain.estimates import explain_before_after

    return explain_before_after(plan, result, statistics, verbose=verbose, width=None if wide else WIDTH) + "\n"


def cmd_optimize(args: argparse.Namespace) -> int:
    import time

    from optimizer.capabilities import default_capabilities, load_capabilities
    from optimizer.cli.args import output_format
    from optimizer.driver import Optimizer
    from optimizer.load.pipeline import load
    from optimizer.plan_io import check_output, save_plan
    from optimizer.targets import load_target

    check_output(args.output)
    explain_to = explain_destination(args)
    fmt = output_format(args.output, args.format)
    target = load_target(args.target)  # a bad name or profile is exit 2 before any work
    started = time.perf_counter()
    loaded = load(args.input)
    plan = loaded.plan
    loaded.check()
    read_seconds = time.perf_counter() - started
    statistics = statistics_from_args(args)
    warn_unknown_tables(plan, statistics)
    # --capabilities names the reader's profile instead of the target's.
    capabilities = load_capabilities(args.capabilities) if args.capabilities else None
    if capabilities is None and target.capabilities is None and target.physical_relations:
        capabilities = default_capabilities()
    result = Optimizer(statistics=statistics, capabilities=capabilities, target=target,
                       keep_plans=args.verbose).run(loaded)
    started = time.perf_counter()
    save_plan(result.plan, args.output, format=fmt)
    file_seconds = read_seconds + time.perf_counter() - started
    if explain_to is not None:
        dest, explain_fmt = explain_to
        text = explanation(plan, result, statistics, explain_fmt, verbose=args.verbose, title=args.input,
                           wide=args.wide)
        if explain_fmt == "text":
            text += (f"  (besides: {file_seconds * 1000:.1f} ms to read and check the plan file and write the "
                     "optimized one)\n")
        if dest == "-stderr":
            sys.stderr.write(text)
            sys.stderr.flush()
        else:
            write_text(dest, text)
    return 0


def add_target_argument(p: argparse.ArgumentParser) -> None:
    """``--target NAME|FILE``: the consumer the optimized plan is written for (docs/targets.md)."""
    p.add_argument("--target", default="spark", metavar="NAME|FILE",
                   help="the engine that will run the optimized plan: spark (default: physical relations for "
                        "the Spark backend), datafusion, datafusion-legacy (DataFusion 43, 46 to 54), duckdb, "
                        "acero, or a target profile JSON file (docs/targets.md); what the target cannot read is "
                        "refused with exit 3")


def register(sub, name: str, help_text: str) -> None:
    p = add_plan_command(sub, name, help_text, cmd_optimize,
                         description="Rewrite a logical Substrait plan into a physical one chosen by cost "
                                     "(hash/merge/nested-loop joins, top-N, window relations, filters "
                                     "pushed into reads, join order). Without statistics it runs on "
                                     "defaults and hints.",
                         formats=["json", "binpb", "text", "dot", "svg", "html"], default_format=None,
                         format_help="the optimized plan's format (default: from the file name, .json JSON, "
                                     ".binpb binary; JSON on stdout; text, the explain tree, only when asked "
                                     "for); the pictures of the optimization: --explain-out")
    add_statistics_args(p)
    from optimizer.cli.args import add_learn_argument

    add_learn_argument(p, reads=True, records=None)
    add_target_argument(p)
    p.add_argument("--capabilities", help="reader-capability profile JSON (default: the target's; Spark's Parquet "
                                          "reader for --target spark)")
    p.add_argument("--explain", action="store_true",
                   help="print on stderr the plan before and after, with estimates, and per phase and rule what "
                        "fired, the estimated cost before and after, and the time taken")
    p.add_argument("--explain-out", metavar="FILE",
                   help="write that explanation to FILE instead (the plan still goes to -o): text, or by FILE's "
                        "extension an HTML page (.html), a picture of both plans (.svg, .dot)")
    p.add_argument("--explain-format", choices=EXPLAIN_FORMATS,
                   help="the explanation's format (default: --explain-out's extension, else text)")
    p.add_argument("--verbose", action="store_true",
                   help="with the explanation, the plan after each phase (implies --explain)")
    p.add_argument("--wide", action="store_true", help="explanation tree lines whole (default: elided to a width)")
