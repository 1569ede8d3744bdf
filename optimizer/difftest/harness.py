"""Differential testing: run a plan and its optimized form on Spark and compare the answers.

:func:`compare` is the one entry point: it optimizes the plan (:class:`optimizer.driver.Optimizer`
with the statistics, capability profile, configuration and rules given; a crash is found before
anything runs), runs the original plan through ``backend``, runs the optimized plan through the same
backend **in the mode that ignores
``ReadRel.best_effort_filter``** (a consumer may skip a best-effort filter, so a rewrite that relies on
it being applied is wrong, and this mode catches it), and compares the two results with
:func:`optimizer.difftest.results.compare_tables`: as multisets of rows, and, where the original plan's root is
a sort (``SortRel``, ``TopNRel``, or a ``FetchRel``/``ProjectRel`` chain over one), also the order of
the rows on the sort keys that are plain columns of the output (:func:`ordered_by`).

Verdicts (:attr:`DiffResult.status`):

* ``equal`` -- same rows (and order where checked);
* ``different`` -- the optimizer changed the answer (:attr:`DiffResult.comparison` says how, with up to
  5 rows found only on each side);
* ``error`` -- the optimizer raised, or the optimized plan failed to run, or the original plan failed
  for another reason than being unsupported (:attr:`DiffResult.stage` says where);
* ``skipped`` -- the ORIGINAL plan is not supported by the backend (``UnsupportedError``): not the
  optimizer's fault, and not counted as passed or failed.

:class:`DiffCase` is a self-contained differential test: small tables (kept as JSON rows, written to
Parquet when run), a plan reading them by name, optionally the statistics and capability profile the
optimizer is given and its configuration. The fuzzer (:mod:`testing.fuzz`) saves the
minimal failing cases it finds in this form (``tests/regressions/*.json``) and
``tests/test_regressions.py`` replays them.

>>> from optimizer.schema.types import type_name
>>> spec = ColumnSpec("c0", "decimal(9,2)")
>>> type_name(spec.substrait_type())
'decimal<9,2>?'
>>> decode_value("fp64", encode_value("fp64", float("-inf"))), encode_value("date", datetime.date(2000, 1, 2))
(-inf, '2000-01-02')
"""

from __future__ import annotations

import copy
import datetime
import decimal
import hashlib
import json
import math
import os
import re
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from substrait.proto import Plan, Type

from optimizer.difftest.results import Comparison, compare_tables
from optimizer.errors import ExecutionError, OptimizerError, UnsupportedError
from optimizer.schema.types import make_type

T = TypeVar("T")

__all__ = [
    "TYPE_SPECS",
    "ColumnSpec",
    "Database",
    "DiffCase",
    "DiffResult",
    "TableSpec",
    "compare",
    "decode_value",
    "encode_value",
    "ignoring_best_effort",
    "ordered_by",
    "spec_of_type",
]

EQUAL, DIFFERENT, ERROR, SKIPPED = "equal", "different", "error", "skipped"

# ------------------------------------------------------------------------------------------- types

#: The column types of generated tables, as written in :class:`ColumnSpec` (``decimal(p,s)`` too).
TYPE_SPECS = ("i8", "i16", "i32", "i64", "fp32", "fp64", "decimal", "string", "bool", "date", "timestamp")

_DECIMAL_RE = re.compile(r"^decimal\((\d+),\s*(\d+)\)$")
_INT_BITS = {"i8": 8, "i16": 16, "i32": 32, "i64": 64}
_EPOCH = datetime.datetime(1970, 1, 1)
_EPOCH_DAY = datetime.date(1970, 1, 1)


def _decimal_ps(spec: str) -> tuple[int, int] | None:
    m = _DECIMAL_RE.match(spec)
    return (int(m.group(1)), int(m.group(2))) if m else None


def _base(spec: str) -> str:
    return "decimal" if _decimal_ps(spec) else spec


def spec_type(spec: str, nullable: bool = True) -> Type:
    """The Substrait type of a column type spec (``timestamp`` is ``precision_timestamp<6>``)."""
    ps = _decimal_ps(spec)
    if ps:
        return make_type("decimal", nullable, precision=ps[0], scale=ps[1])
    if spec == "timestamp":
        return make_type("precision_timestamp", nullable, precision=6)
    if spec in ("i8", "i16", "i32", "i64", "fp32", "fp64", "string", "bool", "date"):
        return make_type(spec, nullable)
    raise ValueError(f"unknown column type {spec!r}")


def spec_of_type(t: Type) -> str | None:
    """The column type spec of a Substrait type (None for types the generators do not use)."""
    kind = t.WhichOneof("kind")
    if kind == "decimal":
        return f"decimal({t.decimal.precision},{t.decimal.scale})"
    if kind == "precision_timestamp" and t.precision_timestamp.precision == 6:
        return "timestamp"
    if kind in ("i8", "i16", "i32", "i64", "fp32", "fp64", "string", "bool", "date"):
        return kind
    if kind == "varchar":
        return "string"
    return None


def arrow_type(spec: str):
    import pyarrow as pa

    ps = _decimal_ps(spec)
    if ps:
        return pa.decimal128(*ps)
    return {
        "i8": pa.int8(), "i16": pa.int16(), "i32": pa.int32(), "i64": pa.int64(), "fp32": pa.float32(),
        "fp64": pa.float64(), "string": pa.string(), "bool": pa.bool_(), "date": pa.date32(),
        "timestamp": pa.timestamp("us"),
    }[spec]


def encode_value(spec: str, value: Any) -> Any:
    """A column value as JSON: floats that JSON lacks (NaN, +-inf, -0.0) and decimals as strings,
    dates and timestamps as ISO strings."""
    if value is None:
        return None
    base = _base(spec)
    if base in ("fp32", "fp64"):
        if math.isnan(value):
            return "NaN"
        if math.isinf(value):
            return "Infinity" if value > 0 else "-Infinity"
        if value == 0 and math.copysign(1.0, value) < 0:
            return "-0.0"
        return float(value)
    if base == "decimal":
        return str(value)
    if base in ("date", "timestamp"):
        return value.isoformat()
    return value


def decode_value(spec: str, value: Any) -> Any:
    """The inverse of :func:`encode_value`."""
    if value is None:
        return None
    base = _base(spec)
    if base in ("fp32", "fp64"):
        return float(value)  # float("NaN"), float("-Infinity"), float("-0.0") all parse
    if base == "decimal":
        return decimal.Decimal(value)
    if base == "date":
        return datetime.date.fromisoformat(value)
    if base == "timestamp":
        return datetime.datetime.fromisoformat(value)
    if base in _INT_BITS:
        return int(value)
    if base == "bool":
        return bool(value)
    return value


# -------------------------------------------------------------------------------------- the data


@dataclass(frozen=True)
class ColumnSpec:
    """A column of a generated table: a name, a type spec (:data:`TYPE_SPECS`, decimals as
    ``decimal(p,s)``) and whether it may hold nulls."""

    name: str
    type: str
    nullable: bool = True

    def substrait_type(self) -> Type:
        return spec_type(self.type, self.nullable)

    def arrow_type(self):
        return arrow_type(self.type)


@dataclass
class TableSpec:
    """A small table: its columns and rows (Python values, ``None`` for null)."""

    name: str
    columns: list[ColumnSpec]
    rows: list[tuple] = field(default_factory=list)

    def to_arrow(self):
        import pyarrow as pa

        fields = [pa.field(c.name, c.arrow_type(), nullable=c.nullable) for c in self.columns]
        arrays = [
            pa.array([row[i] for row in self.rows], type=c.arrow_type()) for i, c in enumerate(self.columns)
        ]
        return pa.Table.from_arrays(arrays, schema=pa.schema(fields))

    def to_json(self) -> dict:
        return {
            "columns": [{"name": c.name, "type": c.type, "nullable": c.nullable} for c in self.columns],
            "rows": [[encode_value(c.type, v) for c, v in zip(self.columns, row, strict=True)] for row in self.rows],
        }

    @classmethod
    def from_json(cls, name: str, data: dict) -> TableSpec:
        columns = [ColumnSpec(c["name"], c["type"], bool(c.get("nullable", True))) for c in data["columns"]]
        rows = [tuple(decode_value(c.type, v) for c, v in zip(columns, row, strict=True)) for row in data["rows"]]
        return cls(name, columns, rows)


@dataclass
class Database:
    """Named tables, written as ``<dir>/<name>.parquet`` for the backend to read."""

    tables: dict[str, TableSpec] = field(default_factory=dict)

    def write_parquet(self, directory: str | os.PathLike) -> dict[str, str]:
        """Write every table to ``directory/<name>.parquet``; return ``{name: path}``.

        A table with floating-point columns is written without dictionary encoding: parquet-java's
        dictionary filter (Spark reads through it) looks a pushed-down ``x = 0.0`` or ``x IN (0.0, ...)``
        up with ``Double.equals``, for which ``-0.0`` is not ``0.0``, and skips a row group holding
        only ``-0.0`` that Spark's own comparison keeps: the same plan would then answer differently
        depending on where Spark evaluates the predicate (tests/regressions/fuzz-8f022b4b9bf7.json)."""
        import pyarrow.parquet as pq

        directory = Path(directory)
        directory.mkdir(parents=True, exist_ok=True)
        paths = {}
        for name, table in self.tables.items():
            path = directory / f"{name}.parquet"
            arrow = table.to_arrow()
            pq.write_table(arrow, path, use_dictionary=not any(_has_floats(f.type) for f in arrow.schema))
            paths[name] = str(path)
        return paths

    def to_json(self) -> dict:
        return {name: t.to_json() for name, t in self.tables.items()}

    @classmethod
    def from_json(cls, data: dict) -> Database:
        return cls({name: TableSpec.from_json(name, t) for name, t in data.items()})


def _has_floats(t) -> bool:
    """Is there a floating-point type in ``t`` (a pyarrow type, nested ones looked into)?"""
    import pyarrow as pa

    if pa.types.is_floating(t):
        return True
    return any(_has_floats(t.field(i).type) for i in range(t.num_fields)) if hasattr(t, "num_fields") else False


_CONFIG_FIELDS = ("max_iterations", "dp_join_limit", "dp_pair_budget", "broadcast_threshold_bytes", "annotate_estimates")


@dataclass
class DiffCase:
    """A self-contained differential test: tables, plan, and what the optimizer is given.

    ``statistics``: ``{table name: cost.statistics.TableStatistics}`` (may lie) or None;
    ``capabilities``: a reader-capability profile as its JSON object, or None (the default profile);
    ``config``: keyword arguments of :class:`optimizer.driver.OptimizerConfig`.
    """

    database: Database
    plan: Plan
    statistics: dict[str, Any] | None = None
    capabilities: dict | None = None
    config: dict = field(default_factory=dict)
    name: str = ""
    note: str = ""
    #: a known, not yet fixed bug: the replay marks the case as an expected failure (non-strict)
    xfail: str = ""

    # -- what the optimizer is given

    def statistics_provider(self):
        """Plan hints first, then the (possibly lying) table statistics; None when there are none."""
        from optimizer.cost.providers import CompositeStatistics, HintStatistics, MemoryStatistics

        providers: list[Any] = [HintStatistics()]
        if self.statistics is not None:
            providers.append(MemoryStatistics(self.statistics))
        return CompositeStatistics(providers)

    def capability_profile(self):
        if self.capabilities is None:
            return None
        from optimizer.capabilities import from_dict

        return from_dict(self.capabilities, "case capabilities")

    def optimizer_config(self):
        from optimizer.driver import OptimizerConfig

        return OptimizerConfig(**{k: v for k, v in self.config.items() if k in _CONFIG_FIELDS})

    # -- running

    def run(self, backend_factory, directory: str | os.PathLike, *, rules=None, target=None,
            reference_factory=None) -> DiffResult:
        """Write the tables under ``directory`` and :func:`compare` the plan (optimized for ``target``,
        default Spark).

        ``backend_factory(tables: dict[str, str])`` makes the backend (e.g.
        ``lambda t: SparkBackend(spark, tables=t)``, or ``lambda t: optimizer.engines.runner("duckdb", t)``
        with ``target="duckdb"``); ``reference_factory``, the same for ``compare``'s ``reference_backend``.
        """
        paths = self.database.write_parquet(directory)
        backend = backend_factory(paths)
        return compare(
            self.plan,
            backend=backend,
            statistics=self.statistics_provider(),
            capabilities=self.capability_profile(),
            config=self.optimizer_config(),
            rules=rules,
            target=target,
            reference_backend=reference_factory(paths) if reference_factory is not None else None,
        )

    # -- JSON

    def to_json(self) -> dict:
        from google.protobuf import json_format

        from optimizer.cost.statistics_io import statistics_document

        return {
            "format": "substrait-opt-difftest",
            "version": 1,
            "name": self.name,
            "note": self.note,
            **({"xfail": self.xfail} if self.xfail else {}),
            "tables": self.database.to_json(),
            "statistics": None if self.statistics is None else statistics_document(self.statistics),
            "capabilities": self.capabilities,
            "config": {k: v for k, v in self.config.items() if k in _CONFIG_FIELDS},
            "plan": json_format.MessageToDict(self.plan),
        }

    def dumps(self) -> str:
        """The case as JSON text (each table row on one line)."""
        from optimizer.cost.statistics_io import dump_json

        return dump_json(self.to_json())

    @classmethod
    def from_json(cls, data: dict | str) -> DiffCase:
        from optimizer.cost.statistics_io import parse_document
        from optimizer.plan_io import load_plan

        if isinstance(data, str):
            data = json.loads(data)
        if data.get("format") != "substrait-opt-difftest":
            raise ValueError("not a difftest case (format must be 'substrait-opt-difftest')")
        stats = data.get("statistics")
        return cls(
            database=Database.from_json(data["tables"]),
            plan=load_plan(json.dumps(data["plan"])),
            statistics=None if stats is None else parse_document(stats, "case statistics"),
            capabilities=data.get("capabilities"),
            config=dict(data.get("config") or {}),
            name=data.get("name", ""),
            note=data.get("note", ""),
            xfail=data.get("xfail", ""),
        )

    @classmethod
    def load(cls, path: str | os.PathLike) -> DiffCase:
        case = cls.from_json(Path(path).read_text(encoding="utf-8"))
        if not case.name:
            case.name = Path(path).stem
        return case

    def fingerprint(self) -> str:
        """A short hash of the case's content (names the saved regression files)."""
        data = self.to_json()
        for key in ("name", "note", "xfail"):
            data.pop(key, None)
        return hashlib.sha256(json.dumps(data, sort_keys=True).encode()).hexdigest()[:12]

    def save(self, directory: str | os.PathLike, prefix: str = "fuzz") -> Path:
        """Write the case as ``directory/<prefix>-<fingerprint>.json`` (kept if already there)."""
        directory = Path(directory)
        directory.mkdir(parents=True, exist_ok=True)
        if not self.name:
            self.name = f"{prefix}-{self.fingerprint()}"
        path = directory / f"{self.name}.json"
        if not path.exists():
            path.write_text(self.dumps(), encoding="utf-8")
        return path


# ---------------------------------------------------------------------------------------- results


def _one_line(text: str, limit: int = 300) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


@dataclass
class DiffResult:
    """What :func:`compare` found."""

    status: str
    #: one line: why different / the error message / why skipped
    reason: str = ""
    #: where an error happened: "original", "optimize", "optimized"
    stage: str | None = None
    original_seconds: float | None = None
    optimized_seconds: float | None = None
    optimize_seconds: float | None = None
    optimized_plan: Plan | None = None
    comparison: Comparison | None = None
    error: BaseException | None = None
    #: output positions whose order was checked (the original root's sort keys)
    ordered_by: list[int] = field(default_factory=list)
    original_rows: int | None = None
    optimized_rows: int | None = None
    #: the rules that fired, in order
    rules_fired: list[str] = field(default_factory=list)
    original_table: Any = field(default=None, repr=False)
    optimized_table: Any = field(default=None, repr=False)

    @property
    def equal(self) -> bool:
        return self.status == EQUAL

    @property
    def different(self) -> bool:
        return self.status == DIFFERENT

    @property
    def failed(self) -> bool:
        """A difference or an error (what counts against the optimizer)."""
        return self.status in (DIFFERENT, ERROR)

    @property
    def skipped(self) -> bool:
        return self.status == SKIPPED

    def verdict(self) -> str:
        """``equal`` | ``DIFFERENT (reason)`` | ``error (message)`` | ``skipped (message)``."""
        if self.status == EQUAL:
            return "equal"
        if self.status == DIFFERENT:
            return f"DIFFERENT ({self.reason})"
        where = f"{self.stage}: " if self.stage and self.status == ERROR else ""
        return f"{self.status} ({where}{self.reason})"

    def times(self) -> str:
        def fmt(s: float | None) -> str:
            return "-" if s is None else f"{s:.2f} s"

        return f"original {fmt(self.original_seconds)}, optimized {fmt(self.optimized_seconds)}"

    def __str__(self) -> str:
        return f"{self.verdict()} [{self.times()}]"

    def details(self) -> dict:
        """A JSON-able account of a difference: reason, order keys, sample rows on each side."""
        out: dict[str, Any] = {
            "status": self.status,
            "reason": self.reason,
            "stage": self.stage,
            "ordered_by": self.ordered_by,
            "original_rows": self.original_rows,
            "optimized_rows": self.optimized_rows,
            "rules_fired": self.rules_fired,
        }
        if self.comparison is not None:
            out["only_in_optimized"] = [[_jsonable(v) for v in row] for row in self.comparison.actual_only]
            out["only_in_original"] = [[_jsonable(v) for v in row] for row in self.comparison.expected_only]
            if self.comparison.row is not None:
                out["first_out_of_order_row"] = self.comparison.row
        for key, table in (("original_sample", self.original_table), ("optimized_sample", self.optimized_table)):
            if table is not None:
                out[key] = [[_jsonable(v) for v in row.values()] for row in table.slice(0, 10).to_pylist()]
        return out


def _jsonable(v: Any) -> Any:
    if v is None or isinstance(v, bool | int | str):
        return v
    if isinstance(v, float):
        return v if math.isfinite(v) else str(v)
    if isinstance(v, datetime.date | datetime.datetime | datetime.time):
        return v.isoformat()
    return str(v)


# ----------------------------------------------------------------------------------------- order


def _emit_positions(body, column: int) -> int | None:
    """Where input column ``column`` of a relation (whose output before the emit is its input's
    columns first) ends up in its output: through ``common.emit`` if any."""
    if body.HasField("common") and body.common.WhichOneof("emit_kind") == "emit":
        mapping = list(body.common.emit.output_mapping)
        return mapping.index(column) if column in mapping else None
    return column


def ordered_by(plan: Plan, root: int = 0) -> list[int]:
    """Output positions of the root's sort keys that are plain output columns (for
    ``compare_tables(..., ordered_by=...)``); ``[]`` when the root is not sorted.

    The root relation may be a ``SortRel`` or ``TopNRel``, under any chain of ``FetchRel`` and
    ``ProjectRel`` (which keep the order and the input's columns first). A sort key that is not a
    plain column, or that the emits drop, is left out: the order of the rest is still determined.
    """
    from optimizer.expr_utils import field_index

    roots = [r.root for r in plan.relations if r.WhichOneof("rel_type") == "root"]
    if root >= len(roots):
        return []
    chain = []
    rel = roots[root].input
    while True:
        kind = rel.WhichOneof("rel_type")
        if kind in ("fetch", "project"):
            chain.append(getattr(rel, kind))
            rel = getattr(rel, kind).input
            continue
        if kind not in ("sort", "top_n"):
            return []
        break
    body = getattr(rel, kind)
    out: list[int] = []
    for s in body.sorts:
        col = field_index(s.expr)
        if col is None:
            continue
        pos = _emit_positions(body, col)
        for above in reversed(chain):
            if pos is None:
                break
            pos = _emit_positions(above, pos)
        if pos is not None and pos not in out:
            out.append(pos)
    return out


# --------------------------------------------------------------------------------------- running


def ignoring_best_effort(backend):
    """The same backend in the mode that skips ``ReadRel.best_effort_filter``."""
    if getattr(backend, "ignore_best_effort_filter", False):
        return backend
    try:
        return type(backend)(backend.spark, backend.tables, ignore_best_effort_filter=True)
    except (TypeError, AttributeError):
        clone = copy.copy(backend)
        clone.ignore_best_effort_filter = True
        return clone


def _run(backend, plan: Plan):
    start = time.perf_counter()
    table = backend.execute(plan)
    return table, time.perf_counter() - start


def _attempt(step: Callable[[], T]) -> tuple[T | None, Exception | None]:
    """``(step(), None)``, or ``(None, error)`` if it raised."""
    try:
        return step(), None
    # Any error of the optimizer or the backend is a finding to report with its stage (the mutation
    # score counts planted bugs that raise IndexError, KeyError, ... as found), never to raise.
    except Exception as exc:
        return None, exc


def _message(exc: BaseException) -> str:
    if isinstance(exc, OptimizerError):
        return _one_line(str(exc))
    return _one_line(f"{type(exc).__name__}: {exc}")


def compare(
    plan,
    *,
    backend,
    statistics: Any = None,
    capabilities: Any = None,
    config: Any = None,
    rules: Sequence[Any] | None = None,
    optimized_backend: Any = None,
    target: Any = None,
    reference_backend: Any = None,
) -> DiffResult:
    """Optimize ``plan``, run the original and the optimized plan through ``backend``, compare.

    ``plan``: a ``Plan`` or anything :func:`optimizer.plan_io.load_plan` reads (it is not changed).
    ``statistics``/``capabilities``/``config``/``rules``/``target``: given to
    :class:`optimizer.driver.Optimizer` (``rules=None``: the standard rules; ``target=None``: the
    default target, Spark). With a ``target``, the original plan runs as written for that target
    (:func:`optimizer.write.write_for_target`: its encoding, no rewrite), as the engine that is
    ``backend`` reads it; a plan the target cannot express is skipped. The optimized plan runs on
    ``optimized_backend``, by default ``backend`` in the mode that ignores best-effort filters
    (:func:`ignoring_best_effort`). ``reference_backend``: the expected answer is then the original
    plan as given (in the spec's reading, not written for the target) run there, e.g. on our Spark
    backend: a mistake of the write stage, which the written original and the optimized plan share, then
    shows too.
    """
    from optimizer.driver import Optimizer
    from optimizer.plan_io import load_plan

    original = Plan()
    original.CopyFrom(load_plan(plan))
    result = DiffResult(EQUAL, ordered_by=ordered_by(original))

    # 1. Optimize (cheap: a crash of the optimizer is found without running anything). With a target,
    # the original is written for it too: a plan the target cannot express as given is skipped, which
    # is also why an optimizer that refuses it is not at fault.
    written, written_exc = original, None
    if target is not None:
        from optimizer.write import write_for_target

        written, written_exc = _attempt(lambda: write_for_target(original, target))
    start = time.perf_counter()
    to_optimize = Plan()
    to_optimize.CopyFrom(original)
    chosen = {} if target is None else {"target": target}
    run, exc = _attempt(lambda: Optimizer(statistics=statistics, capabilities=capabilities, config=config,
                                          rules=list(rules) if rules is not None else None,
                                          **chosen).run(to_optimize))
    result.optimize_seconds = time.perf_counter() - start
    if written is None:
        status = SKIPPED if isinstance(written_exc, UnsupportedError) else ERROR
        result.status, result.stage, result.reason, result.error = (
            status, "original", _message(written_exc), written_exc)
        return result
    if run is None:
        result.status, result.stage, result.reason, result.error = ERROR, "optimize", _message(exc), exc
        return result
    result.optimized_plan = run.plan
    result.rules_fired = [e.rule for e in run.events]

    # 2. The original plan: the expected answer. Unsupported is not the optimizer's fault; nor, on an
    # engine other than our own backend (a target), is the engine failing on the plan as given.
    ran, exc = _attempt(lambda: _run(backend, written))
    if ran is None:
        engine_failed = target is not None and isinstance(exc, ExecutionError)
        status = SKIPPED if isinstance(exc, UnsupportedError) or engine_failed else ERROR
        result.status, result.stage, result.reason, result.error = status, "original", _message(exc), exc
        return result
    expected, result.original_seconds = ran
    result.original_table, result.original_rows = expected, expected.num_rows
    if reference_backend is not None:
        # The original as given, on the reference: the answer the written original and the optimized
        # plan must both give.
        ran, exc = _attempt(lambda: _run(reference_backend, original))
        if ran is None:
            status = SKIPPED if isinstance(exc, UnsupportedError) else ERROR
            result.status, result.stage, result.reason, result.error = status, "reference", _message(exc), exc
            return result
        reference = ran[0]
        if expected.num_rows != reference.num_rows:
            agreement = Comparison(False, f"row count differs: written {expected.num_rows}, "
                                          f"reference {reference.num_rows}")
        else:
            agreement = compare_tables(expected, reference, ordered_by=result.ordered_by or None)
        if not agreement.equal:
            result.comparison, result.status, result.stage = agreement, DIFFERENT, "original"
            result.reason = _one_line("the original as written for the target: " + agreement.reason.replace(
                "actual", "written").replace("expected", "reference"))
            return result
        expected = reference

    # 3. The optimized plan, best-effort filters ignored.
    runner = optimized_backend if optimized_backend is not None else ignoring_best_effort(backend)
    ran, exc = _attempt(lambda: _run(runner, run.plan))
    if ran is None:
        result.status, result.stage, result.reason, result.error = ERROR, "optimized", _message(exc), exc
        return result
    actual, result.optimized_seconds = ran
    result.optimized_table, result.optimized_rows = actual, actual.num_rows

    # 4. Compare: row counts first (cheap), then the rows as multisets, then the order.
    if actual.num_rows != expected.num_rows:
        result.comparison = Comparison(
            False, f"row count differs: optimized {actual.num_rows}, original {expected.num_rows}"
        )
    else:
        result.comparison = compare_tables(actual, expected, ordered_by=result.ordered_by or None)
    if not result.comparison.equal:
        result.status = DIFFERENT
        result.reason = _one_line(
            result.comparison.reason.replace("actual", "optimized").replace("expected", "original")
        )
    return result
