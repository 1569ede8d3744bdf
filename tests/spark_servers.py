"""Spark processes the tests start on 127.0.0.1 and stop: a Spark Connect server (``connect_server``),
and the process helpers the standalone cluster test shares (free ports, stopping a process group,
finding processes left behind).

Each server is a JVM launched from the installed pyspark (``bin/spark-class`` or ``bin/spark-submit``)
in its own process group, logging to a file that is quoted when it does not come up; stopping sends
SIGTERM to the group (SIGKILL if it lingers), so no JVM outlives the test session.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

from optimizer.spark.session import SESSION_DEFAULTS, java_executable, spark_home

START_TIMEOUT = 180.0


def free_ports(n: int) -> list[int]:
    socks = [socket.socket() for _ in range(n)]
    try:
        for s in socks:
            s.bind(("127.0.0.1", 0))
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


def spark_env(tmp: Path) -> dict[str, str]:
    """The environment of a Spark process started by a test: no PySpark/Spark variables of the caller's."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYSPARK_", "SPARK_"))}
    env.update(SPARK_LOCAL_IP="127.0.0.1", SPARK_LOG_DIR=str(tmp / "logs"), SPARK_PID_DIR=str(tmp),
               SPARK_DAEMON_MEMORY="256m", SPARK_HOME=spark_home())
    return env


def processes_mentioning(text: str) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if text in cmdline:
            found.append(int(entry.name))
    return found


def stop(proc: subprocess.Popen) -> None:
    """SIGTERM to the process group (the JVM and anything it launched), SIGKILL if it lingers."""
    for sig, wait in ((signal.SIGTERM, 30), (signal.SIGKILL, 10)):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            return
        try:
            proc.wait(timeout=wait)
            return
        except subprocess.TimeoutExpired:
            continue


def _accepts(port: int) -> bool:
    with socket.socket() as s:
        s.settimeout(1)
        return s.connect_ex(("127.0.0.1", port)) == 0


@contextlib.contextmanager
def connect_server(memory: str | None = None) -> Iterator[str]:
    """A Spark Connect server (``local[2]``, 4 shuffle partitions, the SQL settings the tool gives a session
    it starts: UTC, no UI...) bound to 127.0.0.1 on a free port;
    yields its ``sc://127.0.0.1:PORT`` URL and stops it, with every process it started, on exit."""
    if java_executable() is None:
        raise RuntimeError("a Spark Connect server needs java (make install puts Java 17)")
    # The classic test session's driver memory: the whole Spark suite runs in this one server, and at 2g
    # its heap ran out in TPC-DS aggregates after 40 minutes of other tests (a fresh 2g server passes them).
    memory = memory or os.environ.get("SUBSTRAIT_OPT_DRIVER_MEMORY", "6g")
    tmp = Path(tempfile.mkdtemp(prefix="substrait-opt-connect-"))
    port, ui = free_ports(2)
    args = [
        os.path.join(spark_home(), "bin", "spark-submit"),
        "--class", "org.apache.spark.sql.connect.service.SparkConnectServer",
        "--master", "local[2]", "--driver-memory", memory, "--name", "substrait-optimizer-connect-test",
        "--conf", "spark.connect.grpc.binding.address=127.0.0.1",
        "--conf", f"spark.connect.grpc.binding.port={port}",
        "--conf", f"spark.ui.port={ui}",
        *[arg for key, value in SESSION_DEFAULTS.items() if key != "spark.sql.shuffle.partitions"
          for arg in ("--conf", f"{key}={value}")],
        "--conf", "spark.sql.shuffle.partitions=4",
        "--conf", f"spark.sql.warehouse.dir={tmp / 'warehouse'}",
        "--conf", f"spark.driver.extraJavaOptions=-Djava.io.tmpdir={tmp}",
        "spark-internal",
    ]
    log_path = tmp / "connect-server.log"
    env = spark_env(tmp)
    env.pop("SPARK_DAEMON_MEMORY")  # (the launcher would size the driver by it)
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(args, env=env, stdout=log, stderr=subprocess.STDOUT,
                                start_new_session=True, cwd=tmp)
    marker = f"spark.connect.grpc.binding.port={port}"
    try:
        deadline = time.monotonic() + START_TIMEOUT
        while not _accepts(port):
            if proc.poll() is not None or time.monotonic() > deadline:
                tail = log_path.read_text(errors="replace")[-2000:]
                raise RuntimeError(f"the Spark Connect server did not start on port {port}: {tail}")
            time.sleep(0.5)
        yield f"sc://127.0.0.1:{port}"
    finally:
        stop(proc)
        for pid in processes_mentioning(marker):  # not expected: the process group was stopped above
            os.kill(pid, signal.SIGKILL)
        shutil.rmtree(tmp, ignore_errors=True)  # its log, warehouse and Spark's scratch files
