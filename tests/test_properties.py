"""Physical properties (``cost.properties``): the ordering and distribution of each relation's output."""

from __future__ import annotations

from cardinality_plans import ASC, CUST, DESC, ORDERS, T_COLS, B
from optimizer.cost.properties import CLUSTERED, distribution, ordering, satisfies

from optimizer.dag import annotate_schemas, to_dag


def _sort(b, inp, *fields):
    return {"sort": {"input": inp, "sorts": [{"expr": b.ref(f), "direction": d} for f, d in fields]}}


def test_ordering_through_relations():
    b = B()
    read = b.read("t", T_COLS)
    sorted_ = _sort(b, read, (0, "SORT_DIRECTION_ASC_NULLS_FIRST"), (1, "SORT_DIRECTION_DESC_NULLS_LAST"))
    project = {"project": {"input": sorted_, "expressions": [b.ref(1)], "common": {"emit": {"outputMapping": [5, 0]}}}}
    g = to_dag(b.plan(project))
    annotate_schemas(g)
    root = g.graph["roots"][0]["node"]
    # y (internal 1) is emitted as column 0 (through its copy, expression 0); x as column 1
    assert ordering(g, root) == [(1, ASC), (0, DESC)]
    project["project"]["common"]["emit"]["outputMapping"] = [0, 5]
    g = to_dag(b.plan(project))
    annotate_schemas(g)
    assert ordering(g, g.graph["roots"][0]["node"]) == [(0, ASC), (1, DESC)]
    filt = b.filter(sorted_, b.call("equal", b.ref(0), b.i64(1)))
    g = to_dag(b.plan({"fetch": {"input": filt, "countExpr": b.i64(3)}}))
    annotate_schemas(g)
    assert ordering(g, g.graph["roots"][0]["node"]) == [(0, ASC), (1, DESC)]
    g = to_dag(b.plan({"exchange": {"input": sorted_, "roundRobin": {}}}))
    annotate_schemas(g)
    assert ordering(g, g.graph["roots"][0]["node"]) == []


def test_ordering_of_joins_and_windows():
    b = B()
    left = _sort(b, b.read("orders", ORDERS), (1, "SORT_DIRECTION_ASC_NULLS_FIRST"))
    right = _sort(b, b.read("cust", CUST), (0, "SORT_DIRECTION_ASC_NULLS_FIRST"))
    keys = [{"left": {"directReference": {"structField": {"field": 1}}},
             "right": {"directReference": {"structField": {"field": 0}}},
             "comparison": {"simple": "SIMPLE_COMPARISON_TYPE_EQ"}}]
    for kind, expected in (("mergeJoin", [(1, ASC)]), ("hashJoin", [])):
        g = to_dag(b.plan({kind: {"left": left, "right": right, "type": "JOIN_TYPE_INNER", "keys": keys}}))
        annotate_schemas(g)
        root = g.graph["roots"][0]["node"]
        assert ordering(g, root) == expected, kind
        assert ordering(g, root, strict=True) == []
        assert distribution(g, root).kind == "hash"
    win = {"window": {"input": b.read("t", T_COLS), "partitionExpressions": [b.ref(0)],
                      "sorts": [{"expr": b.ref(1), "direction": "SORT_DIRECTION_ASC_NULLS_FIRST"}],
                      "windowFunctions": [{"functionReference": b.fn("rank"), "outputType": {"i64": {}}}]}}
    g = to_dag(b.plan(win))
    root = g.graph["roots"][0]["node"]
    assert ordering(g, root) == [(0, CLUSTERED), (1, ASC)]
    assert satisfies(ordering(g, root), [(0, CLUSTERED), (1, ASC)])


def test_distribution_from_exchanges():
    b = B()
    read = b.read("t", T_COLS)
    scatter = {"exchange": {"input": read, "scatterByFields": {"fields": [
        {"directReference": {"structField": {"field": 1}}}]}}}
    g = to_dag(b.plan(b.filter(scatter, b.call("equal", b.ref(0), b.i64(1)))))
    annotate_schemas(g)
    d = distribution(g, g.graph["roots"][0]["node"])
    assert d.kind == "hash" and d.columns == (1,)
    g = to_dag(b.plan({"exchange": {"input": read, "broadcast": {}}}))
    assert distribution(g, g.graph["roots"][0]["node"]).kind == "broadcast"
    g = to_dag(b.plan({"exchange": {"input": read, "roundRobin": {}, "partitionCount": 1}}))
    assert distribution(g, g.graph["roots"][0]["node"]).kind == "single"
    g = to_dag(b.plan(b.aggregate(scatter, [1, 0])))
    annotate_schemas(g)
    assert distribution(g, g.graph["roots"][0]["node"]).columns == (0,)
