"""docs/tutorial.md, run as a user would: every command of its ``sh`` blocks, in order, in a fresh venv
with the package's wheel, each block's output checked against the ``text`` block that follows it.

The commands are read from the page (the page and this test cannot drift apart). The venv gets the
wheel built from a copy of the sources (``pip install --no-deps``) and sees the dependencies through a
``.pth`` line naming the project venv's site-packages: that directory is then a plain ``sys.path`` entry,
so the project's editable install there (its ``__editable__`` ``.pth`` and finder) is never run and
``import optimizer`` finds the wheel's copy. Lines that set up the environment (``python3 -m venv``,
``. venv/bin/activate``, ``pip install``) are the test's own work; ``start-connect-server.sh`` is
replaced by a Spark Connect server the test starts (tests/spark_servers.py) on a free port, whose URL
replaces the page's ``sc://localhost:15002``.

An excerpt matches when each of its lines is found in the output, in order; ``...`` in a line stands
for any text, a line of ``...`` alone for any lines.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import sysconfig
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
TUTORIAL = ROOT / "docs" / "tutorial.md"
#: What the wheel is built from (a copy: building in the worktree would leave build/ there).
SOURCES = ("pyproject.toml", "README.md", "LICENSE", "optimizer", "rules", "cost", "docs")
#: The page's URL of a Spark Connect server, replaced by the one the test starts.
PAGE_REMOTE = "sc://localhost:15002"

_FENCE = re.compile(r"^```(\w*)\n(.*?)^```\n", re.DOTALL | re.MULTILINE)
_SETUP = re.compile(r"^\s*(python3? -m venv\b|\. \S+/activate\b|source\b|pip install\b)")
_SERVER = re.compile(r"(start|stop)-connect-server\.sh")


@dataclass
class Step:
    commands: str  # the sh block as on the page
    expected: str | None  # the text block right after it
    line: int  # where the block starts on the page


def tutorial_steps(text: str) -> list[Step]:
    """The ``sh`` blocks of the page, each with the ``text`` block that directly follows it (if any)."""
    blocks = list(_FENCE.finditer(text))
    steps = []
    for i, block in enumerate(blocks):
        if block.group(1) != "sh":
            continue
        follow = blocks[i + 1] if i + 1 < len(blocks) else None
        expected = None
        if follow is not None and follow.group(1) == "text" and not text[block.end():follow.start()].strip():
            expected = follow.group(2)
        steps.append(Step(block.group(2), expected, text.count("\n", 0, block.start()) + 1))
    return steps


def excerpt_mismatch(expected: str, output: str) -> str | None:
    """None when every line of ``expected`` is in ``output`` in order (``...`` any text); else the first
    line not found."""
    lines = [line.rstrip() for line in output.splitlines()]
    at = 0
    for want in expected.splitlines():
        if want.strip() == "...":
            continue
        pattern = re.compile(".*?".join(re.escape(part) for part in want.rstrip().split("...")), re.DOTALL)
        while at < len(lines) and not pattern.fullmatch(lines[at]):
            at += 1
        if at == len(lines):
            return want
        at += 1
    return None


def test_excerpts_match_as_documented():
    output = "q3: 10 rows in 1.20 s\n  a | b\n  1 | 2   \nq3.opt: 10 rows in 0.50 s\n2 ok, 0 failed\n"
    assert excerpt_mismatch("q3: 10 rows in ...\n...\n  1 | 2...\n2 ok, 0 failed", output) is None
    assert excerpt_mismatch("2 ok, 0 failed\nq3: 10 rows in ...", output) == "q3: 10 rows in ..."  # order
    assert excerpt_mismatch("q3: 11 rows in ...", output) == "q3: 11 rows in ..."


def test_every_block_is_a_step():
    """Each ``sh`` block of the page that prints something has its expected output; none is skipped."""
    text = TUTORIAL.read_text()
    steps = tutorial_steps(text)
    assert len(steps) == text.count("```sh\n") >= 7
    commands = "\n".join(s.commands for s in steps)
    for command in ("plan", "explain", "optimize", "run", "diff"):
        assert f"substrait-opt {command} " in commands
    assert "--remote" in commands and "--explain" in commands
    assert all(s.expected for s in steps if "substrait-opt" in s.commands)


def _build_wheel(tmp: Path) -> Path:
    source = tmp / "src"
    source.mkdir()
    for name in SOURCES:
        if (ROOT / name).is_dir():
            shutil.copytree(ROOT / name, source / name, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            shutil.copy2(ROOT / name, source / name)
    done = subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(tmp / "dist"),
                           str(source)], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-2000:]
    (wheel,) = (tmp / "dist").glob("substrait_optimizer-*.whl")
    return wheel


def _fresh_venv(tmp: Path, wheel: Path) -> Path:
    venv = tmp / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    python = venv / "bin" / "python"
    done = subprocess.run([str(python), "-m", "pip", "install", "-q", "--no-deps", "--no-compile", str(wheel)],
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-2000:]
    site = subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                          capture_output=True, text=True, check=True).stdout.strip()
    # The project venv's packages (the dependencies, the extras the page installs), as a plain path entry.
    Path(site, "project-dependencies.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    return venv


def _script(commands: str, remote: str | None) -> tuple[str, list[str]]:
    """The block as the test runs it, and the set-up lines it leaves to the test."""
    kept, setup = [], []
    for line in commands.splitlines():
        if _SETUP.match(line) or _SERVER.search(line):
            setup.append(line)
            continue
        kept.append(line.replace(PAGE_REMOTE, remote) if remote else line)
    return "\n".join(kept) + "\n", setup


@pytest.mark.slow
@pytest.mark.spark
def test_the_tutorial_runs_as_written(tmp_path):
    from spark_servers import connect_server

    steps = tutorial_steps(TUTORIAL.read_text())
    wheel = _build_wheel(tmp_path)
    venv = _fresh_venv(tmp_path, wheel)
    work = tmp_path / "work"
    work.mkdir()
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV", "COLUMNS")}
    env.update(PATH=f"{venv / 'bin'}{os.pathsep}{env['PATH']}", VIRTUAL_ENV=str(venv),
               SUBSTRAIT_OPT_DRIVER_MEMORY="1g")
    helped = False
    for step in steps:
        script, setup = _script(step.commands, None)

        def run(script: str) -> subprocess.CompletedProcess:
            # one stream, stderr into stdout: the lines in the order a terminal shows them
            return subprocess.run(["bash", "-e", "-o", "pipefail", "-c", script], cwd=work, env=env, text=True,
                                  stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=600)

        if any(_SERVER.search(line) for line in setup):
            with connect_server(memory="1g") as remote:
                script, setup = _script(step.commands, remote)
                assert PAGE_REMOTE not in script
                done = run(script)
        else:
            done = run(script)
        output = done.stdout
        where = f"docs/tutorial.md line {step.line}"
        assert done.returncode == 0, f"{where}: exit {done.returncode}\n{output[-3000:]}"
        if step.expected is not None:
            missing = excerpt_mismatch(step.expected, output)
            assert missing is None, f"{where}: not in the output: {missing!r}\n{output[-3000:]}"
        if "substrait-opt --help" in script:
            helped = True
            _check_docs_path(output, venv)
    assert helped, "the page runs substrait-opt --help"
    assert (work / "q3.opt.binpb").is_file()


def _check_docs_path(help_text: str, venv: Path) -> None:
    """``--help`` names the documentation the wheel installed, inside the venv, with the tutorial."""
    flat = " ".join(help_text.split())
    found = re.search(r"Documentation \(docs/ in the texts above\): (\S+);", flat)
    assert found, help_text
    docs = Path(found.group(1))
    assert docs.resolve().is_relative_to(venv.resolve()), docs
    assert (docs / "tutorial.md").read_text() == TUTORIAL.read_text()
    assert (docs / "cli.md").is_file()


@pytest.mark.spark
def test_demo_runs_the_commands_and_prints_its_table(spark, tpch_dir, capsys):
    """``make demo`` (here on SF 0.01, one query, two timed runs, in this process's Spark): the tutorial's
    commands printed as typed, then one row per query: Spark SQL, original, optimized, equal; and how far
    the runs of a cell lie apart, so that a gap within the noise is not read as a faster plan."""
    from workloads.demo import main as demo

    assert demo(["--scale", "0.01", "--queries", "3", "--runs", "2"]) == 0
    out = capsys.readouterr().out
    for command in ("plan", "explain", "optimize", "diff"):
        assert re.search(rf"^\$ substrait-opt {command} q3\.", out, re.MULTILINE), (command, out)
    assert excerpt_mismatch("$ substrait-opt diff ...\nq3: equal ...\n1 passed, 0 failed\n...\n"
                            "TPC-H SF 0.01 on Spark ..., seconds (warm, median of 2 runs):\n"
                            "query   Spark SQL   original  optimized  equal", out) is None, out
    (row,) = [line for line in out.splitlines() if line.startswith("Q3 ")]
    name, *seconds, equal = row.split()
    assert equal == "yes" and all(float(s) > 0 for s in seconds), row
    spread = re.search(r"^\(the runs of a cell lie up to (\d+\.\d\d)x apart, slowest / fastest: "
                       r"Q3 (Spark SQL|original|optimized); a gap smaller than that may be noise\)$", out, re.MULTILINE)
    assert spread and float(spread[1]) >= 1.0, out
    assert len(out.splitlines()) < 60  # the commands and a table, not pages of trees
