"""filter_into_read and the capability profiles it reads: hand-built and DataFusion plans
before and after; the ``spark`` tests run both on Spark (TPC-H SF 0.01) and compare the answers.
"""

from __future__ import annotations

import json

import filter_rule_plans as plans
import pytest
from filter_rule_plans import REQ, call, col, emit, filt, i32, read, s

from optimizer.capabilities import as_capabilities, default_capabilities, from_dict, load_capabilities
from optimizer.dag import inputs, to_dag
from optimizer.errors import PlanError
from optimizer.explain import explain_plan
from optimizer.load.functions import function_table
from optimizer.plan_io import load_plan

SPEC_PROFILE = {"name": "spec-example", "default": "none", "rules": [
    {"function": ["and", "or", "not"], "support": "full"},
    {"function": ["lt", "gt", "equal"], "args": ["integer", "integer"], "support": "full"},
    {"function": ["lt", "gt", "equal"], "args": ["text", "text"], "support": "best_effort"}]}


def test_filter_into_read_spec_example_exactly():
    """The specification's example: integers fully, strings best effort;
    ``my_int < 10 and my_string < 'x' and upper(my_string) > 'B'``."""
    rel = filt({"read": {"namedTable": {"names": ["t"]}, "baseSchema": {"names": ["my_int", "my_string"], "struct": {
        "types": [{"i32": {"nullability": REQ}}, {"string": {"nullability": REQ}}]}}}},
        call("and", call("lt", col(0), i32(10)), call("lt", col(1), s("x")),
             call("gt", call("upper", col(1), out={"string": {"nullability": REQ}}), s("B"))))
    after = plans.optimize(plans.plan_of(rel, ["my_int", "my_string"]), "filter_into_read", capabilities=from_dict(SPEC_PROFILE)).plan
    assert explain_plan(after).splitlines()[1:] == [
        "|-+ Filter(((my_string#1 < 'x') AND (upper(my_string#1) > 'B'))) -> [my_int: i32, my_string: string]",
        "  |-+ Read(t, filter=(my_int#0 < 10), best_effort_filter=(my_string#1 < 'x')) -> [my_int: i32, my_string: string]",
    ]


@pytest.mark.spark
@pytest.mark.parametrize("ignore_best_effort", [False, True])
def test_filter_into_read_spec_example_on_spark(spark, tpch_dir, ignore_best_effort):
    """The same split on nation (n_nationkey as my_int, n_name as my_string), run with the best-effort
    filter applied and ignored: both give the answer of the original plan."""
    from optimizer.spark import SparkBackend

    cond = call("and", call("lt", col(0), i32(10)), call("lt", col(1), s("M")),
                call("gt", call("upper", col(1), out={"string": {"nullability": REQ}}), s("B")))
    before = plans.plan_of(filt(read("nation"), cond), plans.NATION_NAMES)
    after = plans.optimize(before, "filter_into_read", capabilities=from_dict(SPEC_PROFILE)).plan
    assert plans.shape(after) == "filter(read)"
    (r,) = plans.nodes_of(after, "read")
    assert r.HasField("filter") and r.HasField("best_effort_filter")
    be = SparkBackend(spark, tables=tpch_dir, ignore_best_effort_filter=ignore_best_effort)
    plans.same_answer(be, before, after)


@pytest.mark.spark
def test_filter_into_read_maps_through_projection_and_emit_and_ands_existing_filters(backend):
    """The filter reads projected columns; ReadRel.filter reads base_schema columns. An existing read
    filter is kept (ANDed), and the filter's emit moves onto the read."""
    projected = read("nation", projection={"select": {"structItems": [{"field": 2}, {"field": 1}, {"field": 0}]}},
                     filter=call("lt", col(0), i32(20)), **emit(1, 0, 2))  # n_name, n_regionkey, n_nationkey
    cond = call("and", call("equal", col(1), i32(1)), call("gt", col(2), i32(3)))
    before = plans.plan_of(filt(projected, cond, **emit(0, 2)), ["n_name", "n_nationkey"])
    after = plans.optimize(before, "filter_into_read").plan
    assert plans.shape(after) == "read"
    (r,) = plans.nodes_of(after, "read")
    text = explain_plan(after)
    assert "filter=((n_nationkey#0 < 20) AND (n_regionkey#2 = 1) AND (n_nationkey#0 > 3))" in text, text
    assert list(r.common.emit.output_mapping) == [1, 2]
    plans.same_answer(backend, before, after)


def test_default_profile_models_what_spark_pushes_into_parquet():
    caps = default_capabilities()
    schema_plan = plans.plan_of(read("nation"), plans.NATION_NAMES)
    fns = function_table(schema_plan)
    from optimizer.schema.record import Schema

    nation = Schema.from_named_struct(schema_plan.relations[0].root.input.read.base_schema)

    def support(e: dict) -> str:
        from google.protobuf import json_format
        from substrait.proto import Expression

        return caps.conjunct_support(json_format.ParseDict(e, Expression()), nation, fns)

    assert support(call("lt", col(0), i32(3))) == "full"
    assert support(call("equal", s("x"), col(1))) == "full"  # constant on the left
    assert support(call("or", call("lt", col(0), i32(3)), call("is_null", col(1)))) == "full"
    assert support(call("like", col(1), s("AR%"))) == "full"  # a prefix: Spark's StartsWith
    assert support(call("like", col(1), s("AR%"), {"literal": {"null": {"string": {}}}})) == "full"  # DataFusion
    assert support(call("like", col(1), s("A_%"))) == "none"
    assert support(call("like", col(1), s("%AR%"))) == "none"
    assert support(call("contains", col(1), s("AR"))) == "none"
    assert support(call("lt", col(0), col(2))) == "none"  # column against column
    assert support(call("lt", call("add", col(0), i32(1), out={"i32": {"nullability": REQ}}), i32(3))) == "none"
    assert support(call("gt", call("upper", col(1), out={"string": {"nullability": REQ}}), s("B"))) == "none"
    rnd = call("lt", call("random", out={"fp64": {"nullability": REQ}}), {"literal": {"fp64": 0.5}})
    assert support(rnd) == "none"


def test_capability_profiles_load_and_validate(tmp_path):
    path = tmp_path / "p.json"
    path.write_text(json.dumps(SPEC_PROFILE))
    caps = load_capabilities(path)
    assert caps.name == "spec-example" and as_capabilities(str(path)).name == "spec-example"
    assert caps.call_support("lt", ["i64", "i8"]) == "full"
    assert caps.call_support("lt", ["varchar", "string"]) == "best_effort"
    assert caps.call_support("lt", ["date", "date"]) == "none"
    variadic = from_dict({"rules": [{"function": "and", "args": ["boolean", "..."], "support": "full"}]})
    assert variadic.call_support("and", ["bool"] * 5) == "full"
    assert variadic.call_support("and", ["bool", "i32"]) == "none"
    for bad in ({"rules": [{"function": "lt", "support": "always"}]},
                {"rules": [{"function": "lt", "args": ["integr"], "support": "full"}]},
                {"rules": [{"function": "lt", "shape": "odd", "support": "full"}]}):
        with pytest.raises(PlanError):
            from_dict(bad)
    with pytest.raises(PlanError):
        load_capabilities(tmp_path / "missing.json")


def test_filter_into_read_on_the_22_datafusion_plans(datafusion_tpch_plans):
    """DataFusion writes each pushed filter twice: in ReadRel.filter and in a FilterRel above the read.
    With Spark's profile every such FilterRel goes (its conjuncts are already applied by the read) except
    Q22's, whose conjunct holds a subquery; Q18 has no filter over a read."""
    fired_in = set()
    for q, data in datafusion_tpch_plans.items():
        result = plans.optimize(load_plan(data), "filter_into_read")
        if "filter_into_read" in plans.fired(result):
            fired_in.add(q)
        g = to_dag(result.plan)
        left = [n for n in g if g.nodes[n]["kind"] == "filter" and g.nodes[inputs(g, n)[0]]["kind"] == "read"]
        assert len(left) == (1 if q == 22 else 0), (q, explain_plan(result.plan))
    assert fired_in == set(range(1, 23)) - {18}


def test_filter_into_read_on_a_names_only_base_schema():
    """Older DataFusion plans give the read's column names without types: no conjunct can be classified,
    so nothing moves (and nothing breaks)."""
    from workloads.corpus import corpus_root

    path = corpus_root() / "substrait_consumer/snapshots/producer/relation/filter/where_and-datafusion_plan.json"
    before = load_plan(path)
    assert plans.fired(plans.optimize(before, *plans.MY_RULES)) == []
