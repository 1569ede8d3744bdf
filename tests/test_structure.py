"""The package's structure: no import cycles between its modules, a short top level, rule modules that
read in one sitting, and no catch-all ``except Exception`` without its reason."""

from __future__ import annotations

import ast
from pathlib import Path

import networkx as nx

ROOT = Path(__file__).resolve().parent.parent
#: The repository's package folders and the dotted name each has when installed (pyproject's package-dir).
PACKAGES = {"optimizer": "optimizer", "rules": "optimizer.rules", "cost": "optimizer.cost", "workloads": "workloads"}


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


def _walk(tree: ast.AST):
    """Every node of ``tree`` except the bodies of ``if TYPE_CHECKING:`` (imports that never run)."""
    todo = [tree]
    while todo:
        node = todo.pop()
        yield node
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            todo.extend(node.orelse)
            continue
        todo.extend(ast.iter_child_nodes(node))


def _imported(module: str, path: Path, known: set[str]) -> set[str]:
    """The package modules ``module`` imports anywhere in its file (module level or in functions)."""
    is_package = path.name == "__init__.py"
    found: set[str] = set()
    for node in _walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
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
    assert not g.has_edge("optimizer.spark.functions", "optimizer.spark.expressions")  # TYPE_CHECKING only


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
        if path.relative_to(ROOT).parts[0] == "workloads":  # test and benchmark support, not the library
            continue
        lines = path.read_text().splitlines()
        for i, line in enumerate(lines):
            if "except Exception" in line or "suppress(Exception)" in line:
                context = lines[max(0, i - 2):i + 1]
                assert any("#" in c for c in context), f"{path.relative_to(ROOT)}:{i + 1}: no reason given"
                found.append(f"{path.relative_to(ROOT)}:{i + 1}")
    assert len(found) <= 6, found
