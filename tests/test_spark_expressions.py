"""Unit tests of the expression half of the Spark backend: Substrait expressions compiled over a small
DataFrame, evaluated by Spark, compared with known answers (many expressions per select: few Spark jobs)."""

from __future__ import annotations

import datetime as dt
import decimal
import math
import uuid
from functools import partial

import pytest
from substrait.proto import (
    AggregateFunction,
    AggregationPhase,
    Expression,
    FunctionArgument,
    FunctionOption,
    ReadRel,
    Rel,
    SortField,
    Type,
)

from optimizer.errors import PlanError, UnsupportedError
from optimizer.load.functions import FunctionTable, resolve
from optimizer.schema.types import make_type
from optimizer.spark.sql import Context, Frame
from optimizer.spark.sql_columns import Window
from optimizer.spark.sql_columns import functions as F
from testing.builder import lit as typed_lit

pytestmark = pytest.mark.spark

N = Type.NULLABILITY_NULLABLE
E = Expression
WF = Expression.WindowFunction


# ------------------------------------------------------------------------------------ plan builders


def ty(kind: str, **kw) -> Type:
    return make_type(kind, True, **kw)


def lit(**kw) -> Expression:
    return Expression(literal=Expression.Literal(**kw))


# Literals of one kind each: i32(5), i64(5), f64(1.5), s("x"), b(True).
i32, i64, f64, s, b = (partial(typed_lit, kind=kind) for kind in ("i32", "i64", "fp64", "string", "bool"))


def null(t: Type) -> Expression:
    return lit(null=t)


def dec(value: str, p: int, sc: int) -> Expression:
    unscaled = int(decimal.Decimal(value).scaleb(sc, decimal.Context(prec=100)))
    return lit(
        decimal=Expression.Literal.Decimal(
            value=unscaled.to_bytes(16, "little", signed=True), precision=p, scale=sc
        )
    )


def date(y: int, m: int, d: int) -> Expression:
    return lit(date=(dt.date(y, m, d) - dt.date(1970, 1, 1)).days)


def field(i: int, *path: int) -> Expression:
    seg = Expression.ReferenceSegment(struct_field=Expression.ReferenceSegment.StructField(field=i))
    top = seg
    for j in path:
        child = Expression.ReferenceSegment(struct_field=Expression.ReferenceSegment.StructField(field=j))
        seg.struct_field.child.CopyFrom(child)
        seg = seg.struct_field.child
    return Expression(
        selection=Expression.FieldReference(
            direct_reference=top, root_reference=Expression.FieldReference.RootReference()
        )
    )


def outer(i: int, steps: int = 1) -> Expression:
    seg = Expression.ReferenceSegment(struct_field=Expression.ReferenceSegment.StructField(field=i))
    return Expression(
        selection=Expression.FieldReference(
            direct_reference=seg, outer_reference=Expression.FieldReference.OuterReference(steps_out=steps)
        )
    )


def cast(e: Expression, t: Type, behavior: int = 0) -> Expression:
    return Expression(cast=Expression.Cast(type=t, input=e, failure_behavior=behavior))


class Functions:
    """A function table that declares names as the test uses them."""

    def __init__(self) -> None:
        self.anchors: dict[str, int] = {}

    def anchor(self, name: str) -> int:
        return self.anchors.setdefault(name, len(self.anchors) + 1)

    def table(self) -> FunctionTable:
        outer_self = self

        class Table(FunctionTable):
            def get(self, anchor, path=None):
                for name, a in outer_self.anchors.items():
                    if a == anchor:
                        return resolve(anchor, name, None)
                return super().get(anchor, path)

        return Table([])


FNS = Functions()


def _args(args) -> list[FunctionArgument]:
    out = []
    for a in args:
        if isinstance(a, str):
            out.append(FunctionArgument(enum=a))
        else:
            out.append(FunctionArgument(value=a))
    return out


def _opts(options: dict | None) -> list[FunctionOption]:
    return [
        FunctionOption(name=k, preference=[v] if isinstance(v, str) else v)
        for k, v in (options or {}).items()
    ]


def fn(name: str, *args, out: Type | None = None, **options) -> Expression:
    """A scalar function call; string arguments are enum arguments."""
    sf = Expression.ScalarFunction(
        function_reference=FNS.anchor(name), arguments=_args(args), options=_opts(options)
    )
    if out is not None:
        sf.output_type.CopyFrom(out)
    return Expression(scalar_function=sf)


def agg(
    name: str, *args, out: Type | None = None, distinct: bool = False, sorts=(), **options
) -> AggregateFunction:
    af = AggregateFunction(
        function_reference=FNS.anchor(name),
        arguments=_args(args),
        options=_opts(options),
        phase=AggregationPhase.AGGREGATION_PHASE_INITIAL_TO_RESULT,
        invocation=AggregateFunction.AGGREGATION_INVOCATION_DISTINCT if distinct else 0,
        sorts=list(sorts),
    )
    if out is not None:
        af.output_type.CopyFrom(out)
    return af


def sort(e: Expression, direction: int = SortField.SORT_DIRECTION_ASC_NULLS_FIRST) -> SortField:
    return SortField(expr=e, direction=direction)


def bound(kind: str, offset: int | None = None) -> WF.Bound:
    if kind == "preceding":
        return WF.Bound(preceding=WF.Bound.Preceding(offset=offset))
    if kind == "following":
        return WF.Bound(following=WF.Bound.Following(offset=offset))
    if kind == "current":
        return WF.Bound(current_row=WF.Bound.CurrentRow())
    return WF.Bound(unbounded=WF.Bound.Unbounded())


def win(
    name, *args, out=None, partitions=(), sorts=(), lower=None, upper=None, rows=True, **options
) -> Expression:
    w = WF(
        function_reference=FNS.anchor(name),
        arguments=_args(args),
        options=_opts(options),
        partitions=list(partitions),
        sorts=list(sorts),
        bounds_type=WF.BOUNDS_TYPE_ROWS if rows else WF.BOUNDS_TYPE_RANGE,
        phase=AggregationPhase.AGGREGATION_PHASE_INITIAL_TO_RESULT,
    )
    if lower is not None:
        w.lower_bound.CopyFrom(lower)
    if upper is not None:
        w.upper_bound.CopyFrom(upper)
    if out is not None:
        w.output_type.CopyFrom(out)
    return Expression(window_function=w)


# --------------------------------------------------------------------------------------- fixtures

COLUMNS = ["id", "a", "b", "d", "s", "p", "q", "dt", "n", "t8"]
TYPES = [ty("i32"), ty("i32"), ty("i64"), ty("fp64"), ty("string"), ty("bool"), ty("bool"), ty("date"),
         ty("decimal", precision=15, scale=2), ty("i8")]  # fmt: skip
ROWS = [
    (1, 7, 2, 2.5, "hello", True, True, dt.date(2024, 2, 29), decimal.Decimal("10.25"), 100),
    (2, -7, -2, -0.5, "World", True, None, dt.date(1999, 12, 31), decimal.Decimal("-3.10"), -100),
    (3, None, 0, None, None, False, None, None, None, None),
    (
        4,
        2147483647,
        9223372036854775807,
        float("nan"),
        "abc",
        None,
        None,
        dt.date(2000, 1, 1),
        decimal.Decimal("0.00"),
        127,
    ),
]
SCHEMA = (
    "id int, a int, b bigint, d double, s string, p boolean, q boolean, dt date, n decimal(15,2), t8 tinyint"
)


@pytest.fixture(scope="module", params=[True, False], ids=["ansi", "non_ansi"])
def ansi(spark, request):
    """The session with ANSI mode on (Spark 4's default, the tool's sessions) or off (a user's choice):
    the expressions are compiled for the mode and must give the same answers in both."""
    from benchmarks.common import conf_set

    with conf_set(spark, {"spark.sql.ansi.enabled": str(request.param).lower()}):
        yield request.param


@pytest.fixture(scope="module")
def env(spark, ansi):
    from optimizer.spark.expressions import ExpressionCompiler, Scope

    ctx = Context(spark)
    df = _frame(ctx, spark.createDataFrame(ROWS, SCHEMA))
    other = _frame(ctx, spark.createDataFrame([(1, 10), (1, 20), (2, None), (5, 30)], "k int, v int"))
    tables = {"other": (other, ["k", "v"], [ty("i32"), ty("i32")])}

    def subquery(rel: Rel, scope, path):
        return _mini_rel(compiler, rel, scope, path, tables)

    compiler = ExpressionCompiler(FNS.table(), subquery, ansi=ansi)
    scope = Scope(df, COLUMNS, TYPES)
    return compiler, scope, tables


def _frame(ctx: Context, df) -> Frame:
    """A DataFrame as a query of ``ctx`` (what the backend compiles expressions over)."""
    return Frame.table(ctx, ctx.bind(df))


def _mini_rel(compiler, rel: Rel, outer_scope, path, tables):
    """Just enough relations for subquery tests: read (named), filter, project, aggregate without groups."""
    from optimizer.spark.expressions import Scope

    kind = rel.WhichOneof("rel_type")
    if kind == "read":
        df, cols, types = tables[rel.read.named_table.names[0]]
        return df, cols
    sub = getattr(rel, kind)
    df, cols = _mini_rel(compiler, sub.input, outer_scope, f"{path}.{kind}.input", tables)
    types = tables["other"][2] if cols == ["k", "v"] else None
    scope = Scope(df, cols, types, outer=outer_scope)
    if kind == "filter":
        return df.where(compiler.compile(sub.condition, scope, f"{path}.filter.condition")), cols
    if kind == "project":
        names = [f"p{i}" for i in range(len(sub.expressions))]
        exprs = [
            compiler.compile(e, scope, f"{path}.project.expressions[{i}]").alias(n)
            for i, (e, n) in enumerate(zip(sub.expressions, names, strict=True))
        ]
        return df.select(*[F.col(c) for c in cols], *exprs).select(*names), names
    if kind == "aggregate":
        names = [f"m{i}" for i in range(len(sub.measures))]
        ms = [
            compiler.aggregate(m.measure, scope, f"{path}.aggregate.measures[{i}]").alias(n)
            for i, (m, n) in enumerate(zip(sub.measures, names, strict=True))
        ]
        return df.select(*ms), names  # (not agg: Spark cannot group a correlated DataFrame eagerly)
    raise AssertionError(kind)


def read(name: str) -> Rel:
    return Rel(read=ReadRel(named_table=ReadRel.NamedTable(names=[name])))


def filter_rel(inp: Rel, cond: Expression) -> Rel:
    r = Rel()
    r.filter.input.CopyFrom(inp)
    r.filter.condition.CopyFrom(cond)
    return r


def project_rel(inp: Rel, *exprs: Expression) -> Rel:
    r = Rel()
    r.project.input.CopyFrom(inp)
    r.project.expressions.extend(exprs)
    return r


def aggregate_rel(inp: Rel, *measures: AggregateFunction) -> Rel:
    r = Rel()
    r.aggregate.input.CopyFrom(inp)
    for m in measures:
        r.aggregate.measures.add().measure.CopyFrom(m)
    return r


def run(env, *exprs: Expression) -> list[tuple]:
    """Evaluate expressions over the test rows; one tuple per row (ordered by id)."""
    compiler, scope, _ = env
    cols = [compiler.compile(e, scope, f"e[{i}]").alias(f"c{i}") for i, e in enumerate(exprs)]
    rows = scope.df.select("id", *cols).orderBy("id").collect()
    return [tuple(r)[1:] for r in rows]


def column(env, e: Expression) -> list:
    return [r[0] for r in run(env, e)]


def columns(env, *exprs: Expression) -> list[list]:
    rows = run(env, *exprs)
    return [list(c) for c in zip(*rows, strict=True)]


def same(x, y) -> bool:
    if isinstance(x, float) and isinstance(y, float):
        return (math.isnan(x) and math.isnan(y)) or x == y and math.copysign(1, x) == math.copysign(1, y)
    return x == y and type(x) is type(y) if not isinstance(x, int | float) else x == y


def check(env, cases: list[tuple[Expression, list]]) -> None:
    got = columns(env, *[e for e, _ in cases])
    for i, ((_, want), have) in enumerate(zip(cases, got, strict=True)):
        assert len(want) == len(have), (i, want, have)
        for w, h in zip(want, have, strict=True):
            assert same(w, h) or (w == h and not isinstance(w, float)), f"case {i}: want {want}, got {have}"


def const(env, *exprs: Expression) -> list:
    """The value of constant expressions (first row)."""
    return list(run(env, *exprs)[0])


# ------------------------------------------------------------------------------------------ literals


def test_literals_of_every_type(env):
    nested_list = lit(
        list=Expression.Literal.List(values=[Expression.Literal(i32=1), Expression.Literal(i32=2)])
    )
    struct = lit(
        struct=Expression.Literal.Struct(fields=[Expression.Literal(i32=1), Expression.Literal(string="x")])
    )
    kv = Expression.Literal.Map.KeyValue(key=Expression.Literal(string="k"), value=Expression.Literal(i64=5))
    mp = lit(map=Expression.Literal.Map(key_values=[kv]))
    u = uuid.UUID("12345678-1234-5678-1234-567812345678")
    ts = lit(precision_timestamp=Expression.Literal.PrecisionTimestamp(precision=3, value=1_700_000_000_123))
    tstz = lit(
        precision_timestamp_tz=Expression.Literal.PrecisionTimestamp(precision=6, value=1_700_000_000_123_456)
    )
    iym = lit(interval_year_to_month=Expression.Literal.IntervalYearToMonth(years=1, months=2))
    ids = lit(
        interval_day_to_second=Expression.Literal.IntervalDayToSecond(
            days=1, seconds=5, precision=3, subseconds=250
        )
    )
    values = const(
        env,
        b(True),
        lit(i8=-5),
        lit(i16=300),
        i32(-7),
        i64(2**40),
        lit(fp32=1.5),
        f64(-0.25),
        s("héllo"),
        lit(binary=b"\x00\x01"),
        date(2020, 2, 29),
        lit(fixed_char="ab "),
        lit(var_char=Expression.Literal.VarChar(value="vc", length=5)),
        lit(fixed_binary=b"\xff"),
        dec("-12345678901234567890.123456", 38, 6),
        ts,
        tstz,
        cast(iym, ty("string")),
        ids,
        nested_list,
        struct,
        mp,
        lit(empty_list=Type.List(type=ty("i64"), nullability=N)),
        lit(empty_map=Type.Map(key=ty("string"), value=ty("i32"), nullability=N)),
        lit(uuid=u.bytes),
        null(ty("decimal", precision=10, scale=3)),
        null(ty("date")),
    )
    assert values[:8] == [True, -5, 300, -7, 2**40, 1.5, -0.25, "héllo"]
    assert values[8] == bytearray(b"\x00\x01")
    assert values[9] == dt.date(2020, 2, 29)
    assert values[10:12] == ["ab ", "vc"]
    assert values[12] == bytearray(b"\xff")
    assert values[13] == decimal.Decimal("-12345678901234567890.123456")
    assert values[14] == dt.datetime(2023, 11, 14, 22, 13, 20, 123000)
    assert (
        values[15] == dt.datetime(2023, 11, 14, 22, 13, 20, 123456, tzinfo=values[15].tzinfo)
        or values[15].timestamp() == 1_700_000_000.123456
    )
    assert values[16] == "INTERVAL '1-2' YEAR TO MONTH"
    assert values[17] == dt.timedelta(days=1, seconds=5, milliseconds=250)
    assert values[18] == [1, 2]
    assert tuple(values[19]) == (1, "x")
    assert values[20] == {"k": 5}
    assert values[21] == [] and values[22] == {}
    assert values[23] == str(u)
    assert values[24] is None and values[25] is None
    # the types are the exact ones the literals declare
    compiler, scope, _ = env
    df = scope.df.select(
        compiler.compile(dec("1.5", 10, 3), scope, "x").alias("d"),
        compiler.compile(null(ty("decimal", precision=10, scale=3)), scope, "x").alias("n"),
        compiler.compile(lit(i8=1), scope, "x").alias("i8"),
        compiler.compile(ts, scope, "x").alias("ts"),
        compiler.compile(tstz, scope, "x").alias("tstz"),
        compiler.compile(iym, scope, "x").alias("iym"),
    )
    types = [f.dataType.simpleString() for f in df.schema.fields]
    assert types == [
        "decimal(10,3)",
        "decimal(10,3)",
        "tinyint",
        "timestamp_ntz",
        "timestamp",
        "interval year to month",
    ]


def test_sub_microsecond_literal_is_unsupported(env):
    compiler, scope, _ = env
    ts = lit(precision_timestamp=Expression.Literal.PrecisionTimestamp(precision=9, value=1_000_000_001))
    with pytest.raises(UnsupportedError):
        compiler.compile(ts, scope, "e")
    ok = lit(precision_timestamp=Expression.Literal.PrecisionTimestamp(precision=9, value=1_000_001_000))
    compiler.compile(ok, scope, "e")


def test_interval_literal_past_sparks_range_is_unsupported(env):
    """Spark holds a day-time interval as a long of microseconds (about 106 million days): one past it is
    refused by name, not an OverflowError from Python's timedelta."""
    compiler, scope, _ = env
    huge = lit(interval_day_to_second=Expression.Literal.IntervalDayToSecond(days=2**31 - 1, seconds=1))
    with pytest.raises(UnsupportedError, match="interval literal out of the range Spark holds"):
        compiler.compile(huge, scope, "e")
    assert run(env, lit(interval_day_to_second=Expression.Literal.IntervalDayToSecond(days=100_000_000)))[0] == (
        dt.timedelta(days=100_000_000),)


# ---------------------------------------------------------------------------------- references, casts


def test_field_references_nested_and_expression_rooted(env):
    nested = Expression(
        nested=Expression.Nested(
            struct=Expression.Nested.Struct(
                fields=[
                    field(1),
                    Expression(
                        nested=Expression.Nested(struct=Expression.Nested.Struct(fields=[field(4), field(2)]))
                    ),
                ]
            )
        )
    )
    # a struct built from columns, then field 1 of it, then field 0 of that
    seg = Expression.ReferenceSegment(struct_field=Expression.ReferenceSegment.StructField(field=1))
    seg.struct_field.child.struct_field.field = 0
    ref = Expression(selection=Expression.FieldReference(direct_reference=seg, expression=nested))
    lst = Expression(nested=Expression.Nested(list=Expression.Nested.List(values=[field(1), i32(5)])))
    elem = Expression(
        selection=Expression.FieldReference(
            direct_reference=Expression.ReferenceSegment(
                list_element=Expression.ReferenceSegment.ListElement(offset=1)
            ),
            expression=lst,
        )
    )
    kv = Expression.Nested.Map.KeyValue(key=s("x"), value=field(2))
    mp = Expression(nested=Expression.Nested(map=Expression.Nested.Map(key_values=[kv])))
    key = Expression(
        selection=Expression.FieldReference(
            direct_reference=Expression.ReferenceSegment(
                map_key=Expression.ReferenceSegment.MapKey(map_key=Expression.Literal(string="x"))
            ),
            expression=mp,
        )
    )
    check(
        env,
        [
            (field(0), [1, 2, 3, 4]),
            (ref, ["hello", "World", None, "abc"]),
            (elem, [5, 5, 5, 5]),
            (key, [2, -2, 0, 9223372036854775807]),
        ],
    )


def test_struct_column_field_reference(spark):
    from optimizer.spark.expressions import ExpressionCompiler, Scope

    df = _frame(Context(spark), spark.createDataFrame(
        [(1, (2, ("x", 3.5)))], "id int, st struct<a:int, b:struct<c:string, d:double>>"
    ))
    st = Type(
        struct=Type.Struct(types=[ty("i32"), Type(struct=Type.Struct(types=[ty("string"), ty("fp64")]))])
    )
    compiler = ExpressionCompiler(FNS.table(), None)
    scope = Scope(df, ["id", "st"], [ty("i32"), st])
    e = field(1, 1, 0)
    assert compiler.type_of(e, scope).WhichOneof("kind") == "string"
    assert df.select(
        compiler.compile(e, scope, "e"), compiler.compile(field(1, 1, 1), scope, "e")
    ).first() == ("x", 3.5)
    with pytest.raises(PlanError):
        compiler.compile(field(7), scope, "e")


def test_a_scalar_subquerys_type_comes_from_the_plans_schemas_without_spark():
    from optimizer.schema.record import Schema
    from optimizer.spark.expressions import ExpressionCompiler

    sub = E(subquery=E.Subquery(scalar=E.Subquery.Scalar()))
    at = "relations[0].root.input.filter.condition.scalar_function.arguments[1].value"
    schemas = {f"{at}.subquery.scalar.input": Schema(["m"], [ty("fp64")])}
    compiler = ExpressionCompiler(FNS.table(), None, schemas)
    t = compiler.type_of(sub, None, at)
    assert t.WhichOneof("kind") == "fp64" and t.fp64.nullability == Type.NULLABILITY_NULLABLE  # no row: null
    assert compiler.type_of(sub, None, "elsewhere") is None  # unknown: the backend asks Spark


def test_casts(env):
    RN, TH = E.Cast.FAILURE_BEHAVIOR_RETURN_NULL, E.Cast.FAILURE_BEHAVIOR_THROW_EXCEPTION
    check(
        env,
        [
            (cast(field(1), ty("i64")), [7, -7, None, 2147483647]),
            (cast(field(2), ty("i32"), RN), [2, -2, 0, None]),  # overflow -> null
            (cast(field(4), ty("i32"), RN), [None, None, None, None]),
            (cast(s(" 42 "), ty("i32"), TH), [42] * 4),
            (
                cast(field(8), ty("decimal", precision=4, scale=1)),
                [decimal.Decimal("10.3"), decimal.Decimal("-3.1"), None, decimal.Decimal("0.0")],
            ),
            (cast(field(1), ty("string")), ["7", "-7", None, "2147483647"]),
            (cast(field(7), ty("string")), ["2024-02-29", "1999-12-31", None, "2000-01-01"]),
            (cast(s("2021-03-04"), ty("date")), [dt.date(2021, 3, 4)] * 4),
            (cast(f64(2.7), ty("i32")), [2] * 4),
            (cast(field(4), ty("fixed_char", length=4)), ["hell", "Worl", None, "abc "]),
            (cast(field(4), ty("varchar", length=2)), ["he", "Wo", None, "ab"]),
        ],
    )
    compiler, scope, _ = env
    failing = scope.df.select(compiler.compile(cast(field(2), ty("i32"), TH), scope, "relations[0].x"))
    # ANSI mode: Spark's CAST_OVERFLOW / CAST_INVALID_INPUT ("cannot be cast"); else the plan's path.
    with pytest.raises(Exception, match="cannot (be )?cast"):
        failing.collect()
    unspecified = scope.df.select(compiler.compile(cast(field(4), ty("i32")), scope, "p"))
    with pytest.raises(Exception, match="cannot (be )?cast"):
        unspecified.collect()


# -------------------------------------------------------------------------------------- null semantics


def test_kleene_logic_and_in_lists(env):
    p, q = field(5), field(6)  # p: T, T, F, null   q: T, null, null, null
    in_list = Expression(singular_or_list=E.SingularOrList(value=field(1), options=[i32(7), null(ty("i32"))]))
    in_list2 = Expression(singular_or_list=E.SingularOrList(value=field(1), options=[i32(7), i32(1)]))
    multi = Expression(
        multi_or_list=E.MultiOrList(
            value=[field(1), field(2)],
            options=[
                E.MultiOrList.Record(fields=[i32(7), i64(2)]),
                E.MultiOrList.Record(fields=[i32(-7), null(ty("i64"))]),
            ],
        )
    )
    check(
        env,
        [
            (fn("and", p, q), [True, None, False, None]),
            (fn("or", p, q), [True, True, None, None]),
            (fn("or", p, b(True)), [True, True, True, True]),
            (fn("and", p, b(False)), [False, False, False, False]),
            (fn("not", q), [False, None, None, None]),
            (fn("xor", p, q), [False, None, None, None]),
            (fn("and_not", p, q), [False, None, False, None]),
            (in_list, [True, None, None, None]),
            (in_list2, [True, False, None, False]),
            (multi, [True, None, None, False]),
            (fn("is_null", q), [False, True, True, True]),
            (fn("is_not_distinct_from", q, null(ty("bool"))), [False, True, True, True]),
            (fn("is_distinct_from", field(1), i32(7)), [False, True, True, True]),
            (fn("is_true", q), [True, False, False, False]),
            (fn("is_not_false", q), [True, True, True, True]),
            (fn("coalesce", q, p), [True, True, False, None]),
            (fn("nullif", field(1), i32(7)), [None, -7, None, 2147483647]),
            (fn("greatest", field(1), i32(0)), [7, 0, None, 2147483647]),
            (fn("least_skip_null", field(1), i32(0)), [0, -7, 0, 0]),
            (fn("between", field(1), i32(-7), i32(7)), [True, True, None, False]),
            (fn("is_nan", field(3)), [False, False, None, True]),
            (fn("is_finite", field(3)), [True, True, None, False]),
            (fn("is_infinite", fn("divide", f64(1), field(3), out=ty("fp64"))), [False, False, None, False]),
        ],
    )


def test_if_then_and_switch(env):
    it = Expression(
        if_then=E.IfThen(
            ifs=[E.IfThen.IfClause(**{"if": fn("gt", field(1), i32(0)), "then": s("pos")})],
            **{"else": s("other")},
        )
    )
    it_no_else = Expression(if_then=E.IfThen(ifs=[E.IfThen.IfClause(**{"if": field(6), "then": i32(1)})]))
    sw = Expression(
        switch_expression=E.SwitchExpression(
            match=field(0),
            ifs=[
                E.SwitchExpression.IfValue(**{"if": Expression.Literal(i32=1), "then": s("one")}),
                E.SwitchExpression.IfValue(**{"if": Expression.Literal(i32=3), "then": s("three")}),
            ],
            **{"else": s("many")},
        )
    )
    check(
        env,
        [
            (it, ["pos", "other", "other", "pos"]),
            (it_no_else, [1, None, None, None]),
            (sw, ["one", "many", "three", "many"]),
        ],
    )


# ------------------------------------------------------------------------------------------ arithmetic

I64_MAX = 2**63 - 1
I32_MAX = 2**31 - 1
D = decimal.Decimal


def test_integer_arithmetic_overflow_options(env):
    I32, I64, I8 = ty("i32"), ty("i64"), ty("i8")
    i8 = lambda v: lit(i8=v)  # noqa: E731
    check(
        env,
        [
            (fn("add", field(1), field(1), out=I32, overflow="SATURATE"), [14, -14, None, I32_MAX]),
            (fn("add", field(1), field(1), out=I32, overflow="SILENT"), [14, -14, None, -2]),
            # SILENT wraps around in both ANSI modes (with ANSI mode on, computed in a wider type).
            (fn("add", field(9), field(9), out=I8, overflow="SILENT"), [-56, 56, None, -2]),
            (fn("add", field(2), i64(1), out=I64, overflow="SILENT"), [3, -1, 1, -(2**63)]),
            (fn("multiply", field(2), field(2), out=I64, overflow="SILENT"), [4, 4, 0, 1]),
            (fn("subtract", i64(-(2**63)), field(2), out=I64, overflow="SILENT"), [2**63 - 2, -(2**63) + 2, -(2**63), 1]),
            (fn("negate", i64(-(2**63)), out=I64, overflow="SILENT"), [-(2**63)] * 4),
            (fn("add", field(1), i32(-1), out=I32), [6, -8, None, I32_MAX - 1]),
            (
                fn("subtract", i32(-(2**31)), field(1), out=I32, overflow=["SATURATE"]),
                [-(2**31), -(2**31) + 7, None, -(2**31)],
            ),
            (fn("add", field(9), field(9), out=I8, overflow="SATURATE"), [127, -128, None, 127]),
            (fn("multiply", field(2), field(2), out=I64, overflow="SATURATE"), [4, 4, 0, I64_MAX]),
            (fn("multiply", field(2), i64(-1), out=I64), [-2, 2, 0, -I64_MAX]),
            (fn("negate", field(9), out=I8, overflow="SATURATE"), [-100, 100, None, -127]),
            (fn("negate", i8(-128), out=I8, overflow="SATURATE"), [127] * 4),
            (fn("subtract", field(1), out=I32), [-7, 7, None, -I32_MAX]),  # DuckDB's unary minus
            (fn("abs", field(1), out=I32), [7, 7, None, I32_MAX]),
            (fn("abs", i8(-128), out=I8, overflow="SATURATE"), [127] * 4),
            (fn("sign", field(1), out=I32), [1, -1, None, 1]),
            (fn("power", field(2), i64(3), out=I64, overflow="SATURATE"), [8, -8, 0, I64_MAX]),
            (fn("power", i64(2), i64(62), out=I64), [2**62] * 4),
            (fn("power", i64(-2), i64(63), out=I64), [-(2**63)] * 4),
            (fn("power", i64(3), i64(-1), out=I64), [0] * 4),
            (fn("factorial", i32(12), out=I32), [479001600] * 4),
            (fn("factorial", i32(13), out=I32, overflow="SATURATE"), [I32_MAX] * 4),
            (fn("factorial", i64(20), out=I64), [2432902008176640000] * 4),
            (fn("bitwise_xor", field(2), i64(1), out=I64), [3, -1, 1, I64_MAX - 1]),
            (fn("shift_left", field(1), i32(1), out=I32), [14, -14, None, -2]),
        ],
    )
    compiler, scope, _ = env
    for e in (
        fn("add", field(1), field(1), out=I32),
        fn("multiply", field(2), i64(4), out=I64),
        fn("negate", i64(-(2**63)), out=I64),
    ):
        with pytest.raises(Exception, match="overflow"):
            scope.df.select(
                compiler.compile(e, scope, "relations[0].root.input.project.expressions[0]")
            ).collect()


def test_division_and_modulus(env):
    I32, I64, F64 = ty("i32"), ty("i64"), ty("fp64")
    inf, nan = float("inf"), float("nan")
    check(
        env,
        [
            (fn("divide", field(1), i32(2), out=I32), [3, -3, None, 1073741823]),  # truncation toward zero
            (fn("divide", field(2), field(2), out=I64), [1, 1, None, 1]),  # 0/0 -> null by default
            (fn("divide", i64(-(2**63)), i64(-1), out=I64, overflow="SATURATE"), [I64_MAX] * 4),
            (fn("divide", i32(-(2**31)), i32(-1), out=I32, overflow="SILENT"), [-(2**31)] * 4),
            (fn("divide", field(3), f64(0.0), out=F64), [inf, -inf, None, nan]),
            (fn("divide", f64(1.0), f64(-0.0), out=F64), [-inf] * 4),
            (fn("divide", f64(0.0), f64(0.0), out=F64), [nan] * 4),
            (fn("divide", field(3), f64(0.0), out=F64, on_division_by_zero="NULL"), [None] * 4),
            (fn("divide", field(3), f64(0.0), out=F64, on_division_by_zero="LIMIT"), [inf, -inf, None, inf]),
            (fn("divide", field(3), f64(2.0), out=F64), [1.25, -0.25, None, nan]),
            (fn("divide", field(3), f64(2.0), out=F64, on_domain_error="NULL"), [1.25, -0.25, None, None]),
            (fn("divide", f64(1.0), null(F64), out=F64), [None] * 4),  # a NULL divisor is not a zero
            (fn("divide", field(3), f64(-0.0), out=F64), [-inf, inf, None, nan]),
            (fn("modulus", field(1), i32(3), out=I32), [1, -1, None, 1]),
            (fn("modulus", field(1), i32(-3), out=I32, division_type="FLOOR"), [-2, -1, None, -2]),
            (fn("modulus", field(1), i32(3), out=I32, division_type="FLOOR"), [1, 2, None, 1]),
            (fn("modulus", field(1), i32(0), out=I32), [None] * 4),
            (fn("divide", field(1), field(1)), [1.0, 1.0, None, 1.0]),  # no output type: Spark's own
        ],
    )
    compiler, scope, _ = env
    e = fn("divide", field(2), i64(0), out=I64, on_division_by_zero="ERROR")
    with pytest.raises(Exception, match="division by zero"):
        scope.df.select(compiler.compile(e, scope, "p")).collect()


def test_decimal_arithmetic_uses_the_declared_type(env):
    dec_t = lambda p, sc: ty("decimal", precision=p, scale=sc)  # noqa: E731
    exprs = [
        fn("multiply", field(8), field(8), out=dec_t(31, 4)),
        fn("add", field(8), dec("0.005", 4, 3), out=dec_t(17, 3)),
        fn("divide", field(8), dec("3", 1, 0), out=dec_t(20, 6)),
        fn("subtract", field(8), field(8), out=dec_t(16, 2)),
        fn("modulus", field(8), dec("3", 1, 0), out=dec_t(3, 2)),
        fn("divide", field(8), dec("0", 1, 0), out=dec_t(20, 6)),
        fn("add", dec("9999999999999.99", 15, 2), dec("0.01", 15, 2), out=dec_t(15, 2), overflow="SATURATE"),
    ]
    check(
        env,
        [
            (exprs[0], [D("105.0625"), D("9.6100"), None, D("0.0000")]),
            (exprs[1], [D("10.255"), D("-3.095"), None, D("0.005")]),
            (exprs[2], [D("3.416667"), D("-1.033333"), None, D("0.000000")]),
            (exprs[3], [D("0.00"), D("0.00"), None, D("0.00")]),
            (exprs[4], [D("1.25"), D("-0.10"), None, D("0.00")]),
            (exprs[5], [None] * 4),
            (exprs[6], [D("9999999999999.99")] * 4),
            (  # SILENT: null in both ANSI modes (Spark's own value without ANSI mode)
                fn("add", dec("9999999999999.99", 15, 2), dec("0.01", 15, 2), out=dec_t(15, 2), overflow="SILENT"),
                [None] * 4,
            ),
            (
                fn("negate", dec("9" * 38, 38, 0), out=dec_t(38, 0)),
                [D("-" + "9" * 38)] * 4,
            ),  # beyond 34 digits
            (fn("abs", dec("-" + "9" * 38, 38, 0), out=dec_t(38, 0)), [D("9" * 38)] * 4),
            (fn("factorial", dec("30", 2, 0), out=dec_t(38, 0)), [D(math.factorial(30))] * 4),
            (fn("bitwise_and", dec("-127", 3, 0), dec("-10", 2, 0), out=dec_t(3, 0)), [D(-128)] * 4),
            (
                fn("is_not_distinct_from", field(8), lit(null=Type())),
                [False, False, True, False],
            ),  # DuckDB: untyped null
        ],
    )
    compiler, scope, _ = env
    df = scope.df.select(*[compiler.compile(e, scope, "x") for e in exprs[:3]])
    assert [f.dataType.simpleString() for f in df.schema.fields] == [
        "decimal(31,4)",
        "decimal(17,3)",
        "decimal(20,6)",
    ]
    # ours names the overflow; Spark's (ANSI mode) says the value cannot be represented
    with pytest.raises(Exception, match="overflow|cannot be represented as Decimal"):
        scope.df.select(
            compiler.compile(
                fn("add", dec("9999999999999.99", 15, 2), dec("0.01", 15, 2), out=dec_t(15, 2)), scope, "x"
            )
        ).collect()


def test_math_functions(env):
    F64 = ty("fp64")
    nan, inf = float("nan"), float("inf")
    check(
        env,
        [
            (fn("sqrt", field(3), out=F64), [math.sqrt(2.5), nan, None, nan]),
            (fn("exp", f64(0.0), out=F64), [1.0] * 4),
            (fn("ln", field(3), out=F64), [math.log(2.5), nan, None, nan]),
            (fn("ln", f64(0.0), out=F64), [-inf] * 4),
            (fn("ln", field(3), out=F64, on_domain_error="NULL"), [math.log(2.5), None, None, nan]),
            (fn("log10", f64(1000.0), out=F64), [3.0] * 4),
            (fn("log2", f64(8.0), out=F64), [3.0] * 4),
            (fn("logb", f64(8.0), f64(2.0), out=F64), [3.0] * 4),
            (fn("log", f64(2.0), f64(8.0), out=F64), [3.0] * 4),  # DuckDB: log(base, x)
            (fn("log1p", f64(-1.0), out=F64), [-inf] * 4),
            (fn("acos", f64(2.0), out=F64), [nan] * 4),
            (fn("atan2", f64(1.0), f64(1.0), out=F64), [math.atan2(1, 1)] * 4),
            (fn("ceil", field(3), out=F64), [3.0, -0.0, None, nan]),
            (fn("floor", field(3), out=F64), [2.0, -1.0, None, nan]),
            (fn("ceil", f64(1e300), out=F64), [1e300] * 4),
            (fn("ceil", field(8), out=ty("decimal", precision=14, scale=0)), [D(11), D(-3), None, D(0)]),
            (fn("round", field(3), i32(0), out=F64), [3.0, -1.0, None, nan]),  # ties away from zero
            (fn("round", field(3), i32(0), out=F64, rounding="TIE_TO_EVEN"), [2.0, -0.0, None, nan]),
            (fn("round", f64(-0.001), i32(2), out=F64), [-0.0] * 4),  # IEEE: the sign of a zero stays
            (fn("round", f64(float("-inf")), i32(2), out=F64), [-inf] * 4),
            (fn("round", f64(2.345), i32(2), out=F64, rounding="TRUNCATE"), [2.34] * 4),
            (fn("round", f64(-2.345), i32(2), out=F64, rounding="FLOOR"), [-2.35] * 4),
            (fn("round", f64(2.341), i32(2), out=F64, rounding="CEILING"), [2.35] * 4),
            (fn("round", cast(field(1), ty("i64")), i32(-1), out=ty("i64")), [10, -10, None, 2147483650]),
            (
                fn("round", field(8), i32(1), out=ty("decimal", precision=15, scale=2)),
                [D("10.30"), D("-3.10"), None, D("0.00")],
            ),
            (
                fn(
                    "round",
                    field(8),
                    i32(1),
                    out=ty("decimal", precision=15, scale=2),
                    rounding="TIE_TO_EVEN",
                ),
                [D("10.20"), D("-3.10"), None, D("0.00")],
            ),
        ],
    )
    compiler, scope, _ = env
    # Every use of an argument repeats its text, and Spark's planning time grows with the text: a double
    # round of a double division writes its dividend four times (25 times as nested CASEs).
    text = compiler.compile(fn("round", fn("divide", field(3), f64(3.0), out=F64), i32(2), out=F64), scope, "p")
    assert text.sql().count("`d`") == 4, text.sql()
    with pytest.raises(UnsupportedError, match="TIE_TO_ODD"):
        compiler.compile(fn("round", field(3), i32(0), out=F64, rounding="TIE_TO_ODD"), scope, "p")
    with pytest.raises(Exception, match="logarithm of zero"):
        scope.df.select(
            compiler.compile(fn("ln", f64(0.0), out=F64, on_log_zero="ERROR"), scope, "p")
        ).collect()


# -------------------------------------------------------------------------------------------- strings


def test_string_functions(env):
    S, I64 = ty("string"), ty("i64")
    txt = s("hello")
    check(
        env,
        [
            (fn("substring", field(4), i32(2), i32(3), out=S), ["ell", "orl", None, "bc"]),
            (fn("substring", field(4), i32(2), out=S), ["ello", "orld", None, "bc"]),
            (fn("substring", txt, i32(-3), i32(2), out=S), ["ll"] * 4),  # WRAP_FROM_END (default)
            (fn("substring", txt, i32(-7), i32(4), out=S), ["he"] * 4),
            (fn("substring", txt, i32(0), i32(2), out=S), ["h"] * 4),
            (fn("substring", txt, i32(-1), i32(3), out=S, negative_start="LEFT_OF_BEGINNING"), ["h"] * 4),
            (fn("substring", txt, i32(-2), out=S), ["lo"] * 4),
            (fn("substring", txt, field(1), i32(2), out=S), ["", "", None, ""]),
            (fn("concat", field(4), s("!"), out=S), ["hello!", "World!", "!", "abc!"]),
            (
                fn("concat", field(4), s("!"), out=S, null_handling="ACCEPT_NULLS"),
                ["hello!", "World!", None, "abc!"],
            ),
            (fn("||", field(4), s("!"), out=S), ["hello!", "World!", None, "abc!"]),
            (fn("concat_ws", s("-"), field(4), s("x"), out=S), ["hello-x", "World-x", "x", "abc-x"]),
            (fn("like", field(4), s("%l_o%"), out=ty("bool")), [True, False, None, False]),
            (
                fn("like", field(4), s("w%"), out=ty("bool"), case_sensitivity="CASE_INSENSITIVE"),
                [False, True, None, False],
            ),
            (fn("like", s("a\\b"), s("a\\b"), out=ty("bool")), [True] * 4),  # no escape character
            (
                fn("like", s("a%b"), s("a!%b"), s("!"), out=ty("bool")),
                [True] * 4,
            ),  # DataFusion's escape argument
            (fn("~~*", field(4), s("W%")), [False, True, None, False]),
            (fn("upper", field(4), out=S), ["HELLO", "WORLD", None, "ABC"]),
            (fn("lower", s("ÀB"), out=S, char_set="ASCII_ONLY"), ["Àb"] * 4),
            (fn("char_length", field(4), out=I64), [5, 5, None, 3]),
            (fn("character_length", s("héllo"), out=ty("i32")), [5] * 4),
            (fn("octet_length", s("héllo"), out=I64), [6] * 4),
            (fn("strpos", field(4), s("l"), out=I64), [3, 4, None, 0]),
            (fn("strpos", field(4), s("W"), out=I64, case_sensitivity="CASE_INSENSITIVE"), [0, 1, None, 0]),
            (fn("starts_with", field(4), s("he")), [True, False, None, False]),
            (fn("ends_with", field(4), s("ld")), [False, True, None, False]),
            (fn("contains", field(4), s("b")), [False, False, None, True]),
            (fn("replace", field(4), s("l"), s("L"), out=S), ["heLLo", "WorLd", None, "abc"]),
            (fn("trim", s("xxhixx"), s("x"), out=S), ["hi"] * 4),
            (fn("btrim", s("  hi "), out=S), ["hi"] * 4),
            (fn("ltrim", s("  hi "), out=S), ["hi "] * 4),
            (fn("rtrim", s("xhix"), s("x"), out=S), ["xhi"] * 4),
            (fn("lpad", field(4), i32(7), s("*"), out=S), ["**hello", "**World", None, "****abc"]),
            (fn("lpad", txt, i32(2), s("*"), out=S), ["he"] * 4),
            (fn("rpad", txt, i32(7), s("*"), out=S), ["hello**"] * 4),
            (fn("rpad", txt, i32(2), s("*"), out=S), ["he"] * 4),  # cut on the right (Substrait's test cases)
            (fn("regexp_replace", s("abc"), s("(.*)c"), s("\\1e"), out=S), ["abe"] * 4),  # \1 back-reference
            (fn("left", txt, i32(2), out=S), ["he"] * 4),
            (fn("right", txt, i32(2), out=S), ["lo"] * 4),
            (fn("reverse", field(4), out=S), ["olleh", "dlroW", None, "cba"]),
            (fn("repeat", s("ab"), i64(3), out=S), ["ababab"] * 4),
            (fn("regexp_replace", field(4), s("[lo]"), s("_"), out=S), ["he___", "W_r_d", None, "abc"]),
            (fn("regexp_replace", field(4), s("L"), s("_"), s("gi"), out=S), ["he__o", "Wor_d", None, "abc"]),
            (
                fn("regexp_match_substring", s("a1b22c333"), s("[0-9]+"), i64(1), i64(2), i64(0), out=S),
                ["22"] * 4,
            ),
            (fn("regexp_match_substring", s("abc"), s("[0-9]+"), out=S), [None] * 4),
            (fn("regexp_strpos", s("abc1"), s("[0-9]"), i64(1), i64(1), out=I64), [4] * 4),
            (fn("regexp_count_substring", s("a1b2c3"), s("[0-9]"), out=I64), [3] * 4),
            (fn("count_substring", s("abab"), s("ab"), out=I64), [2] * 4),
            (
                fn("string_split", s("a,b,,c"), s(","), out=Type(list=Type.List(type=S))),
                [["a", "b", "", "c"]] * 4,
            ),
            (fn("replace_slice", txt, i64(2), i64(3), s("XY"), out=S), ["hXYo"] * 4),
            (fn("initcap", s("hello wORLD"), out=S), ["Hello World"] * 4),
            # words start after any character that is not a letter or digit (DataFusion, Calcite, PostgreSQL)
            (fn("initcap", s("o'neil hello-wORLD 1st éLAN"), out=S), ["O'Neil Hello-World 1st Élan"] * 4),
            (fn("center", s("ab"), i32(5), s("*"), out=S), ["*ab**"] * 4),
            (fn("bit_length", s("ab"), out=I64), [16] * 4),
        ],
    )
    compiler, scope, _ = env
    with pytest.raises(UnsupportedError, match="first match"):
        compiler.compile(fn("regexp_replace", field(4), s("l"), s("L"), s("i")), scope, "p")
    with pytest.raises(UnsupportedError, match="unsupported function 'no_such_function:i32'"):
        compiler.compile(fn("no_such_function:i32", field(1)), scope, "p")


# ------------------------------------------------------------------------------------------- datetime


def test_datetime_functions(env):
    I64 = ty("i64")
    ts = lit(
        precision_timestamp=Expression.Literal.PrecisionTimestamp(precision=6, value=1_709_210_096_123_456)
    )  # 2024-02-29 12:34:56.123456
    tstz = lit(
        precision_timestamp_tz=Expression.Literal.PrecisionTimestamp(precision=6, value=1_709_210_096_123_456)
    )
    days3 = lit(interval_day_to_second=Expression.Literal.IntervalDayToSecond(days=3))
    hours = lit(interval_day_to_second=Expression.Literal.IntervalDayToSecond(seconds=7200, precision=6))
    month = lit(interval_year_to_month=Expression.Literal.IntervalYearToMonth(months=1))
    compound = lit(
        interval_compound=Expression.Literal.IntervalCompound(
            interval_year_to_month=Expression.Literal.IntervalYearToMonth(months=1),
            interval_day_to_second=Expression.Literal.IntervalDayToSecond(days=2),
        )
    )
    check(
        env,
        [
            (fn("extract", "YEAR", field(7), out=I64), [2024, 1999, None, 2000]),
            (fn("extract", "year", field(7), out=I64), [2024, 1999, None, 2000]),  # DuckDB: lower case
            (fn("extract", "MONTH", "ONE", field(7), out=I64), [2, 12, None, 1]),
            (fn("extract", "MONTH", "ZERO", field(7), out=I64), [1, 11, None, 0]),
            (fn("extract", "DAY", "ONE", field(7), out=I64), [29, 31, None, 1]),
            (fn("extract", "QUARTER", "ONE", field(7), out=I64), [1, 4, None, 1]),
            (fn("extract", "DAY_OF_YEAR", "ONE", field(7), out=I64), [60, 365, None, 1]),
            (fn("extract", "MONDAY_DAY_OF_WEEK", "ONE", field(7), out=I64), [4, 5, None, 6]),
            (fn("extract", "SUNDAY_DAY_OF_WEEK", "ZERO", field(7), out=I64), [4, 5, None, 6]),
            (fn("extract", "ISO_WEEK", "ONE", field(7), out=I64), [9, 52, None, 52]),
            (fn("extract", "ISO_YEAR", field(7), out=I64), [2024, 1999, None, 1999]),
            (fn("extract", "UNIX_TIME", field(7), out=I64), [1709164800, 946598400, None, 946684800]),
            (fn("extract", "HOUR", ts, out=I64), [12] * 4),
            (fn("extract", "SECOND", ts, out=I64), [56] * 4),
            (fn("extract", "MILLISECOND", ts, out=I64), [123] * 4),
            (fn("extract", "MICROSECOND", ts, out=I64), [456] * 4),
            (fn("extract", "SUBSECOND", ts, out=I64), [123456] * 4),
            (fn("extract", "UNIX_TIME", ts, out=I64), [1709210096] * 4),
            (fn("extract", "HOUR", tstz, s("Asia/Kolkata"), out=I64), [18] * 4),
            (fn("extract", "UNIX_TIME", tstz, s("Asia/Kolkata"), out=I64), [1709210096] * 4),
            (fn("date_part", s("YEAR"), field(7), out=ty("i32")), [2024, 1999, None, 2000]),
            (fn("date_part", s("dow"), field(7), out=ty("i32")), [4, 5, None, 6]),
            (fn("date_part", s("epoch"), ts, out=ty("fp64")), [1709210096.123456] * 4),
            (fn("millisecond", ts, out=I64), [56123] * 4),
            (fn("dayofweek", field(7), out=I64), [4, 5, None, 6]),
            (fn("extract", "dow", field(7), out=I64), [4, 5, None, 6]),  # a DuckDB part name as the enum
            (fn("extract_boolean", "IS_LEAP_YEAR", field(7)), [True, False, None, True]),
            (
                fn("add", field(7), days3, out=ty("date")),
                [dt.date(2024, 3, 3), dt.date(2000, 1, 3), None, dt.date(2000, 1, 4)],
            ),
            (
                fn("add", field(7), days3, out=ty("precision_timestamp", precision=6)),
                [dt.datetime(2024, 3, 3), dt.datetime(2000, 1, 3), None, dt.datetime(2000, 1, 4)],
            ),
            (
                fn("subtract", field(7), month, out=ty("date")),
                [dt.date(2024, 1, 29), dt.date(1999, 11, 30), None, dt.date(1999, 12, 1)],
            ),
            (
                fn("add", month, field(7), out=ty("date")),
                [dt.date(2024, 3, 29), dt.date(2000, 1, 31), None, dt.date(2000, 2, 1)],
            ),
            (
                fn("add", field(7), compound, out=ty("date")),
                [dt.date(2024, 3, 31), dt.date(2000, 2, 2), None, dt.date(2000, 2, 3)],
            ),
            (
                fn("add", ts, hours, out=ty("precision_timestamp", precision=6)),
                [dt.datetime(2024, 2, 29, 14, 34, 56, 123456)] * 4,
            ),
            (
                fn("subtract", field(7), date(1999, 12, 1), out=I64),
                [(dt.date(2024, 2, 29) - dt.date(1999, 12, 1)).days, 30, None, 31],
            ),
            (fn("lt", field(7), date(2000, 1, 1)), [False, True, None, False]),
            (fn("strftime", ts, s("%Y/%m/%d %H:%M:%S %%"), out=ty("string")), ["2024/02/29 12:34:56 %"] * 4),
            (
                fn("strftime", field(7), s("day %j of %Y"), out=ty("string")),
                ["day 060 of 2024", "day 365 of 1999", None, "day 001 of 2000"],
            ),
            (
                fn("date_trunc", s("month"), field(7), out=ty("date")),
                [dt.date(2024, 2, 1), dt.date(1999, 12, 1), None, dt.date(2000, 1, 1)],
            ),
            (fn("strptime_date", s("29/02/2024"), s("%d/%m/%Y"), out=ty("date")), [dt.date(2024, 2, 29)] * 4),
        ],
    )


# ------------------------------------------------------------------------------------------ aggregates


def test_aggregates(env):
    compiler, scope, _ = env
    I64, F64 = ty("i64"), ty("fp64")
    measures = [
        agg("count", out=I64),  # count(*)
        agg("count", field(1), out=I64),
        agg("count", field(5), out=I64, distinct=True),
        agg("sum", field(1), out=I64),
        agg("sum", field(8), out=ty("decimal", precision=38, scale=2)),
        agg("sum0", fn("add", field(1), null(ty("i32")), out=ty("i32")), out=I64),
        agg("avg", field(1), out=ty("i32")),  # integer average truncates
        agg("avg", field(3), out=F64),
        agg("avg", cast(field(1), F64), out=F64),
        agg("min", field(4), out=ty("string")),
        agg("max", field(7), out=ty("date")),
        agg("std_dev", cast(field(0), F64), out=F64),
        agg("std_dev", "POPULATION", cast(field(0), F64), out=F64),
        agg("variance", cast(field(0), F64), out=F64, distribution="POPULATION"),
        agg("bool_and", field(5), out=ty("bool")),
        agg("bool_or", field(6), out=ty("bool")),
        agg("any_value", field(6), out=ty("bool")),
        agg("approx_count_distinct", field(5), out=I64),
        agg(
            "string_agg",
            field(4),
            s(","),
            out=ty("string"),
            sorts=[sort(field(0), SortField.SORT_DIRECTION_DESC_NULLS_LAST)],
        ),
        agg(
            "string_agg",
            field(4),
            s("|"),
            out=ty("string"),
            sorts=[sort(field(4), SortField.SORT_DIRECTION_ASC_NULLS_FIRST)],
        ),
        agg("product", field(0), out=I64),
        agg("product", field(3), out=F64),
        agg("sum", field(0), out=I64, distinct=True),
        agg("avg", field(0), out=F64, distinct=True),
        agg("median", field(0), out=F64),
        agg("mode", field(5), out=ty("bool")),
        agg("count_star", out=I64),
        agg("corr", cast(field(0), F64), cast(field(0), F64), out=F64),
        agg("sum", field(3)),  # DataFusion: no output type
    ]
    cols = [compiler.aggregate(m, scope, f"measures[{i}]").alias(f"m{i}") for i, m in enumerate(measures)]
    row = list(scope.df.agg(*cols).first())
    assert row[:4] == [4, 3, 2, 2147483647]
    assert row[4] == D("7.15")
    assert row[5] == 0  # sum0 of nothing but nulls
    assert row[6] == 715827882  # (7 - 7 + 2147483647) div 3
    assert math.isnan(row[7])
    assert row[8] == pytest.approx(2147483647 / 3)
    assert row[9:11] == ["World", dt.date(2024, 2, 29)]
    assert row[11] == pytest.approx(math.sqrt(5 / 3))
    assert row[12] == pytest.approx(math.sqrt(1.25))
    assert row[13] == pytest.approx(1.25)
    assert row[14:17] == [False, True, True]
    assert row[17] == 2
    assert row[18] == "abc,World,hello"
    assert row[19] == "World|abc|hello"
    assert row[20] == 24
    assert math.isnan(row[21])
    assert row[22:25] == [10, 2.5, 2.5]
    assert row[25] is True
    assert row[26] == 4
    assert row[27] == pytest.approx(1.0)
    assert math.isnan(row[28])
    # overflow of an integer sum is an error by default
    big = scope.df.select(compiler.compile(i64(2**62), scope, "x").alias("b"))  # four times 2^62
    with pytest.raises(Exception, match="overflow"):
        big.agg(compiler.aggregate(agg("sum", field(0), out=I64), Scope_of(big, ["b"], [I64]), "m")).collect()
    with pytest.raises(UnsupportedError, match="DISTINCT"):
        compiler.aggregate(agg("variance", field(3), out=F64, distinct=True), scope, "m")
    with pytest.raises(UnsupportedError, match="unsupported function 'nope'"):
        compiler.aggregate(agg("nope", field(3)), scope, "m")


def Scope_of(df, columns, types):
    from optimizer.spark.expressions import Scope

    return Scope(df, columns, types)


# --------------------------------------------------------------------------------------------- windows


def test_window_functions(env):
    I64, F64 = ty("i64"), ty("fp64")
    by_id = [sort(field(0))]
    part = [fn("lt", field(0), i32(3))]  # {1, 2} and {3, 4}
    desc_nulls_last = [sort(field(1), SortField.SORT_DIRECTION_DESC_NULLS_LAST)]
    check(
        env,
        [
            (win("row_number", sorts=by_id, out=I64), [1, 2, 3, 4]),
            (win("row_number", sorts=by_id, partitions=part, out=I64), [1, 2, 1, 2]),
            (win("rank", sorts=[sort(field(5))], out=I64), [3, 3, 2, 1]),  # nulls first: null, F, T, T
            (win("dense_rank", sorts=[sort(field(5))], out=I64), [3, 3, 2, 1]),
            (win("rank", sorts=desc_nulls_last, out=I64), [2, 3, 4, 1]),
            (win("percent_rank", sorts=by_id, out=F64), [0.0, 1 / 3, 2 / 3, 1.0]),
            (win("cume_dist", sorts=by_id, out=F64), [0.25, 0.5, 0.75, 1.0]),
            (win("ntile", i32(2), sorts=by_id, out=ty("i32")), [1, 1, 2, 2]),
            (win("lead", field(0), sorts=by_id, out=ty("i32")), [2, 3, 4, None]),
            (win("lag", field(0), i32(2), i32(-1), sorts=by_id, out=ty("i32")), [-1, -1, 1, 2]),
            (win("first_value", field(1), sorts=by_id, out=ty("i32")), [7] * 4),
            (
                win(
                    "last_value",
                    field(1),
                    sorts=by_id,
                    lower=bound("unbounded"),
                    upper=bound("current"),
                    out=ty("i32"),
                ),
                [7, -7, None, 2147483647],
            ),
            (win("nth_value", field(0), i32(2), sorts=by_id, out=ty("i32")), [2] * 4),
            (
                win(
                    "sum", field(0), sorts=by_id, lower=bound("preceding", 1), upper=bound("current"), out=I64
                ),
                [1, 3, 5, 7],
            ),
            (
                win(
                    "sum", field(0), sorts=by_id, lower=bound("current"), upper=bound("following", 2), out=I64
                ),
                [6, 9, 7, 4],
            ),
            (
                win(
                    "sum",
                    field(0),
                    sorts=by_id,
                    lower=bound("unbounded"),
                    upper=bound("current"),
                    rows=False,
                    out=I64,
                ),
                [1, 3, 6, 10],
            ),
            (
                win(
                    "count",
                    field(0),
                    sorts=[sort(field(2))],
                    lower=bound("preceding", 2),
                    upper=bound("current"),
                    rows=False,
                    out=I64,
                ),
                [2, 1, 2, 1],
            ),  # b: 2, -2, 0, MAX
            (
                win(
                    "sum",
                    field(0),
                    sorts=[sort(field(0), SortField.SORT_DIRECTION_DESC_NULLS_FIRST)],
                    lower=bound("preceding", 1),
                    upper=bound("current"),
                    rows=False,
                    out=I64,
                ),
                [3, 5, 7, 4],
            ),
            (win("sum", field(0), partitions=part, out=I64), [3, 3, 7, 7]),
            (win("count", field(5), out=I64), [3] * 4),
            (
                win(
                    "avg",
                    field(0),
                    sorts=by_id,
                    lower=bound("preceding", 1),
                    upper=bound("following", 1),
                    out=F64,
                ),
                [1.5, 2.0, 3.0, 3.5],
            ),
            (win("min", field(4), partitions=part, out=ty("string")), ["World", "World", "abc", "abc"]),
            (win("row_number", out=I64, partitions=[field(0)]), [1, 1, 1, 1]),  # no sorts
            (win("rank", out=I64), [1, 1, 1, 1]),
        ],
    )
    compiler, scope, _ = env
    with pytest.raises(UnsupportedError, match="empty window frames"):
        compiler.compile(
            win("sum", field(0), sorts=by_id, lower=bound("following", 2), upper=bound("following", 1)),
            scope,
            "w",
        )
    with pytest.raises(UnsupportedError, match="steps_out|levels out"):
        compiler.compile(
            outer(0, steps=2),
            Scope_of(scope.df, COLUMNS, TYPES).__class__(scope.df, COLUMNS, TYPES, scope),
            "o",
        )
    sf = SortField(expr=field(0))
    with pytest.raises(PlanError, match="unspecified"):
        compiler.sort_order(sf, scope, "s")


def test_sort_orders(env):
    compiler, scope, _ = env
    dirs = [
        SortField.SORT_DIRECTION_ASC_NULLS_FIRST,
        SortField.SORT_DIRECTION_ASC_NULLS_LAST,
        SortField.SORT_DIRECTION_DESC_NULLS_FIRST,
        SortField.SORT_DIRECTION_DESC_NULLS_LAST,
    ]
    # one job: the position of each row under each ordering (a: 7, -7, null, MAX)
    positions = [
        F.row_number().over(Window.orderBy(compiler.sort_order(sort(field(1), d), scope, "s"))) for d in dirs
    ]
    rows = scope.df.select("id", *positions).orderBy("id").collect()
    got = [[r["id"] for r in sorted(rows, key=lambda r: r[i + 1])] for i in range(len(dirs))]
    assert got == [[3, 2, 1, 4], [2, 1, 4, 3], [3, 4, 1, 2], [4, 1, 2, 3]]
    # CLUSTERED keeps equal values together (any order does)
    compiler.sort_order(sort(field(1), SortField.SORT_DIRECTION_CLUSTERED), scope, "s")


# ------------------------------------------------------------------------------------------ subqueries


def _sub(kind: str, **kw) -> Expression:
    return Expression(subquery=Expression.Subquery(**{kind: kw}))


def test_subqueries(env):
    other = read("other")  # (k, v): (1, 10) (1, 20) (2, null) (5, 30)
    correlated = filter_rel(other, fn("equal", field(0), outer(0)))  # k = outer id
    scalar = _sub("scalar", input=aggregate_rel(correlated, agg("max", field(1), out=ty("i32"))))
    count_sub = _sub("scalar", input=aggregate_rel(correlated, agg("count", out=ty("i64"))))
    uncorrelated = _sub("scalar", input=aggregate_rel(other, agg("sum", field(1), out=ty("i64"))))
    exists = _sub(
        "set_predicate", predicate_op=E.Subquery.SetPredicate.PREDICATE_OP_EXISTS, tuples=correlated
    )
    unique = _sub(
        "set_predicate",
        predicate_op=E.Subquery.SetPredicate.PREDICATE_OP_UNIQUE,
        tuples=project_rel(correlated, field(0)),
    )
    in_pred = _sub("in_predicate", needles=[field(0)], haystack=project_rel(other, field(0)))
    in_nulls = _sub("in_predicate", needles=[field(0)], haystack=project_rel(other, field(1)))  # v has a null
    in_two = _sub(
        "in_predicate", needles=[field(0), i32(20)], haystack=project_rel(other, field(0), field(1))
    )
    SC = E.Subquery.SetComparison

    def set_comparison(reduction: str, comparison: str, left: E, right) -> E:
        return _sub("set_comparison", reduction_op=SC.ReductionOp.Value(f"REDUCTION_OP_{reduction}"),
                    comparison_op=SC.ComparisonOp.Value(f"COMPARISON_OP_{comparison}"), left=left, right=right)

    v_of = project_rel(other, field(1))
    any_gt = set_comparison("ANY", "GT", cast(field(1), ty("i32")), v_of)
    all_lt = set_comparison("ALL", "LT", field(1), project_rel(other, field(0)))
    all_lt_nulls = set_comparison("ALL", "LT", field(1), v_of)
    eq_any = set_comparison("ANY", "EQ", field(0), project_rel(other, field(0)))
    ne_all = set_comparison("ALL", "NE", field(0), project_rel(other, field(0)))
    empty_all = set_comparison("ALL", "GT", field(1), project_rel(filter_rel(other, b(False)), field(1)))
    ne_any = set_comparison("ANY", "NE", field(1), v_of)
    eq_all = set_comparison("ALL", "EQ", field(1), v_of)
    le_any = set_comparison("ANY", "LE", field(1), v_of)
    ge_all = set_comparison("ALL", "GE", field(1), project_rel(other, field(0)))
    check(
        env,
        [
            (scalar, [20, None, None, None]),
            (count_sub, [2, 1, 0, 0]),
            (uncorrelated, [60] * 4),
            (exists, [True, True, False, False]),
            (unique, [False, True, True, True]),
            (in_pred, [True, True, False, False]),
            (in_nulls, [None, None, None, None]),
            (in_two, [True, None, False, False]),  # (2, 20) vs (2, null): unknown
            (any_gt, [None, None, None, True]),  # a: 7, -7, null, MAX vs v: 10, 20, null, 30
            (all_lt, [False, True, None, False]),  # vs k: 1, 1, 2, 5
            (all_lt_nulls, [None, None, None, False]),
            (eq_any, [True, True, False, False]),
            (ne_all, [False, False, True, True]),
            (empty_all, [True] * 4),
            (ne_any, [True, True, None, True]),
            (eq_all, [False, False, None, False]),
            (le_any, [True, True, None, None]),  # MAX <= no v; v's null unknown
            (ge_all, [True, False, None, True]),  # vs k: 1, 1, 2, 5
        ],
    )
