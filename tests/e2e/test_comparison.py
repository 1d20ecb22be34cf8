"""The oracles' comparison finds every multiset difference and nothing else."""

from __future__ import annotations

from pyspark.sql import DataFrame, SparkSession

from tests.comparison import differing


def test_differing_names_exactly_the_pairs_that_differ_as_multisets(
        spark: SparkSession) -> None:
    def frame(rows: list[tuple[int | None, float | None]]) -> DataFrame:
        return spark.createDataFrame(rows, "k int, x double")

    rows = [(1, 0.1), (1, 0.1), (None, None), (2, -0.0)]
    assert differing({
        "same rows in another order": (frame(rows), frame(list(reversed(rows)))),
        "a double summed in another order": (frame([(1, 0.1 + 0.2)]), frame([(1, 0.3)])),
        "-0.0 and 0.0": (frame([(2, -0.0)]), frame([(2, 0.0)])),
        "one copy fewer": (frame(rows), frame(rows[1:])),
        "one copy more": (frame(rows[1:]), frame(rows)),
        "a NULL for a value": (frame([(1, None)]), frame([(1, 0.0)])),
        "swapped values": (frame([(1, 1.0), (2, 2.0)]), frame([(1, 2.0), (2, 1.0)])),
        "both empty": (frame([]), frame([])),
    }) == ["a NULL for a value", "one copy fewer", "one copy more", "swapped values"]
