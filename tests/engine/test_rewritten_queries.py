"""Every query the reconciler writes for a view (a view read through its parts, a window
merged into the aggregate it ranks: `desired/analysis/view_parts.py`) is one Spark accepts. The
breadth corpus's views are analysed by Spark over empty tables of its schema: planning
only, no job, so a rewrite Spark refuses (an aggregate of an aggregate) fails here rather
than at an apply."""

from __future__ import annotations

import shutil
from pathlib import Path

from pyspark.sql import SparkSession

from reconciler.desired.parsing.expectation_clauses import executable_view_query
from tests.projects import program_of, write_files

BREADTH = Path(__file__).resolve().parents[2] / "bench" / "breadth"


def test_every_rewritten_breadth_view_is_a_query_spark_accepts(spark: SparkSession,
                                                               tmp_path: Path) -> None:
    root = write_files(tmp_path, {"pipelines/b/pipeline.yaml":
                                  "name: b\nrefresh: incremental\nsql: [tables.sql, views.sql]\n"})
    for name in ("tables.sql", "views.sql"):
        shutil.copy(BREADTH / name, root / "pipelines" / "b" / name)
    program = program_of(root)
    parts = [name for name, view in program.views.items() if view.part_of]
    registered = []
    try:
        for name, table in program.tables.items():
            columns = ", ".join(f"`{column.name}` {column.type}" for column in table.columns)
            spark.createDataFrame([], columns).createOrReplaceTempView(name)
            registered.append(name)
        refused = {}
        for name in (name for name in program.order if name in program.views):
            try:
                query = spark.sql(executable_view_query(program.views[name].sql))
                query.createOrReplaceTempView(name)
                registered.append(name)
            except Exception as error:  # Spark's analysis: the first line says why
                refused[name] = str(error).splitlines()[0]
    finally:
        for name in registered:
            spark.catalog.dropTempView(name)

    assert refused == {}
    assert len(parts) > 10  # the corpus exercises the rewrites
