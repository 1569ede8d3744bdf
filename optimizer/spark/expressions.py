"""Substrait expressions -> PySpark ``Col`` objects (the expression half of the Spark backend).

Interface used by the relation half (``optimizer/spark/rel_compiler.py`` and its subclasses)
-------------------------------------------------------------------------------------------

* :class:`Scope` -- the input of an expression: the input Frame, its column names (unique Spark names,
  positionally equal to the Substrait input schema), their Substrait types when known, and the enclosing
  query's scope for outer references.
* :class:`ExpressionCompiler` ``(functions, subquery)``:

  - ``compile(expr, scope, path) -> Col``
  - ``aggregate(fn, scope, path) -> Col`` -- an ``AggregateFunction`` (invocation DISTINCT included;
    measure filters are applied by the caller). ``fn.sorts`` are honoured by the order-sensitive aggregates
    (``string_agg``) and ignored by the others.
  - ``window(wf, partitions, sorts, scope, path) -> Col`` -- ``wf`` an ``Expression.WindowFunction``
    (which ``compile`` also handles itself) or a ``ConsistentPartitionWindowRel`` function, with the
    partitions and sorts that apply to it. Its ``output_type`` may be unset (DataFusion leaves it
    unset); unset bounds (``WhichOneof("kind") is None``) mean unbounded.
  - ``sort_order(sort, scope, path) -> Col`` -- a ``SortField`` as a Spark sort order.
  - ``type_of(expr, scope) -> Type | None`` -- the Substrait type of an expression when it can be derived
    cheaply (used by the functions, public because the relation half may find it handy).

* The ``subquery(rel, scope, path)`` callback returns ``(Frame, columns)``; it may return
  ``(Frame, columns, types)`` (the Substrait output types) instead: ``IN`` subqueries whose needles
  and haystack cannot be null then compile to Spark's plain (fast) IN-subquery; otherwise (SQL
  three-valued logic, which Spark's IN-subquery gets wrong in projections) to two EXISTS. Correlated
  subquery DataFrames cannot be analysed on their own in Spark Classic: build them with ``select``/
  ``where`` (``groupBy``/``agg``/``df[name]`` analyse eagerly and fail on outer references).
* :func:`substrait_type_to_spark` ``(type, names=None) -> DataType`` and :func:`named_struct_to_spark`
  ``(NamedStruct) -> StructType`` -- the one Substrait -> Spark type mapping (VirtualTable, schema casts).
  Struct fields without names are called ``f0``, ``f1``, ...
* :func:`literal_value` ``(expr) -> object`` -- the Python value of a literal expression (``NOT_LITERAL`` if
  the expression is not a literal); :func:`quote` -- a Spark column name quoted for ``F.col``.

Columns are referenced by name (``F.col``), never by ``df[...]``: the caller may build the final
Frame from the scope's Frame in any way as long as the names stay. Outer references compile to
``F.col(name).outer()`` (Spark 4); Spark supports one level of correlation only, so ``steps_out > 1`` is
an :class:`~optimizer.errors.UnsupportedError`.

Semantic choices (integer overflow, division, casts, null ordering, ...) are written down in
``docs/semantics.md``.
"""

from __future__ import annotations

import datetime as _dt
import decimal
import functools
import uuid as _uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from pyspark.errors import PySparkException
from pyspark.sql import types as T
from substrait.proto import (
    AggregateFunction,
    AggregationPhase,
    ConsistentPartitionWindowRel,
    Expression,
    Rel,
    SortField,
    Type,
)

from optimizer.errors import PlanError, UnsupportedError
from optimizer.load.functions import FunctionTable
from optimizer.schema.record import Schema
from optimizer.schema.types import is_nullable, make_type, with_nullability
from optimizer.spark import functions as fns
from optimizer.spark.functions import Call
from optimizer.spark.sql import Frame
from optimizer.spark.sql_columns import Col, Window
from optimizer.spark.sql_columns import functions as F
from optimizer.spark.types import (
    EPOCH,
    EXACT_DECIMAL,
    NOT_LITERAL,
    SIMPLE_SPARK_TYPES,
    decimal_value,
    interval_day_micros,
    literal_type,
    literal_value,
    named_struct_to_spark,
    or_fail,
    raise_at,
    spark_type_to_kind,
    substrait_type_to_spark,
    to_micros,
    type_kind,
)

__all__ = [
    "NOT_LITERAL",
    "ExpressionCompiler",
    "Scope",
    "literal_type",
    "literal_value",
    "named_struct_to_spark",
    "quote",
    "spark_type_to_kind",
    "substrait_type_to_spark",
    "type_kind",
]

#: The method of :class:`ExpressionCompiler` that compiles each ``rex_type`` ``(body, scope, path)``.
_COMPILERS = {
    "selection": "_selection",
    "scalar_function": "_scalar_function",
    "if_then": "_if_then",
    "switch_expression": "_switch",
    "multi_or_list": "_multi_or_list",
    "cast": "_cast",
    "subquery": "_subquery",
    "nested": "_nested",
}

SubqueryCallback = Callable[[Rel, "Scope", str], tuple[Frame, list[str]]]


@dataclass
class Scope:
    """The input of an expression."""

    df: Frame  # the input Frame
    columns: list[str]  # unique Spark column names, positionally = the Substrait input schema
    types: list[Type] | None = None  # Substrait types of those columns, if known
    outer: Scope | None = None  # enclosing query's scope, for outer references (steps_out)


def quote(name: str) -> str:
    """A column name as ``F.col`` wants it: back-quoted, so dots and spaces are not parsed."""
    return "`" + name.replace("`", "``") + "`"


def _col(name: str) -> Col:
    return F.col(quote(name))


# --------------------------------------------------------------------------------------------- compiler


class ExpressionCompiler:
    """Compiles Substrait expressions over a :class:`Scope` to Spark columns."""

    def __init__(self, functions: FunctionTable, subquery: SubqueryCallback,
                 schemas: Mapping[str, Schema] | None = None, *, ansi: bool = False) -> None:
        self.functions = functions
        self.subquery = subquery
        self.schemas = schemas or {}  # the plan's relation schemas by path (optimizer.schema.plan_schemas)
        # The session's spark.sql.ansi.enabled: arithmetic, casts and sums raise on overflow instead of
        # returning null or wrapping (see docs/semantics.md).
        self.ansi = ansi

    # ---------------------------------------------------------------------------------- entry points

    def compile(self, expr: Expression, scope: Scope, path: str) -> Col:
        kind = expr.WhichOneof("rex_type")
        if kind == "literal":
            return self._literal(expr.literal, f"{path}.literal")
        if kind == "window_function":
            wf = expr.window_function
            return self.window(wf, wf.partitions, wf.sorts, scope, f"{path}.window_function")
        if kind in _COMPILERS:
            return getattr(self, _COMPILERS[kind])(getattr(expr, kind), scope, f"{path}.{kind}")
        if kind == "singular_or_list":
            sol = expr.singular_or_list
            p = f"{path}.singular_or_list"
            value = self.compile(sol.value, scope, f"{p}.value")
            options = [self.compile(o, scope, f"{p}.options[{i}]") for i, o in enumerate(sol.options)]
            if not options:
                return F.lit(False)
            return value.isin(*options)
        if kind == "execution_context_variable":
            v = expr.execution_context_variable.WhichOneof("execution_context_variable_type")
            if v == "current_date":
                return F.current_date()
            if v == "current_timestamp":
                return F.current_timestamp()
            if v == "current_timezone":
                return F.current_timezone()
            raise PlanError("execution context variable is not set", f"{path}.execution_context_variable")
        if kind is None:
            raise PlanError("expression is empty (no rex_type set)", path)
        raise UnsupportedError(f"expression kind '{kind}' is not supported by the Spark backend", path)

    def sort_order(self, sort: SortField, scope: Scope, path: str) -> Col:
        """A ``SortField`` as a Spark sort order (direction and null placement)."""
        col = self.compile(sort.expr, scope, f"{path}.expr")
        which = sort.WhichOneof("sort_kind")
        if which == "comparison_function_reference":
            info = self.functions.get(
                sort.comparison_function_reference, f"{path}.comparison_function_reference"
            )
            raise UnsupportedError(
                f"sorting by a comparison function ('{info.declared_name}') is not supported", path
            )
        d = sort.direction
        if d == SortField.SORT_DIRECTION_ASC_NULLS_FIRST:
            return col.asc_nulls_first()
        if d == SortField.SORT_DIRECTION_ASC_NULLS_LAST:
            return col.asc_nulls_last()
        if d == SortField.SORT_DIRECTION_DESC_NULLS_FIRST:
            return col.desc_nulls_first()
        if d == SortField.SORT_DIRECTION_DESC_NULLS_LAST:
            return col.desc_nulls_last()
        if d == SortField.SORT_DIRECTION_CLUSTERED:
            # Only "equal values together" is asked for; any total order gives that.
            return col.asc_nulls_first()
        raise PlanError("sort direction is unspecified", f"{path}.direction")

    def aggregate(self, fn: AggregateFunction, scope: Scope, path: str) -> Col:
        """An aggregate function call (invocation DISTINCT included; the caller applies measure filters)."""
        _check_phase(fn.phase, path)
        call = self._make_call(
            fn,
            scope,
            path,
            distinct=fn.invocation == AggregateFunction.AGGREGATION_INVOCATION_DISTINCT,
            sorts=list(fn.sorts),
        )
        return fns.aggregate(call)

    def window(
        self,
        wf: Expression.WindowFunction | ConsistentPartitionWindowRel.WindowRelFunction,
        partitions: Sequence[Expression],
        sorts: Sequence[SortField],
        scope: Scope,
        path: str,
    ) -> Col:
        """A window function call (``Expression.WindowFunction`` or a ``ConsistentPartitionWindowRel`` function)."""
        _check_phase(wf.phase, path)
        distinct = wf.invocation == AggregateFunction.AGGREGATION_INVOCATION_DISTINCT
        call = self._make_call(wf, scope, path, distinct=distinct)
        parts = [self.compile(p, scope, f"{path}.partitions[{i}]") for i, p in enumerate(partitions)]
        orders = [self.sort_order(s, scope, f"{path}.sorts[{i}]") for i, s in enumerate(sorts)]
        base = Window.partitionBy(*parts) if parts else Window.partitionBy()
        if orders:
            base = base.orderBy(*orders)

        def framed():
            return self._frame(base, wf.lower_bound, wf.upper_bound, wf.bounds_type, list(sorts), scope, path)

        # Ranking functions need an order; without sorts every row is a peer of every other.
        ranking = base if orders else base.orderBy(F.lit(0))
        return fns.window(call, ranking, framed)

    def type_of(self, expr: Expression, scope: Scope | None, path: str | None = None) -> Type | None:
        """The Substrait type of ``expr`` (found at ``path``, when given) if it can be derived without
        Spark, else None."""
        kind = expr.WhichOneof("rex_type")
        if kind == "subquery" and expr.subquery.WhichOneof("subquery_type") == "scalar":
            schema = self.schemas.get(f"{path}.subquery.scalar.input") if path is not None else None
            if schema is None or len(schema.types) != 1 or type_kind(schema.types[0]) is None:
                return None
            return with_nullability(schema.types[0], True)  # no row: null
        if kind == "literal":
            return literal_type(expr.literal)
        if kind == "scalar_function":
            sf = expr.scalar_function
            return (
                sf.output_type if sf.HasField("output_type") and sf.output_type.WhichOneof("kind") else None
            )
        if kind == "window_function":
            wf = expr.window_function
            return (
                wf.output_type if wf.HasField("output_type") and wf.output_type.WhichOneof("kind") else None
            )
        if kind == "cast":
            return expr.cast.type
        if kind == "selection":
            return self._selection_type(expr.selection, scope)
        if kind == "if_then":
            for clause in expr.if_then.ifs:
                t = self.type_of(clause.then, scope)
                if t is not None:
                    return t
            return (
                self.type_of(getattr(expr.if_then, "else"), scope) if expr.if_then.HasField("else") else None
            )
        if kind == "switch_expression":
            for clause in expr.switch_expression.ifs:
                t = self.type_of(clause.then, scope)
                if t is not None:
                    return t
            return None
        if kind in ("singular_or_list", "multi_or_list"):
            return Type(bool=Type.Boolean(nullability=Type.NULLABILITY_NULLABLE))
        if kind == "subquery" and expr.subquery.WhichOneof("subquery_type") != "scalar":
            return Type(bool=Type.Boolean(nullability=Type.NULLABILITY_NULLABLE))
        if kind == "nested":
            nested = expr.nested
            nk = nested.WhichOneof("nested_type")
            n = Type.NULLABILITY_NULLABLE
            if nk == "struct":
                types = [self.type_of(f, scope) for f in nested.struct.fields]
                if any(t is None for t in types):
                    return None
                return Type(struct=Type.Struct(types=types, nullability=n))
            if nk == "list" and nested.list.values:
                et = self.type_of(nested.list.values[0], scope)
                return Type(list=Type.List(type=et, nullability=n)) if et is not None else None
            if nk == "map" and nested.map.key_values:
                kt = self.type_of(nested.map.key_values[0].key, scope)
                vt = self.type_of(nested.map.key_values[0].value, scope)
                if kt is None or vt is None:
                    return None
                return Type(map=Type.Map(key=kt, value=vt, nullability=n))
        return None

    def spark_type_of(self, col: Col, scope: Scope) -> T.DataType | None:
        """The Spark type of a compiled column over ``scope`` (by analysis; None if that fails)."""
        try:
            return scope.df.select(col.alias("v")).schema.fields[0].dataType
        except PySparkException:  # outer references and the like cannot be analysed alone
            return None

    # ------------------------------------------------------------------------------------- literals

    def _literal(self, lit: Expression.Literal, path: str) -> Col:
        lk = lit.WhichOneof("literal_type")
        if lk == "boolean":
            return F.lit(lit.boolean)
        if lk in ("i8", "i16", "i32", "i64"):
            return F.lit(getattr(lit, lk)).cast(SIMPLE_SPARK_TYPES[lk]())
        if lk in ("fp32", "fp64"):
            return F.lit(float(getattr(lit, lk))).cast(SIMPLE_SPARK_TYPES[lk]())
        if lk == "string":
            return F.lit(lit.string)
        if lk == "fixed_char":
            return F.lit(lit.fixed_char)
        if lk == "var_char":
            return F.lit(lit.var_char.value)
        if lk in ("binary", "fixed_binary"):
            return F.lit(bytearray(getattr(lit, lk))).cast(T.BinaryType())
        if lk == "date":
            return F.date_from_unix_date(F.lit(lit.date).cast(T.IntegerType()))
        if lk == "decimal":
            d = lit.decimal
            t = substrait_type_to_spark(
                Type(decimal=Type.Decimal(precision=d.precision, scale=d.scale)), path=path
            )
            value = decimal_value(d)
            if len(value.as_tuple().digits) > d.precision and value != 0:
                raise PlanError(
                    f"decimal literal {value} does not fit DECIMAL({d.precision},{d.scale})", path
                )
            return F.lit(value).cast(t)
        if lk == "precision_timestamp":
            micros = to_micros(lit.precision_timestamp.value, lit.precision_timestamp.precision, path)
            try:
                text = (EPOCH + _dt.timedelta(microseconds=micros)).isoformat(sep=" ")
            except OverflowError:
                raise UnsupportedError(
                    "timestamp literal out of the supported range (years 1-9999)", path
                ) from None
            return F.lit(text).cast(T.TimestampNTZType())
        if lk == "precision_timestamp_tz":
            micros = to_micros(lit.precision_timestamp_tz.value, lit.precision_timestamp_tz.precision, path)
            return F.timestamp_micros(F.lit(micros).cast(T.LongType()))
        if lk == "precision_time":
            raise UnsupportedError("time literals are not supported by the Spark backend", path)
        if lk == "interval_year_to_month":
            iv = lit.interval_year_to_month
            return F.make_ym_interval(F.lit(iv.years), F.lit(iv.months))
        if lk == "interval_day_to_second":
            micros = interval_day_micros(lit.interval_day_to_second, path)
            try:
                if abs(micros) > 2**63 - 1:  # Spark holds a day-time interval as a long of microseconds
                    raise OverflowError
                return F.lit(_dt.timedelta(microseconds=micros))
            except OverflowError:
                raise UnsupportedError("interval literal out of the range Spark holds (about 106 million days)",
                                       path) from None
        if lk == "interval_compound":
            ic = lit.interval_compound
            ym = ic.interval_year_to_month
            ds = ic.interval_day_to_second
            micros = to_micros(ds.subseconds, ds.precision, path) + ds.seconds * 1_000_000
            secs = decimal.Decimal(micros).scaleb(-6, EXACT_DECIMAL)
            return F.make_interval(
                F.lit(ym.years),
                F.lit(ym.months),
                F.lit(0),
                F.lit(ds.days),
                F.lit(0),
                F.lit(0),
                F.lit(secs).cast(T.DecimalType(18, 6)),
            )
        if lk == "uuid":
            return F.lit(str(_uuid.UUID(bytes=bytes(lit.uuid))))
        if lk == "null":
            if (
                lit.null.WhichOneof("kind") is None
            ):  # DuckDB writes untyped nulls (x IS NOT DISTINCT FROM NULL)
                return F.lit(None)
            return F.lit(None).cast(substrait_type_to_spark(lit.null, path=f"{path}.null"))
        if lk == "struct":
            fields = [
                self._literal(f, f"{path}.struct.fields[{i}]").alias(f"f{i}")
                for i, f in enumerate(lit.struct.fields)
            ]
            return F.struct(*fields)
        if lk == "list":
            return F.array(
                *[self._literal(v, f"{path}.list.values[{i}]") for i, v in enumerate(lit.list.values)]
            )
        if lk == "empty_list":
            return F.array().cast(substrait_type_to_spark(Type(list=lit.empty_list), path=path))
        if lk == "map":
            items = []
            for i, kv in enumerate(lit.map.key_values):
                items.append(self._literal(kv.key, f"{path}.map.key_values[{i}].key"))
                items.append(self._literal(kv.value, f"{path}.map.key_values[{i}].value"))
            return F.create_map(*items)
        if lk == "empty_map":
            return F.create_map().cast(substrait_type_to_spark(Type(map=lit.empty_map), path=path))
        if lk == "user_defined":
            raise UnsupportedError("user-defined literals are not supported by the Spark backend", path)
        if lk is None:
            raise PlanError("literal has no value", path)
        raise UnsupportedError(f"literal kind '{lk}' is not supported by the Spark backend", path)

    # ----------------------------------------------------------------------------- field references

    def _root(self, ref: Expression.FieldReference, scope: Scope, path: str) -> tuple[Scope | None, bool]:
        """(the scope the reference is rooted in, whether it is an outer reference)."""
        root = ref.WhichOneof("root_type")
        if root in (None, "root_reference"):
            return scope, False
        if root == "outer_reference":
            outer = ref.outer_reference
            if outer.WhichOneof("outer_reference_type") == "rel_reference":
                raise UnsupportedError(
                    "outer references by rel_reference are not supported", f"{path}.outer_reference"
                )
            steps = outer.steps_out
            if steps < 1:
                raise PlanError("outer reference steps_out must be >= 1", f"{path}.outer_reference")
            if steps > 1:
                raise UnsupportedError(
                    f"outer reference {steps} levels out: Spark supports correlation with the "
                    "immediately enclosing query only",
                    f"{path}.outer_reference",
                )
            target = scope
            for _ in range(steps):
                target = target.outer if target is not None else None
            if target is None:
                raise PlanError("outer reference outside of a subquery", f"{path}.outer_reference")
            return target, True
        if root == "expression":
            return None, False
        raise UnsupportedError(f"field reference root '{root}' is not supported", path)

    def _selection(self, ref: Expression.FieldReference, scope: Scope, path: str) -> Col:
        if ref.WhichOneof("reference_type") != "direct_reference":
            raise UnsupportedError("masked field references are not supported", path)
        target, is_outer = self._root(ref, scope, path)
        seg = ref.direct_reference
        seg_path = f"{path}.direct_reference"
        if target is None:  # rooted in an expression
            col = self.compile(ref.expression, scope, f"{path}.expression")
            sub_t = self.type_of(ref.expression, scope)
            spark_t: T.DataType | None = None
            spark_t_known = False
        else:
            if seg.WhichOneof("reference_type") != "struct_field":
                raise PlanError("a reference into the input record must start with a struct field", seg_path)
            idx = seg.struct_field.field
            if not 0 <= idx < len(target.columns):
                raise PlanError(
                    f"field {idx} is out of range: the input has {len(target.columns)} columns",
                    f"{seg_path}.struct_field",
                )
            name = target.columns[idx]
            col = _col(name).outer() if is_outer else _col(name)
            sub_t = target.types[idx] if target.types is not None and idx < len(target.types) else None
            spark_t, spark_t_known = None, False
            if seg.struct_field.HasField("child"):
                try:
                    spark_t = target.df.select(col.alias("v")).schema.fields[0].dataType
                    spark_t_known = True
                except PySparkException:  # a correlated relation cannot be analysed alone
                    spark_t = None
            seg_path = f"{seg_path}.struct_field"
            if not seg.struct_field.HasField("child"):
                return col
            seg = seg.struct_field.child
            seg_path = f"{seg_path}.child"
        if target is None and seg is not None:
            spark_t = self.spark_type_of(col, scope)
            spark_t_known = spark_t is not None
        while True:
            which = seg.WhichOneof("reference_type")
            if which == "struct_field":
                i = seg.struct_field.field
                if not spark_t_known or not isinstance(spark_t, T.StructType):
                    raise UnsupportedError("cannot resolve the struct field (unknown struct type)", seg_path)
                if not 0 <= i < len(spark_t.fields):
                    raise PlanError(f"struct field {i} is out of range", seg_path)
                col = col.getField(spark_t.fields[i].name)
                spark_t = spark_t.fields[i].dataType
                if sub_t is not None and sub_t.WhichOneof("kind") == "struct" and i < len(sub_t.struct.types):
                    sub_t = sub_t.struct.types[i]
                else:
                    sub_t = None
                child = seg.struct_field
            elif which == "list_element":
                offset = seg.list_element.offset
                col = F.try_element_at(col, F.lit(offset + 1)) if offset >= 0 else F.lit(None)
                spark_t = spark_t.elementType if isinstance(spark_t, T.ArrayType) else None
                spark_t_known = spark_t is not None
                child = seg.list_element
            elif which == "map_key":
                key = self._literal(seg.map_key.map_key, f"{seg_path}.map_key.map_key")
                col = F.try_element_at(col, key)
                spark_t = spark_t.valueType if isinstance(spark_t, T.MapType) else None
                spark_t_known = spark_t is not None
                child = seg.map_key
            else:
                raise PlanError("reference segment is empty", seg_path)
            if not child.HasField("child"):
                return col
            seg = child.child
            seg_path = f"{seg_path}.{which}.child"

    def _selection_type(self, ref: Expression.FieldReference, scope: Scope | None) -> Type | None:
        if ref.WhichOneof("reference_type") != "direct_reference" or scope is None:
            return None
        root = ref.WhichOneof("root_type")
        seg = ref.direct_reference
        if root == "expression":
            t = self.type_of(ref.expression, scope)
        else:
            target: Scope | None = scope
            if root == "outer_reference":
                for _ in range(max(ref.outer_reference.steps_out, 1)):
                    target = target.outer if target is not None else None
            elif root not in (None, "root_reference"):
                return None
            if target is None or target.types is None or seg.WhichOneof("reference_type") != "struct_field":
                return None
            idx = seg.struct_field.field
            if not 0 <= idx < len(target.types):
                return None
            t = target.types[idx]
            if not seg.struct_field.HasField("child"):
                return t
            seg = seg.struct_field.child
        while t is not None:
            which = seg.WhichOneof("reference_type")
            kind = t.WhichOneof("kind")
            if which == "struct_field" and kind == "struct":
                i = seg.struct_field.field
                t = t.struct.types[i] if 0 <= i < len(t.struct.types) else None
                child = seg.struct_field
            elif which == "list_element" and kind == "list":
                t = t.list.type
                child = seg.list_element
            elif which == "map_key" and kind == "map":
                t = t.map.value
                child = seg.map_key
            else:
                return None
            if not child.HasField("child"):
                return t
            seg = child.child
        return None

    # ------------------------------------------------------------------------------ other expressions

    def _if_then(self, it: Expression.IfThen, scope: Scope, path: str) -> Col:
        if not it.ifs:
            raise PlanError("if_then has no clauses", path)
        result = None
        for i, clause in enumerate(it.ifs):
            cond = self.compile(getattr(clause, "if"), scope, f"{path}.ifs[{i}].if")
            then = self.compile(clause.then, scope, f"{path}.ifs[{i}].then")
            result = F.when(cond, then) if result is None else result.when(cond, then)
        if it.HasField("else"):
            result = result.otherwise(self.compile(getattr(it, "else"), scope, f"{path}.else"))
        return result

    def _switch(self, sw: Expression.SwitchExpression, scope: Scope, path: str) -> Col:
        if not sw.ifs:
            raise PlanError("switch_expression has no clauses", path)
        match = self.compile(sw.match, scope, f"{path}.match")
        result = None
        for i, clause in enumerate(sw.ifs):
            value = self._literal(getattr(clause, "if"), f"{path}.ifs[{i}].if")
            then = self.compile(clause.then, scope, f"{path}.ifs[{i}].then")
            cond = match == value
            result = F.when(cond, then) if result is None else result.when(cond, then)
        if sw.HasField("else"):
            result = result.otherwise(self.compile(getattr(sw, "else"), scope, f"{path}.else"))
        return result

    def _multi_or_list(self, mol: Expression.MultiOrList, scope: Scope, path: str) -> Col:
        values = [self.compile(v, scope, f"{path}.value[{i}]") for i, v in enumerate(mol.value)]
        if not mol.options:
            return F.lit(False)
        result = None
        for j, record in enumerate(mol.options):
            if len(record.fields) != len(values):
                raise PlanError(
                    f"record has {len(record.fields)} fields but {len(values)} values are compared",
                    f"{path}.options[{j}]",
                )
            conj = None
            for i, (v, f) in enumerate(zip(values, record.fields, strict=True)):
                eq = v == self.compile(f, scope, f"{path}.options[{j}].fields[{i}]")
                conj = eq if conj is None else conj & eq
            result = conj if result is None else result | conj
        return result

    def _nested(self, nested: Expression.Nested, scope: Scope, path: str) -> Col:
        nk = nested.WhichOneof("nested_type")
        if nk == "struct":
            return F.struct(
                *[
                    self.compile(f, scope, f"{path}.struct.fields[{i}]").alias(f"f{i}")
                    for i, f in enumerate(nested.struct.fields)
                ]
            )
        if nk == "list":
            if not nested.list.values:
                raise PlanError("a nested list needs at least one value (use an empty_list literal)", path)
            return F.array(
                *[
                    self.compile(v, scope, f"{path}.list.values[{i}]")
                    for i, v in enumerate(nested.list.values)
                ]
            )
        if nk == "map":
            if not nested.map.key_values:
                raise PlanError("a nested map needs at least one entry (use an empty_map literal)", path)
            items = []
            for i, kv in enumerate(nested.map.key_values):
                items.append(self.compile(kv.key, scope, f"{path}.map.key_values[{i}].key"))
                items.append(self.compile(kv.value, scope, f"{path}.map.key_values[{i}].value"))
            return F.create_map(*items)
        raise PlanError("nested expression has no type", path)

    # ------------------------------------------------------------------------------------------ casts

    def _cast(self, cast: Expression.Cast, scope: Scope, path: str) -> Col:
        value = self.compile(cast.input, scope, f"{path}.input")
        target = cast.type
        tk = target.WhichOneof("kind")
        spark_t = substrait_type_to_spark(target, path=f"{path}.type")
        src = self.type_of(cast.input, scope)
        if src is None:
            src = value.stype
        src_kind = type_kind(src)
        if src_kind is None:
            src_kind = spark_type_to_kind(self.spark_type_of(value, scope))
        if tk == "fixed_char":
            # CHAR(n): pad with spaces or cut to n characters.
            as_str = value if src_kind in ("string", "varchar", "fixed_char") else value.cast(T.StringType())
            return F.rpad(as_str, target.fixed_char.length, " ")
        if tk == "varchar" and target.varchar.length > 0:
            as_str = (
                value
                if src_kind in ("string", "varchar", "fixed_char")
                else self._checked_cast(value, T.StringType(), src, cast.failure_behavior, path)
            )
            return F.substring(as_str, 1, target.varchar.length)
        return self._checked_cast(
            value, spark_t, src if src is not None else _kind_type(src_kind), cast.failure_behavior, path
        )

    def _checked_cast(
        self, value: Col, spark_t: T.DataType, src: Type | None, behavior: int, path: str
    ) -> Col:
        if behavior == Expression.Cast.FAILURE_BEHAVIOR_RETURN_NULL:
            return value.try_cast(spark_t)
        if not _cast_can_fail(src, spark_t) or self.ansi:
            # ANSI mode's CAST raises wherever TRY_CAST gives null; the checked form below costs Spark's
            # analysis and planning more (TPC-DS plans holding one: 1476 ms against 1295 ms over 19).
            return value.cast(spark_t)
        # THROW_EXCEPTION and UNSPECIFIED: fail rather than return a wrong value or a null.
        return or_fail(value.try_cast(spark_t), value.isNull(),
                       raise_at(f"cannot cast value to {spark_t.simpleString()}", path))

    # -------------------------------------------------------------------------------------- subqueries

    def _subquery_df(
        self, rel: Rel, scope: Scope, path: str, nullability: bool = True
    ) -> tuple[Frame, list[str], list[bool] | None]:
        """(Frame, columns, per-column "may be null" if known) of a subquery. ``nullability=False``:
        the caller does not need it (it may cost Spark an analysis of the subquery)."""
        result = self.subquery(rel, scope, path)
        df, columns = result[0], list(result[1])
        types = result[2] if len(result) > 2 else None
        nullable: list[bool] | None = None
        if types is not None and len(types) == len(columns):
            nullable = [t is None or is_nullable(t) for t in types]
        elif not nullability:
            nullable = None
        else:
            try:  # an uncorrelated query can be analysed on its own
                fields = {f.name: f.nullable for f in df.schema.fields}
                nullable = [fields.get(c, True) for c in columns]
            except PySparkException:
                nullable = None
        return df, columns, nullable

    def _may_be_null(self, expr: Expression, col: Col, scope: Scope) -> bool:
        t = self.type_of(expr, scope)
        if t is not None and t.WhichOneof("kind") is not None:
            return is_nullable(t)
        try:
            return scope.df.select(col.alias("v")).schema.fields[0].nullable
        except PySparkException:  # a correlated relation cannot be analysed alone
            return True

    def _in_subquery(
        self,
        needles: list[Col],
        needle_exprs: Sequence[Expression],
        df: Frame,
        cols: list[str],
        nullable: list[bool] | None,
        scope: Scope,
    ) -> Col:
        """``(needles) IN (subquery)`` with SQL's three-valued result.

        Spark's own IN-subquery is only right in filters when nulls are about (in a projection it says
        false where SQL says null), so unless nothing can be null it is computed from two EXISTS.
        """
        hay = [_col(c) for c in cols]
        no_nulls = nullable is not None and not any(nullable)
        no_nulls = no_nulls and not any(
            self._may_be_null(e, c, scope) for e, c in zip(needle_exprs, needles, strict=True)
        )
        if no_nulls:
            if len(needles) == 1:
                return needles[0].isin(df.select(*hay))
            return F.struct(*needles).isin(df.select(*hay))
        outer = [n.outer() for n in needles]
        equal = functools.reduce(lambda a, b: a & b, [h == o for h, o in zip(hay, outer, strict=True)])
        null_bool = F.lit(None).cast(T.BooleanType())
        if len(needles) == 1:
            # Unknown when the needle is null (and the set is not empty) or the set holds a null: both
            # without correlation, so Spark plans equi-joins only.
            found = df.where(equal).exists()
            unknown = (needles[0].isNull() & df.exists()) | df.where(hay[0].isNull()).exists()
            # EXISTS is never NULL; in a filter Spark folds the CASE to FALSE and drops both subqueries.
            return found | F.when(unknown, null_bool).otherwise(F.lit(False))
        differs = functools.reduce(
            lambda a, b: a | b,
            [h.isNotNull() & o.isNotNull() & (h != o) for h, o in zip(hay, outer, strict=True)],
        )
        unknown = functools.reduce(
            lambda a, b: a | b, [h.isNull() | o.isNull() for h, o in zip(hay, outer, strict=True)]
        )
        found = df.where(equal).exists()
        maybe = df.where(~differs & unknown).exists()
        return found | F.when(maybe, null_bool).otherwise(F.lit(False))

    def _subquery(self, sq: Expression.Subquery, scope: Scope, path: str) -> Col:
        kind = sq.WhichOneof("subquery_type")
        if kind == "scalar":
            result = self.subquery(sq.scalar.input, scope, f"{path}.scalar.input")
            df, cols = result[0], list(result[1])
            if len(cols) != 1:
                raise PlanError(
                    f"a scalar subquery must return one column, not {len(cols)}", f"{path}.scalar"
                )
            out = df.select(_col(cols[0])).scalar()
            if len(result) > 2 and result[2]:  # its Substrait type, for casts of it (no Spark analysis)
                out.stype = result[2][0]
            return out
        if kind == "in_predicate":
            ip = sq.in_predicate
            p = f"{path}.in_predicate"
            needles = [self.compile(n, scope, f"{p}.needles[{i}]") for i, n in enumerate(ip.needles)]
            df, cols, nullable = self._subquery_df(ip.haystack, scope, f"{p}.haystack")
            if len(cols) != len(needles) or not needles:
                raise PlanError(f"{len(needles)} needles but the subquery returns {len(cols)} columns", p)
            return self._in_subquery(needles, list(ip.needles), df, cols, nullable, scope)
        if kind == "set_predicate":
            sp = sq.set_predicate
            p = f"{path}.set_predicate"
            df, cols, _ = self._subquery_df(sp.tuples, scope, f"{p}.tuples", nullability=False)
            if sp.predicate_op == Expression.Subquery.SetPredicate.PREDICATE_OP_EXISTS:
                return df.exists()
            if sp.predicate_op == Expression.Subquery.SetPredicate.PREDICATE_OP_UNIQUE:
                # UNIQUE: no two rows without nulls are equal.
                rows = df.select(*[_col(c) for c in cols])
                for c in cols:
                    rows = rows.where(_col(c).isNotNull())
                # (a window, not groupBy: Spark cannot group a correlated Frame before it is attached)
                n = F.count(F.lit(1)).over(Window.partitionBy(*[_col(c) for c in cols]))
                dups = rows.select(n.alias("__n")).where(F.col("__n") > 1)
                return ~dups.exists()
            raise PlanError("set predicate operation is unspecified", f"{p}.predicate_op")
        if kind == "set_comparison":
            return self._set_comparison(sq.set_comparison, scope, f"{path}.set_comparison")
        raise PlanError("subquery kind is not set", path)

    def _set_comparison(self, sc: Expression.Subquery.SetComparison, scope: Scope, path: str) -> Col:
        SC = Expression.Subquery.SetComparison
        x = self.compile(sc.left, scope, f"{path}.left")
        df, cols, nullable = self._subquery_df(sc.right, scope, f"{path}.right")
        if len(cols) != 1:
            raise PlanError(f"the subquery of a set comparison must return one column, not {len(cols)}", path)
        y = _col(cols[0])
        op, red = sc.comparison_op, sc.reduction_op
        if red not in (SC.REDUCTION_OP_ANY, SC.REDUCTION_OP_ALL):
            raise PlanError("set comparison reduction is unspecified", f"{path}.reduction_op")
        if op == SC.COMPARISON_OP_UNSPECIFIED:
            raise PlanError("set comparison operator is unspecified", f"{path}.comparison_op")
        if op == SC.COMPARISON_OP_EQ and red == SC.REDUCTION_OP_ANY:
            return self._in_subquery([x], [sc.left], df, cols, nullable, scope)
        if op == SC.COMPARISON_OP_NE and red == SC.REDUCTION_OP_ALL:
            return ~self._in_subquery([x], [sc.left], df, cols, nullable, scope)
        # Everything else from the subquery's min, max, row count and non-null count (SQL three-valued logic).
        stats = df.select(
            F.struct(
                F.min(y).alias("mn"),
                F.max(y).alias("mx"),
                F.count(F.lit(1)).alias("n"),
                F.count(y).alias("nn"),
            ).alias("s")
        ).scalar()
        mn, mx, n, nn = stats.getField("mn"), stats.getField("mx"), stats.getField("n"), stats.getField("nn")
        has_nulls = nn < n
        null = F.lit(None).cast(T.BooleanType())
        empty_result = F.lit(red == SC.REDUCTION_OP_ALL)
        # ANY is decided (true) by one non-null y with x op y; ALL is decided (false) by one with not x op y.
        # The y to look at is the extreme one: for ANY the largest when x < y is asked, for ALL the smallest.
        is_any = red == SC.REDUCTION_OP_ANY
        below = op in (SC.COMPARISON_OP_LT, SC.COMPARISON_OP_LE)
        if op == (SC.COMPARISON_OP_NE if is_any else SC.COMPARISON_OP_EQ):
            decided = (nn > 0) & ((mn != x) | (mx != x))  # some non-null y differs from x
        elif is_any:
            decided = (nn > 0) & _compare(op, x, mx if below else mn)
        else:
            decided = (nn > 0) & ~_compare(op, x, mn if below else mx)
        # the decided answer, else null if any comparison was unknown, else the other answer
        return (
            F.when(n == 0, empty_result)
            .when(x.isNull(), null)
            .when(decided, F.lit(is_any))
            .when(has_nulls, null)
            .otherwise(F.lit(not is_any))
        )

    # -------------------------------------------------------------------------------------- functions

    def _make_call(
        self,
        fn: Expression.ScalarFunction | AggregateFunction | Expression.WindowFunction
        | ConsistentPartitionWindowRel.WindowRelFunction,
        scope: Scope,
        path: str,
        distinct: bool = False,
        sorts: Sequence[SortField] = (),
    ) -> Call:
        """The :class:`~optimizer.spark.functions.Call` of a function message (its reference,
        arguments, options and output type, unset when it has no kind)."""
        arguments, options = fn.arguments, fn.options
        output_type = fn.output_type if fn.HasField("output_type") else None
        info = self.functions.get(fn.function_reference, f"{path}.function_reference")
        values: list[Col] = []
        value_exprs: list[Expression] = []
        value_types: list[Type | None] = []
        enums: list[str] = []
        for i, arg in enumerate(arguments):
            which = arg.WhichOneof("arg_type")
            if which == "value":
                values.append(self.compile(arg.value, scope, f"{path}.arguments[{i}].value"))
                value_exprs.append(arg.value)
                value_types.append(self.type_of(arg.value, scope, f"{path}.arguments[{i}].value"))
            elif which == "enum":
                enums.append(arg.enum.upper())
            elif which == "type":
                raise UnsupportedError(
                    f"function '{info.declared_name}' with a type argument is not supported",
                    f"{path}.arguments[{i}]",
                )
            else:
                raise PlanError("function argument is empty", f"{path}.arguments[{i}]")
        opts: dict[str, list[str]] = {}
        for o in options:
            opts[o.name.lower()] = [p.upper() for p in o.preference]
        if output_type is not None and output_type.WhichOneof("kind") is None:
            output_type = None
        return Call(
            info=info,
            path=path,
            values=values,
            value_exprs=value_exprs,
            value_types=value_types,
            enums=enums,
            options=opts,
            output_type=output_type,
            compiler=self,
            scope=scope,
            distinct=distinct,
            sorts=list(sorts),
        )

    def _scalar_function(self, sf: Expression.ScalarFunction, scope: Scope, path: str) -> Col:
        call = self._make_call(sf, scope, path)
        return fns.scalar(call)

    # ----------------------------------------------------------------------------------------- frames

    def _frame(
        self,
        base,
        lower: Expression.WindowFunction.Bound | None,
        upper: Expression.WindowFunction.Bound | None,
        bounds_type: int,
        sorts: list[SortField],
        scope: Scope,
        path: str,
    ):
        WF = Expression.WindowFunction
        lo = self._bound(lower, True, f"{path}.lower_bound")
        hi = self._bound(upper, False, f"{path}.upper_bound")
        if bounds_type == WF.BOUNDS_TYPE_UNSPECIFIED:
            bounds_type = WF.BOUNDS_TYPE_RANGE if sorts else WF.BOUNDS_TYPE_ROWS
        if _is_int(lo) and _is_int(hi) and lo > hi:
            raise UnsupportedError(
                "empty window frames (lower bound after upper bound) are not supported", path
            )
        if bounds_type == WF.BOUNDS_TYPE_ROWS:
            return base.rowsBetween(lo, hi)
        offsets = [b for b in (lo, hi) if b not in (Window.unboundedPreceding, Window.unboundedFollowing, 0)]
        if offsets and len(sorts) != 1:
            raise PlanError("a RANGE frame with offsets needs exactly one sort field", path)
        return base.rangeBetween(lo, hi)

    def _bound(self, bound: Expression.WindowFunction.Bound | None, lower: bool, path: str) -> int:
        kind = bound.WhichOneof("kind") if bound is not None else None
        if kind is None or kind == "unbounded":
            return Window.unboundedPreceding if lower else Window.unboundedFollowing
        if kind == "current_row":
            return 0
        b = getattr(bound, kind)
        if b.HasField("offset_expr"):
            value = literal_value(b.offset_expr)
            if (
                value is NOT_LITERAL
                or isinstance(value, bool)
                or not isinstance(value, int | decimal.Decimal)
            ):
                raise UnsupportedError(
                    "window frame offsets must be integer literals for Spark", f"{path}.{kind}.offset_expr"
                )
            if isinstance(value, decimal.Decimal):
                if value != int(value):
                    raise UnsupportedError(
                        "fractional window frame offsets are not supported", f"{path}.{kind}.offset_expr"
                    )
                value = int(value)
        else:
            value = b.offset
        if value < 0:
            raise PlanError("window frame offsets must not be negative", f"{path}.{kind}")
        return -value if kind == "preceding" else value


def _is_int(v) -> bool:
    return isinstance(v, int) and v not in (Window.unboundedPreceding, Window.unboundedFollowing)


def _compare(op: int, x: Col, y: Col) -> Col:
    SC = Expression.Subquery.SetComparison
    return {
        SC.COMPARISON_OP_EQ: lambda: x == y,
        SC.COMPARISON_OP_NE: lambda: x != y,
        SC.COMPARISON_OP_LT: lambda: x < y,
        SC.COMPARISON_OP_LE: lambda: x <= y,
        SC.COMPARISON_OP_GT: lambda: x > y,
        SC.COMPARISON_OP_GE: lambda: x >= y,
    }[op]()


def _check_phase(phase: int, path: str) -> None:
    if phase not in (
        AggregationPhase.AGGREGATION_PHASE_UNSPECIFIED,
        AggregationPhase.AGGREGATION_PHASE_INITIAL_TO_RESULT,
    ):
        name = AggregationPhase.Name(phase) if phase in AggregationPhase.values() else str(phase)
        raise UnsupportedError(
            f"aggregation phase {name} is not supported (only INITIAL_TO_RESULT)", f"{path}.phase"
        )


def _kind_type(kind: str | None) -> Type | None:
    """A type of that kind, for the kinds whose casts need no parameters to judge."""
    if kind is None or kind in ("decimal", "struct", "list", "map"):
        return None
    return make_type(kind)


_INT_DIGITS = {"i8": 3, "i16": 5, "i32": 10, "i64": 19}
_INT_RANK = {"i8": 1, "i16": 2, "i32": 3, "i64": 4}


def _cast_can_fail(src: Type | None, dst: T.DataType) -> bool:
    """Whether a cast from ``src`` to ``dst`` can fail (or lose the value); True when unsure."""
    sk = type_kind(src)
    dk = spark_type_to_kind(dst)
    if sk is None or dk is None:
        return True
    if dk == "string" and sk not in ("struct", "list", "map", "interval_compound"):
        return False
    if sk == dk and sk != "decimal":
        return False
    if sk in _INT_RANK:
        if dk in _INT_RANK:
            return _INT_RANK[dk] < _INT_RANK[sk]
        if dk in ("fp32", "fp64"):
            return False
        if dk == "decimal":
            return dst.precision - dst.scale < _INT_DIGITS[sk]
        return True
    if sk == "decimal" and dk == "decimal":
        p, s = src.decimal.precision, src.decimal.scale
        return dst.precision - dst.scale < p - s
    if sk == "decimal" and dk in ("fp32", "fp64"):
        return False
    if sk == "fp32" and dk == "fp64":
        return False
    if sk == "bool" and (dk in _INT_RANK or dk in ("fp32", "fp64")):
        return False
    if sk in ("string", "varchar", "fixed_char") and dk == "string":
        return False
    if sk == "date" and dk in ("precision_timestamp", "precision_timestamp_tz"):
        return False
    if sk in ("precision_timestamp", "precision_timestamp_tz") and dk in (
        "date",
        "precision_timestamp",
        "precision_timestamp_tz",
    ):
        return False
    return True
