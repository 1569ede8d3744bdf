"""One function registry for every producer: "which standard function is this anchor?".

Producers declare functions differently:

* Isthmus and DuckDB point at an extension YAML (by URI in older plans, by URN in newer ones) and
  use compound names (``gt:i32_i32``); DuckDB also uses simple names (``count``).
* DataFusion declares no extension at all (``extension_urn_reference`` = 4294967295) and uses
  simple names (``gt``, ``sum``).

:func:`function_table` resolves every declared anchor to a :class:`FunctionInfo` holding the
standard extension URN (looked up in the ``substrait`` package's extension registry when the plan
does not say), the simple name and the compound signature when there is one. A plan's table is built
where the plan enters (loaded into a DAG, written for a target, checked, run) and handed on from there;
whatever declares or renames a function updates it (:meth:`FunctionTable.declare`).
"""

from __future__ import annotations

import functools
import re
import urllib.parse
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from substrait.extension_registry import ExtensionRegistry

from optimizer.errors import PlanError

STANDARD_URN_PREFIX = "extension:io.substrait:"
#: DataFusion writes this as the URN reference of functions it declares no extension for.
NO_EXTENSION = 4294967295

# When a bare name is defined by several standard extensions, prefer the general one.
_PREFERRED_ORDER = (
    "functions_comparison",
    "functions_boolean",
    "functions_arithmetic",
    "functions_string",
    "functions_datetime",
    "functions_aggregate_generic",
    "functions_rounding",
    "functions_logarithmic",
    "functions_set",
    "functions_aggregate_approx",
    "functions_arithmetic_decimal",
    "functions_rounding_decimal",
    "functions_aggregate_decimal_output",
    "functions_list",
    "functions_geometry",
)


@dataclass(frozen=True)
class FunctionInfo:
    """A declared extension function, resolved."""

    anchor: int
    name: str  # simple name, e.g. "add"
    signature: str | None  # compound name as declared, e.g. "add:i32_i32"; None for a simple name
    urn: str | None  # e.g. "extension:io.substrait:functions_arithmetic"; None if unknown
    kind: str | None  # "scalar" | "aggregate" | "window" per the standard YAML; None if unknown

    @property
    def declared_name(self) -> str:
        return self.signature or self.name

    @property
    def is_standard(self) -> bool:
        return self.urn is not None and self.urn.startswith(STANDARD_URN_PREFIX) and self.kind is not None


@functools.cache
def _registry() -> ExtensionRegistry:
    return ExtensionRegistry(load_default_extensions=True)


@functools.cache
def _standard_index() -> dict[str, dict[str, str]]:
    """name -> {urn: kind} over the standard extension YAMLs."""
    index: dict[str, dict[str, str]] = {}
    for urn, name, function_type in _registry().iter_functions():
        index.setdefault(name, {})[urn] = function_type.value
    return index


@functools.cache
def standard_urns() -> frozenset[str]:
    return frozenset(_registry().urns())


def _urn_rank(urn: str) -> int:
    stem = urn.rsplit(":", 1)[-1]
    return _PREFERRED_ORDER.index(stem) if stem in _PREFERRED_ORDER else len(_PREFERRED_ORDER)


def uri_to_urn(uri: str) -> str:
    """Map an old extension URI to a URN, losslessly.

    The standard YAMLs (any URI whose file name is ``functions_*.yaml`` of the standard set, as
    Isthmus's ``/functions_arithmetic.yaml`` or DuckDB's GitHub URL) map to
    ``extension:io.substrait:<stem>``. Any other URI is kept whole, percent-encoded, in
    ``extension:uri:<uri>`` so that :func:`urn_to_uri` gives it back.

    >>> uri_to_urn("https://github.com/substrait-io/substrait/blob/main/extensions/functions_arithmetic.yaml")
    'extension:io.substrait:functions_arithmetic'
    >>> uri_to_urn("/functions_datetime.yaml")
    'extension:io.substrait:functions_datetime'
    >>> uri_to_urn("https://example.com/my:funcs.yaml")
    'extension:uri:https%3A%2F%2Fexample.com%2Fmy%3Afuncs.yaml'
    """
    stem = re.sub(r"\.ya?ml$", "", uri.rstrip("/").rsplit("/", 1)[-1])
    candidate = STANDARD_URN_PREFIX + stem
    if candidate in standard_urns():
        return candidate
    return "extension:uri:" + urllib.parse.quote(uri, safe="")


def urn_to_uri(urn: str) -> str | None:
    """The URI an ``extension:uri:`` URN came from (None for other URNs)."""
    if urn.startswith("extension:uri:"):
        return urllib.parse.unquote(urn[len("extension:uri:") :])
    return None


def split_name(declared: str) -> tuple[str, str | None]:
    """``"gt:i32_i32"`` -> ``("gt", "gt:i32_i32")``; ``"gt"`` -> ``("gt", None)``."""
    if ":" in declared:
        return declared.split(":", 1)[0], declared
    return declared, None


def resolve(anchor: int, declared: str, urn: str | None) -> FunctionInfo:
    """Resolve one declared function against the standard extensions."""
    name, signature = split_name(declared)
    index = _standard_index().get(name, {})
    if urn is not None and urn in index:
        return FunctionInfo(anchor, name, signature, urn, index[urn])
    if urn is not None and urn.startswith(STANDARD_URN_PREFIX) and urn in standard_urns():
        # Declared against a standard YAML that does not define it: keep what the plan says.
        return FunctionInfo(anchor, name, signature, urn, None)
    if urn is None and index:
        best = min(index, key=_urn_rank)
        return FunctionInfo(anchor, name, signature, best, index[best])
    return FunctionInfo(anchor, name, signature, urn, None)


class FunctionTable:
    """Anchor -> :class:`FunctionInfo` for one plan."""

    def __init__(self, functions: Iterable[FunctionInfo]) -> None:
        self._by_anchor: dict[int, FunctionInfo] = {f.anchor: f for f in functions}

    def declare(self, info: FunctionInfo) -> None:
        """Add (or, for an anchor already declared, replace) one function: the plan declared or renamed it.
        The table stays what :func:`function_table` would build from the plan now."""
        self._by_anchor[info.anchor] = info

    def copy(self) -> FunctionTable:
        """A table that declarations in this one do not change (for a copy of the plan)."""
        return FunctionTable(self._by_anchor.values())

    def __contains__(self, anchor: int) -> bool:
        return anchor in self._by_anchor

    def __iter__(self):
        return iter(self._by_anchor.values())

    def __len__(self) -> int:
        return len(self._by_anchor)

    def get(self, anchor: int, path: str | None = None) -> FunctionInfo:
        """The function with this anchor; a :class:`PlanError` naming ``path`` if none is declared."""
        try:
            return self._by_anchor[anchor]
        except KeyError:
            raise PlanError(f"unknown function anchor {anchor} (no extension function declares it)", path) from None

    def anchor_for(self, name: str) -> int | None:
        """The anchor of the first declared function with this simple name, if any."""
        for info in self._by_anchor.values():
            if info.name == name:
                return info.anchor
        return None


def function_table(plan) -> FunctionTable:
    """Resolve every extension function declared in ``plan`` (an upgraded ``substrait.proto.Plan``)."""
    return FunctionTable(resolve(fn.function_anchor, fn.name, urn) for fn, urn in declared_functions(plan))


def declared_functions(plan) -> Iterator[tuple[Any, str | None]]:
    """Each ``extension_function`` declaration of ``plan`` with the URN it names (None for none)."""
    urns: dict[int, str] = {}
    for i, u in enumerate(plan.extension_urns):
        if urns.setdefault(u.extension_urn_anchor, u.urn) != u.urn:
            raise PlanError(f"extension URN anchor {u.extension_urn_anchor} is declared twice, as "
                            f"'{urns[u.extension_urn_anchor]}' and as '{u.urn}'", f"extension_urns[{i}]")
    seen: dict[int, tuple[str, int]] = {}
    for i, decl in enumerate(plan.extensions):
        if decl.WhichOneof("mapping_type") != "extension_function":
            continue
        fn = decl.extension_function
        first = seen.setdefault(fn.function_anchor, (fn.name, fn.extension_urn_reference))
        if first != (fn.name, fn.extension_urn_reference):
            raise PlanError(f"function anchor {fn.function_anchor} is declared twice, as '{first[0]}' and as "
                            f"'{fn.name}'", f"extensions[{i}].extension_function")
        ref = fn.extension_urn_reference
        if ref == NO_EXTENSION or (ref == 0 and ref not in urns):
            urn = None
        elif ref in urns:
            urn = urns[ref]
        else:
            raise PlanError(
                f"function '{fn.name}' refers to extension URN anchor {ref}, which is not declared",
                f"extensions[{i}].extension_function",
            )
        yield fn, urn
