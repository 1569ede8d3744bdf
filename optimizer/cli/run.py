"""``substrait-opt run``: run plans on Spark, print each result's size, time and first rows (or the whole
result as csv or json, or Parquet files). Times are warm: the session's first plan runs once untimed
first, and each time is the median of ``--repeat`` runs (:mod:`optimizer.cli.timing`).

``--engine datafusion|duckdb|acero`` gives each plan file to that engine instead, as the file holds it
(:func:`optimizer.engines.base.plan_as_given`: no upgrade to the current encoding, so a plan written by
``optimize --target`` reaches its engine unchanged); no Spark starts.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from optimizer.cli.args import add_engine_command, one_root, plan_name
from optimizer.cli.timing import add_repeat_argument, how, median, seconds_text, timed
from optimizer.errors import OptimizerError, PlanError
from optimizer.paths import add_path_argument


def _column_values(column) -> list:
    """A column's values as Python objects, or as Arrow prints them where Python has no such value (a date
    past the year 9999, which Spark computes and Python's dates do not reach)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    try:
        return column.to_pylist()
    except (OverflowError, ValueError):
        try:
            return pc.cast(column, pa.string()).to_pylist()
        except pa.ArrowException:
            return [f"<{column.type}>" if valid else None for valid in pc.is_valid(column).to_pylist()]


def format_rows(table, limit: int = 5) -> str:
    """The first rows of a pyarrow Table as aligned text."""
    names = table.column_names
    n_rows = min(limit, table.num_rows)
    cols = [_column_values(table.column(i).slice(0, limit)) for i in range(table.num_columns)]
    cells = [[("NULL" if cols[c][r] is None else str(cols[c][r])) for c in range(len(names))] for r in range(n_rows)]
    widths = [min(30, max([len(n)] + [len(row[i]) for row in cells])) for i, n in enumerate(names)]
    line = lambda vals: "  " + " | ".join(v[:30].ljust(w) for v, w in zip(vals, widths, strict=True))  # noqa: E731
    out = [line(names), "  " + "-+-".join("-" * w for w in widths)] + [line(r) for r in cells]
    if table.num_rows > limit:
        out.append(f"  ... {table.num_rows - limit} more rows")
    return "\n".join(out)


def result_names(sources: list[str]) -> list[str]:
    """A distinct result name per input: the plan name, prefixed with as many parent folders as it takes to
    tell inputs of the same file name apart (``a/q1.json``, ``b/q1.json`` -> ``a-q1``, ``b-q1``); the same
    file given twice gets ``-2``, ``-3``...

    >>> result_names(["a/q1.json", "b/q1.json", "q2.json"])
    ['a-q1', 'b-q1', 'q2']
    """
    def parents(source: str) -> tuple[str, ...]:
        return () if source == "-" else Path(os.path.abspath(source)).parent.parts[1:]

    names = [plan_name(s) for s in sources]
    for clash in {n for n in names if names.count(n) > 1}:
        group = [i for i, n in enumerate(names) if n == clash]
        distinct = {parents(sources[i]) for i in group}
        if len(distinct) < 2:
            continue  # the same file given twice: told apart by -2 below
        for depth in range(1, 1 + max(len(p) for p in distinct)):
            tails = [parents(sources[i])[-depth:] for i in group]
            if len(set(tails)) == len(distinct):
                for i, tail in zip(group, tails, strict=True):
                    names[i] = "-".join([*tail, clash])
                break
    seen: dict[str, int] = {}
    out = []
    for n in names:
        seen[n] = seen.get(n, 0) + 1
        out.append(n if seen[n] == 1 else f"{n}-{seen[n]}")
    return out


def cmd_run(args: argparse.Namespace) -> int:
    """Run every plan; a plan that fails (to load or to run) is one line on stderr naming its file, and the
    others still run. The last line is ``N ok, M failed``. Exit 0 when all ran; otherwise the worst failure's
    code: 3 when any plan was unsupported or failed to execute, else 2 (bad input)."""
    from optimizer.cli.interrupt import check_interrupted, stop_on_signals
    from optimizer.cli.spark import (
        backend_from_args,
        check_reads_before_spark,
        check_tables_arg,
        starts_empty_catalog,
    )
    from optimizer.load.pipeline import load

    engine = getattr(args, "engine", "spark")
    if engine != "spark":
        from optimizer.cli.args import check_engine_args

        if args.learn:
            raise PlanError(f"counts each relation's rows on Spark, not on --engine {engine}", "--learn")
        check_engine_args(args, engine)
    check_tables_arg(args.tables)
    from optimizer.cli.args import learned_rows_from_args

    learned = learned_rows_from_args(args)
    names = result_names(args.inputs)
    fmt = _check_format(args)
    # With csv or json on stdout the rows are the output: the tool's own lines go to stderr.
    report = sys.stderr if fmt in ("csv", "json") else sys.stdout
    worst = 0
    failed = 0

    def fail(source: str, exc: OptimizerError) -> None:
        nonlocal worst, failed
        where = "<stdin>" if source == "-" else source
        text = str(exc)
        print(f"substrait-opt: error: {text if text.startswith(where) else f'{where}: {text}'}", file=sys.stderr,
              flush=True)
        worst = max(worst, exc.exit_code)
        failed += 1

    # Read and check every plan first: bad input is reported before Spark starts.
    plans = []
    empty_catalog = None
    for source, name in zip(args.inputs, names, strict=True):
        try:
            if engine != "spark":
                from optimizer.engines.base import plan_as_given

                given = plan_as_given(source)
                one_root(given)
                plans.append((source, name, given))
                continue
            loaded = load(source)
            loaded.check()
            one_root(loaded.plan)
            if empty_catalog is None:
                empty_catalog = starts_empty_catalog(args)
            check_reads_before_spark(loaded.plan, args, empty_catalog)
        except OptimizerError as exc:
            fail(source, exc)
            continue
        plans.append((source, name, loaded))
    out_dir = _check_out_dir(args.out)
    if plans and engine != "spark":
        from optimizer.engines import runner
        from optimizer.paths import file_access

        backend = runner(engine, args.tables or None, files=file_access(args))
    elif plans:
        backend = backend_from_args(args)
        stop_on_signals(backend.spark)
    warm = False
    for source, name, plan in plans:
        runs: list[float] = []
        try:
            if not warm:  # the session's first plan pays the JVM's warm-up: run once untimed
                backend.execute(plan)
                warm = True
            for _ in range(args.repeat):
                table, seconds = timed(lambda plan=plan: backend.execute(plan))
                runs.append(seconds)
        except OptimizerError as exc:
            check_interrupted()  # a job cancelled by SIGINT/SIGTERM stops the run, it is not its error
            fail(source, exc)
            continue
        print(f"{name}: {table.num_rows} rows in {seconds_text(median(runs))} ({how(len(runs))})", file=report,
              flush=True)
        if learned is not None:
            _learn(plan, backend, learned, name, report)
        if fmt == "table" and args.show:
            print(format_rows(table, args.show), flush=True)
        try:  # a result a format cannot hold fails its plan by name; the batch goes on
            if fmt in ("csv", "json") and not out_dir:
                _write_rows(table, fmt, None)
            elif out_dir:
                _write_rows(table, "parquet" if fmt == "table" else fmt, out_dir / f"{name}.{_EXTENSIONS[fmt]}")
        except OptimizerError as exc:
            fail(source, exc)
    print(f"{len(args.inputs) - failed} ok, {failed} failed", file=report)
    report.flush()
    return worst


def _learn(loaded, backend, learned, name: str, report) -> None:
    """``--learn``: the rows of every relation of the plan that ran, counted subtree by subtree as
    ``explain --analyze`` counts them (:func:`optimizer.explain.estimates.learn_from_run`), saved with the
    learned rows; one line on ``report`` says how many."""
    from optimizer.cli.args import save_learned
    from optimizer.cli.interrupt import check_interrupted
    from optimizer.explain.estimates import learn_from_run

    recorded = learn_from_run(loaded.plan, backend, learned)
    check_interrupted()  # a count cancelled by SIGINT/SIGTERM is not learned
    save_learned(learned)
    print(f"{name}: learned the rows of {recorded} relations", file=report, flush=True)


#: The file each --format writes into --out (table: the rows as Parquet, as --format parquet).
_EXTENSIONS = {"table": "parquet", "parquet": "parquet", "csv": "csv", "json": "json"}


def _check_format(args: argparse.Namespace) -> str:
    """``--format``, checked before Spark starts: parquet needs ``--out``; csv and json go to stdout for one
    plan (several need ``--out``, one file each)."""
    fmt = args.format
    if fmt == "parquet" and not args.out:
        raise PlanError("--format parquet writes files: give --out DIR (one OUT/<plan name>.parquet per plan)")
    if fmt in ("csv", "json") and not args.out and len(args.inputs) > 1:
        raise PlanError(f"--format {fmt} on stdout takes one plan: give --out DIR for one file per plan")
    return fmt


def _write_rows(table, fmt: str, dest: Path | None) -> None:
    """The whole result as ``fmt`` (csv, json: a JSON array of objects, one per row; parquet) to ``dest``,
    or to stdout for ``None``. JSON has no decimal, date or time: those are strings, as are NaN and
    infinities."""
    from optimizer.errors import UnsupportedError
    from optimizer.plan_io import atomic_path

    if fmt == "json":
        data = (_json_rows(table) + "\n").encode("utf-8")
    elif fmt == "csv":
        import pyarrow as pa
        import pyarrow.csv as pacsv

        sink = pa.BufferOutputStream()
        try:
            pacsv.write_csv(table, sink)
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as exc:  # nested columns have no CSV form
            raise UnsupportedError(f"--format csv cannot write this result: {str(exc).splitlines()[0]} "
                                   "(--format json or parquet can)") from None
        data = sink.getvalue().to_pybytes()
    else:
        import pyarrow as pa
        import pyarrow.parquet as pq

        assert dest is not None  # _check_format: parquet needs --out
        try:
            with atomic_path(dest) as tmp:
                pq.write_table(table, tmp)
        except pa.ArrowNotImplementedError as exc:  # Parquet has no month_day_nano interval, among others
            raise UnsupportedError(f"Parquet cannot hold this result: {str(exc).splitlines()[0]} (--format json "
                                   "can)") from None
        return
    if dest is None:
        sys.stdout.buffer.write(data)
        sys.stdout.buffer.flush()
    else:
        with atomic_path(dest) as tmp:
            Path(tmp).write_bytes(data)


def _json_rows(table) -> str:
    import datetime
    import decimal
    import json
    import math

    def value(v):
        if isinstance(v, float) and not math.isfinite(v):
            return str(v)
        if isinstance(v, decimal.Decimal | datetime.date | datetime.time | datetime.timedelta):
            return str(v)
        if isinstance(v, bytes):
            return v.hex()
        if isinstance(v, dict):
            return {k: value(x) for k, x in v.items()}
        if isinstance(v, list | tuple):
            return [value(x) for x in v]
        return v

    names = table.column_names
    unique = len(set(names)) == len(names)
    # Column by column: a value Python has no object for (a date past the year 9999) as Arrow prints it.
    columns = [[value(v) for v in _column_values(c)] for c in table.columns]
    values = zip(*columns, strict=True) if columns else [()] * table.num_rows
    rows = [dict(zip(names, row, strict=True)) if unique else list(row) for row in values]
    return json.dumps(rows, ensure_ascii=False, allow_nan=False)


def _check_out_dir(out: str | None) -> Path | None:
    """``--out`` made and checked before Spark starts: a directory we can write into, else exit 2."""
    if out is None:
        return None
    if not out:
        raise PlanError("--out is empty: give a directory")
    path = Path(out)
    if path.exists() and not path.is_dir():
        raise PlanError("--out is not a directory", out)
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise PlanError(f"--out cannot be created: {exc.strerror or exc}", out) from None
    if not os.access(path, os.W_OK | os.X_OK):
        raise PlanError("--out is not writable", out)
    return path


def register(sub, name: str, help_text: str) -> None:
    p = add_engine_command(
        sub, name, help_text, cmd_run,
        description="Run Substrait plans (logical or physical) on Spark through the PySpark backend, "
                    "one SparkSession for all. Prints each plan's row count, time (after an untimed warm-up run of the "
                    "first plan; the median of --repeat runs) and first rows; a plan that "
                    "fails is one line on stderr and the others still run; the last line is "
                    "'N ok, M failed'. Exit 0 when all ran, else 3 if any was unsupported or "
                    "failed to execute, else 2 (bad input).",
        what_runs="the plans", how_read="the engine reads each plan file as it is")
    p.add_argument("--tables", help="directory of the tables: DIR/<name>.parquet or DIR/<name>/; a path, file:// "
                                   "or any URI Spark reads (s3a://, hdfs://...); tables already in the "
                                   "Spark catalog work too")
    add_path_argument(p)
    p.add_argument("--out", help="write each result as OUT/<plan name>.parquet (inputs of the same file name "
                                 "are told apart by their folders: OUT/a-q1.parquet, OUT/b-q1.parquet)")
    p.add_argument("--show", type=int, default=5, metavar="N", help="rows to print per plan (default 5; 0 for none)")
    p.add_argument("--format", choices=("table", "csv", "json", "parquet"), default="table",
                   help="table (default): each plan's row count, time and first --show rows; csv, json: the "
                        "whole result on stdout (one plan; with --out, OUT/<plan name>.csv|json), the tool's "
                        "lines on stderr; parquet: OUT/<plan name>.parquet (needs --out)")
    add_repeat_argument(p, 1, "each plan")
    from optimizer.cli.args import add_learn_argument

    add_learn_argument(p, reads=False, records="after each plan ran (every subtree counted on Spark as explain "
                                               "--analyze counts it)")
    from optimizer.cli.spark import add_cast_argument, add_spark_args

    add_cast_argument(p)
    add_spark_args(p, ui=True, statistics=False)
