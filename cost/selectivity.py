"""Predicate selectivity: the fraction of rows a filter or join condition keeps, and the column
estimates it leaves (bounds of compared columns narrowed, values of the others thinned out).

:class:`PredicateSelectivity` is the predicate half of :class:`cost.cardinality.CardinalityEstimator`;
the functions below it are the distribution math it uses: ranges over histograms, normal
approximations and quantiles, equality and LIKE fractions. Formulas and defaults:
``docs/cost-model.md``.

>>> like_fragment_selectivity("green") == DEFAULT_LIKE_SEL   # a 5-character fragment
True
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from optimizer.cost.estimates import (
    COMPARISONS,
    DEFAULT_BETWEEN_SEL,
    DEFAULT_BOOL_SEL,
    DEFAULT_EQ_SEL,
    DEFAULT_LIKE_SEL,
    DEFAULT_NULL_SEL,
    DEFAULT_RANGE_SEL,
    DEFAULT_SEL,
    FLIPPED_COMPARISON,
    LIKE_CHAR_FACTOR,
    NOT_LITERAL,
    ColumnEstimate,
    RelEstimate,
    as_number,
    cap_column,
    column_of,
    evolve,
    literal_of,
    literal_value,
    scale_column,
)
from optimizer.cost.metadata import MetadataQuery
from optimizer.cost.statistics import Histogram, to_numeric
from substrait.proto import Expression

from optimizer.errors import PlanError
from optimizer.expr_utils import call_args, conjuncts, disjuncts, remap_fields


class PredicateSelectivity:
    """Selectivity of predicates over a relation estimate.

    The class that mixes it in provides ``metadata``, the plan's
    :class:`~cost.metadata.MetadataQuery` (its function table, the numbers of column origins and the
    predicate fingerprints), and the estimates of expressions, :meth:`expression_column` and
    :meth:`scalar_value`.
    """

    metadata: MetadataQuery

    def expression_column(self, e: Expression, child: RelEstimate) -> ColumnEstimate | None:
        raise NotImplementedError

    def scalar_value(self, e: Expression) -> float | None:
        raise NotImplementedError

    def _fname(self, e: Expression) -> str | None:
        if e.WhichOneof("rex_type") != "scalar_function":
            return None
        anchor = e.scalar_function.function_reference
        functions = self.metadata.functions
        if anchor not in functions:
            return None
        return functions.get(anchor).name

    def apply_filter(self, condition: Expression, est: RelEstimate, record: list[float] | None = None) -> RelEstimate:
        """``est`` filtered by ``condition``: rows times its selectivity, columns updated (bounds of
        compared columns narrowed, NDVs of the others thinned out). ``record``: each conjunct's
        selectivity, in order, is appended to it (see :meth:`conjunct_selectivities`)."""
        sel, cols, applied, exprs = self._conjunction(conjuncts(condition, self.metadata.functions), est, record)
        rows = est.rows * sel
        if est.rows >= 1:  # floor at one row: statistics may be stale, and 0 would zero everything above
            rows = max(rows, 1.0)
        cols = [cap_column(c, rows) for c in cols]
        return evolve(est, rows=rows, columns=cols, applied=applied, exprs=exprs)

    def selectivity(self, condition: Expression, est: RelEstimate) -> float:
        """The fraction of ``est``'s rows for which ``condition`` holds."""
        return self._conjunction(conjuncts(condition, self.metadata.functions), est)[0]

    def _fingerprint(self, e: Expression, cols: Sequence[ColumnEstimate | None]) -> bytes | None:
        from optimizer.expr_utils import resolved_fields

        refs = resolved_fields(e)
        if not refs:  # no column read, or one not by a plain reference
            return None
        mapping: dict[int, int] = {}
        ids = self.metadata.origin_ids
        for r in refs:
            c = cols[r] if 0 <= r < len(cols) else None
            if c is None or c.origin is None:
                return None
            mapping[r] = ids.setdefault(c.origin, len(ids) + 1_000_000)
        # The same conjunct over the same columns is fingerprinted again at every estimate above it.
        memo = self.metadata.fingerprints()
        key = (e.SerializeToString(deterministic=True), tuple(sorted(mapping.items())))
        if key not in memo:
            memo[key] = self._fold_print(remap_fields(e, mapping))
        return memo[key]

    def _fold_print(self, e: Expression) -> bytes | None:
        from optimizer.expr_utils import fold

        try:
            # AND/OR nesting does not make two predicates different (simplify_predicates flattens a
            # FilterRel's copy of what DataFusion also wrote, nested, into the ReadRel's filter).
            return fold(e, self.metadata.functions).SerializeToString(deterministic=True)
        except PlanError:  # an undeclared function anchor: no fingerprint
            return None

    def conjunct_selectivities(self, parts: Sequence[Expression], est: RelEstimate) -> list[float]:
        """Each conjunct's selectivity on the rows the ones before it let through, in this order (a
        conjunct the estimate has already applied: 1)."""
        record: list[float] = []
        self._conjunction(parts, est, record)
        return record

    def _conjunction(self, parts: Iterable[Expression], est: RelEstimate, record: list[float] | None = None,
                     narrowed: set[int] | None = None) -> tuple[float, list[ColumnEstimate | None], frozenset, dict]:
        """The selectivity of the conjunction of ``parts`` on ``est``, the columns after it, the
        fingerprints of the conjuncts applied and the computed columns' estimates. ``record``: each
        conjunct's selectivity is appended to it; ``narrowed``: the columns the conjuncts narrow are
        added to it. A conjunct another one implies (:func:`implied_conjuncts`) selects nothing more:
        its selectivity is 1."""
        parts = list(parts)
        implied = implied_conjuncts(parts, self.metadata.functions)
        cols = list(est.columns)
        n = len(cols)
        rows = est.rows
        applied = set(est.applied)
        exprs = dict(est.exprs)
        if narrowed is None:
            narrowed = set()
        total = 1.0
        # The columns a conjunct rescales: scale_column leaves one of unknown NDV as it is, so a wide
        # relation with few known NDVs costs each conjunct those few, not every column.
        known = {i for i, col in enumerate(cols) if col is not None and col.ndv is not None}
        for j, c in enumerate(parts):
            fp = self._fingerprint(c, cols)
            if j in implied or (fp is not None and fp in applied):
                if record is not None:
                    record.append(1.0)
                continue
            sel, updates = self._predicate(c, cols, rows)
            sel = min(max(sel, 0.0), 1.0)
            if record is not None:
                record.append(sel)
            for k in [k for k in updates if isinstance(k, bytes)]:
                exprs[k] = updates.pop(k)
            new_rows = rows * sel
            replaced: dict[int, ColumnEstimate | None] = {}  # this conjunct's changes: the columns before it
            for i in known:
                if i not in updates:
                    col = cols[i]
                    scaled = scale_column(col, rows, sel, new_rows)
                    if scaled is not col:
                        replaced[i] = col
                        cols[i] = scaled
            for i, upd in updates.items():
                if 0 <= i < n:
                    replaced[i] = cols[i]
                    cols[i] = upd
                    if upd is not None and upd.ndv is not None:
                        known.add(i)
                    else:
                        known.discard(i)
            narrowed.update(updates)
            before: list[ColumnEstimate | None] | None = None
            for i, upd in updates.items():
                old = replaced.get(i) if 0 <= i < n else None
                if old is not None and old.ndv and upd is not None and upd.ndv is not None and upd.ndv < old.ndv:
                    if before is None:
                        before = list(cols)
                        for j, col in replaced.items():
                            before[j] = col
                    select_values(cols, i, upd.ndv / old.ndv, before)
            rows = new_rows
            total *= sel
            if fp is not None:
                applied.add(fp)
        return total, cols, frozenset(applied), exprs

    def _predicate(self, e: Expression, cols: list[ColumnEstimate | None], rows: float
                   ) -> tuple[float, dict[int, ColumnEstimate]]:
        """Selectivity of one predicate and the columns it narrows."""
        rex = e.WhichOneof("rex_type")
        if rex == "literal":
            v = literal_value(e.literal)
            return (1.0 if v == 1.0 else 0.0), {}
        if rex == "singular_or_list":
            return self._in_list(e.singular_or_list, cols)
        i = column_of(e)
        if i is not None:  # a boolean column
            col = cols[i] if 0 <= i < len(cols) else None
            if col is not None and col.numeric and col.min == col.max:
                return (1.0 if col.min == 1.0 else 0.0), {}
            return DEFAULT_BOOL_SEL, {}
        if rex == "subquery":
            return DEFAULT_BOOL_SEL, {}
        if rex != "scalar_function":
            return DEFAULT_SEL, {}
        name = self._fname(e)
        args = call_args(e)
        if args is None:
            return DEFAULT_SEL, {}
        if name == "and":
            est = RelEstimate(rows, 0.0, cols)
            narrowed: set[int] = set()
            sel, new_cols, _, _ = self._conjunction(args, est, narrowed=narrowed)
            return sel, {k: new_cols[k] for k in narrowed if 0 <= k < len(new_cols) and new_cols[k] is not None}
        if name == "or":
            parts = disjuncts(e, self.metadata.functions)
            miss = 1.0
            branches: list[dict] = []
            for p in parts:
                s, upd = self._predicate(p, cols, rows)
                miss *= 1.0 - min(max(s, 0.0), 1.0)
                branches.append({k: v for k, v in upd.items() if isinstance(k, int)})
            # a column every branch narrows keeps the union of the branches' values
            common = set.intersection(*(set(b) for b in branches)) if branches else set()
            updates: dict = {}
            for i in common:
                old = cols[i] if 0 <= i < len(cols) else None
                if old is None:
                    continue
                parts_i = [b[i] for b in branches]
                ndvs = [c.ndv for c in parts_i]
                ndv = old.ndv
                if all(n is not None for n in ndvs):
                    ndv = min(old.ndv, sum(ndvs)) if old.ndv is not None else sum(ndvs)
                lo, hi = parts_i[0].min, parts_i[0].max
                for c in parts_i[1:]:
                    lo = pick_bound(min, lo, c.min) if lo is not None and c.min is not None else None
                    hi = pick_bound(max, hi, c.max) if hi is not None and c.max is not None else None
                if lo is None:
                    lo = old.min
                if hi is None:
                    hi = old.max
                updates[i] = evolve(old, ndv=ndv, min=lo, max=hi, null_fraction=0.0)
            return 1.0 - miss, updates
        if name == "not" and len(args) == 1:
            s, _ = self._predicate(args[0], cols, rows)
            return 1.0 - s, {}
        if name in ("is_null", "is_not_null") and len(args) == 1:
            return self._is_null(name == "is_null", args[0], cols)
        if name in ("is_true", "is_not_false"):
            return self._predicate(args[0], cols, rows) if args else (DEFAULT_SEL, {})
        if name in ("is_false", "is_not_true"):
            s, _ = self._predicate(args[0], cols, rows) if args else (DEFAULT_SEL, {})
            return 1.0 - s, {}
        if name in COMPARISONS and len(args) == 2:
            return self._comparison(name, args[0], args[1], cols, rows)
        if name == "between" and len(args) >= 3:
            return self._between(args[0], args[1], args[2], cols)
        if name in ("like", "ilike") and len(args) >= 2:
            return self._like(args[0], args[1], cols, name == "ilike")
        if name in ("starts_with", "ends_with", "contains") and len(args) == 2:
            v = literal_of(args[1])
            if isinstance(v, str):
                pattern = {"starts_with": f"{v}%", "ends_with": f"%{v}", "contains": f"%{v}%"}[name]
                return self._like_pattern(args[0], pattern, cols)
            return DEFAULT_LIKE_SEL, {}
        return DEFAULT_SEL, {}

    def _is_null(self, is_null: bool, arg: Expression, cols) -> tuple[float, dict[int, ColumnEstimate]]:
        i = column_of(arg)
        col = cols[i] if i is not None and 0 <= i < len(cols) else None
        nf = col.null_fraction if col is not None else None
        if nf is None:
            nf = DEFAULT_NULL_SEL
        if is_null:
            updates = {i: evolve(col, ndv=0.0, null_fraction=1.0, min=None, max=None, histogram=None)} if col else {}
            return nf, updates
        updates = {i: evolve(col, null_fraction=0.0)} if col else {}
        return 1.0 - nf, updates

    def _in_list(self, sol, cols) -> tuple[float, dict[int, ColumnEstimate]]:
        i = column_of(sol.value)
        values = [literal_of(o) for o in sol.options]
        col = cols[i] if i is not None and 0 <= i < len(cols) else None
        if any(v is NOT_LITERAL for v in values):
            return min(DEFAULT_EQ_SEL * len(values), 0.5), {}
        distinct = list(dict.fromkeys(v for v in values if v is not None))
        if col is None:
            fp = self._fingerprint(sol.value, cols) if i is None else None
            facts = {fp: _value_set(distinct)} if fp is not None else {}
            return min(DEFAULT_EQ_SEL * len(distinct), 0.5), facts
        total = 0.0
        inside = []
        for v in distinct:
            s = self._eq_fraction(col, v)
            if s > 0:
                inside.append(v)
            total += s
        nonnull = 1.0 - (col.null_fraction or 0.0)
        sel = min(total, 1.0) * nonnull
        update = evolve(col, ndv=min(col.ndv, float(len(inside))) if col.ndv is not None else float(len(inside)),
                         null_fraction=0.0, histogram=None)
        if inside and len({type(v) for v in inside}) == 1:
            update.min, update.max = min(inside), max(inside)
        return sel, {i: update}

    def _eq_fraction(self, col: ColumnEstimate, v: Any) -> float:
        """Fraction of the non-null rows of ``col`` equal to ``v``."""
        if v is None:
            return 0.0
        if col.ndv is not None and col.ndv <= 0:
            return 0.0
        if col.min is not None and col.max is not None:
            try:
                if type(v) is not type(col.min) and not (isinstance(v, float) and isinstance(col.min, float | int)):
                    raise TypeError
                if v < col.min or v > col.max:
                    return 0.0
            except TypeError:
                pass
        if col.normal is not None and isinstance(v, float) and col.numeric and col.histogram is None:
            total = _normal_mass(col.normal, *_domain(col))
            if total > 0:
                width = 1.0 if col.integral else (float(col.max) - float(col.min)) / max(col.ndv or 1.0, 1.0)
                return min(_normal_mass(col.normal, v - width / 2, v + width / 2) / total, 1.0)
        if col.histogram is not None and isinstance(v, float) and col.numeric:
            dens = _histogram_point(col.histogram, v)
            total = _histogram_mass(col.histogram, *_domain(col), col.integral)
            if total > 0 and dens is not None:
                return min(dens / total, 1.0)
        if col.ndv is not None:
            return 1.0 / max(col.ndv, 1.0)
        return DEFAULT_EQ_SEL

    def _comparison(self, name: str, a: Expression, b: Expression, cols, rows
                    ) -> tuple[float, dict[int, ColumnEstimate]]:
        ia, ib = column_of(a), column_of(b)
        va, vb = literal_of(a), literal_of(b)
        if ia is None and va is not NOT_LITERAL and (ib is not None or vb is NOT_LITERAL):
            a, b, ia, ib, va, vb = b, a, ib, ia, vb, va
            name = FLIPPED_COMPARISON[name]
        if ia is not None and vb is NOT_LITERAL:
            sv = self.scalar_value(b)
            if sv is not None:
                vb = sv
        if ia is None and ib is not None and va is NOT_LITERAL:
            sv = self.scalar_value(a)
            if sv is not None:
                a, b, ia, ib, va, vb = b, a, ib, None, NOT_LITERAL, sv
                name = FLIPPED_COMPARISON[name]
        if ia is None and ib is None and va is NOT_LITERAL and vb is NOT_LITERAL:
            # an expression against a scalar subquery: the expression's estimate, as a column
            sv = self.scalar_value(b)
            ca = self.expression_column(a, RelEstimate(rows, 0.0, cols)) if sv is not None else None
            if ca is not None and name not in ("equal", "not_equal", "is_not_distinct_from", "is_distinct_from"):
                tmp = list(cols) + [ca]
                sel, _ = self._column_vs_value(name, len(cols), sv, tmp)
                return sel, {}
        if ia is not None and vb is not NOT_LITERAL:
            return self._column_vs_value(name, ia, vb, cols)
        if ia is not None and ib is not None:
            return self._column_vs_column(name, ia, ib, cols)
        if va is not NOT_LITERAL and vb is not NOT_LITERAL:
            try:
                result = {"equal": va == vb, "not_equal": va != vb, "lt": va < vb, "lte": va <= vb,
                          "gt": va > vb, "gte": va >= vb, "is_not_distinct_from": va == vb,
                          "is_distinct_from": va != vb}[name]
                if (va is None or vb is None) and name not in ("is_not_distinct_from", "is_distinct_from"):
                    result = False
                return (1.0 if result else 0.0), {}
            except TypeError:
                return DEFAULT_SEL, {}
        # expressions: use the column estimate of the expression when it has an NDV
        if name in ("equal", "is_not_distinct_from"):
            # a column (or expression) against a value known only when running (a scalar subquery...)
            ca = self.expression_column(a, RelEstimate(rows, 0.0, cols))
            if ca is None or not ca.ndv:
                ca = self.expression_column(b, RelEstimate(rows, 0.0, cols))
            if ca is not None and ca.ndv:
                return 1.0 / max(ca.ndv, 1.0), {}
            fp = self._fingerprint(a, cols) if vb is not NOT_LITERAL and vb is not None else None
            return DEFAULT_EQ_SEL, ({fp: _value_set([vb])} if fp is not None else {})
        if name in ("not_equal", "is_distinct_from"):
            return 1.0 - DEFAULT_EQ_SEL, {}
        return DEFAULT_RANGE_SEL, {}

    def _column_vs_value(self, name: str, i: int, v: Any, cols) -> tuple[float, dict[int, ColumnEstimate]]:
        col = cols[i] if 0 <= i < len(cols) else None
        if col is None:
            col = ColumnEstimate()
        if v is None:
            if name == "is_not_distinct_from":
                return self._is_null(True, _field_expr(i), cols)
            if name == "is_distinct_from":
                return self._is_null(False, _field_expr(i), cols)
            return 0.0, {}
        v = _coerce(v, col)
        nonnull = 1.0 - (col.null_fraction or 0.0)
        if name in ("equal", "is_not_distinct_from"):
            f = self._eq_fraction(col, v)
            upd = evolve(col, ndv=1.0 if f > 0 else 0.0, min=v, max=v, null_fraction=0.0, histogram=None)
            return f * nonnull, {i: upd}
        if name in ("not_equal", "is_distinct_from"):
            f = self._eq_fraction(col, v)
            ndv = max(col.ndv - 1.0, 1.0) if col.ndv is not None and f > 0 else col.ndv
            return (1.0 - f) * nonnull, {i: evolve(col, ndv=ndv, null_fraction=0.0)}
        lo, hi, lo_incl, hi_incl = None, None, True, True
        if name == "lt":
            hi, hi_incl = v, False
        elif name == "lte":
            hi = v
        elif name == "gt":
            lo, lo_incl = v, False
        elif name == "gte":
            lo = v
        return self._range(i, col, lo, lo_incl, hi, hi_incl)

    def _between(self, x: Expression, lo_e: Expression, hi_e: Expression, cols):
        i = column_of(x)
        lo, hi = literal_of(lo_e), literal_of(hi_e)
        if i is None or lo is NOT_LITERAL or hi is NOT_LITERAL or lo is None or hi is None:
            return DEFAULT_BETWEEN_SEL, {}
        col = cols[i] if 0 <= i < len(cols) else None
        if col is None:
            return DEFAULT_BETWEEN_SEL, {}
        return self._range(i, col, _coerce(lo, col), True, _coerce(hi, col), True, default=DEFAULT_BETWEEN_SEL)

    def _range(self, i: int, col: ColumnEstimate, lo: Any, lo_incl: bool, hi: Any, hi_incl: bool,
               default: float = DEFAULT_RANGE_SEL) -> tuple[float, dict[int, ColumnEstimate]]:
        """``lo < col < hi`` (bounds optional, inclusive or not): the fraction of the column's current
        range (or histogram mass) the interval covers; the column's bounds are narrowed to it."""
        nonnull = 1.0 - (col.null_fraction or 0.0)
        value = lo if lo is not None else hi
        if col.min is None or col.max is None or value is None:
            return default * nonnull, {i: evolve(col, null_fraction=0.0)}
        numeric = col.numeric and isinstance(value, float) and (lo is None or isinstance(lo, float)) \
            and (hi is None or isinstance(hi, float))
        text = isinstance(col.min, str) and isinstance(col.max, str) and isinstance(value, str) \
            and (lo is None or isinstance(lo, str)) and (hi is None or isinstance(hi, str))
        if not numeric and not text:
            return default * nonnull, {i: evolve(col, null_fraction=0.0)}
        a, b = _domain(col)
        qlo, qhi = _interval(as_number(lo) if lo is not None else None, lo_incl,
                             as_number(hi) if hi is not None else None, hi_incl, col.integral and numeric)
        lo2, hi2 = max(a, qlo), min(b, qhi)
        if hi2 <= lo2:
            return 0.0, {i: evolve(col, ndv=0.0, null_fraction=0.0)}
        if col.histogram is not None and numeric:
            total = _histogram_mass(col.histogram, a, b, col.integral)
            if total > 0:
                fraction = _histogram_mass(col.histogram, lo2, hi2, col.integral) / total
            else:
                fraction = (hi2 - lo2) / (b - a)
        elif col.normal is not None and numeric:
            total = _normal_mass(col.normal, a, b)
            fraction = _normal_mass(col.normal, lo2, hi2) / total if total > 0 else (hi2 - lo2) / (b - a)
        else:
            fraction = (hi2 - lo2) / (b - a) if b > a else 1.0
        fraction = min(max(fraction, 0.0), 1.0)
        new_min, new_max = col.min, col.max
        if numeric:
            if lo2 > a:
                new_min = lo2 + 1.0 if col.integral else lo2
            if hi2 < b:
                new_max = hi2
            if new_min > new_max:
                new_min = new_max
        else:
            if lo is not None and lo > col.min:
                new_min = lo
            if hi is not None and hi < col.max:
                new_max = hi
        ndv = col.ndv
        if ndv is not None:
            ndv = max(min(ndv, ndv * fraction + 1.0), 1.0) if fraction > 0 else 0.0
            if col.integral and numeric:
                ndv = min(ndv, new_max - new_min + 1.0)
        upd = evolve(col, min=new_min, max=new_max, ndv=ndv, null_fraction=0.0)
        return fraction * nonnull, {i: upd}

    def _column_vs_column(self, name: str, ia: int, ib: int, cols) -> tuple[float, dict[int, ColumnEstimate]]:
        ca = cols[ia] if 0 <= ia < len(cols) else None
        cb = cols[ib] if 0 <= ib < len(cols) else None
        nonnull = (1.0 - ((ca.null_fraction or 0.0) if ca else 0.0)) * (1.0 - ((cb.null_fraction or 0.0) if cb else 0.0))
        if ia == ib:
            return (1.0 if name in ("equal", "lte", "gte", "is_not_distinct_from") else 0.0) * nonnull, {}
        if name in ("equal", "is_not_distinct_from", "not_equal", "is_distinct_from"):
            ndvs = [c.ndv for c in (ca, cb) if c is not None and c.ndv]
            eq = 1.0 / max(max(ndvs), 1.0) if ndvs else DEFAULT_EQ_SEL
            if name in ("equal", "is_not_distinct_from"):
                return eq * nonnull, {}
            return (1.0 - eq) * nonnull, {}
        if ca is None or cb is None or not ca.numeric or not cb.numeric:
            return DEFAULT_RANGE_SEL * nonnull, {}
        p_less = _prob_less(ca, cb)  # P(a < b)
        p_eq = 0.0
        if ca.ndv and cb.ndv and ca.integral:
            p_eq = min(1.0 / max(ca.ndv, cb.ndv, 1.0), 1.0 - p_less)
        if name == "lt":
            s = p_less
        elif name == "lte":
            s = p_less + p_eq
        elif name == "gt":
            s = 1.0 - p_less - p_eq
        else:
            s = 1.0 - p_less
        return min(max(s, 0.0), 1.0) * nonnull, {}

    def _like(self, x: Expression, pattern_e: Expression, cols, insensitive: bool):
        pattern = literal_of(pattern_e)
        if not isinstance(pattern, str):
            return DEFAULT_LIKE_SEL, {}
        return self._like_pattern(x, pattern, cols)

    def _like_pattern(self, x: Expression, pattern: str, cols) -> tuple[float, dict[int, ColumnEstimate]]:
        i = column_of(x)
        col = cols[i] if i is not None and 0 <= i < len(cols) else None
        nonnull = 1.0 - ((col.null_fraction or 0.0) if col is not None else 0.0)
        if "%" not in pattern and "_" not in pattern:
            if col is not None:
                f = self._eq_fraction(col, pattern)
                return f * nonnull, {i: evolve(col, ndv=1.0, min=pattern, max=pattern, null_fraction=0.0)}
            return DEFAULT_EQ_SEL, {}
        fragments = [f for f in pattern.replace("_", "%").split("%") if f]
        sel = 1.0
        for f in fragments:
            sel *= like_fragment_selectivity(f)
        if pattern[0] not in "%_" and col is not None and isinstance(col.min, str) and isinstance(col.max, str) \
                and col.min and col.max:
            # anchored prefix: the share of its first character in the column's range of first characters
            first, lo, hi = ord(pattern[0]), ord(col.min[0]), ord(col.max[0])
            if not lo <= first <= hi:
                return 0.0, {}
            sel = min(sel, sel / like_fragment_selectivity(fragments[0]) / (hi - lo + 1))
        if col is not None and col.ndv:
            sel = max(sel, 1.0 / max(col.ndv, 1.0))
        return sel * nonnull, ({i: evolve(col, null_fraction=0.0)} if col is not None else {})


def implied_conjuncts(parts: Sequence[Expression], functions: Any) -> set[int]:
    """The positions of the conjuncts of ``parts`` that another conjunct implies: a disjunction ``W``
    is implied by a disjunction ``S`` when every branch of ``S`` has, among its conjuncts, all the
    conjuncts of some branch of ``W`` (a conjunct that is no disjunction is a disjunction of one
    branch). ``P(W AND S) = P(S)``: applying ``W``'s selectivity as well would count it twice.
    Producers write such pairs: DataFusion keeps, next to TPC-DS Q13's
    ``(cd = 'M' AND price 100-150 AND hd = 3) OR (...)``, the disjunction it derived from it over the
    tables its join reads (``(cd = 'M' AND price 100-150) OR (...)``). Of two equivalent conjuncts the
    first is kept.

    >>> from optimizer.load.functions import function_table
    >>> from testing.builder import Builder, lit, read, ref
    >>> b = Builder()
    >>> x, y, z = (b.call("equal", ref(i), lit(i)) for i in range(3))
    >>> full = b.call("or", b.call("and", x, y), b.call("and", z, y))
    >>> functions = function_table(b.plan(read("t", [("a", "i64"), ("b", "i64"), ("c", "i64")]), ["a", "b", "c"]))
    >>> sorted(implied_conjuncts([b.call("or", x, z), full, y], functions))  # x OR z, and y: full implies both
    [0, 2]
    """
    if len(parts) < 2:
        return set()
    branches = [[frozenset(c.SerializeToString(deterministic=True) for c in conjuncts(d, functions))
                 for d in disjuncts(p, functions)] for p in parts]
    if all(len(b) == 1 for b in branches):
        return set()  # no disjunction: a plain conjunct is implied only by another disjunction

    def implies(s: list[frozenset], w: list[frozenset]) -> bool:
        return all(any(wb <= sb for wb in w) for sb in s)

    out = set()
    for i, w in enumerate(branches):
        for j, s in enumerate(branches):
            if i != j and j not in out and implies(s, w) and (j < i or not implies(w, s)):
                out.add(i)
                break
    return out


def matched_fraction(s: float, m: float) -> float:
    """Probability that a row with ``m`` join partners on the keys (Poisson) has one passing a residual
    condition of selectivity ``s`` (1 without a residual: containment)."""
    if s >= 1.0:
        return 1.0 if m > 0 else 0.0
    if s <= 0.0 or m <= 0:
        return 0.0
    return -math.expm1(-m * s)


def like_fragment_selectivity(fragment: str) -> float:
    """Share of text values containing a literal fragment: :data:`DEFAULT_LIKE_SEL` for 5 characters,
    times :data:`LIKE_CHAR_FACTOR` per extra character (divided per missing one), at most 0.5.

    >>> like_fragment_selectivity("green"), round(like_fragment_selectivity("Complaints"), 4)
    (0.1, 0.0328)
    """
    return min(0.5, DEFAULT_LIKE_SEL * LIKE_CHAR_FACTOR ** (len(fragment) - 5))


def keep_key_values(cols: list[ColumnEstimate | None], i: int, fraction: float,
                     before: Sequence[ColumnEstimate | None], rows: float) -> None:
    """A semi/anti join keeps or drops whole key values: ``fraction`` of the key's values remain (not the
    values a random ``fraction`` of the rows would hold), and of the columns that determine it."""
    col = cols[i] if 0 <= i < len(cols) else None
    old = before[i] if 0 <= i < len(before) else None
    if col is None or old is None or old.ndv is None:
        return
    cols[i] = evolve(col, ndv=max(min(old.ndv * fraction, rows), 1.0 if rows >= 1 else 0.0))
    select_values(cols, i, fraction, before)


def select_values(cols: list[ColumnEstimate | None], i: int, fraction: float,
                   before: Sequence[ColumnEstimate | None] | None = None) -> None:
    """Column ``i`` keeps ``fraction`` of its values: so do the columns that determine it (unique keys of
    the table it comes from), in place (``before``: the columns before the operation)."""
    col = cols[i] if 0 <= i < len(cols) else None
    if col is None or col.origin is None or fraction >= 1.0:
        return
    read = col.origin[0]
    for j, c in enumerate(cols):
        if j == i or c is None or c.ndv is None or read not in c.key_of:
            continue
        b = before[j] if before is not None and j < len(before) and before[j] is not None else c
        base = b.ndv if b.ndv is not None else c.ndv
        cols[j] = evolve(c, ndv=max(min(c.ndv, base * fraction), 1.0 if c.ndv >= 1 else 0.0))


def nulls_after_match(col: ColumnEstimate | None, matched: float, rows: float) -> ColumnEstimate | None:
    """A column of the null-supplying side of an outer join."""
    if col is None:
        return None
    nf_in = col.null_fraction or 0.0
    non_null = matched * (1.0 - nf_in)
    nf = 1.0 - non_null / rows if rows > 0 else 0.0
    return evolve(col, null_fraction=min(max(nf, 0.0), 1.0), key_of=frozenset())


def _value_set(values: list[Any]) -> ColumnEstimate:
    """A column known to hold only ``values``."""
    col = ColumnEstimate(ndv=float(len(values)), null_fraction=0.0)
    if values and len({type(v) for v in values}) == 1:
        col.min, col.max = min(values), max(values)
    return col


def pick_bound(choose: Callable[[Any, Any], Any], a: Any, b: Any) -> Any:
    """``choose(a, b)`` (``min`` or ``max``) of two optional bounds; one that is None or not comparable: the other, else ``a``."""
    if a is None:
        return b
    if b is None:
        return a
    try:
        return choose(a, b)
    except TypeError:
        return a


def _coerce(v: Any, col: ColumnEstimate) -> Any:
    """A literal in the column's domain (a date string compared with a date column -> days)."""
    if isinstance(v, str) and col.numeric:
        n = to_numeric(v)
        return n if n is not None else v
    if isinstance(v, int | float) and isinstance(col.min, str):
        return str(v)
    return v


def _domain(col: ColumnEstimate) -> tuple[float, float]:
    """The column's values as a half-open continuous interval ``(a, b]`` (integral values k sit on (k-1, k])."""
    lo, hi = as_number(col.min), as_number(col.max)
    if lo is None or hi is None:
        return -math.inf, math.inf
    if col.integral:
        return lo - 1.0, hi
    if hi == lo:
        return lo - 1e-9 * (abs(lo) + 1.0), hi
    return lo, hi


def _interval(lo: float | None, lo_incl: bool, hi: float | None, hi_incl: bool, integral: bool
              ) -> tuple[float, float]:
    """A range predicate as a half-open interval ``(qlo, qhi]`` of the continuous domain of :func:`_domain`.

    >>> _interval(3.0, True, 5.0, False, True)    # 3 <= x < 5 on integers: 3 and 4, i.e. (2, 4]
    (2.0, 4.0)
    """
    qlo, qhi = -math.inf, math.inf
    if lo is not None:
        if integral:
            qlo = float(math.ceil(lo) - 1) if lo_incl else float(math.floor(lo))
        else:
            qlo = lo - 1e-9 * (abs(lo) + 1.0) if lo_incl else lo
    if hi is not None:
        if integral:
            qhi = float(math.floor(hi)) if hi_incl else float(math.ceil(hi) - 1)
        else:
            qhi = hi if hi_incl else hi - 1e-9 * (abs(hi) + 1.0)
    return qlo, qhi


#: At most this many results are remembered per histogram (:attr:`Histogram.memo`).
_MEMO_KEPT = 4096
_UNKNOWN = object()


def _remembered(h: Histogram, key: tuple, compute: Callable[[], Any]) -> Any:
    """``compute()``, remembered in ``h.memo`` under ``key``."""
    memo = h.memo
    value = memo.get(key, _UNKNOWN)
    if value is _UNKNOWN:
        if len(memo) >= _MEMO_KEPT:
            memo.clear()
        value = memo[key] = compute()
    return value


def _histogram_mass(h: Histogram, a: float, b: float, integral: bool = False) -> float:
    """Rows of the histogram in ``(a, b]``, uniform within a bin. Bin i covers ``(lo_i, hi_i]``; the
    first also holds its lower bound (so it starts at ``lo - 1`` for integral values); a bin with
    ``lo == hi`` holds that one value."""
    return _remembered(h, ("mass", a, b, integral), lambda: _mass(h, a, b, integral))


def _mass(h: Histogram, a: float, b: float, integral: bool) -> float:
    total = 0.0
    bins = h.bins
    his = h.upper_bounds
    # Ordered bins: those ending at or below ``a`` hold nothing of the range; from the first bin whose
    # lower bound, even moved down as below, is at or above ``b``, neither does any later one.
    start = bisect.bisect_right(his, a) if his is not None else 0
    for idx in range(start, len(bins)):
        lo, hi, _ndv = bins[idx]
        if his is not None and (lo - 1.0 if integral else lo - 1e-9 * (abs(lo) + 1.0)) >= b:
            break
        if idx == 0 or hi <= lo:
            lo = lo - 1.0 if integral else lo - 1e-9 * (abs(lo) + 1.0)
        if integral and hi <= lo + 1.0 and idx != 0:
            lo = hi - 1.0
        overlap = min(b, hi) - max(a, lo)
        if overlap > 0:
            total += h.height * overlap / (hi - lo)
    return total


def _histogram_point(h: Histogram, v: float) -> float | None:
    """Rows of the histogram equal to ``v``: each bin holding it contributes height / its NDV."""
    return _remembered(h, ("point", v), lambda: _point(h, v))


def _point(h: Histogram, v: float) -> float:
    total = 0.0
    found = False
    for idx, (lo, hi, ndv) in enumerate(h.bins):
        if (lo < v <= hi) or (idx == 0 and v == lo) or (lo == hi == v):
            total += h.height / max(ndv, 1.0)
            found = True
    return total if found else 0.0


def _normal_mass(normal: tuple[float, float], a: float, b: float) -> float:
    """P(a < X <= b) for X ~ N(mean, sd)."""
    mu, sd = normal
    sd = max(sd, 1e-12)

    def cdf(x: float) -> float:
        if x == math.inf:
            return 1.0
        if x == -math.inf:
            return 0.0
        return 0.5 * math.erfc(-(x - mu) / (sd * math.sqrt(2.0)))

    return max(cdf(b) - cdf(a), 0.0)


def column_moments(col: ColumnEstimate) -> tuple[float, float] | None:
    """(mean, variance) of a numeric column: from its normal, its moments, its histogram, or uniform over
    its bounds. None when they are unknown or not finite (bounds near the float limits: their squares
    overflow).

    >>> column_moments(ColumnEstimate(ndv=10, min=0, max=12))
    (6.0, 12.0)
    >>> column_moments(ColumnEstimate(ndv=10, min=-1e200, max=1e200)) is None
    True
    """
    moments = _moments(col)
    if moments is None or not all(math.isfinite(v) for v in moments):
        return None
    return moments


def _moments(col: ColumnEstimate) -> tuple[float, float] | None:
    # squares as products: a float product past the limit is inf, where ``**`` raises OverflowError
    if col.normal is not None:
        return col.normal[0], col.normal[1] * col.normal[1]
    if col.moments is not None:
        return col.moments
    if not col.numeric:
        return None
    a, b = float(col.min), float(col.max)
    h = col.histogram
    if h is not None and h.bins:
        moments = _remembered(h, ("moments", a, b), lambda: _histogram_moments(h, a, b))
        if moments is not None:
            return moments
    return (a + b) / 2, (b - a) * (b - a) / 12


def _histogram_moments(h: Histogram, a: float, b: float) -> tuple[float, float] | None:
    """(mean, variance) of the histogram's values within ``[a, b]``; None if no bin reaches it."""
    mids = []
    within = 0.0
    for lo, hi, _ndv in h.bins:
        if hi < a or lo > b:
            continue
        lo, hi = max(lo, a), min(hi, b)
        mids.append((lo + hi) / 2)
        within += (hi - lo) * (hi - lo) / 12
    if not mids:
        return None
    mean = sum(mids) / len(mids)
    var = sum((x - mean) * (x - mean) for x in mids) / len(mids) + within / len(mids)
    return mean, var


def _quantiles(col: ColumnEstimate, n: int = 64) -> list[float]:
    """``n`` representative values of a numeric column (its histogram's quantiles, or uniform)."""
    a, b = float(col.min), float(col.max)
    h = col.histogram
    if (col.normal is not None or col.moments is not None) and h is None:
        from statistics import NormalDist

        mu, sd = col.normal if col.normal is not None else (col.moments[0], math.sqrt(max(col.moments[1], 0.0)))
        dist = NormalDist(mu, max(sd, 1e-12))
        return [min(max(dist.inv_cdf((k + 0.5) / n), a), b) for k in range(n)]
    if h is not None and h.bins:
        pts: list[float] = []
        for lo, hi, _ndv in h.bins:
            if a <= hi and lo <= b:
                pts.append((max(lo, a) + min(hi, b)) / 2)
        if pts:
            return pts
    if b <= a:
        return [a]
    return [a + (b - a) * (k + 0.5) / n for k in range(n)]


def _prob_less(ca: ColumnEstimate, cb: ColumnEstimate) -> float:
    """P(a < b) for independent columns (uniform within their bounds or histograms)."""
    xs = _quantiles(ca)
    ys = sorted(_quantiles(cb))
    import bisect

    count = 0.0
    for x in xs:
        count += (len(ys) - bisect.bisect_right(ys, x)) / len(ys)
    return count / len(xs)


def _field_expr(i: int) -> Expression:
    from optimizer.expr_utils import field

    return field(i)
