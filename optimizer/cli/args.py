"""Helpers the subcommands share: the parser of a one-plan command, the statistics their options ask for,
and writing text output."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence
from typing import Any

from optimizer.errors import PlanError
from optimizer.paths import file_access


def add_plan_command(sub, name: str, help_text: str, func: Callable[[argparse.Namespace], int], *,
                     description: str, formats: Sequence[str], default_format: str | None,
                     format_help: str) -> argparse.ArgumentParser:
    """The parser of a command ``func`` that reads one plan (``input``) and writes one result
    (``-o``/``--output``) in one of ``formats`` (``--format``); the command adds its own options."""
    p = sub.add_parser(name, help=help_text, description=description)
    p.add_argument("input", help="plan file, or '-' for stdin")
    p.add_argument("-o", "--output", default="-", help="output file, '-' for stdout (default)")
    p.add_argument("--format", choices=list(formats), default=default_format, help=format_help)
    p.set_defaults(func=func)
    return p


def add_limit_argument(p: argparse.ArgumentParser) -> None:
    """``--limit NAME=VALUE``: raise (or lower) one of the bounds a plan is held to (optimizer.limits)."""
    from optimizer.limits import DEFAULT, NAMES

    p.add_argument("--limit", action="append", default=[], metavar="NAME=VALUE",
                   help="change a bound on the plans read (repeatable): "
                        + ", ".join(f"{n} (default {getattr(DEFAULT, n)})" for n in NAMES)
                        + "; see docs/security.md")


def limits_from_args(args: argparse.Namespace):
    """The :class:`optimizer.limits.Limits` the ``--limit`` options ask for."""
    from optimizer.limits import current, parse_settings

    return parse_settings(getattr(args, "limit", None) or [], current())


def write_text(dest: str, text: str) -> None:
    """``text`` to the file ``dest``, or to stdout for ``-``."""
    if dest == "-":
        sys.stdout.write(text)
        sys.stdout.flush()
    else:
        from optimizer.plan_io import write_file

        write_file(dest, text.encode("utf-8"))


def statistics_from_args(args: argparse.Namespace):
    """The statistics stack the CLI options ask for (hints always; file; Spark; Parquet)."""
    from cost.statistics import default_statistics
    from optimizer.cli.spark import check_tables_arg, lazy_spark_from_args

    if getattr(args, "stats", None):
        import os

        if not os.path.exists(args.stats):
            raise PlanError("no such statistics file", args.stats)
    tables = getattr(args, "tables", None)
    check_tables_arg(tables)
    catalog = getattr(args, "catalog", None)
    wants_spark = catalog or (tables and not getattr(args, "no_spark_stats", False))
    spark = lazy_spark_from_args(args) if wants_spark else None
    return default_statistics(spark=spark, tables=tables or None, stats_file=getattr(args, "stats", None),
                              catalog=catalog, analyze_tables=getattr(args, "analyze_tables", False),
                              files=file_access(args))


def explain_statistics(args: argparse.Namespace, spark: Any = None) -> Any:
    """The statistics ``explain`` asks for: Spark's only on ``spark`` (``--analyze``) or for ``--catalog``."""
    import os

    from cost.statistics import default_statistics

    stats_file = getattr(args, "stats", None)
    tables = getattr(args, "tables", None)
    if stats_file and not os.path.exists(stats_file):
        raise PlanError("no such statistics file", stats_file)
    from optimizer.cli.spark import check_tables_arg

    check_tables_arg(tables)
    catalog = getattr(args, "catalog", None)
    if catalog and spark is None:
        from optimizer.cli.spark import lazy_spark_from_args

        spark = lazy_spark_from_args(args)
    return default_statistics(spark=spark, tables=tables or None, stats_file=stats_file or None,
                              catalog=catalog, analyze_tables=getattr(args, "analyze_tables", False),
                              files=file_access(args))
