"""sort_fetch_to_topn: hand-built plans before and after (top-N through projections, what is not a
top-N).
"""

from __future__ import annotations

from collections import Counter

from optimizer.rules import sort_fetch_to_topn
from physical_rule_plans import ANCHOR, A, call, fetch, kinds, lit, optimize, ref, sort, top
from substrait.proto import FetchMode

from optimizer.dag import inputs
from optimizer.expr_utils import field_index


def test_sort_fetch_becomes_top_n():
    g, node = top(optimize(fetch(sort(A, 2, 0), lit(10), lit(3))))
    assert g.nodes[node]["kind"] == "top_n"
    body = g.nodes[node]["rel"].top_n
    assert [field_index(s.expr) for s in body.sorts] == [2, 0]
    assert body.count.literal.i64 == 10 and body.offset.literal.i64 == 3
    assert body.mode == FetchMode.FETCH_MODE_ROWS_ONLY
    assert kinds(g) == Counter({"top_n": 1, "read": 1})


def test_top_n_through_projections():
    project = {"project": {"input": sort(A, 1), "expressions": [call("add", ref(0), lit(1), out="i64")],
                           "common": {"emit": {"outputMapping": [3, 1]}}}}
    g, node = top(optimize(fetch(project, lit(5), common={"emit": {"outputMapping": [1]}})))
    assert g.nodes[node]["kind"] == "project"
    assert list(g.nodes[node]["rel"].project.common.emit.output_mapping) == [1]
    (child,) = inputs(g, node)
    assert g.nodes[child]["kind"] == "top_n"


def test_fetch_without_a_literal_count_is_not_a_top_n():
    for rel in (fetch(sort(A, 0), None, lit(2)),  # offset only: all remaining rows
                fetch(sort(A, 0), {"literal": {"null": {"i64": {"nullability": "NULLABILITY_NULLABLE"}}}}),
                fetch(sort(A, 0), call("add", lit(1), lit(2), out="i64")),
                fetch(A, lit(3))):  # no sort
        g, _ = top(optimize(rel))
        assert kinds(g)["top_n"] == 0 and kinds(g)["fetch"] == 1


def test_window_above_the_sort_blocks_top_n():
    window = {"windowFunction": {"functionReference": ANCHOR["row_number"], "outputType": {"i64": {}},
                                 "phase": "AGGREGATION_PHASE_INITIAL_TO_RESULT"}}
    project = {"project": {"input": sort(A, 0), "expressions": [window]}}
    g, _ = top(optimize(fetch(project, lit(3)), rules=[sort_fetch_to_topn.RULE]))
    assert kinds(g)["top_n"] == 0
