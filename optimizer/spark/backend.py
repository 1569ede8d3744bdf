"""Substrait relations -> Spark DataFrames (the relation half of the Spark backend).

:class:`SparkBackend` compiles a ``substrait.proto.Plan`` into a lazy Spark ``DataFrame``
(:meth:`SparkBackend.to_dataframe`) or runs it into a ``pyarrow.Table`` (:meth:`SparkBackend.execute`).

How relations are compiled
--------------------------

Every relation compiles to a :class:`Relation`: a DataFrame plus its column names, which are fresh,
unique names (``_c<n>``, from a counter shared by everything the backend compiles) listed in the
Substrait output order. Field references are therefore always resolved by position on the Substrait
schema and never by a name from the plan; two inputs of a join that share names (a ``ReferenceRel``
joined with itself) have one side renamed first. ``common.emit.output_mapping`` is applied on every
relation (a column emitted twice gets a second name). ``RelRoot.names`` are applied at the very end
(nested struct field names included); Spark allows duplicate names there and :meth:`execute` copes.

Expressions are compiled by :class:`optimizer.spark.expressions.ExpressionCompiler` over a
:class:`~optimizer.spark.expressions.Scope`; its ``subquery`` callback is :meth:`_PlanCompiler.subquery`,
which compiles a whole ``Rel`` tree with the enclosing scope available for outer references and returns
``(DataFrame, column names)``. The Substrait types of the scope columns come from
:func:`optimizer.schema.plan_schemas` when it can derive them (else ``None``).

Notes on how the relation half uses the expression interface:

* The scope of a join condition (``JoinRel.expression``, ``residual_expression``, nested-loop
  expressions) has ``columns`` = left columns + right columns and ``df`` = ``left.crossJoin(right)``
  (lazy, never executed: it only serves type lookups).
* Inside a subquery every relation is compiled with ``Scope.outer`` set to the enclosing scope. Such
  DataFrames cannot be analysed on their own (outer references resolve only inside the enclosing
  query): anything that forces analysis (``df.schema``, ``groupBy``, ``toDF``) fails there, so the
  relation half avoids it for the common cases (a global aggregate is a ``select`` of aggregates) and
  ``ExpressionCompiler.spark_type_of`` returns None.
* ``Scope.types`` come from :func:`optimizer.schema.plan_schemas` (keyed by relation path); ``None``
  when the schema cannot be derived.

Relations and their Spark form (details and the reasons in ``docs/spark-backend.md``):

* ``read``: named tables and local files via :class:`~optimizer.spark.tables.TableResolver`; virtual
  tables as ``inline(array(struct(...)))`` over one row, cast to the base schema (an empty one with
  ``createDataFrame([], schema)``); then ``filter``, ``best_effort_filter`` (skipped when the backend is
  built with ``ignore_best_effort_filter=True``) and the ``projection`` mask.
* ``filter``, ``project`` (window functions inside expressions included), ``sort`` (``orderBy``),
  ``fetch`` (``offset()``/``limit()``; a count of -1 or null means all rows).
* ``aggregate``: one grouping set -> ``groupBy``; several -> ``groupingSets`` with the set's ordinal
  (``i32``) computed from ``grouping_id()`` and appended after the measures (repeated sets are repeated
  rows); a measure ``filter`` masks the measure's argument with ``when(filter, arg)`` (``count(*)`` becomes
  ``count(when(filter, 1))``), which is exact for the null-ignoring aggregates; other aggregates with a
  filter are an ``UnsupportedError``.
* ``join`` (all 12 types), ``cross``, ``set`` (all 8 operations, exact multiset semantics, any number
  of inputs), ``reference`` (compiled once per ordinal; the DataFrame is reused), ``expand`` (a union of
  one projection per duplicate), ``window`` (``ConsistentPartitionWindowRel``), ``exchange``, ``top_n``.
* Physical joins are honoured with Spark join hints: ``hash_join`` -> ``shuffle_hash`` on the build side
  (``broadcast`` when the build input is an ``ExchangeRel`` broadcast), ``merge_join`` -> ``merge``,
  ``nested_loop_join`` -> the condition is hidden from Spark's equi-key extraction and
  ``shuffle_replicate_nl`` (inner: ``CartesianProduct``) or ``broadcast`` of the right input (other
  types: ``BroadcastNestedLoopJoin``) is asked for.
* ``extension_*``, ``write``, ``ddl``, ``update``, ``lateral_join`` -> ``UnsupportedError``.

Mark and single joins
---------------------

``*_mark`` joins append a nullable boolean: TRUE if some row of the other side satisfies the condition,
else NULL if for some row the condition is NULL, else FALSE. The mark depends only on the preserved
side's columns the condition reads, so it is computed once per distinct tuple of those columns ``K``:
``K`` semi-join other on the condition gives TRUE; ``K`` semi-join other on ``condition IS NULL`` gives
NULL (split, when the condition has equality keys, into an equi-join part plus the rows whose keys are
null, so that no nested-loop join over the whole inputs is needed); the result is joined back to the
preserved side with null-safe equality. A condition that is one key ``a = b`` takes a shorter path:
one left join with the other side's distinct keys (TRUE) and one global count of its rows and NULL
keys (NULL: ``a`` is NULL and the other side has rows, or it has a NULL ``b``). ``*_single`` joins are left (right) outer joins plus a check: the
number of matches per distinct ``K`` is computed and a tuple with more than one match fails the query
(``ExecutionError``, raised when the query runs).
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

import pyarrow as pa
from pyspark.errors import PySparkException
from pyspark.sql import DataFrame
from pyspark.sql import types as T
from sqlglot import exp
from substrait.proto import (
    AggregateFunction,
    ComparisonJoinKey,
    Expression,
    FetchMode,
    HashJoinRel,
    Plan,
    Rel,
    SetRel,
    Type,
)

from optimizer.errors import ExecutionError, OptimizerError, PlanError, UnsupportedError, spark_errors
from optimizer.expr_utils import (
    call_args,
    conjuncts,
    field,
    field_index,
    function_name,
    has_subquery,
    has_unresolvable_refs,
    has_window_function,
    join_type_name,
    referenced_fields,
)
from optimizer.load.functions import FunctionTable
from optimizer.plan_io import check_expanded_size, deep_messages
from optimizer.schema.derivation import plan_functions
from optimizer.spark.expressions import ExpressionCompiler, Scope, named_struct_to_spark, quote
from optimizer.spark.sql import Context, Frame, render
from optimizer.spark.sql_columns import Col, Window
from optimizer.spark.sql_columns import functions as F
from optimizer.spark.tables import TableResolver

__all__ = ["Relation", "SparkBackend"]

_BOOL = Type(bool=Type.Boolean(nullability=Type.NULLABILITY_NULLABLE))

#: Aggregates that skip NULL inputs: a measure filter can be applied by nulling the first argument.
_NULL_IGNORING = frozenset(
    {
        "count",
        "sum",
        "sum0",
        "avg",
        "min",
        "max",
        "product",
        "std_dev",
        "variance",
        "corr",
        "covar_pop",
        "covar_samp",
        "mode",
        "median",
        "bool_and",
        "bool_or",
        "approx_count_distinct",
        "string_agg",
    }
)

# Aggregate functions: a query that calls one is more than a filtered, projected table.
_AGGREGATES = frozenset({"min", "max", "sum", "avg", "count", "try_sum", "any_value", "first", "last",
                         "collect_list", "collect_set"})


def _is_filtered_scan(frame: Frame) -> bool:
    """Whether ``frame`` is a table, filtered and projected: no join, grouping, window, aggregate or
    subquery expression (FROM subqueries, which have an alias, are fine)."""
    q = frame.query()
    if q.find(exp.Join, exp.Group, exp.Distinct, exp.SetOperation, exp.Exists, exp.Window):
        return False
    if any(n.args.get("alias") is None for n in q.find_all(exp.Subquery)):
        return False
    return not any(str(n.this).lower() in _AGGREGATES for n in q.find_all(exp.Anonymous))


_SINGLE_MARKER = "more than one row of the other input matches"


def _c(name: str) -> Col:
    return F.col(quote(name))


def _first_line(exc: BaseException) -> str:
    for line in str(exc).strip().splitlines():
        if line.strip():
            return line.strip()
    return type(exc).__name__


def _join_type(body, path: str) -> str:
    """The join type of any of the join relations as a lower-case name such as ``left_semi``."""
    name = join_type_name(body)
    if name is None:
        message = "join type is unspecified" if body.type == 0 else f"unknown join type {body.type}"
        raise PlanError(message, f"{path}.type")
    return name.lower()


def _offset_limit(df: Frame, offset: int, count: int | None) -> Frame:
    """``df`` without its first ``offset`` rows, then at most ``count`` of them (None: all)."""
    if offset:
        df = df.offset(offset)
    return df.limit(count) if count is not None else df


def _and(columns: Sequence[Col]) -> Col | None:
    out = None
    for c in columns:
        out = c if out is None else out & c
    return out


def _or(columns: Sequence[Col]) -> Col | None:
    out = None
    for c in columns:
        out = c if out is None else out | c
    return out


@dataclass
class Relation:
    """A compiled relation: its query and its columns (unique names, Substrait order)."""

    df: Frame
    columns: list[str]
    types: list[Type] | None = None  # Substrait types of the columns, when known
    broadcast: bool = False  # output of an ExchangeRel broadcast: joins broadcast this side
    ordered: bool = False  # the DataFrame is globally sorted (Sort/TopN below, order-preserving above)


_SPARK_INT_MAX = 2**31 - 1  # Spark's LIMIT and OFFSET take an int


class SparkBackend:
    """Runs Substrait plans on Spark: any session, classic or Spark Connect.

    ``tables``: a directory of ``<name>.parquet`` files/folders (a path or any URI Spark reads), a mapping
    ``{name: path | DataFrame}``, a :class:`~optimizer.spark.tables.TableResolver`, or ``None`` (Spark
    catalog only). ``files``: the files a plan may read (:class:`~optimizer.paths.FileAccess`; ``None``:
    any). ``ignore_best_effort_filter``: skip ``ReadRel.best_effort_filter`` (it may be skipped by
    definition). ``ansi``: the SQL is for a session with ``spark.sql.ansi.enabled`` on (True) or off
    (False); ``None``: the session's setting when each plan is compiled (Spark 4's default, on, without
    a session). A query compiled for one mode gives the plan's answers only in that mode: with ANSI mode
    on, Spark's own overflow errors stand for the checks the other mode needs written out.
    ``allow_lossy_casts``: a column whose declared type cannot hold every value of the data's type
    (``decimal(15,2)`` declared ``decimal(19,0)``, ``i64`` declared ``i32``) is cast to it; by default
    that is a ``PlanError`` naming the table, the column and both types (a given
    :class:`~optimizer.spark.tables.TableResolver` keeps its own setting).

    A plan is compiled into one Spark SQL query (:meth:`to_sql`) and run with one ``spark.sql`` call.
    Tables read from paths are temporary views of the session, registered once per backend:
    :meth:`close` (or ``with``) drops them.
    """

    def __init__(self, spark, tables=None, *, ignore_best_effort_filter: bool = False, files=None,
                 ansi: bool | None = None, allow_lossy_casts: bool = False) -> None:
        self.spark = spark
        self.tables = tables if isinstance(tables, TableResolver) else TableResolver(
            spark, tables, files=files, allow_lossy_casts=allow_lossy_casts)
        self.ignore_best_effort_filter = ignore_best_effort_filter
        self.ansi = ansi

    def ansi_mode(self) -> bool:
        """Whether plans are compiled for ANSI mode: ``ansi`` if given, else the session's setting."""
        if self.ansi is not None:
            return self.ansi
        if self.spark is None:
            return True
        return str(self.spark.conf.get("spark.sql.ansi.enabled", "true")).strip().lower() == "true"

    # -------------------------------------------------------------------------------- public API

    def close(self) -> None:
        """Drop the temporary views the backend registered for its tables (see
        :meth:`~optimizer.spark.tables.TableResolver.close`). The views of a backend collected unclosed
        are dropped by the next backend that is created, closed or registers a table."""
        self.tables.close()

    def __enter__(self) -> SparkBackend:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def to_sql(self, plan, root: int = 0) -> tuple[str, dict[str, DataFrame]]:
        """The Spark SQL text of the ``root``-th ``RelRoot`` of ``plan`` and the tables it binds: the
        keyword arguments of ``spark.sql`` (``{t0}`` in the text is the DataFrame ``t0``; tables the
        text names, catalog tables and the backend's temporary views, are not among them). The query's
        columns are named by ``RelRoot.names``; where a name cannot stand in the text (Spark would read
        ``${env:HOME}`` as a variable, and names of nested fields are not columns) they are ``_r0``,
        ``_r1``, ... and :meth:`to_dataframe` applies the names with the DataFrame API."""
        text, tables, _names, _width = self._compile(plan, root)
        return text, tables

    @deep_messages()
    def _compile(self, plan, root: int) -> tuple[str, dict[str, DataFrame], list[str], int]:
        """The query text, its bound tables, the root names still to apply on the DataFrame (none when the
        text names the columns itself) and the number of columns."""
        plan = _as_plan(plan)
        check_expanded_size(plan)  # Spark works on the tree with every reference expanded
        roots = [i for i, r in enumerate(plan.relations) if r.WhichOneof("rel_type") == "root"]
        if not roots:
            raise PlanError("plan has no root relation", "relations")
        if not 0 <= root < len(roots):
            raise PlanError(f"root {root} requested but the plan has {len(roots)} root relation(s)", "relations")
        index = roots[root]
        compiler = _PlanCompiler(self, plan)
        rel_root = plan.relations[index].root
        out = compiler.rel(rel_root.input, f"relations[{index}].root.input", None)
        names = list(rel_root.names)
        _check_root_names(names, out, f"relations[{index}].root.names")
        width = len(out.columns)
        if _names_in_text(names, width):
            frame = out.df.select(*[_c(c).alias(n) for c, n in zip(out.columns, names, strict=True)])
            return *render(frame), [], width
        frame = out.df.select(*[_c(c).alias(f"_r{i}") for i, c in enumerate(out.columns)])
        text, tables = render(frame)
        return text, tables, names, width

    def to_dataframe(self, plan, root: int = 0) -> DataFrame:
        """The lazy DataFrame of the ``root``-th ``RelRoot`` of ``plan`` (``plan.relations`` entries that
        are plain ``rel``s, i.e. shared subtrees, are not counted), columns named by ``RelRoot.names``.

        ``plan``: a ``substrait.proto.Plan`` or anything :func:`optimizer.plan_io.load_plan` reads.
        One ``spark.sql`` call; a query Spark refuses is an :class:`~optimizer.errors.ExecutionError`.
        """
        text, tables, names, width = self._compile(plan, root)
        try:
            df = self.spark.sql(text, **tables)
            if width == 0:
                df = df.select()
            return _apply_root_names(df, names, width)
        except PySparkException as exc:
            raise ExecutionError(f"Spark cannot run the plan's SQL: {_first_line(exc)}") from None

    def execute(self, plan, root: int = 0):
        """Run the plan; a ``pyarrow.Table`` with the ``RelRoot.names`` (duplicates allowed)."""
        df = self.to_dataframe(plan, root)
        names = df.columns
        try:
            table = df.toDF(*[f"_r{i}" for i in range(len(names))]).toArrow()
        except (*spark_errors(), pa.ArrowException) as exc:  # the job failed, or its rows do not convert
            raise _execution_error(exc) from None
        return table.rename_columns(names)


def _as_plan(plan) -> Plan:
    if isinstance(plan, Plan):
        return plan
    from optimizer.plan_io import load_plan

    return load_plan(plan)


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


def _rename_type(dt: T.DataType, names: Callable[[], str]) -> T.DataType:
    """``dt`` with its nested struct fields renamed, depth-first (lists and maps looked into)."""
    if isinstance(dt, T.StructType):
        fields = []
        for f in dt.fields:
            name = names()
            fields.append(T.StructField(name, _rename_type(f.dataType, names), f.nullable))
        return T.StructType(fields)
    if isinstance(dt, T.ArrayType):
        return T.ArrayType(_rename_type(dt.elementType, names), dt.containsNull)
    if isinstance(dt, T.MapType):
        key = _rename_type(dt.keyType, names)
        return T.MapType(key, _rename_type(dt.valueType, names), dt.valueContainsNull)
    return dt


def _nested_count(dt: T.DataType) -> int:
    if isinstance(dt, T.StructType):
        return sum(1 + _nested_count(f.dataType) for f in dt.fields)
    if isinstance(dt, T.ArrayType):
        return _nested_count(dt.elementType)
    if isinstance(dt, T.MapType):
        return _nested_count(dt.keyType) + _nested_count(dt.valueType)
    return 0


def _check_root_names(names: list[str], r: Relation, path: str) -> None:
    """``RelRoot.names``: none, one per column, or one per column and nested struct field."""
    if not names or len(names) == len(r.columns) or r.types is None:
        return
    from optimizer.spark.expressions import substrait_type_to_spark

    flat = sum(1 + _nested_count(substrait_type_to_spark(t)) for t in r.types)
    if len(names) != flat:
        raise PlanError(
            f"RelRoot has {len(names)} names but its input has {len(r.columns)} columns ({flat} with nested fields)",
            path,
        )


def _names_in_text(names: list[str], width: int) -> bool:
    """Whether the query text itself can name its columns: one name per column (no nested fields), none
    empty, none that Spark's variable substitution would read (``${``). Then no second analysis (a
    ``toDF`` over the query: 3-7 ms a plan) renames them."""
    return len(names) == width > 0 and all(n and "${" not in n for n in names)


def _apply_root_names(df: DataFrame, names: list[str], width: int) -> DataFrame:
    """The query's columns ``_r0``... named by ``RelRoot.names`` (nested struct fields included), with
    the DataFrame API, which reads no name as SQL."""
    if not names:
        return df
    if len(names) == width:
        return df.toDF(*names)
    fields = df.schema.fields
    flat = sum(1 + _nested_count(f.dataType) for f in fields)
    if len(names) != flat:
        raise PlanError(f"RelRoot has {len(names)} names but its input has {len(fields)} columns ({flat} with "
                        "nested fields)", "relations.root.names")
    it = iter(names)
    cols = []
    for f in fields:
        top = next(it)
        c = df[f.name]  # (the DataFrame's own column: classic or Connect, as the session is)
        if _nested_count(f.dataType):
            c = c.cast(_rename_type(f.dataType, lambda: next(it)))
        cols.append(c.alias(top))
    return df.select(*cols)


class _PlanCompiler:
    """Compiles the relations of one plan (keeps the plan's function table and shared subtrees)."""

    def __init__(self, backend: SparkBackend, plan: Plan) -> None:
        self.backend = backend
        self.spark = backend.spark
        self.ctx = Context(backend.spark)
        self._counter = itertools.count()
        self.plan = plan
        self.functions: FunctionTable = plan_functions(plan)
        self.references: dict[int, Relation] = {}
        self._in_progress: set[int] = set()
        self.schemas: dict = {}
        try:  # Substrait types for the scopes; the backend works without them
            from optimizer.schema import plan_schemas

            self.schemas = plan_schemas(plan, self.functions)
        except OptimizerError:  # a plan whose types cannot be derived: types unknown
            self.schemas = {}
        self.exprs = ExpressionCompiler(self.functions, self.subquery, self.schemas, ansi=backend.ansi_mode())

    def fresh(self) -> str:
        """A column name never handed out before in this plan's query."""
        return f"_c{next(self._counter)}"

    # ------------------------------------------------------------------------------------ helpers

    def scope(self, r: Relation, outer: Scope | None, df: Frame | None = None) -> Scope:
        return Scope(df if df is not None else r.df, list(r.columns), list(r.types) if r.types else r.types, outer)

    def expr(self, e: Expression, scope: Scope, path: str) -> Col:
        return self.exprs.compile(e, scope, path)

    def subquery(self, rel: Rel, outer: Scope, path: str) -> tuple:
        """The callback of the expression compiler: a whole ``Rel`` tree, ``outer`` for outer references."""
        r = self.rel(rel, path, outer)
        if r.types is not None:  # known types spare Spark an analysis of the subquery
            return r.df, list(r.columns), list(r.types)
        return r.df, list(r.columns)

    def _types_at(self, path: str, n: int) -> list[Type] | None:
        schema = self.schemas.get(path)
        if schema is None or len(schema.types) != n:
            return None
        return list(schema.types)

    def _positions(
        self, columns: list[str], exprs: dict[str, Col], positions: Sequence[int], path: str, what: str
    ) -> tuple[list[Col], list[str]]:
        """The select list of the columns at ``positions`` (a repeated position gets a new name);
        ``exprs`` gives the expression of a column that is computed rather than taken from the input."""
        n = len(columns)
        seen: set[str] = set()
        cols, names = [], []
        for p in positions:
            if not 0 <= p < n:
                raise PlanError(f"{what} {p} is out of range: the input has {n} columns", path)
            name = columns[p]
            if name in seen:
                new = self.fresh()
                cols.append(_c(name).alias(new) if name not in exprs else exprs[name].alias(new))
                names.append(new)
            else:
                seen.add(name)
                cols.append(exprs[name].alias(name) if name in exprs else _c(name))
                names.append(name)
        return cols, names

    def select_positions(self, r: Relation, positions: Sequence[int], path: str, what: str) -> Relation:
        """The columns at ``positions`` (a repeated position gets a new name)."""
        cols, names = self._positions(r.columns, {}, positions, path, what)
        if names == r.columns:
            return r
        types = [r.types[p] for p in positions] if r.types is not None else None
        return replace(r, df=r.df.select(*cols), columns=names, types=types)

    def _emit(self, r: Relation, body, bpath: str) -> Relation:
        if not body.HasField("common") or body.common.WhichOneof("emit_kind") != "emit":
            return r
        mapping = list(body.common.emit.output_mapping)
        return self.select_positions(r, mapping, f"{bpath}.common.emit.output_mapping", "emitted field")

    def _disjoint(self, left: Relation, right: Relation) -> Relation:
        """``right`` with fresh names if it shares any with ``left`` (a self-join)."""
        if not set(left.columns) & set(right.columns):
            return right
        names = [self.fresh() for _ in right.columns]
        df = right.df.select(*[_c(c).alias(n) for c, n in zip(right.columns, names, strict=True)])
        return replace(right, df=df, columns=names)

    def _const_int(self, e: Expression, path: str, what: str) -> int | None:
        """The value of a constant integer expression (None for null)."""
        if e.WhichOneof("rex_type") == "literal":
            lit = e.literal
            kind = lit.WhichOneof("literal_type")
            if kind in ("i8", "i16", "i32", "i64"):
                return int(getattr(lit, kind))
            if kind == "null":
                return None
        one = Frame.one_row(self.ctx)
        col = self.expr(e, Scope(one, [], [], None), path)
        text, tables = render(one.select(col.alias("v")))
        try:
            value = self.spark.sql(text, **tables).first()["v"]
        except PySparkException as exc:
            raise PlanError(f"{what} is not a constant integer expression: {_first_line(exc)}", path) from None
        if value is None:
            return None
        if isinstance(value, bool) or not isinstance(value, int):
            raise PlanError(f"{what} must be an integer, not {type(value).__name__}", path)
        return int(value)

    def _ref_index(self, ref: Expression.FieldReference, path: str) -> int:
        if (
            ref.WhichOneof("reference_type") != "direct_reference"
            or ref.WhichOneof("root_type") not in (None, "root_reference")
            or ref.direct_reference.WhichOneof("reference_type") != "struct_field"
            or ref.direct_reference.struct_field.HasField("child")
        ):
            raise UnsupportedError("only references to top-level input fields are supported here", path)
        return ref.direct_reference.struct_field.field

    # ----------------------------------------------------------------------------------- dispatch

    def rel(self, rel: Rel, path: str, outer: Scope | None) -> Relation:
        """Compile one relation tree rooted at ``rel`` (found at ``path``)."""
        kind = rel.WhichOneof("rel_type")
        if kind is None:
            raise PlanError("relation is empty (no rel_type set)", path)
        bpath = f"{path}.{kind}"
        handler = getattr(self, f"_rel_{kind}", None)
        if handler is None:
            raise UnsupportedError(f"unsupported relation '{kind}'", bpath)
        body = getattr(rel, kind)
        try:
            out = handler(body, bpath, outer)
            if kind not in ("reference", "project"):  # a project applies its emit itself
                out = self._emit(out, body, bpath)
        except OptimizerError:
            raise
        except PySparkException as exc:  # a table Spark cannot read, a type it cannot analyse
            raise ExecutionError(f"Spark cannot build this relation: {_first_line(exc)}", bpath) from None
        types = self._types_at(path, len(out.columns))
        if types is not None:
            out = replace(out, types=types)
        elif out.types is not None and len(out.types) != len(out.columns):
            out = replace(out, types=None)
        return out

    # -------------------------------------------------------------------------------------- read

    def _rel_read(self, body, bpath: str, outer: Scope | None) -> Relation:
        which = body.WhichOneof("read_type")
        types: list[Type] | None = list(body.base_schema.struct.types)
        width = len(types)
        if not types:  # names but no types (older DataFusion): the named columns, types unknown
            width, types = len(body.base_schema.names), None
            if which == "virtual_table" and not width and body.virtual_table.expressions:
                # no base schema at all (older DuckDB): as many columns as the rows have values
                width = len(body.virtual_table.expressions[0].fields)
        names = [self.fresh() for _ in range(width)]
        if which == "named_table":
            # One select conforms the table, names its columns and applies the projection mask, widened
            # by the columns the filters read (each Frame costs Spark an analysis).
            keep = None
            filters = [body.filter] if body.HasField("filter") else []
            if body.HasField("best_effort_filter") and not self.backend.ignore_best_effort_filter:
                filters.append(body.best_effort_filter)
            if body.HasField("projection") and body.projection.HasField("select"):
                fields = [item.field for item in body.projection.select.struct_items]
                if (
                    not any(item.HasField("child") for item in body.projection.select.struct_items)
                    and len(set(fields)) == len(fields)
                    and all(0 <= f < width for f in fields)
                ):
                    keep = fields
            if keep is not None and filters:
                # The filters read a few more columns than the mask keeps: conform only those (a wide
                # table's every column cast and named is most of compiling a read). Not when a filter
                # holds a subquery, whose outer references are not among its own fields.
                if any(has_subquery(f) or has_unresolvable_refs(f) for f in filters):
                    keep = None
                else:
                    read = set().union(*(referenced_fields(f) for f in filters))
                    keep = sorted(set(keep) | read) if all(0 <= f < width for f in read) else None
            df = self.backend.tables.named_table(body, self.ctx, bpath, names, keep)
            if keep is not None and not filters:
                return Relation(df, [names[f] for f in keep], [types[f] for f in keep] if types else None)
            return self._read_filters(Relation(df, names, types), body, bpath, outer)
        if which == "local_files":
            df = self.backend.tables.local_files(body, self.ctx, bpath, names)
        elif which == "virtual_table":
            df = self._virtual_table(body, bpath, outer, names)
        elif which is None:
            raise PlanError("read has no source (named_table, local_files, virtual_table...)", bpath)
        else:
            raise UnsupportedError(f"unsupported read type '{which}'", f"{bpath}.{which}")
        return self._read_filters(Relation(df, names, types), body, bpath, outer)

    def _read_filters(self, r: Relation, body, bpath: str, outer: Scope | None) -> Relation:
        """A read's filter, best-effort filter and projection mask over its named columns ``r``."""
        if body.HasField("filter"):
            scope = self.scope(r, outer)
            r = replace(r, df=r.df.filter(self.expr(body.filter, scope, f"{bpath}.filter")))
        if body.HasField("best_effort_filter") and not self.backend.ignore_best_effort_filter:
            scope = self.scope(r, outer)
            r = replace(r, df=r.df.filter(self.expr(body.best_effort_filter, scope, f"{bpath}.best_effort_filter")))
        if body.HasField("projection") and body.projection.HasField("select"):
            ppath = f"{bpath}.projection.select"
            positions = []
            for i, item in enumerate(body.projection.select.struct_items):
                if item.HasField("child"):
                    raise UnsupportedError(
                        "projection masks into nested fields are not supported", f"{ppath}.struct_items[{i}].child"
                    )
                positions.append(item.field)
            r = self.select_positions(r, positions, f"{ppath}.struct_items", "projected field")
        return r

    def _virtual_table(self, body, bpath: str, outer: Scope | None, names: list[str]) -> Frame:
        """The rows as ``inline(array(struct(...)))`` over one row, columns called ``names``."""
        vpath = f"{bpath}.virtual_table"
        rows = list(body.virtual_table.expressions)
        if not body.base_schema.struct.types:  # no schema (older DuckDB): the rows' own types
            if not rows:
                raise PlanError("virtual table has neither a schema nor rows", vpath)
            n = len(rows[0].fields)
            schema = None
        else:
            schema = named_struct_to_spark(body.base_schema, f"{bpath}.base_schema")
            n = len(schema.fields)
        one = Frame.one_row(self.ctx)
        if not rows:
            nulls = [F.lit(None).cast(f.dataType).alias(c) for f, c in zip(schema.fields, names, strict=True)]
            return one.select(*nulls).filter(F.lit(False))
        if n == 0:
            return Frame.rows(self.ctx, len(rows)).select()
        scope = Scope(one, [], [], outer)
        structs = []
        for r, row in enumerate(rows):
            if len(row.fields) != n:
                raise PlanError(f"row has {len(row.fields)} values, the schema {n} columns", f"{vpath}.expressions[{r}]")
            values = []
            for j, v in enumerate(row.fields):
                value = self.expr(v, scope, f"{vpath}.expressions[{r}].fields[{j}]")
                if schema is not None:
                    value = value.cast(schema.fields[j].dataType)
                values.append(value.alias(names[j]))
            structs.append(F.struct(*values))
        return one.select(F.inline(F.array(*structs)))

    # ------------------------------------------------------------------------ single-input rels

    def _rel_filter(self, body, bpath: str, outer: Scope | None) -> Relation:
        inp = self.rel(body.input, f"{bpath}.input", outer)
        if not body.HasField("condition"):
            raise PlanError("filter has no condition", bpath)
        cond = self.expr(body.condition, self.scope(inp, outer), f"{bpath}.condition")
        return replace(inp, df=inp.df.filter(cond), broadcast=False)

    def _rel_project(self, body, bpath: str, outer: Scope | None) -> Relation:
        inp = self.rel(body.input, f"{bpath}.input", outer)
        scope = self.scope(inp, outer)
        exprs: dict[str, Col] = {}
        has_window = False
        for i, e in enumerate(body.expressions):
            has_window = has_window or has_window_function(e, enter_subqueries=False)
            exprs[self.fresh()] = self.expr(e, scope, f"{bpath}.expressions[{i}]")
        ordered = inp.ordered and not has_window
        columns = inp.columns + list(exprs)
        emit = body.common.emit.output_mapping if body.common.WhichOneof("emit_kind") == "emit" else None
        if emit is not None and all(  # a computed column emitted twice is computed once, below
            sum(1 for p in emit if p == q) == 1 for q in set(emit) if 0 <= q < len(columns) and columns[q] in exprs
        ):
            # Only the emitted columns, in one select (the others are never computed).
            mapping = list(body.common.emit.output_mapping)
            cols, names = self._positions(
                columns, exprs, mapping, f"{bpath}.common.emit.output_mapping", "emitted field"
            )
            if names == inp.columns:
                return replace(inp, ordered=ordered)
            return Relation(inp.df.select(*cols), names, None, ordered=ordered)
        df = inp.df.select(*[_c(c) for c in inp.columns], *[c.alias(n) for n, c in exprs.items()])
        return self._emit(Relation(df, columns, None, ordered=ordered), body, bpath)

    def _rel_sort(self, body, bpath: str, outer: Scope | None) -> Relation:
        inp = self.rel(body.input, f"{bpath}.input", outer)
        if not body.sorts:
            return inp
        scope = self.scope(inp, outer)
        orders = [self.exprs.sort_order(s, scope, f"{bpath}.sorts[{i}]") for i, s in enumerate(body.sorts)]
        return replace(inp, df=inp.df.orderBy(*orders), broadcast=False, ordered=True)

    def _fetch_bounds(self, body, bpath: str, names: tuple[str, str]) -> tuple[int, int | None]:
        """``(offset, count)`` of a FetchRel or TopNRel, whose bound fields are named ``names``."""
        offset_expr = getattr(body, names[0]) if body.HasField(names[0]) else None
        count_expr = getattr(body, names[1]) if body.HasField(names[1]) else None
        offset = 0
        if offset_expr is not None:
            value = self._const_int(offset_expr, f"{bpath}.{names[0]}", "offset")
            if value is not None and value < 0:
                raise ExecutionError(f"offset is negative ({value})", f"{bpath}.{names[0]}")
            if value is not None and value > _SPARK_INT_MAX:
                raise UnsupportedError(f"offset {value} is above Spark's largest OFFSET ({_SPARK_INT_MAX})",
                                       f"{bpath}.{names[0]}")
            offset = value or 0
        count = None
        if count_expr is not None:
            count = self._const_int(count_expr, f"{bpath}.{names[1]}", "count")
            if count == -1:  # the old encoding's "all rows"
                count = None
            elif count is not None and count < 0:
                raise ExecutionError(f"count is negative ({count})", f"{bpath}.{names[1]}")
            elif count is not None and count > _SPARK_INT_MAX:
                # Spark's LIMIT is an int: capped, the same answer for any result Spark can collect.
                count = _SPARK_INT_MAX
        return offset, count

    def _rel_fetch(self, body, bpath: str, outer: Scope | None) -> Relation:
        inp = self.rel(body.input, f"{bpath}.input", outer)
        offset, count = self._fetch_bounds(body, bpath, ("offset_expr", "count_expr"))
        return replace(inp, df=_offset_limit(inp.df, offset, count), broadcast=False)

    def _rel_top_n(self, body, bpath: str, outer: Scope | None) -> Relation:
        inp = self.rel(body.input, f"{bpath}.input", outer)
        offset, count = self._fetch_bounds(body, bpath, ("offset", "count"))
        scope = self.scope(inp, outer)
        orders = [self.exprs.sort_order(s, scope, f"{bpath}.sorts[{i}]") for i, s in enumerate(body.sorts)]
        df = inp.df
        if body.mode == FetchMode.FETCH_MODE_WITH_TIES and count is not None:
            if not orders:
                raise PlanError("WITH TIES needs sort fields", f"{bpath}.sorts")
            window = Window.orderBy(*orders)
            rn, rk = self.fresh(), self.fresh()
            df = df.select(*[_c(c) for c in inp.columns], F.row_number().over(window).alias(rn), F.rank().over(window).alias(rk))
            df = df.filter((_c(rn) > offset) & (_c(rk) <= offset + count)).orderBy(*[_c(rn)]).select(*[_c(c) for c in inp.columns])
            return replace(inp, df=df, broadcast=False, ordered=True)
        df = _offset_limit(df.orderBy(*orders) if orders else df, offset, count)
        return replace(inp, df=df, broadcast=False, ordered=bool(orders))

    # --------------------------------------------------------------------------------- aggregate

    def _filtered_measure(
        self, fn: AggregateFunction, filt: Expression, scope: Scope, mpath: str, extra: list, base: int
    ) -> AggregateFunction | Col:
        """``fn`` rewritten to read its first argument through ``when(filter, arg)`` (a new column);
        ``count(*)`` with a filter directly as the column ``count(when(filter, 1))``."""
        info = self.functions.get(fn.function_reference, f"{mpath}.measure.function_reference")
        fcol = self.expr(filt, scope, f"{mpath}.filter")
        new = AggregateFunction()
        new.CopyFrom(fn)
        values = [k for k, a in enumerate(fn.arguments) if a.WhichOneof("arg_type") == "value"]
        if not values:
            if info.name not in ("count", "count_star"):
                raise UnsupportedError(f"a measure filter on '{info.name}' is not supported", f"{mpath}.filter")
            return F.count(F.when(fcol, F.lit(1)))
        if info.name not in _NULL_IGNORING:
            raise UnsupportedError(f"a measure filter on '{info.name}' is not supported", f"{mpath}.filter")
        k = values[0]
        arg = fn.arguments[k].value
        argcol = self.expr(arg, scope, f"{mpath}.measure.arguments[{k}].value")
        extra.append((self.fresh(), F.when(fcol, argcol), self.exprs.type_of(arg, scope)))
        new.arguments[k].value.CopyFrom(field(base + len(extra) - 1))
        return new

    def _computed_arguments(
        self, fn: AggregateFunction, scope: Scope, mpath: str, extra: list, base: int
    ) -> AggregateFunction:
        """``fn`` reading each computed argument (neither a field nor a literal) from a new column below
        the aggregate. A measure may use its argument more than once (a sum's overflow check does), and a
        column is computed, and analysed by Spark, once. Only where the argument's type is known, so that
        the function sees the same type through the new column."""
        new = None
        for k, a in enumerate(fn.arguments):
            if a.WhichOneof("arg_type") != "value" or a.value.WhichOneof("rex_type") in ("literal", "selection"):
                continue
            t = self.exprs.type_of(a.value, scope)
            if t is None or t.WhichOneof("kind") is None:
                continue
            if new is None:
                new = AggregateFunction()
                new.CopyFrom(fn)
            col = self.expr(a.value, scope, f"{mpath}.measure.arguments[{k}].value")
            extra.append((self.fresh(), col, t))
            new.arguments[k].value.CopyFrom(field(base + len(extra) - 1))
        return new if new is not None else fn

    def _rel_aggregate(self, body, bpath: str, outer: Scope | None) -> Relation:
        inp = self.rel(body.input, f"{bpath}.input", outer)
        scope = self.scope(inp, outer)
        keys = [
            (self.fresh(), self.expr(e, scope, f"{bpath}.grouping_expressions[{i}]"))
            for i, e in enumerate(body.grouping_expressions)
        ]
        # A key that is an input column keeps that column's name: no projection before grouping.
        inputs = set(inp.columns)
        used: set[str] = set()
        for i, (_n, c) in enumerate(keys):
            same = c.e.name if c._alias is None and isinstance(c.e, exp.Column) else None
            if same in inputs and same not in used:
                keys[i] = (same, c)
                used.add(same)
        key_names = [n for n, _ in keys]
        extra: list[tuple[str, Col, Type | None]] = []
        fns = []
        for j, m in enumerate(body.measures):
            mpath = f"{bpath}.measures[{j}]"
            if not m.HasField("measure"):
                raise PlanError("measure has no aggregate function", mpath)
            fn = m.measure
            if m.HasField("filter"):
                fn = self._filtered_measure(fn, m.filter, scope, mpath, extra, len(inp.columns))
            if inp.types is not None and not isinstance(fn, Col):
                fn = self._computed_arguments(fn, scope, mpath, extra, len(inp.columns))
            fns.append(fn)
        df1 = inp.df
        computed = [(n, c) for n, c in keys if n not in used]
        if computed or extra:
            df1 = inp.df.select(
                *[_c(c) for c in inp.columns],
                *[c.alias(n) for n, c in computed],
                *[c.alias(n) for n, c, _ in extra],
            )
        types = None
        if inp.types is not None and all(t is not None for _, _, t in extra):
            types = list(inp.types) + [t for _, _, t in extra]
        mscope = Scope(df1, list(inp.columns) + [n for n, _, _ in extra], types, outer)
        measures = [
            (self.fresh(), fn if isinstance(fn, Col) else self.exprs.aggregate(fn, mscope, f"{bpath}.measures[{j}].measure"))
            for j, fn in enumerate(fns)
        ]
        sets: list[list[int]] = []
        for g, grouping in enumerate(body.groupings):
            refs: list[int] = []
            for r in grouping.expression_references:
                if not 0 <= r < len(keys):
                    raise PlanError(
                        f"grouping expression {r} is out of range ({len(keys)} grouping expressions)",
                        f"{bpath}.groupings[{g}].expression_references",
                    )
                if r not in refs:
                    refs.append(r)
            sets.append(refs)
        if not sets:
            sets = [[]]
        measure_names = [n for n, _ in measures]
        if len(sets) == 1:
            group = [key_names[i] for i in sets[0]]
            if measures and not group:
                # select() rather than groupBy().agg(): groupBy analyses the Frame at once, which
                # fails inside a correlated subquery (its outer references resolve only later).
                out = df1.select(*[c.alias(n) for n, c in measures])
            elif measures:
                out = df1.groupBy(*[_c(n) for n in group]).agg(*[c.alias(n) for n, c in measures])
            elif group:
                out = df1.select(*[_c(n) for n in group]).distinct()
            else:
                raise PlanError("aggregate has neither grouping expressions nor measures", bpath)
            cols, names = [], []
            for i, n in enumerate(key_names):
                if i in sets[0]:
                    cols.append(_c(n))
                    names.append(n)
                else:  # not grouped by: NULL (an invalid plan, but well defined)
                    new = self.fresh()
                    cols.append(F.lit(None).alias(new))
                    names.append(new)
            if names != group:  # groupBy().agg() already gives the group columns, then the measures
                out = out.select(*cols, *[_c(n) for n in measure_names])
            return Relation(out, names + measure_names)
        return self._grouping_sets(df1, key_names, sets, measures, bpath)

    def _grouping_sets(self, df1: Frame, key_names, sets, measures, bpath: str) -> Relation:
        distinct: dict[frozenset, list[int]] = {}
        for ordinal, s in enumerate(sets):
            distinct.setdefault(frozenset(s), []).append(ordinal)
        # Spark's grouping columns are the sets' columns in order of first appearance, and
        # grouping_id() must name them in that order (else GROUPING_ID_COLUMN_MISMATCH)
        used = list(dict.fromkeys(i for fs in distinct for i in sorted(fs)))
        used_names = [key_names[i] for i in used]
        gid, idx = self.fresh(), self.fresh()
        grouped = df1.groupingSets(
            [[_c(key_names[i]) for i in sorted(fs)] for fs in distinct], *[_c(n) for n in used_names]
        ).agg(*[c.alias(n) for n, c in measures], F.grouping_id(*[_c(n) for n in used_names]).alias(gid))

        def mask(fs: frozenset) -> int:
            return sum(1 << (len(used) - 1 - k) for k, i in enumerate(used) if i not in fs)

        case = None
        for fs, ordinals in distinct.items():
            cond = _c(gid) == F.lit(mask(fs))
            case = F.when(cond, F.lit(ordinals[0])) if case is None else case.when(cond, F.lit(ordinals[0]))
        cols, names = [], []
        for n in key_names:
            if n in used_names:
                cols.append(_c(n))
                names.append(n)
            else:
                new = self.fresh()
                cols.append(F.lit(None).alias(new))
                names.append(new)
        measure_names = [n for n, _ in measures]
        out = grouped.select(*cols, *[_c(n) for n in measure_names], case.cast("int").alias(idx))
        base = out
        for ordinals in distinct.values():
            for ordinal in ordinals[1:]:  # a repeated grouping set yields its rows again
                again = base.filter(_c(idx) == F.lit(ordinals[0]))
                out = out.union(again.select(*[_c(n) for n in names + measure_names], F.lit(ordinal).cast("int").alias(idx)))
        return Relation(out, names + measure_names + [idx])

    # ------------------------------------------------------------------------------------- joins

    def _join_inputs(self, body, bpath: str, outer: Scope | None) -> tuple[Relation, Relation]:
        if not body.HasField("left") or not body.HasField("right"):
            raise PlanError("join needs a left and a right input", bpath)
        left = self.rel(body.left, f"{bpath}.left", outer)
        right = self.rel(body.right, f"{bpath}.right", outer)
        return left, self._disjoint(left, right)

    def _pair_scope(self, left: Relation, right: Relation, outer: Scope | None) -> Scope:
        types = left.types + right.types if left.types is not None and right.types is not None else None
        # The pair's query serves type lookups only (nested references, nullability).
        pair = left.df.crossJoin(right.df)
        return Scope(pair, left.columns + right.columns, types, outer)

    def _equi_keys(self, e: Expression | None, nleft: int, left: Relation, right: Relation) -> list[tuple[str, str, bool]]:
        """``(left column, right column, null-safe)`` for the equality conjuncts of a join condition."""
        if e is None:
            return []
        out = []
        for c in conjuncts(e, self.functions):
            name = function_name(c, self.functions)
            if name not in ("equal", "is_not_distinct_from"):
                continue
            args = call_args(c)
            if args is None or len(args) != 2:
                continue
            a, b = field_index(args[0]), field_index(args[1])
            if a is None or b is None:
                continue
            if a >= nleft > b:
                a, b = b, a
            if a < nleft <= b < nleft + len(right.columns):
                out.append((left.columns[a], right.columns[b - nleft], name == "is_not_distinct_from"))
        return out

    def _rel_join(self, body, bpath: str, outer: Scope | None) -> Relation:
        left, right = self._join_inputs(body, bpath, outer)
        jt = _join_type(body, bpath)
        cond, refs, equi = None, set(), []
        if body.HasField("expression"):
            scope = self._pair_scope(left, right, outer)
            cond = self.expr(body.expression, scope, f"{bpath}.expression")
            refs = referenced_fields(body.expression)
            equi = self._equi_keys(body.expression, len(left.columns), left, right)
            keys_only = len(equi) == len(conjuncts(body.expression, self.functions))
        else:
            keys_only = False
        return self._join(left, right, jt, cond, refs, equi, body, bpath, outer, keys_only=keys_only)

    def _keys_condition(self, body, left: Relation, right: Relation, bpath: str, outer: Scope | None):
        """The condition of a hash or merge join: its keys AND its residual expression."""
        if not body.keys:
            raise PlanError("the join has no keys", f"{bpath}.keys")
        parts, refs, equi = [], set(), []
        nleft = len(left.columns)
        for i, key in enumerate(body.keys):
            kpath = f"{bpath}.keys[{i}]"
            li = self._ref_index(key.left, f"{kpath}.left")
            ri = self._ref_index(key.right, f"{kpath}.right")
            if not 0 <= li < nleft:
                raise PlanError(f"left key field {li} is out of range ({nleft} columns)", f"{kpath}.left")
            if not 0 <= ri < len(right.columns):
                raise PlanError(f"right key field {ri} is out of range ({len(right.columns)} columns)", f"{kpath}.right")
            lc, rc = left.columns[li], right.columns[ri]
            refs |= {li, nleft + ri}
            which = key.comparison.WhichOneof("inner_type")
            if which == "custom_function_reference":
                info = self.functions.get(key.comparison.custom_function_reference, f"{kpath}.comparison")
                raise UnsupportedError(f"join key comparison '{info.declared_name}' is not supported", f"{kpath}.comparison")
            simple = key.comparison.simple if which == "simple" else ComparisonJoinKey.SIMPLE_COMPARISON_TYPE_EQ
            if simple in (ComparisonJoinKey.SIMPLE_COMPARISON_TYPE_EQ, ComparisonJoinKey.SIMPLE_COMPARISON_TYPE_UNSPECIFIED):
                parts.append(_c(lc) == _c(rc))
                equi.append((lc, rc, False))
            elif simple == ComparisonJoinKey.SIMPLE_COMPARISON_TYPE_IS_NOT_DISTINCT_FROM:
                parts.append(_c(lc).eqNullSafe(_c(rc)))
                equi.append((lc, rc, True))
            elif simple == ComparisonJoinKey.SIMPLE_COMPARISON_TYPE_MIGHT_EQUAL:
                parts.append((_c(lc) == _c(rc)) | _c(lc).isNull() | _c(rc).isNull())
            else:
                raise UnsupportedError(f"join key comparison {simple} is not supported", f"{kpath}.comparison")
        if body.HasField("residual_expression"):
            scope = self._pair_scope(left, right, outer)
            parts.append(self.expr(body.residual_expression, scope, f"{bpath}.residual_expression"))
            refs |= referenced_fields(body.residual_expression)
        return _and(parts), refs, equi

    def _rel_hash_join(self, body, bpath: str, outer: Scope | None) -> Relation:
        left, right = self._join_inputs(body, bpath, outer)
        jt = _join_type(body, bpath)
        cond, refs, equi = self._keys_condition(body, left, right, bpath, outer)
        keys_only = len(equi) == len(body.keys) and not body.HasField("residual_expression")
        build_left = body.build_input == HashJoinRel.BUILD_INPUT_LEFT

        def hint(ldf: Frame, rdf: Frame) -> tuple[Frame, Frame]:
            if build_left:
                return (F.broadcast(ldf) if left.broadcast else ldf.hint("shuffle_hash")), rdf
            return ldf, (F.broadcast(rdf) if right.broadcast else rdf.hint("shuffle_hash"))

        return self._join(left, right, jt, cond, refs, equi, body, bpath, outer, hint=hint, sides_done=True,
                          keys_only=keys_only)

    def _rel_merge_join(self, body, bpath: str, outer: Scope | None) -> Relation:
        left, right = self._join_inputs(body, bpath, outer)
        jt = _join_type(body, bpath)
        cond, refs, equi = self._keys_condition(body, left, right, bpath, outer)
        keys_only = len(equi) == len(body.keys) and not body.HasField("residual_expression")
        return self._join(
            left, right, jt, cond, refs, equi, body, bpath, outer, hint=lambda ldf, rdf: (ldf.hint("merge"), rdf),
            sides_done=True, keys_only=keys_only,
        )

    def _rel_nested_loop_join(self, body, bpath: str, outer: Scope | None) -> Relation:
        left, right = self._join_inputs(body, bpath, outer)
        jt = _join_type(body, bpath)
        cond, refs = None, set()
        if body.HasField("expression"):
            scope = self._pair_scope(left, right, outer)
            cond = self.expr(body.expression, scope, f"{bpath}.expression")
            refs = referenced_fields(body.expression)
        # greatest(c, false) is c for matching purposes (NULL -> no match) but is no conjunction of
        # equalities, so Spark cannot turn the join into a hash or sort-merge join. It is never NULL:
        # a mark join's NULL ("unknown") is told from the condition as written.
        written = cond
        cond = F.greatest(cond if cond is not None else F.lit(True), F.lit(False))

        def hint(ldf: Frame, rdf: Frame) -> tuple[Frame, Frame]:
            if left.broadcast:
                return F.broadcast(ldf), rdf
            if jt == "inner" and not right.broadcast:
                return ldf.hint("shuffle_replicate_nl"), rdf
            return ldf, F.broadcast(rdf)

        return self._join(left, right, jt, cond, refs, [], body, bpath, outer, hint=hint, sides_done=True,
                          unknown_cond=written)

    def _rel_cross(self, body, bpath: str, outer: Scope | None) -> Relation:
        left, right = self._join_inputs(body, bpath, outer)
        ldf = F.broadcast(left.df) if left.broadcast else left.df
        rdf = F.broadcast(right.df) if right.broadcast else right.df
        types = left.types + right.types if left.types is not None and right.types is not None else None
        return Relation(ldf.crossJoin(rdf), left.columns + right.columns, types)

    def _join(
        self,
        left: Relation,
        right: Relation,
        jt: str,
        cond: Col | None,
        refs: set[int],
        equi: list[tuple[str, str, bool]],
        body,
        bpath: str,
        outer: Scope | None,
        hint: Callable[[Frame, Frame], tuple[Frame, Frame]] | None = None,
        sides_done: bool = False,
        unknown_cond: Col | None = None,
        keys_only: bool = False,
    ) -> Relation:
        """``unknown_cond``: the condition whose NULL makes a mark join's mark NULL, when ``cond`` has
        been rewritten so that it is never NULL (default: ``cond``). ``keys_only``: the condition is
        exactly the conjunction of the ``equi`` comparisons."""
        ldf, rdf = left.df, right.df
        if hint is not None:
            ldf, rdf = hint(ldf, rdf)
        if not sides_done:
            ldf = F.broadcast(ldf) if left.broadcast else ldf
            rdf = F.broadcast(rdf) if right.broadcast else rdf
        lt, rt = left.types, right.types
        both = lt + rt if lt is not None and rt is not None else None
        nleft = len(left.columns)
        simple = {"inner": "inner", "outer": "full", "left": "left", "right": "right"}
        if jt in simple:
            if cond is None and jt == "inner":
                df = ldf.crossJoin(rdf)
            else:
                df = ldf.join(rdf, cond if cond is not None else F.lit(True), simple[jt])
            out = Relation(df, left.columns + right.columns, both)
        elif jt in ("left_semi", "left_anti"):
            df = self._semi_as_in(ldf, rdf, [(a, b) for a, b, _ in equi], equi, keys_only and hint is None and not (left.broadcast or right.broadcast), jt)
            if df is None:
                df = ldf.join(rdf, cond if cond is not None else F.lit(True), jt)
            out = Relation(df, list(left.columns), lt)
        elif jt in ("right_semi", "right_anti"):
            df = self._semi_as_in(rdf, ldf, [(b, a) for a, b, _ in equi], equi, keys_only and hint is None and not (left.broadcast or right.broadcast), jt)
            if df is None:
                df = rdf.join(ldf, cond if cond is not None else F.lit(True), "left_" + jt.split("_")[1])
            out = Relation(df, list(right.columns), rt)
        elif jt in ("left_single", "right_single"):
            keep_left = jt == "left_single"
            keep_refs = [
                (left.columns[i] if keep_left else right.columns[i - nleft])
                for i in sorted(refs)
                if (i < nleft) == keep_left and i < nleft + len(right.columns)
            ]
            df = self._single(ldf, rdf, keep_left, cond, keep_refs, left.columns + right.columns, bpath)
            out = Relation(df, left.columns + right.columns, both)
        elif jt in ("left_mark", "right_mark"):
            keep_left = jt == "left_mark"
            keep, other = (ldf, rdf) if keep_left else (rdf, ldf)
            keep_cols = left.columns if keep_left else right.columns
            keep_refs = [
                (left.columns[i] if keep_left else right.columns[i - nleft])
                for i in sorted(refs)
                if (i < nleft) == keep_left and i < nleft + len(right.columns)
            ]
            pairs = [(a, b, ns) if keep_left else (b, a, ns) for a, b, ns in equi]
            mark = self.fresh()
            df = self._mark(keep, keep_cols, other, cond, keep_refs, pairs, mark,
                            unknown_cond if unknown_cond is not None else cond, keys_only=keys_only)
            kt = lt if keep_left else rt
            out = Relation(df, list(keep_cols) + [mark], kt + [_BOOL] if kt is not None else None)
        else:  # pragma: no cover - _join_type only returns the names above
            raise UnsupportedError(f"join type '{jt}' is not supported", f"{bpath}.type")
        if "post_join_filter" in body.DESCRIPTOR.fields_by_name and body.HasField("post_join_filter"):
            scope = self.scope(out, outer)
            out = replace(out, df=out.df.filter(self.expr(body.post_join_filter, scope, f"{bpath}.post_join_filter")))
        return out

    @staticmethod
    def _semi_as_in(keep, other, pairs: list[tuple[str, str]], equi, allowed: bool, jt: str):
        """A semi join on key equalities alone, as SQL text ``(keys) IN (SELECT keys FROM other)``, or None.

        Equivalent in a filter: a row whose keys match no row of ``other`` (a NULL key matches nothing)
        gets FALSE or NULL from IN and is dropped, as the semi join drops it. Why: Spark infers an
        IN-subquery filter across equi-joins and pushes it below aggregates (its plan for TPC-H Q20
        aggregates only the lineitem rows of the parts the query keeps); a semi join it leaves alone.
        Not for anti joins (NOT IN differs on NULLs), null-safe keys, hints or broadcast sides, and only
        when ``other`` is a filtered table (see below).
        """
        if (
            not allowed
            or not jt.endswith("_semi")
            or not pairs
            or any(null_safe for _, _, null_safe in equi)
        ):
            return None
        haystack = other.select(*[_c(b) for _, b in pairs])
        if not _is_filtered_scan(haystack):
            # Spark copies an inferred IN filter to every input it reaches, and computes its subquery
            # there again: worth it for a filtered table, not for a join or an aggregate (TPC-H Q2's
            # semi join with its min() subquery ran 1.7x slower that way).
            return None
        needles = F.struct(*[_c(a) for a, _ in pairs]) if len(pairs) > 1 else _c(pairs[0][0])
        return keep.filter(needles.isin(haystack))

    def _null_safe_join_back(self, df: Frame, keys: list[str], other: Frame, other_keys: list[str]) -> Frame:
        cond = _and([_c(a).eqNullSafe(_c(b)) for a, b in zip(keys, other_keys, strict=True)])
        return df.join(other, cond, "left")

    def _single(
        self,
        ldf: Frame,
        rdf: Frame,
        keep_left: bool,
        cond: Col | None,
        keep_refs: list[str],
        columns: list[str],
        bpath: str,
    ) -> Frame:
        """Left (right) outer join that fails when a preserved row matches more than one other row."""
        keep, other = (ldf, rdf) if keep_left else (rdf, ldf)
        c = cond if cond is not None else F.lit(True)
        joined = ldf.join(rdf, c, "left" if keep_left else "right")
        n = self.fresh()
        if keep_refs:
            k = keep.select(*[_c(x) for x in keep_refs]).distinct()
            counts = k.join(other, c, "inner").groupBy(*[_c(x) for x in keep_refs]).agg(F.count(F.lit(1)).alias(n))
            renamed = [self.fresh() for _ in keep_refs]
            counts = counts.filter(_c(n) > 1).select(
                *[_c(a).alias(b) for a, b in zip(keep_refs, renamed, strict=True)], _c(n)
            )
            checked = self._null_safe_join_back(joined, keep_refs, counts, renamed)
        else:
            counts = other.agg(F.count(F.when(c, F.lit(1))).alias(n))
            checked = joined.crossJoin(counts)
        kept, other_side = ("left", "right") if keep_left else ("right", "left")
        message = f"{bpath}: {_SINGLE_MARKER} a row of the {kept} input ({kept} single join: the {other_side} input must match each row at most once)"
        check = F.when(_c(n) > 1, F.raise_error(F.lit(message))).otherwise(F.lit(True))
        return checked.filter(check).select(*[_c(x) for x in columns])

    def _mark(
        self,
        keep: Frame,
        keep_cols: list[str],
        other: Frame,
        cond: Col | None,
        keep_refs: list[str],
        equi: list[tuple[str, str, bool]],
        mark: str,
        unknown_cond: Col | None = None,
        keys_only: bool = False,
    ) -> Frame:
        """The preserved side plus the mark column (TRUE / NULL / FALSE, SQL three-valued).
        ``keys_only``: the condition is exactly the comparisons of ``equi``."""
        if keys_only and len(equi) == 1 and keep_refs == [equi[0][0]]:
            return self._key_mark(keep, keep_cols, other, equi[0], mark)
        c = cond if cond is not None else F.lit(True)
        unknown = unknown_cond.isNull() if unknown_cond is not None else c.isNull()
        if not keep_refs:
            t, u = self.fresh(), self.fresh()
            stats = other.agg(F.max(F.when(c, F.lit(1))).alias(t), F.max(F.when(unknown, F.lit(1))).alias(u))
            df = keep.crossJoin(stats)
            value = F.when(_c(t) == 1, F.lit(True)).when(_c(u) == 1, F.lit(None)).otherwise(F.lit(False))
            return df.select(*[_c(x) for x in keep_cols], value.cast("boolean").alias(mark))
        k = keep.select(*[_c(x) for x in keep_refs]).distinct()
        true_k = k.join(other, c, "left_semi")
        parts = []
        key_refs = [(a, b, ns) for a, b, ns in equi if a in keep_refs]
        if key_refs:
            keyeq = _and([_c(a).eqNullSafe(_c(b)) if ns else _c(a) == _c(b) for a, b, ns in key_refs])
            parts.append(k.join(other, keyeq & unknown, "left_semi"))
            plain = [(a, b) for a, b, ns in key_refs if not ns]
            if plain:
                parts.append(k.filter(_or([_c(a).isNull() for a, _ in plain])).join(other, unknown, "left_semi"))
                parts.append(k.join(other.filter(_or([_c(b).isNull() for _, b in plain])), unknown, "left_semi"))
        else:
            parts.append(k.join(other, unknown, "left_semi"))
        unknown_k = parts[0]
        for p in parts[1:]:
            unknown_k = unknown_k.union(p)
        tflag, uflag = self.fresh(), self.fresh()
        t_names = [self.fresh() for _ in keep_refs]
        u_names = [self.fresh() for _ in keep_refs]
        t_df = true_k.select(*[_c(a).alias(b) for a, b in zip(keep_refs, t_names, strict=True)], F.lit(True).alias(tflag))
        u_df = unknown_k.distinct().select(
            *[_c(a).alias(b) for a, b in zip(keep_refs, u_names, strict=True)], F.lit(True).alias(uflag)
        )
        df = self._null_safe_join_back(keep, keep_refs, t_df, t_names)
        df = self._null_safe_join_back(df, keep_refs, u_df, u_names)
        value = F.when(_c(tflag), F.lit(True)).when(_c(uflag), F.lit(None)).otherwise(F.lit(False))
        return df.select(*[_c(x) for x in keep_cols], value.cast("boolean").alias(mark))

    def _key_mark(self, keep: Frame, keep_cols: list[str], other: Frame, key: tuple[str, str, bool],
                  mark: str) -> Frame:
        """The mark of a join on one key ``a = b`` (``a`` of the preserved side): TRUE where some ``b``
        equals ``a``; else NULL where the comparison is NULL for some row of the other side (``a`` is
        NULL and that side has a row, or it has a NULL ``b``); else FALSE. With ``a <=> b`` it is never
        NULL.

        Written as a correlated ``EXISTS`` beside the two uncorrelated ones that tell NULL from FALSE,
        so that Spark plans an existence join (a broadcast hash join that keeps every row) and runs
        each uncorrelated ``EXISTS`` once, as a one-row subquery. Where the mark is a filter's
        condition (``WHERE mark OR ...``), NULL and FALSE both drop the row: Spark folds
        ``found OR CASE WHEN unknown THEN NULL ELSE FALSE END`` to ``found`` and the other two are
        not run (TPC-DS Q10, Q35)."""
        a, b, null_safe = key
        if null_safe:
            value = other.where(_c(b).eqNullSafe(_c(a).outer())).exists()
        else:
            found = other.where(_c(b) == _c(a).outer()).exists()
            unknown = (_c(a).isNull() & other.exists()) | other.where(_c(b).isNull()).exists()
            # EXISTS is never NULL: ``found OR (NULL if unknown else FALSE)`` is the mark.
            value = found | F.when(unknown, F.lit(None).cast(T.BooleanType())).otherwise(F.lit(False))
        return keep.select(*[_c(x) for x in keep_cols], value.cast("boolean").alias(mark))

    # --------------------------------------------------------------------------------------- set

    def _rel_set(self, body, bpath: str, outer: Scope | None) -> Relation:
        if len(body.inputs) < 2:
            raise PlanError(f"a set relation needs at least two inputs, not {len(body.inputs)}", f"{bpath}.inputs")
        inputs = [self.rel(x, f"{bpath}.inputs[{i}]", outer) for i, x in enumerate(body.inputs)]
        n = len(inputs[0].columns)
        for i, r in enumerate(inputs[1:], start=1):
            if len(r.columns) != n:
                raise PlanError(f"set input {i} has {len(r.columns)} columns, input 0 has {n}", f"{bpath}.inputs[{i}]")
        p = inputs[0]
        secondaries = [r.df for r in inputs[1:]]
        op = body.op

        def union_all(frames: list[Frame]) -> Frame:
            out = frames[0]
            for f in frames[1:]:
                out = out.union(f)
            return out

        if op == SetRel.SET_OP_UNION_ALL:
            df = union_all([p.df, *secondaries])
        elif op == SetRel.SET_OP_UNION_DISTINCT:
            df = union_all([p.df, *secondaries]).distinct()
        elif op == SetRel.SET_OP_MINUS_PRIMARY:  # EXCEPT DISTINCT: distinct p rows in no secondary
            df = p.df.subtract(union_all(secondaries))
        elif op == SetRel.SET_OP_MINUS_PRIMARY_ALL:  # EXCEPT ALL: max(0, m - sum(n_i)) copies
            df = p.df.exceptAll(union_all(secondaries))
        elif op == SetRel.SET_OP_MINUS_MULTISET:  # every p row (duplicates kept) not in all secondaries
            common = secondaries[0]
            for s in secondaries[1:]:
                common = common.intersect(s)
            names = [self.fresh() for _ in p.columns]
            common = common.select(*[_c(a).alias(b) for a, b in zip(inputs[1].columns, names, strict=True)])
            cond = _and([_c(a).eqNullSafe(_c(b)) for a, b in zip(p.columns, names, strict=True)])
            df = p.df.join(common, cond, "left_anti") if n else p.df.limit(0)
        elif op == SetRel.SET_OP_INTERSECTION_PRIMARY:  # distinct p rows present in any secondary
            df = p.df.intersect(union_all(secondaries))
        elif op == SetRel.SET_OP_INTERSECTION_MULTISET:  # INTERSECT DISTINCT: in every secondary
            df = p.df
            for s in secondaries:
                df = df.intersect(s)
        elif op == SetRel.SET_OP_INTERSECTION_MULTISET_ALL:  # INTERSECT ALL: min(m, n_1, ...) copies
            df = p.df
            for s in secondaries:
                df = df.intersectAll(s)
        elif op == SetRel.SET_OP_UNSPECIFIED:
            raise PlanError("set operation is unspecified", f"{bpath}.op")
        else:
            raise UnsupportedError(f"set operation {op} is not supported", f"{bpath}.op")
        # Spark's set operations are positional and keep the primary input's names.
        return Relation(df, list(p.columns), None)

    # --------------------------------------------------------------------------------- reference

    def _rel_reference(self, body, bpath: str, outer: Scope | None) -> Relation:
        ordinal = body.subtree_ordinal
        if not 0 <= ordinal < len(self.plan.relations):
            raise PlanError(
                f"subtree ordinal {ordinal} is out of range (the plan has {len(self.plan.relations)} relations)",
                f"{bpath}.subtree_ordinal",
            )
        if ordinal in self.references:
            return replace(self.references[ordinal])
        if ordinal in self._in_progress:
            raise PlanError(f"reference cycle through relations[{ordinal}]", f"{bpath}.subtree_ordinal")
        entry = self.plan.relations[ordinal]
        which = entry.WhichOneof("rel_type")
        if which == "root":
            rel, path = entry.root.input, f"relations[{ordinal}].root.input"
        elif which == "rel":
            rel, path = entry.rel, f"relations[{ordinal}].rel"
        else:
            raise PlanError("plan relation is neither a root nor a rel", f"relations[{ordinal}]")
        self._in_progress.add(ordinal)
        try:
            out = self.rel(rel, path, None)
        finally:
            self._in_progress.discard(ordinal)
        self.references[ordinal] = out
        return replace(out)

    # ------------------------------------------------------------------------------ expand, window

    def _rel_expand(self, body, bpath: str, outer: Scope | None) -> Relation:
        inp = self.rel(body.input, f"{bpath}.input", outer)
        scope = self.scope(inp, outer)
        n_dups = max(
            [len(f.switching_field.duplicates) for f in body.fields if f.WhichOneof("field_type") == "switching_field"],
            default=1,
        )
        names = [self.fresh() for _ in body.fields]
        compiled: list[list[Col | None]] = []
        for i, f in enumerate(body.fields):
            fpath = f"{bpath}.fields[{i}]"
            which = f.WhichOneof("field_type")
            if which == "consistent_field":
                c = self.expr(f.consistent_field, scope, f"{fpath}.consistent_field")
                compiled.append([c] * n_dups)
            elif which == "switching_field":
                dups = [
                    self.expr(d, scope, f"{fpath}.switching_field.duplicates[{j}]")
                    for j, d in enumerate(f.switching_field.duplicates)
                ]
                compiled.append(dups + [None] * (n_dups - len(dups)))
            else:
                raise PlanError("expand field is neither a switching nor a consistent field", fpath)
        frames = []
        for d in range(n_dups):
            cols = [(row[d] if row[d] is not None else F.lit(None)).alias(names[i]) for i, row in enumerate(compiled)]
            frames.append(inp.df.select(*cols))
        df = frames[0]
        for f in frames[1:]:
            df = df.union(f)
        return Relation(df, names)

    def _rel_window(self, body, bpath: str, outer: Scope | None) -> Relation:
        inp = self.rel(body.input, f"{bpath}.input", outer)
        scope = self.scope(inp, outer)
        new, names = [], []
        for i, wf in enumerate(body.window_functions):
            col = self.exprs.window(wf, body.partition_expressions, body.sorts, scope, f"{bpath}.window_functions[{i}]")
            name = self.fresh()
            new.append(col.alias(name))
            names.append(name)
        df = inp.df.select(*[_c(c) for c in inp.columns], *new)
        return Relation(df, inp.columns + names)

    # ---------------------------------------------------------------------------------- exchange

    def _rel_exchange(self, body, bpath: str, outer: Scope | None) -> Relation:
        inp = self.rel(body.input, f"{bpath}.input", outer)
        kind = body.WhichOneof("exchange_kind")
        n = body.partition_count if body.partition_count > 0 else None
        if kind == "broadcast":
            return replace(inp, broadcast=True)
        if inp.ordered or kind == "multi_target":
            # Repartitioning would lose the input's order (Substrait keeps it); multi-bucket routing
            # has no Spark equivalent. The result is the same without the exchange.
            return replace(inp, broadcast=False)
        if n is None:
            n = int(self.spark.conf.get("spark.sql.shuffle.partitions", "8"))
        if kind == "scatter_by_fields":
            cols = []
            for i, ref in enumerate(body.scatter_by_fields.fields):
                idx = self._ref_index(ref, f"{bpath}.scatter_by_fields.fields[{i}]")
                if not 0 <= idx < len(inp.columns):
                    raise PlanError(f"field {idx} is out of range", f"{bpath}.scatter_by_fields.fields[{i}]")
                cols.append(_c(inp.columns[idx]))
            df = inp.df.repartition(n, *cols) if cols else inp.df.repartition(n)
        elif kind == "round_robin":
            df = inp.df.repartition(n)
        elif kind == "single_target":
            scope = self.scope(inp, outer)
            bucket = self.expr(body.single_target.expression, scope, f"{bpath}.single_target.expression")
            b = self.fresh()  # Spark's REPARTITION hint takes column names
            with_bucket = inp.df.select(*[_c(c) for c in inp.columns], bucket.alias(b))
            df = with_bucket.repartition(n, _c(b)).select(*[_c(c) for c in inp.columns])
        elif kind is None:
            raise PlanError("exchange kind is not set", bpath)
        else:
            raise UnsupportedError(f"exchange kind '{kind}' is not supported", f"{bpath}.{kind}")
        return replace(inp, df=df, broadcast=False)
