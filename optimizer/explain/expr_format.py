"""Readable one-line text for Substrait expressions and sort fields (for explain and errors); types print
through :func:`optimizer.schema.types.type_name` in its explain notation."""

from __future__ import annotations

import datetime
import decimal

from substrait.proto import Expression, SortField

from optimizer.load.functions import FunctionTable
from optimizer.schema.types import type_name

_SORT_DIRECTIONS = {
    0: "",
    1: " ASC NULLS FIRST",
    2: " ASC NULLS LAST",
    3: " DESC NULLS FIRST",
    4: " DESC NULLS LAST",
    5: " CLUSTERED",
}

_INFIX = {
    "add": "+", "subtract": "-", "multiply": "*", "divide": "/", "modulus": "%",
    "equal": "=", "not_equal": "<>", "lt": "<", "gt": ">", "lte": "<=", "gte": ">=",
    "and": "AND", "or": "OR", "like": "LIKE",
}


def format_literal(lit: Expression.Literal) -> str:
    kind = lit.WhichOneof("literal_type")
    if kind is None:
        return "?"
    value = getattr(lit, kind)
    if kind == "null":
        return f"null:{type_name(value, explain=True)}"
    if kind in ("string", "var_char", "fixed_char"):
        text = value.value if kind == "var_char" else value
        return repr(text)
    if kind == "boolean":
        return "true" if value else "false"
    if kind == "date":
        try:
            return f"date '{datetime.date(1970, 1, 1) + datetime.timedelta(days=value)}'"
        except OverflowError:  # a year outside 1..9999, which Python's dates do not reach
            return f"date({value} days)"
    if kind == "decimal":
        unscaled = int.from_bytes(value.value, "little", signed=True)
        return str(decimal.Decimal(unscaled).scaleb(-value.scale))
    if kind in ("precision_timestamp", "precision_timestamp_tz"):
        seconds = value.value / 10**value.precision
        try:
            stamp = datetime.datetime(1970, 1, 1) + datetime.timedelta(seconds=seconds)
        except OverflowError:  # a year outside 1..9999, which Python's datetimes do not reach
            return f"timestamp({value.value} / 10^{value.precision} s)"
        return f"timestamp '{stamp.isoformat(sep=' ')}'"
    if kind == "interval_day_to_second":
        return f"interval '{value.days} days {value.seconds} seconds'"
    if kind == "interval_year_to_month":
        return f"interval '{value.years} years {value.months} months'"
    if kind in ("i8", "i16", "i32", "i64", "fp32", "fp64"):
        return str(value)
    if kind in ("list", "struct"):
        items = value.values if kind == "list" else value.fields
        return ("[" if kind == "list" else "{") + ", ".join(format_literal(x) for x in items) + ("]" if kind == "list" else "}")
    return kind


class ExpressionFormatter:
    """Formats expressions of one relation; field references show input column names when given."""

    def __init__(self, functions: FunctionTable | None = None, names: list[str] | None = None) -> None:
        self.functions = functions
        self.names = names

    def field(self, index: int) -> str:
        if self.names is not None and 0 <= index < len(self.names):
            return f"{self.names[index]}#{index}"
        return f"${index}"

    def function_name(self, anchor: int) -> str:
        if self.functions is not None and anchor in self.functions:
            return self.functions.get(anchor).name
        return f"fn{anchor}"

    def args(self, arguments) -> list[str]:
        out = []
        for a in arguments:
            which = a.WhichOneof("arg_type")
            if which == "value":
                out.append(self(a.value))
            elif which == "enum":
                out.append(a.enum)
            elif which == "type":
                out.append(type_name(a.type, explain=True))
        return out

    def __call__(self, e: Expression) -> str:  # one branch per expression kind
        kind = e.WhichOneof("rex_type")
        if kind == "literal":
            return format_literal(e.literal)
        if kind == "selection":
            sel = e.selection
            if sel.WhichOneof("reference_type") == "direct_reference":
                seg = sel.direct_reference
                parts = []
                while True:
                    which = seg.WhichOneof("reference_type")
                    if which == "struct_field":
                        parts.append(seg.struct_field.field)
                        if not seg.struct_field.HasField("child"):
                            break
                        seg = seg.struct_field.child
                    elif which == "list_element":
                        parts.append(f"[{seg.list_element.offset}]")
                        break
                    else:
                        parts.append(which or "?")
                        break
                first = parts[0]
                head = self.field(first) if isinstance(first, int) else str(first)
                if sel.WhichOneof("root_type") == "outer_reference":
                    head = f"outer({sel.outer_reference.steps_out}).${first}"
                return head + "".join(f".{p}" if isinstance(p, int) else p for p in parts[1:])
            return "field(?)"
        if kind == "scalar_function":
            fn = e.scalar_function
            name = self.function_name(fn.function_reference)
            args = self.args(fn.arguments)
            if name in _INFIX and len(args) == 2:
                return f"({args[0]} {_INFIX[name]} {args[1]})"
            if name in ("and", "or") and len(args) > 2:
                return "(" + f" {_INFIX[name]} ".join(args) + ")"
            if name == "not" and len(args) == 1:
                return f"NOT {args[0]}"
            return f"{name}({', '.join(args)})"
        if kind == "window_function":
            fn = e.window_function
            return f"{self.function_name(fn.function_reference)}({', '.join(self.args(fn.arguments))}) OVER (...)"
        if kind == "cast":
            return f"CAST({self(e.cast.input)} AS {type_name(e.cast.type, explain=True)})"
        if kind == "if_then":
            parts = [f"WHEN {self(c.__getattribute__('if'))} THEN {self(c.then)}" for c in e.if_then.ifs]
            return "CASE " + " ".join(parts) + (f" ELSE {self(e.if_then.__getattribute__('else'))}" if e.if_then.HasField("else") else "") + " END"
        if kind == "singular_or_list":
            return f"{self(e.singular_or_list.value)} IN ({', '.join(self(x) for x in e.singular_or_list.options)})"
        if kind == "subquery":
            return f"subquery.{e.subquery.WhichOneof('subquery_type')}(...)"
        if kind == "nested":
            return f"nested.{e.nested.WhichOneof('nested_type')}(...)"
        return kind or "?"

    def sort(self, s: SortField) -> str:
        direction = _SORT_DIRECTIONS.get(s.direction, "") if s.WhichOneof("sort_kind") == "direction" else " custom"
        return self(s.expr) + direction

    def aggregate(self, fn) -> str:
        distinct = "DISTINCT " if fn.invocation == 2 else ""
        return f"{self.function_name(fn.function_reference)}({distinct}{', '.join(self.args(fn.arguments))})"
