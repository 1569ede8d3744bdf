"""Spark's own size estimate of a relation: the ``sizeInBytes`` its planner compares with
``spark.sql.autoBroadcastJoinThreshold`` when it chooses how to run a join left logical.

Spark without CBO (its default) does not estimate rows: a file table is the bytes of its files, a
filter keeps its input's size, a projection scales it by the row widths, and a join multiplies its
inputs' sizes (Spark 4's ``SizeInBytesOnlyStatsPlanVisitor``). So Spark broadcasts a filtered table
only if the whole table (its read columns) is under the threshold, and almost never a join result,
however few rows our estimator expects. The cost model prices a logical ``JoinRel`` by this size,
so binding a broadcast that Spark would not choose on its own is seen to pay.

Row widths are Spark's ``getSizePerRow``: 8 bytes plus each column type's ``defaultSize``.

>>> from substrait.proto import Type
>>> row_size([Type(i64=Type.I64()), Type(string=Type.String())])
36.0
>>> scaled(1000.0, [Type(i64=Type.I64()), Type(string=Type.String())], [Type(i64=Type.I64())])
444.44444444444446
"""

from __future__ import annotations

from collections.abc import Sequence

from substrait.proto import Type

from optimizer.schema.types import type_kind

#: Spark's ``DataType.defaultSize`` by Substrait type kind (decimals and nested types below).
_DEFAULT_SIZE: dict[str, float] = {
    "bool": 1, "i8": 1, "i16": 2, "i32": 4, "i64": 8, "fp32": 4, "fp64": 8,
    "string": 20, "varchar": 20, "fixed_char": 20, "binary": 100, "fixed_binary": 100, "uuid": 20,
    "date": 4, "time": 8, "precision_time": 8, "timestamp": 8, "timestamp_tz": 8,
    "precision_timestamp": 8, "precision_timestamp_tz": 8,
    "interval_year": 4, "interval_day": 8, "interval_compound": 16,
}


def default_size(t: Type) -> float:
    """Spark's ``defaultSize`` of the type Spark reads a value of this type as."""
    kind = type_kind(t)
    if kind == "decimal":
        return 8.0 if t.decimal.precision <= 18 else 16.0
    if kind == "list":
        return default_size(t.list.type)
    if kind == "map":
        return default_size(t.map.key) + default_size(t.map.value)
    if kind == "struct":
        return sum(default_size(x) for x in t.struct.types)
    return float(_DEFAULT_SIZE.get(kind or "", 8))


def row_size(types: Sequence[Type]) -> float:
    """Spark's ``EstimationUtils.getSizePerRow`` without column statistics."""
    return 8.0 + sum(default_size(t) for t in types)


def scaled(child_bytes: float, child_types: Sequence[Type], out_types: Sequence[Type]) -> float:
    """A unary relation's size: its input's, times the ratio of the row sizes (``visitUnaryNode``)."""
    return child_bytes * row_size(out_types) / row_size(child_types)


def set_size(op: str, sizes: Sequence[float]) -> float:
    """Spark's size of a set operation by its Substrait ``SetRel.op`` name: ``visitUnion`` (sum),
    ``visitIntersect`` (the smaller), ``visitExcept`` (the first input)."""
    if "UNION" in op:
        return sum(sizes)
    if "INTERSECTION" in op:
        return min(sizes)
    return sizes[0]


def join_size(type_name: str | None, left: float, right: float) -> float:
    """``visitJoin``: a semi or anti join keeps its preserved side's size; any other join is the
    product of its inputs' sizes (Spark's default for a relation with several inputs)."""
    if type_name in ("LEFT_SEMI", "LEFT_ANTI"):
        return left
    if type_name in ("RIGHT_SEMI", "RIGHT_ANTI"):
        return right
    return max(left, 1.0) * max(right, 1.0)
