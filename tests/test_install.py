"""Every module the package imports is a declared dependency of the install that needs it.

Statically: the third-party imports of every module of ``optimizer``, ``rules`` and ``cost`` (their AST)
map (``importlib.metadata.packages_distributions()``) to a distribution in pyproject's ``dependencies``;
only the modules listed in :data:`EXTRA_MODULES` (test and benchmark tooling, which the CLI never imports, and
the engine runners, imported only for ``--engine``) may use an extra's; the test support of ``testing/``
(not installed) may use the ``test`` extra's. The wheel holds no test support: no module of it imports
``testing``, ``workloads`` or a test tool. Live: a fresh venv with a plain ``pip install`` (no extras) runs
each CLI command on a small plan.
"""

from __future__ import annotations

import ast
import importlib.metadata
import os
import re
import shutil
import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path

import pytest

from workloads.corpus import corpus_root

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("optimizer", "rules", "cost")
#: The repository's folders that are not installed: test and benchmark workloads (they read the corpus,
#: which only a checkout has), and test and fuzz support (plans built in Python, plan generators, the
#: fuzzer, hostile inputs), which may import the ``test`` extra's distributions.
REPO_PACKAGES = {"workloads": None, "testing": "test"}

#: Modules of the package that may import a distribution of an extra (and which extra): the engine runners
#: of ``--engine datafusion|duckdb`` (their constructors check the import and name the extra to install;
#: the other modules of the package import them only when asked for that engine).
EXTRA_MODULES = {
    "optimizer/engines/datafusion.py": "datafusion",
    "optimizer/engines/duckdb.py": "duckdb",
}
#: What no installed module may import: the folders only a checkout has, and the test tools.
TEST_SUPPORT = {*REPO_PACKAGES, "hypothesis", "pytest"}


def _requirement_name(req: str) -> str:
    return re.split(r"[\s\[<>=!~;]", req.strip(), maxsplit=1)[0].lower().replace("_", "-")


def _project() -> dict:
    return tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]


def _imports(path: Path, optional: bool = False) -> dict[str, int]:
    """Top-level names of the non-stdlib modules ``path`` imports (first line of each); with ``optional``
    false, those imported under ``try: ... except ImportError`` are left out."""
    tree = ast.parse(path.read_text(), str(path))
    skipped: set[int] = set()
    for node in ast.walk(tree):
        if not optional and isinstance(node, ast.Try) and any(
            isinstance(h.type, ast.Name) and h.type.id in ("ImportError", "ModuleNotFoundError") for h in node.handlers
        ):
            skipped |= {id(n) for stmt in node.body for n in ast.walk(stmt)}
    found: dict[str, int] = {}
    for node in ast.walk(tree):
        if id(node) in skipped:
            continue
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names = [node.module]
        else:
            continue
        for name in names:
            top = name.split(".")[0]
            if top not in sys.stdlib_module_names and top != "__future__":
                found.setdefault(top, node.lineno)
    return found


def _third_party_imports(path: Path) -> dict[str, int]:
    """Top-level names of third-party modules ``path`` imports (first line of each), optional ones
    (imported under ``try: ... except ImportError``) left out."""
    return {top: line for top, line in _imports(path).items() if top not in PACKAGES and top not in REPO_PACKAGES}


def test_every_import_is_a_declared_dependency():
    project = _project()
    core = {_requirement_name(r) for r in project["dependencies"]}
    extras = {name: {_requirement_name(r) for r in reqs} for name, reqs in project["optional-dependencies"].items()}
    providers = importlib.metadata.packages_distributions()
    problems = []
    modules = sorted(p for pkg in PACKAGES for p in (ROOT / pkg).rglob("*.py"))
    assert len(modules) > 40
    support = sorted(p for pkg, extra in REPO_PACKAGES.items() if extra for p in (ROOT / pkg).rglob("*.py"))
    assert len(support) > 5
    for path in modules + support:
        rel = path.relative_to(ROOT).as_posix()
        extra = EXTRA_MODULES.get(rel) or REPO_PACKAGES.get(rel.split("/")[0])
        allowed = core | extras.get(extra or "", set())
        for top, line in _third_party_imports(path).items():
            dists = {d.lower().replace("_", "-") for d in providers.get(top, [])}
            if not dists & allowed:
                problems.append(f"{rel}:{line}: imports {top} (from {sorted(dists) or 'no installed distribution'}), "
                                f"not declared in {extra or 'dependencies'}")
    assert not problems, "\n".join(problems)


def _wheel_modules() -> list[str]:
    """The modules the wheel holds, as repository paths: the ``*.py`` files of each package pyproject lists,
    in the folder its ``package-dir`` names (setuptools takes no subpackage that is not listed)."""
    tool = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    folders = {name: folder for name, folder in tool["package-dir"].items()}
    out = []
    for package in tool["packages"]:
        top = max((n for n in folders if package == n or package.startswith(n + ".")), key=len)
        folder = ROOT / folders[top] / package[len(top):].lstrip(".").replace(".", "/")
        out += [p.relative_to(ROOT).as_posix() for p in sorted(folder.glob("*.py"))]
    return out


def test_the_wheel_holds_no_test_support():
    """Test and fuzz support (plans built in Python, Hypothesis strategies, the fuzzer, hostile inputs) lives
    in ``testing/``, outside the installed package: no installed module imports it, ``workloads`` or a test
    tool, not even optionally."""
    modules = _wheel_modules()
    assert "optimizer/difftest/harness.py" in modules and "rules/push_filters.py" in modules
    found = [f"{rel}:{line}: imports {top}" for rel in modules
             for top, line in _imports(ROOT / rel, optional=True).items() if top in TEST_SUPPORT]
    assert found == []


def test_the_check_sees_an_undeclared_import(tmp_path):
    """The walk finds imports at any depth (in functions too) and skips only optional ones."""
    module = tmp_path / "m.py"
    module.write_text("import os\ndef f():\n    import numpy as np\ntry:\n    import tqdm\nexcept ImportError:\n    tqdm = None\n"
                      "from google.protobuf import json_format\n")
    assert _third_party_imports(module) == {"numpy": 3, "google": 8}


def _copy_sources(dest: Path) -> Path:
    """The files a build reads, copied to ``dest``: building in the worktree would leave build/ there."""
    dest.mkdir()
    for name in ("pyproject.toml", "README.md", "LICENSE", "docs", *PACKAGES):
        if (ROOT / name).is_dir():
            shutil.copytree(ROOT / name, dest / name, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            shutil.copy2(ROOT / name, dest / name)
    return dest


@pytest.mark.slow
def test_the_built_wheel_holds_the_listed_modules(tmp_path):
    """``pip wheel`` of the project holds exactly the modules :func:`_wheel_modules` reads from pyproject
    (so :func:`test_the_wheel_holds_no_test_support` checks what is shipped): no ``testing`` or ``workloads``."""
    source = _copy_sources(tmp_path / "src")
    built = subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(tmp_path / "dist"),
                            str(source)], capture_output=True, text=True)
    assert built.returncode == 0, built.stderr[-2000:]
    (wheel,) = (tmp_path / "dist").glob("*.whl")
    with zipfile.ZipFile(wheel) as z:
        shipped = sorted(n for n in z.namelist() if n.endswith(".py"))
    installed = {"rules": "optimizer/rules", "cost": "optimizer/cost"}
    expected = sorted(installed.get(m.split("/")[0], m.split("/")[0]) + "/" + m.split("/", 1)[1]
                      for m in _wheel_modules())
    assert shipped == expected


#: Run in the fresh venv: the top-level names our distribution installs, then PyPI's ``rules`` and ours.
INSTALLED_NAMES = """
import importlib.metadata
files = importlib.metadata.files("substrait-optimizer")
print(*sorted({f.parts[0] for f in files if f.suffix == ".py" and len(f.parts) > 1 and ".." not in f.parts}))
import rules, rules.predicates, optimizer.rules
print(rules.predicates.__name__, "optimizer.rules.RULES" if optimizer.rules.RULES else "")
"""


def test_pyproject_installs_every_package_folder():
    """pyproject lists the packages by hand (``rules/`` and ``cost/`` install under ``optimizer``): a new
    package folder must be listed, or the wheel lacks it."""
    tool = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    folders = {"optimizer": "optimizer", "rules": "optimizer.rules", "cost": "optimizer.cost"}
    expected = {".".join([folders[init.relative_to(ROOT).parts[0]], *init.relative_to(ROOT).parts[1:-1]])
                for folder in folders for init in (ROOT / folder).rglob("__init__.py")}
    assert set(tool["packages"]) == expected
    assert tool["package-dir"] == {name: folder for folder, name in folders.items()}


@pytest.mark.slow
def test_fresh_venv_without_extras_runs_every_command(tmp_path, tpch_small_dir):
    """``pip install <project>`` (no extras) into a new venv; convert, explain, optimize, run and diff work."""
    # A copy of the sources: building in the worktree would leave build/ there.
    source = tmp_path / "src"
    source.mkdir()
    for name in ("pyproject.toml", "README.md", *PACKAGES):
        copy = shutil.copytree if (ROOT / name).is_dir() else shutil.copy2
        copy(ROOT / name, source / name, **({"ignore": shutil.ignore_patterns("__pycache__")} if copy is shutil.copytree else {}))
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    bindir = venv / "bin"
    # --no-compile: the commands below compile what they import; byte-compiling all of pyspark up front
    # is most of an install's time and checks nothing here.
    install = subprocess.run([str(bindir / "python"), "-m", "pip", "install", "-q", "--no-compile", str(source)],
                             capture_output=True, text=True)
    assert install.returncode == 0, install.stderr[-2000:]
    # One installed top-level name: PyPI's ``rules`` (django-rules) installs beside it and both import.
    beside = subprocess.run([str(bindir / "python"), "-m", "pip", "install", "-q", "--no-compile", "rules"],
                            capture_output=True, text=True)
    assert beside.returncode == 0, beside.stderr[-2000:]
    both = subprocess.run([str(bindir / "python"), "-c", INSTALLED_NAMES], capture_output=True, text=True,
                          cwd=tmp_path)
    assert both.returncode == 0, both.stderr[-2000:]
    assert both.stdout.split() == ["optimizer", "rules.predicates", "optimizer.rules.RULES"], both.stdout
    plan = corpus_root() / "substrait_consumer/snapshots/producer/integration/tpch/q06-duckdb_plan.json"
    exe = str(bindir / "substrait-opt")
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    env["SUBSTRAIT_OPT_DRIVER_MEMORY"] = "1g"
    tables = str(tpch_small_dir)
    commands = [
        ["convert", str(plan), "-o", str(tmp_path / "q6.binpb")],
        ["explain", str(tmp_path / "q6.binpb")],
        ["optimize", str(plan), "--tables", tables, "-o", str(tmp_path / "q6.opt.json")],
        ["run", str(tmp_path / "q6.opt.json"), "--tables", tables, "--out", str(tmp_path / "out")],
        ["diff", str(plan), "--tables", tables, "--out", str(tmp_path / "diff")],
    ]
    for command in commands:
        done = subprocess.run([exe, *command], capture_output=True, text=True, env=env, cwd=tmp_path)
        assert done.returncode == 0, (command[0], done.stderr[-2000:])
        if command[0] in ("run", "diff"):  # Spark's JVM and log4j write to the log (the config is package data)
            assert done.stderr == "", (command[0], done.stderr[-2000:])
    assert (tmp_path / "out" / "q6.opt.parquet").exists()
    assert done.stdout.strip().splitlines()[-1] == "1 passed, 0 failed"
