"""Spark's failures as the optimizer's one-line errors: a job that failed (a ``raise_error`` of the
plan's own checks keeps its path, an ANSI-mode check its name and first sentence) and the first line
of any Spark message."""

from __future__ import annotations

import re

from optimizer.errors import ExecutionError


def _first_line(exc: BaseException) -> str:
    for line in str(exc).strip().splitlines():
        if line.strip():
            return line.strip()
    return type(exc).__name__


_RAISED = re.compile(r"\[USER_RAISED_EXCEPTION\]\s*(.*?)(?:\s+SQLSTATE:.*)?$", re.S)


def _execution_error(exc: BaseException) -> ExecutionError:
    """A Spark job failure as an :class:`ExecutionError` (``raise_error`` messages keep their path)."""
    text = str(exc)
    m = _RAISED.search(text.splitlines()[0] if text else "")
    if m:
        message = m.group(1).strip()
        pm = re.match(r"^(relations\[\d+\][^\s:]*): (.*)$", message, re.S)
        if pm:
            return ExecutionError(pm.group(2), pm.group(1))
        return ExecutionError(message)
    first = _first_line(exc)
    am = _ANSI_ERROR.match(first)
    if am:  # a check of ANSI mode (overflow, division by zero, cast): its name and first sentence
        name = am.group(1)
        what = ("overflow" if "OVERFLOW" in name or "RANGE" in name
                else "division by zero" if name == "DIVIDE_BY_ZERO" else "invalid value")
        return ExecutionError(f"{what}: [{am.group(1)}] {am.group(2)}")
    return ExecutionError(f"Spark failed: {first}")


# Spark's errors for the checks ANSI mode adds to arithmetic and casts; their advice ("set
# spark.sql.ansi.enabled to false") is not for users of a plan.
_ANSI_ERROR = re.compile(
    r"^\[(ARITHMETIC_OVERFLOW|NUMERIC_VALUE_OUT_OF_RANGE|DIVIDE_BY_ZERO|CAST_OVERFLOW|CAST_INVALID_INPUT|"
    r"INVALID_ARRAY_INDEX|INVALID_ARRAY_INDEX_IN_ELEMENT_AT|DATETIME_OVERFLOW)[^\]]*\]\s*(.*?[.!])(?:\s|$)")
