"""Relations as one Spark SQL query: the builders the Spark backend compiles a plan with.

The backend compiles a whole Substrait plan into **one** Spark SQL text and runs it with one
``spark.sql`` call. A table is a name in the text (:meth:`Frame.named`: a catalog table, a temporary view)
or a DataFrame bound to the call (:meth:`Frame.table`: ``spark.sql(text, t0=df0, ...)``, ``{t0}`` in the
text). The text is built
with sqlglot's expression tree and printed in its Spark dialect (:mod:`optimizer.spark.sql_dialect`), which
quotes identifiers, escapes string literals and places parentheses; nothing is pasted together from
strings. The columns of the text are :mod:`optimizer.spark.sql_columns`' ``Col`` expressions.

:class:`Frame` is a relation: ``select``, ``filter``, ``join``, ``crossJoin``, ``orderBy``, ``limit``,
``offset``, ``hint``, ``distinct``, ``groupBy().agg()``, ``groupingSets().agg()``, ``repartition``, the set
operations, ``exists`` and ``scalar``, with a DataFrame's meaning. :meth:`Frame.sql` is the query.

Equivalence with the DataFrame API: each method's SQL is the logical plan PySpark's own call builds, over
its input as a subquery with a fresh alias (``SELECT <cols> FROM (<input>) AS _q7``): ``filter`` is
``WHERE``, ``join(how)`` the SQL join of that type, ``hint(h)`` the ``/*+ H(_q7) */`` hint on the input's
alias, ``groupBy(k).agg(m)`` is ``SELECT k, m ... GROUP BY k``, ``union`` is ``UNION ALL`` (both by
position). A clause joins the ``SELECT`` below it when SQL applies it after that query's own clauses
anyway, so the text has few levels. The backend names every column uniquely (``_c<n>``), so unqualified
names resolve as they would on a DataFrame, outer references of correlated subqueries included. SQL rules
that a DataFrame does not have are kept out: an integer literal in ``ORDER BY`` or ``GROUP BY`` would be a
column position, so it is written as a cast.

Spark substitutes ``${...}`` in SQL text before parsing it (``spark.sql.variable.substitute``, on by
default): a ``$`` in a string literal is escaped by the dialect, and a name that contains ``${`` is
refused (:func:`render`). With tables bound, Spark formats the text with Python's ``str.format``, so
braces are doubled.

>>> from optimizer.spark.sql_columns import col
>>> ctx = Context(None)
>>> t = Frame.table(ctx, ctx.bind("a DataFrame"))
>>> x = col("`a`")
>>> render(t.filter(x > 1).select(x.alias("b")))
('SELECT `a` AS `b` FROM {t0} WHERE `a` > 1', {'t0': 'a DataFrame'})
>>> render(t.orderBy(x.desc_nulls_last()).limit(5))[0]  # Spark's DESC puts nulls last
'SELECT * FROM {t0} ORDER BY `a` DESC LIMIT 5'
"""

from __future__ import annotations

import itertools
from collections.abc import Collection, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from pyspark.sql import types as T
from sqlglot import exp

from optimizer.errors import UnsupportedError
from optimizer.spark.sql_columns import Col, Relation, as_operand, col, flat, operand, sort_order
from optimizer.spark.sql_dialect import cast_target, is_int_text, sql_text

__all__ = ["Context", "Frame", "render"]


class Context:
    """What one compiled query shares: its aliases, the tables it binds, the session it runs on."""

    def __init__(self, spark) -> None:
        self.spark = spark
        self._aliases = itertools.count(1)
        self.tables: dict[str, Any] = {}  # placeholder -> DataFrame (spark.sql keyword argument)
        self._by_id: dict[int, tuple[Any, str]] = {}
        self.token = f"{id(self):x}"
        self.ctes: list[tuple[str, exp.Expression]] = []  # (name, query): the text's WITH clause, in order

    def alias(self) -> str:
        return f"_q{next(self._aliases)}"

    def bind(self, df: Any) -> str:
        """The placeholder name of a table DataFrame (one per DataFrame)."""
        hit = self._by_id.get(id(df))
        if hit is not None and hit[0] is df:
            return hit[1]
        name = f"t{len(self.tables)}"
        self.tables[name] = df
        self._by_id[id(df)] = (df, name)
        return name

    def placeholder(self, name: str) -> str:
        """The identifier a bound table has in the printed text, replaced by ``{name}`` at the end."""
        return f"__substrait_opt_{self.token}_{name}__"


_JOINS: dict[str, tuple[str | None, str | None]] = {
    "inner": (None, None),
    "cross": (None, "CROSS"),
    "full": ("FULL", "OUTER"),
    "outer": ("FULL", "OUTER"),
    "left": ("LEFT", "OUTER"),
    "right": ("RIGHT", "OUTER"),
    "left_semi": ("LEFT", "SEMI"),
    "left_anti": ("LEFT", "ANTI"),
}


@dataclass(frozen=True)
class _Query:
    """One ``SELECT`` (SQL applies its clauses in the order WHERE, GROUP BY, SELECT, DISTINCT, ORDER BY,
    OFFSET, LIMIT), or a set operation (``setop``) that any further clause wraps."""

    source: exp.Expression | None  # the first FROM item (None: no FROM, one row)
    joins: tuple[exp.Join, ...] = ()
    select: tuple[exp.Expression, ...] | None = None  # None: *
    where: exp.Expression | None = None
    group: tuple[exp.Expression, ...] | None = None  # () : a global aggregate
    grouping_sets: tuple[tuple[exp.Expression, ...], ...] | None = None
    distinct: bool = False
    hints: tuple[exp.Expression, ...] = ()
    order: tuple[exp.Ordered, ...] | None = None
    offset: int | None = None
    limit: int | None = None
    setop: exp.Expression | None = None

    @property
    def plain(self) -> bool:
        """``SELECT * FROM source [WHERE ...]``: more clauses may be added to it."""
        return (self.setop is None and self.select is None and self.group is None and not self.distinct
                and not self.hints and self.order is None and self.offset is None and self.limit is None)

    def expr(self) -> exp.Expression:
        if self.setop is not None:
            return self.setop
        args: dict[str, Any] = {"expressions": list(self.select) if self.select is not None else [exp.Star()]}
        if self.source is not None:
            args["from_"] = exp.From(this=self.source)
        if self.joins:
            args["joins"] = list(self.joins)
        if self.where is not None:
            args["where"] = exp.Where(this=self.where)
        if self.grouping_sets is not None:
            sets = [exp.Tuple(expressions=list(s)) for s in self.grouping_sets]
            args["group"] = exp.Group(grouping_sets=[exp.GroupingSets(expressions=sets)])
        elif self.group:
            args["group"] = exp.Group(expressions=[_no_ordinal(g) for g in self.group])
        if self.distinct:
            args["distinct"] = exp.Distinct()
        if self.hints:
            args["hint"] = exp.Hint(expressions=list(self.hints))
        if self.order is not None:
            args["order"] = exp.Order(expressions=list(self.order))
        if self.limit is not None:
            args["limit"] = exp.Limit(expression=exp.Literal.number(str(self.limit)))
        if self.offset is not None:
            args["offset"] = exp.Offset(expression=exp.Literal.number(str(self.offset)))
        return exp.Select(**args)


def _no_ordinal(e: exp.Expression) -> exp.Expression:
    if isinstance(e, exp.Literal) and not e.is_string:  # GROUP BY 1 would be a position
        return exp.Cast(this=e, to=cast_target("int" if is_int_text(e.this) else "double"))
    return e


_HINTS = {"broadcast", "shuffle_hash", "merge", "shuffle_merge", "shuffle_replicate_nl"}


# A projection that only renames columns is merged into the query below it rather than wrapped
# around it: the backend writes a SELECT per relation (a read names every column of its table,
# projections and emits rename), and merged, a plan's text reads like the SQL a person would write
# (TPC-DS: 40 % shorter). Only columns and constants are substituted: no expression is repeated, and
# no clause moves past a window, an aggregate, DISTINCT, ORDER BY or LIMIT.


def _selects_last(q: _Query) -> bool:
    """Nothing applies after ``q``'s select list (no DISTINCT, ORDER BY, OFFSET, LIMIT or set
    operation; hints only those of joins)."""
    if q.setop is not None or q.distinct or q.order is not None or q.offset is not None or q.limit is not None:
        return False
    return all(isinstance(h, exp.Anonymous) and str(h.this).lower() in _HINTS for h in q.hints)


def _only_joined(q: _Query) -> bool:
    """``SELECT ... FROM ... [JOIN ...] [WHERE ...]``, hints only those of its joins."""
    return _selects_last(q) and q.group is None and q.grouping_sets is None and bool(q.joins or not q.hints)


def _named(item: exp.Expression) -> tuple[str, exp.Expression] | None:
    """A select item's output name and expression: ``e AS name`` or an unqualified column."""
    if isinstance(item, exp.Alias):
        return item.alias, item.this
    if isinstance(item, exp.Column) and not item.table:
        return item.name, item
    return None  # an unnamed expression: Spark names it by its text, which a rewrite would change


def _outputs(q: _Query) -> dict[str, exp.Expression] | None:
    """``q``'s output names and what each is (None when an item is unnamed or a name repeats)."""
    out: dict[str, exp.Expression] = {}
    for item in q.select or ():
        named = _named(item)
        if named is None or named[0] in out:
            return None
        out[named[0]] = named[1]
    return out


def _column_outputs(q: _Query) -> dict[str, exp.Expression] | None:
    """``q``'s outputs when every one is a column of its FROM or a constant."""
    out = _outputs(q)
    if out is None or not all(
        (isinstance(e, exp.Column) and not e.table and isinstance(e.this, exp.Identifier))
        or isinstance(e, exp.Literal | exp.Null | exp.Boolean)
        for e in out.values()
    ):
        return None
    return out


def _reads_only(e: exp.Expression, names: Collection[str], *barred: type[exp.Expression]) -> bool:
    """Whether the columns ``e`` reads are all among ``names`` (unqualified), with no subquery,
    lambda, star or node of the ``barred`` types in it."""
    for node in e.walk():
        if isinstance(node, (exp.Subquery, exp.Select, exp.Exists, exp.Lambda, exp.Star, *barred)):
            return False
        if isinstance(node, exp.Column) and (node.table or node.name not in names):
            return False
    return True


def _substituted(e: exp.Expression, names: dict[str, exp.Expression]) -> exp.Expression | None:
    """``e`` with each column replaced by what ``names`` says it is; None when ``e`` reads another
    column (an outer reference, a lambda variable) or holds a subquery."""
    if not _reads_only(e, names):
        return None

    def swap(node: exp.Expression) -> exp.Expression:
        if isinstance(node, exp.Column):
            return as_operand(names[node.name].copy())
        return node

    return e.transform(swap)


def _as(e: exp.Expression, name: str) -> exp.Expression:
    """``e`` as a select item named ``name`` (a column of that name as it is)."""
    if isinstance(e, exp.Column) and e.name == name:
        return e
    return exp.Alias(this=e, alias=exp.to_identifier(name, quoted=True))


def _merged_select(q: _Query, items: list[exp.Expression]) -> _Query | None:
    """``SELECT items FROM (q)`` as one query: when ``items`` only name outputs of ``q`` (``q``'s select
    list is cut and renamed; ``q`` may group), or when ``q`` only names columns of its FROM (``items``
    are rewritten over them)."""
    if q.select is None:
        return None
    picked = _picked(q, items)
    if picked is not None:
        return replace(q, select=picked)
    names = _column_outputs(q) if _only_joined(q) else None
    if names is None:
        return None
    merged = []
    for item in items:
        named = _named(item)
        if named is None:
            return None
        new = _substituted(named[1], names)
        if new is None:
            return None
        merged.append(_as(new, named[0]))
    return replace(q, select=tuple(merged))


def _picked(q: _Query, items: list[exp.Expression]) -> tuple[exp.Expression, ...] | None:
    """``q``'s select list cut to ``items`` when each item names one of its outputs (an expression of
    ``q`` is picked at most once, so none is computed twice)."""
    outputs = _outputs(q) if _selects_last(q) else None
    if outputs is None:
        return None
    # Spark computes the other items of a select with a window function below the window
    # (ExtractWindowExpressions): a column renamed there is a new column, which a filter inferred above
    # (IS NOT NULL of a join key) cannot pass the window by, though it is a partition key. One copy of a
    # repeated subtree filtered and another not, Spark no longer reuses one's exchange for the other
    # (TPC-DS Q47/Q57 computed store_sales' aggregate twice).
    windowed = any(item.find(exp.Window) for item in q.select or ())
    picked, used = [], set()
    for item in items:
        named = _named(item)
        if named is None or not isinstance(named[1], exp.Column) or named[1].table:
            return None
        e = outputs.get(named[1].name)
        if e is None:
            return None
        if windowed and isinstance(e, exp.Column) and named[0] != named[1].name:
            return None
        if not isinstance(e, exp.Column):
            if named[1].name in used:
                return None
            used.add(named[1].name)
        picked.append(_as(e.copy(), named[0]))
    return tuple(picked)


def _orders_outputs(q: _Query, order: tuple[exp.Ordered, ...]) -> bool:
    """Whether ``order`` may be ``q``'s own ORDER BY: ``q`` is not DISTINCT, ordered or limited, and
    the keys read only ``q``'s output names (no subquery, no aggregate or window of their own)."""
    outputs = _outputs(q) if _selects_last(q) else None
    return outputs is not None and all(
        _reads_only(o, outputs, exp.Window, exp.AggFunc, exp.Anonymous) for o in order)


def _conjoined(where: exp.Expression | None, cond: exp.Expression) -> exp.Expression:
    return cond if where is None else exp.And(this=as_operand(where), expression=as_operand(cond))


class Frame(Relation):
    """A relation as a SQL query under construction, with a DataFrame's methods."""

    def __init__(self, ctx: Context, query: _Query, pending_hint: str | None = None) -> None:
        self.ctx = ctx
        self._query = query
        self._hint = pending_hint  # a join hint for this relation, placed by the join that reads it

    # --------------------------------------------------------------------------------- sources

    @classmethod
    def table(cls, ctx: Context, name: str) -> Frame:
        """All columns of the bound table ``name`` (a placeholder from :meth:`Context.bind`)."""
        return cls(ctx, _Query(exp.Table(this=exp.to_identifier(ctx.placeholder(name)))))

    @classmethod
    def named(cls, ctx: Context, table: exp.Table) -> Frame:
        """All columns of a table the query text names: a catalog table, or ``parquet.`path```."""
        return cls(ctx, _Query(table.copy()))

    @classmethod
    def one_row(cls, ctx: Context) -> Frame:
        """One row and no columns (``SELECT`` without ``FROM``)."""
        return cls(ctx, _Query(None))

    @classmethod
    def computed_once(cls, ctx: Context, frame: Frame, columns: Sequence[str]) -> Frame:
        """``frame``'s ``columns``, computed once however often the query reads the result: a ``WITH``
        query (a CTE) with a non-deterministic column besides them. Spark inlines a CTE into each place
        that reads it, and so computes it again there, unless its definition is non-deterministic: such
        a CTE read more than once is computed once, its rows shuffled and the shuffle reused by every
        reader (Spark's ``InlineCTE`` and ``ReplaceCTERefWithRepartition``, SPARK-36447). The extra
        column is read by no one (Spark prunes it)."""
        name = f"_s{len(ctx.ctes) + 1}"
        def cols() -> list[Col]:
            return [col("`" + c.replace("`", "``") + "`") for c in columns]

        body = frame.select(*cols(), Col(exp.Rand()).alias(f"{name}_once"))
        ctx.ctes.append((name, body.query()))
        return cls(ctx, _Query(exp.Table(this=exp.to_identifier(name)))).select(*cols())

    @classmethod
    def written_once(cls, ctx: Context, frame: Frame, columns: Sequence[str]) -> Frame:
        """``frame``'s ``columns`` as a ``WITH`` query (a CTE) the text names wherever it reads them: Spark
        parses and analyses the query once and, the query being deterministic, inlines it into each
        reader (``InlineCTE``), so it runs as if written at each. Only for a query with no outer reference
        (the ``WITH`` clause is the whole text's)."""
        name = f"_w{len(ctx.ctes) + 1}"
        ctx.ctes.append((name, frame.select(*[col("`" + c.replace("`", "``") + "`") for c in columns]).query()))
        return cls(ctx, _Query(exp.Table(this=exp.to_identifier(name))))

    @classmethod
    def rows(cls, ctx: Context, n: int) -> Frame:
        """``n`` rows (of one column ``id``: select the columns wanted)."""
        return cls(ctx, _Query(exp.Anonymous(this="range", expressions=[exp.Literal.number(str(n))])))

    # ----------------------------------------------------------------------------------- output

    def query(self) -> exp.Expression:
        """The query (a pending hint becomes a ``SELECT /*+ H(alias) */ *`` over this one)."""
        return self._settled()._query.expr()

    def sql(self) -> str:
        return sql_text(self.query())

    def __repr__(self) -> str:
        return f"Frame<{self.sql()[:200]}>"

    # ---------------------------------------------------------------------------------- helpers

    def _new(self, query: _Query) -> Frame:
        return Frame(self.ctx, query)

    def _settled(self) -> Frame:
        if self._hint is None:
            return self
        alias = self.ctx.alias()
        hint = exp.Anonymous(this=self._hint.upper(), expressions=[exp.to_identifier(alias)])
        return Frame(self.ctx, _Query(self._aliased(alias), hints=(hint,)))

    def _aliased(self, alias: str) -> exp.Expression:
        """This query as a FROM item called ``alias`` (without a pending hint)."""
        q = self._query
        if q.plain and q.where is None and not q.joins and isinstance(q.source, exp.Table):
            table = q.source.copy()
            table.set("alias", exp.TableAlias(this=exp.to_identifier(alias)))
            return table
        return exp.Subquery(this=q.expr(), alias=exp.TableAlias(this=exp.to_identifier(alias)))

    def _from(self) -> exp.Expression:
        return self._settled()._aliased(self.ctx.alias())

    def _wrapped(self) -> _Query:
        return _Query(self._from())

    def _open(self) -> _Query:
        s = self._settled()
        return s._query if s._query.plain else s._wrapped()

    # ---------------------------------------------------------------------------------- methods

    def select(self, *cols: Any) -> Frame:
        items = [c.named() if isinstance(c, Col) else col(c).e for c in flat(cols)]
        if not items:
            items = [exp.alias_(exp.Null(), f"_none{self.ctx.alias()}", quoted=True)]
        q = self._query if self._hint is None else None
        if q is not None and q.select is None and q.joins and _only_joined(q):
            return self._new(replace(q, select=tuple(items)))  # a join's hints stay with its select
        merged = _merged_select(q, items) if q is not None else None
        if merged is not None:
            return self._new(merged)
        return self._new(replace(self._open(), select=tuple(items)))

    def filter(self, condition: Col) -> Frame:
        cond = operand(condition)
        q = self._query if self._hint is None else None
        if q is not None and q.select is not None and _only_joined(q):
            names = _column_outputs(q)
            moved = _substituted(cond, names) if names is not None else None
            if moved is not None:  # WHERE runs before SELECT: the condition reads the columns renamed
                return self._new(replace(q, where=_conjoined(q.where, moved)))
        q = self._open()
        return self._new(replace(q, where=_conjoined(q.where, cond)))

    where = filter

    def orderBy(self, *cols: Any) -> Frame:
        order = tuple(sort_order(c).ordered() for c in flat(cols))
        q = self._query if self._hint is None else None
        if q is not None and q.select is not None and _orders_outputs(q, order):
            return self._new(replace(q, order=order))  # ORDER BY reads the select list's names
        return self._new(replace(self._open(), order=order))

    sort = orderBy

    def limit(self, num: int) -> Frame:
        s = self._settled()
        q = s._query
        if q.setop is not None or q.limit is not None:
            q = s._wrapped()
        return self._new(replace(q, limit=num))  # after ORDER BY and OFFSET, as SQL applies them

    def offset(self, num: int) -> Frame:
        s = self._settled()
        q = s._query
        if q.setop is not None or q.limit is not None or q.offset is not None:
            q = s._wrapped()  # SQL's OFFSET comes before its LIMIT
        return self._new(replace(q, offset=num))

    def hint(self, name: str) -> Frame:
        if name.lower() not in _HINTS:
            raise UnsupportedError(f"join hint '{name}' is not supported")
        return Frame(self.ctx, self._settled()._query, name)

    def distinct(self) -> Frame:
        s = self._settled()
        q = s._query
        if (q.setop is not None or q.group is not None or q.grouping_sets is not None or q.distinct
                or q.order is not None or q.offset is not None or q.limit is not None):
            q = s._wrapped()
        return self._new(replace(q, distinct=True))

    def repartition(self, n: int, *cols: Col) -> Frame:
        """``/*+ REPARTITION(n, cols) */``: columns by name (the backend passes plain columns)."""
        names = []
        for c in cols:
            if not isinstance(c.e, exp.Column):
                raise UnsupportedError("repartitioning by an expression: project it to a column first")
            names.append(c.e.copy())
        hint = exp.Anonymous(this="REPARTITION", expressions=[exp.Literal.number(str(n)), *names])
        return self._new(replace(self._wrapped(), hints=(hint,)))

    def join(self, other: Frame, on: Col | None = None, how: str = "inner") -> Frame:
        how = how.lower()
        if how not in _JOINS:
            raise UnsupportedError(f"join type '{how}' has no SQL join here")
        side, kind = _JOINS[how]
        if on is None and how == "inner":
            kind = "CROSS"
        hints = []
        # The left input: a plain join chain continues (SQL joins associate to the left).
        lq = self._query
        if self._hint is None and lq.plain and lq.where is None and lq.source is not None:
            source, joins, hints = lq.source, list(lq.joins), list(lq.hints)
        else:
            alias = self.ctx.alias()
            source, joins = self._aliased_raw(alias), []
            if self._hint is not None:
                hints.append(exp.Anonymous(this=self._hint.upper(), expressions=[exp.to_identifier(alias)]))
        ralias = self.ctx.alias()
        if other._hint is not None:
            hints.append(exp.Anonymous(this=other._hint.upper(), expressions=[exp.to_identifier(ralias)]))
        args: dict[str, Any] = {"this": other._aliased_raw(ralias)}
        if side:
            args["side"] = side
        if kind:
            args["kind"] = kind
        if on is not None and kind != "CROSS":
            args["on"] = operand(on)
        joins.append(exp.Join(**args))
        return self._new(_Query(source, joins=tuple(joins), hints=tuple(hints)))

    def _aliased_raw(self, alias: str) -> exp.Expression:
        return Frame(self.ctx, self._query)._aliased(alias)

    def crossJoin(self, other: Frame) -> Frame:
        return self.join(other, None, "inner")

    def _set_operation(self, other: Frame, cls: type[exp.Expression], distinct: bool) -> Frame:
        left = exp.Select(expressions=[exp.Star()], from_=exp.From(this=self._from()))
        right = exp.Select(expressions=[exp.Star()], from_=exp.From(this=other._from()))
        return self._new(_Query(None, setop=cls(this=left, expression=right, distinct=distinct)))

    def union(self, other: Frame) -> Frame:
        return self._set_operation(other, exp.Union, False)

    def intersect(self, other: Frame) -> Frame:
        return self._set_operation(other, exp.Intersect, True)

    def intersectAll(self, other: Frame) -> Frame:
        return self._set_operation(other, exp.Intersect, False)

    def subtract(self, other: Frame) -> Frame:
        return self._set_operation(other, exp.Except, True)

    def exceptAll(self, other: Frame) -> Frame:
        return self._set_operation(other, exp.Except, False)

    def groupBy(self, *cols: Col) -> _Grouped:
        return _Grouped(self, [c for c in flat(cols)], None)

    def groupingSets(self, sets: Sequence[Sequence[Col]], *cols: Col) -> _Grouped:
        return _Grouped(self, list(cols), [list(s) for s in sets])

    def agg(self, *exprs: Col) -> Frame:
        return self.select(*exprs)

    # ------------------------------------------------------------------------------------ Spark

    def to_spark(self):
        """The query as a Spark DataFrame: one ``spark.sql`` call (Spark analyses the query; a
        correlated subquery alone fails with a ``PySparkException``)."""
        text, tables = render(self)
        return self.ctx.spark.sql(text, **tables)

    @property
    def schema(self) -> T.StructType:
        return self.to_spark().schema

    def collect(self) -> list:
        return self.to_spark().collect()

    def first(self):
        return self.to_spark().first()

    def toArrow(self):
        return self.to_spark().toArrow()

    # ------------------------------------------------------------------------------- subqueries

    def exists(self) -> Col:
        return Col(exp.Exists(this=self.query()))

    def scalar(self) -> Col:
        return Col(exp.Subquery(this=self.query()))


@dataclass
class _Grouped:
    """``groupBy(keys)`` / ``groupingSets(sets, keys)``: ``agg`` builds ``SELECT keys, measures ... GROUP BY``."""

    frame: Frame
    keys: list[Col]
    sets: list[list[Col]] | None = field(default=None)

    def agg(self, *exprs: Col) -> Frame:
        items = [k.named() for k in self.keys] + [c.named() for c in flat(exprs)]
        q = self.frame._open()
        if self.sets is not None:
            sets = tuple(tuple(operand(c) for c in s) for s in self.sets)
            return self.frame._new(replace(q, select=tuple(items), grouping_sets=sets))
        return self.frame._new(replace(q, select=tuple(items), group=tuple(operand(k) for k in self.keys)))


# ------------------------------------------------------------------------------------------- output


def render(frame: Frame) -> tuple[str, dict[str, Any]]:
    """The query's text for ``spark.sql`` and its keyword arguments (the bound tables).

    With tables bound, Spark reads the text with ``str.format``: braces are doubled and each table's
    placeholder becomes ``{tN}``.
    """
    query = frame.query()
    for name, body in frame.ctx.ctes:
        query = query.with_(name, as_=body, copy=False)
    text = sql_text(query)
    if "${" in text:
        raise UnsupportedError("a name in the plan contains '${', which Spark SQL would substitute")
    ctx = frame.ctx
    used = {name: df for name, df in ctx.tables.items() if ctx.placeholder(name) in text}
    if not used:
        return text, {}
    text = text.replace("{", "{{").replace("}", "}}")
    for name in used:
        text = text.replace(ctx.placeholder(name), "{" + name + "}")
    return text, used
