"""The benchmarks run end to end (tiny scale, one query, one repetition). Not timing tests."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

TINY = ["--scale", "0.01", "--reps", "1", "--warmup", "0", "--no-progress"]


@pytest.mark.spark
def test_tpch_benchmark_runs(spark, tmp_path):
    from benchmarks import tpch

    report = tpch.main([*TINY, "--queries", "6", "--producers", "datafusion", "--optimize-reps", "1",
                        "--out", str(tmp_path)], spark=spark)
    summary = json.loads((tmp_path / "tpch.json").read_text())["summary"]
    for key in ("scale_factor", "geomean_optimized_vs_spark_cbo", "geomean_optimized_vs_spark_default",
                "geomean_optimized_vs_original", "queries_equal", "plans_costlier_by_model",
                "producer_spread_geomean", "cost_time_spearman"):
        assert key in summary
    assert summary["scale_factor"] == 0.01
    assert summary["plans_costlier_by_model"] == 0
    info = report["queries"][0]["plans"]["datafusion"]
    assert info.get("original_equal") is True, info
    assert report["queries"][0]["spark_cbo_equal"] is True
    assert (tmp_path / "tpch.md").read_text().startswith("# TPC-H")
    assert (tmp_path / "tpch.png").stat().st_size > 0
    assert spark.conf.get("spark.sql.cbo.enabled", "false") == "false", "CBO confs are restored"


@pytest.mark.spark
def test_tpch_benchmark_optimize_only_times_every_plan_and_runs_no_query(spark, tmp_path):
    """``--optimize-only``: the optimize times the benchmark takes before any query runs, and nothing else."""
    from benchmarks import tpch

    report = tpch.main([*TINY, "--queries", "3,6", "--producers", "datafusion,duckdb", "--optimize-reps", "2",
                        "--optimize-only", "--out", str(tmp_path)], spark=spark)
    written = json.loads((tmp_path / "tpch_optimize.json").read_text())
    assert written["summary"] == report["summary"]
    assert {(r["producer"], r["query"]) for r in written["plans"]} == {
        ("datafusion", 3), ("datafusion", 6), ("duckdb", 3), ("duckdb", 6)}
    times = [r["optimize_ms"] for r in written["plans"]]
    assert all(t > 0 for t in times) and written["summary"]["plans"] == 4
    # the report rounds each time and the median to 2 decimals: one unit of the last place apart at most
    assert written["summary"]["median_optimize_ms"] == pytest.approx(sum(sorted(times)[1:3]) / 2, abs=0.01)
    assert set(written["summary"]["median_optimize_ms_by_producer"]) == {"datafusion", "duckdb"}
    assert not (tmp_path / "tpch.json").exists()


@pytest.mark.spark
def test_tpcds_benchmark_runs(spark, tmp_path):
    """``--suite tpcds``: DataFusion's and DuckDB's plans of one TPC-DS query against Spark SQL, judged by DuckDB;
    a DuckDB plan that means another query (Q22's ROLLUP) is listed as not benchmarked, with the reason. Q22
    reads two of Q3's tables and ``inventory``: four tables in all to ANALYZE (Q5 read ten)."""
    from benchmarks import tpch

    report = tpch.main([*TINY, "--suite", "tpcds", "--queries", "3,22", "--optimize-reps", "1", "--confirm", "0",
                        "--out", str(tmp_path)],
                       spark=spark)
    summary = json.loads((tmp_path / "tpcds.json").read_text())["summary"]
    assert summary["suite"] == "tpcds" and summary["plans_compared"] == 3
    assert summary["plans_costlier_by_model"] == 0
    assert "geomean_optimized_vs_spark_cbo<=0.85" in summary["targets"]
    assert summary["producer_spread_geomean"] is not None  # Q3 has both producers' plans
    q3, q22 = report["queries"]
    assert q3["spark_default_equal"] is True and q3["spark_cbo_equal"] is True, q3
    for producer in ("datafusion", "duckdb"):
        info = q3["plans"][producer]
        assert info["original_equal"] is True and info["optimized_equal"] is True, info
    assert "ROLLUP" in q22["plans"]["duckdb"]["error"]
    text = (tmp_path / "tpcds.md").read_text()
    assert text.startswith("# TPC-DS") and "Q22 duckdb: wrong plan" in text


@pytest.mark.spark
def test_stage_costs_benchmark_runs(spark, tmp_path):
    from benchmarks import stage_costs

    report = stage_costs.main(["--scale", "0.01", "--reps", "1", "--out", str(tmp_path)], spark=spark)
    assert set(report["series"]) == {"distinct", "broadcast", "merge", "nested"}
    assert all(len(s["median_ms"]) == 3 and all(m > 0 for m in s["median_ms"]) for s in report["series"].values())
    assert "shuffle_stage" in (tmp_path / "stage_costs.md").read_text()

    def broadcasts_within_broadcasts(query: str) -> tuple[int, int]:
        """Spark's physical plan of ``query``: its broadcast exchanges, and the pairs of them where one is
        in the other's subtree (a line indented deeper, before the tree comes back to that one's depth):
        3 for a chain of three."""
        text = spark.sql(f"EXPLAIN {query}").collect()[0][0]
        lines = [line for line in text.split("== Physical Plan ==")[-1].splitlines() if line.strip()]
        depth = [len(line) - len(line.lstrip(" :+-")) for line in lines]
        exchanges = [i for i, line in enumerate(lines) if "BroadcastExchange" in line]
        inside = 0
        for i in exchanges:
            for j in range(i + 1, len(lines)):
                if depth[j] <= depth[i]:
                    break
                if "BroadcastExchange" in lines[j]:
                    inside += 1
        return len(exchanges), inside

    # three broadcasts each: side by side in the broadcast series (no pair), a chain in nested (3 pairs)
    assert broadcasts_within_broadcasts(report["series"]["broadcast"]["queries"][2]) == (3, 0)
    assert broadcasts_within_broadcasts(report["series"]["nested"]["queries"][2]) == (3, 3)


@pytest.mark.spark
def test_backend_benchmark_runs(spark, tmp_path):
    from benchmarks import backend

    report = backend.main([*TINY, "--queries", "6", "--overhead-reps", "2", "--out", str(tmp_path)], spark=spark)
    entry = report["queries"][0]
    assert entry["equal"] is True, entry
    assert entry["to_dataframe_ms"] > 0 and entry["backend_s"] > 0
    assert (tmp_path / "backend.md").exists()


def test_optimizer_latency_benchmark_runs(tmp_path):
    from benchmarks import optimizer_latency

    report = optimizer_latency.main(["--max-relations", "4", "--shapes", "chain,clique", "--producers", "datafusion",
                                     "--queries", "6", "--reps", "1", "--no-progress", "--no-profile",
                                     "--wide", "40", "--out", str(tmp_path)])
    assert [r for r in report["tpch"] if "ms" in r], report["tpch"]
    wide = report["summary"]["wide"]
    assert wide["relations"] == 40 and wide["seconds"] > 0 and wide["join_order_fired"], wide
    assert {(e["shape"], e["relations"]) for e in report["synthetic"] if "seconds" in e} == {
        (s, n) for s in ("chain", "clique") for n in (2, 3, 4)}
    assert (tmp_path / "optimizer_latency.png").stat().st_size > 0


def test_synthetic_plans_are_valid():
    from benchmarks.optimizer_latency import graph_edges, synthetic_plan
    from optimizer.plan_io import load_plan
    from optimizer.schema.check import check_plan

    for shape in ("chain", "star", "cycle", "clique"):
        plan = load_plan(json.dumps(synthetic_plan(shape, 7)))
        assert check_plan(plan) == []
        assert len(plan.relations[0].root.names) == 2 * len(graph_edges(shape, 7))  # one key per edge end


@pytest.mark.spark
def test_join_order_benchmark_runs(spark, tmp_path):
    from benchmarks import common, join_order

    report = join_order.main(["--scale", "0.01", "--reps", "1", "--warmup", "0", "--no-progress",
                              "--out", str(tmp_path)], spark=spark)
    assert report["written_leaf_order"] == list(join_order.WRITTEN_ORDER)
    assert all(report["answers_equal"].values()), report["errors"]
    assert report["estimated_cost"]["written_order"] is not None
    # The report states its set-up as the other Spark timing reports do (benchmarks.common.how_timed).
    head = (tmp_path / "join_order.md").read_text().splitlines()[2]
    assert head.startswith(common.how_timed(report["config"])), head
    assert "cores; median of 1 runs after 0 warm-up, interleaved; sink `DataFrame.toArrow()`." in head


def test_a_datafusion_answer_is_judged_by_duckdb_then_datafusion_then_quotient_rounding():
    """TPC-DS Q58 at SF 1 (first row, ss_dev): the plan's quotient rounded HALF_UP at scale 6 (Spark),
    truncated (DataFusion), and DuckDB's double. Each judge is named; a real difference is not hidden."""
    from decimal import Decimal

    import pyarrow as pa

    from benchmarks import tpch

    def dec(text: str) -> pa.Table:
        return pa.table({"ss_dev": pa.array([Decimal(text)], pa.decimal128(38, 6))})

    duckdb = pa.table({"ss_dev": pa.array([103.71926462058], pa.float64())})
    ours, datafusion = dec("103.719300"), dec("103.719200")
    assert tpch.judge_datafusion_answer(dec("103.719265"), duckdb, lambda: datafusion) == (True, None)
    assert tpch.judge_datafusion_answer(datafusion, duckdb, lambda: datafusion) == (
        True, "datafusion (its own answer; DuckDB's differs)")
    equal, how = tpch.judge_datafusion_answer(ours, duckdb, lambda: datafusion)
    assert equal is True and how is not None and how.startswith("duckdb within 1e-06 relative")
    wrong, how = tpch.judge_datafusion_answer(dec("103.7195"), duckdb, lambda: datafusion)
    assert how is None and isinstance(wrong, str) and wrong.startswith("rows differ"), wrong


def test_a_plan_over_1_2_is_judged_by_its_confirmation_runs():
    """The 1.2 target reads the confirmed ratio where there is one; both counts are in the summary, and
    the geomean stays that of the main runs."""
    from benchmarks import tpch

    def plan(main: float, confirmed: float | None) -> dict:
        info = {"optimized_vs_spark_cbo": main, "optimized_vs_spark_default": main, "optimized_vs_original": 1.0,
                "original_equal": True, "optimized_equal": True, "optimize_ms": 1.0}
        if confirmed is not None:
            info["confirmed_optimized_vs_spark_cbo"] = confirmed
        return info

    rows = [{"query": q, "spark_cbo_s": 1.0, "spark_default_s": 1.0, "plans": {"datafusion": plan(m, c)}}
            for q, (m, c) in enumerate([(1.3, 1.0), (1.3, 1.25), (1.0, None)], start=1)]
    report = tpch._report(rows, 1.0, ["datafusion"], 3, 1, 0.0, Path("."), 0.0)
    s = report["summary"]
    over = [m for m in s["misses"] if m["target"].startswith("d/b")]
    assert [(m["query"], m["value"]) for m in over] == [(2, 1.25)]
    assert s["plans_over_1_2_in_main_runs"] == 2 and s["plans_over_1_2_confirmed"] == 1
    assert s["targets"]["every_query_optimized_vs_spark_cbo<=1.2"] is False
    assert abs(s["geomean_optimized_vs_spark_cbo"] - (1.3 * 1.3) ** (1 / 3)) < 1e-9


def test_confirmation_runs_alternate_and_time_both():
    from benchmarks import tpch

    calls: list[str] = []
    times = tpch._confirm(lambda: calls.append("b"), lambda: calls.append("d"), 3)
    assert calls == ["b", "d", "d", "b", "b", "d"]
    assert [len(v) for v in times.values()] == [3, 3]


@pytest.mark.spark
def test_chosen_vs_fastest_reads_a_report_and_explains_the_worst_plan(spark, tmp_path, capsys):
    """Two TPC-H queries of a synthetic report (SF 0.01): chosen / fastest, the model's pairwise ranking
    beyond 10 % noise, and Spark's physical plans of Q3's chosen plan and of Spark CBO, its fastest."""
    from benchmarks import chosen_vs_fastest

    def plan(cost_original: float, cost_optimized: float) -> dict:
        return {"estimated_cost_original": cost_original, "estimated_cost_optimized": cost_optimized,
                "original_equal": True, "optimized_equal": True, "rules_fired": {"join_order": 1}}

    def runs(**medians: float) -> dict:  # three runs whose median is the value
        return {k.replace("__", "/"): [v * 1.01, v, v * 0.99] for k, v in medians.items()}

    report = {"config": {"suite": "tpch", "scale_factor": 0.01, "machine": {"commit": "abc1234", "date": "x"}},
              "queries": [
                  {"query": 3, "plans": {"datafusion": plan(100, 50)}, "spark_cbo_equal": True,
                   "times_s": runs(spark_default=1.0, spark_cbo=0.8, datafusion__original=1.2,
                                   datafusion__optimized=1.0)},
                  {"query": 6, "plans": {"datafusion": plan(10, 8), "duckdb": plan(12, 9)}, "spark_cbo_equal": True,
                   "times_s": runs(spark_default=0.5, spark_cbo=0.45, datafusion__original=0.52,
                                   datafusion__optimized=0.5, duckdb__original=0.6, duckdb__optimized=0.4)}]}
    source = tmp_path / "tpch.json"
    source.write_text(json.dumps(report))
    out = chosen_vs_fastest.main(["--tpch", str(source), "--tpcds", "", "--explain-max", "1", "--out",
                                  str(tmp_path)], spark=spark)
    s = out["suites"]["tpch"]
    rows = {(r["query"], r["producer"]): r for r in s["rows"]}
    assert rows[(3, "datafusion")]["fastest"] == "spark_cbo"
    assert rows[(3, "datafusion")]["chosen_vs_fastest"] == pytest.approx(1.25)
    assert rows[(6, "datafusion")]["fastest"] == "duckdb/optimized"
    assert rows[(6, "datafusion")]["chosen_vs_fastest"] == pytest.approx(1.25)
    assert rows[(6, "duckdb")]["fastest_kind"] == "chosen"
    assert s["chosen"]["by_producer"]["datafusion"]["geomean_chosen_vs_fastest"] == pytest.approx(1.25)
    assert s["chosen"]["geomean_chosen_vs_fastest"] == pytest.approx(1.25 ** (2 / 3))
    assert s["chosen"]["room_fastest_vs_spark_cbo"] == pytest.approx((1.0 * 0.4 / 0.45) ** 0.5)
    # Q3: optimized cheaper and faster (right); Q6: five pairs beyond noise, one wrong (DataFusion's
    # optimized plan is priced 8 against DuckDB's 9 but runs 0.5 s against 0.4 s), 0.52 / 0.5 within noise.
    r = s["ranking"]
    assert (r["pairs_right"], r["pairs_wrong"], r["pairs_within_noise"]) == (5, 1, 1)
    assert [(p["query"], p["faster"], p["slower"]) for p in r["wrong"]] == [
        (6, "duckdb/optimized", "datafusion/optimized")]
    assert r["wrong"][0]["cost_ratio"] == pytest.approx(8 / 9)
    # The worst plan (Q3, the first of the two at 1.25) explained without running: three tables, two joins each.
    [item] = s["explain"]["plans"]
    assert (item["query"], item["chosen"], item["fastest"]) == (3, "datafusion/optimized", "spark_cbo")
    for role in ("chosen", "fastest"):
        p = item[f"{role}_plan"]
        assert sorted(x["table"] for x in p["scans"]) == ["customer", "lineitem", "orders"], p["scans"]
        assert sum(p["join_strategies"].values()) == 2 and len(p["build_sides"]) == 2, p
        assert all(t in p["join_tree"] for t in ("customer", "lineitem", "orders")), p["join_tree"]
        assert "GreaterThan(l_shipdate,1995-03-15)" in str(p["scans"])
    assert isinstance(item["differences"], list)
    assert item["chosen_estimated_cost"] > 0
    assert spark.conf.get("spark.sql.cbo.enabled", "false") == "false", "CBO confs are restored"
    assert "Ranked wrong" in (tmp_path / "chosen_vs_fastest.md").read_text()
    # a report without timings is refused in one line, exit status 2
    del report["queries"][1]["times_s"]
    source.write_text(json.dumps(report))
    capsys.readouterr()
    with pytest.raises(SystemExit) as exit_info:
        chosen_vs_fastest.main(["--tpch", str(source), "--tpcds", "", "--no-explain", "--out", str(tmp_path)])
    assert exit_info.value.code == 2
    assert capsys.readouterr().err == f"chosen_vs_fastest: {source}: queries[1] has no times_s object\n"


@pytest.mark.spark
def test_tpch_benchmark_optimizes_with_a_kept_learned_store(spark, tmp_path):
    """``cardinality.py --learn --keep-store FILE`` keeps the rows it learned; ``tpch.py --learned FILE``
    optimizes with them: the report names the store and the lookups it answered."""
    from benchmarks import cardinality, tpch

    store = tmp_path / "learned.json"
    cardinality.main(["--scale", "0.01", "--queries", "6", "--learn", "--keep-store", str(store),
                      "--out", str(tmp_path)], spark=spark)
    assert json.loads(store.read_text())["entries"]
    report = tpch.main([*TINY, "--queries", "6", "--producers", "datafusion", "--optimize-reps", "1",
                        "--learned", str(store), "--out", str(tmp_path)], spark=spark)
    learned = report["config"]["learned"]
    assert learned["store"] == str(store) and learned["entries"] > 0
    assert learned["lookups_answered"] > 0
    assert report["queries"][0]["plans"]["datafusion"]["optimized_equal"] is True
    with pytest.raises(SystemExit, match="no learned rows"):
        tpch.main([*TINY, "--queries", "6", "--producers", "datafusion", "--learned", str(tmp_path / "none.json"),
                   "--out", str(tmp_path)], spark=spark)


def test_optimizer_instructions_workload_and_commit_tree(tmp_path):
    """What ``benchmarks/optimizer_instructions.py`` runs under callgrind (valgrind itself is not run here):
    the latency benchmark's TPC-H plans written once, optimized from the files; and another commit's package
    laid out as installed."""
    from benchmarks import optimizer_instructions

    plans = tmp_path / "plans"
    assert optimizer_instructions.write_plans(plans) == len(list(plans.glob("*.bin"))) >= 50
    optimizer_instructions.main(["--work", "pass", "--plans", str(plans), "--disable-rules", "push_semi_joins"])
    tree = optimizer_instructions.tree_of("HEAD", tmp_path / "tree")
    assert (tree / "pkg" / "optimizer" / "rules" / "__init__.py").exists()
    assert (tree / "pkg" / "optimizer" / "cost" / "model.py").exists()
    assert (tree / "src" / "benchmarks" / "optimizer_latency.py").exists()
    with pytest.raises(SystemExit, match="no rule named 'nope'"):
        optimizer_instructions.main(["--plans", str(plans), "--disable-rules", "nope"])


@pytest.mark.spark
def test_planning_time_benchmark_runs(spark, tmp_path):
    from benchmarks import planning_time

    report = planning_time.main([*TINY, "--suite", "tpch", "--queries", "3", "--out", str(tmp_path)], spark=spark)
    (row,) = report["queries"]
    assert row["query"] == 3 and row["cbo_ms"] > 0 and row["to_sql_ms"] > 0 and row["explain_ms"] > 0
    assert row["optimized_ms"] == pytest.approx(row["to_sql_ms"] + row["spark_sql_ms"] + row["explain_ms"], abs=0.02)
    assert "effect" not in report["summary"]  # the benchmark's times are at SF 1, not this scale
    assert (tmp_path / "planning_time_tpch.md").read_text().startswith("# Planning")
    assert spark.conf.get("spark.sql.cbo.enabled", "false") == "false", "CBO confs are restored"
