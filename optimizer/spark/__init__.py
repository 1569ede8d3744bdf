"""PySpark execution backend for Substrait plans.

``SparkBackend(spark, tables=...)``: ``to_dataframe(plan)`` -> lazy Spark DataFrame, ``execute(plan)`` ->
``pyarrow.Table``. See :mod:`optimizer.spark.backend` (relations, compiled by one module per kind of
relation), :mod:`optimizer.spark.expressions` (expressions) and :mod:`optimizer.spark.tables` (table binding).
"""

from __future__ import annotations

__all__ = ["SparkBackend", "TableResolver"]


def __getattr__(name: str):
    # Importing pyspark is slow: only when the backend is asked for.
    if name == "SparkBackend":
        from optimizer.spark.backend import SparkBackend

        return SparkBackend
    if name == "TableResolver":
        from optimizer.spark.tables import TableResolver

        return TableResolver
    raise AttributeError(f"module 'optimizer.spark' has no attribute {name!r}")
