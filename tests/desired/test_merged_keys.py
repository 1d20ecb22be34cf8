"""A FULL JOIN's two key columns merged into one (`COALESCE(a.k, b.k)`, or the CASE that
spells it out, as TPC-DS q51 writes it) still hold each row's key, so a window partitioned
by the merged column keys the view (issue 80); merged with any other column it does not."""

from __future__ import annotations

import pytest
from sqlglot import exp, parse_one

from reconciler.desired.analysis.keyed import KeyFallback, keyed

COLUMNS = {"a": ["k", "v"], "b": ["k", "w"]}


def keyed_by(merged: str) -> tuple[str | None, ...]:
    select = parse_one(f"SELECT k, max(m) OVER (PARTITION BY k ORDER BY v) AS best FROM "
                       f"(SELECT {merged} AS k, a.v, b.w AS m FROM a FULL JOIN b "
                       f"ON a.k = b.k) AS merged", read="spark")
    assert isinstance(select, exp.Select)
    return keyed(select, COLUMNS, lambda _: None).keys


@pytest.mark.parametrize("merged", ["COALESCE(a.k, b.k)", "COALESCE(b.k, a.k)",
                                    "CASE WHEN a.k IS NOT NULL THEN a.k ELSE b.k END",
                                    "CASE WHEN a.k IS NULL THEN b.k ELSE a.k END"])
def test_the_merged_key_of_a_full_join_keys_the_window(merged: str) -> None:
    assert keyed_by(merged) == ("k", "k")


@pytest.mark.parametrize("merged", ["COALESCE(a.k, b.w)", "COALESCE(a.k, 0)",
                                    "CASE WHEN a.v IS NOT NULL THEN a.k ELSE b.k END",
                                    "CASE WHEN a.k IS NULL THEN a.k ELSE b.k END"])
def test_anything_else_merged_does_not(merged: str) -> None:
    with pytest.raises(KeyFallback) as refused:
        keyed_by(merged)
    if merged == "COALESCE(a.k, b.w)":  # read as a.k, the key, but b.w is not
        assert str(refused.value) == "COALESCE of the key with a column that is not the key"
