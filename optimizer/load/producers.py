"""Substrait plans from SQL, written by a real producer: DataFusion 55 or DuckDB 1.1.3 (its substrait extension).

``substrait-opt plan`` and the repository's workloads (workloads/producers.py) make plans here. Both
producers read tables by name (``ReadRel.named_table``: ``["lineitem"]``...), so a plan runs on any
copy of the data; the tables given only tell the producer each table's schema (and, for DuckDB, the
data its join order is chosen on).

* DataFusion (:func:`datafusion_plan`): the tables are registered as Parquet listings (their footers
  are read, not their rows). Strings are plain ``string``: the session disables
  ``schema_force_view_types``, otherwise every string column becomes Arrow ``Utf8View`` and is written
  as ``string`` with DataFusion's private type variation 2.
* DuckDB (:func:`duckdb_plan`): the tables are copied into an in-memory DuckDB (``CREATE TABLE ... AS
  SELECT * FROM read_parquet``): over a view of ``read_parquet`` its plans would read ``local_files``
  with the absolute Parquet path instead of the table's name. Its ``statistics_propagation`` optimizer is
  disabled (``data_independent``), because it writes the tables' min/max statistics into the plan as
  extra filters (``o_custkey <= 1499`` at TPC-H SF 0.01): right on the same data, wrong on bigger data.
  DuckDB 1.1.3 writes some queries wrongly or not at all (docs/tutorial.md, workloads/producers.py):
  correlated subqueries are refused (``DELIM_JOIN``), ``NOT IN (subquery)`` too (a ``MARK`` join), and
  ``NOT LIKE`` is written as ``not_equal`` (duckdb-substrait-extension#282).

A missing producer package is an :class:`~optimizer.errors.UnsupportedError` naming the extra to
install; SQL the producer cannot plan a :class:`ProducerError` (a ``PlanError``: exit 2) with the
producer's message on one line.
"""

from __future__ import annotations

import glob
import json
import os
import re
from collections.abc import Mapping
from functools import lru_cache
from pathlib import Path

from optimizer.errors import PlanError, UnsupportedError, plain_exceptions_as
from optimizer.load.sql_text import looks_like_sql, sql_instead_of_plan

__all__ = ["PRODUCERS", "ProducerError", "datafusion_context", "datafusion_plan", "duckdb_connection",
           "duckdb_miswrites",
           "duckdb_plan", "duckdb_plan_json", "duckdb_producer_connection", "looks_like_sql", "produce",
           "sql_instead_of_plan", "tables_in_directory"]

#: The producers ``plan --producer`` offers, the default first; each is the extra that installs it.
PRODUCERS: tuple[str, ...] = ("datafusion", "duckdb")

TableSpec = Mapping[str, "str | os.PathLike[str]"]


class ProducerError(PlanError):
    """A producer could not write a plan for a query (its message, on one line)."""


def _one_line(text: str, limit: int = 400) -> str:
    line = " ".join(str(text).split())
    return line if len(line) <= limit else line[: limit - 3] + "..."


def _missing(producer: str, exc: ImportError) -> UnsupportedError:
    return UnsupportedError(f"the {producer} producer needs the '{exc.name or producer}' package: "
                            f"pip install 'substrait-optimizer[{producer}]'")


def _datafusion():
    """DataFusion's module and its Substrait producer (each import guarded: a missing extra is one line)."""
    try:
        import datafusion
        from datafusion.substrait import Producer
    except ImportError as exc:
        raise _missing("datafusion", exc) from None
    return datafusion, Producer


def _duckdb():
    """DuckDB's module and the package of its substrait extension."""
    try:
        import duckdb
        import duckdb_extension_substrait
    except ImportError as exc:
        raise _missing("duckdb", exc) from None
    return duckdb, duckdb_extension_substrait


def _key(tables: TableSpec) -> tuple[tuple[str, str], ...]:
    return tuple(sorted((name, str(Path(path).resolve())) for name, path in tables.items()))


def tables_in_directory(directory: str | os.PathLike[str]) -> dict[str, Path]:
    """``{name: path}`` of the Parquet tables in ``directory``, as the other commands find them:
    ``DIR/<name>.parquet`` (a file or a folder) or a folder ``DIR/<name>/``; names starting with ``.``
    or ``_`` are skipped. A directory that is missing is a :class:`PlanError`, one without tables too."""
    root = Path(directory)
    if not root.is_dir():
        raise PlanError("not a directory", os.fspath(directory))
    found: dict[str, Path] = {}
    for entry in sorted(root.iterdir()):
        if entry.name.startswith((".", "_")):
            continue
        if entry.name.lower().endswith(".parquet"):
            found.setdefault(entry.name[: -len(".parquet")], entry)
        elif entry.is_dir():
            found.setdefault(entry.name, entry)
    if not found:
        raise PlanError("no Parquet tables (<name>.parquet or <name>/) in the directory", os.fspath(directory))
    return found


def produce(sql: str, producer: str, tables: TableSpec) -> bytes:
    """The binary Substrait plan ``producer`` (one of :data:`PRODUCERS`) writes for ``sql`` over ``tables``."""
    if producer == "datafusion":
        miswritten = datafusion_miswrites(sql)
        if miswritten is not None:
            raise ProducerError(f"datafusion 55 writes {miswritten}")
        return datafusion_plan(sql, tables)
    if producer == "duckdb":
        miswritten = duckdb_miswrites(sql)
        if miswritten is not None:
            advice = "" if datafusion_miswrites(sql) else "; use --producer datafusion"
            raise ProducerError(f"duckdb 1.1.3 writes {miswritten}{advice}")
        return duckdb_plan(sql, tables)
    raise PlanError(f"unknown producer '{producer}' (choose from {', '.join(PRODUCERS)})")


def duckdb_miswrites(sql: str) -> str | None:
    """What in ``sql`` DuckDB 1.1.3's producer writes as another query, or None (the SQL read by sqlglot;
    SQL it cannot read is left to DuckDB). Checked with its ``get_substrait`` and its own
    ``from_substrait`` (2026-11-30): ``count(*) FILTER (WHERE b = 'F')`` is written as ``count(*)``
    (the filter left out: 3 for 2); ``b NOT LIKE '%a%b%'`` as ``not_equal(b, '%a%b%')``
    (duckdb-substrait-extension#282; ``NOT (b LIKE ...)`` is written right); ``b SIMILAR TO 'F.*'`` as a
    range of binary bounds that its own consumer answers otherwise (1 row for 2); ``UNION`` as
    ``SET_OP_UNION_ALL`` (which its own consumer reads as distinct, no other reader does); ``INTERSECT ALL``
    and ``EXCEPT ALL`` as their distinct forms (4 rows for 5)."""
    import sqlglot
    from sqlglot import exp

    try:
        trees = sqlglot.parse(sql, read="duckdb")
    except sqlglot.errors.SqlglotError:
        return None
    for tree in trees:
        for node in tree.walk() if tree is not None else ():
            if isinstance(node, exp.Filter):
                return "an aggregate's FILTER (WHERE ...) as the aggregate without it"
            if isinstance(node, exp.Like) and (
                    node.args.get("negate") or isinstance(node.parent, exp.Not)):
                return "NOT LIKE as not_equal (write NOT (x LIKE p) instead)"
            if isinstance(node, exp.SimilarTo):
                return "SIMILAR TO as a range its own consumer answers otherwise"
            if isinstance(node, exp.Union) and node.args.get("distinct"):
                return "UNION as UNION ALL (SET_OP_UNION_ALL)"
            if isinstance(node, (exp.Intersect, exp.Except)) and node.args.get("distinct") is False:
                return f"{node.key.upper()} ALL as {node.key.upper()} (its distinct form)"
    return None


def datafusion_miswrites(sql: str) -> str | None:
    """What in ``sql`` DataFusion 55 writes as another query, or None (the SQL read by sqlglot; SQL it
    cannot read is left to DataFusion). Checked with its own SQL and its producer (2026-12-01), over
    t.a = 3, 3, 7, NULL, NULL and u.k = 3, NULL: ``EXCEPT ALL`` is an anti join (7, for 3, 7, NULL) and
    ``INTERSECT ALL`` a semi join (3, 3, NULL, NULL, for 3, NULL): every copy of a row is kept or dropped,
    where the SQL keeps as many as the counts on the two sides leave. No other producer here writes
    them right (:func:`duckdb_miswrites`)."""
    import sqlglot
    from sqlglot import exp

    try:
        trees = sqlglot.parse(sql)
    except sqlglot.errors.SqlglotError:
        return None
    for tree in trees:
        for node in tree.walk() if tree is not None else ():
            if isinstance(node, exp.Except) and node.args.get("distinct") is False:
                return "EXCEPT ALL as an anti join (every copy of a row in both inputs dropped)"
            if isinstance(node, exp.Intersect) and node.args.get("distinct") is False:
                return "INTERSECT ALL as a semi join (every copy of a row in both inputs kept)"
    return None


def _two_valued_in(sql: str) -> bool:
    """Whether ``sql`` has an ``x IN (subquery)`` whose NULL a mark join of DataFusion's would lose.

    ``x IN (subquery)`` under NOT, or anywhere but in a WHERE or HAVING made of AND and OR, is a mark join
    whose mark DataFusion reads as two-valued (false where the SQL's IN is NULL), as it must for EXISTS:
    ``a NOT IN (SELECT k FROM u) OR id = 3`` keeps a row whose ``a`` is in no ``k`` of a ``u`` holding NULL
    (2, 3 for 3). Its plan is the same as the one of ``NOT EXISTS (SELECT 1 FROM u WHERE k = a) OR id = 3``,
    so the plan cannot be mended: the SQL is refused. ``x NOT IN (subquery)`` as a conjunct of a WHERE is a
    null-aware anti join, mended (:func:`_null_aware_anti_joins`)."""
    import sqlglot
    from sqlglot import exp

    try:
        trees = sqlglot.parse(sql)
    except sqlglot.errors.SqlglotError:
        return False
    return any(isinstance(node, exp.In) and node.args.get("query") is not None and not _in_null_as_false(node)
               for tree in trees if tree is not None for node in tree.walk())


def _in_null_as_false(node) -> bool:
    """Whether an ``IN`` of the SQL is one whose NULL its query reads as false: in a WHERE or HAVING through
    AND, OR and parentheses only, or ``NOT IN`` as a conjunct of one."""
    from sqlglot import exp

    chain = []
    parent = node.parent
    while parent is not None and not isinstance(parent, (exp.Where, exp.Having)):
        if isinstance(parent, (exp.Query, exp.Subquery)):
            return False
        chain.append(parent)
        parent = parent.parent
    if parent is None:
        return False
    if chain and isinstance(chain[0], exp.Not) and all(isinstance(p, (exp.And, exp.Paren)) for p in chain[1:]):
        return True
    return all(isinstance(p, (exp.And, exp.Or, exp.Paren)) for p in chain)


# ------------------------------------------------------------------------------------------ DataFusion


@lru_cache(maxsize=8)
def _datafusion_context(key: tuple[tuple[str, str], ...]):
    datafusion, _ = _datafusion()
    config = datafusion.SessionConfig().set("datafusion.execution.parquet.schema_force_view_types", "false")
    ctx = datafusion.SessionContext(config)
    for name, path in key:
        with plain_exceptions_as(lambda exc, path=path: PlanError(
                f"datafusion cannot read the table: {_one_line(exc)}", path)):
            ctx.register_parquet(name, path)
    return ctx


def datafusion_context(tables: TableSpec):
    """A DataFusion ``SessionContext`` with ``tables`` registered (cached per set of tables)."""
    return _datafusion_context(_key(tables))


def datafusion_plan(sql: str, tables: TableSpec) -> bytes:
    """DataFusion's Substrait plan (binary protobuf) of ``sql`` over the parquet ``tables`` {name: path}."""
    ctx = datafusion_context(tables)
    _, Producer = _datafusion()
    with plain_exceptions_as(lambda exc: ProducerError(f"datafusion cannot plan this SQL: {_one_line(exc)}")):
        plan = ctx.sql(sql).optimized_logical_plan()
        data = Producer.to_substrait_plan(plan, ctx).encode()
    shown = plan.display_indent()
    if "LeftMark Join" in shown and _two_valued_in(sql):
        raise ProducerError("datafusion 55 writes x IN (subquery) under NOT, or outside a WHERE's AND and OR, as "
                            "a mark join that reads NULL as false (x NOT IN a subquery holding NULL keeps the "
                            "row): write EXISTS, whose mark has no NULL, or keep the IN in a WHERE's AND and OR")
    return _null_aware_anti_joins(data, shown) if _ANTI_JOIN.search(shown) else data


#: Each anti join line of DataFusion's ``display_indent``, group 1 its ``null_aware`` mark (NOT IN).
_ANTI_JOIN = re.compile(r"^\s*LeftAnti Join: .*?( null_aware)?$", re.MULTILINE)


def _null_aware_anti_joins(data: bytes, shown: str) -> bytes:
    """DataFusion's plan ``data`` with each anti join its optimizer made of ``x NOT IN (subquery)`` (marked
    ``null_aware`` in ``shown``, its ``display_indent``) written as what it means: its producer writes a
    plain LEFT_ANTI join on ``x = y``, which a NULL on either side makes keep the row (3 rows where the
    SQL gives 0). ``x NOT IN S`` keeps a row when no ``y`` of ``S`` makes ``x = y`` true or NULL: the anti
    join on ``x = y OR x IS NULL OR y IS NULL`` (over an empty ``S`` every row, as NOT IN). The anti
    joins of the plan are matched with the lines in the same order (both walk a join before its inputs,
    left before right); a plan they do not match is refused. Returned as this tool's reading."""
    from substrait.proto import JoinRel

    from optimizer.expr_utils import FunctionRegistrar, boolean_type, field_index, walk
    from optimizer.plan_io import load_plan

    aware = [m.group(1) is not None for m in _ANTI_JOIN.finditer(shown)]
    if not any(aware):
        return data
    loaded = load_plan(data)
    joins = [m for m in walk(loaded, enter_subqueries=True) if m.DESCRIPTOR.full_name == "substrait.JoinRel"
             and m.type == JoinRel.JOIN_TYPE_LEFT_ANTI]
    cannot = ProducerError("datafusion writes NOT IN (subquery) as an anti join without its NULL rule, and this "
                           "plan's could not be mended: write NOT EXISTS, or keep NULLs out of both sides")
    if len(joins) != len(aware):
        raise cannot
    from optimizer.schema.derivation import plan_functions

    registrar = FunctionRegistrar(loaded, plan_functions(loaded))
    for join, null_aware in zip(joins, aware, strict=True):
        if not null_aware:
            continue
        condition = join.expression
        args = [a.value for a in condition.scalar_function.arguments]
        if condition.WhichOneof("rex_type") != "scalar_function" or len(args) != 2 or any(
                field_index(a) is None for a in args) or registrar.table.get(
                condition.scalar_function.function_reference).name != "equal":
            raise cannot
        nulls = [registrar.call("is_null", "functions_comparison", [a], boolean_type(False), "is_null:any")
                 for a in args]
        either = registrar.call("or", "functions_boolean", [condition, *nulls], boolean_type(), "or:bool")
        join.expression.CopyFrom(either)
    return loaded.SerializeToString()


# ---------------------------------------------------------------------------------------------- DuckDB


def duckdb_connection(*, data_independent: bool = True):
    """A new in-memory DuckDB connection with the substrait extension loaded.

    ``data_independent`` disables the ``statistics_propagation`` optimizer, which would write the tables'
    min/max statistics into produced plans as filters.
    """
    duckdb, duckdb_extension_substrait = _duckdb()
    root = os.path.dirname(duckdb_extension_substrait.__file__)
    found = sorted(glob.glob(os.path.join(root, "extensions", "*", "substrait.duckdb_extension")))
    if not found:
        raise UnsupportedError(f"the duckdb producer: no substrait.duckdb_extension under {root}")
    con = duckdb.connect(config={"allow_unsigned_extensions": "true"})
    con.execute("LOAD '" + found[0].replace("'", "''") + "'")
    if data_independent:
        con.execute("SET disabled_optimizers = 'statistics_propagation'")
    return con


@lru_cache(maxsize=4)
def _duckdb_producer(key: tuple[tuple[str, str], ...], data_independent: bool):
    duckdb, _ = _duckdb()
    con = duckdb_connection(data_independent=data_independent)
    for name, path in key:
        files = os.path.join(path, "**", "*.parquet") if os.path.isdir(path) else path
        try:
            con.execute(f'CREATE TABLE "{name.replace(chr(34), chr(34) * 2)}" AS SELECT * FROM read_parquet(?)',
                        [files])
        except duckdb.Error as exc:
            raise PlanError(f"duckdb cannot read the table: {_one_line(exc)}", path) from None
    return con


def duckdb_producer_connection(tables: TableSpec, *, data_independent: bool = True):
    """The cached DuckDB connection that holds in-memory copies of ``tables`` for plan production."""
    return _duckdb_producer(_key(tables), data_independent)


def _forget_if_invalidated(con) -> None:
    """Drop the cached producer connections when ``con`` no longer answers: DuckDB invalidates its
    database after an internal error (e.g. its substrait extension on ``ORDER BY a LIMIT 0``), and every
    later query on that connection would fail with it."""
    duckdb, _ = _duckdb()
    try:
        con.execute("SELECT 1").fetchone()
    except duckdb.Error:
        _duckdb_producer.cache_clear()


def duckdb_plan(sql: str, tables: TableSpec, *, data_independent: bool = True) -> bytes:
    """DuckDB's Substrait plan (binary protobuf, old encoding: use ``load_plan``) of ``sql`` over ``tables``."""
    duckdb, _ = _duckdb()
    con = duckdb_producer_connection(tables, data_independent=data_independent)
    try:
        return con.get_substrait(sql).fetchone()[0]
    except duckdb.Error as exc:  # also its NotImplementedException
        _forget_if_invalidated(con)
        raise ProducerError(f"duckdb cannot plan this SQL: {_one_line(exc)}") from exc


def duckdb_plan_json(sql: str, tables: TableSpec, *, data_independent: bool = True) -> str:
    """DuckDB's Substrait plan of ``sql`` as its JSON text (old encoding, camelCase field names)."""
    duckdb, _ = _duckdb()
    con = duckdb_producer_connection(tables, data_independent=data_independent)
    try:
        text = con.get_substrait_json(sql).fetchone()[0]
    except duckdb.Error as exc:
        _forget_if_invalidated(con)
        raise ProducerError(f"duckdb cannot plan this SQL: {_one_line(exc)}") from exc
    return json.dumps(json.loads(text), indent=1)
