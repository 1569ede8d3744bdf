"""The join graphs ``join_order`` sees in each producer's TPC-H plans, and whether producers agree.

For every TPC-H query and producer (DataFusion and DuckDB live, Isthmus from the corpus), the plan goes
through the ``normalise`` and ``logical`` phases (what ``join_order`` is given), then every region of
inner joins is described by its inputs (the table a one-table input reads, else the input's relation
kind) and its equi-join edges between base columns (``orders.o_custkey = customer.c_custkey``, through
the estimator's column origins). A query's join graph is the multiset of its regions. Prints, per
query, how many producers' graphs agree as written and after the transitive closure of the
equalities (the classes of equal columns ``join_order`` works with); ``--json`` writes the details.

    python benchmarks/join_graphs.py [--scale 0.01] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def _leaf_name(g, leaf) -> str:
    import networkx as nx

    reads = [n for n in {leaf} | nx.descendants(g, leaf) if g.nodes[n]["kind"] == "read"]
    if len(reads) == 1:
        body = g.nodes[reads[0]]["rel"].read
        if body.WhichOneof("read_type") == "named_table":
            return body.named_table.names[-1].lower()
    return g.nodes[leaf]["kind"] + f"[{len(reads)} reads]"


def _column_name(g, ctx, leaf, k) -> str | None:
    cols = ctx.estimate(leaf).columns
    col = cols[k] if k < len(cols) else None
    if col is None or col.origin is None:
        return None
    read, base = col.origin
    body = g.nodes[read]["rel"].read
    table = body.named_table.names[-1].lower() if body.WhichOneof("read_type") == "named_table" else "?"
    return f"{table}.{body.base_schema.names[base].lower()}"


def _classes(edges) -> list[list[str]]:
    """The classes of columns the equalities make equal (their transitive closure, as join_order takes it)."""
    parent: dict[str, str] = {}

    def find(x: str) -> str:
        while parent.setdefault(x, x) != x:
            x = parent[x]
        return x

    for e in edges:
        a, b = e.split(" = ")
        parent[find(a)] = find(b)
    groups: dict[str, list[str]] = {}
    for c in list(parent):
        groups.setdefault(find(c), []).append(c)
    return sorted(sorted(v) for v in groups.values())


def join_graph(plan, statistics) -> list[dict]:
    """The inner-join regions ``join_order`` would see in ``plan``: ``{"inputs": [...], "edges": [...]}``."""
    from optimizer.rules import RULES
    from optimizer.rules.join_order import _is_region_top, collect_region

    from optimizer.driver import Optimizer, OptimizerConfig, RuleContext
    from optimizer.expr_utils import call_args, field_index, function_name

    before = [r for r in RULES if r.phase in ("normalise", "logical")]
    result = Optimizer(statistics=statistics, rules=before, config=OptimizerConfig(annotate_estimates=False)).run(plan)
    g = result.graph
    ctx = RuleContext(g, statistics)
    regions = []
    for node in list(g.nodes):
        if g.nodes[node]["kind"] not in ("join", "cross") or not _is_region_top(g, node):
            continue
        region = collect_region(g, node, ctx)
        if len(region.leaves) < 2:
            continue
        offsets = [sum(region.widths[:i]) for i in range(len(region.leaves))]
        owner = [i for i, w in enumerate(region.widths) for _ in range(w)]
        edges = set()
        for p in region.predicates:
            if function_name(p, ctx.functions) not in ("equal", "is_not_distinct_from"):
                continue
            args = [field_index(a) for a in (call_args(p) or [])]
            if len(args) != 2 or None in args or max(args) >= len(owner):
                continue
            names = [_column_name(g, ctx, region.leaves[owner[a]], a - offsets[owner[a]]) for a in args]
            if None not in names and owner[args[0]] != owner[args[1]]:
                edges.add(" = ".join(sorted(names)))
        regions.append({"inputs": sorted(_leaf_name(g, leaf) for leaf in region.leaves), "edges": sorted(edges),
                        "classes": _classes(edges)})
    return sorted(regions, key=lambda r: json.dumps(r))


def main(argv=None) -> dict:
    from optimizer.plan_io import load_plan
    from optimizer.spark.statistics import default_statistics
    from workloads.corpus import corpus_plans
    from workloads.producers import DUCKDB_TPCH_QUERIES, datafusion_tpch_plans, duckdb_tpch_plans
    from workloads.tpch import generate_tpch, table_paths

    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--scale", type=float, default=0.01)
    p.add_argument("--json", default=None)
    args = p.parse_args(argv)
    data = generate_tpch(args.scale)
    statistics = default_statistics(tables={k: str(v) for k, v in table_paths(data).items()})
    plans: dict[tuple[str, int], object] = {}
    for q, plan in datafusion_tpch_plans(data).items():
        plans[("datafusion", q)] = plan
    for q, plan in duckdb_tpch_plans(data, DUCKDB_TPCH_QUERIES).items():
        plans[("duckdb", q)] = plan
    for cp in corpus_plans(producer="isthmus", category="integration/tpch"):
        if cp.tpch_query is not None:
            plans[("isthmus", cp.tpch_query)] = cp.path.read_bytes()
    graphs = {key: join_graph(load_plan(plan), statistics) for key, plan in plans.items()}
    report = {}
    same = {"edges": 0, "classes": 0}
    several = 0
    for q in range(1, 23):
        mine = {prod: graphs[(prod, q)] for prod in ("datafusion", "duckdb", "isthmus") if (prod, q) in graphs}
        distinct = {}
        for view in ("edges", "classes"):
            drop = "classes" if view == "edges" else "edges"
            distinct[view] = Counter(json.dumps([{k: v for k, v in r.items() if k != drop} for r in g], sort_keys=True)
                                     for g in mine.values())
            if len(mine) >= 2:
                same[view] += max(distinct[view].values()) == len(mine)
        several += len(mine) >= 2
        report[q] = {"producers": sorted(mine), "distinct_graphs_as_written": len(distinct["edges"]),
                     "distinct_graphs_closed": len(distinct["classes"]), "graphs": mine}
        print(f"Q{q:02d}: {len(mine)} producers, {len(distinct['edges'])} distinct join graphs as written, "
              f"{len(distinct['classes'])} after the transitive closure")
    print(f"queries with one join graph across their producers: {same['edges']} of {several} as written, "
          f"{same['classes']} after the closure")
    if args.json:
        Path(args.json).write_text(json.dumps({"same_as_written": same["edges"], "same_after_closure": same["classes"],
                                               "queries": several, "by_query": report}, indent=1))
    return report


if __name__ == "__main__":
    main()
