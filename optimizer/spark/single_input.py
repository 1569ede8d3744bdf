"""The relations over one input -> Spark: filter, project, sort, fetch, top-N, expand and
``ConsistentPartitionWindowRel``."""

from __future__ import annotations

from dataclasses import replace

from substrait.proto import FetchMode

from optimizer.errors import ExecutionError, PlanError, UnsupportedError
from optimizer.expr_utils import has_window_function
from optimizer.spark.expressions import Scope
from optimizer.spark.rel_compiler import Relation, _c, _RelCompiler
from optimizer.spark.sql import Frame
from optimizer.spark.sql_columns import Col, Window
from optimizer.spark.sql_columns import functions as F


def _offset_limit(df: Frame, offset: int, count: int | None) -> Frame:
    """``df`` without its first ``offset`` rows, then at most ``count`` of them (None: all)."""
    if offset:
        df = df.offset(offset)
    return df.limit(count) if count is not None else df


_SPARK_INT_MAX = 2**31 - 1  # Spark's LIMIT and OFFSET take an int


class _SingleInputCompiler(_RelCompiler):
    """Filter, project, sort, fetch, top-N, expand and window relations."""

    def _rel_filter(self, body, bpath: str, outer: Scope | None) -> Relation:
        inp = self.rel(body.input, f"{bpath}.input", outer)
        if not body.HasField("condition"):
            raise PlanError("filter has no condition", bpath)
        cond = self.expr(body.condition, self.scope(inp, outer), f"{bpath}.condition")
        return replace(inp, df=inp.df.filter(cond), broadcast=False)

    def _rel_project(self, body, bpath: str, outer: Scope | None) -> Relation:
        inp = self.rel(body.input, f"{bpath}.input", outer)
        scope = self.scope(inp, outer)
        exprs: dict[str, Col] = {}
        has_window = False
        for i, e in enumerate(body.expressions):
            has_window = has_window or has_window_function(e, enter_subqueries=False)
            exprs[self.fresh()] = self.expr(e, scope, f"{bpath}.expressions[{i}]")
        # A project keeps its input's order (the spec); Spark computes window functions in an order of its
        # own, so a sorted input's rows are numbered first and put back in that order after.
        position = self.fresh() if has_window and inp.ordered else None
        source = inp.df if position is None else inp.df.select(
            *[_c(c) for c in inp.columns], F.monotonically_increasing_id().alias(position))
        ordered = inp.ordered

        def in_order(df, names: list[str]):
            if position is None:
                return df
            return df.orderBy(_c(position)).select(*[_c(n) for n in names])

        extra = [_c(position)] if position is not None else []
        columns = inp.columns + list(exprs)
        emit = body.common.emit.output_mapping if body.common.WhichOneof("emit_kind") == "emit" else None
        if emit is not None and all(  # a computed column emitted twice is computed once, below
            sum(1 for p in emit if p == q) == 1 for q in set(emit) if 0 <= q < len(columns) and columns[q] in exprs
        ):
            # Only the emitted columns, in one select (the others are never computed).
            mapping = list(body.common.emit.output_mapping)
            cols, names = self._positions(
                columns, exprs, mapping, f"{bpath}.common.emit.output_mapping", "emitted field"
            )
            if names == inp.columns:
                return replace(inp, ordered=ordered)
            return Relation(in_order(source.select(*cols, *extra), names), names, None, ordered=ordered)
        df = source.select(*[_c(c) for c in inp.columns], *[c.alias(n) for n, c in exprs.items()], *extra)
        return self._emit(Relation(in_order(df, columns), columns, None, ordered=ordered), body, bpath)

    def _rel_sort(self, body, bpath: str, outer: Scope | None) -> Relation:
        inp = self.rel(body.input, f"{bpath}.input", outer)
        if not body.sorts:
            return inp
        scope = self.scope(inp, outer)
        orders = [self.exprs.sort_order(s, scope, f"{bpath}.sorts[{i}]") for i, s in enumerate(body.sorts)]
        return replace(inp, df=inp.df.orderBy(*orders), broadcast=False, ordered=True)

    def _fetch_bounds(self, body, bpath: str, names: tuple[str, str]) -> tuple[int, int | None]:
        """``(offset, count)`` of a FetchRel or TopNRel, whose bound fields are named ``names``."""
        offset_expr = getattr(body, names[0]) if body.HasField(names[0]) else None
        count_expr = getattr(body, names[1]) if body.HasField(names[1]) else None
        offset = 0
        if offset_expr is not None:
            value = self._const_int(offset_expr, f"{bpath}.{names[0]}", "offset")
            if value is not None and value < 0:
                raise ExecutionError(f"offset is negative ({value})", f"{bpath}.{names[0]}")
            if value is not None and value > _SPARK_INT_MAX:
                raise UnsupportedError(f"offset {value} is above Spark's largest OFFSET ({_SPARK_INT_MAX})",
                                       f"{bpath}.{names[0]}")
            offset = value or 0
        count = None
        if count_expr is not None:
            count = self._const_int(count_expr, f"{bpath}.{names[1]}", "count")
            if count == -1:  # the old encoding's "all rows"
                count = None
            elif count is not None and count < 0:
                raise ExecutionError(f"count is negative ({count})", f"{bpath}.{names[1]}")
            elif count is not None and count > _SPARK_INT_MAX:
                # Spark's LIMIT is an int: capped, the same answer for any result Spark can collect.
                count = _SPARK_INT_MAX
        return offset, count

    def _rel_fetch(self, body, bpath: str, outer: Scope | None) -> Relation:
        inp = self.rel(body.input, f"{bpath}.input", outer)
        offset, count = self._fetch_bounds(body, bpath, ("offset_expr", "count_expr"))
        return replace(inp, df=_offset_limit(inp.df, offset, count), broadcast=False)

    def _rel_top_n(self, body, bpath: str, outer: Scope | None) -> Relation:
        inp = self.rel(body.input, f"{bpath}.input", outer)
        offset, count = self._fetch_bounds(body, bpath, ("offset", "count"))
        scope = self.scope(inp, outer)
        orders = [self.exprs.sort_order(s, scope, f"{bpath}.sorts[{i}]") for i, s in enumerate(body.sorts)]
        df = inp.df
        if body.mode == FetchMode.FETCH_MODE_WITH_TIES and count is not None:
            if not orders:
                raise PlanError("WITH TIES needs sort fields", f"{bpath}.sorts")
            window = Window.orderBy(*orders)
            rn, rk = self.fresh(), self.fresh()
            df = df.select(*[_c(c) for c in inp.columns], F.row_number().over(window).alias(rn), F.rank().over(window).alias(rk))
            df = df.filter((_c(rn) > offset) & (_c(rk) <= offset + count)).orderBy(*[_c(rn)]).select(*[_c(c) for c in inp.columns])
            return replace(inp, df=df, broadcast=False, ordered=True)
        df = _offset_limit(df.orderBy(*orders) if orders else df, offset, count)
        return replace(inp, df=df, broadcast=False, ordered=bool(orders))

    # ------------------------------------------------------------------------------ expand, window

    def _rel_expand(self, body, bpath: str, outer: Scope | None) -> Relation:
        inp = self.rel(body.input, f"{bpath}.input", outer)
        scope = self.scope(inp, outer)
        n_dups = max(
            [len(f.switching_field.duplicates) for f in body.fields if f.WhichOneof("field_type") == "switching_field"],
            default=1,
        )
        names = [self.fresh() for _ in body.fields]
        compiled: list[list[Col | None]] = []
        for i, f in enumerate(body.fields):
            fpath = f"{bpath}.fields[{i}]"
            which = f.WhichOneof("field_type")
            if which == "consistent_field":
                c = self.expr(f.consistent_field, scope, f"{fpath}.consistent_field")
                compiled.append([c] * n_dups)
            elif which == "switching_field":
                dups = [
                    self.expr(d, scope, f"{fpath}.switching_field.duplicates[{j}]")
                    for j, d in enumerate(f.switching_field.duplicates)
                ]
                compiled.append(dups + [None] * (n_dups - len(dups)))
            else:
                raise PlanError("expand field is neither a switching nor a consistent field", fpath)
        frames = []
        for d in range(n_dups):
            cols = [(row[d] if row[d] is not None else F.lit(None)).alias(names[i]) for i, row in enumerate(compiled)]
            frames.append(inp.df.select(*cols))
        df = frames[0]
        for f in frames[1:]:
            df = df.union(f)
        return Relation(df, names)

    def _rel_window(self, body, bpath: str, outer: Scope | None) -> Relation:
        inp = self.rel(body.input, f"{bpath}.input", outer)
        scope = self.scope(inp, outer)
        new, names = [], []
        for i, wf in enumerate(body.window_functions):
            col = self.exprs.window(wf, body.partition_expressions, body.sorts, scope, f"{bpath}.window_functions[{i}]")
            name = self.fresh()
            new.append(col.alias(name))
            names.append(name)
        columns = inp.columns + names
        if not inp.ordered:
            return Relation(inp.df.select(*[_c(c) for c in inp.columns], *new), columns)
        # The window functions of a project this relation stands for keep the input's order (as a
        # project does): the rows are numbered first and put back in that order after.
        position = self.fresh()
        numbered = inp.df.select(*[_c(c) for c in inp.columns], F.monotonically_increasing_id().alias(position))
        df = numbered.select(*[_c(c) for c in inp.columns], *new, _c(position))
        return Relation(df.orderBy(_c(position)).select(*[_c(c) for c in columns]), columns, ordered=True)
