"""Decimal arithmetic and sums drop their overflow checks only where overflow is impossible.

The Spark backend checks ``add``/``subtract``/``multiply`` of decimals for overflow (Substrait's default
is an error), which repeats both operands in the expression. ``_decimal_cannot_overflow`` skips the
check when the types alone prove the result fits; these tests hold it to that with exact arithmetic on
the extreme values, and on Spark itself.
"""

from __future__ import annotations

import decimal

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pyspark.sql import types as T
from substrait.proto import Expression, Type

from optimizer.spark.functions import _decimal_bound, _decimal_cannot_overflow, _literal_digits, _wide_decimal
from optimizer.spark.sql import Context, Frame
from optimizer.spark.sql_columns import functions as F

_CTX = decimal.Context(prec=200, rounding=decimal.ROUND_HALF_UP)


def dec(p: int, s: int) -> Type:
    return Type(decimal=Type.Decimal(precision=p, scale=s))


def largest(p: int, s: int) -> decimal.Decimal:
    return decimal.Decimal(10**p - 1).scaleb(-s, _CTX)


def fits(value: decimal.Decimal, p: int, s: int) -> bool:
    rounded = value.quantize(decimal.Decimal(1).scaleb(-s), context=_CTX)
    return abs(rounded) <= largest(p, s)


decimal_types = st.integers(1, 38).flatmap(lambda p: st.tuples(st.just(p), st.integers(0, p)))


def largest_with_digits(p: int, s: int, digits: int | None) -> decimal.Decimal:
    """The largest value of DECIMAL(p, s) whose ``_literal_digits`` is at most ``digits``."""
    if digits is None:
        return largest(p, s)
    below = decimal.Decimal(10**digits - 1) - decimal.Decimal(1).scaleb(-s)  # floor(v) + 1 < 10**digits
    return min(largest(p, s), below)


@settings(max_examples=3000, deadline=None, database=None)
@given(t1=decimal_types, t2=decimal_types, out=decimal_types, op=st.sampled_from(["add", "subtract", "multiply"]),
       d1=st.none() | st.integers(1, 38), d2=st.none() | st.integers(1, 38))
def test_no_check_only_when_the_extremes_fit(t1, t2, out, op, d1, d2):
    (p1, s1), (p2, s2), (po, so) = t1, t2, out
    if not _decimal_cannot_overflow(op, dec(p1, s1), dec(p2, s2), T.DecimalType(po, so), (d1, d2)):
        return
    a, b = largest_with_digits(p1, s1, d1), largest_with_digits(p2, s2, d2)
    candidates = {"add": [a + b, -a - b], "subtract": [a + b, -a - b], "multiply": [a * b, -a * b]}[op]
    spark_p, spark_s = (p1 + p2 + 1, s1 + s2) if op == "multiply" else (
        max(s1, s2) + max(p1 - s1, p2 - s2) + 1, max(s1, s2))
    for v in candidates:
        for loss in (True, False):
            bp, bs = _decimal_bound(spark_p, spark_s, loss)
            assert fits(v, bp, bs), (op, t1, t2, loss)
            intermediate = v.quantize(decimal.Decimal(1).scaleb(-bs), context=_CTX)
            assert fits(intermediate, po, so), (op, t1, t2, out)


def test_tpch_shapes_need_no_check():
    # DataFusion's Q1: 1 - l_discount (decimal(20,0) - decimal(15,2) -> decimal(23,2)), then
    # l_extendedprice * that (-> decimal(38,4)): no check; times (1 + l_tax) needs 55 digits: checked.
    assert _decimal_cannot_overflow("subtract", dec(20, 0), dec(15, 2), T.DecimalType(23, 2))
    assert _decimal_cannot_overflow("multiply", dec(15, 2), dec(23, 2), T.DecimalType(38, 4))
    assert not _decimal_cannot_overflow("multiply", dec(38, 4), dec(23, 2), T.DecimalType(38, 6))
    assert not _decimal_cannot_overflow("add", dec(38, 2), dec(38, 2), T.DecimalType(38, 2))
    assert not _decimal_cannot_overflow("add", None, dec(15, 2), T.DecimalType(38, 2))


def _cast(e: Expression, p: int, s: int) -> Expression:
    return Expression(cast=Expression.Cast(type=dec(p, s), input=e))


def test_a_literal_counts_its_own_digits_through_casts():
    one = Expression(literal=Expression.Literal(decimal=Expression.Literal.Decimal(
        value=(100).to_bytes(16, "little", signed=True), precision=3, scale=2)))
    assert _literal_digits(_cast(one, 16, 2)) == 1  # DuckDB's 1 - l_discount: CAST(1.00 AS DECIMAL(16,2))
    assert _literal_digits(Expression(literal=Expression.Literal(i64=-99))) == 3  # 99 + 1: 100
    assert _literal_digits(Expression(literal=Expression.Literal(fp64=1.0))) is None
    assert _literal_digits(Expression(literal=Expression.Literal(boolean=True))) is None
    to_string = Expression(cast=Expression.Cast(type=Type(string=Type.String()), input=one))
    assert _literal_digits(to_string) is None
    field = Expression(selection=Expression.FieldReference())
    assert _literal_digits(_cast(field, 16, 2)) is None
    # So DuckDB's 1.00 - l_discount (DECIMAL(16,2) - DECIMAL(15,2) -> DECIMAL(16,2)) needs no check,
    # which the types alone cannot prove (14 - 13 digits may need 15).
    assert not _decimal_cannot_overflow("subtract", dec(16, 2), dec(15, 2), T.DecimalType(16, 2))
    assert _decimal_cannot_overflow("subtract", dec(16, 2), dec(15, 2), T.DecimalType(16, 2), (1, None))
    # l_extendedprice * (1.00 - l_discount) -> DECIMAL(18,4): 13 + 14 digits may need 27, checked; times
    # a literal of one digit it is not.
    assert not _decimal_cannot_overflow("multiply", dec(15, 2), dec(16, 2), T.DecimalType(18, 4))
    assert _decimal_cannot_overflow("multiply", dec(15, 2), dec(16, 2), T.DecimalType(18, 4), (None, 1))


def test_wide_sum_only_for_precision_up_to_19():
    assert _wide_decimal(dec(15, 2)) == T.DecimalType(38, 2)
    assert _wide_decimal(dec(19, 0)) == T.DecimalType(38, 0)
    assert _wide_decimal(dec(20, 2)) is None
    assert _wide_decimal(Type(i64=Type.I64())) is None


@pytest.mark.spark
def test_extremes_on_spark(spark):
    """Where no check is emitted, Spark computes the extreme values (no NULL from overflow)."""
    cases = [("subtract", (20, 0), (15, 2), (23, 2)), ("multiply", (15, 2), (23, 2), (38, 4)),
             ("add", (15, 2), (15, 2), (16, 2)), ("multiply", (10, 0), (10, 0), (20, 0)),
             ("multiply", (18, 9), (18, 9), (38, 18))]
    # A left operand that is a literal of one integer digit (8.99, the largest such of scale 2).
    digit_cases = [("subtract", (16, 2), (15, 2), (16, 2)), ("multiply", (16, 2), (15, 2), (18, 4))]
    cols, expected = [], []
    for i, (op, (p1, s1), (p2, s2), (po, so)) in enumerate(cases + digit_cases):
        digits = (1, None) if i >= len(cases) else (None, None)
        assert _decimal_cannot_overflow(op, dec(p1, s1), dec(p2, s2), T.DecimalType(po, so), digits)
        a, b = largest_with_digits(p1, s1, digits[0]), largest(p2, s2)
        x = F.lit(a).cast(T.DecimalType(p1, s1))
        y = F.lit(-b).cast(T.DecimalType(p2, s2))
        value = {"add": x + y, "subtract": x - y, "multiply": x * y}[op].cast(T.DecimalType(po, so))
        cols.append(value.alias(f"c{i}"))
        exact = {"add": a - b, "subtract": a + b, "multiply": -a * b}[op]
        expected.append(exact.quantize(decimal.Decimal(1).scaleb(-so), context=_CTX))
    row = Frame.one_row(Context(spark)).select(*cols).first()  # as the backend builds it
    for got, want, (_, _, _, (_, so)) in zip(row, expected, cases + digit_cases, strict=True):
        # Never NULL (no overflow). Spark may lose the last digit of a 38-digit product (its
        # BigDecimal context), which the removed check never looked at either.
        assert got is not None
        assert abs(got - want) <= decimal.Decimal(1).scaleb(-so)
