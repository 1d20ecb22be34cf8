"""`reconcile query`'s cost in Spark jobs, which do not depend on the machine's load.

On local Spark a query whose relations are small (the manifest's row counts) is planned
statically, as a small step is (`engine.spark.micro_batch`): with adaptive execution the
shuffle of a `count(*)` was a Spark job of its own. The session's own setting is back
once the rows are printed, and a query Spark refuses leaves it as it was too. The warm
server's side of the same command (its Connect round trips and what the client imports)
is in `tests/engine/test_warm_spark.py`.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from pyspark.errors import AnalysisException
from pyspark.sql import SparkSession

from tests.cli_helpers import query, reconcile, seeded_grades

ADAPTIVE = "spark.sql.adaptive.enabled"


def jobs_started(spark: SparkSession) -> int:
    """How many jobs the session's scheduler has started (its next job id)."""
    return int(spark.sparkContext._jsc.sc().dagScheduler().numTotalJobs())  # type: ignore[union-attr]


def test_a_small_query_is_one_spark_job(spark: SparkSession, tmp_path: Path) -> None:
    project = seeded_grades(tmp_path)
    before, adaptive = jobs_started(spark), spark.conf.get(ADAPTIVE, None)
    assert query(project, "grades", "SELECT count(*) AS n FROM students") == [{"n": 2}]
    assert jobs_started(spark) - before == 1  # with adaptive execution: 2
    assert spark.conf.get(ADAPTIVE, None) == adaptive
    with pytest.raises(AnalysisException, match="no_such_column"):
        reconcile(project, "query", "-p", "grades", "SELECT no_such_column FROM students")
    assert spark.conf.get(ADAPTIVE, None) == adaptive
