"""Untrusted plans (issue 14): no variable substitution, no file access beyond the tables, no crash.

See docs/security.md. Each test names the item of the issue it covers.
"""

from __future__ import annotations

import json

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from optimizer.cli import main
from optimizer.plan_io import load_plan

SECRET = "${env:HOME} ${system:java.home} ${sparkconf:spark.app.name} $x \\ ' ${"
_REQ = {"nullability": "NULLABILITY_REQUIRED"}


def _sel(field: int) -> dict:
    return {"selection": {"directReference": {"structField": {"field": field}}, "rootReference": {}}}


def _vt_plan(value: str, names: list[str]) -> dict:
    """A VirtualTable of one string row, then the column and a string literal, under ``names``."""
    read = {"read": {"baseSchema": {"names": [names[0]], "struct": {"types": [{"string": _REQ}]}},
                     "virtualTable": {"values": [{"fields": [{"string": value}]}]}}}
    project = {"project": {"common": {"emit": {"outputMapping": [1, 2]}}, "input": read,
                           "expressions": [_sel(0), {"literal": {"string": value}}]}}
    return {"relations": [{"root": {"input": project, "names": names}}]}


# -- 1. Spark variable substitution -----------------------------------------------------------


def test_item1_literals_and_names_are_not_substituted(spark, tmp_path):
    from optimizer.spark import SparkBackend

    names = ["${env:HOME} col", "${system:java.home}"]
    table = SparkBackend(spark).execute(load_plan(json.dumps(_vt_plan(SECRET, names))))
    assert table.column_names == names
    assert table.to_pylist() == [{names[0]: SECRET, names[1]: SECRET}]

    # A table whose column is called ${env:HOME}: found under its own name, not the home directory.
    pq.write_table(pa.table({"${env:HOME}": [1, 2]}), tmp_path / "t.parquet")
    read = {"read": {"namedTable": {"names": ["t"]},
                     "baseSchema": {"names": ["${env:HOME}"], "struct": {"types": [{"i64": _REQ}]}}}}
    plan = {"relations": [{"root": {"input": read, "names": ["${sparkconf:spark.master}"]}}]}
    table = SparkBackend(spark, tables=str(tmp_path)).execute(load_plan(json.dumps(plan)))
    assert table.column_names == ["${sparkconf:spark.master}"]
    assert table.column(0).to_pylist() == [1, 2]
