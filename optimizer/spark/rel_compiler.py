"""What compiling every Substrait relation to Spark shares: :class:`Relation` (the compiled form) and
:class:`_RelCompiler` (one plan's compilation: fresh names, scopes, emits, dispatch by relation kind,
shared subtrees). The relations themselves are compiled by its subclasses, one module per kind of
relation, assembled in :class:`optimizer.spark.backend._PlanCompiler`.

How relations are compiled
--------------------------

Every relation compiles to a :class:`Relation`: a DataFrame plus its column names, which are fresh,
unique names (``_c<n>``, from a counter shared by everything the backend compiles) listed in the
Substrait output order. Field references are therefore always resolved by position on the Substrait
schema and never by a name from the plan; two inputs of a join that share names (a ``ReferenceRel``
joined with itself) have one side renamed first. ``common.emit.output_mapping`` is applied on every
relation (a column emitted twice gets a second name). ``RelRoot.names`` are applied at the very end
(nested struct field names included, :mod:`optimizer.spark.root_names`); Spark allows duplicate names
there and :meth:`SparkBackend.execute <optimizer.spark.backend.SparkBackend.execute>` copes.

Expressions are compiled by :class:`optimizer.spark.expressions.ExpressionCompiler` over a
:class:`~optimizer.spark.expressions.Scope`; its ``subquery`` callback is :meth:`_RelCompiler.subquery`,
which compiles a whole ``Rel`` tree with the enclosing scope available for outer references and returns
``(DataFrame, column names)``. The Substrait types of the scope columns come from
:func:`optimizer.schema.plan_schemas` when it can derive them (else ``None``).

Notes on how the relation half uses the expression interface:

* The scope of a join condition (``JoinRel.expression``, ``residual_expression``, nested-loop
  expressions) has ``columns`` = left columns + right columns and ``df`` = ``left.crossJoin(right)``
  (lazy, never executed: it only serves type lookups).
* Inside a subquery every relation is compiled with ``Scope.outer`` set to the enclosing scope. Such
  DataFrames cannot be analysed on their own (outer references resolve only inside the enclosing
  query): anything that forces analysis (``df.schema``, ``groupBy``, ``toDF``) fails there, so the
  relation half avoids it for the common cases (a global aggregate is a ``select`` of aggregates) and
  ``ExpressionCompiler.spark_type_of`` returns None.
* ``Scope.types`` come from :func:`optimizer.schema.plan_schemas` (keyed by relation path); ``None``
  when the schema cannot be derived.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any, Protocol

from google.protobuf.message import Message
from pyspark.errors import PySparkException
from substrait.proto import Expression, Rel, Type

from optimizer.errors import ExecutionError, OptimizerError, PlanError, UnsupportedError
from optimizer.expr_utils import walk
from optimizer.load.functions import FunctionTable
from optimizer.load.pipeline import LoadedPlan
from optimizer.spark.expressions import ExpressionCompiler, Scope, quote
from optimizer.spark.failures import _first_line
from optimizer.spark.sql import Context, Frame, render
from optimizer.spark.sql_columns import Col
from optimizer.spark.sql_columns import functions as F
from optimizer.spark.tables import TableResolver


def _c(name: str) -> Col:
    return F.col(quote(name))


def _and(columns: Sequence[Col]) -> Col | None:
    out = None
    for c in columns:
        out = c if out is None else out & c
    return out


def _or(columns: Sequence[Col]) -> Col | None:
    out = None
    for c in columns:
        out = c if out is None else out | c
    return out


@dataclass
class Relation:
    """A compiled relation: its query and its columns (unique names, Substrait order)."""

    df: Frame
    columns: list[str]
    types: list[Type] | None = None  # Substrait types of the columns, when known
    broadcast: bool = False  # output of an ExchangeRel broadcast: joins broadcast this side
    ordered: bool = False  # the DataFrame is globally sorted (Sort/TopN below, order-preserving above)


class _Backend(Protocol):
    """What the compiler reads of its :class:`~optimizer.spark.backend.SparkBackend` (which imports the
    compiler, so it is not named here)."""

    spark: Any
    tables: TableResolver
    ignore_best_effort_filter: bool

    def ansi_mode(self) -> bool: ...


class _RelCompiler:
    """One plan's compilation (keeps the plan's function table and shared subtrees): :meth:`rel`
    dispatches each relation to its ``_rel_<kind>`` method, which the subclasses define."""

    def __init__(self, backend: _Backend, loaded: LoadedPlan) -> None:
        self.backend = backend
        self.spark = backend.spark
        self.ctx = Context(backend.spark)
        self._counter = itertools.count()
        self.plan = loaded.plan
        self.functions: FunctionTable = loaded.functions
        self.references: dict[int, Relation] = {}
        self._in_progress: set[int] = set()
        self._once: set[int] | None = None
        self.root: Rel | None = None  # the root relation compiled (its shared relations computed once)
        self.schemas: dict = {}
        try:  # Substrait types for the scopes; the backend works without them
            self.schemas = loaded.schemas
        except OptimizerError:  # a plan whose types cannot be derived: types unknown
            self.schemas = {}
        self.exprs = ExpressionCompiler(self.functions, self.subquery, self.schemas, ansi=backend.ansi_mode())

    def fresh(self) -> str:
        """A column name never handed out before in this plan's query."""
        return f"_c{next(self._counter)}"

    # ------------------------------------------------------------------------------------ helpers

    def scope(self, r: Relation, outer: Scope | None, df: Frame | None = None) -> Scope:
        return Scope(df if df is not None else r.df, list(r.columns), list(r.types) if r.types else r.types, outer)

    def expr(self, e: Expression, scope: Scope, path: str) -> Col:
        return self.exprs.compile(e, scope, path)

    def subquery(self, rel: Rel, outer: Scope, path: str) -> tuple:
        """The callback of the expression compiler: a whole ``Rel`` tree, ``outer`` for outer references."""
        r = self.rel(rel, path, outer)
        if r.types is not None:  # known types spare Spark an analysis of the subquery
            return r.df, list(r.columns), list(r.types)
        return r.df, list(r.columns)

    def _types_at(self, path: str, n: int) -> list[Type] | None:
        schema = self.schemas.get(path)
        if schema is None or len(schema.types) != n:
            return None
        return list(schema.types)

    def _positions(
        self, columns: list[str], exprs: dict[str, Col], positions: Sequence[int], path: str, what: str
    ) -> tuple[list[Col], list[str]]:
        """The select list of the columns at ``positions`` (a repeated position gets a new name);
        ``exprs`` gives the expression of a column that is computed rather than taken from the input."""
        n = len(columns)
        seen: set[str] = set()
        cols, names = [], []
        for p in positions:
            if not 0 <= p < n:
                raise PlanError(f"{what} {p} is out of range: the input has {n} columns", path)
            name = columns[p]
            if name in seen:
                new = self.fresh()
                cols.append(_c(name).alias(new) if name not in exprs else exprs[name].alias(new))
                names.append(new)
            else:
                seen.add(name)
                cols.append(exprs[name].alias(name) if name in exprs else _c(name))
                names.append(name)
        return cols, names

    def select_positions(self, r: Relation, positions: Sequence[int], path: str, what: str) -> Relation:
        """The columns at ``positions`` (a repeated position gets a new name)."""
        cols, names = self._positions(r.columns, {}, positions, path, what)
        if names == r.columns:
            return r
        types = [r.types[p] for p in positions] if r.types is not None else None
        return replace(r, df=r.df.select(*cols), columns=names, types=types)

    def _emit(self, r: Relation, body, bpath: str) -> Relation:
        if not body.HasField("common") or body.common.WhichOneof("emit_kind") != "emit":
            return r
        mapping = list(body.common.emit.output_mapping)
        return self.select_positions(r, mapping, f"{bpath}.common.emit.output_mapping", "emitted field")

    def _disjoint(self, left: Relation, right: Relation) -> Relation:
        """``right`` with fresh names if it shares any with ``left`` (a self-join)."""
        if not set(left.columns) & set(right.columns):
            return right
        names = [self.fresh() for _ in right.columns]
        df = right.df.select(*[_c(c).alias(n) for c, n in zip(right.columns, names, strict=True)])
        return replace(right, df=df, columns=names)

    def _const_int(self, e: Expression, path: str, what: str) -> int | None:
        """The value of a constant integer expression (None for null)."""
        if e.WhichOneof("rex_type") == "literal":
            lit = e.literal
            kind = lit.WhichOneof("literal_type")
            if kind in ("i8", "i16", "i32", "i64"):
                return int(getattr(lit, kind))
            if kind == "null":
                return None
        one = Frame.one_row(self.ctx)
        col = self.expr(e, Scope(one, [], [], None), path)
        text, tables = render(one.select(col.alias("v")))
        try:
            value = self.spark.sql(text, **tables).first()["v"]
        except PySparkException as exc:
            raise PlanError(f"{what} is not a constant integer expression: {_first_line(exc)}", path) from None
        if value is None:
            return None
        if isinstance(value, bool) or not isinstance(value, int):
            raise PlanError(f"{what} must be an integer, not {type(value).__name__}", path)
        return int(value)

    def _ref_index(self, ref: Expression.FieldReference, path: str) -> int:
        if (
            ref.WhichOneof("reference_type") != "direct_reference"
            or ref.WhichOneof("root_type") not in (None, "root_reference")
            or ref.direct_reference.WhichOneof("reference_type") != "struct_field"
            or ref.direct_reference.struct_field.HasField("child")
        ):
            raise UnsupportedError("only references to top-level input fields are supported here", path)
        return ref.direct_reference.struct_field.field

    # ----------------------------------------------------------------------------------- dispatch

    def rel(self, rel: Rel, path: str, outer: Scope | None) -> Relation:
        """Compile one relation tree rooted at ``rel`` (found at ``path``)."""
        kind = rel.WhichOneof("rel_type")
        if kind is None:
            raise PlanError("relation is empty (no rel_type set)", path)
        bpath = f"{path}.{kind}"
        handler = getattr(self, f"_rel_{kind}", None)
        if handler is None:
            raise UnsupportedError(f"unsupported relation '{kind}'", bpath)
        body = getattr(rel, kind)
        try:
            out = handler(body, bpath, outer)
            if kind not in ("reference", "project"):  # a project applies its emit itself
                out = self._emit(out, body, bpath)
        except OptimizerError:
            raise
        except PySparkException as exc:  # a table Spark cannot read, a type it cannot analyse
            raise ExecutionError(f"Spark cannot build this relation: {_first_line(exc)}", bpath) from None
        types = self._types_at(path, len(out.columns))
        if types is not None:
            out = replace(out, types=types)
        elif out.types is not None and len(out.types) != len(out.columns):
            out = replace(out, types=None)
        return out

    # --------------------------------------------------------------------------------- reference

    def _rel_reference(self, body, bpath: str, outer: Scope | None) -> Relation:
        ordinal = body.subtree_ordinal
        if not 0 <= ordinal < len(self.plan.relations):
            raise PlanError(
                f"subtree ordinal {ordinal} is out of range (the plan has {len(self.plan.relations)} relations)",
                f"{bpath}.subtree_ordinal",
            )
        if ordinal in self.references:
            return replace(self.references[ordinal])
        if ordinal in self._in_progress:
            raise PlanError(f"reference cycle through relations[{ordinal}]", f"{bpath}.subtree_ordinal")
        entry = self.plan.relations[ordinal]
        which = entry.WhichOneof("rel_type")
        if which == "root":
            rel, path = entry.root.input, f"relations[{ordinal}].root.input"
        elif which == "rel":
            rel, path = entry.rel, f"relations[{ordinal}].rel"
        else:
            raise PlanError("plan relation is neither a root nor a rel", f"relations[{ordinal}]")
        self._in_progress.add(ordinal)
        try:
            out = self.rel(rel, path, None)
        finally:
            self._in_progress.discard(ordinal)
        if ordinal in self._computed_once() and not out.ordered and out.columns:
            out = replace(out, df=Frame.computed_once(self.ctx, out.df, out.columns))
        self.references[ordinal] = out
        return replace(out)

    def _computed_once(self) -> set[int]:
        """The plan relations the query computes once (:meth:`Frame.computed_once`): those it reads more
        than once, every reference expanded, that read no plan relation themselves. A shared relation
        over another is written where it is read: Spark fails some plans whose non-inlined CTEs read
        each other (its CTE column pruning loses a column), so such CTEs are never nested."""
        if self._once is None:
            direct = {}  # ordinal -> {ordinal it reads: how often}, over its tree without expanding

            def reads(message: Message) -> dict[int, int]:
                counts: dict[int, int] = {}
                for m in walk(message, enter_subqueries=True):
                    if isinstance(m, Rel) and m.WhichOneof("rel_type") == "reference":
                        counts[m.reference.subtree_ordinal] = counts.get(m.reference.subtree_ordinal, 0) + 1
                return counts

            for i, entry in enumerate(self.plan.relations):
                if entry.WhichOneof("rel_type") == "rel":
                    direct[i] = reads(entry.rel)
            # How often each relation is read with every reference expanded, from the root compiled
            # (plan relations in the order they are reached; a cycle is refused where it is compiled).
            total: dict[int, int] = {}
            frontier = reads(self.root) if self.root is not None else {}
            for _ in range(len(self.plan.relations) + 1):
                if not frontier:
                    break
                following: dict[int, int] = {}
                for ordinal, n in frontier.items():
                    total[ordinal] = total.get(ordinal, 0) + n
                    for inner, m in direct.get(ordinal, {}).items():
                        following[inner] = following.get(inner, 0) + n * m
                frontier = following
            self._once = {o for o, n in total.items() if n > 1 and o in direct and not direct[o]}
        return self._once
