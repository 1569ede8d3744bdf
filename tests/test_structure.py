"""The package's structure: no import cycles between its modules, layers that import only downwards, a
short top level, rule modules that read in one sitting, and no catch-all ``except Exception`` without
its reason."""

from __future__ import annotations

import ast
import functools
from pathlib import Path

import networkx as nx

ROOT = Path(__file__).resolve().parent.parent
#: The repository's package folders and the dotted name each has when installed (pyproject's package-dir), or in
#: a checkout for the two that are not installed (workloads, testing).
PACKAGES = {"optimizer": "optimizer", "rules": "optimizer.rules", "cost": "optimizer.cost", "workloads": "workloads",
            "testing": "testing"}


def _modules() -> dict[str, Path]:
    """Dotted module name -> file, for every module of the packages (``pkg/__init__.py`` is ``pkg``)."""
    out: dict[str, Path] = {}
    for package, name in PACKAGES.items():
        for path in sorted((ROOT / package).rglob("*.py")):
            parts = [name] + list(path.relative_to(ROOT / package).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            out[".".join(parts)] = path
    return out


def _imported(module: str, path: Path, known: set[str]) -> set[str]:
    """The package modules ``module`` imports anywhere in its file: at module level, in functions and under
    ``if TYPE_CHECKING:`` (a type-only import is a dependency too: the module's meaning needs the other)."""
    is_package = path.name == "__init__.py"
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names} & known
        elif isinstance(node, ast.ImportFrom):
            if node.level:  # relative: from the module's package, one level up per extra dot
                base = module.split(".") if is_package else module.split(".")[:-1]
                base = base[: len(base) - (node.level - 1)]
                source = ".".join(base + ([node.module] if node.module else []))
            else:
                source = node.module or ""
            for alias in node.names:
                # ``from pkg import sub`` imports the submodule; ``from pkg import name``, pkg itself
                # (``import pkg.sub`` runs pkg's __init__ too, but that is a cycle only if the
                # __init__ needs names of a module that is still being imported: not counted).
                target = f"{source}.{alias.name}"
                found.add(target if target in known else source)
    found &= known
    found.discard(module)
    return found


@functools.cache  # the files do not change during a test session
def import_graph() -> nx.DiGraph:
    modules = _modules()
    g = nx.DiGraph()
    g.add_nodes_from(modules)
    for module, path in modules.items():
        g.add_edges_from((module, target) for target in _imported(module, path, set(modules)))
    return g


def test_the_graph_sees_the_modules_and_their_imports():
    g = import_graph()
    assert {"optimizer", "optimizer.cli", "optimizer.spark.backend", "optimizer.rules", "optimizer.cost.model"} <= set(g)
    assert g.has_edge("optimizer.cost.model", "optimizer.cost.cardinality")  # from optimizer.cost.cardinality import ...
    assert g.has_edge("optimizer", "optimizer.plan_io")  # the package re-exports load_plan
    assert g.has_edge("optimizer.cli.explain", "optimizer.explain")  # imported inside a function


def test_type_only_and_function_level_imports_count(tmp_path):
    path = tmp_path / "m.py"
    path.write_text("from typing import TYPE_CHECKING\n"
                    "if TYPE_CHECKING:\n    from optimizer.errors import PlanError\n"
                    "def f():\n    from optimizer import dag\n    import optimizer.schema\n")
    known = {"optimizer", "optimizer.errors", "optimizer.dag", "optimizer.schema", "optimizer.m"}
    assert _imported("optimizer.m", path, known) == {"optimizer.errors", "optimizer.dag", "optimizer.schema"}


def test_no_import_cycles():
    g = import_graph()
    cycles = [sorted(c) for c in nx.strongly_connected_components(g) if len(c) > 1]
    shown = []
    for component in cycles:
        sub = g.subgraph(component)
        for cycle in nx.simple_cycles(sub):
            shown.append(" -> ".join([*cycle, cycle[0]]))
            if len(shown) >= 40:
                break
    assert not cycles, f"{len(cycles)} groups of modules import each other:\n" + "\n".join(shown)


#: The layers, lowest first (docs/architecture.md, "Layers"). A module may import from its own layer and
#: the layers below it. ``pkg.*`` is a package and every module under it; a module named exactly wins
#: over a ``pkg.*``, the longer ``pkg.*`` over the shorter. A new module must fall in a layer.
LAYERS: list[tuple[str, tuple[str, ...]]] = [
    # what every layer reads: errors, file access, input limits, "which function is anchor N"
    ("base", ("optimizer.errors", "optimizer.paths", "optimizer.load.functions", "optimizer.load.limits",
              "optimizer.load.counts", "optimizer.load.protobuf_depth")),
    # expression helpers and the boolean simplification the rules and the cost model share
    ("expressions", ("optimizer.expr_utils",)),
    ("schema", ("optimizer.schema", "optimizer.schema.*")),  # types, relation outputs, check_plan
    ("dag", ("optimizer.dag",)),  # a plan as a graph of relations
    ("plan text", ("optimizer.explain", "optimizer.explain.expr_format")),  # the explain tree
    ("load", ("optimizer.load.*", "optimizer.plan_io")),  # bytes -> Plan (and back: save, dump)
    ("targets", ("optimizer.capabilities", "optimizer.targets.*")),  # what a consumer reads
    ("cost", ("optimizer.cost.*",)),  # statistics, estimates, cost model
    ("engine", ("optimizer.engine",)),  # a rule, its replacement checked, phases to a fixed point
    ("rules", ("optimizer.relations", "optimizer.rules.*")),
    ("write", ("optimizer.write.*",)),  # the plan written for a consumer
    ("driver", ("optimizer.driver", "optimizer")),  # optimize: phases, cost policy, write; the API
    ("backends", ("optimizer.spark.*", "optimizer.engines.*")),  # running a plan
    ("explain", ("optimizer.explain.*",)),  # estimates against actual rows, DOT/SVG, HTML: optimize and run
    ("diff", ("optimizer.difftest.*",)),  # what `substrait-opt diff` runs
    ("cli", ("optimizer.cli.*", "optimizer.__main__")),
    # test, fuzz and benchmark support (not installed): plans built in Python, plan generators, the fuzzer,
    # hostile inputs, workloads
    ("support", ("testing.*", "workloads.*")),
]

#: The imports from a lower layer to a higher one, each with its reason (at most 3; docs/architecture.md
#: names them).
LOWER_TO_HIGHER: dict[tuple[str, str], str] = {}


def _layer_of(module: str) -> int | None:
    best: tuple[int, int] | None = None  # (specificity, layer)
    for i, (_, patterns) in enumerate(LAYERS):
        for p in patterns:
            if p.endswith(".*"):
                package = p[:-2]
                if module == package or module.startswith(package + "."):
                    rank = len(package)
                else:
                    continue
            elif module == p:
                rank = 10_000
            else:
                continue
            if best is None or rank > best[0]:
                best = (rank, i)
    return None if best is None else best[1]


def lower_to_higher(g: nx.DiGraph) -> list[tuple[str, str]]:
    """The imports ``(importer, imported)`` from a lower layer to a higher one (modules without a layer:
    :func:`test_every_module_has_a_layer`)."""
    layer = {m: _layer_of(m) for m in g}
    return sorted((a, b) for a, b in g.edges if None not in (layer[a], layer[b]) and layer[a] < layer[b])


def test_the_layer_check_finds_an_import_upwards():
    # the imports that were upward before fold moved below the cost model and human into the explain tree
    g = nx.DiGraph([("optimizer.cost.selectivity", "optimizer.rules.simplify_predicates"),
                    ("optimizer.driver", "optimizer.explain.estimates"),
                    ("optimizer.rules.push_filters", "optimizer.engine"), ("optimizer.explain.dot", "optimizer.explain")])
    assert lower_to_higher(g) == [("optimizer.cost.selectivity", "optimizer.rules.simplify_predicates"),
                                  ("optimizer.driver", "optimizer.explain.estimates")]


def test_every_module_has_a_layer():
    assert [m for m in import_graph() if _layer_of(m) is None] == []


def test_layers_import_only_downwards():
    g = import_graph()
    found = lower_to_higher(g)
    named = ", ".join(f"{a} ({LAYERS[_layer_of(a)][0]}) -> {b} ({LAYERS[_layer_of(b)][0]})"
                      for a, b in found if (a, b) not in LOWER_TO_HIGHER)
    assert not named, f"imports from a lower layer to a higher one: {named}"
    stale = set(LOWER_TO_HIGHER) - set(found)
    assert not stale, f"no longer imported: remove from LOWER_TO_HIGHER and docs/architecture.md: {stale}"
    assert len(LOWER_TO_HIGHER) <= 3


def test_the_exceptions_are_named_in_the_architecture_doc():
    doc = (ROOT / "docs" / "architecture.md").read_text()
    for a, b in LOWER_TO_HIGHER:
        assert f"`{a}` -> `{b}`" in doc, f"docs/architecture.md does not name {a} -> {b}"
    for name, _ in LAYERS:
        assert f"| {name} |" in doc, f"docs/architecture.md's layer table has no row {name}"


def test_the_cost_model_reads_no_rule():
    g = import_graph()
    assert [(a, b) for a, b in g.edges
            if a.split(".")[:2] == ["optimizer", "cost"] and b.split(".")[:2] == ["optimizer", "rules"]] == []


def test_the_optimizer_package_has_at_most_twelve_top_level_modules():
    top = sorted(p.name for p in (ROOT / "optimizer").glob("*.py"))
    assert len(top) <= 12, top


def _rule_modules() -> list[Path]:
    return [p for p in sorted((ROOT / "rules").glob("*.py")) if p.name != "__init__.py"]


def test_every_rule_module_opens_with_its_public_function_and_a_short_example():
    """Each rule module: its contract in the module docstring, then its public function, whose docstring
    holds a before/after doctest of at most 10 lines (input and printed output)."""
    for path in _rule_modules():
        tree = ast.parse(path.read_text())
        assert ast.get_docstring(tree), f"{path.name}: no module docstring (the rule's contract)"
        first = next(n for n in tree.body if isinstance(n, ast.FunctionDef))
        assert not first.name.startswith("_"), f"{path.name}: the first function, {first.name}, is private"
        doc = (ast.get_docstring(first) or "").splitlines()
        start = next((i for i, line in enumerate(doc) if line.startswith(">>>")), None)
        assert start is not None, f"{path.name}: {first.name} has no doctest"
        end = start
        while end + 1 < len(doc) and doc[end + 1].strip():
            end += 1
        assert end - start + 1 <= 10, f"{path.name}: the example is {end - start + 1} lines"


def test_catch_alls_are_few_and_say_why():
    """``except Exception`` only where any error is expected, each with a comment saying why (the
    line itself or the two above it). Six: the CLI's last resort, two around a JVM going away, the
    difftest harness's findings, the extension registry's derivations, and DataFusion's Python bindings,
    which raise every error as a plain ``Exception`` (``optimizer.errors.plain_exceptions_as``, the one
    place both the producer and the engine runner call them through)."""
    found = []
    for path in _modules().values():
        if path.relative_to(ROOT).parts[0] in ("workloads", "testing"):  # test support, not the library
            continue
        lines = path.read_text().splitlines()
        for i, line in enumerate(lines):
            if "except Exception" in line or "suppress(Exception)" in line:
                context = lines[max(0, i - 2):i + 1]
                assert any("#" in c for c in context), f"{path.relative_to(ROOT)}:{i + 1}: no reason given"
                found.append(f"{path.relative_to(ROOT)}:{i + 1}")
    assert len(found) <= 6, found


def test_the_function_table_is_built_in_at_most_three_places():
    """A plan's function table is built where the plan comes in (its DAG, the write stage's copy, a plan
    message checked, typed or run) and handed on from there, never rebuilt per step: at most 3 calls of
    ``function_table(`` in the library (``optimizer/``, ``rules/``, ``cost/``), as
    ``grep -rn "function_table(" optimizer rules cost --include=*.py | grep -v "def function_table"`` counts."""
    sites = []
    for package in ("optimizer", "rules", "cost"):
        for path in sorted((ROOT / package).rglob("*.py")):
            for i, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
                if "function_table(" in line and "def function_table" not in line:
                    sites.append(f"{path.relative_to(ROOT)}:{i}")
    assert sites, "no call site found: the count is measuring nothing"
    assert len(sites) <= 3, f"{len(sites)} places build a function table: " + ", ".join(sites)


def test_no_cost_module_is_over_1200_lines():
    """The cost model's modules stay readable (the project's rule: no library module over 1,200 lines);
    the cardinality estimator's joins and set operations are a module of their own."""
    from pathlib import Path

    root = Path(__file__).resolve().parent.parent / "cost"
    long = {p.name: n for p in root.glob("*.py") if (n := len(p.read_text().splitlines())) > 1200}
    assert long == {}
