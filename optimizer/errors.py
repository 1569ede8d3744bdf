"""Errors the user sees: one line, naming the problem and where in the plan it is.

The CLI maps them to exit codes: ``PlanError`` -> 2 (bad input or usage),
``UnsupportedError`` and ``ExecutionError`` -> 3.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator


class OptimizerError(Exception):
    """Base class: a message and the path in the plan where the problem is."""

    exit_code = 2

    def __init__(self, message: str, path: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.path = path

    def __str__(self) -> str:
        text = inert(self.message.replace("\n", " ").strip())
        return f"{inert(self.path)}: {text}" if self.path else text


def inert(text: str) -> str:
    """``text`` with each character a terminal or a line splitter acts on (control characters, ESC, line
    and paragraph separators) written as its escape: a plan's names quoted in a message keep it one
    line, and cannot move a terminal's cursor or colour what it says.

    >>> inert("nat\\rion \\x1b[31m\\u2028")
    'nat\\\\rion \\\\x1b[31m\\\\u2028'
    """
    if text.isprintable():
        return text
    return "".join(c if c.isprintable() else c.encode("unicode_escape").decode("ascii") for c in text)


class PlanError(OptimizerError):
    """The input is not a valid (or upgradable) Substrait plan."""

    exit_code = 2


class UnsupportedError(OptimizerError):
    """A relation, function or feature that the component cannot handle."""

    exit_code = 3


class ExecutionError(OptimizerError):
    """Running a plan failed."""

    exit_code = 3


def read_user_file(path: str, kind: str, where: str | None = None, max_bytes: int | None = None) -> bytes:
    """The bytes of a file the user named (``max_bytes``: at most one byte more, enough to tell it is too
    long); each way opening it fails is one :class:`PlanError` naming ``where`` (default: the path), with
    ``kind`` saying what the file should have been ("a plan", "a SQL file")."""
    where = where or path
    try:
        with open(path, "rb") as f:
            return f.read() if max_bytes is None else f.read(max_bytes + 1)
    except ValueError:  # a NUL in the name
        raise PlanError("file name contains a NUL byte", repr(path) if where == path else where) from None
    except FileNotFoundError:
        raise PlanError("no such file", where) from None
    except IsADirectoryError:
        raise PlanError(f"is a directory, not {kind}", where) from None
    except OSError as exc:
        raise PlanError(f"cannot read: {exc.strerror or exc}", where) from None


def spark_errors() -> tuple[type[Exception], ...]:
    """What a failing Spark call raises: PySpark's errors (Classic and Connect) and the Py4J bridge's
    (a JVM error PySpark does not convert, a session whose JVM is gone). Imported on call: the
    optimizer without Spark never imports PySpark."""
    from py4j.protocol import Py4JError
    from pyspark.errors import PySparkException

    return (PySparkException, Py4JError)


@contextlib.contextmanager
def plain_exceptions_as(convert: Callable[[Exception], Exception]) -> Iterator[None]:
    """Raise ``convert(exc)`` for any exception of the block: for DataFusion's Python bindings, which raise
    every planning, Substrait, I/O and execution error as a plain ``Exception`` (nothing narrower names
    them), at the one place this tool calls them from (its producer and its engine runner)."""
    try:
        yield
    except Exception as exc:  # DataFusion's bindings: see above
        raise convert(exc) from exc
