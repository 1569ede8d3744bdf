"""The Spark SQL text of each TPC-H plan of the corpus (Isthmus and DuckDB), kept in
``tests/golden/spark_sql/`` and compared without a JVM: the tables are described by their schemas
(``SparkBackend(None, tables={name: StructType})``), so the text is built but not run.

A change to the compiler that changes a text shows here as a diff to review; after review, regenerate
with ``SUBSTRAIT_OPT_REGOLD=1 pytest tests/test_spark_sql_golden.py``. Whether the texts give the right
answers is the execution tests' job (tests/test_backend_acceptance.py runs the same plans on Spark).
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest
from pyspark.sql import types as T

from optimizer.plan_io import load_plan
from optimizer.spark import SparkBackend
from workloads.corpus import corpus_root

GOLDEN = Path(__file__).parent / "golden" / "spark_sql"
TPCH = corpus_root() / "substrait_consumer/snapshots/producer/integration/tpch"
PLANS = sorted(p for p in TPCH.glob("q*_plan.json") if "validate" not in p.name)

# The TPC-H tables as tests/conftest.py's generator writes them (workloads.tpch).
_TABLES = {
    "customer": "c_custkey bigint, c_name string, c_address string, c_nationkey int, c_phone string, "
    "c_acctbal decimal(15,2), c_mktsegment string, c_comment string",
    "lineitem": "l_orderkey bigint, l_partkey bigint, l_suppkey bigint, l_linenumber bigint, "
    "l_quantity decimal(15,2), l_extendedprice decimal(15,2), l_discount decimal(15,2), l_tax decimal(15,2), "
    "l_returnflag string, l_linestatus string, l_shipdate date, l_commitdate date, l_receiptdate date, "
    "l_shipinstruct string, l_shipmode string, l_comment string",
    "nation": "n_nationkey int, n_name string, n_regionkey int, n_comment string",
    "orders": "o_orderkey bigint, o_custkey bigint, o_orderstatus string, o_totalprice decimal(15,2), "
    "o_orderdate date, o_orderpriority string, o_clerk string, o_shippriority int, o_comment string",
    "part": "p_partkey bigint, p_name string, p_mfgr string, p_brand string, p_type string, p_size int, "
    "p_container string, p_retailprice decimal(15,2), p_comment string",
    "partsupp": "ps_partkey bigint, ps_suppkey bigint, ps_availqty bigint, ps_supplycost decimal(15,2), "
    "ps_comment string",
    "region": "r_regionkey int, r_name string, r_comment string",
    "supplier": "s_suppkey bigint, s_name string, s_address string, s_nationkey int, s_phone string, "
    "s_acctbal decimal(15,2), s_comment string",
}
_ATOMS = {"bigint": T.LongType(), "int": T.IntegerType(), "string": T.StringType(), "date": T.DateType()}


def _schema(ddl: str) -> T.StructType:
    fields = []
    for item in ddl.split(", "):
        name, kind = item.split(" ")
        m = re.fullmatch(r"decimal\((\d+),(\d+)\)", kind)
        fields.append(T.StructField(name, T.DecimalType(int(m[1]), int(m[2])) if m else _ATOMS[kind]))
    return T.StructType(fields)


@pytest.fixture(scope="module")
def backend():
    return SparkBackend(None, tables={name: _schema(ddl) for name, ddl in _TABLES.items()})


def test_the_corpus_has_the_tpch_plans():
    assert len(PLANS) >= 35, [p.name for p in PLANS]


@pytest.mark.parametrize("path", PLANS, ids=[p.name.removesuffix("_plan.json") for p in PLANS])
def test_spark_sql_of_tpch_plans(backend, path):
    text, tables = backend.to_sql(load_plan(path))
    assert set(tables) == {f"t{i}" for i in range(len(tables))}
    golden = GOLDEN / (path.name.removesuffix("_plan.json") + ".sql")
    if os.environ.get("SUBSTRAIT_OPT_REGOLD"):
        golden.write_text(text + "\n")
    assert golden.exists(), f"no golden text for {path.name}: run with SUBSTRAIT_OPT_REGOLD=1 and review it"
    assert text + "\n" == golden.read_text(), f"{path.name}: the SQL text changed (review, then regenerate)"
