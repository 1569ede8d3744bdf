"""Legacy/replacement field pairs of the upgrade table: an empty old repeated field (or an old scalar at
its default) beside the new one says nothing and is accepted; both given and disagreeing is exit 2 naming
the place. Isthmus wrote every function with an empty ``"args": []`` beside ``"arguments"`` for a while."""

from __future__ import annotations

import json

import protobuf_wire as wire
import pytest
from substrait.proto import Plan

from optimizer.cli import main
from optimizer.errors import PlanError
from optimizer.plan_io import load_plan
from workloads.corpus import corpus_root

CORPUS = corpus_root()
ISTHMUS = CORPUS / "substrait_consumer/snapshots/producer/integration/tpch/q09-isthmus_plan.json"
FUNCTION_KEYS = ("scalarFunction", "aggregateFunction", "windowFunction", "measure")


def _functions(doc, out):
    """Every function call object (scalar, aggregate measure, window) of a JSON plan."""
    if isinstance(doc, dict):
        for key, value in doc.items():
            if key in FUNCTION_KEYS and isinstance(value, dict) and "functionReference" in value:
                out.append(value)
            _functions(value, out)
    elif isinstance(doc, list):
        for value in doc:
            _functions(value, out)
    return out


def test_isthmus_plan_with_empty_args_beside_arguments_loads_unchanged():
    """Isthmus (Calcite) wrote ``"args": []`` in every function beside the real ``arguments``."""
    doc = json.loads(ISTHMUS.read_text())
    calls = _functions(doc, [])
    assert len(calls) >= 10
    for call in calls:
        call["args"] = []
    assert load_plan(json.dumps(doc)) == load_plan(ISTHMUS)


def _one_function_plan(**call_fields) -> str:
    call = {"functionReference": 1, "outputType": {"bool": {"nullability": "NULLABILITY_NULLABLE"}}, **call_fields}
    return json.dumps({
        "extensionUrns": [{"extensionUrnAnchor": 1, "urn": "extension:io.substrait:functions_comparison"}],
        "extensions": [{"extensionFunction": {"extensionUrnReference": 1, "functionAnchor": 1, "name": "gt:i64_i64"}}],
        "relations": [{"root": {"names": ["a"], "input": {"filter": {
            "input": {"read": {"namedTable": {"names": ["t"]}, "baseSchema": {"names": ["a"], "struct": {
                "types": [{"i64": {"nullability": "NULLABILITY_NULLABLE"}}]}}}},
            "condition": {"scalarFunction": call}}}}}]})


FIELD0 = {"selection": {"directReference": {"structField": {"field": 0}}, "rootReference": {}}}
THREE = {"literal": {"i64": "3"}}
FOUR = {"literal": {"i64": "4"}}


def test_args_and_arguments_both_given_must_agree(tmp_path, capsys):
    new = [{"value": FIELD0}, {"value": THREE}]
    same = load_plan(_one_function_plan(args=[FIELD0, THREE], arguments=new))
    assert same == load_plan(_one_function_plan(arguments=new))
    with pytest.raises(PlanError, match="'args' and the new 'arguments' disagree") as err:
        load_plan(_one_function_plan(args=[FIELD0, FOUR], arguments=new))
    assert "filter.condition.scalar_function" in str(err.value)
    bad = tmp_path / "bad.json"
    bad.write_text(_one_function_plan(args=[FIELD0, FOUR], arguments=new))
    assert main(["explain", str(bad)]) == 2
    line = capsys.readouterr().err.strip()
    assert "\n" not in line and "bad.json" in line and "scalar_function" in line


def test_binary_args_beside_arguments():
    """Binary: an old ``args`` (field 2) beside ``arguments`` that says the same is read once."""
    plan = load_plan(_one_function_plan(arguments=[{"value": FIELD0}, {"value": THREE}]))
    fn = plan.relations[0].root.input.filter.condition.scalar_function
    old = b"".join(wire.field(2, a.value.SerializeToString()) for a in fn.arguments)
    assert load_plan(_with_unknown(plan, old)) == plan
    other = load_plan(_one_function_plan(arguments=[{"value": FIELD0}, {"value": FOUR}]))
    old_other = b"".join(
        wire.field(2, a.value.SerializeToString())
        for a in other.relations[0].root.input.filter.condition.scalar_function.arguments)
    with pytest.raises(PlanError, match="disagree"):
        load_plan(_with_unknown(plan, old_other))


def _with_unknown(plan: Plan, extra: bytes) -> bytes:
    """``plan`` serialised with ``extra`` appended to its filter condition's ScalarFunction."""
    copy = Plan()
    copy.CopyFrom(plan)
    fn = copy.relations[0].root.input.filter.condition.scalar_function
    fn.MergeFromString(extra)  # kept as unknown fields: the current proto has no field 2
    return copy.SerializeToString()


def _aggregate_plan(grouping: dict) -> str:
    read = {"read": {"namedTable": {"names": ["t"]},
                     "baseSchema": {"names": ["a"], "struct": {"types": [{"i64": {"nullability": "NULLABILITY_NULLABLE"}}]}}}}
    return json.dumps({"relations": [{"root": {"names": ["a"], "input": {"aggregate": {
        "input": read, "groupingExpressions": [FIELD0], "groupings": [grouping]}}}}]})


def test_empty_old_grouping_expressions_beside_references():
    plan = load_plan(_aggregate_plan({"expressionReferences": [0], "groupingExpressions": []}))
    assert plan == load_plan(_aggregate_plan({"expressionReferences": [0]}))


def _values_plan(**fields) -> str:
    return json.dumps({"relations": [{"root": {"names": ["a"], "input": {"read": {
        "baseSchema": {"names": ["a"], "struct": {"types": [{"i64": {"nullability": "NULLABILITY_REQUIRED"}}]}},
        "virtualTable": fields}}}}]})


def test_virtual_table_values_beside_expressions():
    new = [{"fields": [{"literal": {"i64": "1"}}]}, {"fields": [{"literal": {"i64": "2"}}]}]
    plan = load_plan(_values_plan(expressions=new))
    assert load_plan(_values_plan(values=[], expressions=new)) == plan
    # Both given and equal: the rows are read once, not twice.
    both = load_plan(_values_plan(values=[{"fields": [{"i64": "1"}]}, {"fields": [{"i64": "2"}]}], expressions=new))
    assert both == plan
    with pytest.raises(PlanError, match="'values' and the new 'expressions' disagree"):
        load_plan(_values_plan(values=[{"fields": [{"i64": "9"}]}], expressions=new))


def _fetch_plan(**fields) -> str:
    return json.dumps({"relations": [{"root": {"names": ["a"], "input": {"fetch": {
        "input": json.loads(_values_plan(expressions=[{"fields": [{"literal": {"i64": "1"}}]}]))["relations"][0]["root"]["input"],
        **fields}}}}]})


def test_fetch_old_scalars_beside_expressions():
    plan = load_plan(_fetch_plan(countExpr={"literal": {"i64": "5"}}))
    assert load_plan(_fetch_plan(count="5", countExpr={"literal": {"i64": "5"}})) == plan
    zero = {"literal": {"i64": "0"}}
    assert load_plan(_fetch_plan(offset="0", offsetExpr=zero, count="0", countExpr={"literal": {"i64": "5"}})) == \
        load_plan(_fetch_plan(offsetExpr=zero, countExpr={"literal": {"i64": "5"}}))
    with pytest.raises(PlanError, match="'count' \\(7\\) and the new 'countExpr' disagree"):
        load_plan(_fetch_plan(count="7", countExpr={"literal": {"i64": "5"}}))


def test_old_timestamp_type_and_literal_beside_the_precision_ones():
    def plan(type_doc, literal_doc) -> str:
        return json.dumps({"relations": [{"root": {"names": ["a"], "input": {"read": {
            "baseSchema": {"names": ["a"], "struct": {"types": [type_doc]}},
            "virtualTable": {"expressions": [{"fields": [{"literal": literal_doc}]}]}}}}}]})

    new_type = {"precisionTimestamp": {"precision": 6, "nullability": "NULLABILITY_REQUIRED"}}
    new_literal = {"precisionTimestamp": {"precision": 6, "value": "1000"}}
    current = load_plan(plan(new_type, new_literal))
    both = plan({**new_type, "timestamp": {"nullability": "NULLABILITY_REQUIRED"}}, {**new_literal, "timestamp": "1000"})
    assert load_plan(both) == current
    with pytest.raises(PlanError, match="'timestamp' and the new 'precisionTimestamp' disagree"):
        load_plan(plan(new_type, {**new_literal, "timestamp": "2000"}))


def test_old_interval_microseconds_beside_subseconds():
    def plan(interval) -> str:
        return json.dumps({"relations": [{"root": {"names": ["a"], "input": {"read": {
            "baseSchema": {"names": ["a"], "struct": {"types": [{"intervalDay": {"precision": 6, "nullability": "NULLABILITY_REQUIRED"}}]}},
            "virtualTable": {"expressions": [{"fields": [{"literal": {"intervalDayToSecond": interval}}]}]}}}}}]})

    current = load_plan(plan({"days": 1, "precision": 3, "subseconds": "5"}))
    assert load_plan(plan({"days": 1, "precision": 3, "subseconds": "5", "microseconds": 5000})) == current
    with pytest.raises(PlanError, match="'microseconds' and the new 'subseconds' disagree"):
        load_plan(plan({"days": 1, "precision": 3, "subseconds": "5", "microseconds": 7}))
