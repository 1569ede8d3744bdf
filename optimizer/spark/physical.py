"""Physical relations honoured on Spark: ``hash_join`` -> ``shuffle_hash`` on the build side
(``broadcast`` when the build input is an ``ExchangeRel`` broadcast), ``merge_join`` -> ``merge``,
``nested_loop_join`` -> the condition hidden from Spark's equi-key extraction and
``shuffle_replicate_nl`` or ``broadcast`` asked for; ``ExchangeRel`` -> ``repartition`` (or a
broadcast mark that the join above honours)."""

from __future__ import annotations

from dataclasses import replace

from substrait.proto import ComparisonJoinKey, HashJoinRel

from optimizer.errors import PlanError, UnsupportedError
from optimizer.expr_utils import referenced_fields
from optimizer.spark.expressions import Scope
from optimizer.spark.joins import _join_type, _JoinCompiler
from optimizer.spark.rel_compiler import Relation, _and, _c
from optimizer.spark.sql import Frame
from optimizer.spark.sql_columns import functions as F


class _PhysicalCompiler(_JoinCompiler):
    """Hash, merge and nested-loop joins and exchanges."""

    def _keys_condition(self, body, left: Relation, right: Relation, bpath: str, outer: Scope | None):
        """The condition of a hash or merge join: its keys AND its residual expression."""
        if not body.keys:
            raise PlanError("the join has no keys", f"{bpath}.keys")
        parts, refs, equi = [], set(), []
        nleft = len(left.columns)
        for i, key in enumerate(body.keys):
            kpath = f"{bpath}.keys[{i}]"
            li = self._ref_index(key.left, f"{kpath}.left")
            ri = self._ref_index(key.right, f"{kpath}.right")
            if not 0 <= li < nleft:
                raise PlanError(f"left key field {li} is out of range ({nleft} columns)", f"{kpath}.left")
            if not 0 <= ri < len(right.columns):
                raise PlanError(f"right key field {ri} is out of range ({len(right.columns)} columns)", f"{kpath}.right")
            lc, rc = left.columns[li], right.columns[ri]
            refs |= {li, nleft + ri}
            which = key.comparison.WhichOneof("inner_type")
            if which == "custom_function_reference":
                info = self.functions.get(key.comparison.custom_function_reference, f"{kpath}.comparison")
                raise UnsupportedError(f"join key comparison '{info.declared_name}' is not supported", f"{kpath}.comparison")
            simple = key.comparison.simple if which == "simple" else ComparisonJoinKey.SIMPLE_COMPARISON_TYPE_EQ
            if simple in (ComparisonJoinKey.SIMPLE_COMPARISON_TYPE_EQ, ComparisonJoinKey.SIMPLE_COMPARISON_TYPE_UNSPECIFIED):
                parts.append(_c(lc) == _c(rc))
                equi.append((lc, rc, False))
            elif simple == ComparisonJoinKey.SIMPLE_COMPARISON_TYPE_IS_NOT_DISTINCT_FROM:
                parts.append(_c(lc).eqNullSafe(_c(rc)))
                equi.append((lc, rc, True))
            elif simple == ComparisonJoinKey.SIMPLE_COMPARISON_TYPE_MIGHT_EQUAL:
                parts.append((_c(lc) == _c(rc)) | _c(lc).isNull() | _c(rc).isNull())
            else:
                raise UnsupportedError(f"join key comparison {simple} is not supported", f"{kpath}.comparison")
        if body.HasField("residual_expression"):
            scope = self._pair_scope(left, right, outer)
            parts.append(self.expr(body.residual_expression, scope, f"{bpath}.residual_expression"))
            refs |= referenced_fields(body.residual_expression)
        return _and(parts), refs, equi

    def _rel_hash_join(self, body, bpath: str, outer: Scope | None) -> Relation:
        left, right = self._join_inputs(body, bpath, outer)
        jt = _join_type(body, bpath)
        cond, refs, equi = self._keys_condition(body, left, right, bpath, outer)
        keys_only = len(equi) == len(body.keys) and not body.HasField("residual_expression")
        build_left = body.build_input == HashJoinRel.BUILD_INPUT_LEFT

        def hint(ldf: Frame, rdf: Frame) -> tuple[Frame, Frame]:
            if build_left:
                return (F.broadcast(ldf) if left.broadcast else ldf.hint("shuffle_hash")), rdf
            return ldf, (F.broadcast(rdf) if right.broadcast else rdf.hint("shuffle_hash"))

        return self._join(left, right, jt, cond, refs, equi, body, bpath, outer, hint=hint, sides_done=True,
                          keys_only=keys_only)

    def _rel_merge_join(self, body, bpath: str, outer: Scope | None) -> Relation:
        left, right = self._join_inputs(body, bpath, outer)
        jt = _join_type(body, bpath)
        cond, refs, equi = self._keys_condition(body, left, right, bpath, outer)
        keys_only = len(equi) == len(body.keys) and not body.HasField("residual_expression")
        return self._join(
            left, right, jt, cond, refs, equi, body, bpath, outer, hint=lambda ldf, rdf: (ldf.hint("merge"), rdf),
            sides_done=True, keys_only=keys_only,
        )

    def _rel_nested_loop_join(self, body, bpath: str, outer: Scope | None) -> Relation:
        left, right = self._join_inputs(body, bpath, outer)
        jt = _join_type(body, bpath)
        cond, refs = None, set()
        if body.HasField("expression"):
            scope = self._pair_scope(left, right, outer)
            cond = self.expr(body.expression, scope, f"{bpath}.expression")
            refs = referenced_fields(body.expression)
        # greatest(c, false) is c for matching purposes (NULL -> no match) but is no conjunction of
        # equalities, so Spark cannot turn the join into a hash or sort-merge join. It is never NULL:
        # a mark join's NULL ("unknown") is told from the condition as written.
        written = cond
        cond = F.greatest(cond if cond is not None else F.lit(True), F.lit(False))

        def hint(ldf: Frame, rdf: Frame) -> tuple[Frame, Frame]:
            if left.broadcast:
                return F.broadcast(ldf), rdf
            if jt == "inner" and not right.broadcast:
                return ldf.hint("shuffle_replicate_nl"), rdf
            return ldf, F.broadcast(rdf)

        return self._join(left, right, jt, cond, refs, [], body, bpath, outer, hint=hint, sides_done=True,
                          unknown_cond=written)

    # ---------------------------------------------------------------------------------- exchange

    def _rel_exchange(self, body, bpath: str, outer: Scope | None) -> Relation:
        inp = self.rel(body.input, f"{bpath}.input", outer)
        kind = body.WhichOneof("exchange_kind")
        n = body.partition_count if body.partition_count > 0 else None
        if kind == "broadcast":
            return replace(inp, broadcast=True)
        if inp.ordered or kind == "multi_target":
            # Repartitioning would lose the input's order (Substrait keeps it); multi-bucket routing
            # has no Spark equivalent. The result is the same without the exchange.
            return replace(inp, broadcast=False)
        if n is None:
            n = int(self.spark.conf.get("spark.sql.shuffle.partitions", "8"))
        if kind == "scatter_by_fields":
            cols = []
            for i, ref in enumerate(body.scatter_by_fields.fields):
                idx = self._ref_index(ref, f"{bpath}.scatter_by_fields.fields[{i}]")
                if not 0 <= idx < len(inp.columns):
                    raise PlanError(f"field {idx} is out of range", f"{bpath}.scatter_by_fields.fields[{i}]")
                cols.append(_c(inp.columns[idx]))
            df = inp.df.repartition(n, *cols) if cols else inp.df.repartition(n)
        elif kind == "round_robin":
            df = inp.df.repartition(n)
        elif kind == "single_target":
            scope = self.scope(inp, outer)
            bucket = self.expr(body.single_target.expression, scope, f"{bpath}.single_target.expression")
            b = self.fresh()  # Spark's REPARTITION hint takes column names
            with_bucket = inp.df.select(*[_c(c) for c in inp.columns], bucket.alias(b))
            df = with_bucket.repartition(n, _c(b)).select(*[_c(c) for c in inp.columns])
        elif kind is None:
            raise PlanError("exchange kind is not set", bpath)
        else:
            raise UnsupportedError(f"exchange kind '{kind}' is not supported", f"{bpath}.{kind}")
        return replace(inp, df=df, broadcast=False)
