"""The process's SparkSession: the one already running, or one this tool starts.

:func:`get_spark` returns the active session when there is one, untouched. Otherwise it starts one:

* ``remote="sc://host:port"``: a Spark Connect client session (``SparkSession.builder.remote``), with
  the caller's ``conf`` and nothing else (the server's settings belong to whoever runs it). The
  server's port is tried first: the Connect client retries an unreachable server for minutes, a
  closed port is one error at once.
* otherwise a classic session: ``master`` only when given (else whatever the user's Spark settings
  say, ``local[*]`` when they say nothing), the caller's ``conf``, and the tool's defaults
  (:data:`LAUNCH_DEFAULTS`, :data:`SESSION_DEFAULTS`: quiet, no UI, UTC, a small machine's memory and
  shuffle partitions, a warehouse under ``$TMPDIR``) for the keys the user set nowhere. The user's
  settings are ``spark-defaults.conf`` (``$SPARK_CONF_DIR``, else ``$SPARK_HOME/conf``, ``SPARK_HOME``
  defaulting to the installed pyspark's folder), ``PYSPARK_SUBMIT_ARGS``, and, when the process was
  started by ``spark-submit``, everything that ``spark-submit`` passed: the JVM is already running then,
  so no launch-time default is applied and the session defaults are applied only to keys the running
  SparkContext's configuration does not have.

Starting a classic session needs Java: ``$JAVA_HOME/bin/java`` when ``JAVA_HOME`` is set, else ``java``
on ``PATH`` (the rule of Spark's own launcher). Without it :func:`get_spark` raises an
:class:`~optimizer.errors.ExecutionError` saying so, instead of PySpark's traceback.

The JVM of a classic session this module starts writes its output (its own warnings such as
``WARNING: Using incubator modules``, Spark's log, Java stack traces) to a log file, not the user's
terminal: :func:`spark_log_target` (``spark-<pid>.log`` under ``$XDG_CACHE_HOME/substrait-optimizer/logs``
by default). Its log4j configuration is :data:`LOG4J_CONFIG` (warnings and errors), unless the user
has their own (``log4j2.properties`` in Spark's conf folder, or a ``log4j`` option in
``spark.driver.extraJavaOptions``). A session already running, or started by ``spark-submit``, is
left as it is.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import socket
import sys
import time
from collections.abc import Mapping
from pathlib import Path
from urllib.parse import urlsplit

from optimizer.errors import ExecutionError, PlanError, UnsupportedError

# Read when the JVM starts (the SparkContext's configuration).
LAUNCH_DEFAULTS = {
    "spark.app.name": "substrait-optimizer",
    "spark.ui.enabled": "false",
    "spark.ui.showConsoleProgress": "false",
    "spark.driver.memory": os.environ.get("SUBSTRAIT_OPT_DRIVER_MEMORY", "6g"),
    "spark.sql.warehouse.dir": os.path.join(os.environ.get("TMPDIR", "/tmp"), "substrait-opt-warehouse"),
}

# SQL settings of the session.
SESSION_DEFAULTS = {
    "spark.sql.session.timeZone": "UTC",
    "spark.sql.execution.arrow.pyspark.enabled": "true",
    "spark.sql.shuffle.partitions": os.environ.get("SUBSTRAIT_OPT_SHUFFLE_PARTITIONS", "8"),
    "spark.sql.adaptive.enabled": "true",
    # PySpark 4 records the Python call site of every Column/DataFrame call for error messages: six
    # JVM round trips per call, over half of the time to build a DataFrame from a plan.
    "spark.python.sql.dataFrameDebugging.enabled": "false",
}

# The log4j configuration of the sessions the tool starts (package data).
LOG4J_CONFIG = Path(__file__).resolve().parent.parent / "data" / "spark-log4j2.properties"
#: Log files of earlier processes kept in the log folder (the oldest beyond these are deleted).
LOGS_KEPT = 20
_JAVA_OPTIONS = "spark.driver.extraJavaOptions"

# ``spark-submit`` options that are settings (as PYSPARK_SUBMIT_ARGS may carry them).
_SUBMIT_OPTIONS = {
    "--master": "spark.master",
    "--name": "spark.app.name",
    "--driver-memory": "spark.driver.memory",
    "--driver-cores": "spark.driver.cores",
    "--executor-memory": "spark.executor.memory",
    "--executor-cores": "spark.executor.cores",
    "--num-executors": "spark.executor.instances",
}


def spark_home() -> str:
    """``$SPARK_HOME``, else the installed pyspark's folder (where pip puts Spark's ``bin``/``jars``)."""
    home = os.environ.get("SPARK_HOME")
    if home:
        return home
    import pyspark

    return os.path.dirname(os.path.abspath(pyspark.__file__))


def _read_properties(path: str) -> dict[str, str]:
    """A Java properties file as Spark reads ``spark-defaults.conf``: ``key value``, ``key=value`` or
    ``key: value`` per line, ``#``/``!`` comments."""
    out: dict[str, str] = {}
    with open(path, encoding="utf-8") as f:
        for raw in f:
            line = raw.strip()
            if not line or line.startswith(("#", "!")):
                continue
            cut = min((i for i in (line.find("="), line.find(":"), *(line.find(c) for c in " \t")) if i > 0),
                      default=len(line))
            key, value = line[:cut].strip(), line[cut + 1:].strip().lstrip("=:").strip()
            if key:
                out[key] = value
    return out


def user_spark_settings(environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """The settings the user gave Spark outside this tool, before any JVM runs: ``spark-defaults.conf``
    and ``PYSPARK_SUBMIT_ARGS`` (``--conf K=V`` and the options that are settings, e.g. ``--master``,
    ``--driver-memory``); the latter wins, as on ``spark-submit``'s command line."""
    env = os.environ if environ is None else environ
    settings: dict[str, str] = {}
    conf_dir = env.get("SPARK_CONF_DIR") or os.path.join(env.get("SPARK_HOME") or spark_home(), "conf")
    defaults = os.path.join(conf_dir, "spark-defaults.conf")
    if os.path.isfile(defaults):
        settings.update(_read_properties(defaults))
    words = shlex.split(env.get("PYSPARK_SUBMIT_ARGS", ""))
    for i, word in enumerate(words[:-1]):
        if word == "--conf" and "=" in words[i + 1]:
            key, value = words[i + 1].split("=", 1)
            settings[key.strip()] = value
        elif word in _SUBMIT_OPTIONS:
            settings[_SUBMIT_OPTIONS[word]] = words[i + 1]
    return settings


def spark_log_dir() -> Path:
    """``$XDG_CACHE_HOME/substrait-optimizer/logs`` (default ``~/.cache/...``)."""
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "substrait-optimizer" / "logs"


def spark_log_target() -> str | None:
    """Where the JVM of a session this tool starts writes: ``$SUBSTRAIT_OPT_SPARK_LOG`` when set (a file
    appended to; ``-`` for the terminal), else ``spark-<pid>.log`` in :func:`spark_log_dir` (made when
    missing; the :data:`LOGS_KEPT` newest files of other processes are kept); ``None``, nowhere, when
    that folder cannot be made."""
    chosen = os.environ.get("SUBSTRAIT_OPT_SPARK_LOG")
    if chosen:
        return chosen
    folder = spark_log_dir()
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError:
        return None
    mine = folder / f"spark-{os.getpid()}.log"
    try:
        with open(mine, "ab"):
            pass
    except OSError:  # a folder we cannot write in
        return None
    try:
        old = sorted((p for p in folder.glob("spark-*.log") if p != mine), key=lambda p: p.stat().st_mtime)
        for path in old[: max(0, len(old) - LOGS_KEPT)]:
            path.unlink()
    except OSError:  # another process pruned the same file first, or the folder is read-only
        pass
    return str(mine)


def _log_java_options(user: Mapping[str, str], explicit: Mapping[str, str]) -> str | None:
    """``spark.driver.extraJavaOptions`` with :data:`LOG4J_CONFIG` added to the user's options, or ``None``
    when the user has a log4j configuration of their own."""
    current = explicit.get(_JAVA_OPTIONS, user.get(_JAVA_OPTIONS, ""))
    if "log4j" in current or not LOG4J_CONFIG.is_file():
        return None
    conf_dir = os.environ.get("SPARK_CONF_DIR") or os.path.join(spark_home(), "conf")
    if any(os.path.isfile(os.path.join(conf_dir, name)) for name in ("log4j2.properties", "log4j2.xml")):
        return None
    # a file: URI has no blanks or quotes for Spark's splitting of the options to break on
    return f"{current} -Dlog4j2.configurationFile={LOG4J_CONFIG.as_uri()}".strip()


def java_executable() -> str | None:
    """The ``java`` Spark's launcher would run: ``$JAVA_HOME/bin/java`` if ``JAVA_HOME`` is set, else
    ``java`` on ``PATH``; ``None`` when there is none."""
    home = os.environ.get("JAVA_HOME")
    if home:
        candidate = os.path.join(home, "bin", "java")
        return candidate if os.path.isfile(candidate) and os.access(candidate, os.X_OK) else None
    return shutil.which("java")


def require_java() -> None:
    """Raise an :class:`ExecutionError` (one line) when no ``java`` can start Spark."""
    if java_executable() is None:
        where = f"JAVA_HOME={os.environ['JAVA_HOME']} has no bin/java" if os.environ.get("JAVA_HOME") \
            else "no 'java' on PATH and JAVA_HOME is not set"
        raise ExecutionError(f"Spark needs Java 17 or 21 and none was found ({where})")


def is_connect_session(spark) -> bool:
    """Whether ``spark`` is a Spark Connect client session (not a classic, JVM-backed one)."""
    return type(spark).__module__.startswith("pyspark.sql.connect")


def get_spark(
    master: str | None = None,
    app_name: str | None = None,
    conf: Mapping[str, str] | None = None,
    *,
    remote: str | None = None,
):
    """The active SparkSession, else a new one (see the module's docstring for which settings apply).

    ``conf`` always wins over the tool's defaults and the user's files; ``master``/``remote`` are
    applied only when given (not both).
    """
    from pyspark.sql import SparkSession

    if master and remote:
        raise UnsupportedError("give either a Spark master or a Spark Connect remote, not both")
    explicit = dict(conf or {})
    if app_name:
        explicit["spark.app.name"] = app_name
    if remote:
        return _connect_session(remote, explicit)
    active = SparkSession.getActiveSession()
    if active is not None:
        return active
    launched = "PYSPARK_GATEWAY_PORT" in os.environ  # started by spark-submit: the JVM runs already
    if not launched:
        require_java()
    # Python workers must run the interpreter that has our packages (not whatever python3 is on PATH).
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)

    from pyspark import SparkConf, SparkContext

    user = user_spark_settings()
    context_conf = SparkConf()
    if not launched:
        for key, value in LAUNCH_DEFAULTS.items():
            if key not in user:
                context_conf.set(key, value)
    if master:
        context_conf.setMaster(master)
    for key, value in explicit.items():
        context_conf.set(key, value)
    target = None if launched else spark_log_target()
    if launched or target == "-":
        sc = SparkContext.getOrCreate(context_conf)
    else:
        options = _log_java_options(user, explicit)
        if options is not None:
            context_conf.set(_JAVA_OPTIONS, options)
        sc = _start_context(context_conf, target)
    given = {key for key, _ in sc.getConf().getAll()} | set(user)
    builder = SparkSession.builder
    for key, value in SESSION_DEFAULTS.items():
        if key not in given:
            builder = builder.config(key, value)
    for key, value in explicit.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    if launched or target == "-":  # the JVM writes to the terminal: errors only
        sc.setLogLevel("ERROR")
    _quiet_query_context_logger()
    return spark


_launched_here = False  # this module started a JVM in this process (PySpark reuses it for later contexts)


def _start_context(conf, target: str | None):
    """A SparkContext on a JVM whose stdout and stderr go to ``target`` (a file; ``None``: nowhere).

    PySpark starts its JVM once per process, through ``launch_gateway``, whose ``popen_kwargs`` are for
    capturing the JVM's output; a JVM PySpark already has is used as it is."""
    global _launched_here
    from py4j.protocol import Py4JError
    from pyspark import SparkContext, SparkFiles
    from pyspark.errors import PySparkRuntimeError
    from pyspark.java_gateway import launch_gateway

    if _launched_here:
        return SparkContext.getOrCreate(conf)
    try:
        log = open(target if target else os.devnull, "ab")  # closed by the with below
    except OSError as exc:  # a SUBSTRAIT_OPT_SPARK_LOG we cannot write
        raise ExecutionError(f"cannot write Spark's log {target}: {exc.strerror or exc}") from None
    with log as stream:
        offset = stream.tell()
        try:
            gateway = launch_gateway(conf, popen_kwargs={"stdout": stream, "stderr": stream})
        except PySparkRuntimeError as exc:  # the JVM exited at once (a bad setting, no memory...)
            raise ExecutionError(f"Spark's JVM did not start: {_jvm_complaint(target, offset) or exc}"
                                 + (f" (its output: {target})" if target else "")) from None
    _launched_here = True
    try:
        sc = SparkContext(conf=conf, gateway=gateway)
    except ValueError:  # a SparkContext without a session runs (the user's): it is taken as it is
        _stop_gateway(gateway)
        return SparkContext.getOrCreate(conf)
    # A SparkContext's JVM knows its files folder (an error without one): when PySpark's JVM names
    # another folder than ours, PySpark kept a JVM it had started before and ours is not needed.
    try:
        ours = gateway.jvm.org.apache.spark.SparkFiles.getRootDirectory()
    except Py4JError:
        ours = None
    if ours != SparkFiles.getRootDirectory():
        _stop_gateway(gateway)
    return sc


#: Lines a JVM writes that are not why it stopped: warnings, log lines, stack frames, and the launcher's
#: note on the options it took from the environment (``NOTE: Picked up JDK_JAVA_OPTIONS: ...``, also for
#: ``JAVA_TOOL_OPTIONS`` and ``_JAVA_OPTIONS``), which comes first whenever one of those is set.
_NOT_THE_COMPLAINT = re.compile(
    r"WARNING: |\d\d/\d\d/\d\d \d\d:\d\d:\d\d (WARN|INFO) |at |\.\.\. \d+ more|(NOTE: )?Picked up \w*JAVA\w*OPTIONS: ")


def _jvm_complaint(path: str | None, offset: int) -> str:
    """What a JVM that exited at once said, from what it wrote to ``path`` after ``offset``: its first line
    that is not one of :data:`_NOT_THE_COMPLAINT` (``""`` when nothing was written)."""
    if not path:
        return ""
    try:
        with open(path, "rb") as f:
            f.seek(offset)
            lines = [line.strip() for line in f.read(1 << 16).decode("utf-8", "replace").splitlines() if line.strip()]
    except OSError:
        return ""
    chosen = next((line for line in lines if not _NOT_THE_COMPLAINT.match(line)), lines[-1] if lines else "")
    return chosen[:300]


def _stop_gateway(gateway) -> None:
    """Close a gateway and end its JVM (it exits when its stdin closes, as when Python exits)."""
    gateway.shutdown()
    proc = gateway.proc
    if proc is None:
        return
    proc.stdin.close()
    deadline = time.monotonic() + 10
    while proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.1)
    if proc.poll() is None:
        proc.kill()
        proc.wait()


CONNECT_PROBE_SECONDS = 10.0


def connect_address(remote: str) -> tuple[str, int]:
    """Host and port of a Spark Connect URL ``sc://host[:port][/;param=value...]`` (port 15002 by default).

    >>> connect_address("sc://127.0.0.1:1")
    ('127.0.0.1', 1)
    >>> connect_address("sc://spark.example.com/;token=abc")
    ('spark.example.com', 15002)
    """
    parts = urlsplit(remote)
    if parts.scheme != "sc" or not parts.hostname:
        raise PlanError(f"Spark Connect URL must be sc://HOST[:PORT], got {remote!r}")
    try:
        port = parts.port
    except ValueError:
        raise PlanError(f"Spark Connect URL {remote!r}: the port is not a TCP port") from None
    return parts.hostname, port or 15002


def _probe_connect_server(remote: str) -> None:
    host, port = connect_address(remote)
    try:
        with socket.create_connection((host, port), timeout=CONNECT_PROBE_SECONDS):
            pass
    except OSError as exc:
        reason = exc.strerror or type(exc).__name__
        raise ExecutionError(f"Spark Connect server {remote} is not reachable: {reason}") from None


def _connect_session(remote: str, conf: Mapping[str, str]):
    _probe_connect_server(remote)
    try:
        # The Connect client's builder: pyspark.sql.SparkSession's refuses a remote session while a
        # classic one runs in the process (a notebook's, say).
        from pyspark.sql.connect.session import SparkSession

        builder = SparkSession.builder.remote(remote)
        for key, value in conf.items():
            builder = builder.config(key, value)
        spark = builder.getOrCreate()
    except ImportError as exc:  # pyspark without its Connect client's packages (grpcio, ...)
        text = " ".join(str(exc).split())[:200]
        raise UnsupportedError(f"Spark Connect ({remote}) needs PySpark's Connect client packages: {text}") from None
    # The Connect client logs a failed job's whole JVM stack trace (a JSON record of about 6 KB) through the
    # same loggers as a classic session before the backend's one-line error: quiet as there.
    _quiet_query_context_logger()
    return spark


def ui_url(spark) -> str | None:
    """The URL of the Spark UI of a classic session, ``None`` when the UI is off (or over Connect)."""
    if is_connect_session(spark):
        return None
    return spark.sparkContext.uiWebUrl


def _quiet_query_context_logger() -> None:
    """Silence PySpark's DataFrameQueryContextLogger and SQLQueryContextLogger: they log, at ERROR level
    with a stack trace, every analysis failure of a ``Column`` or of SQL text -- including the ones the
    backend provokes and catches on purpose (asking the type of an expression with outer references
    reports "cannot be resolved"). Real failures still reach the user as the backend's one-line errors."""
    import logging

    for name in ("DataFrameQueryContextLogger", "SQLQueryContextLogger"):
        try:
            from pyspark.logger import PySparkLogger

            logger = PySparkLogger.getLogger(name)
        except ImportError:  # PySpark without its own logger: the plain logging one
            logger = logging.getLogger(name)
        logger.disabled = True


class LazySpark:
    """Stands for the SparkSession and starts it on first use (so a statistics cache hit needs no JVM).

    The arguments are :func:`get_spark`'s."""

    def __init__(self, master: str | None = None, conf: Mapping[str, str] | None = None,
                 remote: str | None = None) -> None:
        self._master = master
        self._conf = dict(conf or {})
        self._remote = remote
        self._spark = None

    @property
    def session(self):
        if self._spark is None:
            self._spark = get_spark(self._master, conf=self._conf, remote=self._remote)
        return self._spark

    @property
    def started(self) -> bool:
        return self._spark is not None

    def __getattr__(self, name: str):
        return getattr(self.session, name)
