"""Test and benchmark workloads, kept out of the ``optimizer`` package (they are not installed with it).

TPC-H and TPC-DS data and queries (:mod:`.tpch`, :mod:`.tpcds`), the index of the consumer-testing
corpus (:mod:`.corpus`), live plans from DataFusion and DuckDB (:mod:`.producers`, which need the ``test``
extra) and ``make demo`` (:mod:`.demo`).
"""
