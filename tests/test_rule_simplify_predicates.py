"""simplify_predicates: hand-built and DataFusion plans before and after; the
``spark`` tests run both on Spark (TPC-H SF 0.01) and compare the answers.
"""

from __future__ import annotations

import filter_rule_plans as plans
import pytest
from filter_rule_plans import NBOOL, REQ, boolean, call, col, emit, filt, i32, join, read, s

from optimizer.explain import explain_plan
from optimizer.load.functions import function_table
from optimizer.plan_io import load_plan


def test_simplify_drops_true_and_flattens():
    cond = call("and", call("and", boolean(True), call("lt", col(0), i32(5))),
                call("or", boolean(False), call("equal", col(2), i32(1))))
    before = plans.plan_of(filt(read("nation"), cond), plans.NATION_NAMES)
    after = plans.optimize(before, "simplify_predicates").plan
    (f,) = plans.nodes_of(after, "filter")
    text = explain_plan(after)
    assert "((n_nationkey#0 < 5) AND (n_regionkey#2 = 1))" in text, text
    assert plans.n_conjuncts(after, f.condition) == 2


def test_simplify_keeps_nondeterministic_duplicates():
    rnd = call("lt", call("random", out={"fp64": {"nullability": REQ}}), {"literal": {"fp64": 0.5}})
    before = plans.plan_of(filt(read("nation"), call("and", rnd, rnd, boolean(True))), plans.NATION_NAMES)
    (f,) = plans.nodes_of(plans.optimize(before, "simplify_predicates").plan, "filter")
    assert len(f.condition.scalar_function.arguments) == 2  # random() < 0.5 twice is not random() < 0.5


@pytest.mark.spark
def test_simplify_removes_an_always_true_filter_keeping_its_emit(backend):
    before = plans.plan_of(filt(read("nation"), call("or", boolean(True), call("lt", col(0), i32(3))), **emit(1, 0)),
                           ["n_name", "n_nationkey"])
    after = plans.optimize(before, "simplify_predicates").plan
    assert plans.shape(after) == "read"
    (r,) = plans.nodes_of(after, "read")
    assert list(r.common.emit.output_mapping) == [1, 0]
    assert plans.same_answer(backend, before, after).num_rows == 25


@pytest.mark.spark
@pytest.mark.parametrize("dead", [boolean(False), {"literal": {"null": NBOOL}}], ids=["false", "null"])
def test_simplify_turns_a_filter_that_keeps_nothing_into_an_empty_table(backend, dead):
    before = plans.plan_of(filt(join("INNER", read("nation"), read("region"), call("equal", col(2), col(4))),
                                call("and", call("lt", col(0), i32(10)), dead)), plans.NATION_REGION)
    after = plans.optimize(before, "simplify_predicates").plan
    assert plans.shape(after) == "read"
    (r,) = plans.nodes_of(after, "read")
    assert r.WhichOneof("read_type") == "virtual_table" and not r.virtual_table.expressions
    assert len(r.base_schema.struct.types) == 7
    plans.same_answer(backend, before, after, min_rows=0)
    assert backend.execute(after).num_rows == 0


@pytest.mark.spark
def test_simplify_factors_the_common_conjunct_out_of_an_or(backend):
    # (n_regionkey = r_regionkey AND r_name = 'ASIA') OR (n_regionkey = r_regionkey AND n_nationkey < 3)
    eq = call("equal", col(2), col(4))
    cond = call("or", call("and", eq, call("equal", col(5), s("ASIA"))), call("and", eq, call("lt", col(0), i32(3))))
    before = plans.plan_of(filt({"cross": {"left": read("nation"), "right": read("region")}}, cond),
                           plans.NATION_REGION)
    after = plans.optimize(before, "simplify_predicates", "extract_join_conditions").plan
    # -> n_regionkey = r_regionkey AND (r_name = 'ASIA' OR n_nationkey < 3): both read both sides
    assert plans.shape(after) == "join(read,read)"
    (j,) = plans.nodes_of(after, "join")
    assert "(n_regionkey#2 = r_regionkey#4) AND" in explain_plan(after).splitlines()[1]
    assert plans.n_conjuncts(after, j.expression) == 2
    plans.same_answer(backend, before, after)


def test_simplify_absorption():
    a = call("lt", col(0), i32(3))
    before = plans.plan_of(filt(read("nation"), call("or", a, call("and", a, call("equal", col(2), i32(1))))), plans.NATION_NAMES)
    after = plans.optimize(before, "simplify_predicates").plan
    assert "Filter((n_nationkey#0 < 3))" in explain_plan(after)


def test_simplify_on_datafusion_tpch_only_flattens(datafusion_tpch_plans):
    """DataFusion's optimised plans have no constant to fold: the rule only flattens nested ANDs/ORs,
    in Q6, Q12, Q16 and Q19 (twice)."""
    counts = {}
    for q, data in datafusion_tpch_plans.items():
        result = plans.optimize(load_plan(data), "simplify_predicates")
        counts[q] = plans.fired(result).count("simplify_predicates")
        for f in plans.nodes_of(result.plan, "filter"):
            top = f.condition
            fns = function_table(result.plan)
            args = [a.value for a in top.scalar_function.arguments]
            name = fns.get(top.scalar_function.function_reference).name if top.HasField("scalar_function") else None
            if name in ("and", "or"):  # no nested call of the same connective is left
                for a in args:
                    if a.HasField("scalar_function"):
                        assert fns.get(a.scalar_function.function_reference).name != name
    assert {q for q, n in counts.items() if n} == {6, 12, 16, 19}
