"""Session-wide fixtures: one SparkSession for the whole test session."""

from __future__ import annotations

import pytest


@pytest.fixture(scope="session")
def spark():
    from optimizer.spark.session import get_spark

    session = get_spark(master="local[2]", conf={"spark.sql.shuffle.partitions": "4"})
    yield session
