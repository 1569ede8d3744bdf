"""Statistics providers: Parquet footers, Spark ANALYZE (+ cache), stats files, hints, precedence."""

from __future__ import annotations

import datetime
import decimal
import json
import os
import re
import shutil
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from optimizer.cost.parquet_footers import ParquetStatistics
from optimizer.cost.providers import (
    CompositeStatistics,
    FileStatistics,
    HintStatistics,
    MemoryStatistics,
    save_statistics,
)
from optimizer.cost.statistics import ColumnStatistics, Histogram, TableStatistics, table_key, to_numeric
from optimizer.cost.statistics_io import dump_json, fingerprint, resolve_tables
from substrait.proto import ReadRel, Rel, RelCommon

from optimizer.errors import PlanError
from optimizer.spark.statistics import SparkStatistics, default_statistics

DOCS = Path(__file__).resolve().parent.parent / "docs" / "statistics.md"
EPOCH = datetime.date(1970, 1, 1)
D0 = datetime.date(2020, 1, 1)


def days(d: datetime.date) -> float:
    return float((d - EPOCH).days)


# --------------------------------------------------------------------------------------------------
# Test data: exactly known contents
# --------------------------------------------------------------------------------------------------

ORDERS_ROWS = 200
LINEITEM_ROWS = 120


def orders_table() -> pa.Table:
    n = range(ORDERS_ROWS)
    return pa.table(
        {
            "o_id": pa.array(n, pa.int64()),  # 0..199, 200 distinct
            "o_cust": pa.array([i % 10 for i in n], pa.int32()),  # 10 distinct
            "o_date": pa.array([D0 + datetime.timedelta(days=i % 50) for i in n], pa.date32()),  # 50 distinct
            "o_price": pa.array([decimal.Decimal(i) / 4 for i in n], pa.decimal128(10, 2)),  # 0 .. 49.75
            "O_Note": pa.array([None if i % 20 == 0 else f"n{i % 5}" for i in n], pa.string()),  # 10 nulls
            "o_flag": pa.array([i % 3 == 0 for i in n], pa.bool_()),
        }
    )


def lineitem_part(start: int, stop: int) -> pa.Table:
    n = range(start, stop)
    return pa.table(
        {
            "l_id": pa.array(n, pa.int64()),
            "l_qty": pa.array([None if i % 6 == 0 else i % 7 for i in n], pa.int32()),
        }
    )


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory) -> Path:
    """``orders.parquet`` (a file, 2 row groups), ``lineitem/`` (a folder of 2 files plus files Spark
    skips) and things that are not tables."""
    root = tmp_path_factory.mktemp("stats_data")
    pq.write_table(orders_table(), root / "orders.parquet", row_group_size=128)
    folder = root / "lineitem"
    folder.mkdir()
    pq.write_table(lineitem_part(0, 60), folder / "part-00000.parquet")
    pq.write_table(lineitem_part(60, LINEITEM_ROWS), folder / "part-00001.parquet")
    (folder / "_SUCCESS").write_text("")
    (folder / ".hidden").write_text("not data")
    (root / "README.txt").write_text("not a table")
    (root / "_tmp").mkdir()
    return root


# --------------------------------------------------------------------------------------------------
# Names, values, data model
# --------------------------------------------------------------------------------------------------


def test_table_key_uses_last_segment_case_insensitively():
    assert table_key(["LINEITEM"]) == "lineitem"
    assert table_key(["tpch", "LineItem"]) == "lineitem"
    assert table_key(("a", "b", "Orders")) == "orders"
    assert table_key("tpch.orders") == "orders"
    assert table_key([]) == ""


def test_to_numeric_domains():
    assert to_numeric(3) == 3.0 and to_numeric(True) == 1.0
    assert to_numeric(decimal.Decimal("1.25")) == 1.25
    assert to_numeric("2020-01-01") == days(D0)
    assert to_numeric(D0) == days(D0)
    assert to_numeric("2020-01-01", "date") == days(D0)
    micros = days(D0) * 86_400e6 + 1_500_000
    assert to_numeric("2020-01-01T00:00:01.5") == micros
    assert to_numeric("2020-01-01T00:00:01.5+00:00", "timestamp") == micros
    assert to_numeric("2020-01-01T01:00:01.5+01:00", "timestamp") == micros
    assert to_numeric(datetime.datetime(2020, 1, 1, 0, 0, 1, 500_000)) == micros
    assert to_numeric("2020-01-01", "string") is None
    assert to_numeric("abc") is None
    assert to_numeric(None) is None


def test_column_numeric_min_max():
    col = ColumnStatistics(min="2020-01-01", max="2020-02-19", data_type="date")
    assert (col.numeric_min, col.numeric_max) == (days(D0), days(D0) + 49)
    col = ColumnStatistics(min=0.5, max=7, data_type="decimal(10,2)")
    assert (col.numeric_min, col.numeric_max) == (0.5, 7.0)
    assert ColumnStatistics(min="a", max="z", data_type="string").numeric_min is None
    assert ColumnStatistics().numeric_max is None


def test_json_round_trip_with_histogram():
    table = TableStatistics(
        row_count=10.0,
        size_bytes=123.0,
        columns={
            "A": ColumnStatistics(
                ndv=4.0, min=1, max=9, null_count=2.0, avg_len=8.0, max_len=8, data_type="bigint",
                histogram=Histogram(height=4.0, bins=[(1.0, 3.0, 2.0), (3.0, 9.0, 2.0)]),
            ),
            "d": ColumnStatistics(min="2020-01-01", max="2020-01-31", data_type="date"),
            "empty": ColumnStatistics(),
        },
    )
    text = json.dumps(table.to_json())
    assert TableStatistics.from_json(text) == table
    assert TableStatistics.from_json(json.loads(text)) == table
    assert table.columns["A"].histogram.row_count == 8.0
    assert table.to_json()["columns"]["empty"] == {}  # unknown fields are left out
    assert table.column("a") is table.columns["A"] and table.column("D") is table.columns["d"]
    assert table.column("nope") is None
    # one bin per line in files
    assert "[1.0, 3.0, 2.0]" in dump_json(table.to_json())


def test_from_json_rejects_unknown_fields():
    with pytest.raises(ValueError, match="ndvs"):
        ColumnStatistics.from_json({"ndvs": 3})
    with pytest.raises(ValueError, match="rows"):
        TableStatistics.from_json({"rows": 3})


# --------------------------------------------------------------------------------------------------
# Table discovery and Parquet footers
# --------------------------------------------------------------------------------------------------


def test_resolve_tables_directory(data_dir):
    tables = resolve_tables(data_dir)
    assert tables == {"lineitem": str(data_dir / "lineitem"), "orders": str(data_dir / "orders.parquet")}
    assert resolve_tables({"X": "rel/x.parquet"})["X"] == os.path.abspath("rel/x.parquet")
    assert resolve_tables(data_dir / "orders.parquet") == {"orders": str(data_dir / "orders.parquet")}
    with pytest.raises(FileNotFoundError):
        resolve_tables(data_dir / "missing")


def test_fingerprint_lists_data_files_only(data_dir):
    files = fingerprint(str(data_dir / "lineitem"))
    assert [f[0] for f in files] == ["part-00000.parquet", "part-00001.parquet"]
    assert all(size > 0 and mtime > 0 for _, size, mtime in files)


def test_parquet_statistics_exact_values(data_dir):
    stats = ParquetStatistics(data_dir)
    assert sorted(stats.names()) == ["lineitem", "orders"]
    orders = stats.table(["tpch", "ORDERS"])
    assert orders is stats.table("orders")  # memoised, case-insensitive
    assert orders.row_count == ORDERS_ROWS
    meta = pq.ParquetFile(data_dir / "orders.parquet").metadata
    assert meta.num_row_groups == 2
    assert orders.size_bytes == sum(meta.row_group(i).total_byte_size for i in range(2))

    def col(name):
        return stats.column("orders", name)

    assert (col("o_id").min, col("o_id").max, col("o_id").null_count) == (0, ORDERS_ROWS - 1, 0)
    assert col("o_id").ndv is None  # Parquet footers carry no distinct counts
    assert (col("o_id").data_type, col("o_id").avg_len, col("o_id").max_len) == ("bigint", 8.0, 8)
    assert (col("o_cust").min, col("o_cust").max, col("o_cust").data_type) == (0, 9, "int")
    assert (col("o_date").min, col("o_date").max) == ("2020-01-01", "2020-02-19")
    assert col("o_date").numeric_max == days(D0) + 49
    assert (col("o_price").min, col("o_price").max, col("o_price").data_type) == (0.0, 49.75, "decimal(10,2)")
    note = col("o_note")  # stored as O_Note
    assert note is stats.table("orders").columns["O_Note"]
    assert (note.min, note.max, note.null_count, note.data_type) == ("n0", "n4", 10, "string")
    assert note.avg_len is None and note.numeric_min is None
    assert (col("o_flag").min, col("o_flag").max) == (False, True)

    lineitem = stats.table("LineItem")
    assert lineitem.row_count == LINEITEM_ROWS
    qty = lineitem.column("L_QTY")
    assert (qty.min, qty.max, qty.null_count) == (0, 6, LINEITEM_ROWS // 6)
    assert (lineitem.column("l_id").min, lineitem.column("l_id").max) == (0, LINEITEM_ROWS - 1)
    assert stats.table("nope") is None and stats.column("orders", "nope") is None


def test_parquet_statistics_all_null_column(tmp_path):
    pq.write_table(pa.table({"n": pa.array([None, None], pa.int64())}), tmp_path / "t.parquet")
    col = ParquetStatistics({"t": tmp_path / "t.parquet"}).column("t", "n")
    assert (col.ndv, col.null_count, col.min, col.max) == (0.0, 2.0, None, None)


# --------------------------------------------------------------------------------------------------
# Stats files
# --------------------------------------------------------------------------------------------------


def test_file_statistics_round_trip(data_dir, tmp_path):
    parquet = ParquetStatistics(data_dir)
    path = tmp_path / "sub" / "stats.json"
    document = save_statistics(parquet, ["orders", "lineitem", "missing"], path)
    assert sorted(document["tables"]) == ["lineitem", "orders"]
    loaded = FileStatistics(path)
    assert sorted(loaded.names()) == ["lineitem", "orders"]
    for name in ("orders", "lineitem"):
        assert loaded.table(name) == parquet.table(name)
    assert loaded.column(["x", "ORDERS"], "o_note").min == "n0"
    # None: everything the provider lists
    assert save_statistics(parquet, None, tmp_path / "all.json") == document


def test_docs_example_is_a_valid_stats_file(tmp_path):
    blocks = re.findall(r"```json\n(.*?)```", DOCS.read_text(), re.S)
    assert blocks, "docs/statistics.md has a JSON example"
    path = tmp_path / "example.json"
    path.write_text(blocks[0])
    stats = FileStatistics(path)
    assert stats.table("LINEITEM").row_count == 60175
    shipdate = stats.column("lineitem", "l_shipdate")
    assert shipdate.numeric_min == 8036 and shipdate.histogram.num_bins == 2
    assert shipdate.histogram.row_count == 60175
    assert stats.table("orders").row_count == 15000 and stats.table("orders").columns == {}


def test_file_statistics_errors_name_the_file(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    with pytest.raises(PlanError, match="bad.json"):
        FileStatistics(bad)
    bad.write_text(json.dumps({"tables": {"t": {"columns": {"c": {"ndv": 1, "typo": 2}}}}}))
    with pytest.raises(PlanError, match="typo"):
        FileStatistics(bad)
    bad.write_text(json.dumps({"version": 9, "tables": {}}))
    with pytest.raises(PlanError, match="version"):
        FileStatistics(bad)
    with pytest.raises(PlanError, match="cannot read"):
        FileStatistics(tmp_path / "missing.json")


def test_file_statistics_entry_name_field_and_duplicates(tmp_path):
    path = tmp_path / "s.json"
    path.write_text(
        json.dumps(
            {
                "version": 1,
                "tables": {
                    "/data/a/orders.parquet": {"name": "orders", "row_count": 1},
                    "/data/b/orders.parquet": {"name": "orders", "row_count": 2, "source": {"x": 1}},
                    "tpch.Region": {"row_count": 5},
                },
            }
        )
    )
    stats = FileStatistics(path)
    assert stats.table("orders").row_count == 2  # the later entry wins
    assert stats.table(["REGION"]).row_count == 5


# --------------------------------------------------------------------------------------------------
# Hints and precedence
# --------------------------------------------------------------------------------------------------


def read_rel_with_hint(row_count: float, record_size: float) -> Rel:
    rel = Rel(read=ReadRel())
    rel.read.common.hint.stats.row_count = row_count
    rel.read.common.hint.stats.record_size = record_size
    return rel


def test_hint_statistics():
    hints = HintStatistics()
    assert hints.relation_hint(read_rel_with_hint(1000, 24)) == (1000.0, 24.0)
    assert hints.relation_hint(read_rel_with_hint(1000, 24).read) == (1000.0, 24.0)  # inner message
    assert hints.relation_hint(read_rel_with_hint(0, 0)) is None  # proto3 default: absent
    assert hints.relation_hint(read_rel_with_hint(0, 16)) == (0.0, 16.0)  # a real empty relation
    assert hints.relation_hint(read_rel_with_hint(50, 0)) == (50.0, None)
    assert hints.relation_hint(Rel(read=ReadRel(common=RelCommon()))) is None  # no hint
    assert hints.relation_hint(Rel()) is None
    rel = Rel()
    rel.reference.subtree_ordinal = 0  # ReferenceRel has no `common`
    assert hints.relation_hint(rel) is None
    assert hints.table("orders") is None and hints.column("orders", "o_id") is None


def test_composite_precedence_per_field(data_dir, tmp_path):
    override = tmp_path / "override.json"
    override.write_text(
        json.dumps(
            {"tables": {"orders": {"row_count": 1e6, "columns": {"O_CUST": {"ndv": 42, "max": 99}}}}}
        )
    )
    second = MemoryStatistics(
        {
            "orders": TableStatistics(
                row_count=7, size_bytes=5.0, columns={"o_cust": ColumnStatistics(ndv=10, min=-1)}
            )
        }
    )
    parquet = ParquetStatistics(data_dir)
    stack = CompositeStatistics([HintStatistics(), FileStatistics(override), second, parquet])

    orders = stack.table(["tpch", "Orders"])
    assert orders.row_count == 1e6  # file
    assert orders.size_bytes == 5.0  # second provider: the file does not know it
    cust = stack.column("orders", "o_cust")
    assert (cust.ndv, cust.max) == (42, 99)  # file
    assert cust.min == -1  # second provider
    assert (cust.null_count, cust.data_type) == (0, "int")  # Parquet
    assert stack.column("orders", "o_note").min == "n0"  # only Parquet knows that column
    assert stack.table("lineitem") == parquet.table("lineitem")  # only Parquet knows that table
    assert stack.table("nope") is None
    # providers' own answers are not modified by merging
    assert parquet.column("orders", "o_cust").ndv is None and second.table("orders").row_count == 7
    assert stack.names()[:1] == ["orders"] and sorted(stack.names()) == ["lineitem", "orders"]
    # hints win for relations
    assert stack.relation_hint(read_rel_with_hint(10, 8)) == (10.0, 8.0)
    assert stack.relation_hint(read_rel_with_hint(0, 0)) is None


def test_default_statistics_stack_without_spark(data_dir, tmp_path):
    stats_file = tmp_path / "s.json"
    stats_file.write_text(json.dumps({"tables": {"lineitem": {"row_count": 5}}}))
    stack = default_statistics(tables=data_dir, stats_file=stats_file)
    assert [type(p).__name__ for p in stack.providers] == [
        "HintStatistics",
        "FileStatistics",
        "ParquetStatistics",
    ]
    assert stack.table("lineitem").row_count == 5
    assert stack.table("orders").row_count == ORDERS_ROWS
    assert [type(p).__name__ for p in default_statistics().providers] == ["HintStatistics"]


# --------------------------------------------------------------------------------------------------
# Spark ANALYZE
# --------------------------------------------------------------------------------------------------


class NoSpark:
    """Stands in for the session where the test asserts that Spark is not used at all."""

    def __getattr__(self, name):
        raise AssertionError(f"Spark was called ({name})")


def assert_ndv(found: float | None, exact: int) -> None:
    """Spark's NDV is HyperLogLog++ (relative standard error spark.sql.statistics.ndv.maxError=0.05)."""
    assert found is not None
    assert abs(found - exact) <= max(1.0, 0.1 * exact), (found, exact)


@pytest.fixture(scope="module")
def spark_stats(spark, data_dir, tmp_path_factory):
    cache = tmp_path_factory.mktemp("stats_cache") / "spark-stats.json"
    provider = SparkStatistics(spark, data_dir, cache_path=cache)
    assert provider.table("orders") is not None and provider.table("lineitem") is not None
    assert provider.analyze_count == 2
    return provider


@pytest.mark.spark
def test_spark_statistics_values(spark_stats, spark):
    orders = spark_stats.table(["TPCH", "ORDERS"])
    assert orders.row_count == ORDERS_ROWS
    assert orders.size_bytes == os.path.getsize(spark_stats.paths["orders"])

    o_id = orders.column("O_ID")
    assert (o_id.min, o_id.max, o_id.null_count, o_id.data_type) == (0, ORDERS_ROWS - 1, 0, "bigint")
    assert_ndv(o_id.ndv, ORDERS_ROWS)
    assert (o_id.avg_len, o_id.max_len) == (8.0, 8)
    cust = orders.column("o_cust")
    assert (cust.min, cust.max) == (0, 9)
    assert_ndv(cust.ndv, 10)
    date = orders.column("o_date")
    assert (date.min, date.max, date.data_type) == ("2020-01-01", "2020-02-19", "date")
    assert_ndv(date.ndv, 50)
    price = orders.column("o_price")
    assert (price.min, price.max, price.data_type) == (0.0, 49.75, "decimal(10,2)")
    note = orders.column("o_note")
    assert (note.null_count, note.min, note.max, note.histogram) == (10, None, None, None)
    assert_ndv(note.ndv, 5)
    assert (note.avg_len, note.max_len) == (2.0, 2)
    flag = orders.column("o_flag")
    assert (flag.min, flag.max, flag.ndv) == (False, True, 2)

    qty = spark_stats.column("lineitem", "l_qty")
    assert spark_stats.table("lineitem").row_count == LINEITEM_ROWS
    assert (qty.min, qty.max, qty.null_count) == (0, 6, LINEITEM_ROWS // 6)
    assert_ndv(qty.ndv, 7)

    # the histogram setting was only changed for the ANALYZE call
    assert spark.conf.get("spark.sql.statistics.histogram.enabled", "false") == "false"


@pytest.mark.spark
def test_spark_histograms(spark_stats, spark):
    num_bins = int(spark.conf.get("spark.sql.statistics.histogram.numBins", "254"))
    for column, non_null, lo, hi in (
        ("o_id", ORDERS_ROWS, 0.0, ORDERS_ROWS - 1.0),
        ("o_date", ORDERS_ROWS, days(D0), days(D0) + 49),  # bounds in days since epoch
        ("o_price", ORDERS_ROWS, 0.0, 49.75),
    ):
        hist = spark_stats.column("orders", column).histogram
        assert hist is not None and hist.num_bins == num_bins, column
        assert hist.row_count == pytest.approx(non_null), column
        assert hist.bins[0][0] == lo and hist.bins[-1][1] == hi, column
        assert all(b[0] <= b[1] for b in hist.bins)
        assert all(a[1] <= b[0] for a, b in zip(hist.bins, hist.bins[1:], strict=False))
    qty = spark_stats.column("lineitem", "l_qty").histogram  # nulls are not in the histogram
    assert qty.row_count == pytest.approx(LINEITEM_ROWS - LINEITEM_ROWS // 6)


@pytest.mark.spark
def test_spark_cache_hit_makes_no_spark_call(spark_stats, data_dir):
    cache = spark_stats.cache_path
    assert cache.exists()
    again = SparkStatistics(NoSpark(), data_dir, cache_path=cache)
    assert again.table("orders") == spark_stats.table("orders")
    assert again.table(["LINEITEM"]) == spark_stats.table("lineitem")
    assert again.analyze_count == 0
    # the cache is a stats file
    from_file = FileStatistics(cache)
    assert sorted(from_file.names()) == ["lineitem", "orders"]
    assert from_file.table("orders") == spark_stats.table("orders")
    entry = json.loads(cache.read_text())["tables"][spark_stats.paths["lineitem"]]
    assert entry["name"] == "lineitem" and entry["source"]["provider"] == "spark"
    assert [f[0] for f in entry["source"]["files"]] == ["part-00000.parquet", "part-00001.parquet"]


@pytest.mark.spark
def test_spark_cache_invalidated_when_a_file_changes(spark, data_dir, tmp_path):
    folder = tmp_path / "small"
    shutil.copytree(data_dir / "lineitem", folder)
    cache = tmp_path / "cache.json"
    first = SparkStatistics(spark, {"small": folder}, cache_path=cache)
    assert first.table("small").row_count == LINEITEM_ROWS and first.analyze_count == 1

    assert SparkStatistics(NoSpark(), {"small": folder}, cache_path=cache).table("small").row_count == 120

    pq.write_table(lineitem_part(60, 70), folder / "part-00001.parquet")  # 60 -> 10 rows
    changed = SparkStatistics(spark, {"small": folder}, cache_path=cache)
    assert changed.table("small").row_count == 70 and changed.analyze_count == 1
    assert changed.column("small", "l_id").max == 69

    (folder / "part-00002.parquet").write_bytes((folder / "part-00000.parquet").read_bytes())  # a new file
    grown = SparkStatistics(spark, {"small": folder}, cache_path=cache)
    assert grown.table("small").row_count == 130 and grown.analyze_count == 1
    # one entry per table path, the latest
    assert list(json.loads(cache.read_text())["tables"]) == [str(folder)]


@pytest.mark.spark
def test_spark_cache_keeps_the_newest_tables_that_exist(spark, data_dir, tmp_path, monkeypatch):
    """The cache does not grow without bound: an ANALYZE drops the entries of local tables that no longer
    exist and keeps the newest ``CACHE_TABLES`` of the rest (409 entries of deleted temporary folders,
    21 MB, had made a first ``optimize --tables`` of three tables take 29 s instead of 15)."""
    from optimizer.spark import statistics

    monkeypatch.setattr(statistics, "CACHE_TABLES", 3)
    cache = tmp_path / "cache.json"
    kept = []
    for n in range(4):
        folder = tmp_path / f"t{n}"
        shutil.copytree(data_dir / "lineitem", folder)
        kept.append(str(folder))
    entry = {"name": "x", "row_count": 1, "source": {"provider": "spark", "path": "", "files": []}}
    gone = str(tmp_path / "deleted")
    tables = {gone: entry, kept[0]: entry, "s3://bucket/t": entry, kept[1]: entry, kept[2]: entry}
    cache.write_text(json.dumps({"version": statistics.FORMAT_VERSION, "tables": tables}))
    provider = SparkStatistics(spark, {"t3": kept[3]}, cache_path=cache)
    assert provider.table("t3").row_count == LINEITEM_ROWS and provider.analyze_count == 1
    # the deleted folder is dropped, the oldest of the rest (t0, then the URI) go past three
    assert list(json.loads(cache.read_text())["tables"]) == [kept[1], kept[2], kept[3]]


@pytest.mark.spark
def test_spark_missing_table_and_no_cache(spark, tmp_path):
    provider = SparkStatistics(spark, {"gone": tmp_path / "gone.parquet"}, cache_path=tmp_path / "c.json")
    assert provider.table("gone") is None and provider.analyze_count == 0
    assert provider.table("other") is None


@pytest.mark.spark
def test_default_statistics_precedence_with_spark(spark_stats, data_dir, tmp_path):
    stats_file = tmp_path / "override.json"
    stats_file.write_text(
        json.dumps({"tables": {"orders": {"row_count": 1e9, "columns": {"o_cust": {"ndv": 1e6}}}}})
    )
    stack = default_statistics(NoSpark(), data_dir, stats_file=stats_file, cache_path=spark_stats.cache_path)
    assert [type(p).__name__ for p in stack.providers] == [
        "HintStatistics",
        "FileStatistics",
        "SparkStatistics",
        "ParquetStatistics",
    ]
    orders = stack.table("ORDERS")
    assert orders.row_count == 1e9  # explicit file > Spark
    assert stack.column("orders", "o_cust").ndv == 1e6
    assert orders.size_bytes == spark_stats.table("orders").size_bytes  # Spark > Parquet
    assert stack.column("orders", "o_id").ndv == spark_stats.column("orders", "o_id").ndv
    assert stack.column("orders", "o_date").histogram is not None
    assert stack.column("orders", "o_note").min == "n0"  # Spark has no string bounds: Parquet's
    assert stack.table("lineitem").row_count == LINEITEM_ROWS
    assert stack.relation_hint(read_rel_with_hint(3, 4)) == (3.0, 4.0)
