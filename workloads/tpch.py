"""TPC-H data and queries shared by the tests, the benchmarks and the demo.

* :func:`generate_tpch` writes ``<dest>/<table>.parquet`` for the 8 TPC-H tables (plus the small function-test
  table ``t``), once per directory: a marker file records the scale and the generation is skipped when it is
  present. The data comes from ``tpchgen-cli`` (a console script in the venv), or from DuckDB's
  ``CALL dbgen(sf=...)`` when the CLI is missing or fails.
* Both generators give the same rows (only the free-text ``*_comment`` columns differ), and both outputs are
  rewritten with one fixed Arrow schema, :data:`TPCH_SCHEMAS`: the column types DuckDB's ``dbgen`` uses,
  which are also the types in the corpus plans' ``base_schema`` (``DECIMAL(15,2)`` money, ``DATE`` dates,
  ``BIGINT`` keys except the ``INTEGER`` nation/region keys, plain ``string`` (never ``string_view``),
  every column NOT NULL). DuckDB, DataFusion, Spark and pyarrow therefore read identical types.
* :func:`tpch_queries` returns the 22 query texts of DuckDB 1.1.3's ``tpch_queries()`` (standard TPC-H
  with the usual validation substitution parameters), stored as ``workloads/data/tpch/qNN.sql``
  so no DuckDB is needed at run time. They read the tables by their plain names (``lineitem``...).

>>> sorted(TPCH_TABLES) == sorted(TPCH_SCHEMAS)
True
>>> len(tpch_queries())
22
>>> expected_row_counts(0.01)["lineitem"] is None, expected_row_counts(0.01)["orders"]
(True, 15000)
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from functools import cache
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

TPCH_TABLES: tuple[str, ...] = (
    "region",
    "nation",
    "supplier",
    "customer",
    "part",
    "partsupp",
    "orders",
    "lineitem",
)

_MONEY = pa.decimal128(15, 2)


def _schema(*cols: tuple[str, pa.DataType]) -> pa.Schema:
    return pa.schema([pa.field(name, typ, nullable=False) for name, typ in cols])


#: Arrow schema of each generated table: exactly the types of DuckDB's ``dbgen`` (and of the corpus plans).
TPCH_SCHEMAS: dict[str, pa.Schema] = {
    "region": _schema(("r_regionkey", pa.int32()), ("r_name", pa.string()), ("r_comment", pa.string())),
    "nation": _schema(
        ("n_nationkey", pa.int32()),
        ("n_name", pa.string()),
        ("n_regionkey", pa.int32()),
        ("n_comment", pa.string()),
    ),
    "supplier": _schema(
        ("s_suppkey", pa.int64()),
        ("s_name", pa.string()),
        ("s_address", pa.string()),
        ("s_nationkey", pa.int32()),
        ("s_phone", pa.string()),
        ("s_acctbal", _MONEY),
        ("s_comment", pa.string()),
    ),
    "customer": _schema(
        ("c_custkey", pa.int64()),
        ("c_name", pa.string()),
        ("c_address", pa.string()),
        ("c_nationkey", pa.int32()),
        ("c_phone", pa.string()),
        ("c_acctbal", _MONEY),
        ("c_mktsegment", pa.string()),
        ("c_comment", pa.string()),
    ),
    "part": _schema(
        ("p_partkey", pa.int64()),
        ("p_name", pa.string()),
        ("p_mfgr", pa.string()),
        ("p_brand", pa.string()),
        ("p_type", pa.string()),
        ("p_size", pa.int32()),
        ("p_container", pa.string()),
        ("p_retailprice", _MONEY),
        ("p_comment", pa.string()),
    ),
    "partsupp": _schema(
        ("ps_partkey", pa.int64()),
        ("ps_suppkey", pa.int64()),
        ("ps_availqty", pa.int64()),
        ("ps_supplycost", _MONEY),
        ("ps_comment", pa.string()),
    ),
    "orders": _schema(
        ("o_orderkey", pa.int64()),
        ("o_custkey", pa.int64()),
        ("o_orderstatus", pa.string()),
        ("o_totalprice", _MONEY),
        ("o_orderdate", pa.date32()),
        ("o_orderpriority", pa.string()),
        ("o_clerk", pa.string()),
        ("o_shippriority", pa.int32()),
        ("o_comment", pa.string()),
    ),
    "lineitem": _schema(
        ("l_orderkey", pa.int64()),
        ("l_partkey", pa.int64()),
        ("l_suppkey", pa.int64()),
        ("l_linenumber", pa.int64()),
        ("l_quantity", _MONEY),
        ("l_extendedprice", _MONEY),
        ("l_discount", _MONEY),
        ("l_tax", _MONEY),
        ("l_returnflag", pa.string()),
        ("l_linestatus", pa.string()),
        ("l_shipdate", pa.date32()),
        ("l_commitdate", pa.date32()),
        ("l_receiptdate", pa.date32()),
        ("l_shipinstruct", pa.string()),
        ("l_shipmode", pa.string()),
        ("l_comment", pa.string()),
    ),
}

#: The function tests' table ``t``: ``create table t (a BIGINT, b BIGINT, c boolean, d boolean)``.
T_SCHEMA = pa.schema([("a", pa.int64()), ("b", pa.int64()), ("c", pa.bool_()), ("d", pa.bool_())])
T_ROWS: list[tuple[int | None, int, bool, bool]] = [
    (1, 1, True, True),
    (2, 1, False, True),
    (3, 1, True, True),
    (-4, 1, True, True),
    (5, 1, False, True),
    (-6, 2, True, True),
    (7, 2, False, True),
    (8, 2, True, True),
    (9, 2, False, True),
    (None, 2, False, True),
]

#: Output positions of each TPC-H query's ORDER BY keys (for ``compare_tables(..., ordered_by=...)``).
TPCH_ORDER_BY: dict[int, list[int]] = {
    1: [0, 1],
    2: [0, 2, 1, 3],
    3: [1, 2],
    4: [0],
    5: [1],
    6: [],
    7: [0, 1, 2],
    8: [0],
    9: [0, 1],
    10: [2],
    11: [1],
    12: [0],
    13: [1, 0],
    14: [],
    15: [0],
    16: [3, 0, 1, 2],
    17: [],
    18: [4, 3],
    19: [],
    20: [0],
    21: [1, 0],
    22: [0],
}

# Bump when the files' layout or schema changes: existing caches are then regenerated.
_FORMAT_VERSION = 1
_MARKER = "_TPCH_GENERATED.json"
_DATA_DIR = Path(__file__).resolve().parent / "data" / "tpch"


def repo_root() -> Path:
    """The repository's root directory (the parent of the ``workloads`` package)."""
    return Path(__file__).resolve().parent.parent


def _scale_name(scale: float) -> str:
    return f"sf{scale:g}"


def default_data_dir(scale: float = 0.01) -> Path:
    """Where the TPC-H data of ``scale`` lives: ``$SUBSTRAIT_OPT_DATA/sf<scale>`` when that variable is set,
    else ``<repo>/.cache/tpch/sf<scale>``.

    >>> default_data_dir(0.01).name
    'sf0.01'
    """
    base = os.environ.get("SUBSTRAIT_OPT_DATA")
    root = Path(base) if base else repo_root() / ".cache" / "tpch"
    return root / _scale_name(scale)


def expected_row_counts(scale: float) -> dict[str, int | None]:
    """Row counts of the TPC-H tables at ``scale`` (``lineitem`` is random: ``None``, about 6M * scale)."""
    return {
        "region": 5,
        "nation": 25,
        "supplier": round(10_000 * scale),
        "customer": round(150_000 * scale),
        "part": round(200_000 * scale),
        "partsupp": round(800_000 * scale),
        "orders": round(1_500_000 * scale),
        "lineitem": None,
    }


def table_paths(data_dir: Path | str, *, include_t: bool = True) -> dict[str, Path]:
    """``{table name: parquet path}`` for the tables in ``data_dir`` (the 8 TPC-H tables, and ``t``)."""
    data_dir = Path(data_dir)
    names = [*TPCH_TABLES, "t"] if include_t else list(TPCH_TABLES)
    return {name: data_dir / f"{name}.parquet" for name in names}


def tpchgen_executable() -> str | None:
    """The ``tpchgen-cli`` next to the running interpreter, else the one on ``PATH``, else None."""
    candidate = Path(sys.executable).parent / "tpchgen-cli"
    if candidate.is_file() and os.access(candidate, os.X_OK):
        return str(candidate)
    return shutil.which("tpchgen-cli")


@contextlib.contextmanager
def _locked(dest: Path):
    """An exclusive lock on ``dest`` so that concurrent processes generate the data once."""
    dest.mkdir(parents=True, exist_ok=True)
    with open(dest / ".lock", "w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _marker_ok(dest: Path, scale: float, marker: str, version: int,
               paths: Callable[[Path], dict[str, Path]]) -> bool:
    try:
        info = json.loads((dest / marker).read_text())
    except (OSError, ValueError):
        return False
    if info.get("scale") != scale or info.get("format_version") != version:
        return False
    return all(path.exists() for path in paths(dest).values())


def generate_once(dest: Path, scale: float, build: Callable[[], tuple[str, dict[str, int]]], *, marker: str,
                  version: int, paths: Callable[[Path], dict[str, Path]], force: bool = False) -> Path:
    """``dest`` with the tables of ``scale``, made by ``build()`` unless the JSON file ``marker`` in ``dest``
    says they are there (same ``scale`` and format ``version``, every file of ``paths(dest)`` present).

    ``build`` returns the generator's name and the row count of each table, which the marker records
    with the scale, the version and the seconds taken. A file lock lets concurrent processes generate once.
    """
    if not force and _marker_ok(dest, scale, marker, version, paths):
        return dest
    with _locked(dest):
        if not force and _marker_ok(dest, scale, marker, version, paths):
            return dest
        (dest / marker).unlink(missing_ok=True)
        start = time.perf_counter()
        generator, rows = build()
        info = {
            "scale": scale,
            "format_version": version,
            "generator": generator,
            "seconds": round(time.perf_counter() - start, 3),
            "rows": rows,
        }
        (dest / marker).write_text(json.dumps(info, indent=1) + "\n")
    return dest


def _rewrite(batches, schema: pa.Schema, target: Path) -> int:
    """Write record batches cast to ``schema`` into ``target`` (atomically); return the row count."""
    tmp = target.with_name(f".{target.name}.{os.getpid()}.tmp")
    rows = 0
    with pq.ParquetWriter(tmp, schema, compression="snappy") as writer:
        for batch in batches:
            if batch.num_rows == 0:
                continue
            batch = pa.RecordBatch.from_arrays(
                [col.cast(field.type) for col, field in zip(batch.columns, schema, strict=True)],
                schema=schema,
            )
            writer.write_batch(batch)
            rows += batch.num_rows
    os.replace(tmp, target)
    return rows


def _generate_tpchgen(exe: str, scale: float, dest: Path) -> str:
    with tempfile.TemporaryDirectory(dir=dest, prefix=".tpchgen-") as tmp:
        subprocess.run(
            [exe, "parquet", "--scale-factor", f"{scale:g}", "--output-dir", tmp, "--quiet"],
            check=True,
            capture_output=True,
            text=True,
            timeout=3600,
        )
        for table in TPCH_TABLES:
            raw = Path(tmp) / f"{table}.parquet"
            parquet = pq.ParquetFile(raw)
            # Select by name so that the column order is the schema's whatever the generator wrote.
            names = TPCH_SCHEMAS[table].names
            _rewrite(
                parquet.iter_batches(batch_size=65_536, columns=names),
                TPCH_SCHEMAS[table],
                dest / f"{table}.parquet",
            )
    version = subprocess.run([exe, "--version"], capture_output=True, text=True).stdout.strip()
    return version or "tpchgen-cli"


def duckdb_generated(extension: str, generator: str, scale: float):
    """A new in-memory DuckDB connection holding the tables that ``generator`` of the DuckDB extension
    ``extension`` makes at ``scale`` (``tpch``'s ``dbgen``, ``tpcds``'s ``dsdgen``)."""
    import duckdb

    con = duckdb.connect()
    try:
        con.execute(f"LOAD {extension}")  # statically linked in the Python wheels
    except duckdb.Error:
        con.execute(f"INSTALL {extension}")
        con.execute(f"LOAD {extension}")
    con.execute(f"CALL {generator}(sf={scale:g})")
    return con


def _generate_duckdb(scale: float, dest: Path) -> str:
    import duckdb

    con = duckdb_generated("tpch", "dbgen", scale)
    for table in TPCH_TABLES:
        names = ", ".join(TPCH_SCHEMAS[table].names)
        reader = con.execute(f"SELECT {names} FROM {table}").fetch_record_batch(65_536)
        _rewrite(reader, TPCH_SCHEMAS[table], dest / f"{table}.parquet")
    con.close()
    return f"duckdb {duckdb.__version__} dbgen"


def write_table_t(dest: Path | str) -> Path:
    """Write the function tests' small table ``t`` (10 rows) to ``dest/t.parquet``; return its path."""
    dest = Path(dest)
    dest.mkdir(parents=True, exist_ok=True)
    columns = list(zip(*T_ROWS, strict=True))
    table = pa.Table.from_arrays(
        [pa.array(col, type=field.type) for col, field in zip(columns, T_SCHEMA, strict=True)],
        schema=T_SCHEMA,
    )
    target = dest / "t.parquet"
    tmp = target.with_name(f".t.parquet.{os.getpid()}.tmp")
    pq.write_table(table, tmp)
    os.replace(tmp, target)
    return target


def generate_tpch(scale: float = 0.01, dest: Path | str | None = None, *, force: bool = False) -> Path:
    """Make the TPC-H tables of ``scale`` (and ``t``) in ``dest`` unless already there; return ``dest``.

    ``dest`` defaults to :func:`default_data_dir`. Files: ``<dest>/<table>.parquet``, one per table,
    schema :data:`TPCH_SCHEMAS`. Safe to call from concurrent processes (a file lock serialises them).
    Uses ``tpchgen-cli``; falls back to DuckDB ``dbgen`` when the CLI is missing or fails.
    """
    dest = Path(dest) if dest is not None else default_data_dir(scale)

    def build() -> tuple[str, dict[str, int]]:
        generator = None
        exe = tpchgen_executable()
        errors = []
        if exe is not None:
            try:
                generator = _generate_tpchgen(exe, scale, dest)
            except (OSError, subprocess.SubprocessError, pa.ArrowException) as exc:
                errors.append(f"tpchgen-cli: {exc}")
        if generator is None:
            import duckdb  # a dependency of the test extra, like tpchgen-cli

            try:
                generator = _generate_duckdb(scale, dest)
            except (duckdb.Error, OSError, pa.ArrowException) as exc:  # report both failures together
                errors.append(f"duckdb dbgen: {exc}")
                raise RuntimeError("cannot generate TPC-H data: " + "; ".join(errors)) from exc
        write_table_t(dest)
        return generator, {t: pq.ParquetFile(dest / f"{t}.parquet").metadata.num_rows for t in TPCH_TABLES}

    return generate_once(dest, scale, build, marker=_MARKER, version=_FORMAT_VERSION, paths=table_paths,
                         force=force)


def generation_info(dest: Path | str) -> dict:
    """The marker written by :func:`generate_tpch` (scale, generator, seconds, row counts)."""
    return json.loads((Path(dest) / _MARKER).read_text())


@cache
def _queries() -> dict[int, str]:
    return {n: (_DATA_DIR / f"q{n:02d}.sql").read_text().strip() for n in range(1, 23)}


def tpch_queries() -> dict[int, str]:
    """The 22 TPC-H queries ``{1: "SELECT ...", ...}`` (DuckDB 1.1.3's texts, no trailing ``;``)."""
    return dict(_queries())


def tpch_query(n: int) -> str:
    """The text of TPC-H query ``n`` (1..22)."""
    return _queries()[n]


class DuckDBOracle:
    """Runs SQL on DuckDB over the parquet tables of a data directory: the expected answers.

    The tables are views named as in TPC-H (``lineitem``...) plus ``t``; DuckDB's names are case-insensitive,
    so Isthmus' upper-case ``LINEITEM`` works too.

    Example: ``DuckDBOracle(generate_tpch(0.01))("select count(*) from nation")`` is a one-row Table (25).
    """

    def __init__(self, data_dir: Path | str) -> None:
        import duckdb

        self.data_dir = Path(data_dir)
        self._con = duckdb.connect()
        for name, path in table_paths(self.data_dir).items():
            if path.exists():
                self._con.execute(f"CREATE VIEW \"{name}\" AS SELECT * FROM read_parquet('{path}')")

    def __call__(self, sql: str) -> pa.Table:
        """The result of ``sql`` as a pyarrow Table."""
        return self._con.cursor().execute(sql).fetch_arrow_table()

    def close(self) -> None:
        self._con.close()
