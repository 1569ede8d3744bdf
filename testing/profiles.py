"""What a differential test runs a generated plan with besides its tables: statistics that may be true
or lies (:func:`statistics`), reader-capability profiles (:func:`capability_profiles`) and optimizer
configurations (:func:`optimizer_configs`).
"""

from __future__ import annotations

import datetime
import decimal
import math

from hypothesis import strategies as st

from optimizer.difftest.harness import (
    Database,
)
from testing.values import _maybe, _pick, values

# -------------------------------------------------------------------------------------- statistics

_SPARK_TYPES = {"i8": "tinyint", "i16": "smallint", "i32": "int", "i64": "bigint", "fp32": "float",
                "fp64": "double", "string": "string", "bool": "boolean", "date": "date",
                "timestamp": "timestamp_ntz"}

__all__ = ["capability_profiles", "optimizer_configs", "statistics"]



def _stat_value(spec: str, value):
    """A column value in the statistics JSON convention (None for what JSON cannot carry)."""
    if value is None:
        return None
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, decimal.Decimal):
        return float(value)
    if isinstance(value, datetime.date | datetime.datetime):
        return value.isoformat()
    return value


@st.composite
def statistics(draw, database: Database):
    """``{table name: TableStatistics}`` for some of ``database``'s tables, or None: true or lying row
    counts, NDVs, null counts and min/max."""
    from optimizer.cost.statistics import ColumnStatistics, TableStatistics

    if not _maybe(draw, 70):
        return None
    out = {}
    for name, table in database.tables.items():
        if _maybe(draw, 20):
            continue
        truth = float(len(table.rows))
        rows = truth if not _maybe(draw, 50) else float(_pick(draw, [0, 1, 10, 1000, 1e9]))
        columns = {}
        for i, c in enumerate(table.columns):
            if _maybe(draw, 30):
                continue
            present = [row[i] for row in table.rows if row[i] is not None]
            spec = c.type
            lie = _maybe(draw, 40)
            if lie:
                lo, hi = draw(values(spec)), draw(values(spec))
                ndv = float(_pick(draw, [1, 0, 2, 1000, 1e9]))
                nulls = float(_pick(draw, [0, 1, 1e6]))
            else:
                finite = [v for v in present if not (isinstance(v, float) and math.isnan(v))]
                lo, hi = (min(finite), max(finite)) if finite else (None, None)
                ndv = float(len(set(map(repr, present))))
                nulls = float(len(table.rows) - len(present))
            spark_type = _SPARK_TYPES.get(spec) or spec.replace(" ", "")
            columns[c.name] = ColumnStatistics(
                ndv=ndv, min=_stat_value(spec, lo), max=_stat_value(spec, hi), null_count=nulls,
                data_type=spark_type,
            )
        out[name] = TableStatistics(row_count=rows, size_bytes=rows * 16, columns=columns)
    return out


_CAP_FUNCTIONS = ["equal", "lt", "gt", "not_equal", "lte", "gte", "and", "or", "not", "is_null", "is_not_null",
                  "in", "between", "like", "starts_with", "is_nan", "is_not_distinct_from", "is_distinct_from",
                  "add", "multiply", "cast", "if_then", "coalesce", "concat", "upper", "*"]
_CAP_ARGS = [None, ["*"], ["integer", "integer"], ["numeric", "numeric"], ["text", "text"],
             ["temporal", "temporal"], ["boolean", "..."], ["*", "..."], ["float", "*"]]


@st.composite
def capability_profiles(draw):
    """A random reader-capability profile (its JSON object), or None for the default profile. Any
    profile is honest for the Spark backend, which applies ``ReadRel.filter`` exactly."""
    if not _maybe(draw, 60):
        return None
    rules = []
    for _ in range(draw(st.integers(0, 6))):
        names = draw(st.lists(st.sampled_from(_CAP_FUNCTIONS), min_size=1, max_size=3, unique=True))
        entry: dict = {"function": names, "support": _pick(draw, ["full", "best_effort", "none"])}
        args = _pick(draw, _CAP_ARGS)
        if args is not None:
            entry["args"] = args
        shape = _pick(draw, [None, "column_op_constant", "prefix_pattern"])
        if shape is not None:
            entry["shape"] = shape
        rules.append(entry)
    read_types = _pick(draw, [["named_table", "local_files"], ["named_table", "virtual_table"], ["named_table"]])
    return {"name": "random", "default": _pick(draw, ["none", "best_effort", "full"]), "read_types": read_types,
            "constant_folding": draw(st.booleans()), "rules": rules}


@st.composite
def optimizer_configs(draw) -> dict:
    """Keyword arguments of :class:`optimizer.driver.OptimizerConfig` (join DP limit, broadcast
    threshold, iteration cap, estimates)."""
    return {
        "dp_join_limit": _pick(draw, [14, 1, 2, 3]),
        "dp_pair_budget": _pick(draw, [10_000, 1, 4]),
        "broadcast_threshold_bytes": float(_pick(draw, [10 * 1024 * 1024, 0, 1000, 1e15])),
        "max_iterations": _pick(draw, [10, 2, 50]),
        "annotate_estimates": draw(st.booleans()),
    }
