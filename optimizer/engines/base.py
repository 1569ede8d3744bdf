"""What the engine runners share: the tables a plan reads, the files it may read, errors as one line.

A runner (:class:`EngineRunner`) executes a Substrait ``Plan`` on an engine that consumes Substrait
itself and returns a ``pyarrow.Table``. The plan is handed to the engine as written: the runner adapts
nothing, so what it answers is what the engine answers to that plan (``diff --engine`` judges the
plan, not a repaired copy). Before the engine sees the plan:

* every ``ReadRel.named_table`` is bound as the Spark backend binds it
  (:class:`optimizer.spark.tables.TableResolver`): the ``tables`` mapping ``{name: path}`` (the whole
  dotted name or its last segment, case-insensitively), then ``DIR/<name>.parquet`` (a file or a
  folder) or ``DIR/<name>/``, matching the last segment case-insensitively (Isthmus writes
  ``LINEITEM``). A table found nowhere is a :class:`~optimizer.errors.PlanError`; a name the runner did
  not bind never reaches the engine (no engine is asked to look a name up in its own catalog or on
  disk);
* a column a read declares of another kind than the table's data holds (a string over integers) is a
  PlanError (:func:`check_column_kinds`), as on Spark: the engine would read the data's values whatever
  the plan declares;
* every file the plan names (the tables' files and ``ReadRel.local_files``) must be allowed by the
  :class:`~optimizer.paths.FileAccess` given (the CLI confines to ``--tables``, see docs/security.md);
* with ``ignore_best_effort_filter`` the plan's ``ReadRel.best_effort_filter`` fields are removed: a
  consumer may skip them, and :func:`optimizer.difftest.harness.compare` runs the optimized plan so;
* a plan with a problem :func:`optimizer.schema.check.check_plan` finds (a field past its input, a set
  operation of one input) is a PlanError, and a construct the engine is known to read past, answering
  as if it were not there (DuckDB's and Acero's post-join filters, ...), an UnsupportedError naming it
  (:func:`refuse_read_past`): the engine would crash on the one or answer the other wrong, not fail.

Errors: what the engine says it does not implement or support is an
:class:`~optimizer.errors.UnsupportedError` ``<engine> does not support: <its message>``; any other
failure of the engine an :class:`~optimizer.errors.ExecutionError` ``<engine> failed: <its message>``;
an engine package that is not installed is an ``UnsupportedError`` naming the extra to install.
"""

from __future__ import annotations

import importlib
import os
import re
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from google.protobuf.message import DecodeError
from substrait.proto import Plan, ReadRel, Rel

from optimizer.errors import ExecutionError, PlanError, UnsupportedError
from optimizer.paths import FileAccess, table_in_directory, table_places
from optimizer.schema.record import top_level_names

__all__ = ["BoundTable", "EngineRunner", "engine_failure", "missing_package", "own_plan", "plan_as_given",
           "read_rels", "check_fetch", "refuse_legacy_projects", "refuse_problems", "refuse_read_past",
           "refuse_target_refusals", "refuse_unapplied_read_filters", "written_for"]

#: How engines word "this is not implemented here" (DataFusion: ``This feature is not implemented``,
#: DuckDB: ``Not implemented Error``, ``Unsupported relation type``, Arrow: ``ArrowNotImplementedError``).
_UNSUPPORTED = re.compile(r"not implemented|not supported|unsupported|notimplemented", re.IGNORECASE)


#: Arrow prints a relation it cannot convert whole, after this marker: its kind is what to name
_DEBUG_DUMP = re.compile(r"goo\.gle/debug\w*\s+(\w+).*", re.DOTALL)


def missing_package(engine: str, extra: str, exc: ImportError) -> UnsupportedError:
    """The error of an engine whose Python package is missing: which extra installs it."""
    return UnsupportedError(
        f"the {engine} engine needs the '{exc.name or extra}' package: "
        f"pip install 'substrait-optimizer[{extra}]'")


def _one_line(text: str, limit: int = 400) -> str:
    line = " ".join(str(text).split())
    return line if len(line) <= limit else line[: limit - 3] + "..."


def engine_failure(engine: str, exc: BaseException | str, unsupported: bool | None = None) -> Exception:
    """``exc`` raised by ``engine`` as one of ours: unsupported when the engine says so (or
    ``unsupported`` is True), else an execution failure."""
    message = _one_line(_DEBUG_DUMP.sub(r"\1", str(exc)) or type(exc).__name__)
    if unsupported is None:
        unsupported = bool(_UNSUPPORTED.search(message))
    if unsupported:
        return UnsupportedError(f"{engine} does not support: {message}")
    return ExecutionError(f"{engine} failed: {message}")


def read_rels(plan: Plan) -> Iterator[tuple[ReadRel, str]]:
    """Every ``ReadRel`` of ``plan`` (subqueries and all relations included) with its path."""
    from optimizer.expr_utils import rels_with_paths

    for rel, path in rels_with_paths(plan):
        if rel.WhichOneof("rel_type") == "read":
            yield rel.read, f"{path}.read"


def refuse_problems(plan: Plan, engine: str) -> None:
    """A PlanError for the first problem of ``plan`` (:func:`optimizer.schema.check.check_plan`), read in
    the conventions its producer wrote it in, as the engine it was written for reads it (DuckDB's projects
    without emit, DataFusion's grouping-set numbering: :func:`optimizer.load.pipeline.load`)."""
    from optimizer.load.pipeline import load

    problems = load(plan).problems
    if problems:
        first = problems[0]
        raise PlanError(f"not given to {engine}, which may crash on or misread an invalid plan: {first.message}",
                        first.path or None)


def _offset_frames_not_in_rows_offsets(rel: Rel, kind: str) -> bool:
    """A window frame bound with an offset, of a frame other than ROWS or given in ``offset_expr``: DataFusion
    55 answers a RANGE offset as unbounded and fails on ``offset_expr`` ('Preceding bound must be
    positive'); it reads ROWS offsets in the int64 ``offset`` field."""
    from substrait.proto import Expression

    from optimizer.dag import strip_inputs
    from optimizer.expr_utils import walk

    if kind not in ("project", "window"):
        return False
    for call in walk(strip_inputs(rel), enter_subqueries=False):
        if call.DESCRIPTOR.full_name not in ("substrait.Expression.WindowFunction",
                                             "substrait.ConsistentPartitionWindowRel.WindowRelFunction"):
            continue
        for bound in (call.lower_bound, call.upper_bound):
            side = bound.WhichOneof("kind")
            if side in ("preceding", "following") and (
                    call.bounds_type != Expression.WindowFunction.BOUNDS_TYPE_ROWS
                    or getattr(bound, side).HasField("offset_expr")):
                return True
    return False


def refuse_legacy_projects(plan: Plan, engine: str) -> None:
    """An UnsupportedError naming the first ``ProjectRel`` of a plan whose producer means a project without
    emit as its expressions alone (DuckDB 1.1.3; :func:`optimizer.schema.check.legacy_project_producer`),
    for an engine that reads it by the spec, as its input's columns then its expressions. The two readings
    differ in width, so a plan fails at its root's names at best; a parent that reads only some columns
    (``sum(field 0)`` over ``project(a * 2)``) would read the input's column in place of the expression."""
    from optimizer.schema.check import legacy_project_producer, legacy_projects

    producer = legacy_project_producer(plan)
    for rel, path in legacy_projects(plan):
        if rel.project.expressions:
            raise UnsupportedError(f"{engine} reads a ProjectRel as its input's columns then its expressions, where "
                                   f"this plan's producer ({producer}) means its expressions alone: written for it "
                                   f"with optimize --target {engine} it reads it right", path)


def written_for(plan: Plan, engine: str) -> bool:
    """Whether this tool wrote ``plan`` for the engine (``optimize --target``; its version's producer)."""
    from optimizer.load.pipeline import PRODUCER

    return plan.version.producer.strip().lower() == f"{PRODUCER} for {engine}"


def own_plan(plan: Plan, engine: str) -> bool:
    """Whether ``plan`` was written by the engine itself or by this tool for it (its version's producer):
    the engine reads such a plan as its writer meant it, whatever the spec says."""
    return plan.version.producer.strip().lower() == engine or written_for(plan, engine)


def refuse_target_refusals(plan: Plan, engine: str) -> None:
    """An UnsupportedError for what the engine's target refuses because the engine reads past it and
    answers otherwise (:func:`optimizer.write.functions.refuse_ignored_settings`: a partial aggregation
    phase, a rounding or overflow option, a DISTINCT window function, a field of an expression's value),
    and, in a plan neither the engine nor this tool for it wrote, a mark join whose NULL mark the engine
    gives as false (:func:`optimizer.write.joins.refuse_null_marks`, for DataFusion). Read in the
    conventions the plan's producer wrote it in, as the target's write stage reads it."""
    from optimizer.load.pipeline import load
    from optimizer.targets import as_target
    from optimizer.write.functions import refuse_ignored_settings
    from optimizer.write.joins import refuse_null_marks

    loaded = load(plan)
    target = as_target(engine)
    try:
        refuse_ignored_settings(loaded.plan, target, loaded.functions)
        if target.mark_joins == "two_valued" and not own_plan(plan, engine):
            refuse_null_marks(loaded.plan, target, loaded.functions)
    except UnsupportedError as exc:
        raise UnsupportedError(f"not given to {engine} as written: {exc.message}", exc.path) from None


def _outer_references(rel: Rel, kind: str) -> bool:
    """A field reference to an enclosing query's row among the relation's own expressions."""
    from optimizer.dag import strip_inputs
    from optimizer.expr_utils import walk

    return any(m.DESCRIPTOR.full_name == "substrait.Expression.FieldReference"
               and m.WhichOneof("root_type") == "outer_reference"
               for m in walk(strip_inputs(rel), enter_subqueries=False))


def _set_ops_read_otherwise(ops: frozenset[str] | str):
    """A relation test: a ``SetRel`` of an operation outside ``ops`` (names without ``SET_OP_``), or outside
    the ``set_ops`` of the target named ``ops``."""
    from substrait.proto import SetRel

    def test(rel: Rel, kind: str) -> bool:
        if kind != "set":
            return False
        if isinstance(ops, str):
            from optimizer.targets import as_target

            read = as_target(ops).set_ops
            return read is not None and SetRel.SetOp.Name(rel.set.op).removeprefix("SET_OP_") not in read
        return SetRel.SetOp.Name(rel.set.op).removeprefix("SET_OP_") not in ops

    return test


#: What an engine reads past, answering as if it were not there, by name: each a test of a relation.
_READ_PAST = {
    "window_offsets": (_offset_frames_not_in_rows_offsets,
                       "a window frame's offset other than a ROWS offset in the int64 offset field (DataFusion 55 "
                       "answers a RANGE offset as unbounded and fails on offset_expr)"),
    "post_join_filter": (lambda rel, kind: kind == "join" and rel.join.HasField("post_join_filter"),
                         "JoinRel.post_join_filter (it joins without it)"),
    # DuckDB 1.1.3 reads every SetRel as its distinct form: region UNION ALL region gave 5 rows, not 10
    "set_ops_as_distinct": (_set_ops_read_otherwise(frozenset({"UNION_DISTINCT", "MINUS_PRIMARY",
                                                               "INTERSECTION_PRIMARY"})),
                            "a set operation other than a distinct one (DuckDB 1.1.3 reads each as distinct: "
                            "region UNION ALL region, 5 rows)"),
    # DataFusion 55 reads EXCEPT ALL as EXCEPT and INTERSECT ALL as a semi join
    "set_ops_all": (_set_ops_read_otherwise("datafusion"),
                    "MINUS_PRIMARY_ALL, MINUS_MULTISET and INTERSECTION_MULTISET_ALL (DataFusion 55 reads EXCEPT "
                    "ALL as EXCEPT, INTERSECT ALL as a semi join)"),
    # DataFusion 55 answered 5 of 55 correlated subqueries of another producer wrong, with no error (NOT (v >=
    # (SELECT COUNT(*) ... WHERE b.k = a.k)): 32 rows where SQL gives 4; found by the random SQL sweep)
    "outer_reference": (_outer_references, "a correlated subquery's reference to the enclosing row (DataFusion "
                                           "55 answered such plans wrong: 32 rows where SQL gives 4)"),
    "measure_filter": (lambda rel, kind: kind == "aggregate" and any(m.HasField("filter")
                                                                      for m in rel.aggregate.measures),
                       "AggregateRel.Measure.filter (count(*) FILTER (WHERE c0 = 0) over 0, 0, 1: 3)"),
    "grouping_sets": (lambda rel, kind: kind == "aggregate" and len(rel.aggregate.groupings) > 1,
                      "an aggregate's grouping sets after the first (DuckDB 1.1.3: 4 rows of a ROLLUP's 9, and "
                      "counts that mean other groups)"),
}


def refuse_unapplied_read_filters(plan: Plan, engine: str) -> None:
    """An UnsupportedError naming the first ``ReadRel.filter`` no ``FilterRel`` right above applies, for an
    engine that does not apply the read's filter: Acero reads every row (7 rows where the filter keeps 3),
    DataFusion 55 prunes Parquet row groups with it and returns the rest (4 rows where it keeps 3).
    DataFusion writes each read filter again above the read, which such an engine then applies."""
    from optimizer.expr_utils import rels_with_paths
    from optimizer.load.pipeline import load
    from optimizer.targets import as_target
    from optimizer.write.reads import adapt_reads

    filtered = [path for rel, path in rels_with_paths(plan)
                if rel.WhichOneof("rel_type") == "read" and rel.read.HasField("filter")]
    if not filtered:
        return
    copy = Plan()
    copy.CopyFrom(plan)
    # As for a target that prunes with the read's filter but does not apply it: each read whose filter no
    # filter above holds gets one, in its place.
    if adapt_reads(copy, as_target("datafusion"), load(plan).functions):
        now = {path: rel.WhichOneof("rel_type") for rel, path in rels_with_paths(copy)}
        path = next(p for p in filtered if now.get(p) == "filter")
        raise UnsupportedError(f"{engine} does not apply ReadRel.filter (it returns rows the filter drops) and "
                               f"no filter above applies it, so the plan is not given to it as written "
                               f"(optimize --target {engine} writes it in what {engine} reads)", path)


def refuse_read_past(plan: Plan, engine: str, constructs: tuple[str, ...]) -> None:
    """An UnsupportedError naming the first of ``constructs`` (keys of :data:`_READ_PAST`) in ``plan``:
    ``optimize --target <engine>`` writes the plan in what the engine reads, or refuses it."""
    from optimizer.expr_utils import rels_with_paths

    for rel, path in rels_with_paths(plan):
        kind = rel.WhichOneof("rel_type")
        for name in constructs:
            test, what = _READ_PAST[name]
            if test(rel, kind):
                raise UnsupportedError(f"{engine} reads past {what}, so the plan is not given to it as written "
                                       f"(optimize --target {engine} writes it in what {engine} reads, or "
                                       "refuses it by name)", path)


def check_fetch(fetch, path: str, engine: str) -> None:
    """Acero (pyarrow 26) and DuckDB 1.1.3 read a fetch's offset and count from Substrait 0.53's fields only
    (3 and 4), which default to 0: a count given as today's ``count_expr`` alone, or none (all rows), would
    return no row, an offset in ``offset_expr`` alone would be ignored. Their targets write both."""
    from optimizer.expr_utils import int_literal
    from optimizer.load.upgrade import _unknown

    old = {number for number, _, _ in _unknown(fetch)}

    def zero(name: str) -> bool:
        return fetch.HasField(name) and int_literal(getattr(fetch, name)) == 0

    if 4 not in old and not zero("count_expr"):
        raise UnsupportedError(f"{engine} does not support: a FetchRel's count given only in today's count_expr, "
                               "or none (it reads the deprecated count, 0 when absent, and would return no row)", path)
    if 3 not in old and fetch.HasField("offset_expr") and not zero("offset_expr"):
        raise UnsupportedError(f"{engine} does not support: a FetchRel's offset given only in today's offset_expr "
                               "(it reads the deprecated offset, and would skip no row)", path)


def plan_as_given(source: str) -> Plan:
    """The plan in the file ``source`` (``-``: stdin) as its bytes say, without the loader's upgrade to
    the current encoding: an engine gets what the file holds (a plan written for it by ``optimize
    --target``, or as its producer wrote it). Binary plans are read with the loader's depth and size
    limits (:func:`optimizer.plan_io.parse_binary`), JSON with protobuf's own JSON reader; the file's
    size is bounded by :func:`optimizer.load.limits.current`. Anything else is a PlanError naming the file.

    A plan written as JSON keeps only the fields today's bindings know: a plan written for DuckDB 1.1.3
    (which reads fields of its own Substrait version) keeps all of them only in binary form."""
    import sys

    from google.protobuf import json_format

    from optimizer.load.limits import current
    from optimizer.plan_io import parse_binary

    name = "<stdin>" if source == "-" else source
    limit = current().input_bytes
    try:
        if source == "-":
            data = sys.stdin.buffer.read(limit + 1)
        else:
            with open(source, "rb") as f:
                data = f.read(limit + 1)
    except FileNotFoundError:
        raise PlanError("no such file", name) from None
    except IsADirectoryError:
        raise PlanError("is a directory, not a plan file", name) from None
    except (OSError, ValueError) as exc:  # ValueError: a NUL in the name
        raise PlanError(f"cannot read: {getattr(exc, 'strerror', None) or exc}", name) from None
    if len(data) > limit:
        raise current().exceeded("input_bytes", f"the plan is larger than {limit} bytes", name)
    if not data.strip():
        raise PlanError("empty input: no plan", name)
    if data.removeprefix(b"\xef\xbb\xbf").lstrip()[:1] in (b"{", b"["):  # a UTF-8 byte order mark first
        try:
            return json_format.Parse(data.decode("utf-8-sig"), Plan())
        except (json_format.ParseError, UnicodeDecodeError, RecursionError) as exc:
            raise PlanError(f"not a Substrait plan in this version's JSON: {_one_line(str(exc), 200)}",
                            name) from None
    return parse_binary(data, name)


def case_renames(table: BoundTable, data_names: list[str]) -> dict[str, str]:
    """``{column in the data: name the plan gives it}`` for the columns the plan spells in another
    case than the data (Isthmus' ``L_ORDERKEY`` for ``l_orderkey``); the Spark backend matches such
    names case-insensitively too. Empty when every name is found as written."""
    exact = set(data_names)
    folded: dict[str, list[str]] = {}
    for n in data_names:
        folded.setdefault(n.lower(), []).append(n)
    renames: dict[str, str] = {}
    for columns in table.columns:
        for name in columns:
            if not name or name in exact:
                continue
            matches = folded.get(name.lower(), [])
            if len(matches) != 1:
                continue  # not in the data (or ambiguous): the engine names the problem
            if renames.setdefault(matches[0], name) != name:
                raise UnsupportedError(f"table '{table.name}': the plan spells column '{matches[0]}' both "
                                       f"'{renames[matches[0]]}' and '{name}'")
    return renames


@dataclass(frozen=True)
class BoundTable:
    """A named table of the plan bound to its Parquet data: the names as the plan writes them, and
    the file or folder."""

    names: tuple[str, ...]
    location: str
    #: the top-level column names of each distinct ``base_schema`` the plan reads the table with
    columns: tuple[tuple[str, ...], ...] = ()

    @property
    def name(self) -> str:
        return self.names[-1]

    def parquet_files(self) -> list[str]:
        """The Parquet files of the table (a folder: its ``*.parquet`` files, in name order)."""
        path = Path(self.location)
        if path.is_dir():
            return sorted(str(p) for p in path.rglob("*.parquet") if p.is_file())
        return [str(path)]


def _arrow_kind(t) -> str | None:
    """The kind (:data:`optimizer.schema.types.TYPE_GROUPS`) of values of the Arrow type ``t``; None for
    one the comparison leaves alone."""
    import pyarrow.types as at

    for kind, test in (("numeric", lambda x: at.is_integer(x) or at.is_floating(x) or at.is_decimal(x)),
                       ("text", lambda x: at.is_string(x) or at.is_large_string(x)),
                       ("binary", lambda x: at.is_binary(x) or at.is_large_binary(x) or at.is_fixed_size_binary(x)),
                       ("boolean", at.is_boolean),
                       ("temporal", lambda x: at.is_date(x) or at.is_time(x) or at.is_timestamp(x)),
                       ("interval", lambda x: at.is_interval(x) or at.is_duration(x)),
                       ("list", lambda x: at.is_list(x) or at.is_large_list(x) or at.is_fixed_size_list(x)),
                       ("map", at.is_map), ("struct", at.is_struct)):
        if test(t):
            return kind
    return None


def stored_types(table: BoundTable) -> dict[str, Any]:
    """Lower-case column name -> Arrow type of the table's data (its first file's footer: a folder's files
    share one schema); empty for a folder without files."""
    import pyarrow.parquet as pq

    files = table.parquet_files()
    return {field.name.lower(): field.type for field in pq.read_schema(files[0])} if files else {}


def check_column_kinds(table: BoundTable, data: dict[str, Any], columns: tuple[str, ...], types, path: str) -> None:
    """A PlanError when a column the read declares is of another kind of value than the table's data holds
    (a string declared over integers): an engine reads the data's values as they are, whatever the plan
    declares, and answers the plan's comparisons and calls by its own implicit casts. The Spark backend
    refuses it alike (:mod:`optimizer.spark.tables`). Widths are not compared: producers declare ``i32``
    over ``i64`` data (Isthmus) and an engine reads the values whole. ``data``: :func:`stored_types`."""
    from optimizer.schema.calls import argument_kind
    from optimizer.schema.types import type_name

    if len(types) != len(columns):
        return
    for i, (name, declared) in enumerate(zip(columns, types, strict=True)):
        stored = data.get(name.lower())
        kinds = (_arrow_kind(stored) if stored is not None else None), argument_kind(declared)
        if None in kinds or kinds[0] == kinds[1] or {"binary", "uuid"} == set(kinds):
            continue
        raise PlanError(f"column '{name}' of table '{table.name}' is {stored} in the data but "
                        f"{type_name(declared, False)} in the plan", f"{path}.struct.types[{i}]")


class EngineRunner:
    """Runs Substrait plans on one engine over Parquet tables; subclasses implement :meth:`_execute`.

    ``tables``: a directory of ``<name>.parquet`` files or folders, or a mapping ``{name: path}``.
    ``files``: which files a plan may read (default: anywhere, as for a caller's own code; the CLI
    confines to ``--tables``).
    """

    #: the engine's name, as ``--engine`` spells it
    name = ""
    #: the Python module the engine is (imported at construction, so that a missing package fails before
    #: any run), and the extra that installs it
    module = ""
    extra = ""

    def __init__(self, tables: str | os.PathLike | Mapping[str, Any] | None = None, *,
                 files: FileAccess | None = None, ignore_best_effort_filter: bool = False) -> None:
        self.tables = tables
        self.files = files if files is not None else FileAccess.anywhere()
        self.ignore_best_effort_filter = ignore_best_effort_filter
        self.directory: Path | None = None
        self.mapping: dict[str, str] = {}
        if isinstance(tables, Mapping):
            self.mapping = {str(k).lower(): os.fspath(v) for k, v in tables.items()}
        elif tables is not None:
            text = os.fspath(tables)
            if re.match(r"^[A-Za-z][A-Za-z0-9+.-]+://", text) and not text.lower().startswith("file:"):
                raise UnsupportedError(f"the {self.name} engine reads local tables only, not {text}")
            if text.lower().startswith("file:"):
                from optimizer.paths import normalise

                text = normalise(text)
            self.directory = Path(text)
        #: seconds the last :meth:`execute` took in the engine (binding tables excluded)
        self.last_seconds: float | None = None
        self._engine_seconds: float | None = None  # set by a runner that measures the engine itself
        if self.module:
            try:
                importlib.import_module(self.module)
            except ImportError as exc:
                raise missing_package(self.name, self.extra, exc) from None

    # -- tables

    def _where(self) -> str:
        return ", ".join(table_places(self.mapping, self.directory)) or "nowhere: no tables given"

    def _find(self, names: tuple[str, ...], path: str) -> str:
        for key in (".".join(names).lower(), names[-1].lower()):
            if key in self.mapping:
                return self.mapping[key]
        found = table_in_directory(self.directory, names[-1]) if self.directory is not None else None
        if found is not None:
            return str(found)
        raise PlanError(f"table '{'.'.join(names)}' not found (looked in {self._where()})", path)

    def bind(self, plan: Plan) -> dict[tuple[str, ...], BoundTable]:
        """The named tables of ``plan``, bound (``{names as written: table}``); the ``local_files`` it
        reads checked against the file access."""
        bound: dict[tuple[str, ...], BoundTable] = {}
        stored: dict[str, dict[str, Any]] = {}  # location -> its columns' types: one footer per table
        for read, path in read_rels(plan):
            kind = read.WhichOneof("read_type")
            if kind == "named_table":
                names = tuple(read.named_table.names)
                if not names or not all(names):
                    raise PlanError("named_table has no names (or an empty one)", f"{path}.named_table")
                if names not in bound:
                    location = self.files.check(self._find(names, f"{path}.named_table"), f"{path}.named_table")
                    bound[names] = BoundTable(names, location)
                columns = tuple(top_level_names(read.base_schema, f"{path}.base_schema"))
                if columns not in bound[names].columns:
                    table = bound[names]
                    bound[names] = BoundTable(names, table.location, (*table.columns, columns))
                table = bound[names]
                if table.location not in stored:
                    stored[table.location] = stored_types(table)
                check_column_kinds(table, stored[table.location], columns, read.base_schema.struct.types,
                                   f"{path}.base_schema")
            elif kind == "local_files":
                for i, item in enumerate(read.local_files.items):
                    which = item.WhichOneof("path_type")
                    if which is None:
                        raise PlanError("a local_files item names no file", f"{path}.local_files.items[{i}]")
                    self.files.check(getattr(item, which), f"{path}.local_files.items[{i}].{which}")
        return bound

    # -- running

    def prepared(self, plan: Plan) -> Plan:
        """The plan the engine gets: ``plan`` itself, or a copy without best-effort filters."""
        if not self.ignore_best_effort_filter:
            return plan
        copy = Plan()
        copy.CopyFrom(plan)
        for read, _ in read_rels(copy):
            read.ClearField("best_effort_filter")
        return copy

    def _ready(self, plan: Plan | bytes) -> tuple[bytes, dict[tuple[str, ...], BoundTable]]:
        """``plan`` as the bytes the engine gets, and its tables bound (checked first: :meth:`check`)."""
        if isinstance(plan, bytes | bytearray | memoryview):
            message = Plan()
            try:
                message.ParseFromString(bytes(plan))
            except DecodeError as exc:
                raise PlanError(f"not a binary Substrait plan: {exc}") from None
            plan = message
        if not isinstance(plan, Plan):
            raise TypeError(f"expected a substrait Plan or its bytes, got {type(plan).__name__}")
        tables = self.bind(plan)
        self.check(plan)
        return self.prepared(plan).SerializeToString(), tables

    def execute(self, plan: Plan | bytes):
        """The answer of ``plan`` as a ``pyarrow.Table``. The plan goes to the engine as given: a
        ``Plan`` message, or the bytes of a binary one, in whatever encoding it has (a plan written
        for the engine, or as a producer wrote it; :func:`optimizer.plan_io.load_plan` would convert
        an older encoding into the current one, which is not what every engine reads)."""
        data, tables = self._ready(plan)
        self._engine_seconds = None
        start = time.perf_counter()
        table = self._execute(data, tables)
        self.last_seconds = self._engine_seconds if self._engine_seconds is not None else time.perf_counter() - start
        return table

    def engine_plan(self, plan: Plan | bytes) -> str:
        """The physical plan the engine makes of ``plan``, as the engine prints it (nothing runs). Two
        plans the engine plans alike run alike: a difference in their times is the machine's."""
        data, tables = self._ready(plan)
        return self._engine_plan(data, tables)

    def check(self, plan: Plan) -> None:
        """Refuse, before the engine sees it, a plan the engine is known to fail on unsafely."""

    def _execute(self, data: bytes, tables: dict[tuple[str, ...], BoundTable]):
        raise NotImplementedError

    def _engine_plan(self, data: bytes, tables: dict[tuple[str, ...], BoundTable]) -> str:
        # DuckDB's from_substrait is a table function whose plan its EXPLAIN does not show; Acero prints none
        raise UnsupportedError(f"the {self.name} engine does not show its physical plan")

    def close(self) -> None:
        """Release the engine's session."""
