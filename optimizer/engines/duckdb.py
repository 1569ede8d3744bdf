"""Run Substrait plans on DuckDB 1.1.3 with its substrait extension (``con.from_substrait``).

The extension comes from the ``duckdb-extension-substrait`` package (the same file
workloads/producers.py loads; DuckDB only loads it with ``allow_unsigned_extensions``). Each named
table of the plan is a view ``CREATE VIEW "<name>" AS SELECT * FROM read_parquet(...)`` over its
Parquet files; DuckDB's catalog names are case-insensitive, so ``LINEITEM`` finds ``lineitem``.

DuckDB's consumer reads a table's columns by position, whatever the read's ``base_schema`` names: a read
of ``nation`` as (n_regionkey, n_nationkey) got n_nationkey and n_name. A table read with the names of
its columns in order (or of its first ones) is the plain view; one read with other names, in one order,
is the view of those columns by name; two such orders of one table, or a name the table lacks, are
refused before DuckDB runs.
"""

from __future__ import annotations

import glob
import os
import re

from optimizer.engines.base import (
    BoundTable,
    EngineRunner,
    check_fetch,
    engine_failure,
    missing_package,
    refuse_problems,
    refuse_read_past,
    refuse_target_refusals,
    written_for,
)
from optimizer.errors import PlanError, UnsupportedError

__all__ = ["DuckDBRunner"]

_EXTRA = "duckdb"


def _sql_string(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


def _identifier(text: str) -> str:
    return '"' + text.replace('"', '""') + '"'


def substrait_extension() -> str:
    """The path of the substrait extension shipped by ``duckdb-extension-substrait``."""
    try:
        import duckdb_extension_substrait
    except ImportError as exc:
        raise missing_package("duckdb", _EXTRA, exc) from None
    root = os.path.dirname(duckdb_extension_substrait.__file__)
    found = sorted(glob.glob(os.path.join(root, "extensions", "*", "substrait.duckdb_extension")))
    if not found:
        raise UnsupportedError(f"the duckdb engine: no substrait.duckdb_extension under {root}")
    return found[0]


def _without_boilerplate(exc: BaseException) -> str:
    """DuckDB's message without the paragraph it appends to every internal error."""
    return re.split(r"\s+This error signals an assertion failure", str(exc))[0].strip()


def _selected_columns(table: BoundTable, data: list[str]) -> tuple[str, ...] | None:
    """The data's columns the view selects, by name, in the order the plan's reads name them; None when
    every read names the data's columns in order (or its first ones): ``SELECT *``."""
    folded = {n.lower(): n for n in data}
    orders = [c for c in table.columns if [n.lower() for n in c] != [n.lower() for n in data[: len(c)]]]
    if not orders:
        return None
    if len(set(orders)) > 1:
        raise UnsupportedError(f"the duckdb engine reads a table's columns by position, not by the names a read "
                               f"gives them, and the plan reads table '{table.name}' with {len(set(orders))} "
                               "orders of columns other than the table's")
    for name in orders[0]:
        if name.lower() not in folded:
            raise PlanError(f"table '{table.name}' has no column '{name}' (it has: {', '.join(data)})")
    return tuple(folded[n.lower()] for n in orders[0])


class DuckDBRunner(EngineRunner):
    """Executes Substrait plans on an in-memory DuckDB connection of its own."""

    name = module = "duckdb"
    extra = _EXTRA

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self._extension = substrait_extension()
        self._con = None
        #: lower-case name -> (name, location, the columns selected by name or None for all)
        self._views: dict[str, tuple[str, str, tuple[str, ...] | None]] = {}
        #: location -> (its files as read_parquet's list, its column names)
        self._described: dict[str, tuple[str, list[str]]] = {}

    def check(self, plan) -> None:
        """DuckDB 1.1.3 crashes the process on some invalid plans (a set operation of one input: SIGSEGV)
        and reads past post-join filters, emits, a fetch's count given only in today's count_expr, and a
        project's input columns (its own projects, written so, are read as its producer means them)."""
        refuse_problems(plan, "duckdb")
        refuse_read_past(plan, "duckdb", ("post_join_filter", "grouping_sets"))
        refuse_target_refusals(plan, "duckdb")
        # Written for it, set operations and measure filters are in what it reads. DuckDB's own producer
        # writes SQL's UNION ALL and UNION alike as SET_OP_UNION_ALL (the corpus' union_all: 40 rows by its
        # SQL and the spec, 25 read back) and drops FILTER: its own plans are refused as others'.
        if not written_for(plan, "duckdb"):
            refuse_read_past(plan, "duckdb", ("set_ops_as_distinct", "measure_filter"))
        from optimizer.expr_utils import rels_with_paths
        from optimizer.load.pipeline import load
        from optimizer.relations import emit_of
        from optimizer.schema.check import checked_tree_schema, legacy_project_producer

        own_projects = legacy_project_producer(plan) is not None  # its convention, which the loader reads so
        functions = None
        for rel, path in rels_with_paths(plan):
            kind = rel.WhichOneof("rel_type")
            if kind == "fetch":
                check_fetch(rel.fetch, path, "duckdb")
            emit = emit_of(rel)
            if kind is None or (kind == "project" and own_projects):
                continue
            if kind == "project":
                if functions is None:
                    functions = load(plan).declared
                # The plan as written (the loader's conformed copy may have other paths).
                schema, _ = checked_tree_schema(rel.project.input, functions, f"{path}.project.input", plan.relations)
                if schema is None:  # a relation of unknown columns below: its width is not known here
                    continue
                # DuckDB outputs a project's expressions alone, whatever its emit; the spec, its input's
                # columns and then the expressions, the emit choosing among them.
                n_in = len(schema.types)
                n_out = len(rel.project.expressions)
                if (emit if emit is not None else list(range(n_in + n_out))) != list(range(n_in, n_in + n_out)):
                    raise UnsupportedError("duckdb reads a ProjectRel as its expressions alone (no input column, "
                                           "its emit ignored), where this plan means otherwise: written for it "
                                           "with optimize --target duckdb it reads it right", path)
            elif emit is not None:
                raise UnsupportedError(f"duckdb reads past the emit of a {kind} relation (it outputs every column, "
                                       "in order): written for it with optimize --target duckdb it reads it right",
                                       path)

    def _connection(self):
        if self._con is None:
            import duckdb

            con = duckdb.connect(config={"allow_unsigned_extensions": "true"})
            try:
                con.execute(f"LOAD {_sql_string(self._extension)}")
            except duckdb.Error as exc:
                con.close()
                raise engine_failure("duckdb", exc, unsupported=False) from None
            self._con = con
        return self._con

    def _register(self, table: BoundTable) -> None:
        import duckdb

        if len(table.names) > 1:
            raise UnsupportedError(
                f"the duckdb engine binds unqualified table names only, not '{'.'.join(table.names)}'")
        # One view per name whatever its case (DuckDB's catalog is case-insensitive): a plan naming LINEITEM
        # after one naming lineitem reads the same view, or replaces it with its own. Two tables of one plan
        # whose names differ only in case are refused before (:meth:`_relation`).
        key = table.name.lower()
        try:
            con = self._connection()
            if table.location not in self._described:  # listed and described once per location
                files = table.parquet_files()
                source = "[" + ", ".join(_sql_string(f) for f in files) + "]"
                names = [row[0] for row in con.execute(f"DESCRIBE SELECT * FROM read_parquet({source})").fetchall()]
                self._described[table.location] = (source, names)
            source, data = self._described[table.location]
            selected = _selected_columns(table, data)
            if self._views.get(key, (None, None, None))[1:] == (table.location, selected):
                return
            what = "*" if selected is None else ", ".join(_identifier(c) for c in selected)
            con.execute(f"CREATE OR REPLACE VIEW {_identifier(table.name)} AS SELECT {what} FROM read_parquet({source})")
        except duckdb.Error as exc:
            raise engine_failure("duckdb", exc, unsupported=False) from None
        self._views[key] = (table.name, table.location, selected)

    def _relation(self, data: bytes, tables: dict[tuple[str, ...], BoundTable], act):
        """``act(relation)`` of the DuckDB relation ``from_substrait`` makes of the plan, its errors named."""
        import duckdb

        names = {}
        for table in tables.values():
            if names.setdefault(table.name.lower(), table.name) != table.name:
                raise UnsupportedError(f"the duckdb engine: tables '{names[table.name.lower()]}' and "
                                       f"'{table.name}' differ only in case (DuckDB's names are case-insensitive)")
            self._register(table)
        con = self._connection().cursor()
        try:
            return act(con.from_substrait(data))
        except duckdb.NotImplementedException as exc:
            raise engine_failure("duckdb", exc, unsupported=True) from None
        except (duckdb.InternalException, duckdb.FatalException) as exc:
            # DuckDB invalidates a database after an internal error: the next plan gets a new one. Its
            # consumer reports relations and expressions it lacks as internal errors ("Unsupported join
            # type"): the message says which.
            self.close()
            raise engine_failure("duckdb", _without_boilerplate(exc)) from None
        except duckdb.Error as exc:
            raise engine_failure("duckdb", _without_boilerplate(exc)) from None
        finally:
            con.close()

    def _execute(self, data: bytes, tables: dict[tuple[str, ...], BoundTable]):
        return self._relation(data, tables, lambda relation: relation.fetch_arrow_table())

    def close(self) -> None:
        if self._con is not None:
            self._con.close()
        self._con = None
        self._views.clear()
        self._described.clear()
