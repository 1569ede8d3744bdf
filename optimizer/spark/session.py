"""One SparkSession for the whole process: quiet logs, no UI, settings fit for a small machine."""

from __future__ import annotations

import os

_DEFAULT_CONF = {
    "spark.ui.enabled": "false",
    "spark.ui.showConsoleProgress": "false",
    "spark.sql.session.timeZone": "UTC",
    "spark.sql.execution.arrow.pyspark.enabled": "true",
    # Substrait semantics: integer overflow and invalid casts are not silently wrapped by Spark's
    # ANSI mode differently per operator; the backend makes each choice explicit.
    "spark.sql.ansi.enabled": "false",
    "spark.driver.memory": os.environ.get("SUBSTRAIT_OPT_DRIVER_MEMORY", "6g"),
    "spark.sql.shuffle.partitions": os.environ.get("SUBSTRAIT_OPT_SHUFFLE_PARTITIONS", "8"),
    "spark.sql.adaptive.enabled": "true",
    # PySpark 4 records the Python call site of every Column/DataFrame call for error messages: six
    # JVM round trips per call, over half of the time to build a DataFrame from a plan.
    "spark.python.sql.dataFrameDebugging.enabled": "false",
    "spark.sql.warehouse.dir": os.path.join(os.environ.get("TMPDIR", "/tmp"), "substrait-opt-warehouse"),
}


def get_spark(master: str | None = None, app_name: str = "substrait-optimizer", conf: dict | None = None):
    """Return the process's SparkSession, creating it on first use."""
    import sys

    from pyspark.sql import SparkSession

    # Python workers must run the interpreter that has our packages (not whatever python3 is on PATH).
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    active = SparkSession.getActiveSession()
    if active is not None:
        return active
    builder = SparkSession.builder.master(master or "local[*]").appName(app_name)
    for key, value in {**_DEFAULT_CONF, **(conf or {})}.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    _quiet_query_context_logger()
    return spark


def _quiet_query_context_logger() -> None:
    """Silence PySpark's DataFrameQueryContextLogger and SQLQueryContextLogger: they log, at ERROR level
    with a stack trace, every analysis failure of a ``Column`` or of SQL text -- including the ones the
    backend provokes and catches on purpose (asking the type of an expression with outer references
    reports "cannot be resolved"). Real failures still reach the user as the backend's one-line errors."""
    import logging

    for name in ("DataFrameQueryContextLogger", "SQLQueryContextLogger"):
        try:
            from pyspark.logger import PySparkLogger

            logger = PySparkLogger.getLogger(name)
        except ImportError:  # PySpark without its own logger: the plain logging one
            logger = logging.getLogger(name)
        logger.disabled = True


class LazySpark:
    """Stands for the SparkSession and starts it on first use (so a statistics cache hit needs no JVM)."""

    def __init__(self, master: str | None = None) -> None:
        self._master = master
        self._spark = None

    @property
    def session(self):
        if self._spark is None:
            self._spark = get_spark(self._master)
        return self._spark

    @property
    def started(self) -> bool:
        return self._spark is not None

    def __getattr__(self, name: str):
        return getattr(self.session, name)
