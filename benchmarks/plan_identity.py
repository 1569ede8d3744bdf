"""SHA-256 of every optimized plan of the corpus, TPC-H and TPC-DS, without statistics and with the
statistics of the SF 0.01 tables: a change that must not change behaviour (a refactoring) leaves every
digest as it was.

    python benchmarks/plan_identity.py --out /tmp/before.json          # digests at one commit
    python benchmarks/plan_identity.py --check /tmp/before.json        # the same plans now: exit 1 on a change

Plans: every corpus plan (not the substrait-java round-trip copies) that loads; DataFusion's 22 and DuckDB's
TPC-H plans; DataFusion's 99 and DuckDB's TPC-DS plans (those it writes). Each is optimized for the Spark
target twice: with no statistics (the plan's hints only) and with the Parquet footers of the SF 0.01 tables
(``default_statistics(tables=...)``, no Spark). A plan the optimizer refuses records its error's class and
first line, so a change in what is refused shows too.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from optimizer import load_plan, optimize  # noqa: E402
from optimizer.errors import OptimizerError  # noqa: E402
from optimizer.spark.statistics import default_statistics  # noqa: E402
from workloads.corpus import corpus_plans  # noqa: E402
from workloads.producers import datafusion_tpch_plans, duckdb_tpch_plans  # noqa: E402
from workloads.tpcds import datafusion_tpcds_plans, duckdb_tpcds_plans, generate_tpcds, tpcds_table_paths  # noqa: E402
from workloads.tpch import generate_tpch, table_paths  # noqa: E402


def _plans() -> list[tuple[str, bytes, dict[str, Path] | None]]:
    """(id, plan bytes, the tables its statistics come from) for every plan the check covers."""
    tpch, tpcds = generate_tpch(0.01), generate_tpcds(0.01)
    tpch_tables, tpcds_tables = table_paths(tpch), tpcds_table_paths(tpcds)
    out: list[tuple[str, bytes, dict[str, Path] | None]] = []
    for plan in corpus_plans():
        out.append((f"corpus/{plan.id}", plan.path.read_bytes(), None))
    for name, plans in (("datafusion", datafusion_tpch_plans(tpch)), ("duckdb", duckdb_tpch_plans(tpch))):
        out += [(f"tpch/{name}/q{n:02d}", p, tpch_tables) for n, p in plans.items()]
    for name, plans in (("datafusion", datafusion_tpcds_plans(tpcds)), ("duckdb", duckdb_tpcds_plans(tpcds))):
        out += [(f"tpcds/{name}/q{n:02d}", p, tpcds_tables) for n, p in plans.items() if isinstance(p, bytes)]
    return out


def _canonical(plan) -> bytes:
    """The plan's bytes with its extension declarations in anchor order: DataFusion's producer writes them in
    its hash map's order, which changes from process to process (the anchors do not)."""
    plan = type(plan).FromString(plan.SerializeToString())
    for field in ("extensions", "extension_uris", "extension_urns"):
        if field not in type(plan).DESCRIPTOR.fields_by_name:
            continue
        items = sorted(getattr(plan, field), key=lambda m: m.SerializeToString(deterministic=True))
        del getattr(plan, field)[:]
        getattr(plan, field).extend(items)
    return plan.SerializeToString(deterministic=True)


def _digest(data: bytes, statistics) -> str:
    try:
        plan = load_plan(data)
    except OptimizerError as exc:
        return f"not loaded: {type(exc).__name__}"
    try:
        return hashlib.sha256(_canonical(optimize(plan, statistics=statistics))).hexdigest()
    except OptimizerError as exc:
        return f"refused: {type(exc).__name__}: {str(exc).splitlines()[0][:200]}"


def digests() -> dict[str, str]:
    out: dict[str, str] = {}
    stats_by_tables: dict[int, object] = {}
    for plan_id, data, tables in _plans():
        out[f"{plan_id} no-stats"] = _digest(data, None)
        if tables is not None:
            key = id(tables)
            if key not in stats_by_tables:
                stats_by_tables[key] = default_statistics(tables={k: str(v) for k, v in tables.items()})
            out[f"{plan_id} stats"] = _digest(data, stats_by_tables[key])
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--out", help="write the digests to this JSON file")
    p.add_argument("--check", help="compare with the digests of this JSON file; exit 1 on any difference")
    args = p.parse_args(argv)
    now = digests()
    optimized = sum(1 for v in now.values() if len(v) == 64)
    print(f"{len(now)} plan x statistics cases, {optimized} optimized", file=sys.stderr)
    if args.out:
        Path(args.out).write_text(json.dumps(now, indent=1, sort_keys=True) + "\n")
    if args.check:
        before = json.loads(Path(args.check).read_text())
        changed = sorted(k for k in before.keys() | now.keys() if before.get(k) != now.get(k))
        for key in changed:
            print(f"{key}: {before.get(key)} -> {now.get(key)}")
        print(f"{len(changed)} of {len(before.keys() | now.keys())} differ")
        return 1 if changed else 0
    return 0


if __name__ == "__main__":
    sys.exit(main())
