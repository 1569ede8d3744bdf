"""``substrait-opt``: plan (from SQL), convert, explain, optimize, run and diff Substrait plans.

Exit codes: 0 success; 1 ``diff`` found a difference; 2 bad input or usage (one line on stderr
naming the problem and where in the plan); 3 unsupported relation/function or execution failure.
No traceback reaches the user (set ``SUBSTRAIT_OPT_DEBUG=1`` to see one).
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

from optimizer.cli.interrupt import Interrupted, pending, restore_signals, stop_on_signals, stop_spark
from optimizer.errors import OptimizerError, inert

PROG = "substrait-opt"


class UsageError(Exception):
    pass


class _Formatter(argparse.HelpFormatter):
    """argparse's, but a path (the documentation's) is never broken at its hyphens."""

    def _fill_text(self, text: str, width: int, indent: str) -> str:
        import textwrap

        return textwrap.fill(" ".join(text.split()), width, initial_indent=indent, subsequent_indent=indent,
                             break_on_hyphens=False, break_long_words=False)


class _Parser(argparse.ArgumentParser):
    """argparse, but a usage error is one line and exit code 2."""

    def __init__(self, *args, **kwargs) -> None:
        kwargs.setdefault("formatter_class", _Formatter)
        super().__init__(*args, **kwargs)

    def error(self, message: str):  # type: ignore[override]
        raise UsageError(f"{self.prog}: {message} (see --help)")


def package_version() -> str:
    """The installed package's version (its metadata); ``unknown`` when run from a tree not installed."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("substrait-optimizer")
    except PackageNotFoundError:
        return "unknown (not installed)"


def docs_dir() -> Path | None:
    """Where the documentation (docs/*.md) is: the checkout's ``docs/`` when run from the repository,
    else the copy the wheel installs (``<prefix>/share/doc/substrait-optimizer``); None if neither is."""
    checkout = Path(__file__).resolve().parents[2]
    if (checkout / "pyproject.toml").is_file() and (checkout / "docs" / "cli.md").is_file():
        return checkout / "docs"
    from importlib.metadata import PackageNotFoundError, distribution

    try:
        dist = distribution("substrait-optimizer")
    except PackageNotFoundError:
        return None
    for file in dist.files or ():
        if file.name == "cli.md" and file.parent.name == "substrait-optimizer":
            found = Path(dist.locate_file(file)).resolve()
            if found.is_file():
                return found.parent
    return None


def _docs_epilog(page: str) -> str:
    where = docs_dir()
    if where is None:
        return "Documentation: the docs/ folder of the substrait-optimizer source (not installed here)."
    return f"Documentation (docs/ in the texts above): {where}; start with tutorial.md; every command: {page}."


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog=PROG, description="Cost-based optimizer for Substrait plans, with a PySpark backend.",
                     epilog=_docs_epilog("cli.md"))
    parser.add_argument("--version", action="version", version=f"%(prog)s {package_version()}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)

    # One module per command, each with register(subparsers, name, help).
    from optimizer.cli import convert, diff, explain, optimize, plan, run

    commands = (
        (plan, "make a plan of a SQL query (DataFusion or DuckDB writes it)"),
        (convert, "read a plan (JSON or binary, any Substrait version) and write it out"),
        (explain, "print the plan as an indented tree of relations"),
        (optimize, "rewrite a logical plan into a cheaper physical one"),
        (run, "run plans on Spark and print/write their results"),
        (diff, "run original and optimized plans on Spark and compare"),
    )
    for module, help_text in commands:
        module.register(sub, module.__name__.rpartition(".")[2], help_text)
    from optimizer.cli.args import add_limit_argument

    for command in sub.choices.values():
        add_limit_argument(command)
        command.epilog = parser.epilog
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    if sys.stdout is None or sys.stderr is None:  # started with a closed stdout or stderr (``>&-``)
        if sys.stderr is not None:
            print(f"{PROG}: error: standard output is closed", file=sys.stderr)
        return 2
    parser = build_parser()
    stop_on_signals(None)  # SIGTERM: exit 143 with one line (commands that start Spark also cancel its jobs)
    try:
        args = parser.parse_args(argv)
        if not getattr(args, "command", None):
            print(f"{PROG}: error: a command is required: plan, convert, explain, optimize, run or diff "
                  f"({PROG} --help)", file=sys.stderr)
            return 2
        func: Callable[[argparse.Namespace], int] = args.func
        from optimizer.cli.args import limits_from_args
        from optimizer.load.limits import applied
        from optimizer.plan_io import deep_messages

        with deep_messages(), applied(limits_from_args(args)):
            return func(args)
    except UsageError as exc:
        print(str(exc), file=sys.stderr)
        return 2
    except OptimizerError as exc:
        if (code := _signalled()) is not None:
            return code
        print(f"{PROG}: error: {exc}", file=sys.stderr)
        return exc.exit_code
    except BrokenPipeError:
        return 0
    except OSError as exc:  # a stream or file failed under the tool (stdout on a full disk): where and why, exit 3
        if (code := _signalled()) is not None:
            return code
        where = inert(str(exc.filename)) if exc.filename is not None else "the output: cannot write"
        print(f"{PROG}: error: {where}: {exc.strerror or exc}", file=sys.stderr)
        return 3
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
    except Exception as exc:  # any bug: a traceback never reaches the user
        if (code := _signalled()) is not None:
            return code
        if os.environ.get("SUBSTRAIT_OPT_DEBUG"):
            raise
        text = inert(" ".join(str(exc).split())[:300])
        print(f"{PROG}: internal error: {type(exc).__name__}: {text} (set SUBSTRAIT_OPT_DEBUG=1 for details)", file=sys.stderr)
        return 3
    finally:
        restore_signals()


def _signalled() -> int | None:
    """The exit code of a command a signal stopped, its line printed; None when no signal came. A signal
    can cut a Spark call short (or end Spark's JVM, see :mod:`optimizer.cli.interrupt`): the error that
    call then ends with is the signal's doing, not the command's."""
    stopped = pending()
    if stopped is None:
        return None
    stop_spark()
    print(f"{PROG}: interrupted by {stopped}", file=sys.stderr)
    return stopped.exit_code


def entry() -> None:
    sys.exit(main())
