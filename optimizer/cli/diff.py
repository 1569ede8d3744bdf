"""``substrait-opt diff``: run each plan as given and optimized on an engine and compare the answers.

One line per plan, ``name: equal | DIFFERENT (reason) | error (message) | skipped (message)`` with both
run times, then exactly ``N passed, M failed``. An original plan the backend does not support is
*skipped* (not the optimizer's fault) and counted neither way. Exit 0 when every compared plan gave the
same answer, 1 when any differed or failed, 2 on bad input. For each plan that differed (or failed
after optimizing) ``--out`` (default ``./diff-out/``) receives ``<name>.original.json``,
``<name>.optimized.json`` and ``<name>.diff.json`` (the reason and a sample of the differing rows).

``--engine`` (default ``spark``) names the engine: Spark through the project's backend, or DataFusion,
DuckDB or Acero reading the plans themselves (:mod:`optimizer.engines`; tables from ``--tables``,
registered by name). For those the plan is optimized for that target (``optimize(plan, target=engine)``)
and the original runs as written for it (its encoding, no rewrite); no Spark starts, and the options
that only Spark reads are refused.
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


def _engine_backend(args: argparse.Namespace, engine: str):
    """The runner of ``engine`` over ``--tables`` and the statistics the optimizer gets (``--stats``, the
    Parquet footers of ``--tables``; no Spark)."""
    from optimizer.engines import runner
    from optimizer.paths import file_access
    from optimizer.spark.statistics import default_statistics

    files = file_access(args)
    statistics = default_statistics(tables=args.tables or None, stats_file=args.stats or None, files=files)
    return runner(engine, args.tables or None, files=files), statistics


#: ``diff --time``'s runs of each plan by default.
TIMED_RUNS = 3


def sql_beside(args: argparse.Namespace, engine: str) -> list[tuple[str, str] | None]:
    """Per input, the SQL it was made from, as ``(file, text)``, for ``--time`` to run on Spark beside the
    plans: ``--sql FILE`` (one input), else ``X.sql`` beside ``X.json``/``X.binpb``; ``None`` without."""
    from optimizer.cli.args import plan_name

    if args.sql and not args.time:
        raise PlanError("--sql is timed beside the plans: give --time too", "--sql")
    if args.repeat is not None and not args.time:
        raise PlanError("--repeat counts the timed runs of --time: give --time too", "--repeat")
    if args.sql and len(args.inputs) != 1:
        raise PlanError("--sql FILE is the SQL of one plan: give one input (or put X.sql beside each X.json)",
                        "--sql")
    if args.sql and engine != "spark":
        raise PlanError(f"--sql runs on Spark; --engine {engine} does not run it", "--sql")
    out: list[tuple[str, str] | None] = []
    for source in args.inputs:
        path = Path(args.sql) if args.sql else (Path(source).with_name(plan_name(source) + ".sql")
                                                 if source != "-" else None)
        if path is None or engine != "spark" or not args.time or (not args.sql and not path.is_file()):
            out.append(None)
            continue
        try:
            out.append((str(path), path.read_text(encoding="utf-8")))
        except (OSError, UnicodeDecodeError) as exc:
            raise PlanError(f"cannot read the SQL file: {getattr(exc, 'strerror', None) or exc}", str(path)) from None
    return out


def warm_times(backend, original, optimized, repeat: int, sql: tuple[str, str] | None) -> str:
    """The plans' times, warm (each has run once), as the medians of ``repeat`` interleaved runs (original,
    optimized, and the SQL on Spark when given; the order alternates run by run so neither is always
    first), and the ratio optimized / original."""
    from optimizer.cli.timing import how, median, seconds_text, timed
    from optimizer.errors import OptimizerError

    steps = [("original", lambda: backend.execute(original)), ("optimized", lambda: backend.execute(optimized))]
    views: list[str] = []
    sql_error = None
    try:
        if sql is not None:
            try:
                run_sql = spark_sql_runner(backend, *sql, views)
                run_sql()  # its warm-up
                steps.append(("Spark SQL", run_sql))
            except OptimizerError as exc:  # the plans are still timed; the line says why the SQL is not
                sql_error = str(exc)
        runs: dict[str, list[float]] = {label: [] for label, _ in steps}
        for i in range(repeat):
            for label, step in steps if i % 2 == 0 else steps[::-1]:
                runs[label].append(timed(step)[1])
    finally:
        for view in views:
            backend.spark.catalog.dropTempView(view)
    medians = {label: median(seconds) for label, seconds in runs.items()}
    text = (f"original {seconds_text(medians['original'])}, optimized {seconds_text(medians['optimized'])}, "
            f"optimized/original {medians['optimized'] / medians['original']:.2f}")
    if "Spark SQL" in medians:
        text += f", Spark SQL ({Path(sql[0]).name}) {seconds_text(medians['Spark SQL'])}"
    elif sql_error:
        text += f", Spark SQL: error ({sql_error})"
    return f"{text}; {how(repeat, interleaved=repeat > 1)}"


def spark_sql_runner(backend, source: str, text: str, views: list[str]):
    """A step that runs ``text`` as Spark SQL on the backend's session, its tables those the plans read
    (``--tables``/``--catalog``, as temporary views under their own names, appended to ``views`` for the
    caller to drop), collected as the plans are."""
    import sqlglot
    from sqlglot import exp

    from optimizer.errors import ExecutionError, spark_errors

    try:
        tree = sqlglot.parse_one(text, read="spark")
    except sqlglot.errors.ParseError as exc:
        raise PlanError(f"not SQL Spark reads: {str(exc).splitlines()[0]}", source) from None
    ctes = {cte.alias_or_name.lower() for cte in tree.find_all(exp.CTE)}
    names = sorted({t.name.lower() for t in tree.find_all(exp.Table) if t.name and t.name.lower() not in ctes})
    spark = backend.spark
    for name in names:
        try:
            backend.tables.raw_table([name]).createOrReplaceTempView(name)
        except spark_errors() as exc:
            raise ExecutionError(f"table '{name}': {str(exc).splitlines()[0]}", source) from None
        views.append(name)

    def run():
        try:
            return spark.sql(text).toArrow()
        except spark_errors() as exc:
            raise ExecutionError(f"Spark SQL failed: {str(exc).splitlines()[0] if str(exc) else exc}", source) from None

    return run


def cmd_diff(args: argparse.Namespace) -> int:
    from optimizer.capabilities import default_capabilities, load_capabilities
    from optimizer.cli.args import check_engine_args, one_root, plan_name, statistics_from_args
    from optimizer.difftest.harness import compare
    from optimizer.load.pipeline import load

    # Bad input is reported before Spark starts.
    engine = getattr(args, "engine", "spark")
    if engine != "spark":
        check_engine_args(args, engine)
    sql_texts = sql_beside(args, engine)  # usage first: before any plan is read
    plans = []
    if engine == "spark":
        from optimizer.cli.spark import check_reads_before_spark, starts_empty_catalog

        empty_catalog = starts_empty_catalog(args)
    for source in args.inputs:
        loaded = load(source)
        plan = loaded.plan
        loaded.check()
        one_root(plan)
        if engine == "spark":
            check_reads_before_spark(plan, args, empty_catalog)
        plans.append((plan_name(source), plan))
    if not args.out:
        raise PlanError("--out is empty: give a directory")
    out_dir = Path(args.out)
    if out_dir.exists() and not out_dir.is_dir():
        raise PlanError("not a directory", args.out)
    if engine != "spark":
        backend, statistics = _engine_backend(args, engine)
        capabilities = load_capabilities(args.capabilities) if args.capabilities else None
        target = engine
    else:
        statistics = statistics_from_args(args)
        capabilities = load_capabilities(args.capabilities) if args.capabilities else default_capabilities()
        target = None

        from optimizer.cli.spark import backend_from_args

        backend = backend_from_args(args)
    passed = failed = skipped = 0
    for (name, plan), sql in zip(plans, sql_texts, strict=True):
        result = compare(plan, backend=backend, statistics=statistics, capabilities=capabilities, target=target)
        times = result.times()
        if args.time and result.equal:  # compare ran both plans once: the warm-up of the timed runs
            times = warm_times(backend, plan, result.optimized_plan, args.repeat or TIMED_RUNS, sql)
        print(f"{name}: {result.verdict()}  [{times}]", flush=True)
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
    if not args.time:
        print("(times: one run of each plan, the first including the engine's warm-up; --time for warm medians)")
    print(f"{passed} passed, {failed} failed")
    sys.stdout.flush()
    return 1 if failed else 0


def register(sub, name: str, help_text: str) -> None:
    from optimizer.cli.args import add_engine_command
    from optimizer.cli.optimize import add_statistics_args

    p = add_engine_command(
        sub, name, help_text, cmd_diff,
        description="Run each plan as given and as optimized on an engine (Spark by default, one SparkSession; "
                    "the optimized plan with best-effort read filters ignored) and compare the answers as "
                    "multisets of rows, and their order where the plan's root is a sort. Exit 0 when all are "
                    "equal, 1 when any differs or fails, 2 on bad input. A plan the engine cannot run as "
                    "given is skipped.",
        what_runs="both plans", how_read="the engine reads the plans, optimized for it as a target")
    add_statistics_args(p)
    p.add_argument("--capabilities", help="reader-capability profile JSON (default: Spark's Parquet reader)")
    p.add_argument("--out", default="diff-out",
                   help="where plans and differing rows of failures go (default ./diff-out/)")
    p.add_argument("--time", action="store_true",
                   help="after comparing, time each equal pair warm: the medians of --repeat interleaved runs "
                        "and optimized/original, and with the plan's SQL (--sql, or X.sql beside X.json) "
                        "Spark SQL on the same text")
    from optimizer.cli.timing import add_repeat_argument

    add_repeat_argument(p, TIMED_RUNS, "each plan with --time")
    p.set_defaults(repeat=None)  # given without --time, it is refused
    p.add_argument("--sql", metavar="FILE", help="with --time and one plan: the SQL it was made from, run on "
                                                 "Spark beside it (default: X.sql beside X.json, when there)")
    from optimizer.cli.spark import add_cast_argument

    add_cast_argument(p)
