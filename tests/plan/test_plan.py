"""The diff and the plan: Feldera's diff shape, actions with reasons, plan_id, CLI."""

from __future__ import annotations

import gc
import json
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from reconciler.cli.main import cli
from reconciler.desired.model.program import Program
from reconciler.desired.settings.project import load_project, settings_summary
from reconciler.plan.diff_summary import DiffSummary
from reconciler.plan.document import plan_pipeline
from reconciler.state.manifest import Manifest
from state_backends import LocalBackend
from tests.projects import (
    apply_seed_modification,
    copy_example,
    program_of,
    single_pipeline,
)

EMPTY_LISTS = {
    "added_input_connectors": [], "removed_input_connectors": [],
    "modified_input_connectors": [], "added_output_connectors": [],
    "removed_output_connectors": [], "modified_output_connectors": [],
}


def commit(project: Path, program: Program) -> None:
    """Record `program` as the pipeline's committed manifest in the project's backend."""
    backend = LocalBackend(project / ".reconcile/state")
    manifest = Manifest.first(program.pipeline, program.document(),
                              settings=settings_summary(load_project(project).settings))
    backend.write_manifest(program.pipeline, manifest.to_document(), None)


def diff_after(tmp_path: Path, before: str, after: str, spec_before: str = "name: p\n",
               spec_after: str | None = None) -> dict:
    old = program_of(single_pipeline(tmp_path / "old", before, spec_before))
    new = program_of(single_pipeline(tmp_path / "new", after, spec_after or spec_before))
    return plan_pipeline(new, Manifest.first("p", old.document()), "etag").planned().document()


def program_diff(**lists: list[str]) -> dict:
    keys = ["added_tables", "removed_tables", "modified_tables",
            "added_views", "removed_views", "modified_views"]
    return {key: lists.get(key, []) for key in sorted(keys)}


def test_seed_modification_gives_feldera_diff(tmp_path: Path) -> None:
    project = copy_example("grades", tmp_path)
    commit(project, program_of(project))
    apply_seed_modification(project)
    result = CliRunner().invoke(cli, ["-C", str(project), "plan", "--json"])
    assert result.exit_code == 0, result.output
    [pipeline] = json.loads(result.output)["pipelines"]
    assert pipeline["diff"] == {
        **EMPTY_LISTS,
        "program_diff": program_diff(added_views=["avg_grade_all_courses"],
                                     modified_views=["avg_grade", "avg_grade_enriched"]),
        "program_diff_error": None,
    }
    summary = DiffSummary.from_document(pipeline["diff"])  # what the plan carries, typed
    assert summary.document() == pipeline["diff"] and not summary.changes_connectors
    assert summary.relation_changes() == {"avg_grade_all_courses": "added",
                                          "avg_grade": "modified", "avg_grade_enriched": "modified"}
    reasons = {a["name"]: (a["action"], a["reasons"]) for a in pipeline["actions"]}
    assert reasons["avg_grade"] == ("recompute", ["query changed"])
    assert reasons["avg_grade_enriched"] == ("recompute", ["reads modified view avg_grade"])
    assert reasons["avg_grade_all_courses"][0] == "create"
    assert reasons["students"] == ("keep", [])
    assert pipeline["bootstrap_required"] is True


BASE = """
create table t (id bigint, v int);
create table u (id bigint, w int);
create view left_v as select id, v from t;
create view right_v as select id, w from u;
create view diamond as select l.id, l.v, r.w from left_v l join right_v r on l.id = r.id;
create view chain1 as select id, v from left_v;
create view chain2 as select id, v from chain1;
create view chain3 as select id, v from chain2;
create view chain4 as select id, count(*) as n from chain3 group by id;
"""


def test_cosmetic_only_change_is_no_change_with_note(tmp_path: Path) -> None:
    cosmetic = BASE.replace("create view chain2 as select id, v from chain1",
                            "-- a comment\nCREATE VIEW chain2 AS\n  SELECT ID, V FROM CHAIN1")
    plan = diff_after(tmp_path, BASE, cosmetic)
    assert plan["has_changes"] is False
    assert plan["diff"]["program_diff"] == program_diff()
    assert plan["notes"] == ["view chain2: comments or formatting only, nothing to recompute"]


def test_table_rename_keeps_state_and_readers(tmp_path: Path) -> None:
    renamed = BASE.replace("create table u ", "create table u2 ").replace("from u;", "from u2;")
    plan = diff_after(tmp_path, BASE, renamed)
    # Feldera's shape still lists a removal and an addition...
    assert plan["diff"]["program_diff"] == program_diff(added_tables=["u2"],
                                                        removed_tables=["u"])
    actions = {a["name"]: a for a in plan["actions"]}
    # ...but the table moves with its state, and its reader is not recomputed.
    assert actions["u2"]["action"] == "rename" and actions["u2"]["from"] == "u"
    assert "u" not in actions
    assert actions["right_v"]["action"] == "keep"
    assert "view right_v: reads renamed u2, nothing to recompute" in plan["notes"]
    assert plan["bootstrap_required"] is True


def test_rename_with_an_edit_is_named_in_pipeline_yaml(tmp_path: Path) -> None:
    edited = BASE.replace("create view chain2 as select id, v from chain1",
                          "create view chain2b as select id, v + 1 as v from chain1").replace(
        "from chain2;", "from chain2b;")
    plan = diff_after(tmp_path, BASE, edited, "name: p\n",
                      "name: p\nrenamed: {chain2: chain2b}\n")
    actions = {a["name"]: a for a in plan["actions"]}
    assert actions["chain2b"]["action"] == "rename"
    assert actions["chain2b"]["reasons"] == ["renamed from chain2", "and recompute: query changed"]
    assert actions["chain3"]["action"] == "recompute"  # it reads v, which changed
    assert actions["chain4"]["action"] == "keep"
    # Without `renamed`, an edited view under a new name is a drop and a create.
    plain = diff_after(tmp_path / "plain", BASE, edited)
    assert {a["name"]: a["action"] for a in plain["actions"]}["chain2b"] == "create"


def test_widened_column_modifies_only_its_readers(tmp_path: Path) -> None:
    plan = diff_after(tmp_path, BASE, BASE.replace("(id bigint, v int)", "(id bigint, v bigint)"))
    # chain4 reads only chain3's ids and rows, which a wider v does not change.
    assert plan["diff"]["program_diff"] == program_diff(
        modified_tables=["t"], modified_views=["chain1", "chain2", "chain3", "diamond", "left_v"])
    actions = {a["name"]: a for a in plan["actions"]}
    assert actions["t"]["action"] == "evolve"
    assert actions["t"]["reasons"][0] == "column v: INT -> BIGINT"
    assert actions["left_v"]["reasons"] == ["reads t.v: INT -> BIGINT"]
    assert actions["chain1"]["reasons"] == ["reads left_v.v, whose definition changed"]
    assert actions["chain4"]["action"] == "keep"


def test_truncated_table_modifies_every_downstream_view(tmp_path: Path) -> None:
    plan = diff_after(tmp_path, BASE, BASE.replace("(id bigint, v int)",
                                                   "(id bigint, v int not null)"))
    assert plan["diff"]["program_diff"] == program_diff(
        modified_tables=["t"],
        modified_views=["chain1", "chain2", "chain3", "chain4", "diamond", "left_v"])
    actions = {a["name"]: a for a in plan["actions"]}
    assert actions["t"]["action"] == "truncate"
    assert "cannot evolve in place: column v: NOT NULL added" in actions["t"]["reasons"]
    assert actions["left_v"]["reasons"] == ["reads truncated table t",
                                            "reads t.v: INT -> INT NOT NULL"]
    assert actions["chain4"]["reasons"] == ["reads reset view chain3"]


def test_column_added_to_a_view_modifies_only_its_readers(tmp_path: Path) -> None:
    plan = diff_after(tmp_path, BASE, BASE.replace("create view left_v as select id, v from t",
                                                   "create view left_v as select id, v, "
                                                   "v * 2 as v2 from t"))
    assert plan["diff"]["program_diff"] == program_diff(modified_views=["left_v"])


def test_deep_chain_change_leaves_siblings_unchanged(tmp_path: Path) -> None:
    plan = diff_after(tmp_path, BASE, BASE.replace("select id, v from chain1",
                                                   "select id, v + 1 as v from chain1"))
    assert plan["diff"]["program_diff"] == program_diff(modified_views=["chain2", "chain3"])
    kept = {a["name"] for a in plan["actions"] if a["action"] == "keep"}
    assert {"left_v", "right_v", "diamond", "chain1", "chain4", "t", "u"} <= kept


def test_diamond_top_change_reaches_the_join_once(tmp_path: Path) -> None:
    plan = diff_after(tmp_path, BASE, BASE.replace("select id, w from u", "select id, w * 2 as w "
                                                   "from u"))
    assert plan["diff"]["program_diff"] == program_diff(modified_views=["diamond", "right_v"])


CONNECTED = """
create table t (id bigint, v int);
create view v1 as select id, v from t;
create view v2 as select id, sum(v) as s from t group by id;
"""
CONNECTORS = """name: p
connectors:
  - {name: src, table: t, type: files, format: json, path: in, options: {maxFilesPerTrigger: 5}}
  - {name: out1, view: v1, type: files, format: json, path: out1}
  - {name: out2, view: v2, type: files, format: json, path: out2}
"""


def test_removing_a_view_with_output_connector(tmp_path: Path) -> None:
    after = CONNECTED.replace("create view v1 as select id, v from t;", "")
    spec_after = CONNECTORS.replace(
        "  - {name: out1, view: v1, type: files, format: json, path: out1}\n", "")
    plan = diff_after(tmp_path, CONNECTED, after, CONNECTORS, spec_after)
    assert plan["diff"]["program_diff"] == program_diff(removed_views=["v1"])
    assert plan["diff"]["removed_output_connectors"] == []
    drop = next(a for a in plan["actions"] if a["name"] == "out1")
    assert (drop["action"], drop["reasons"]) == ("drop", ["v1 removed"])


def test_connector_only_change_modifies_no_relation(tmp_path: Path) -> None:
    spec_after = CONNECTORS.replace("path: in,", "path: in2,")
    plan = diff_after(tmp_path, CONNECTED, CONNECTED, CONNECTORS, spec_after)
    assert plan["diff"]["program_diff"] == program_diff()
    assert plan["diff"]["modified_input_connectors"] == ["src"]
    assert plan["has_changes"] is True and plan["bootstrap_required"] is False
    reset = next(a for a in plan["actions"] if a["name"] == "src")
    assert reset["action"] == "reset"


def test_throughput_only_connector_change_is_a_note(tmp_path: Path) -> None:
    """Something to apply (the committed program is what `run` reads), but nothing to reset
    or recompute."""
    spec_after = CONNECTORS.replace("maxFilesPerTrigger: 5", "maxFilesPerTrigger: 50")
    plan = diff_after(tmp_path, CONNECTED, CONNECTED, CONNECTORS, spec_after)
    assert plan["has_changes"] is True and plan["bootstrap_required"] is False
    assert {a["action"] for a in plan["actions"]} == {"keep"}
    assert plan["notes"] == ["connector src: options changed: maxFilesPerTrigger, no reset"]
    keep = next(a for a in plan["actions"] if a["name"] == "src")
    assert keep["reasons"] == ["options changed: maxFilesPerTrigger; offsets kept"]


def test_new_output_connector_on_unchanged_view_gets_later_changes(tmp_path: Path) -> None:
    spec_after = CONNECTORS + "  - {name: out3, view: v2, type: delta, path: mirror}\n"
    plan = diff_after(tmp_path, CONNECTED, CONNECTED, CONNECTORS, spec_after)
    assert plan["diff"]["added_output_connectors"] == ["out3"]
    action = next(a for a in plan["actions"] if a["name"] == "out3")
    assert action["reasons"] == ["receives only later changes of unchanged v2",
                                 "writes delta at mirror"]


def test_non_materialized_table_refuses_bootstrap(tmp_path: Path) -> None:
    before = CONNECTED.replace("(id bigint, v int)", "(id bigint, v int) with ('materialized'="
                                                     "'false')")
    plan = diff_after(tmp_path, before, before.replace("sum(v)", "max(v)"))
    assert plan["refusals"] == [
        "table t has 'materialized'='false' but views v2 need its contents to bootstrap; "
        "make it materialized or reset the pipeline"]


def test_plan_id_is_stable_and_tracks_the_diff(tmp_path: Path) -> None:
    project = copy_example("grades", tmp_path)
    commit(project, program_of(project))
    runner = CliRunner()

    def plan_id() -> str:
        result = runner.invoke(cli, ["-C", str(project), "plan", "--json"])
        return json.loads(result.output)["plan_id"]

    unchanged = plan_id()
    assert plan_id() == unchanged
    apply_seed_modification(project)
    modified = plan_id()
    assert modified != unchanged and plan_id() == modified


def test_detailed_exitcode_and_saved_plan(tmp_path: Path) -> None:
    project = copy_example("grades", tmp_path)
    runner = CliRunner()
    out = tmp_path / "plan.json"
    result = runner.invoke(cli, ["-C", str(project), "plan", "--detailed-exitcode",
                                 "--out", str(out), "--markdown", str(tmp_path / "plan.md")])
    assert result.exit_code == 2, result.output
    assert "+ view avg_grade" in result.output
    markdown = (tmp_path / "plan.md").read_text()
    assert "```mermaid" in markdown and "<details>" in markdown
    shown = runner.invoke(cli, ["show", str(out)])
    assert shown.exit_code == 0 and "avg_grade_enriched" in shown.output
    commit(project, program_of(project))
    assert runner.invoke(cli, ["-C", str(project), "plan", "--detailed-exitcode"]).exit_code == 0


def test_edited_plan_file_is_refused(tmp_path: Path) -> None:
    project = copy_example("grades", tmp_path)
    out = tmp_path / "plan.json"
    CliRunner().invoke(cli, ["-C", str(project), "plan", "--out", str(out)])
    document = json.loads(out.read_text())
    document["pipelines"][0]["actions"] = []
    out.write_text(json.dumps(document))
    result = CliRunner().invoke(cli, ["show", str(out)])
    assert result.exit_code == 1
    assert "plan_id does not match" in result.output


def test_unknown_manifest_format_is_refused(tmp_path: Path) -> None:
    project = copy_example("grades", tmp_path)
    program = program_of(project)
    document = Manifest.first("grades", program.document()).to_document()
    document["format_version"] = 99
    LocalBackend(project / ".reconcile/state").write_manifest("grades", document, None)
    result = CliRunner().invoke(cli, ["-C", str(project), "plan"])
    assert result.exit_code == 1
    assert "manifest format 99 is not supported" in result.output


@pytest.mark.parametrize("args", [["plan"], ["validate"]])
def test_plan_and_validate_start_no_jvm(tmp_path: Path, args: list[str]) -> None:
    project = copy_example("grades", tmp_path)
    script = ("import sys\nfrom reconciler.cli.main import cli\n"
              "try:\n    cli(sys.argv[1:], standalone_mode=False)\nfinally:\n"
              "    assert 'pyspark' not in sys.modules and 'py4j' not in sys.modules\n")
    result = subprocess.run([sys.executable, "-c", script, "-C", str(project), *args],
                            capture_output=True, text=True, check=False)
    assert result.returncode == 0, result.stderr


def test_a_plan_leaves_the_garbage_collector_as_it_found_it(tmp_path: Path) -> None:
    """The collector is off while a plan is computed (`planner._no_collections`) and as it
    was after; only a process that ends with its command (the CLI's `main`) freezes what
    the plan made, so a test or a runner calling the CLI in its own process keeps
    collecting."""
    project = copy_example("grades", tmp_path)
    frozen = gc.get_freeze_count()
    assert CliRunner().invoke(cli, ["-C", str(project), "plan"]).exit_code == 0
    assert gc.isenabled() and gc.get_freeze_count() == frozen
    script = ("import gc, sys\nfrom reconciler.cli.main import main\nsys.argv[0] = 'reconcile'\n"
              "try:\n    main()\nfinally:\n    assert gc.isenabled() and gc.get_freeze_count()\n")
    result = subprocess.run([sys.executable, "-c", script, "-C", str(project), "plan"],
                            capture_output=True, text=True, check=False)
    assert result.returncode == 0, result.stderr


def test_apply_refuses_a_stale_plan(tmp_path: Path) -> None:
    """A saved plan is refused once the backend moved or the specs changed (no Spark needed:
    the checks run before any work)."""
    project = copy_example("grades", tmp_path)
    commit(project, program_of(project))
    apply_seed_modification(project)
    out = tmp_path / "plan.json"
    runner = CliRunner()
    assert runner.invoke(cli, ["-C", str(project), "plan", "--out", str(out)]).exit_code == 0

    sql = project / "pipelines/grades/program.sql"
    sql.write_text(sql.read_text() + "\ncreate view extra as select 1 as one;\n")
    changed = runner.invoke(cli, ["-C", str(project), "apply", str(out)])
    assert changed.exit_code == 1
    assert "stale plan for 'grades': the specs changed since it was made" in changed.output

    backend = LocalBackend(project / ".reconcile/state")
    stored = backend.read_manifest("grades")
    moved = Manifest.from_document(stored.document, "test").next()
    backend.write_manifest("grades", moved.to_document(), stored.version)
    result = runner.invoke(cli, ["-C", str(project), "apply", str(out)])
    assert result.exit_code == 1
    assert "stale plan for 'grades': it was made against serial 1, the backend is at 2" \
        in result.output


def test_settings_changes_are_named_and_change_the_plan_id(tmp_path: Path) -> None:
    project = copy_example("grades", tmp_path)
    commit(project, program_of(project))
    runner = CliRunner()
    before = json.loads(runner.invoke(cli, ["-C", str(project), "plan", "--json"]).output)
    assert before["pipelines"][0]["notes"] == []
    settings = project / "reconcile.yaml"
    settings.write_text(settings.read_text() + "  conf:\n    spark.sql.shuffle.partitions: 8\n"
                        "    spark.hadoop.fs.s3a.secret.key: hunter2\n")
    after = json.loads(runner.invoke(cli, ["-C", str(project), "plan", "--json"]).output)
    assert after["plan_id"] != before["plan_id"]
    [note] = after["pipelines"][0]["notes"]
    assert note.startswith("reconcile.yaml settings changed since the last apply: "
                           "spark.conf.spark.hadoop.fs.s3a.secret.key: (unset) -> sha256:")
    assert "spark.conf.spark.sql.shuffle.partitions: (unset) -> 8" in note
    assert "hunter2" not in json.dumps(after), "secret values must not be shown"




def test_where_a_pipeline_is_published_is_part_of_its_plan(tmp_path: Path) -> None:
    """`publish:` is in the plan document and a note, so plan_id changes with it: an approval
    of a plan never publishes into a database its reviewer did not see. A name in
    `publish.exclude` that is no relation of the program is an error at its line."""
    project = copy_example("grades", tmp_path)
    spec = project / "pipelines/grades/pipeline.yaml"
    original = spec.read_text()

    def plan() -> dict:
        result = CliRunner().invoke(cli, ["-C", str(project), "plan", "--json"])
        assert result.exit_code in (0, 2), result.output
        return json.loads(result.output)

    unpublished = plan()
    spec.write_text(original + "publish: {database: analytics, exclude: [students]}\n")
    published = plan()
    [pipeline] = published["pipelines"]
    assert pipeline["publish"] == {"database": "analytics", "exclude": ["students"]}
    assert ("publishes its materialized tables and views (except students) as views in "
            "catalog database 'analytics' after each commit") in pipeline["notes"]
    spec.write_text(original + "publish: {database: reports}\n")
    assert len({unpublished["plan_id"], published["plan_id"], plan()["plan_id"]}) == 3

    spec.write_text(original + "publish:\n  database: analytics\n  exclude: [nope]\n")
    result = CliRunner().invoke(cli, ["-C", str(project), "plan"])
    assert result.exit_code == 1
    assert "pipeline.yaml:9: publish.exclude: no table or view 'nope'" in result.output


def test_a_saved_plan_reads_back_as_written(tmp_path: Path) -> None:
    """A plan file is parsed into the plan object where it is read (`plan.artifact`): shown
    as JSON or Markdown again, it is what `plan` wrote, byte for byte."""
    project = copy_example("grades", tmp_path)
    out, markdown = tmp_path / "plan.json", tmp_path / "plan.md"
    runner = CliRunner()
    runner.invoke(cli, ["-C", str(project), "plan", "--out", str(out), "--markdown",
                        str(markdown)])
    assert runner.invoke(cli, ["show", "--format", "json", str(out)]).output == \
        out.read_text()
    assert runner.invoke(cli, ["show", "--format", "markdown", str(out)]).output == \
        markdown.read_text()
