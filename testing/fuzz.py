"""Fuzz the optimizer: generate plans (:mod:`testing.strategies`), compare each optimized
plan's answer with the original's on Spark (:func:`optimizer.difftest.compare`), shrink what fails.

::

    python -m testing.fuzz            # short profile: 50 plans, at most 5 minutes
    python -m testing.fuzz --long     # long profile (make fuzz): 5000 plans, at most 120 minutes
    python -m testing.fuzz --plans 300 --minutes 10 --seed 7
    python -m testing.fuzz --ignore 'a known bug'   # counted, not shrunk again
    python -m testing.fuzz --engine duckdb   # plans optimized for DuckDB, run on DuckDB

Every failure (a difference, or an error of the optimizer or of the optimized plan) is shrunk by
Hypothesis to a minimal case -- small tables, a small plan, the statistics/profile/configuration that
trigger it -- and saved as ``tests/regressions/fuzz-<hash>.json`` (``--save DIR``; ``--no-save`` to
keep nothing), which ``tests/test_regressions.py`` replays from then on. After a failure the fuzzer
goes on with a new seed until the plan count or the time is used up. Plans the backend cannot run as
given are skipped (not the optimizer's fault). Progress: a tqdm bar when tqdm is installed, else a
line every 10 plans. Exit status: 0 when nothing failed, 1 otherwise.

``--engine datafusion|duckdb|acero`` runs the plans on that engine instead of Spark
(:mod:`optimizer.engines`), optimized for it as a target; no Spark starts, unless ``--reference spark``
takes the expected answer from our Spark backend running the original as given (the engine's answer to
the original as written for it shares any mistake of the write stage with the optimized plan's). A
failure found so is saved like any other, and ``tests/test_regressions.py`` replays it on Spark.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import shutil
import sys
import tempfile
import time
from collections import Counter, deque
from dataclasses import dataclass, field
from pathlib import Path

from optimizer.difftest.harness import DiffCase, DiffResult, compare, ignoring_best_effort

PROFILES = {
    "short": {"plans": 50, "minutes": 5.0, "max_depth": 3, "max_relations": 6},
    "long": {"plans": 5000, "minutes": 120.0, "max_depth": 4, "max_relations": 10},
}

#: Plans per Hypothesis run (``max_examples``, the same whatever ``--plans`` says, so that a seed gives
#: the same first N plans for any plan count); a failure ends a run (after shrinking) and the next
#: starts with a new seed.
ROUND = 200


#: Case directories kept before the oldest is deleted.
_KEEP_DIRS = 20


class _OutOfTime(BaseException):
    """Raised inside the property when the time is up (a BaseException: Hypothesis lets it through)."""


class _Stop(BaseException):
    """Raised inside the property at the first failure when the fuzzer stops there (no shrinking)."""


@dataclass
class Failure:
    case: DiffCase
    result: DiffResult
    saved: Path | None = None
    flaky: bool = False


@dataclass
class FuzzReport:
    plans: int = 0
    seconds: float = 0.0
    counts: Counter = field(default_factory=Counter)
    failures: list[Failure] = field(default_factory=list)
    #: plans whose original answer has at least one row
    nonempty: int = 0
    #: plans for which at least one rule fired
    fired: int = 0
    #: rule name -> plans in which it fired
    rules: Counter = field(default_factory=Counter)
    #: the 1-based number of the first plan that failed (before shrinking), None if none did
    first_failure: int | None = None
    #: generated cases skipped because an equal case had been tried
    repeats: int = 0
    #: answers taken from the answer cache instead of Spark
    answers_reused: int = 0

    def record(self, result: DiffResult) -> None:
        """Count one plan's answer size and rules (the status is counted by the caller)."""
        if result.original_rows:
            self.nonempty += 1
        if result.rules_fired:
            self.fired += 1
        self.rules.update(set(result.rules_fired))

    def share(self, n: int) -> float:
        return n / self.plans if self.plans else 0.0

    def to_json(self) -> dict:
        return {
            "plans": self.plans, "seconds": round(self.seconds, 1),
            "equal": self.counts["equal"], "different": self.counts["different"], "errors": self.counts["error"],
            "skipped": self.counts["skipped"], "known": self.counts["known"],
            "nonempty_share": round(self.share(self.nonempty), 4), "rule_fired_share": round(self.share(self.fired), 4),
            "rules": dict(sorted(self.rules.items())), "first_failure": self.first_failure, "repeats": self.repeats,
            "answers_reused": self.answers_reused,
            "failures": [f.result.verdict() for f in self.failures],
        }

    def summary(self) -> str:
        c = self.counts
        text = (f"{self.plans} plans in {self.seconds / 60:.1f} min: {c['equal']} equal, {c['different']} different, "
                f"{c['error']} errors, {c['skipped']} skipped" + (f", {c['known']} known failures" if c["known"] else ""))
        lines = [text,
                 f"  non-empty answers: {self.share(self.nonempty):.0%} ({self.nonempty} of {self.plans}); "
                 f"fired a rule: {self.share(self.fired):.0%} ({self.fired} of {self.plans})",
                 "  rules fired (plans): " + (", ".join(f"{r} {n}" for r, n in sorted(self.rules.items())) or "none")]
        for f in self.failures:
            where = f" -> {f.saved}" if f.saved else ""
            flaky = " (flaky)" if f.flaky else ""
            lines.append(f"  {f.result.verdict()}{flaky}{where}")
        return "\n".join(lines)


class _Progress:
    def __init__(self, total: int, enabled: bool = True) -> None:
        self.total = total
        self.n = 0
        self.bar = None
        self.enabled = enabled
        if enabled:
            try:
                from tqdm import tqdm

                self.bar = tqdm(total=total, unit="plan", dynamic_ncols=True, file=sys.stderr)
            except ImportError:
                self.bar = None

    def update(self, counts: Counter) -> None:
        self.n += 1
        if not self.enabled:
            return
        text = f"eq={counts['equal']} diff={counts['different']} err={counts['error']} skip={counts['skipped']}"
        if counts["known"]:
            text += f" known={counts['known']}"
        if self.bar is not None:
            self.bar.update(1)
            self.bar.set_postfix_str(text, refresh=False)
        elif self.n % 10 == 0 or self.n == self.total:
            print(f"[fuzz] {self.n}/{self.total} plans  {text}", file=sys.stderr, flush=True)

    def write(self, line: str) -> None:
        if self.bar is not None:
            self.bar.write(line, file=sys.stderr)
        elif self.enabled:
            print(line, file=sys.stderr, flush=True)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()


class AnswerCache:
    """Answers of plans, as Arrow IPC files named by a hash of the plan, the tables' data and the
    best-effort mode. An answer is a function of those as long as the BACKEND's code is the same: the
    mutation harness shares one cache between the campaigns of the mutants of rules (and the unmutated
    one), so that a plan a mutant leaves as it was is not run on Spark again. Never share it between
    different versions of the backend."""

    def __init__(self, directory: str | Path) -> None:
        self.directory = Path(directory)
        self.directory.mkdir(parents=True, exist_ok=True)
        self.hits = 0

    def key(self, plan, data: str, ignore_best_effort: bool, engine: str = "spark") -> Path:
        digest = hashlib.sha256(plan.SerializeToString(deterministic=True))
        digest.update(data.encode())
        if engine != "spark":  # the keys of Spark's answers stay as they were
            digest.update(engine.encode())
        digest.update(b"1" if ignore_best_effort else b"0")
        return self.directory / f"{digest.hexdigest()[:32]}.arrow"

    def get(self, path: Path):
        import pyarrow as pa

        if not path.exists():
            return None
        self.hits += 1
        with pa.OSFile(str(path), "rb") as f:
            return pa.ipc.open_file(f).read_all()

    def put(self, path: Path, table) -> None:
        import pyarrow as pa

        tmp = path.with_suffix(f".{os.getpid()}.tmp")
        with pa.OSFile(str(tmp), "wb") as f, pa.ipc.new_file(f, table.schema) as writer:
            writer.write_table(table)
        os.replace(tmp, path)


class _CachedBackend:
    """``backend`` whose answers go through an :class:`AnswerCache` (failures are not cached)."""

    def __init__(self, backend, cache: AnswerCache, data: str, engine: str = "spark") -> None:
        self.backend, self.cache, self.data, self.engine = backend, cache, data, engine
        self.ignore_best_effort_filter = getattr(backend, "ignore_best_effort_filter", False)

    def execute(self, plan):
        path = self.cache.key(plan, self.data, self.ignore_best_effort_filter, self.engine)
        table = self.cache.get(path)
        if table is None:
            table = self.backend.execute(plan)
            self.cache.put(path, table)
        return table


class Fuzzer:
    """Runs generated cases through :func:`~optimizer.difftest.compare` on one SparkSession, or on the
    engine ``engine`` (:data:`optimizer.engines.ENGINES`; ``spark`` is None then), optimized for it."""

    def __init__(self, spark, *, engine: str = "spark", workdir: str | Path | None = None, save_dir: str | Path | None = None,
                 max_depth: int = 3, max_relations: int = 6, max_rows: int = 8, progress: bool = True,
                 ignore: list[str] | None = None, rules: list | None = None, stop_at_failure: bool = False,
                 answer_cache: AnswerCache | None = None, reference: str | None = None) -> None:
        self.spark = spark
        self.engine = engine
        #: ``spark``: the expected answer is the original plan as given run on our Spark backend (``spark``
        #: must be a session), not the original written for the engine, so write-stage mistakes show
        self.reference = reference
        #: the target the plans are optimized for (None: the default, Spark)
        self.target = None if engine == "spark" else engine
        #: where the cases' tables are written; a temporary directory of the fuzzer's own (made at the first
        #: case, removed when :meth:`run` ends) when None is given
        self._workdir = Path(workdir) if workdir else None
        self._own_workdir = workdir is None
        self.save_dir = Path(save_dir) if save_dir else None
        self.max_depth = max_depth
        self.max_relations = max_relations
        self.max_rows = max_rows
        self.show_progress = progress
        self.ignore = [re.compile(p) for p in ignore or []]
        self.rules = rules  # None: the standard rules
        #: stop at the first failure, without shrinking it (the mutation harness only needs the count)
        self.stop_at_failure = stop_at_failure
        self.answer_cache = answer_cache
        self._n = 0
        self._dirs: deque[Path] = deque()
        #: fingerprints of the cases tried (a repeated case is not run or counted again)
        self._tried: set[str] = set()

    @property
    def workdir(self) -> Path:
        if self._workdir is None:
            self._workdir = Path(tempfile.mkdtemp(prefix="substrait-fuzz-"))
        return self._workdir

    def known(self, result: DiffResult) -> bool:
        """A failure matching an ``ignore`` pattern (a known bug): counted, not shrunk."""
        return result.failed and any(p.search(result.verdict()) for p in self.ignore)

    def backend(self, tables):
        if self.engine != "spark":
            from optimizer.engines import runner

            return runner(self.engine, tables)
        from optimizer.spark import SparkBackend

        return SparkBackend(self.spark, tables=tables)

    def check(self, case: DiffCase) -> DiffResult:
        """Write the case's tables and compare its plan. The data of a case is deleted a few cases
        later: Spark may still be finishing work of a query in the background (a broadcast nobody
        waits for any more) and would fail on a missing file."""
        self._n += 1
        directory = self.workdir / f"case{self._n}"
        self._dirs.append(directory)
        while len(self._dirs) > _KEEP_DIRS:
            shutil.rmtree(self._dirs.popleft(), ignore_errors=True)
        if self.answer_cache is None:
            return case.run(self.backend, directory, rules=self.rules, target=self.target,
                            reference_factory=self._reference)
        paths = case.database.write_parquet(directory)
        backend = self.backend(paths)
        data = json.dumps(case.database.to_json(), sort_keys=True)
        reference = self._reference(paths)
        return compare(case.plan, backend=_CachedBackend(backend, self.answer_cache, data, self.engine),
                       optimized_backend=_CachedBackend(ignoring_best_effort(backend), self.answer_cache, data,
                                                        self.engine),
                       statistics=case.statistics_provider(), capabilities=case.capability_profile(),
                       config=case.optimizer_config(), rules=self.rules, target=self.target,
                       reference_backend=None if reference is None else _CachedBackend(
                           reference, self.answer_cache, data))

    def _reference(self, tables):
        """The backend of the expected answer (None: the engine's answer to the written original)."""
        if self.reference != "spark" or self.engine == "spark":
            return None
        from optimizer.spark import SparkBackend

        return SparkBackend(self.spark, tables=tables)

    def _round(self, report: FuzzReport, progress: _Progress, examples: int, seed: int, plans: int,
               deadline: float) -> tuple[DiffCase, DiffResult, bool] | None:
        """One Hypothesis run: the minimal failing case (and whether it was flaky), or None."""
        from hypothesis import HealthCheck, Phase, Verbosity, event, given, settings, target
        from hypothesis import seed as hseed
        from hypothesis.errors import Flaky

        from testing.strategies import cases

        last: list[tuple[DiffCase, DiffResult]] = []

        @settings(max_examples=examples, deadline=None, database=None, suppress_health_check=list(HealthCheck),
                  verbosity=Verbosity.quiet, report_multiple_bugs=False,
                  phases=[Phase.generate, Phase.target] + ([] if self.stop_at_failure else [Phase.shrink]))
        @hseed(seed)
        @given(cases(max_depth=self.max_depth, max_relations=self.max_relations, max_rows=self.max_rows))
        def prop(case):
            if not last:  # still searching (shrinking is not interrupted)
                if time.monotonic() > deadline or report.plans >= plans:
                    raise _OutOfTime
                key = case.fingerprint()
                if key in self._tried:  # Hypothesis repeats simple cases: each distinct case runs once
                    report.repeats += 1
                    return
                self._tried.add(key)
                report.plans += 1
                result = self.check(case)
                report.counts["known" if self.known(result) else result.status] += 1
                report.record(result)
                progress.update(report.counts)
                if result.failed and not self.known(result):
                    if report.first_failure is None:
                        report.first_failure = report.plans
                    if self.stop_at_failure:
                        last.append((case, result))
                        progress.write(f"[fuzz] failure at plan {report.plans}: {result.verdict()}")
                        raise _Stop
                    progress.write(f"[fuzz] failure: {result.verdict()} -- shrinking")
            else:
                result = self.check(case)
            # Steer generation (Hypothesis' target phase) towards answers with rows and plans that fire
            # rules; the events show in Hypothesis' statistics.
            target(float(min(result.original_rows or 0, 20)), label="answer rows")
            target(float(len(set(result.rules_fired))), label="rules fired")
            for rule in sorted(set(result.rules_fired)):
                event(f"rule {rule}")
            event("answer " + ("empty" if not result.original_rows else "with rows"))
            if result.failed and not self.known(result):
                last.append((case, result))
                raise AssertionError(result.verdict())

        flaky = False
        try:
            prop()
        except _Stop:
            pass
        except Flaky:
            flaky = True
        except AssertionError:
            pass
        if not last:
            return None
        case, result = last[-1]
        return case, result, flaky

    def run(self, plans: int, minutes: float, seed: int = 0) -> FuzzReport:
        """Try up to ``plans`` generated plans for at most ``minutes``; shrink and save the failures."""
        report = FuzzReport()
        start = time.monotonic()
        deadline = start + minutes * 60
        progress = _Progress(plans, self.show_progress)
        seen: set[str] = set()
        round_seed = seed
        try:
            while report.plans < plans and time.monotonic() < deadline:
                try:
                    found = self._round(report, progress, ROUND, round_seed, plans, deadline)
                except _OutOfTime:
                    break
                round_seed += 1
                if found is None:
                    continue
                case, result, flaky = found
                failure = Failure(case, result, flaky=flaky)
                case.note = f"found by testing.fuzz (seed {round_seed - 1}): {result.verdict()}"
                key = case.fingerprint()
                if self.save_dir is not None and key not in seen:
                    failure.saved = case.save(self.save_dir)
                    progress.write(f"[fuzz] minimal failing case saved: {failure.saved}")
                seen.add(key)
                report.failures.append(failure)
                if self.stop_at_failure:
                    break
        finally:
            progress.close()
            report.seconds = time.monotonic() - start
            if self._own_workdir and self._workdir is not None:
                shutil.rmtree(self._workdir, ignore_errors=True)
                self._workdir = None
        return report


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m testing.fuzz", description=__doc__.split("\n\n")[0])
    p.add_argument("--long", action="store_true", help="the long profile (5000 plans, 120 minutes, bigger plans)")
    p.add_argument("--plans", type=int, help="how many plans to try (default: the profile's)")
    p.add_argument("--minutes", type=float, help="time limit in minutes (default: the profile's)")
    p.add_argument("--seed", type=int, default=int(time.time()) % 100_000, help="first Hypothesis seed")
    p.add_argument("--save", default=str(Path(__file__).resolve().parents[1] / "tests" / "regressions"),
                   help="where minimal failing cases are saved (default tests/regressions)")
    p.add_argument("--no-save", action="store_true", help="do not save failing cases")
    p.add_argument("--master", default="local[2]", help="Spark master URL (default local[2])")
    from optimizer.engines import ENGINES

    p.add_argument("--engine", choices=ENGINES, default="spark",
                   help="where the plans run (default spark); another engine gets them optimized for it")
    p.add_argument("--reference", choices=("engine", "spark"), default="engine",
                   help="with --engine: where the expected answer comes from: the engine running the original "
                        "as written for it (default), or our Spark backend running the original as given, "
                        "which also catches the write stage's mistakes (starts Spark)")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    p.add_argument("--ignore", action="append", default=[], metavar="REGEX",
                   help="a known bug: failures whose verdict matches are counted but not shrunk (repeatable)")
    p.add_argument("--stop-at-failure", action="store_true",
                   help="stop at the first failure without shrinking it (as the mutation harness does)")
    p.add_argument("--json", metavar="FILE", help="also write the report as JSON to FILE")
    p.add_argument("--answer-cache", metavar="DIR",
                   help="reuse the answers of plans run before (only while the backend's code is unchanged)")
    args = p.parse_args(argv)
    profile = PROFILES["long" if args.long else "short"]
    plans = args.plans if args.plans is not None else profile["plans"]
    minutes = args.minutes if args.minutes is not None else profile["minutes"]

    spark = None
    if args.engine == "spark" or args.reference == "spark":
        from optimizer.spark.session import get_spark

        spark = get_spark(args.master, conf={"spark.sql.shuffle.partitions": "4"})
    print(f"[fuzz] {plans} plans, at most {minutes:g} min, seed {args.seed}, on {args.engine}", file=sys.stderr,
          flush=True)
    fuzzer = Fuzzer(spark, engine=args.engine, save_dir=None if args.no_save else args.save, max_depth=profile["max_depth"],
                    max_relations=profile["max_relations"], progress=not args.quiet, ignore=args.ignore,
                    stop_at_failure=args.stop_at_failure,
                    answer_cache=AnswerCache(args.answer_cache) if args.answer_cache else None,
                    reference=args.reference)
    report = fuzzer.run(plans, minutes, args.seed)
    if fuzzer.answer_cache is not None:
        report.answers_reused = fuzzer.answer_cache.hits
    print(report.summary())
    if args.json:
        Path(args.json).write_text(json.dumps({"seed": args.seed, "profile": "long" if args.long else "short",
                                               **report.to_json()}, indent=1) + "\n")
    return 1 if report.failures else 0


if __name__ == "__main__":
    sys.exit(main())
