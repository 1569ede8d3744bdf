"""Run Substrait plans on Acero, Arrow's query engine (``pyarrow.substrait.run_query``).

Acero asks a table provider for each named table: it gets the table read from its Parquet files
with ``pyarrow.parquet``, its columns those of the ``base_schema`` (matched by name, exactly or else
case-insensitively, as the Spark backend does; by position when the plan gives no names) and cast
to the types the plan declares. A table is read once per runner while its files are unchanged.
A plan that is not valid by the spec, or that groups by ``expression_references`` (which Acero does not
read), is refused before Acero sees it (:meth:`AceroRunner.check`).

Acero trusts the plan, and some valid plans end its process (pyarrow 26: SIGSEGV on Isthmus' TPC-H Q6
optimized for acero, an aggregate over a decimal product). So the plans run in a worker process of
the runner's own (a new Python started on first use: nothing of the caller is copied or re-imported),
which keeps the tables it has read; a worker that dies is an :class:`~optimizer.errors.ExecutionError`
naming the signal, and the next plan gets a new worker.
"""

from __future__ import annotations

import os
import pickle
import signal
import struct
import subprocess
import sys
import tempfile
import time
import weakref

from optimizer.engines.base import (
    BoundTable,
    EngineRunner,
    check_fetch,
    engine_failure,
    refuse_read_past,
    refuse_target_refusals,
    refuse_unapplied_read_filters,
)
from optimizer.errors import ExecutionError, PlanError, UnsupportedError

__all__ = ["AceroRunner"]


class _Acero:
    """The engine side, in the worker process: tables read once, plans run with ``run_query``."""

    def __init__(self) -> None:
        self._cache: dict[tuple[str, tuple[int, int]], object] = {}

    def _read(self, table: BoundTable):
        import pyarrow.parquet as pq

        st = os.stat(table.location)
        key = (table.location, (st.st_mtime_ns, st.st_size))
        if key not in self._cache:
            self._cache[key] = pq.read_table(table.location)
        return self._cache[key]

    def _conform(self, data, schema, table: BoundTable):
        """``data`` with the columns and types of ``schema`` (what the plan's base schema says)."""
        import pyarrow as pa

        have = data.schema.names
        exact = {n: i for i, n in enumerate(have)}
        folded: dict[str, list[int]] = {}
        for i, n in enumerate(have):
            folded.setdefault(n.lower(), []).append(i)
        columns = []
        for k, field in enumerate(schema):
            if not field.name:
                i = k
                if i >= len(have):
                    raise PlanError(f"table '{table.name}' has {len(have)} columns, the plan declares "
                                    f"{len(schema)}")
            elif field.name in exact:
                i = exact[field.name]
            elif len(folded.get(field.name.lower(), [])) == 1:
                i = folded[field.name.lower()][0]
            else:
                raise PlanError(f"column '{field.name}' not found in table '{table.name}' "
                                f"(it has: {', '.join(have)})")
            column = data.column(i)
            if column.type != field.type:
                try:
                    column = column.cast(field.type)
                except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as exc:
                    raise PlanError(f"column '{field.name}' of table '{table.name}' is {column.type} in the "
                                    f"data, {field.type} in the plan: {exc}") from None
            columns.append(column)
        return pa.Table.from_arrays(columns, schema=schema)

    def run(self, data: bytes, tables: dict[tuple[str, ...], BoundTable]):
        import pyarrow as pa
        import pyarrow.substrait as substrait

        by_names = {names: table for names, table in tables.items()}
        failures: list[BaseException] = []

        def provide(names, schema):
            table = by_names.get(tuple(names))
            if table is None:  # bind() saw every named table: Acero asks for no other
                failures.append(ExecutionError(f"acero asked for table {'.'.join(names)!r}, which the plan "
                                               "does not name"))
                raise KeyError(".".join(names))
            try:
                return self._conform(self._read(table), schema, table)
            except PlanError as exc:
                failures.append(exc)
                raise

        try:
            reader = substrait.run_query(pa.py_buffer(data), table_provider=provide)
            return reader.read_all()
        except (pa.ArrowException, OSError, KeyError, PlanError) as exc:  # OSError: a file it cannot open
            if failures:
                raise failures[0] from None
            unsupported = isinstance(exc, pa.ArrowNotImplementedError) or None
            raise engine_failure("acero", exc, unsupported=unsupported) from None


def _send(stream, message) -> None:
    payload = pickle.dumps(message, protocol=pickle.HIGHEST_PROTOCOL)
    stream.write(struct.pack("<Q", len(payload)))
    stream.write(payload)
    stream.flush()


def _receive(stream):
    """The next message on ``stream``; EOFError when it ended."""
    head = stream.read(8)
    if len(head) < 8:
        raise EOFError
    (size,) = struct.unpack("<Q", head)
    payload = stream.read(size)
    if len(payload) < size:
        raise EOFError
    return pickle.loads(payload)


def serve() -> None:
    """The worker (``python -c "from optimizer.engines.acero import serve; serve()"``): runs each
    ``(plan bytes, tables)`` read from stdin, answers on stdout ``("ok", Arrow IPC, seconds)`` or
    ``("error", kind, message, path)``; ends when stdin does."""
    import pyarrow as pa

    requests, answers = sys.stdin.buffer, sys.stdout.buffer
    sys.stdout = sys.stderr  # nothing else may write into the answers
    # A table provider's error reaches Acero's caller as the failure it records; pyarrow also reports the
    # exception it cannot raise through its C++ frames as "Exception ignored in", a traceback. This process
    # is the worker's own: that report is dropped.
    sys.unraisablehook = lambda unraisable: None
    engine = _Acero()
    while True:
        try:
            data, tables = _receive(requests)
        except EOFError:
            return
        start = time.perf_counter()
        try:
            table = engine.run(data, tables)
        except (PlanError, ExecutionError, UnsupportedError) as exc:
            _send(answers, ("error", type(exc).__name__, exc.message, exc.path))
            continue
        seconds = time.perf_counter() - start
        sink = pa.BufferOutputStream()
        with pa.ipc.new_stream(sink, table.schema) as writer:
            writer.write_table(table)
        _send(answers, ("ok", sink.getvalue().to_pybytes(), seconds))


_ERRORS = {"PlanError": PlanError, "ExecutionError": ExecutionError, "UnsupportedError": UnsupportedError}


class AceroRunner(EngineRunner):
    """Executes Substrait plans with ``pyarrow.substrait.run_query`` in a worker process."""

    name = "acero"

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self._worker: subprocess.Popen | None = None
        self._stderr = None  # the worker's stderr, a temporary file

    def check(self, plan) -> None:
        """Acero reads the plan by the spec and trusts it: a field reference past the end of its input
        ends the process (SIGSEGV, pyarrow 26), so a plan with a problem :func:`optimizer.schema.check.check_plan`
        finds (DuckDB 1.1.3's projects without emit among them) is a PlanError and never reaches it."""
        from optimizer.expr_utils import rels_with_paths
        from optimizer.schema.check import raise_for_problems

        try:
            raise_for_problems(plan)
        except PlanError as exc:
            raise PlanError(f"not given to acero, which reads plans by the spec and may crash on an invalid "
                            f"one: {exc.message}", exc.path) from None
        # Acero neither fails nor rounds a narrowing decimal cast (decimal(15,2) 12345.67 to decimal(5,2) is
        # 12345.67): refused as the acero target refuses it.
        from optimizer.load.functions import function_table
        from optimizer.targets import as_target
        from optimizer.write.functions import refuse_inexact_decimal_casts

        refuse_inexact_decimal_casts(plan, as_target("acero"), function_table(plan))
        refuse_read_past(plan, "acero", ("post_join_filter",))
        refuse_target_refusals(plan, "acero")
        refuse_unapplied_read_filters(plan, "acero")
        # Acero (pyarrow 26) takes an aggregate's keys from the deprecated Grouping.grouping_expressions
        # only (field 1, which today's bindings no longer have): keys given as expression_references into
        # AggregateRel.grouping_expressions are dropped, and the relations above read past the end of its
        # output (a SIGSEGV for Isthmus' TPC-H Q3 optimized for acero at bc7da3c).
        # A grouping that also carries its keys in that old field (the acero target writes both,
        # optimizer.write.encoding.write_old_encoding) is read with its keys.
        from optimizer.load.upgrade import _unknown

        for rel, path in rels_with_paths(plan):
            if rel.WhichOneof("rel_type") == "fetch":
                check_fetch(rel.fetch, path, "acero")
            if rel.WhichOneof("rel_type") != "aggregate":
                continue
            for i, grouping in enumerate(rel.aggregate.groupings):
                old_keys = sum(1 for number, _, _ in _unknown(grouping) if number == 1)
                if grouping.expression_references and old_keys != len(grouping.expression_references):
                    raise UnsupportedError(
                        "acero does not support: grouping keys given as Grouping.expression_references (it "
                        "reads the deprecated Grouping.grouping_expressions only, and would drop the keys)",
                        f"{path}.aggregate.groupings[{i}]")

    def _start(self) -> subprocess.Popen:
        if self._worker is None or self._worker.poll() is not None:
            # The worker imports the same copy of this package as the caller (installed or a source
            # tree), and nothing from the caller's working directory (-P).
            import optimizer

            root = os.path.dirname(os.path.dirname(os.path.abspath(optimizer.__file__)))
            path = os.pathsep.join(p for p in (root, os.environ.get("PYTHONPATH")) if p)
            # Its stderr (Arrow's own lines: "Check failed: ..." before an abort) goes to a file: the last
            # line names a crash in the one-line error; nothing reaches the user's terminal.
            self._stderr = tempfile.TemporaryFile()
            self._worker = subprocess.Popen(
                [sys.executable, "-P", "-c", "from optimizer.engines.acero import serve; serve()"],
                stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self._stderr,
                env={**os.environ, "PYTHONPATH": path})
            weakref.finalize(self, _stop, self._worker)  # a runner dropped without close()
        return self._worker

    def _execute(self, data: bytes, tables: dict[tuple[str, ...], BoundTable]):
        import pyarrow as pa

        worker = self._start()
        try:
            _send(worker.stdin, (data, tables))
            answer = _receive(worker.stdout)
        except (EOFError, BrokenPipeError, ConnectionResetError):
            code = worker.wait(10)
            self._worker = None
            how = f"signal {signal.Signals(-code).name}" if code < 0 else f"exit code {code}"
            said = self._last_stderr_line()
            raise ExecutionError(f"acero failed: the engine ended its process ({how}) on this plan"
                                 + (f": {said}" if said else "")) from None
        if answer[0] == "error":
            _, kind, message, path = answer
            raise _ERRORS[kind](message, path)
        _, payload, self._engine_seconds = answer
        return pa.ipc.open_stream(payload).read_all()

    def _last_stderr_line(self) -> str:
        """The last line the ended worker wrote on stderr (Arrow's "Check failed: ..."), at most 300 characters."""
        if self._stderr is None:
            return ""
        self._stderr.seek(0)
        lines = self._stderr.read()[-4096:].decode("utf-8", "replace").strip().splitlines()
        self._stderr.close()
        self._stderr = None
        return " ".join(lines[-1].split())[:300] if lines else ""

    def close(self) -> None:
        if self._worker is not None:
            _stop(self._worker)
        self._worker = None
        if self._stderr is not None:
            self._stderr.close()
            self._stderr = None


def _stop(worker: subprocess.Popen) -> None:
    """End a worker: its stdin closed (it returns), killed if it does not within 5 s."""
    if worker.poll() is not None:
        return
    worker.stdin.close()
    try:
        worker.wait(5)
    except subprocess.TimeoutExpired:
        worker.kill()
        worker.wait()
