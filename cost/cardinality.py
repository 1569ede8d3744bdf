"""Cardinality estimation: rows, row width and per-column statistics of every relation of a plan DAG.

:class:`CardinalityEstimator` ``(g, statistics, functions)`` walks the DAG of :mod:`optimizer.dag`
children first and gives each node a :class:`RelEstimate`: ``rows``, ``width`` (bytes per row) and
one :class:`ColumnEstimate` per output column (``ndv``, ``min``, ``max``, ``null_fraction``,
``avg_len``, ``histogram``) carried through every operator. Estimates are memoised per node;
:meth:`~CardinalityEstimator.invalidate` forgets them (the engine calls it after each rewrite).

The formulas, their assumptions (uniformity within a histogram bin, independence of predicates,
containment of join keys) and the default selectivities used when nothing is known are listed in
``docs/cost-model.md``. The estimator never raises on a plan it does not understand: an unknown
relation or function gets a default estimate.

Values are compared in the float domain of :func:`cost.statistics.to_numeric` (dates are days since
1970-01-01, timestamps microseconds, decimals floats); strings are compared as strings.

>>> from optimizer.plan_io import load_plan
>>> from optimizer.dag import to_dag
>>> from cost.statistics import MemoryStatistics, TableStatistics, ColumnStatistics
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
import os
import urllib.parse
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace
from functools import lru_cache
from typing import Any

import networkx as nx
from substrait.proto import Expression, Rel, Type

from cost.statistics import (
    ColumnStatistics,
    Histogram,
    StatisticsProvider,
    TableStatistics,
    read_hint,
    to_numeric,
)
from optimizer.dag import inputs
from optimizer.errors import OptimizerError, PlanError
from optimizer.expr_utils import call_args, conjuncts, disjuncts, field_index, has_outer_refs, remap_fields
from optimizer.functions import FunctionTable, function_table
from optimizer.join_types import join_type_name
from optimizer.schema import is_nullable, type_kind

log = logging.getLogger(__name__)

# --------------------------------------------------------------------------------------------------
# Defaults (why each value: docs/cost-model.md, "Default selectivities")
# --------------------------------------------------------------------------------------------------

#: Rows of a table nothing is known about (large on purpose: an unknown table is never broadcast).
DEFAULT_TABLE_ROWS = 1_000_000.0
#: ``col = value`` when the column's NDV is unknown.
DEFAULT_EQ_SEL = 0.1
#: ``col < value`` (and the other range comparisons) when the column's bounds are unknown.
DEFAULT_RANGE_SEL = 1.0 / 3.0
#: ``col BETWEEN a AND b`` when the column's bounds are unknown.
DEFAULT_BETWEEN_SEL = 0.25
#: Each literal fragment of a LIKE pattern (``'%green%'``: one, ``'%a%b%'``: two, multiplied).
DEFAULT_LIKE_SEL = 0.1
#: Each character of a LIKE fragment beyond 5 multiplies its selectivity by this (fewer: divides).
LIKE_CHAR_FACTOR = 0.8
#: ``col IS NULL`` when the null count is unknown and the type is nullable.
DEFAULT_NULL_SEL = 0.01
#: A boolean expression nothing is known about (a function we do not model, a subquery...).
DEFAULT_SEL = 0.25
#: A boolean column used as a predicate, ``EXISTS (subquery)``, ``x IN (subquery)``.
DEFAULT_BOOL_SEL = 0.5
#: Groups of an aggregate on a key whose NDV is unknown, as a fraction of the input rows.
DEFAULT_GROUP_FRACTION = 0.1
#: Overlap of the inputs of INTERSECT / MINUS when nothing says otherwise.
DEFAULT_SET_OVERLAP = 0.5
#: Bytes of a string/binary value whose average length is unknown.
DEFAULT_STRING_WIDTH = 20.0
#: A column is a unique key of its table when its NDV is at least this fraction of the row count
#: (Spark's HyperLogLog++ NDV has a 5% relative standard error: a key of 15000 rows may say 14240).
UNIQUE_KEY_FRACTION = 0.9

_INTEGRAL_KINDS = {"i8", "i16", "i32", "i64", "date", "timestamp", "timestamp_tz", "precision_timestamp",
                   "precision_timestamp_tz", "time", "precision_time"}
_TYPE_WIDTH = {"bool": 1, "i8": 1, "i16": 2, "i32": 4, "i64": 8, "fp32": 4, "fp64": 8, "date": 4, "time": 8,
               "timestamp": 8, "timestamp_tz": 8, "precision_timestamp": 8, "precision_timestamp_tz": 8,
               "precision_time": 8, "interval_year": 4, "interval_day": 8, "interval_compound": 16, "uuid": 16,
               "decimal": 16}
_SPARK_INTEGRAL = {"tinyint", "smallint", "int", "bigint", "byte", "short", "integer", "long", "date", "timestamp",
                   "timestamp_ntz"}
_TEXT = ("string", "varchar", "char", "fixed_char", "var_char", "binary", "fixed_binary")

_COMPARISONS = {"equal", "not_equal", "lt", "lte", "gt", "gte", "is_not_distinct_from", "is_distinct_from"}
_FLIP = {"lt": "gt", "lte": "gte", "gt": "lt", "gte": "lte", "equal": "equal", "not_equal": "not_equal",
         "is_not_distinct_from": "is_not_distinct_from", "is_distinct_from": "is_distinct_from"}
_NOT_LITERAL = object()


# --------------------------------------------------------------------------------------------------
# Data model
# --------------------------------------------------------------------------------------------------


@dataclass
class ColumnEstimate:
    """What is known about one output column; ``None`` means unknown.

    ``min``/``max`` are floats in the :func:`~cost.statistics.to_numeric` domain, or strings for text
    columns. ``histogram`` is the base table's equi-height histogram (never rescaled: selectivities
    are computed on the part of it between the current ``min`` and ``max``). ``origin`` is
    ``(read node, base column)`` for a column read unchanged from a table; ``key_of`` the read nodes
    of which this column's values identify one row (a unique key, also through equi-joins);
    ``integral`` says the values are discrete (integers, dates). ``domain`` is the number of distinct
    values the column could take (its base column's NDV, kept through filters and joins: a filtered
    key still draws from the whole key domain); ``normal`` ``(mean, sd)`` describes the values of a
    computed aggregate (a sum per group is about normally distributed); ``moments`` ``(mean, variance)``
    those of an arithmetic expression.
    """

    ndv: float | None = None
    min: Any = None
    max: Any = None
    null_fraction: float | None = None
    avg_len: float | None = None
    histogram: Histogram | None = None
    origin: tuple[int, int] | None = None
    key_of: frozenset[int] = frozenset()
    integral: bool = False
    domain: float | None = None
    normal: tuple[float, float] | None = None
    moments: tuple[float, float] | None = None

    @property
    def numeric(self) -> bool:
        return isinstance(self.min, float | int) and isinstance(self.max, float | int)


@dataclass
class RelEstimate:
    """Estimated output of a relation: ``rows``, ``width`` in bytes per row, one column estimate each.

    ``applied`` holds fingerprints of the predicates already applied below (in terms of the base
    columns they read), so that a filter repeated above a read (as DataFusion writes them) is not
    counted twice. ``fds`` holds ``(a, b)`` pairs of read nodes: a row of ``a`` determines one row of
    ``b`` (joined on ``b``'s unique key); aggregates use them to drop functionally dependent keys.
    ``source`` is ``"derived"``, ``"hint"`` or ``"default"``. ``exprs`` holds what filters said about
    computed expressions (``substring(c_phone, 1, 2) IN (7 values)`` leaves 7 distinct values), keyed by
    the expression's fingerprint.
    """

    rows: float
    width: float
    columns: list[ColumnEstimate | None] = field(default_factory=list)
    applied: frozenset = frozenset()
    fds: frozenset[tuple[int, int]] = frozenset()
    source: str = "derived"
    exprs: dict[bytes, ColumnEstimate] = field(default_factory=dict)

    @property
    def bytes(self) -> float:
        return self.rows * self.width


# --------------------------------------------------------------------------------------------------
# Small helpers
# --------------------------------------------------------------------------------------------------


def type_width(t: Type | None) -> float:
    """Default bytes per value of a type (strings: :data:`DEFAULT_STRING_WIDTH`)."""
    kind = type_kind(t)
    if kind is None:
        return 8.0
    if kind in _TYPE_WIDTH:
        if kind == "decimal":
            return 8.0 if t.decimal.precision <= 18 else 16.0
        return float(_TYPE_WIDTH[kind])
    if kind in ("fixed_char", "fixed_binary"):
        return float(getattr(t, kind).length or DEFAULT_STRING_WIDTH)
    if kind == "varchar":
        return float(min(t.varchar.length, DEFAULT_STRING_WIDTH) if t.varchar.length else DEFAULT_STRING_WIDTH)
    if kind == "struct":
        return sum(type_width(x) for x in t.struct.types) or 8.0
    if kind in ("list", "map"):
        return 4 * DEFAULT_STRING_WIDTH
    return DEFAULT_STRING_WIDTH


def _string_key(s: str) -> float:
    """Strings mapped to [0, 1) preserving order on their first 8 characters (for interpolation)."""
    out = 0.0
    scale = 1.0
    for ch in s[:8]:
        scale /= 256.0
        out += min(ord(ch), 255) * scale
    return out


def _num(value: Any) -> float | None:
    if isinstance(value, bool):
        return float(value)
    if isinstance(value, int | float):
        return float(value)
    if isinstance(value, str):
        return _string_key(value)
    return None


def distinct_after_sampling(ndv: float, rows: float, fraction: float) -> float:
    """Expected distinct values left when each of ``rows`` rows (``ndv`` distinct, uniform) is kept with
    probability ``fraction``.

    >>> round(distinct_after_sampling(100, 10_000, 0.5), 3)
    100.0
    >>> round(distinct_after_sampling(10_000, 10_000, 0.5))
    5000
    """
    if ndv <= 0 or rows <= 0:
        return 0.0
    fraction = min(max(fraction, 0.0), 1.0)
    per_value = max(rows / ndv, 1.0)
    if fraction >= 1.0:
        return ndv
    return ndv * -math.expm1(per_value * math.log1p(-fraction))


def expected_groups(domain: float, rows: float) -> float:
    """Expected distinct combinations when ``rows`` rows draw uniformly from ``domain`` combinations.

    >>> expected_groups(10, 1_000_000)
    10.0
    >>> round(expected_groups(1e12, 1000))
    1000
    """
    if rows <= 0:
        return 0.0
    if domain <= 1:
        return 1.0
    if domain > 1e15:
        return rows
    return float(min(domain, rows, domain * -math.expm1(rows * math.log1p(-1.0 / domain))))


def _cap_column(col: ColumnEstimate | None, rows: float) -> ColumnEstimate | None:
    if col is None or col.ndv is None or col.ndv <= rows:
        return col
    return replace(col, ndv=max(rows, 0.0))


def _scale_column(col: ColumnEstimate | None, in_rows: float, fraction: float, out_rows: float) -> ColumnEstimate | None:
    """A column of a relation of which a ``fraction`` of the rows survives (``out_rows`` in all)."""
    if col is None:
        return None
    ndv = col.ndv
    if ndv is not None:
        ndv = min(distinct_after_sampling(ndv, in_rows, fraction), max(out_rows, 0.0))
        if col.ndv >= 1 and out_rows >= 1:
            ndv = max(ndv, 1.0)
    return replace(col, ndv=ndv)


def _literal_value(lit: Expression.Literal) -> Any:
    """The comparable value of a literal (float, str, or None for null); ``_NOT_LITERAL`` if unsupported."""
    kind = lit.WhichOneof("literal_type")
    if kind in ("i8", "i16", "i32", "i64", "fp32", "fp64"):
        return float(getattr(lit, kind))
    if kind == "boolean":
        return float(lit.boolean)
    if kind in ("string", "var_char", "fixed_char"):
        value = getattr(lit, kind)
        return value.value if kind == "var_char" else value
    if kind == "date":
        return float(lit.date)
    if kind == "decimal":
        raw = int.from_bytes(lit.decimal.value, "little", signed=True)
        return raw / (10 ** lit.decimal.scale)
    if kind == "timestamp" or kind == "timestamp_tz":
        return float(getattr(lit, kind))
    if kind in ("precision_timestamp", "precision_timestamp_tz"):
        ts = getattr(lit, kind)
        return float(ts.value) * 10.0 ** (6 - ts.precision)
    if kind == "null":
        return None
    return _NOT_LITERAL


def literal_of(e: Expression) -> Any:
    """The value of a literal expression, or of a cast of a literal (``_NOT_LITERAL`` otherwise)."""
    rex = e.WhichOneof("rex_type")
    if rex == "literal":
        return _literal_value(e.literal)
    if rex == "cast" and e.cast.input.WhichOneof("rex_type") == "literal":
        value = _literal_value(e.cast.input.literal)
        if value is _NOT_LITERAL or value is None:
            return value
        target = type_kind(e.cast.type)
        if isinstance(value, str) and target not in (None, *_TEXT):
            spark = {"date": "date", "timestamp": "timestamp", "precision_timestamp": "timestamp"}.get(target, "double")
            converted = to_numeric(value, spark)
            return converted if converted is not None else _NOT_LITERAL
        if isinstance(value, float) and target in _TEXT:
            return _NOT_LITERAL
        return value
    return _NOT_LITERAL


def column_of(e: Expression) -> int | None:
    """The input column of a field reference, also under casts (``CAST($3 AS decimal)`` -> 3)."""
    while e.WhichOneof("rex_type") == "cast":
        e = e.cast.input
    return field_index(e)


def _local_path(uri: str) -> str | None:
    if uri.startswith("file://"):
        return urllib.parse.unquote(urllib.parse.urlparse(uri).path)
    if "://" in uri:
        return None
    return uri


@lru_cache(maxsize=256)
def _parquet_stats(path: str, mtime: float) -> TableStatistics | None:
    import pyarrow as pa

    from cost.statistics import read_parquet_statistics

    try:
        return read_parquet_statistics(path)
    except (OSError, pa.ArrowException) as e:  # unreadable footers: unknown
        log.debug("cardinality: cannot read %s: %s", path, e)
        return None


def _merge_file_stats(parts: list[TableStatistics]) -> TableStatistics:
    rows = sum(p.row_count or 0.0 for p in parts)
    size = sum(p.size_bytes or 0.0 for p in parts)
    columns: dict[str, ColumnStatistics] = {}
    for p in parts:
        for name, c in p.columns.items():
            if name not in columns:
                columns[name] = replace(c)
                continue
            m = columns[name]
            try:
                m.min = c.min if m.min is None or (c.min is not None and c.min < m.min) else m.min
                m.max = c.max if m.max is None or (c.max is not None and c.max > m.max) else m.max
            except TypeError:
                m.min = m.max = None
            m.null_count = None if m.null_count is None or c.null_count is None else m.null_count + c.null_count
    return TableStatistics(row_count=rows, size_bytes=size, columns=columns)


# --------------------------------------------------------------------------------------------------
# The estimator
# --------------------------------------------------------------------------------------------------


class CardinalityEstimator:
    """Estimates of every node of a plan DAG; see the module docstring.

    ``statistics`` is a :class:`~cost.statistics.StatisticsProvider` (or ``None``: defaults and hints
    only); ``functions`` the plan's :class:`~optimizer.functions.FunctionTable` (derived from
    ``g.graph["plan"]`` when not given).
    """

    def __init__(self, g: nx.DiGraph, statistics: StatisticsProvider | None = None,
                 functions: FunctionTable | None = None) -> None:
        self.g = g
        self.statistics = statistics
        if functions is None:
            plan = g.graph.get("plan")
            try:
                functions = function_table(plan) if plan is not None else FunctionTable([])
            except PlanError:  # an undeclared extension URN: the functions are unknown, not the rows
                functions = FunctionTable([])
        self.functions = functions
        self._memo: dict[int, RelEstimate] = {}
        self._schemas: dict[int, Any] = {}
        self._origin_ids: dict[tuple[int, int], int] = {}
        self._narrowed: set[int] = set()

    # -- public ---------------------------------------------------------------------------------------

    def invalidate(self, changed: int | None = None) -> None:
        """Forget every estimate (the DAG changed), or, with ``changed``, those of ``changed`` and of
        the relations that read it (an estimate depends only on the relation's inputs, so the others
        hold)."""
        if changed is None or changed not in self.g:
            self._memo.clear()
            self._schemas.clear()
            return
        for n in {changed} | nx.ancestors(self.g, changed):
            self._memo.pop(n, None)
            self._schemas.pop(n, None)

    def estimate(self, node: int) -> RelEstimate:
        """The estimate of ``node`` (computed children first, memoised)."""
        found = self._memo.get(node)
        if found is not None:
            return found
        for n in nx.dfs_postorder_nodes(self.g, node):
            if n not in self._memo:
                self._memo[n] = self._compute(n)
        return self._memo[node]

    def rows(self, node: int) -> float:
        return self.estimate(node).rows

    # -- per node -------------------------------------------------------------------------------------

    def _compute(self, node: int) -> RelEstimate:
        data = self.g.nodes[node]
        kind = data.get("kind")
        rel: Rel = data.get("rel")
        children = [self._memo[c] if c in self._memo else self.estimate(c) for c in inputs(self.g, node)]
        try:
            handler = getattr(self, f"_rel_{kind}", None)
            est = handler(node, getattr(rel, kind), children) if handler is not None else self._default(node, children)
            est = self._emit(rel, kind, est)
        except OptimizerError as e:  # a relation the schema or function rules refuse: default estimate
            log.debug("cardinality: default estimate for node %s (%s): %s", node, kind, e, exc_info=True)
            est = self._default(node, children)
        est = self._hinted(rel, est)
        return self._finish(node, est)

    def _emit(self, rel: Rel, kind: str, est: RelEstimate) -> RelEstimate:
        body = getattr(rel, kind)
        if "common" not in body.DESCRIPTOR.fields_by_name or not body.HasField("common"):
            return est
        if body.common.WhichOneof("emit_kind") != "emit":
            return est
        cols = est.columns
        picked = [cols[i] if 0 <= i < len(cols) else None for i in body.common.emit.output_mapping]
        return replace(est, columns=picked)

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
        cols = [_scale_column(c, est.rows, min(fraction, 1.0), rows) for c in est.columns]
        return replace(est, rows=float(rows), width=float(size) if size else est.width, columns=cols, source="hint")

    def _finish(self, node: int, est: RelEstimate) -> RelEstimate:
        rows = max(float(est.rows), 0.0)
        if math.isnan(rows) or math.isinf(rows):
            rows = DEFAULT_TABLE_ROWS
        types = self._types(node)
        cols = list(est.columns)
        if types is not None and len(types) == len(cols):
            for i, c in enumerate(cols):
                if c is None:
                    cols[i] = ColumnEstimate(avg_len=type_width(types[i]),
                                             null_fraction=None if is_nullable(types[i]) else 0.0)
                elif c.avg_len is None:
                    cols[i] = replace(c, avg_len=type_width(types[i]))
        cols = [_cap_column(c, rows) for c in cols]
        if est.source == "hint" and est.width > 0:
            width = est.width
        else:
            width = sum((c.avg_len if c is not None and c.avg_len is not None else 8.0) for c in cols)
        return replace(est, rows=rows, width=max(width, 1.0), columns=cols)

    def _types(self, node: int) -> list[Type] | None:
        if node in self._schemas:
            schema = self._schemas[node]
        else:
            schema = self.g.nodes[node].get("schema")
            if schema is None:
                try:
                    from optimizer.schema import rel_schema

                    child_schemas = [self._schema_of(c) for c in inputs(self.g, node)]
                    if any(s is None for s in child_schemas):
                        schema = None
                    else:
                        data = self.g.nodes[node]
                        schema = rel_schema(data["rel"], child_schemas, self.functions)
                except OptimizerError:  # a relation whose type cannot be derived: types unknown
                    schema = None
            self._schemas[node] = schema
        return list(schema.types) if schema is not None else None

    def _schema_of(self, node: int):
        if node not in self._schemas:
            self._types(node)
        return self._schemas.get(node)

    def _default(self, node: int, children: list[RelEstimate]) -> RelEstimate:
        rows = max((c.rows for c in children), default=DEFAULT_TABLE_ROWS)
        types = self._types(node)
        n = len(types) if types is not None else (len(children[0].columns) if children else 0)
        return RelEstimate(rows, 8.0 * max(n, 1), [None] * n, source="default")

    # -- leaves -----------------------------------------------------------------------------------------

    def _rel_read(self, node: int, body, children) -> RelEstimate:
        base_types = list(body.base_schema.struct.types)
        names = list(body.base_schema.names)
        if len(names) != len(base_types):  # nested names: keep the top-level ones
            try:
                from optimizer.schema import Schema

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
            table = self._local_files(body.local_files)
        if table is not None:
            rows = table.row_count
        if rows is None:
            rows = DEFAULT_TABLE_ROWS
            source = "default"
        cols: list[ColumnEstimate | None] = []
        for i, t in enumerate(base_types):
            cs = table.column(names[i]) if table is not None and i < len(names) else None
            cols.append(self._column_from_stats(cs, t, rows, (node, i)))
        est = RelEstimate(rows, 0.0, cols, source=source)
        for name in ("filter", "best_effort_filter"):
            if body.HasField(name):
                est = self.apply_filter(getattr(body, name), est)
        if body.HasField("projection"):
            picked = [item.field for item in body.projection.select.struct_items]
            est = replace(est, columns=[est.columns[i] if 0 <= i < len(est.columns) else None for i in picked])
        return est

    def _column_from_stats(self, cs: ColumnStatistics | None, t: Type, rows: float,
                           origin: tuple[int, int]) -> ColumnEstimate:
        kind = type_kind(t)
        integral = kind in _INTEGRAL_KINDS
        if cs is None:
            return ColumnEstimate(null_fraction=None if is_nullable(t) else 0.0, avg_len=type_width(t),
                                  origin=origin, integral=integral)
        dtype = (cs.data_type or "").lower()
        if dtype:
            integral = dtype in _SPARK_INTEGRAL or (dtype.startswith("decimal(") and dtype.replace(" ", "").endswith(",0)"))
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

    def _local_files(self, local_files) -> TableStatistics | None:
        parts: list[TableStatistics] = []
        import glob as globlib

        for item in local_files.items:
            if item.WhichOneof("file_format") != "parquet":
                return None
            which = item.WhichOneof("path_type")
            path = _local_path(getattr(item, which)) if which else None
            if path is None:
                return None
            files = getattr(self.statistics, "files", None)
            if files is not None and not files.allows(path):
                return None  # outside the table roots: never opened (docs/security.md)
            if files is not None and files.any_path and (which == "uri_folder" or os.path.isdir(path)):
                return None  # unconfined (--allow-any-path): a folder is not walked for statistics
            paths = sorted(globlib.glob(path)) if which == "uri_path_glob" else [path]
            for p in paths:
                if not os.path.exists(p) or (files is not None and not files.allows(p)):
                    return None
                stats = _parquet_stats(p, os.path.getmtime(p))
                if stats is None:
                    return None
                parts.append(stats)
        return _merge_file_stats(parts) if parts else None

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
            known = [v for v in vals if v is not _NOT_LITERAL and v is not None]
            nulls = sum(1 for v in vals if v is None)
            col = ColumnEstimate(avg_len=type_width(t), origin=(node, c), integral=type_kind(t) in _INTEGRAL_KINDS,
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
        return self.apply_filter(body.condition, children[0])

    def _rel_sort(self, node, body, children) -> RelEstimate:
        return children[0]

    def _rel_exchange(self, node, body, children) -> RelEstimate:
        return children[0]

    def _rel_extension_single(self, node, body, children) -> RelEstimate:
        return children[0]

    def _rel_fetch(self, node, body, children) -> RelEstimate:
        child = children[0]
        offset = 0.0
        count: float | None = None
        if body.HasField("offset_expr"):
            v = literal_of(body.offset_expr)
            offset = max(float(v), 0.0) if isinstance(v, float) else 0.0
        if body.HasField("count_expr"):
            v = literal_of(body.count_expr)
            count = float(v) if isinstance(v, float) and v >= 0 else None
        return self._limited(child, offset, count)

    def _rel_top_n(self, node, body, children) -> RelEstimate:
        offset, count = top_n_bounds(body)
        return self._limited(children[0], offset, count)

    def _limited(self, child: RelEstimate, offset: float, count: float | None) -> RelEstimate:
        rows = max(child.rows - offset, 0.0)
        if count is not None:
            rows = min(rows, count)
        fraction = rows / child.rows if child.rows > 0 else 0.0
        cols = [_scale_column(c, child.rows, fraction, rows) for c in child.columns]
        return replace(child, rows=rows, columns=cols)

    def _rel_project(self, node, body, children) -> RelEstimate:
        child = children[0]
        cols = list(child.columns)
        for e in body.expressions:
            cols.append(self.expression_column(e, child))
        return replace(child, columns=cols)

    def _rel_window(self, node, body, children) -> RelEstimate:
        child = children[0]
        cols = list(child.columns) + [ColumnEstimate(ndv=None) for _ in body.window_functions]
        return replace(child, columns=cols)

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
                ndvs = [p.ndv for p in parts if p is not None]
                col = ColumnEstimate(ndv=sum(ndvs) + 1 if len(ndvs) == len(parts) and ndvs else None)
                cols.append(col)
            elif which == "consistent_field":
                c = self.expression_column(f.consistent_field, child)
                cols.append(replace(c, origin=None) if c is not None else None)
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
            cols.append(replace(k, ndv=ndv, histogram=None if fraction < 1 else k.histogram))
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
        moments = _moments(x)
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

    # -- set operations ------------------------------------------------------------------------------

    def _rel_set(self, node, body, children) -> RelEstimate:
        from substrait.proto import SetRel

        if not children:
            return RelEstimate(0.0, 0.0, [])
        op = body.op
        first = children[0]
        n = len(first.columns)
        merged: list[ColumnEstimate | None] = []
        for c in range(n):
            parts = [ch.columns[c] if c < len(ch.columns) else None for ch in children]
            merged.append(_union_column(parts))
        distinct = [self.group_count(list(ch.columns), ch) for ch in children]
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
            lf = _ref_field(k.left)
            rf = _ref_field(k.right)
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
        """``(keys, residual)``: equi-join keys ``(left column, right column relative to the right input)``
        from the ``equal``/``is_not_distinct_from`` conjuncts of a join expression, and the other conjuncts."""
        keys: list[tuple[int, int]] = []
        residual: list[Expression] = []
        for c in conjuncts(expression, self.functions):
            name = self._fname(c)
            args = call_args(c) if name in ("equal", "is_not_distinct_from") else None
            if args is not None and len(args) == 2:
                a, b = column_of(args[0]), column_of(args[1])
                if a is not None and b is not None:
                    if a < n_left <= b:
                        keys.append((a, b - n_left))
                        continue
                    if b < n_left <= a:
                        keys.append((b, a - n_left))
                        continue
            residual.append(c)
        return keys, residual

    def join(self, jt: str, left: RelEstimate, right: RelEstimate, keys: list[tuple[int, int]],
             residual: list[Expression]) -> RelEstimate:
        """The estimate of a join of type ``jt`` (``INNER``, ``LEFT_SEMI``...) on equi-``keys`` and
        ``residual`` conjuncts (over left + right columns).

        One key: both sides' values are drawn from a common domain of ``D = max(domain_l, domain_r)``
        values (a key's domain is its base column's NDV, so a filtered side keeps the whole domain):
        a left value has a partner with probability ``ndv_r / D`` and the inner join has
        ``|L| |R| / D`` rows, which is ``|L| |R| / max(ndv_l, ndv_r)`` when one side's values contain
        the other's. Several keys: their NDVs multiply, capped by each side's rows, and the larger
        combination is the denominator (containment). A residual of selectivity ``s`` leaves
        ``1 - exp(-m s)`` of the rows with a key partner matched (``m`` partners, Poisson).
        """
        nl = len(left.columns)
        lcols = list(left.columns)
        rcols = list(right.columns)
        L, R = max(left.rows, 0.0), max(right.rows, 0.0)
        both_cols = lcols + rcols
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
                domain = max(ndv_l, ndv_r, (cl.domain or 0.0) if cl else 0.0, (cr.domain or 0.0) if cr else 0.0)
            else:
                domain = max(ndv_l, ndv_r)
            l_values = min(1.0, ndv_r / domain)  # fraction of left key values with a partner
            r_values = min(1.0, ndv_l / domain)
        # Residual selectivity, computed on the concatenated columns (keys already equal).
        res_sel = 1.0
        res_cols = both_cols
        if residual:
            res_est = RelEstimate(max(L * R, 1.0), 0.0, both_cols, applied=left.applied | right.applied)
            res_sel, res_cols, _, _ = self._conjunction(residual, res_est)
        if keys:
            inner = L * R / domain * res_sel
            left_match = l_values * _matched(res_sel, R / ndv_r)
            right_match = r_values * _matched(res_sel, L / ndv_l)
        else:
            inner = L * R * res_sel
            left_match = _matched(res_sel, R) if R > 0 else 0.0
            right_match = _matched(res_sel, L) if L > 0 else 0.0
        out_l = [_scale_column(c, L, left_match, inner) for c in res_cols[:nl]]
        out_r = [_scale_column(c, R, right_match, inner) for c in res_cols[nl:]]
        fds = set(left.fds | right.fds)
        for (lk, rk), (a, b) in zip(keys, key_ndv, strict=False):
            cl = out_l[lk] if 0 <= lk < len(out_l) else None
            cr = out_r[rk] if 0 <= rk < len(out_r) else None
            if cl is None or cr is None:
                continue
            m = min(a * l_values, b * r_values) if len(keys) == 1 else min(a, b)
            # key values are selected: so are the values of the columns that determine them
            _select_values(out_l, lk, max(m, 1.0) / a, lcols)
            _select_values(out_r, rk, max(m, 1.0) / b, rcols)
            cl, cr = out_l[lk], out_r[rk]
            shared = cl.key_of | cr.key_of
            lo, hi = _max_opt(cl.min, cr.min), _min_opt(cl.max, cr.max)
            dom = max(cl.domain or 0.0, cr.domain or 0.0) or None
            out_l[lk] = replace(cl, ndv=max(min(m, cl.ndv or m), 1.0), key_of=shared, min=lo, max=hi, domain=dom)
            out_r[rk] = replace(cr, ndv=max(min(m, cr.ndv or m), 1.0), key_of=shared, min=lo, max=hi, domain=dom)
            for c in (cl, cr):
                if c.origin is not None:
                    fds.update((c.origin[0], k) for k in shared if k != c.origin[0])
        applied = left.applied | right.applied
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
                cols_l = [_scale_column(c, L, 1.0, rows) for c in lcols]
                cols_r = [_nulls(c, inner, rows) for c in out_r] if jt == "LEFT" else cols_r
            if jt in ("RIGHT", "OUTER"):
                cols_r = [_scale_column(c, R, 1.0, rows) for c in rcols]
                cols_l = [_nulls(c, inner, rows) for c in out_l] if jt == "RIGHT" else cols_l
            if jt == "OUTER":
                cols_l = [_nulls(c, inner + L * (1 - left_match), rows) for c in cols_l]
                cols_r = [_nulls(c, inner + R * (1 - right_match), rows) for c in cols_r]
            keep = left.applied if jt == "LEFT" else right.applied if jt == "RIGHT" else frozenset()
            keep_fds = left.fds if jt == "LEFT" else right.fds if jt == "RIGHT" else frozenset()
            return RelEstimate(rows, 0.0, cols_l + cols_r, applied=keep, fds=keep_fds,
                               exprs=left.exprs if jt == "LEFT" else right.exprs if jt == "RIGHT" else {})
        if jt in ("LEFT_SEMI", "LEFT_ANTI"):
            fraction = left_match if jt == "LEFT_SEMI" else 1 - left_match
            rows = L * fraction
            cols = [_scale_column(c, L, fraction, rows) for c in lcols]
            for lk, _ in keys:  # whole key values are kept or dropped
                _keep_key_values(cols, lk, fraction, lcols, rows)
            return RelEstimate(rows, 0.0, cols, applied=left.applied, fds=left.fds, exprs=left.exprs)
        if jt in ("RIGHT_SEMI", "RIGHT_ANTI"):
            fraction = right_match if jt == "RIGHT_SEMI" else 1 - right_match
            rows = R * fraction
            cols = [_scale_column(c, R, fraction, rows) for c in rcols]
            for _, rk in keys:
                _keep_key_values(cols, rk, fraction, rcols, rows)
            return RelEstimate(rows, 0.0, cols, applied=right.applied, fds=right.fds, exprs=right.exprs)
        if jt == "LEFT_SINGLE":
            return RelEstimate(L, 0.0, lcols + [_nulls(c, inner, L) for c in out_r], applied=left.applied, fds=left.fds, exprs=left.exprs)
        if jt == "RIGHT_SINGLE":
            return RelEstimate(R, 0.0, [_nulls(c, inner, R) for c in out_l] + rcols, applied=right.applied,
                               fds=right.fds, exprs=right.exprs)
        mark = ColumnEstimate(ndv=2.0, avg_len=1.0, null_fraction=None)
        if jt == "LEFT_MARK":
            return RelEstimate(L, 0.0, lcols + [mark], applied=left.applied, fds=left.fds, exprs=left.exprs)
        if jt == "RIGHT_MARK":
            return RelEstimate(R, 0.0, rcols + [mark], applied=right.applied, fds=right.fds, exprs=right.exprs)
        return RelEstimate(inner, 0.0, out_l + out_r, applied=applied, fds=fds_all, exprs={**left.exprs, **right.exprs})

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

    def _fname(self, e: Expression) -> str | None:
        if e.WhichOneof("rex_type") != "scalar_function":
            return None
        anchor = e.scalar_function.function_reference
        if anchor not in self.functions:
            return None
        return self.functions.get(anchor).name

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
                return _cap_column(child.exprs[fp], child.rows)
        value = literal_of(e)
        if value is not _NOT_LITERAL:
            if value is None:
                return ColumnEstimate(ndv=0.0, null_fraction=1.0)
            return ColumnEstimate(ndv=1.0, min=value, max=value, null_fraction=0.0,
                                  avg_len=float(len(value)) if isinstance(value, str) else None)
        if rex == "cast":
            inner = self.expression_column(e.cast.input, child)
            if inner is None:
                return None
            target = type_kind(e.cast.type)
            keep_bounds = target not in _TEXT and inner.numeric
            return replace(inner, origin=None, histogram=inner.histogram if keep_bounds else None,
                           min=inner.min if keep_bounds else None, max=inner.max if keep_bounds else None,
                           avg_len=None, integral=inner.integral and target in _INTEGRAL_KINDS)
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
        if name in _COMPARISONS or name in ("and", "or", "not", "like", "is_null", "is_not_null"):
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
        ma, mb = _moments(a), _moments(b)
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
        cache = self.__dict__.setdefault("_scalar_cache", {})
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
                sub = to_dag(plan)
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

    # -- predicates -------------------------------------------------------------------------------------

    def apply_filter(self, condition: Expression, est: RelEstimate) -> RelEstimate:
        """``est`` filtered by ``condition``: rows times its selectivity, columns updated (bounds of
        compared columns narrowed, NDVs of the others thinned out)."""
        sel, cols, applied, exprs = self._conjunction(conjuncts(condition, self.functions), est)
        rows = est.rows * sel
        if est.rows >= 1:  # floor at one row: statistics may be stale, and 0 would zero everything above
            rows = max(rows, 1.0)
        cols = [_cap_column(c, rows) for c in cols]
        return replace(est, rows=rows, columns=cols, applied=applied, exprs=exprs)

    def selectivity(self, condition: Expression, est: RelEstimate) -> float:
        """The fraction of ``est``'s rows for which ``condition`` holds."""
        return self._conjunction(conjuncts(condition, self.functions), est)[0]

    def _fingerprint(self, e: Expression, cols: Sequence[ColumnEstimate | None]) -> bytes | None:
        from optimizer.expr_utils import has_unresolvable_refs, referenced_fields

        refs = referenced_fields(e)
        if not refs or has_unresolvable_refs(e):
            return None
        mapping: dict[int, int] = {}
        for r in refs:
            c = cols[r] if 0 <= r < len(cols) else None
            if c is None or c.origin is None:
                return None
            mapping[r] = self._origin_ids.setdefault(c.origin, len(self._origin_ids) + 1_000_000)
        from rules.simplify_predicates import fold

        try:
            # AND/OR nesting does not make two predicates different (simplify_predicates flattens a
            # FilterRel's copy of what DataFusion also wrote, nested, into the ReadRel's filter).
            return fold(remap_fields(e, mapping), self.functions).SerializeToString(deterministic=True)
        except PlanError:  # an undeclared function anchor: no fingerprint
            return None

    def _conjunction(self, parts: Iterable[Expression], est: RelEstimate
                     ) -> tuple[float, list[ColumnEstimate | None], frozenset, dict]:
        cols = list(est.columns)
        rows = est.rows
        applied = set(est.applied)
        exprs = dict(est.exprs)
        narrowed: set[int] = set()
        total = 1.0
        for c in parts:
            fp = self._fingerprint(c, cols)
            if fp is not None and fp in applied:
                continue
            sel, updates = self._predicate(c, cols, rows)
            sel = min(max(sel, 0.0), 1.0)
            for k in [k for k in updates if isinstance(k, bytes)]:
                exprs[k] = updates.pop(k)
            new_rows = rows * sel
            before = list(cols)
            for i, col in enumerate(cols):
                if i in updates:
                    cols[i] = updates[i]
                else:
                    cols[i] = _scale_column(col, rows, sel, new_rows) if col is not None else None
            narrowed.update(updates)
            for i, upd in updates.items():
                old = before[i] if 0 <= i < len(before) else None
                if old is not None and old.ndv and upd is not None and upd.ndv is not None and upd.ndv < old.ndv:
                    _select_values(cols, i, upd.ndv / old.ndv, before)
            rows = new_rows
            total *= sel
            if fp is not None:
                applied.add(fp)
        self._narrowed = narrowed
        return total, cols, frozenset(applied), exprs

    def _predicate(self, e: Expression, cols: list[ColumnEstimate | None], rows: float
                   ) -> tuple[float, dict[int, ColumnEstimate]]:
        """Selectivity of one predicate and the columns it narrows."""
        rex = e.WhichOneof("rex_type")
        if rex == "literal":
            v = _literal_value(e.literal)
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
            sel, new_cols, _, _ = self._conjunction(args, est)
            return sel, {k: new_cols[k] for k in self._narrowed if 0 <= k < len(new_cols) and new_cols[k] is not None}
        if name == "or":
            parts = disjuncts(e, self.functions)
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
                    lo = _min_opt(lo, c.min) if lo is not None and c.min is not None else None
                    hi = _max_opt(hi, c.max) if hi is not None and c.max is not None else None
                if lo is None:
                    lo = old.min
                if hi is None:
                    hi = old.max
                updates[i] = replace(old, ndv=ndv, min=lo, max=hi, null_fraction=0.0)
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
        if name in _COMPARISONS and len(args) == 2:
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
            updates = {i: replace(col, ndv=0.0, null_fraction=1.0, min=None, max=None, histogram=None)} if col else {}
            return nf, updates
        updates = {i: replace(col, null_fraction=0.0)} if col else {}
        return 1.0 - nf, updates

    def _in_list(self, sol, cols) -> tuple[float, dict[int, ColumnEstimate]]:
        i = column_of(sol.value)
        values = [literal_of(o) for o in sol.options]
        col = cols[i] if i is not None and 0 <= i < len(cols) else None
        if any(v is _NOT_LITERAL for v in values):
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
        update = replace(col, ndv=min(col.ndv, float(len(inside))) if col.ndv is not None else float(len(inside)),
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
        if ia is None and va is not _NOT_LITERAL and (ib is not None or vb is _NOT_LITERAL):
            a, b, ia, ib, va, vb = b, a, ib, ia, vb, va
            name = _FLIP[name]
        if ia is not None and vb is _NOT_LITERAL:
            sv = self.scalar_value(b)
            if sv is not None:
                vb = sv
        if ia is None and ib is not None and va is _NOT_LITERAL:
            sv = self.scalar_value(a)
            if sv is not None:
                a, b, ia, ib, va, vb = b, a, ib, None, _NOT_LITERAL, sv
                name = _FLIP[name]
        if ia is None and ib is None and va is _NOT_LITERAL and vb is _NOT_LITERAL:
            # an expression against a scalar subquery: the expression's estimate, as a column
            sv = self.scalar_value(b)
            ca = self.expression_column(a, RelEstimate(rows, 0.0, cols)) if sv is not None else None
            if ca is not None and name not in ("equal", "not_equal", "is_not_distinct_from", "is_distinct_from"):
                tmp = list(cols) + [ca]
                sel, _ = self._column_vs_value(name, len(cols), sv, tmp)
                return sel, {}
        if ia is not None and vb is not _NOT_LITERAL:
            return self._column_vs_value(name, ia, vb, cols)
        if ia is not None and ib is not None:
            return self._column_vs_column(name, ia, ib, cols)
        if va is not _NOT_LITERAL and vb is not _NOT_LITERAL:
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
            fp = self._fingerprint(a, cols) if vb is not _NOT_LITERAL and vb is not None else None
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
            upd = replace(col, ndv=1.0 if f > 0 else 0.0, min=v, max=v, null_fraction=0.0, histogram=None)
            return f * nonnull, {i: upd}
        if name in ("not_equal", "is_distinct_from"):
            f = self._eq_fraction(col, v)
            ndv = max(col.ndv - 1.0, 1.0) if col.ndv is not None and f > 0 else col.ndv
            return (1.0 - f) * nonnull, {i: replace(col, ndv=ndv, null_fraction=0.0)}
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
        if i is None or lo is _NOT_LITERAL or hi is _NOT_LITERAL or lo is None or hi is None:
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
            return default * nonnull, {i: replace(col, null_fraction=0.0)}
        numeric = col.numeric and isinstance(value, float) and (lo is None or isinstance(lo, float)) \
            and (hi is None or isinstance(hi, float))
        text = isinstance(col.min, str) and isinstance(col.max, str) and isinstance(value, str) \
            and (lo is None or isinstance(lo, str)) and (hi is None or isinstance(hi, str))
        if not numeric and not text:
            return default * nonnull, {i: replace(col, null_fraction=0.0)}
        a, b = _domain(col)
        qlo, qhi = _interval(_num(lo) if lo is not None else None, lo_incl,
                             _num(hi) if hi is not None else None, hi_incl, col.integral and numeric)
        lo2, hi2 = max(a, qlo), min(b, qhi)
        if hi2 <= lo2:
            return 0.0, {i: replace(col, ndv=0.0, null_fraction=0.0)}
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
        upd = replace(col, min=new_min, max=new_max, ndv=ndv, null_fraction=0.0)
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
                return f * nonnull, {i: replace(col, ndv=1.0, min=pattern, max=pattern, null_fraction=0.0)}
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
        return sel * nonnull, ({i: replace(col, null_fraction=0.0)} if col is not None else {})


# --------------------------------------------------------------------------------------------------
# Helpers used by the estimator
# --------------------------------------------------------------------------------------------------


def _ref_field(ref) -> int | None:
    if ref.WhichOneof("reference_type") != "direct_reference":
        return None
    seg = ref.direct_reference
    return seg.struct_field.field if seg.WhichOneof("reference_type") == "struct_field" else None


def _field_expr(i: int) -> Expression:
    from optimizer.expr_utils import field

    return field(i)


def _matched(s: float, m: float) -> float:
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


def _keep_key_values(cols: list[ColumnEstimate | None], i: int, fraction: float,
                     before: Sequence[ColumnEstimate | None], rows: float) -> None:
    """A semi/anti join keeps or drops whole key values: ``fraction`` of the key's values remain (not the
    values a random ``fraction`` of the rows would hold), and of the columns that determine it."""
    col = cols[i] if 0 <= i < len(cols) else None
    old = before[i] if 0 <= i < len(before) else None
    if col is None or old is None or old.ndv is None:
        return
    cols[i] = replace(col, ndv=max(min(old.ndv * fraction, rows), 1.0 if rows >= 1 else 0.0))
    _select_values(cols, i, fraction, before)


def _select_values(cols: list[ColumnEstimate | None], i: int, fraction: float,
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
        cols[j] = replace(c, ndv=max(min(c.ndv, base * fraction), 1.0 if c.ndv >= 1 else 0.0))


def _nulls(col: ColumnEstimate | None, matched: float, rows: float) -> ColumnEstimate | None:
    """A column of the null-supplying side of an outer join."""
    if col is None:
        return None
    nf_in = col.null_fraction or 0.0
    non_null = matched * (1.0 - nf_in)
    nf = 1.0 - non_null / rows if rows > 0 else 0.0
    return replace(col, null_fraction=min(max(nf, 0.0), 1.0), key_of=frozenset())


def _value_set(values: list[Any]) -> ColumnEstimate:
    """A column known to hold only ``values``."""
    col = ColumnEstimate(ndv=float(len(values)), null_fraction=0.0)
    if values and len({type(v) for v in values}) == 1:
        col.min, col.max = min(values), max(values)
    return col


def _union_column(parts: list[ColumnEstimate | None]) -> ColumnEstimate | None:
    if not parts or any(p is None for p in parts):
        return None
    ndvs = [p.ndv for p in parts]
    ndv = sum(ndvs) if all(n is not None for n in ndvs) else None
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


def _max_opt(a: Any, b: Any) -> Any:
    if a is None:
        return b
    if b is None:
        return a
    try:
        return max(a, b)
    except TypeError:
        return a


def _min_opt(a: Any, b: Any) -> Any:
    if a is None:
        return b
    if b is None:
        return a
    try:
        return min(a, b)
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
    lo, hi = _num(col.min), _num(col.max)
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


def _histogram_mass(h: Histogram, a: float, b: float, integral: bool = False) -> float:
    """Rows of the histogram in ``(a, b]``, uniform within a bin. Bin i covers ``(lo_i, hi_i]``; the
    first also holds its lower bound (so it starts at ``lo - 1`` for integral values); a bin with
    ``lo == hi`` holds that one value."""
    total = 0.0
    for idx, (lo, hi, _ndv) in enumerate(h.bins):
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


def _moments(col: ColumnEstimate) -> tuple[float, float] | None:
    """(mean, variance) of a numeric column: from its normal, its moments, its histogram, or uniform over
    its bounds."""
    if col.normal is not None:
        return col.normal[0], col.normal[1] ** 2
    if col.moments is not None:
        return col.moments
    if not col.numeric:
        return None
    a, b = float(col.min), float(col.max)
    h = col.histogram
    if h is not None and h.bins:
        mids = []
        within = 0.0
        for lo, hi, _ndv in h.bins:
            if hi < a or lo > b:
                continue
            lo, hi = max(lo, a), min(hi, b)
            mids.append((lo + hi) / 2)
            within += (hi - lo) ** 2 / 12
        if mids:
            mean = sum(mids) / len(mids)
            var = sum((x - mean) ** 2 for x in mids) / len(mids) + within / len(mids)
            return mean, var
    return (a + b) / 2, (b - a) ** 2 / 12


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
    offset, count = 0.0, None
    if body.HasField("offset"):
        v = literal_of(body.offset)
        offset = max(float(v), 0.0) if isinstance(v, float) else 0.0
    if body.HasField("count"):
        v = literal_of(body.count)
        count = float(v) if isinstance(v, float) and v >= 0 else None
    return offset, count


def q_error(estimated: float, actual: float) -> float:
    """``max(est/act, act/est)`` with both floored at 1 row.

    >>> q_error(10, 100), q_error(0, 0), q_error(50, 5)
    (10.0, 1.0, 10.0)
    """
    e, a = max(float(estimated), 1.0), max(float(actual), 1.0)
    return max(e / a, a / e)


__all__ = [
    "DEFAULT_BETWEEN_SEL",
    "DEFAULT_BOOL_SEL",
    "DEFAULT_EQ_SEL",
    "DEFAULT_GROUP_FRACTION",
    "DEFAULT_LIKE_SEL",
    "LIKE_CHAR_FACTOR",
    "DEFAULT_NULL_SEL",
    "DEFAULT_RANGE_SEL",
    "DEFAULT_SEL",
    "DEFAULT_SET_OVERLAP",
    "DEFAULT_STRING_WIDTH",
    "DEFAULT_TABLE_ROWS",
    "CardinalityEstimator",
    "ColumnEstimate",
    "RelEstimate",
    "column_of",
    "distinct_after_sampling",
    "expected_groups",
    "like_fragment_selectivity",
    "literal_of",
    "q_error",
    "top_n_bounds",
    "type_width",
]
