"""The loading pipeline (optimizer/load/pipeline.py): its steps in order, the one function table a load
builds and every consumer shares (the DAG and the write stage take copies of it, the backend reads it),
and bad input named with its place."""

from __future__ import annotations

import json

import pytest
from google.protobuf import json_format
from substrait.proto import Plan

import optimizer.load.pipeline as pipeline
from optimizer import optimize
from optimizer.dag import to_dag
from optimizer.errors import PlanError
from optimizer.load.functions import FunctionTable
from optimizer.load.pipeline import LoadedPlan, load
from optimizer.plan_io import dump_plan, load_plan

_I64 = {"i64": {"nullability": "NULLABILITY_REQUIRED"}}
_BOOL = {"bool": {"nullability": "NULLABILITY_REQUIRED"}}


def _filter_plan(producer: str = "") -> dict:
    """``SELECT a FROM t WHERE a > 1`` over a table ``t(a, b)``, its ``gt`` declared (by URN)."""
    return {
        "version": {"minorNumber": 70, "producer": producer},
        "extensionUrns": [{"extensionUrnAnchor": 1, "urn": "extension:io.substrait:functions_comparison"}],
        "extensions": [{"extensionFunction": {"extensionUrnReference": 1, "functionAnchor": 1, "name": "gt:i64_i64"}}],
        "relations": [{"root": {"names": ["a"], "input": {"project": {
            "common": {"emit": {"outputMapping": [0]}},
            "input": {"filter": {
                "input": {"read": {"namedTable": {"names": ["t"]},
                                   "baseSchema": {"names": ["a", "b"], "struct": {"types": [_I64, _I64]}}}},
                "condition": {"scalarFunction": {"functionReference": 1, "outputType": _BOOL, "arguments": [
                    {"value": {"selection": {"directReference": {"structField": {"field": 0}}, "rootReference": {}}}},
                    {"value": {"literal": {"i64": "1"}}}]}}}},
            "expressions": [{"selection": {"directReference": {"structField": {"field": 1}}, "rootReference": {}}}],
        }}}}],
    }


def _text(doc: dict) -> str:
    return json.dumps(doc)


def _duckdb_projects_plan() -> dict:
    """A DuckDB 1.1.3 plan: a ``ProjectRel`` without emit that means "only its expressions" (``SELECT a + 1``
    over the one-row virtual table ``(a) = (41)``), with a ``RelRoot`` naming one column."""
    return {
        "version": {"minorNumber": 53, "producer": "DuckDB"},
        "extensionUrns": [{"extensionUrnAnchor": 1, "urn": "extension:io.substrait:functions_arithmetic"}],
        "extensions": [{"extensionFunction": {"extensionUrnReference": 1, "functionAnchor": 1, "name": "add:i64_i64"}}],
        "relations": [{"root": {"names": ["x"], "input": {"project": {
            "input": {"read": {"baseSchema": {"names": ["a"], "struct": {"types": [_I64]}},
                               "virtualTable": {"expressions": [{"fields": [{"literal": {"i64": "41"}}]}]}}},
            "expressions": [{"scalarFunction": {"functionReference": 1, "outputType": _I64, "arguments": [
                {"value": {"selection": {"directReference": {"structField": {"field": 0}}, "rootReference": {}}}},
                {"value": {"literal": {"i64": "1"}}}]}}],
        }}}}],
    }


# ------------------------------------------------------------------------------------ the steps


def _record_steps(monkeypatch) -> list[str]:
    """Wrap each step :func:`load` calls (in its module) so that calling it records its name."""
    seen: list[str] = []
    for name in ("read_source", "parse_json", "parse_binary", "upgrade_binary", "check_expanded_size", "_resolved",
                 "conform_simple_case", "conform_grouping_sets", "conform_legacy_projects", "mark_conformed"):
        step = getattr(pipeline, name)

        def recorded(*args, _step=step, _name=name, **kwargs):
            seen.append(_name)
            return _step(*args, **kwargs)

        monkeypatch.setattr(pipeline, name, recorded)
    return seen


def test_the_steps_run_in_order_for_binary_and_json(monkeypatch):
    data = Plan()
    json_format.ParseDict(_duckdb_projects_plan(), data)
    seen = _record_steps(monkeypatch)
    load(data.SerializeToString())
    assert seen == ["read_source", "parse_binary", "upgrade_binary", "check_expanded_size", "_resolved",
                    "conform_simple_case", "conform_grouping_sets", "conform_legacy_projects", "mark_conformed"]
    seen.clear()
    load(_text(_duckdb_projects_plan()))
    assert seen == ["read_source", "parse_json", "check_expanded_size", "_resolved",  # JSON: upgraded while parsed
                    "conform_simple_case", "conform_grouping_sets", "conform_legacy_projects", "mark_conformed"]


def test_a_plan_message_goes_through_the_same_steps_on_a_copy(monkeypatch):
    message = Plan()
    json_format.ParseDict(_duckdb_projects_plan(), message)
    before = message.SerializeToString(deterministic=True)
    seen = _record_steps(monkeypatch)
    loaded = load(message)
    assert seen == ["upgrade_binary", "check_expanded_size", "_resolved", "conform_simple_case",
                    "conform_grouping_sets", "conform_legacy_projects", "mark_conformed"]
    assert loaded.plan is not message and message.SerializeToString(deterministic=True) == before
    project = loaded.plan.relations[0].root.input.project
    assert list(project.common.emit.output_mapping) == [1]  # DuckDB's "only the expressions", made explicit
    seen.clear()
    assert load(loaded.plan).plan is loaded.plan  # the tool's own reading: its table only, no copy
    assert seen == ["_resolved"]
    assert load(loaded) is loaded


def test_load_plan_is_the_pipelines_plan():
    text = _text(_duckdb_projects_plan())
    assert load_plan(text) == load(text).plan


# ------------------------------------------------------------------------- one function table


def _count_tables(monkeypatch) -> list[int]:
    """Count the function tables built from a plan's declarations, wherever the library builds one."""
    import optimizer.dag
    import optimizer.load.functions
    import optimizer.schema.derivation
    import optimizer.write

    built: list[int] = []
    original = optimizer.load.functions.function_table

    def counting(plan):
        built.append(1)
        return original(plan)

    for module in (optimizer.load.functions, optimizer.schema.derivation, optimizer.dag, optimizer.write):
        if hasattr(module, "function_table"):
            monkeypatch.setattr(module, "function_table", counting)
    return built


@pytest.mark.parametrize("target", ["spark", "duckdb", "datafusion"])
def test_an_optimization_builds_one_function_table(monkeypatch, target):
    """Loaded, the DAG, the rules, the cost model and the write stage: one table built, from the loaded plan."""
    built = _count_tables(monkeypatch)
    out = optimize(_text(_filter_plan()), target=target)
    assert out.relations
    assert len(built) == 1


def test_the_optimize_command_builds_one_function_table(monkeypatch, tmp_path):
    """``substrait-opt optimize``: the plan read, checked, optimized and written for the target with the
    one table its load built (the check and the write stage built their own before)."""
    from optimizer.cli import main

    source = tmp_path / "q.json"
    source.write_text(_text(_filter_plan()))
    built = _count_tables(monkeypatch)
    assert main(["optimize", str(source), "-o", str(tmp_path / "out.json"), "--target", "duckdb"]) == 0
    assert len(built) == 1
    assert load_plan(tmp_path / "out.json").relations


def test_an_uncorrelated_subquery_shares_the_plans_table(monkeypatch):
    """``SELECT (SELECT b FROM t WHERE a > 1 LIMIT 1) FROM t WHERE a > 1``: the subquery is optimized as a
    plan of its own (:meth:`Optimizer._optimize_subqueries`), with the plan's table as the rules left it,
    not one built again."""
    doc = _filter_plan()
    sub = {"fetch": {"input": json.loads(json.dumps(doc["relations"][0]["root"]["input"])),
                     "countExpr": {"literal": {"i64": "1"}}}}
    doc["relations"][0]["root"]["input"]["project"]["expressions"] = [{"subquery": {"scalar": {"input": sub}}}]
    from optimizer.driver import Optimizer

    built = _count_tables(monkeypatch)
    result = Optimizer(target="datafusion").run(_text(doc))
    assert any(p.phase.startswith("subquery 0: ") for p in result.phases)
    assert "subquery" in dump_plan(result.plan).decode()
    assert len(built) == 1


def test_a_scalar_subquery_the_estimator_evaluates_shares_the_plans_table(monkeypatch):
    """``... WHERE a > (SELECT b FROM t WHERE a > 1 LIMIT 1)``: the cost model estimates the subquery's value
    (:meth:`CardinalityEstimator.scalar_value`, a DAG of its own) with the plan's table, not one built again."""
    doc = _filter_plan()
    sub = {"fetch": {"input": json.loads(json.dumps(doc["relations"][0]["root"]["input"])),
                     "countExpr": {"literal": {"i64": "1"}}}}
    condition = doc["relations"][0]["root"]["input"]["project"]["input"]["filter"]["condition"]
    condition["scalarFunction"]["arguments"][1] = {"value": {"subquery": {"scalar": {"input": sub}}}}
    from optimizer.driver import estimated_cost

    loaded = load(_text(doc))
    built = _count_tables(monkeypatch)
    assert estimated_cost(loaded) > 0
    assert len(built) == 0


def test_the_dag_and_the_writer_copy_the_loaded_table_and_leave_it_alone(monkeypatch):
    copied: list[FunctionTable] = []
    original = FunctionTable.copy

    def recording(self):
        copied.append(self)
        return original(self)

    monkeypatch.setattr(FunctionTable, "copy", recording)
    loaded = load(_text(_filter_plan()))
    g = to_dag(loaded.plan, loaded.functions)
    assert copied == [loaded.functions] and copied[0] is loaded.functions
    assert g.graph["functions"] is not loaded.functions
    assert [f.name for f in g.graph["functions"]] == [f.name for f in loaded.functions]
    # Two filters, ``b > 1`` over ``a > 1``: the rules merge them into an ``and``, which they declare in
    # the DAG's copy of the table (and the write stage in its copy of theirs), never in the loaded one.
    doc = _filter_plan()
    inner = doc["relations"][0]["root"]["input"]["project"]["input"]
    outer_condition = json.loads(json.dumps(inner["filter"]["condition"]))
    outer_condition["scalarFunction"]["arguments"][0]["value"]["selection"]["directReference"]["structField"] = {
        "field": 1}
    doc["relations"][0]["root"]["input"]["project"]["input"] = {"filter": {"input": inner,
                                                                            "condition": outer_condition}}
    two = load(_text(doc))
    names = [f.name for f in two.functions]
    copied.clear()
    out = optimize(two, target="duckdb")
    assert copied[0] is two.functions  # the DAG's copy, made from the loaded table
    assert [f.name for f in two.functions] == names == ["gt"]
    assert "and:bool" in [e.extension_function.name for e in out.extensions]


def test_schemas_are_derived_once_with_the_loaded_table():
    loaded = load(_text(_filter_plan()))
    schemas = loaded.schemas
    assert schemas is loaded.schemas
    assert schemas["relations[0].root"].names == ["a"]


def test_the_spark_compiler_reads_the_loaded_table_and_schemas():
    from optimizer.spark.backend import _PlanCompiler

    class NoSpark:
        spark = None
        tables = None
        ignore_best_effort_filter = False

        def ansi_mode(self) -> bool:
            return True

    loaded = load(_text(_filter_plan()))
    compiler = _PlanCompiler(NoSpark(), loaded)
    assert compiler.functions is loaded.functions
    assert compiler.schemas is loaded.schemas


# ------------------------------------------------------------------------------------ bad input


def test_bad_input_is_a_plan_error_naming_the_place():
    with pytest.raises(PlanError) as exc:
        load('{"relations": []}')
    assert str(exc.value) == "<string>: the plan has no relations"
    with pytest.raises(PlanError) as exc:
        load(b"\x0a\x05nope")
    assert str(exc.value).startswith("<bytes>")
    doc = _filter_plan()
    doc["relations"][0]["root"]["input"]["project"]["input"]["filter"]["input"]["read"]["baseSchema"]["struct"][
        "types"][0] = {"no_such_type": {}}
    with pytest.raises(PlanError) as exc:
        load(_text(doc))
    assert str(exc.value).startswith("<string>: relations[0].root.input.project.input.filter.input.read")


@pytest.mark.parametrize("field", [
    "set.op", "sort.sorts[0].direction", "read.base_schema.struct.types[0].i64.nullability",
    "aggregate.measures[0].measure.phase", "hash_join.build_input",
])
def test_an_enum_value_its_enum_does_not_define_is_named(field):
    """A binary plan keeps any number in an enum field (SetRel.op 99): refused where it is, exit 2, before
    a rule, the cost model or an engine has to guess what it means (an internal error before)."""
    from substrait.proto import Rel

    from testing.builder import Builder, aggregate, read, sort

    b = Builder()
    t = read("t", [("a", "i64")])
    rel = {"set": lambda: Rel(set={"inputs": [t, t], "op": 1}), "sort": lambda: sort(t, (0, 1)),
           "read": lambda: t, "aggregate": lambda: aggregate(t, [0], b.agg("count")),
           "hash_join": lambda: Rel(hash_join={"left": t, "right": t})}[field.split(".")[0]]()
    message = rel
    *steps, last = field.split(".")
    for step in steps:
        name, _, index = step.partition("[")
        message = getattr(message, name)
        if index:
            message = message[int(index[:-1])]
    setattr(message, last, 99)
    with pytest.raises(PlanError) as exc:
        load(b.plan(rel, ["a"]).SerializeToString())
    assert str(exc.value).startswith(f"<bytes>: relations[0].root.input.{field}: 99 is not a value of "), exc.value


def test_an_undeclared_urn_loads_and_is_named_where_the_table_is_needed():
    """A declaration naming an URN anchor the plan does not declare: the plan still loads (convert writes
    it, check_plan reports it), and whatever needs the table gets the PlanError naming the declaration."""
    from optimizer.schema.check import check_plan

    doc = _filter_plan()
    doc["extensions"][0]["extensionFunction"]["extensionUrnReference"] = 9
    loaded = load(_text(doc))
    assert loaded.declared is None
    with pytest.raises(PlanError) as exc:
        to_dag(loaded.plan, loaded.functions)
    assert exc.value.path == "extensions[0].extension_function" and "URN anchor 9" in exc.value.message
    assert [p.path for p in check_plan(loaded.plan, loaded.declared)][:1] == ["extensions[0].extension_function"]
    with pytest.raises(PlanError) as exc:
        optimize(loaded)
    assert exc.value.path == "extensions[0].extension_function"


@pytest.mark.parametrize(("declared_again", "path", "message"), [
    ("function", "extensions[1].extension_function", "function anchor 1 is declared twice, as 'gt:i64_i64' and "
                                                     "as 'lt:i64_i64'"),
    ("urn", "extension_urns[1]", "extension URN anchor 1 is declared twice"),
])
def test_an_anchor_declared_twice_apart_is_named(declared_again, path, message):
    """Two declarations of one anchor that differ leave the plan's meaning open (the filter a > 1 or
    a < 1): the plan is refused naming the second, wherever the table is needed. Declared again alike it
    means one thing, and loads."""
    doc = _filter_plan()
    if declared_again == "function":
        doc["extensions"].append({"extensionFunction": {"extensionUrnReference": 1, "functionAnchor": 1,
                                                        "name": "lt:i64_i64"}})
    else:
        doc["extensionUrns"].append({"extensionUrnAnchor": 1, "urn": "extension:io.substrait:functions_boolean"})
    loaded = load(_text(doc))
    with pytest.raises(PlanError) as exc:
        optimize(loaded)
    assert exc.value.path == path and message in exc.value.message
    alike = _filter_plan()
    alike["extensions"].append(dict(alike["extensions"][0]))
    optimize(load(_text(alike)))


def test_a_loaded_plan_is_frozen():
    loaded = load(_text(_filter_plan()))
    with pytest.raises(AttributeError):
        loaded.plan = Plan()  # type: ignore[misc]
    assert isinstance(loaded, LoadedPlan)


# ------------------------------------------------------------------------------ on a real engine


def test_a_producers_plan_message_runs_on_spark_as_its_file_does(spark):
    """The Spark backend loads a ``Plan`` message through the pipeline: DuckDB's project without emit
    means "only its expressions" there as in the file (the spec's reading would be two columns for one
    name)."""
    from optimizer.spark.backend import SparkBackend

    message = Plan()
    json_format.ParseDict(_duckdb_projects_plan(), message)
    with SparkBackend(spark) as backend:
        from_message = backend.execute(message).to_pylist()
        from_file = backend.execute(_text(_duckdb_projects_plan())).to_pylist()
    assert from_message == from_file == [{"x": 42}]


def test_json_after_a_byte_order_mark_and_json_that_is_not_an_object():
    """Windows tools write a UTF-8 byte order mark before JSON: it is JSON, not malformed protobuf; so is
    a bare null, true or number, which is named as not a plan object."""
    text = _text(_filter_plan())
    assert load(b"\xef\xbb\xbf" + text.encode()).plan == load(text).plan
    for doc in (b"null", b" true\n", b"5"):
        with pytest.raises(PlanError, match="a Substrait plan is a JSON object"):
            load(doc)


@pytest.mark.parametrize("target", ["spark", "duckdb"])
def test_optimize_refuses_what_every_command_refuses(target):
    """The Python API refuses a plan check_plan finds a problem in, with its path, as the CLI does: a field
    past its input reached the rules as an IndexError, and a number compared with a string was rewritten
    for Spark, whose implicit cast would answer it."""
    from testing.builder import INNER, Builder, filter_, join, lit, read, ref

    b = Builder()
    t, u = read("t", [("a", "i64"), ("b", "i64")]), read("u", [("c", "i64")])
    cases = [
        (b.plan(filter_(t, b.call("gt", ref(7), lit(1))), ["a", "b"]),
         r"root\.input\.filter\.condition\.scalar_function\.arguments\[0\]\.value\.selection: field 7 of 2"),
        (b.plan(join(t, u, INNER, b.call("equal", ref(0), ref(9))), ["a", "b", "c"]),
         r"root\.input\.join\.expression\.scalar_function\.arguments\[1\]\.value\.selection: field 9 of 3"),
        (b.plan(filter_(t, b.call("equal", ref(0), lit("2", "string"))), ["a", "b"]),
         r"root\.input\.filter\.condition\.scalar_function: 'equal' takes arguments of one type"),
    ]
    for plan, where in cases:
        with pytest.raises(PlanError, match=where):
            optimize(plan, target=target)
    # A loaded plan is checked once, however many commands and optimizer runs ask.
    loaded = load(cases[0][0])
    assert loaded.problems is loaded.problems and len(loaded.problems) == 1


def test_a_plan_of_a_later_major_version_is_refused_by_name():
    """A new major Substrait version may change what a plan means: refused (exit 3, unsupported), not read
    as today's and marked so; a later minor version of 0.x is read as before."""
    from optimizer.errors import UnsupportedError
    from optimizer.plan_io import load_plan

    def plan(major: int, minor: int) -> str:
        return json.dumps({"version": {"majorNumber": major, "minorNumber": minor}, "relations": [{"root": {
            "names": ["a"], "input": {"read": {"baseSchema": {"names": ["a"], "struct": {"types": [{"i64": {}}]}},
                                               "namedTable": {"names": ["t"]}}}}}]})

    with pytest.raises(UnsupportedError) as refused:
        load_plan(plan(1, 2))
    assert refused.value.path.endswith("version") and "Substrait 1.2.0" in refused.value.message
    assert load_plan(plan(0, 999)).relations[0].root.names == ["a"]
