"""Whether a call binds one type variable of its standard function to values of different kinds.

``equal`` takes ``any1, any1``: both arguments of one type. A plan that calls it on an ``i64`` and a
``string`` is no plan of Substrait's, and an engine given it answers by its own implicit casts (Spark casts
the string to a number, another engine refuses or compares text): its meaning would be the engine's, not the
plan's. Such a call is a problem at its path.

What is checked, and why no more:

* Only functions with a polymorphic overload of the call's number of arguments (all its parameters type
  variables, ``any1`` or ``any``): the comparisons, ``coalesce``, ``between``, ``nullif``,
  ``is_distinct_from``, ``greatest`` and the like. Such a call fits when that overload or another of fixed
  types takes it. A function with only fixed overloads is not checked: the YAMLs lack calls producers write
  every day and engines answer alike (no ``max`` of strings, no ``subtract`` of two dates).
* By *kind* of type, not exact type: integers, floats and decimals are one kind (numeric), as are the
  character types, the binary types, the date/time/timestamp types and the interval types. Producers compare
  an ``i32`` with an ``i64`` or a ``varchar<10>`` with a ``string`` and mean what the comparison means.
* Unknown types (and user-defined ones) match anything.

Besides, the scalar functions of the YAMLs of numbers (arithmetic, rounding, logarithms) take no string,
boolean or binary value where none of their overloads does: ``add(i64, string)`` is Spark's cast of the
string to a double, DataFusion's and DuckDB's error. Other kinds (a date minus a date) are left to the engine.
The functions of the boolean YAML (``and``, ``or``, ``not``, ``xor``, ``bool_and``...) take booleans only:
``and(i32, true)`` is DuckDB's ``i32 <> 0``, DataFusion's and Acero's error.

A call that names one standard overload by its compound name (``add:i32_i32``) is checked against that
overload's argument count (:func:`signature_problem`); producers write variadic ones with their
one parameter (``and:bool`` of nine arguments), which is that overload. A call named simply is not:
DataFusion writes ``round(x)`` and ``like(a, b, escape)``, DuckDB ``string_agg(s)``, none in the YAMLs.

The overloads are read from the YAMLs of the ``substrait_extensions`` package, the files Substrait's
extension registry loads.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass
from importlib.resources import files

import yaml
from substrait.extension_registry import normalize_substrait_type_names
from substrait.extension_registry.exceptions import UnrecognizedSubstraitTypeError
from substrait.type_pb2 import Type

from optimizer.schema.types import TYPE_GROUPS, is_known, type_kind, type_name

#: The kind of each ``Type.kind`` the check compares: its group (``TYPE_GROUPS``), or itself.
_KIND_OF = {kind: group for group in ("numeric", "text", "binary", "boolean", "temporal", "interval")
            for kind in TYPE_GROUPS[group]} | {kind: kind for kind in ("uuid", "list", "map", "struct")}

#: The YAMLs' spellings of kinds whose ``Type.kind`` name differs.
_YAML_NAMES = {"boolean": "bool", "fixedchar": "fixed_char", "fixedbinary": "fixed_binary"}


@dataclass(frozen=True)
class Overload:
    """One overload's value parameters as the YAML writes them, and whether its last one repeats."""

    params: tuple[str, ...]
    variadic: bool
    #: the kinds refused as its arguments where no overload of the call's arity takes them (a scalar
    #: function of a YAML of numbers refuses text, booleans and binary values)
    refused: frozenset[str] = frozenset()
    #: its compound name with every argument (enumerations as ``req``), normalised by
    #: :func:`compound_key`; None when the YAML writes a type the registry's naming does not know
    compound: str | None = None
    #: how many arguments it takes, value and enumeration (the last one repeating when ``variadic``)
    arity: int = 0

    def fits(self, count: int) -> bool:
        """Whether this overload takes ``count`` value arguments."""
        return count == len(self.params) or (self.variadic and bool(self.params) and count > len(self.params))

    @functools.cached_property
    def names(self) -> tuple[str, ...]:
        """Each parameter's type name, lower case, without parameters or nullability (``any1``, ``i64``)."""
        return tuple(p.split("<", 1)[0].strip().rstrip("?").lower() for p in self.params)

    @functools.cached_property
    def polymorphic(self) -> bool:
        """Whether every parameter is a type variable (``any1``, or ``any``, which binds nothing)."""
        return all(n.startswith("any") for n in self.names)

    def takes(self, kinds: Sequence[str | None]) -> bool:
        """Whether arguments of these kinds (None: matches anything) fit: each type variable bound to one
        kind, each fixed parameter given a value of its kind."""
        names = self.names + self.names[-1:] * (len(kinds) - len(self.params))
        bound: dict[str, str] = {}
        for name, kind in zip(names, kinds, strict=True):
            if kind is None or name == "any" or name.startswith("u!"):
                continue
            if name.startswith("any"):
                if bound.setdefault(name, kind) != kind:
                    return False
            elif _KIND_OF.get(_YAML_NAMES.get(name, name), kind) != kind:
                return False
        return True

    def kind_at(self, position: int) -> str:
        """The kind (or type variable) of the parameter a value at ``position`` is given to."""
        name = self.names[min(position, len(self.params) - 1)]
        if name.startswith("any") or name.startswith("u!"):
            return "any"
        return _KIND_OF.get(_YAML_NAMES.get(name, name), "any")


#: The YAMLs whose scalar functions compute on numbers (and, for some, on dates and intervals): a string,
#: boolean or binary value is no argument of theirs in any engine but Spark, which casts it.
_NUMERIC_YAMLS = ("functions_arithmetic", "functions_arithmetic_decimal", "functions_rounding",
                  "functions_rounding_decimal", "functions_logarithmic")
#: The YAML whose functions take booleans only: any other value is an engine's cast (DuckDB's ``<> 0``).
_BOOLEAN_YAML = "functions_boolean"
#: Their aggregates that engines take over any ordered value (the YAMLs list numbers only): ``max(s)`` of
#: strings is every engine's. The others (``sum``, ``avg``, ...) take no string: ``sum(s)`` of text
#: was answered by Spark's implicit cast where DuckDB and DataFusion refuse it.
_ORDERING_AGGREGATES = frozenset({"min", "max"})
#: The kinds refused as arguments of such a function where none of its overloads takes them.
_NOT_NUMBERS = frozenset({"text", "boolean", "binary"})
_NOT_BOOLEANS = frozenset(_KIND_OF.values()) - {"boolean"}


def compound_key(compound: str) -> str:
    """A compound name as compared: lower case, each argument's nullability mark dropped and type variables
    (``any1``) as ``any``, as the registry names them (DuckDB writes ``and:bool?``).

    >>> compound_key("AND:Bool?_any1")
    'and:bool_any'
    """
    name, _, args = compound.lower().partition(":")
    parts = ["any" if a.startswith("any") else a for a in (p.rstrip("?") for p in args.split("_")) if a]
    return f"{name}:{'_'.join(parts)}"


def _compound(name: str, args: list[dict]) -> str | None:
    try:
        parts = [normalize_substrait_type_names(str(a["value"])) if "value" in a else "req" for a in args]
    except UnrecognizedSubstraitTypeError:
        return None
    return compound_key(f"{name}:{'_'.join(parts)}")


@functools.cache
def standard_overloads() -> dict[str, tuple[Overload, ...]]:
    """name -> every overload of that name (scalar, aggregate, window) over the standard extension YAMLs."""
    out: dict[str, list[Overload]] = {}
    for path in files("substrait_extensions.extensions").iterdir():
        if not (path.name.startswith("functions") and path.name.endswith(".yaml")):
            continue
        document = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
        for section in ("scalar_functions", "aggregate_functions", "window_functions"):
            for function in document.get(section) or []:
                stem = path.name.rsplit(".", 1)[0]
                refused: frozenset[str] = frozenset()
                if stem in _NUMERIC_YAMLS and (section == "scalar_functions"
                                               or function["name"] not in _ORDERING_AGGREGATES):
                    refused = _NOT_NUMBERS
                elif stem == _BOOLEAN_YAML:
                    refused = _NOT_BOOLEANS
                for impl in function.get("impls") or []:
                    args = list(impl.get("args") or [])
                    values = tuple(str(a["value"]) for a in args if "value" in a)
                    overload = Overload(values, bool(impl.get("variadic")), refused,
                                        _compound(function["name"], args), len(args))
                    out.setdefault(function["name"], []).append(overload)
    return {name: tuple(overloads) for name, overloads in out.items()}


def argument_kind(t: Type) -> str | None:
    """The kind :func:`call_problem` compares; None for an unknown type or one outside the table
    (user-defined types, aliases), which match anything."""
    if not is_known(t):
        return None
    return _KIND_OF.get(type_kind(t) or "")


def call_problem(name: str, argument_types: Sequence[Type]) -> str | None:
    """Why no standard overload of ``name`` takes value arguments of these types: None when one does, when
    ``name`` is no standard function, or when the check does not apply (see the module's docstring).

    >>> from optimizer.schema.types import make_type
    >>> print(call_problem("equal", [make_type("i64"), make_type("string")]))
    'equal' takes arguments of one type (any1, any1); here they are i64 and string
    >>> call_problem("equal", [make_type("i32"), make_type("decimal", precision=15, scale=2)]) is None
    True
    >>> call_problem("max", [make_type("string")]) is None  # the YAML has no max of strings; engines do
    True
    >>> print(call_problem("add", [make_type("i64"), make_type("string")]))
    'add' takes no string as argument 2 (its overloads take numeric or interval values there)
    >>> print(call_problem("and", [make_type("i32"), make_type("bool")]))
    'and' takes no i32 as argument 1 (its overloads take boolean values there)
    >>> call_problem("subtract", [make_type("date"), make_type("date")]) is None  # not in the YAMLs either
    True
    >>> print(call_problem("coalesce", []))  # ibis-substrait wrote one
    'coalesce' without arguments (each of its overloads takes at least one)
    """
    every = standard_overloads().get(name, ())
    if not argument_types and every and not any(o.fits(0) for o in every):
        return f"'{name}' without arguments (each of its overloads takes at least one)"
    overloads = [o for o in every if o.fits(len(argument_types))]
    kinds = [argument_kind(t) for t in argument_types]
    refused = frozenset().union(*(o.refused for o in overloads))
    if refused:
        for i, (t, kind) in enumerate(zip(argument_types, kinds, strict=True)):
            taken = list(dict.fromkeys(o.kind_at(i) for o in overloads))
            if kind in refused and kind not in taken and "any" not in taken:
                listed = ", ".join(taken[:-1]) + f" or {taken[-1]}" if len(taken) > 1 else taken[0]
                return (f"'{name}' takes no {type_name(t, False)} as argument {i + 1} (its overloads take "
                        f"{listed} values there)")
    if not any(o.polymorphic for o in overloads):
        return None
    if any(o.takes(kinds) for o in overloads):
        return None
    shown = " or ".join(dict.fromkeys(f"({', '.join(o.params)}{', ...' if o.variadic else ''})"
                                      for o in overloads if o.polymorphic))
    names = [type_name(t, False) for t in argument_types]
    listed = ", ".join(names[:-1]) + f" and {names[-1]}"
    return f"'{name}' takes arguments of one type {shown}; here they are {listed}"


def signature_problem(declared: str, arguments: int) -> str | None:
    """Why a call naming the standard overload ``declared`` by its compound name cannot be a call of it:
    it has another number of ``arguments`` (value and enumeration). None when it fits, or when ``declared``
    is no compound name of a standard overload (then nothing says which overload is meant).

    >>> print(signature_problem("add:i32_i32", 1))
    'add:i32_i32' takes 2 arguments; the call has 1
    >>> signature_problem("and:bool", 9) is None  # variadic: its one parameter repeats
    True
    >>> signature_problem("extract:date", 2) is None  # DuckDB's name, no standard one: not checked
    True
    """
    name, _, args = declared.partition(":")
    if not args:
        return None
    key = compound_key(declared)
    named = [o for o in standard_overloads().get(name.lower(), ()) if o.compound == key]
    if not named or any(arguments == o.arity or (o.variadic and arguments > o.arity) for o in named):
        return None
    least = min(o.arity for o in named)
    takes = f"{least} or more" if all(o.variadic for o in named) else f"{least}"
    return f"'{declared}' takes {takes} argument{'s' if takes != '1' else ''}; the call has {arguments}"


def kind_problem(what: str, actual: Type, other: str, expected: Type) -> str | None:
    """Why ``what`` (of type ``actual``) cannot stand beside ``other`` (of type ``expected``) in one
    expression (an IN list's option beside its value, a CASE branch beside the first): None when both are of
    one kind or either is unknown.

    >>> from optimizer.schema.types import make_type
    >>> print(kind_problem("the IN list's option", make_type("string"), "the value", make_type("i64")))
    the IN list's option is string where the value is i64; they must be of one type
    """
    kinds = argument_kind(expected), argument_kind(actual)
    if None in kinds or kinds[0] == kinds[1]:
        return None
    return f"{what} is {type_name(actual, False)} where {other} is {type_name(expected, False)}; they must be of one type"
