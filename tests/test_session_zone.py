"""A user's Spark session in another time zone than UTC: plans with timestamps are refused by name, not
answered in that zone; plans without run as anywhere (optimizer/spark/session_zone.py)."""

from __future__ import annotations

import contextlib
import datetime as dt

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from optimizer.errors import UnsupportedError
from optimizer.plan_io import load_plan

UTC = dt.UTC


@pytest.fixture(scope="module")
def zoned_table(tmp_path_factory):
    d = tmp_path_factory.mktemp("zone")
    table = pa.table({
        "id": pa.array([1, 2, 3], pa.int64()),
        "ts": pa.array([dt.datetime(2024, 3, 10, 2, 30), dt.datetime(2024, 11, 3, 1, 30), None], pa.timestamp("us")),
        "tstz": pa.array([dt.datetime(2023, 12, 31, 23, 59, tzinfo=UTC), dt.datetime(2024, 3, 10, 7, 30, tzinfo=UTC),
                          None], pa.timestamp("us", tz="UTC")),
    })
    pq.write_table(table, d / "t.parquet")
    return d


def _plan(directory, sql: str):
    from datafusion import SessionContext
    from datafusion.substrait import Producer

    ctx = SessionContext()
    ctx.register_parquet("t", str(directory / "t.parquet"))
    plan = load_plan(Producer.to_substrait_plan(ctx.sql(sql).logical_plan(), ctx).encode())
    return plan, ctx.sql(sql).to_arrow_table()


@contextlib.contextmanager
def _zone(spark, zone: str):
    previous = spark.conf.get("spark.sql.session.timeZone")
    spark.conf.set("spark.sql.session.timeZone", zone)
    try:
        yield
    finally:
        spark.conf.set("spark.sql.session.timeZone", previous)


@pytest.mark.spark
@pytest.mark.parametrize("zone", ["Asia/Kolkata", "+02:00", "America/New_York"])
def test_a_plan_with_timestamps_is_refused_in_a_session_of_another_zone(spark, zoned_table, zone):
    from optimizer.spark import SparkBackend

    # In Kolkata, Spark casts 2023-12-31 23:59 UTC to the date 2024-01-01; Substrait (and DataFusion) say 2023-12-31.
    plan, expected = _plan(zoned_table, "SELECT id, CAST(tstz AS DATE) AS d, EXTRACT(HOUR FROM tstz) AS h FROM t ORDER BY id")
    backend = SparkBackend(spark, tables={"t": zoned_table / "t.parquet"})
    with _zone(spark, zone), pytest.raises(UnsupportedError) as err:
        backend.execute(plan)
    assert zone in err.value.message and "spark.sql.session.timeZone=UTC" in err.value.message
    assert err.value.path and err.value.path.startswith("relations[0].root.input")
    assert backend.execute(plan).to_pylist() == expected.to_pylist()  # in UTC, DataFusion's answer


@pytest.mark.spark
def test_the_zone_is_asked_at_each_plan(spark, zoned_table):
    from optimizer.spark import SparkBackend

    plan, expected = _plan(zoned_table, "SELECT id, date_trunc('hour', ts) AS h FROM t ORDER BY id")
    backend = SparkBackend(spark, tables={"t": zoned_table / "t.parquet"})
    assert backend.execute(plan).to_pylist() == expected.to_pylist()  # 02:00 in the daylight-saving gap
    with _zone(spark, "America/New_York"), pytest.raises(UnsupportedError):
        backend.execute(plan)  # Spark would say 03:00


@pytest.mark.spark
def test_a_plan_without_timestamps_runs_in_any_zone(spark, tmp_path):
    from optimizer.spark import SparkBackend

    pq.write_table(pa.table({"id": pa.array([1, 2, 3], pa.int64()), "d": pa.array([dt.date(2024, 1, 1)] * 3)}),
                   tmp_path / "t.parquet")
    plan, expected = _plan(tmp_path, "SELECT id, id * 2 AS twice, d + INTERVAL '1 day' AS e FROM t WHERE id > 1 ORDER BY id")
    backend = SparkBackend(spark, tables={"t": tmp_path / "t.parquet"})
    with _zone(spark, "Asia/Kolkata"):
        assert backend.execute(plan).to_pylist() == expected.to_pylist()


def test_a_read_that_keeps_a_timestamp_column_counts_and_one_that_drops_it_does_not():
    from substrait.proto import Expression

    from optimizer.spark.session_zone import first_timestamp
    from testing.builder import Builder, read

    plan = Builder().plan(read("t", [("a", "i64"), ("b", "i64")]), ["a", "b"])
    r = plan.relations[0].root.input.read
    r.base_schema.struct.types[1].precision_timestamp_tz.precision = 6
    assert first_timestamp(plan) == "relations[0].root.input"
    r.projection.select.struct_items.add(field=0)
    r.projection.maintain_singular_struct = True
    assert first_timestamp(plan) is None
    r.filter.literal.CopyFrom(Expression.Literal(precision_timestamp_tz=Expression.Literal.PrecisionTimestamp(
        precision=6, value=0)))
    assert first_timestamp(plan) == "relations[0].root.input"  # its filter holds a timestamp literal
