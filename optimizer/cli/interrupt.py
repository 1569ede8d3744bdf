"""SIGINT and SIGTERM stop a command that runs Spark: its jobs are cancelled, Spark is stopped, and the
CLI exits 130 (SIGINT) or 143 (SIGTERM) with one line, leaving no JVM behind.

PySpark installs its own SIGINT handler when the SparkContext starts (it cancels the jobs and raises
``KeyboardInterrupt``, which a job failure can turn into an ordinary error); :func:`stop_on_signals`
replaces it, in the main thread, until :func:`restore_signals` (the CLI calls both; a library caller
keeps its own handlers).
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import threading
import time

_SIGNALS = (signal.SIGINT, signal.SIGTERM)
_previous: dict[int, object] = {}
_received: list[int] = []


class Interrupted(BaseException):
    """A signal asked the command to stop (a BaseException: no handler of ``Exception`` swallows it)."""

    def __init__(self, signum: int) -> None:
        super().__init__(signal.Signals(signum).name)
        self.signum = signum

    @property
    def exit_code(self) -> int:
        return 128 + self.signum


def stop_on_signals(spark) -> None:
    """From now on, SIGINT/SIGTERM cancel ``spark``'s jobs and raise :class:`Interrupted`."""
    if threading.current_thread() is not threading.main_thread():
        return

    def handler(signum, frame):
        # The command ends here. Py4J calls cut short by the stop log "Exception while sending command."
        # with a traceback through the root logger; the user gets one line instead.
        logging.disable(logging.CRITICAL)
        if not _received and spark is not None:
            with contextlib.suppress(Exception):  # the JVM may already be going away
                spark.sparkContext.cancelAllJobs()
            _end_spark_after(_GRACE)
        _received.append(signum)
        raise Interrupted(signum)

    for s in _SIGNALS:
        old = signal.signal(s, handler)
        _previous.setdefault(s, old)


#: Seconds a signalled command has to stop Spark its own way before its JVM is ended.
_GRACE = 5.0


def _end_spark_after(seconds: float) -> None:
    """End this process's child processes (Spark's JVM) ``seconds`` from now, if it still runs. The signal
    can come while PySpark reads a collected result from its socket: the exception then raised in that read
    goes through PySpark's ``finally``, which waits for the cancelled job's result and never gets one
    (a SIGTERM 1 s into a long join hung ``run`` for good). The JVM's end ends that wait."""

    def end() -> None:
        time.sleep(seconds)
        for pid in child_processes():
            with contextlib.suppress(OSError):  # ended meanwhile
                os.kill(pid, signal.SIGTERM)

    threading.Thread(target=end, name="end-spark", daemon=True).start()


def child_processes(parent: int | None = None) -> list[int]:
    """The child processes of ``parent`` (default: this process). Linux: read from /proc; elsewhere none
    are known."""
    parent = os.getpid() if parent is None else parent
    found = []
    with contextlib.suppress(OSError):
        for entry in os.listdir("/proc"):
            if not entry.isdigit():
                continue
            with contextlib.suppress(OSError, IndexError, ValueError):
                with open(f"/proc/{entry}/stat") as f:  # "pid (name) state ppid ...": the name may hold spaces
                    if int(f.read().rsplit(")", 1)[1].split()[1]) == parent:
                        found.append(int(entry))
    return found


def pending() -> Interrupted | None:
    """The interruption a signal asked for, if one arrived (whatever error the command then ended with)."""
    return Interrupted(_received[0]) if _received else None


def check_interrupted() -> None:
    """Raise :class:`Interrupted` if a signal arrived (a job it cancelled may have failed as an error)."""
    if _received:
        raise Interrupted(_received[0])


def restore_signals() -> None:
    """The handlers from before :func:`stop_on_signals`, and no pending signal."""
    for s, old in _previous.items():
        signal.signal(s, old)  # type: ignore[arg-type]
    _previous.clear()
    if _received:
        logging.disable(logging.NOTSET)
    _received.clear()


def stop_spark(timeout: float = 15.0) -> None:
    """Stop the active SparkSession, if any, waiting at most ``timeout`` seconds (a signal may have cut
    a Py4J call short). The JVM exits with this process either way: it ends when its stdin closes."""

    def stop() -> None:
        from pyspark.sql import SparkSession

        with contextlib.suppress(Exception):  # a JVM still starting has no session class yet
            active = SparkSession.getActiveSession()
            if active is not None:
                active.stop()

    worker = threading.Thread(target=stop, name="stop-spark", daemon=True)
    worker.start()
    worker.join(timeout)
