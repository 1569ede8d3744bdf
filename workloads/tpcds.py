"""TPC-DS data and queries for the tests and the TPC-DS results table.

* :func:`generate_tpcds` writes ``<dest>/<table>.parquet`` for the 24 TPC-DS tables, once per directory (a
  marker file records the scale; generation is skipped when it is present). The data comes from DuckDB's
  built-in ``CALL dsdgen(sf=...)``, which is deterministic (dsdgen's fixed seeds): the same scale gives the
  same rows. Column types are DuckDB's (``INTEGER`` keys, ``DECIMAL(7,2)`` money, ``DATE``, ``VARCHAR`` for
  both ``char`` and ``varchar``), nullable as DuckDB declares them.
* :func:`tpcds_queries` returns the 99 query texts of DuckDB 1.1.3's ``tpcds_queries()``, stored as
  ``workloads/data/tpcds/qNN.sql``. They read the tables by their plain names (``store_sales``...).
* The data lives in ``$SUBSTRAIT_OPT_DATA/tpcds-sf<scale>`` (beside TPC-H's ``sf<scale>``), else in
  ``<repo>/.cache/tpch/tpcds-sf<scale>``.

>>> len(TPCDS_TABLES), len(tpcds_queries())
(24, 99)
"""

from __future__ import annotations

import os
import re
import time
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from workloads.producers import DUCKDB_TPCDS_WRONG, ProducerError, datafusion_plan, duckdb_plan
from workloads.tpch import duckdb_generated, generate_once, repo_root

TPCDS_TABLES: tuple[str, ...] = (
    "call_center",
    "catalog_page",
    "catalog_returns",
    "catalog_sales",
    "customer",
    "customer_address",
    "customer_demographics",
    "date_dim",
    "household_demographics",
    "income_band",
    "inventory",
    "item",
    "promotion",
    "reason",
    "ship_mode",
    "store",
    "store_returns",
    "store_sales",
    "time_dim",
    "warehouse",
    "web_page",
    "web_returns",
    "web_sales",
    "web_site",
)

# Bump when the files' layout or schema changes: existing caches are then regenerated.
_FORMAT_VERSION = 1
_MARKER = "_TPCDS_GENERATED.json"
_DATA_DIR = Path(__file__).resolve().parent / "data" / "tpcds"


def default_tpcds_dir(scale: float = 0.01) -> Path:
    """Where the TPC-DS data of ``scale`` lives: ``$SUBSTRAIT_OPT_DATA/tpcds-sf<scale>`` when that variable is
    set, else ``<repo>/.cache/tpch/tpcds-sf<scale>``.

    >>> default_tpcds_dir(0.01).name
    'tpcds-sf0.01'
    """
    base = os.environ.get("SUBSTRAIT_OPT_DATA")
    root = Path(base) if base else repo_root() / ".cache" / "tpch"
    return root / f"tpcds-sf{scale:g}"


def tpcds_table_paths(data_dir: Path | str) -> dict[str, Path]:
    """``{table name: parquet path}`` for the 24 TPC-DS tables in ``data_dir``."""
    data_dir = Path(data_dir)
    return {name: data_dir / f"{name}.parquet" for name in TPCDS_TABLES}


def generate_tpcds(scale: float = 0.01, dest: Path | str | None = None, *, force: bool = False) -> Path:
    """Make the TPC-DS tables of ``scale`` in ``dest`` (default :func:`default_tpcds_dir`) unless already
    there; return ``dest``. Safe to call from concurrent processes (a file lock serialises them)."""
    import duckdb

    dest = Path(dest) if dest is not None else default_tpcds_dir(scale)

    def build() -> tuple[str, dict[str, int]]:
        con = duckdb_generated("tpcds", "dsdgen", scale)
        rows = {}
        for table in TPCDS_TABLES:
            data = con.execute(f'SELECT * FROM "{table}"').fetch_arrow_table()
            target = dest / f"{table}.parquet"
            tmp = target.with_name(f".{target.name}.{os.getpid()}.tmp")
            pq.write_table(data, tmp, compression="snappy")
            os.replace(tmp, target)
            rows[table] = data.num_rows
        con.close()
        return f"duckdb {duckdb.__version__} dsdgen", rows

    return generate_once(dest, scale, build, marker=_MARKER, version=_FORMAT_VERSION, paths=tpcds_table_paths,
                         force=force)


@cache
def _queries() -> dict[int, str]:
    return {n: (_DATA_DIR / f"q{n:02d}.sql").read_text().strip() for n in range(1, 100)}


def tpcds_queries() -> dict[int, str]:
    """The 99 TPC-DS queries ``{1: "SELECT ...", ...}`` (DuckDB 1.1.3's texts, no trailing ``;``)."""
    return dict(_queries())


_ROLLUP = re.compile(r"\brollup\s*\(", re.IGNORECASE)


def producer_bug(query: int, producer: str) -> str | None:
    """Why ``producer``'s plan of TPC-DS ``query`` means another query, if it does: such a plan is legal,
    and read as written it gives another answer, so it is not compared (tests, benchmarks).

    >>> producer_bug(9, "duckdb")[:10], producer_bug(5, "datafusion")
    ('wrong plan', None)
    """
    if producer != "duckdb":
        return None
    if query in DUCKDB_TPCDS_WRONG:
        return DUCKDB_TPCDS_WRONG[query]
    if _ROLLUP.search(_queries()[query]):
        return ("wrong plan: DuckDB 1.1.3 writes ROLLUP as its full grouping set only (the plan means GROUP BY "
                "all keys; docs/semantics.md)")
    return None


class TPCDSOracle:
    """Runs SQL on DuckDB over the TPC-DS parquet tables of a data directory: the expected answers."""

    def __init__(self, data_dir: Path | str) -> None:
        import duckdb

        self._con = duckdb.connect()
        for name, path in tpcds_table_paths(data_dir).items():
            self._con.execute(f"CREATE VIEW \"{name}\" AS SELECT * FROM read_parquet('{path}')")

    def __call__(self, sql: str) -> pa.Table:
        return self._con.cursor().execute(sql).fetch_arrow_table()

    def close(self) -> None:
        self._con.close()


# ------------------------------------------------------------------------------------------ judging


@dataclass(frozen=True)
class Outcome:
    """How one plan (original or optimized) did: ``equal``, ``different`` (the answer is not DuckDB's),
    ``unsupported`` (exit 3: a relation or function the backend names unsupported), ``error`` (anything
    else: a load or optimizer failure, a Spark error), or ``not produced`` (the producer wrote no plan)."""

    status: str
    detail: str = ""

    def __str__(self) -> str:
        return f"{self.status}: {self.detail}" if self.detail else self.status


def _one_line(text, limit: int = 240) -> str:
    from optimizer.errors import OptimizerError

    if isinstance(text, OptimizerError) and text.path:  # the message first, the (long) path after it
        text = f"{text.message} (at {text.path})"
    line = " ".join(str(text).split())
    return line if len(line) <= limit else line[: limit - 1] + "…"


def _answer(run, expected: pa.Table) -> Outcome:
    from optimizer.difftest.results import compare_tables
    from optimizer.errors import OptimizerError, UnsupportedError

    try:
        actual = run()
    except UnsupportedError as exc:
        return Outcome("unsupported", _one_line(exc))
    except OptimizerError as exc:  # a plan refused or failing on Spark (a bug is raised, not recorded)
        return Outcome("error", f"{type(exc).__name__}: {_one_line(exc)}")
    result = compare_tables(actual, expected, decimal_ulp=True)
    return Outcome("equal") if result.equal else Outcome("different", _one_line(str(result)))


def judge_plan(plan: bytes, expected: pa.Table, backend, statistics, *,
               original: bool = True) -> tuple[Outcome, Outcome]:
    """Run ``plan`` and its optimized form on ``backend``; compare each with ``expected`` as multisets
    (floats to 1e-9 relative, decimals within one unit of their last place). ``original=False``: the
    plan as written is loaded but not run (its outcome ``not run``)."""
    from optimizer.driver import optimize
    from optimizer.errors import OptimizerError
    from optimizer.plan_io import load_plan

    try:
        loaded = load_plan(plan)
    except OptimizerError as exc:
        failed = Outcome("error", _one_line(f"load: {type(exc).__name__}: {exc}"))
        return failed, failed
    as_written = (_answer(lambda: backend.execute(loaded), expected) if original
                  else Outcome("not run", "the plan as written is not run here"))
    try:
        better = optimize(loaded, statistics=statistics)
    except OptimizerError as exc:
        return as_written, Outcome("error", _one_line(f"optimize: {type(exc).__name__}: {exc}"))
    return as_written, _answer(lambda: backend.execute(better), expected)


PRODUCERS = ("datafusion", "duckdb")


def run_tpcds(spark, data_dir: Path | str, queries=None, *, workers: int = 2, log=None,
              skip: dict[str, dict[int, str]] | None = None, originals=None):
    """``{query: {producer: (original, optimized)}}``: each producer's plan of each of the ``queries``
    (default all 99), produced live, run on Spark as written and optimized (Parquet-footer statistics),
    against DuckDB's answer. ``workers`` plans run at a time (from threads: most of a small query's time
    is planning on the driver). ``skip``: ``{producer: {query: reason}}`` plans not run (their outcome is
    ``not run``, e.g. plans known to mean another query). ``originals``: the queries whose plans also run
    as written (default all); the others run optimized only."""
    from concurrent.futures import ThreadPoolExecutor

    from optimizer.spark import SparkBackend
    from optimizer.spark.statistics import default_statistics

    queries = tuple(queries) if queries is not None else tuple(range(1, 100))
    paths = tpcds_table_paths(data_dir)
    backend = SparkBackend(spark, tables={n: spark.read.parquet(str(p)) for n, p in paths.items()})
    statistics = default_statistics(tables=paths)
    for name in paths:  # read the footers now, not from several threads at once
        statistics.table(name)
    plans = {
        "datafusion": datafusion_tpcds_plans(data_dir, queries),
        "duckdb": duckdb_tpcds_plans(data_dir, queries),
    }
    oracle = TPCDSOracle(data_dir)
    texts = tpcds_queries()
    expected = {n: oracle(texts[n]) for n in queries}
    oracle.close()

    def one(job):
        n, producer = job
        plan = plans[producer][n]
        start = time.perf_counter()
        reason = (skip or {}).get(producer, {}).get(n)
        if reason is not None and isinstance(plan, bytes):
            outcomes = (Outcome("not run", reason), Outcome("not run", reason))
        elif isinstance(plan, bytes):
            outcomes = judge_plan(plan, expected[n], backend, statistics,
                                  original=originals is None or n in originals)
        else:
            reason = Outcome("not produced", _one_line(plan, 200))
            outcomes = (reason, reason)
        if log is not None:
            log(f"q{n:02d} {producer:10s} {time.perf_counter() - start:6.2f}s  {outcomes[0]} | {outcomes[1]}")
        return job, outcomes

    jobs = [(n, p) for n in queries for p in PRODUCERS]
    results: dict[int, dict[str, tuple[Outcome, Outcome]]] = {n: {} for n in queries}
    with ThreadPoolExecutor(max_workers=workers) as pool:
        for (n, producer), outcomes in pool.map(one, jobs):
            results[n][producer] = outcomes
    return results


# ------------------------------------------------------------------------------------- produced plans


def _tpcds_plans(produce, data_dir: Path | str, queries) -> dict[int, bytes | ProducerError]:
    tables = tpcds_table_paths(data_dir)
    texts = tpcds_queries()
    plans: dict[int, bytes | ProducerError] = {}
    for n in queries if queries is not None else sorted(texts):
        try:
            plans[n] = produce(texts[n], tables)
        except ProducerError as exc:
            plans[n] = exc
    return plans


def datafusion_tpcds_plans(
    data_dir: Path | str, queries: tuple[int, ...] | None = None
) -> dict[int, bytes | ProducerError]:
    """DataFusion's plans of the TPC-DS ``queries`` (default all 99; DataFusion 55 writes every one) over the
    tables in ``data_dir``; a query it cannot write maps to its :class:`~workloads.producers.ProducerError`."""
    return _tpcds_plans(datafusion_plan, data_dir, queries)


def duckdb_tpcds_plans(
    data_dir: Path | str, queries: tuple[int, ...] | None = None
) -> dict[int, bytes | ProducerError]:
    """DuckDB 1.1.3's plans of the TPC-DS ``queries`` (default all 99; it writes about half: correlated
    subqueries become DELIM_JOIN, which has no translation); a query it cannot write maps to its
    :class:`~workloads.producers.ProducerError`."""
    return _tpcds_plans(duckdb_plan, data_dir, queries)
