"""The official Substrait function test cases (``substrait-extensions``' ``testcases/**/*.test``), parsed.

The files are in the test-case format of the Substrait repository (``grammar/FuncTestCase*.g4``); they are
parsed with the ANTLR parser the ``substrait-antlr`` package generates from that grammar. Each case becomes
a :class:`FunctionCase`: the function's name and extension URN, its arguments (Python values with their
Substrait types, enum arguments, column references of aggregates, lambdas), the options, and the
expected result (a value with its type, an error, or undefined), plus the input table of an aggregate or
window case.

Python values: integers ``int``, floats ``float`` (``inf``, ``nan``), decimals ``decimal.Decimal``, strings
``str``, booleans ``bool``, nulls ``None``, ``date`` ``datetime.date``, ``pts`` a naive
``datetime.datetime``, ``ptstz`` an aware one (UTC), ``pt`` ``datetime.time``, ``iyear`` a number of months,
``iday`` ``datetime.timedelta``, lists ``list``; unsigned integers (user-defined ``u!u8``...) ``int``.
"""

from __future__ import annotations

import datetime as dt
import decimal
import functools
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import substrait_extensions
from antlr4 import CommonTokenStream, InputStream
from antlr4.error.ErrorListener import ErrorListener
from antlr4.tree.Tree import TerminalNodeImpl
from substrait_antlr.func_test_case.FuncTestCaseLexer import FuncTestCaseLexer
from substrait_antlr.func_test_case.FuncTestCaseParser import FuncTestCaseParser as P

TESTCASES = Path(next(iter(substrait_extensions.__path__))) / "testcases"

# ------------------------------------------------------------------------------------------------ types

_TYPE_ALIASES = {
    "boolean": "bool",
    "string": "str",
    "decimal": "dec",
    "varchar": "vchar",
    "fixedchar": "fchar",
    "interval_year": "iyear",
    "interval_day": "iday",
    "interval_compound": "icompound",
    "precision_timestamp": "pts",
    "precision_timestamp_tz": "ptstz",
    "precision_time": "pt",
}


@dataclass(frozen=True)
class SType:
    """A Substrait type as the test files write it: ``i8``, ``dec?<38, 0>``, ``list<i32?>``, ``u!u8``."""

    name: str  # short name: i8 ... fp64, bool, str, vchar, fchar, dec, date, pts, ptstz, pt, iyear, ...
    nullable: bool = False
    params: tuple[Any, ...] = ()  # integers, or nested SType (list element, func parameters/result)

    def __str__(self) -> str:
        q = "?" if self.nullable else ""
        if self.name == "func":
            *ins, out = self.params
            return f"func{q}<{', '.join(map(str, ins))} -> {out}>"
        inner = f"<{', '.join(map(str, self.params))}>" if self.params else ""
        return f"{self.name}{q}{inner}"


_TOKEN = re.compile(r"\s*(->|[A-Za-z_][A-Za-z_0-9!]*|\d+|[<>,?()])")


def parse_type(text: str) -> SType:
    """``'dec?<38, 0>'`` -> ``SType('dec', True, (38, 0))``."""
    tokens = _TOKEN.findall(text)
    if "".join(tokens) != re.sub(r"\s+", "", text):
        raise ValueError(f"cannot read type {text!r}")
    pos = 0

    def one() -> SType:
        nonlocal pos
        name = tokens[pos].lower()
        pos += 1
        if name == "u!":  # 'u!u8' may come as one token
            name += tokens[pos].lower()
            pos += 1
        name = _TYPE_ALIASES.get(name, name)
        nullable = False
        if pos < len(tokens) and tokens[pos] == "?":
            nullable, pos = True, pos + 1
        params: list[Any] = []
        if pos < len(tokens) and tokens[pos] == "<":
            pos += 1
            while tokens[pos] != ">":
                if tokens[pos] in (",", "->", "(", ")"):
                    pos += 1
                elif tokens[pos].isdigit():
                    params.append(int(tokens[pos]))
                    pos += 1
                else:
                    params.append(one())
            pos += 1
        return SType(name, nullable, tuple(params))

    t = one()
    if pos != len(tokens):
        raise ValueError(f"cannot read type {text!r}")
    return t


# ----------------------------------------------------------------------------------------------- values

_INTERVAL = re.compile(
    r"^(?P<sign>-)?P(?:(?P<y>-?\d+)Y)?(?:(?P<mo>-?\d+)M)?(?:(?P<w>-?\d+)W)?(?:(?P<d>-?\d+)D)?"
    r"(?:T(?:(?P<h>-?\d+)H)?(?:(?P<mi>-?\d+)M)?(?:(?P<s>-?\d+(?:\.\d+)?)S)?)?$"
)


def _interval(text: str) -> dict[str, decimal.Decimal]:
    m = _INTERVAL.match(text)
    if not m:
        raise ValueError(f"cannot read interval {text!r}")
    sign = -1 if m.group("sign") else 1
    return {k: sign * decimal.Decimal(v or 0) for k, v in m.groupdict().items() if k != "sign"}


def _timestamp(text: str) -> dt.datetime:
    return dt.datetime.fromisoformat(text)


def convert(text: str, t: SType) -> Any:
    """The Python value of literal ``text`` of type ``t`` (lists are handled by :func:`_value`)."""
    if text.lower() == "null":
        return None
    n = t.name
    if n in ("i8", "i16", "i32", "i64") or n.startswith("u!"):
        return int(text.strip("'"))
    if n in ("fp32", "fp64"):
        return float(text)
    if n == "dec":
        return decimal.Decimal(text)
    if n == "bool":
        return {"true": True, "false": False}[text.lower()]
    if n in ("str", "vchar", "fchar", "vbin", "fbin", "binary"):
        if len(text) >= 2 and text[0] == text[-1] == "'":
            return text[1:-1].replace("''", "'")
        return text
    if n == "date":
        return dt.date.fromisoformat(text)
    if n == "pts":
        return _timestamp(text)
    if n == "ptstz":
        v = _timestamp(text)
        if v.tzinfo is None:
            v = v.replace(tzinfo=dt.UTC)
        return v.astimezone(dt.UTC)
    if n == "pt":
        return dt.time.fromisoformat(text)
    if n == "iyear":
        p = _interval(text)
        return int(p["y"] * 12 + p["mo"])
    if n == "iday":
        p = _interval(text)
        return dt.timedelta(
            weeks=float(p["w"]),
            days=float(p["d"]),
            hours=float(p["h"]),
            minutes=float(p["mi"]),
            seconds=float(p["s"]),
        )
    raise ValueError(f"no literal of type {t} ({text!r})")


def _value(node, t: SType) -> Any:
    """The Python value of a literal parse-tree node (a list literal is read element by element)."""
    if isinstance(node, P.CompoundLiteralContext | P.LiteralContext) and node.getChildCount() == 1:
        return _value(node.getChild(0), t)
    if isinstance(node, P.LiteralListContext):
        elem = t.params[0] if t.name == "list" and t.params else SType("?")
        return [_value(c, elem) for c in node.getChildren() if not isinstance(c, TerminalNodeImpl)]
    if isinstance(node, P.LiteralStructContext):  # user-defined values are written as (value, ...)
        fields = [c.getText() for c in node.getChildren() if not isinstance(c, TerminalNodeImpl)]
        return convert(fields[0], t) if len(fields) == 1 else fields
    return convert(node.getText(), t)


# ------------------------------------------------------------------------------------------------ cases


@dataclass(frozen=True)
class Arg:
    """One function argument.

    ``kind``: ``value`` (a literal: ``value`` and ``type``), ``enum`` (``value`` is the option name),
    ``column`` (an aggregate's input column ``column``, of ``type``), ``lambda`` (``value`` is a
    :class:`Lambda`, ``type`` its ``func<...>`` type).
    """

    kind: str
    value: Any
    type: SType | None
    text: str
    column: int | None = None


@dataclass(frozen=True)
class Lambda:
    """``(x -> gt(x, 2::i32))``: parameter names and the body, a call whose arguments are parameter
    names (``Arg('param', index, None, name)``) or literal arguments."""

    params: tuple[str, ...]
    function: str
    args: tuple[Arg, ...]


@dataclass(frozen=True)
class Expected:
    kind: str  # "value" | "error" | "undefined"
    value: Any = None
    type: SType | None = None
    text: str = ""


@dataclass(frozen=True)
class FunctionCase:
    file: str  # relative to TESTCASES, e.g. "arithmetic/add.test"
    line: int
    text: str  # the case as written (its lines joined)
    group: str  # the test group's id, e.g. "overflow"
    test_kind: str  # "scalar" | "aggregate" | "window"
    urn: str  # e.g. "extension:io.substrait:functions_arithmetic"
    function: str
    args: tuple[Arg, ...]
    options: tuple[tuple[str, str], ...]
    expected: Expected
    columns: tuple[SType, ...] = ()  # aggregate input columns
    rows: tuple[tuple[Any, ...], ...] = ()  # aggregate input rows

    @property
    def id(self) -> str:
        return f"{self.file}:{self.line}"


class _Raise(ErrorListener):
    def __init__(self, file: str) -> None:
        self.file = file

    def syntaxError(self, recognizer, offendingSymbol, line, column, msg, e):
        raise ValueError(f"{self.file}:{line}:{column}: {msg}")


def _children(node) -> list:
    return [c for c in node.getChildren() if not isinstance(c, TerminalNodeImpl)]


def _source(node, text: str) -> str:
    return text[node.start.start : node.stop.stop + 1]


def _argument(ctx, text: str) -> Arg:
    """An ``argument`` rule node."""
    inner = ctx.getChild(0)
    written = _source(ctx, text)
    if isinstance(inner, TerminalNodeImpl):  # a lambda parameter name
        return Arg("param", None, None, written)
    if isinstance(inner, P.EnumArgContext):
        return Arg("enum", inner.getChild(0).getText(), None, written)
    if isinstance(inner, P.LambdaArgContext):
        lam = inner.getChild(0)
        t = parse_type(_source(inner.getChild(inner.getChildCount() - 1), text))
        params_node = lam.getChild(1)
        params = tuple(c.getText() for c in params_node.getChildren() if c.getText() not in ("(", ")", ","))
        body = next(c for c in _children(lam) if isinstance(c, P.LambdaBodyContext))
        name = body.getChild(0).getText()
        args_node = next((c for c in _children(body) if isinstance(c, P.ArgumentsContext)), None)
        args = tuple(_argument(a, text) for a in _children(args_node)) if args_node else ()
        args = tuple(
            Arg("param", params.index(a.text), None, a.text) if a.kind == "param" else a for a in args
        )
        return Arg("lambda", Lambda(params, name, args), t, written)
    if isinstance(inner, P.FuncCallArgContext):
        raise ValueError(f"function call arguments are not read: {written}")
    t = parse_type(_source(inner.getChild(inner.getChildCount() - 1), text))
    return Arg("value", _value(inner.getChild(0), t), t, written)


def _result(ctx, text: str) -> Expected:
    inner = ctx.getChild(0)
    written = _source(ctx, text)
    if isinstance(inner, P.SubstraitErrorContext):
        return Expected("error" if "ERROR" in written.upper() else "undefined", text=written)
    arg = _argument(inner, text)
    return Expected("value", arg.value, arg.type, written)


def _options(ctx) -> tuple[tuple[str, str], ...]:
    if ctx is None:
        return ()
    out = []
    for opt in _children(ctx):
        name, value = _children(opt)
        out.append((name.getText(), value.getText()))
    return tuple(out)


def _table_rows(node, types: list[SType]) -> tuple[tuple[Any, ...], ...]:
    rows = []
    for row in _children(node):
        cells = _children(row)
        if not cells:  # '(())': no rows
            continue
        rows.append(tuple(_value(c, types[i] if i < len(types) else SType("?")) for i, c in enumerate(cells)))
    return tuple(rows)


def _compact_rows(node) -> list[list[str]]:
    return [[c.getText() for c in _children(row)] for row in _children(node)]


def parse_file(path: Path) -> list[FunctionCase]:
    """Every case of one ``.test`` file."""
    rel = path.relative_to(TESTCASES).as_posix()
    text = path.read_text()
    lexer = FuncTestCaseLexer(InputStream(text))
    parser = P(CommonTokenStream(lexer))
    for obj in (lexer, parser):
        obj.removeErrorListeners()
        obj.addErrorListener(_Raise(rel))
    doc = parser.doc()
    header = doc.header()
    version = header.version().getChild(1).getText()
    test_kind = {
        "SUBSTRAIT_SCALAR_TEST": "scalar",
        "SUBSTRAIT_AGGREGATE_TEST": "aggregate",
        "SUBSTRAIT_WINDOW_TEST": "window",
    }[version]
    urn = header.include().getChild(3).getText()
    out: list[FunctionCase] = []
    for group in _children(doc):
        if isinstance(group, P.HeaderContext):
            continue
        gid = ""
        for node in _children(group):
            if isinstance(node, P.TestGroupDescriptionContext):
                gid = node.getText().lstrip("#").split(":", 1)[0].strip()
                continue
            out.append(_case(node, text, rel, gid, test_kind, urn))
    return out


def _case(node, text: str, rel: str, gid: str, test_kind: str, urn: str) -> FunctionCase:
    line = node.start.line
    written = " ".join(_source(node, text).split())
    options = _options(node.funcOptions()) if hasattr(node, "funcOptions") else ()
    case = functools.partial(FunctionCase, rel, line, written, gid, test_kind, urn)
    if isinstance(node, P.TestCaseContext):  # scalar
        name = node.identifier().getText()
        args_node = node.arguments()
        args = tuple(_argument(a, text) for a in _children(args_node)) if args_node else ()
        if test_kind == "aggregate" and len(args) == 1 and isinstance(args[0].value, list):
            # the grammar reads "max(('20', '3')::u!u8)" in an aggregate file as a call on one
            # user-defined literal: it is a data column
            t = args[0].type
            rows = tuple((None if v == "Null" else convert(v, t),) for v in args[0].value)
            column = Arg("column", None, t, args[0].text, 0)
            return case(name, (column,), options, _result(node.result(), text), (t,), rows)
        return case(name, args, options, _result(node.result(), text))
    if isinstance(node, P.AggFuncTestCaseContext):
        call = node.aggFuncCall()
        result = _result(node.result(), text)
        name = call.identifier().getText()
        if isinstance(call, P.SingleArgAggregateFuncCallContext):
            col = call.dataColumn()
            t = parse_type(_source(col.getChild(col.getChildCount() - 1), text))
            values = [_value(c, t) for c in _children(col.columnValues())]
            arg = Arg("column", None, t, _source(col, text), 0)
            return case(name, (arg,), options, result, (t,), tuple((v,) for v in values))
        if isinstance(call, P.CompactAggregateFuncCallContext):
            raw = _compact_rows(call.tableRows())
            args, types = [], {}
            for a in _children(call.aggregateFuncArgs()):
                if a.getChildCount() == 1:
                    args.append(_argument(a.getChild(0), text))
                else:  # colN::type
                    i = int(a.getChild(0).getText()[3:])
                    t = parse_type(_source(a.getChild(2), text))
                    types[i] = t
                    args.append(Arg("column", None, t, _source(a, text), i))
            width = max([len(r) for r in raw] + [max(types, default=-1) + 1])
            cols = tuple(types.get(i, SType("?")) for i in range(width))
            rows = _table_rows(call.tableRows(), list(cols))
            return case(name, tuple(args), options, result, cols, rows)
        if isinstance(call, P.MultiArgAggregateFuncCallContext):
            table = call.tableData()
            cols = tuple(parse_type(_source(t, text)) for t in table.dataType())
            rows = _table_rows(table.tableRows(), list(cols))
            args = []
            for a in _children(call.qualifiedAggregateFuncArgs()):
                if a.getChildCount() == 1:
                    args.append(_argument(a.getChild(0), text))
                else:  # t1.colN
                    i = int(a.getChild(2).getText()[3:])
                    args.append(Arg("column", None, cols[i], _source(a, text), i))
            return case(name, tuple(args), options, result, cols, rows)
        raise ValueError(f"{rel}:{line}: unknown aggregate case form {type(call).__name__}")
    if isinstance(node, P.WindowFuncTestCaseContext):
        return _window_case(node, text, rel, gid, urn, written)
    raise ValueError(f"{rel}:{line}: unknown case form {type(node).__name__}")


def _window_case(node, text: str, rel: str, gid: str, urn: str, written: str) -> FunctionCase:
    """A window case, kept as written with its function's name (the test does not run window cases)."""
    name = re.search(r"([A-Za-z_][A-Za-z_0-9]*)\([^()]*\)\s+OVER\b", written)
    return FunctionCase(
        rel,
        node.start.line,
        written,
        gid,
        "window",
        urn,
        name.group(1) if name else "?",
        (),
        (),
        Expected("undefined"),
    )


def case_files() -> list[Path]:
    return sorted(TESTCASES.rglob("*.test"))


@functools.cache
def all_cases() -> tuple[FunctionCase, ...]:
    return tuple(c for p in case_files() for c in parse_file(p))


def iter_cases(kind: str | None = None) -> Iterator[FunctionCase]:
    for c in all_cases():
        if kind is None or c.test_kind == kind:
            yield c
