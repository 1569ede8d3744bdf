"""SQL given where a Substrait plan is due: recognised (only when the bytes are no plan) and named, with the
command that makes a plan of it (``substrait-opt plan``, :mod:`optimizer.load.producers`)."""

from __future__ import annotations

import re
from pathlib import Path

from optimizer.errors import PlanError

__all__ = ["looks_like_sql", "sql_instead_of_plan"]

#: The words a query starts with (DuckDB also takes ``FROM t SELECT ...``); comments and ``(`` skipped.
_SQL_START = re.compile(rb"\s*(?:(?:--[^\n]*(?:\n|$)|/\*.*?\*/|\()\s*)*(select|with|values|from|table)\b",
                        re.IGNORECASE | re.DOTALL)


def looks_like_sql(data: bytes) -> bool:
    """Whether input that failed to load as a plan is a SQL query (UTF-8 text starting with one).

    >>> looks_like_sql(b"-- TPC-H Q3\\nSELECT 1"), looks_like_sql(b"\\n(with x as (select 1) select * from x)")
    (True, True)
    >>> looks_like_sql(b"\\x12\\x03abc"), looks_like_sql(b"selection")
    (False, False)
    """
    try:
        data[:4096].decode("utf-8")
    except UnicodeDecodeError as exc:
        if exc.start < 4000:  # not text (a cut multi-byte character at the end is)
            return False
    return _SQL_START.match(data) is not None


def sql_instead_of_plan(name: str) -> PlanError:
    """The error for a SQL file given where a plan is expected: the command that makes a plan of it."""
    source = "-" if name == "<stdin>" else name
    stem = "plan" if source == "-" else Path(name).with_suffix("").name
    return PlanError(f"{name} looks like SQL, not a Substrait plan: make one with "
                     f"'substrait-opt plan {source} --tables DIR -o {stem}.binpb'")
