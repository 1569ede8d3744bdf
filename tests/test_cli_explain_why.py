"""``explain`` and ``optimize --explain``: one set of statistics for every format, the explanation of an
optimization (per rule the cost before and after, the plan after each phase, times that add up, the
page's marks), and the output conventions (formats by file name, no binary on a terminal, tree width)."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys

import pytest

from optimizer.cli import main
from optimizer.explain.estimates import human
from optimizer.plan_io import load_plan
from workloads.corpus import corpus_root

Q5 = corpus_root() / "substrait_consumer/snapshots/producer/integration/tpch/q05-isthmus_plan.json"
needs_dot = pytest.mark.skipif(shutil.which("dot") is None, reason="no Graphviz dot (make install's java target "
                                                                    "installs it): the svg format cannot be drawn")


def _root_costs(argv: list[str], tmp_path, capsys) -> dict[str, str]:
    """The plan's estimated root cost as each explain format and ``optimize --explain`` print it."""
    costs: dict[str, str] = {}
    assert main(["explain", str(Q5), *argv, "--format", "json", "-o", str(tmp_path / "e.json")]) == 0
    records = json.loads((tmp_path / "e.json").read_text())
    root = next(r for r in records if r["path"] == "relations[0].root.input")
    costs["json"] = human(root["estimated_cost"])
    assert main(["explain", str(Q5), *argv, "-o", str(tmp_path / "e.txt")]) == 0
    first = (tmp_path / "e.txt").read_text().splitlines()[1]  # the line under Root(...)
    costs["text"] = re.search(r" cost=(\S+)", first).group(1)
    assert main(["optimize", str(Q5), *argv, "--explain", "-o", str(tmp_path / "o.json")]) == 0
    costs["optimize --explain"] = re.search(r"-- before \(estimated cost (\S+)\)", capsys.readouterr().err).group(1)
    if shutil.which("dot"):
        assert main(["explain", str(Q5), *argv, "--format", "html", "-o", str(tmp_path / "e.html")]) == 0
        page = (tmp_path / "e.html").read_text()
        costs["html"] = re.search(r"plan <small>\(estimated cost ([^)]+)\)", page).group(1)
        assert main(["explain", str(Q5), *argv, "--format", "svg", "-o", str(tmp_path / "e.svg")]) == 0
        svg = (tmp_path / "e.svg").read_text()
        # The root's box comes first in the picture: its subtree cost is the plan's.
        costs["svg"] = re.search(r"cost ([^ <]+) \(self", svg).group(1)
    return costs


def test_every_format_reads_the_same_footer_statistics(tpch_dir, tmp_path, capsys):
    """--tables --no-spark-stats (the Parquet footers): every format and optimize --explain print one cost.
    Before, html read footers, svg Spark's ANALYZE and optimize both, and explain had no --no-spark-stats."""
    costs = _root_costs(["--tables", str(tpch_dir), "--no-spark-stats"], tmp_path, capsys)
    assert len(set(costs.values())) == 1, costs
    # The footers' row counts reach the estimate: not the defaults' cost.
    assert main(["explain", str(Q5), "--format", "json", "-o", str(tmp_path / "d.json")]) == 0
    default = json.loads((tmp_path / "d.json").read_text())[1]["estimated_cost"]
    assert human(default) != costs["json"]
    if "svg" not in costs:
        pytest.skip("no Graphviz dot (make install's java target installs it): html and svg not compared; "
                    "json, text and optimize --explain were")


@pytest.mark.spark
def test_every_format_reads_the_same_spark_statistics(spark, session_args, tpch_dir, tmp_path, capsys):
    """--tables alone: Spark ANALYZE (cached) and the footers, for every format, as for optimize."""
    costs = _root_costs([*session_args, "--tables", str(tpch_dir)], tmp_path, capsys)
    assert len(set(costs.values())) == 1, costs
    footers = _root_costs(["--tables", str(tpch_dir), "--no-spark-stats"], tmp_path, capsys)
    assert footers["json"] != costs["json"]  # Spark's statistics were read: not the footers alone


def test_optimize_explain_says_why(tpch_dir, tmp_path, capsys):
    out = tmp_path / "q5.binpb"
    assert main(["optimize", str(Q5), "--tables", str(tpch_dir), "--no-spark-stats", "--verbose", "-o", str(out)]) == 0
    err = capsys.readouterr().err
    assert load_plan(out).relations  # the plan is written, the explanation beside it
    # The plan after each phase, between the plan before and after.
    phases = re.findall(r"^-- after phase (\w+)", err, re.M)
    assert phases[:4] == ["normalise", "logical", "join_order", "physical"], phases
    assert err.index("-- before") < err.index("-- after phase") < err.index("-- after (")
    # Per phase the plan's cost before and after, per priced rule what it replaced and by what.
    physical = re.search(r"^  physical .*plan cost (\S+) -> (\S+)$", err, re.M)
    assert physical, err
    assert re.search(r"^ +implement_joins: replaced \S+ by \S+ \([+-]\d+%\)$", err, re.M), err
    # The times add up: load, phases, pricing, write and the rest are the total, to rounding.
    total = float(re.search(r"^optimized in ([\d.]+) ms", err, re.M).group(1))
    parts = [float(m) for m in re.findall(r"^  (?:[\w ]+?|subquery \d+: \w+) +([\d.]+) ms", err, re.M)]
    assert {"load", "pricing", "write", "other"} <= set(re.findall(r"^  (load|pricing|write|other) ", err, re.M))
    assert abs(sum(parts) - total) < 0.1 * len(parts) + 0.05, (parts, total)


def test_a_subquery_is_priced_in_the_before_header(tpch_dir, capsys):
    """Isthmus' Q4 filters on an EXISTS: the tree prices the subquery at nothing (21M), the optimizer
    prices the plan with it as the semi join it becomes; the header says that figure, which the plan
    after does not exceed, and both."""
    q4 = corpus_root() / "substrait_consumer/snapshots/producer/integration/tpch/q04-isthmus_plan.json"
    assert main(["optimize", str(q4), "--tables", str(tpch_dir), "--no-spark-stats", "--explain",
                 "-o", os.devnull]) == 0
    err = capsys.readouterr().err
    before = re.search(r"^-- before \(estimated cost (\S+) with its subqueries priced as the joins they become; "
                       r"(\S+) in the tree below", err, re.M)
    after = re.search(r"^-- after \(estimated cost (\S+)\)", err, re.M)
    assert before and after, err

    def number(text: str) -> float:
        return float(text[:-1]) * {"K": 1e3, "M": 1e6, "G": 1e9}[text[-1]] if text[-1] in "KMG" else float(text)

    priced, unpriced, optimized = number(before.group(1)), number(before.group(2)), number(after.group(1))
    assert unpriced < optimized <= priced, (unpriced, optimized, priced)


@needs_dot
def test_optimize_explain_out_page_with_the_plan(tpch_dir, tmp_path):
    """--explain-out: the plan to -o and the page from the same run; the page marks the new relations
    and carries the rule log."""
    out, page = tmp_path / "q5.json", tmp_path / "q5.html"
    assert main(["optimize", str(Q5), "--tables", str(tpch_dir), "--no-spark-stats", "--explain-out", str(page),
                 "-o", str(out)]) == 0
    plan = load_plan(out)
    text = page.read_text()
    assert "hash_join" in json.dumps(json.loads(out.read_text())).lower() or plan.relations
    marked = re.findall(r'<tr class="(?:worst )?changed">', text)
    assert marked, "no relation marked as the optimization's"
    assert re.search(r"after: \d+ relations, tree order, (\d+) new", text)
    assert int(re.search(r", (\d+) new", text).group(1)) == len(marked)
    # The picture marks the same relations: a green border on as many boxes of the "after" plan.
    assert text.count('class="node changed"') == len(marked)
    assert "implement_joins" in text and "plan cost" in text
    # The explanation's format follows the extension; another one for the same name is refused.
    assert main(["optimize", str(Q5), "--explain-out", str(tmp_path / "x.svg"), "-o", str(out)]) == 0
    assert "<svg" in (tmp_path / "x.svg").read_text()
    assert main(["optimize", str(Q5), "--explain-out", str(page), "--explain-format", "svg", "-o", str(out)]) == 2


@pytest.mark.parametrize("argv, message", [
    (["-o", "{tmp}/x.txt"], ".txt file would hold the explain tree"),
    (["-o", "{tmp}/x.txt", "--format", "binpb"], "the file name says text but --format is binpb"),
    (["-o", "{tmp}/x.json", "--format", "binpb"], "the file name says json but --format is binpb"),
    (["-o", "{tmp}/x.html"], ".html file is not a plan"),
    (["--explain", "--format", "html", "-o", "{tmp}/x.json"], "--explain-out FILE.html"),
    (["--explain-format", "html"], "needs --explain-out"),
])
def test_optimize_output_name_and_format_must_agree(argv, message, tmp_path, capsys):
    argv = [a.replace("{tmp}", str(tmp_path)) for a in argv]
    assert main(["optimize", str(Q5), *argv]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and message in err[0], err
    assert not (tmp_path / "x.txt").exists() and not (tmp_path / "x.json").exists()


def test_text_tree_only_when_asked_and_explain_follows_the_extension(tmp_path):
    assert main(["optimize", str(Q5), "-o", str(tmp_path / "x.txt"), "--format", "text"]) == 0
    assert "HashJoin(" in (tmp_path / "x.txt").read_text()
    assert main(["explain", str(Q5), "-o", str(tmp_path / "e.json")]) == 0  # --format from the name
    assert json.loads((tmp_path / "e.json").read_text())[0]["path"] == "relations[0].root.input"
    assert main(["explain", str(Q5), "-o", str(tmp_path / "e.json"), "--format", "text"]) == 2


def test_binary_never_to_a_terminal(tmp_path):
    """Through a pseudo-terminal as stdout: exit 2 and one line; redirected, the bytes are written."""
    import pty

    cli = [sys.executable, "-m", "optimizer", "optimize", str(Q5), "--format", "binpb"]
    env = {**os.environ, "PYTHONPATH": os.getcwd()}
    leader, follower = pty.openpty()
    try:
        proc = subprocess.run(cli, stdout=follower, stderr=subprocess.PIPE, env=env, timeout=120)
    finally:
        os.close(follower)
        os.close(leader)
    assert proc.returncode == 2
    lines = proc.stderr.decode().strip().splitlines()
    assert len(lines) == 1 and "not written to a terminal" in lines[0] and "-o FILE" in lines[0], lines
    piped = subprocess.run(cli, capture_output=True, env=env, timeout=120)
    assert piped.returncode == 0 and load_plan(piped.stdout).relations


def test_tree_lines_are_held_to_a_width(tmp_path, capsys):
    from optimizer.explain import WIDTH

    assert main(["explain", str(Q5)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert max(map(len, lines)) <= WIDTH, max(lines, key=len)
    assert any("..." in line for line in lines)
    assert main(["explain", str(Q5), "--wide"]) == 0
    wide = capsys.readouterr().out.splitlines()
    assert len(wide) == len(lines) and max(map(len, wide)) > WIDTH
    assert not any("more]" in line for line in wide)  # every column, every expression


def test_convert_follows_the_same_naming(tmp_path, capsys):
    assert main(["convert", str(Q5), "-o", str(tmp_path / "x.txt")]) == 2
    assert ".txt file would hold the explain tree" in capsys.readouterr().err
    assert not (tmp_path / "x.txt").exists()
    assert main(["convert", str(Q5), "-o", str(tmp_path / "x.txt"), "--format", "text"]) == 0
    assert main(["convert", str(Q5), "-o", str(tmp_path / "x.binpb")]) == 0
    assert load_plan(tmp_path / "x.binpb").relations
