"""A user's Spark session with settings that change what the backend's SQL means: a plan is refused by name
or answered as in the tool's own sessions, never otherwise (optimizer/spark/session_settings.py). Another
time zone than UTC (plans with timestamps refused), escaped string literals (texts with a backslash
refused), legacy statistical aggregates (texts with a standard deviation refused), the legacy Parquet
calendar (reads keep the proleptic Gregorian one)."""

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
def _setting(spark, key: str, value: str):
    previous = spark.conf.get(key, None)
    spark.conf.set(key, value)
    try:
        yield
    finally:
        if previous is None:
            spark.conf.unset(key)
        else:
            spark.conf.set(key, previous)


def _zone(spark, zone: str):
    return _setting(spark, "spark.sql.session.timeZone", zone)


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

    from optimizer.spark.session_settings import first_timestamp
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


@pytest.fixture(scope="module")
def other_table(tmp_path_factory):
    d = tmp_path_factory.mktemp("settings")
    pq.write_table(pa.table({"id": pa.array([1, 2, 2], pa.int64()), "k": ["a", "bb", "a$b"],
                             "x": [1.5, 2.0, 4.0], "d": [dt.date(1000, 1, 1), dt.date(1582, 10, 4), dt.date(2024, 1, 1)]}),
                   d / "t.parquet")
    return d


@pytest.mark.spark
def test_escaped_string_literals_refuse_a_text_with_a_backslash(spark, other_table):
    from optimizer.spark import SparkBackend

    backend = SparkBackend(spark, tables={"t": other_table / "t.parquet"})
    pattern, expected = _plan(other_table, "SELECT id, regexp_replace(k, '^\\w$', 'X') AS r FROM t ORDER BY id, r")
    plain, plain_expected = _plan(other_table, "SELECT id, k FROM t WHERE k = 'a' ORDER BY id")
    with _setting(spark, "spark.sql.parser.escapedStringLiterals", "true"):
        with pytest.raises(UnsupportedError, match="escapedStringLiterals"):
            backend.execute(pattern)  # Spark would read '^\\w\u0024' as written: no row matches
        assert backend.execute(plain).to_pylist() == plain_expected.to_pylist()
    assert backend.execute(pattern).to_pylist() == expected.to_pylist()


@pytest.mark.spark
def test_legacy_statistical_aggregates_refuse_a_standard_deviation(spark, other_table):
    from optimizer.spark import SparkBackend

    backend = SparkBackend(spark, tables={"t": other_table / "t.parquet"})
    plan, expected = _plan(other_table, "SELECT stddev(x) AS s FROM t WHERE id = 1")
    assert expected.to_pylist() == [{"s": None}]
    with _setting(spark, "spark.sql.legacy.statisticalAggregate", "true"), pytest.raises(UnsupportedError):
        backend.execute(plan)  # Spark would say NaN
    assert backend.execute(plan).to_pylist() == expected.to_pylist()


@pytest.mark.spark
def test_dates_before_1582_are_read_in_the_proleptic_calendar_whatever_the_session_says(spark, other_table):
    from optimizer.spark import SparkBackend

    plan, expected = _plan(other_table, "SELECT id, d FROM t ORDER BY id, d")
    with _setting(spark, "spark.sql.parquet.datetimeRebaseModeInRead", "LEGACY"):
        got = SparkBackend(spark, tables={"t": other_table / "t.parquet"}).execute(plan)
    assert got.to_pylist() == expected.to_pylist()  # 1000-01-01, not 0999-12-27
