"""``benchmarks/chosen_vs_fastest.py --reprice``: the model's ranking of timed plans measured with today's
model, on the plans that were timed (written once, read back after a change of the model)."""

from __future__ import annotations

import pytest


def test_reprice_prices_the_plans_it_wrote_and_reads_them_back(spark, tmp_path):
    from substrait.proto import Plan

    from benchmarks import chosen_vs_fastest, tpch
    from optimizer.spark.statistics import default_statistics

    entry = {"query": 3, "plans": {"datafusion": {"estimated_cost_original": 1.0, "estimated_cost_optimized": 2.0}},
             "times_s": {"datafusion/original": [1.0], "datafusion/optimized": [0.5]}}
    report = {"config": {"suite": "tpch", "scale_factor": 0.01}, "queries": [entry]}
    first, done = chosen_vs_fastest.reprice("tpch", report, tmp_path, spark)
    assert (done["plans_built"], done["plans_read"], done["priced"], done["errors"]) == (2, 0, 2, {})
    assert report["queries"][0]["plans"]["datafusion"]["estimated_cost_original"] == 1.0  # the input is kept
    _, tables = tpch.suite_data(tpch.SUITES["tpch"], 0.01)
    statistics = default_statistics(spark=spark, tables=tables)
    info = first["queries"][0]["plans"]["datafusion"]
    for label in ("original", "optimized"):
        plan = Plan.FromString((tmp_path / "tpch" / f"datafusion_q3_{label}.binpb").read_bytes())
        assert info[f"estimated_cost_{label}"] == pytest.approx(tpch._plan_cost(plan, statistics))
    assert info["estimated_cost_optimized"] < info["estimated_cost_original"]
    again, done = chosen_vs_fastest.reprice("tpch", report, tmp_path, spark)
    assert (done["plans_built"], done["plans_read"]) == (0, 2)
    assert again["queries"][0]["plans"]["datafusion"] == pytest.approx(info)
