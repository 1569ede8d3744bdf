"""``RelRoot.names`` on the compiled query: checked against its columns (nested struct fields
included), written into the SQL text where they can stand there, else applied with the DataFrame API."""

from __future__ import annotations

from collections.abc import Callable

from pyspark.sql import DataFrame
from pyspark.sql import types as T

from optimizer.errors import PlanError
from optimizer.spark.rel_compiler import Relation


def _rename_type(dt: T.DataType, names: Callable[[], str]) -> T.DataType:
    """``dt`` with its nested struct fields renamed, depth-first (lists and maps looked into)."""
    if isinstance(dt, T.StructType):
        fields = []
        for f in dt.fields:
            name = names()
            fields.append(T.StructField(name, _rename_type(f.dataType, names), f.nullable))
        return T.StructType(fields)
    if isinstance(dt, T.ArrayType):
        return T.ArrayType(_rename_type(dt.elementType, names), dt.containsNull)
    if isinstance(dt, T.MapType):
        key = _rename_type(dt.keyType, names)
        return T.MapType(key, _rename_type(dt.valueType, names), dt.valueContainsNull)
    return dt


def _nested_count(dt: T.DataType) -> int:
    if isinstance(dt, T.StructType):
        return sum(1 + _nested_count(f.dataType) for f in dt.fields)
    if isinstance(dt, T.ArrayType):
        return _nested_count(dt.elementType)
    if isinstance(dt, T.MapType):
        return _nested_count(dt.keyType) + _nested_count(dt.valueType)
    return 0


def _check_root_names(names: list[str], r: Relation, path: str) -> None:
    """``RelRoot.names``: none, one per column, or one per column and nested struct field."""
    if not names or len(names) == len(r.columns) or r.types is None:
        return
    from optimizer.spark.expressions import substrait_type_to_spark

    flat = sum(1 + _nested_count(substrait_type_to_spark(t)) for t in r.types)
    if len(names) != flat:
        raise PlanError(
            f"RelRoot has {len(names)} names but its input has {len(r.columns)} columns ({flat} with nested fields)",
            path,
        )


def _names_in_text(names: list[str], width: int) -> bool:
    """Whether the query text itself can name its columns: one name per column (no nested fields), none
    empty, none that Spark's variable substitution would read (``${``). Then no second analysis (a
    ``toDF`` over the query: 3-7 ms a plan) renames them."""
    return len(names) == width > 0 and all(n and "${" not in n for n in names)


def _apply_root_names(df: DataFrame, names: list[str], width: int) -> DataFrame:
    """The query's columns ``_r0``... named by ``RelRoot.names`` (nested struct fields included), with
    the DataFrame API, which reads no name as SQL."""
    if not names:
        return df
    if len(names) == width:
        return df.toDF(*names)
    fields = df.schema.fields
    flat = sum(1 + _nested_count(f.dataType) for f in fields)
    if len(names) != flat:
        raise PlanError(f"RelRoot has {len(names)} names but its input has {len(fields)} columns ({flat} with "
                        "nested fields)", "relations.root.names")
    it = iter(names)
    cols = []
    for f in fields:
        top = next(it)
        c = df[f.name]  # (the DataFrame's own column: classic or Connect, as the session is)
        if _nested_count(f.dataType):
            c = c.cast(_rename_type(f.dataType, lambda: next(it)))
        cols.append(c.alias(top))
    return df.select(*cols)
