"""`refresh: auto`: each step maintains or recomputes each view, whichever looks cheaper
(`engine.refresh_choice`), and says which and why in its log line, the manifest and
`reconcile status`."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from reconciler.engine import refresh
from reconciler.engine.delta.writers import DeltaRsWriter, DeltaSparkWriter
from reconciler.engine.maintenance.refresh_choice import (
    RECOMPUTE_SHARE,
    change_share,
    choose,
    maintained_fixed_cost,
    timed,
)
from tests.cli_helpers import manifest, query, reconcile
from tests.projects import events_pipeline, write_files

SQL = """
create table events (id bigint, kind string, amount decimal(10,2));
create materialized view by_kind as
  select kind, count(*) as n, sum(amount) as total from events group by kind;
create materialized view busy as select kind, n from by_kind where n > 1;
create materialized view ranked as
  select id, row_number() over (order by id) as position from events;
"""


def _assume_maintaining_costs(monkeypatch: pytest.MonkeyPatch, seconds: float) -> None:
    """What a maintained refresh costs at least (rule 3), whatever the writer estimates and
    the views' timings say: the fastest maintained refresh of another view, a few tenths of
    a second either way, must not decide whether a view's small recompute beats it."""
    monkeypatch.setattr(refresh, "maintained_fixed_cost", lambda timings, estimate: seconds)


def _events(project: Path, name: str, first: int, count: int) -> None:
    inbox = project / "input/events"
    inbox.mkdir(parents=True, exist_ok=True)
    (inbox / name).write_text("".join(
        json.dumps({"id": i, "kind": "abc"[i % 3], "amount": f"{i}.25"}) + "\n"
        for i in range(first, first + count)))


def test_a_large_change_is_recomputed_and_a_small_one_maintained(
        spark: SparkSession, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # On rows this few every recompute is cheaper than a maintained refresh's fixed cost
    # (rule 3); a cluster where that cost is nil maintains what it can.
    _assume_maintaining_costs(monkeypatch, 0.0)
    files = events_pipeline(SQL, refresh="auto")
    project = write_files(tmp_path, files)
    assert reconcile(project, "validate").splitlines()[1:] == [
        "  view by_kind: maintained or recomputed, whichever is cheaper",
        "  view ranked: recomputed each step: window function ROW_NUMBER without PARTITION BY",
        "  view busy: maintained or recomputed, whichever is cheaper"]
    reconcile(project, "apply", "--auto-approve")

    _events(project, "1.json", 0, 40)  # every row of the table is new: recomputed
    out = reconcile(project, "run")
    assert "; busy recomputed (the change is 100.0% of its inputs' rows)" in out
    assert "; by_kind recomputed (the change is 100.0% of its inputs' rows)" in out
    assert "ranked recomputed (" not in out  # not auto: recomputed whatever the change

    _events(project, "2.json", 40, 1)  # one row in 41: maintained
    out = reconcile(project, "run")
    share = f"{1 / 41:.1%}"
    reason = f"the change is {share} of its inputs' rows; a recompute took "
    assert f"; by_kind maintained ({reason}" in out  # its state starts again: not timed
    state = manifest(project, "p")
    assert state["last_step"]["choices"]["busy"].startswith(f"maintained ({reason}")
    timings = state["relations"]["busy"]["timings"]
    assert set(timings) == {"maintained", "recomputed"}
    assert timings["maintained"]["share"] == pytest.approx(1 / 41)
    assert f"refresh auto: busy maintained ({reason}" in reconcile(project, "status")
    for view, scratch in (
            ("by_kind", "select kind, count(*) as n, sum(amount) as total from events "
                        "group by kind"),
            ("busy", "select kind, count(*) as n from events group by kind having n > 1")):
        assert query(project, "p", f"select * from {view} order by kind") == \
            query(project, "p", f"{scratch} order by kind")


def test_auto_is_the_default(tmp_path: Path) -> None:
    project = write_files(tmp_path, {"pipelines/p/pipeline.yaml": "name: p\n",
                                     "pipelines/p/program.sql": SQL})
    assert reconcile(project, "validate").splitlines()[1:] == [
        "  view by_kind: maintained or recomputed, whichever is cheaper",
        "  view ranked: recomputed each step: window function ROW_NUMBER without PARTITION BY",
        "  view busy: maintained or recomputed, whichever is cheaper"]


def test_switching_to_auto_recomputes_nothing(spark: SparkSession, tmp_path: Path) -> None:
    project = write_files(tmp_path, events_pipeline(SQL))
    reconcile(project, "apply", "--auto-approve")
    spec = project / "pipelines/p/pipeline.yaml"
    spec.write_text(spec.read_text().replace("refresh: incremental\n", "refresh: auto\n"))
    plan = json.loads(reconcile(project, "plan", "--json"))
    [pipeline] = plan["pipelines"]
    actions = {action["name"]: action for action in pipeline["actions"]}
    assert actions["by_kind"]["action"] == "keep"
    assert actions["by_kind"]["reasons"] == [
        "refresh changes: maintained incrementally -> maintained or recomputed, whichever is "
        "cheaper; nothing is recomputed now"]


@pytest.mark.parametrize(("share", "timings", "recompute", "reason"), [
    (None, None, False, "the change's size is unknown"),
    (RECOMPUTE_SHARE, None, True, "the change is 25.0% of its inputs' rows"),
    (0.01, None, False, "the change is 1.0% of its inputs' rows"),
    # timed only as a recompute: against a maintained refresh's fixed cost (3 s here)
    (0.01, {"recomputed": {"seconds": 1.0}}, True, "the change is 1.0% of its inputs' rows; "
     "a recompute took 1.0s, a maintained refresh costs at least about 3.0s"),
    (0.01, {"recomputed": {"seconds": 8.0}}, False, "the change is 1.0% of its inputs' rows; "
     "a recompute took 8.0s, a maintained refresh costs at least about 3.0s"),
    # both timed: the recompute was faster than maintaining a change this size
    (0.01, {"recomputed": {"seconds": 1.0}, "maintained": {"seconds": 2.0, "share": 0.01}},
     True, "the change is 1.0% of its inputs' rows; a recompute took 1.0s, maintaining it "
     "about 2.0s"),
    # a maintained refresh scaled by a change 4x the one it was timed on
    (0.08, {"recomputed": {"seconds": 3.0}, "maintained": {"seconds": 1.0, "share": 0.02}},
     True, "the change is 8.0% of its inputs' rows; a recompute took 3.0s, maintaining it "
     "about 4.0s"),
    # never scaled down below the time it took
    (0.001, {"recomputed": {"seconds": 3.0}, "maintained": {"seconds": 1.0, "share": 0.02}},
     False, "the change is 0.1% of its inputs' rows; maintaining it about 1.0s, a recompute "
     "took 3.0s"),
])
def test_the_rule(share: float | None, timings: dict[str, dict[str, float]] | None,
                  recompute: bool, reason: str) -> None:
    choice = choose(share, timings, fixed_cost=3.0)
    assert (choice.recompute, choice.reason) == (recompute, reason)


@pytest.mark.parametrize(("maintained", "recompute"), [(1.0, True), (0.4, False)])
def test_an_aggregate_without_state_is_maintained_again_only_for_a_clear_gain(
        maintained: float, recompute: bool) -> None:
    """Starting a dropped state again is a recompute and more: a near-equal maintained time
    keeps recomputing (no flip between the two ways), a much smaller one restarts it."""
    timings = {"recomputed": {"seconds": 1.2}, "maintained": {"seconds": maintained,
                                                               "share": 0.01}}
    assert choose(0.01, timings, fixed_cost=0.1).recompute is False  # with its state
    choice = choose(0.01, timings, fixed_cost=0.1, restarts=True)
    assert choice.recompute is recompute
    if recompute:
        assert choice.reason == ("the change is 1.0% of its inputs' rows; maintaining it about "
                                 "1.0s would first start its state again, a recompute took 1.2s")


def test_the_fixed_cost_is_the_fastest_maintained_refresh_seen() -> None:
    assert maintained_fixed_cost([None, {"recomputed": {"seconds": 0.2}}], 3.0) == 3.0
    assert maintained_fixed_cost([
        {"maintained": {"seconds": 4.0, "share": 0.01}}, None,
        {"recomputed": {"seconds": 9.0}, "maintained": {"seconds": 1.5, "share": 0.2}}],
        3.0) == 1.5


def test_each_way_keeps_its_own_last_time() -> None:
    first = timed(None, recompute=True, seconds=4.0)
    assert first == {"recomputed": {"seconds": 4.0}}
    second = timed(first, recompute=False, seconds=0.5, share=0.01)
    assert second == {"recomputed": {"seconds": 4.0},
                      "maintained": {"seconds": 0.5, "share": 0.01}}


def test_the_share_counts_every_input_table() -> None:
    assert change_share({"a", "b"}, {"a": 10}, {"a": 100, "b": 900}) == pytest.approx(0.01)
    assert change_share({"a", "b"}, {"a": None}, {"a": 100, "b": 900}) is None
    assert change_share({"a"}, {"a": 5}, {"a": None}) is None


def test_a_view_cheaper_to_recompute_than_any_maintained_refresh_is_recomputed(
        spark: SparkSession, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Rule 3: timed only by its bootstrap, a view whose recompute took less than a
    maintained refresh's fixed cost is recomputed, even for a small change. No view is
    ever maintained here, so the fixed cost is the writer's estimate: the one taken."""
    for writer in (DeltaSparkWriter, DeltaRsWriter):
        monkeypatch.setattr(writer, "maintained_refresh_seconds", 1e6)
    files = events_pipeline(SQL, refresh="auto")
    project = write_files(tmp_path, files)
    reconcile(project, "apply", "--auto-approve")
    assert set(manifest(project, "p")["relations"]["by_kind"]["timings"]) == {"recomputed"}
    _events(project, "1.json", 0, 40)
    assert "by_kind recomputed (the change is 100.0% of its inputs' rows)" in \
        reconcile(project, "run")
    _events(project, "2.json", 40, 1)
    out = reconcile(project, "run")
    assert "; by_kind recomputed (the change is 2.4% of its inputs' rows; a recompute took " \
        in out
    assert "a maintained refresh costs at least about 1000000.0s)" in out
    assert query(project, "p", "select * from by_kind order by kind") == query(
        project, "p", "select kind, count(*) as n, sum(amount) as total from events "
        "group by kind order by kind")


def test_a_recompute_drops_the_state_and_maintaining_starts_it_again(
        spark: SparkSession, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """An aggregate recomputed by `auto` costs what `refresh: full`'s recompute does (no
    state computed beside it); the next maintained refresh starts its state from the rows."""
    _assume_maintaining_costs(monkeypatch, 0.0)
    files = events_pipeline(SQL, refresh="auto")
    project = write_files(tmp_path, files)
    reconcile(project, "apply", "--auto-approve")
    assert "state" in manifest(project, "p")["relations"]["by_kind"]  # empty, bootstrapped
    _events(project, "1.json", 0, 40)
    assert "by_kind recomputed" in reconcile(project, "run")
    assert "state" not in manifest(project, "p")["relations"]["by_kind"]
    _events(project, "2.json", 40, 1)
    assert "; its state started again" in reconcile(project, "run")
    by_kind = manifest(project, "p")["relations"]["by_kind"]
    assert "state" in by_kind
    # starting the state is not what maintaining costs: it is not taken as that time
    assert "maintained" not in by_kind["timings"]
    _events(project, "3.json", 41, 1)
    assert "by_kind maintained" in reconcile(project, "run")
    assert "maintained" in manifest(project, "p")["relations"]["by_kind"]["timings"]
    assert query(project, "p", "select * from by_kind order by kind") == query(
        project, "p", "select kind, count(*) as n, sum(amount) as total from events "
        "group by kind order by kind")


def test_the_view_heading_the_longest_line_of_views_is_refreshed_first() -> None:
    """The step bench's shape: a filter and a join read only tables, an aggregate is read
    by a view over it. The aggregate heads a line of two, so it starts before the others
    rather than waiting behind them for one of the two workers."""
    reads = {"big_events": [], "by_country": [], "by_kind": [], "busy_kinds": ["by_kind"],
             "top": ["busy_kinds", "big_events"]}
    chains = refresh._longest_chains(reads)
    assert chains == {"big_events": 2, "by_country": 1, "by_kind": 3, "busy_kinds": 2,
                      "top": 1}
