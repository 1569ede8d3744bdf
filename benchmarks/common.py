"""What the benchmarks share: data, plans, Spark set-up, timing, statistics of timings and report files.

Every benchmark accepts an existing SparkSession (``spark=``) and otherwise uses
:func:`optimizer.spark.session.get_spark`; all executions go to the same sink, :func:`collect`
(``DataFrame.toArrow()``: the whole result reaches the driver, as a client would see it).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import platform
import statistics as stats_mod
import sys
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:  # `python benchmarks/x.py` from anywhere
    sys.path.insert(0, str(ROOT))

from workloads.tpch import generate_tpch, table_paths, tpch_queries  # noqa: E402

REPORT_DIR = ROOT / "docs" / "benchmarks"
PRODUCERS = ("datafusion", "duckdb", "isthmus")


# ------------------------------------------------------------------------------------------ data, plans


def tpch_data(scale: float) -> tuple[Path, dict[str, Path]]:
    """The TPC-H data of ``scale`` (generated once, then reused) and ``{table: parquet path}``."""
    data_dir = generate_tpch(scale)
    return data_dir, table_paths(data_dir, include_t=False)


def parse_queries(text: str | None) -> list[int]:
    """``"1,3,5-7"`` -> ``[1, 3, 5, 6, 7]``; ``None`` or ``"all"`` -> 1..22."""
    if not text or text == "all":
        return list(range(1, 23))
    out: list[int] = []
    for part in text.split(","):
        part = part.strip()
        if "-" in part:
            lo, hi = part.split("-")
            out.extend(range(int(lo), int(hi) + 1))
        elif part:
            out.append(int(part))
    return sorted(set(out))


def tpch_plans(tables: Mapping[str, Path], producers: Sequence[str], queries: Sequence[int],
               errors: dict | None = None) -> dict[tuple[str, int], Any]:
    """``{(producer, query): Plan}`` for the TPC-H ``queries`` each producer has a plan of.

    DataFusion and DuckDB produce the plans live over ``tables``; Isthmus' come from the corpus
    (``integration/tpch``; its upper-case table names bind case-insensitively). A producer that fails
    on a query is recorded in ``errors`` (``{(producer, query): message}``) and skipped.
    """
    from optimizer.plan_io import load_plan

    plans: dict[tuple[str, int], Any] = {}
    errors = errors if errors is not None else {}
    texts = tpch_queries()
    if "datafusion" in producers:
        from workloads.producers import datafusion_plan

        for q in queries:
            try:
                plans[("datafusion", q)] = load_plan(datafusion_plan(texts[q], tables))
            except Exception as exc:  # reported, not fatal
                errors[("datafusion", q)] = _one_line(exc)
    if "duckdb" in producers:
        from workloads.producers import DUCKDB_TPCH_EXCLUDED, DUCKDB_TPCH_QUERIES, duckdb_plan

        for q in queries:
            if q not in DUCKDB_TPCH_QUERIES:
                errors[("duckdb", q)] = DUCKDB_TPCH_EXCLUDED.get(q, "not produced")
                continue
            try:
                plans[("duckdb", q)] = load_plan(duckdb_plan(texts[q], tables))
            except Exception as exc:
                errors[("duckdb", q)] = _one_line(exc)
    if "isthmus" in producers:
        from workloads.corpus import corpus_plans

        found = {p.tpch_query: p for p in corpus_plans(producer="isthmus", category="integration/tpch")}
        for q in queries:
            if q not in found:
                errors[("isthmus", q)] = "no Isthmus plan in the corpus"
                continue
            try:
                plans[("isthmus", q)] = load_plan(found[q].path.read_text())
            except Exception as exc:
                errors[("isthmus", q)] = _one_line(exc)
    return plans


def report_parser(doc: str, name: str, *, scale: float = 1.0, reps: int = 3, warmup: bool = True,
                  queries: bool = False, spark: bool = True) -> argparse.ArgumentParser:
    """The arguments of a benchmark that writes a report: ``--scale``, ``--reps``, ``--warmup`` (with
    ``warmup``), ``--queries`` (with ``queries``), ``--out``, ``--name`` (default ``name``), ``--master``
    (with ``spark``) and ``--no-progress``; the caller adds its own. ``doc``'s first line describes it."""
    p = argparse.ArgumentParser(description=doc.split("\n")[0])
    p.add_argument("--scale", type=float, default=scale, help=f"TPC-H scale factor (default {scale:g})")
    if queries:
        p.add_argument("--queries", default="all", help="query numbers, e.g. 1,3,5-7 (default all 22)")
    p.add_argument("--reps", type=int, default=reps, help=f"timed repetitions (median; default {reps})")
    if warmup:
        p.add_argument("--warmup", type=int, default=1, help="untimed warm-up runs (default 1)")
    p.add_argument("--out", default=str(REPORT_DIR), help="report directory (default docs/benchmarks)")
    p.add_argument("--name", default=name, help=f"report file stem (default {name})")
    if spark:
        p.add_argument("--master", default=None, help="Spark master (default: get_spark's local[*])")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    return p


# ------------------------------------------------------------------------------------------ Spark


def get_session(spark: Any = None):
    """``spark`` when given, else the process's session (:func:`optimizer.spark.session.get_spark`)."""
    if spark is not None:
        return spark
    from optimizer.spark.session import get_spark

    return get_spark()


def register_temp_views(spark: Any, tables: Mapping[str, Path]) -> None:
    """Each parquet file as a temporary view named like the table (Spark SQL at default settings)."""
    for name, path in tables.items():
        spark.read.parquet(str(path)).createOrReplaceTempView(name)


CBO_CONF = {
    "spark.sql.cbo.enabled": "true",
    "spark.sql.cbo.joinReorder.enabled": "true",
}


def analyzed_session(spark: Any, tables: Mapping[str, Path], database: str, *,
                     analyze: Iterable[str] | None = None, progress: Callable[[str], None] | None = None):
    """A new session (same SparkContext, own temporary views and current database) whose unqualified
    table names are catalog tables ``database.<name>`` over the parquet files, ANALYZEd ``FOR ALL
    COLUMNS`` (those in ``analyze``; default all). Temporary views of ``spark`` do not shadow them."""
    session = spark.newSession()
    session.sql(f"CREATE DATABASE IF NOT EXISTS `{database}`")
    wanted = set(tables) if analyze is None else set(analyze)
    for name, path in tables.items():
        ident = f"`{database}`.`{name}`"
        session.sql(f"DROP TABLE IF EXISTS {ident}")
        location = str(path).replace("'", "\\'")
        session.sql(f"CREATE TABLE {ident} USING parquet LOCATION '{location}'")
        if name in wanted:
            if progress:
                progress(name)
            session.sql(f"ANALYZE TABLE {ident} COMPUTE STATISTICS FOR ALL COLUMNS")
    session.sql(f"USE `{database}`")
    return session


@contextlib.contextmanager
def conf_set(spark: Any, conf: Mapping[str, str]):
    """Set Spark SQL confs for the duration of a block, then restore the previous values."""
    previous = {key: spark.conf.get(key, None) for key in conf}
    for key, value in conf.items():
        spark.conf.set(key, value)
    try:
        yield
    finally:
        for key, value in previous.items():
            if value is None:
                spark.conf.unset(key)
            else:
                spark.conf.set(key, value)


def collect(df: Any):
    """The sink of every timed execution: the whole result as a pyarrow Table on the driver."""
    return df.toArrow()


# ------------------------------------------------------------------------------------------ timing


def timed(fn: Callable[[], Any]) -> tuple[float, Any]:
    start = time.perf_counter()
    value = fn()
    return time.perf_counter() - start, value


def median(values: Sequence[float]) -> float | None:
    values = [v for v in values if v is not None]
    return stats_mod.median(values) if values else None


def geomean(values: Iterable[float | None]) -> float | None:
    vals = [v for v in values if v is not None and v > 0 and math.isfinite(v)]
    if not vals:
        return None
    return math.exp(sum(math.log(v) for v in vals) / len(vals))


def ratio(a: float | None, b: float | None) -> float | None:
    if a is None or b is None or b <= 0:
        return None
    return a / b


def _one_line(exc: BaseException) -> str:
    text = " ".join(str(exc).split())
    return f"{type(exc).__name__}: {text[:300]}"


one_line = _one_line


# ------------------------------------------------------------------------------------------ reports


def machine() -> dict[str, Any]:
    import datetime
    import os
    import subprocess

    info: dict[str, Any] = {"date": datetime.date.today().isoformat(), "python": platform.python_version(),
                            "cpus": os.cpu_count(), "platform": platform.platform()}
    try:  # the commit measured (a benchmark states the date and the commit)
        info["commit"] = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                                        cwd=Path(__file__).resolve().parent, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        pass
    try:  # other work on the machine distorts timings: say how busy it was when the report was made
        info["load_average_1_5_15min"] = [round(x, 1) for x in os.getloadavg()]
    except OSError:
        pass
    try:
        import pyspark

        info["pyspark"] = pyspark.__version__
    except ImportError:
        pass
    return info


def how_timed(config: Mapping[str, Any]) -> str:
    """The sentence a Spark timing report states its set-up in, from its ``config`` (``machine()``,
    ``reps``, ``warmup``, ``sink``; ``remote`` for Spark Connect)."""
    m = config["machine"]
    connect = " over Spark Connect" if config.get("remote") else ""
    return (f"{m.get('date', '?')}, commit {m.get('commit', '?')}: Spark {m.get('pyspark', '?')}{connect}, "
            f"{m.get('cpus')} cores; median of {config['reps']} runs after {config['warmup']} warm-up, "
            f"interleaved; sink `{config['sink']}`.")


def report_head(title: str, config: Mapping[str, Any], about: str) -> list[str]:
    """The opening lines of a Spark timing report's markdown: its title, then a paragraph of its set-up
    (:func:`how_timed`) and ``about``, what its figures are."""
    return [f"# {title}", "", f"{how_timed(config)} {about}", ""]


def write_json(path: Path, data: Any) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, indent=1, default=str) + "\n")
    return path


def write_report(out_dir: str | Path, name: str, report: dict, markdown: Callable[[dict], str]) -> Path:
    """``name.json`` (the report) and ``name.md`` (``markdown(report)``) in ``out_dir``, which is returned."""
    out = Path(out_dir)
    write_json(out / f"{name}.json", report)
    (out / f"{name}.md").write_text(markdown(report))
    return out


def fmt(value: float | None, digits: int = 3) -> str:
    if value is None:
        return "–"
    if value == 0:
        return "0"
    return f"{value:.{digits}g}" if abs(value) < 1000 else f"{value:,.0f}"


def fmt_ms(seconds: float | None) -> str:
    return "–" if seconds is None else f"{seconds * 1000:.1f}"


def markdown_table(headers: Sequence[str], rows: Iterable[Sequence[Any]]) -> str:
    lines = ["| " + " | ".join(headers) + " |", "|" + "|".join(" --- " for _ in headers) + "|"]
    for row in rows:
        lines.append("| " + " | ".join(str(c) for c in row) + " |")
    return "\n".join(lines)


def progress_bar(total: int, desc: str, enabled: bool = True):
    """A tqdm bar (a no-op object when tqdm is missing or ``enabled`` is false)."""
    if enabled:
        try:
            from tqdm import tqdm

            return tqdm(total=total, desc=desc, unit="run", dynamic_ncols=True, file=sys.stderr)
        except ImportError:
            pass

    class _Null:
        def update(self, n: int = 1) -> None:
            pass

        def set_postfix_str(self, s: str) -> None:
            pass

        def write(self, s: str) -> None:
            print(s, file=sys.stderr)

        def close(self) -> None:
            pass

    return _Null()
