"""The differential-testing harness: verdicts, order checks, the best-effort-ignoring mode, the
``diff`` command, and proof that a wrong rewrite is caught."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from hypothesis import HealthCheck, given, settings
from substrait.proto import JoinRel, Plan, Rel

from optimizer.dag import inputs
from optimizer.difftest import DiffCase, compare, ordered_by
from optimizer.difftest.harness import ColumnSpec, Database, TableSpec, decode_value, encode_value
from optimizer.engine import NewRel, Rule
from optimizer.expr_utils import referenced_fields, shift_fields
from optimizer.plan_io import load_plan, save_plan
from optimizer.schema.check import check_plan
from testing.strategies import cases

# ----------------------------------------------------------------------------------- plan helpers


def col(i: int) -> dict:
    return {"selection": {"directReference": {"structField": {"field": i}}, "rootReference": {}}}


def call(anchor: int, *args: dict, out: str = "bool") -> dict:
    return {"scalarFunction": {"functionReference": anchor, "outputType": {out: {"nullability": "NULLABILITY_NULLABLE"}},
                               "arguments": [{"value": a} for a in args]}}


def read(name: str, *columns: str, **extra) -> dict:
    body = {"namedTable": {"names": [name]},
            "baseSchema": {"names": list(columns),
                           "struct": {"types": [{"i64": {"nullability": "NULLABILITY_NULLABLE"}} for _ in columns]}}}
    body.update(extra)
    return {"read": body}


EXTENSIONS = {
    "extensionUrns": [{"extensionUrnAnchor": 1, "urn": "extension:io.substrait:functions_comparison"}],
    "extensions": [
        {"extensionFunction": {"extensionUrnReference": 1, "functionAnchor": 1, "name": "equal"}},
        {"extensionFunction": {"extensionUrnReference": 1, "functionAnchor": 2, "name": "is_null"}},
        {"extensionFunction": {"extensionUrnReference": 1, "functionAnchor": 3, "name": "gt"}},
    ],
}
EQUAL, IS_NULL, GT = 1, 2, 3


def plan_of(root: dict, names: list[str]) -> Plan:
    plan = load_plan(json.dumps({**EXTENSIONS, "relations": [{"root": {"input": root, "names": names}}]}))
    assert check_plan(plan) == []
    return plan


def write_tables(directory, tables: dict[str, list[tuple]]) -> dict[str, str]:
    """``{name: rows}`` of i64 columns ``a``, ``b``... -> parquet files."""
    db = Database()
    for name, rows in tables.items():
        width = len(rows[0])
        db.tables[name] = TableSpec(name, [ColumnSpec("abcdefgh"[i], "i64") for i in range(width)], rows)
    return db.write_parquet(directory)


# A left join a.a = b.a, then a filter on the right (null-supplying) side's column b.b IS NULL.
LEFT_JOIN_FILTER = {"filter": {
    "input": {"join": {"type": "JOIN_TYPE_LEFT", "left": read("a", "a"), "right": read("b", "a", "b"),
                       "expression": call(EQUAL, col(0), col(1))}},
    "condition": call(IS_NULL, col(2)),
}}
LEFT_JOIN_TABLES = {"a": [(1,), (2,)], "b": [(1, 10)]}


def _push_below_left_join(g, node, ctx):
    """WRONG on purpose: pushes a filter on the right columns of a LEFT join into the right input,
    where it removes right rows instead of the left rows padded with NULLs."""
    join = inputs(g, node)[0]
    jrel = g.nodes[join]["rel"]
    if g.nodes[join]["kind"] != "join" or jrel.join.type != JoinRel.JOIN_TYPE_LEFT:
        return None
    left, right = inputs(g, join)
    n_left = len(ctx.schema(left))
    cond = g.nodes[node]["rel"].filter.condition
    if not referenced_fields(cond) or min(referenced_fields(cond)) < n_left:
        return None
    pushed = Rel()
    pushed.filter.condition.CopyFrom(shift_fields(cond, -n_left))
    return NewRel(jrel, [left, NewRel(pushed, [right])])


BROKEN_PUSHDOWN = Rule("broken_left_join_pushdown", "logical", frozenset({"filter"}), _push_below_left_join)


def _into_best_effort_only(g, node, ctx):
    """WRONG on purpose: moves a filter over a read into ``best_effort_filter`` only (which a
    consumer may skip) and drops the FilterRel."""
    child = inputs(g, node)[0]
    if g.nodes[child]["kind"] != "read":
        return None
    new = Rel()
    new.CopyFrom(g.nodes[child]["rel"])
    new.read.best_effort_filter.CopyFrom(g.nodes[node]["rel"].filter.condition)
    return NewRel(new, [])


BROKEN_BEST_EFFORT = Rule("broken_best_effort", "physical", frozenset({"filter"}), _into_best_effort_only)


# ---------------------------------------------------------------------------------- no Spark


def test_ordered_by_follows_sort_keys_through_fetch_project_and_emits():
    sort = {"sort": {"input": read("a", "a", "b", "c"),
                     "sorts": [{"expr": col(2), "direction": "SORT_DIRECTION_ASC_NULLS_LAST"},
                               {"expr": call(GT, col(0), col(1)), "direction": "SORT_DIRECTION_ASC_NULLS_LAST"},
                               {"expr": col(0), "direction": "SORT_DIRECTION_DESC_NULLS_LAST"}]}}
    assert ordered_by(plan_of(sort, ["a", "b", "c"])) == [2, 0]
    project = {"project": {"input": sort, "expressions": [col(1)], "common": {"emit": {"outputMapping": [3, 0, 2]}}}}
    fetch = {"fetch": {"input": project, "countExpr": {"literal": {"i64": "3"}}}}
    assert ordered_by(plan_of(fetch, ["x", "y", "z"])) == [2, 1]
    assert ordered_by(plan_of(read("a", "a"), ["a"])) == []
    assert ordered_by(plan_of({"filter": {"input": sort, "condition": call(GT, col(0), col(1))}}, list("abc"))) == []


def test_values_round_trip_through_json():
    import datetime
    import decimal
    import math

    for spec, value in [("fp64", float("nan")), ("fp32", float("-inf")), ("fp64", -0.0), ("decimal(38,10)",
                        decimal.Decimal("-9999999999999999999999999999.9999999999")), ("date", datetime.date(1, 1, 1)),
                        ("timestamp", datetime.datetime(9999, 12, 31, 23, 59, 59, 999999)), ("string", "日本 😀"),
                        ("i64", -(2**63)), ("bool", False)]:
        back = decode_value(spec, json.loads(json.dumps(encode_value(spec, value))))
        if isinstance(value, float) and math.isnan(value):
            assert math.isnan(back)
        else:
            assert back == value and (not isinstance(value, float) or math.copysign(1, back) == math.copysign(1, value))


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(cases())
def test_generated_cases_are_valid_and_survive_json(case):
    assert check_plan(case.plan) == []
    back = DiffCase.from_json(case.dumps())
    assert back.plan == case.plan
    assert back.database.to_json() == case.database.to_json()
    assert back.capabilities == case.capabilities and back.config == case.config
    assert back.fingerprint() == case.fingerprint()
    for table in case.database.tables.values():
        table.to_arrow()  # the values fit the column types


def test_diff_rejects_bad_input_before_spark(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text('{"relations": [')
    proc = subprocess.run([sys.executable, "-m", "optimizer", "diff", str(bad), str(tmp_path / "missing.json")],
                          capture_output=True, text=True)
    assert proc.returncode == 2
    assert proc.stderr.count("\n") == 1 and "bad.json" in proc.stderr and "Traceback" not in proc.stderr


# ------------------------------------------------------------------------------------ Spark


@pytest.fixture(scope="module")
def backend_for(spark):
    from optimizer.spark import SparkBackend

    return lambda tables: SparkBackend(spark, tables=tables)


@pytest.mark.spark
def test_correct_optimizer_gives_equal(tmp_path, backend_for):
    backend = backend_for(write_tables(tmp_path, LEFT_JOIN_TABLES))
    result = compare(plan_of(LEFT_JOIN_FILTER, ["a", "ba", "bb"]), backend=backend)
    assert result.equal, result
    assert result.original_rows == result.optimized_rows == 1
    assert result.original_seconds > 0 and result.optimized_seconds > 0


@pytest.mark.spark
def test_wrong_rule_is_reported_different(tmp_path, backend_for):
    backend = backend_for(write_tables(tmp_path, LEFT_JOIN_TABLES))
    result = compare(plan_of(LEFT_JOIN_FILTER, ["a", "ba", "bb"]), backend=backend, rules=[BROKEN_PUSHDOWN])
    assert result.rules_fired == ["broken_left_join_pushdown"]
    assert result.different, result
    assert result.verdict() == "DIFFERENT (row count differs: optimized 2, original 1)"
    details = result.details()
    assert details["original_sample"] == [[2, None, None]]
    assert sorted(details["optimized_sample"]) == [[1, None, None], [2, None, None]]


@pytest.mark.spark
def test_rewrite_relying_on_best_effort_filter_is_caught(tmp_path, backend_for):
    backend = backend_for(write_tables(tmp_path, {"a": [(1,), (5,), (9,)]}))
    plan = plan_of({"filter": {"input": read("a", "a"), "condition": call(GT, col(0), {"literal": {"i64": "4"}})}}, ["a"])
    # Honest best-effort use (the rule keeps the FilterRel): equal.
    honest = compare(plan, backend=backend,
                     capabilities={"default": "none", "rules": [{"function": "gt", "support": "best_effort"}]})
    assert honest.equal, honest
    assert "filter_into_read" in honest.rules_fired
    # Relying on the best-effort filter: the optimized plan runs with it ignored, so the rows come back.
    broken = compare(plan, backend=backend, rules=[BROKEN_BEST_EFFORT])
    assert broken.different and broken.reason == "row count differs: optimized 3, original 2"


@pytest.mark.spark
def test_unsupported_original_is_skipped(tmp_path, backend_for):
    backend = backend_for(write_tables(tmp_path, {"a": [(1,)]}))
    plan = plan_of({"read": {"icebergTable": {"direct": {"metadataUri": "file:///nowhere"}},
                             "baseSchema": read("a", "a")["read"]["baseSchema"]}}, ["a"])
    result = compare(plan, backend=backend)
    assert result.skipped and not result.failed and result.stage == "original", result


@pytest.mark.spark
def test_order_of_a_sorted_root_is_checked(tmp_path, backend_for):
    from optimizer.engine import Rule as _Rule

    backend = backend_for(write_tables(tmp_path, {"a": [(3, 1), (1, 2), (2, 3)]}))
    sort = {"sort": {"input": read("a", "a", "b"), "sorts": [{"expr": col(0), "direction": "SORT_DIRECTION_ASC_NULLS_LAST"}]}}
    plan = plan_of(sort, ["a", "b"])

    def flip(g, node, ctx):  # WRONG on purpose: sorts descending
        rel = Rel()
        rel.CopyFrom(g.nodes[node]["rel"])
        if rel.sort.sorts[0].direction == 4:
            return None
        rel.sort.sorts[0].direction = 4
        return NewRel(rel, inputs(g, node))

    assert compare(plan, backend=backend).equal
    result = compare(plan, backend=backend, rules=[_Rule("flip", "physical", frozenset({"sort"}), flip)])
    assert result.ordered_by == [0]
    assert result.different and result.reason.startswith("order differs at row 0"), result


@pytest.mark.spark
@pytest.mark.parametrize("query", [3, 10, 18])
def test_tpch_plans_are_unchanged_in_answer(query, tpch_dir, datafusion_tpch_plans, spark):
    from optimizer.spark import SparkBackend
    from optimizer.spark.statistics import default_statistics

    backend = SparkBackend(spark, tables=str(tpch_dir))
    result = compare(datafusion_tpch_plans[query], backend=backend, statistics=default_statistics(tables=str(tpch_dir)))
    assert result.equal, result
    assert result.ordered_by  # ORDER BY ... LIMIT: the order is compared too


@pytest.mark.spark
def test_diff_command(tmp_path, spark, monkeypatch, capsys):
    from optimizer.cli import main

    tables = tmp_path / "tables"
    write_tables(tables, LEFT_JOIN_TABLES)
    good = tmp_path / "left_join.json"
    save_plan(plan_of(LEFT_JOIN_FILTER, ["a", "ba", "bb"]), good)
    unsupported = tmp_path / "iceberg.json"
    save_plan(plan_of({"read": {"icebergTable": {"direct": {"metadataUri": "file:///nowhere"}},
                                "baseSchema": read("a", "a")["read"]["baseSchema"]}}, ["a"]), unsupported)
    out = tmp_path / "out"
    argv = ["diff", str(good), str(unsupported), "--tables", str(tables), "--no-spark-stats", "--out", str(out)]
    assert main(argv) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("left_join: equal  [original ") and lines[0].endswith(" s]")
    assert lines[1].startswith("iceberg: skipped (")
    assert lines[-1] == "1 passed, 0 failed"
    assert not out.exists()

    import optimizer.rules as rules

    monkeypatch.setattr(rules, "RULES", [BROKEN_PUSHDOWN])
    assert main(argv) == 1
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("left_join: DIFFERENT (row count differs: optimized 2, original 1)")
    assert lines[-1] == "0 passed, 1 failed"
    assert sorted(p.name for p in out.iterdir()) == [
        "left_join.diff.json", "left_join.optimized.json", "left_join.original.json"]
    diff = json.loads((out / "left_join.diff.json").read_text())
    assert diff["status"] == "different" and diff["original_sample"] == [[2, None, None]]
    assert load_plan(str(out / "left_join.optimized.json")).relations
