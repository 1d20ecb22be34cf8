"""A condition repeated in every branch of an `OR` is written once in front of it, so a
correlation spelled inside each branch (Spark's TPC-DS q41) keys the view (issue 80)."""

from __future__ import annotations

import itertools

import pytest
from pyspark.sql import SparkSession
from sqlglot import parse_one

from reconciler.desired.analysis.factoring import factor_common_conditions
from reconciler.desired.analysis.shapes import Aggregate, Fallback, Keyed, analyse

COLUMNS = {"item": ["i_item_sk", "i_manufact", "i_product_name", "i_color", "i_size"]}

Q41_SHAPE = """
SELECT DISTINCT i_product_name FROM item i1
WHERE i_item_sk BETWEEN 1 AND 40 AND (SELECT count(*) FROM item
  WHERE (i_manufact = i1.i_manufact AND (i_color = 'red' OR i_size = 'small'))
     OR (i_manufact = i1.i_manufact AND i_color = 'blue')) > 0
"""


def factored(condition: str) -> str:
    return factor_common_conditions(parse_one(f"SELECT 1 FROM t WHERE {condition}",
                                              read="spark")).args["where"].this.sql("spark")


def test_the_repeated_condition_is_written_once() -> None:
    assert factored("(c = 1 AND a = 2) OR (a = 3 AND c = 1) OR (c = 1 AND b = 4)") == \
        "(c = 1 AND (a = 2 OR a = 3 OR b = 4))"


def test_an_or_inside_a_branch_is_factored_too() -> None:
    assert factored("(c = 1 AND ((d = 1 AND x = 1) OR (d = 1 AND y = 1))) OR (c = 1 AND z = 1)"
                    ) == "(c = 1 AND ((d = 1 AND (x = 1 OR y = 1)) OR z = 1))"


def test_a_branch_that_is_only_the_condition_absorbs_the_others() -> None:
    assert factored("c = 1 OR (c = 1 AND a = 2)") == "(c = 1)"


def test_nothing_common_leaves_the_query_as_it_was() -> None:
    tree = parse_one("SELECT 1 FROM t WHERE (a = 1 AND b = 2) OR (a = 2 AND b = 1)")
    assert factor_common_conditions(tree) is tree


def test_random_numbers_and_subqueries_stay_in_each_branch() -> None:
    assert factored("(rand() < 0.5 AND a = 1) OR (rand() < 0.5 AND b = 1)") == \
        "(RAND() < 0.5 AND a = 1) OR (RAND() < 0.5 AND b = 1)"
    assert factored("(x IN (SELECT y FROM u) AND a = 1) OR (x IN (SELECT y FROM u) AND b = 1)"
                    ).count("SELECT y FROM u") == 2


def test_the_factored_condition_agrees_under_three_valued_logic(spark: SparkSession) -> None:
    """Every TRUE/FALSE/NULL assignment: the factored condition is NULL exactly where the
    original is, and equal elsewhere (Spark evaluates both)."""
    original = "(c AND a) OR (c AND b) OR (b AND c AND a)"
    values = ", ".join(f"({c}, {a}, {b})" for c, a, b in
                       itertools.product(["true", "false", "cast(null as boolean)"], repeat=3))
    disagreeing = spark.sql(
        f"SELECT count(*) AS n FROM VALUES {values} AS t(c, a, b) "
        f"WHERE NOT (({original}) <=> ({factored(original)}))").first()
    assert factored(original) != f"({original})"
    assert disagreeing is not None and disagreeing["n"] == 0


def test_a_correlation_repeated_in_each_branch_keys_the_view() -> None:
    shape = analyse(Q41_SHAPE, COLUMNS)
    assert isinstance(shape, Aggregate) and isinstance(shape.source, Keyed)
    assert set(shape.source.keys) == {"i_manufact"}
    per_branch = Q41_SHAPE.replace("OR (i_manufact = i1.i_manufact AND",
                                   "OR (i_size = i1.i_size AND")
    with pytest.raises(Fallback, match="column equality"):  # no one column: recomputed
        analyse(per_branch, COLUMNS)
