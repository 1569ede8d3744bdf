"""Reader-capability profiles: which filter conjuncts a reader applies in the scan, fully or best effort.

A profile answers, for one conjunct of a filter over a ``ReadRel``, ``"full"`` (the reader applies it
exactly: it may go into ``ReadRel.filter``), ``"best_effort"`` (the reader may use it to skip data
but may also let rows through: ``ReadRel.best_effort_filter``, and the conjunct is still evaluated
after the read) or ``"none"`` (it stays in a ``FilterRel``). The rule ``filter_into_read`` uses it.

A profile is JSON::

    {"name": "spark-parquet",
     "default": "none",                          # support of a call no rule matches
     "read_types": ["named_table", "local_files"],  # ReadRel kinds the profile is about
     "constant_folding": true,                   # column-free subexpressions count as constants
     "rules": [
       {"function": ["and", "or", "not"], "support": "full"},
       {"function": "lt", "args": ["integer", "integer"], "support": "full"},
       {"function": "lt", "args": ["text", "*"], "support": "best_effort"},
       {"function": "like", "args": ["text", "text"], "shape": "prefix_pattern", "support": "full"}]}

``rules`` are tried in order; the first that matches a call decides its support. A profile is
validated as it is read (:func:`from_dict`): an unknown field, a value of the wrong type or an unknown
name is a :class:`~optimizer.errors.PlanError` naming the file and the field.

* ``function``: a simple function name (``"lt"``, not ``"lt:i32_i32"``) or a list of them, ``"*"``
  for any. Expressions that are not function calls are matched as pseudo-functions: ``cast``
  (arguments: the input's type and the target type), ``in`` (``SingularOrList``: the value's type
  then the options'), ``if_then``, ``switch``.
* ``args`` (optional: any arguments): one type pattern per value argument. A pattern is a type kind
  as in the protobuf (``i32``, ``fp64``, ``decimal``, ``string``, ``varchar``, ``date``,
  ``precision_timestamp``, ``bool``...), a group (``integer``, ``float``, ``numeric``, ``text``,
  ``temporal``, ``boolean``, ``binary``, ``interval``) or ``*``; a final ``"..."`` repeats the pattern
  before it (variadic functions such as ``and``).
* ``shape`` (optional): ``column_op_constant`` — exactly one argument is a plain column, the others
  are constants (what Parquet row-group statistics can use); ``prefix_pattern`` — a LIKE whose
  pattern is a constant ``'abc%'`` without other wildcards and without an escape character (a NULL
  third argument, as DataFusion writes, is no escape character); Spark rewrites it to ``StartsWith``.
* ``support``: ``full``, ``best_effort`` or ``none``.

The support of a conjunct is the weakest support of the calls in it; column references and literals
are ``full``, as are column-free deterministic subexpressions when ``constant_folding`` is on (a
``CAST('1994-01-01' AS date)`` is a constant to any reader that folds constants). A conjunct with a
subquery, a window function, an outer reference or a nondeterministic call is ``none``.

The default profile, :func:`default_capabilities`, is Spark's Parquet reader (package data
``optimizer/data/capabilities/spark-parquet.json``; see ``docs/rules.md``).

>>> caps = from_dict({"default": "none", "rules": [
...     {"function": ["lt", "gt"], "args": ["integer", "integer"], "support": "full"},
...     {"function": ["lt", "gt"], "args": ["text", "*"], "support": "best_effort"}]})
>>> caps.call_support("lt", ["i32", "i64"]), caps.call_support("gt", ["string", "string"])
('full', 'best_effort')
>>> caps.call_support("upper", ["string"])
'none'
>>> default_capabilities().name
'spark-parquet'
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from importlib import resources
from typing import Any

from substrait.proto import Expression, ReadRel, Type

from optimizer.errors import OptimizerError, PlanError, read_user_file
from optimizer.expr_utils import field_index, is_constant, is_deterministic
from optimizer.schema.types import TYPE_GROUPS

FULL, BEST_EFFORT, NONE = "full", "best_effort", "none"
_RANK = {NONE: 0, BEST_EFFORT: 1, FULL: 2}
_RANK_NAMES = (FULL, BEST_EFFORT, NONE)

SHAPES = ("column_op_constant", "prefix_pattern")
_TYPE_KINDS = frozenset(f.name for f in Type.DESCRIPTOR.oneofs_by_name["kind"].fields)


def weakest(levels: Iterable[str]) -> str:
    """The weakest of some support levels (``full`` for none at all)."""
    return min(levels, key=_RANK.__getitem__, default=FULL)


def type_matches(pattern: str, kind: str | None) -> bool:
    """Does a type kind match a pattern (a kind, a group name or ``*``)?"""
    if pattern == "*":
        return True
    if kind is None:
        return False
    return pattern == kind or kind in TYPE_GROUPS.get(pattern, ())


@dataclass(frozen=True)
class CapabilityRule:
    """One entry of a profile's ``rules``."""

    functions: frozenset[str]
    support: str
    args: tuple[str, ...] | None = None
    shape: str | None = None

    def matches(self, name: str, arg_kinds: Sequence[str | None], args: Sequence[Expression] | None) -> bool:
        if "*" not in self.functions and name not in self.functions:
            return False
        if self.args is not None and not _args_match(self.args, arg_kinds):
            return False
        if self.shape is not None:
            return args is not None and _shape_matches(self.shape, args)
        return True


def _args_match(patterns: tuple[str, ...], kinds: Sequence[str | None]) -> bool:
    if patterns and patterns[-1] == "...":
        fixed = patterns[:-1]
        if not fixed or len(kinds) < len(fixed):
            return False
        patterns = fixed + (fixed[-1],) * (len(kinds) - len(fixed))
    return len(patterns) == len(kinds) and all(type_matches(p, k) for p, k in zip(patterns, kinds, strict=True))


def _peel_casts(e: Expression) -> Expression:
    while e.WhichOneof("rex_type") == "cast":
        e = e.cast.input
    return e


def _string_literal(e: Expression) -> str | None:
    e = _peel_casts(e)
    if e.WhichOneof("rex_type") != "literal":
        return None
    kind = e.literal.WhichOneof("literal_type")
    if kind in ("string", "fixed_char"):
        return getattr(e.literal, kind)
    if kind == "var_char":
        return e.literal.var_char.value
    return None


def _is_null_literal(e: Expression) -> bool:
    e = _peel_casts(e)
    return e.WhichOneof("rex_type") == "literal" and e.literal.WhichOneof("literal_type") == "null"


def _shape_matches(shape: str, args: Sequence[Expression]) -> bool:
    columns = [a for a in args if field_index(a) is not None]
    if shape == "column_op_constant":
        return len(columns) == 1 and all(field_index(a) is not None or is_constant(a) for a in args)
    if shape == "prefix_pattern":
        if len(args) not in (2, 3) or field_index(args[0]) is None:
            return False
        if len(args) == 3 and not _is_null_literal(args[2]):  # an escape character: no prefix pattern
            return False
        pattern = _string_literal(args[1])
        return (
            pattern is not None
            and len(pattern) > 1
            and pattern.endswith("%")
            and not any(ch in pattern[:-1] for ch in "%_\\")
        )
    return False


@dataclass
class Capabilities:
    """A reader-capability profile (see the module docstring for the JSON form)."""

    name: str = "unnamed"
    default: str = NONE
    rules: list[CapabilityRule] = field(default_factory=list)
    read_types: frozenset[str] = frozenset({"named_table", "local_files"})
    constant_folding: bool = True
    description: str = ""

    def call_support(self, name: str, arg_kinds: Sequence[str | None], args: Sequence[Expression] | None = None) -> str:
        """Support of one call (its own operation only, not its arguments')."""
        for rule in self.rules:
            if rule.matches(name, arg_kinds, args):
                return rule.support
        return self.default

    def conjunct_support(self, e: Expression, schema, functions) -> str:
        """Support of a filter conjunct evaluated on records of ``schema`` (a ``Schema``): the weakest
        support of the operations in it."""
        if not is_deterministic(e, functions):
            return NONE
        return self._support(e, schema, functions)

    # ------------------------------------------------------------------------------- internals

    def _kinds(self, args: Sequence[Expression], schema, functions) -> list[str | None] | None:
        from optimizer.schema import expression_type

        kinds: list[str | None] = []
        for a in args:
            try:
                kinds.append(expression_type(a, schema, functions).WhichOneof("kind"))
            except OptimizerError:  # an expression the type deriver does not know: no rule can match it safely
                return None
        return kinds

    def _call(self, name: str, args: list[Expression], schema, functions) -> str:
        kinds = self._kinds(args, schema, functions)
        if kinds is None:
            return NONE
        own = self.call_support(name, kinds, args)
        return weakest([own, *(self._support(a, schema, functions) for a in args)])

    def _support(self, e: Expression, schema, functions) -> str:  # one branch per kind
        kind = e.WhichOneof("rex_type")
        if kind == "literal":
            return FULL
        if kind == "selection":
            root = e.selection.WhichOneof("root_type")
            if root == "outer_reference":
                return NONE
            return FULL if e.selection.WhichOneof("reference_type") == "direct_reference" else NONE
        if kind in ("subquery", "window_function"):
            return NONE
        if self.constant_folding and is_constant(e) and is_deterministic(e, functions):
            return FULL
        if kind == "scalar_function":
            fn = e.scalar_function
            if fn.function_reference not in functions:
                return NONE
            name = functions.get(fn.function_reference).name
            args = [a.value for a in fn.arguments if a.WhichOneof("arg_type") == "value"]
            return self._call(name, args, schema, functions)
        if kind == "cast":
            kinds = self._kinds([e.cast.input], schema, functions)
            if kinds is None:
                return NONE
            own = self.call_support("cast", [kinds[0], e.cast.type.WhichOneof("kind")], [e.cast.input])
            return weakest([own, self._support(e.cast.input, schema, functions)])
        if kind == "singular_or_list":
            sol = e.singular_or_list
            return self._call("in", [sol.value, *sol.options], schema, functions)
        if kind == "if_then":
            parts = [x for clause in e.if_then.ifs for x in (getattr(clause, "if"), clause.then)]
            if e.if_then.HasField("else"):
                parts.append(getattr(e.if_then, "else"))
            own = self.call_support("if_then", [], None)
            return weakest([own, *(self._support(p, schema, functions) for p in parts)])
        if kind == "switch_expression":
            sw = e.switch_expression
            parts = [sw.match, *(c.then for c in sw.ifs)]
            if sw.HasField("else"):
                parts.append(getattr(sw, "else"))
            own = self.call_support("switch", [], None)
            return weakest([own, *(self._support(p, schema, functions) for p in parts)])
        return NONE


_PROFILE_FIELDS = ("name", "description", "default", "read_types", "constant_folding", "rules", "functions")
_RULE_FIELDS = ("function", "args", "shape", "support")
READ_TYPES = tuple(f.name for f in ReadRel.DESCRIPTOR.oneofs_by_name["read_type"].fields)


def _at(source: str, field_path: str) -> str:
    return f"{source}: {field_path}"


def _json_text(value: Any) -> str:
    try:
        text = json.dumps(value)
    except (TypeError, ValueError, RecursionError):
        text = type(value).__name__
    return text if len(text) <= 40 else text[:37] + "..."


def _one_of(value: Any, choices: Sequence[str], where: str) -> str:
    if not isinstance(value, str) or value not in choices:
        raise PlanError(f"expected one of {', '.join(choices)} (got {_json_text(value)})", where)
    return value


def _string(value: Any, where: str) -> str:
    if not isinstance(value, str):
        raise PlanError(f"expected a string (got {_json_text(value)})", where)
    return value


def _rule(entry: Any, where: str) -> CapabilityRule:
    if not isinstance(entry, dict):
        raise PlanError(f"expected a rule object (got {_json_text(entry)})", where)
    unknown = sorted(set(entry) - set(_RULE_FIELDS))
    if unknown:
        raise PlanError(f"unknown field (known: {', '.join(_RULE_FIELDS)})", _at(where, unknown[0]))
    if "function" not in entry:
        raise PlanError("a rule needs a 'function' (a function name, a list of them or '*')", where)
    names = entry["function"]
    if isinstance(names, str):
        names = [names]
    elif not isinstance(names, list) or not names:
        raise PlanError(f"expected a function name or a non-empty list of them (got {_json_text(names)})",
                        f"{where}.function")
    for j, name in enumerate(names):
        if not isinstance(name, str) or not name:
            raise PlanError(f"expected a function name (got {_json_text(name)})", f"{where}.function[{j}]")
    args = entry.get("args")
    if args is not None:
        if not isinstance(args, list):
            raise PlanError(f"expected a list of type patterns (got {_json_text(args)})", f"{where}.args")
        for j, p in enumerate(args):
            if not isinstance(p, str) or (p not in ("*", "...") and p not in TYPE_GROUPS and p not in _TYPE_KINDS):
                raise PlanError(f"unknown type pattern {_json_text(p)} (a type kind, a group or *)",
                                f"{where}.args[{j}]")
            if p == "..." and (j != len(args) - 1 or j == 0):
                raise PlanError("'...' repeats the pattern before it: it comes last, after one",
                                f"{where}.args[{j}]")
    shape = entry.get("shape")
    if shape is not None:
        _one_of(shape, SHAPES, f"{where}.shape")
    if "support" not in entry:
        raise PlanError(f"a rule needs a 'support' ({', '.join(_RANK_NAMES)})", where)
    support = _one_of(entry["support"], _RANK_NAMES, f"{where}.support")
    return CapabilityRule(frozenset(names), support, tuple(args) if args is not None else None, shape)



def from_dict(data: Any, source: str = "<profile>") -> Capabilities:
    """A profile from its parsed JSON (see the module docstring), validated: an unknown field, a value
    of the wrong type or an unknown name is a :class:`PlanError` naming ``source`` and the field
    (``caps.json: rules[3].support: expected one of full, best_effort, none (got "fuul")``).

    ``functions`` is read as another name of ``rules`` (not both).
    """
    if not isinstance(data, dict):
        raise PlanError(f"a capability profile is a JSON object (got {_json_text(data)})", source)
    unknown = sorted(set(data) - set(_PROFILE_FIELDS))
    if unknown:
        raise PlanError(f"unknown field (known: {', '.join(_PROFILE_FIELDS[:-1])})", _at(source, unknown[0]))
    if "rules" in data and "functions" in data:
        raise PlanError("'functions' is another name of 'rules': give one", _at(source, "functions"))
    key = "functions" if "functions" in data else "rules"
    entries = data.get(key, [])
    if not isinstance(entries, list):
        raise PlanError(f"expected a list of rules (got {_json_text(entries)})", _at(source, key))
    rules = [_rule(entry, _at(source, f"{key}[{i}]")) for i, entry in enumerate(entries)]
    read_types = data.get("read_types", ["named_table", "local_files"])
    if not isinstance(read_types, list):
        raise PlanError(f"expected a list of ReadRel kinds (got {_json_text(read_types)})",
                        _at(source, "read_types"))
    for i, kind in enumerate(read_types):
        _one_of(kind, READ_TYPES, _at(source, f"read_types[{i}]"))
    folding = data.get("constant_folding", True)
    if not isinstance(folding, bool):
        raise PlanError(f"expected true or false (got {_json_text(folding)})", _at(source, "constant_folding"))
    return Capabilities(
        name=_string(data.get("name", "unnamed"), _at(source, "name")),
        default=_one_of(data.get("default", NONE), _RANK_NAMES, _at(source, "default")),
        rules=rules,
        read_types=frozenset(read_types),
        constant_folding=folding,
        description=_string(data.get("description", ""), _at(source, "description")),
    )


def load_capabilities(path: str | os.PathLike) -> Capabilities:
    """Read and validate a profile from a JSON file; any problem is a :class:`PlanError` (exit 2)
    naming ``capabilities file <path>`` and the field."""
    name = f"capabilities file {os.fspath(path)}"
    raw = read_user_file(os.fspath(path), "a capability profile", name)
    try:
        data = json.loads(raw.decode("utf-8"))
    except UnicodeDecodeError:
        raise PlanError("not UTF-8 text", name) from None
    except json.JSONDecodeError as exc:
        raise PlanError(f"not valid JSON: {exc}", name) from None
    except RecursionError:
        raise PlanError("JSON nested too deeply for this tool (Python's recursion limit)", name) from None
    except ValueError as exc:  # a 5000-digit integer
        raise PlanError(f"not usable JSON: {' '.join(str(exc).split())[:120]}", name) from None
    return from_dict(data, name)


def default_capabilities() -> Capabilities:
    """The profile of Spark's Parquet reader (package data ``data/capabilities/spark-parquet.json``)."""
    text = resources.files("optimizer").joinpath("data/capabilities/spark-parquet.json").read_text("utf-8")
    return from_dict(json.loads(text), "spark-parquet.json")


def as_capabilities(value: Any) -> Capabilities:
    """A profile from what a caller passed: None (the default profile), a profile, a dict or a path."""
    if value is None:
        return default_capabilities()
    if isinstance(value, Capabilities):
        return value
    if isinstance(value, dict):
        return from_dict(value)
    if isinstance(value, str | os.PathLike):
        return load_capabilities(value)
    raise TypeError(f"not a capability profile: {type(value).__name__}")
