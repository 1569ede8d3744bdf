"""A class-data-sharing archive of Spark's JVM, for the test suite's many short-lived JVMs.

Usage (``make test`` runs it with the suite's ``JDK_JAVA_OPTIONS``, before pytest)::

    python -m testing.jvm_archive [DIR]   # prints -XX:SharedArchiveFile=DIR/spark-....jsa ..., or nothing

The suite starts a Spark JVM for every CLI command it runs as a user would (``run``, ``diff``, ``optimize``
with Spark statistics, the tutorial, the install test...), and most of such a JVM's start is loading and
verifying the same 14,000 classes of Spark, Scala and Hadoop. Java's class-data sharing keeps them in a
memory-mapped archive: a ``run`` of two tiny plans took 16 s without and 10 s with it (2026-12-01,
alternating, 3 each). The archive is made once (``-XX:ArchiveClassesAtExit``) by one JVM running a small
query of each kind the suite runs, named after the pyspark and Java versions (a newer pyspark or Java
gets its own), and kept under ``DIR`` (default ``.cache/jvm``). It changes no answer: it is where
the classes are read from. A JVM whose class path differs (the Connect server, a standalone
cluster's master and worker) or a Java that cannot read it loads its classes as before, silently
(``-Xlog:cds*=off``: without it, such a JVM would print a warning on stdout).

Nothing is printed when no archive can be made (no Java, one older than 13): the suite then runs without.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

#: What the archiving JVM runs: a session as the tools start one, and a query of each kind the tests run
#: (Parquet, a join, an aggregate, a sort, a window, SQL text, Arrow collection), so that their classes
#: are in the archive.
WORKLOAD = """
import sys
import pyarrow as pa, pyarrow.parquet as pq
from optimizer.spark.session import get_spark

folder, archive = sys.argv[1:3]
pq.write_table(pa.table({"k": [1, 2, 3], "v": ["a", "b", None], "d": [1.5, 2.5, 3.5]}), f"{folder}/t.parquet")
# The driver's JVM only (spark-submit's launcher JVM, which runs first, has other classes).
spark = get_spark(master="local[2]", conf={"spark.sql.shuffle.partitions": "4",
                                          "spark.driver.extraJavaOptions": f"-XX:ArchiveClassesAtExit={archive}"})
spark.read.parquet(f"{folder}/t.parquet").createOrReplaceTempView("t")
spark.sql("SELECT a.k, count(*) AS n, sum(b.d) AS s, row_number() OVER (ORDER BY a.k) AS r "
          "FROM t a JOIN t b ON a.k = b.k WHERE a.v IS NOT NULL GROUP BY a.k ORDER BY n DESC").toArrow()
spark.sql("SELECT DISTINCT CAST(d AS DECIMAL(10, 2)) AS c, upper(v) FROM t LIMIT 2").toArrow()
spark.stop()
"""


def java_version() -> str | None:
    """``java -version``'s first line (None without a Java that runs)."""
    java = Path(os.environ["JAVA_HOME"], "bin", "java") if os.environ.get("JAVA_HOME") else "java"
    try:
        done = subprocess.run([str(java), "-version"], capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired):
        return None
    lines = done.stderr.strip().splitlines()
    # (JDK_JAVA_OPTIONS makes java say so first: "NOTE: Picked up ...")
    lines = [line for line in lines if not line.startswith("NOTE: Picked up")]
    return lines[0] if done.returncode == 0 and lines else None


def archive_path(folder: Path, java: str) -> Path:
    """The archive for this pyspark and this Java (and the JVM options it is made with) in ``folder``."""
    import pyspark

    key = hashlib.sha256(f"{pyspark.__version__}\n{java}\n{os.environ.get('JDK_JAVA_OPTIONS', '')}".encode())
    return folder / f"spark-{pyspark.__version__}-{key.hexdigest()[:12]}.jsa"


def make_archive(path: Path) -> bool:
    """Run :data:`WORKLOAD` in a JVM that writes its classes to ``path`` as it exits; whether it did."""
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_suffix(f".{os.getpid()}.part")
    with tempfile.TemporaryDirectory(prefix="substrait-opt-jsa-") as folder:
        try:
            done = subprocess.run([sys.executable, "-c", WORKLOAD, folder, str(partial)], capture_output=True,
                                  text=True, timeout=600)
            # The driver's JVM outlives the Python that started it by the time it takes to write the archive.
            made = done.returncode == 0 and _gone(str(partial), deadline=time.monotonic() + 120)
        except subprocess.TimeoutExpired:
            made = False
    if not made or not partial.is_file():
        partial.unlink(missing_ok=True)
        return False
    partial.replace(path)  # whole or not at all: a run beside this one reads either no file or this one
    return True


def _gone(marker: str, deadline: float) -> bool:
    """Whether every process whose command line holds ``marker`` ended before ``deadline``."""
    while time.monotonic() < deadline:
        if not any(marker.encode() in _command_line(pid) for pid in os.listdir("/proc") if pid.isdigit()):
            return True
        time.sleep(0.2)
    return False


def _command_line(pid: str) -> bytes:
    try:
        return Path("/proc", pid, "cmdline").read_bytes()
    except OSError:  # ended meanwhile, or not ours to read
        return b""


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    folder = Path(args[0]) if args else Path(__file__).resolve().parents[1] / ".cache" / "jvm"
    java = java_version()
    if java is None or not Path("/proc").is_dir():  # (how the archiving JVM is seen to end: Linux's /proc)
        return 0
    path = archive_path(folder, java)
    if path.is_file() or make_archive(path):
        # A JVM that cannot use it (another class path: spark-submit's launcher, a cluster's worker) says
        # so on stdout, where the tests read what the tools print: not said.
        print(f"-XX:SharedArchiveFile={path} -Xlog:cds*=off")
    return 0


if __name__ == "__main__":
    sys.exit(main())
