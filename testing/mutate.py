"""Mutation testing of the differential fuzzer: plant one semantic bug at a time, see whether the fuzz
campaign finds it.

::

    python -m testing.mutate                      # make mutate: every mutant, 500 plans, seed 7
    python -m testing.mutate --plans 200 --only topn_ignores_offset,window_loses_partition
    python -m testing.mutate --list               # the mutants and what each breaks

Each mutant (:data:`MUTANTS`) is a small patch -- a file, an exact snippet of it and its replacement --
of a rule (``rules/*.py``, or ``optimizer/expr_utils.py``'s boolean simplification they apply) or of the
Spark backend (``optimizer/spark/*.py``). The production code has no switch: the harness copies the
packages (``optimizer``, ``rules``, ``cost``, laid out as installed, and ``testing``, which holds the
fuzzer) to a temporary directory, applies ONE patch there, and runs the fuzz campaign (``python -m testing.fuzz
--stop-at-failure``) in a subprocess whose ``PYTHONPATH`` is the copy, with its own SparkSession. The
campaigns of the mutants outside the backend (and the unmutated one) share an answer cache
(:class:`~testing.fuzz.AnswerCache`): the backend is the same in all of them, so a plan's
answer is computed on Spark once; such a mutant only runs the plans it changed. A
snippet that is not found exactly once fails loudly, naming the mutant (the code it patches changed:
update the mutant). After the mutants, the same campaign runs on an unmutated copy: it must find no
difference (a failure there is a real bug, or a flaw of the generator, and makes every kill
meaningless).

A mutant is **killed** when the campaign reports a failure: a different answer, or an error of the
optimizer or of a plan. The campaign stops at the first failure (no shrinking) and the plan count to it
is reported. The result goes to ``docs/benchmarks/mutation.json`` (``--out``) and the last line printed is
``mutants: K killed of N``. Exit status 0 when every mutant was killed and the unmutated campaign found
nothing, 1 otherwise; 2 when a patch does not apply.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
#: The packages copied for a mutant (everything the fuzz campaign imports from the project).
#: The repository's package folders and where each is in the installed package (pyproject's package-dir):
#: the copy is laid out as installed, so ``optimizer.rules`` imports the mutated copy, not the checkout;
#: ``testing`` (the fuzzer the campaign runs) is not installed and keeps its place.
PACKAGES = {"optimizer": "optimizer", "rules": "optimizer/rules", "cost": "optimizer/cost", "testing": "testing"}


def installed_path(file: str) -> str:
    """``rules/push_filters.py`` -> ``optimizer/rules/push_filters.py``: a repository path in the copy."""
    folder, _, rest = file.partition("/")
    return f"{PACKAGES[folder]}/{rest}" if folder in PACKAGES else file


class MutantError(Exception):
    """A mutant's snippet is not found exactly once in its file."""


@dataclass(frozen=True)
class Mutant:
    name: str
    #: path relative to the project root
    file: str
    #: the exact text replaced (must occur exactly once)
    old: str
    new: str
    #: what the planted bug breaks, in one sentence
    breaks: str

    def apply(self, root: Path) -> None:
        """Patch ``root / file`` (a copy of the project); raise :class:`MutantError` if the snippet is not
        found exactly once."""
        path = root / installed_path(self.file)
        if not path.is_file():
            raise MutantError(f"mutant {self.name}: {self.file} does not exist")
        text = path.read_text()
        n = text.count(self.old)
        if n != 1:
            raise MutantError(f"mutant {self.name}: its snippet occurs {n} times in {self.file} (expected once): "
                              f"{self.old.strip().splitlines()[0][:80]!r}")
        path.write_text(text.replace(self.old, self.new))


MUTANTS: tuple[Mutant, ...] = (
    # -------------------------------------------------------------------------------- rules
    Mutant(
        "left_join_filter_null_side", "rules/push_filters.py",
        "    _J.JOIN_TYPE_LEFT: {\"left\"},\n    _J.JOIN_TYPE_LEFT_SINGLE: {\"left\"},\n",
        "    _J.JOIN_TYPE_LEFT: {\"left\", \"right\"},\n    _J.JOIN_TYPE_LEFT_SINGLE: {\"left\"},\n",
        "push_filters moves a filter conjunct on the null-supplying (right) side of a LEFT join below the join",
    ),
    Mutant(
        "semi_anti_inputs_swapped", "rules/implement_joins.py",
        "    children: list[NewRel | int] = [left_child, right_child]\n",
        "    children: list[NewRel | int] = ([right_child, left_child] if type_name.endswith((\"SEMI\", \"ANTI\"))\n"
        "                                    else [left_child, right_child])\n",
        "implement_joins swaps the inputs of a semi/anti hash join and keeps its type",
    ),
    Mutant(
        "filter_into_read_drops_conjunct", "rules/filter_into_read.py",
        "    for c in conjuncts(rel.filter.condition, functions):\n",
        "    for c in conjuncts(rel.filter.condition, functions)[1:] or conjuncts(rel.filter.condition, functions):\n",
        "filter_into_read loses the first conjunct of a filter of two or more conjuncts when it moves any into the read",
    ),
    Mutant(
        "topn_ignores_offset", "rules/sort_fetch_to_topn.py",
        "    body.offset.CopyFrom(_i64(offset))\n",
        "    body.offset.CopyFrom(_i64(0))\n",
        "sort_fetch_to_topn drops the fetch's offset (the top-N starts at the first row)",
    ),
    Mutant(
        "window_loses_partition", "rules/window_to_consistent_partition.py",
        "        window.partition_expressions.extend(group.partitions)\n",
        "        window.partition_expressions.extend(group.partitions[:-1])\n",
        "window_to_consistent_partition loses the last partition key of a window",
    ),
    Mutant(
        "comma_join_loses_condition", "rules/extract_join_conditions.py",
        "            added.setdefault(n, []).append(c)\n",
        "            added.setdefault(n, [c])\n",
        "extract_join_conditions keeps only the first of the conditions it moves into one join of a comma join",
    ),
    Mutant(
        "on_conjunct_into_preserved_side", "rules/push_filters.py",
        "    _J.JOIN_TYPE_LEFT: {\"right\"},\n",
        "    _J.JOIN_TYPE_LEFT: {\"left\", \"right\"},\n",
        "push_filters moves an ON conjunct on the preserved (left) side of a LEFT join into that input",
    ),
    Mutant(
        "union_filter_first_input_only", "rules/push_filters.py",
        "        children = [self.sink(child, list(mapped))[0] for child in inputs(self.g, n)]\n",
        "        children = [self.sink(child, list(mapped))[0] if k == 0 else child\n"
        "                    for k, child in enumerate(inputs(self.g, n))]\n",
        "push_filters pushes a filter into the first input of a set operation only (wrong for unions)",
    ),
    Mutant(
        "or_folded_as_and", "optimizer/expr_utils.py",
        "        absorbing, neutral = (False, True) if name == \"and\" else (True, False)\n",
        "        absorbing, neutral = (False, True)\n",
        "fold (simplify_predicates' rewrite) folds the boolean constants of an OR as if it were an AND "
        "(x OR false -> false)",
    ),
    # ------------------------------------------------------------------------------ backend
    Mutant(
        "backend_topn_ignores_offset", "optimizer/spark/single_input.py",
        "        df = _offset_limit(df.orderBy(*orders) if orders else df, offset, count)\n",
        "        df = _offset_limit(df.orderBy(*orders) if orders else df, 0, count)\n",
        "the backend's TopNRel ignores its offset",
    ),
    Mutant(
        "backend_null_safe_key_lost", "optimizer/spark/physical.py",
        "                parts.append(_c(lc).eqNullSafe(_c(rc)))\n",
        "                parts.append(_c(lc) == _c(rc))\n",
        "the backend compares an IS_NOT_DISTINCT_FROM key of a hash/merge join with = (NULL keys never match)",
    ),
    Mutant(
        "backend_window_first_partition_only", "optimizer/spark/single_input.py",
        "self.exprs.window(wf, body.partition_expressions, body.sorts, scope,",
        "self.exprs.window(wf, body.partition_expressions[:1], body.sorts, scope,",
        "the backend's ConsistentPartitionWindowRel partitions by its first partition expression only",
    ),
)


def copy_tree(root: Path, dest: Path) -> Path:
    """Copy the project's packages to ``dest`` (no caches); return ``dest``."""
    for package, installed in PACKAGES.items():
        shutil.copytree(root / package, dest / installed, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    return dest


def check_all(mutants=MUTANTS, root: Path = ROOT) -> None:
    """Apply every mutant to a scratch copy (one at a time): fail before anything runs if one does not apply."""
    names = [m.name for m in mutants]
    if len(set(names)) != len(names):
        raise MutantError("two mutants have the same name")
    with tempfile.TemporaryDirectory(prefix="substrait-mutant-check-") as tmp:
        for m in mutants:
            dest = Path(tmp) / m.name
            copy = dest / installed_path(m.file)
            copy.parent.mkdir(parents=True, exist_ok=True)
            if (root / m.file).is_file():
                shutil.copy(root / m.file, copy)
            m.apply(dest)


def run_campaign(tree: Path, plans: int, seed: int, minutes: float, report: Path, quiet: bool = True,
                 answer_cache: Path | None = None) -> dict:
    """Run ``python -m testing.fuzz --stop-at-failure`` with the packages of ``tree``."""
    env = dict(os.environ, PYTHONPATH=str(tree), PYTHONDONTWRITEBYTECODE="1")
    cmd = [sys.executable, "-m", "testing.fuzz", "--plans", str(plans), "--seed", str(seed),
           "--minutes", str(minutes), "--no-save", "--stop-at-failure", "--json", str(report)]
    if quiet:
        cmd.append("--quiet")
    if answer_cache is not None:
        cmd += ["--answer-cache", str(answer_cache)]
    start = time.monotonic()
    proc = subprocess.run(cmd, env=env, cwd=tree, capture_output=True, text=True)
    seconds = time.monotonic() - start
    if not report.exists():
        tail = (proc.stderr or proc.stdout).strip().splitlines()[-3:]
        raise RuntimeError(f"the campaign in {tree} ended with status {proc.returncode} and no report: {' | '.join(tail)}")
    data = json.loads(report.read_text())
    data["wall_seconds"] = round(seconds, 1)
    return data


def _commit() -> str | None:
    try:
        out = subprocess.run(["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True, check=True)
    except (OSError, subprocess.CalledProcessError):
        return None
    return out.stdout.strip()


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m testing.mutate", description=__doc__.split("\n\n")[0])
    p.add_argument("--plans", type=int, default=500, help="plans per campaign (default 500)")
    p.add_argument("--seed", type=int, default=7, help="the campaign's seed (default 7)")
    p.add_argument("--minutes", type=float, default=10.0, help="time limit of each mutant's campaign (default 10)")
    p.add_argument("--baseline-minutes", type=float, help="time limit of the unmutated campaign (default: --minutes)")
    p.add_argument("--only", help="comma-separated mutant names")
    p.add_argument("--no-baseline", action="store_true", help="skip the unmutated campaign")
    p.add_argument("--out", default=str(ROOT / "docs" / "benchmarks" / "mutation.json"),
                   help="where the result goes (default docs/benchmarks/mutation.json; '-' for nowhere)")
    p.add_argument("--list", action="store_true", help="list the mutants and exit")
    p.add_argument("--answer-cache", metavar="DIR",
                   help="keep the unmutated backend's answers here (default: a temporary directory)")
    args = p.parse_args(argv)

    mutants = list(MUTANTS)
    if args.only:
        wanted = [n.strip() for n in args.only.split(",") if n.strip()]
        unknown = sorted(set(wanted) - {m.name for m in mutants})
        if unknown:
            print(f"mutate: unknown mutant(s): {', '.join(unknown)}", file=sys.stderr)
            return 2
        mutants = [m for m in mutants if m.name in wanted]
    if args.list:
        for m in mutants:
            print(f"{m.name:36} {m.file:40} {m.breaks}")
        return 0
    try:
        check_all(mutants)
    except MutantError as exc:
        print(f"mutate: {exc}", file=sys.stderr)
        return 2

    started = datetime.datetime.now(datetime.UTC)
    total_start = time.monotonic()
    results = []
    baseline = None
    with tempfile.TemporaryDirectory(prefix="substrait-mutants-") as tmp:
        tmp_path = Path(tmp)
        answers = Path(args.answer_cache) if args.answer_cache else tmp_path / "answers"
        for m in mutants:
            tree = copy_tree(ROOT, tmp_path / m.name)
            m.apply(tree)
            # A mutant outside the backend leaves it as it is: answers of plans already run are reused.
            cache = None if m.file.startswith("optimizer/spark/") else answers
            data = run_campaign(tree, args.plans, args.seed, args.minutes, tmp_path / f"{m.name}.json",
                                answer_cache=cache)
            killed = data["first_failure"] is not None
            entry = {"name": m.name, "file": m.file, "breaks": m.breaks, "killed": killed,
                     "plans_to_first_kill": data["first_failure"], "plans_run": data["plans"],
                     "answers_reused": data.get("answers_reused", 0),
                     "verdict": data["failures"][0] if data["failures"] else None, "seconds": data["wall_seconds"]}
            results.append(entry)
            where = f"killed at plan {data['first_failure']}" if killed else f"SURVIVED {data['plans']} plans"
            print(f"{m.name}: {where} [{data['wall_seconds']:.0f} s]" + (f"  {entry['verdict'][:120]}" if killed else ""),
                  flush=True)
            shutil.rmtree(tree, ignore_errors=True)
        if not args.no_baseline:  # last: the kills above are what is waited for
            tree = copy_tree(ROOT, tmp_path / "unmutated")
            baseline = run_campaign(tree, args.plans, args.seed, args.baseline_minutes or args.minutes,
                                    tmp_path / "unmutated.json", answer_cache=answers)
            print(f"unmutated: {baseline['plans']} plans, {baseline['different']} different, {baseline['errors']} errors, "
                  f"non-empty {baseline['nonempty_share']:.0%}, fired a rule {baseline['rule_fired_share']:.0%} "
                  f"[{baseline['wall_seconds']:.0f} s]", flush=True)
            shutil.rmtree(tree, ignore_errors=True)
    killed = sum(r["killed"] for r in results)
    document = {
        "date": started.strftime("%Y-%m-%dT%H:%M:%SZ"),
        "commit": _commit(),
        "campaign": {"plans": args.plans, "seed": args.seed, "minutes_per_campaign": args.minutes,
                     "nonempty_share": None if baseline is None else baseline["nonempty_share"],
                     "rule_fired_share": None if baseline is None else baseline["rule_fired_share"],
                     "command": "python -m testing.fuzz "
                     f"--plans {args.plans} --seed {args.seed} --stop-at-failure"},
        "unmutated": None if baseline is None else {
            k: baseline[k] for k in ("plans", "seconds", "wall_seconds", "equal", "different", "errors", "skipped",
                                     "nonempty_share", "rule_fired_share", "rules", "failures")},
        "mutants": results,
        "killed": killed,
        "total": len(results),
        "total_seconds": round(time.monotonic() - total_start, 1),
        "cpu_note": f"{os.cpu_count()} CPUs, load average at the end {os.getloadavg()[0]:.1f}",
    }
    if args.out != "-":
        out = Path(args.out)
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps(document, indent=1) + "\n")
        print(f"wrote {out}")
    print(f"mutants: {killed} killed of {len(results)}")
    clean = baseline is None or not baseline["failures"]
    return 0 if killed == len(results) and clean else 1


if __name__ == "__main__":
    sys.exit(main())
