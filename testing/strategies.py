"""Hypothesis strategies for differential testing: random tables, valid plans over them, statistics that
may lie, reader-capability profiles and optimizer configurations.

Reusable on their own::

    from hypothesis import given
    from testing.strategies import cases

    @given(cases())
    def test_optimizer_keeps_answers(case):
        result = case.run(lambda tables: SparkBackend(spark, tables=tables), tmp_dir)
        assert not result.failed, result

* :func:`~testing.values.values` -- non-null values of a column type (small shared pools
  first, so that joins and filters match rows; then the extremes: NaN, +-inf, -0.0, the integer limits,
  the widest decimals, the first and last dates; then anything).
* :func:`~testing.values.tables`, :func:`~testing.values.databases` -- small tables
  (0..N rows, duplicates, nulls in nullable columns) of the types the Spark backend supports:
  ``i8``..``i64``, ``fp32``/``fp64``, ``decimal(p,s)``, ``string`` (empty and non-ASCII included),
  ``bool``, ``date``, ``timestamp`` (``precision_timestamp<6>``).
* :func:`plans` -- a random VALID Substrait plan over a :class:`~optimizer.difftest.harness.Database`,
  built as protobuf with correct field indices and output types (every relation's schema derived
  with :func:`optimizer.schema.rel_schema`, the whole plan checked with
  :func:`optimizer.schema.check.check_plan`): named-table reads with a filter, a best-effort filter (always
  repeated in a ``FilterRel`` above, as the spec requires of a producer) and a projection mask;
  virtual tables; filters; projects with scalar expressions and window functions; aggregates with
  grouping sets and measure filters; sorts; fetches; every join type; cross products; regions of 3..4
  inputs under inner joins or comma joins (cross products under a filter of equalities); every set
  operation; shared subtrees (``ReferenceRel``); random ``emit``\\ s and random (lying) ``hint.stats``.
  The expressions are drawn by :mod:`testing.gen_expressions`.
  Functions are declared under the standard URNs with :class:`optimizer.expr_utils.FunctionRegistrar`.
* :func:`~testing.profiles.statistics` -- ``{table: TableStatistics}`` with row counts, NDVs,
  null counts and min/max that may be true or lies;
  :func:`~testing.profiles.capability_profiles` -- random reader profiles (JSON objects);
  :func:`~testing.profiles.optimizer_configs` -- random ``OptimizerConfig`` keyword arguments.
* :func:`cases` -- all of it together: a :class:`~optimizer.difftest.harness.DiffCase`.

Generated plans have one answer (as a multiset of rows): nothing depends on the order of ties or
on floating-point summation order. So a ``FetchRel`` always sits over a sort on every column; window
functions are ranks, ``row_number`` over all columns, and count/min/max/sum over whole partitions or
``RANGE`` frames (which include the peers); sums and averages read integers up to ``i32`` and
decimals only; integer arithmetic saturates (``overflow: SATURATE``) instead of failing; the
nondeterministic aggregates (``any_value``, ``first``...) are not used. ``*_SINGLE`` joins read a side
that is unique on the equality key (an aggregate grouped by it), so they never fail.

Minimal examples: every optional feature is drawn so that Hypothesis shrinks it away (choices shrink
to the first option, which is always the simplest).
"""

from __future__ import annotations

from collections.abc import Sequence

from hypothesis import strategies as st
from substrait.proto import (
    AggregateFunction,
    AggregationPhase,
    Expression,
    JoinRel,
    Plan,
    PlanRel,
    Rel,
    Type,
)

from optimizer.difftest.harness import (
    TYPE_SPECS,
    ColumnSpec,
    Database,
    DiffCase,
    TableSpec,
)
from optimizer.expr_utils import field, referenced_fields, remap_fields, shift_fields
from optimizer.schema.check import check_plan
from optimizer.schema.record import Schema
from optimizer.schema.types import make_type, with_nullability
from testing.gen_expressions import (
    _NULLABLE_BOOL,
    _REQUIRED_BOOL,
    _URN,
    _class,
    _ExpressionGen,
    _Skip,
)
from testing.profiles import capability_profiles, optimizer_configs, statistics
from testing.rows import RowEvaluator, rows_share_value
from testing.values import (
    _bool_literal,
    _column_values,
    _maybe,
    _pick,
    _weighted,
    databases,
    literal,
)

__all__ = ["cases", "plans"]


class _Gen(_ExpressionGen):
    """The plan generator: relations over the expressions of :class:`_ExpressionGen`."""

    def relation(self, depth: int = 0) -> tuple[Rel, Schema]:
        for _ in range(6):
            try:
                return self._relation(depth)
            except _Skip:
                continue
        return self.read()

    def _relation(self, depth: int) -> tuple[Rel, Schema]:
        draw = self.draw
        self.budget -= 1
        leaf = depth > 0 and (depth >= self.max_depth or self.budget <= 0)  # the root: an operator always
        options = []
        if depth > 0 or leaf:  # the root is an operator: a plan that only reads gives the rules nothing
            options = [("read", 6 if leaf else 2), ("virtual", 1)]
            if self.shared:
                options.append(("reference", 2))
        if not leaf:
            options += [("filter", 4), ("project", 2), ("aggregate", 2), ("join", 4), ("sort", 1), ("fetch", 3),
                        ("cross", 1), ("set", 3), ("region", 3), ("outer_filter", 4)]
            if self.allow_windows:
                options.append(("window_project", 3))
            if self.allow_shared:
                options.append(("share", 1))
        kind = _weighted(draw, options)
        if kind == "read":
            return self.read()
        if kind == "virtual":
            return self.virtual()
        if kind == "reference":
            ordinal, schema = _pick(draw, self.shared)
            return self.reference(ordinal), schema
        if kind == "share":
            rel, schema = self.relation(depth + 1)
            return self.share(rel, schema), schema
        return getattr(self, kind)(depth)

    def reference(self, ordinal: int) -> Rel:
        rel = Rel()
        rel.reference.subtree_ordinal = ordinal
        return rel

    def share(self, rel: Rel, schema: Schema) -> Rel:
        """Make ``rel`` a shared subtree (a ``PlanRel``); return a ``ReferenceRel`` to it."""
        if rel.WhichOneof("rel_type") == "reference":
            return rel
        self.plan.relations.append(PlanRel(rel=rel))
        ordinal = len(self.plan.relations) - 1
        self.shared.append((ordinal, schema))
        return self.reference(ordinal)

    def read(self) -> tuple[Rel, Schema]:
        draw = self.draw
        table = _pick(draw, list(self.db.tables.values()))
        rel = Rel()
        r = rel.read
        r.named_table.names.append(table.name)
        r.base_schema.struct.nullability = Type.NULLABILITY_REQUIRED
        for c in table.columns:
            r.base_schema.names.append(c.name)
            r.base_schema.struct.types.append(c.substrait_type())
        base = Schema([c.name for c in table.columns], [c.substrait_type() for c in table.columns])
        self.reading = table
        try:
            return self._read(table, rel, base)
        finally:
            self.reading = None

    def _read(self, table: TableSpec, rel: Rel, base: Schema) -> tuple[Rel, Schema]:
        draw = self.draw
        r = rel.read
        if _maybe(draw, 20):
            r.filter.CopyFrom(self.aimed(table.rows, lambda: self.predicate(base)))
        base_rows = self.evaluator.rows(rel)  # the base columns' rows (no projection yet)
        positions = list(range(len(base)))
        if _maybe(draw, 25):
            positions = draw(st.lists(st.integers(0, len(base) - 1), min_size=1, max_size=len(base), unique=True))
            if not _maybe(draw, 30):
                positions.sort()
            r.projection.maintain_singular_struct = True
            for i in positions:
                r.projection.select.struct_items.add().field = i
        best_effort = None
        if _maybe(draw, 20):
            best_effort = self.aimed(base_rows, lambda: self.predicate(base))
            if referenced_fields(best_effort) <= set(positions):
                r.best_effort_filter.CopyFrom(best_effort)
                best_effort = remap_fields(best_effort, {p: k for k, p in enumerate(positions)})
            else:
                best_effort = None
        schema = self.hint_and_emit(rel, [], emit=best_effort is None)
        if best_effort is not None:  # a best-effort filter may be skipped: the producer repeats it
            top = Rel()
            top.filter.input.CopyFrom(rel)
            top.filter.condition.CopyFrom(best_effort)
            return top, self.schema(top, [schema])
        return rel, schema

    def virtual(self) -> tuple[Rel, Schema]:
        draw = self.draw
        specs = [c.type for t in self.db.tables.values() for c in t.columns]
        n = draw(st.integers(1, 3))
        columns = [ColumnSpec(f"v{i}", _pick(draw, specs), nullable=True) for i in range(n)]
        rel = Rel()
        r = rel.read
        r.base_schema.struct.nullability = Type.NULLABILITY_REQUIRED
        for c in columns:
            r.base_schema.names.append(c.name)
            r.base_schema.struct.types.append(c.substrait_type())
        r.virtual_table.SetInParent()
        for _ in range(draw(st.integers(1, 3))):
            row = r.virtual_table.expressions.add()
            for c in columns:
                row.fields.append(literal(c.type, draw(_column_values(c.type, True, self.exact_floats))))
        return rel, self.hint_and_emit(rel, [])

    def child_of_filter(self, depth: int) -> tuple[Rel, Schema]:
        """Mostly any relation; often one a filter can be pushed through or into (the logical rules)."""
        if depth + 1 < self.max_depth and self.budget > 1 and _maybe(self.draw, 50):
            kind = _pick(self.draw, ["join", "project", "aggregate", "join", "set", "region", "cross", "join", "sort",
                                     "set"])
            try:
                self.budget -= 1
                if kind == "set":  # half of them unions: a filter pushed into one input only is wrong there
                    return self.set(depth + 1, union=_maybe(self.draw, 50))
                return getattr(self, kind)(depth + 1)
            except _Skip:
                pass
        return self.relation(depth + 1)

    def focused_predicate(self, schema: Schema, depth: int = 0) -> Expression:
        """A predicate on a run of adjacent columns only (over a join: often one side's)."""
        n = len(schema)
        if n < 2 or not _maybe(self.draw, 50):
            return self.predicate(schema, depth)
        lo = self.draw(st.integers(0, n - 1))
        hi = self.draw(st.integers(lo + 1, n))
        positions = list(range(lo, hi))
        inner = self.predicate(schema.select(positions), depth)
        return remap_fields(inner, dict(enumerate(positions)))

    def filter(self, depth: int) -> tuple[Rel, Schema]:
        child, cs = self.child_of_filter(depth)
        rel = Rel()
        rel.filter.input.CopyFrom(child)
        last_input = (self.evaluator.rows(child.set.inputs[-1])
                      if child.HasField("set") and not child.set.common.HasField("emit") else None)
        cond = self.aimed(self.evaluator.rows(child), lambda: self.focused_predicate(cs), drop_from=last_input)
        if _maybe(self.draw, 15):
            try:
                cond = self.call("and", [(cond, _NULLABLE_BOOL), (self.exists(cs), _REQUIRED_BOOL)], _NULLABLE_BOOL)[0]
            except _Skip:
                pass
        rel.filter.condition.CopyFrom(cond)
        return rel, self.hint_and_emit(rel, [cs])

    def exists(self, schema: Schema) -> Expression:
        """``[NOT] EXISTS (SELECT * FROM t WHERE t.x = outer.y [AND p(t)])``: a correlated subquery (an
        outer reference to a column of ``schema``)."""
        draw = self.draw
        table = _pick(draw, list(self.db.tables.values()))
        base = Schema([c.name for c in table.columns], [c.substrait_type() for c in table.columns])
        pairs = [(i, j) for i in self.cols(schema) for j in self.cols(base)
                 if _class(schema.types[i]) == _class(base.types[j])]
        if not pairs:
            raise _Skip("no column to correlate")
        i, j = _pick(draw, pairs)
        read = Rel()
        r = read.read
        r.named_table.names.append(table.name)
        r.base_schema.CopyFrom(base.to_named_struct())
        outer = Expression()
        outer.selection.direct_reference.struct_field.field = i
        outer.selection.outer_reference.steps_out = 1
        cond = self.call("equal", [self.col(base, j), (outer, schema.types[i])])[0]
        if _maybe(draw, 40):
            cond = self.call("and", [(cond, _NULLABLE_BOOL), (self.predicate(base, 1), _NULLABLE_BOOL)],
                             _NULLABLE_BOOL)[0]
        inner = Rel()
        inner.filter.input.CopyFrom(read)
        inner.filter.condition.CopyFrom(cond)
        e = Expression()
        e.subquery.set_predicate.predicate_op = Expression.Subquery.SetPredicate.PREDICATE_OP_EXISTS
        e.subquery.set_predicate.tuples.CopyFrom(inner)
        if _maybe(draw, 30):
            return self.call("not", [(e, _REQUIRED_BOOL)], _REQUIRED_BOOL)[0]
        return e

    def project(self, depth: int) -> tuple[Rel, Schema]:
        draw = self.draw
        child, cs = self.relation(depth + 1)
        rel = Rel()
        rel.project.input.CopyFrom(child)
        for _ in range(draw(st.integers(1, 3))):
            try:
                if self.allow_windows and _maybe(draw, 40):
                    e, _ = self.window(cs)
                else:
                    e, _ = self.value(cs)
            except _Skip:
                continue
            rel.project.expressions.append(e)
        if not rel.project.expressions:
            rel.project.expressions.append(_bool_literal(True))
        return rel, self.hint_and_emit(rel, [cs])

    def window_project(self, depth: int) -> tuple[Rel, Schema]:
        """A project of 1..2 window functions (and its input's columns)."""
        child, cs = self.relation(depth + 1)
        rel = Rel()
        rel.project.input.CopyFrom(child)
        for _ in range(self.draw(st.integers(1, 2))):
            try:
                rel.project.expressions.append(self.window(cs)[0])
            except _Skip:
                continue
        if not rel.project.expressions:
            raise _Skip("no window function")
        return rel, self.hint_and_emit(rel, [cs])

    def aggregate(self, depth: int) -> tuple[Rel, Schema]:
        draw = self.draw
        child, cs = self.relation(depth + 1)
        rel = Rel()
        a = rel.aggregate
        a.input.CopyFrom(child)
        cols = self.cols(cs)
        keys = draw(st.lists(st.sampled_from(cols), max_size=3, unique=True)) if cols else []
        for i in keys:
            a.grouping_expressions.append(field(i))
        if keys and _maybe(draw, 10):
            try:
                a.grouping_expressions.append(self.value(cs, 1)[0])
            except _Skip:
                pass
        n_keys = len(a.grouping_expressions)
        if n_keys and _maybe(draw, 30):  # grouping sets
            sets = draw(st.lists(st.lists(st.integers(0, n_keys - 1), max_size=n_keys, unique=True),
                                 min_size=2, max_size=3))
            missing = set(range(n_keys)) - {k for s in sets for k in s}
            sets[0] = sets[0] + sorted(missing)
            for s in sets:
                a.groupings.add().expression_references.extend(s)
        elif n_keys or _maybe(draw, 50):
            a.groupings.add().expression_references.extend(range(n_keys))
        n_measures = draw(st.integers(0 if n_keys else 1, 3))
        for _ in range(n_measures):
            try:
                m = a.measures.add()
                m.measure.CopyFrom(self.measure(cs))
            except _Skip:
                del a.measures[-1]
                continue
            if _maybe(draw, 15):
                m.filter.CopyFrom(self.predicate(cs, 1))
        if not n_keys and not a.measures:
            m = a.measures.add()
            m.measure.CopyFrom(self._count_star())
        return rel, self.hint_and_emit(rel, [cs])

    def _count_star(self) -> AggregateFunction:
        agg = AggregateFunction()
        agg.phase = AggregationPhase.AGGREGATION_PHASE_INITIAL_TO_RESULT
        agg.invocation = AggregateFunction.AGGREGATION_INVOCATION_ALL
        agg.function_reference = self.reg.anchor("count", _URN["count"])
        agg.output_type.CopyFrom(make_type("i64"))
        return agg

    def sort(self, depth: int) -> tuple[Rel, Schema]:
        child, cs = self.relation(depth + 1)
        rel = Rel()
        rel.sort.input.CopyFrom(child)
        for _ in range(self.draw(st.integers(1, 2))):
            rel.sort.sorts.append(self.sort_field(cs))
        return rel, self.hint_and_emit(rel, [cs])

    def total_sort(self, child: Rel, cs: Schema) -> tuple[Rel, Schema]:
        """A sort on every column (in a random order), so that any prefix of it is one multiset."""
        rel = Rel()
        rel.sort.input.CopyFrom(child)
        order = self.draw(st.permutations(range(len(cs))))
        for i in order:
            rel.sort.sorts.append(self.sort_field(cs, i))
        return rel, self.schema(rel, [cs])

    def fetch(self, depth: int) -> tuple[Rel, Schema]:
        draw = self.draw
        child, cs = self.relation(depth + 1)
        if not len(cs) or len(self.cols(cs)) != len(cs):
            raise _Skip("cannot sort on every column")
        inner, schema = self.total_sort(child, cs)
        if _maybe(draw, 25):  # Fetch(Project(Sort)): the top-N rule looks through projects
            proj = Rel()
            proj.project.input.CopyFrom(inner)
            try:
                e, _ = self.window(schema) if self.allow_windows and _maybe(draw, 30) else self.value(schema)
                proj.project.expressions.append(e)
            except _Skip:
                proj.project.expressions.append(_bool_literal(True))
            inner, schema = proj, self.schema(proj, [schema])
        rel = Rel()
        rel.fetch.input.CopyFrom(inner)
        self.fetch_bounds(rel)
        return rel, self.hint_and_emit(rel, [schema])

    def fetch_bounds(self, rel: Rel) -> None:
        """A fetch's count (1..6, rarely 0) and, in half of them, an offset (mostly 1: the inputs are
        small, and an offset past the end empties the answer)."""
        draw = self.draw
        rel.fetch.count_expr.literal.i64 = 0 if _maybe(draw, 3) else draw(st.integers(1, 6))
        if _maybe(draw, 50):
            offset = _pick(draw, [1, 1, 1, 2])
            rows = self.evaluator.rows(rel.fetch.input)
            if rows is not None:  # an offset inside the input (past its end: no rows)
                offset = min(offset, max(len(rows) - 1, 0))
            if offset:
                rel.fetch.offset_expr.literal.i64 = offset

    def outer_filter(self, depth: int) -> tuple[Rel, Schema]:
        """A filter over a LEFT/RIGHT/OUTER join with a conjunct on the null-supplying side's columns
        (and often one on the preserved side's): such a conjunct must stay above the join."""
        draw = self.draw
        jt = _pick(draw, [JoinRel.JOIN_TYPE_LEFT, JoinRel.JOIN_TYPE_RIGHT, JoinRel.JOIN_TYPE_OUTER, JoinRel.JOIN_TYPE_LEFT])
        child, cs, n_left = self.join(depth + 1, jt=jt)
        left_cols, right_cols = list(range(n_left)), list(range(n_left, len(cs)))
        null_side = right_cols if jt == JoinRel.JOIN_TYPE_LEFT else left_cols
        kept_side = left_cols if jt == JoinRel.JOIN_TYPE_LEFT else right_cols
        if not null_side and not kept_side:
            raise _Skip("no columns")

        def condition() -> Expression:
            parts = []
            for positions in (null_side, kept_side):
                if positions and (positions is null_side or _maybe(draw, 60)):
                    if positions is null_side and _maybe(draw, 50):
                        parts.append(self.null_side_predicate(cs, positions))
                        continue
                    inner = self.predicate(cs.select(positions), 1)
                    parts.append(remap_fields(inner, dict(enumerate(positions))))
            if not parts:
                return _bool_literal(True)
            return parts[0] if len(parts) == 1 else self.call(
                "and", [(c, _NULLABLE_BOOL) for c in parts], _NULLABLE_BOOL)[0]

        rel = Rel()
        rel.filter.input.CopyFrom(child)
        cond = self.aimed(self.evaluator.rows(child), condition)
        rel.filter.condition.CopyFrom(cond)
        return rel, self.hint_and_emit(rel, [cs])

    def null_side_predicate(self, schema: Schema, positions: list[int]) -> Expression:
        """A condition on a null-supplying side's columns that the rows padded with NULLs pass or
        fail on purpose: ``c IS NULL`` (the unmatched rows: an anti join), ``c IS NOT NULL``, or
        ``p(c) OR c IS NULL``."""
        draw = self.draw
        i = _pick(draw, positions)
        how = _pick(draw, ["is_null", "or_null", "is_not_null"])
        if how != "or_null":
            return self.call(how, [self.col(schema, i)])[0]
        inner = remap_fields(self.predicate(schema.select(positions), 1), dict(enumerate(positions)))
        return self.call("or", [(inner, _NULLABLE_BOOL),
                                (self.call("is_null", [self.col(schema, i)])[0], _REQUIRED_BOOL)], _NULLABLE_BOOL)[0]

    def join(self, depth: int, jt: int | None = None):
        """A join of two relations (``jt``: its type, else a random one). Called with ``jt``, returns
        the join, its schema and the width of its left input, and puts no sort above it."""
        draw = self.draw
        forced = jt is not None
        if jt is None:
            # every type; the outer, anti and right single joins twice (what predicate pushdown gets wrong)
            jt = _pick(draw, [1, 3, 2, 4, 5, 6, 8, 9, 11, 12, 7, 10, 2, 6, 9, 10])
        left, ls = self.relation(depth + 1)
        if self.allow_shared and _maybe(draw, 10):  # a self-join of a shared subtree
            left = self.share(left, ls)
            right, rs = Rel(), ls
            right.CopyFrom(left)
            if _maybe(draw, 50):
                f = Rel()
                f.filter.input.CopyFrom(right)
                f.filter.condition.CopyFrom(self.predicate(rs))
                right = f
        else:
            right, rs = self.relation(depth + 1)
        single = jt in (JoinRel.JOIN_TYPE_LEFT_SINGLE, JoinRel.JOIN_TYPE_RIGHT_SINGLE)
        if single:  # make the other side unique on a key column; the condition equates it
            left_single = jt == JoinRel.JOIN_TYPE_LEFT_SINGLE
            keep, other = (ls, rs) if left_single else (rs, ls)
            pairs = [(i, j) for i in self.cols(keep) for j in self.cols(other)
                     if _class(keep.types[i]) == _class(other.types[j])]
            if not pairs:
                jt = JoinRel.JOIN_TYPE_LEFT if left_single else JoinRel.JOIN_TYPE_RIGHT
                single = False
            else:
                i, j = _pick(draw, pairs)
                agg = Rel()
                agg.aggregate.input.CopyFrom(right if left_single else left)
                agg.aggregate.grouping_expressions.append(field(j))
                agg.aggregate.groupings.add().expression_references.append(0)
                if _maybe(draw, 50):
                    try:
                        agg.aggregate.measures.add().measure.CopyFrom(self.measure(other))
                    except _Skip:
                        del agg.aggregate.measures[:]
                unique = self.schema(agg, [other])
                if left_single:
                    right, rs = agg, unique
                    key = (field(i), ls.types[i]), (field(len(ls)), rs.types[0])
                else:
                    left, ls = agg, unique
                    key = (field(0), ls.types[0]), (field(len(ls) + i), rs.types[i])
        rel = Rel()
        j = rel.join
        j.left.CopyFrom(left)
        j.right.CopyFrom(right)
        j.type = jt
        both = ls.concat(rs)
        conjuncts: list[Expression] = []
        if single:
            conjuncts.append(self.call("equal", list(key))[0])
        n_eq = (2 if _maybe(draw, 30) else draw(st.integers(0, 2))) if not _maybe(draw, 10) else 0
        first_key = None
        left_rows = self.evaluator.rows(left) if n_eq else None
        right_rows = self.evaluator.rows(right) if n_eq else None
        for _ in range(n_eq):
            pairs = [(a, len(ls) + b) for a in self.cols(ls) for b in self.cols(rs)
                     if _class(ls.types[a]) == _class(rs.types[b])]
            if not pairs:
                break
            # null-safe keys often: with NULL keys on both sides they match (and an `=` would not)
            op = "equal" if not _maybe(draw, 35) else _pick(draw, ["is_not_distinct_from", "is_not_distinct_from",
                                                                   "is_not_distinct_from", "lt", "not_equal"])
            if not _maybe(draw, 20):  # mostly keys whose columns share a value: the join keeps rows
                null_pairs = []
                if op == "is_not_distinct_from" and left_rows and right_rows:  # ... a NULL, for null-safe keys
                    null_pairs = [(a, b) for a, b in pairs if any(r[a] is None for r in left_rows)
                                  and any(r[b - len(ls)] is None for r in right_rows)]
                pairs = null_pairs or self.matching(pairs, left_rows, right_rows, len(ls))
            named = [(a, b) for a, b in pairs if both.names[a] == both.names[b]]
            if named and _maybe(draw, 50):  # the same column of two tables (or of one twice): keys match
                pairs = named
            a, b = _pick(draw, pairs)
            conjuncts.append(self.call(op, [self.col(both, a), self.col(both, b)])[0])
            if op == "equal" and first_key is None:
                first_key = (a, b - len(ls))
        if first_key is not None and _maybe(draw, 15):  # inputs sorted on the key: a merge join is free
            direction = _pick(draw, [1, 2, 3, 4])
            for side, key in ((j.left, first_key[0]), (j.right, first_key[1])):
                wrapped = Rel()
                wrapped.sort.input.CopyFrom(side)
                wrapped.sort.sorts.add(expr=field(key), direction=direction)
                side.CopyFrom(wrapped)
        # a conjunct on one side only; often in outer joins, where one on the preserved side must
        # stay in the ON clause (it pads rows instead of removing them)
        outer = jt in (JoinRel.JOIN_TYPE_LEFT, JoinRel.JOIN_TYPE_RIGHT, JoinRel.JOIN_TYPE_OUTER)
        if _maybe(draw, 60 if outer else 35):
            side, offset, rows = (ls, 0, left) if _maybe(draw, 50) else (rs, len(ls), right)
            conjuncts.append(shift_fields(self.aimed(self.evaluator.rows(rows), lambda: self.predicate(side, 1)),
                                          offset))
        if _maybe(draw, 10):
            conjuncts.append(self.predicate(both, 1))
        if len(conjuncts) > 1:
            j.expression.CopyFrom(self.call("and", [(c, _NULLABLE_BOOL) for c in conjuncts], _NULLABLE_BOOL)[0])
        elif conjuncts:
            j.expression.CopyFrom(conjuncts[0])
        else:
            j.expression.CopyFrom(_bool_literal(True))
        if jt in (1, 2, 3, 4) and _maybe(draw, 10):
            j.post_join_filter.CopyFrom(self.predicate(both, 1))
        if forced:
            return rel, self.schema(rel, [ls, rs]), len(ls)
        schema = self.hint_and_emit(rel, [ls, rs])
        if first_key is not None and not j.common.HasField("emit") and _maybe(draw, 15):
            # A sort on the join's key above it: a merge join may be chosen. Right semi/anti joins
            # (and mark) joins output only the right input (and the mark): the key is the right one.
            right_only = JoinRel.JoinType.Name(jt) in ("JOIN_TYPE_RIGHT_SEMI", "JOIN_TYPE_RIGHT_ANTI", "JOIN_TYPE_RIGHT_MARK")
            top = Rel()
            top.sort.input.CopyFrom(rel)
            top.sort.sorts.append(self.sort_field(schema, first_key[1] if right_only else first_key[0]))
            return top, self.schema(top, [schema])
        return rel, schema

    def region(self, depth: int) -> tuple[Rel, Schema]:
        """3..4 inputs joined by inner joins, or comma-joined (cross products under one filter of
        equalities), as the join-ordering and join-condition rules look for."""
        draw = self.draw
        parts = [self.relation(max(depth + 1, self.max_depth - 1)) for _ in range(draw(st.integers(3, 4)))]
        comma = _maybe(draw, 50)
        rel, schema = parts[0]
        offsets = [0]
        part_rows = [self.evaluator.rows(part) for part, _ in parts]
        for part, ps in parts[1:]:
            offsets.append(len(schema))
            both = schema.concat(ps)
            top = Rel()
            if comma:
                top.cross.left.CopyFrom(rel)
                top.cross.right.CopyFrom(part)
            else:
                top.join.left.CopyFrom(rel)
                top.join.right.CopyFrom(part)
                top.join.type = JoinRel.JOIN_TYPE_INNER
                pairs = [(a, len(schema) + b) for a in self.cols(schema) for b in self.cols(ps)
                         if _class(schema.types[a]) == _class(ps.types[b])]
                if pairs and not _maybe(draw, 10):
                    if not _maybe(draw, 20):
                        # mostly keys that share a value with the part just joined (rows of the
                        # parts before it: the part where column a lies)
                        k = len(offsets) - 1
                        pairs = [(a, b) for a, b in pairs
                                 if self._share(part_rows, offsets, a, k, b - len(schema))] or pairs
                    a, b = _pick(draw, pairs)
                    top.join.expression.CopyFrom(self.call("equal", [self.col(both, a), self.col(both, b)])[0])
                else:
                    top.join.expression.CopyFrom(_bool_literal(True))
            rel, schema = top, self.schema(top, [schema, ps])
        conjuncts = []
        ranges = [range(o, o + len(ps)) for o, (_, ps) in zip(offsets, parts, strict=True)]
        for _ in range(draw(st.integers(0 if not comma else 1, 2))):
            a = _pick(draw, self.cols(schema) or [None])
            if a is None:
                break
            others = [b for b in self.cols(schema) if _class(schema.types[b]) == _class(schema.types[a])
                      and not any(a in r and b in r for r in ranges)]
            # mostly a column of the same name (the same column of two tables, or of one table twice:
            # the equality holds for some rows)
            named = [b for b in others if schema.names[b] == schema.names[a]]
            if named and _maybe(draw, 60):
                others = named
            if not _maybe(draw, 20):  # mostly columns that share a value: the equality keeps rows
                others = [b for b in others if self._share(part_rows, offsets, a, None, b)] or others
            if not others:
                continue
            b = _pick(draw, others)
            conjuncts.append(self.call("equal", [self.col(schema, a), self.col(schema, b)])[0])
            if _maybe(draw, 50):  # a second equality between the same two inputs
                ra = next(r for r in ranges if a in r)
                rb = next(r for r in ranges if b in r)
                more = [(x, y) for x in self.cols(schema) if x in ra for y in self.cols(schema) if y in rb
                        and _class(schema.types[x]) == _class(schema.types[y]) and (x, y) != (a, b)]
                if more:
                    x, y = _pick(draw, more)
                    conjuncts.append(self.call("equal", [self.col(schema, x), self.col(schema, y)])[0])
        if _maybe(draw, 30):
            conjuncts.append(self.predicate(schema, 1))
        if conjuncts:
            top = Rel()
            top.filter.input.CopyFrom(rel)
            cond = conjuncts[0] if len(conjuncts) == 1 else self.call(
                "and", [(c, _NULLABLE_BOOL) for c in conjuncts], _NULLABLE_BOOL)[0]
            top.filter.condition.CopyFrom(cond)
            return top, self.hint_and_emit(top, [schema])
        return rel, schema

    @staticmethod
    def _share(part_rows: list, offsets: list[int], a: int, part_b: int | None, b: int) -> bool:
        """Whether column ``a`` (a position in the region) shares a value with column ``b`` (a
        position in part ``part_b``, or in the region when ``part_b`` is None)."""
        def locate(pos: int) -> tuple[int, int]:
            k = max(i for i, o in enumerate(offsets) if o <= pos)
            return k, pos - offsets[k]
        ka, ia = locate(a)
        kb, ib = (part_b, b) if part_b is not None else locate(b)
        if ka >= len(part_rows) or kb >= len(part_rows) or not part_rows[ka] or not part_rows[kb]:
            return True
        return rows_share_value(part_rows[ka], ia, part_rows[kb], ib)

    def cross(self, depth: int) -> tuple[Rel, Schema]:
        left, ls = self.relation(depth + 1)
        right, rs = self.relation(depth + 1)
        rel = Rel()
        rel.cross.left.CopyFrom(left)
        rel.cross.right.CopyFrom(right)
        return rel, self.hint_and_emit(rel, [ls, rs])

    def conform(self, rel: Rel, schema: Schema, target: Schema) -> Rel:
        """A project of ``rel`` whose output has ``target``'s column types (a column of the same type
        where there is one, else a literal)."""
        out = Rel()
        out.project.input.CopyFrom(rel)
        used: set[int] = set()
        for t in target.types:
            same = [i for i in range(len(schema)) if _class(schema.types[i]) == _class(t) and i not in used]
            if same and not _maybe(self.draw, 15):
                i = _pick(self.draw, same)
                used.add(i)
                out.project.expressions.append(field(i))
            else:
                out.project.expressions.append(self.lit_for(with_nullability(t, False), null_percent=30)[0])
        out.project.common.emit.output_mapping.extend(range(len(schema), len(schema) + len(target)))
        return out

    def set(self, depth: int, union: bool = False) -> tuple[Rel, Schema]:
        """A set operation (``union``: a union, which a filter above must filter in every input)."""
        draw = self.draw
        op = _pick(draw, [6, 5] if union else [6, 5, 1, 7, 2, 3, 4, 8, 6, 5])  # every operation; unions twice
        first, fs = self.relation(depth + 1)
        if self.allow_shared and _maybe(draw, 30):
            first = self.share(first, fs)
        inputs = [(first, fs)]
        for _ in range(draw(st.integers(1, 2))):
            # A minus of an unfiltered copy is empty, an intersection with another relation mostly:
            # those take a filtered copy more often.
            union = op in (5, 6)
            how = _pick(draw, ["filtered", "same", "other"] if union else ["filtered", "filtered", "same", "other"])
            if not union and how == "same" and op in (1, 2, 7):
                how = "filtered"
            if how == "other":
                other, os_ = self.relation(depth + 1)
                rel = self.conform(other, os_, fs)
                inputs.append((rel, self.schema(rel, [os_])))
                continue
            copy = Rel()
            copy.CopyFrom(first)
            if how == "filtered":
                f = Rel()
                f.filter.input.CopyFrom(copy)
                f.filter.condition.CopyFrom(self.predicate(fs, 1))
                copy = f
            inputs.append((copy, fs))
        rel = Rel()
        rel.set.op = op
        for r, _ in inputs:
            rel.set.inputs.append(r)
        return rel, self.hint_and_emit(rel, [s for _, s in inputs])

    # --------------------------------------------------------------------------------- plan

    def build(self) -> Plan:
        draw = self.draw
        if self.allow_shared and _maybe(draw, 15):
            rel, schema = self.relation(max(1, self.max_depth - 1))
            self.share(rel, schema)
        rel, schema = self.relation(0)
        if _maybe(draw, 25):  # a sorted answer: its order is compared too
            if _maybe(draw, 40) and len(self.cols(schema)) == len(schema) and len(schema):
                inner, schema2 = self.total_sort(rel, schema)
                top = Rel()
                top.fetch.input.CopyFrom(inner)
                self.fetch_bounds(top)
                rel, schema = top, self.schema(top, [schema2])
            else:
                top = Rel()
                top.sort.input.CopyFrom(rel)
                for _ in range(draw(st.integers(1, 2))):
                    top.sort.sorts.append(self.sort_field(schema))
                rel, schema = top, self.schema(top, [schema])
        root = self.plan.relations.add().root
        root.input.CopyFrom(rel)
        root.names.extend(f"o{i}" for i in range(len(schema)))
        _drop_unread_shared(self.plan)
        return self.plan


def _references(msg) -> list:
    """Every ``ReferenceRel`` inside ``msg`` (a protobuf message), subqueries included."""
    out = []
    stack = [msg]
    while stack:
        m = stack.pop()
        if isinstance(m, Rel) and m.WhichOneof("rel_type") == "reference":
            out.append(m.reference)
            continue
        for fd, value in m.ListFields():
            if fd.message_type is None:
                continue
            if fd.label == fd.LABEL_REPEATED:
                if fd.message_type.GetOptions().map_entry:
                    continue
                stack.extend(value)
            else:
                stack.append(value)
    return out


def _drop_unread_shared(plan: Plan) -> None:
    """Remove the shared subtrees the root does not read (directly or through other shared subtrees)
    and renumber the references: every relation of a generated plan is run."""
    roots = [i for i, r in enumerate(plan.relations) if r.WhichOneof("rel_type") == "root"]
    read: set[int] = set()
    todo = list(roots)
    while todo:
        i = todo.pop()
        body = plan.relations[i].root.input if i in roots else plan.relations[i].rel
        for ref in _references(body):
            if ref.subtree_ordinal not in read:
                read.add(ref.subtree_ordinal)
                todo.append(ref.subtree_ordinal)
    keep = [i for i in range(len(plan.relations)) if i in roots or i in read]
    if len(keep) == len(plan.relations):
        return
    renumber = {old: new for new, old in enumerate(keep)}
    kept = [plan.relations[i] for i in keep]
    for r in kept:
        for ref in _references(r):
            ref.subtree_ordinal = renumber[ref.subtree_ordinal]
    copies = [PlanRel() for _ in kept]
    for c, r in zip(copies, kept, strict=True):
        c.CopyFrom(r)
    del plan.relations[:]
    plan.relations.extend(copies)


class InvalidPlan(AssertionError):
    """The generator built a plan that ``check_plan`` rejects (a bug in the generator)."""


#: How often :func:`plans` draws a new plan in place of one the evaluator knows to return no rows.
EMPTY_REDRAWS = 3


@st.composite
def plans(draw, database: Database, *, max_depth: int = 3, max_relations: int = 8, shared: bool = True,
          windows: bool = True) -> Plan:
    """A random valid plan over ``database`` (see the module docstring); ``check_plan`` is empty.

    A plan of which the row evaluator cannot tell one sure row is drawn again (up to
    :data:`EMPTY_REDRAWS` times): a wrong plan mostly returns the same empty answer as the right one."""
    for _ in range(EMPTY_REDRAWS + 1):
        gen = _Gen(draw, database, max_depth=max_depth, max_relations=max_relations, shared=shared,
                   windows=windows)
        plan = gen.build()
        root = next(r.root for r in plan.relations if r.WhichOneof("rel_type") == "root")
        if RowEvaluator(plan, database, gen.function_name, sure=True).rows(root.input):
            break
    problems = check_plan(plan)
    if problems:
        raise InvalidPlan("; ".join(str(p) for p in problems[:3]))
    return plan


@st.composite
def cases(draw, *, max_tables: int = 3, max_rows: int = 8, max_depth: int = 3, max_relations: int = 8,
          types: Sequence[str] = TYPE_SPECS) -> DiffCase:
    """A whole differential test: tables, a plan over them, statistics, a profile, a configuration."""
    db = draw(databases(max_tables=max_tables, max_rows=max_rows, types=types))
    plan = draw(plans(db, max_depth=max_depth, max_relations=max_relations))
    return DiffCase(
        database=db,
        plan=plan,
        statistics=draw(statistics(db)),
        capabilities=draw(capability_profiles()),
        config=draw(optimizer_configs()),
    )
