"""docs/targets.md and its page per target (issue 43: what each target rewrites, refuses and why, with the
evidence): every shipped target has a page, linked from the index, that names the engine version its
profile was checked against, the commit of the engines report its figures come from, and how to use it."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from optimizer.targets import TARGETS, load_target

DOCS = Path(__file__).resolve().parent.parent / "docs"
SECTIONS = ("## What the write stage rewrites", "## What it refuses", "## What runs right", "## Speed",
            "## How to use it")


def _versions(engine: str) -> list[str]:
    """The version numbers a profile's ``engine`` field names (``55.0.0``, ``1.1.3``, ``4.x``)."""
    return re.findall(r"\d+(?:\.(?:\d+|x))+", engine)


@pytest.mark.parametrize("name", TARGETS)
def test_each_target_has_a_page_naming_its_engine_version(name):
    page = DOCS / "targets" / f"{name}.md"
    assert page.is_file(), f"no page {page.relative_to(DOCS.parent)}"
    text = page.read_text()
    assert f"](targets/{name}.md)" in (DOCS / "targets.md").read_text(), f"docs/targets.md does not link {name}"
    engine_line = text.split("\n\n")[1]  # the paragraph under the title: "**Engine:** ..."
    assert engine_line.startswith("**Engine:**"), engine_line
    versions = _versions(load_target(name).engine)
    assert versions, f"the {name} profile's engine field names no version: {load_target(name).engine!r}"
    missing = [v for v in versions if v not in engine_line]
    assert not missing, f"docs/targets/{name}.md does not name version(s) {missing} of its profile"
    for heading in SECTIONS:
        assert heading in text, f"docs/targets/{name}.md has no section {heading!r}"
    assert f"--target {name}" in text
    if name != "spark":  # the engine that runs its plans here (datafusion-legacy's: the installed DataFusion)
        assert f"--engine {name.removesuffix('-legacy')}" in text


@pytest.mark.parametrize("name", [t for t in TARGETS if t != "spark"])
def test_engine_pages_name_the_report_their_figures_come_from(name):
    """The figures of "What runs right" come from docs/benchmarks/engines.json: the page names its commit."""
    commit = json.loads((DOCS / "benchmarks" / "engines.json").read_text())["machine"]["commit"]
    assert commit in (DOCS / "targets" / f"{name}.md").read_text(), f"docs/targets/{name}.md does not name {commit}"
