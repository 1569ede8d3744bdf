"""``substrait-opt diff``: run each plan as given and optimized on Spark and compare the answers.

One line per plan, ``name: equal | DIFFERENT (reason) | error (message) | skipped (message)`` with both
run times, then exactly ``N passed, M failed``. An original plan the backend does not support is
*skipped* (not the optimizer's fault) and counted neither way. Exit 0 when every compared plan gave the
same answer, 1 when any differed or failed, 2 on bad input. For each plan that differed (or failed
after optimizing) ``--out`` (default ``./diff-out/``) receives ``<name>.original.json``,
``<name>.optimized.json`` and ``<name>.diff.json`` (the reason and a sample of the differing rows).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from optimizer.errors import PlanError


def _write_failure(out_dir: Path, name: str, plan, result) -> list[Path]:
    from optimizer.plan_io import save_plan

    out_dir.mkdir(parents=True, exist_ok=True)
    written = [out_dir / f"{name}.original.json"]
    save_plan(plan, written[0], format="json")
    if result.optimized_plan is not None:
        written.append(out_dir / f"{name}.optimized.json")
        save_plan(result.optimized_plan, written[-1], format="json")
    written.append(out_dir / f"{name}.diff.json")
    written[-1].write_text(json.dumps(result.details(), indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    return written


def cmd_diff(args: argparse.Namespace) -> int:
    from optimizer.capabilities import default_capabilities, load_capabilities
    from optimizer.cli.args import statistics_from_args
    from optimizer.cli.run import plan_name
    from optimizer.difftest.harness import compare
    from optimizer.plan_io import load_plan
    from optimizer.schema import raise_for_problems

    # Bad input is reported before Spark starts.
    plans = []
    for source in args.inputs:
        plan = load_plan(source)
        raise_for_problems(plan)
        plans.append((plan_name(source), plan))
    statistics = statistics_from_args(args)
    capabilities = load_capabilities(args.capabilities) if args.capabilities else default_capabilities()
    out_dir = Path(args.out)
    if out_dir.exists() and not out_dir.is_dir():
        raise PlanError("not a directory", args.out)

    from optimizer.cli.spark import backend_from_args

    backend = backend_from_args(args)
    passed = failed = skipped = 0
    for name, plan in plans:
        result = compare(plan, backend=backend, statistics=statistics, capabilities=capabilities)
        print(f"{name}: {result.verdict()}  [{result.times()}]", flush=True)
        if result.equal:
            passed += 1
        elif result.skipped:
            skipped += 1
        else:
            failed += 1
            if result.stage != "original":
                for path in _write_failure(out_dir, name, plan, result):
                    print(f"  wrote {path}", flush=True)
    if skipped:
        print(f"({skipped} skipped: the original plan is not supported by the backend)")
    print(f"{passed} passed, {failed} failed")
    sys.stdout.flush()
    return 1 if failed else 0


def register(sub, name: str, help_text: str) -> None:
    from optimizer.cli.optimize import add_statistics_args

    p = sub.add_parser(
        name, help=help_text,
        description="Run each plan as given and as optimized on Spark (one SparkSession; the optimized plan "
                    "with best-effort read filters ignored) and compare the answers as multisets of rows, "
                    "and their order where the plan's root is a sort. Exit 0 when all are equal, 1 when any "
                    "differs or fails, 2 on bad input. A plan the backend cannot run as given is skipped.")
    p.add_argument("inputs", nargs="+", metavar="IN", help="plan files ('-' for stdin)")
    add_statistics_args(p)
    p.add_argument("--capabilities", help="reader-capability profile JSON (default: Spark's Parquet reader)")
    p.add_argument("--out", default="diff-out",
                   help="where plans and differing rows of failures go (default ./diff-out/)")
    p.set_defaults(func=cmd_diff)
