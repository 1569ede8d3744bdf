"""The package uses PySpark's public API only, and changes nothing in it: the backend runs on any session
(classic or Spark Connect) and leaves the user's process as it found it. Read from the sources: no
private PySpark names (``_jdf``, ``_jvm``, ``_jc``, ``_jsparkSession``, ``_gateway``...), no
``pyspark.sql.classic`` import, and no assignment to (or ``setattr`` on) anything imported from pyspark.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
SOURCES = sorted(p for folder in ("optimizer", "rules", "cost", "workloads") for p in (REPO / folder).rglob("*.py"))
PRIVATE = re.compile(r"\.(_jdf|_jvm|_jc|_jsc|_jsparkSession|_jconf|_gateway|_sc|_jreader|_jwrite)\b")


def test_there_are_sources():
    assert len(SOURCES) > 50


def test_no_private_pyspark_attributes_and_no_classic_module():
    found = []
    for path in SOURCES:
        text = path.read_text()
        for n, line in enumerate(text.splitlines(), 1):
            if PRIVATE.search(line) or "pyspark.sql.classic" in line or "install_jvm_caches" in line:
                found.append(f"{path.relative_to(REPO)}:{n}: {line.strip()}")
    assert not found, "\n".join(found)


def _pyspark_names(tree: ast.Module) -> set[str]:
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names |= {(a.asname or a.name).split(".")[0] for a in node.names if a.name.startswith("pyspark")}
        elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith("pyspark"):
            names |= {a.asname or a.name for a in node.names}
    return names


def test_nothing_imported_from_pyspark_is_patched():
    found = []
    for path in SOURCES:
        tree = ast.parse(path.read_text())
        names = _pyspark_names(tree)
        if not names:
            continue
        for node in ast.walk(tree):
            targets = []
            if isinstance(node, ast.Assign):
                targets = node.targets
            elif isinstance(node, ast.AugAssign | ast.AnnAssign):
                targets = [node.target]
            for t in targets:
                base = t
                while isinstance(base, ast.Attribute):
                    base = base.value
                if isinstance(t, ast.Attribute) and isinstance(base, ast.Name) and base.id in names:
                    found.append(f"{path.relative_to(REPO)}:{node.lineno}: assigns {ast.unparse(t)}")
            if (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "setattr"
                    and node.args and isinstance(node.args[0], ast.Name) and node.args[0].id in names):
                found.append(f"{path.relative_to(REPO)}:{node.lineno}: setattr on {node.args[0].id}")
    assert not found, "\n".join(found)
