"""`--select` on plan and apply, and `reconcile refresh`, through the real CLI.

The project has two independent changes: view `a` (and `b`, which reads it) and view
`c`. Plans need no JVM; the apply and refresh test shares the run's Spark session.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from reconciler.desired.workspace import load_programs
from reconciler.plan.document import plan_pipeline
from reconciler.plan.selection import REFRESH_REASON, Selection
from reconciler.state.reader import open_backend, read_manifest
from tests.cli_helpers import manifest, query, reconcile, versions
from tests.plan.test_plan import commit
from tests.projects import single_pipeline

BEFORE = """
CREATE TABLE t (id INT, v INT);
CREATE TABLE u (id INT, w INT);
CREATE MATERIALIZED VIEW a AS SELECT id, v FROM t;
CREATE MATERIALIZED VIEW b AS SELECT id, v * 2 AS v2 FROM a;
CREATE MATERIALIZED VIEW c AS SELECT id, w FROM u;
"""
AFTER = (BEFORE.replace("SELECT id, v FROM t", "SELECT id, v + 1 AS v FROM t")
         .replace("SELECT id, w FROM u", "SELECT id, w + 1 AS w FROM u"))


def _changed_project(root: Path) -> Path:
    """`BEFORE` committed (no JVM: the manifest is written directly), `AFTER` desired."""
    project = single_pipeline(root, BEFORE)
    commit(project, load_programs(project, "p")[1][0])
    (project / "pipelines/p/program.sql").write_text(AFTER)
    return project


def _plan(project: Path, *args: str) -> dict:
    return json.loads(reconcile(project, "plan", "--json", *args))["pipelines"][0]


def _changed(plan: dict) -> set[str]:
    return {action["name"] for action in plan["actions"] if action["action"] != "keep"}


@pytest.mark.parametrize(("selectors", "chosen", "left_out"), [
    (("-s", "c"), {"c"}, ["view a", "view b"]),
    (("--select", "a+"), {"a", "b"}, ["view c"]),
    (("--select", "+b"), {"a", "b"}, ["view c"]),
    (("--select", "c, +b"), {"a", "b", "c"}, []),
])
def test_a_selected_plan_carries_only_the_selected_changes(
        tmp_path: Path, selectors: tuple[str, ...], chosen: set[str],
        left_out: list[str]) -> None:
    project = _changed_project(tmp_path)
    plan = _plan(project, *selectors)
    assert _changed(plan) == chosen
    assert plan["selection"]["left_out"] == left_out
    if left_out:
        assert any(f"{len(left_out)} change(s) left out" in note and "pending" in note
                   for note in plan["notes"]), plan["notes"]
    whole = _plan(project)
    assert _changed(whole) == {"a", "b", "c"}
    assert "selection" not in whole


def test_the_selection_is_part_of_the_plan_id(tmp_path: Path) -> None:
    project = _changed_project(tmp_path)
    ids = {json.loads(reconcile(project, "plan", "--json", *args))["plan_id"]
           for args in ((), ("-s", "c"), ("-s", "a+"), ("-s", "c", "-s", "a+"))}
    assert len(ids) == 4
    # the same selection written another way is the same plan
    assert json.loads(reconcile(project, "plan", "--json", "-s", "c"))["plan_id"] in ids


def test_terminal_plan_says_what_is_left_out(tmp_path: Path) -> None:
    output = reconcile(_changed_project(tmp_path), "plan", "--select", "c")
    assert "2 change(s) left out" in output and "view a, view b" in output


def test_unknown_name_is_one_line_with_a_suggestion(tmp_path: Path) -> None:
    output = reconcile(_changed_project(tmp_path), "plan", "-s", "cc+", expect=1)
    assert output.strip().splitlines() == [
        "error: --select 'cc+': no table, view or connector named 'cc'; did you mean 'c'?"]


@pytest.mark.parametrize(("selector", "message"), [
    ("a", "view b depends on view a and changes with it but is not selected: select a+"),
    ("b", "view b depends on view a, which changes too but is not selected: select +b"),
])
def test_a_change_without_its_changed_neighbour_is_refused(tmp_path: Path, selector: str,
                                                           message: str) -> None:
    output = reconcile(_changed_project(tmp_path), "plan", "-s", selector, expect=1)
    assert len(output.strip().splitlines()) == 1 and message in output


def test_a_saved_plan_is_applied_with_its_own_selection(tmp_path: Path) -> None:
    project = _changed_project(tmp_path)
    reconcile(project, "plan", "-s", "c", "--out", str(tmp_path / "plan.json"))
    output = reconcile(project, "apply", str(tmp_path / "plan.json"), "-s", "a+", expect=1)
    assert "differs from the saved plan's selection" in output


@pytest.mark.spark
def test_apply_then_refresh_a_selection(tmp_path: Path) -> None:
    project = single_pipeline(tmp_path, BEFORE)
    reconcile(project, "apply", "--auto-approve")
    reconcile(project, "execute", "-p", "p", "INSERT INTO t VALUES (1, 10)")
    reconcile(project, "execute", "-p", "p", "INSERT INTO u VALUES (2, 20)")
    (project / "pipelines/p/program.sql").write_text(AFTER)

    output = reconcile(project, "apply", "--auto-approve", "--select", "c")
    assert "recomputed c" in output
    assert query(project, "p", "SELECT * FROM c") == [{"id": 2, "w": 21}]
    assert query(project, "p", "SELECT * FROM b") == [{"id": 1, "v2": 20}]  # not yet applied
    pending = _plan(project)
    assert _changed(pending) == {"a", "b"}  # the left-out change is still pending

    reconcile(project, "apply", "--auto-approve")
    assert _changed(_plan(project)) == set()
    before = versions(project, "p")

    # refresh: parked by the default policy (off a terminal), then approved
    parked = reconcile(project, "refresh", "-p", "p", "--select", "a+", expect=3)
    assert "awaiting approval" in parked
    assert manifest(project, "p")["status"] == "AwaitingApproval"
    assert "recomputed a, b" in reconcile(project, "approve", "-p", "p")
    after = versions(project, "p")
    assert {name for name in before if after[name] != before[name]} == {"a", "b"}
    assert query(project, "p", "SELECT * FROM b") == [{"id": 1, "v2": 22}]
    assert _changed(_plan(project)) == set()

    refused = reconcile(project, "refresh", "--select", "t", "--auto-approve", expect=1)
    assert refused.strip().splitlines() == [
        "error: --select 't': table t is not refreshable: its data is input; select the "
        "views to recompute"]


def test_removed_objects_are_dropped_only_when_selected(tmp_path: Path) -> None:
    project = _changed_project(tmp_path)
    (project / "pipelines/p/program.sql").write_text(
        AFTER.replace("CREATE MATERIALIZED VIEW c AS SELECT id, w + 1 AS w FROM u;", ""))
    kept = _plan(project, "-s", "a+")
    assert _changed(kept) == {"a", "b"} and kept["selection"]["left_out"] == ["view c"]
    dropped = _plan(project, "-s", "c")
    assert [(action["name"], action["action"]) for action in dropped["actions"]] == [
        ("c", "drop")]


def test_a_connector_is_selected_by_its_name(tmp_path: Path) -> None:
    spec = ("name: p\nconnectors:\n  - name: u_in\n    table: u\n    type: files\n"
            "    format: json\n    path: {path}\n")
    project = single_pipeline(tmp_path, BEFORE, spec.format(path="input/u"))
    commit(project, load_programs(project, "p")[1][0])
    (project / "pipelines/p/program.sql").write_text(AFTER)
    (project / "pipelines/p/pipeline.yaml").write_text(spec.format(path="input/u2"))
    (project / "input/u2").mkdir(parents=True)  # plan refuses a missing input folder
    plan = _plan(project, "--select", "u_in")
    assert [(action["name"], action["action"]) for action in plan["actions"]] == [
        ("u_in", "reset")]
    assert plan["selection"]["left_out"] == ["view a", "view b", "view c"]
    both = _plan(project, "--select", "u_in+")  # the connector, its table and the readers
    assert _changed(both) == {"u_in", "c"}


def test_a_refresh_plan_recomputes_unchanged_views_and_leaves_the_rest_pending(
        tmp_path: Path) -> None:
    project = _changed_project(tmp_path)
    (project / "pipelines/p/program.sql").write_text(
        BEFORE.replace("SELECT id, w FROM u", "SELECT id, w + 1 AS w FROM u"))
    loaded, programs = load_programs(project, "p")
    manifest, etag = read_manifest(open_backend(loaded), "p")
    plan = plan_pipeline(programs[0], manifest, etag,
                         selection=Selection.parse(["+b"], refresh=True))
    assert [(action.name, action.action, action.reasons) for action in plan.actions
            if action.action != "keep"] == [("a", "recompute", (REFRESH_REASON,)),
                                             ("b", "recompute", (REFRESH_REASON,))]
    assert plan.left_out == ("view c",) and plan.bootstrap_required


def test_a_selection_is_for_one_deployed_pipeline(tmp_path: Path) -> None:
    project = _changed_project(tmp_path)
    (project / "pipelines/q").mkdir()
    (project / "pipelines/q/pipeline.yaml").write_text("name: q\n")
    (project / "pipelines/q/program.sql").write_text("CREATE TABLE x (id INT);\n")
    several = reconcile(project, "plan", "-s", "c", expect=1)
    assert "--select chooses objects of one pipeline: add --pipeline (p, q)" in several
    new = reconcile(project, "plan", "-p", "q", "-s", "x", expect=1)
    assert "pipeline 'q' is not deployed yet" in new
    assert _changed(_plan(project, "-p", "p", "-s", "c")) == {"c"}
