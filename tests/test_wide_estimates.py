"""The estimator's work on wide joins grows with what is asked, not with every column times every step.

A 1,000-way join carries up to 2,000 columns: a conjunction rescales only the columns whose NDV is known
(``scale_column`` leaves the others as they are), and the needed columns are brought up to date from the
readers a rewrite removed (:class:`cost.needed_columns.Readers`), not by looking at every relation.
The estimates stay what rescaling every column gives (``benchmarks/plan_identity.py`` checks the plans).
"""

from __future__ import annotations

import json

import optimizer.cost.selectivity as selectivity
from optimizer.cost.cardinality import CardinalityEstimator
from optimizer.cost.estimates import ColumnEstimate, RelEstimate, scale_column
from optimizer.cost.needed_columns import Readers, needed_columns, update_needed

from optimizer.dag import annotate_schemas, to_dag
from optimizer.driver import Optimizer
from optimizer.plan_io import load_plan


def _wide(n: int):
    from benchmarks.optimizer_latency import wide_plan

    return load_plan(json.dumps(wide_plan("chain", n)))


def _counting_scale(monkeypatch) -> list[int]:
    calls = [0]

    def counted(*args):
        calls[0] += 1
        return scale_column(*args)

    monkeypatch.setattr(selectivity, "scale_column", counted)
    return calls


def test_a_conjunction_rescales_only_the_columns_whose_ndv_is_known(monkeypatch):
    """The top join of a 200-way chain written as cross products holds 199 equalities over 398 columns
    whose NDVs are unknown: none of them is rescaled (rescaling each at each conjunct is 79,000 calls)."""
    g = to_dag(_wide(200))
    annotate_schemas(g)
    root = g.graph["roots"][0]["node"]
    calls = _counting_scale(monkeypatch)
    est = CardinalityEstimator(g).estimate(root)
    assert len(est.columns) == 398
    assert calls[0] < 1_000, calls[0]


def test_a_conjunction_rescales_known_columns_as_every_step_does():
    """Columns with an NDV are rescaled by each conjunct in turn, exactly as ``scale_column`` does step
    by step; the others are the input's own estimates."""
    names = [f"c{i}" for i in range(60)]
    plan = load_plan(json.dumps({
        "extensionUrns": [{"extensionUrnAnchor": 1, "urn": "extension:io.substrait:functions_comparison"}],
        "extensions": [{"extensionFunction": {"extensionUrnReference": 1, "functionAnchor": 1, "name": "equal:any_any"}}],
        "relations": [{"root": {"names": names, "input": {"read": {
            "namedTable": {"names": ["t"]},
            "baseSchema": {"names": names, "struct": {"types": [{"i64": {"nullability": "NULLABILITY_REQUIRED"}}] * 60}}}}}}],
    }))
    estimator = CardinalityEstimator(to_dag(plan))
    table = RelEstimate(1_000_000.0, 480.0, [
        ColumnEstimate(ndv=1000.0 * (i + 1)) if i % 7 == 0 else None if i % 5 == 0 else ColumnEstimate(avg_len=8.0)
        for i in range(60)])
    parts = [_equal(i, i + 1) for i in range(0, 58, 2)]  # c0 = c1, c2 = c3, ...: no column narrowed
    sels = estimator.conjunct_selectivities(parts, table)
    _, cols, _, _ = estimator._conjunction(parts, table)
    expected = list(table.columns)
    rows = table.rows
    for sel in sels:
        expected = [scale_column(c, rows, sel, rows * sel) if c is not None else None for c in expected]
        rows *= sel
    assert [c.ndv if c else None for c in cols] == [c.ndv if c else None for c in expected]
    assert sum(1 for c in cols if c is not None and c.ndv is not None) == 9
    assert all(a is b for a, b in zip(cols, table.columns, strict=True) if b is not None and b.ndv is None)


def _equal(a: int, b: int):
    from substrait.proto import Expression

    e = Expression()
    e.scalar_function.function_reference = 1
    for i in (a, b):
        arg = e.scalar_function.arguments.add().value
        arg.selection.direct_reference.struct_field.field = i
        arg.selection.root_reference.SetInParent()
    return e


def test_readers_index_is_the_inverse_of_the_readers_after_every_update(monkeypatch):
    """While a 60-way chain join is optimized (999 joins implemented for 1,000 tables; 59 here), the
    reverse index the needed columns are updated from stays the exact inverse of the recorded readers,
    and the needs equal a full computation."""
    import optimizer.cost.metadata as metadata

    checked: list[int] = []

    def checked_update(g, needed, readers, changed, cache=None, removed=None):
        out = update_needed(g, needed, readers, changed, cache, removed)
        assert isinstance(readers, Readers)
        inverse: dict[int, set[int]] = {}
        for n, ps in readers.items():
            for p in ps:
                inverse.setdefault(p, set()).add(n)
        assert readers.of == inverse
        assert needed == needed_columns(g)
        checked.append(len(changed))
        return out

    monkeypatch.setattr(metadata, "update_needed", checked_update)
    Optimizer().run(_wide(60))
    assert len(checked) > 50, len(checked)


def test_update_needed_looks_up_only_the_readers_that_are_gone(monkeypatch):
    """Each rewrite removes a relation or two: the relations that lost a reader are found from those, so
    the readers recorded for the other relations are not read while the needs are brought up to date
    (with a plain dict, every one is at every rewrite)."""
    import optimizer.cost.metadata as metadata

    updating = [False]
    looked: list[int] = []

    class Counted(Readers):
        def items(self):
            if updating[0]:
                looked.append(len(self))
            return super().items()

    def counted_update(*args, **kwargs):
        updating[0] = True
        try:
            return update_needed(*args, **kwargs)
        finally:
            updating[0] = False

    monkeypatch.setattr(metadata, "Readers", Counted)
    monkeypatch.setattr(metadata, "update_needed", counted_update)
    result = Optimizer().run(_wide(60))
    assert sum(1 for e in result.events if e.rule == "implement_joins") > 50
    assert looked == []


def test_needed_columns_walk_a_large_join_condition_once(monkeypatch):
    """The top join of a 200-way chain written as cross products holds a 199-conjunct condition, larger
    than the expression cache's keys: finding the columns it reads and whether it holds a subquery or
    an outer reference is one walk of it (three before)."""
    import optimizer.expr_utils as expr_utils

    g = to_dag(_wide(200))
    annotate_schemas(g)
    facts = expr_utils._column_facts
    walked: list[int] = []

    def counted(e):
        size = e.ByteSize()
        if size > expr_utils._FACTS_KEY_BYTES:
            walked.append(size)
        return facts(e)

    monkeypatch.setattr(expr_utils, "_column_facts", counted)
    needed_columns(g)
    assert walked and len(walked) == len(set(walked)), sorted(walked)


def test_the_kept_column_facts_share_one_empty_value_where_a_relation_has_none():
    """The needed columns keep, per relation, the columns its expressions read: the relations that are no
    projection (no expressions of their own) and no hash or merge join (no key columns) share one empty
    value each, instead of two empty sets and a list apiece (the cache lists every relation)."""
    from optimizer.cost.needed_columns import _NO_EXPRESSIONS, _NO_KEYS

    g = to_dag(_wide(20))
    annotate_schemas(g)
    cache: dict = {}
    needed_columns(g, cache=cache)
    facts = [f for _, f in cache.values()]
    kinds = [g.nodes[n]["kind"] for n in cache]
    assert len(facts) >= 19  # the join and the crosses of 20 tables
    assert all(f[1] is _NO_EXPRESSIONS for f, k in zip(facts, kinds, strict=True) if k != "project")
    assert all(f[2] is _NO_KEYS for f, k in zip(facts, kinds, strict=True) if k not in ("hash_join", "merge_join"))


def _read_plan(projection: list[int] | None, filtered: int | None):
    names = [f"c{i}" for i in range(40)]
    read: dict = {"namedTable": {"names": ["t"]},
                  "baseSchema": {"names": names, "struct": {"types": [{"i64": {"nullability": "NULLABILITY_REQUIRED"}}] * 40}}}
    if projection is not None:
        read["projection"] = {"select": {"structItems": [{"field": i} for i in projection]}}
    if filtered is not None:
        read["filter"] = {"scalarFunction": {"functionReference": 1, "outputType": {"bool": {}}, "arguments": [
            {"value": {"selection": {"directReference": {"structField": {"field": filtered}}, "rootReference": {}}}},
            {"value": {"literal": {"i64": "10"}}}]}}
    return load_plan(json.dumps({
        "extensionUrns": [{"extensionUrnAnchor": 1, "urn": "extension:io.substrait:functions_comparison"}],
        "extensions": [{"extensionFunction": {"extensionUrnReference": 1, "functionAnchor": 1, "name": "lt:i64_i64"}}],
        "relations": [{"root": {"names": [names[i] for i in (projection if projection is not None else range(40))],
                                "input": {"read": read}}}],
    }))


def test_a_read_estimates_only_the_columns_it_keeps_or_filters_on():
    """A read of 3 of a table's 40 columns, filtered on a fourth, estimates those 4 (the others reach
    neither its output nor its filter's selectivity), and its output is what estimating every column gives."""
    from optimizer.cost.providers import MemoryStatistics
    from optimizer.cost.statistics import ColumnStatistics, TableStatistics

    stats = MemoryStatistics({"t": TableStatistics(row_count=1e6, columns={
        f"c{i}": ColumnStatistics(ndv=100.0 * (i + 1), min=0, max=1000 + i, data_type="bigint") for i in range(40)})})
    kept = [5, 1, 7]
    g = to_dag(_read_plan(kept, filtered=30))
    annotate_schemas(g)
    estimator = CardinalityEstimator(g, stats)
    node = g.graph["roots"][0]["node"]
    est = estimator.estimate(node)
    table = estimator.table_estimate(node)
    assert [i for i, c in enumerate(table.columns) if c is not None] == [1, 5, 7, 30]
    g_all = to_dag(_read_plan(None, filtered=30))
    annotate_schemas(g_all)
    every = CardinalityEstimator(g_all, stats).estimate(g_all.graph["roots"][0]["node"])
    assert est.rows == every.rows < 1e6
    assert [(c.ndv, c.min, c.max) for c in est.columns] == [(every.columns[i].ndv, every.columns[i].min,
                                                              every.columns[i].max) for i in kept]
