"""Joins -> Spark: ``JoinRel`` (all 12 types) and ``CrossRel``, and what every join shares (the
physical joins too, :mod:`optimizer.spark.physical`): inputs with disjoint names, the condition's
scope and equality keys, semi joins as ``IN`` subqueries, mark and single joins.

Mark and single joins
---------------------

``*_mark`` joins append a nullable boolean: TRUE if some row of the other side satisfies the condition,
else NULL if for some row the condition is NULL, else FALSE. The mark depends only on the preserved
side's columns the condition reads, so it is computed once per distinct tuple of those columns ``K``:
``K`` semi-join other on the condition gives TRUE; ``K`` semi-join other on ``condition IS NULL`` gives
NULL (split, when the condition has equality keys, into an equi-join part plus the rows whose keys are
null, so that no nested-loop join over the whole inputs is needed); the result is joined back to the
preserved side with null-safe equality. A condition that is one key ``a = b`` takes a shorter path:
one left join with the other side's distinct keys (TRUE) and one global count of its rows and NULL
keys (NULL: ``a`` is NULL and the other side has rows, or it has a NULL ``b``). ``*_single`` joins are left (right) outer joins plus a check: the
number of matches per distinct ``K`` is computed and a tuple with more than one match fails the query
(``ExecutionError``, raised when the query runs).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

from pyspark.sql import types as T
from sqlglot import exp
from substrait.proto import Expression, Type

from optimizer.errors import PlanError, UnsupportedError
from optimizer.expr_utils import (
    call_args,
    conjuncts,
    field_index,
    function_name,
    join_type_name,
    referenced_fields,
)
from optimizer.spark.expressions import Scope
from optimizer.spark.rel_compiler import Relation, _and, _c, _or, _RelCompiler
from optimizer.spark.sql import Frame
from optimizer.spark.sql_columns import Col
from optimizer.spark.sql_columns import functions as F

_BOOL = Type(bool=Type.Boolean(nullability=Type.NULLABILITY_NULLABLE))

# Aggregate functions: a query that calls one is more than a filtered, projected table.
_AGGREGATES = frozenset({"min", "max", "sum", "avg", "count", "try_sum", "any_value", "first", "last",
                         "collect_list", "collect_set"})


def _is_filtered_scan(frame: Frame) -> bool:
    """Whether ``frame`` is a table, filtered and projected: no join, grouping, window, aggregate or
    subquery expression (FROM subqueries, which have an alias, are fine)."""
    q = frame.query()
    if q.find(exp.Join, exp.Group, exp.Distinct, exp.SetOperation, exp.Exists, exp.Window):
        return False
    if any(n.args.get("alias") is None for n in q.find_all(exp.Subquery)):
        return False
    return not any(str(n.this).lower() in _AGGREGATES for n in q.find_all(exp.Anonymous))


_SINGLE_MARKER = "more than one row of the other input matches"


def _join_type(body, path: str) -> str:
    """The join type of any of the join relations as a lower-case name such as ``left_semi``."""
    name = join_type_name(body)
    if name is None:
        message = "join type is unspecified" if body.type == 0 else f"unknown join type {body.type}"
        raise PlanError(message, f"{path}.type")
    return name.lower()


class _JoinCompiler(_RelCompiler):
    """Join and cross relations, and the join forms the physical joins share."""

    def _join_inputs(self, body, bpath: str, outer: Scope | None) -> tuple[Relation, Relation]:
        if not body.HasField("left") or not body.HasField("right"):
            raise PlanError("join needs a left and a right input", bpath)
        left = self.rel(body.left, f"{bpath}.left", outer)
        right = self.rel(body.right, f"{bpath}.right", outer)
        return left, self._disjoint(left, right)

    def _pair_scope(self, left: Relation, right: Relation, outer: Scope | None) -> Scope:
        types = left.types + right.types if left.types is not None and right.types is not None else None
        # The pair's query serves type lookups only (nested references, nullability).
        pair = left.df.crossJoin(right.df)
        return Scope(pair, left.columns + right.columns, types, outer)

    def _equi_keys(self, e: Expression | None, nleft: int, left: Relation, right: Relation) -> list[tuple[str, str, bool]]:
        """``(left column, right column, null-safe)`` for the equality conjuncts of a join condition."""
        if e is None:
            return []
        out = []
        for c in conjuncts(e, self.functions):
            name = function_name(c, self.functions)
            if name not in ("equal", "is_not_distinct_from"):
                continue
            args = call_args(c)
            if args is None or len(args) != 2:
                continue
            a, b = field_index(args[0]), field_index(args[1])
            if a is None or b is None:
                continue
            if a >= nleft > b:
                a, b = b, a
            if a < nleft <= b < nleft + len(right.columns):
                out.append((left.columns[a], right.columns[b - nleft], name == "is_not_distinct_from"))
        return out

    def _rel_join(self, body, bpath: str, outer: Scope | None) -> Relation:
        left, right = self._join_inputs(body, bpath, outer)
        jt = _join_type(body, bpath)
        cond, refs, equi = None, set(), []
        if body.HasField("expression"):
            scope = self._pair_scope(left, right, outer)
            cond = self.expr(body.expression, scope, f"{bpath}.expression")
            refs = referenced_fields(body.expression)
            equi = self._equi_keys(body.expression, len(left.columns), left, right)
            keys_only = len(equi) == len(conjuncts(body.expression, self.functions))
        else:
            keys_only = False
        return self._join(left, right, jt, cond, refs, equi, body, bpath, outer, keys_only=keys_only)

    def _rel_cross(self, body, bpath: str, outer: Scope | None) -> Relation:
        left, right = self._join_inputs(body, bpath, outer)
        ldf = F.broadcast(left.df) if left.broadcast else left.df
        rdf = F.broadcast(right.df) if right.broadcast else right.df
        types = left.types + right.types if left.types is not None and right.types is not None else None
        return Relation(ldf.crossJoin(rdf), left.columns + right.columns, types)

    def _join(
        self,
        left: Relation,
        right: Relation,
        jt: str,
        cond: Col | None,
        refs: set[int],
        equi: list[tuple[str, str, bool]],
        body,
        bpath: str,
        outer: Scope | None,
        hint: Callable[[Frame, Frame], tuple[Frame, Frame]] | None = None,
        sides_done: bool = False,
        unknown_cond: Col | None = None,
        keys_only: bool = False,
    ) -> Relation:
        """``unknown_cond``: the condition whose NULL makes a mark join's mark NULL, when ``cond`` has
        been rewritten so that it is never NULL (default: ``cond``). ``keys_only``: the condition is
        exactly the conjunction of the ``equi`` comparisons."""
        ldf, rdf = left.df, right.df
        if hint is not None:
            ldf, rdf = hint(ldf, rdf)
        if not sides_done:
            ldf = F.broadcast(ldf) if left.broadcast else ldf
            rdf = F.broadcast(rdf) if right.broadcast else rdf
        lt, rt = left.types, right.types
        both = lt + rt if lt is not None and rt is not None else None
        nleft = len(left.columns)
        simple = {"inner": "inner", "outer": "full", "left": "left", "right": "right"}
        if jt in simple:
            if cond is None and jt == "inner":
                df = ldf.crossJoin(rdf)
            else:
                df = ldf.join(rdf, cond if cond is not None else F.lit(True), simple[jt])
            out = Relation(df, left.columns + right.columns, both)
        elif jt in ("left_semi", "left_anti"):
            df = self._semi_as_in(ldf, rdf, [(a, b) for a, b, _ in equi], equi, keys_only and hint is None and not (left.broadcast or right.broadcast), jt)
            if df is None:
                df = ldf.join(rdf, cond if cond is not None else F.lit(True), jt)
            out = Relation(df, list(left.columns), lt)
        elif jt in ("right_semi", "right_anti"):
            df = self._semi_as_in(rdf, ldf, [(b, a) for a, b, _ in equi], equi, keys_only and hint is None and not (left.broadcast or right.broadcast), jt)
            if df is None:
                df = rdf.join(ldf, cond if cond is not None else F.lit(True), "left_" + jt.split("_")[1])
            out = Relation(df, list(right.columns), rt)
        elif jt in ("left_single", "right_single"):
            keep_left = jt == "left_single"
            keep_refs = [
                (left.columns[i] if keep_left else right.columns[i - nleft])
                for i in sorted(refs)
                if (i < nleft) == keep_left and i < nleft + len(right.columns)
            ]
            df = self._single(ldf, rdf, keep_left, cond, keep_refs, left.columns + right.columns, bpath)
            out = Relation(df, left.columns + right.columns, both)
        elif jt in ("left_mark", "right_mark"):
            keep_left = jt == "left_mark"
            keep, other = (ldf, rdf) if keep_left else (rdf, ldf)
            keep_cols = left.columns if keep_left else right.columns
            keep_refs = [
                (left.columns[i] if keep_left else right.columns[i - nleft])
                for i in sorted(refs)
                if (i < nleft) == keep_left and i < nleft + len(right.columns)
            ]
            pairs = [(a, b, ns) if keep_left else (b, a, ns) for a, b, ns in equi]
            mark = self.fresh()
            df = self._mark(keep, keep_cols, other, cond, keep_refs, pairs, mark,
                            unknown_cond if unknown_cond is not None else cond, keys_only=keys_only)
            kt = lt if keep_left else rt
            out = Relation(df, list(keep_cols) + [mark], kt + [_BOOL] if kt is not None else None)
        else:  # pragma: no cover - _join_type only returns the names above
            raise UnsupportedError(f"join type '{jt}' is not supported", f"{bpath}.type")
        if "post_join_filter" in body.DESCRIPTOR.fields_by_name and body.HasField("post_join_filter"):
            scope = self.scope(out, outer)
            out = replace(out, df=out.df.filter(self.expr(body.post_join_filter, scope, f"{bpath}.post_join_filter")))
        return out

    @staticmethod
    def _semi_as_in(keep, other, pairs: list[tuple[str, str]], equi, allowed: bool, jt: str):
        """A semi join on key equalities alone, as SQL text ``(keys) IN (SELECT keys FROM other)``, or None.

        Equivalent in a filter: a row whose keys match no row of ``other`` (a NULL key matches nothing)
        gets FALSE or NULL from IN and is dropped, as the semi join drops it. Why: Spark infers an
        IN-subquery filter across equi-joins and pushes it below aggregates (its plan for TPC-H Q20
        aggregates only the lineitem rows of the parts the query keeps); a semi join it leaves alone.
        Not for anti joins (NOT IN differs on NULLs), null-safe keys, hints or broadcast sides, and only
        when ``other`` is a filtered table (see below).
        """
        if (
            not allowed
            or not jt.endswith("_semi")
            or not pairs
            or any(null_safe for _, _, null_safe in equi)
        ):
            return None
        haystack = other.select(*[_c(b) for _, b in pairs])
        if not _is_filtered_scan(haystack):
            # Spark copies an inferred IN filter to every input it reaches, and computes its subquery
            # there again: worth it for a filtered table, not for a join or an aggregate (TPC-H Q2's
            # semi join with its min() subquery ran 1.7x slower that way).
            return None
        needles = F.struct(*[_c(a) for a, _ in pairs]) if len(pairs) > 1 else _c(pairs[0][0])
        return keep.filter(needles.isin(haystack))

    def _null_safe_join_back(self, df: Frame, keys: list[str], other: Frame, other_keys: list[str]) -> Frame:
        cond = _and([_c(a).eqNullSafe(_c(b)) for a, b in zip(keys, other_keys, strict=True)])
        return df.join(other, cond, "left")

    def _single(
        self,
        ldf: Frame,
        rdf: Frame,
        keep_left: bool,
        cond: Col | None,
        keep_refs: list[str],
        columns: list[str],
        bpath: str,
    ) -> Frame:
        """Left (right) outer join that fails when a preserved row matches more than one other row."""
        keep, other = (ldf, rdf) if keep_left else (rdf, ldf)
        c = cond if cond is not None else F.lit(True)
        joined = ldf.join(rdf, c, "left" if keep_left else "right")
        n = self.fresh()
        if keep_refs:
            k = keep.select(*[_c(x) for x in keep_refs]).distinct()
            counts = k.join(other, c, "inner").groupBy(*[_c(x) for x in keep_refs]).agg(F.count(F.lit(1)).alias(n))
            renamed = [self.fresh() for _ in keep_refs]
            counts = counts.filter(_c(n) > 1).select(
                *[_c(a).alias(b) for a, b in zip(keep_refs, renamed, strict=True)], _c(n)
            )
            checked = self._null_safe_join_back(joined, keep_refs, counts, renamed)
        else:
            counts = other.agg(F.count(F.when(c, F.lit(1))).alias(n))
            checked = joined.crossJoin(counts)
        kept, other_side = ("left", "right") if keep_left else ("right", "left")
        message = f"{bpath}: {_SINGLE_MARKER} a row of the {kept} input ({kept} single join: the {other_side} input must match each row at most once)"
        check = F.when(_c(n) > 1, F.raise_error(F.lit(message))).otherwise(F.lit(True))
        return checked.filter(check).select(*[_c(x) for x in columns])

    def _mark(
        self,
        keep: Frame,
        keep_cols: list[str],
        other: Frame,
        cond: Col | None,
        keep_refs: list[str],
        equi: list[tuple[str, str, bool]],
        mark: str,
        unknown_cond: Col | None = None,
        keys_only: bool = False,
    ) -> Frame:
        """The preserved side plus the mark column (TRUE / NULL / FALSE, SQL three-valued).
        ``keys_only``: the condition is exactly the comparisons of ``equi``."""
        if keys_only and len(equi) == 1 and keep_refs == [equi[0][0]]:
            return self._key_mark(keep, keep_cols, other, equi[0], mark)
        c = cond if cond is not None else F.lit(True)
        unknown = unknown_cond.isNull() if unknown_cond is not None else c.isNull()
        if not keep_refs:
            t, u = self.fresh(), self.fresh()
            stats = other.agg(F.max(F.when(c, F.lit(1))).alias(t), F.max(F.when(unknown, F.lit(1))).alias(u))
            df = keep.crossJoin(stats)
            value = F.when(_c(t) == 1, F.lit(True)).when(_c(u) == 1, F.lit(None)).otherwise(F.lit(False))
            return df.select(*[_c(x) for x in keep_cols], value.cast("boolean").alias(mark))
        k = keep.select(*[_c(x) for x in keep_refs]).distinct()
        true_k = k.join(other, c, "left_semi")
        parts = []
        key_refs = [(a, b, ns) for a, b, ns in equi if a in keep_refs]
        if key_refs:
            keyeq = _and([_c(a).eqNullSafe(_c(b)) if ns else _c(a) == _c(b) for a, b, ns in key_refs])
            parts.append(k.join(other, keyeq & unknown, "left_semi"))
            plain = [(a, b) for a, b, ns in key_refs if not ns]
            if plain:
                parts.append(k.filter(_or([_c(a).isNull() for a, _ in plain])).join(other, unknown, "left_semi"))
                parts.append(k.join(other.filter(_or([_c(b).isNull() for _, b in plain])), unknown, "left_semi"))
        else:
            parts.append(k.join(other, unknown, "left_semi"))
        unknown_k = parts[0]
        for p in parts[1:]:
            unknown_k = unknown_k.union(p)
        tflag, uflag = self.fresh(), self.fresh()
        t_names = [self.fresh() for _ in keep_refs]
        u_names = [self.fresh() for _ in keep_refs]
        t_df = true_k.select(*[_c(a).alias(b) for a, b in zip(keep_refs, t_names, strict=True)], F.lit(True).alias(tflag))
        u_df = unknown_k.distinct().select(
            *[_c(a).alias(b) for a, b in zip(keep_refs, u_names, strict=True)], F.lit(True).alias(uflag)
        )
        df = self._null_safe_join_back(keep, keep_refs, t_df, t_names)
        df = self._null_safe_join_back(df, keep_refs, u_df, u_names)
        value = F.when(_c(tflag), F.lit(True)).when(_c(uflag), F.lit(None)).otherwise(F.lit(False))
        return df.select(*[_c(x) for x in keep_cols], value.cast("boolean").alias(mark))

    def _key_mark(self, keep: Frame, keep_cols: list[str], other: Frame, key: tuple[str, str, bool],
                  mark: str) -> Frame:
        """The mark of a join on one key ``a = b`` (``a`` of the preserved side): TRUE where some ``b``
        equals ``a``; else NULL where the comparison is NULL for some row of the other side (``a`` is
        NULL and that side has a row, or it has a NULL ``b``); else FALSE. With ``a <=> b`` it is never
        NULL.

        Written as a correlated ``EXISTS`` beside the two uncorrelated ones that tell NULL from FALSE,
        so that Spark plans an existence join (a broadcast hash join that keeps every row) and runs
        each uncorrelated ``EXISTS`` once, as a one-row subquery. Where the mark is a filter's
        condition (``WHERE mark OR ...``), NULL and FALSE both drop the row: Spark folds
        ``found OR CASE WHEN unknown THEN NULL ELSE FALSE END`` to ``found`` and the other two are
        not run (TPC-DS Q10, Q35)."""
        a, b, null_safe = key
        if null_safe:
            value = other.where(_c(b).eqNullSafe(_c(a).outer())).exists()
        else:
            found = other.where(_c(b) == _c(a).outer()).exists()
            unknown = (_c(a).isNull() & other.exists()) | other.where(_c(b).isNull()).exists()
            # EXISTS is never NULL: ``found OR (NULL if unknown else FALSE)`` is the mark.
            value = found | F.when(unknown, F.lit(None).cast(T.BooleanType())).otherwise(F.lit(False))
        return keep.select(*[_c(x) for x in keep_cols], value.cast("boolean").alias(mark))
