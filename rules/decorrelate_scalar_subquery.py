"""Rule ``decorrelate_scalar_subquery`` (phase ``normalise``): a correlated scalar subquery compared in a
filter becomes a join with the subquery's aggregate, grouped by the correlation keys.

**Matches** a ``FilterRel`` (no emit) over ``X`` one of whose conjuncts compares (``<``, ``<=``, ``>``,
``>=``, ``=``, ``<>``) an expression with a scalar subquery (possibly under casts) of the shape Isthmus
writes for TPC-H Q2, Q17 and Q20::

    Project* (strict in the measures)
      Aggregate (no grouping keys; sum / avg / min / max / any_value only)
        (Project | Filter)*   one or more filters hold equal(inner, outer) conjuncts
          B                   (reads nothing of the enclosing query)

where ``outer`` reads only columns of ``X`` (outer references one level out) and ``inner`` only
columns of the subquery's own input, and no other part of the subquery reads the enclosing query.

**Produces** ``Project(emit = X's columns)`` over ``Filter(other conjuncts AND cmp(a, v))`` over
``JoinRel(INNER, X, S', outer_1 = k_1 AND ...)``, where ``S'`` is the subquery with the correlation
conjuncts removed, the ``inner`` expressions carried up as extra columns and the aggregate grouped by
them (its output: the keys ``k_i``, then the subquery's value ``v``).

**Why it is equivalent**: for a row ``x`` of ``X`` the subquery aggregates the rows of ``B`` (after the
other filters) whose ``inner`` values equal ``outer(x)``; ``S'`` computes the same aggregate once per
distinct ``inner`` value, so ``x`` meets at most one row of ``S'``, with the same value. When no row of
``B`` matches (or ``outer(x)`` is NULL: ``equal`` is never true on NULL) the subquery gives NULL (the
aggregates allowed are NULL on no rows, and the projections above them are NULL when a measure is),
so the comparison is NULL and the filter drops ``x``; the inner join drops ``x`` too, having no
matching group. This is Spark's own ``RewriteCorrelatedScalarSubquery`` (with an inner join, as
the filter rejects the NULL); done in the plan, the aggregate becomes an input that
``reduce_aggregate_input`` and ``join_order`` can work on, as they do on DataFusion's decorrelated plans.
"""

from __future__ import annotations

from dataclasses import dataclass

import networkx as nx
from substrait.proto import Expression, JoinRel, Rel

from optimizer.dag import strip_inputs
from optimizer.engine import NewRel, Replacement, Rule, RuleContext, new_subtree
from optimizer.expr_utils import (
    FunctionRegistrar,
    call_args,
    conjuncts,
    escapes_scope,
    field,
    field_index,
    function_name,
    has_subquery,
    is_deterministic,
    make_and,
    outer_to_own,
    reads_scopes,
    reads_shared_relation,
    shift_fields,
)
from optimizer.load.functions import FunctionTable
from optimizer.relations import conjunct_to_join, emit_of
from optimizer.schema import tree_schema
from optimizer.schema.record import Schema


def decorrelate_scalar_subquery(g: nx.DiGraph, node: int, ctx: RuleContext) -> Replacement | None:
    """The filter with its first decorrelatable scalar subquery turned into a join (see the module doc).

    Before (left) and after (right): ``q < (SELECT avg(l_q) FROM li WHERE l_k = p)``, for each part
    ``p``, becomes a join with the average per ``l_k``:

    >>> from testing.builder import Builder, aggregate, before_after, filter_, outer, read, ref, scalar
    >>> b, li, part = Builder(), read("li", [("l_k", "i64"), ("l_q", "fp64")]), read("part", [("p", "i64"), ("q", "fp64")])
    >>> avg = aggregate(filter_(li, b.call("equal", ref(0), outer(0))), [], b.agg("avg", ref(1), out="fp64"))
    >>> print(before_after(b.plan(filter_(part, b.call("lt", ref(1), scalar(avg))), ["p", "q"]), RULE))
    Filter((q#1 < subquery.scalar(...))) | Project(emit=[0, 1])
      Read(part)                         |   Filter((q#1 < measure_0#3))
                                         |     Join(inner, (l_k#2 = p#0))
                                         |       Read(part)
                                         |       Aggregate(groups=[(l_k#0)], measures=[avg(l_q#1)])
                                         |         Read(li)
    """
    def attempt(c: Expression, x: int, n_x: int) -> tuple[NewRel, Expression] | None:
        found = _compared_subquery(c, ctx.functions)
        if found is None:
            return None
        compare, path = found
        subquery = _follow(compare, path)
        split = decorrelate(subquery.subquery.scalar.input, ctx.functions, ctx.registrar, ctx.schema(x))
        if split is None:
            return None
        equalities = []
        for k, (equality, inner_position, outer_expr) in enumerate(split.correlations):
            eq = Expression()
            eq.CopyFrom(equality)
            eq.scalar_function.arguments[inner_position].value.CopyFrom(field(n_x + k))
            eq.scalar_function.arguments[1 - inner_position].value.CopyFrom(outer_expr)
            equalities.append(eq)
        joined = Rel()
        joined.join.type = JoinRel.JOIN_TYPE_INNER
        joined.join.expression.CopyFrom(make_and(equalities, ctx.registrar))
        new_compare = Expression()
        new_compare.CopyFrom(compare)
        _follow(new_compare, path).CopyFrom(field(n_x + len(split.correlations)))
        return NewRel(joined, [x, split.grouped]), new_compare

    return conjunct_to_join(g, node, ctx, attempt)


RULE = Rule(name="decorrelate_scalar_subquery", phase="normalise", kinds=frozenset({"filter"}),
            apply=decorrelate_scalar_subquery,
            description="a correlated scalar aggregate subquery compared in a filter -> a join with the "
                        "aggregate grouped by the correlation keys")


#: Comparisons that are NULL when an argument is (the filter then drops the row).
_COMPARISONS = frozenset({"lt", "lte", "gt", "gte", "equal", "not_equal"})
#: Aggregate functions that give NULL on no rows (``count`` gives 0: not decorrelated this way).
_NULL_ON_NO_ROWS = frozenset({"sum", "avg", "min", "max", "any_value"})
#: Scalar functions that are NULL when an argument is.
_STRICT = frozenset({"add", "subtract", "multiply", "divide", "negate"})


@dataclass
class Decorrelated:
    """A scalar subquery split into its uncorrelated, grouped form and the correlation equalities.

    ``grouped`` outputs the keys (one column per correlation, in order), then the subquery's value.
    ``correlations``: per key, the original ``equal`` conjunct, the position of its inner argument and
    its outer argument rewritten to read the enclosing relation's input directly.
    """

    grouped: NewRel
    correlations: list[tuple[Expression, int, Expression]]


def decorrelate(subquery: Rel, functions: FunctionTable, registrar: FunctionRegistrar,
                outer: Schema) -> Decorrelated | None:
    """The grouped form of a correlated scalar aggregate subquery (see the module doc), or None.
    ``outer``: the schema of the enclosing relation's input (what the outer references read)."""
    above: list[Rel] = []
    r = subquery
    while r.WhichOneof("rel_type") == "project":
        above.append(r)
        r = r.project.input
    if r.WhichOneof("rel_type") != "aggregate":
        return None
    agg = r.aggregate
    if (emit_of(r) is not None or len(agg.grouping_expressions) or len(agg.groupings) > 1
            or any(len(gr.expression_references) for gr in agg.groupings)
            or not agg.measures):
        return None
    if any(m.measure.function_reference not in functions
           or functions.get(m.measure.function_reference).name not in _NULL_ON_NO_ROWS for m in agg.measures):
        return None
    below: list[Rel] = []
    r = agg.input
    while r.WhichOneof("rel_type") in ("project", "filter"):
        below.append(r)
        r = getattr(r, r.WhichOneof("rel_type")).input
    base = r
    if escapes_scope(base) or reads_shared_relation(base):
        return None

    # Bottom-up: take the correlation conjuncts out of the filters and carry their inner sides up as
    # extra columns (``keys``: expressions over the current relation's output).
    keys: list[Expression] = []
    correlations: list[tuple[Expression, int, Expression]] = []
    current: NewRel = new_subtree(base)
    for rel in reversed(below):
        kind = rel.WhichOneof("rel_type")
        if kind == "filter":
            if emit_of(rel) is not None:
                return None
            rest = []
            for c in conjuncts(rel.filter.condition, functions):
                corr = _correlation(c, functions)
                if corr is None:
                    rest.append(c)
                    continue
                correlations.append((c, corr[0], corr[2]))
                keys.append(corr[1])
            if any(escapes_scope(c) for c in rest):
                return None
            if rest:
                new = Rel()
                new.filter.condition.CopyFrom(make_and(rest, registrar))
                current = NewRel(new, [current])
        else:
            body = rel.project
            new = strip_inputs(rel)
            if escapes_scope(new):
                return None
            n_in = len(tree_schema(body.input, functions, outer_schemas=[outer]))
            start = len(body.expressions)
            for k in keys:
                new.project.expressions.add().CopyFrom(k)
            mapping = emit_of(rel)
            old_width = len(mapping) if mapping is not None else n_in + start
            if mapping is not None:
                new.project.common.emit.output_mapping.extend(n_in + start + j for j in range(len(keys)))
            keys = [field(old_width + j) for j in range(len(keys))]
            current = NewRel(new, [current])
    if not correlations or any(not is_deterministic(c, functions) or has_subquery(c) for c, _, _ in correlations):
        return None

    # The aggregate, grouped by the keys: its output is the keys, then the measures.
    grouped = strip_inputs(Rel(aggregate=agg))
    grouped.aggregate.ClearField("groupings")
    grouped.aggregate.ClearField("grouping_expressions")
    grouped.aggregate.grouping_expressions.extend(keys)
    grouped.aggregate.groupings.add().expression_references.extend(range(len(keys)))
    if escapes_scope(grouped):
        return None
    current = NewRel(grouped, [current])
    n_keys = len(keys)
    strict = [True] * len(agg.measures)  # which columns are NULL whenever a measure is
    width_in = len(agg.measures)
    for rel in reversed(above):
        body = rel.project
        if escapes_scope(strip_inputs(rel)):
            return None
        columns = strict + [_is_strict(e, strict, functions) for e in body.expressions]
        mapping = emit_of(rel)
        selected = mapping if mapping is not None else list(range(width_in + len(body.expressions)))
        strict = [columns[m] for m in selected]
        new = strip_inputs(rel)
        new.project.ClearField("expressions")
        for e in body.expressions:
            new.project.expressions.add().CopyFrom(shift_fields(e, n_keys))
        new.project.common.emit.ClearField("output_mapping")
        new.project.common.emit.output_mapping.extend(list(range(n_keys)) + [m + n_keys for m in selected])
        width_in = len(selected)
        current = NewRel(new, [current])
    if width_in != 1 or not strict[0]:
        return None
    return Decorrelated(current, correlations)


def _compared_subquery(c: Expression, functions: FunctionTable) -> tuple[Expression, list[int]] | None:
    """``(c, path)`` if ``c`` compares a scalar subquery: ``path`` the argument positions down to it
    (the first, through casts)."""
    if function_name(c, functions) not in _COMPARISONS or not is_deterministic(c, functions):
        return None
    args = call_args(c)
    if args is None or len(args) != 2:
        return None
    for position, arg in enumerate(args):
        path = [position]
        while arg.WhichOneof("rex_type") == "cast":
            arg = arg.cast.input
            path.append(-1)
        if arg.WhichOneof("rex_type") == "subquery" and arg.subquery.WhichOneof("subquery_type") == "scalar":
            if has_subquery(args[1 - position]):
                return None
            return c, path
    return None


def _follow(e: Expression, path: list[int]) -> Expression:
    """The expression ``path`` leads to: argument positions of calls, -1 for a cast's input."""
    for step in path:
        e = e.cast.input if step == -1 else e.scalar_function.arguments[step].value
    return e


def _correlation(c: Expression, functions: FunctionTable) -> tuple[int, Expression, Expression] | None:
    """``(inner_position, inner, outer)`` if ``c`` is ``equal(inner, outer)`` with ``inner`` reading
    only the subquery's own input and ``outer`` only the enclosing query's (one level out); ``outer``
    is returned reading that input directly."""
    if function_name(c, functions) != "equal":
        return None
    args = call_args(c)
    if args is None or len(args) != 2 or has_subquery(c):
        return None
    for inner_position in (0, 1):
        inner, outer_side = args[inner_position], args[1 - inner_position]
        if reads_scopes(inner) == {"own"} and reads_scopes(outer_side) == {"outer"}:
            return inner_position, inner, outer_to_own(outer_side)
    return None


def _is_strict(e: Expression, strict: list[bool], functions: FunctionTable) -> bool:
    """Is ``e`` NULL whenever a column marked in ``strict`` is (a column of it, under strict calls)?"""
    kind = e.WhichOneof("rex_type")
    if kind == "selection":
        i = field_index(e)
        return i is not None and i < len(strict) and strict[i]
    if kind == "cast":
        return _is_strict(e.cast.input, strict, functions)
    if kind == "scalar_function" and function_name(e, functions) in _STRICT:
        return any(_is_strict(a, strict, functions) for a in call_args(e) or [])
    return False
