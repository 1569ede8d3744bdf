"""Hypothesis strategies for differential testing: random tables, valid plans over them, statistics that
may lie, reader-capability profiles and optimizer configurations.

Reusable on their own::

    from hypothesis import given
    from optimizer.difftest.strategies import cases

    @given(cases())
    def test_optimizer_keeps_answers(case):
        result = case.run(lambda tables: SparkBackend(spark, tables=tables), tmp_dir)
        assert not result.failed, result

* :func:`values` -- non-null values of a column type (small shared pools first, so that joins and
  filters match rows; then the extremes: NaN, +-inf, -0.0, the integer limits, the widest decimals,
  the first and last dates; then anything).
* :func:`tables`, :func:`databases` -- small tables (0..N rows, duplicates, nulls in nullable columns) of
  the types the Spark backend supports: ``i8``..``i64``, ``fp32``/``fp64``, ``decimal(p,s)``,
  ``string`` (empty and non-ASCII included), ``bool``, ``date``, ``timestamp`` (``precision_timestamp<6>``).
* :func:`plans` -- a random VALID Substrait plan over a :class:`~optimizer.difftest.harness.Database`,
  built as protobuf with correct field indices and output types (every relation's schema derived
  with :func:`optimizer.schema.rel_schema`, the whole plan checked with
  :func:`optimizer.schema.check.check_plan`): named-table reads with a filter, a best-effort filter (always
  repeated in a ``FilterRel`` above, as the spec requires of a producer) and a projection mask;
  virtual tables; filters; projects with scalar expressions and window functions; aggregates with
  grouping sets and measure filters; sorts; fetches; every join type; cross products; regions of 3..4
  inputs under inner joins or comma joins (cross products under a filter of equalities); every set
  operation; shared subtrees (``ReferenceRel``); random ``emit``\\ s and random (lying) ``hint.stats``.
  Functions are declared under the standard URNs with :class:`optimizer.expr_utils.FunctionRegistrar`.
* :func:`statistics` -- ``{table: TableStatistics}`` with row counts, NDVs, null counts and min/max
  that may be true or lies; :func:`capability_profiles` -- random reader profiles (JSON objects);
  :func:`optimizer_configs` -- random ``OptimizerConfig`` keyword arguments.
* :func:`cases` -- all of it together: a :class:`~optimizer.difftest.harness.DiffCase`.

Generated plans have one answer (as a multiset of rows): nothing depends on the order of ties or
on floating-point summation order. So a ``FetchRel`` always sits over a sort on every column; window
functions are ranks, ``row_number`` over all columns, and count/min/max/sum over whole partitions or
``RANGE`` frames (which include the peers); sums and averages read integers up to ``i32`` and
decimals only; integer arithmetic saturates (``overflow: SATURATE``) instead of failing; the
nondeterministic aggregates (``any_value``, ``first``...) are not used. ``*_SINGLE`` joins read a side
that is unique on the equality key (an aggregate grouped by it), so they never fail.

Minimal examples: every optional feature is drawn so that Hypothesis shrinks it away (choices shrink
to the first option, which is always the simplest).
"""

from __future__ import annotations

import datetime
import decimal
import math
from collections.abc import Sequence

from hypothesis import strategies as st
from substrait.proto import (
    AggregateFunction,
    AggregationPhase,
    Expression,
    FunctionOption,
    JoinRel,
    Plan,
    PlanRel,
    Rel,
    SortField,
    Type,
)

from optimizer.difftest.harness import (
    TYPE_SPECS,
    ColumnSpec,
    Database,
    DiffCase,
    TableSpec,
    spec_of_type,
    spec_type,
)
from optimizer.difftest.rows import RowEvaluator, rows_share_value
from optimizer.expr_utils import FunctionRegistrar, field, referenced_fields, remap_fields, shift_fields
from optimizer.load.functions import FunctionTable
from optimizer.plan_io import mark_conformed
from optimizer.schema import rel_schema
from optimizer.schema.check import check_plan
from optimizer.schema.expressions import derive_output_type
from optimizer.schema.record import Schema
from optimizer.schema.types import is_nullable, make_type, type_name, with_nullability

__all__ = [
    "DECIMAL_TYPES",
    "capability_profiles",
    "cases",
    "databases",
    "optimizer_configs",
    "plans",
    "statistics",
    "tables",
    "values",
]

#: The decimal types generated tables use (one per database, so that columns of two tables compare).
DECIMAL_TYPES = ((9, 2), (18, 4), (38, 10), (5, 0))

_D = decimal.Context(prec=80)
_EPOCH = datetime.datetime(1970, 1, 1)
_EPOCH_DAY = datetime.date(1970, 1, 1)
_MIN_DATE, _MAX_DATE = datetime.date(1, 1, 1), datetime.date(9999, 12, 31)
_MIN_TS, _MAX_TS = datetime.datetime(1, 1, 1), datetime.datetime(9999, 12, 31, 23, 59, 59, 999999)

_SMALL_STRINGS = ["a", "", "b", "ab", "A", "é", "日本語", "a%_b", " ", "😀", "a\nb"]
_FP32_MAX = 3.4028234663852886e38


def _maybe(draw, percent: int) -> bool:
    """True with about ``percent`` % probability; shrinks to False."""
    return draw(st.integers(0, 99)) >= 100 - percent


def _pick(draw, options: Sequence):
    """One of ``options`` (shrinks to the first)."""
    return draw(st.sampled_from(list(options)))


def _weighted(draw, options: Sequence[tuple[str, int]]) -> str:
    flat = [name for name, weight in options for _ in range(weight) if weight > 0]
    return draw(st.sampled_from(flat))


# ------------------------------------------------------------------------------------------ values


def _decimal_ps(spec: str) -> tuple[int, int]:
    inner = spec[len("decimal(") : -1]
    p, s = inner.split(",")
    return int(p), int(s)


def _quantize(v: decimal.Decimal, scale: int) -> decimal.Decimal:
    return v.quantize(decimal.Decimal(1).scaleb(-scale), context=_D)


def values(spec: str) -> st.SearchStrategy:
    """Non-null Python values of a column type spec (``i32``, ``decimal(9,2)``, ``timestamp``...):
    half from a small pool shared by all tables (so that filters and joins match rows), a quarter
    extremes, a quarter anything."""
    pool, extremes, anything = _value_parts(spec)
    return st.one_of(pool, pool, extremes, anything)


def _value_parts(spec: str) -> tuple[st.SearchStrategy, st.SearchStrategy, st.SearchStrategy]:
    if spec in ("i8", "i16", "i32", "i64"):
        bits = int(spec[1:])
        lo, hi = -(2 ** (bits - 1)), 2 ** (bits - 1) - 1
        return st.sampled_from([0, 1, 2, -1, 3]), st.sampled_from([lo, hi, lo + 1, hi - 1]), st.integers(lo, hi)
    if spec == "fp64":
        return (
            st.sampled_from([0.0, 1.0, 2.5, -1.0, 0.5]),
            st.sampled_from([math.nan, math.inf, -math.inf, -0.0, 1.7976931348623157e308, -1.7976931348623157e308,
                             5e-324]),
            st.floats(allow_nan=True, allow_infinity=True),
        )
    if spec == "fp32":
        return (
            st.sampled_from([0.0, 1.0, 2.5, -1.0, 0.5]),
            st.sampled_from([math.nan, math.inf, -math.inf, -0.0, _FP32_MAX, -_FP32_MAX, 1.401298464324817e-45]),
            st.floats(width=32, allow_nan=True, allow_infinity=True),
        )
    if spec.startswith("decimal("):
        p, s = _decimal_ps(spec)
        biggest = decimal.Decimal(10**p - 1).scaleb(-s, context=_D)
        small = [decimal.Decimal(x) for x in ("0", "1", "2", "-1")] + ([decimal.Decimal("1.5")] if s else [])
        return (
            st.sampled_from([_quantize(v, s) for v in small]),
            st.sampled_from([biggest, biggest.copy_negate()]),
            st.integers(-(10**p - 1), 10**p - 1).map(lambda u: _quantize(decimal.Decimal(u).scaleb(-s, context=_D), s)),
        )
    if spec == "string":
        return st.sampled_from(_SMALL_STRINGS), st.sampled_from(["", "\x00", "\U0010ffff", "zzzz"]), st.text(max_size=6)
    if spec == "bool":
        return st.booleans(), st.booleans(), st.booleans()
    if spec == "date":
        return (
            st.sampled_from([datetime.date(2000, 1, 1), _EPOCH_DAY, datetime.date(1969, 12, 31),
                             datetime.date(2024, 2, 29)]),
            st.sampled_from([_MIN_DATE, _MAX_DATE]),
            st.dates(_MIN_DATE, _MAX_DATE),
        )
    if spec == "timestamp":
        return (
            st.sampled_from([datetime.datetime(2000, 1, 1), _EPOCH, datetime.datetime(1999, 12, 31, 23, 59, 59, 999999)]),
            st.sampled_from([_MIN_TS, _MAX_TS]),
            st.datetimes(_MIN_TS, _MAX_TS),
        )
    raise ValueError(f"unknown column type {spec!r}")


def pool_values(spec: str) -> st.SearchStrategy:
    """The small shared pool of values of a column type only (see :func:`values`)."""
    return _value_parts(spec)[0]


def _column_values(spec: str, nullable: bool, pooled: bool = False) -> st.SearchStrategy:
    """A column's values: about one in four null when nullable; from the pool only when ``pooled``."""
    base = pool_values(spec) if pooled else values(spec)
    return st.one_of(base, base, base, st.none()) if nullable else base


def _is_pool_value(spec: str, value) -> bool:
    """Whether ``value`` is one of the pool values of ``spec`` (pooled data: exact float sums)."""
    if value is None:
        return True
    if spec in _FLOATS:
        return isinstance(value, float) and math.isfinite(value) and abs(value) <= 3 and (value * 2).is_integer()
    if spec in _INTS:
        return abs(value) <= 3
    return True


@st.composite
def tables(draw, name: str = "t0", *, types: Sequence[str] | None = None, max_columns: int = 4,
           max_rows: int = 8, pooled: bool = False) -> TableSpec:
    """A small table: 1..``max_columns`` columns of ``types`` (type specs; default: every type, with
    ``decimal(9,2)``), 3..``max_rows`` rows plus duplicates (none in 1 %), nulls in the nullable
    columns; ``pooled``: every value from the small shared pool (joins match, float sums are exact)."""
    palette = list(types) if types else [t if t != "decimal" else "decimal(9,2)" for t in TYPE_SPECS]
    n = draw(st.integers(1, max_columns))
    columns = [
        ColumnSpec(f"c{i}", _pick(draw, palette), nullable=not _maybe(draw, 25)) for i in range(n)
    ]
    row = st.tuples(*[_column_values(c.type, c.nullable, pooled) for c in columns])
    rows = draw(st.lists(row, min_size=0 if _maybe(draw, 1) else min(3, max_rows), max_size=max_rows))
    if rows and _maybe(draw, 30):  # duplicates
        rows += draw(st.lists(st.sampled_from(rows), min_size=1, max_size=3))
    return TableSpec(name, columns, rows)


@st.composite
def databases(draw, *, max_tables: int = 3, max_columns: int = 4, max_rows: int = 8,
              types: Sequence[str] = TYPE_SPECS) -> Database:
    """1..``max_tables`` tables ``t0``, ``t1``...; their columns share a palette of 1..4 types (one
    decimal type), so that columns of different tables can be compared and joined. Three in five
    databases hold pool values only (see :func:`tables`)."""
    pooled = _maybe(draw, 60)
    p, s = _pick(draw, DECIMAL_TYPES)
    palette = draw(st.lists(st.sampled_from(list(types)), min_size=1, max_size=4, unique=True))
    palette = [f"decimal({p},{s})" if t == "decimal" else t for t in palette]
    n = draw(st.integers(1, max_tables))
    out = Database()
    for i in range(n):
        out.tables[f"t{i}"] = draw(tables(f"t{i}", types=palette, max_columns=max_columns, max_rows=max_rows,
                                          pooled=pooled))
    return out


# ---------------------------------------------------------------------------------------- literals


def literal(spec: str, value) -> Expression:
    """A literal expression of a column type spec (``value`` None: a typed null)."""
    e = Expression()
    lit = e.literal
    if value is None:
        lit.null.CopyFrom(spec_type(spec, True))
        return e
    if spec in ("i8", "i16", "i32", "i64", "fp32", "fp64", "string"):
        setattr(lit, spec, value)
    elif spec == "bool":
        lit.boolean = value
    elif spec == "date":
        lit.date = (value - _EPOCH_DAY).days
    elif spec == "timestamp":
        lit.precision_timestamp.precision = 6
        lit.precision_timestamp.value = (value - _EPOCH) // datetime.timedelta(microseconds=1)
    elif spec.startswith("decimal("):
        p, s = _decimal_ps(spec)
        unscaled = int(value.scaleb(s, context=_D))
        lit.decimal.value = unscaled.to_bytes(16, "little", signed=True)
        lit.decimal.precision = p
        lit.decimal.scale = s
    else:
        raise ValueError(f"unknown column type {spec!r}")
    return e


def _literal_value(e: Expression):
    """A sortable stand-in for a literal's value (numbers, strings, booleans, dates; NaN and others as 0)."""
    lit = e.literal
    kind = lit.WhichOneof("literal_type")
    if kind == "decimal":
        return int.from_bytes(lit.decimal.value, "little", signed=True)
    if kind == "precision_timestamp":
        return lit.precision_timestamp.value
    value = getattr(lit, kind) if kind and kind != "null" else 0
    if isinstance(value, float) and math.isnan(value):
        return 0.0
    return value if isinstance(value, int | float | str) else 0


def _bool_literal(value: bool | None) -> Expression:
    return literal("bool", value)


# ------------------------------------------------------------------------------------ plan builder

_URN = {
    **{n: "functions_comparison" for n in (
        "equal", "not_equal", "lt", "gt", "lte", "gte", "is_null", "is_not_null", "is_nan", "between",
        "coalesce", "is_not_distinct_from", "is_distinct_from")},
    **{n: "functions_boolean" for n in ("and", "or", "not", "bool_and", "bool_or")},
    **{n: "functions_arithmetic" for n in (
        "add", "subtract", "multiply", "divide", "sum", "avg", "min", "max", "rank", "dense_rank", "row_number",
        "percent_rank", "cume_dist", "lead", "lag")},
    **{n: "functions_string" for n in ("concat", "upper", "lower", "char_length", "like", "starts_with", "substring")},
    "count": "functions_aggregate_generic",
}

_CMP = ("equal", "not_equal", "lt", "gt", "lte", "gte")
_INTS = ("i8", "i16", "i32", "i64")
_FLOATS = ("fp32", "fp64")
_SUMMABLE = ("i8", "i16", "i32")  # integer sums that cannot overflow on small tables
_REQUIRED_BOOL = make_type("bool")
_NULLABLE_BOOL = make_type("bool", True)


def _same_value(a, b) -> bool:
    if isinstance(a, float) and isinstance(b, float):
        return (math.isnan(a) and math.isnan(b)) or (a == b and math.copysign(1, a) == math.copysign(1, b))
    return type(a) is type(b) and a == b


class _Skip(Exception):
    """An option that does not apply here (the generator tries another)."""


def _class(t: Type) -> str:
    return type_name(t, False)


def _spec(t: Type) -> str:
    spec = spec_of_type(t)
    if spec is None:
        raise _Skip(type_name(t))
    return spec


class _Gen:
    """Builds one plan; ``draw`` is Hypothesis' draw function."""

    def __init__(self, draw, db: Database, *, max_depth: int, max_relations: int, shared: bool,
                 windows: bool) -> None:
        self.draw = draw
        self.db = db
        self.max_depth = max_depth
        self.budget = max_relations
        self.allow_shared = shared
        self.allow_windows = windows
        self.plan = Plan()
        mark_conformed(self.plan)  # written in the spec's conventions, as a plan the tool loaded
        self.reg = FunctionRegistrar(self.plan, FunctionTable([]))  # an empty plan declares nothing yet
        #: the rows of the relations built so far, where it can tell (filters aimed at keeping rows)
        self.evaluator = RowEvaluator(self.plan, db, self.function_name)
        self.shared: list[tuple[int, Schema]] = []
        #: the non-null values the tables hold, by column type (in a stable order)
        self.data_values: dict[str, list] = {}
        #: the non-null values of the columns of each name and type (``c0`` of ``t0`` and of ``t1``...):
        #: a literal compared with a column whose name is a table column's is mostly one of its values
        self.column_values: dict[tuple[str, str], list] = {}
        for table in db.tables.values():
            for i, c in enumerate(table.columns):
                bucket = self.data_values.setdefault(c.type, [])
                own = self.column_values.setdefault((c.name, c.type), [])
                for row in table.rows:
                    v = row[i]
                    if v is not None and not any(_same_value(v, w) for w in bucket):
                        bucket.append(v)
                    if v is not None and not any(_same_value(v, w) for w in own):
                        own.append(v)
        #: the table whose columns the predicates being built read directly (a read's filters): its
        #: own values are preferred for literals
        self.reading: TableSpec | None = None
        #: every value is a small pool value: float sums are exact in any order (and no float division
        #: is generated), so sums and averages over floats have one answer
        self.exact_floats = all(_is_pool_value(c.type, row[i]) for table in db.tables.values()
                                for i, c in enumerate(table.columns) for row in table.rows)

    # -------------------------------------------------------------------------------- helpers

    def function_name(self, anchor: int) -> str:
        table = self.reg.table
        return table.get(anchor).name if anchor in table else ""

    def aimed(self, rows: list[tuple] | None, make, drop_from: list[tuple] | None = None) -> Expression:
        """A condition from ``make()`` that keeps some of ``rows`` (the input's, when the evaluator
        knows them): up to six draws, the first that keeps some rows and drops others (others of
        ``drop_from`` when given: the last input of a set operation, which a filter pushed into the
        first input only would not filter), else the first that keeps some. A filter that empties
        its input hides most wrong plans above it; one that drops nothing hides a lost conjunct."""
        first = kept_some = None
        for _ in range(6):
            cond = make()
            if not rows:
                return cond
            kept, dropped = self.evaluator.keeps(cond, rows)
            if drop_from:
                dropped = self.evaluator.keeps(cond, drop_from)[1]
            if kept and dropped:
                return cond
            first = first or cond
            kept_some = kept_some or (cond if kept else None)
        return kept_some or first

    def matching(self, pairs: list[tuple[int, int]], left: list[tuple] | None, right: list[tuple] | None,
                 right_offset: int) -> list[tuple[int, int]]:
        """The key pairs ``(a, b)`` (``b`` counted from ``right_offset``) whose columns share a value in
        the inputs' rows (so an equality between them keeps rows); all of them when the rows are
        not known, or none share a value."""
        if not left or not right:
            return pairs
        out = [(a, b) for a, b in pairs if rows_share_value(left, a, right, b - right_offset)]
        return out or pairs

    def summable(self, t: Type) -> bool:
        """Sums of this type have one answer: small integers, decimals, floats of exact (pool) data."""
        spec = _spec(t)
        return spec in _SUMMABLE or spec.startswith("decimal") or (spec in _FLOATS and self.exact_floats)

    def schema(self, rel: Rel, inputs: Sequence[Schema]) -> Schema:
        return rel_schema(rel, list(inputs), self.reg.table)

    def call(self, name: str, args: Sequence[tuple[Expression, Type]], out: Type | None = None,
             options: Sequence[tuple[str, str]] = ()) -> tuple[Expression, Type]:
        types = [t for _, t in args]
        if out is None:
            out = derive_output_type(name, types)
            if out.WhichOneof("kind") is None:
                raise _Skip(f"no output type for {name}")
        e = Expression()
        sf = e.scalar_function
        sf.function_reference = self.reg.anchor(name, _URN[name])
        for a, _ in args:
            sf.arguments.add().value.CopyFrom(a)
        sf.output_type.CopyFrom(out)
        for oname, pref in options:
            sf.options.append(FunctionOption(name=oname, preference=[pref]))
        return e, out

    def col(self, schema: Schema, i: int) -> tuple[Expression, Type]:
        return field(i), schema.types[i]

    def cols(self, schema: Schema, pred=lambda t: True) -> list[int]:
        return [i for i, t in enumerate(schema.types) if spec_of_type(t) is not None and pred(t)]

    def lit_for(self, t: Type, null_percent: int = 0, name: str | None = None) -> tuple[Expression, Type]:
        """A literal of ``t``'s type: often a value the tables hold (so that filters keep some rows);
        ``name``: the column it is compared with, whose own values are preferred."""
        spec = _spec(t)
        if null_percent and _maybe(self.draw, null_percent):
            return literal(spec, None), spec_type(spec, True)
        own = self.column_values.get((name, spec)) if name is not None else None
        if name is not None and self.reading is not None:
            k = next((k for k, c in enumerate(self.reading.columns) if c.name == name and c.type == spec), None)
            if k is not None:
                mine = [row[k] for row in self.reading.rows if row[k] is not None]
                own = mine or own
        if own and not _maybe(self.draw, 25):
            return literal(spec, _pick(self.draw, own)), spec_type(spec, False)
        seen = self.data_values.get(spec)
        if seen and not _maybe(self.draw, 15):
            return literal(spec, _pick(self.draw, seen)), spec_type(spec, False)
        return literal(spec, self.draw(pool_values(spec) if self.exact_floats else values(spec))), spec_type(spec, False)

    def hint_and_emit(self, rel: Rel, inputs: Sequence[Schema], emit: bool = True) -> Schema:
        """Maybe a random ``emit`` and random ``hint.stats`` on ``rel``; its output schema."""
        draw = self.draw
        body = getattr(rel, rel.WhichOneof("rel_type"))
        schema = self.schema(rel, inputs)
        if emit and len(schema) and _maybe(draw, 15):
            n = len(schema)
            mapping = draw(st.lists(st.integers(0, n - 1), min_size=1, max_size=n, unique=not _maybe(draw, 20)))
            body.common.emit.output_mapping.extend(mapping)
            schema = self.schema(rel, inputs)
        if _maybe(draw, 12):
            body.common.hint.stats.row_count = float(_pick(draw, [1, 0, 10, 1000, 1e6, 1e12]))
            body.common.hint.stats.record_size = float(_pick(draw, [8, 1, 100, 1e6]))
        return schema

    # ---------------------------------------------------------------------------- expressions

    def predicate(self, schema: Schema, depth: int = 0) -> Expression:
        for _ in range(8):
            try:
                return self._predicate(schema, depth)
            except _Skip:
                continue
        return _bool_literal(True)

    def _predicate(self, schema: Schema, depth: int) -> Expression:
        draw = self.draw
        any_cols = self.cols(schema)
        options = [("cmp_lit", 6)]
        if any_cols:
            options += [("is_null", 2), ("in", 2), ("distinct", 1), ("between", 1), ("cmp_col", 2), ("arith_cmp", 2)]
        if self.cols(schema, lambda t: _spec(t) == "bool"):
            options.append(("bool_col", 2))
        if self.cols(schema, lambda t: _spec(t) == "string"):
            options += [("like", 1), ("starts_with", 1)]
        if self.cols(schema, lambda t: _spec(t) in _FLOATS):
            options.append(("is_nan", 1))
        options.append(("const", 1))
        if depth < 2:
            options += [("and", 2), ("or", 2), ("not", 1)]
        kind = _weighted(draw, options)
        if kind == "const":  # mostly true: a false or NULL condition empties the answer
            return _bool_literal(_pick(draw, [True, True, True, True, True, True, False, None]))
        if kind in ("and", "or"):
            n = 2 if kind == "and" or not _maybe(draw, 30) else 3
            args = [(self._predicate_or_true(schema, depth + 1), _NULLABLE_BOOL) for _ in range(n)]
            if _maybe(draw, 25):  # a constant operand, as constant folding by a producer leaves them;
                # mostly the one that keeps rows (true in an AND, false in an OR)
                keeps = kind == "and"
                constant = _pick(draw, [keeps, keeps, not keeps, None])
                args.insert(draw(st.integers(0, len(args))), (_bool_literal(constant), _NULLABLE_BOOL))
            return self.call(kind, args, _NULLABLE_BOOL)[0]
        if kind == "not":
            return self.call("not", [(self._predicate_or_true(schema, depth + 1), _NULLABLE_BOOL)], _NULLABLE_BOOL)[0]
        if not any_cols:
            raise _Skip("no columns")
        if kind == "cmp_lit":
            i = _pick(draw, any_cols)
            c = self.col(schema, i)
            lit = self.lit_for(c[1], null_percent=5, name=schema.names[i])
            a, b = (c, lit) if not _maybe(draw, 20) else (lit, c)
            # every comparison, those that keep a row equal to the literal (one of the column's
            # values, mostly) twice as often
            return self.call(_pick(draw, _CMP + ("lte", "gte", "not_equal")), [a, b])[0]
        if kind == "cmp_col":
            i = _pick(draw, any_cols)
            same = [j for j in any_cols if _class(schema.types[j]) == _class(schema.types[i]) and j != i]
            if not same:
                raise _Skip("no pair")
            j = _pick(draw, same)
            return self.call(_pick(draw, _CMP), [self.col(schema, i), self.col(schema, j)])[0]
        if kind == "is_null":
            i = _pick(draw, any_cols)
            return self.call(_pick(draw, ["is_null", "is_not_null"]), [self.col(schema, i)])[0]
        if kind == "in":
            i = _pick(draw, any_cols)
            e = Expression()
            e.singular_or_list.value.CopyFrom(field(i))
            for _ in range(draw(st.integers(1, 3))):
                e.singular_or_list.options.append(self.lit_for(schema.types[i], null_percent=5,
                                                               name=schema.names[i])[0])
            return e
        if kind == "distinct":
            i = _pick(draw, any_cols)
            other = self.lit_for(schema.types[i], null_percent=30, name=schema.names[i])
            return self.call(_pick(draw, ["is_not_distinct_from", "is_distinct_from"]), [self.col(schema, i), other])[0]
        if kind == "between":
            i = _pick(draw, self.cols(schema, lambda t: _spec(t) != "bool") or [None])
            if i is None:
                raise _Skip("nothing to range over")
            lo, hi = (self.lit_for(schema.types[i], name=schema.names[i]),
                      self.lit_for(schema.types[i], name=schema.names[i]))
            if _literal_value(hi[0]) < _literal_value(lo[0]):  # mostly a non-empty range
                lo, hi = hi, lo
            return self.call("between", [self.col(schema, i), lo, hi])[0]
        if kind == "arith_cmp":
            value = self.value(schema, depth + 1, numeric=True)
            lit = self.lit_for(value[1])
            return self.call(_pick(draw, _CMP), [value, lit])[0]
        if kind == "bool_col":
            i = _pick(draw, self.cols(schema, lambda t: _spec(t) == "bool"))
            return field(i)
        if kind == "like":
            i = _pick(draw, self.cols(schema, lambda t: _spec(t) == "string"))
            pattern = _pick(draw, ["a%", "%", "_", "%b%", "", "a", "é%", "a\\%%"])
            return self.call("like", [self.col(schema, i), (literal("string", pattern), spec_type("string", False))])[0]
        if kind == "starts_with":
            i = _pick(draw, self.cols(schema, lambda t: _spec(t) == "string"))
            prefix = _pick(draw, ["a", "", "é", "A"])
            return self.call("starts_with", [self.col(schema, i), (literal("string", prefix), spec_type("string", False))])[0]
        if kind == "is_nan":
            i = _pick(draw, self.cols(schema, lambda t: _spec(t) in _FLOATS))
            return self.call("is_nan", [self.col(schema, i)])[0]
        raise _Skip(kind)

    def _predicate_or_true(self, schema: Schema, depth: int) -> Expression:
        try:
            return self._predicate(schema, depth)
        except _Skip:
            return _bool_literal(True)

    def value(self, schema: Schema, depth: int = 0, *, numeric: bool = False) -> tuple[Expression, Type]:
        """A scalar expression (no window function) and its type."""
        for _ in range(8):
            try:
                return self._value(schema, depth, numeric)
            except _Skip:
                continue
        raise _Skip("no value expression")

    def _value(self, schema: Schema, depth: int, numeric: bool) -> tuple[Expression, Type]:
        draw = self.draw
        nums = self.cols(schema, lambda t: _spec(t) in _INTS + _FLOATS or _spec(t).startswith("decimal"))
        strings = self.cols(schema, lambda t: _spec(t) == "string")
        options = [("arith", 4)] if nums else []
        if not numeric:
            options = [("col", 3), ("lit", 1)] + options
            if strings:
                options += [("string", 2)]
            if depth < 2:
                options += [("if_then", 1), ("coalesce", 1)]
        if nums:
            options.append(("cast", 1))
            if strings:
                options.append(("char_length", 1))
        if not options:
            raise _Skip("nothing")
        kind = _weighted(draw, options)
        any_cols = self.cols(schema)
        if kind == "col":
            if not any_cols:
                raise _Skip("no column")
            return self.col(schema, _pick(draw, any_cols))
        if kind == "lit":
            spec = _pick(draw, [_spec(schema.types[i]) for i in any_cols] or ["i32"])
            return self.lit_for(spec_type(spec), null_percent=10)
        if kind == "arith":
            i = _pick(draw, nums)
            a = self.col(schema, i)
            spec = _spec(a[1])
            same = [j for j in nums if _class(schema.types[j]) == _class(a[1])]
            b = self.col(schema, _pick(draw, same)) if _maybe(draw, 40) else self.lit_for(a[1])
            ops = ["add", "subtract", "multiply"] + (["divide"] if spec in _FLOATS and not self.exact_floats else [])
            op = _pick(draw, ops)
            options = [("overflow", "SATURATE")] if spec in _INTS or spec.startswith("decimal") else []
            return self.call(op, [a, b], options=options)
        if kind == "cast":
            i = _pick(draw, nums)
            src = schema.types[i]
            spec = _spec(src)
            targets = ["fp64"] + (["i64", "string"] if spec in _INTS else [])
            target = spec_type(_pick(draw, targets), is_nullable(src))
            e = Expression()
            e.cast.type.CopyFrom(target)
            e.cast.input.CopyFrom(field(i))
            e.cast.failure_behavior = Expression.Cast.FAILURE_BEHAVIOR_THROW_EXCEPTION
            return e, target
        if kind == "string":
            i = _pick(draw, strings)
            a = self.col(schema, i)
            fn = _pick(draw, ["concat", "upper", "lower", "substring"])
            if fn == "concat":
                b = self.col(schema, _pick(draw, strings)) if _maybe(draw, 40) else self.lit_for(a[1])
                return self.call("concat", [a, b])
            if fn == "substring":
                start = (literal("i32", draw(st.integers(-2, 4))), spec_type("i32", False))
                length = (literal("i32", draw(st.integers(0, 3))), spec_type("i32", False))
                return self.call("substring", [a, start, length])
            return self.call(fn, [a])
        if kind == "char_length":
            return self.call("char_length", [self.col(schema, _pick(draw, strings))])
        if kind == "if_then":
            a = self.value(schema, depth + 1)
            b = self._same_type(schema, a[1])
            e = Expression()
            clause = e.if_then.ifs.add()
            getattr(clause, "if").CopyFrom(self.predicate(schema, depth + 1))
            clause.then.CopyFrom(a[0])
            getattr(e.if_then, "else").CopyFrom(b[0])
            return e, with_nullability(a[1], is_nullable(a[1]) or is_nullable(b[1]))
        if kind == "coalesce":
            nullable = self.cols(schema, is_nullable)
            if not nullable:
                raise _Skip("no nullable column")
            a = self.col(schema, _pick(draw, nullable))
            b = self.lit_for(a[1])
            return self.call("coalesce", [a, b])
        raise _Skip(kind)

    def _same_type(self, schema: Schema, t: Type) -> tuple[Expression, Type]:
        same = [j for j in self.cols(schema) if _class(schema.types[j]) == _class(t)]
        if same and _maybe(self.draw, 50):
            return self.col(schema, _pick(self.draw, same))
        return self.lit_for(with_nullability(t, False), null_percent=20)

    def sort_field(self, schema: Schema, i: int | None = None) -> SortField:
        s = SortField()
        if i is None and (not self.cols(schema) or _maybe(self.draw, 15)):
            s.expr.CopyFrom(self.value(schema, 1)[0])
        else:
            s.expr.CopyFrom(field(i if i is not None else _pick(self.draw, self.cols(schema))))
        s.direction = _pick(self.draw, [1, 2, 3, 4])
        return s

    def window(self, schema: Schema) -> tuple[Expression, Type]:
        draw = self.draw
        cols = self.cols(schema)
        if not cols:
            raise _Skip("no columns")
        fn = _pick(draw, ["rank", "count", "min", "max", "dense_rank", "row_number", "sum", "percent_rank",
                          "cume_dist", "count_star", "lead", "lag"])
        # ROWS frames and lead/lag depend on the order of the rows: only over an order on every
        # column (rows equal on every column are interchangeable, so the answer is one multiset).
        rows_frame = fn in ("count", "min", "max", "sum", "count_star") and _maybe(draw, 30)
        e = Expression()
        wf = e.window_function
        wf.phase = AggregationPhase.AGGREGATION_PHASE_INITIAL_TO_RESULT
        wf.invocation = AggregateFunction.AGGREGATION_INVOCATION_ALL
        n_keys = min(len(cols), _pick(draw, [0, 1, 2, 2]))  # two keys in half the windows
        for i in draw(st.lists(st.sampled_from(cols), min_size=n_keys, max_size=n_keys, unique=True)):
            wf.partitions.append(field(i))
        ranking = fn in ("rank", "dense_rank", "row_number", "percent_rank", "cume_dist", "lead", "lag")
        if fn in ("row_number", "lead", "lag") or rows_frame:  # ties would make it nondeterministic: order by every column
            for i in cols:
                wf.sorts.append(self.sort_field(schema, i))
            if len(cols) != len(schema):
                raise _Skip("a column that cannot be sorted")
        elif ranking or _maybe(draw, 40):
            for _ in range(draw(st.integers(1, 2))):
                wf.sorts.append(self.sort_field(schema))
        args: list[tuple[Expression, Type]] = []
        name = "count" if fn == "count_star" else fn
        if fn in ("count", "min", "max"):
            args = [self.col(schema, _pick(draw, cols))]
        if fn in ("lead", "lag"):
            args = [self.col(schema, _pick(draw, cols))]
            if _maybe(draw, 50):
                args.append((literal("i32", draw(st.integers(1, 2))), spec_type("i32", False)))
        elif fn == "sum":
            ok = self.cols(schema, self.summable)
            if not ok:
                raise _Skip("nothing to sum")
            args = [self.col(schema, _pick(draw, ok))]
        out = None
        if fn in ("lead", "lag"):
            out = with_nullability(args[0][1], True)
        elif ranking:
            out = make_type("fp64" if fn in ("percent_rank", "cume_dist") else "i64", True)
        out = self.fill_call(wf, name, args, out)
        if rows_frame:
            wf.bounds_type = Expression.WindowFunction.BOUNDS_TYPE_ROWS
            if _maybe(draw, 50):
                wf.lower_bound.preceding.offset = draw(st.integers(1, 2))
            else:
                wf.lower_bound.unbounded.SetInParent()
            wf.upper_bound.current_row.SetInParent()
        elif wf.sorts and not ranking:
            wf.bounds_type = Expression.WindowFunction.BOUNDS_TYPE_RANGE
            wf.lower_bound.unbounded.SetInParent()
            wf.upper_bound.current_row.SetInParent()
        elif not ranking:
            wf.bounds_type = Expression.WindowFunction.BOUNDS_TYPE_ROWS
            wf.lower_bound.unbounded.SetInParent()
            wf.upper_bound.unbounded.SetInParent()
        return e, out

    def measure(self, schema: Schema) -> AggregateFunction:
        draw = self.draw
        cols = self.cols(schema)
        fn = _pick(draw, ["count_star", "count", "min", "max", "sum", "avg", "bool"])
        if not cols:
            fn = "count_star"
        agg = AggregateFunction()
        agg.phase = AggregationPhase.AGGREGATION_PHASE_INITIAL_TO_RESULT
        agg.invocation = AggregateFunction.AGGREGATION_INVOCATION_ALL
        args: list[tuple[Expression, Type]] = []
        name = fn
        if fn == "count_star":
            name = "count"
        elif fn in ("count", "min", "max"):
            args = [self.col(schema, _pick(draw, cols))]
        elif fn in ("sum", "avg"):
            ok = self.cols(schema, self.summable)
            if not ok:
                raise _Skip("nothing to sum")
            args = [self.col(schema, _pick(draw, ok))]
        elif fn == "bool":
            ok = self.cols(schema, lambda t: _spec(t) == "bool")
            if not ok:
                raise _Skip("no boolean")
            name = _pick(draw, ["bool_and", "bool_or"])
            args = [self.col(schema, _pick(draw, ok))]
        if args and fn in ("count", "sum", "avg") and _maybe(draw, 20):
            agg.invocation = AggregateFunction.AGGREGATION_INVOCATION_DISTINCT
        self.fill_call(agg, name, args)
        return agg

    def fill_call(self, fn: AggregateFunction | Expression.WindowFunction, name: str,
                  args: list[tuple[Expression, Type]], out: Type | None = None) -> Type:
        """Make ``fn`` call ``name`` on ``args``, returning ``out``: when not given, the argument's type
        (nullable) for min and max, else the type derived from the arguments'."""
        if out is None and name in ("min", "max"):
            out = with_nullability(args[0][1], True)
        elif out is None:
            out = derive_output_type(name, [t for _, t in args])
            if out.WhichOneof("kind") is None:
                raise _Skip(f"no type for {name}")
        fn.function_reference = self.reg.anchor(name, _URN[name])
        for a, _ in args:
            fn.arguments.add().value.CopyFrom(a)
        fn.output_type.CopyFrom(out)
        return out

    # ------------------------------------------------------------------------------ relations

    def relation(self, depth: int = 0) -> tuple[Rel, Schema]:
        for _ in range(6):
            try:
                return self._relation(depth)
            except _Skip:
                continue
        return self.read()

    def _relation(self, depth: int) -> tuple[Rel, Schema]:
        draw = self.draw
        self.budget -= 1
        leaf = depth > 0 and (depth >= self.max_depth or self.budget <= 0)  # the root: an operator always
        options = []
        if depth > 0 or leaf:  # the root is an operator: a plan that only reads gives the rules nothing
            options = [("read", 6 if leaf else 2), ("virtual", 1)]
            if self.shared:
                options.append(("reference", 2))
        if not leaf:
            options += [("filter", 4), ("project", 2), ("aggregate", 2), ("join", 4), ("sort", 1), ("fetch", 3),
                        ("cross", 1), ("set", 3), ("region", 3), ("outer_filter", 4)]
            if self.allow_windows:
                options.append(("window_project", 3))
            if self.allow_shared:
                options.append(("share", 1))
        kind = _weighted(draw, options)
        if kind == "read":
            return self.read()
        if kind == "virtual":
            return self.virtual()
        if kind == "reference":
            ordinal, schema = _pick(draw, self.shared)
            return self.reference(ordinal), schema
        if kind == "share":
            rel, schema = self.relation(depth + 1)
            return self.share(rel, schema), schema
        return getattr(self, kind)(depth)

    def reference(self, ordinal: int) -> Rel:
        rel = Rel()
        rel.reference.subtree_ordinal = ordinal
        return rel

    def share(self, rel: Rel, schema: Schema) -> Rel:
        """Make ``rel`` a shared subtree (a ``PlanRel``); return a ``ReferenceRel`` to it."""
        if rel.WhichOneof("rel_type") == "reference":
            return rel
        self.plan.relations.append(PlanRel(rel=rel))
        ordinal = len(self.plan.relations) - 1
        self.shared.append((ordinal, schema))
        return self.reference(ordinal)

    def read(self) -> tuple[Rel, Schema]:
        draw = self.draw
        table = _pick(draw, list(self.db.tables.values()))
        rel = Rel()
        r = rel.read
        r.named_table.names.append(table.name)
        r.base_schema.struct.nullability = Type.NULLABILITY_REQUIRED
        for c in table.columns:
            r.base_schema.names.append(c.name)
            r.base_schema.struct.types.append(c.substrait_type())
        base = Schema([c.name for c in table.columns], [c.substrait_type() for c in table.columns])
        self.reading = table
        try:
            return self._read(table, rel, base)
        finally:
            self.reading = None

    def _read(self, table: TableSpec, rel: Rel, base: Schema) -> tuple[Rel, Schema]:
        draw = self.draw
        r = rel.read
        if _maybe(draw, 20):
            r.filter.CopyFrom(self.aimed(table.rows, lambda: self.predicate(base)))
        base_rows = self.evaluator.rows(rel)  # the base columns' rows (no projection yet)
        positions = list(range(len(base)))
        if _maybe(draw, 25):
            positions = draw(st.lists(st.integers(0, len(base) - 1), min_size=1, max_size=len(base), unique=True))
            if not _maybe(draw, 30):
                positions.sort()
            r.projection.maintain_singular_struct = True
            for i in positions:
                r.projection.select.struct_items.add().field = i
        best_effort = None
        if _maybe(draw, 20):
            best_effort = self.aimed(base_rows, lambda: self.predicate(base))
            if referenced_fields(best_effort) <= set(positions):
                r.best_effort_filter.CopyFrom(best_effort)
                best_effort = remap_fields(best_effort, {p: k for k, p in enumerate(positions)})
            else:
                best_effort = None
        schema = self.hint_and_emit(rel, [], emit=best_effort is None)
        if best_effort is not None:  # a best-effort filter may be skipped: the producer repeats it
            top = Rel()
            top.filter.input.CopyFrom(rel)
            top.filter.condition.CopyFrom(best_effort)
            return top, self.schema(top, [schema])
        return rel, schema

    def virtual(self) -> tuple[Rel, Schema]:
        draw = self.draw
        specs = [c.type for t in self.db.tables.values() for c in t.columns]
        n = draw(st.integers(1, 3))
        columns = [ColumnSpec(f"v{i}", _pick(draw, specs), nullable=True) for i in range(n)]
        rel = Rel()
        r = rel.read
        r.base_schema.struct.nullability = Type.NULLABILITY_REQUIRED
        for c in columns:
            r.base_schema.names.append(c.name)
            r.base_schema.struct.types.append(c.substrait_type())
        r.virtual_table.SetInParent()
        for _ in range(draw(st.integers(1, 3))):
            row = r.virtual_table.expressions.add()
            for c in columns:
                row.fields.append(literal(c.type, draw(_column_values(c.type, True, self.exact_floats))))
        return rel, self.hint_and_emit(rel, [])

    def child_of_filter(self, depth: int) -> tuple[Rel, Schema]:
        """Mostly any relation; often one a filter can be pushed through or into (the logical rules)."""
        if depth + 1 < self.max_depth and self.budget > 1 and _maybe(self.draw, 50):
            kind = _pick(self.draw, ["join", "project", "aggregate", "join", "set", "region", "cross", "join", "sort",
                                     "set"])
            try:
                self.budget -= 1
                if kind == "set":  # half of them unions: a filter pushed into one input only is wrong there
                    return self.set(depth + 1, union=_maybe(self.draw, 50))
                return getattr(self, kind)(depth + 1)
            except _Skip:
                pass
        return self.relation(depth + 1)

    def focused_predicate(self, schema: Schema, depth: int = 0) -> Expression:
        """A predicate on a run of adjacent columns only (over a join: often one side's)."""
        n = len(schema)
        if n < 2 or not _maybe(self.draw, 50):
            return self.predicate(schema, depth)
        lo = self.draw(st.integers(0, n - 1))
        hi = self.draw(st.integers(lo + 1, n))
        positions = list(range(lo, hi))
        inner = self.predicate(schema.select(positions), depth)
        return remap_fields(inner, dict(enumerate(positions)))

    def filter(self, depth: int) -> tuple[Rel, Schema]:
        child, cs = self.child_of_filter(depth)
        rel = Rel()
        rel.filter.input.CopyFrom(child)
        last_input = (self.evaluator.rows(child.set.inputs[-1])
                      if child.HasField("set") and not child.set.common.HasField("emit") else None)
        cond = self.aimed(self.evaluator.rows(child), lambda: self.focused_predicate(cs), drop_from=last_input)
        if _maybe(self.draw, 15):
            try:
                cond = self.call("and", [(cond, _NULLABLE_BOOL), (self.exists(cs), _REQUIRED_BOOL)], _NULLABLE_BOOL)[0]
            except _Skip:
                pass
        rel.filter.condition.CopyFrom(cond)
        return rel, self.hint_and_emit(rel, [cs])

    def exists(self, schema: Schema) -> Expression:
        """``[NOT] EXISTS (SELECT * FROM t WHERE t.x = outer.y [AND p(t)])``: a correlated subquery (an
        outer reference to a column of ``schema``)."""
        draw = self.draw
        table = _pick(draw, list(self.db.tables.values()))
        base = Schema([c.name for c in table.columns], [c.substrait_type() for c in table.columns])
        pairs = [(i, j) for i in self.cols(schema) for j in self.cols(base)
                 if _class(schema.types[i]) == _class(base.types[j])]
        if not pairs:
            raise _Skip("no column to correlate")
        i, j = _pick(draw, pairs)
        read = Rel()
        r = read.read
        r.named_table.names.append(table.name)
        r.base_schema.CopyFrom(base.to_named_struct())
        outer = Expression()
        outer.selection.direct_reference.struct_field.field = i
        outer.selection.outer_reference.steps_out = 1
        cond = self.call("equal", [self.col(base, j), (outer, schema.types[i])])[0]
        if _maybe(draw, 40):
            cond = self.call("and", [(cond, _NULLABLE_BOOL), (self.predicate(base, 1), _NULLABLE_BOOL)],
                             _NULLABLE_BOOL)[0]
        inner = Rel()
        inner.filter.input.CopyFrom(read)
        inner.filter.condition.CopyFrom(cond)
        e = Expression()
        e.subquery.set_predicate.predicate_op = Expression.Subquery.SetPredicate.PREDICATE_OP_EXISTS
        e.subquery.set_predicate.tuples.CopyFrom(inner)
        if _maybe(draw, 30):
            return self.call("not", [(e, _REQUIRED_BOOL)], _REQUIRED_BOOL)[0]
        return e

    def project(self, depth: int) -> tuple[Rel, Schema]:
        draw = self.draw
        child, cs = self.relation(depth + 1)
        rel = Rel()
        rel.project.input.CopyFrom(child)
        for _ in range(draw(st.integers(1, 3))):
            try:
                if self.allow_windows and _maybe(draw, 40):
                    e, _ = self.window(cs)
                else:
                    e, _ = self.value(cs)
            except _Skip:
                continue
            rel.project.expressions.append(e)
        if not rel.project.expressions:
            rel.project.expressions.append(_bool_literal(True))
        return rel, self.hint_and_emit(rel, [cs])

    def window_project(self, depth: int) -> tuple[Rel, Schema]:
        """A project of 1..2 window functions (and its input's columns)."""
        child, cs = self.relation(depth + 1)
        rel = Rel()
        rel.project.input.CopyFrom(child)
        for _ in range(self.draw(st.integers(1, 2))):
            try:
                rel.project.expressions.append(self.window(cs)[0])
            except _Skip:
                continue
        if not rel.project.expressions:
            raise _Skip("no window function")
        return rel, self.hint_and_emit(rel, [cs])

    def aggregate(self, depth: int) -> tuple[Rel, Schema]:
        draw = self.draw
        child, cs = self.relation(depth + 1)
        rel = Rel()
        a = rel.aggregate
        a.input.CopyFrom(child)
        cols = self.cols(cs)
        keys = draw(st.lists(st.sampled_from(cols), max_size=3, unique=True)) if cols else []
        for i in keys:
            a.grouping_expressions.append(field(i))
        if keys and _maybe(draw, 10):
            try:
                a.grouping_expressions.append(self.value(cs, 1)[0])
            except _Skip:
                pass
        n_keys = len(a.grouping_expressions)
        if n_keys and _maybe(draw, 30):  # grouping sets
            sets = draw(st.lists(st.lists(st.integers(0, n_keys - 1), max_size=n_keys, unique=True),
                                 min_size=2, max_size=3))
            missing = set(range(n_keys)) - {k for s in sets for k in s}
            sets[0] = sets[0] + sorted(missing)
            for s in sets:
                a.groupings.add().expression_references.extend(s)
        elif n_keys or _maybe(draw, 50):
            a.groupings.add().expression_references.extend(range(n_keys))
        n_measures = draw(st.integers(0 if n_keys else 1, 3))
        for _ in range(n_measures):
            try:
                m = a.measures.add()
                m.measure.CopyFrom(self.measure(cs))
            except _Skip:
                del a.measures[-1]
                continue
            if _maybe(draw, 15):
                m.filter.CopyFrom(self.predicate(cs, 1))
        if not n_keys and not a.measures:
            m = a.measures.add()
            m.measure.CopyFrom(self._count_star())
        return rel, self.hint_and_emit(rel, [cs])

    def _count_star(self) -> AggregateFunction:
        agg = AggregateFunction()
        agg.phase = AggregationPhase.AGGREGATION_PHASE_INITIAL_TO_RESULT
        agg.invocation = AggregateFunction.AGGREGATION_INVOCATION_ALL
        agg.function_reference = self.reg.anchor("count", _URN["count"])
        agg.output_type.CopyFrom(make_type("i64"))
        return agg

    def sort(self, depth: int) -> tuple[Rel, Schema]:
        child, cs = self.relation(depth + 1)
        rel = Rel()
        rel.sort.input.CopyFrom(child)
        for _ in range(self.draw(st.integers(1, 2))):
            rel.sort.sorts.append(self.sort_field(cs))
        return rel, self.hint_and_emit(rel, [cs])

    def total_sort(self, child: Rel, cs: Schema) -> tuple[Rel, Schema]:
        """A sort on every column (in a random order), so that any prefix of it is one multiset."""
        rel = Rel()
        rel.sort.input.CopyFrom(child)
        order = self.draw(st.permutations(range(len(cs))))
        for i in order:
            rel.sort.sorts.append(self.sort_field(cs, i))
        return rel, self.schema(rel, [cs])

    def fetch(self, depth: int) -> tuple[Rel, Schema]:
        draw = self.draw
        child, cs = self.relation(depth + 1)
        if not len(cs) or len(self.cols(cs)) != len(cs):
            raise _Skip("cannot sort on every column")
        inner, schema = self.total_sort(child, cs)
        if _maybe(draw, 25):  # Fetch(Project(Sort)): the top-N rule looks through projects
            proj = Rel()
            proj.project.input.CopyFrom(inner)
            try:
                e, _ = self.window(schema) if self.allow_windows and _maybe(draw, 30) else self.value(schema)
                proj.project.expressions.append(e)
            except _Skip:
                proj.project.expressions.append(_bool_literal(True))
            inner, schema = proj, self.schema(proj, [schema])
        rel = Rel()
        rel.fetch.input.CopyFrom(inner)
        self.fetch_bounds(rel)
        return rel, self.hint_and_emit(rel, [schema])

    def fetch_bounds(self, rel: Rel) -> None:
        """A fetch's count (1..6, rarely 0) and, in half of them, an offset (mostly 1: the inputs are
        small, and an offset past the end empties the answer)."""
        draw = self.draw
        rel.fetch.count_expr.literal.i64 = 0 if _maybe(draw, 3) else draw(st.integers(1, 6))
        if _maybe(draw, 50):
            offset = _pick(draw, [1, 1, 1, 2])
            rows = self.evaluator.rows(rel.fetch.input)
            if rows is not None:  # an offset inside the input (past its end: no rows)
                offset = min(offset, max(len(rows) - 1, 0))
            if offset:
                rel.fetch.offset_expr.literal.i64 = offset

    def outer_filter(self, depth: int) -> tuple[Rel, Schema]:
        """A filter over a LEFT/RIGHT/OUTER join with a conjunct on the null-supplying side's columns
        (and often one on the preserved side's): such a conjunct must stay above the join."""
        draw = self.draw
        jt = _pick(draw, [JoinRel.JOIN_TYPE_LEFT, JoinRel.JOIN_TYPE_RIGHT, JoinRel.JOIN_TYPE_OUTER, JoinRel.JOIN_TYPE_LEFT])
        child, cs, n_left = self.join(depth + 1, jt=jt)
        left_cols, right_cols = list(range(n_left)), list(range(n_left, len(cs)))
        null_side = right_cols if jt == JoinRel.JOIN_TYPE_LEFT else left_cols
        kept_side = left_cols if jt == JoinRel.JOIN_TYPE_LEFT else right_cols
        if not null_side and not kept_side:
            raise _Skip("no columns")

        def condition() -> Expression:
            parts = []
            for positions in (null_side, kept_side):
                if positions and (positions is null_side or _maybe(draw, 60)):
                    if positions is null_side and _maybe(draw, 50):
                        parts.append(self.null_side_predicate(cs, positions))
                        continue
                    inner = self.predicate(cs.select(positions), 1)
                    parts.append(remap_fields(inner, dict(enumerate(positions))))
            if not parts:
                return _bool_literal(True)
            return parts[0] if len(parts) == 1 else self.call(
                "and", [(c, _NULLABLE_BOOL) for c in parts], _NULLABLE_BOOL)[0]

        rel = Rel()
        rel.filter.input.CopyFrom(child)
        cond = self.aimed(self.evaluator.rows(child), condition)
        rel.filter.condition.CopyFrom(cond)
        return rel, self.hint_and_emit(rel, [cs])

    def null_side_predicate(self, schema: Schema, positions: list[int]) -> Expression:
        """A condition on a null-supplying side's columns that the rows padded with NULLs pass or
        fail on purpose: ``c IS NULL`` (the unmatched rows: an anti join), ``c IS NOT NULL``, or
        ``p(c) OR c IS NULL``."""
        draw = self.draw
        i = _pick(draw, positions)
        how = _pick(draw, ["is_null", "or_null", "is_not_null"])
        if how != "or_null":
            return self.call(how, [self.col(schema, i)])[0]
        inner = remap_fields(self.predicate(schema.select(positions), 1), dict(enumerate(positions)))
        return self.call("or", [(inner, _NULLABLE_BOOL),
                                (self.call("is_null", [self.col(schema, i)])[0], _REQUIRED_BOOL)], _NULLABLE_BOOL)[0]

    def join(self, depth: int, jt: int | None = None):
        """A join of two relations (``jt``: its type, else a random one). Called with ``jt``, returns
        the join, its schema and the width of its left input, and puts no sort above it."""
        draw = self.draw
        forced = jt is not None
        if jt is None:
            # every type; the outer, anti and right single joins twice (what predicate pushdown gets wrong)
            jt = _pick(draw, [1, 3, 2, 4, 5, 6, 8, 9, 11, 12, 7, 10, 2, 6, 9, 10])
        left, ls = self.relation(depth + 1)
        if self.allow_shared and _maybe(draw, 10):  # a self-join of a shared subtree
            left = self.share(left, ls)
            right, rs = Rel(), ls
            right.CopyFrom(left)
            if _maybe(draw, 50):
                f = Rel()
                f.filter.input.CopyFrom(right)
                f.filter.condition.CopyFrom(self.predicate(rs))
                right = f
        else:
            right, rs = self.relation(depth + 1)
        single = jt in (JoinRel.JOIN_TYPE_LEFT_SINGLE, JoinRel.JOIN_TYPE_RIGHT_SINGLE)
        if single:  # make the other side unique on a key column; the condition equates it
            left_single = jt == JoinRel.JOIN_TYPE_LEFT_SINGLE
            keep, other = (ls, rs) if left_single else (rs, ls)
            pairs = [(i, j) for i in self.cols(keep) for j in self.cols(other)
                     if _class(keep.types[i]) == _class(other.types[j])]
            if not pairs:
                jt = JoinRel.JOIN_TYPE_LEFT if left_single else JoinRel.JOIN_TYPE_RIGHT
                single = False
            else:
                i, j = _pick(draw, pairs)
                agg = Rel()
                agg.aggregate.input.CopyFrom(right if left_single else left)
                agg.aggregate.grouping_expressions.append(field(j))
                agg.aggregate.groupings.add().expression_references.append(0)
                if _maybe(draw, 50):
                    try:
                        agg.aggregate.measures.add().measure.CopyFrom(self.measure(other))
                    except _Skip:
                        del agg.aggregate.measures[:]
                unique = self.schema(agg, [other])
                if left_single:
                    right, rs = agg, unique
                    key = (field(i), ls.types[i]), (field(len(ls)), rs.types[0])
                else:
                    left, ls = agg, unique
                    key = (field(0), ls.types[0]), (field(len(ls) + i), rs.types[i])
        rel = Rel()
        j = rel.join
        j.left.CopyFrom(left)
        j.right.CopyFrom(right)
        j.type = jt
        both = ls.concat(rs)
        conjuncts: list[Expression] = []
        if single:
            conjuncts.append(self.call("equal", list(key))[0])
        n_eq = (2 if _maybe(draw, 30) else draw(st.integers(0, 2))) if not _maybe(draw, 10) else 0
        first_key = None
        left_rows = self.evaluator.rows(left) if n_eq else None
        right_rows = self.evaluator.rows(right) if n_eq else None
        for _ in range(n_eq):
            pairs = [(a, len(ls) + b) for a in self.cols(ls) for b in self.cols(rs)
                     if _class(ls.types[a]) == _class(rs.types[b])]
            if not pairs:
                break
            # null-safe keys often: with NULL keys on both sides they match (and an `=` would not)
            op = "equal" if not _maybe(draw, 35) else _pick(draw, ["is_not_distinct_from", "is_not_distinct_from",
                                                                   "is_not_distinct_from", "lt", "not_equal"])
            if not _maybe(draw, 20):  # mostly keys whose columns share a value: the join keeps rows
                null_pairs = []
                if op == "is_not_distinct_from" and left_rows and right_rows:  # ... a NULL, for null-safe keys
                    null_pairs = [(a, b) for a, b in pairs if any(r[a] is None for r in left_rows)
                                  and any(r[b - len(ls)] is None for r in right_rows)]
                pairs = null_pairs or self.matching(pairs, left_rows, right_rows, len(ls))
            named = [(a, b) for a, b in pairs if both.names[a] == both.names[b]]
            if named and _maybe(draw, 50):  # the same column of two tables (or of one twice): keys match
                pairs = named
            a, b = _pick(draw, pairs)
            conjuncts.append(self.call(op, [self.col(both, a), self.col(both, b)])[0])
            if op == "equal" and first_key is None:
                first_key = (a, b - len(ls))
        if first_key is not None and _maybe(draw, 15):  # inputs sorted on the key: a merge join is free
            direction = _pick(draw, [1, 2, 3, 4])
            for side, key in ((j.left, first_key[0]), (j.right, first_key[1])):
                wrapped = Rel()
                wrapped.sort.input.CopyFrom(side)
                wrapped.sort.sorts.add(expr=field(key), direction=direction)
                side.CopyFrom(wrapped)
        # a conjunct on one side only; often in outer joins, where one on the preserved side must
        # stay in the ON clause (it pads rows instead of removing them)
        outer = jt in (JoinRel.JOIN_TYPE_LEFT, JoinRel.JOIN_TYPE_RIGHT, JoinRel.JOIN_TYPE_OUTER)
        if _maybe(draw, 60 if outer else 35):
            side, offset, rows = (ls, 0, left) if _maybe(draw, 50) else (rs, len(ls), right)
            conjuncts.append(shift_fields(self.aimed(self.evaluator.rows(rows), lambda: self.predicate(side, 1)),
                                          offset))
        if _maybe(draw, 10):
            conjuncts.append(self.predicate(both, 1))
        if len(conjuncts) > 1:
            j.expression.CopyFrom(self.call("and", [(c, _NULLABLE_BOOL) for c in conjuncts], _NULLABLE_BOOL)[0])
        elif conjuncts:
            j.expression.CopyFrom(conjuncts[0])
        else:
            j.expression.CopyFrom(_bool_literal(True))
        if jt in (1, 2, 3, 4) and _maybe(draw, 10):
            j.post_join_filter.CopyFrom(self.predicate(both, 1))
        if forced:
            return rel, self.schema(rel, [ls, rs]), len(ls)
        schema = self.hint_and_emit(rel, [ls, rs])
        if first_key is not None and not j.common.HasField("emit") and _maybe(draw, 15):
            # A sort on the join's key above it: a merge join may be chosen. Right semi/anti joins
            # (and mark) joins output only the right input (and the mark): the key is the right one.
            right_only = JoinRel.JoinType.Name(jt) in ("JOIN_TYPE_RIGHT_SEMI", "JOIN_TYPE_RIGHT_ANTI", "JOIN_TYPE_RIGHT_MARK")
            top = Rel()
            top.sort.input.CopyFrom(rel)
            top.sort.sorts.append(self.sort_field(schema, first_key[1] if right_only else first_key[0]))
            return top, self.schema(top, [schema])
        return rel, schema

    def region(self, depth: int) -> tuple[Rel, Schema]:
        """3..4 inputs joined by inner joins, or comma-joined (cross products under one filter of
        equalities), as the join-ordering and join-condition rules look for."""
        draw = self.draw
        parts = [self.relation(max(depth + 1, self.max_depth - 1)) for _ in range(draw(st.integers(3, 4)))]
        comma = _maybe(draw, 50)
        rel, schema = parts[0]
        offsets = [0]
        part_rows = [self.evaluator.rows(part) for part, _ in parts]
        for part, ps in parts[1:]:
            offsets.append(len(schema))
            both = schema.concat(ps)
            top = Rel()
            if comma:
                top.cross.left.CopyFrom(rel)
                top.cross.right.CopyFrom(part)
            else:
                top.join.left.CopyFrom(rel)
                top.join.right.CopyFrom(part)
                top.join.type = JoinRel.JOIN_TYPE_INNER
                pairs = [(a, len(schema) + b) for a in self.cols(schema) for b in self.cols(ps)
                         if _class(schema.types[a]) == _class(ps.types[b])]
                if pairs and not _maybe(draw, 10):
                    if not _maybe(draw, 20):
                        # mostly keys that share a value with the part just joined (rows of the
                        # parts before it: the part where column a lies)
                        k = len(offsets) - 1
                        pairs = [(a, b) for a, b in pairs
                                 if self._share(part_rows, offsets, a, k, b - len(schema))] or pairs
                    a, b = _pick(draw, pairs)
                    top.join.expression.CopyFrom(self.call("equal", [self.col(both, a), self.col(both, b)])[0])
                else:
                    top.join.expression.CopyFrom(_bool_literal(True))
            rel, schema = top, self.schema(top, [schema, ps])
        conjuncts = []
        ranges = [range(o, o + len(ps)) for o, (_, ps) in zip(offsets, parts, strict=True)]
        for _ in range(draw(st.integers(0 if not comma else 1, 2))):
            a = _pick(draw, self.cols(schema) or [None])
            if a is None:
                break
            others = [b for b in self.cols(schema) if _class(schema.types[b]) == _class(schema.types[a])
                      and not any(a in r and b in r for r in ranges)]
            # mostly a column of the same name (the same column of two tables, or of one table twice:
            # the equality holds for some rows)
            named = [b for b in others if schema.names[b] == schema.names[a]]
            if named and _maybe(draw, 60):
                others = named
            if not _maybe(draw, 20):  # mostly columns that share a value: the equality keeps rows
                others = [b for b in others if self._share(part_rows, offsets, a, None, b)] or others
            if not others:
                continue
            b = _pick(draw, others)
            conjuncts.append(self.call("equal", [self.col(schema, a), self.col(schema, b)])[0])
            if _maybe(draw, 50):  # a second equality between the same two inputs
                ra = next(r for r in ranges if a in r)
                rb = next(r for r in ranges if b in r)
                more = [(x, y) for x in self.cols(schema) if x in ra for y in self.cols(schema) if y in rb
                        and _class(schema.types[x]) == _class(schema.types[y]) and (x, y) != (a, b)]
                if more:
                    x, y = _pick(draw, more)
                    conjuncts.append(self.call("equal", [self.col(schema, x), self.col(schema, y)])[0])
        if _maybe(draw, 30):
            conjuncts.append(self.predicate(schema, 1))
        if conjuncts:
            top = Rel()
            top.filter.input.CopyFrom(rel)
            cond = conjuncts[0] if len(conjuncts) == 1 else self.call(
                "and", [(c, _NULLABLE_BOOL) for c in conjuncts], _NULLABLE_BOOL)[0]
            top.filter.condition.CopyFrom(cond)
            return top, self.hint_and_emit(top, [schema])
        return rel, schema

    @staticmethod
    def _share(part_rows: list, offsets: list[int], a: int, part_b: int | None, b: int) -> bool:
        """Whether column ``a`` (a position in the region) shares a value with column ``b`` (a
        position in part ``part_b``, or in the region when ``part_b`` is None)."""
        def locate(pos: int) -> tuple[int, int]:
            k = max(i for i, o in enumerate(offsets) if o <= pos)
            return k, pos - offsets[k]
        ka, ia = locate(a)
        kb, ib = (part_b, b) if part_b is not None else locate(b)
        if ka >= len(part_rows) or kb >= len(part_rows) or not part_rows[ka] or not part_rows[kb]:
            return True
        return rows_share_value(part_rows[ka], ia, part_rows[kb], ib)

    def cross(self, depth: int) -> tuple[Rel, Schema]:
        left, ls = self.relation(depth + 1)
        right, rs = self.relation(depth + 1)
        rel = Rel()
        rel.cross.left.CopyFrom(left)
        rel.cross.right.CopyFrom(right)
        return rel, self.hint_and_emit(rel, [ls, rs])

    def conform(self, rel: Rel, schema: Schema, target: Schema) -> Rel:
        """A project of ``rel`` whose output has ``target``'s column types (a column of the same type
        where there is one, else a literal)."""
        out = Rel()
        out.project.input.CopyFrom(rel)
        used: set[int] = set()
        for t in target.types:
            same = [i for i in range(len(schema)) if _class(schema.types[i]) == _class(t) and i not in used]
            if same and not _maybe(self.draw, 15):
                i = _pick(self.draw, same)
                used.add(i)
                out.project.expressions.append(field(i))
            else:
                out.project.expressions.append(self.lit_for(with_nullability(t, False), null_percent=30)[0])
        out.project.common.emit.output_mapping.extend(range(len(schema), len(schema) + len(target)))
        return out

    def set(self, depth: int, union: bool = False) -> tuple[Rel, Schema]:
        """A set operation (``union``: a union, which a filter above must filter in every input)."""
        draw = self.draw
        op = _pick(draw, [6, 5] if union else [6, 5, 1, 7, 2, 3, 4, 8, 6, 5])  # every operation; unions twice
        first, fs = self.relation(depth + 1)
        if self.allow_shared and _maybe(draw, 30):
            first = self.share(first, fs)
        inputs = [(first, fs)]
        for _ in range(draw(st.integers(1, 2))):
            # A minus of an unfiltered copy is empty, an intersection with another relation mostly:
            # those take a filtered copy more often.
            union = op in (5, 6)
            how = _pick(draw, ["filtered", "same", "other"] if union else ["filtered", "filtered", "same", "other"])
            if not union and how == "same" and op in (1, 2, 7):
                how = "filtered"
            if how == "other":
                other, os_ = self.relation(depth + 1)
                rel = self.conform(other, os_, fs)
                inputs.append((rel, self.schema(rel, [os_])))
                continue
            copy = Rel()
            copy.CopyFrom(first)
            if how == "filtered":
                f = Rel()
                f.filter.input.CopyFrom(copy)
                f.filter.condition.CopyFrom(self.predicate(fs, 1))
                copy = f
            inputs.append((copy, fs))
        rel = Rel()
        rel.set.op = op
        for r, _ in inputs:
            rel.set.inputs.append(r)
        return rel, self.hint_and_emit(rel, [s for _, s in inputs])

    # --------------------------------------------------------------------------------- plan

    def build(self) -> Plan:
        draw = self.draw
        if self.allow_shared and _maybe(draw, 15):
            rel, schema = self.relation(max(1, self.max_depth - 1))
            self.share(rel, schema)
        rel, schema = self.relation(0)
        if _maybe(draw, 25):  # a sorted answer: its order is compared too
            if _maybe(draw, 40) and len(self.cols(schema)) == len(schema) and len(schema):
                inner, schema2 = self.total_sort(rel, schema)
                top = Rel()
                top.fetch.input.CopyFrom(inner)
                self.fetch_bounds(top)
                rel, schema = top, self.schema(top, [schema2])
            else:
                top = Rel()
                top.sort.input.CopyFrom(rel)
                for _ in range(draw(st.integers(1, 2))):
                    top.sort.sorts.append(self.sort_field(schema))
                rel, schema = top, self.schema(top, [schema])
        root = self.plan.relations.add().root
        root.input.CopyFrom(rel)
        root.names.extend(f"o{i}" for i in range(len(schema)))
        _drop_unread_shared(self.plan)
        return self.plan


def _references(msg) -> list:
    """Every ``ReferenceRel`` inside ``msg`` (a protobuf message), subqueries included."""
    out = []
    stack = [msg]
    while stack:
        m = stack.pop()
        if isinstance(m, Rel) and m.WhichOneof("rel_type") == "reference":
            out.append(m.reference)
            continue
        for fd, value in m.ListFields():
            if fd.message_type is None:
                continue
            if fd.label == fd.LABEL_REPEATED:
                if fd.message_type.GetOptions().map_entry:
                    continue
                stack.extend(value)
            else:
                stack.append(value)
    return out


def _drop_unread_shared(plan: Plan) -> None:
    """Remove the shared subtrees the root does not read (directly or through other shared subtrees)
    and renumber the references: every relation of a generated plan is run."""
    roots = [i for i, r in enumerate(plan.relations) if r.WhichOneof("rel_type") == "root"]
    read: set[int] = set()
    todo = list(roots)
    while todo:
        i = todo.pop()
        body = plan.relations[i].root.input if i in roots else plan.relations[i].rel
        for ref in _references(body):
            if ref.subtree_ordinal not in read:
                read.add(ref.subtree_ordinal)
                todo.append(ref.subtree_ordinal)
    keep = [i for i in range(len(plan.relations)) if i in roots or i in read]
    if len(keep) == len(plan.relations):
        return
    renumber = {old: new for new, old in enumerate(keep)}
    kept = [plan.relations[i] for i in keep]
    for r in kept:
        for ref in _references(r):
            ref.subtree_ordinal = renumber[ref.subtree_ordinal]
    copies = [PlanRel() for _ in kept]
    for c, r in zip(copies, kept, strict=True):
        c.CopyFrom(r)
    del plan.relations[:]
    plan.relations.extend(copies)


class InvalidPlan(AssertionError):
    """The generator built a plan that ``check_plan`` rejects (a bug in the generator)."""


#: How often :func:`plans` draws a new plan in place of one the evaluator knows to return no rows.
EMPTY_REDRAWS = 3


@st.composite
def plans(draw, database: Database, *, max_depth: int = 3, max_relations: int = 8, shared: bool = True,
          windows: bool = True) -> Plan:
    """A random valid plan over ``database`` (see the module docstring); ``check_plan`` is empty.

    A plan of which the row evaluator cannot tell one sure row is drawn again (up to
    :data:`EMPTY_REDRAWS` times): a wrong plan mostly returns the same empty answer as the right one."""
    for _ in range(EMPTY_REDRAWS + 1):
        gen = _Gen(draw, database, max_depth=max_depth, max_relations=max_relations, shared=shared,
                   windows=windows)
        plan = gen.build()
        root = next(r.root for r in plan.relations if r.WhichOneof("rel_type") == "root")
        if RowEvaluator(plan, database, gen.function_name, sure=True).rows(root.input):
            break
    problems = check_plan(plan)
    if problems:
        raise InvalidPlan("; ".join(str(p) for p in problems[:3]))
    return plan


# -------------------------------------------------------------------------------------- statistics

_SPARK_TYPES = {"i8": "tinyint", "i16": "smallint", "i32": "int", "i64": "bigint", "fp32": "float",
                "fp64": "double", "string": "string", "bool": "boolean", "date": "date",
                "timestamp": "timestamp_ntz"}


def _stat_value(spec: str, value):
    """A column value in the statistics JSON convention (None for what JSON cannot carry)."""
    if value is None:
        return None
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, decimal.Decimal):
        return float(value)
    if isinstance(value, datetime.date | datetime.datetime):
        return value.isoformat()
    return value


@st.composite
def statistics(draw, database: Database):
    """``{table name: TableStatistics}`` for some of ``database``'s tables, or None: true or lying row
    counts, NDVs, null counts and min/max."""
    from optimizer.cost.statistics import ColumnStatistics, TableStatistics

    if not _maybe(draw, 70):
        return None
    out = {}
    for name, table in database.tables.items():
        if _maybe(draw, 20):
            continue
        truth = float(len(table.rows))
        rows = truth if not _maybe(draw, 50) else float(_pick(draw, [0, 1, 10, 1000, 1e9]))
        columns = {}
        for i, c in enumerate(table.columns):
            if _maybe(draw, 30):
                continue
            present = [row[i] for row in table.rows if row[i] is not None]
            spec = c.type
            lie = _maybe(draw, 40)
            if lie:
                lo, hi = draw(values(spec)), draw(values(spec))
                ndv = float(_pick(draw, [1, 0, 2, 1000, 1e9]))
                nulls = float(_pick(draw, [0, 1, 1e6]))
            else:
                finite = [v for v in present if not (isinstance(v, float) and math.isnan(v))]
                lo, hi = (min(finite), max(finite)) if finite else (None, None)
                ndv = float(len(set(map(repr, present))))
                nulls = float(len(table.rows) - len(present))
            spark_type = _SPARK_TYPES.get(spec) or spec.replace(" ", "")
            columns[c.name] = ColumnStatistics(
                ndv=ndv, min=_stat_value(spec, lo), max=_stat_value(spec, hi), null_count=nulls,
                data_type=spark_type,
            )
        out[name] = TableStatistics(row_count=rows, size_bytes=rows * 16, columns=columns)
    return out


_CAP_FUNCTIONS = ["equal", "lt", "gt", "not_equal", "lte", "gte", "and", "or", "not", "is_null", "is_not_null",
                  "in", "between", "like", "starts_with", "is_nan", "is_not_distinct_from", "is_distinct_from",
                  "add", "multiply", "cast", "if_then", "coalesce", "concat", "upper", "*"]
_CAP_ARGS = [None, ["*"], ["integer", "integer"], ["numeric", "numeric"], ["text", "text"],
             ["temporal", "temporal"], ["boolean", "..."], ["*", "..."], ["float", "*"]]


@st.composite
def capability_profiles(draw):
    """A random reader-capability profile (its JSON object), or None for the default profile. Any
    profile is honest for the Spark backend, which applies ``ReadRel.filter`` exactly."""
    if not _maybe(draw, 60):
        return None
    rules = []
    for _ in range(draw(st.integers(0, 6))):
        names = draw(st.lists(st.sampled_from(_CAP_FUNCTIONS), min_size=1, max_size=3, unique=True))
        entry: dict = {"function": names, "support": _pick(draw, ["full", "best_effort", "none"])}
        args = _pick(draw, _CAP_ARGS)
        if args is not None:
            entry["args"] = args
        shape = _pick(draw, [None, "column_op_constant", "prefix_pattern"])
        if shape is not None:
            entry["shape"] = shape
        rules.append(entry)
    read_types = _pick(draw, [["named_table", "local_files"], ["named_table", "virtual_table"], ["named_table"]])
    return {"name": "random", "default": _pick(draw, ["none", "best_effort", "full"]), "read_types": read_types,
            "constant_folding": draw(st.booleans()), "rules": rules}


@st.composite
def optimizer_configs(draw) -> dict:
    """Keyword arguments of :class:`optimizer.driver.OptimizerConfig` (join DP limit, broadcast
    threshold, iteration cap, estimates)."""
    return {
        "dp_join_limit": _pick(draw, [14, 1, 2, 3]),
        "dp_pair_budget": _pick(draw, [10_000, 1, 4]),
        "broadcast_threshold_bytes": float(_pick(draw, [10 * 1024 * 1024, 0, 1000, 1e15])),
        "max_iterations": _pick(draw, [10, 2, 50]),
        "annotate_estimates": draw(st.booleans()),
    }


@st.composite
def cases(draw, *, max_tables: int = 3, max_rows: int = 8, max_depth: int = 3, max_relations: int = 8,
          types: Sequence[str] = TYPE_SPECS) -> DiffCase:
    """A whole differential test: tables, a plan over them, statistics, a profile, a configuration."""
    db = draw(databases(max_tables=max_tables, max_rows=max_rows, types=types))
    plan = draw(plans(db, max_depth=max_depth, max_relations=max_relations))
    return DiffCase(
        database=db,
        plan=plan,
        statistics=draw(statistics(db)),
        capabilities=draw(capability_profiles()),
        config=draw(optimizer_configs()),
    )
