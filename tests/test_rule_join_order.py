"""Join ordering: DPccp finds the optimum DPsub finds; reordered plans give the same answers on Spark."""

from __future__ import annotations

import itertools
import math
import random

import networkx as nx
import pytest
from garbage_cycles import collector_paused, optimizer_functions_in_garbage
from optimizer.cost.cardinality import CardinalityEstimator
from optimizer.cost.estimates import ColumnEstimate, RelEstimate
from optimizer.cost.model import CostModel
from optimizer.rules import join_order
from optimizer.rules.join_order import JoinGraph, Region
from substrait.proto import Expression

from optimizer.driver import Optimizer
from optimizer.expr_utils import field
from optimizer.load.functions import FunctionInfo, FunctionTable
from optimizer.plan_io import load_plan


class _Ctx:
    """What JoinGraph reads from a rule context: leaf estimates (``rows`` each, one 8-byte key column
    with as many distinct values as rows), the shared cardinality estimator and the cost model."""

    functions = FunctionTable([FunctionInfo(1, "equal", None, "extension:io.substrait:functions_comparison", "scalar")])

    def __init__(self, rows, width=1):
        self._rows = rows
        self._width = width
        self.estimator = CardinalityEstimator(nx.DiGraph(), None, self.functions)
        self.cost_model = CostModel(None)

    def estimate(self, leaf):
        rows = float(self._rows[leaf])
        column = ColumnEstimate(ndv=rows, min=1.0, max=rows, null_fraction=0.0)
        return RelEstimate(rows, 8.0 * self._width, [column] * self._width)


def _eq(a: int, b: int) -> Expression:
    e = Expression()
    e.scalar_function.function_reference = 1
    e.scalar_function.arguments.add().value.CopyFrom(field(a))
    e.scalar_function.arguments.add().value.CopyFrom(field(b))
    return e


def _graph(n, edges, rows) -> JoinGraph:
    return JoinGraph(Region(list(range(n)), [1] * n, [_eq(a, b) for a, b in edges], None, list(range(n))), _Ctx(rows))


def _dpsub(jg: JoinGraph, full: int) -> float:
    """Exhaustive DP over every connected subset and every split: the reference optimum."""
    best = {1 << v: 0.0 for v in range(jg.n)}

    def connected(m):
        comp = frontier = m & -m
        while frontier:
            frontier = jg.neighborhood(frontier, comp) & m
            comp |= frontier
        return comp == m

    for m in range(1, full + 1):
        if bin(m).count("1") < 2 or not connected(m):
            continue
        b = math.inf
        sub = (m - 1) & m
        while sub:
            other = m ^ sub
            if sub in best and other in best and jg.neighborhood(sub, 0) & other:
                b = min(b, best[sub] + best[other] + jg.join_cost(sub, other))
            sub = (sub - 1) & m
        best[m] = b
    return best[full]


def test_dpccp_leaves_no_garbage_cycles():
    """Its recursive closures refer to themselves and to the graph with its estimates: left bound, every
    dynamic programming run left all of it for the garbage collector to find."""
    jg = _graph(5, [(0, 1), (1, 2), (2, 3), (3, 4), (0, 4)], [10, 1_000, 100_000, 1_000, 10])
    with collector_paused():
        cost, _ = jg.dpccp((1 << 5) - 1)
        assert optimizer_functions_in_garbage() == []
    assert cost[(1 << 5) - 1] > 0


def test_dpccp_finds_the_exhaustive_optimum():
    rnd = random.Random(7)
    for _ in range(40):
        n = rnd.randint(3, 8)
        edges = [(i, rnd.randrange(i)) for i in range(1, n)]
        edges += [tuple(rnd.sample(range(n), 2)) for _ in range(rnd.randint(0, 5))]
        rows = [rnd.choice([10, 1_000, 100_000, 1_000_000]) for _ in range(n)]
        full = (1 << n) - 1
        jg = _graph(n, edges, rows)
        cost, tree = jg.dpccp(full)
        # The same graph: a subset's estimate comes from the first split priced, which the DP fixed.
        reference = _dpsub(jg, full)
        assert cost[full] == pytest.approx(reference, rel=1e-9)


def test_greedy_handles_large_graphs_and_cross_products():
    n = 30
    jg = _graph(n, list(itertools.combinations(range(20), 2)), [1e5] * n)  # 10 relations with no predicate
    cost, tree = jg.best_tree(dp_limit=14)
    leaves = []

    def walk(t):
        if isinstance(t, int):
            leaves.append(t)
        else:
            walk(t[0])
            walk(t[1])

    walk(tree)
    assert sorted(leaves) == list(range(n)) and cost > 0


def test_dense_graphs_over_the_pair_budget_fall_back_to_greedy():
    """A clique has (3^n - 2^(n+1) + 1) / 2 csg-cmp pairs: DPccp counts them and gives up at the budget."""
    n = 8
    edges = list(itertools.combinations(range(n), 2))
    rows = [10 ** (1 + i % 5) for i in range(n)]
    full = (1 << n) - 1
    pairs = (3**n - 2 ** (n + 1) + 1) // 2
    jg = _graph(n, edges, rows)
    jg.dpccp(full, pair_budget=pairs)  # exactly the budget: DP completes
    with pytest.raises(join_order._OverBudget):
        jg.dpccp(full, pair_budget=pairs - 1)
    dp_cost, _ = _graph(n, edges, rows).best_tree(dp_limit=14, pair_budget=pairs)
    greedy_cost, greedy_tree = _graph(n, edges, rows).best_tree(dp_limit=14, pair_budget=10)
    assert greedy_cost == pytest.approx(_graph(n, edges, rows).greedy(full)[0])
    assert greedy_cost >= dp_cost * (1 - 1e-9)  # DP's optimum is never worse than greedy's tree
    # a chain of 14 has only n(n^2-1)/6 = 455 pairs: well inside the default budget. Each input joins
    # its next on another column (a chain of equalities on one column would be a clique: join_order
    # closes equalities transitively).
    region = Region(list(range(14)), [2] * 14, [_eq(2 * i + 1, 2 * i + 2) for i in range(13)], None, list(range(28)))
    chain = JoinGraph(region, _Ctx([1000] * 14, width=2))
    chain.dpccp((1 << 14) - 1, pair_budget=455)


def test_equalities_are_closed_transitively():
    """``a = b AND b = c`` over three inputs also connects the first and the third: the orders that
    join them first are considered, and each join evaluates one equality of the class."""
    jg = _graph(3, [(0, 1), (1, 2)], [10, 1_000_000, 10])
    assert jg.neighborhood(1 << 0, 0) & (1 << 2)
    assert len(jg.predicates) == 3 and jg.pred_class.count(jg.pred_class[0]) == 3
    assert len(jg._between(0b011, 0b100, one_per_class=True)) == 1
    assert len(jg._between(0b011, 0b100)) == 2


BAD_ORDER_Q5 = """
select n_name, sum(l_extendedprice * (1 - l_discount)) as revenue
from lineitem, orders, customer, supplier, nation, region
where c_custkey = o_custkey and l_orderkey = o_orderkey and l_suppkey = s_suppkey
  and c_nationkey = s_nationkey and s_nationkey = n_nationkey and n_regionkey = r_regionkey
  and r_name = 'ASIA' and o_orderdate >= date '1994-01-01' and o_orderdate < date '1995-01-01'
group by n_name order by revenue desc
"""


def _estimated_cost(plan, statistics) -> float:
    from optimizer.dag import annotate_schemas, to_dag
    from optimizer.driver import RuleContext

    g = annotate_schemas(to_dag(plan))
    ctx = RuleContext(g, statistics)
    return ctx.cost(g.graph["roots"][0]["node"])


def test_bad_written_order_gets_a_cheaper_one(tpch_dir):
    """Q5 written lineitem, orders, customer, supplier, nation, region: the chosen order costs less."""
    from optimizer.rules import RULES

    from optimizer.spark.statistics import default_statistics
    from workloads.producers import duckdb_plan
    from workloads.tpch import table_paths

    tables = {k: str(v) for k, v in table_paths(tpch_dir).items()}
    plan = load_plan(duckdb_plan(BAD_ORDER_Q5, tables))
    statistics = default_statistics(tables=tables)
    logical = [r for r in RULES if r.phase in ("normalise", "logical")]
    written = Optimizer(statistics=statistics, rules=logical).run(plan)
    ordered = Optimizer(statistics=statistics, rules=[*logical, join_order.RULE]).run(plan)
    assert "join_order" in [e.rule for e in ordered.events]
    assert _estimated_cost(ordered.plan, statistics) < _estimated_cost(written.plan, statistics)


@pytest.mark.spark
# Q5 is not among them: DataFusion writes it within 1% of the best order the model finds, and the driver
# keeps the written plan (see test_reordering_a_bad_q5_lowers_the_estimate for a Q5 that is reordered).
@pytest.mark.parametrize("query", [2, 7, 8, 9, 10, 11, 18, 21])
def test_reordered_tpch_gives_the_same_answer(spark, tpch_dir, datafusion_tpch_plans, query):
    from optimizer.rules import implement_joins

    from optimizer.difftest.results import compare_tables
    from optimizer.spark import SparkBackend
    from optimizer.spark.statistics import default_statistics
    from workloads.tpch import TPCH_ORDER_BY

    plan = load_plan(datafusion_tpch_plans[query])
    # join_order is judged with the physical phase after it (its order counts on the broadcasts that
    # phase binds), so the joins are implemented too
    result = Optimizer(statistics=default_statistics(tables=str(tpch_dir)),
                       rules=[join_order.RULE, implement_joins.RULE]).run(plan)
    assert "join_order" in [e.rule for e in result.events], result.summary()
    backend = SparkBackend(spark, tables=str(tpch_dir))
    verdict = compare_tables(backend.execute(result.plan), backend.execute(plan), ordered_by=TPCH_ORDER_BY.get(query))
    assert verdict.equal, verdict.reason


def test_greedy_ordering_drops_the_estimates_of_pairs_it_can_no_longer_join(monkeypatch):
    """Once two parts are joined, the other pairs either was offered in can never be joined: their
    estimates are dropped then (a 1,000-way chain offers thousands), their row counts kept."""
    import json

    from benchmarks.optimizer_latency import wide_plan
    from optimizer.driver import Optimizer
    from optimizer.plan_io import load_plan
    from optimizer.spark.statistics import default_statistics

    greedy = JoinGraph.greedy
    sizes: list[tuple[int, int]] = []

    def recorded(self, component):
        out = greedy(self, component)
        sizes.append((len(self.est), len(self.card)))
        return out

    monkeypatch.setattr(JoinGraph, "greedy", recorded)
    plan = load_plan(json.dumps(wide_plan("chain", 40)))
    result = Optimizer(statistics=default_statistics()).run(plan)
    assert sizes and all(kept < priced for kept, priced in sizes), sizes
    assert any(e.rule == "join_order" for e in result.events)


def test_collecting_a_region_leaves_no_reference_cycle():
    """The walk that collects a region is no nested function calling itself (a reference cycle holding
    the rule's context): once the region is dropped, nothing is left for the garbage collector."""
    import gc
    import json

    from benchmarks.optimizer_latency import wide_plan
    from optimizer.dag import annotate_schemas, to_dag
    from optimizer.driver import PlanContext
    from optimizer.plan_io import load_plan

    g = to_dag(load_plan(json.dumps(wide_plan("chain", 12))))
    annotate_schemas(g)
    ctx = PlanContext(g)
    top = next(n for n in g if g.nodes[n]["kind"] == "join")
    gc.collect()
    region = join_order.collect_region(g, top, ctx)
    assert len(region.leaves) == 12
    del region
    assert gc.collect() == 0
