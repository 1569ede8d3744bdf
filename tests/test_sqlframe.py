"""SQL-text DataFrames (``optimizer.spark.sqlframe``) mean exactly what the DataFrame calls mean.

Hypothesis draws chains of DataFrame operations; each chain runs twice, on a :class:`SqlFrame` (one SQL
text, one analysis) and on an ordinary DataFrame, and the answers must be the same multiset (the same
sequence where the chain ends sorted). Then the backend: DataFusion's TPC-H plans are built as one SQL
text each (one ``spark.sql`` call, no DataFrame in between), with the answers of the relation-by-
relation build; and a plan Spark refuses as text falls back to that build, with its error.
"""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from optimizer.compare import compare_tables
from optimizer.difftest.strategies import cases
from optimizer.plan_io import load_plan
from optimizer.spark import SparkBackend, sqlframe
from optimizer.spark.sqlframe import SqlFrame
from optimizer.spark.sqltext import functions as S

_ROWS = [
    (1, 10, "a"), (2, None, "b"), (3, 10, None), (4, -5, "a"), (5, 7, "c"), (6, None, None), (7, 10, "a"),
    (8, 0, "b"), (9, 3, "c"), (10, -5, "a"),
]


@pytest.fixture(scope="module")
def frames(spark):
    df = spark.createDataFrame(_ROWS, "k int, v int, s string")
    name = "__test_sqlframe_t"
    df.createOrReplaceTempView(name)
    other = spark.createDataFrame([(1, "x"), (3, "y"), (3, "z"), (11, "w"), (None, "n")], "k2 int, t string")
    other.createOrReplaceTempView("__test_sqlframe_u")
    yield spark, name
    spark.catalog.dropTempView(name)
    spark.catalog.dropTempView("__test_sqlframe_u")


def _c(name: str):
    return S.col(f"`{name}`")


# Each step: (label, function(frame, columns) -> (frame, columns, sorted)).
def _filter(threshold):
    def step(f, cols):
        return f.filter((_c("v") > threshold) | _c("v").isNull()), cols, False

    return (f"filter v > {threshold}", step)


def _project(f, cols):
    return f.select(_c("k"), (_c("v") * 2).alias("v"), _c("s")), cols, False


def _order(desc):
    def step(f, cols):
        orders = [_c(c).desc_nulls_first() if desc else _c(c).asc_nulls_last() for c in cols]
        return f.orderBy(*orders), cols, True

    return (f"order desc={desc}", step)


def _limit(n):
    def step(f, cols):
        return f.orderBy(*[_c(c).asc_nulls_first() for c in cols]).limit(n), cols, True

    return (f"order+limit {n}", step)


def _offset(n):
    def step(f, cols):
        return f.orderBy(*[_c(c).asc_nulls_first() for c in cols]).offset(n), cols, True

    return (f"order+offset {n}", step)


def _distinct(f, cols):
    return f.select(_c("v"), _c("s")).distinct().select(S.lit(0).alias("k"), _c("v"), _c("s")), cols, False


def _aggregate(f, cols):
    grouped = f.groupBy(_c("s")).agg(S.sum(_c("k")).alias("k"), S.count(_c("v")).alias("v"))
    return grouped.select(_c("k"), S.col("`v`").cast("int").alias("v"), _c("s")), cols, False


def _union(f, cols):
    return f.union(f.filter(_c("k") > 5)), cols, False


def _semi(how):
    def step(f, cols):
        other = _other(f)
        return f.join(other, _c("k") == _c("k2"), how), cols, False

    return (f"join {how}", step)


def _outer(how):
    def step(f, cols):
        other = _other(f)
        joined = f.join(other, (_c("k") == _c("k2")) & (_c("v").isNotNull()), how)
        return joined.select(S.coalesce(_c("k"), _c("k2")).alias("k"), _c("v"), _c("t").alias("s")), cols, False

    return (f"join {how}", step)


def _hint(name):
    def step(f, cols):
        return f.hint(name).join(_other(f), _c("k") == _c("k2"), "left_semi"), cols, False

    return (f"hint {name}", step)


def _other(f):
    spark = f.sparkSession
    if isinstance(f, SqlFrame):
        return SqlFrame.table("`__test_sqlframe_u`", spark)
    return spark.table("__test_sqlframe_u")


_STEPS = st.sampled_from(
    [
        _filter(0), _filter(8), ("project", _project), _order(False), _order(True), _limit(3), _offset(2),
        ("distinct", _distinct), ("aggregate", _aggregate), ("union", _union), _semi("left_semi"),
        _semi("left_anti"), _outer("left"), _outer("full"), _outer("inner"), _outer("right"),
        _hint("broadcast"), _hint("shuffle_hash"),
    ]
)


def _run(frame, steps):
    cols, ordered = ["k", "v", "s"], False
    for _label, step in steps:
        frame, cols, ordered = step(frame, cols)
    return frame, ordered


@settings(max_examples=40, deadline=None, database=None, suppress_health_check=list(HealthCheck))
@given(steps=st.lists(_STEPS, min_size=1, max_size=5))
def test_chains_of_operations_mean_what_the_dataframe_calls_mean(frames, steps):
    spark, name = frames
    text, ordered = _run(SqlFrame.table(f"`{name}`", spark), steps)
    plain, _ = _run(spark.table(name), steps)
    assert isinstance(text, SqlFrame) and sqlframe.is_text(text), [s[0] for s in steps]
    got, want = text.toArrow(), plain.toArrow()
    verdict = compare_tables(got, want, ordered_by=[0, 1, 2] if ordered else None)
    assert verdict.equal, ([s[0] for s in steps], text.sql_text(), str(verdict))


def test_clauses_join_the_select_below_only_where_sql_applies_them_later(spark):
    t = SqlFrame.table("`t`", spark)
    a = _c("a")
    assert t.filter(a > 1).filter(a < 5).sql_text() == "SELECT * FROM `t` WHERE ((`a` > 1)) AND ((`a` < 5))"
    assert t.offset(2).limit(3).sql_text() == "SELECT * FROM `t` LIMIT 3 OFFSET 2"  # skip 2, then take 3
    assert t.limit(3).offset(2).sql_text().startswith("SELECT * FROM (SELECT * FROM `t` LIMIT 3) AS _q")
    assert "GROUP BY" not in t.groupBy().agg(S.count(a).alias("n")).sql_text()  # one group
    assert t.select(a).distinct().sql_text() == "SELECT DISTINCT `a` FROM `t`"


def test_integer_literals_stay_out_of_order_by_and_group_by(frames):
    """SQL reads ``ORDER BY 1`` / ``GROUP BY 1`` as a column position: such a sort or grouping is left to
    the DataFrame API, whatever Spark makes of it there."""
    spark, name = frames
    t = SqlFrame.table(f"`{name}`", spark)
    out = t.orderBy(S.lit(1).asc(), _c("k").asc())
    assert not sqlframe.is_text(out)
    want = spark.table(name).orderBy(S.lit(1).asc(), _c("k").asc())
    assert compare_tables(out.toArrow(), want.toArrow(), ordered_by=[0]).equal
    assert not isinstance(t.groupBy(S.lit(2)), sqlframe._SqlGroupedData)


def test_datafusion_tpch_plans_are_one_sql_text_each(spark, tpch_tables, datafusion_tpch_plans, monkeypatch):
    text = SparkBackend(spark, tables={k: v for k, v in tpch_tables.items() if k != "t"})
    eager = SparkBackend(spark, tables={k: v for k, v in tpch_tables.items() if k != "t"}, text_plans=False)
    calls: list[str] = []
    real_sql = type(spark).sql

    def counting_sql(self, query, *args, **kwargs):
        calls.append(query)
        return real_sql(self, query, *args, **kwargs)

    for q, raw in sorted(datafusion_tpch_plans.items()):
        plan = load_plan(raw)
        calls.clear()
        with monkeypatch.context() as m:
            m.setattr(type(spark), "sql", counting_sql)
            df = text.to_dataframe(plan)
        assert len(calls) == 1, (q, len(calls))
        verdict = compare_tables(df.toArrow(), eager.execute(plan))
        assert verdict.equal, (q, str(verdict))


def test_a_plan_spark_refuses_as_text_is_built_relation_by_relation(spark, tpch_tables, datafusion_tpch_plans, monkeypatch):
    backend = SparkBackend(spark, tables={k: v for k, v in tpch_tables.items() if k != "t"})
    plan = load_plan(datafusion_tpch_plans[6])
    expected = SparkBackend(spark, tables={k: v for k, v in tpch_tables.items() if k != "t"},
                            text_plans=False).execute(plan)

    def refuse(self):
        raise RuntimeError("refused")

    monkeypatch.setattr(SqlFrame, "frame", refuse)
    assert compare_tables(backend.execute(plan), expected).equal


def test_a_semi_join_on_keys_alone_is_an_in_subquery_with_the_same_rows(frames):
    """``(k) IN (SELECT ...)`` keeps what the semi join keeps: NULL keys on either side match nothing,
    duplicates on the other side keep a row once; two keys compare as a pair."""
    from optimizer.spark.backend import _PlanCompiler

    spark, name = frames
    keep = SqlFrame.table(f"`{name}`", spark)
    other = SqlFrame.table("`__test_sqlframe_u`", spark)
    equi = [("k", "k2", False)]
    out = _PlanCompiler._semi_as_in(keep, other, [("k", "k2")], equi, True, "left_semi")
    assert out is not None and "IN (SELECT" in out.sql_text()
    want = spark.table(name).join(spark.table("__test_sqlframe_u"), S.col("k") == S.col("k2"), "left_semi")
    assert compare_tables(out.toArrow(), want.toArrow()).equal
    pairs = other.select(_c("k2"), S.lit(10).alias("v2"))
    out2 = _PlanCompiler._semi_as_in(keep, pairs, [("k", "k2"), ("v", "v2")], equi * 2, True, "left_semi")
    want2 = spark.table(name).join(
        spark.table("__test_sqlframe_u").select("k2", S.lit(10).alias("v2")),
        (S.col("k") == S.col("k2")) & (S.col("v") == S.col("v2")), "left_semi",
    )
    assert compare_tables(out2.toArrow(), want2.toArrow()).equal and out2.count() == 2  # (1, 10), (3, 10)
    # Not for anti joins, null-safe keys, or another input that is more than a filtered table.
    assert _PlanCompiler._semi_as_in(keep, other, [("k", "k2")], equi, True, "left_anti") is None
    assert _PlanCompiler._semi_as_in(keep, other, [("k", "k2")], [("k", "k2", True)], True, "left_semi") is None
    grouped = other.groupBy(_c("k2")).agg(S.count(_c("t")).alias("n"))
    assert _PlanCompiler._semi_as_in(keep, grouped, [("k", "k2")], equi, True, "left_semi") is None


def test_tpch_q20_aggregates_only_the_lineitem_rows_of_the_parts_it_keeps(spark, tpch_tables, datafusion_tpch_plans):
    """DataFusion's Q20 aggregates lineitem, then semi-joins it with forest parts. As an IN filter, that
    semi join reaches the aggregate's input in Spark's plan, as it does for Spark's own SQL."""
    backend = SparkBackend(spark, tables={k: v for k, v in tpch_tables.items() if k != "t"})
    df = backend.to_dataframe(load_plan(datafusion_tpch_plans[20]))
    plan = df._jdf.queryExecution().optimizedPlan().toString()
    aggregate = plan.index("Aggregate [")
    assert "LeftSemi" in plan[aggregate:], plan


@settings(max_examples=15, deadline=None, database=None, suppress_health_check=list(HealthCheck))
@given(case=cases(max_depth=3, max_relations=6))
def test_fuzzer_plans_give_the_same_answer_as_text_and_relation_by_relation(spark, tmp_path_factory, case):
    """The fuzzer's random plans (every relation kind it draws), original and optimized, built as one SQL
    text and relation by relation: the same answer, or an error from both."""
    from optimizer import optimize

    paths = case.database.write_parquet(tmp_path_factory.mktemp("case"))
    text, eager = SparkBackend(spark, tables=paths), SparkBackend(spark, tables=paths, text_plans=False)
    optimized = optimize(case.plan, statistics=case.statistics_provider(), capabilities=case.capability_profile(),
                         config=case.optimizer_config())
    for plan in (case.plan, optimized):
        results = []
        for backend in (text, eager):
            try:
                results.append(backend.execute(plan))
            except Exception as exc:  # noqa: BLE001 -- compared below
                results.append(exc)
        got, want = results
        if isinstance(got, Exception) or isinstance(want, Exception):
            assert type(got) is type(want), (got, want)
            continue
        verdict = compare_tables(got, want)
        assert verdict.equal, str(verdict)
