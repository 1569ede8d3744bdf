"""The DAG: plan -> DAG -> plan is identity; shared subtrees are one node; JSON <-> binary is identity."""

from __future__ import annotations

import pytest
from garbage_cycles import collector_paused, optimizer_functions_in_garbage
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from substrait.proto import Plan, PlanRel, Rel

from optimizer.dag import from_dag, inputs, to_dag, uses
from optimizer.errors import PlanError
from optimizer.expr_utils import field
from optimizer.plan_io import dump_plan, load_plan, mark_conformed


def _read(name: str, ncols: int) -> Rel:
    rel = Rel()
    rel.read.named_table.names.append(name)
    for i in range(ncols):
        rel.read.base_schema.names.append(f"c{i}")
        rel.read.base_schema.struct.types.add().i64.nullability = 1
    return rel


@st.composite
def relations(draw, depth: int = 0, refs: int = 0) -> Rel:
    """A random relation tree; ``refs`` shared subtrees (plan.relations[0..refs-1]) may be referenced."""
    leaf_kinds = ["read"] + (["reference"] if refs else [])
    kinds = leaf_kinds if depth >= 4 else leaf_kinds + ["filter", "project", "fetch", "sort", "join", "cross", "set", "aggregate", "hash_join"]
    kind = draw(st.sampled_from(kinds))
    rel = Rel()
    if kind == "read":
        return _read(draw(st.sampled_from(["a", "b", "c"])), draw(st.integers(1, 4)))
    if kind == "reference":
        rel.reference.subtree_ordinal = draw(st.integers(0, refs - 1))
        return rel
    child = lambda: draw(relations(depth + 1, refs))  # noqa: E731
    if kind == "filter":
        rel.filter.input.CopyFrom(child())
        rel.filter.condition.CopyFrom(field(0))
    elif kind == "project":
        rel.project.input.CopyFrom(child())
        for i in range(draw(st.integers(0, 3))):
            rel.project.expressions.append(field(i))
        if draw(st.booleans()):
            rel.project.common.emit.output_mapping.extend([0])
    elif kind == "fetch":
        rel.fetch.input.CopyFrom(child())
        if draw(st.booleans()):
            rel.fetch.count_expr.literal.i64 = draw(st.integers(0, 100))
        if draw(st.booleans()):
            rel.fetch.offset_expr.literal.i64 = draw(st.integers(0, 100))
    elif kind == "sort":
        rel.sort.input.CopyFrom(child())
        rel.sort.sorts.add(expr=field(0), direction=draw(st.integers(1, 4)))
    elif kind in ("join", "hash_join"):
        body = getattr(rel, kind)
        body.left.CopyFrom(child())
        body.right.CopyFrom(child())
        body.type = draw(st.integers(1, 12))
        if kind == "join" and draw(st.booleans()):
            body.expression.CopyFrom(field(0))
    elif kind == "cross":
        rel.cross.left.CopyFrom(child())
        rel.cross.right.CopyFrom(child())
    elif kind == "set":
        rel.set.op = draw(st.integers(1, 8))
        for _ in range(draw(st.integers(2, 3))):
            rel.set.inputs.append(child())
    elif kind == "aggregate":
        rel.aggregate.input.CopyFrom(child())
        rel.aggregate.grouping_expressions.append(field(0))
        rel.aggregate.groupings.add().expression_references.append(0)
    if draw(st.booleans()):
        body = getattr(rel, kind)
        body.common.hint.stats.row_count = draw(st.floats(0, 1e9, allow_nan=False))
    return rel


@st.composite
def plans(draw) -> Plan:
    plan = Plan()
    plan.version.minor_number = 53
    plan.extension_urns.add(extension_urn_anchor=1, urn="extension:io.substrait:functions_comparison")
    fn = plan.extensions.add().extension_function
    fn.extension_urn_reference, fn.function_anchor, fn.name = 1, 1, "equal:any_any"
    shared = draw(st.integers(0, 2))
    for i in range(shared):
        # A shared subtree may itself reference earlier shared subtrees (never later ones: no cycles).
        plan.relations.append(PlanRel(rel=draw(relations(depth=1, refs=i))))
    for _ in range(draw(st.integers(1, 2))):
        root = PlanRel()
        root.root.input.CopyFrom(draw(relations(refs=shared)))
        root.root.names.extend(draw(st.lists(st.sampled_from(["x", "y", "z"]), max_size=3)))
        plan.relations.append(root)
    return plan


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(plans())
def test_plan_dag_plan_is_identity(plan):
    assert from_dag(to_dag(plan)) == plan


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(plans())
def test_json_binary_round_trip_is_identity(plan):
    """Identity but for the version, which says the tool read the plan (no producer convention applies)."""
    expected = Plan()
    expected.CopyFrom(plan)
    mark_conformed(expected)
    assert load_plan(dump_plan(plan, "binpb")) == expected
    assert load_plan(dump_plan(plan, "json")) == expected


def _self_join_of_a_plan_rel() -> Plan:
    """An inner join of one read with itself, both sides ReferenceRels to the plan's PlanRel."""
    plan = Plan()
    plan.relations.append(PlanRel(rel=_read("lineitem", 2)))
    root = plan.relations.add().root
    ref = Rel()
    ref.reference.subtree_ordinal = 0
    root.input.join.left.CopyFrom(ref)
    root.input.join.right.CopyFrom(ref)
    root.input.join.type = 1
    return plan


def test_shared_subtree_is_one_node_and_written_back_once():
    plan = _self_join_of_a_plan_rel()
    g = to_dag(plan)
    assert g.number_of_nodes() == 2
    join = g.graph["roots"][1]["node"]
    read = inputs(g, join)[0]
    assert inputs(g, join) == [read, read] and uses(g, read) == 2
    assert from_dag(g) == plan


def test_writing_a_plan_to_a_dag_and_back_leaves_no_garbage_cycles():
    """to_dag's and from_dag's recursive closures, and uncorrelated_subqueries', refer to themselves: left
    bound, every call (several per optimize run) left a cycle for the garbage collector to find."""
    from optimizer.driver import uncorrelated_subqueries

    plan = _self_join_of_a_plan_rel()
    with collector_paused():
        written = from_dag(to_dag(plan))
        uncorrelated_subqueries(written)
        assert optimizer_functions_in_garbage() == []
    assert written == plan


def test_node_with_two_parents_becomes_plan_rel_and_references():
    """A rule may make two relations read one node: it is written as a PlanRel.rel + ReferenceRels."""
    plan = Plan()
    root = plan.relations.add().root
    root.input.cross.left.CopyFrom(_read("a", 1))
    root.input.cross.right.CopyFrom(_read("b", 1))
    g = to_dag(plan)
    cross = g.graph["roots"][0]["node"]
    left, right = inputs(g, cross)
    # Make the cross read table a on both sides.
    g.remove_edge(cross, right)
    g.edges[cross, left]["slots"] = [0, 1]
    out = from_dag(g)
    assert len(out.relations) == 2
    assert out.relations[1].rel.read.named_table.names == ["a"]
    assert out.relations[0].root.input.cross.left.reference.subtree_ordinal == 1
    assert out.relations[0].root.input.cross.right.reference.subtree_ordinal == 1
    assert to_dag(out).number_of_nodes() == 2


def test_reference_to_missing_subtree_is_an_error():
    plan = Plan()
    plan.relations.add().root.input.reference.subtree_ordinal = 5
    with pytest.raises(PlanError, match="subtree 5"):
        to_dag(plan)


def test_cycle_of_references_is_an_error():
    plan = Plan()
    a = plan.relations.add().rel
    a.filter.input.reference.subtree_ordinal = 1
    b = plan.relations.add().rel
    b.filter.input.reference.subtree_ordinal = 0
    with pytest.raises(PlanError, match="cycle"):
        to_dag(plan)


def test_subtree_key_is_equal_for_copies_written_alike():
    """Two reads of a CTE that a producer inlined are two subtrees written alike: one key (hints aside);
    a different filter value makes another key."""
    from optimizer.dag import repeats_within, subtree_key
    from testing.builder import INNER, Builder, aggregate, filter_, join, lit, read, ref

    b = Builder()

    def copy(year: int, rows: float | None = None):
        sales = read("sales", [("k", "i64"), ("v", "i64")], rows=rows)
        return aggregate(filter_(sales, b.call("equal", ref(0), lit(year))), [0], b.agg("sum", ref(1)))

    twice = join(copy(2001), copy(2001, rows=5.0), INNER, b.call("equal", ref(0), ref(2)))
    g = to_dag(b.plan(twice, ["a", "b", "c", "d"]))
    left, right = inputs(g, next(n for n in g if g.nodes[n]["kind"] == "join"))
    assert subtree_key(g, left) == subtree_key(g, right)  # the row count hint is not the relation
    assert repeats_within(g, left) and repeats_within(g, right)
    other = join(copy(2001), copy(2002), INNER, b.call("equal", ref(0), ref(2)))
    g = to_dag(b.plan(other, ["a", "b", "c", "d"]))
    left, right = inputs(g, next(n for n in g if g.nodes[n]["kind"] == "join"))
    assert subtree_key(g, left) != subtree_key(g, right)
    assert not repeats_within(g, left)


def _wide_chain(n: int):
    import json

    from benchmarks.optimizer_latency import wide_plan

    return load_plan(json.dumps(wide_plan("chain", n)))


def test_subtree_keys_are_made_once_per_relation_while_a_wide_join_is_optimized(monkeypatch):
    """The physical phase prices every join it implements against the rest of the plan (broadcasts Spark
    reuses, subtrees written alike); the digests it compares are kept between rewrites, so a 120-way
    chain join makes a few per relation, not one per relation per join priced."""
    import hashlib

    import optimizer.dag as dag
    from optimizer.driver import Optimizer
    from optimizer.spark.statistics import default_statistics

    made = []

    class Counting:
        @staticmethod
        def blake2b(*args, **kwargs):
            made.append(1)
            return hashlib.blake2b(*args, **kwargs)

    monkeypatch.setattr(dag, "hashlib", Counting)
    result = Optimizer(statistics=default_statistics()).run(_wide_chain(120))
    assert any(e.rule == "implement_joins" for e in result.events)
    relations = len(to_dag(result.plan))
    assert len(made) < 10 * relations, (len(made), relations)


def test_kept_subtree_keys_match_keys_made_afresh_after_rewrites():
    """What the index keeps for a graph the optimizer rewrote is what a copy of it (which starts with
    nothing kept) computes from scratch, node by node."""
    from optimizer.dag import copy_dag, subtree_key, written_like
    from optimizer.driver import Optimizer
    from optimizer.spark.statistics import default_statistics

    result = Optimizer(statistics=default_statistics()).run(_wide_chain(40))
    g = result.graph
    assert g is not None
    fresh = copy_dag(g)
    kept = {n: subtree_key(g, n) for n in g}
    assert kept == {n: subtree_key(fresh, n) for n in fresh}
    for key in set(kept.values()):
        assert written_like(g, key) == {m for m, other in kept.items() if other == key}


def _joined_plan() -> Plan:
    from testing.builder import INNER, Builder, filter_, join, lit, read, ref

    b = Builder()
    t = read("t", [("a", "i64"), ("b", "i64")], rows=1000)
    u = read("u", [("c", "i64"), ("d", "i64")], rows=10)
    cond = b.call("and", b.call("gt", ref(1), lit(5)), b.call("lt", ref(3), lit(7)))
    return b.plan(filter_(join(t, u, INNER, b.call("equal", ref(0), ref(2))), cond), ["a", "b", "c", "d"])


def test_the_function_table_is_built_once_per_plan_load(monkeypatch):
    """The DAG holds the plan's function table (``g.graph["functions"]``): optimizing a plan for Spark builds
    it once, when the plan is loaded into its DAG; the rules, the estimator, the cost model and every
    snapshot of a phase share it or copy it."""
    import sys

    import optimizer.load.functions as functions_module
    from optimizer.driver import Optimizer

    plan = _joined_plan()
    built = []
    real = functions_module.function_table

    def counted(p):
        built.append(p)
        return real(p)

    # Every module that imported the function by name (and those importing it later, from its module).
    for module in [m for name, m in sys.modules.items() if name.startswith("optimizer")]:
        if getattr(module, "function_table", None) is real:
            monkeypatch.setattr(module, "function_table", counted)
    result = Optimizer(target="spark").run(plan)
    assert result.events  # the phases did rewrite the plan
    assert len(built) == 1


def test_a_function_a_rule_declares_is_in_the_dag_table_and_not_in_a_copy():
    from optimizer.dag import annotate_schemas, copy_dag
    from optimizer.driver import PlanContext
    from optimizer.load.functions import function_table

    g = to_dag(_joined_plan())
    annotate_schemas(g)
    ctx = PlanContext(g)
    assert ctx.functions is g.graph["functions"]
    kept = ctx.snapshot()
    assert ctx.registrar.table.anchor_for("or") is None
    anchor = ctx.registrar.anchor("or", "functions_boolean", "or:bool")
    assert g.graph["functions"].get(anchor).name == "or"
    assert list(g.graph["functions"]) == list(function_table(g.graph["plan"]))  # what a rebuild gives
    assert anchor not in kept.functions and list(kept.functions) == list(function_table(kept.g.graph["plan"]))
    assert anchor not in copy_dag(kept.g).graph["functions"]


def test_a_digest_forgotten_after_a_rewrite_below_is_made_again_without_serializing_the_relation(monkeypatch):
    """A rewrite forgets the digests of the relations above it; each is made again from the bytes of its
    relation kept with the node (rules replace relations, never edit them), so a relation is serialized
    once for all its digests: in a 120-way chain join, fewer times than digests are made."""
    import hashlib

    import optimizer.dag as dag
    from optimizer.driver import Optimizer
    from optimizer.spark.statistics import default_statistics

    made, serialized = [], []

    class Counting:
        @staticmethod
        def blake2b(*args, **kwargs):
            made.append(1)
            return hashlib.blake2b(*args, **kwargs)

    body = dag.rel_body

    def counting_body(rel):
        serialized.append(1)
        return body(rel)

    monkeypatch.setattr(dag, "hashlib", Counting)
    monkeypatch.setattr(dag, "rel_body", counting_body)
    Optimizer(statistics=default_statistics()).run(_wide_chain(120))
    assert 0 < len(serialized) <= 0.75 * len(made), (len(serialized), len(made))


def test_removed_since_lists_the_nodes_the_engine_removed_and_no_others():
    """The nodes removed since a mark, as :func:`optimizer.engine.collect_garbage` removes them; a node
    removed another way makes the count disagree: None (the caller compares with every node)."""
    from optimizer.dag import change_mark, removed_since
    from optimizer.engine import NewRel, add_subgraph, replace_node

    g = to_dag(_joined_plan())
    mark = change_mark(g)
    assert removed_since(g, mark) == []
    top = g.graph["roots"][0]["node"]
    below = inputs(g, top)[0]
    rel = Rel()
    rel.CopyFrom(g.nodes[top]["rel"])
    new = add_subgraph(g, NewRel(rel, [below]))
    replace_node(g, top, new, clean=True)
    assert removed_since(g, mark) == [top]
    g.remove_node(new)
    assert removed_since(g, mark) is None


def test_a_copy_shares_the_slot_lists_and_keeps_them_through_rewrites_of_the_original():
    """:func:`optimizer.dag.copy_dag` shares each edge's ``slots`` list (made once, replaced, never
    changed); a rewrite of the original that gives a reader new slots leaves the copy's as they were."""
    from optimizer.dag import copy_dag
    from optimizer.engine import NewRel, add_subgraph, replace_node

    g = to_dag(_joined_plan())
    copy = copy_dag(g)
    assert all(copy.edges[u, v]["slots"] is g.edges[u, v]["slots"] for u, v in g.edges)
    before = {(u, v): list(copy.edges[u, v]["slots"]) for u, v in copy.edges}
    join = next(n for n in g if g.nodes[n]["kind"] == "join")
    left, right = inputs(g, join)
    rel = Rel()
    rel.CopyFrom(g.nodes[join]["rel"])
    new = add_subgraph(g, NewRel(rel, [left, right]))
    replace_node(g, join, new, clean=True)
    assert {(u, v): list(copy.edges[u, v]["slots"]) for u, v in copy.edges} == before
    assert join in copy and join not in g
