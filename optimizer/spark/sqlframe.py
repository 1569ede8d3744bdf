"""DataFrames kept as Spark SQL text until Spark needs them: one analysis per plan, not one per relation.

Why: Spark Classic analyses every DataFrame the moment it is built, and each analysis walks the whole
plan below it. A backend that builds a DataFrame per relation pays 10-25 analyses for a TPC-H plan
(most of its overhead); ``spark.sql`` on the same query pays one. :class:`SqlFrame` is a PySpark
``DataFrame`` that holds its query as SQL text. ``select``, ``filter``, ``join``, ``crossJoin``,
``orderBy``, ``limit``, ``offset``, ``hint``, ``distinct``, ``groupBy().agg()``, the set operations,
``exists`` and ``scalar`` build more text, without the JVM, when every column they are given is a
:class:`~optimizer.spark.sqltext.SqlColumn` and every DataFrame a ``SqlFrame``. Anything else (a
window, a non-text column, ``schema``, ``toDF``, execution...) reads ``_jdf``, which runs
``spark.sql(text)`` once and keeps the DataFrame; from there the ordinary API carries on, with the same
meaning.

Equivalence: each method's text is the SQL form of the logical plan PySpark's own call builds, over
the input as a subquery with a fresh alias (``SELECT <cols> FROM (<input>) AS _q7``): ``filter`` is
``WHERE``, ``join(how)`` the SQL join of that type, ``hint(h)`` the ``/*+ H(_q7) */`` hint on the
input's alias (Spark resolves it to the same ``ResolvedHint`` node), ``groupBy(k).agg(m)`` is
``SELECT k, m ... GROUP BY k``, ``union`` is ``UNION ALL`` (both by position), and so on. The columns
the backend builds have unique names, so unqualified names resolve as they would on the DataFrame.
A clause joins the ``SELECT`` below it when SQL
would apply it after that query's own clauses anyway, so the text has few levels (each level is more
for Spark to analyse). Two SQL rules that a DataFrame does not have are kept out: an integer literal in ``ORDER BY`` or
``GROUP BY`` would be read as a column position, so those stay on the DataFrame API.

>>> from optimizer.spark.sqltext import col
>>> t = SqlFrame.table("`t`", session=None)
>>> t.filter(col("`a`") > 1).select(col("`a`").alias("b")).sql_text()
'SELECT `a` AS `b` FROM `t` WHERE (`a` > 1)'
>>> t.orderBy(col("`a`").desc_nulls_last()).limit(5).sql_text()
'SELECT * FROM `t` ORDER BY `a` DESC NULLS LAST LIMIT 5'
>>> t.limit(5).filter(col("`a`").isNull()).sql_text()  # a filter after a limit: a subquery
'SELECT * FROM (SELECT * FROM `t` LIMIT 5) AS _q... WHERE (`a` IS NULL)'
"""

from __future__ import annotations

import itertools
import re
import threading
from dataclasses import dataclass, replace
from typing import Any

from pyspark.sql.classic.dataframe import DataFrame as _ClassicDataFrame

from optimizer.spark.sqltext import SqlColumn, SqlSortOrder

__all__ = ["SqlFrame", "is_text", "materialize"]

_aliases = itertools.count(1)
_alias_lock = threading.Lock()

# DataFrame join types -> SQL join syntax.
_JOINS = {
    "inner": "JOIN",
    "cross": "CROSS JOIN",
    "full": "FULL OUTER JOIN",
    "outer": "FULL OUTER JOIN",
    "fullouter": "FULL OUTER JOIN",
    "full_outer": "FULL OUTER JOIN",
    "left": "LEFT OUTER JOIN",
    "leftouter": "LEFT OUTER JOIN",
    "left_outer": "LEFT OUTER JOIN",
    "right": "RIGHT OUTER JOIN",
    "rightouter": "RIGHT OUTER JOIN",
    "right_outer": "RIGHT OUTER JOIN",
    "semi": "LEFT SEMI JOIN",
    "leftsemi": "LEFT SEMI JOIN",
    "left_semi": "LEFT SEMI JOIN",
    "anti": "LEFT ANTI JOIN",
    "leftanti": "LEFT ANTI JOIN",
    "left_anti": "LEFT ANTI JOIN",
}

# Join strategy hints Spark SQL knows by the same names as DataFrame.hint.
_HINTS = {"broadcast", "broadcastjoin", "mapjoin", "shuffle_hash", "merge", "shuffle_merge", "mergejoin",
          "shuffle_replicate_nl"}

# An integer literal, which SQL reads as a position in ORDER BY / GROUP BY.
_INTEGER = re.compile(r"^[\s(]*[-+]?\s*\d+[LSY]?[\s)]*$", re.I)


def _alias() -> str:
    with _alias_lock:
        return f"_q{next(_aliases)}"


def _texts(cols: tuple[Any, ...]) -> list[SqlColumn] | None:
    """The columns if every one is a SqlColumn (a single list argument is unpacked), else None."""
    flat = list(cols[0]) if len(cols) == 1 and isinstance(cols[0], list | tuple) else list(cols)
    if not flat or not all(isinstance(c, SqlColumn) for c in flat):
        return None
    return flat


def _expression(c: SqlColumn) -> str:
    """The text of a column used as an expression (an alias is dropped, as Spark drops inner aliases)."""
    return c._text


def _ordinal_risk(c: SqlColumn) -> bool:
    base = c._base if isinstance(c, SqlSortOrder) else c  # (Column.__getattr__ answers any name)
    return bool(_INTEGER.match(base._text))


def is_text(df: Any) -> bool:
    """Whether ``df`` is a SqlFrame not yet handed to Spark."""
    return isinstance(df, SqlFrame) and df._jdf_value is None


def materialize(df: Any) -> Any:
    """``df`` as an ordinary DataFrame (a SqlFrame runs its text through ``spark.sql``)."""
    return df.frame() if isinstance(df, SqlFrame) else df


@dataclass(frozen=True)
class _Query:
    """One ``SELECT``: ``SELECT /*+ hint */ [DISTINCT] select FROM source WHERE ... GROUP BY ... ORDER BY ...
    LIMIT ... OFFSET ...`` (SQL applies them in the order WHERE, GROUP BY, SELECT, DISTINCT, ORDER BY,
    OFFSET, LIMIT)."""

    source: str  # the FROM clause: a table, an aliased subquery, or a chain of joins of them
    select: str = "*"
    where: str | None = None
    group: str | None = None  # GROUP BY list ("" for a global aggregate)
    distinct: bool = False
    hint: str | None = None
    order: str | None = None
    offset: int | None = None
    limit: int | None = None

    def text(self) -> str:
        parts = ["SELECT"]
        if self.hint:
            parts.append(f"/*+ {self.hint} */")
        if self.distinct:
            parts.append("DISTINCT")
        parts += [self.select, "FROM", self.source]
        if self.where is not None:
            parts.append(f"WHERE {self.where}")
        if self.group:
            parts.append(f"GROUP BY {self.group}")
        if self.order is not None:
            parts.append(f"ORDER BY {self.order}")
        if self.limit is not None:
            parts.append(f"LIMIT {self.limit}")
        if self.offset is not None:
            parts.append(f"OFFSET {self.offset}")
        return " ".join(parts)

    @property
    def plain(self) -> bool:
        """``SELECT * FROM source [WHERE ...]``: the source's rows, filtered; more clauses may be added."""
        return (self.select == "*" and self.group is None and not self.distinct and self.hint is None
                and self.order is None and self.offset is None and self.limit is None)


class SqlFrame(_ClassicDataFrame):
    """A PySpark DataFrame held as SQL text; ``_jdf`` (the JVM Dataset) is built on first use.

    A method adds its clause to the same ``SELECT`` when SQL applies that clause after the ones already
    there (a filter to ``SELECT * ... WHERE``, a projection over it, ``ORDER BY`` then ``LIMIT``...);
    otherwise the query becomes a subquery of a new ``SELECT``. Fewer levels, less for Spark to analyse.
    """

    def __new__(cls, *args: Any, **kwargs: Any) -> SqlFrame:
        return object.__new__(cls)

    def __init__(self, query: _Query | str, session) -> None:  # noqa: D107 -- the base needs a JVM Dataset
        self._query = query if isinstance(query, _Query) else _Query(f"({query}) AS {_alias()}")
        self._jdf_value = None
        self._df: _ClassicDataFrame | None = None
        self._session = session
        self._sc = getattr(session, "_sc", None)
        self.is_cached = False
        self._support_repr_html = False

    @classmethod
    def table(cls, name: str, session) -> SqlFrame:
        """All columns of a table or temporary view (``name`` as SQL, quoted by the caller)."""
        return cls(_Query(name), session)

    @property
    def _text(self) -> str:
        return self._query.text()

    def sql_text(self) -> str:
        """The query."""
        return self._query.text()

    def __repr__(self) -> str:
        return f"SqlFrame<{self._text[:200]}>"

    # ----------------------------------------------------------------------------- materialization

    def frame(self) -> _ClassicDataFrame:
        """The ordinary DataFrame of the text (analysed once, then kept)."""
        if self._df is None:
            self._df = self._session.sql(self._text)
            self._jdf_value = self._df._jdf
        return self._df

    @property
    def _jdf(self):  # type: ignore[override]
        return self.frame()._jdf

    def _new(self, query: _Query) -> SqlFrame:
        return SqlFrame(query, self._session)

    def _from(self) -> str:
        return f"({self._text}) AS {_alias()}"

    def _wrapped(self) -> _Query:
        """A new ``SELECT * FROM (this) AS _qN``."""
        return _Query(self._from())

    def _open(self) -> _Query:
        """This query if it is plain (more clauses can be added), else a new one over it."""
        return self._query if self._query.plain else self._wrapped()

    # ------------------------------------------------------------------------------- relations

    def select(self, *cols: Any):  # type: ignore[override]
        texts = _texts(cols)
        if texts is None:
            return self.frame().select(*cols)
        return self._new(replace(self._open(), select=", ".join(c.sql() for c in texts)))

    def filter(self, condition: Any):  # type: ignore[override]
        if not isinstance(condition, SqlColumn):
            return self.frame().filter(condition)
        q = self._open()
        cond = _expression(condition)
        return self._new(replace(q, where=cond if q.where is None else f"({q.where}) AND ({cond})"))

    where = filter

    def orderBy(self, *cols: Any, **kwargs: Any):  # type: ignore[override]  # noqa: N802
        texts = _texts(cols)
        if kwargs or texts is None or any(_ordinal_risk(c) for c in texts):
            return self.frame().orderBy(*cols, **kwargs)
        return self._new(replace(self._open(), order=", ".join(_sort_text(c) for c in texts)))

    sort = orderBy

    def limit(self, num: int):  # type: ignore[override]
        if isinstance(num, bool) or not isinstance(num, int) or num < 0:
            return self.frame().limit(num)
        q = self._query
        if q.limit is not None or q.hint is not None:
            q = self._wrapped()
        return self._new(replace(q, limit=num))  # after ORDER BY and OFFSET, as SQL applies them

    def offset(self, num: int):  # type: ignore[override]
        if isinstance(num, bool) or not isinstance(num, int) or num < 0:
            return self.frame().offset(num)
        q = self._query
        if q.limit is not None or q.offset is not None or q.hint is not None:
            q = self._wrapped()  # SQL's OFFSET comes before its LIMIT
        return self._new(replace(q, offset=num))

    def hint(self, name: str, *parameters: Any):  # type: ignore[override]
        if parameters or not isinstance(name, str) or name.lower() not in _HINTS:
            return self.frame().hint(name, *parameters)
        alias = _alias()
        return self._new(_Query(f"({self._text}) AS {alias}", hint=f"{name.upper()}({alias})"))

    def distinct(self):  # type: ignore[override]
        q = self._query
        if (q.group is not None or q.distinct or q.hint is not None or q.order is not None
                or q.offset is not None or q.limit is not None):
            q = self._wrapped()
        return self._new(replace(q, distinct=True))

    def _join_source(self) -> str:
        """This query as the left input of a join: a plain join chain continues (SQL joins associate
        to the left), anything else is an aliased subquery."""
        q = self._query
        if q.plain and q.where is None:
            return q.source
        return self._from()

    def join(self, other: Any, on: Any = None, how: str | None = None):  # type: ignore[override]
        kind = _JOINS.get((how or "inner").lower())
        if (
            kind is None
            or not isinstance(other, SqlFrame)
            or (on is not None and not isinstance(on, SqlColumn))
            or (kind == "CROSS JOIN" and on is not None)
        ):
            return self.frame().join(materialize(other), on, how)
        condition = "" if on is None else f" ON {_expression(on)}"
        if on is None and kind == "JOIN":
            kind = "CROSS JOIN"
        return self._new(_Query(f"{self._join_source()} {kind} {other._from()}{condition}"))

    def crossJoin(self, other: Any):  # type: ignore[override]  # noqa: N802
        if not isinstance(other, SqlFrame):
            return self.frame().crossJoin(other)
        return self._new(_Query(f"{self._join_source()} CROSS JOIN {other._from()}"))

    def _set_operation(self, other: Any, operator: str, method: str):
        if not isinstance(other, SqlFrame):
            return getattr(self.frame(), method)(other)
        return SqlFrame(f"SELECT * FROM {self._from()} {operator} SELECT * FROM {other._from()}", self._session)

    def union(self, other: Any):  # type: ignore[override]
        return self._set_operation(other, "UNION ALL", "union")

    unionAll = union  # noqa: N815

    def intersect(self, other: Any):  # type: ignore[override]
        return self._set_operation(other, "INTERSECT DISTINCT", "intersect")

    def intersectAll(self, other: Any):  # type: ignore[override]  # noqa: N802
        return self._set_operation(other, "INTERSECT ALL", "intersectAll")

    def subtract(self, other: Any):  # type: ignore[override]
        return self._set_operation(other, "EXCEPT DISTINCT", "subtract")

    def exceptAll(self, other: Any):  # type: ignore[override]  # noqa: N802
        return self._set_operation(other, "EXCEPT ALL", "exceptAll")

    def groupBy(self, *cols: Any):  # type: ignore[override]  # noqa: N802
        flat = list(cols[0]) if len(cols) == 1 and isinstance(cols[0], list | tuple) else list(cols)
        if not all(isinstance(c, SqlColumn) and c._alias is None and not _ordinal_risk(c) for c in flat):
            return self.frame().groupBy(*cols)
        return _SqlGroupedData(self, flat)

    groupby = groupBy

    # --------------------------------------------------------------------------------- subqueries

    def exists(self):  # type: ignore[override]
        return SqlColumn(f"EXISTS ({self._text})")

    def scalar(self):  # type: ignore[override]
        return SqlColumn(f"({self._text})")


class _SqlGroupedData:
    """``SqlFrame.groupBy(keys)``: ``agg`` builds ``SELECT keys, measures ... GROUP BY keys``."""

    def __init__(self, frame: SqlFrame, keys: list[SqlColumn]) -> None:
        self._frame = frame
        self._keys = keys

    def agg(self, *exprs: Any):
        texts = _texts(exprs)
        if texts is None:
            return self._frame.frame().groupBy(*self._keys).agg(*exprs)
        select = ", ".join([c.sql() for c in self._keys] + [c.sql() for c in texts])
        group = ", ".join(_expression(c) for c in self._keys)  # "": one group (a global aggregate)
        return self._frame._new(replace(self._frame._open(), select=select, group=group))

    def __getattr__(self, name: str) -> Any:  # count(), pivot(), ...: the DataFrame API
        return getattr(self._frame.frame().groupBy(*self._keys), name)


def _sort_text(c: SqlColumn) -> str:
    return c.order_sql() if isinstance(c, SqlSortOrder) else _expression(c)
