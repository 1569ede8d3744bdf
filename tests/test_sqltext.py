"""Text columns (``optimizer.spark.sqltext``) mean exactly what the PySpark ``Column`` calls mean.

Each test builds the same expressions twice, with the text module and with ``pyspark.sql.functions``,
and has Spark evaluate both in one query: same types, same values (NaN equal to NaN, -0.0 kept).
"""

from __future__ import annotations

import datetime
import decimal
import math
import struct

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pyspark.sql import functions as F
from pyspark.sql import types as T

from optimizer.spark import sqltext
from optimizer.spark.sqltext import SqlColumn

S = sqltext.functions


def _same(a, b) -> bool:
    if isinstance(a, float) and isinstance(b, float):
        if math.isnan(a) and math.isnan(b):
            return True
        return struct.pack("<d", a) == struct.pack("<d", b)  # -0.0 is not 0.0
    if isinstance(a, list | tuple) and isinstance(b, list | tuple):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    return a == b and type(a) is type(b)


def _evaluate_pairs(df, pairs):
    """One select with both versions of every expression; returns [(text value/type, column value/type)]."""
    cols = []
    for i, (text, column) in enumerate(pairs):
        cols += [text.alias(f"t{i}"), column.alias(f"c{i}")]
    out = sqltext.select(df, cols)
    fields = out.schema.fields
    rows = out.collect()
    result = []
    for i in range(len(pairs)):
        result.append(
            (
                (fields[2 * i].dataType, [r[2 * i] for r in rows]),
                (fields[2 * i + 1].dataType, [r[2 * i + 1] for r in rows]),
            )
        )
    return result


literals = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**63) + 1, max_value=2**63 - 1),
    st.sampled_from([0, -1, 2**31 - 1, -(2**31), 2**31, -(2**31) - 1, 2**63 - 1, -(2**63) + 1]),
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from([0.0, -0.0, 1e-320, 5e-324, 1.7976931348623157e308, float("nan"), float("-inf")]),
    st.text(max_size=12),
    st.sampled_from(["", "'", "\\", "\\'", "a'b\\c", "\x00", "tab\tnew\nline", "\\u0041", "é☃𝄞", "`x`"]),
    # Values Spark can hold at all (F.lit itself fails beyond 38 digits of scale).
    st.decimals(allow_nan=False, allow_infinity=False, places=None).filter(
        lambda d: abs(d) < decimal.Decimal("1e30") and -d.as_tuple().exponent <= 38
    ),
    st.sampled_from([decimal.Decimal("0.05"), decimal.Decimal("1E+2"), decimal.Decimal("-0.000"),
                     decimal.Decimal("123456789012345678901234567890.12345678")]),
)


@settings(max_examples=25, deadline=None, database=None, suppress_health_check=list(HealthCheck))
@given(values=st.lists(literals, min_size=1, max_size=20))
def test_literals_have_the_type_and_value_of_lit(spark, values):
    pairs = []
    for v in values:
        assert sqltext.render_literal(v) is not None or isinstance(v, decimal.Decimal), v
        pairs.append((S.lit(v), F.lit(v)))
    for ((tt, tv), (ct, cv)), v in zip(_evaluate_pairs(spark.range(1), pairs), values, strict=True):
        assert tt == ct, (v, tt, ct)
        assert _same(tv, cv), (v, tv, cv)


def test_values_without_text_use_the_ordinary_api(spark):
    assert sqltext.render_literal(decimal.Decimal("NaN")) is None
    for v in (datetime.date(2020, 1, 2), bytearray(b"\x00\x01"), datetime.timedelta(days=1)):
        assert sqltext.render_literal(v) is None
        assert not isinstance(S.lit(v), SqlColumn)
    row = spark.range(1).select(S.lit(datetime.date(2020, 1, 2)).alias("d")).first()
    assert row["d"] == datetime.date(2020, 1, 2)


_TABLE = [
    (1, 2.5, "a", None, True),
    (-3, float("nan"), "it's", 7, False),
    (None, -0.0, None, 0, None),
    (2**31 - 1, float("inf"), "", -5, True),
]
_SCHEMA = "i int, d double, s string, n int, b boolean"


@pytest.fixture(scope="module")
def table(spark):
    return spark.createDataFrame(_TABLE, _SCHEMA)


def _both(name: str):
    return S.col(sqltext._quote(name)), F.col(sqltext._quote(name))


def expressions(depth: int):
    """Pairs (text version, Column version) of the same expression over the test table."""
    leaf_numeric = st.sampled_from(["i", "d", "n"]).map(_both) | st.sampled_from([0, 1, -2, 2.5, -0.0]).map(
        lambda v: (S.lit(v), F.lit(v))
    )
    if depth == 0:
        return leaf_numeric
    sub = expressions(depth - 1)
    arith = st.tuples(st.sampled_from(["+", "-", "*", "/", "%"]), sub, sub).map(_arith)
    unary = st.tuples(st.sampled_from(["neg", "abs", "coalesce", "cast_double", "cast_long", "cast_dec"]), sub).map(_unary)
    cmp = st.tuples(st.sampled_from(["=", "!=", "<", "<=", ">", ">=", "<=>"]), sub, sub).map(_compare)
    boolean = st.one_of(cmp, st.tuples(cmp, cmp, st.sampled_from(["and", "or"])).map(_logic),
                        cmp.map(lambda p: (~p[0], ~p[1])), sub.map(lambda p: (p[0].isNull(), p[1].isNull())))
    case = st.tuples(boolean, sub, sub, st.booleans()).map(_case)
    return st.one_of(arith, unary, case, boolean.map(lambda p: (S.when(p[0], 1).otherwise(0), F.when(p[1], 1).otherwise(0))))


def _arith(t):
    op, (a, b), (c, d) = t
    import operator

    fn = {"+": operator.add, "-": operator.sub, "*": operator.mul, "/": operator.truediv, "%": operator.mod}[op]
    return fn(a, c), fn(b, d)


def _unary(t):
    op, (a, b) = t
    if op == "neg":
        return -a, -b
    if op == "abs":
        return S.abs(a), F.abs(b)
    if op == "coalesce":
        return S.coalesce(a, S.lit(7)), F.coalesce(b, F.lit(7))
    if op == "cast_double":
        return a.cast(T.DoubleType()), b.cast(T.DoubleType())
    if op == "cast_long":
        return a.cast("bigint"), b.cast("bigint")
    return a.try_cast(T.DecimalType(12, 3)), b.try_cast(T.DecimalType(12, 3))


def _compare(t):
    op, (a, b), (c, d) = t
    if op == "<=>":
        return a.eqNullSafe(c), b.eqNullSafe(d)
    import operator

    fn = {"=": operator.eq, "!=": operator.ne, "<": operator.lt, "<=": operator.le, ">": operator.gt,
          ">=": operator.ge}[op]
    return fn(a, c), fn(b, d)


def _logic(t):
    (a, b), (c, d), op = t
    return (a & c, b & d) if op == "and" else (a | c, b | d)


def _case(t):
    (c1, c2), (a, b), (x, y), with_else = t
    text, column = S.when(c1, a), F.when(c2, b)
    if with_else:
        text, column = text.otherwise(x), column.otherwise(y)
    return text, column


@settings(max_examples=30, deadline=None, database=None, suppress_health_check=list(HealthCheck))
@given(pairs=st.lists(expressions(2), min_size=1, max_size=8))
def test_expressions_equal_their_column_api_version(table, pairs):
    for (tt, tv), (ct, cv) in _evaluate_pairs(table, pairs):
        assert tt == ct
        assert _same(tv, cv), (tv, cv)


def test_mixed_text_and_columns_keep_operand_order(table):
    real = F.col("i") + F.lit(0)  # an ordinary Column (not text)
    text = S.col("`n`")
    pairs = [
        (real - text, F.col("i") - F.col("n")),
        (text - real, F.col("n") - F.col("i")),
        (real / S.lit(4), F.col("i") / F.lit(4)),
        (10 - text, F.lit(10) - F.col("n")),
        (S.when(text > 0, F.lit(datetime.date(2020, 1, 1))).otherwise(None),
         F.when(F.col("n") > 0, F.lit(datetime.date(2020, 1, 1))).otherwise(None)),
        (S.when(text > 0, 1).when(text < 0, F.lit(datetime.date(2020, 1, 1)).cast("string")),
         F.when(F.col("n") > 0, 1).when(F.col("n") < 0, F.lit(datetime.date(2020, 1, 1)).cast("string"))),
        (text.isin(0, 7, None), F.col("n").isin(0, 7, None)),
        (S.count_distinct(text), F.count_distinct(F.col("n"))),
    ]
    for (tt, tv), (ct, cv) in _evaluate_pairs(table, pairs[:-1]):
        assert tt == ct and _same(tv, cv), (tv, cv)
    agg_text = table.agg(S.count_distinct(text).alias("x")).first()["x"]
    assert agg_text == table.agg(F.count_distinct("n").alias("x")).first()["x"] == 3


def test_select_keeps_odd_names_and_string_contents(spark):
    names = ["a b", "x.y", "`q`", "é", "_c1", "with\ttab"]
    values = ["\x00", "a\x00b", "'", "\\", "\\\\'", "ok"]
    df = sqltext.select(spark.range(1), [S.lit(v).alias(n) for v, n in zip(values, names, strict=True)])
    assert df.columns == names
    assert list(df.first()) == values
