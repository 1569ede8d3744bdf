"""Engines that consume Substrait themselves: DataFusion, DuckDB and Acero, beside the Spark backend.

Each module has a runner (:class:`~optimizer.engines.base.EngineRunner`) whose ``execute(plan)``
hands the plan to the engine and returns its answer as a ``pyarrow.Table``; the tables the plan
names are bound from a folder of Parquet files as the Spark backend binds them. The engines'
packages are optional: ``pip install 'substrait-optimizer[datafusion]'`` or ``[duckdb]``; Acero comes
with pyarrow. See docs/engines.md.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from optimizer.errors import PlanError

if TYPE_CHECKING:  # the CLI imports this package to build its parser: the runners load on use
    from optimizer.engines.base import EngineRunner
    from optimizer.paths import FileAccess

__all__ = ["ENGINES", "EXTERNAL_ENGINES", "runner"]

#: What ``--engine`` accepts: Spark (the project's own backend) and the Substrait consumers.
ENGINES = ("spark", "datafusion", "duckdb", "acero")
#: The engines that read the Substrait plan themselves.
EXTERNAL_ENGINES = ("datafusion", "duckdb", "acero")


def runner(engine: str, tables: str | os.PathLike | Mapping[str, Any] | None = None, *,
           files: FileAccess | None = None, ignore_best_effort_filter: bool = False) -> EngineRunner:
    """The runner of ``engine`` (one of :data:`EXTERNAL_ENGINES`) over ``tables``."""
    if engine == "datafusion":
        from optimizer.engines.datafusion import DataFusionRunner as cls
    elif engine == "duckdb":
        from optimizer.engines.duckdb import DuckDBRunner as cls
    elif engine == "acero":
        from optimizer.engines.acero import AceroRunner as cls
    else:
        raise PlanError(f"unknown engine '{engine}' (choose from {', '.join(EXTERNAL_ENGINES)})")
    return cls(tables, files=files, ignore_best_effort_filter=ignore_best_effort_filter)
