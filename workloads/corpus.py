"""Index of the real-world plans of the Substrait consumer-testing corpus, joined with their SQL.

The corpus is kept in the repository at ``tests/data/corpus/consumer-testing`` (its licence and the commit
it was taken from are beside it), and only that copy is read:

* ``substrait_consumer/snapshots/producer/<category>/<test>-<producer>_plan.json``: plans by ``isthmus``,
  ``duckdb``, ``datafusion`` and ``ibis``; ``<test>-validate-<producer>_plan.json`` is the same plan after a
  substrait-java round trip (:attr:`CorpusPlan.validated`); ``<test>_plan.json`` without a producer duplicates
  the ibis plan and is skipped.
* ``substrait_consumer/testdata/<category>[/scalar|/aggregate]/<test>.json``: the test definition, with
  ``sql_query.query`` (or ``query_path``, the TPC-H ``qNN.sql``) using ``'{table}'`` placeholders,
  ``named_tables`` ``{placeholder: "lineitem.parquet" | "lineitem_small.parquet"}`` and ``local_files``.
  The function tests read ``FROM 't'``, the small table of :func:`workloads.tpch.write_table_t`.

:func:`sql_for` turns the SQL into something DuckDB runs on our generated data: every TPC-H file (the SF 0.1
``X.parquet`` and the SF 0.0001 ``X_small.parquet`` alike) maps to our table ``X``.

Example::

    plan = next(p for p in corpus_plans(producer="duckdb") if p.tpch_query == 1)
    expected = DuckDBOracle(tpch_dir)(sql_for(plan))      # SELECT ... FROM lineitem WHERE ...
    tables = plan_tables(plan, tpch_dir)                  # {"lineitem": .../lineitem.parquet}
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path

from workloads.tpch import TPCH_TABLES, default_data_dir, repo_root

PRODUCERS: tuple[str, ...] = ("isthmus", "duckdb", "datafusion", "ibis")
_NAME = re.compile(
    r"^(?P<test>.+?)(?P<validate>-validate)?-(?P<producer>" + "|".join(PRODUCERS) + r")_plan\.json$"
)
_TPCH = re.compile(r"^q(\d\d)$")


def corpus_root() -> Path:
    """The consumer-testing corpus folder: the repository's copy."""
    return repo_root() / "tests" / "data" / "corpus" / "consumer-testing"


@dataclass(frozen=True)
class CorpusPlan:
    """One plan snapshot of the corpus and the test it comes from."""

    path: Path
    producer: str  # "isthmus", "duckdb", "datafusion" or "ibis"
    test_name: str  # the snapshot's test name: "abs", "inner_join", "q01"
    category: (
        str  # folder under snapshots/producer: "function/arithmetic", "relation/join", "integration/tpch"
    )
    sql: str | None  # the test's SQL with its '{table}' placeholders (None: no test definition found)
    named_tables: dict[str, str] = field(default_factory=dict)  # placeholder -> corpus file name
    local_files: dict[str, str] = field(default_factory=dict)  # placeholder -> corpus file name
    validated: bool = False  # the "-validate-" round trip through substrait-java
    definition: Path | None = None  # the test definition JSON

    @property
    def id(self) -> str:
        """A unique, readable id: ``function/arithmetic/abs-duckdb`` (``...-validate-isthmus``)."""
        return f"{self.category}/{self.test_name}-{'validate-' if self.validated else ''}{self.producer}"

    @property
    def tpch_query(self) -> int | None:
        """The TPC-H query number for ``integration/tpch`` plans, else None."""
        match = _TPCH.match(self.test_name)
        return int(match.group(1)) if match and self.category == "integration/tpch" else None

    @property
    def is_query(self) -> bool:
        """True when the SQL is a query (SELECT/WITH) DuckDB can answer; False for DDL/DML or no SQL."""
        if self.sql is None:
            return False
        return re.match(r"\s*(\(\s*)*(select|with|values|from)\b", self.sql, re.IGNORECASE) is not None

    @property
    def limit_without_order(self) -> bool:
        """True when the SQL has a LIMIT but no ORDER BY: which rows come back is then up to the engine."""
        if self.sql is None:
            return False
        return bool(re.search(r"(?i)\blimit\b", self.sql)) and not re.search(r"(?i)\border\s+by\b", self.sql)

    def json(self) -> dict:
        """The plan snapshot as parsed JSON (old Substrait encoding; use ``load_plan`` for a ``Plan``)."""
        return json.loads(self.path.read_text())

    def plan_table_names(self) -> list[str]:
        """The table names the plan reads (``ReadRel.named_table``), as written (Isthmus upper-cases them)."""
        return sorted({".".join(names) for names in _named_tables(self.json())})


def _named_tables(node) -> list[list[str]]:
    found = []
    stack = [node]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            named = item.get("namedTable")
            if isinstance(named, dict) and "names" in named:
                found.append(list(named["names"]))
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
    return found


def _definition_key(rel: Path) -> tuple[str, str]:
    """testdata/function/arithmetic/scalar/abs.json -> ("function/arithmetic", "abs")."""
    parts = list(rel.parent.parts)
    if parts and parts[0] == "function" and parts[-1] in ("scalar", "aggregate"):
        parts = parts[:-1]
    return "/".join(parts), rel.stem


@cache
def _definitions(root: Path) -> dict[tuple[str, str], Path]:
    testdata = root / "substrait_consumer" / "testdata"
    return {_definition_key(p.relative_to(testdata)): p for p in sorted(testdata.rglob("*.json"))}


def _load_definition(path: Path) -> tuple[str | None, dict[str, str], dict[str, str]]:
    data = json.loads(path.read_text())
    query = data.get("sql_query", {})
    sql = query.get("query")
    if sql is None and query.get("query_path"):
        sql_file = path.parent / query["query_path"]
        sql = sql_file.read_text() if sql_file.exists() else None
    return sql, dict(data.get("named_tables") or {}), dict(data.get("local_files") or {})


@cache
def _corpus(root: Path) -> tuple[CorpusPlan, ...]:
    snapshots = root / "substrait_consumer" / "snapshots" / "producer"
    definitions = _definitions(root)
    plans = []
    for path in sorted(snapshots.rglob("*_plan.json")):
        match = _NAME.match(path.name)
        if match is None:  # "<test>_plan.json": a copy of the ibis plan
            continue
        category = path.parent.relative_to(snapshots).as_posix()
        test = match.group("test")
        definition = definitions.get((category, test))
        sql, named, local = _load_definition(definition) if definition else (None, {}, {})
        plans.append(
            CorpusPlan(
                path=path,
                producer=match.group("producer"),
                test_name=test,
                category=category,
                sql=sql,
                named_tables=named,
                local_files=local,
                validated=match.group("validate") is not None,
                definition=definition,
            )
        )
    return tuple(plans)


def corpus_plans(
    root: Path | str | None = None,
    *,
    producer: str | None = None,
    category: str | None = None,
    validated: bool | None = False,
) -> list[CorpusPlan]:
    """The corpus plans, optionally filtered.

    ``category`` matches as a prefix (``"function"``, ``"relation/join"``); ``validated=False`` (the default)
    leaves out the substrait-java round-trip copies, ``True`` keeps only them, ``None`` keeps all.
    A missing corpus is an error (``FileNotFoundError`` naming the folder), never an empty list.
    """
    root = Path(root) if root is not None else corpus_root()
    if not (root / "substrait_consumer").is_dir():
        raise FileNotFoundError(f"the consumer-testing corpus is missing: no folder {root / 'substrait_consumer'}")
    result = []
    for plan in _corpus(root.resolve()):
        if producer is not None and plan.producer != producer:
            continue
        if category is not None and not (
            plan.category == category or plan.category.startswith(category + "/")
        ):
            continue
        if validated is not None and plan.validated != validated:
            continue
        result.append(plan)
    return result


def our_table(corpus_file: str) -> str:
    """The generated table a corpus table file stands for: ``"orders_small.parquet"`` -> ``"orders"``.

    >>> our_table("lineitem_small.parquet"), our_table("NATION.parquet"), our_table("t")
    ('lineitem', 'nation', 't')
    """
    stem = Path(corpus_file).name.split(".")[0].lower()
    if stem.endswith("_small"):
        stem = stem[: -len("_small")]
    if stem not in (*TPCH_TABLES, "t"):
        raise KeyError(f"corpus table {corpus_file!r} is not a TPC-H table")
    return stem


def table_map(plan: CorpusPlan) -> dict[str, str]:
    """The plan's table names (as written in the plan, and lower case) -> our generated table names."""
    mapping = {}
    for name in plan.plan_table_names():
        try:
            mapping[name] = our_table(name)
        except KeyError:
            continue
    for placeholder, corpus_file in plan.named_tables.items():
        mapping.setdefault(placeholder, our_table(corpus_file))
    return mapping


_FROM_T = re.compile(r"(?i)(\b(?:from|join)\s+)'t'")

# The few corpus queries written for another engine's dialect, rewritten for DuckDB.
_DUCKDB_DIALECT = [
    (re.compile(r"(?i)\bnegate\("), "-("),  # ibis' negate(x)
    (re.compile(r"(?i)\bapprox_distinct\("), "approx_count_distinct("),  # DataFusion's name
    (re.compile(r"(?i)\bFROM\s+VALUES\s*(\([^()]*\))\s*$"), r"FROM (VALUES \1)"),  # DataFusion's FROM VALUES
]


def sql_for(
    plan: CorpusPlan | str,
    table_dir: Path | str | None = None,
    *,
    small_dir: Path | str | None = None,
    named_tables: dict[str, str] | None = None,
    local_files: dict[str, str] | None = None,
) -> str:
    """The plan's SQL with its placeholders replaced so that DuckDB runs it on our generated data.

    With ``table_dir`` the tables become quoted parquet paths (``'<table_dir>/lineitem.parquet'``, which
    DuckDB scans under the alias ``lineitem``); without, bare table names (``lineitem``, ``t``) for a
    connection that has them as views (:class:`workloads.tpch.DuckDBOracle`). With ``small_dir`` the corpus'
    ``X_small.parquet`` tables become paths into that folder instead (e.g. TPC-H SF 0.0001, as in the corpus:
    ``relation/join/cross_join`` crosses customer and orders, 22.5M rows at SF 0.01). Three queries written in
    another engine's dialect are rewritten (``negate(``, ``approx_distinct(``, ``FROM VALUES``). ``plan`` may
    be SQL text, then give ``named_tables``/``local_files`` as in a test definition.
    """
    if isinstance(plan, CorpusPlan):
        if plan.sql is None:
            raise ValueError(f"{plan.id}: no SQL in the corpus for this plan")
        sql, named, local = plan.sql, plan.named_tables, plan.local_files
    else:
        sql, named, local = plan, dict(named_tables or {}), dict(local_files or {})

    def quoted(path: Path) -> str:
        return "'" + str(path).replace("'", "''") + "'"

    def table_ref(corpus_file: str) -> str:
        table = our_table(corpus_file)
        if small_dir is not None and _is_small(corpus_file):
            return quoted(Path(small_dir) / f"{table}.parquet")
        if table_dir is None:
            return table
        return quoted(Path(table_dir) / f"{table}.parquet")

    for placeholder, corpus_file in named.items():
        sql = sql.replace(f"'{{{placeholder}}}'", table_ref(corpus_file))
    for placeholder, corpus_file in local.items():
        folder = small_dir if small_dir is not None and _is_small(corpus_file) else table_dir
        folder = Path(folder) if folder is not None else default_data_dir()
        sql = sql.replace(f"'{{{placeholder}}}'", quoted(folder / f"{our_table(corpus_file)}.parquet"))
    sql = _FROM_T.sub(lambda m: m.group(1) + table_ref("t"), sql)
    for pattern, replacement in _DUCKDB_DIALECT:
        sql = pattern.sub(replacement, sql)
    return sql


def _is_small(corpus_file: str) -> bool:
    return Path(corpus_file).name.split(".")[0].lower().endswith("_small")


def plan_tables(
    plan: CorpusPlan, table_dir: Path | str, *, small_dir: Path | str | None = None
) -> dict[str, Path]:
    """The parquet file of each table the plan reads, under the name the plan uses (``LINEITEM``, ``t``...).

    ``X_small`` tables come from ``small_dir`` when given (see :func:`sql_for`). Give the result to an
    execution backend, e.g. ``SparkBackend(spark, tables=plan_tables(plan, tpch_dir))``.
    """
    small_tables = {our_table(f) for f in plan.named_tables.values() if _is_small(f)}
    result = {}
    for name, table in table_map(plan).items():
        folder = small_dir if small_dir is not None and table in small_tables else table_dir
        result[name] = Path(folder) / f"{table}.parquet"
    return result
