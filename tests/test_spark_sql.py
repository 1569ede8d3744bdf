"""The plan-to-SQL builders (``optimizer.spark.sql``) mean exactly what the DataFrame calls mean.

Hypothesis draws chains of DataFrame operations; each chain runs twice, as one SQL query built with
:class:`Frame` and with PySpark's DataFrame API, and the answers must be the same multiset (the same
sequence where the chain ends sorted). Literals of every Python type the backend uses come back from
Spark with the value and type ``F.lit`` gives them. Then the backend: each TPC-H plan is one
``spark.sql`` call.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import decimal
import io

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from optimizer.difftest.results import compare_tables
from optimizer.plan_io import load_plan
from optimizer.spark import SparkBackend
from optimizer.spark.sql import Context, Frame, render
from optimizer.spark.sql_columns import Window
from optimizer.spark.sql_columns import functions as S

pytestmark = pytest.mark.spark

P = PW = None  # PySpark's functions and Window for the session's kind (set by the frames fixture)

_ROWS = [
    (1, 10, "a"), (2, None, "b"), (3, 10, None), (4, -5, "a"), (5, 7, "c"), (6, None, None), (7, 10, "a"),
    (8, 0, "b"), (9, 3, "c"), (10, -5, "a"),
]


def _pyspark_functions(spark):
    """PySpark's functions for ``spark``'s kind of session (a process may hold a classic and a Connect one)."""
    from optimizer.spark.session import is_connect_session

    if is_connect_session(spark):
        from pyspark.sql.connect import functions
        from pyspark.sql.connect.window import Window
    else:
        from pyspark.sql import Window, functions
    return functions, Window


@pytest.fixture(scope="module")
def frames(spark):
    global P, PW
    P, PW = _pyspark_functions(spark)
    t = spark.createDataFrame(_ROWS, "k int, v int, s string")
    u = spark.createDataFrame([(1, "x"), (3, "y"), (3, "z"), (11, "w"), (None, "n")], "k2 int, t string")
    return spark, t, u


class _Side:
    """One way of building: the SQL builders (``S``, :class:`Frame`) or PySpark (``P``, DataFrame)."""

    def __init__(self, F, t, u) -> None:
        self.F, self.t, self.u = F, t, u

    def c(self, name: str):
        return self.F.col(f"`{name}`")


def _filter(threshold):
    def step(x, f):
        return f.filter((x.c("v") > threshold) | x.c("v").isNull()), False

    return (f"filter v > {threshold}", step)


def _project(x, f):
    return f.select(x.c("k"), (x.c("v") * 2).alias("v"), x.c("s")), False


def _order(desc):
    def step(x, f):
        orders = [x.c(c).desc_nulls_first() if desc else x.c(c).asc_nulls_last() for c in ("k", "v", "s")]
        return f.orderBy(*orders), True

    return (f"order desc={desc}", step)


def _limit(n):
    def step(x, f):
        return f.orderBy(*[x.c(c).asc_nulls_first() for c in ("k", "v", "s")]).limit(n), True

    return (f"order+limit {n}", step)


def _offset(n):
    def step(x, f):
        return f.orderBy(*[x.c(c).asc_nulls_first() for c in ("k", "v", "s")]).offset(n), True

    return (f"order+offset {n}", step)


def _distinct(x, f):
    return f.select(x.c("v"), x.c("s")).distinct().select(x.F.lit(0).alias("k"), x.c("v"), x.c("s")), False


def _aggregate(x, f):
    F = x.F
    grouped = f.groupBy(x.c("s")).agg(F.sum(x.c("k")).alias("k"), F.count(x.c("v")).alias("v"))
    return grouped.select(x.c("k"), F.col("`v`").cast("int").alias("v"), x.c("s")), False


def _window(x, f):
    F = x.F
    w = Window if x.F is S else PW
    spec = w.partitionBy(x.c("s")).orderBy(x.c("k").asc_nulls_first()).rowsBetween(-1, 0)
    return f.select(x.c("k"), F.sum(x.c("v")).over(spec).cast("int").alias("v"), x.c("s")), False


def _renamed(x, f):
    """Pure renames, a filter between them, then back: the builders merge these into one SELECT."""
    F = x.F
    renamed = f.select(x.c("s").alias("c"), x.c("k").alias("a"), x.c("v").alias("b"), F.lit(1).alias("one"))
    kept = renamed.filter((x.c("b") > 2) | x.c("b").isNull() | (x.c("one") == 2))
    return kept.select(x.c("a").alias("k"), x.c("b").alias("v"), x.c("c").alias("s")), False


def _picked(x, f):
    """A computed column picked and renamed by the projection above it."""
    computed = f.select(x.c("k"), (x.c("v") + 1).alias("w"), x.c("s"), (x.c("k") * 3).alias("unused"))
    return computed.select(x.c("k"), x.c("w").alias("v"), x.c("s")).orderBy(x.c("v").asc_nulls_first()), False


def _union(x, f):
    return f.union(f.filter(x.c("k") > 5)), False


def _semi(how):
    def step(x, f):
        return f.join(x.u, x.c("k") == x.c("k2"), how), False

    return (f"join {how}", step)


def _outer(how):
    def step(x, f):
        joined = f.join(x.u, (x.c("k") == x.c("k2")) & (x.c("v").isNotNull()), how)
        return joined.select(x.F.coalesce(x.c("k"), x.c("k2")).alias("k"), x.c("v"), x.c("t").alias("s")), False

    return (f"join {how}", step)


def _hint(name):
    def step(x, f):
        return f.hint(name).join(x.u, x.c("k") == x.c("k2"), "left_semi"), False

    return (f"hint {name}", step)


_STEPS = st.sampled_from(
    [
        _filter(0), _filter(8), ("project", _project), _order(False), _order(True), _limit(3), _offset(2),
        ("distinct", _distinct), ("aggregate", _aggregate), ("window", _window), ("union", _union),
        _semi("left_semi"), _semi("left_anti"), _outer("left"), _outer("full"), _outer("inner"),
        _outer("right"), _hint("broadcast"), _hint("shuffle_hash"), ("renamed", _renamed), ("picked", _picked),
    ]
)


def _run(x: _Side, steps):
    frame, ordered = x.t, False
    for _label, step in steps:
        frame, ordered = step(x, frame)
    return frame, ordered


def _sql_side(spark, t, u) -> tuple[_Side, Context]:
    ctx = Context(spark)
    return _Side(S, Frame.table(ctx, ctx.bind(t)), Frame.table(ctx, ctx.bind(u))), ctx


def _run_sql(spark, frame: Frame):
    text, tables = render(frame)
    return spark.sql(text, **tables)


@settings(max_examples=40, deadline=None, database=None, suppress_health_check=list(HealthCheck))
@given(steps=st.lists(_STEPS, min_size=1, max_size=5))
def test_chains_of_operations_mean_what_the_dataframe_calls_mean(frames, steps):
    spark, t, u = frames
    sql_side, _ = _sql_side(spark, t, u)
    built, ordered = _run(sql_side, steps)
    plain, _ = _run(_Side(P, t, u), steps)
    got, want = _run_sql(spark, built).toArrow(), plain.toArrow()
    verdict = compare_tables(got, want, ordered_by=[0, 1, 2] if ordered else None)
    assert verdict.equal, ([s[0] for s in steps], built.sql(), str(verdict))


def test_clauses_join_the_select_below_only_where_sql_applies_them_later():
    ctx = Context(None)
    t = Frame.table(ctx, ctx.bind("t"))
    a = S.col("`a`")

    def sql(frame: Frame) -> str:
        return render(frame)[0]

    assert sql(t.filter(a > 1).filter(a < 5)) == "SELECT * FROM {t0} WHERE (`a` > 1) AND (`a` < 5)"
    assert sql(t.offset(2).limit(3)) == "SELECT * FROM {t0} LIMIT 3 OFFSET 2"  # skip 2, then take 3
    assert sql(t.limit(3).offset(2)).startswith("SELECT * FROM (SELECT * FROM {t0} LIMIT 3) AS _q")
    assert "GROUP BY" not in sql(t.groupBy().agg(S.count(a).alias("n")))  # one group
    assert sql(t.select(a).distinct()) == "SELECT DISTINCT `a` FROM {t0}"
    # A join hint names the input's alias in the SELECT of the join, as SQL users write it.
    joined = sql(t.hint("shuffle_hash").join(t, a == S.col("`b`"), "inner"))
    assert joined.startswith("SELECT /*+ SHUFFLE_HASH(_q") and " JOIN {t0} AS _q" in joined


def test_projections_that_rename_merge_into_one_select_and_nothing_else_does():
    ctx = Context(None)
    t = Frame.table(ctx, ctx.bind("t"))
    a, b, x, y = (S.col(f"`{n}`") for n in "abxy")

    def sql(frame: Frame) -> str:
        return render(frame)[0]

    renamed = t.select(a.alias("x"), b.alias("y")).filter(x > 1).select(y.alias("z"))
    assert sql(renamed) == "SELECT `b` AS `z` FROM {t0} WHERE `a` > 1"
    grouped = t.groupBy(a).agg(S.sum(b).alias("s")).select(S.col("`s`").alias("total"))
    assert sql(grouped) == "SELECT SUM(`b`) AS `total` FROM {t0} GROUP BY `a`"
    ordered = t.select(a.alias("x")).orderBy(x.asc()).limit(2)
    assert sql(ordered) == "SELECT `a` AS `x` FROM {t0} ORDER BY `x` ASC LIMIT 2"
    # Not merged: an expression read twice would be computed twice; a filter over a window or a
    # DISTINCT, and a projection over a LIMIT, mean something else one level down.
    twice = sql(t.select((a + 1).alias("x")).select(x.alias("p"), x.alias("q")))
    assert twice.count("`a` + 1") == 1
    window = S.sum(a).over(Window.partitionBy(b))
    assert " WHERE `x` > 1" in sql(t.select(window.alias("x")).filter(x > 1))
    # A column renamed beside a window function is a new column to Spark (see the test below).
    beside = sql(t.select(b, window.alias("w")).select(b.alias("y"), S.col("`w`")))
    assert beside.startswith("SELECT `b` AS `y`, `w` FROM (SELECT `b`, SUM(`a`) OVER"), beside
    assert sql(t.select(b, window.alias("w")).select(S.col("`w`").alias("v"), b)).count("SELECT") == 1
    assert sql(t.select(a.alias("x")).distinct().filter(x > 1)).endswith("WHERE `x` > 1")
    assert sql(t.select(a.alias("x"), b).limit(3).select(x)).startswith("SELECT `x` FROM (SELECT")
    # An outer reference, or a name the projection below does not give, keeps the level.
    assert sql(t.select(a.alias("x")).select(y.alias("z"))).startswith("SELECT `y` AS `z` FROM (SELECT")
    exists = t.filter(b == x).exists()
    assert "FROM (SELECT `a` AS `x`" in sql(t.select(a.alias("x")).filter(exists))


def test_a_join_key_that_is_a_window_partition_key_is_filtered_below_the_window(frames):
    """Spark computes the other items of a select with a window function below the window: a partition
    column renamed in that select is a new column, and the ``IS NOT NULL`` Spark infers from a join on it
    would stay above the window. Written with the rename a level up, the filter reaches the table: TPC-DS
    Q47 joins three copies of one windowed aggregate, and Spark reuses one copy's exchanges for the others
    only when all three are filtered alike."""
    spark, t, u = frames
    sql_side, _ = _sql_side(spark, t, u)
    k, s, k2, m, r = S.col("`k`"), S.col("`s`"), S.col("`k2`"), S.col("`m`"), S.col("`r`")
    grouped = sql_side.t.groupBy(k, s).agg(S.sum(S.col("`v`")).alias("m"))
    ranked = grouped.select(k, s, m, S.rank().over(Window.partitionBy(k).orderBy(s.asc())).alias("r"))
    joined = ranked.select(k.alias("kk"), m, r).join(sql_side.u, S.col("`kk`") == k2, "inner")
    text, tables = render(joined)
    plan = spark.sql(f"EXPLAIN EXTENDED {text}", **tables).collect()[0][0]
    optimized = plan[plan.index("== Optimized Logical Plan =="):plan.index("== Physical Plan ==")]
    below = optimized[optimized.index("Window ["):]
    assert "isnotnull(k#" in below, optimized
    got = _run_sql(spark, joined).toArrow()
    p_grouped = t.groupBy("k", "s").agg(P.sum("v").alias("m"))
    p_ranked = p_grouped.select("k", "s", "m", P.rank().over(PW.partitionBy("k").orderBy(P.col("s").asc())).alias("r"))
    want = p_ranked.select(P.col("k").alias("kk"), "m", "r").join(u, P.col("kk") == P.col("k2"), "inner").toArrow()
    assert compare_tables(got, want).equal


def test_a_cast_to_the_type_an_expression_already_has_is_not_written(frames):
    """``CAST(CAST(x AS double) AS double)`` is ``CAST(x AS double)``: the expression compiler casts to be
    sure of each operand's type, and every copy costs Spark's analyzer and optimizer a walk."""
    ctx = Context(None)
    t = Frame.table(ctx, ctx.bind("t"))

    def item(c) -> str:
        return render(t.select(c.alias("x")))[0].removeprefix("SELECT ").removesuffix(" AS `x` FROM {t0}")

    k = S.col("`k`")
    assert item(k.cast("double").cast("double")) == "CAST(`k` AS double)"
    assert item(k.try_cast("int").cast("int")) == "TRY_CAST(`k` AS int)"
    assert item(k.cast("int").try_cast("int")) == "CAST(`k` AS int)"
    assert item(S.lit(0.5).cast("double")) == "0.5D"
    assert item(k.cast("int").cast("bigint")) == "CAST(CAST(`k` AS int) AS bigint)"  # another type: kept
    assert item(S.lit(5).cast("int")) == "CAST(5 AS int)"  # an integer literal: kept (it may be a BIGINT)
    spark, t_df, u_df = frames
    x, _ = _sql_side(spark, t_df, u_df)
    half = (x.c("k").cast("double").cast("double") / S.lit(2.0).cast("double")).alias("h")
    got = [r["h"] for r in _run_sql(spark, x.t.select(half).orderBy(S.col("`h`"))).collect()]
    assert got == [0.5, 1.0, 1.5, 2.0, 2.5, 3.0, 3.5, 4.0, 4.5, 5.0]


def test_integer_literals_are_no_positions_in_order_by_and_group_by(frames):
    """SQL reads ``ORDER BY 1`` / ``GROUP BY 1`` as a column position (Spark's DataFrame API does too): a
    literal there is written as a cast, so that it is the constant key a Substrait plan means."""
    spark, t, u = frames
    x, _ = _sql_side(spark, t, u)
    out = x.t.orderBy(S.lit(1).asc(), x.c("k").desc())
    assert "ORDER BY CAST(1 AS int)" in out.sql()
    assert [r["k"] for r in _run_sql(spark, out).collect()] == list(range(10, 0, -1))
    grouped = x.t.groupBy(S.lit(2)).agg(S.count(x.c("k")).alias("n"))
    assert [r["n"] for r in _run_sql(spark, grouped).collect()] == [10]


_LITERALS = [
    0, 1, -1, 2**31 - 1, -(2**31), 2**31, -(2**31) - 1, 2**63 - 1, -(2**63), 0.5, -0.0, 1e300, float("inf"),
    float("-inf"), float("nan"), "", "it's", "back\\slash", "${env:HOME}", "{braces}", "new\nline", "ünï", True,
    False, None, decimal.Decimal("1.50"), decimal.Decimal("-0.001"), decimal.Decimal("12345678901234567890.12"),
    dt.date(1994, 1, 1), dt.timedelta(days=-2, microseconds=5), dt.timedelta(hours=6), b"\x00\xffab",
]


def test_literals_come_back_with_the_value_and_type_f_lit_gives(frames):
    spark, t, u = frames
    ctx = Context(spark)
    names = [f"v{i}" for i in range(len(_LITERALS))]
    built = _run_sql(spark, Frame.one_row(ctx).select(*[S.lit(v).alias(n) for v, n in zip(_LITERALS, names, strict=True)]))
    want = spark.range(1).select(*[P.lit(v).alias(n) for v, n in zip(_LITERALS, names, strict=True)])
    from optimizer.spark.session import is_connect_session

    if not is_connect_session(spark):  # (Connect's lit types a Decimal wider: the values are compared below)
        assert [f.dataType for f in built.schema.fields] == [f.dataType for f in want.schema.fields]
    got_row, want_row = built.collect()[0], want.collect()[0]
    for v, n in zip(_LITERALS, names, strict=True):
        g, w = got_row[n], want_row[n]
        assert g == w or (g != g and w != w), (v, g, w)


def test_variable_substitution_cannot_reach_the_text(frames):
    """Spark substitutes ``${...}`` in SQL text: a string literal must come back as written, with or
    without tables bound (then the text is also read by ``str.format``)."""
    spark, t, u = frames
    x, ctx = _sql_side(spark, t, u)
    out = x.t.select(S.lit("${env:HOME} ${system:user.dir} {0} }{").alias("s")).limit(1)
    text, tables = render(out)
    assert "${" not in text and tables
    assert _run_sql(spark, out).collect()[0]["s"] == "${env:HOME} ${system:user.dir} {0} }{"


def test_every_tpch_plan_is_one_spark_sql_call(spark, tpch_tables, datafusion_tpch_plans, duckdb_oracle):
    from workloads.tpch import tpch_query

    backend = SparkBackend(spark, tables={k: v for k, v in tpch_tables.items() if k != "t"})
    for q, raw in sorted(datafusion_tpch_plans.items()):
        text, tables = backend.to_sql(load_plan(raw))
        assert text.startswith(("SELECT", "WITH")) and set(tables) == {f"t{i}" for i in range(len(tables))}
        df = spark.sql(text, **tables)
        verdict = compare_tables(df.toArrow(), duckdb_oracle(tpch_query(q)))
        assert verdict.equal, (q, str(verdict))


def test_a_semi_join_on_keys_alone_is_an_in_subquery_with_the_same_rows(frames):
    """``(k) IN (SELECT ...)`` keeps what the semi join keeps: NULL keys on either side match nothing,
    duplicates on the other side keep a row once; two keys compare as a pair."""
    from optimizer.spark.backend import _PlanCompiler

    spark, t, u = frames
    x, _ = _sql_side(spark, t, u)
    equi = [("k", "k2", False)]
    out = _PlanCompiler._semi_as_in(x.t, x.u, [("k", "k2")], equi, True, "left_semi")
    assert out is not None and "IN (SELECT" in out.sql()
    want = t.join(u, P.col("k") == P.col("k2"), "left_semi")
    assert compare_tables(_run_sql(spark, out).toArrow(), want.toArrow()).equal
    pairs = x.u.select(x.c("k2"), S.lit(10).alias("v2"))
    out2 = _PlanCompiler._semi_as_in(x.t, pairs, [("k", "k2"), ("v", "v2")], equi * 2, True, "left_semi")
    want2 = t.join(u.select("k2", P.lit(10).alias("v2")), (P.col("k") == P.col("k2")) & (P.col("v") == P.col("v2")),
                   "left_semi")
    got2 = _run_sql(spark, out2)
    assert compare_tables(got2.toArrow(), want2.toArrow()).equal and got2.count() == 2  # (1, 10), (3, 10)
    # Not for anti joins, null-safe keys, or another input that is more than a filtered table.
    assert _PlanCompiler._semi_as_in(x.t, x.u, [("k", "k2")], equi, True, "left_anti") is None
    assert _PlanCompiler._semi_as_in(x.t, x.u, [("k", "k2")], [("k", "k2", True)], True, "left_semi") is None
    grouped = x.u.groupBy(x.c("k2")).agg(S.count(x.c("t")).alias("n"))
    assert _PlanCompiler._semi_as_in(x.t, grouped, [("k", "k2")], equi, True, "left_semi") is None


def test_tpch_q20_aggregates_only_the_lineitem_rows_of_the_parts_it_keeps(spark, tpch_tables, datafusion_tpch_plans):
    """DataFusion's Q20 aggregates lineitem, then semi-joins it with forest parts. As an IN filter, that
    semi join reaches the aggregate's input in Spark's plan, as it does for Spark's own SQL."""
    backend = SparkBackend(spark, tables={k: v for k, v in tpch_tables.items() if k != "t"})
    df = backend.to_dataframe(load_plan(datafusion_tpch_plans[20]))
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        df.explain(mode="extended")
    plan = out.getvalue().split("== Optimized Logical Plan ==")[1].split("== Physical Plan ==")[0]
    aggregate = plan.index("Aggregate [")
    assert "LeftSemi" in plan[aggregate:], plan
