"""The official Substrait function test cases (``substrait-extensions``' ``testcases/**/*.test``) run on
the Spark backend.

Every case becomes a Substrait plan fragment: a scalar case an expression of literals in a ``ProjectRel``
over a one-row ``VirtualTable`` (compiled file by file, to find the unsupported ones; then run
:data:`BATCH` expressions per Spark query), an aggregate case an ``AggregateRel`` over a ``VirtualTable``
of its input rows (cases with the same input columns in one table, grouped by case number, one measure
per distinct call: one Spark query), an error case a plan of its own. The plans go through
``SparkBackend.execute`` like any other plan. A value case passes when the result equals the expected
value and has the expected type; an error case passes when execution fails with the backend's
``ExecutionError``; ``<!UNDEFINED>`` results are not checked.

Every case that does not pass is listed in docs/semantics.md ("Official function test cases") under its
reason; the test asserts that list exactly: a listed case that passes, or a failure that is not listed,
fails the test.
"""

from __future__ import annotations

import datetime as dt
import decimal
import functools
import math
import re
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from function_cases import Arg, FunctionCase, SType, all_cases, case_files
from substrait.extension_registry import ExtensionRegistry
from substrait.proto import (
    AggregateFunction,
    AggregateRel,
    AggregationPhase,
    Expression,
    FunctionArgument,
    FunctionOption,
    NamedStruct,
    Plan,
    PlanRel,
    ProjectRel,
    ReadRel,
    Rel,
    RelCommon,
    RelRoot,
    SimpleExtensionDeclaration,
    SimpleExtensionURN,
    Type,
)

from optimizer.errors import ExecutionError, PlanError, UnsupportedError
from optimizer.schema.types import make_type
from optimizer.spark import SparkBackend

pytestmark = pytest.mark.spark

DOC = Path(__file__).resolve().parent.parent / "docs" / "semantics.md"
SECTION = "## Official function test cases"

L = Expression.Literal
_REQ = Type.NULLABILITY_REQUIRED
_NUL = Type.NULLABILITY_NULLABLE
_EPOCH = dt.datetime(1970, 1, 1)
_EPOCH_TZ = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)


class NotBuildable(Exception):
    """A case this harness cannot write as a Substrait plan."""


# ------------------------------------------------------------------------------------------- types


_SIMPLE_KINDS = {**{k: k for k in ("i8", "i16", "i32", "i64", "fp32", "fp64", "bool", "date")},
                 "str": "string", "iyear": "interval_year"}
_LENGTH_KINDS = {"vchar": "varchar", "fchar": "fixed_char"}
_PRECISION_KINDS = {"pts": "precision_timestamp", "ptstz": "precision_timestamp_tz", "pt": "precision_time",
                    "iday": "interval_day"}


def proto_type(t: SType, nullable: bool | None = None) -> Type:
    n = _NUL if (t.nullable if nullable is None else nullable) else _REQ
    null = n == _NUL
    p = t.params
    if t.name in _SIMPLE_KINDS:
        return make_type(_SIMPLE_KINDS[t.name], null)
    if t.name == "dec":
        precision, scale = (p[0], p[1]) if len(p) == 2 else (38, 0)
        return make_type("decimal", null, precision=precision, scale=scale)
    if t.name in _LENGTH_KINDS:
        return make_type(_LENGTH_KINDS[t.name], null, length=p[0])
    if t.name in _PRECISION_KINDS:
        return make_type(_PRECISION_KINDS[t.name], null, precision=p[0] if p else 6)
    if t.name == "list":
        return Type(list=Type.List(type=proto_type(p[0]), nullability=n))
    if t.name == "func":
        *ins, out = p
        return Type(
            func=Type.Func(
                parameter_types=[proto_type(x) for x in ins], return_type=proto_type(out), nullability=n
            )
        )
    if t.name.startswith("u!"):
        return Type(user_defined=Type.UserDefined(type_reference=_UNSIGNED.index(t.name) + 1, nullability=n))
    raise NotBuildable(f"type {t}")


_UNSIGNED = ["u!u8", "u!u16", "u!u32", "u!u64"]
_UNSIGNED_URN = "extension:io.substrait:unsigned_integers"


def _units(delta: dt.timedelta, precision: int) -> int:
    micros = (delta.days * 86400 + delta.seconds) * 10**6 + delta.microseconds
    return micros * 10**precision // 10**6 if precision >= 6 else micros // 10 ** (6 - precision)


def literal(value: Any, t: SType) -> Expression:
    """The Substrait literal of ``value`` of type ``t``."""
    if value is None:
        return Expression(literal=L(null=proto_type(t, nullable=True)))
    lit = _literal(value, t)
    lit.nullable = t.nullable
    return Expression(literal=lit)


def _literal(v: Any, t: SType) -> L:
    n, p = t.name, t.params
    if n in ("i8", "i16", "i32", "i64", "fp32", "fp64"):
        return L(**{n: v})
    if n == "bool":
        return L(boolean=v)
    if n == "str":
        return L(string=v)
    if n == "vchar":
        return L(var_char=L.VarChar(value=v, length=p[0]))
    if n == "fchar":
        return L(fixed_char=v)
    if n == "dec":
        precision, scale = (p[0], p[1]) if len(p) == 2 else (38, max(0, -v.as_tuple().exponent))
        unscaled = int(v.scaleb(scale, decimal.Context(prec=100)))
        return L(
            decimal=L.Decimal(
                value=unscaled.to_bytes(16, "little", signed=True), precision=precision, scale=scale
            )
        )
    if n == "date":
        return L(date=(v - dt.date(1970, 1, 1)).days)
    if n in ("pts", "ptstz"):
        precision = p[0] if p else 6
        units = _units((v - (_EPOCH_TZ if n == "ptstz" else _EPOCH)), precision)
        cls = L.PrecisionTimestamp
        return L(
            **{
                "precision_timestamp" if n == "pts" else "precision_timestamp_tz": cls(
                    precision=precision, value=units
                )
            }
        )
    if n == "pt":
        precision = p[0] if p else 6
        delta = dt.timedelta(hours=v.hour, minutes=v.minute, seconds=v.second, microseconds=v.microsecond)
        return L(precision_time=L.PrecisionTime(precision=precision, value=_units(delta, precision)))
    if n == "iyear":
        years = int(v / 12)
        return L(interval_year_to_month=L.IntervalYearToMonth(years=years, months=v - 12 * years))
    if n == "iday":
        precision = p[0] if p else 6
        micros = v.microseconds
        return L(
            interval_day_to_second=L.IntervalDayToSecond(
                days=v.days,
                seconds=v.seconds,
                precision=precision,
                subseconds=_units(dt.timedelta(microseconds=micros), precision),
            )
        )
    if n == "list":
        if not v:
            return L(empty_list=Type.List(type=proto_type(p[0]), nullability=_NUL if t.nullable else _REQ))
        return L(list=L.List(values=[literal(x, p[0]).literal for x in v]))
    if n.startswith("u!"):
        return L(user_defined=L.UserDefined(type_reference=_UNSIGNED.index(n) + 1))
    raise NotBuildable(f"literal of type {t}")


# ------------------------------------------------------------------------------------------- plans


class PlanBuilder:
    """Collects the extension declarations of the functions the fragments call."""

    def __init__(self) -> None:
        self.urns: dict[str, int] = {}
        self.functions: dict[tuple[str, str], int] = {}
        self.registry = _registry()

    def anchor(self, urn: str, name: str, arg_types: list[Type | None]) -> int:
        sig = name + ":" + "_".join(_sig(t) for t in arg_types) if arg_types else name
        key = (urn, sig)
        if key not in self.functions:
            self.urns.setdefault(urn, len(self.urns) + 1)
            self.functions[key] = len(self.functions) + 1
        return self.functions[key]

    def output_type(self, case: FunctionCase, types: list[Type | None]) -> Type:
        """The expected type when the case gives one, else the YAML's return type for these arguments."""
        if case.expected.kind == "value" and case.expected.type is not None:
            return proto_type(case.expected.type)
        sig = [t for t, a in zip(types, case.args, strict=True) if a.kind != "enum"]
        found = None
        try:
            found = self.registry.lookup_function(case.urn, case.function, sig)
        except (KeyError, ValueError, AttributeError, AssertionError, TypeError):
            found = None
        if found is not None:
            return found[1]
        if not sig:
            raise NotBuildable("no output type")
        return sig[0]

    def plan(self, rel: Rel, names: list[str]) -> Plan:
        plan = Plan(relations=[PlanRel(root=RelRoot(input=rel, names=names))])
        for urn, anchor in self.urns.items():
            plan.extension_urns.append(SimpleExtensionURN(extension_urn_anchor=anchor, urn=urn))
        for (urn, sig), anchor in self.functions.items():
            plan.extensions.append(
                SimpleExtensionDeclaration(
                    extension_function=SimpleExtensionDeclaration.ExtensionFunction(
                        extension_urn_reference=self.urns[urn], function_anchor=anchor, name=sig
                    )
                )
            )
        unsigned = len(self.urns) + 1  # the unsigned integer types, user-defined in their own extension
        plan.extension_urns.append(SimpleExtensionURN(extension_urn_anchor=unsigned, urn=_UNSIGNED_URN))
        for i, name in enumerate(_UNSIGNED):
            plan.extensions.append(
                SimpleExtensionDeclaration(
                    extension_type=SimpleExtensionDeclaration.ExtensionType(
                        extension_urn_reference=unsigned, type_anchor=i + 1, name=name[2:]
                    )
                )
            )
        return plan


@functools.cache
def _registry() -> ExtensionRegistry:
    return ExtensionRegistry(load_default_extensions=True)


def _sig(t: Type | None) -> str:
    if t is None:
        return "req"
    kind = t.WhichOneof("kind")
    return {
        "string": "str",
        "varchar": "vchar",
        "fixed_char": "fchar",
        "decimal": "dec",
        "precision_timestamp": "pts",
        "precision_timestamp_tz": "ptstz",
        "precision_time": "pt",
        "interval_year": "iyear",
        "interval_day": "iday",
        "user_defined": "u!",
    }.get(kind, kind)


def _lambda(b: PlanBuilder, case: FunctionCase, a: Arg) -> Expression:
    lam = a.value
    ptypes = list(a.type.params[:-1])
    args: list[FunctionArgument] = []
    types: list[Type | None] = []
    for x in lam.args:
        if x.kind == "param":
            seg = Expression.ReferenceSegment(
                struct_field=Expression.ReferenceSegment.StructField(field=x.value)
            )
            ref = Expression.FieldReference(
                direct_reference=seg,
                lambda_parameter_reference=Expression.FieldReference.LambdaParameterReference(steps_out=0),
            )
            args.append(FunctionArgument(value=Expression(selection=ref)))
            types.append(proto_type(ptypes[x.value]))
        else:
            args.append(FunctionArgument(value=literal(x.value, x.type)))
            types.append(proto_type(x.type))
    urn = "extension:io.substrait:functions_comparison"
    body = Expression(
        scalar_function=Expression.ScalarFunction(
            function_reference=b.anchor(urn, lam.function, types),
            arguments=args,
            output_type=proto_type(a.type.params[-1]),
        )
    )
    return Expression(
        **{
            "lambda": Expression.Lambda(
                parameters=Type.Struct(types=[proto_type(t) for t in ptypes], nullability=_REQ), body=body
            )
        }
    )


def _arguments(b: PlanBuilder, case: FunctionCase, column_base: int = 0):
    args: list[FunctionArgument] = []
    types: list[Type | None] = []
    for a in case.args:
        if a.kind == "enum":
            args.append(FunctionArgument(enum=a.value))
            types.append(None)
        elif a.kind == "lambda":
            if a.value is None:
                args.append(FunctionArgument(value=literal(None, a.type)))
            else:
                args.append(FunctionArgument(value=_lambda(b, case, a)))
            types.append(proto_type(a.type))
        elif a.kind == "column":
            seg = Expression.ReferenceSegment(
                struct_field=Expression.ReferenceSegment.StructField(field=column_base + a.column)
            )
            ref = Expression.FieldReference(
                direct_reference=seg, root_reference=Expression.FieldReference.RootReference()
            )
            args.append(FunctionArgument(value=Expression(selection=ref)))
            types.append(proto_type(a.type))
        else:
            args.append(FunctionArgument(value=literal(a.value, a.type)))
            types.append(proto_type(a.type))
    options = [FunctionOption(name=k, preference=[v]) for k, v in case.options]
    return args, types, options


def scalar_expression(b: PlanBuilder, case: FunctionCase) -> Expression:
    args, types, options = _arguments(b, case)
    return Expression(
        scalar_function=Expression.ScalarFunction(
            function_reference=b.anchor(case.urn, case.function, types),
            arguments=args,
            options=options,
            output_type=b.output_type(case, types),
        )
    )


def _one_row() -> Rel:
    i32 = Type(i32=Type.I32(nullability=_REQ))
    return Rel(
        read=ReadRel(
            base_schema=NamedStruct(names=["one"], struct=Type.Struct(types=[i32], nullability=_REQ)),
            virtual_table=ReadRel.VirtualTable(
                expressions=[Expression.Nested.Struct(fields=[Expression(literal=L(i32=1))])]
            ),
        )
    )


def scalar_rel(exprs: list[Expression]) -> Rel:
    emit = RelCommon(emit=RelCommon.Emit(output_mapping=[1 + i for i in range(len(exprs))]))
    return Rel(project=ProjectRel(common=emit, input=_one_row(), expressions=exprs))


def aggregate_rel(b: PlanBuilder, groups: list[list[FunctionCase]]) -> Rel:
    """One case (``[[case]]``): its aggregate over its rows. Otherwise: the rows of all cases in one
    table with a leading case number ``k`` (counted over all groups), grouped by ``k``, one measure per
    group (the cases of a group make the same call, see :func:`aggregate_key`; all have the same input
    columns); the output is ``k`` and the measures."""
    cases = [c for g in groups for c in g]
    case = cases[0]
    grouped = len(cases) > 1
    if any(t.name == "?" for t in case.columns):
        raise NotBuildable("input column without a type")
    key = [Type(i32=Type.I32(nullability=_REQ))] if grouped else []
    rows = []
    with_null: set[int] = set()  # the test files write (Null, 1)::i16: a column of i16 values, some null
    for k, c in enumerate(cases):
        for r in c.rows:
            fields = [literal(v, t) for v, t in zip(r, c.columns, strict=True)]
            with_null.update(i for i, f in enumerate(fields) if f.literal.WhichOneof("literal_type") == "null")
            if grouped:
                fields.insert(0, Expression(literal=L(i32=k)))
            rows.append(Expression.Nested.Struct(fields=fields))
    cols = key + [proto_type(t, nullable=True if i in with_null else None) for i, t in enumerate(case.columns)]
    read = Rel(
        read=ReadRel(
            base_schema=NamedStruct(
                names=(["k"] if grouped else []) + [f"col{i}" for i in range(len(case.columns))],
                struct=Type.Struct(types=cols, nullability=_REQ),
            ),
            virtual_table=ReadRel.VirtualTable(expressions=rows),
        )
    )
    agg = AggregateRel(input=read)
    for g in groups:
        args, types, options = _arguments(b, g[0], column_base=len(key))
        fn = AggregateFunction(
            function_reference=b.anchor(g[0].urn, g[0].function, types),
            arguments=args,
            options=options,
            output_type=b.output_type(g[0], types),
            phase=AggregationPhase.AGGREGATION_PHASE_INITIAL_TO_RESULT,
            invocation=AggregateFunction.AGGREGATION_INVOCATION_ALL,
        )
        agg.measures.append(AggregateRel.Measure(measure=fn))
    if grouped:
        agg.grouping_expressions.append(_field(0))
        agg.groupings.append(AggregateRel.Grouping(expression_references=[0]))
    return Rel(aggregate=agg)


def _field(i: int) -> Expression:
    seg = Expression.ReferenceSegment(struct_field=Expression.ReferenceSegment.StructField(field=i))
    return Expression(
        selection=Expression.FieldReference(
            direct_reference=seg, root_reference=Expression.FieldReference.RootReference()
        )
    )


def aggregate_key(c: FunctionCase) -> tuple:
    """Cases with the same key are the same call (function, argument types and enums, options, output
    type) on other rows: they run as one grouped aggregate. Cases without rows run on their own."""
    if not c.rows:
        return (c.id,)
    return (
        c.function,
        tuple((a.kind, a.value if a.kind == "enum" else None, str(a.type), a.column) for a in c.args),
        c.options,
        str(c.expected.type),
        tuple(map(str, c.columns)),
    )


# ------------------------------------------------------------------------------------------ running


@dataclass
class Outcome:
    passed: bool
    detail: str = ""


def _fragment_index(path: str | None) -> int | None:
    """Which expression of a batch projection a compile error's path points into."""
    m = re.search(r"\.project\.expressions\[(\d+)\]", path or "")
    return int(m.group(1)) if m else None


class Runner:
    def __init__(self, spark) -> None:
        self.backend = SparkBackend(spark)
        self.queries = 0

    def _plan(self, cases: list[FunctionCase]) -> Plan:
        b = PlanBuilder()
        if cases[0].test_kind == "scalar":
            return b.plan(
                scalar_rel([scalar_expression(b, c) for c in cases]), [f"r{i}" for i in range(len(cases))]
            )
        return self._aggregate_plan([cases])

    def _aggregate_plan(self, groups: list[list[FunctionCase]]) -> Plan:
        b = PlanBuilder()
        n = sum(len(g) for g in groups)
        names = (["k"] if n > 1 else []) + [f"r{i}" for i in range(len(groups))]
        return b.plan(aggregate_rel(b, groups), names)

    def compile(self, cases: list[FunctionCase], out: dict[str, Outcome]) -> list[FunctionCase]:
        """The scalar cases that compile; the others get their compile error (found through its path;
        when the path does not tell, case by case)."""
        todo = list(cases)
        while todo:
            try:
                self.backend.to_sql(self._plan(todo))  # the compiler's errors; Spark's come when it runs
                return todo
            except (UnsupportedError, PlanError) as exc:
                i = _fragment_index(exc.path)
                if i is None or i >= len(todo):
                    if len(todo) == 1:
                        out[todo[0].id] = Outcome(False, f"{type(exc).__name__}: {exc}")
                        return []
                    return [c for one in todo for c in self.compile([one], out)]
                out[todo[i].id] = Outcome(False, f"{type(exc).__name__}: {exc}")
                del todo[i]
        return todo

    def run(self, cases: list[FunctionCase], out: dict[str, Outcome]) -> None:
        """Value cases of one file: scalar cases in one projection (a compile error removes its case, a
        runtime error splits the batch), aggregate cases grouped by :func:`aggregate_key`."""
        if cases[0].test_kind == "aggregate":
            tables: dict[tuple, dict[tuple, list[FunctionCase]]] = {}
            for c in cases:
                table_key = tuple(map(str, c.columns)) if c.rows else (c.id,)
                tables.setdefault(table_key, {}).setdefault(aggregate_key(c), []).append(c)
            for groups in tables.values():
                self.run_aggregates(list(groups.values()), out)
            return
        todo = list(cases)
        while todo:
            plan = self._plan(todo)
            try:
                self.backend.to_sql(plan)
            except (UnsupportedError, PlanError) as exc:
                i = _fragment_index(exc.path)
                if i is None and len(todo) > 1:  # cannot tell which: one at a time
                    for c in todo:
                        self.run([c], out)
                    return
                out[todo[i or 0].id] = Outcome(False, f"{type(exc).__name__}: {exc}")
                del todo[i or 0]
                continue
            table = self._execute(plan, todo, out)
            if table is not None:
                for i, c in enumerate(todo):
                    out[c.id] = check(c, table.column(i).type, table.column(i).to_pylist())
            return

    def _execute(self, plan: Plan, todo: list[FunctionCase], out: dict[str, Outcome]) -> pa.Table | None:
        """The result table, or ``None`` when execution failed (each case then runs on its own)."""
        self.queries += 1
        try:
            return self.backend.execute(plan)
        except ExecutionError as exc:
            if len(todo) == 1:
                out[todo[0].id] = Outcome(False, f"ExecutionError: {exc}")
            else:  # halves, until the failing cases are alone
                self.run(todo[: len(todo) // 2], out)
                self.run(todo[len(todo) // 2 :], out)
            return None

    def run_aggregate(self, group: list[FunctionCase], out: dict[str, Outcome]) -> None:
        self.run_aggregates([group], out)

    def run_aggregates(self, groups: list[list[FunctionCase]], out: dict[str, Outcome]) -> None:
        """Aggregate cases over tables of the same columns: one query (if it fails, one per group, then
        one per case)."""
        cases = [c for g in groups for c in g]
        plan = self._aggregate_plan(groups)
        self.queries += 1
        try:
            table = self.backend.execute(plan)
        except (ExecutionError, UnsupportedError, PlanError) as exc:
            if len(groups) > 1:
                for g in groups:
                    self.run_aggregates([g], out)
            elif len(cases) > 1:
                for c in cases:
                    self.run_aggregates([[c]], out)
            else:
                out[cases[0].id] = Outcome(False, f"{type(exc).__name__}: {exc}")
            return
        if len(cases) == 1:
            out[cases[0].id] = check(cases[0], table.column(0).type, table.column(0).to_pylist())
            return
        keys = table.column(0).to_pylist()
        k = 0
        for m, g in enumerate(groups):
            results = dict(zip(keys, table.column(1 + m).to_pylist(), strict=True))
            for c in g:
                out[c.id] = check(c, table.column(1 + m).type, [results[k]] if k in results else [])
                k += 1

    def run_error(self, case: FunctionCase, out: dict[str, Outcome]) -> None:
        plan = self._plan([case])
        try:
            self.queries += 1
            table = self.backend.execute(plan)
        except ExecutionError as exc:
            out[case.id] = Outcome(True, str(exc))
            return
        except (UnsupportedError, PlanError) as exc:
            out[case.id] = Outcome(False, f"{type(exc).__name__}: {exc}")
            return
        out[case.id] = Outcome(False, f"no error: {table.column(0).to_pylist()}")


# ---------------------------------------------------------------------------------------- comparing


def arrow_type(t: SType) -> pa.DataType | None:
    n, p = t.name, t.params
    simple = {
        "i8": pa.int8(),
        "i16": pa.int16(),
        "i32": pa.int32(),
        "i64": pa.int64(),
        "fp32": pa.float32(),
        "fp64": pa.float64(),
        "bool": pa.bool_(),
        "str": pa.string(),
        "vchar": pa.string(),
        "fchar": pa.string(),
        "date": pa.date32(),
    }
    if n in simple:
        return simple[n]
    if n == "dec":
        return pa.decimal128(*(p if len(p) == 2 else (38, 0)))
    if n == "pts":
        return pa.timestamp("us")
    if n == "ptstz":
        return pa.timestamp("us", tz="UTC")
    if n == "iday":
        return pa.duration("us")
    if n == "list":
        elem = arrow_type(p[0])
        return None if elem is None else pa.list_(elem)
    return None


def _same_type(actual: pa.DataType, expected: pa.DataType | None) -> bool:
    if expected is None:
        return True
    if pa.types.is_large_string(actual) and pa.types.is_string(expected):
        return True
    if pa.types.is_timestamp(actual) and pa.types.is_timestamp(expected):
        return (actual.tz is None) == (expected.tz is None)
    if pa.types.is_list(actual) and pa.types.is_list(expected):
        return _same_type(actual.value_type, expected.value_type)
    return actual == expected


def _float_equal(actual: float, expected: float, t: SType) -> bool:
    """Floats: NaN and infinities exactly as written; finite values within the type's tolerance (fp32
    results within 4 units in the last place of an fp32, relative 4.8e-7; fp64 relative 1e-12)."""
    if math.isnan(expected) or math.isnan(actual):
        return math.isnan(expected) and math.isnan(actual)
    if math.isinf(expected) or math.isinf(actual):
        return actual == expected
    rel = 4.8e-7 if t.name == "fp32" else 1e-12
    return math.isclose(actual, expected, rel_tol=rel, abs_tol=1e-300)


def values_equal(actual: Any, expected: Any, t: SType) -> bool:
    if expected is None or actual is None:
        return expected is None and actual is None
    if t.name in ("fp32", "fp64"):
        return isinstance(actual, float) and _float_equal(actual, float(expected), t)
    if t.name == "list":
        return (
            isinstance(actual, list)
            and len(actual) == len(expected)
            and all(values_equal(a, e, t.params[0]) for a, e in zip(actual, expected, strict=True))
        )
    if t.name == "dec":
        return isinstance(actual, decimal.Decimal) and actual == expected
    return type(actual) is type(expected) and actual == expected


def check(case: FunctionCase, atype: pa.DataType, values: list) -> Outcome:
    e = case.expected
    if len(values) != 1:
        return Outcome(False, f"{len(values)} rows")
    got = values[0]
    if not _same_type(atype, arrow_type(e.type)):
        return Outcome(False, f"type {atype}, expected {e.type}")
    if values_equal(got, e.value, e.type):
        return Outcome(True)
    return Outcome(False, f"got {got!r}")


# --------------------------------------------------------------------------------- known exceptions


def documented_exceptions() -> dict[str, str]:
    """``{case id: reason}`` from the docs section: ``### reason`` headings, then lines starting with
    ``- `file.test:line` `` (one case) or ``- `file.test` `` (every case of the file)."""
    text = DOC.read_text()
    start = text.index(SECTION)
    end = text.find("\n## ", start + len(SECTION))
    section = text[start : end if end >= 0 else len(text)]
    by_file: dict[str, list[str]] = {}
    for c in all_cases():
        if c.test_kind == "window" or c.expected.kind != "undefined":  # undefined results are not run
            by_file.setdefault(c.file, []).append(c.id)
    out: dict[str, str] = {}
    reason = ""
    for line in section.splitlines():
        if line.startswith("### "):
            reason = line[4:].strip()
            continue
        m = re.match(r"^- `([^`:]+\.test)(?::(\d+))?`", line)
        if not m:
            continue
        ids = [f"{m.group(1)}:{m.group(2)}"] if m.group(2) else by_file.get(m.group(1), [m.group(1)])
        for i in ids:
            assert i not in out, f"{i} is listed twice in {DOC.name}"
            out[i] = reason
    return out


# ------------------------------------------------------------------------------------------- tests


def test_case_files_parse():
    """The parser reads every file, and every case has a function, a URN and a result."""
    files = case_files()
    cases = all_cases()
    assert len(files) >= 130
    assert len(cases) >= 1300
    assert len({c.id for c in cases}) == len(cases)
    for c in cases:
        assert c.function and c.urn.startswith("extension:io.substrait:"), c.id
        assert c.test_kind == "window" or c.expected.kind in ("value", "error", "undefined"), c.id


BATCH = 120  # scalar cases per projection


def evaluate(spark) -> tuple[dict[str, Outcome], int]:
    """Run every case; ``({case id: outcome}, number of Spark queries)``. Undefined results are not run."""
    runner = Runner(spark)
    out: dict[str, Outcome] = {}
    scalar: list[FunctionCase] = []
    aggregate: list[FunctionCase] = []
    errors: list[FunctionCase] = []
    for c in all_cases():
        if c.test_kind == "window":
            out[c.id] = Outcome(False, "window case")
            continue
        if c.expected.kind == "undefined":
            continue
        try:
            runner._plan([c])
        except NotBuildable as exc:
            out[c.id] = Outcome(False, f"not buildable: {exc}")
            continue
        if c.expected.kind == "error":
            errors.append(c)
        else:
            (scalar if c.test_kind == "scalar" else aggregate).append(c)
    compiled: list[FunctionCase] = []
    files: dict[str, list[FunctionCase]] = {}
    for c in scalar:
        files.setdefault(c.file, []).append(c)
    for batch in files.values():  # compile errors (unsupported functions, options, types) file by file
        compiled += runner.compile(batch, out)
    for i in range(0, len(compiled), BATCH):
        runner.run(compiled[i : i + BATCH], out)
    runner.run(aggregate, out)
    for c in errors:
        runner.run_error(c, out)
    return out, runner.queries


@pytest.mark.parametrize("ansi", [True, False], ids=["ansi", "non_ansi"])
def test_official_function_cases(spark, capsys, ansi):
    """The same outcomes with ANSI mode on (Spark 4's default) and off: the backend compiles for the mode."""
    from benchmarks.common import conf_set

    with conf_set(spark, {"spark.sql.ansi.enabled": str(ansi).lower()}):
        started = time.perf_counter()
        outcomes, queries = evaluate(spark)
        elapsed = time.perf_counter() - started
    failing = {k: o.detail for k, o in outcomes.items() if not o.passed}
    passing = [k for k, o in outcomes.items() if o.passed]
    documented = documented_exceptions()
    undefined = sum(1 for c in all_cases() if c.expected.kind == "undefined" and c.test_kind != "window")
    with capsys.disabled():
        print(
            f"\nofficial function test cases (ANSI mode {'on' if ansi else 'off'}): {len(all_cases())} cases in {len(case_files())} files; "
            f"{len(passing)} pass, {len(failing)} documented exceptions, {undefined} undefined (not "
            f"checked); {queries} Spark queries, {elapsed:.1f} s"
        )
        for reason, n in Counter(documented.values()).most_common():
            print(f"  {n:4d}  {reason}")
    new = {k: v for k, v in failing.items() if k not in documented}
    fixed = sorted(k for k in documented if k not in failing)
    assert not new, "failures not listed in docs/semantics.md:\n" + "\n".join(
        f"{k}  {next(c.text for c in all_cases() if c.id == k)}  -> {v}" for k, v in sorted(new.items())
    )
    assert not fixed, "listed in docs/semantics.md but passing: " + ", ".join(fixed)
