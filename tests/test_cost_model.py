"""The cost model: each relation's cost, shared subtrees counted once, and the choices it must rank."""

from __future__ import annotations

import json

import pytest
from optimizer.cost.cardinality import CardinalityEstimator
from optimizer.cost.model import Cost, CostConstants, CostModel
from optimizer.cost.providers import MemoryStatistics
from optimizer.cost.statistics import ColumnStatistics, TableStatistics
from test_cardinality import B

from optimizer.dag import annotate_schemas, to_dag
from optimizer.driver import OptimizerConfig
from optimizer.plan_io import load_plan

BIG = [("k", "i64"), ("v", "i64"), ("pad", "string")]
SMALL = [("k", "i64"), ("name", "string")]


def stats(big_rows: float = 1e7, small_rows: float = 1e3) -> MemoryStatistics:
    return MemoryStatistics({
        "big": TableStatistics(row_count=big_rows, columns={
            "k": ColumnStatistics(ndv=min(small_rows, big_rows), min=1, max=small_rows),
            "v": ColumnStatistics(ndv=big_rows, min=1, max=big_rows),
            "pad": ColumnStatistics(avg_len=100)}),
        "small": TableStatistics(row_count=small_rows, columns={
            "k": ColumnStatistics(ndv=small_rows, min=1, max=small_rows),
            "name": ColumnStatistics(avg_len=20)}),
    })


def cost_of(plan, statistics=None, config=None, constants=None) -> float:
    g = to_dag(plan)
    annotate_schemas(g)
    est = CardinalityEstimator(g, statistics)
    return CostModel(config or OptimizerConfig(), constants).total(g, g.graph["roots"][0]["node"], est)


def keys(left: int = 0, right: int = 0) -> list[dict]:
    return [{"left": {"directReference": {"structField": {"field": left}}},
             "right": {"directReference": {"structField": {"field": right}}},
             "comparison": {"simple": "SIMPLE_COMPARISON_TYPE_EQ"}}]


def test_cost_total_is_the_weighted_sum():
    c = Cost(cpu=1, io=2, network=3, memory=4)
    assert c.total == 10
    weighted = Cost(cpu=1, io=2, network=3, memory=4, constants=CostConstants(weight_network=0.0))
    assert weighted.total == 7
    assert (c + c).network == 6


def test_shared_subtree_counted_once():
    b = B()
    read = b.read("big", BIG)
    once = b.plan(read)
    doc = {"relations": [
        {"rel": read},
        {"root": {"input": {"join": {"left": {"reference": {"subtreeOrdinal": 0}},
                                     "right": {"reference": {"subtreeOrdinal": 0}},
                                     "type": "JOIN_TYPE_INNER",
                                     "expression": b.call("equal", b.ref(0), b.ref(3))}}, "names": []}}],
        "extensions": [{"extensionFunction": {"functionAnchor": a, "name": n, "extensionUrnReference": 4294967295}}
                       for n, a in b.functions.items()]}
    shared = load_plan(json.dumps(doc))
    g = to_dag(shared)
    annotate_schemas(g)
    est = CardinalityEstimator(g, stats())
    model = CostModel(OptimizerConfig())
    root = g.graph["roots"][1]["node"]
    (read_node,) = [n for n in g if g.nodes[n]["kind"] == "read"]
    join_own = model.node_cost(g, root, est).total
    read_cost = model.node_cost(g, read_node, est).total
    assert model.total(g, root, est) == pytest.approx(join_own + read_cost)
    assert read_cost == pytest.approx(cost_of(once, stats()))


def test_projection_reduces_scan_cost():
    b = B()
    full = b.plan(b.read("big", BIG))
    narrow = b.plan(b.read("big", BIG, projection={"select": {"structItems": [{"field": 0}]}}))
    assert cost_of(narrow, stats()) < cost_of(full, stats()) / 4


def test_top_n_is_cheaper_than_sort_then_fetch():
    b = B()
    read = b.read("big", BIG)
    sorts = [{"expr": b.ref(1), "direction": "SORT_DIRECTION_ASC_NULLS_FIRST"}]
    sort_fetch = b.plan({"fetch": {"input": {"sort": {"input": read, "sorts": sorts}}, "countExpr": b.i64(10)}})
    top_n = b.plan({"topN": {"input": read, "sorts": sorts, "count": b.i64(10)}})
    s = stats()
    assert cost_of(top_n, s) < cost_of(sort_fetch, s)


def _hash_join(b: B, build_broadcast: bool, right_table: str = "small"):
    right = b.read(right_table, SMALL if right_table == "small" else BIG)
    if build_broadcast:
        right = {"exchange": {"input": right, "broadcast": {}}}
    return b.plan({"hashJoin": {"left": b.read("big", BIG), "right": right, "type": "JOIN_TYPE_INNER",
                                "keys": keys(), "buildInput": "BUILD_INPUT_RIGHT"}})


def test_broadcast_versus_partitioned_hash_join():
    b = B()
    s = stats()
    assert cost_of(_hash_join(b, True), s) < cost_of(_hash_join(b, False), s)
    # a build side as large as the probe side: sending it to every executor (via the driver) costs more
    # than shuffling both sides once
    assert cost_of(_hash_join(b, True, "big"), s) > cost_of(_hash_join(b, False, "big"), s)


def test_building_the_preserved_side_of_an_outer_join_is_priced_higher():
    """Spark's build-side outer join marks matched build rows and then walks the whole hash table: the
    model prices a LEFT join building its left side above the same rows built as an INNER join."""
    b = B()

    def plan(type_name: str):
        return b.plan({"hashJoin": {"left": b.read("small", SMALL), "right": b.read("big", BIG), "type": type_name,
                                    "keys": keys(), "buildInput": "BUILD_INPUT_LEFT"}})
    s = stats(big_rows=1e6, small_rows=1e5)
    assert cost_of(plan("JOIN_TYPE_LEFT"), s) > cost_of(plan("JOIN_TYPE_INNER"), s)
    assert cost_of(plan("JOIN_TYPE_RIGHT"), s) == pytest.approx(cost_of(plan("JOIN_TYPE_INNER"), s))


def test_logical_join_priced_by_the_broadcast_threshold():
    b = B()
    plan = b.plan(b.join(b.read("big", BIG), b.read("small", SMALL), b.call("equal", b.ref(0), b.ref(3))))
    s = stats()
    broadcast = cost_of(plan, s, OptimizerConfig(broadcast_threshold_bytes=10 * 1024 * 1024))
    shuffled = cost_of(plan, s, OptimizerConfig(broadcast_threshold_bytes=0))
    assert broadcast < shuffled


def test_merge_join_pays_for_the_sorts_it_needs():
    b = B()
    asc = "SORT_DIRECTION_ASC_NULLS_FIRST"
    left, right = b.read("big", BIG), b.read("small", SMALL)
    sorted_left = {"sort": {"input": left, "sorts": [{"expr": b.ref(0), "direction": asc}]}}
    sorted_right = {"sort": {"input": right, "sorts": [{"expr": b.ref(0), "direction": asc}]}}
    unsorted = b.plan({"mergeJoin": {"left": left, "right": right, "type": "JOIN_TYPE_INNER", "keys": keys()}})
    presorted = b.plan({"mergeJoin": {"left": sorted_left, "right": sorted_right, "type": "JOIN_TYPE_INNER",
                                      "keys": keys()}})
    s = stats()
    g = to_dag(unsorted)
    annotate_schemas(g)
    g2 = to_dag(presorted)
    annotate_schemas(g2)
    model = CostModel(OptimizerConfig())
    mj = next(n for n in g if g.nodes[n]["kind"] == "merge_join")
    mj2 = next(n for n in g2 if g2.nodes[n]["kind"] == "merge_join")
    own_unsorted = model.node_cost(g, mj, CardinalityEstimator(g, s)).cpu
    own_sorted = model.node_cost(g2, mj2, CardinalityEstimator(g2, s)).cpu
    assert own_sorted < own_unsorted / 5


def test_windows_with_the_same_keys_share_one_sort():
    b = B()
    asc = "SORT_DIRECTION_ASC_NULLS_FIRST"

    def window(inp):
        return {"window": {"input": inp, "partitionExpressions": [b.ref(0)],
                           "sorts": [{"expr": b.ref(1), "direction": asc}],
                           "windowFunctions": [{"functionReference": b.fn("rank"), "outputType": {"i64": {}}}]}}

    plan = b.plan(window(window(b.read("big", BIG))))
    g = to_dag(plan)
    annotate_schemas(g)
    est = CardinalityEstimator(g, stats())
    model = CostModel(OptimizerConfig())
    top = g.graph["roots"][0]["node"]
    (below,) = list(g.successors(top))
    assert model.node_cost(g, top, est).total < model.node_cost(g, below, est).total / 5


def test_nested_loop_join_is_quadratic():
    b = B()
    nlj = b.plan({"nestedLoopJoin": {"left": b.read("big", BIG), "right": b.read("small", SMALL),
                                     "type": "JOIN_TYPE_INNER", "expression": b.call("lt", b.ref(1), b.ref(3))}})
    g = to_dag(nlj)
    annotate_schemas(g)
    root = g.graph["roots"][0]["node"]
    model = CostModel(OptimizerConfig())
    cpu = [model.node_cost(g, root, CardinalityEstimator(g, stats(small_rows=n))).cpu for n in (1e3, 2e3)]
    assert cpu[1] == pytest.approx(2 * cpu[0], rel=0.05)
    assert cost_of(nlj, stats()) > 5 * cost_of(_hash_join(b, False), stats())


def test_memory_pressure_penalty():
    b = B()
    s = stats(big_rows=1e8, small_rows=1e8)
    plan = _hash_join(b, False)
    roomy = cost_of(plan, s, constants=CostConstants(memory_threshold_bytes=1e15))
    tight = cost_of(plan, s, constants=CostConstants(memory_threshold_bytes=1e6))
    assert tight > roomy


def test_every_relation_kind_has_a_cost():
    b = B()
    read = b.read("big", BIG)
    rels = [
        b.filter(read, b.call("equal", b.ref(0), b.i64(1))),
        {"project": {"input": read, "expressions": [b.call("add", b.ref(0), b.ref(1))]}},
        b.aggregate(read, [0], [("sum", [1])]),
        {"set": {"inputs": [read, read], "op": "SET_OP_UNION_DISTINCT"}},
        {"set": {"inputs": [read, read], "op": "SET_OP_UNION_ALL"}},
        {"expand": {"input": read, "fields": [{"consistentField": b.ref(0)}]}},
        {"exchange": {"input": read, "scatterByFields": {"fields": [{"directReference": {"structField": {"field": 0}}}]}}},
        {"cross": {"left": read, "right": b.read("small", SMALL)}},
        {"fetch": {"input": read, "countExpr": b.i64(5)}},
        {"extensionSingle": {"input": read}},
    ]
    # what every one of them reads at least: columns k and v (Spark reads only the columns read above)
    base = cost_of(b.plan({"project": {"common": {"emit": {"outputMapping": [0, 1]}}, "input": read,
                                       "expressions": []}}), stats())
    for rel in rels:
        c = cost_of(b.plan(rel), stats())
        assert c >= base and c < float("inf"), rel


def test_every_rel_type_has_a_cost_and_an_estimate():
    """A plan relation resolves to one of the Rel oneof's kinds (references are resolved by to_dag):
    the model and the estimator each have a handler for every one."""
    from substrait.proto import Rel

    kinds = {f.name for f in Rel.DESCRIPTOR.oneofs_by_name["rel_type"].fields} - {"reference"}
    assert sorted(k for k in kinds if not hasattr(CostModel, f"_cost_{k}")) == []
    assert sorted(k for k in kinds if not hasattr(CardinalityEstimator, f"_rel_{k}")) == []


# --------------------------------------------------------------------------------------------------
# explain with estimates
# --------------------------------------------------------------------------------------------------


def _plan_file(tmp_path):
    b = B()
    plan = b.plan(b.filter(b.read("small", SMALL), b.call("equal", b.ref(0), b.i64(3))), names=["k", "name"])
    from optimizer.plan_io import save_plan

    path = tmp_path / "plan.json"
    save_plan(plan, str(path))
    return path


def test_explain_with_stats_file_text_and_json(tmp_path):
    from optimizer.cost.providers import save_statistics

    from optimizer.cli import main

    save_statistics(stats(), ["small"], tmp_path / "stats.json")
    plan = _plan_file(tmp_path)
    out = tmp_path / "out.txt"
    assert main(["explain", str(plan), "--stats", str(tmp_path / "stats.json"), "-o", str(out)]) == 0
    text = out.read_text()
    assert "Filter(" in text and "rows=1 " in text and "rows=1.0K" in text and "cost=" in text
    out = tmp_path / "out.json"  # a name that says another format than --format is refused
    assert main(["explain", str(plan), "--stats", str(tmp_path / "stats.json"), "--format", "json",
                 "-o", str(out)]) == 0
    records = json.loads(out.read_text())
    assert [r["path"] for r in records] == ["relations[0].root.input", "relations[0].root.input.filter.input"]
    assert records[1]["estimated_rows"] == 1000 and records[0]["actual_rows"] is None
    assert set(records[0]) >= {"path", "relation", "estimated_rows", "actual_rows", "q_error"}
    assert main(["explain", str(plan), "--stats", str(tmp_path / "missing.json")]) == 2


@pytest.mark.spark
def test_explain_analyze_counts_rows_on_spark(spark, tpch_dir, tmp_path):
    from optimizer.cli import main
    from optimizer.plan_io import save_plan
    from workloads.producers import datafusion_plan
    from workloads.tpch import table_paths, tpch_query

    tables = {k: str(v) for k, v in table_paths(tpch_dir, include_t=False).items()}
    path = tmp_path / "q6.json"
    save_plan(load_plan(datafusion_plan(tpch_query(6), tables)), str(path))
    out = tmp_path / "q6.out"
    assert main(["explain", str(path), "--tables", str(tpch_dir), "--analyze", "--format", "json",
                 "-o", str(out)]) == 0
    records = json.loads(out.read_text())
    assert records[0]["actual_rows"] == 1 and all(r["q_error"] is not None for r in records)
    read = next(r for r in records if r["kind"] == "read")
    assert read["q_error"] < 1.5


@pytest.mark.spark
def test_cardinality_benchmark_runs(spark, tpch_dir, tmp_path):
    import sys
    from pathlib import Path

    root = str(Path(__file__).resolve().parent.parent)
    if root not in sys.path:
        sys.path.insert(0, root)
    from benchmarks import cardinality

    report = cardinality.main(["--scale", "0.01", "--queries", "6", "--no-cache", "--out", str(tmp_path)], spark=spark)
    assert report["summary"]["n"] == len(report["records"]) >= 4
    assert report["summary"]["median"] < 1.5
    assert (tmp_path / "cardinality.md").read_text().startswith("# Cardinality")
    assert (tmp_path / "cardinality.png").stat().st_size > 0


def _filtered_join(b: B) -> dict:
    """``big`` filtered to a few rows (``v = 1``) joined to ``small`` on ``k``."""
    big = b.filter(b.read("big", BIG), b.call("equal", b.ref(1), b.i64(1)))
    return b.join(big, b.read("small", SMALL), b.call("equal", b.ref(0), b.ref(3)))


def _with_files(big_file_bytes: float) -> MemoryStatistics:
    s = stats(big_rows=1e7, small_rows=1e6)
    s.table(["big"]).file_bytes = big_file_bytes
    s.table(["small"]).file_bytes = 30e6
    return s


def test_a_logical_join_is_priced_by_the_sizes_spark_plans_it_by():
    """Spark (no CBO) sizes a filtered table by its files: a 1-row side of a 2 GB table is not
    broadcast, so leaving the join to Spark costs a shuffle of both sides; a small table is."""
    b = B()
    plan = b.plan(_filtered_join(b))
    big_files = cost_of(plan, _with_files(2e9))
    small_files = cost_of(plan, _with_files(2e6))
    assert big_files > 1.05 * small_files  # the shuffles of both sides

    g = to_dag(plan)
    annotate_schemas(g)
    est = CardinalityEstimator(g, _with_files(2e9))
    join = g.graph["roots"][0]["node"]
    filtered = [c for c in g.successors(join) if g.nodes[c]["kind"] == "filter"][0]
    assert est.estimate(filtered).rows < 10 and est.estimate(filtered).spark_bytes > 1e8


def test_implement_joins_binds_the_broadcast_spark_would_not_choose():
    from optimizer.driver import Optimizer

    b = B()
    result = Optimizer(statistics=_with_files(2e9)).run(b.plan(_filtered_join(b)))
    g = result.graph
    kinds = sorted(g.nodes[n]["kind"] for n in g)
    assert "hash_join" in kinds and "exchange" in kinds, kinds
    result = Optimizer(statistics=_with_files(2e6)).run(b.plan(_filtered_join(b)))
    # Spark broadcasts the 1-row side by itself: nothing to bind (or a bound form no costlier)
    assert result.plan is not None


def test_widths_count_only_the_columns_read_above():
    """A read of every column (as Isthmus writes it) costs what a read of the columns used costs:
    Spark prunes the others."""
    b = B()
    wide = b.aggregate(b.read("big", BIG), [0], [("sum", [1])])
    narrow = b.aggregate({"project": {"common": {"emit": {"outputMapping": [0, 1]}}, "input": b.read("big", BIG),
                                      "expressions": []}}, [0], [("sum", [1])])
    # the same but for the projection the narrow plan adds (a pass over its rows)
    assert cost_of(b.plan(narrow), stats()) - cost_of(b.plan(wide), stats()) == pytest.approx(
        1e7 * CostConstants().cpu_row, rel=0.01)
    g = to_dag(b.plan(wide))
    annotate_schemas(g)
    est = CardinalityEstimator(g, stats())
    read = [n for n in g if g.nodes[n]["kind"] == "read"][0]
    assert est.needed(read) == {0, 1}
    assert est.estimate(read).width == pytest.approx(16)


PART = [("p_key", "i64"), ("p_size", "i64")]
SUPPLIER = [("s_key", "i64")]
PARTSUPP = [("ps_part", "i64"), ("ps_supp", "i64")]


def _part_supplier_stats() -> MemoryStatistics:
    return MemoryStatistics({
        "part": TableStatistics(row_count=2e5, columns={"p_key": ColumnStatistics(ndv=2e5, min=1, max=2e5),
                                                         "p_size": ColumnStatistics(ndv=50, min=1, max=50)}),
        "supplier": TableStatistics(row_count=1e4, columns={"s_key": ColumnStatistics(ndv=1e4, min=1, max=1e4)}),
        "partsupp": TableStatistics(row_count=8e5, columns={"ps_part": ColumnStatistics(ndv=2e5, min=1, max=2e5),
                                                             "ps_supp": ColumnStatistics(ndv=1e4, min=1, max=1e4)}),
    })


def test_a_cross_product_written_in_the_from_order_is_priced_as_the_joins_spark_runs():
    """``FROM part, supplier, partsupp WHERE p_key = ps_part AND s_key = ps_supp`` (Isthmus' TPC-H Q2 and
    Q8): no condition joins part and supplier, but Spark's ReorderJoin joins part with partsupp first, so
    the plan runs as the one written in that order; the model prices it so (it priced the 2e9-row cross
    product 4,000 times higher)."""
    from optimizer.driver import estimated_cost

    b = B()
    size = b.call("equal", b.ref(1), b.i64(15))
    comma = b.plan(b.filter(
        {"cross": {"left": {"cross": {"left": b.read("part", PART), "right": b.read("supplier", SUPPLIER)}},
                   "right": b.read("partsupp", PARTSUPP)}},
        b.call("and", b.call("and", b.call("equal", b.ref(0), b.ref(3)), b.call("equal", b.ref(2), b.ref(4))), size)),
        ["p_key", "p_size", "s_key", "ps_part", "ps_supp"])
    spark = b.plan(b.join(b.join(b.filter(b.read("part", PART), size), b.read("partsupp", PARTSUPP),
                                 b.call("equal", b.ref(0), b.ref(2))),
                          b.read("supplier", SUPPLIER), b.call("equal", b.ref(3), b.ref(4))),
                   ["p_key", "p_size", "ps_part", "ps_supp", "s_key"])
    statistics = _part_supplier_stats()
    assert estimated_cost(comma, statistics=statistics) == pytest.approx(estimated_cost(spark, statistics=statistics),
                                                                         rel=0.05)
    from optimizer.cost.spark_joins import reorder_joins

    assert reorder_joins(3, [0b101, 0b110]) == [0, 2, 1]
    # written with a condition at every join, the order is Spark's too: priced relation by relation
    g = to_dag(spark)
    annotate_schemas(g)
    est = CardinalityEstimator(g, statistics)
    model = CostModel(OptimizerConfig())
    assert model.price(g, set(g.nodes), est) == pytest.approx(model.total(g, g.graph["roots"][0]["node"], est))


def test_a_disjunction_implied_by_another_conjunct_selects_nothing_more():
    """TPC-DS Q13 as DataFusion writes it: the join's condition holds ``(cd = 'M' AND price 100-150 AND
    hd = 3) OR (...)`` and the disjunction it derived from it, ``(cd = 'M' AND price 100-150) OR (...)``.
    The second is implied by the first: applying both selectivities counted it twice (the estimate of
    the store_sales join collapsed to 0.09 rows at SF 1 where the tables hold 41)."""
    b = B()
    t = [("cd", "i64"), ("price", "i64"), ("hd", "i64")]
    statistics = MemoryStatistics({"t": TableStatistics(row_count=1e6, columns={
        "cd": ColumnStatistics(ndv=3, min=1, max=3), "price": ColumnStatistics(ndv=200, min=1, max=200),
        "hd": ColumnStatistics(ndv=10, min=1, max=10)})})

    def branch(cd: int, lo: int, hi: int, hd: int | None = None) -> dict:
        parts = b.call("and", b.call("and", b.call("equal", b.ref(0), b.i64(cd)), b.call("gte", b.ref(1), b.i64(lo))),
                       b.call("lte", b.ref(1), b.i64(hi)))
        return parts if hd is None else b.call("and", parts, b.call("equal", b.ref(2), b.i64(hd)))

    full = b.call("or", branch(1, 100, 150, 3), branch(2, 50, 100, 1))
    derived = b.call("or", branch(1, 100, 150), branch(2, 50, 100))

    def rows(cond: dict) -> float:
        g = to_dag(b.plan(b.filter(b.read("t", t), cond), ["cd", "price", "hd"]))
        annotate_schemas(g)
        return CardinalityEstimator(g, statistics).estimate(g.graph["roots"][0]["node"]).rows

    alone = rows(full)
    assert alone < rows(derived)
    assert rows(b.call("and", derived, full)) == pytest.approx(alone)
    assert rows(b.call("and", full, derived)) == pytest.approx(alone)
