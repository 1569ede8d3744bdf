"""Substrait relations -> Spark DataFrames (the relation half of the Spark backend).

:class:`SparkBackend` compiles a ``substrait.proto.Plan`` into a lazy Spark ``DataFrame``
(:meth:`SparkBackend.to_dataframe`) or runs it into a ``pyarrow.Table`` (:meth:`SparkBackend.execute`).

The plan is compiled relation by relation into one Spark SQL query by :class:`_PlanCompiler`, which
assembles one compiler per kind of relation: :mod:`optimizer.spark.rel_compiler` (what they share, the
dispatch, ``reference``), :mod:`~optimizer.spark.read`, :mod:`~optimizer.spark.single_input`,
:mod:`~optimizer.spark.aggregate`, :mod:`~optimizer.spark.joins`, :mod:`~optimizer.spark.physical`
and :mod:`~optimizer.spark.set_ops`. :mod:`optimizer.spark.root_names` names the query's columns and
:mod:`optimizer.spark.failures` turns Spark's failures into one-line errors.

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
"""

from __future__ import annotations

import pyarrow as pa
from pyspark.errors import PySparkException
from pyspark.sql import DataFrame

from optimizer.errors import ExecutionError, PlanError, spark_errors
from optimizer.load.pipeline import check_expanded_size, load
from optimizer.load.protobuf_depth import deep_messages
from optimizer.schema.check import raise_for_problems
from optimizer.spark.aggregate import _AggregateCompiler
from optimizer.spark.failures import _execution_error, _first_line
from optimizer.spark.physical import _PhysicalCompiler
from optimizer.spark.read import _ReadCompiler
from optimizer.spark.rel_compiler import _c
from optimizer.spark.root_names import _apply_root_names, _check_root_names, _names_in_text
from optimizer.spark.session_settings import refuse_session_text, refuse_zoned_timestamps
from optimizer.spark.set_ops import _SetCompiler
from optimizer.spark.single_input import _SingleInputCompiler
from optimizer.spark.sql import render
from optimizer.spark.tables import TableResolver

__all__ = ["SparkBackend"]


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

    def session_zone(self) -> str:
        """The session's time zone (``spark.sql.session.timeZone``), asked at each plan: a user may change it
        between plans. Without a session, the tool's default, UTC."""
        if self.spark is None:
            return "UTC"
        return str(self.spark.conf.get("spark.sql.session.timeZone"))

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
        loaded = load(plan)
        plan = loaded.plan
        check_expanded_size(plan)  # Spark works on the tree with every reference expanded
        # A plan Spark would answer by its own implicit casts or guesses (a number compared with a string,
        # a field past its input) is refused here, as `run` refuses it, not answered.
        raise_for_problems(plan, loaded.functions)
        refuse_zoned_timestamps(plan, self.session_zone())
        roots = [i for i, r in enumerate(plan.relations) if r.WhichOneof("rel_type") == "root"]
        if not roots:
            raise PlanError("plan has no root relation", "relations")
        if not 0 <= root < len(roots):
            raise PlanError(f"root {root} requested but the plan has {len(roots)} root relation(s)", "relations")
        index = roots[root]
        compiler = _PlanCompiler(self, loaded)
        rel_root = plan.relations[index].root
        compiler.root = rel_root.input
        out = compiler.rel(rel_root.input, f"relations[{index}].root.input", None)
        names = list(rel_root.names)
        _check_root_names(names, out, f"relations[{index}].root.names")
        width = len(out.columns)
        if _names_in_text(names, width):
            frame = out.df.select(*[_c(c).alias(n) for c, n in zip(out.columns, names, strict=True)])
            text, tables = render(frame)
            names = []
        else:
            frame = out.df.select(*[_c(c).alias(f"_r{i}") for i, c in enumerate(out.columns)])
            text, tables = render(frame)
        if self.spark is not None:  # settings of the user's session that would read the text otherwise
            refuse_session_text(text, self.spark.conf)
        return text, tables, names, width

    def to_dataframe(self, plan, root: int = 0) -> DataFrame:
        """The lazy DataFrame of the ``root``-th ``RelRoot`` of ``plan`` (``plan.relations`` entries that
        are plain ``rel``s, i.e. shared subtrees, are not counted), columns named by ``RelRoot.names``.

        ``plan``: a loaded plan (:class:`~optimizer.load.pipeline.LoadedPlan`, whose function table and
        schemas the compilation reads) or anything :func:`optimizer.load.pipeline.load` reads: a
        ``substrait.proto.Plan`` (conformed like a file, on a copy, unless this tool loaded it), a path...
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


class _PlanCompiler(_ReadCompiler, _SingleInputCompiler, _AggregateCompiler, _PhysicalCompiler, _SetCompiler):
    """Compiles the relations of one plan: each kind by its own compiler, dispatched by
    :meth:`~optimizer.spark.rel_compiler._RelCompiler.rel`."""
