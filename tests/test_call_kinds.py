"""A comparison, IN list or CASE whose values are of different kinds (a number beside a string), or a string
or boolean given to arithmetic, is no Substrait plan: refused at its path (exit 2), where Spark would answer
it by its own implicit casts. Calls
producers write every day that the YAMLs lack (max of strings, date minus date) and mixes of one kind
(i32 beside decimal) stay accepted."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from google.protobuf import json_format
from substrait.proto import Plan

from optimizer.plan_io import load_plan
from optimizer.schema.check import check_plan
from workloads.producers import datafusion_plan


def _literals(node, found=None):
    """Every literal dict of a plan's JSON, in document order."""
    found = [] if found is None else found
    if isinstance(node, dict):
        if "literal" in node and isinstance(node["literal"], dict):
            found.append(node["literal"])
        for value in node.values():
            _literals(value, found)
    elif isinstance(node, list):
        for value in node:
            _literals(value, found)
    return found


def _with_literal(sql: str, tables, old: dict, new: dict) -> dict:
    """DataFusion's plan of ``sql`` as JSON with its literals equal to ``old`` replaced by ``new``."""
    doc = json_format.MessageToDict(Plan.FromString(datafusion_plan(sql, tables)))
    hits = [lit for lit in _literals(doc) if {k: v for k, v in lit.items() if k in old} == old]
    assert hits, f"no literal {old} in DataFusion's plan of {sql}"
    for lit in hits:
        for key in old:
            del lit[key]
        lit.update(new)
    return doc


MIXED = {
    "comparison": ("select n_name from nation where n_nationkey = 2", {"i32": 2}, {"string": "2"},
                   "'equal' takes arguments of one type (any1, any1); here they are i32 and string"),
    "in list": ("select n_name from nation where n_nationkey in (1, 2, 3, 4, 5, 6)", {"i32": 2}, {"string": "2"},
                "the IN list's option is string where the value is i32; they must be of one type"),
    "case": ("select case when n_nationkey > 2 then n_name else 'none' end as c from nation",
             {"string": "none"}, {"i64": "7"},
             "the else branch is i64 where the first branch is string; they must be of one type"),
    "greater than": ("select n_name from nation where n_name > 'M'", {"string": "M"}, {"date": 9000},
                     "'gt' takes arguments of one type (any1, any1); here they are string and date"),
    "arithmetic": ("select n_nationkey + 1 as c from nation", {"i64": "1"}, {"string": "1"},
                   "'add' takes no string as argument 2 (its overloads take numeric or interval values there)"),
    "rounding": ("select round(n_nationkey * 1.5) as c from nation", {"fp64": 1.5}, {"boolean": True},
                 "'multiply' takes no boolean as argument 2 (its overloads take numeric or interval values there)"),
}


@pytest.mark.parametrize("name", MIXED)
def test_values_of_different_kinds_are_refused_at_their_place(name, tpch_tables, tmp_path):
    sql, old, new, message = MIXED[name]
    doc = _with_literal(sql, tpch_tables, old, new)
    problems = [p for p in check_plan(load_plan(json.dumps(doc))) if not p.quirk]
    assert problems and {p.message for p in problems} == {message}  # DataFusion repeats filters in its reads
    path = tmp_path / "mixed.json"
    path.write_text(json.dumps(doc))
    done = subprocess.run([sys.executable, "-m", "optimizer", "optimize", str(path), "-o", str(tmp_path / "o.json")],
                          capture_output=True, text=True)
    assert done.returncode == 2
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and message in lines[0] and problems[0].path in lines[0], done.stderr
    assert not (tmp_path / "o.json").exists()


@pytest.mark.parametrize("sql", [
    "select max(n_name), min(n_name) from nation",  # the YAMLs have max/min of numbers and dates only
    "select o_orderdate - date '1995-01-01' as days from orders",  # no subtract of two dates in the YAMLs
    "select o_orderdate + interval '3' day as d, o_orderdate - interval '1' month as m from orders",
    "select n_name from nation where n_nationkey = 2.5",  # i32/i64 beside a decimal: one kind
    "select n_name from nation where n_nationkey in (1, 2.5)",
    "select coalesce(n_nationkey, 1.5) as c from nation",
    "select case when n_nationkey > 2 then n_nationkey else 0.5 end as c from nation",
    "select n_name from nation where n_name like 'A!%%' escape '!'",
])
def test_calls_producers_write_every_day_stay_accepted(sql, tpch_tables):
    plan = load_plan(datafusion_plan(sql, tpch_tables))
    assert [str(p) for p in check_plan(plan) if not p.quirk] == []


@pytest.mark.spark
def test_spark_backend_refuses_what_it_would_answer_by_its_own_casts(spark, tpch_dir, tpch_tables):
    """Spark casts '2' to a number and answers n_nationkey = '2' as = 2: the Python API refuses the plan as
    the CLI does, before Spark sees it; the same plan with the number runs."""
    from optimizer.errors import PlanError
    from optimizer.spark import SparkBackend

    backend = SparkBackend(spark, tables=tpch_dir)
    sql = "select n_name from nation where n_nationkey = 2"
    doc = _with_literal(sql, tpch_tables, {"i32": 2}, {"string": "2"})
    with pytest.raises(PlanError) as exc:
        backend.execute(json.dumps(doc))
    assert "'equal' takes arguments of one type" in exc.value.message and exc.value.path.endswith("scalar_function")
    assert backend.execute(datafusion_plan(sql, tpch_tables)).column(0).to_pylist() == ["BRAZIL"]


def _nation_projection(declared: str, yaml: str, arguments: list[dict], output: dict) -> dict:
    """A plan of one call over nation's columns (n_nationkey i32, n_name string): ``declared`` of the
    standard ``yaml``, its arguments (JSON) and declared output type."""
    i32, string = {"i32": {"nullability": "NULLABILITY_REQUIRED"}}, {"string": {"nullability": "NULLABILITY_REQUIRED"}}
    read = {"read": {"namedTable": {"names": ["nation"]}, "baseSchema": {
        "names": ["n_nationkey", "n_name"], "struct": {"types": [i32, string], "nullability": "NULLABILITY_REQUIRED"}}}}
    call = {"scalarFunction": {"functionReference": 1, "arguments": arguments, "outputType": output}}
    return {"version": {"minorNumber": 54},
            "extensionUrns": [{"extensionUrnAnchor": 1, "urn": f"extension:io.substrait:{yaml}"}],
            "extensions": [{"extensionFunction": {"extensionUrnReference": 1, "functionAnchor": 1, "name": declared}}],
            "relations": [{"root": {"names": ["x"], "input": {"project": {
                "input": read, "expressions": [call], "common": {"emit": {"outputMapping": [2]}}}}}}]}


KEY = {"value": {"selection": {"directReference": {"structField": {"field": 0}}, "rootReference": {}}}}
TRUE = {"value": {"literal": {"boolean": True}}}
I32 = {"i32": {"nullability": "NULLABILITY_REQUIRED"}}
BOOL = {"bool": {"nullability": "NULLABILITY_REQUIRED"}}
BROKEN_SIGNATURES = {
    # DuckDB answered each of these (n_nationkey; integers for the string; the nation with key 0 dropped)
    "too few arguments": (("add:i32_i32", "functions_arithmetic", [KEY], I32),
                          "'add:i32_i32' takes 2 arguments; the call has 1"),
    "output of another kind": (("add:i32_i32", "functions_arithmetic", [KEY, KEY], {"string": {}}),
                               "'add:i32_i32' returns i32 for these arguments; the plan declares its output string"),
    "a number given to and": (("and:bool", "functions_boolean", [KEY, TRUE], BOOL),
                              "'and' takes no i32 as argument 1 (its overloads take boolean values there)"),
}


@pytest.mark.parametrize("name", BROKEN_SIGNATURES)
def test_a_call_unlike_its_declared_function_is_refused(name, tmp_path):
    (declared, yaml, arguments, output), message = BROKEN_SIGNATURES[name]
    doc = _nation_projection(declared, yaml, arguments, output)
    problems = check_plan(load_plan(json.dumps(doc)))
    assert [(p.path, p.message) for p in problems] == [
        ("relations[0].root.input.project.expressions[0].scalar_function", message)]
    path = tmp_path / "call.json"
    path.write_text(json.dumps(doc))
    done = subprocess.run([sys.executable, "-m", "optimizer", "convert", str(path), "-o", str(tmp_path / "o.binpb")],
                          capture_output=True, text=True)
    assert done.returncode == 2 and done.stderr.strip().splitlines() == [
        f"substrait-opt: error: {problems[0]}"], done.stderr


@pytest.mark.parametrize("declared, arguments, output", [
    ("add:i32_i32", [KEY, KEY], {"i64": {}}),  # another width of one kind: the producer's to choose
    ("and:bool", [TRUE, TRUE, TRUE], BOOL),  # variadic: Isthmus names it by its one parameter
    ("and:bool?", [TRUE, TRUE], BOOL),  # DuckDB's spelling
])
def test_calls_as_producers_name_them_stay_accepted(declared, arguments, output):
    yaml = "functions_arithmetic" if declared.startswith("add") else "functions_boolean"
    assert check_plan(load_plan(json.dumps(_nation_projection(declared, yaml, arguments, output)))) == []
