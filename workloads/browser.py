"""Open an HTML file in headless Chromium: its DOM after load, its console messages, a screenshot.

The tests open the pages of :mod:`optimizer.explain.html` in a real browser with it, and
``python -m workloads.browser`` writes ``docs/explain-q5.png`` (TPC-H Q5 from DataFusion on SF 0.01,
with actual rows when Java is there for Spark). Chromium is Debian's ``chromium`` package (``make
install`` installs it).
"""

from __future__ import annotations

import argparse
import contextlib
import re
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

from optimizer.errors import ExecutionError, UnsupportedError

_NAMES = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")
_CONSOLE = re.compile(r":CONSOLE[:(]\d*\)?\] (.*)")


def chromium_executable() -> str | None:
    """The path of a Chromium (or Chrome) on ``PATH``, or ``None``."""
    for name in _NAMES:
        found = shutil.which(name)
        if found:
            return found
    return None


@dataclass
class Page:
    """What headless Chromium made of a page: exit code, serialized DOM, console messages, its stderr."""

    returncode: int
    dom: str
    console: list[str]
    stderr: str


def open_page(path: str | Path, *, screenshot: str | Path | None = None, window: tuple[int, int] = (1600, 1000),
              timeout: float = 120.0) -> Page:
    """Load ``path`` in headless Chromium (a fresh profile, no network use by the page's own rules):
    the DOM after load (``--dump-dom``) or, with ``screenshot``, a PNG of the window written there.

    Console messages (errors, uncaught exceptions, Content Security Policy violations) are read from
    Chromium's log on stderr.
    """
    exe = chromium_executable()
    if exe is None:
        raise UnsupportedError("no chromium on PATH (apt-get install chromium)")
    url = Path(path).resolve().as_uri()
    with tempfile.TemporaryDirectory(prefix="substrait-opt-chromium-") as profile:
        cmd = [exe, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-extensions",
               f"--user-data-dir={profile}", "--enable-logging=stderr", "--v=0",
               f"--window-size={window[0]},{window[1]}"]
        # --no-sandbox: Chromium refuses to start as root with its sandbox (containers, CI).
        cmd += [f"--screenshot={Path(screenshot).resolve()}"] if screenshot is not None else ["--dump-dom"]
        try:
            done = subprocess.run([*cmd, url], capture_output=True, text=True, timeout=timeout)
        except (OSError, subprocess.SubprocessError) as exc:
            raise ExecutionError(f"chromium failed: {exc}") from exc
    console = [m.group(1) for m in _CONSOLE.finditer(done.stderr)]
    return Page(done.returncode, "" if screenshot is not None else done.stdout, console, done.stderr)


def q5_html(dest: Path, *, analyze: bool = True) -> Path:
    """The HTML page of ``explain --format html`` for DataFusion's TPC-H Q5 on SF 0.01 (the tables
    generated when missing), with ``--analyze`` when ``analyze`` and a Java for Spark is there."""
    from optimizer.cli import main
    from optimizer.plan_io import load_plan, save_plan
    from workloads.producers import datafusion_plan
    from workloads.tpch import generate_tpch, table_paths, tpch_query

    data = generate_tpch(0.01)
    dest = dest.resolve()
    name = "tpch-q5-datafusion.json"  # the page's title: the plan file as given on the command line
    save_plan(load_plan(datafusion_plan(tpch_query(5), table_paths(data))), str(dest.with_name(name)))
    argv = ["explain", name, "--tables", str(data), "--format", "html", "-o", str(dest)]
    if analyze and shutil.which("java"):
        argv.append("--analyze")
    with contextlib.chdir(dest.parent):
        code = main(argv)
    if code != 0:
        raise ExecutionError(f"substrait-opt {' '.join(argv)}: exit {code}")
    return dest


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m workloads.browser",
                                     description="Screenshot of explain --format html for TPC-H Q5.")
    parser.add_argument("--out", default="docs/explain-q5.png", help="the PNG to write (default: %(default)s)")
    parser.add_argument("--no-analyze", action="store_true", help="estimates only (no Spark)")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="substrait-opt-q5-") as tmp:
        page = q5_html(Path(tmp) / "q5.html", analyze=not args.no_analyze)
        shot = open_page(page, screenshot=args.out, window=(1600, 1800))
    if shot.returncode != 0 or shot.console:
        print(f"chromium: exit {shot.returncode}; console: {shot.console}", file=sys.stderr)
        return 1
    print(args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
