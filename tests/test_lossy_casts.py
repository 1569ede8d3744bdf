"""A declared type narrower than the table's column is refused, not cast (issue 42, item 7).

Calcite writes a ``DECIMAL`` without scale as ``decimal(19,0)``: a TPC-H plan from such a catalog
declares ``l_discount`` (``decimal(15,2)`` in the files) as ``decimal(19,0)``, and casting the read to
it rounds 0.06 to 0 (Q6's revenue becomes NULL). Such a read is exit 2 naming the table, the column
and both types, unless ``--allow-lossy-casts`` (``SparkBackend(allow_lossy_casts=True)``); a widening
cast (``i32`` data declared ``i64``, ``decimal(15,2)`` declared ``decimal(19,2)``) still runs.
"""

from __future__ import annotations

import copy
import datetime
import decimal
import json
import os
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pyspark.sql import types as T

from optimizer.errors import PlanError
from optimizer.plan_io import load_plan
from optimizer.spark.tables import fixed_offset_zone, lossless_cast
from workloads.corpus import corpus_root
from workloads.tpch import TPCH_SCHEMAS

Q6 = corpus_root() / "substrait_consumer/snapshots/producer/integration/tpch/q06-isthmus_plan.json"
D = T.DecimalType

# -- which casts keep every value -------------------------------------------------------------------

LOSSLESS = [
    (T.IntegerType(), T.LongType()), (T.ByteType(), T.ShortType()), (T.ShortType(), T.IntegerType()),
    (T.IntegerType(), D(10, 0)), (T.LongType(), D(19, 0)), (T.LongType(), D(38, 10)), (T.ByteType(), D(3, 0)),
    (T.ShortType(), T.FloatType()), (T.IntegerType(), T.DoubleType()),
    (D(15, 2), D(19, 2)), (D(15, 2), D(17, 4)), (D(15, 2), D(38, 18)), (D(9, 0), T.IntegerType()),
    (D(18, 0), T.LongType()), (D(2, 0), T.ByteType()), (D(15, 0), T.DoubleType()), (D(7, 0), T.FloatType()),
    (T.FloatType(), T.DoubleType()), (T.TimestampType(), T.TimestampNTZType()),
    (T.ArrayType(D(15, 2)), T.ArrayType(D(16, 2))),
    (T.StructType([T.StructField("a", T.IntegerType())]), T.StructType([T.StructField("x", T.LongType())])),
]
LOSSY = [
    (T.LongType(), T.IntegerType()), (T.IntegerType(), T.ShortType()), (T.ShortType(), T.ByteType()),
    (T.IntegerType(), D(9, 0)), (T.IntegerType(), D(10, 1)), (T.LongType(), D(18, 0)),
    (T.IntegerType(), T.FloatType()), (T.LongType(), T.DoubleType()),
    (D(15, 2), D(19, 0)), (D(15, 2), D(15, 1)), (D(15, 2), D(15, 3)), (D(38, 0), D(38, 2)),
    (D(10, 0), T.IntegerType()), (D(19, 0), T.LongType()), (D(5, 2), T.IntegerType()), (D(15, 2), T.DoubleType()),
    (D(16, 0), T.DoubleType()), (D(8, 0), T.FloatType()),
    (T.DoubleType(), T.FloatType()), (T.DoubleType(), T.LongType()), (T.FloatType(), D(38, 10)),
    (T.ArrayType(D(15, 2)), T.ArrayType(D(19, 0))),
    (T.MapType(T.StringType(), T.LongType()), T.MapType(T.StringType(), T.IntegerType())),
    (T.StructType([T.StructField("a", T.LongType())]), T.StructType([T.StructField("a", T.IntegerType())])),
]


@pytest.mark.parametrize("source,target", LOSSLESS, ids=lambda t: t.simpleString())
def test_lossless_casts(source, target):
    assert lossless_cast(source, target)


@pytest.mark.parametrize("source,target", LOSSY, ids=lambda t: t.simpleString())
def test_lossy_casts(source, target):
    assert not lossless_cast(source, target)


def test_timestamps_with_and_without_zone_convert_one_to_one_only_in_a_fixed_zone():
    assert lossless_cast(T.TimestampNTZType(), T.TimestampType(), fixed_zone=True)
    assert not lossless_cast(T.TimestampNTZType(), T.TimestampType(), fixed_zone=False)  # DST gaps and folds
    assert [fixed_offset_zone(z) for z in ("UTC", "Etc/UTC", "+02:00", "GMT-05:00", "America/New_York")] == [
        True, True, True, True, False]


# -- a real plan whose declared types are narrower than the Parquet file's ------------------------------


def _narrowed(doc: dict, scale: int | None = 0, precision: int = 19) -> dict:
    """``doc`` with every decimal(15,2) of its reads' base schemas declared decimal(precision, scale)."""
    out = copy.deepcopy(doc)
    stack = [out]
    while stack:
        node = stack.pop()
        if isinstance(node, dict):
            if "baseSchema" in node:
                for t in node["baseSchema"]["struct"]["types"]:
                    if "decimal" in t and (t["decimal"]["precision"], t["decimal"].get("scale", 0)) == (15, 2):
                        t["decimal"]["precision"], t["decimal"]["scale"] = precision, scale
            stack.extend(node.values())
        elif isinstance(node, list):
            stack.extend(node)
    return out


@pytest.fixture(scope="module")
def tiny(tmp_path_factory) -> Path:
    """A lineitem of three rows (TPC-H's schema) and Q6's plans: as written (``q6.json``), with the
    decimals declared ``decimal(19,0)`` as Calcite writes a scale-less DECIMAL (``q6-narrow.json``)
    and ``decimal(19,2)`` (``q6-wide.json``). Q6's answer: 1000.00 * 0.06 = 60.0000."""
    folder = tmp_path_factory.mktemp("lossy")
    schema = TPCH_SCHEMAS["lineitem"]
    day = datetime.date(1994, 3, 1)
    rows = [  # in Q6's range, out of it (discount), out of it (quantity)
        (1, 1, 1, 1, "10.00", "1000.00", "0.06", "0.01", "N", "O", day, day, day, "NONE", "AIR", "a"),
        (2, 2, 2, 1, "10.00", "500.00", "0.02", "0.01", "N", "O", day, day, day, "NONE", "AIR", "b"),
        (3, 3, 3, 1, "40.00", "700.00", "0.06", "0.01", "N", "O", day, day, day, "NONE", "AIR", "c"),
    ]
    columns = []
    for i, field in enumerate(schema):
        values = [r[i] for r in rows]
        if pa.types.is_decimal(field.type):
            values = [decimal.Decimal(v) for v in values]
        columns.append(pa.array(values, type=field.type))
    tables = folder / "tables"
    tables.mkdir()
    pq.write_table(pa.Table.from_arrays(columns, schema=schema), tables / "lineitem.parquet")
    doc = json.loads(Q6.read_text())
    (folder / "q6.json").write_text(json.dumps(doc))
    (folder / "q6-narrow.json").write_text(json.dumps(_narrowed(doc)))
    (folder / "q6-wide.json").write_text(json.dumps(_narrowed(doc, scale=2, precision=19)))
    return folder


@pytest.mark.spark
def test_backend_refuses_a_narrower_declared_type(spark, tiny):
    from optimizer.spark import SparkBackend

    tables = str(tiny / "tables")
    right = SparkBackend(spark, tables=tables).execute(load_plan(str(tiny / "q6.json")))
    assert right.column(0).to_pylist() == [decimal.Decimal("60.0000")]
    with pytest.raises(PlanError) as info:
        SparkBackend(spark, tables=tables).execute(load_plan(str(tiny / "q6-narrow.json")))
    text = str(info.value)
    assert "column 'l_quantity' of table 'LINEITEM' is decimal(15,2) in the data but decimal(19,0) in the plan" in text
    assert "--allow-lossy-casts" in text and "read.base_schema" in text
    # Asked for, the cast is made: 0.06 becomes 0, no row passes Q6's filter (what the refusal prevents).
    lossy = SparkBackend(spark, tables=tables, allow_lossy_casts=True).execute(load_plan(str(tiny / "q6-narrow.json")))
    assert lossy.column(0).to_pylist() == [None]
    # A wider declared type runs and keeps the answer.
    wide = SparkBackend(spark, tables=tables).execute(load_plan(str(tiny / "q6-wide.json")))
    assert [decimal.Decimal(v) for v in wide.column(0).to_pylist()] == [decimal.Decimal("60")]


@pytest.mark.spark
def test_widening_integer_runs(spark, tmp_path):
    from optimizer.spark import SparkBackend

    pq.write_table(pa.table({"a": pa.array([2**31 - 1, -5], pa.int32())}), tmp_path / "t.parquet")

    def plan(kind: str) -> dict:
        read = {"read": {"baseSchema": {"names": ["a"], "struct": {"types": [{kind: {"nullability": "NULLABILITY_NULLABLE"}}]}},
                         "namedTable": {"names": ["t"]}}}
        return load_plan(json.dumps({"relations": [{"root": {"input": read, "names": ["a"]}}]}))

    assert SparkBackend(spark, tables=str(tmp_path)).execute(plan("i64")).column(0).to_pylist() == [2**31 - 1, -5]
    with pytest.raises(PlanError, match="column 'a' of table 't' is int in the data but smallint in the plan"):
        SparkBackend(spark, tables=str(tmp_path)).execute(plan("i16"))


def _cli(*args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "optimizer", *args], capture_output=True, text=True, timeout=300,
                          env={**os.environ, **(env or {})})


@pytest.mark.spark
def test_cli_refuses_with_one_line_and_runs_with_the_flag(tiny, tmp_path):
    tables = str(tiny / "tables")
    env = {"XDG_CACHE_HOME": str(tmp_path / "cache")}
    refused = _cli("run", str(tiny / "q6-narrow.json"), "--tables", tables, env=env)
    assert refused.returncode == 2, refused.stderr
    lines = refused.stderr.splitlines()
    assert len(lines) == 1, refused.stderr
    assert lines[0].startswith(f"substrait-opt: error: {tiny / 'q6-narrow.json'}: relations[0]")
    assert "table 'LINEITEM'" in lines[0] and "column 'l_quantity'" in lines[0]
    assert "decimal(15,2) in the data but decimal(19,0) in the plan" in lines[0]
    flagged = _cli("run", str(tiny / "q6-narrow.json"), str(tiny / "q6.json"), "--tables", tables,
                   "--allow-lossy-casts", env=env)
    assert flagged.returncode == 0, flagged.stderr
    assert flagged.stderr == ""  # Spark started and answered: nothing on stderr but our own lines (none)
    assert "2 ok, 0 failed" in flagged.stdout and "60.0000" in flagged.stdout


# -- the producers' plans in the tests ---------------------------------------------------------------------

#: Corpus plans whose declared types are narrower than the tables the tests generate: the producers'
#: catalogs say ``int`` where our Parquet files have ``bigint`` (the function tests' ``t.a``; Ibis'
#: ``ps_partkey`` and ``o_orderkey``). The values fit, but the plan does not describe these files: the
#: strict backend refuses them and the acceptance tests run them with ``allow_lossy_casts``.
NARROWER_THAN_OUR_FILES = {
    "function/arithmetic/abs-ibis", "function/arithmetic/abs-isthmus", "function/arithmetic/abs-validate-isthmus",
    "function/arithmetic/add-ibis", "function/arithmetic/avg-ibis", "function/arithmetic/divide-ibis",
    "function/arithmetic/max-ibis", "function/arithmetic/median-ibis", "function/arithmetic/min-ibis",
    "function/arithmetic/modulus-ibis", "function/arithmetic/multiply-ibis", "function/arithmetic/negate-ibis",
    "function/arithmetic/sign-ibis", "function/arithmetic/sign-isthmus", "function/arithmetic/sign-validate-isthmus",
    "function/arithmetic/subtract-ibis", "function/arithmetic/sum-ibis", "function/boolean/and-ibis",
    "function/boolean/and-isthmus", "function/boolean/and-validate-isthmus", "function/boolean/not-isthmus",
    "function/boolean/not-validate-isthmus", "function/boolean/or-ibis", "function/boolean/or-isthmus",
    "function/boolean/or-validate-isthmus", "function/comparison/between-isthmus",
    "function/comparison/between-validate-isthmus", "function/comparison/equal-ibis", "function/comparison/gt-ibis",
    "function/comparison/gte-ibis", "function/comparison/is_not_null-isthmus",
    "function/comparison/is_not_null-validate-isthmus", "function/comparison/is_null-isthmus",
    "function/comparison/is_null-validate-isthmus", "function/comparison/lt-ibis", "function/comparison/lte-ibis",
    "function/string/upper-ibis",
}


def _narrowing_reads(doc: dict, schemas: dict[str, T.StructType]) -> list[str]:
    """``table.column: data -> declared`` for each column a plan's named-table reads declare narrower than
    ``schemas`` (our files) have it."""
    from google.protobuf import json_format
    from substrait.proto import Type

    from optimizer.spark.types import substrait_type_to_spark

    found = []
    stack = [doc]
    while stack:
        node = stack.pop()
        if isinstance(node, dict):
            table = node.get("namedTable", {}).get("names", [""])[-1].lower()
            if table in schemas and "baseSchema" in node:
                have = {f.name.lower(): f.dataType for f in schemas[table].fields}
                base = node["baseSchema"]
                for name, t in zip(base.get("names", []), base.get("struct", {}).get("types", []), strict=False):
                    declared = substrait_type_to_spark(json_format.ParseDict(t, Type(), ignore_unknown_fields=True))
                    source = have.get(name.lower())
                    if source is not None and not lossless_cast(source, declared):
                        found.append(f"{table}.{name}: {source.simpleString()} -> {declared.simpleString()}")
            stack.extend(node.values())
        elif isinstance(node, list):
            stack.extend(node)
    return found


def test_which_corpus_plans_declare_narrower_types(tpch_dir, tpch_small_dir):
    """No TPC-H plan of the corpus (Isthmus, DuckDB, validated Isthmus) declares a type narrower than the
    generated files; the plans that do are the function tests listed above."""
    from pyspark.sql.pandas.types import from_arrow_schema

    from workloads.corpus import corpus_plans, table_map
    from workloads.tpch import table_paths

    schemas = {name: from_arrow_schema(pq.read_schema(path)) for name, path in table_paths(tpch_dir).items()}
    narrowing = {}
    for plan in corpus_plans(validated=None):
        try:
            tables = table_map(plan)
        except KeyError:  # reads tables the tests do not generate
            continue
        found = _narrowing_reads(plan.json(), {k.lower(): schemas[v] for k, v in tables.items() if v in schemas})
        if found:
            narrowing[plan.id] = found
    assert set(narrowing) == NARROWER_THAN_OUR_FILES, sorted(set(narrowing) ^ NARROWER_THAN_OUR_FILES)
    assert {entry.split(": ")[1] for found in narrowing.values() for entry in found} == {"bigint -> int"}
    assert not [p for p in narrowing if p.startswith("integration/")]


# -- the hostile profile's class ----------------------------------------------------------------------------


@pytest.mark.spark
def test_hostile_casts_class(spark, tmp_path):
    """Every case of the fuzzer's ``casts`` class through ``run --tables``: a lossless declared type gives
    the file's values back, a lossy one is exit 2 with one line."""
    import random

    from testing.hostile import _cast_cases, _casts, run_casts_on_spark

    cases = _cast_cases()
    rng = random.Random(5)
    seen = set()
    outcomes = []
    for i in range(400):
        item = _casts(rng)
        key = (item.data, item.tables["t"])
        if key in seen:
            continue
        seen.add(key)
        outcomes.append(run_casts_on_spark(i, item, tmp_path))
    assert len(seen) == len(cases)
    assert not [o for o in outcomes if o.verdict.startswith("FAIL")], [o.verdict for o in outcomes]
    assert sorted(o.verdict for o in outcomes) == sorted("exit 2" if not c[3] else "answer" for c in cases)
