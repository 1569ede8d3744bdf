"""Sessions and packaging: the user's Spark settings win over the tool's defaults, the Spark options of
the CLI, a missing ``java`` is one line, and the commands that need no Spark never start a JVM.

Each test runs the CLI (or ``get_spark``) in a subprocess with its own environment: the suite's own
session is local and already running. Only :func:`test_user_settings_win_over_the_defaults` starts a
JVM (about 10 s); the others need none.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from workloads.corpus import corpus_root

REPO = Path(__file__).resolve().parent.parent
Q3 = corpus_root() / "substrait_consumer/snapshots/producer/integration/tpch/q03-isthmus_plan.json"


def _env(**extra: str | None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYSPARK_", "SPARK_"))}
    env["PYTHONPATH"] = str(REPO)
    for key, value in extra.items():
        if value is None:
            env.pop(key, None)
        else:
            env[key] = value
    return env


def _no_java_env(tmp_path: Path) -> dict[str, str]:
    """A PATH with this Python only, and a JAVA_HOME without java."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    (bin_dir / "python").symlink_to(sys.executable)
    (tmp_path / "jdk").mkdir(exist_ok=True)
    return _env(PATH=str(bin_dir), JAVA_HOME=str(tmp_path / "jdk"))


def _cli(args: list[str], env: dict[str, str], timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "optimizer", *args], env=env, capture_output=True, text=True,
                          timeout=timeout, cwd=REPO)


@pytest.mark.spark
def test_user_settings_win_over_the_defaults(tmp_path):
    """spark-defaults.conf and PYSPARK_SUBMIT_ARGS beat the tool's defaults; the caller's conf beats
    both; defaults fill what nobody set; without --master the session is local."""
    conf_dir = tmp_path / "conf"
    conf_dir.mkdir()
    (conf_dir / "spark-defaults.conf").write_text(
        "# the user's settings\nspark.sql.shuffle.partitions 3\nspark.driver.memory=1g\n"
        "spark.app.name  from-defaults\nspark.sql.ansi.enabled true\n")
    script = textwrap.dedent("""
        from optimizer.spark.session import get_spark
        s = get_spark(conf={"spark.sql.ansi.enabled": "false"})
        c = s.sparkContext.getConf()
        print(s.conf.get("spark.sql.shuffle.partitions"), c.get("spark.driver.memory"), c.get("spark.app.name"),
              s.conf.get("spark.sql.adaptive.enabled"), s.conf.get("spark.sql.ansi.enabled"),
              s.conf.get("spark.sql.session.timeZone"), s.sparkContext.master, c.get("spark.ui.enabled"))
        s.stop()
    """)
    env = _env(SPARK_CONF_DIR=str(conf_dir), TZ="America/New_York",
               PYSPARK_SUBMIT_ARGS="--conf spark.sql.adaptive.enabled=false pyspark-shell")
    done = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split() == ["3", "1g", "from-defaults", "false", "false", "UTC", "local[*]", "false"]


@pytest.mark.spark
def test_spark_submit_settings_win(tmp_path):
    """Under spark-submit the JVM runs already: its --conf and --driver-memory stay, the session defaults
    fill only what it did not set."""
    from optimizer.spark.session import spark_home

    script = tmp_path / "job.py"
    script.write_text(textwrap.dedent("""
        from optimizer.spark.session import get_spark
        s = get_spark()
        c = s.sparkContext.getConf()
        print(s.conf.get("spark.sql.shuffle.partitions"), c.get("spark.driver.memory"),
              s.conf.get("spark.sql.session.timeZone"), s.sparkContext.master)
        s.stop()
    """))
    submit = os.path.join(spark_home(), "bin", "spark-submit")
    done = subprocess.run([submit, "--master", "local[1]", "--driver-memory", "1g", "--conf",
                           "spark.sql.shuffle.partitions=5", str(script)],
                          env=_env(PYSPARK_PYTHON=sys.executable), capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split() == ["5", "1g", "UTC", "local[1]"]


def test_java_missing_is_one_line_exit_3(tmp_path, tpch_dir):
    # Tables that are there: a missing one is refused before Spark (and Java) is needed.
    done = _cli(["run", str(Q3), "--tables", str(tpch_dir)], _no_java_env(tmp_path))
    assert done.returncode == 3, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "Spark needs Java" in lines[0] and "has no bin/java" in lines[0], done.stderr


def test_commands_without_spark_start_no_jvm(tmp_path):
    """optimize, convert and explain with no java at all: they succeed, and pyspark is never imported."""
    script = textwrap.dedent(f"""
        import sys
        from optimizer.cli import main
        codes = [main(["optimize", {str(Q3)!r}, "-o", {str(tmp_path / "o.json")!r}]),
                 main(["convert", {str(Q3)!r}, "-o", {str(tmp_path / "c.binpb")!r}]),
                 main(["explain", {str(Q3)!r}, "-o", {str(tmp_path / "e.txt")!r}]),
                 main(["explain", {str(tmp_path / "o.json")!r}, "--stats", {str(tmp_path / "s.json")!r},
                       "-o", {str(tmp_path / "e2.txt")!r}])]
        print(codes, any(m == "pyspark" or m.startswith("pyspark.") for m in sys.modules))
    """)
    (tmp_path / "s.json").write_text('{"version": 1, "tables": {"lineitem": {"row_count": 60175}}}')
    env = _no_java_env(tmp_path)
    done = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=120,
                          cwd=REPO)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[0, 0, 0, 0] False", (done.stdout, done.stderr)
    assert "LINEITEM" in (tmp_path / "e.txt").read_text()


def test_spark_options_errors(tmp_path):
    """A malformed --conf or --remote port and --master with --remote are usage errors (2); a server that
    does not answer is one line, exit 3."""
    env = _env()
    bad = _cli(["run", str(Q3), "--conf", "spark.sql.shuffle.partitions"], env)
    assert bad.returncode == 2 and "expected KEY=VALUE" in bad.stderr and len(bad.stderr.splitlines()) == 1
    both = _cli(["run", str(Q3), "--master", "local[1]", "--remote", "sc://127.0.0.1:1"], env)
    assert both.returncode == 2 and "exclude each other" in both.stderr
    port = _cli(["run", str(Q3), "--remote", "sc://127.0.0.1:99999"], env, timeout=60)
    assert port.returncode == 2 and "not a TCP port" in port.stderr, port.stderr
    # Nothing listens on port 1: one line at once, not the Connect client's minutes of retries.
    remote = _cli(["run", str(Q3), "--remote", "sc://127.0.0.1:1", "--tables", str(tmp_path)], env, timeout=60)
    assert remote.returncode == 3, remote.stderr
    lines = remote.stderr.strip().splitlines()
    assert len(lines) == 1 and "Spark Connect server sc://127.0.0.1:1 is not reachable" in lines[0], remote.stderr


def test_version_and_python_m(tmp_path):
    from importlib.metadata import version

    done = _cli(["--version"], _env())
    assert done.returncode == 0 and done.stdout.strip() == f"substrait-opt {version('substrait-optimizer')}"
    out = tmp_path / "q3.txt"
    done = _cli(["explain", str(Q3), "-o", str(out)], _env())
    assert done.returncode == 0 and "LINEITEM" in out.read_text()


def test_packaging_metadata():
    """The license is an SPDX string with its file, and every declared runtime dependency is imported."""
    import tomllib

    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    assert project["license"] == "Apache-2.0" and project["license-files"] == ["LICENSE"]
    assert "Apache License" in (REPO / "LICENSE").read_text()[:200]
    declared = {dep.split("[")[0].split(">")[0].split("=")[0].split("<")[0].strip() for dep in project["dependencies"]}
    assert declared == {"substrait", "protobuf", "networkx", "pyspark", "pyarrow", "numpy", "py4j",
                        "sqlglot", "substrait-extensions", "pyyaml"}
