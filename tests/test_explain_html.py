"""``explain``/``optimize --explain`` ``--format html`` (optimizer/explain/html.py): one self-contained page,
opened in a real headless Chromium (Debian's ``chromium``, installed by ``make install``)."""

from __future__ import annotations

import re
import shutil

import pytest

from optimizer.cli import main
from optimizer.explain.html import PlanPart, plans_html, relation_records
from optimizer.plan_io import load_plan, save_plan
from workloads.browser import chromium_executable, open_page

needs_chromium = pytest.mark.skipif(chromium_executable() is None,
                                    reason="no chromium on PATH (make install puts Debian's chromium there)")
needs_dot = pytest.mark.skipif(shutil.which("dot") is None, reason="no Graphviz dot (make install puts it there)")

HOSTILE = "</script><script>alert(1)</script>"
TABLES = ("customer", "orders", "lineitem", "supplier", "nation", "region")


@pytest.fixture(scope="module")
def q5_path(tpch_tables, tmp_path_factory):
    from workloads.producers import datafusion_plan
    from workloads.tpch import tpch_query

    path = tmp_path_factory.mktemp("q5") / "q5.json"
    save_plan(load_plan(datafusion_plan(tpch_query(5), tpch_tables)), str(path))
    return path


def _no_outside_reference(page: str) -> None:
    assert not re.search(r"<script|<link|<img|@import|url\(", page, re.I)
    assert "http://" not in page.replace("http://www.w3.org/", "")
    assert "https://" not in page


@needs_dot
@needs_chromium
def test_q5_page_opens_in_chromium(q5_path, tpch_dir, tmp_path, capsys):
    page = tmp_path / "q5.html"
    code = main(["explain", str(q5_path), "--tables", str(tpch_dir), "--format", "html", "-o", str(page)])
    assert code == 0, capsys.readouterr().err
    text = page.read_text()
    _no_outside_reference(text)

    shown = open_page(page)
    assert shown.returncode == 0, shown.stderr[-2000:]
    assert shown.console == [], shown.console  # no error, no blocked resource, no log line at all
    dom = shown.dom
    assert dom.count("<svg") == 2, "the plan and its optimized form, side by side"
    assert ">plan <" in dom and ">optimized <" in dom
    for table in TABLES:
        assert table in dom
    assert "HashJoin" in dom and "Join" in dom
    assert dom.count("<table>") == 2 and "est. rows" in dom

    png = tmp_path / "q5.png"
    shot = open_page(page, screenshot=png)
    assert shot.returncode == 0 and shot.console == []
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size > 20_000


@needs_dot
def test_optimize_explain_out_html_beside_the_plan(q5_path, tmp_path, capsys):
    page, out = tmp_path / "q5.html", tmp_path / "q5.opt.json"
    assert main(["optimize", str(q5_path), "--explain-out", str(page), "-o", str(out)]) == 0
    assert load_plan(out).relations  # the plan is the output; the page comes from the same run
    text = page.read_text()
    assert text.startswith("<!DOCTYPE html>") and text.count("<svg") == 2
    assert ">before <" in text and ">after <" in text and "join_order" in text  # the rules that fired
    _no_outside_reference(text)
    assert main(["optimize", str(q5_path), "--explain", "--format", "html"]) == 2  # --format is the plan's
    assert "--explain-out FILE.html" in capsys.readouterr().err


def _hostile_plan(tpch_tables):
    """A real plan whose string literal, output name and table name are HTML."""
    from workloads.producers import datafusion_plan

    sql = f"select n_name as \"<b>name</b>\" from nation where n_name = '{HOSTILE}'"
    plan = load_plan(datafusion_plan(sql, tpch_tables))
    stack = [plan.relations[0].root.input]
    while stack:  # rename the table: DataFusion would not read one named like this
        rel = stack.pop()
        kind = rel.WhichOneof("rel_type")
        body = getattr(rel, kind)
        if kind == "read":
            body.named_table.names[:] = ["<img src=x onerror=alert(2)>"]
        elif body.HasField("input"):
            stack.append(body.input)
    return plan


@needs_dot
def test_hostile_strings_show_as_text(tpch_tables, tmp_path):
    from optimizer.explain.html import explain_html

    page = explain_html(_hostile_plan(tpch_tables), title=HOSTILE)
    for raw in (HOSTILE, "<script>alert(1)", "<img src=x", "<b>name</b>"):
        assert raw not in page
    assert "&lt;/script&gt;&lt;script&gt;alert(1)&lt;/script&gt;" in page  # the literal, as text
    assert "&lt;img src=x onerror=alert(2)&gt;" in page
    _no_outside_reference(page)
    if chromium_executable() is None:
        return
    path = tmp_path / "hostile.html"
    path.write_text(page)
    shown = open_page(path)
    assert shown.returncode == 0 and shown.console == [], shown.console
    assert "<script" not in shown.dom and "<img" not in shown.dom and "<b>" not in shown.dom
    assert "&lt;/script&gt;&lt;script&gt;alert(1)&lt;/script&gt;" in shown.dom


@needs_dot
def test_worst_estimates_first_and_marked(q5_path):
    plan = load_plan(q5_path)
    records = relation_records(plan)
    # Made-up actual rows: the estimate times 1000 for one join, times 5 for one read, exact elsewhere.
    join = next(r for r in records if "join" in r["kind"])
    read = next(r for r in records if r["kind"] == "read")
    actual = {r["path"]: r["estimated_rows"] for r in records}
    actual[join["path"]] = join["estimated_rows"] * 1000
    actual[read["path"]] = read["estimated_rows"] * 5
    page = plans_html([PlanPart("plan", plan, actual)], title="q5")
    rows = re.findall(r'<tr( class="worst")?><td class="rel">.*?<td class="path">([^<]*)</td>', page)
    assert len(rows) == len(records)
    assert [path for _, path in rows[:2]] == [join["path"], read["path"]], "sorted by q-error, worst first"
    assert [path for cls, path in rows if cls] == [join["path"], read["path"]], "exact estimates are not marked"
    assert '<td class="num q q-bad">1000.00</td>' in page and '<td class="num q q-warn">5.00</td>' in page
    assert "worst estimate first" in page


@pytest.mark.spark
@needs_dot
def test_explain_analyze_html_has_actual_rows(spark, tpch_dir, tmp_path):
    from workloads.producers import datafusion_plan
    from workloads.tpch import table_paths, tpch_query

    path = tmp_path / "q6.json"
    tables = {k: str(v) for k, v in table_paths(tpch_dir, include_t=False).items()}
    save_plan(load_plan(datafusion_plan(tpch_query(6), tables)), str(path))
    page = tmp_path / "q6.html"
    assert main(["explain", str(path), "--tables", str(tpch_dir), "--analyze", "--format", "html",
                 "-o", str(page)]) == 0
    text = page.read_text()
    assert text.count("<svg") == 2 and "actual rows" in text and "worst estimate first" in text
    q_errors = re.findall(r'<td class="num q[a-z -]*">([0-9.]+)</td>', text)
    assert len(q_errors) >= 8  # every relation of both plans ran on Spark
    assert "actual 1 rows" in text  # in the picture: the one row of Q6's aggregate
