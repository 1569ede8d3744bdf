"""The row evaluator that aims the plan generator's filters and keys (testing/rows.py)."""

from __future__ import annotations

from substrait.proto import Expression, JoinRel, Plan, Rel, SetRel, Type

from optimizer.difftest.harness import ColumnSpec, Database, TableSpec
from optimizer.expr_utils import FunctionRegistrar, field
from optimizer.load.functions import FunctionTable
from testing.rows import UNKNOWN, RowEvaluator, rows_share_value
from testing.values import literal

_BOOL = Type(bool=Type.Boolean(nullability=Type.NULLABILITY_NULLABLE))


def _db() -> Database:
    db = Database()
    db.tables["a"] = TableSpec("a", [ColumnSpec("k", "i32", True), ColumnSpec("s", "string", True)],
                               [(1, "x"), (2, "y"), (None, "z"), (2, "y")])
    db.tables["b"] = TableSpec("b", [ColumnSpec("k", "i32", True)], [(2,), (3,), (None,)])
    return db


def _read(name: str) -> Rel:
    rel = Rel()
    rel.read.named_table.names.append(name)
    return rel


class _Builder:
    def __init__(self) -> None:
        self.plan = Plan()
        self.reg = FunctionRegistrar(self.plan, FunctionTable([]))
        self.ev = RowEvaluator(self.plan, _db(), lambda a: self.reg.table.get(a).name)

    def call(self, name: str, *args: Expression) -> Expression:
        stem = "functions_boolean.yaml" if name in ("and", "or", "not") else "functions_comparison.yaml"
        return self.reg.call(name, stem, args, _BOOL)

    def join(self, jt: int, condition: Expression) -> Rel:
        rel = Rel()
        rel.join.left.CopyFrom(_read("a"))
        rel.join.right.CopyFrom(_read("b"))
        rel.join.type = jt
        rel.join.expression.CopyFrom(condition)
        return rel


def test_filters_keep_what_three_valued_logic_keeps():
    b = _Builder()
    rel = Rel()
    rel.filter.input.CopyFrom(_read("a"))
    rel.filter.condition.CopyFrom(b.call("or", b.call("gt", field(0), literal("i32", 1)),
                                         b.call("is_null", field(0))))
    assert b.ev.rows(rel) == [(2, "y"), (None, "z"), (2, "y")]
    assert b.ev.keeps(rel.filter.condition, b.ev.rows(_read("a"))) == (3, 1)
    # NOT(NULL) is NULL: the row with k NULL is dropped by NOT(k > 1) too
    not_gt = b.call("not", b.call("gt", field(0), literal("i32", 1)))
    assert b.ev.keeps(not_gt, b.ev.rows(_read("a"))) == (1, 3)


def test_unmodelled_functions_may_keep_a_row():
    b = _Builder()
    unknown = b.reg.call("divide", "functions_arithmetic.yaml", [field(0), literal("i32", 2)], _BOOL)
    cond = b.call("and", b.call("equal", field(0), literal("i32", 1)), unknown)
    assert b.ev.value(unknown, (1, "x")) is UNKNOWN
    # k = 1 is false for three rows (or NULL): they are dropped whatever the other conjunct is
    assert b.ev.keeps(cond, b.ev.rows(_read("a"))) == (1, 3)


def test_join_types():
    b = _Builder()
    eq = b.call("equal", field(0), field(2))
    assert b.ev.rows(b.join(JoinRel.JOIN_TYPE_INNER, eq)) == [(2, "y", 2), (2, "y", 2)]
    assert b.ev.rows(b.join(JoinRel.JOIN_TYPE_LEFT_ANTI, eq)) == [(1, "x"), (None, "z")]
    assert b.ev.rows(b.join(JoinRel.JOIN_TYPE_LEFT_SEMI, eq)) == [(2, "y"), (2, "y")]
    outer = b.ev.rows(b.join(JoinRel.JOIN_TYPE_OUTER, eq))
    assert sorted(outer, key=repr) == sorted([(1, "x", None), (2, "y", 2), (None, "z", None), (2, "y", 2),
                                              (None, None, 3), (None, None, None)], key=repr)
    null_safe = b.call("is_not_distinct_from", field(0), field(2))
    assert (None, "z", None) in b.ev.rows(b.join(JoinRel.JOIN_TYPE_INNER, null_safe))


def test_set_operations_and_grouping_sets():
    b = _Builder()
    keys = Rel()
    keys.project.input.CopyFrom(_read("a"))
    keys.project.common.emit.output_mapping.append(0)
    for op, expected in [(SetRel.SET_OP_MINUS_PRIMARY_ALL, [(1,), (2,)]),
                         (SetRel.SET_OP_MINUS_PRIMARY, [(1,)]),
                         (SetRel.SET_OP_INTERSECTION_MULTISET_ALL, [(2,), (None,)]),
                         (SetRel.SET_OP_UNION_DISTINCT, [(1,), (2,), (None,), (3,)])]:
        rel = Rel()
        rel.set.op = op
        rel.set.inputs.add().CopyFrom(keys)
        rel.set.inputs.add().CopyFrom(_read("b"))
        assert sorted(b.ev.rows(rel), key=repr) == sorted(expected, key=repr), SetRel.SetOp.Name(op)
    agg = Rel()
    agg.aggregate.input.CopyFrom(_read("a"))
    agg.aggregate.grouping_expressions.extend([field(0), field(1)])
    agg.aggregate.groupings.add().expression_references.extend([0, 1])
    agg.aggregate.groupings.add()
    assert b.ev.rows(agg) == [(1, "x", 0), (2, "y", 0), (None, "z", 0), (None, None, 1)]


def test_shared_values():
    assert rows_share_value([(1,), (None,)], 0, [(None,), (1,)], 0)
    assert not rows_share_value([(None,)], 0, [(None,)], 0)
    assert not rows_share_value([("1",)], 0, [(1,)], 0)


def _children(rel: Rel) -> list[Rel]:
    kind = rel.WhichOneof("rel_type")
    body = getattr(rel, kind)
    out = [getattr(body, f) for f in ("input", "left", "right")
           if f in body.DESCRIPTOR.fields_by_name and body.HasField(f)]
    return out + (list(body.inputs) if kind == "set" else [])


def test_rows_have_the_width_of_the_relation_on_generated_plans():
    """Every relation of generated plans: the rows the evaluator tells have the relation's columns (a
    row of another width would point the generator's conditions at the wrong values)."""
    from hypothesis import HealthCheck, Phase, given, seed, settings

    from optimizer.load.functions import function_table
    from optimizer.schema import rel_schema
    from testing.strategies import cases

    told = []

    @settings(max_examples=120, deadline=None, database=None, phases=[Phase.generate],
              suppress_health_check=list(HealthCheck))
    @seed(3)
    @given(cases(max_depth=3, max_relations=6, max_rows=6))
    def check(case):
        plan = case.plan
        table = function_table(plan)
        ev = RowEvaluator(plan, case.database, table)

        def walk(rel: Rel):
            if rel.WhichOneof("rel_type") == "reference":
                schema = walk(plan.relations[rel.reference.subtree_ordinal].rel)
                inputs = [schema]
            else:
                inputs = [walk(c) for c in _children(rel)]
            schema = rel_schema(rel, inputs, table)
            rows = ev.rows(rel)
            if rows:
                told.append(rel.WhichOneof("rel_type"))
                assert {len(r) for r in rows} == {len(schema)}, (rel.WhichOneof("rel_type"), rows[0], str(schema))
            return schema

        walk(plan.relations[-1].root.input)

    check()
    assert len(told) > 300 and {"join", "aggregate", "set", "project", "filter", "read"} <= set(told)
