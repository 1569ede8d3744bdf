"""The optimizer's work in instructions (callgrind), which the machine's load does not move: one pass of the
optimizer over the 57 TPC-H plans of ``optimizer_latency.py`` (statistics from the SF 0.01 Parquet
footers), less the same run without the pass. Wall-clock medians of this machine move by 15 % from run to
run; this count moves by well under 1 %, so two commits can be compared while other work runs.

Usage::

    python benchmarks/optimizer_instructions.py                     # this checkout
    python benchmarks/optimizer_instructions.py --commit c066b36    # another commit, built from git
    python benchmarks/optimizer_instructions.py --disable-rules push_semi_joins,eliminate_joins

It needs ``valgrind``. Each count takes about two minutes (the run is some 50 times slower under callgrind).
The plans are written once into ``--plans`` (DataFusion's and DuckDB's made from the TPC-H text, Isthmus'
from the corpus) and read from there by every run, so all commits optimize the same bytes.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_PLANS = ROOT / ".cache" / "optimizer_instructions"


def write_plans(directory: Path) -> int:
    """The latency benchmark's TPC-H plans as ``<producer>_<query>.bin`` and their tables as ``tables.json``."""
    sys.path.insert(0, str(ROOT / "benchmarks"))
    import common

    _, tables = common.tpch_data(0.01)
    plans = common.tpch_plans(tables, list(common.PRODUCERS), list(range(1, 23)), {})
    directory.mkdir(parents=True, exist_ok=True)
    for (producer, q), plan in sorted(plans.items()):
        (directory / f"{producer}_{q:02d}.bin").write_bytes(plan.SerializeToString())
    (directory / "tables.json").write_text(json.dumps({k: str(v) for k, v in tables.items()}))
    return len(plans)


def work(directory: Path, optimize: bool, disabled: frozenset[str]) -> None:
    """What callgrind counts: the plans loaded, every plan optimized once (statistics read, caches warm),
    then, with ``optimize``, every plan optimized again."""
    from optimizer.capabilities import default_capabilities
    from optimizer.driver import Optimizer, OptimizerConfig
    from optimizer.plan_io import load_plan
    from optimizer.spark.statistics import default_statistics

    tables = json.loads((directory / "tables.json").read_text())
    plans = [load_plan(p.read_bytes()) for p in sorted(directory.glob("*.bin"))]
    optimizer = Optimizer(statistics=default_statistics(tables=tables), capabilities=default_capabilities(),
                          config=OptimizerConfig(disabled_rules=disabled))
    for plan in plans:
        optimizer.run(plan)
    if optimize:
        for plan in plans:
            optimizer.run(plan)


def tree_of(commit: str, into: Path) -> Path:
    """The package of ``commit`` laid out as installed (``rules`` and ``cost`` inside ``optimizer``, as
    pyproject's package-dir maps them) under ``into/pkg``, the rest of the repository under ``into/src``."""
    src, pkg = into / "src", into / "pkg"
    src.mkdir(parents=True)
    pkg.mkdir()
    archive = subprocess.run(["git", "-C", str(ROOT), "archive", commit], check=True, capture_output=True).stdout
    subprocess.run(["tar", "-x", "-C", str(src)], input=archive, check=True)
    shutil.move(src / "optimizer", pkg / "optimizer")
    shutil.move(src / "rules", pkg / "optimizer" / "rules")
    shutil.move(src / "cost", pkg / "optimizer" / "cost")
    return into


def count(directory: Path, optimize: bool, disabled: str, tree: Path | None) -> int:
    """Instructions callgrind counts for :func:`work` in a process of its own."""
    env = dict(os.environ)
    if tree is not None:
        env["PYTHONPATH"] = os.pathsep.join([str(tree / "pkg"), str(tree / "src")])
    command = ["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null", sys.executable, __file__,
               "--work", "pass" if optimize else "load", "--plans", str(directory), "--disable-rules", disabled]
    done = subprocess.run(command, env=env, capture_output=True, text=True,
                          cwd=str(tree / "src") if tree is not None else None)
    found = re.search(r"Collected : (\d+)", done.stderr)
    if done.returncode != 0 or found is None:
        raise SystemExit(f"callgrind run failed ({done.returncode}): {done.stderr.strip().splitlines()[-1:]}")
    return int(found.group(1))


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--commit", help="count this commit's optimizer (built from git) instead of this checkout's")
    p.add_argument("--disable-rules", default="", help="rules to leave out, comma-separated")
    p.add_argument("--plans", type=Path, default=DEFAULT_PLANS, help=f"plan directory (default {DEFAULT_PLANS})")
    p.add_argument("--work", choices=("pass", "load"), help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    disabled = frozenset(r for r in args.disable_rules.split(",") if r)
    from optimizer.rules import RULES

    unknown = disabled - {r.name for r in RULES}
    if unknown and not args.work:  # (an older commit may lack a rule this checkout has)
        raise SystemExit(f"--disable-rules: no rule named {sorted(unknown)[0]!r}")
    if args.work:
        work(args.plans, args.work == "pass", disabled)
        return 0
    if shutil.which("valgrind") is None:
        raise SystemExit("valgrind is not installed")
    if not (args.plans / "tables.json").exists():
        print(f"writing the plans into {args.plans}: {write_plans(args.plans)}")
    with tempfile.TemporaryDirectory() as tmp:
        tree = tree_of(args.commit, Path(tmp)) if args.commit else None
        loaded = count(args.plans, False, args.disable_rules, tree)
        total = count(args.plans, True, args.disable_rules, tree)
    print(f"{args.commit or 'this checkout'}"
          + (f" without {', '.join(sorted(disabled))}" if disabled else "")
          + f": {total - loaded:,} instructions for one pass over the plans ({total:,} - {loaded:,})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
