"""Helpers the subcommands share: the parser of a one-plan command, the statistics their options ask for,
and writing text output."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
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


def add_engine_command(sub, name: str, help_text: str, func: Callable[[argparse.Namespace], int], *,
                       description: str, what_runs: str, how_read: str) -> argparse.ArgumentParser:
    """The parser of a command ``func`` that runs plan files (``inputs``) on an engine (``--engine``, Spark
    by default): ``what_runs`` there, read by an engine other than Spark as ``how_read`` says; the
    command adds its own options."""
    from optimizer.engines import ENGINES

    p = sub.add_parser(name, help=help_text, description=description)
    p.add_argument("inputs", nargs="+", metavar="IN", help="plan files ('-' for stdin)")
    p.add_argument("--engine", choices=ENGINES, default="spark",
                   help=f"where {what_runs} run: spark (default; the project's backend) or datafusion, duckdb, "
                        f"acero ({how_read}; tables from --tables by name; see docs/engines.md)")
    p.set_defaults(func=func)
    return p


def add_limit_argument(p: argparse.ArgumentParser) -> None:
    """``--limit NAME=VALUE``: raise (or lower) one of the bounds a plan is held to (optimizer.load.limits)."""
    from optimizer.load.limits import DEFAULT, NAMES

    p.add_argument("--limit", action="append", default=[], metavar="NAME=VALUE",
                   help="change a bound on the plans read (repeatable): "
                        + ", ".join(f"{n} (default {getattr(DEFAULT, n)})" for n in NAMES)
                        + "; see docs/security.md")


def limits_from_args(args: argparse.Namespace):
    """The :class:`optimizer.load.limits.Limits` the ``--limit`` options ask for."""
    from optimizer.load.limits import current, parse_settings

    return parse_settings(getattr(args, "limit", None) or [], current())


def write_text(dest: str, text: str) -> None:
    """``text`` to the file ``dest``, or to stdout for ``-``."""
    if dest == "-":
        sys.stdout.write(text)
        sys.stdout.flush()
    else:
        from optimizer.plan_io import write_file

        write_file(dest, text.encode("utf-8"))


def statistics_from_args(args: argparse.Namespace, spark: Any = None):
    """The statistics every command (``optimize``, ``diff``, ``explain`` in every format) gets from its
    options, one stack (:func:`optimizer.spark.statistics.default_statistics`): plan hints; ``--stats``;
    with ``--tables``, Spark ANALYZE (cached) unless ``--no-spark-stats``, then the Parquet footers;
    ``--catalog``'s.
    ``spark``: a session already started (``explain --analyze``), else one started on first use."""
    import os

    from optimizer.cli.spark import check_tables_arg, lazy_spark_from_args
    from optimizer.spark.statistics import default_statistics

    stats_file = getattr(args, "stats", None)
    if stats_file and not os.path.exists(stats_file):
        raise PlanError("no such statistics file", stats_file)
    tables = getattr(args, "tables", None)
    check_tables_arg(tables)
    catalog = getattr(args, "catalog", None)
    wants_spark = catalog or (tables and not getattr(args, "no_spark_stats", False))
    if not wants_spark:
        spark = None
    elif spark is None:
        spark = lazy_spark_from_args(args)
    statistics = default_statistics(spark=spark, tables=tables or None, stats_file=stats_file or None,
                                    catalog=catalog, analyze_tables=getattr(args, "analyze_tables", False),
                                    files=file_access(args))
    learned = learned_rows_from_args(args)
    if learned is None:
        return statistics
    from optimizer.cost.learned import LearnedStatistics

    return LearnedStatistics(statistics, learned)


def add_learn_argument(p: argparse.ArgumentParser, *, reads: bool, records: str | None) -> None:
    """``--learn``: learn from execution. ``reads``: the command's estimates take the rows subtrees produced
    when they ran; ``records``: when the command records them (None: never)."""
    store = ("kept in the statistics cache ($XDG_CACHE_HOME/substrait-optimizer/learned-rows.json; only "
             "subtrees reading tables under --tables)")
    parts = []
    if reads:
        parts.append("estimate each subtree that ran before (the same relations over the same tables, their "
                     "files unchanged) at the rows it produced")
    if records:
        parts.append(f"{records}, record each relation's actual rows")
    p.add_argument("--learn", action="store_true",
                   help="learn from execution: " + "; ".join(parts) + f"; {store}; see docs/statistics.md")


def learned_rows_from_args(args: argparse.Namespace):
    """The learned rows (:class:`optimizer.cost.learned.LearnedRows`) of ``--learn`` for the tables of
    ``--tables``, in the statistics cache beside Spark's statistics; None without ``--learn``."""
    if not getattr(args, "learn", False):
        return None
    from optimizer.cost.learned import LearnedRows, learned_path
    from optimizer.spark.statistics import default_cache_path

    tables = getattr(args, "tables", None) or None
    return LearnedRows(learned_path(default_cache_path()), tables)


def save_learned(learned) -> None:
    """Write what ``learned`` recorded into its file; a file that cannot be written is exit 2 naming it."""
    try:
        learned.save()
    except OSError as e:
        raise PlanError(f"cannot write the learned rows: {e.strerror or e}", str(learned.path)) from None


#: What an output file's name says it holds. A plan is read back from JSON or binary only: ``.txt`` is
#: the explain tree, which no command reads, so it is written only when ``--format text`` asks for it.
EXTENSION_FORMATS = {".json": "json", ".binpb": "binpb", ".pb": "binpb", ".bin": "binpb", ".substrait": "binpb",
                     ".txt": "text", ".dot": "dot", ".gv": "dot", ".svg": "svg", ".html": "html", ".htm": "html"}


def output_format(dest: str, fmt: str | None, *, plan: bool = True) -> str | None:
    """The format to write ``dest`` in, checked before any work (exit 2 naming ``dest``): a name whose
    extension says another format than ``--format`` is refused; without ``--format`` a plan (``plan``)
    follows the extension (``.json`` JSON, ``.txt`` refused: the tree cannot be read back, anything else
    binary; stdout JSON); binary is never written to a terminal."""
    import os

    ext = os.path.splitext(dest)[1].lower() if dest != "-" else ""
    named = EXTENSION_FORMATS.get(ext)
    if fmt is None and plan:
        if named == "text":
            raise PlanError("a .txt file would hold the explain tree, which cannot be read back as a plan: "
                            "name it .json or .binpb, or give --format text for the tree", dest)
        if named is not None and named not in ("json", "binpb"):
            raise PlanError(f"a {ext} file is not a plan: name it .json or .binpb, or give --format", dest)
        fmt = "json" if dest == "-" else named or "binpb"
    elif fmt is not None and named is not None and named != fmt:
        raise PlanError(f"the file name says {named} but --format is {fmt}: name it "
                        f"{_extension_of(fmt)} or give --format {named}", dest)
    if fmt == "binpb" and dest == "-" and sys.stdout.isatty():
        raise PlanError("a binary plan is not written to a terminal: give -o FILE (or redirect stdout), "
                        "or --format json", "stdout")
    return fmt


def _extension_of(fmt: str) -> str:
    return next((ext for ext, f in EXTENSION_FORMATS.items() if f == fmt), f".{fmt}")


def plan_name(source: str) -> str:
    """``q05-isthmus_plan.json`` -> ``q05-isthmus_plan``; stdin -> ``stdin``."""
    if source == "-":
        return "stdin"
    name = Path(source).name
    for suffix in (".json", ".binpb", ".pb", ".bin", ".substrait"):
        if name.endswith(suffix):
            return name[: -len(suffix)]
    return name


#: Options only Spark reads: refused with another ``--engine`` rather than ignored.
_SPARK_ONLY = (("master", "--master"), ("remote", "--remote"), ("conf", "--conf"), ("catalog", "--catalog"),
               ("analyze_tables", "--analyze-tables"), ("allow_lossy_casts", "--allow-lossy-casts"), ("ui", "--ui"))


def one_root(plan) -> None:
    """``run`` and ``diff`` answer one plan root: a plan with several (``relations`` entries that are
    ``RelRoot`` s, not shared subtrees) is refused naming them, rather than answering the first alone."""
    from optimizer.errors import UnsupportedError

    roots = [i for i, r in enumerate(plan.relations) if r.WhichOneof("rel_type") == "root"]
    if len(roots) > 1:
        raise UnsupportedError(f"the plan has {len(roots)} roots ({', '.join(f'relations[{i}]' for i in roots)}); "
                               "run and diff answer a plan of one (the Python API's root= picks one)", "relations")


def check_engine_args(args: argparse.Namespace, engine: str) -> None:
    """Refuse the options only Spark reads, and check ``--tables``/``--stats``, for ``--engine``
    other than Spark (``diff`` and ``run``)."""
    for attr, option in _SPARK_ONLY:
        if getattr(args, attr, None):
            raise PlanError(f"a Spark option; --engine {engine} does not read it", option)
    from optimizer.cli.spark import check_tables_arg

    check_tables_arg(getattr(args, "tables", None))
    if getattr(args, "stats", None) and not Path(args.stats).exists():
        raise PlanError("no such statistics file", args.stats)
