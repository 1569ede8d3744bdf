"""A standalone Spark cluster on 127.0.0.1 (a master and one worker started from the installed pyspark's
``bin/spark-class``), and the CLI run against it with ``--master spark://127.0.0.1:PORT`` and tables by
``file://`` URI: ``run`` of DataFusion's TPC-H Q3 and Q5 gives DuckDB's answers and ``diff`` of Q5 finds no
difference.

The cluster is small (the worker has 1 core and 768 MiB; each executor 512 MiB) and is stopped by the
fixture's finalizer whatever happens, with every process it started (master, worker, executors: one
process group each); the test then checks that none of them is left.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from spark_servers import free_ports, processes_mentioning, spark_env, stop

from optimizer.difftest.results import compare_tables
from optimizer.spark.session import java_executable, spark_home
from workloads.tpch import tpch_query

pytestmark = pytest.mark.spark

REPO = Path(__file__).resolve().parent.parent
START_TIMEOUT = 180.0


def _master_state(ui_port: int) -> dict:
    """The master's JSON status page (``aliveworkers``, ``completedapps``...); ``{}`` while it is not up."""
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{ui_port}/json/", timeout=2) as response:
            return json.load(response)
    except (OSError, ValueError):
        return {}


@pytest.fixture(scope="module")
def standalone_cluster(tmp_path_factory):
    """``(spark://127.0.0.1:PORT, master UI port)`` of a master with one registered worker; stopped at the end."""
    if java_executable() is None:
        pytest.fail("a standalone cluster needs java (see README: make install puts Java 17)")
    tmp = tmp_path_factory.mktemp("cluster")
    master_port, master_ui, worker_port, worker_ui = free_ports(4)
    spark_class = os.path.join(spark_home(), "bin", "spark-class")
    env = spark_env(tmp)
    procs: list[subprocess.Popen] = []
    marker = f"127.0.0.1:{master_port}"
    started = time.perf_counter()

    def launch(name: str, args: list[str]) -> None:
        log = open(tmp / f"{name}.log", "wb")  # closed with the process
        procs.append(subprocess.Popen([spark_class, *args], env=env, stdout=log, stderr=subprocess.STDOUT,
                                      start_new_session=True, cwd=tmp))
        log.close()

    try:
        launch("master", ["org.apache.spark.deploy.master.Master", "--host", "127.0.0.1",
                          "--port", str(master_port), "--webui-port", str(master_ui)])
        launch("worker", ["org.apache.spark.deploy.worker.Worker", "--host", "127.0.0.1",
                          "--port", str(worker_port), "--webui-port", str(worker_ui), "--cores", "1",
                          "--memory", "768m", "--work-dir", str(tmp / "work"), f"spark://{marker}"])
        deadline = time.monotonic() + START_TIMEOUT
        while int(_master_state(master_ui).get("aliveworkers", 0)) < 1:
            dead = [p for p in procs if p.poll() is not None]
            if dead or time.monotonic() > deadline:
                logs = " | ".join((tmp / f"{n}.log").read_text(errors="replace")[-500:] for n in ("master", "worker"))
                pytest.fail(f"standalone cluster did not start: {logs}")
            time.sleep(0.5)
        print(f"standalone cluster up in {time.perf_counter() - started:.1f} s", file=sys.stderr)
        yield f"spark://{marker}", master_ui
    finally:
        for proc in reversed(procs):
            stop(proc)
        left = processes_mentioning(marker) + processes_mentioning(f"127.0.0.1:{worker_port}")
        for pid in left:  # not expected: each process group was stopped above
            os.kill(pid, signal.SIGKILL)
        assert not left, f"processes of the cluster left running: {left}"


def _cli(args: list[str], tmp: Path) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYSPARK_", "SPARK_"))}
    env.update(PYTHONPATH=str(REPO), SPARK_LOCAL_IP="127.0.0.1", SUBSTRAIT_OPT_DRIVER_MEMORY="1g")
    return subprocess.run([sys.executable, "-m", "optimizer", *args, "--conf", "spark.executor.memory=512m",
                           "--conf", "spark.cores.max=1", "--conf", "spark.sql.shuffle.partitions=2"], env=env, capture_output=True, text=True,
                          timeout=600, cwd=tmp)


def test_run_and_diff_on_a_standalone_cluster(standalone_cluster, tpch_dir, datafusion_tpch_plans, duckdb_oracle,
                                              tmp_path):
    plans = []
    for q in (3, 5):
        plans.append(tmp_path / f"q{q}.binpb")
        plans[-1].write_bytes(datafusion_tpch_plans[q])
    tables = Path(tpch_dir).resolve().as_uri()
    master, master_ui = standalone_cluster

    started = time.perf_counter()
    run = _cli(["run", *map(str, plans), "--master", master, "--tables", tables,
                "--out", str(tmp_path / "out"), "--show", "0", "--ui"], tmp_path)
    assert run.returncode == 0, run.stderr[-3000:]
    assert "Spark UI: http://" in run.stderr
    # It ran on the cluster: the master lists the application as completed once the driver's JVM, which
    # outlives the CLI's Python by its shutdown, has stopped it.
    deadline = time.monotonic() + 30
    while not (apps := _master_state(master_ui).get("completedapps", [])) and time.monotonic() < deadline:
        time.sleep(0.5)
    assert [app["name"] for app in apps] == ["substrait-optimizer"]
    for q in (3, 5):
        got = pq.read_table(tmp_path / "out" / f"q{q}.parquet")
        assert compare_tables(got, duckdb_oracle(tpch_query(q))).equal, q
    ran = time.perf_counter()

    # diff on Q5 (the six-way join): original and optimized both run on the cluster.
    diff = _cli(["diff", str(plans[1]), "--master", master, "--tables", tables,
                 "--out", str(tmp_path / "diff")], tmp_path)
    assert diff.returncode == 0 and "1 passed, 0 failed" in diff.stdout, diff.stdout + diff.stderr[-3000:]
    print(f"run {ran - started:.1f} s ({' '.join(run.stdout.split())}), diff {time.perf_counter() - ran:.1f} s "
          f"({' '.join(diff.stdout.split())})", file=sys.stderr)
