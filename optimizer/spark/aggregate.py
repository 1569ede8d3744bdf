"""``AggregateRel`` -> Spark: one grouping set as ``groupBy``, several as ``groupingSets`` with the
set's ordinal; measure filters and computed measure arguments as columns below the aggregate."""

from __future__ import annotations

from sqlglot import exp
from substrait.proto import AggregateFunction, Expression, Type

from optimizer.errors import PlanError, UnsupportedError
from optimizer.expr_utils import field
from optimizer.spark.expressions import Scope
from optimizer.spark.rel_compiler import Relation, _c, _RelCompiler
from optimizer.spark.sql import Frame
from optimizer.spark.sql_columns import Col
from optimizer.spark.sql_columns import functions as F

#: Aggregates that skip NULL inputs: a measure filter can be applied by nulling the first argument.
_NULL_IGNORING = frozenset(
    {
        "count",
        "sum",
        "sum0",
        "avg",
        "min",
        "max",
        "product",
        "std_dev",
        "variance",
        "corr",
        "covar_pop",
        "covar_samp",
        "mode",
        "median",
        "bool_and",
        "bool_or",
        "approx_count_distinct",
        "string_agg",
    }
)


class _AggregateCompiler(_RelCompiler):
    """Aggregate relations."""

    def _filtered_measure(
        self, fn: AggregateFunction, filt: Expression, scope: Scope, mpath: str, extra: list, base: int
    ) -> AggregateFunction | Col:
        """``fn`` rewritten to read its first argument through ``when(filter, arg)`` (a new column);
        ``count(*)`` with a filter directly as the column ``count(when(filter, 1))``."""
        info = self.functions.get(fn.function_reference, f"{mpath}.measure.function_reference")
        fcol = self.expr(filt, scope, f"{mpath}.filter")
        new = AggregateFunction()
        new.CopyFrom(fn)
        values = [k for k, a in enumerate(fn.arguments) if a.WhichOneof("arg_type") == "value"]
        if not values:
            if info.name not in ("count", "count_star"):
                raise UnsupportedError(f"a measure filter on '{info.name}' is not supported", f"{mpath}.filter")
            return F.count(F.when(fcol, F.lit(1)))
        if info.name not in _NULL_IGNORING:
            raise UnsupportedError(f"a measure filter on '{info.name}' is not supported", f"{mpath}.filter")
        k = values[0]
        arg = fn.arguments[k].value
        argcol = self.expr(arg, scope, f"{mpath}.measure.arguments[{k}].value")
        extra.append((self.fresh(), F.when(fcol, argcol), self.exprs.type_of(arg, scope)))
        new.arguments[k].value.CopyFrom(field(base + len(extra) - 1))
        return new

    def _computed_arguments(
        self, fn: AggregateFunction, scope: Scope, mpath: str, extra: list, base: int
    ) -> AggregateFunction:
        """``fn`` reading each computed argument (neither a field nor a literal) from a new column below
        the aggregate. A measure may use its argument more than once (a sum's overflow check does), and a
        column is computed, and analysed by Spark, once. Only where the argument's type is known, so that
        the function sees the same type through the new column."""
        new = None
        for k, a in enumerate(fn.arguments):
            if a.WhichOneof("arg_type") != "value" or a.value.WhichOneof("rex_type") in ("literal", "selection"):
                continue
            t = self.exprs.type_of(a.value, scope)
            if t is None or t.WhichOneof("kind") is None:
                continue
            if new is None:
                new = AggregateFunction()
                new.CopyFrom(fn)
            col = self.expr(a.value, scope, f"{mpath}.measure.arguments[{k}].value")
            extra.append((self.fresh(), col, t))
            new.arguments[k].value.CopyFrom(field(base + len(extra) - 1))
        return new if new is not None else fn

    def _rel_aggregate(self, body, bpath: str, outer: Scope | None) -> Relation:
        inp = self.rel(body.input, f"{bpath}.input", outer)
        scope = self.scope(inp, outer)
        keys = [
            (self.fresh(), self.expr(e, scope, f"{bpath}.grouping_expressions[{i}]"))
            for i, e in enumerate(body.grouping_expressions)
        ]
        # A key that is an input column keeps that column's name: no projection before grouping.
        inputs = set(inp.columns)
        used: set[str] = set()
        for i, (_n, c) in enumerate(keys):
            same = c.e.name if c._alias is None and isinstance(c.e, exp.Column) else None
            if same in inputs and same not in used:
                keys[i] = (same, c)
                used.add(same)
        key_names = [n for n, _ in keys]
        extra: list[tuple[str, Col, Type | None]] = []
        fns = []
        for j, m in enumerate(body.measures):
            mpath = f"{bpath}.measures[{j}]"
            if not m.HasField("measure"):
                raise PlanError("measure has no aggregate function", mpath)
            fn = m.measure
            if m.HasField("filter"):
                fn = self._filtered_measure(fn, m.filter, scope, mpath, extra, len(inp.columns))
            if inp.types is not None and not isinstance(fn, Col):
                fn = self._computed_arguments(fn, scope, mpath, extra, len(inp.columns))
            fns.append(fn)
        df1 = inp.df
        computed = [(n, c) for n, c in keys if n not in used]
        df1_columns = [*inp.columns, *[n for n, _ in computed], *[n for n, _, _ in extra]]
        if computed or extra:
            df1 = inp.df.select(
                *[_c(c) for c in inp.columns],
                *[c.alias(n) for n, c in computed],
                *[c.alias(n) for n, c, _ in extra],
            )
        types = None
        if inp.types is not None and all(t is not None for _, _, t in extra):
            types = list(inp.types) + [t for _, _, t in extra]
        mscope = Scope(df1, list(inp.columns) + [n for n, _, _ in extra], types, outer)
        measures = [
            (self.fresh(), fn if isinstance(fn, Col) else self.exprs.aggregate(fn, mscope, f"{bpath}.measures[{j}].measure"))
            for j, fn in enumerate(fns)
        ]
        sets: list[list[int]] = []
        for g, grouping in enumerate(body.groupings):
            refs: list[int] = []
            for r in grouping.expression_references:
                if not 0 <= r < len(keys):
                    raise PlanError(
                        f"grouping expression {r} is out of range ({len(keys)} grouping expressions)",
                        f"{bpath}.groupings[{g}].expression_references",
                    )
                if r not in refs:
                    refs.append(r)
            sets.append(refs)
        if not sets:
            sets = [[]]
        measure_names = [n for n, _ in measures]
        if len(sets) == 1:
            group = [key_names[i] for i in sets[0]]
            if measures and not group:
                # select() rather than groupBy().agg(): groupBy analyses the Frame at once, which
                # fails inside a correlated subquery (its outer references resolve only later).
                out = df1.select(*[c.alias(n) for n, c in measures])
            elif measures:
                out = df1.groupBy(*[_c(n) for n in group]).agg(*[c.alias(n) for n, c in measures])
            elif group:
                out = df1.select(*[_c(n) for n in group]).distinct()
            else:
                raise PlanError("aggregate has neither grouping expressions nor measures", bpath)
            cols, names = [], []
            for i, n in enumerate(key_names):
                if i in sets[0]:
                    cols.append(_c(n))
                    names.append(n)
                else:  # not grouped by: NULL (an invalid plan, but well defined)
                    new = self.fresh()
                    cols.append(F.lit(None).alias(new))
                    names.append(new)
            if names != group:  # groupBy().agg() already gives the group columns, then the measures
                out = out.select(*cols, *[_c(n) for n in measure_names])
            return Relation(out, names + measure_names)
        return self._grouping_sets(df1, df1_columns, key_names, sets, measures, bpath, outer)

    def _grouping_sets(self, df1: Frame, df1_columns: list[str], key_names, sets, measures, bpath: str,
                       outer: Scope | None) -> Relation:
        distinct: dict[frozenset, list[int]] = {}
        for ordinal, s in enumerate(sets):
            distinct.setdefault(frozenset(s), []).append(ordinal)
        if frozenset() in distinct and outer is None:
            # The grand total below reads the input twice more: written once, Spark parses and analyses
            # it once (a ROLLUP's input is most of TPC-DS Q5's, Q14's, Q77's, Q80's text).
            df1 = Frame.written_once(self.ctx, df1, df1_columns)
        # Spark's grouping columns are the sets' columns in order of first appearance, and
        # grouping_id() must name them in that order (else GROUPING_ID_COLUMN_MISMATCH)
        used = list(dict.fromkeys(i for fs in distinct for i in sorted(fs)))
        used_names = [key_names[i] for i in used]
        gid, idx = self.fresh(), self.fresh()
        grouped = df1.groupingSets(
            [[_c(key_names[i]) for i in sorted(fs)] for fs in distinct], *[_c(n) for n in used_names]
        ).agg(*[c.alias(n) for n, c in measures], F.grouping_id(*[_c(n) for n in used_names]).alias(gid))

        def mask(fs: frozenset) -> int:
            return sum(1 << (len(used) - 1 - k) for k, i in enumerate(used) if i not in fs)

        case = None
        for fs, ordinals in distinct.items():
            cond = _c(gid) == F.lit(mask(fs))
            case = F.when(cond, F.lit(ordinals[0])) if case is None else case.when(cond, F.lit(ordinals[0]))
        cols, names = [], []
        for n in key_names:
            if n in used_names:
                cols.append(_c(n))
                names.append(n)
            else:
                new = self.fresh()
                cols.append(F.lit(None).alias(new))
                names.append(new)
        measure_names = [n for n, _ in measures]
        out = grouped.select(*cols, *[_c(n) for n in measure_names], case.cast("int").alias(idx))
        if frozenset() in distinct:
            # The empty set () makes one row even of no input rows (SQL's grand total: count 0, sum NULL),
            # but Spark's GROUPING SETS are an Expand under a grouped aggregate, which makes none: that
            # row is the measures over no row (a global aggregate of an input filtered to nothing, which
            # Spark computes without reading it), kept only where the input has no row.
            nothing = df1.filter(F.lit(False)).select(*[c.alias(n) for n, c in measures])
            total = nothing.filter(~df1.limit(1).exists()).select(
                *[F.lit(None).alias(n) for n in names], *[_c(n) for n in measure_names],
                F.lit(distinct[frozenset()][0]).cast("int").alias(idx))
            out = out.union(total)
        base = out
        for ordinals in distinct.values():
            for ordinal in ordinals[1:]:  # a repeated grouping set yields its rows again
                again = base.filter(_c(idx) == F.lit(ordinals[0]))
                out = out.union(again.select(*[_c(n) for n in names + measure_names], F.lit(ordinal).cast("int").alias(idx)))
        return Relation(out, names + measure_names + [idx])
