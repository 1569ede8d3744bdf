"""Plan pictures (optimizer/explain/dot.py): DOT text of real plans, shared subtrees drawn once, SVG via dot."""

from __future__ import annotations

import re
import shutil
from collections import Counter

import pytest

from optimizer.dag import from_dag, inputs, to_dag
from optimizer.errors import UnsupportedError
from optimizer.explain.dot import (
    before_after_dot,
    dag_to_dot,
    estimate_annotator,
    explain_dot,
    picture,
    render_svg,
)
from optimizer.plan_io import load_plan

_NODE = re.compile(r'^\s*"([^"]+)" \[label="((?:[^"\\]|\\.)*)"', re.M)
_EDGE = re.compile(r'^\s*"([^"]+)" -> "([^"]+)"', re.M)


def _nodes(dot: str) -> dict[str, str]:
    return {m.group(1): m.group(2) for m in _NODE.finditer(dot) if "root" not in m.group(1)}


def _edges(dot: str) -> list[tuple[str, str]]:
    return [(m.group(1), m.group(2)) for m in _EDGE.finditer(dot)]


@pytest.fixture(scope="module")
def q5_plan(tpch_tables):
    from workloads.producers import datafusion_plan
    from workloads.tpch import tpch_query

    return load_plan(datafusion_plan(tpch_query(5), tpch_tables))


@pytest.fixture(scope="module")
def shared_plan(tpch_tables):
    """A real self-join plan whose two identical nation scans are made one shared subtree."""
    from workloads.producers import datafusion_plan

    sql = ("select n1.n_name, n2.n_name from nation n1 join nation n2 "
           "on n1.n_regionkey = n2.n_regionkey where n1.n_nationkey < n2.n_nationkey")
    g = to_dag(load_plan(datafusion_plan(sql, tpch_tables)))
    reads = [n for n in g if g.nodes[n]["kind"] == "read"]
    assert len(reads) == 2
    keep, drop = reads
    assert g.nodes[keep]["rel"] == g.nodes[drop]["rel"], "DataFusion scans nation the same way twice"
    for parent in list(g.predecessors(drop)):
        slots = g.edges[parent, drop]["slots"]
        if g.has_edge(parent, keep):
            g.edges[parent, keep]["slots"].extend(slots)
        else:
            g.add_edge(parent, keep, slot=slots[0], slots=list(slots), via={})
    g.remove_node(drop)
    plan = from_dag(g)
    assert any(r.WhichOneof("rel_type") == "rel" for r in plan.relations), "written with a ReferenceRel"
    return plan


def test_one_box_per_relation_and_one_edge_per_input(q5_plan):
    g = to_dag(q5_plan)
    dot = dag_to_dot(g, title="q5")
    nodes = _nodes(dot)
    assert len(nodes) == g.number_of_nodes()
    assert Counter(label.split("\\n")[0] for label in nodes.values())["Read"] == 6
    edges = [e for e in _edges(dot) if "root" not in e[0]]
    assert len(edges) == sum(len(inputs(g, n)) for n in g)
    assert "lineitem" in dot and 'label="q5"' in dot
    assert sum(1 for e in _edges(dot) if "root" in e[0]) == 1


def test_shared_subtree_is_drawn_once_with_two_incoming_edges(shared_plan):
    g = to_dag(shared_plan)
    dot = dag_to_dot(g)
    nodes = _nodes(dot)
    reads = [n for n, label in nodes.items() if label.startswith("Read")]
    assert len(reads) == 1, "the shared scan is one box"
    incoming = [e for e in _edges(dot) if e[1] == reads[0]]
    assert len(incoming) == 2
    assert f'"{reads[0]}" [label="Read\\nnation' in dot and "penwidth=2" in dot


def test_labels_show_estimates_when_given(q5_plan):
    g = to_dag(q5_plan)
    for n in g:
        if g.nodes[n]["kind"] == "read":
            g.nodes[n]["rel"].read.common.hint.stats.row_count = 1234.0
    dot = dag_to_dot(g, estimate_annotator(g))
    read_labels = [label for label in _nodes(dot).values() if label.startswith("Read")]
    assert read_labels and all(re.search(r"(est|hint) 1\.2K rows", label) for label in read_labels)
    custom = dag_to_dot(g, lambda graph, node: f"node {node}\nsecond line")
    assert all("\\nsecond line" in label for label in _nodes(custom).values())
    assert "est" not in dag_to_dot(g)


def test_before_after_is_two_clusters(q5_plan, shared_plan):
    after = shared_plan
    dot = before_after_dot(q5_plan, after)
    assert dot.count("subgraph cluster_") == 2
    assert 'label="before"' in dot and 'label="after"' in dot
    nodes = _nodes(dot)
    assert len([n for n in nodes if n.startswith("p0_")]) == to_dag(q5_plan).number_of_nodes()
    assert len([n for n in nodes if n.startswith("p1_")]) == to_dag(after).number_of_nodes()


def test_explain_dot_entry_without_statistics(q5_plan):
    dot = explain_dot(q5_plan, title="q5.json")
    assert dot.startswith("digraph plan {") and picture(dot, "dot") == dot


@pytest.mark.skipif(shutil.which("dot") is None, reason="Graphviz's dot is not installed")
def test_svg(q5_plan, shared_plan):
    svg = render_svg(dag_to_dot(to_dag(q5_plan)))
    assert svg.lstrip().startswith("<?xml") and "<svg" in svg
    assert svg.count('class="node"') == to_dag(q5_plan).number_of_nodes() + 1  # + the root's names
    assert "<svg" in picture(before_after_dot(shared_plan, shared_plan), "svg")


def test_svg_without_dot_names_the_package(monkeypatch):
    monkeypatch.setattr("optimizer.explain.dot.shutil.which", lambda name: None)
    with pytest.raises(UnsupportedError, match="apt-get install graphviz"):
        render_svg("digraph { a }")


def test_subplans_for_actual_rows_are_valid_plans(q5_plan, shared_plan):
    from optimizer.dag import annotate_schemas
    from optimizer.explain.estimates import subtree_plan
    from optimizer.schema.check import check_plan

    for plan in (q5_plan, shared_plan):
        g = annotate_schemas(to_dag(plan))
        for node in g:
            sub = subtree_plan(g, node)
            assert check_plan(sub) == [], (node, g.nodes[node]["kind"])
            roots = [r.root for r in sub.relations if r.WhichOneof("rel_type") == "root"]
            assert len(roots) == 1 and len(roots[0].names) == len(g.nodes[node]["schema"].names)


def test_control_characters_in_names_are_written_so_graphviz_reads_them():
    """A NUL in a column name (a stranger's plan) made Graphviz fail ('syntax error in line 6')."""
    from optimizer.explain.dot import _quote

    assert _quote('a\x00b"c\\d\ne\x7f') == '"a\\\\x00b\\"c\\\\d\\ne\\\\x7f"'
