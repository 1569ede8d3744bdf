"""``substrait-opt``: convert, explain, optimize, run and diff Substrait plans.

Exit codes: 0 success; 1 ``diff`` found a difference; 2 bad input or usage (one line on stderr
naming the problem and where in the plan); 3 unsupported relation/function or execution failure.
No traceback reaches the user (set ``SUBSTRAIT_OPT_DEBUG=1`` to see one).
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable, Sequence

from optimizer.cli_args import write_text
from optimizer.errors import OptimizerError
from optimizer.interrupt import Interrupted, restore_signals, stop_on_signals, stop_spark
from optimizer.paths import add_path_argument

PROG = "substrait-opt"


class UsageError(Exception):
    pass


class _Parser(argparse.ArgumentParser):
    """argparse, but a usage error is one line and exit code 2."""

    def error(self, message: str):  # type: ignore[override]
        raise UsageError(f"{self.prog}: {message} (see --help)")


def _add_common_output(p: argparse.ArgumentParser, formats: Sequence[str], default: str | None) -> None:
    p.add_argument("-o", "--output", default="-", help="output file, '-' for stdout (default)")
    p.add_argument("--format", choices=list(formats), default=default,
                   help=f"output format (default: {default or 'from the file name; json on stdout'})")


def cmd_convert(args: argparse.Namespace) -> int:
    from optimizer.plan_io import check_output, load_plan, save_plan
    from optimizer.schema import raise_for_problems

    check_output(args.output)
    plan = load_plan(args.input)
    raise_for_problems(plan)
    save_plan(plan, args.output, format=args.format)
    return 0


def cmd_explain(args: argparse.Namespace) -> int:
    from optimizer.explain import explain_plan
    from optimizer.plan_io import check_output, load_plan
    from optimizer.schema import raise_for_problems

    check_output(args.output)
    plan = load_plan(args.input)
    raise_for_problems(plan)
    if args.format in ("dot", "svg"):
        from optimizer.cli_args import statistics_from_args
        from optimizer.plot_dag import explain_dot, picture

        statistics = statistics_from_args(args) if args.tables or args.stats or getattr(args, "catalog", None) else None
        backend = None
        if args.analyze:
            from optimizer.cli_spark import backend_from_args

            backend = backend_from_args(args)
        write_text(args.output, picture(explain_dot(plan, statistics, backend, title=args.input), args.format))
        return 0
    if args.tables or args.stats or args.analyze or args.format in ("json", "html"):
        from optimizer.cli_args import explain_statistics
        from optimizer.explain_estimates import explain_with_estimates

        spark = backend = None
        if args.analyze:
            from optimizer.cli_spark import backend_from_args, spark_from_args

            spark = spark_from_args(args)
        statistics = explain_statistics(args, spark)
        if spark is not None:
            backend = backend_from_args(args, spark)
        if args.format == "html":
            from optimizer.explain_html import explain_html

            write_text(args.output, explain_html(plan, statistics, backend, title=args.input))
            return 0
        write_text(args.output, explain_with_estimates(plan, statistics, backend, args.format))
        return 0
    write_text(args.output, explain_plan(plan) + "\n")
    return 0


def package_version() -> str:
    """The installed package's version (its metadata); ``unknown`` when run from a tree not installed."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("substrait-optimizer")
    except PackageNotFoundError:
        return "unknown (not installed)"


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog=PROG, description="Cost-based optimizer for Substrait plans, with a PySpark backend.")
    parser.add_argument("--version", action="version", version=f"%(prog)s {package_version()}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)

    p = sub.add_parser("convert", help="read a plan (JSON or binary, any Substrait version) and write it out",
                       description="Read a plan (JSON or binary protobuf; older encodings upgraded losslessly) "
                                   "and write it as json, binpb or text.")
    p.add_argument("input", help="plan file, or '-' for stdin")
    _add_common_output(p, ("json", "binpb", "text"), None)
    p.set_defaults(func=cmd_convert)

    p = sub.add_parser("explain", help="print the plan as an indented tree of relations",
                       description="Print the plan as an indented tree, one line per relation with its key "
                                   "properties and output columns.")
    p.add_argument("input", help="plan file, or '-' for stdin")
    p.add_argument("-o", "--output", default="-", help="output file, '-' for stdout (default)")
    p.add_argument("--format", choices=["text", "json", "dot", "svg", "html"], default="text",
                   help="text tree (default), JSON list, a picture of the DAG (Graphviz dot / svg), or an HTML "
                        "page: the plan and its optimized form, with estimates per relation")
    p.add_argument("--tables", help="directory of the tables, a path or any URI Spark reads (for statistics and "
                                   "--analyze)")
    p.add_argument("--stats", help="statistics JSON file")
    p.add_argument("--analyze", action="store_true", help="also run every subtree on Spark and show actual rows")
    from optimizer.cli_spark import add_spark_args

    add_spark_args(p)
    add_path_argument(p)
    p.set_defaults(func=cmd_explain)

    for name, module, help_text in _EXTRA_COMMANDS:
        try:
            register = __import__(module, fromlist=["register"]).register
        except ImportError:
            continue
        register(sub, name, help_text)
    return parser


# Commands that live next to the component they drive; each module has register(subparsers, name, help).
_EXTRA_COMMANDS: list[tuple[str, str, str]] = [
    ("optimize", "optimizer.cli_optimize", "rewrite a logical plan into a cheaper physical one"),
    ("run", "optimizer.cli_run", "run plans on Spark and print/write their results"),
    ("diff", "optimizer.cli_diff", "run original and optimized plans on Spark and compare"),
]


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    stop_on_signals(None)  # SIGTERM: exit 143 with one line (commands that start Spark also cancel its jobs)
    try:
        args = parser.parse_args(argv)
        if not getattr(args, "command", None):
            parser.print_help(sys.stderr)
            return 2
        func: Callable[[argparse.Namespace], int] = args.func
        from optimizer.plan_io import deep_messages

        with deep_messages():
            return func(args)
    except UsageError as exc:
        print(str(exc), file=sys.stderr)
        return 2
    except OptimizerError as exc:
        print(f"{PROG}: error: {exc}", file=sys.stderr)
        return exc.exit_code
    except BrokenPipeError:
        return 0
    except RecursionError:
        print(f"{PROG}: error: the plan is nested too deeply for this tool (Python's recursion limit)", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        stop_spark()
        print(f"{PROG}: interrupted", file=sys.stderr)
        return 130
    except Interrupted as exc:
        stop_spark()
        print(f"{PROG}: interrupted by {exc}", file=sys.stderr)
        return exc.exit_code
    except Exception as exc:  # noqa: BLE001 - a traceback never reaches the user
        if os.environ.get("SUBSTRAIT_OPT_DEBUG"):
            raise
        text = " ".join(str(exc).split())[:300]
        print(f"{PROG}: internal error: {type(exc).__name__}: {text} (set SUBSTRAIT_OPT_DEBUG=1 for details)", file=sys.stderr)
        return 3
    finally:
        restore_signals()


def entry() -> None:
    sys.exit(main())


if __name__ == "__main__":
    entry()
