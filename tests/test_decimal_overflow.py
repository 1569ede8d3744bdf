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
from substrait.proto import Type

from optimizer.spark.functions import _decimal_bound, _decimal_cannot_overflow, _wide_decimal
from optimizer.spark.sql import Context, Frame
from optimizer.spark.sql import functions as F

_CTX = decimal.Context(prec=200, rounding=decimal.ROUND_HALF_UP)


def dec(p: int, s: int) -> Type:
    return Type(decimal=Type.Decimal(precision=p, scale=s))


def largest(p: int, s: int) -> decimal.Decimal:
    return decimal.Decimal(10**p - 1).scaleb(-s, _CTX)


def fits(value: decimal.Decimal, p: int, s: int) -> bool:
    rounded = value.quantize(decimal.Decimal(1).scaleb(-s), context=_CTX)
    return abs(rounded) <= largest(p, s)


decimal_types = st.integers(1, 38).flatmap(lambda p: st.tuples(st.just(p), st.integers(0, p)))


@settings(max_examples=3000, deadline=None, database=None)
@given(t1=decimal_types, t2=decimal_types, out=decimal_types, op=st.sampled_from(["add", "subtract", "multiply"]))
def test_no_check_only_when_the_extremes_fit(t1, t2, out, op):
    (p1, s1), (p2, s2), (po, so) = t1, t2, out
    if not _decimal_cannot_overflow(op, dec(p1, s1), dec(p2, s2), T.DecimalType(po, so)):
        return
    a, b = largest(p1, s1), largest(p2, s2)
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
    cols, expected = [], []
    for i, (op, (p1, s1), (p2, s2), (po, so)) in enumerate(cases):
        assert _decimal_cannot_overflow(op, dec(p1, s1), dec(p2, s2), T.DecimalType(po, so))
        a, b = largest(p1, s1), largest(p2, s2)
        x = F.lit(a).cast(T.DecimalType(p1, s1))
        y = F.lit(-b).cast(T.DecimalType(p2, s2))
        value = {"add": x + y, "subtract": x - y, "multiply": x * y}[op].cast(T.DecimalType(po, so))
        cols.append(value.alias(f"c{i}"))
        exact = {"add": a - b, "subtract": a + b, "multiply": -a * b}[op]
        expected.append(exact.quantize(decimal.Decimal(1).scaleb(-so), context=_CTX))
    row = Frame.one_row(Context(spark)).select(*cols).first()  # as the backend builds it
    for got, want, (_, _, _, (_, so)) in zip(row, expected, cases, strict=True):
        # Never NULL (no overflow). Spark may lose the last digit of a 38-digit product (its
        # BigDecimal context), which the removed check never looked at either.
        assert got is not None
        assert abs(got - want) <= decimal.Decimal(1).scaleb(-so)
