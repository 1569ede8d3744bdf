"""Cardinality estimation: rows, row width and per-column statistics of every relation of a plan DAG.

:class:`CardinalityEstimator` ``(g, statistics, functions)`` walks the DAG of :mod:`optimizer.dag`
children first and gives each node a :class:`RelEstimate`: ``rows``, ``width`` (bytes per row) and
one :class:`ColumnEstimate` per output column (``ndv``, ``min``, ``max``, ``null_fraction``,
``avg_len``, ``histogram``) carried through every operator. The estimator is the handler of rows and
columns, tables, selectivities, schemas and row sizes of a :class:`~cost.metadata.MetadataQuery`
(``metadata``), which keeps every relation's values in one cache;
:meth:`~CardinalityEstimator.invalidate` forgets those a rewrite made stale (the engine calls it after each
rewrite). Joins and set operations are estimated by its part :class:`~cost.join_estimates.JoinEstimates`,
predicates by :class:`~cost.selectivity.PredicateSelectivity`.

The formulas, their assumptions (uniformity within a histogram bin, independence of predicates,
containment of join keys) and the default selectivities used when nothing is known are listed in
``docs/cost-model.md``. The estimator never raises on a plan it does not understand: an unknown
relation or function gets a default estimate.

Values are compared in the float domain of :func:`cost.statistics.to_numeric` (dates are days since
1970-01-01, timestamps microseconds, decimals floats); strings are compared as strings.

>>> from optimizer.plan_io import load_plan
>>> from optimizer.dag import to_dag
>>> from optimizer.cost.providers import MemoryStatistics
>>> from optimizer.cost.statistics import ColumnStatistics, TableStatistics
>>> plan = load_plan('''{"relations": [{"root": {"input": {"filter": {
...   "input": {"read": {"namedTable": {"names": ["t"]},
...                      "baseSchema": {"names": ["x"], "struct": {"types": [{"i64": {}}]}}}},
...   "condition": {"scalarFunction": {"functionReference": 1, "arguments": [
...       {"value": {"selection": {"directReference": {"structField": {"field": 0}}}}},
...       {"value": {"literal": {"i64": "5"}}}]}}}}, "names": ["x"]}}],
...   "extensions": [{"extensionFunction": {"functionAnchor": 1, "name": "equal"}}]}''')
>>> g = to_dag(plan)
>>> stats = MemoryStatistics({"t": TableStatistics(row_count=1000, columns={"x": ColumnStatistics(ndv=10, min=1, max=10)})})
>>> est = CardinalityEstimator(g, stats)
>>> root = g.graph["roots"][0]["node"]
>>> est.estimate(root).rows, est.estimate(root).columns[0].ndv
(100.0, 1.0)
"""

from __future__ import annotations

import logging
import math
from collections.abc import Iterable, Sequence
from typing import Any

import networkx as nx
from optimizer.cost import spark_size
from optimizer.cost.estimates import (
    COMPARISONS,
    DEFAULT_GROUP_FRACTION,
    DEFAULT_TABLE_ROWS,
    INTEGRAL_KINDS,
    NOT_LITERAL,
    SPARK_INTEGRAL_TYPES,
    TEXT_KINDS,
    UNIQUE_KEY_FRACTION,
    ColumnEstimate,
    RelEstimate,
    cap_column,
    evolve,
    expected_groups,
    literal_of,
    scale_column,
    type_width,
)
from optimizer.cost.join_estimates import JoinEstimates
from optimizer.cost.metadata import (
    DISTRIBUTION,
    FILTER_STEPS,
    LEARNED,
    ROW_SIZE,
    ROWS,
    SCHEMA,
    SELECTIVITY,
    TABLE,
    MetadataQuery,
)
from optimizer.cost.parquet_footers import local_files_statistics
from optimizer.cost.providers import StatisticsProvider, read_hint
from optimizer.cost.selectivity import (
    PredicateSelectivity,
    column_moments,
)
from optimizer.cost.statistics import ColumnStatistics, TableStatistics
from substrait.proto import Expression, Rel, SetRel, Type

from optimizer.dag import inputs
from optimizer.errors import OptimizerError, PlanError
from optimizer.expr_utils import (
    call_args,
    conjuncts,
    field_index,
    has_outer_refs,
    join_type_name,
    resolved_fields,
)
from optimizer.load.functions import FunctionTable
from optimizer.schema.types import is_nullable, type_kind

log = logging.getLogger(__name__)

# --------------------------------------------------------------------------------------------------
# The estimator
# --------------------------------------------------------------------------------------------------


def _columns_read(read: Any) -> set[int] | None:
    """The columns of a ``ReadRel``'s table its projection keeps and its filters read (None: all of them,
    or unknown). Only these are estimated: no other column reaches the read's output or its filters'
    selectivities, and a wide table's others would be estimated, then thinned out by every conjunct,
    for nothing."""
    if not read.HasField("projection"):
        return None
    out = {item.field for item in read.projection.select.struct_items}
    for condition in filter_conditions("read", read).values():
        fields = resolved_fields(condition)
        if fields is None:
            return None
        out |= fields
    return out


def filter_conditions(kind: str, body: Any) -> dict[str, Expression]:
    """The conditions a relation filters its rows by, in the order they apply, by field name: a
    ``FilterRel``'s ``condition``; a ``ReadRel``'s ``filter``, then ``best_effort_filter``; none for
    other relations."""
    names = {"filter": ("condition",), "read": ("filter", "best_effort_filter")}.get(kind, ())
    return {n: getattr(body, n) for n in names if body.HasField(n)}


class CardinalityEstimator(JoinEstimates, PredicateSelectivity):
    """Estimates of every node of a plan DAG; see the module docstring.

    ``statistics`` is a :class:`~cost.statistics.StatisticsProvider` (or ``None``: defaults and hints
    only); ``functions`` the plan's :class:`~optimizer.load.functions.FunctionTable` (the DAG's,
    ``g.graph["functions"]``, when not given).
    """

    def __init__(self, g: nx.DiGraph, statistics: StatisticsProvider | None = None,
                 functions: FunctionTable | None = None, metadata: MetadataQuery | None = None) -> None:
        #: the query object that keeps every relation's metadata (:mod:`cost.metadata`): this estimator
        #: is its handler of rows and columns, tables, selectivities, schemas and row sizes
        self.metadata = metadata if metadata is not None else MetadataQuery(g, statistics, functions)
        self.g = self.metadata.g
        self.statistics = self.metadata.statistics
        self._rows = self.metadata.entries(ROWS)
        self.metadata.serve(self, self._HANDLERS)

    #: the kinds of :mod:`cost.metadata` this estimator computes, by method
    _HANDLERS = {ROWS: "estimate", TABLE: "_table_estimate", SELECTIVITY: "_marginal_selectivities",
                 SCHEMA: "_derive_schema", ROW_SIZE: "_derive_row_size", LEARNED: "_learned_key"}

    # -- public ---------------------------------------------------------------------------------------

    @property
    def functions(self) -> FunctionTable:
        """The plan's function table (the query's)."""
        return self.metadata.functions

    @functions.setter
    def functions(self, table: FunctionTable) -> None:
        self.metadata.functions = table

    @property
    def distributions(self) -> dict[int, Any]:
        """:func:`cost.properties.distribution` of the relations, kept and forgotten as their estimates are."""
        return self.metadata.entries(DISTRIBUTION)

    def fork(self, g: nx.DiGraph) -> CardinalityEstimator:
        """An estimator for ``g``, a copy of this one's DAG as it is now (:func:`optimizer.dag.copy_dag`),
        that starts with the estimates known so far (:meth:`cost.metadata.MetadataQuery.fork`)."""
        return CardinalityEstimator(g, metadata=self.metadata.fork(g))

    def invalidate(self, changed: int | None = None, replaced: int | None = None) -> None:
        """Forget every estimate, or those of the relations that read ``changed``, the relation put in
        the place of ``replaced`` (:meth:`cost.metadata.MetadataQuery.invalidate`)."""
        self.metadata.invalidate(changed, replaced)

    def needed(self, node: int) -> set[int] | None:
        """The output columns of ``node`` something above reads (:mod:`cost.needed_columns`; None:
        unknown, all count)."""
        return self.metadata.needed(node)

    def same_needs(self, candidate: int, replaced: int) -> None:
        """Price ``candidate`` (a new relation nothing reads yet) as read like ``replaced``."""
        self.metadata.same_needs(candidate, replaced)

    def estimate(self, node: int) -> RelEstimate:
        """The estimate of ``node`` (computed children first, kept)."""
        self.metadata.renew_needs()
        memo = self._rows
        found = memo.get(node)
        if found is not None:
            return found
        # Children first, down to the relations estimated already: what they read was estimated
        # before them (and, if forgotten since, is estimated when asked for).
        succ = self.g.succ
        seen = {node}
        stack = [(node, iter(succ[node]))]
        while stack:
            n, below = stack[-1]
            for c in below:
                if c not in seen and c not in memo:
                    seen.add(c)
                    stack.append((c, iter(succ[c])))
                    break
            else:
                stack.pop()
                memo[n] = self._compute(n)
        return memo[node]

    def rows(self, node: int) -> float:
        return self.estimate(node).rows

    # -- per node -------------------------------------------------------------------------------------

    def _compute(self, node: int) -> RelEstimate:
        data = self.g.nodes[node]
        kind = data.get("kind")
        rel: Rel = data.get("rel")
        memo = self._rows
        children = [memo[c] if c in memo else self.estimate(c) for c in inputs(self.g, node)]
        try:
            handler = getattr(self, f"_rel_{kind}", None)
            est = handler(node, getattr(rel, kind), children) if handler is not None else self._default(node, children)
            est = self._emit(rel, kind, est)
        except OptimizerError as e:  # a relation the schema or function rules refuse: default estimate
            log.debug("cardinality: default estimate for node %s (%s): %s", node, kind, e, exc_info=True)
            est = self._default(node, children)
        est = self._hinted(rel, est)
        if self.metadata.learned is not None:
            est = self._learned(node, est)
        est = self._finish(node, est)
        return evolve(est, spark_bytes=self._spark_bytes(node, kind, rel, est, children))

    def _spark_bytes(self, node: int, kind: str | None, rel: Rel, est: RelEstimate,
                     children: list[RelEstimate]) -> float | None:
        """Spark's own size of the relation (:mod:`cost.spark_size`); None where a size it starts from
        (a table's files, an input's size) or a type is unknown."""
        if self._schema_of(node) is None or kind is None:
            return None
        body = getattr(rel, kind)
        if kind == "read":
            which = body.WhichOneof("read_type")
            if which == "virtual_table":
                return est.rows * self._row_size(node)
            table = None
            if which == "named_table" and self.statistics is not None:
                table = self.statistics.table(list(body.named_table.names))
            elif which == "local_files":
                table = local_files_statistics(body.local_files, getattr(self.statistics, "files", None))
            if table is None or table.file_bytes is None:
                return None
            return table.file_bytes * self._row_size(node) / spark_size.row_size(body.base_schema.struct.types)
        sizes = [c.spark_bytes for c in children]
        if not sizes or any(s is None for s in sizes):
            return None
        if kind in ("join", "hash_join", "merge_join", "nested_loop_join", "lateral_join") and len(sizes) == 2:
            return spark_size.join_size(join_type_name(body), sizes[0], sizes[1])
        if kind == "cross" and len(sizes) == 2:
            return spark_size.join_size("INNER", sizes[0], sizes[1])
        if kind == "set":
            return spark_size.set_size(SetRel.SetOp.Name(body.op), sizes)
        if len(sizes) != 1:
            return None
        child = inputs(self.g, node)[0]
        if self._schema_of(child) is None:
            return None
        if kind == "aggregate" and not any(len(grouping.expression_references) for grouping in body.groupings):
            return self._row_size(node)  # one row
        if kind in ("fetch", "top_n"):
            _, count = top_n_bounds(body) if kind == "top_n" else _literal_bounds(
                None, body.count_expr if body.HasField("count_expr") else None)
            if count is not None:
                return count * self._row_size(node)
        # spark_size.scaled, with the row sizes kept per relation
        return sizes[0] * self._row_size(node) / self._row_size(child)

    def _row_size(self, node: int) -> float:
        """:func:`cost.spark_size.row_size` of ``node``'s output (whose schema is known)."""
        return self.metadata.get(ROW_SIZE, node)

    def _derive_row_size(self, node: int) -> float:
        return spark_size.row_size(self._schema_of(node).types)

    def _emit(self, rel: Rel, kind: str, est: RelEstimate) -> RelEstimate:
        body = getattr(rel, kind)
        if "common" not in body.DESCRIPTOR.fields_by_name or not body.HasField("common"):
            return est
        if body.common.WhichOneof("emit_kind") != "emit":
            return est
        cols = est.columns
        picked = [cols[i] if 0 <= i < len(cols) else None for i in body.common.emit.output_mapping]
        return evolve(est, columns=picked)

    def _hinted(self, rel: Rel, est: RelEstimate) -> RelEstimate:
        hint = None
        if self.statistics is not None:
            hint = self.statistics.relation_hint(rel)
        if hint is None:
            hint = read_hint(rel)
        if hint is None:
            return est
        rows, size = hint
        fraction = rows / est.rows if est.rows > 0 else 1.0
        cols = [scale_column(c, est.rows, min(fraction, 1.0), rows) for c in est.columns]
        return evolve(est, rows=float(rows), width=float(size) if size else est.width, columns=cols, source="hint")

    def _learned(self, node: int, est: RelEstimate) -> RelEstimate:
        """``est`` with the rows the subtree at ``node`` produced when it ran, where the learned rows
        (:mod:`cost.learned`) know them: they win over the plan's hint and the estimate, and the
        relations above build on them (its columns' NDVs scaled as a hint's are)."""
        rows = self.metadata.learned.rows(self.metadata.get(LEARNED, node))
        if rows is None:
            return est
        fraction = rows / est.rows if est.rows > 0 else 1.0
        cols = [scale_column(c, est.rows, min(fraction, 1.0), rows) for c in est.columns]
        return evolve(est, rows=rows, columns=cols)

    def _learned_key(self, node: int):
        """The key of the subtree at ``node`` in the learned rows (None: it has none)."""
        children = inputs(self.g, node)
        below = [self.metadata.get(LEARNED, c) for c in children]
        if any(k is None for k in below):
            return None
        left = self._schema_of(children[0]) if children else None
        return self.metadata.learned.relation_key(self.g.nodes[node]["rel"], below, self.functions,
                                                  len(left.types) if left is not None else None,
                                                  [self.g.nodes[c]["rel"] for c in children])

    def _finish(self, node: int, est: RelEstimate) -> RelEstimate:
        rows = max(float(est.rows), 0.0)
        if math.isnan(rows) or math.isinf(rows):
            rows = DEFAULT_TABLE_ROWS
        schema = self._schema_of(node)
        types = schema.types if schema is not None and len(schema.types) == len(est.columns) else None
        # One pass: unknown columns get their type's defaults, NDVs are capped by the rows.
        cols: list[ColumnEstimate | None] = []
        for i, c in enumerate(est.columns):
            if types is not None:
                if c is None:
                    c = ColumnEstimate(avg_len=type_width(types[i]), null_fraction=None if is_nullable(types[i]) else 0.0)
                elif c.avg_len is None:
                    c = evolve(c, avg_len=type_width(types[i]))
            if c is not None and c.ndv is not None and not c.ndv <= rows:  # cap_column
                c = c.with_ndv(max(rows, 0.0))
            cols.append(c)
        if est.source == "hint" and est.width > 0:
            width = est.width
        else:
            needed = self.metadata.needed(node)
            width = sum((c.avg_len if c is not None and c.avg_len is not None else 8.0)
                        for i, c in enumerate(cols) if needed is None or i in needed)
        return evolve(est, rows=rows, width=max(width, 1.0), columns=cols)

    def filter_steps(self, node: int) -> tuple[list[Expression], list[float], list[Type] | None]:
        """A ``FilterRel``'s conjuncts (a ``ReadRel``'s: those of its ``filter`` and
        ``best_effort_filter``) in their order, each one's selectivity on the rows the ones before it
        let through, and the types of the columns they read (kept until the node or an input changes)."""
        recorded = self.metadata.entries(FILTER_STEPS)
        if node not in recorded:
            self.estimate(node)  # records them as it applies the conditions
        if node not in recorded:  # a relation the estimator could not follow: every row tested
            data = self.g.nodes[node]
            conditions = filter_conditions(data["kind"], getattr(data["rel"], data["kind"])).values()
            parts = [c for e in conditions for c in conjuncts(e, self.functions)]
            return parts, [1.0] * len(parts), None
        return recorded[node]

    def marginal_selectivities(self, node: int) -> list[float]:
        """Each conjunct of :meth:`filter_steps` on its own: its selectivity on all the rows the filter
        sees (the read's table, the filter's input), whatever its place (kept like those)."""
        return self.metadata.get(SELECTIVITY, node)

    def _marginal_selectivities(self, node: int) -> list[float]:
        parts, _, _ = self.filter_steps(node)
        if self.g.nodes[node]["kind"] == "read":
            est = self.table_estimate(node)
        else:
            (child,) = inputs(self.g, node)
            est = self.estimate(child)
        return [self.conjunct_selectivities([p], est)[0] for p in parts]

    def types_of(self, node: int) -> list[Type] | None:
        """The column types of ``node``'s output (None where they cannot be derived)."""
        return self._types(node)

    def _types(self, node: int) -> list[Type] | None:
        schema = self._schema_of(node)
        return list(schema.types) if schema is not None else None

    def _schema_of(self, node: int):
        return self.metadata.get(SCHEMA, node)

    def _derive_schema(self, node: int):
        schema = self.g.nodes[node].get("schema")
        if schema is None:
            try:
                from optimizer.schema import rel_schema

                child_schemas = [self._schema_of(c) for c in inputs(self.g, node)]
                if any(s is None for s in child_schemas):
                    return None
                data = self.g.nodes[node]
                schema = rel_schema(data["rel"], child_schemas, self.functions)
            except OptimizerError:  # a relation whose type cannot be derived: types unknown
                return None
        return schema

    def _default(self, node: int, children: list[RelEstimate]) -> RelEstimate:
        rows = max((c.rows for c in children), default=DEFAULT_TABLE_ROWS)
        types = self._types(node)
        n = len(types) if types is not None else (len(children[0].columns) if children else 0)
        return RelEstimate(rows, 8.0 * max(n, 1), [None] * n, source="default")

    # -- leaves -----------------------------------------------------------------------------------------

    def _rel_read(self, node: int, body, children) -> RelEstimate:
        est = self.table_estimate(node)
        if body.WhichOneof("read_type") == "virtual_table":  # its rows as written
            return est
        parts: list[Expression] = []
        sels: list[float] = []
        for condition in filter_conditions("read", body).values():
            parts += conjuncts(condition, self.functions)
            est = self.apply_filter(condition, est, sels)
        self.metadata.entries(FILTER_STEPS)[node] = (parts, sels, list(body.base_schema.struct.types))
        if body.HasField("projection"):
            picked = [item.field for item in body.projection.select.struct_items]
            est = evolve(est, columns=[est.columns[i] if 0 <= i < len(est.columns) else None for i in picked])
        return est

    def table_estimate(self, node: int) -> RelEstimate:
        """The estimate of a read's table before its filters and projection (its ``base_schema``'s
        columns): what ``ReadRel.filter`` is applied to (a virtual table: its rows as written)."""
        return self.metadata.get(TABLE, node)

    def _table_estimate(self, node: int) -> RelEstimate:
        body = self.g.nodes[node]["rel"].read
        base_types = list(body.base_schema.struct.types)
        names = list(body.base_schema.names)
        if len(names) != len(base_types):  # nested names: keep the top-level ones
            try:
                from optimizer.schema.record import Schema

                schema = Schema.from_named_struct(body.base_schema)
                names, base_types = list(schema.names), list(schema.types)
            except PlanError:  # names that do not match the types: keep the first ones
                names = names[: len(base_types)]
        which = body.WhichOneof("read_type")
        table: TableStatistics | None = None
        rows: float | None = None
        source = "derived"
        if which == "virtual_table":
            return self._virtual_table(node, body, names, base_types)
        if which == "named_table" and self.statistics is not None:
            table = self.statistics.table(list(body.named_table.names))
        elif which == "local_files":
            table = local_files_statistics(body.local_files, getattr(self.statistics, "files", None))
        if table is not None:
            rows = table.row_count
        if rows is None:
            rows = DEFAULT_TABLE_ROWS
            source = "default"
        read = _columns_read(body)
        cols: list[ColumnEstimate | None] = []
        for i, t in enumerate(base_types):
            if read is not None and i not in read:
                cols.append(None)
                continue
            cs = table.column(names[i]) if table is not None and i < len(names) else None
            cols.append(self._column_from_stats(cs, t, rows, (node, i)))
        return RelEstimate(rows, 0.0, cols, source=source)

    def _column_from_stats(self, cs: ColumnStatistics | None, t: Type, rows: float,
                           origin: tuple[int, int]) -> ColumnEstimate:
        kind = type_kind(t)
        integral = kind in INTEGRAL_KINDS
        if cs is None:
            return ColumnEstimate(null_fraction=None if is_nullable(t) else 0.0, avg_len=type_width(t),
                                  origin=origin, integral=integral)
        dtype = (cs.data_type or "").lower()
        if dtype:
            integral = dtype in SPARK_INTEGRAL_TYPES or (dtype.startswith("decimal(") and dtype.replace(" ", "").endswith(",0)"))
        lo, hi = cs.numeric_min, cs.numeric_max
        if lo is None and isinstance(cs.min, str):
            lo = cs.min
        if hi is None and isinstance(cs.max, str):
            hi = cs.max
        ndv = cs.ndv
        if ndv is None and integral and isinstance(lo, float) and isinstance(hi, float):
            ndv = min(rows, hi - lo + 1)
        if ndv is not None and rows > 0:
            ndv = min(ndv, rows)
        null_fraction = None
        if cs.null_count is not None and rows > 0:
            null_fraction = min(cs.null_count / rows, 1.0)
        elif not is_nullable(t):
            null_fraction = 0.0
        key_of = frozenset()
        if ndv is not None and rows > 0 and ndv >= UNIQUE_KEY_FRACTION * rows * (1 - (null_fraction or 0.0)):
            key_of = frozenset({origin[0]})
        return ColumnEstimate(
            ndv=ndv, min=lo, max=hi, null_fraction=null_fraction, domain=ndv,
            avg_len=cs.avg_len if cs.avg_len is not None else type_width(t),
            histogram=cs.histogram if cs.histogram is not None and cs.histogram.bins else None,
            origin=origin, key_of=key_of, integral=integral,
        )

    def _virtual_table(self, node: int, body, names, types) -> RelEstimate:
        rows = body.virtual_table.expressions
        n = len(types) if types else (len(rows[0].fields) if rows else 0)
        values: list[list[Any]] = [[] for _ in range(n)]
        for row in rows:
            for c, e in enumerate(row.fields[:n]):
                values[c].append(literal_of(e))
        cols: list[ColumnEstimate | None] = []
        for c in range(n):
            t = types[c] if c < len(types) else None
            vals = values[c]
            known = [v for v in vals if v is not NOT_LITERAL and v is not None]
            nulls = sum(1 for v in vals if v is None)
            col = ColumnEstimate(avg_len=type_width(t), origin=(node, c), integral=type_kind(t) in INTEGRAL_KINDS,
                                 null_fraction=nulls / len(vals) if vals else 0.0)
            if len(known) + nulls == len(vals):
                col.ndv = float(len(set(known)))
                same = {type(v) for v in known}
                if known and len(same) == 1:
                    col.min, col.max = min(known), max(known)
                if known and isinstance(known[0], str):
                    col.avg_len = sum(len(v) for v in known) / len(known)
            cols.append(col)
        return RelEstimate(float(len(rows)), 0.0, cols)

    # -- single-input relations -----------------------------------------------------------------------

    def _rel_filter(self, node, body, children) -> RelEstimate:
        sels: list[float] = []
        est = self.apply_filter(body.condition, children[0], sels)
        (child,) = inputs(self.g, node)
        self.metadata.entries(FILTER_STEPS)[node] = (conjuncts(body.condition, self.functions), sels, self._types(child))
        return est

    def _rel_sort(self, node, body, children) -> RelEstimate:
        return children[0]

    def _rel_exchange(self, node, body, children) -> RelEstimate:
        return children[0]

    def _rel_extension_single(self, node, body, children) -> RelEstimate:
        return children[0]

    def _rel_fetch(self, node, body, children) -> RelEstimate:
        child = children[0]
        offset, count = _literal_bounds(body.offset_expr if body.HasField("offset_expr") else None,
                                        body.count_expr if body.HasField("count_expr") else None)
        return self._limited(child, offset, count)

    def _rel_top_n(self, node, body, children) -> RelEstimate:
        offset, count = top_n_bounds(body)
        return self._limited(children[0], offset, count)

    def _limited(self, child: RelEstimate, offset: float, count: float | None) -> RelEstimate:
        rows = max(child.rows - offset, 0.0)
        if count is not None:
            rows = min(rows, count)
        fraction = rows / child.rows if child.rows > 0 else 0.0
        cols = [scale_column(c, child.rows, fraction, rows) for c in child.columns]
        return evolve(child, rows=rows, columns=cols)

    def _rel_project(self, node, body, children) -> RelEstimate:
        child = children[0]
        cols = list(child.columns)
        for e in body.expressions:
            cols.append(self.expression_column(e, child))
        return evolve(child, columns=cols)

    def _rel_window(self, node, body, children) -> RelEstimate:
        child = children[0]
        cols = list(child.columns) + [ColumnEstimate(ndv=None) for _ in body.window_functions]
        return evolve(child, columns=cols)

    def _rel_expand(self, node, body, children) -> RelEstimate:
        child = children[0]
        copies = 1
        cols: list[ColumnEstimate | None] = []
        for f in body.fields:
            which = f.WhichOneof("field_type")
            if which == "switching_field":
                dups = f.switching_field.duplicates
                copies = max(copies, len(dups))
                parts = [self.expression_column(d, child) for d in dups]
                ndvs = [p.ndv for p in parts if p is not None and p.ndv is not None]
                col = ColumnEstimate(ndv=sum(ndvs) + 1 if len(ndvs) == len(parts) and ndvs else None)
                cols.append(col)
            elif which == "consistent_field":
                c = self.expression_column(f.consistent_field, child)
                cols.append(evolve(c, origin=None) if c is not None else None)
            else:
                cols.append(None)
        return RelEstimate(child.rows * copies, 0.0, cols, fds=child.fds, exprs=child.exprs)

    def _rel_aggregate(self, node, body, children) -> RelEstimate:
        child = children[0]
        keys = [self.expression_column(e, child) for e in body.grouping_expressions]
        groupings = list(body.groupings)
        if not groupings:
            groupings_refs: list[list[int]] = [list(range(len(keys)))] if keys else [[]]
        else:
            groupings_refs = [list(gr.expression_references) for gr in groupings]
        rows = 0.0
        for refs in groupings_refs:
            rows += self.group_count([keys[r] if 0 <= r < len(keys) else None for r in dict.fromkeys(refs)],
                                     child, [body.grouping_expressions[r] for r in dict.fromkeys(refs)
                                             if 0 <= r < len(keys)])
        if child.rows <= 0 and any(refs for refs in groupings_refs):
            rows = 0.0
        cols: list[ColumnEstimate | None] = []
        fraction = min(rows / child.rows, 1.0) if child.rows > 0 else 1.0
        for k in keys:
            if k is None:
                cols.append(None)
                continue
            ndv = min(k.ndv, rows) if k.ndv is not None else None
            cols.append(evolve(k, ndv=ndv, histogram=None if fraction < 1 else k.histogram))
        for m in body.measures:
            cols.append(self.measure_column(m.measure, child, rows))
        if len(groupings) > 1:
            cols.append(ColumnEstimate(ndv=float(len(groupings)), null_fraction=0.0, avg_len=4.0, integral=True))
        return RelEstimate(rows, 0.0, cols, applied=child.applied, fds=child.fds, exprs=child.exprs)

    def measure_column(self, fn, child: RelEstimate, groups: float) -> ColumnEstimate:
        """The values of an aggregate function over groups of ``child``: ``count`` about
        ``m`` (rows per group), ``sum(x)`` about ``m * mean(x)``, ``avg(x)`` about ``mean(x)``, each
        as a normal distribution whose spread assumes Poisson group sizes; ``min``/``max`` within
        ``x``'s bounds."""
        name = None
        if fn.function_reference in self.functions:
            name = self.functions.get(fn.function_reference).name
        groups = max(groups, 1.0)
        m = max(child.rows / groups, 1.0) if child.rows > 0 else 1.0
        args = [a.value for a in fn.arguments if a.WhichOneof("arg_type") == "value"]
        x = self.expression_column(args[0], child) if args else None
        if name in ("count", "count_star", "approx_count_distinct"):
            sd = math.sqrt(m)
            ndv = min(groups, max(6.0 * sd + 1.0, 1.0), child.rows + 1.0)
            return ColumnEstimate(ndv=ndv, min=0.0, max=max(child.rows, 1.0), null_fraction=0.0, avg_len=8.0,
                                  integral=True, normal=(m, sd), domain=ndv)
        if x is None or name not in ("sum", "avg", "mean", "min", "max", "sum0"):
            return ColumnEstimate(ndv=groups, null_fraction=None)
        if name in ("min", "max"):
            ndv = min(groups, x.ndv) if x.ndv is not None else groups
            return ColumnEstimate(ndv=ndv, min=x.min, max=x.max, null_fraction=0.0, integral=x.integral,
                                  histogram=None, avg_len=x.avg_len, domain=ndv)
        moments = column_moments(x)
        if moments is None:
            return ColumnEstimate(ndv=groups, null_fraction=None)
        mean, var = moments
        if name == "avg" or name == "mean":
            mu, sd = mean, math.sqrt(var / m)
            lo, hi = x.min, x.max
        else:
            mu, sd = m * mean, math.sqrt(m * (var + mean * mean))
            lo = min(float(x.min), float(x.min) * child.rows)
            hi = max(float(x.max), float(x.max) * child.rows)
        integral = x.integral and name not in ("avg", "mean")
        ndv = groups
        if integral:
            ndv = min(groups, max(6.0 * sd + 1.0, 1.0))
        return ColumnEstimate(ndv=ndv, min=float(lo), max=float(hi), null_fraction=0.0, integral=integral,
                              normal=(mu, max(sd, 1e-9)), domain=ndv)

    def group_count(self, keys: list[ColumnEstimate | None], child: RelEstimate,
                    exprs: Sequence[Expression] = ()) -> float:
        """Groups of ``child`` on ``keys``: product of the keys' NDVs (functionally dependent keys
        dropped), as distinct combinations drawn by the input rows, capped by them."""
        if child.rows <= 0:
            return 0.0
        if not keys:
            return 1.0
        # identical expressions count once
        unique: list[ColumnEstimate | None] = []
        seen: set[bytes] = set()
        for i, k in enumerate(keys):
            if i < len(exprs):
                sig = exprs[i].SerializeToString(deterministic=True)
                if sig in seen:
                    continue
                seen.add(sig)
            unique.append(k)
        unique = _drop_dependent(unique, child.fds)
        domain = 1.0
        for k in unique:
            if k is None or k.ndv is None:
                ndv = max(child.rows * DEFAULT_GROUP_FRACTION, 1.0)
            else:
                ndv = max(k.ndv, 1.0)
                if k.null_fraction:
                    ndv += 1.0
            domain *= ndv
        return max(expected_groups(domain, child.rows), 1.0)

    # -- other relations ------------------------------------------------------------------------------

    def _rel_write(self, node, body, children) -> RelEstimate:
        types = self._types(node)
        if types is not None and len(types) == 1 and children and len(children[0].columns) != 1:
            return RelEstimate(1.0, 8.0, [ColumnEstimate(ndv=1.0, null_fraction=0.0)])
        return children[0] if children else RelEstimate(1.0, 8.0, [])

    def _rel_update(self, node, body, children) -> RelEstimate:
        return RelEstimate(1.0, 8.0, [ColumnEstimate(ndv=1.0, null_fraction=0.0)])

    def _rel_ddl(self, node, body, children) -> RelEstimate:
        return RelEstimate(0.0, 0.0, [])

    def _rel_extension_multi(self, node, body, children) -> RelEstimate:
        return self._default(node, children)

    def _rel_extension_leaf(self, node, body, children) -> RelEstimate:
        return self._default(node, children)

    # -- expressions ----------------------------------------------------------------------------------

    def expression_column(self, e: Expression, child: RelEstimate) -> ColumnEstimate | None:
        """The estimate of a computed column: a reference keeps its input column, a literal has one
        value, a deterministic function has at most the NDV of its inputs' combinations."""
        cols = child.columns
        i = field_index(e)
        if i is not None:
            return cols[i] if 0 <= i < len(cols) else None
        rex = e.WhichOneof("rex_type")
        if child.exprs:
            fp = self._fingerprint(e, cols)
            if fp is not None and fp in child.exprs:
                return cap_column(child.exprs[fp], child.rows)
        value = literal_of(e)
        if value is not NOT_LITERAL:
            if value is None:
                return ColumnEstimate(ndv=0.0, null_fraction=1.0)
            return ColumnEstimate(ndv=1.0, min=value, max=value, null_fraction=0.0,
                                  avg_len=float(len(value)) if isinstance(value, str) else None)
        if rex == "cast":
            inner = self.expression_column(e.cast.input, child)
            if inner is None:
                return None
            target = type_kind(e.cast.type)
            keep_bounds = target not in TEXT_KINDS and inner.numeric
            return evolve(inner, origin=None, histogram=inner.histogram if keep_bounds else None,
                           min=inner.min if keep_bounds else None, max=inner.max if keep_bounds else None,
                           avg_len=None, integral=inner.integral and target in INTEGRAL_KINDS)
        from optimizer.expr_utils import referenced_fields

        refs = sorted(referenced_fields(e))
        name = self._fname(e)
        if name in ("extract", "date_part") and len(refs) == 1:
            col = cols[refs[0]] if 0 <= refs[0] < len(cols) else None
            part = _enum_or_string_arg(e)
            return _date_part_column(part, col, child.rows)
        if not refs:
            return ColumnEstimate(ndv=1.0)
        if name in ("add", "subtract", "multiply", "divide"):
            out = self._arithmetic(name, e, child)
            if out is not None:
                return out
        ndv = 1.0
        for r in refs:
            c = cols[r] if 0 <= r < len(cols) else None
            if c is None or c.ndv is None:
                ndv = None
                break
            ndv *= max(c.ndv, 1.0)
        if ndv is not None:
            ndv = min(ndv, child.rows)
        if name in COMPARISONS or name in ("and", "or", "not", "like", "is_null", "is_not_null"):
            ndv = min(ndv, 2.0) if ndv is not None else 2.0
        return ColumnEstimate(ndv=ndv)

    def _arithmetic(self, name: str, e: Expression, child: RelEstimate) -> ColumnEstimate | None:
        """Bounds (interval arithmetic) and moments (independent operands) of ``a op b``."""
        args = call_args(e)
        if args is None or len(args) != 2:
            return None
        a, b = (self.expression_column(x, child) for x in args)
        if a is None or b is None or not a.numeric or not b.numeric:
            return None
        ma, mb = column_moments(a), column_moments(b)
        if ma is None or mb is None:
            return None
        (ua, va), (ub, vb) = ma, mb
        a0, a1, b0, b1 = float(a.min), float(a.max), float(b.min), float(b.max)
        if name == "add":
            mean, var, lo, hi = ua + ub, va + vb, a0 + b0, a1 + b1
        elif name == "subtract":
            mean, var, lo, hi = ua - ub, va + vb, a0 - b1, a1 - b0
        elif name == "multiply":
            mean = ua * ub
            var = max((va + ua * ua) * (vb + ub * ub) - mean * mean, 0.0)
            corners = [a0 * b0, a0 * b1, a1 * b0, a1 * b1]
            lo, hi = min(corners), max(corners)
        else:
            if b0 != b1 or b0 == 0:
                return None
            mean, var, lo, hi = ua / b0, va / (b0 * b0), min(a0 / b0, a1 / b0), max(a0 / b0, a1 / b0)
        ndvs = [c.ndv for c in (a, b)]
        ndv = None
        if all(n is not None for n in ndvs):
            ndv = min(max(ndvs[0], 1.0) * max(ndvs[1], 1.0), child.rows)
        nfs = [c.null_fraction for c in (a, b)]
        nf = max(nfs) if all(n is not None for n in nfs) else None
        # a linear function of a normally distributed value (a sum per group) stays normal
        constant = (a.min == a.max) or (b.min == b.max)
        normal = (mean, math.sqrt(var)) if constant and (a.normal is not None or b.normal is not None) else None
        return ColumnEstimate(ndv=ndv, min=lo, max=hi, null_fraction=nf, moments=(mean, var), normal=normal)

    def scalar_value(self, e: Expression) -> float | None:
        """The estimated value of an uncorrelated scalar subquery (under casts): the mean of its one
        column, or its single value; ``None`` if unknown."""
        while e.WhichOneof("rex_type") == "cast":
            e = e.cast.input
        if e.WhichOneof("rex_type") != "subquery" or e.subquery.WhichOneof("subquery_type") != "scalar":
            return None
        rel = e.subquery.scalar.input
        key = rel.SerializeToString(deterministic=True)
        cache = self.metadata.scalar_values
        if key in cache:
            return cache[key]
        value = None
        try:
            if not has_outer_refs(rel):
                from substrait.proto import Plan

                from optimizer.dag import to_dag

                plan = Plan()
                plan.CopyFrom(self.g.graph["plan"])
                plan.ClearField("relations")
                plan.relations.add().root.input.CopyFrom(rel)
                sub = to_dag(plan, self.functions)  # the plan's table: not built again per subquery
                est = CardinalityEstimator(sub, self.statistics, self.functions).estimate(sub.graph["roots"][0]["node"])
                col = est.columns[0] if est.columns else None
                if col is not None:
                    if col.normal is not None:
                        value = col.normal[0]
                    elif col.moments is not None:
                        value = col.moments[0]
                    elif col.numeric and col.min == col.max:
                        value = float(col.min)
        except OptimizerError as exc:  # a subquery the DAG or the estimator refuses: value unknown
            log.debug("cardinality: scalar subquery not estimated: %s", exc)
            value = None
        cache[key] = value
        return value


# --------------------------------------------------------------------------------------------------
# Helpers used by the estimator
# --------------------------------------------------------------------------------------------------


def _drop_dependent(keys: list[ColumnEstimate | None], fds: frozenset[tuple[int, int]]) -> list[ColumnEstimate | None]:
    """Group keys without those functionally determined by another key (a unique key of a table
    determines that table's columns, and through ``fds`` the tables it was joined to on their keys)."""
    adjacency: dict[int, set[int]] = {}
    for a, b in fds:
        adjacency.setdefault(a, set()).add(b)

    def closure(start: Iterable[int]) -> set[int]:
        seen = set(start)
        todo = list(seen)
        while todo:
            n = todo.pop()
            for m in adjacency.get(n, ()):
                if m not in seen:
                    seen.add(m)
                    todo.append(m)
        return seen

    closures = [closure(k.key_of) if k is not None and k.key_of else set() for k in keys]
    # the keys that determine the most tables first
    order = sorted(range(len(keys)), key=lambda i: (-len(closures[i]),
                                                     -(keys[i].ndv or 0.0) if keys[i] is not None else 0.0))
    determined: set[int] = set()
    kept: list[int] = []
    for i in order:
        k = keys[i]
        if k is not None:
            if k.origin is not None and k.origin[0] in determined:
                continue
            if k.key_of and k.key_of & determined:
                continue
            determined |= closures[i]
        kept.append(i)
    return [keys[i] for i in sorted(kept)]


def _enum_or_string_arg(e: Expression) -> str | None:
    for a in e.scalar_function.arguments:
        which = a.WhichOneof("arg_type")
        if which == "enum":
            return a.enum.upper()
        if which == "value":
            v = literal_of(a.value)
            if isinstance(v, str):
                return v.upper()
    return None


def _date_part_column(part: str | None, col: ColumnEstimate | None, rows: float) -> ColumnEstimate:
    if part == "YEAR" and col is not None and col.numeric and col.integral:
        lo, hi = float(col.min), float(col.max)
        if abs(hi) < 1e6:  # days (a date column)
            years = math.floor(1970 + hi / 365.2425) - math.floor(1970 + lo / 365.2425) + 1
            y0 = math.floor(1970 + lo / 365.2425)
            return ColumnEstimate(ndv=float(max(years, 1)), min=float(y0), max=float(y0 + years - 1),
                                  null_fraction=col.null_fraction, avg_len=4.0, integral=True)
    sizes = {"MONTH": 12.0, "DAY": 31.0, "QUARTER": 4.0, "DOW": 7.0, "HOUR": 24.0, "MINUTE": 60.0, "SECOND": 60.0}
    ndv = sizes.get(part or "")
    if col is not None and col.ndv is not None:
        ndv = min(ndv, col.ndv) if ndv is not None else col.ndv
    return ColumnEstimate(ndv=min(ndv, rows) if ndv is not None else None, avg_len=4.0, integral=True,
                          null_fraction=col.null_fraction if col is not None else None)


def top_n_bounds(body) -> tuple[float, float | None]:
    """``(offset, count)`` of a TopNRel (count ``None``: all rows; bounds that are not literals: 0/all)."""
    return _literal_bounds(body.offset if body.HasField("offset") else None,
                           body.count if body.HasField("count") else None)


def _literal_bounds(offset: Expression | None, count: Expression | None) -> tuple[float, float | None]:
    """``(offset, count)`` from bound expressions: a missing or non-literal offset is 0, count all (None)."""
    v = literal_of(offset) if offset is not None else None
    start = max(float(v), 0.0) if isinstance(v, float) else 0.0
    v = literal_of(count) if count is not None else None
    return start, (float(v) if isinstance(v, float) and v >= 0 else None)


__all__ = ["CardinalityEstimator", "top_n_bounds"]
