"""The plan generator's state and the expressions it draws over a relation's schema: predicates
(aimed at keeping rows where it can tell which), scalar values, sort fields, window functions and
aggregate measures, each a typed call of a function declared under its standard URN.
:class:`testing.strategies._Gen` builds the relations around them.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from hypothesis import strategies as st
from substrait.proto import (
    AggregateFunction,
    AggregationPhase,
    Expression,
    FunctionOption,
    Plan,
    Rel,
    SortField,
    Type,
)

from optimizer.difftest.harness import (
    Database,
    TableSpec,
    spec_of_type,
    spec_type,
)
from optimizer.expr_utils import FunctionRegistrar, field
from optimizer.load.functions import FunctionTable
from optimizer.plan_io import mark_conformed
from optimizer.schema import rel_schema
from optimizer.schema.expressions import derive_output_type
from optimizer.schema.record import Schema
from optimizer.schema.types import is_nullable, make_type, type_name, with_nullability
from testing.rows import RowEvaluator, rows_share_value
from testing.values import (
    _FLOATS,
    _INTS,
    _bool_literal,
    _is_pool_value,
    _literal_value,
    _maybe,
    _pick,
    _weighted,
    literal,
    pool_values,
    values,
)

# ------------------------------------------------------------------------------------ plan builder

_URN = {
    **{n: "functions_comparison" for n in (
        "equal", "not_equal", "lt", "gt", "lte", "gte", "is_null", "is_not_null", "is_nan", "between",
        "coalesce", "is_not_distinct_from", "is_distinct_from")},
    **{n: "functions_boolean" for n in ("and", "or", "not", "bool_and", "bool_or")},
    **{n: "functions_arithmetic" for n in (
        "add", "subtract", "multiply", "divide", "sum", "avg", "min", "max", "rank", "dense_rank", "row_number",
        "percent_rank", "cume_dist", "lead", "lag")},
    **{n: "functions_string" for n in ("concat", "upper", "lower", "char_length", "like", "starts_with", "substring")},
    "count": "functions_aggregate_generic",
}

_CMP = ("equal", "not_equal", "lt", "gt", "lte", "gte")
_SUMMABLE = ("i8", "i16", "i32")  # integer sums that cannot overflow on small tables
_REQUIRED_BOOL = make_type("bool")
_NULLABLE_BOOL = make_type("bool", True)


def _same_value(a, b) -> bool:
    if isinstance(a, float) and isinstance(b, float):
        return (math.isnan(a) and math.isnan(b)) or (a == b and math.copysign(1, a) == math.copysign(1, b))
    return type(a) is type(b) and a == b


class _Skip(Exception):
    """An option that does not apply here (the generator tries another)."""


def _class(t: Type) -> str:
    return type_name(t, False)


def _spec(t: Type) -> str:
    spec = spec_of_type(t)
    if spec is None:
        raise _Skip(type_name(t))
    return spec


class _ExpressionGen:
    """Builds one plan; ``draw`` is Hypothesis' draw function."""

    def __init__(self, draw, db: Database, *, max_depth: int, max_relations: int, shared: bool,
                 windows: bool) -> None:
        self.draw = draw
        self.db = db
        self.max_depth = max_depth
        self.budget = max_relations
        self.allow_shared = shared
        self.allow_windows = windows
        self.plan = Plan()
        mark_conformed(self.plan)  # written in the spec's conventions, as a plan the tool loaded
        self.reg = FunctionRegistrar(self.plan, FunctionTable([]))  # an empty plan declares nothing yet
        #: the rows of the relations built so far, where it can tell (filters aimed at keeping rows)
        self.evaluator = RowEvaluator(self.plan, db, self.function_name)
        self.shared: list[tuple[int, Schema]] = []
        #: the non-null values the tables hold, by column type (in a stable order)
        self.data_values: dict[str, list] = {}
        #: the non-null values of the columns of each name and type (``c0`` of ``t0`` and of ``t1``...):
        #: a literal compared with a column whose name is a table column's is mostly one of its values
        self.column_values: dict[tuple[str, str], list] = {}
        for table in db.tables.values():
            for i, c in enumerate(table.columns):
                bucket = self.data_values.setdefault(c.type, [])
                own = self.column_values.setdefault((c.name, c.type), [])
                for row in table.rows:
                    v = row[i]
                    if v is not None and not any(_same_value(v, w) for w in bucket):
                        bucket.append(v)
                    if v is not None and not any(_same_value(v, w) for w in own):
                        own.append(v)
        #: the table whose columns the predicates being built read directly (a read's filters): its
        #: own values are preferred for literals
        self.reading: TableSpec | None = None
        #: every value is a small pool value: float sums are exact in any order (and no float division
        #: is generated), so sums and averages over floats have one answer
        self.exact_floats = all(_is_pool_value(c.type, row[i]) for table in db.tables.values()
                                for i, c in enumerate(table.columns) for row in table.rows)

    # -------------------------------------------------------------------------------- helpers

    def function_name(self, anchor: int) -> str:
        table = self.reg.table
        return table.get(anchor).name if anchor in table else ""

    def aimed(self, rows: list[tuple] | None, make, drop_from: list[tuple] | None = None) -> Expression:
        """A condition from ``make()`` that keeps some of ``rows`` (the input's, when the evaluator
        knows them): up to six draws, the first that keeps some rows and drops others (others of
        ``drop_from`` when given: the last input of a set operation, which a filter pushed into the
        first input only would not filter), else the first that keeps some. A filter that empties
        its input hides most wrong plans above it; one that drops nothing hides a lost conjunct."""
        first = kept_some = None
        for _ in range(6):
            cond = make()
            if not rows:
                return cond
            kept, dropped = self.evaluator.keeps(cond, rows)
            if drop_from:
                dropped = self.evaluator.keeps(cond, drop_from)[1]
            if kept and dropped:
                return cond
            first = first or cond
            kept_some = kept_some or (cond if kept else None)
        return kept_some or first

    def matching(self, pairs: list[tuple[int, int]], left: list[tuple] | None, right: list[tuple] | None,
                 right_offset: int) -> list[tuple[int, int]]:
        """The key pairs ``(a, b)`` (``b`` counted from ``right_offset``) whose columns share a value in
        the inputs' rows (so an equality between them keeps rows); all of them when the rows are
        not known, or none share a value."""
        if not left or not right:
            return pairs
        out = [(a, b) for a, b in pairs if rows_share_value(left, a, right, b - right_offset)]
        return out or pairs

    def summable(self, t: Type) -> bool:
        """Sums of this type have one answer: small integers, decimals, floats of exact (pool) data."""
        spec = _spec(t)
        return spec in _SUMMABLE or spec.startswith("decimal") or (spec in _FLOATS and self.exact_floats)

    def schema(self, rel: Rel, inputs: Sequence[Schema]) -> Schema:
        return rel_schema(rel, list(inputs), self.reg.table)

    def call(self, name: str, args: Sequence[tuple[Expression, Type]], out: Type | None = None,
             options: Sequence[tuple[str, str]] = ()) -> tuple[Expression, Type]:
        types = [t for _, t in args]
        if out is None:
            out = derive_output_type(name, types)
            if out.WhichOneof("kind") is None:
                raise _Skip(f"no output type for {name}")
        e = Expression()
        sf = e.scalar_function
        sf.function_reference = self.reg.anchor(name, _URN[name])
        for a, _ in args:
            sf.arguments.add().value.CopyFrom(a)
        sf.output_type.CopyFrom(out)
        for oname, pref in options:
            sf.options.append(FunctionOption(name=oname, preference=[pref]))
        return e, out

    def col(self, schema: Schema, i: int) -> tuple[Expression, Type]:
        return field(i), schema.types[i]

    def cols(self, schema: Schema, pred=lambda t: True) -> list[int]:
        return [i for i, t in enumerate(schema.types) if spec_of_type(t) is not None and pred(t)]

    def lit_for(self, t: Type, null_percent: int = 0, name: str | None = None) -> tuple[Expression, Type]:
        """A literal of ``t``'s type: often a value the tables hold (so that filters keep some rows);
        ``name``: the column it is compared with, whose own values are preferred."""
        spec = _spec(t)
        if null_percent and _maybe(self.draw, null_percent):
            return literal(spec, None), spec_type(spec, True)
        own = self.column_values.get((name, spec)) if name is not None else None
        if name is not None and self.reading is not None:
            k = next((k for k, c in enumerate(self.reading.columns) if c.name == name and c.type == spec), None)
            if k is not None:
                mine = [row[k] for row in self.reading.rows if row[k] is not None]
                own = mine or own
        if own and not _maybe(self.draw, 25):
            return literal(spec, _pick(self.draw, own)), spec_type(spec, False)
        seen = self.data_values.get(spec)
        if seen and not _maybe(self.draw, 15):
            return literal(spec, _pick(self.draw, seen)), spec_type(spec, False)
        return literal(spec, self.draw(pool_values(spec) if self.exact_floats else values(spec))), spec_type(spec, False)

    def hint_and_emit(self, rel: Rel, inputs: Sequence[Schema], emit: bool = True) -> Schema:
        """Maybe a random ``emit`` and random ``hint.stats`` on ``rel``; its output schema."""
        draw = self.draw
        body = getattr(rel, rel.WhichOneof("rel_type"))
        schema = self.schema(rel, inputs)
        if emit and len(schema) and _maybe(draw, 15):
            n = len(schema)
            mapping = draw(st.lists(st.integers(0, n - 1), min_size=1, max_size=n, unique=not _maybe(draw, 20)))
            body.common.emit.output_mapping.extend(mapping)
            schema = self.schema(rel, inputs)
        if _maybe(draw, 12):
            body.common.hint.stats.row_count = float(_pick(draw, [1, 0, 10, 1000, 1e6, 1e12]))
            body.common.hint.stats.record_size = float(_pick(draw, [8, 1, 100, 1e6]))
        return schema

    # ---------------------------------------------------------------------------- expressions

    def predicate(self, schema: Schema, depth: int = 0) -> Expression:
        for _ in range(8):
            try:
                return self._predicate(schema, depth)
            except _Skip:
                continue
        return _bool_literal(True)

    def _predicate(self, schema: Schema, depth: int) -> Expression:
        draw = self.draw
        any_cols = self.cols(schema)
        options = [("cmp_lit", 6)]
        if any_cols:
            options += [("is_null", 2), ("in", 2), ("distinct", 1), ("between", 1), ("cmp_col", 2), ("arith_cmp", 2)]
        if self.cols(schema, lambda t: _spec(t) == "bool"):
            options.append(("bool_col", 2))
        if self.cols(schema, lambda t: _spec(t) == "string"):
            options += [("like", 1), ("starts_with", 1)]
        if self.cols(schema, lambda t: _spec(t) in _FLOATS):
            options.append(("is_nan", 1))
        options.append(("const", 1))
        if depth < 2:
            options += [("and", 2), ("or", 2), ("not", 1)]
        kind = _weighted(draw, options)
        if kind == "const":  # mostly true: a false or NULL condition empties the answer
            return _bool_literal(_pick(draw, [True, True, True, True, True, True, False, None]))
        if kind in ("and", "or"):
            n = 2 if kind == "and" or not _maybe(draw, 30) else 3
            args = [(self._predicate_or_true(schema, depth + 1), _NULLABLE_BOOL) for _ in range(n)]
            if _maybe(draw, 25):  # a constant operand, as constant folding by a producer leaves them;
                # mostly the one that keeps rows (true in an AND, false in an OR)
                keeps = kind == "and"
                constant = _pick(draw, [keeps, keeps, not keeps, None])
                args.insert(draw(st.integers(0, len(args))), (_bool_literal(constant), _NULLABLE_BOOL))
            return self.call(kind, args, _NULLABLE_BOOL)[0]
        if kind == "not":
            return self.call("not", [(self._predicate_or_true(schema, depth + 1), _NULLABLE_BOOL)], _NULLABLE_BOOL)[0]
        if not any_cols:
            raise _Skip("no columns")
        if kind == "cmp_lit":
            i = _pick(draw, any_cols)
            c = self.col(schema, i)
            lit = self.lit_for(c[1], null_percent=5, name=schema.names[i])
            a, b = (c, lit) if not _maybe(draw, 20) else (lit, c)
            # every comparison, those that keep a row equal to the literal (one of the column's
            # values, mostly) twice as often
            return self.call(_pick(draw, _CMP + ("lte", "gte", "not_equal")), [a, b])[0]
        if kind == "cmp_col":
            i = _pick(draw, any_cols)
            same = [j for j in any_cols if _class(schema.types[j]) == _class(schema.types[i]) and j != i]
            if not same:
                raise _Skip("no pair")
            j = _pick(draw, same)
            return self.call(_pick(draw, _CMP), [self.col(schema, i), self.col(schema, j)])[0]
        if kind == "is_null":
            i = _pick(draw, any_cols)
            return self.call(_pick(draw, ["is_null", "is_not_null"]), [self.col(schema, i)])[0]
        if kind == "in":
            i = _pick(draw, any_cols)
            e = Expression()
            e.singular_or_list.value.CopyFrom(field(i))
            for _ in range(draw(st.integers(1, 3))):
                e.singular_or_list.options.append(self.lit_for(schema.types[i], null_percent=5,
                                                               name=schema.names[i])[0])
            return e
        if kind == "distinct":
            i = _pick(draw, any_cols)
            other = self.lit_for(schema.types[i], null_percent=30, name=schema.names[i])
            return self.call(_pick(draw, ["is_not_distinct_from", "is_distinct_from"]), [self.col(schema, i), other])[0]
        if kind == "between":
            i = _pick(draw, self.cols(schema, lambda t: _spec(t) != "bool") or [None])
            if i is None:
                raise _Skip("nothing to range over")
            lo, hi = (self.lit_for(schema.types[i], name=schema.names[i]),
                      self.lit_for(schema.types[i], name=schema.names[i]))
            if _literal_value(hi[0]) < _literal_value(lo[0]):  # mostly a non-empty range
                lo, hi = hi, lo
            return self.call("between", [self.col(schema, i), lo, hi])[0]
        if kind == "arith_cmp":
            value = self.value(schema, depth + 1, numeric=True)
            lit = self.lit_for(value[1])
            return self.call(_pick(draw, _CMP), [value, lit])[0]
        if kind == "bool_col":
            i = _pick(draw, self.cols(schema, lambda t: _spec(t) == "bool"))
            return field(i)
        if kind == "like":
            i = _pick(draw, self.cols(schema, lambda t: _spec(t) == "string"))
            pattern = _pick(draw, ["a%", "%", "_", "%b%", "", "a", "é%", "a\\%%"])
            return self.call("like", [self.col(schema, i), (literal("string", pattern), spec_type("string", False))])[0]
        if kind == "starts_with":
            i = _pick(draw, self.cols(schema, lambda t: _spec(t) == "string"))
            prefix = _pick(draw, ["a", "", "é", "A"])
            return self.call("starts_with", [self.col(schema, i), (literal("string", prefix), spec_type("string", False))])[0]
        if kind == "is_nan":
            i = _pick(draw, self.cols(schema, lambda t: _spec(t) in _FLOATS))
            return self.call("is_nan", [self.col(schema, i)])[0]
        raise _Skip(kind)

    def _predicate_or_true(self, schema: Schema, depth: int) -> Expression:
        try:
            return self._predicate(schema, depth)
        except _Skip:
            return _bool_literal(True)

    def value(self, schema: Schema, depth: int = 0, *, numeric: bool = False) -> tuple[Expression, Type]:
        """A scalar expression (no window function) and its type."""
        for _ in range(8):
            try:
                return self._value(schema, depth, numeric)
            except _Skip:
                continue
        raise _Skip("no value expression")

    def _value(self, schema: Schema, depth: int, numeric: bool) -> tuple[Expression, Type]:
        draw = self.draw
        nums = self.cols(schema, lambda t: _spec(t) in _INTS + _FLOATS or _spec(t).startswith("decimal"))
        strings = self.cols(schema, lambda t: _spec(t) == "string")
        options = [("arith", 4)] if nums else []
        if not numeric:
            options = [("col", 3), ("lit", 1)] + options
            if strings:
                options += [("string", 2)]
            if depth < 2:
                options += [("if_then", 1), ("coalesce", 1)]
        if nums:
            options.append(("cast", 1))
            if strings:
                options.append(("char_length", 1))
        if not options:
            raise _Skip("nothing")
        kind = _weighted(draw, options)
        any_cols = self.cols(schema)
        if kind == "col":
            if not any_cols:
                raise _Skip("no column")
            return self.col(schema, _pick(draw, any_cols))
        if kind == "lit":
            spec = _pick(draw, [_spec(schema.types[i]) for i in any_cols] or ["i32"])
            return self.lit_for(spec_type(spec), null_percent=10)
        if kind == "arith":
            i = _pick(draw, nums)
            a = self.col(schema, i)
            spec = _spec(a[1])
            same = [j for j in nums if _class(schema.types[j]) == _class(a[1])]
            b = self.col(schema, _pick(draw, same)) if _maybe(draw, 40) else self.lit_for(a[1])
            ops = ["add", "subtract", "multiply"] + (["divide"] if spec in _FLOATS and not self.exact_floats else [])
            op = _pick(draw, ops)
            options = [("overflow", "SATURATE")] if spec in _INTS or spec.startswith("decimal") else []
            return self.call(op, [a, b], options=options)
        if kind == "cast":
            i = _pick(draw, nums)
            src = schema.types[i]
            spec = _spec(src)
            targets = ["fp64"] + (["i64", "string"] if spec in _INTS else [])
            target = spec_type(_pick(draw, targets), is_nullable(src))
            e = Expression()
            e.cast.type.CopyFrom(target)
            e.cast.input.CopyFrom(field(i))
            e.cast.failure_behavior = Expression.Cast.FAILURE_BEHAVIOR_THROW_EXCEPTION
            return e, target
        if kind == "string":
            i = _pick(draw, strings)
            a = self.col(schema, i)
            fn = _pick(draw, ["concat", "upper", "lower", "substring"])
            if fn == "concat":
                b = self.col(schema, _pick(draw, strings)) if _maybe(draw, 40) else self.lit_for(a[1])
                return self.call("concat", [a, b])
            if fn == "substring":
                start = (literal("i32", draw(st.integers(-2, 4))), spec_type("i32", False))
                length = (literal("i32", draw(st.integers(0, 3))), spec_type("i32", False))
                return self.call("substring", [a, start, length])
            return self.call(fn, [a])
        if kind == "char_length":
            return self.call("char_length", [self.col(schema, _pick(draw, strings))])
        if kind == "if_then":
            a = self.value(schema, depth + 1)
            b = self._same_type(schema, a[1])
            e = Expression()
            clause = e.if_then.ifs.add()
            getattr(clause, "if").CopyFrom(self.predicate(schema, depth + 1))
            clause.then.CopyFrom(a[0])
            getattr(e.if_then, "else").CopyFrom(b[0])
            return e, with_nullability(a[1], is_nullable(a[1]) or is_nullable(b[1]))
        if kind == "coalesce":
            nullable = self.cols(schema, is_nullable)
            if not nullable:
                raise _Skip("no nullable column")
            a = self.col(schema, _pick(draw, nullable))
            b = self.lit_for(a[1])
            return self.call("coalesce", [a, b])
        raise _Skip(kind)

    def _same_type(self, schema: Schema, t: Type) -> tuple[Expression, Type]:
        same = [j for j in self.cols(schema) if _class(schema.types[j]) == _class(t)]
        if same and _maybe(self.draw, 50):
            return self.col(schema, _pick(self.draw, same))
        return self.lit_for(with_nullability(t, False), null_percent=20)

    def sort_field(self, schema: Schema, i: int | None = None) -> SortField:
        s = SortField()
        if i is None and (not self.cols(schema) or _maybe(self.draw, 15)):
            s.expr.CopyFrom(self.value(schema, 1)[0])
        else:
            s.expr.CopyFrom(field(i if i is not None else _pick(self.draw, self.cols(schema))))
        s.direction = _pick(self.draw, [1, 2, 3, 4])
        return s

    def window(self, schema: Schema) -> tuple[Expression, Type]:
        draw = self.draw
        cols = self.cols(schema)
        if not cols:
            raise _Skip("no columns")
        fn = _pick(draw, ["rank", "count", "min", "max", "dense_rank", "row_number", "sum", "percent_rank",
                          "cume_dist", "count_star", "lead", "lag"])
        # ROWS frames and lead/lag depend on the order of the rows: only over an order on every
        # column (rows equal on every column are interchangeable, so the answer is one multiset).
        rows_frame = fn in ("count", "min", "max", "sum", "count_star") and _maybe(draw, 30)
        e = Expression()
        wf = e.window_function
        wf.phase = AggregationPhase.AGGREGATION_PHASE_INITIAL_TO_RESULT
        wf.invocation = AggregateFunction.AGGREGATION_INVOCATION_ALL
        n_keys = min(len(cols), _pick(draw, [0, 1, 2, 2]))  # two keys in half the windows
        for i in draw(st.lists(st.sampled_from(cols), min_size=n_keys, max_size=n_keys, unique=True)):
            wf.partitions.append(field(i))
        ranking = fn in ("rank", "dense_rank", "row_number", "percent_rank", "cume_dist", "lead", "lag")
        if fn in ("row_number", "lead", "lag") or rows_frame:  # ties would make it nondeterministic: order by every column
            for i in cols:
                wf.sorts.append(self.sort_field(schema, i))
            if len(cols) != len(schema):
                raise _Skip("a column that cannot be sorted")
        elif ranking or _maybe(draw, 40):
            for _ in range(draw(st.integers(1, 2))):
                wf.sorts.append(self.sort_field(schema))
        args: list[tuple[Expression, Type]] = []
        name = "count" if fn == "count_star" else fn
        if fn in ("count", "min", "max"):
            args = [self.col(schema, _pick(draw, cols))]
        if fn in ("lead", "lag"):
            args = [self.col(schema, _pick(draw, cols))]
            if _maybe(draw, 50):
                args.append((literal("i32", draw(st.integers(1, 2))), spec_type("i32", False)))
        elif fn == "sum":
            ok = self.cols(schema, self.summable)
            if not ok:
                raise _Skip("nothing to sum")
            args = [self.col(schema, _pick(draw, ok))]
        out = None
        if fn in ("lead", "lag"):
            out = with_nullability(args[0][1], True)
        elif ranking:
            out = make_type("fp64" if fn in ("percent_rank", "cume_dist") else "i64", True)
        out = self.fill_call(wf, name, args, out)
        if rows_frame:
            wf.bounds_type = Expression.WindowFunction.BOUNDS_TYPE_ROWS
            if _maybe(draw, 50):
                wf.lower_bound.preceding.offset = draw(st.integers(1, 2))
            else:
                wf.lower_bound.unbounded.SetInParent()
            wf.upper_bound.current_row.SetInParent()
        elif wf.sorts and not ranking:
            wf.bounds_type = Expression.WindowFunction.BOUNDS_TYPE_RANGE
            wf.lower_bound.unbounded.SetInParent()
            wf.upper_bound.current_row.SetInParent()
        elif not ranking:
            wf.bounds_type = Expression.WindowFunction.BOUNDS_TYPE_ROWS
            wf.lower_bound.unbounded.SetInParent()
            wf.upper_bound.unbounded.SetInParent()
        return e, out

    def measure(self, schema: Schema) -> AggregateFunction:
        draw = self.draw
        cols = self.cols(schema)
        fn = _pick(draw, ["count_star", "count", "min", "max", "sum", "avg", "bool"])
        if not cols:
            fn = "count_star"
        agg = AggregateFunction()
        agg.phase = AggregationPhase.AGGREGATION_PHASE_INITIAL_TO_RESULT
        agg.invocation = AggregateFunction.AGGREGATION_INVOCATION_ALL
        args: list[tuple[Expression, Type]] = []
        name = fn
        if fn == "count_star":
            name = "count"
        elif fn in ("count", "min", "max"):
            args = [self.col(schema, _pick(draw, cols))]
        elif fn in ("sum", "avg"):
            ok = self.cols(schema, self.summable)
            if not ok:
                raise _Skip("nothing to sum")
            args = [self.col(schema, _pick(draw, ok))]
        elif fn == "bool":
            ok = self.cols(schema, lambda t: _spec(t) == "bool")
            if not ok:
                raise _Skip("no boolean")
            name = _pick(draw, ["bool_and", "bool_or"])
            args = [self.col(schema, _pick(draw, ok))]
        if args and fn in ("count", "sum", "avg") and _maybe(draw, 20):
            agg.invocation = AggregateFunction.AGGREGATION_INVOCATION_DISTINCT
        self.fill_call(agg, name, args)
        return agg

    def fill_call(self, fn: AggregateFunction | Expression.WindowFunction, name: str,
                  args: list[tuple[Expression, Type]], out: Type | None = None) -> Type:
        """Make ``fn`` call ``name`` on ``args``, returning ``out``: when not given, the argument's type
        (nullable) for min and max, else the type derived from the arguments'."""
        if out is None and name in ("min", "max"):
            out = with_nullability(args[0][1], True)
        elif out is None:
            out = derive_output_type(name, [t for _, t in args])
            if out.WhichOneof("kind") is None:
                raise _Skip(f"no type for {name}")
        fn.function_reference = self.reg.anchor(name, _URN[name])
        for a, _ in args:
            fn.arguments.add().value.CopyFrom(a)
        fn.output_type.CopyFrom(out)
        return out

    # ------------------------------------------------------------------------------ relations
