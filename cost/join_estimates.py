"""The estimates of relations of two or more inputs: joins (by equi-keys, residual conditions and join
type) and set operations. :class:`JoinEstimates` is a part of :class:`~cost.cardinality.CardinalityEstimator`
(its relations of one input or none, expressions and the bookkeeping are there); what a conjunction of
predicates selects comes from :class:`~cost.selectivity.PredicateSelectivity`.
"""

from __future__ import annotations

from collections import Counter

from optimizer.cost.estimates import (
    DEFAULT_SET_OVERLAP,
    ColumnEstimate,
    RelEstimate,
    equi_pairs,
    evolve,
    scale_column,
)
from optimizer.cost.selectivity import (
    keep_key_values,
    matched_fraction,
    nulls_after_match,
    pick_bound,
    select_values,
)
from substrait.proto import Expression, SetRel

from optimizer.dag import inputs
from optimizer.expr_utils import conjuncts, join_type_name, reference_field


def domain_within(c: ColumnEstimate | None, other: ColumnEstimate | None) -> float:
    """The key domain of ``c`` (its base column's NDV) that an equi-join with ``other`` draws from: at
    most the integers between ``other``'s bounds, where alone a partner can be. A fact table's date key
    spans the 1,000 days of its sales, a date dimension's key 73,049 days: the dimension's rows that a
    filter keeps (the days of one year, chosen by ``d_year`` or by a key range) are taken to be among the
    days the fact holds, as Spark's CBO assumes (containment), not spread over two centuries (which made
    ``catalog_returns`` joined with the days of 2000 56 rows where there are 2,800). Integral numeric
    keys only; a side whose keys span the other's whole domain (orders and their customers) is unchanged.

    >>> dates = ColumnEstimate(ndv=366, min=2415022.0, max=2488070.0, integral=True, domain=73049)
    >>> sold = ColumnEstimate(ndv=1000, min=2450821.0, max=2451820.0, integral=True, domain=1000)
    >>> domain_within(dates, sold), domain_within(sold, dates)
    (1000.0, 1000)
    """
    if c is None:
        return 0.0
    dom = c.domain or 0.0
    if other is None or not (c.integral and other.integral and other.numeric) or dom <= 0:
        return dom
    return min(dom, max(float(other.max) - float(other.min) + 1.0, 1.0))


#: The set operations whose rows are estimated from their inputs' distinct rows.
_BY_DISTINCT_ROWS = frozenset({SetRel.SET_OP_UNION_DISTINCT, SetRel.SET_OP_MINUS_PRIMARY,
                               SetRel.SET_OP_INTERSECTION_PRIMARY, SetRel.SET_OP_INTERSECTION_MULTISET})


class JoinEstimates:
    """Estimates of joins and set operations (methods of the cardinality estimator)."""

    # -- set operations ------------------------------------------------------------------------------

    def _rel_set(self, node, body, children) -> RelEstimate:
        if not children:
            return RelEstimate(0.0, 0.0, [])
        op = body.op
        first = children[0]
        n = len(first.columns)
        # Each distinct input once, with how often it comes (a union of one shared subtree, through
        # ReferenceRels, has one input many times: its work stays linear in the plan).
        times = Counter(id(ch) for ch in children)
        unique = list({id(ch): ch for ch in children}.values())
        weights = [times[id(ch)] for ch in unique]
        merged: list[ColumnEstimate | None] = []
        for c in range(n):
            parts = [ch.columns[c] if c < len(ch.columns) else None for ch in unique]
            merged.append(_union_column(parts, weights))
        distinct: list[float] = []
        if op in _BY_DISTINCT_ROWS:
            counts = {id(ch): self.group_count(list(ch.columns), ch) for ch in unique}
            distinct = [counts[id(ch)] for ch in children]
        if op == SetRel.SET_OP_UNION_ALL:
            rows = sum(ch.rows for ch in children)
        elif op == SetRel.SET_OP_UNION_DISTINCT:
            rows = min(sum(distinct), sum(ch.rows for ch in children))
            domain = 1.0
            for col in merged:
                domain *= max(col.ndv, 1.0) if col is not None and col.ndv else 1e9
            rows = max(min(rows, domain), max(distinct))
        elif op == SetRel.SET_OP_MINUS_PRIMARY:
            rows = distinct[0] * (1 - DEFAULT_SET_OVERLAP)
        elif op == SetRel.SET_OP_MINUS_PRIMARY_ALL:
            rows = max(first.rows - sum(ch.rows for ch in children[1:]) * DEFAULT_SET_OVERLAP,
                       first.rows * (1 - DEFAULT_SET_OVERLAP))
        elif op == SetRel.SET_OP_MINUS_MULTISET:
            rows = first.rows * (1 - DEFAULT_SET_OVERLAP)
        elif op == SetRel.SET_OP_INTERSECTION_PRIMARY:
            rows = min(distinct[0], max(distinct[1:], default=distinct[0]))
        elif op == SetRel.SET_OP_INTERSECTION_MULTISET:
            rows = min(distinct) * DEFAULT_SET_OVERLAP if len(distinct) > 1 else distinct[0]
        elif op == SetRel.SET_OP_INTERSECTION_MULTISET_ALL:
            rows = min(ch.rows for ch in children) * DEFAULT_SET_OVERLAP if len(children) > 1 else first.rows
        else:
            rows = sum(ch.rows for ch in children)
        return RelEstimate(max(rows, 0.0), 0.0, merged)

    # -- joins ------------------------------------------------------------------------------------------

    def before_post_join_filter(self, node: int) -> RelEstimate:
        """What the join at ``node`` produces before its ``post_join_filter`` (the filter's input rows):
        a join evaluates the filter on each of them."""
        kind = self.g.nodes[node]["kind"]
        body = getattr(self.g.nodes[node]["rel"], kind)
        children = [self.estimate(c) for c in inputs(self.g, node)]
        if kind in ("hash_join", "merge_join"):
            return self._hash_join_core(body, children)
        return self._join_core(body, children)

    def _join_core(self, body, children) -> RelEstimate:
        left, right = children[0], children[1]
        jt = join_type_name(body) or "INNER"
        keys, residual = self.join_keys(body.expression, len(left.columns)) if body.HasField("expression") else ([], [])
        return self.join(jt, left, right, keys, residual)

    def _rel_join(self, node, body, children) -> RelEstimate:
        est = self._join_core(body, children)
        if body.HasField("post_join_filter"):
            est = self.apply_filter(body.post_join_filter, est)
        return est

    def _rel_lateral_join(self, node, body, children) -> RelEstimate:
        return self._rel_join(node, body, children)

    def _rel_hash_join(self, node, body, children) -> RelEstimate:
        est = self._hash_join_core(body, children)
        if body.HasField("post_join_filter"):
            est = self.apply_filter(body.post_join_filter, est)
        return est

    def _hash_join_core(self, body, children) -> RelEstimate:
        left, right = children[0], children[1]
        jt = join_type_name(body) or "INNER"
        keys = []
        for k in body.keys:
            lf = reference_field(k.left)
            rf = reference_field(k.right)
            if lf is not None and rf is not None:
                keys.append((lf, rf))
        residual = []
        if body.HasField("residual_expression"):
            residual = conjuncts(body.residual_expression, self.functions)
        return self.join(jt, left, right, keys, residual)

    _rel_merge_join = _rel_hash_join

    def _rel_nested_loop_join(self, node, body, children) -> RelEstimate:
        left, right = children[0], children[1]
        jt = join_type_name(body) or "INNER"
        keys, residual = self.join_keys(body.expression, len(left.columns)) if body.HasField("expression") else ([], [])
        return self.join(jt, left, right, keys, residual)

    def _rel_cross(self, node, body, children) -> RelEstimate:
        return self.join("INNER", children[0], children[1], [], [])

    def join_keys(self, expression: Expression, n_left: int) -> tuple[list[tuple[int, int]], list[Expression]]:
        """``(keys, residual)``: the equi-join keys of a join expression and its other conjuncts (:func:`equi_pairs`)."""
        return equi_pairs(expression, n_left, self.functions)

    def join(self, jt: str, left: RelEstimate, right: RelEstimate, keys: list[tuple[int, int]],
             residual: list[Expression]) -> RelEstimate:
        """The estimate of a join of type ``jt`` (``INNER``, ``LEFT_SEMI``...) on equi-``keys`` and
        ``residual`` conjuncts (over left + right columns).

        One key: both sides' values are drawn from a common domain of ``D = max(domain_l, domain_r)``
        values (a key's domain is its base column's NDV, so a filtered side keeps the whole domain, as
        far as the other side's range reaches: :func:`domain_within`):
        a left value has a partner with probability ``ndv_r / D`` and the inner join has
        ``|L| |R| / D`` rows, which is ``|L| |R| / max(ndv_l, ndv_r)`` when one side's values contain
        the other's. Several keys: their NDVs multiply, capped by each side's rows, and the larger
        combination is the denominator (containment). A residual of selectivity ``s`` leaves
        ``1 - exp(-m s)`` of the rows with a key partner matched (``m`` partners, Poisson).
        """
        nl = len(left.columns)
        lcols = left.columns
        rcols = right.columns
        L, R = max(left.rows, 0.0), max(right.rows, 0.0)
        key_ndv: list[tuple[float, float]] = []
        if keys:
            pl = pr = 1.0
            for lk, rk in keys:
                cl = lcols[lk] if 0 <= lk < nl else None
                cr = rcols[rk] if 0 <= rk < len(rcols) else None
                a = cl.ndv if cl is not None and cl.ndv else L
                b = cr.ndv if cr is not None and cr.ndv else R
                a, b = max(min(a, L), 1.0), max(min(b, R), 1.0)
                key_ndv.append((a, b))
                pl *= a
                pr *= b
            ndv_l = max(min(pl, L), 1.0)
            ndv_r = max(min(pr, R), 1.0)
            if len(keys) == 1:
                cl = lcols[keys[0][0]] if 0 <= keys[0][0] < nl else None
                cr = rcols[keys[0][1]] if 0 <= keys[0][1] < len(rcols) else None
                domain = max(ndv_l, ndv_r, domain_within(cl, cr), domain_within(cr, cl))
            else:
                domain = max(ndv_l, ndv_r)
            l_values = min(1.0, ndv_r / domain)  # fraction of left key values with a partner
            r_values = min(1.0, ndv_l / domain)
        # Residual selectivity, computed on the concatenated columns (keys already equal).
        res_sel = 1.0
        res_l, res_r = lcols, rcols
        if residual:
            res_est = RelEstimate(max(L * R, 1.0), 0.0, [*lcols, *rcols], applied=left.applied | right.applied)
            res_sel, res_cols, _, _ = self._conjunction(residual, res_est)
            res_l, res_r = res_cols[:nl], res_cols[nl:]
        if keys:
            inner = L * R / domain * res_sel
            left_match = l_values * matched_fraction(res_sel, R / ndv_r)
            right_match = r_values * matched_fraction(res_sel, L / ndv_l)
        else:
            inner = L * R * res_sel
            left_match = matched_fraction(res_sel, R) if R > 0 else 0.0
            right_match = matched_fraction(res_sel, L) if L > 0 else 0.0
        # scale_column leaves a column of unknown NDV as it is: only the others are rescaled.
        out_l = [c if c is None or c.ndv is None else scale_column(c, L, left_match, inner) for c in res_l]
        out_r = [c if c is None or c.ndv is None else scale_column(c, R, right_match, inner) for c in res_r]
        fds = set(left.fds | right.fds)
        for (lk, rk), (a, b) in zip(keys, key_ndv, strict=False):
            cl = out_l[lk] if 0 <= lk < len(out_l) else None
            cr = out_r[rk] if 0 <= rk < len(out_r) else None
            if cl is None or cr is None:
                continue
            m = min(a * l_values, b * r_values) if len(keys) == 1 else min(a, b)
            # key values are selected: so are the values of the columns that determine them
            select_values(out_l, lk, max(m, 1.0) / a, lcols)
            select_values(out_r, rk, max(m, 1.0) / b, rcols)
            cl, cr = out_l[lk], out_r[rk]
            shared = cl.key_of | cr.key_of
            lo, hi = pick_bound(max, cl.min, cr.min), pick_bound(min, cl.max, cr.max)
            dom = max(cl.domain or 0.0, cr.domain or 0.0) or None
            out_l[lk] = evolve(cl, ndv=max(min(m, cl.ndv or m), 1.0), key_of=shared, min=lo, max=hi, domain=dom)
            out_r[rk] = evolve(cr, ndv=max(min(m, cr.ndv or m), 1.0), key_of=shared, min=lo, max=hi, domain=dom)
            for c in (cl, cr):
                if c.origin is not None:
                    fds.update((c.origin[0], k) for k in shared if k != c.origin[0])
        # A side's sets as they are where the other adds nothing (a wide join graph's estimates hold
        # thousands of them, which the garbage collector walks).
        applied = left.applied | right.applied if left.applied and right.applied else left.applied or right.applied
        if not right.fds and len(fds) == len(left.fds):
            fds_all = left.fds
        elif not left.fds and len(fds) == len(right.fds):
            fds_all = right.fds
        else:
            fds_all = frozenset(fds)
        if jt == "INNER":
            return RelEstimate(inner, 0.0, out_l + out_r, applied=applied, fds=fds_all, exprs={**left.exprs, **right.exprs})
        if jt in ("LEFT", "RIGHT", "OUTER"):
            rows = inner
            cols_l, cols_r = out_l, out_r
            if jt in ("LEFT", "OUTER"):
                rows += L * (1 - left_match)
            if jt in ("RIGHT", "OUTER"):
                rows += R * (1 - right_match)
            if jt in ("LEFT", "OUTER"):
                cols_l = [scale_column(c, L, 1.0, rows) for c in lcols]
                cols_r = [nulls_after_match(c, inner, rows) for c in out_r] if jt == "LEFT" else cols_r
            if jt in ("RIGHT", "OUTER"):
                cols_r = [scale_column(c, R, 1.0, rows) for c in rcols]
                cols_l = [nulls_after_match(c, inner, rows) for c in out_l] if jt == "RIGHT" else cols_l
            if jt == "OUTER":
                cols_l = [nulls_after_match(c, inner + L * (1 - left_match), rows) for c in cols_l]
                cols_r = [nulls_after_match(c, inner + R * (1 - right_match), rows) for c in cols_r]
            keep = left.applied if jt == "LEFT" else right.applied if jt == "RIGHT" else frozenset()
            keep_fds = left.fds if jt == "LEFT" else right.fds if jt == "RIGHT" else frozenset()
            return RelEstimate(rows, 0.0, cols_l + cols_r, applied=keep, fds=keep_fds,
                               exprs=left.exprs if jt == "LEFT" else right.exprs if jt == "RIGHT" else {})
        if jt in ("LEFT_SEMI", "LEFT_ANTI"):
            fraction = left_match if jt == "LEFT_SEMI" else 1 - left_match
            rows = L * fraction
            cols = [scale_column(c, L, fraction, rows) for c in lcols]
            for lk, _ in keys:  # whole key values are kept or dropped
                keep_key_values(cols, lk, fraction, lcols, rows)
            return RelEstimate(rows, 0.0, cols, applied=left.applied, fds=left.fds, exprs=left.exprs)
        if jt in ("RIGHT_SEMI", "RIGHT_ANTI"):
            fraction = right_match if jt == "RIGHT_SEMI" else 1 - right_match
            rows = R * fraction
            cols = [scale_column(c, R, fraction, rows) for c in rcols]
            for _, rk in keys:
                keep_key_values(cols, rk, fraction, rcols, rows)
            return RelEstimate(rows, 0.0, cols, applied=right.applied, fds=right.fds, exprs=right.exprs)
        if jt == "LEFT_SINGLE":
            return RelEstimate(L, 0.0, lcols + [nulls_after_match(c, inner, L) for c in out_r], applied=left.applied, fds=left.fds, exprs=left.exprs)
        if jt == "RIGHT_SINGLE":
            return RelEstimate(R, 0.0, [nulls_after_match(c, inner, R) for c in out_l] + rcols, applied=right.applied,
                               fds=right.fds, exprs=right.exprs)
        mark = ColumnEstimate(ndv=2.0, avg_len=1.0, null_fraction=None)
        if jt == "LEFT_MARK":
            return RelEstimate(L, 0.0, lcols + [mark], applied=left.applied, fds=left.fds, exprs=left.exprs)
        if jt == "RIGHT_MARK":
            return RelEstimate(R, 0.0, rcols + [mark], applied=right.applied, fds=right.fds, exprs=right.exprs)
        return RelEstimate(inner, 0.0, out_l + out_r, applied=applied, fds=fds_all, exprs={**left.exprs, **right.exprs})


def _union_column(parts: list[ColumnEstimate | None], weights: list[int]) -> ColumnEstimate | None:
    """One column of a set operation's inputs: ``parts``, each input's estimate, coming ``weights`` times."""
    if not parts or any(p is None for p in parts):
        return None
    ndvs = [p.ndv for p in parts]
    ndv = sum(v * w for v, w in zip(ndvs, weights, strict=True)) if all(v is not None for v in ndvs) else None
    lo = hi = None
    try:
        if all(p.min is not None for p in parts):
            lo = min(p.min for p in parts)
        if all(p.max is not None for p in parts):
            hi = max(p.max for p in parts)
    except TypeError:
        lo = hi = None
    nfs = [p.null_fraction for p in parts]
    lens = [p.avg_len for p in parts if p.avg_len is not None]
    return ColumnEstimate(ndv=ndv, min=lo, max=hi, null_fraction=max(nfs) if all(n is not None for n in nfs) else None,
                          avg_len=max(lens) if lens else None, integral=all(p.integral for p in parts))
