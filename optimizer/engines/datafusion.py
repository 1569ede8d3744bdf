"""Run Substrait plans on DataFusion 55 (``datafusion.substrait.Consumer``).

The named tables of the plan are registered in a ``SessionContext`` under the names the plan writes
(quoted, so ``LINEITEM`` stays upper case: DataFusion's consumer looks names up as written) over
their Parquet files; ``Serde.deserialize_bytes`` reads the plan and
``Consumer.from_substrait_plan(ctx, plan)`` makes the logical plan DataFusion optimizes and runs.
String columns are read as ``Utf8``, not ``Utf8View`` (``schema_force_view_types`` off), as the
producer side of the project does (workloads/producers.py).
"""

from __future__ import annotations

from optimizer.engines.base import (
    BoundTable,
    EngineRunner,
    case_renames,
    engine_failure,
    own_plan,
    refuse_legacy_projects,
    refuse_problems,
    refuse_read_past,
    refuse_target_refusals,
    refuse_unapplied_read_filters,
)
from optimizer.errors import UnsupportedError, plain_exceptions_as

__all__ = ["DataFusionRunner"]


#: What DataFusion says of a ``Rel`` whose kind its protobuf bindings lack (TopNRel): the kind is lost
#: in its decoding, so the runner names the plan's relation kinds instead.
_UNKNOWN_REL = "rel must set rel_type"


def _rel_kinds(data: bytes) -> list[str]:
    """The relation kinds of a binary plan, sorted."""
    from substrait.proto import Plan

    from optimizer.expr_utils import rels_with_paths

    plan = Plan()
    plan.ParseFromString(data)
    return sorted({rel.WhichOneof("rel_type") or "?" for rel, _ in rels_with_paths(plan)})


class DataFusionRunner(EngineRunner):
    """Executes Substrait plans on a DataFusion ``SessionContext`` of its own."""

    name = module = extra = "datafusion"

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self._ctx = None
        self._registered: dict[str, tuple[str, dict[str, str]]] = {}  # name -> (location, renames)

    def check(self, plan) -> None:
        """DataFusion 55 ends in a Rust panic (a Python traceback, the rest of a batch lost) on some plans:
        invalid ones (a field past its input, an unspecified sort direction), a CLUSTERED sort, a sort by a
        comparison function. It answers otherwise: a RANGE frame's offset (as unbounded), EXCEPT ALL and
        INTERSECT ALL, what its target refuses (docs/engines.md), a read's filter (it prunes with it and does
        not apply it: checked in :meth:`_execute`, once DataFusion has read the plan)."""
        refuse_problems(plan, "datafusion")
        refuse_legacy_projects(plan, "datafusion")
        refuse_read_past(plan, "datafusion", ("window_offsets", "set_ops_all"))
        refuse_target_refusals(plan, "datafusion")  # a CLUSTERED sort or one by a comparison function: panics
        if not own_plan(plan, "datafusion"):  # its own subqueries it reads as it wrote them
            refuse_read_past(plan, "datafusion", ("outer_reference",))
        # The read filters are checked once DataFusion has read the plan (_execute): a relation it does not
        # know is named first.

    def _context(self):
        if self._ctx is None:
            from datafusion import SessionConfig, SessionContext

            config = SessionConfig().set("datafusion.execution.parquet.schema_force_view_types", "false")
            self._ctx = SessionContext(config)
        return self._ctx

    def _register(self, table: BoundTable) -> None:
        import pyarrow.parquet as pq

        if len(table.names) > 1:
            raise UnsupportedError(
                f"the datafusion engine binds unqualified table names only, not '{'.'.join(table.names)}'")
        name = table.name
        files = table.parquet_files()
        renames = case_renames(table, pq.read_schema(files[0]).names) if files else {}
        if self._registered.get(name) == (table.location, renames):
            return
        ctx = self._context()
        quoted = '"' + name.replace('"', '""') + '"'
        if name in self._registered:
            ctx.deregister_table(quoted)
        with plain_exceptions_as(lambda exc: engine_failure("datafusion", exc, unsupported=False)):
            if not renames:
                ctx.register_parquet(quoted, table.location)
            else:  # the columns under the plan's spelling: DataFusion matches names case-sensitively
                from datafusion import col

                df = ctx.read_parquet(table.location)
                df = df.select(*(col(f'"{n}"').alias(renames.get(n, n)) for n in df.schema().names))
                ctx.register_view(quoted, df)
        self._registered[name] = (table.location, renames)

    def _frame(self, data: bytes, tables: dict[tuple[str, ...], BoundTable], act, read=None):
        """``act(frame)`` of the DataFusion DataFrame the consumer makes of the plan, its errors named;
        ``read()``, when given, once the consumer has read the plan, before ``act``."""
        from datafusion.substrait import Consumer, Serde

        for table in tables.values():
            self._register(table)
        ctx = self._context()
        def failure(exc: Exception) -> Exception:
            if _UNKNOWN_REL in str(exc):
                return UnsupportedError(
                    f"datafusion does not support: a relation its Substrait version does not know "
                    f"(it says '{_UNKNOWN_REL}'; the plan has {', '.join(_rel_kinds(data))})")
            return engine_failure("datafusion", exc)

        with plain_exceptions_as(failure):
            plan = Serde.deserialize_bytes(data)
            logical = Consumer.from_substrait_plan(ctx, plan)
        if read is not None:
            read()
        with plain_exceptions_as(failure):
            return act(ctx.create_dataframe_from_logical_plan(logical))

    def _execute(self, data: bytes, tables: dict[tuple[str, ...], BoundTable]):
        return self._frame(data, tables, lambda frame: _month_day_nano_intervals(frame).to_arrow_table(),
                           read=lambda: _refuse_unapplied_read_filters(data))

    def _engine_plan(self, data: bytes, tables: dict[tuple[str, ...], BoundTable]) -> str:
        return self._frame(data, tables, lambda frame: str(frame.execution_plan().display_indent()))

    def close(self) -> None:
        self._ctx = None
        self._registered.clear()


#: Arrow's interval types pyarrow holds but cannot give as Python values or compare (``to_pylist`` of an
#: ``interval[day_time]`` column: KeyError 22): DataFusion gives an ``interval_day_to_second`` or
#: ``interval_year_to_month`` literal one of them.
_UNREADABLE_INTERVALS = ("day_time_interval", "month_interval")


def _month_day_nano_intervals(frame):
    """``frame`` with each column of an interval type pyarrow cannot read cast to ``month_day_nano``, the
    interval type DuckDB and Spark give (the same months, days and time; DataFusion casts between them)."""
    import pyarrow as pa
    from datafusion import col

    schema = frame.schema()
    if not any(str(f.type) in _UNREADABLE_INTERVALS for f in schema):
        return frame
    columns = [col(f'"{f.name}"') for f in schema]
    return frame.select(*(c.cast(pa.month_day_nano_interval()) if str(f.type) in _UNREADABLE_INTERVALS else c
                          for c, f in zip(columns, schema, strict=True)))


def _refuse_unapplied_read_filters(data: bytes) -> None:
    """DataFusion 55 prunes Parquet row groups with ``ReadRel.filter`` and returns the rest: a read filter
    no filter above applies is refused. DataFusion's own plans apply each one above the read again, at
    times through a project of its common subexpressions (TPC-DS Q11, Q13, Q41, Q74), which the check
    cannot match to the read's filter: they are trusted, as DataFusion reads them."""
    from substrait.proto import Plan

    plan = Plan.FromString(data)
    if plan.version.producer.strip().lower() != "datafusion":
        refuse_unapplied_read_filters(plan, "datafusion")

