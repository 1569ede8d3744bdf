"""Spark stays off the user's terminal (issue 42, item 6), checked with real subprocesses of the CLI.

* A plan refused by a check that needs no Spark (a file outside ``--tables``, a missing file or table)
  is refused before Spark starts: exactly one line on stderr, and no JVM (no Spark log is written).
* A run that starts Spark writes nothing on stderr but the tool's own lines: the JVM's output (its
  ``WARNING: Using incubator modules``, log4j's lines) goes to ``spark-<pid>.log`` under
  ``$XDG_CACHE_HOME/substrait-optimizer/logs``.
* A table Spark cannot read is one line naming it, no Java stack trace.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

_NULLABLE = {"nullability": "NULLABILITY_NULLABLE"}


def _plan(read: dict, names: list[str]) -> str:
    return json.dumps({"relations": [{"root": {"input": {"read": read}, "names": names}}]})


def _region_plan() -> str:
    schema = {"names": ["r_regionkey", "r_name"], "struct": {"types": [{"i64": _NULLABLE}, {"string": _NULLABLE}]}}
    return _plan({"baseSchema": schema, "namedTable": {"names": ["region"]}}, ["k", "n"])


def _file_plan(location: str) -> str:
    schema = {"names": ["a"], "struct": {"types": [{"string": _NULLABLE}]}}
    return _plan({"baseSchema": schema, "localFiles": {"items": [{"uriFile": location, "parquet": {}}]}}, ["a"])


@pytest.fixture
def workdir(tmp_path) -> Path:
    """``tables/region.parquet`` (2 rows), ``bad/region.parquet`` (not parquet), ``secret.parquet`` outside
    both, and the plans."""
    (tmp_path / "tables").mkdir()
    pq.write_table(pa.table({"r_regionkey": pa.array([0, 1], pa.int32()), "r_name": ["AFRICA", "AMERICA"]}),
                   tmp_path / "tables" / "region.parquet")
    (tmp_path / "bad").mkdir()
    (tmp_path / "bad" / "region.parquet").write_bytes(b"not a parquet file\n")
    pq.write_table(pa.table({"a": ["secret"]}), tmp_path / "secret.parquet")
    (tmp_path / "region.json").write_text(_region_plan())
    (tmp_path / "outside.json").write_text(_file_plan(str(tmp_path / "tables" / ".." / "secret.parquet")))
    (tmp_path / "missing.json").write_text(_file_plan(str(tmp_path / "tables" / "gone.parquet")))
    return tmp_path


def _cli(workdir: Path, *args: str, **environ: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "XDG_CACHE_HOME": str(workdir / "cache"), **environ}
    env.pop("SUBSTRAIT_OPT_SPARK_LOG", None)
    return subprocess.run([sys.executable, "-m", "optimizer", *args], capture_output=True, text=True, timeout=300,
                          env=env, cwd=workdir)


def _spark_logs(workdir: Path) -> list[Path]:
    return sorted((workdir / "cache" / "substrait-optimizer" / "logs").glob("spark-*.log"))


@pytest.mark.parametrize("command", [["run"], ["explain", "--analyze"], ["diff"]])
@pytest.mark.parametrize("plan,expected", [
    ("outside.json", "is outside the table roots"),
    ("missing.json", "no such file"),
])
def test_refused_before_spark_starts(workdir, command, plan, expected):
    proc = _cli(workdir, *command, str(workdir / plan), "--tables", str(workdir / "tables"))
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.splitlines()
    assert len(lines) == 1, proc.stderr
    assert lines[0].startswith("substrait-opt: error: ") and expected in lines[0], lines[0]
    assert "local_files.items[0].uri_file" in lines[0]
    assert not _spark_logs(workdir), "Spark started"


def test_missing_table_refused_before_spark_starts(workdir):
    """Spark's catalog of a session the tool starts is empty: a table not under --tables is nowhere."""
    (workdir / "empty").mkdir()
    proc = _cli(workdir, "run", str(workdir / "region.json"), "--tables", str(workdir / "empty"))
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.splitlines() == [
        f"substrait-opt: error: {workdir / 'region.json'}: relations[0].root.input.read.named_table: table 'region' "
        f"not found (looked in {workdir / 'empty'}, the Spark catalog)"]
    assert "0 ok, 1 failed" in proc.stdout
    assert not _spark_logs(workdir), "Spark started"


@pytest.mark.spark
def test_a_run_that_starts_spark_is_quiet(workdir):
    proc = _cli(workdir, "run", str(workdir / "region.json"), "--tables", str(workdir / "tables"))
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr == ""
    assert "region: 2 rows" in proc.stdout and "AMERICA" in proc.stdout and "1 ok, 0 failed" in proc.stdout
    logs = _spark_logs(workdir)
    assert len(logs) == 1
    assert "jdk.incubator.vector" in logs[0].read_text()  # the JVM's own warning went to the log


@pytest.mark.spark
def test_a_spark_read_failure_is_one_line(workdir):
    proc = _cli(workdir, "run", str(workdir / "region.json"), "--tables", str(workdir / "bad"))
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.splitlines()
    assert len(lines) == 1, proc.stderr
    assert f"cannot read {workdir / 'bad' / 'region.parquet'}" in lines[0]
    assert "relations[0].root.input.read.named_table" in lines[0]
    assert "\tat " not in proc.stderr and "Traceback" not in proc.stderr


def test_a_jvm_that_does_not_start_is_one_line(workdir):
    """The JVM's own complaint is in the log; the user gets one line naming it and where the log is. The
    launcher's note on options from the environment, which it writes first, is not the complaint."""
    proc = _cli(workdir, "run", str(workdir / "region.json"), "--tables", str(workdir / "tables"),
                "--conf", "spark.driver.memory=lots", JAVA_TOOL_OPTIONS="-Xss2m")
    assert proc.returncode == 3, proc.stderr
    lines = proc.stderr.splitlines()
    assert len(lines) == 1, proc.stderr
    assert lines[0].startswith("substrait-opt: error: Spark's JVM did not start: Invalid maximum heap size: -Xmxlots")
    (log,) = _spark_logs(workdir)
    assert f"(its output: {log})" in lines[0]
    assert "Invalid maximum heap size" in log.read_text()
