"""A pipeline's end, through the real CLI: pipelines whose folder is gone are listed by
`plan` and `status`, `destroy` removes a pipeline's data and state (and nothing outside
its storage folder), `state rm` forgets objects so the next plan adds them again; and the
backends' `delete_state`, on a local folder and on moto's S3 server."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import boto3
import pytest

from state_backends import LocalBackend, LockMismatchError, StateBackend
from state_backends.s3 import S3Backend
from tests.cli_helpers import dead_pid, in_storage, manifest, reconcile
from tests.projects import write_files

PIPELINE = """
    name: {name}
    bootstrap_policy: {policy}
    connectors:
      - name: events_in
        table: events
        type: files
        format: json
        path: input/{name}
    """
SQL = """
    CREATE TABLE events (id INT, amount INT);
    CREATE MATERIALIZED VIEW totals AS SELECT id, SUM(amount) AS amount FROM events GROUP BY id;
    """


def project_of(root: Path, policy: str = "allow", settings: str = "") -> Path:
    """Two tiny pipelines, `keep` and `gone`, each a table fed from a json folder and a view."""
    files = {"reconcile.yaml": settings}
    for name in ("keep", "gone"):
        files[f"pipelines/{name}/pipeline.yaml"] = PIPELINE.format(name=name, policy=policy)
        files[f"pipelines/{name}/program.sql"] = SQL
        files[f"input/{name}/1.json"] = '{"id": 1, "amount": 2}\n'
    return write_files(root, files)


@pytest.fixture
def deployed(tmp_path: Path) -> Path:
    """The project applied and one step run (so tables have rows and checkpoints exist)."""
    project = project_of(tmp_path / "project")
    reconcile(project, "apply", "--auto-approve")
    reconcile(project, "run")
    return project


@pytest.mark.spark
def test_an_orphan_is_planned_listed_and_destroyed(deployed: Path) -> None:
    stored = manifest(deployed, "gone")
    folders = [in_storage(deployed, record["path"]) for record in stored["relations"].values()]
    checkpoint = in_storage(deployed, stored["connectors"]["events_in"]["checkpoint"])
    assert all(Path(folder, "_delta_log").is_dir() for folder in folders)
    assert Path(checkpoint).is_dir()
    shutil.rmtree(deployed / "pipelines/gone")

    text = reconcile(deployed, "plan")
    assert "Pipeline gone" in text and "not in the project" in text
    assert "reconcile destroy -p gone" in text
    document = json.loads(reconcile(deployed, "plan", "--json"))
    assert [p["name"] for p in document["pipelines"]] == ["keep"]
    assert [(o["name"], o["serial"], o["status"], o["hint"]) for o in document["orphaned"]] \
        == [("gone", stored["serial"], "Running", "reconcile destroy -p gone")]
    markdown = deployed / "plan.md"
    reconcile(deployed, "plan", "--markdown", str(markdown))
    assert "`reconcile destroy -p gone`" in markdown.read_text()

    asked = reconcile(deployed, "plan", "-p", "gone", expect=1)
    assert "is not in the project" in asked and "reconcile destroy -p gone" in asked

    status = reconcile(deployed, "status")
    assert "gone: Running" in status and "not in the project" in status
    reports = json.loads(reconcile(deployed, "status", "--json"))
    assert [(r["pipeline"], r["in_project"]) for r in reports] == [("keep", True),
                                                                    ("gone", False)]

    # With every folder gone, status still lists what the backend holds.
    shutil.move(deployed / "pipelines/keep", deployed / "keep-aside")
    assert [r["pipeline"] for r in json.loads(reconcile(deployed, "status", "--json"))] == [
        "gone", "keep"]
    shutil.move(deployed / "keep-aside", deployed / "pipelines/keep")

    refused = reconcile(deployed, "destroy", "-p", "gone", expect=1)  # off a terminal
    assert "--auto-approve" in refused and Path(folders[0]).is_dir()

    shown = reconcile(deployed, "destroy", "-p", "gone", "--auto-approve")
    assert "Destroy pipeline gone" in shown and "- table events" in shown
    assert "gone: destroyed" in shown
    assert not any(Path(folder).exists() for folder in folders)
    assert not Path(checkpoint).exists()
    assert not Path(in_storage(deployed, "gone")).exists()
    assert not (deployed / ".reconcile/state/gone").exists()
    assert json.loads(reconcile(deployed, "plan", "--json"))["orphaned"] == []
    assert "gone" not in reconcile(deployed, "status")
    # The other pipeline is untouched.
    assert manifest(deployed, "keep")["status"] == "Running"
    assert Path(in_storage(deployed, "keep/tables/events/_delta_log")).is_dir()
    again = reconcile(deployed, "destroy", "-p", "gone", "--auto-approve")  # a script's rerun
    assert again.strip() == f"gone: nothing to destroy (no committed state in {deployed}/" \
                            ".reconcile/state)"


@pytest.mark.spark
def test_destroying_a_pipeline_still_in_the_project_warns_and_json_is_one_object(
        deployed: Path) -> None:
    output = reconcile(deployed, "destroy", "-p", "keep", "--auto-approve", "--json")
    document = json.loads(output)
    assert document["result"] == "destroyed" and document["in_project"] is True
    assert "next `reconcile apply` deploys it again" in document["warnings"][0]
    assert {(r["kind"], r["name"]) for r in document["remove"]} >= {
        ("table", "events"), ("view", "totals"), ("connector", "events_in"), ("folder", "keep")}
    assert not Path(in_storage(deployed, "keep")).exists()
    plan = json.loads(reconcile(deployed, "plan", "--json", "-p", "keep"))
    assert plan["pipelines"][0]["base"] is None  # deployed again by the next apply


@pytest.mark.spark
def test_a_reject_policy_refuses_a_destroy(tmp_path: Path) -> None:
    project = project_of(tmp_path / "project")
    reconcile(project, "apply", "--auto-approve")
    spec = project / "pipelines/keep/pipeline.yaml"
    spec.write_text(spec.read_text().replace("allow", "reject"))
    output = reconcile(project, "destroy", "-p", "keep", "--auto-approve", expect=1)
    assert "bootstrap_policy 'reject'" in output
    assert manifest(project, "keep")["serial"] == 1
    # An orphan has no pipeline.yaml: only the flag holds it to `reject`.
    shutil.rmtree(project / "pipelines/gone")
    output = reconcile(project, "destroy", "-p", "gone", "--auto-approve",
                       "--bootstrap-policy", "reject", expect=1)
    assert "bootstrap_policy 'reject'" in output and manifest(project, "gone")["serial"] == 1


@pytest.mark.spark
def test_a_manifest_naming_a_path_outside_the_storage_folder_deletes_nothing(
        tmp_path: Path) -> None:
    project = project_of(tmp_path / "project")
    reconcile(project, "apply", "--auto-approve")
    victim = tmp_path / "victim"
    (victim / "_delta_log").mkdir(parents=True)
    state = project / ".reconcile/state/gone/manifest.json"
    document = json.loads(state.read_text())
    document["relations"]["events"]["path"] = str(victim)
    state.write_text(json.dumps(document))
    shutil.rmtree(project / "pipelines/gone")
    output = reconcile(project, "destroy", "-p", "gone", "--auto-approve", expect=1)
    assert "refusing" in output
    assert victim.is_dir()
    assert Path(in_storage(project, "gone/views/totals/_delta_log")).is_dir()
    assert state.exists() and not (project / ".reconcile/state/gone/lock").exists()


@pytest.mark.spark
def test_a_forged_lineage_drops_no_published_views(tmp_path: Path) -> None:
    """A destroy drops the catalog views of the manifest's lineage: one a writer of the state
    prefix gave another lineage (another project's, which its views show) is refused before
    anything goes, in one line saying how to destroy it without its views."""
    project = project_of(tmp_path / "project")
    spec = project / "pipelines/keep/pipeline.yaml"
    spec.write_text(spec.read_text() + "publish: {database: analytics}\n")
    reconcile(project, "apply", "--auto-approve")
    state = project / ".reconcile/state/keep/manifest.json"
    document = json.loads(state.read_text())
    document["lineage"] = "0c7e5a38-another-project"
    state.write_text(json.dumps(document))
    output = reconcile(project, "destroy", "-p", "keep", "--auto-approve", expect=1)
    assert "the manifest's lineage is not the one recorded in storage" in output
    assert "not dropping views in 'analytics'" in output and "remove `publish:`" in output
    assert manifest(project, "keep")["serial"] == 1
    assert Path(in_storage(project, "keep/views/totals/_delta_log")).is_dir()
    spec.write_text(spec.read_text().replace("publish: {database: analytics}\n", ""))
    output = reconcile(project, "destroy", "-p", "keep", "--auto-approve")
    assert "views in catalog database analytics (the manifest's lineage is not" in output
    assert not Path(in_storage(project, "keep")).exists()


@pytest.mark.spark
def test_state_rm_forgets_objects_and_the_next_plan_adds_them(deployed: Path) -> None:
    before = manifest(deployed, "keep")
    output = reconcile(deployed, "state", "rm", "-p", "keep", "view.totals")
    assert "forgot view totals" in output
    after = manifest(deployed, "keep")
    assert after["serial"] == before["serial"] + 1
    assert "totals" not in after["relations"] and "totals" not in after["program"]["views"]
    assert Path(in_storage(deployed, before["relations"]["totals"]["path"])).is_dir()
    plan = json.loads(reconcile(deployed, "plan", "--json", "-p", "keep"))
    assert plan["pipelines"][0]["diff"]["program_diff"]["added_views"] == ["totals"]

    # A table goes with its connectors; an unknown name is refused.
    output = reconcile(deployed, "state", "rm", "-p", "keep", "events")
    assert "forgot table events, connector events_in" in output
    assert manifest(deployed, "keep")["connectors"] == {}
    refused = reconcile(deployed, "state", "rm", "-p", "keep", "nope", expect=1)
    assert "not a table, view or connector" in refused


def _s3_backend(endpoint: str) -> S3Backend:
    bucket = "lifecycle"
    client = boto3.client("s3", endpoint_url=endpoint)
    if bucket not in [b["Name"] for b in client.list_buckets()["Buckets"]]:
        client.create_bucket(Bucket=bucket)
    return S3Backend(bucket, f"state-{id(client)}", client=client)


@pytest.fixture(params=["local", "s3"])
def backend(request: pytest.FixtureRequest, tmp_path: Path) -> StateBackend:
    if request.param == "local":
        return LocalBackend(tmp_path / "state")
    return _s3_backend(request.getfixturevalue("s3_endpoint"))


def test_backends_list_and_delete_a_pipelines_state(backend: StateBackend) -> None:
    backend.write_manifest("a", {"serial": 1}, None)
    version = backend.write_manifest("a", {"serial": 2}, backend.read_manifest("a").version)
    assert version
    backend.write_step_failure("a", {"at": "now", "reason": "x"})
    backend.write_manifest("b", {"serial": 1}, None)
    assert backend.list_pipelines() == ["a", "b"]
    lock = backend.acquire_lock("a", "destroy")
    with pytest.raises(LockMismatchError):
        backend.delete_state("a", "not-the-holder")
    assert backend.read_manifest("a") is not None
    backend.delete_state("a", lock.id)
    assert backend.list_pipelines() == ["b"]
    assert backend.read_manifest("a") is None and backend.read_lock("a") is None
    assert backend.list_history("a") == [] and backend.read_step_failure("a") is None
    assert backend.read_manifest("b") is not None
    # A pipeline of the same name starts afresh.
    backend.write_manifest("a", {"serial": 1}, None)
    assert backend.list_pipelines() == ["a", "b"]


@pytest.mark.spark
def test_an_interrupted_destroy_is_finished_by_running_it_again(
        deployed: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from reconciler.engine.delta.files import FileStore

    removed: list[str] = []
    remove_tree = FileStore.remove_tree

    def fail_after_one(store: FileStore, folder: str, dry_run: bool, done: object) -> None:
        if removed:
            raise OSError("the storage went away")
        removed.append(folder)
        remove_tree(store, folder, dry_run, done)

    monkeypatch.setattr(FileStore, "remove_tree", fail_after_one)
    output = reconcile(deployed, "destroy", "-p", "gone", "--auto-approve", expect=1)
    assert "the storage went away; run `reconcile destroy -p gone` again" in output
    monkeypatch.undo()
    # Half done: marked as being destroyed (no step runs on it), the lock released.
    stored = manifest(deployed, "gone")
    assert stored["status"] == "Failed" and "reconcile destroy -p gone" in \
        stored["status_details"]["error"]
    assert not (deployed / ".reconcile/state/gone/lock").exists()
    assert not Path(removed[0]).exists()
    assert "not Running" in reconcile(deployed, "run", "-p", "gone", expect=1)
    reconcile(deployed, "destroy", "-p", "gone", "--auto-approve")
    assert not Path(in_storage(deployed, "gone")).exists()
    assert not (deployed / ".reconcile/state/gone").exists()


def test_state_rm_tells_a_relation_from_a_connector_of_the_same_name(tmp_path: Path) -> None:
    project = write_files(tmp_path / "project", {"reconcile.yaml": "", "pipelines/.keep": ""})
    relation = {"kind": "table", "path": "p/tables/events", "version": 0, "schema": "{}"}
    program = {"tables": {"events": {}}, "views": {}, "order": ["events"],
               "connectors": {"events": {"relation": "events", "direction": "output"}}}
    LocalBackend(project / ".reconcile/state").write_manifest("p", {
        "format_version": 1, "pipeline": "p", "lineage": "l", "serial": 1,
        "status": "Running", "program": program, "relations": {"events": relation},
        "connectors": {"events": {}}}, None)
    refused = reconcile(project, "state", "rm", "-p", "p", "events", "--json", expect=1)
    assert "say table.events or connector.events" in refused and '"error":' in refused
    output = json.loads(reconcile(project, "state", "rm", "-p", "p", "table.events", "--json"))
    assert output == {"pipeline": "p", "serial": 2,
                      "forgotten": ["table events", "connector events"]}
    stored = manifest(project, "p")
    assert (stored["program"]["tables"], stored["program"]["connectors"],
            stored["program"]["order"], stored["relations"], stored["connectors"]) \
        == ({}, {}, [], {}, {})


def test_destroy_on_s3_removes_the_pipelines_objects_and_nothing_else(
        tmp_path: Path, s3_endpoint: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """State and data in moto's S3 (no Spark: a destroy reads the manifest alone)."""
    monkeypatch.setenv("AWS_ENDPOINT_URL", s3_endpoint)
    client = boto3.client("s3", endpoint_url=s3_endpoint)
    client.create_bucket(Bucket="doomed")
    project = write_files(tmp_path / "project", {
        "reconcile.yaml": "backend: s3://doomed/state\nstorage: s3a://doomed/data\n",
        "pipelines/.keep": ""})
    relation = {"kind": "table", "path": "p/tables/events", "version": 0, "schema": "{}"}
    program = {"tables": {"events": {}}, "views": {}, "order": ["events"], "connectors": {}}
    backend = S3Backend("doomed", "state", client=client)
    backend.write_manifest("p", {
        "format_version": 1, "pipeline": "p", "lineage": "l", "serial": 1,
        "status": "Running", "program": program, "relations": {"events": relation}}, None)
    backend.write_manifest("other", {
        "format_version": 1, "pipeline": "other", "lineage": "l", "serial": 1,
        "status": "Running", "program": program, "relations": {}}, None)
    for key in ("data/p/tables/events/_delta_log/00000000000000000000.json",
                "data/p/connectors/in/old/offsets/0", "data/other/tables/events/x.parquet",
                "data/pp/tables/events/x.parquet"):
        client.put_object(Bucket="doomed", Key=key, Body=b"{}")

    orphans = json.loads(reconcile(project, "plan", "--json"))["orphaned"]
    assert [o["name"] for o in orphans] == ["other", "p"]
    held = backend.acquire_lock("p", "apply", who="someone@elsewhere")
    locked = reconcile(project, "destroy", "-p", "p", "--auto-approve", "--lock-timeout", "0",
                       expect=1)
    assert "locked by someone@elsewhere" in locked
    assert backend.read_manifest("p") is not None
    backend.release_lock("p", held.id)
    document = json.loads(reconcile(project, "destroy", "-p", "p", "--auto-approve", "--json"))
    assert document["storage"] == "s3a://doomed/data/p" and document["result"] == "destroyed"
    keys = sorted(o["Key"] for o in client.list_objects_v2(Bucket="doomed")["Contents"]
                  if not o["Key"].endswith("/"))  # pyarrow keeps the parent's folder marker
    assert keys == ["data/other/tables/events/x.parquet", "data/pp/tables/events/x.parquet",
                    "state/other/history/1.json", "state/other/manifest.json"]


def test_a_lock_without_a_manifest_is_listed_with_the_command_that_frees_it(
        tmp_path: Path) -> None:
    """What a destroy stopped between its manifest and its lock leaves (no Spark here)."""
    project = write_files(tmp_path / "project", {"reconcile.yaml": "", "pipelines/.keep": ""})
    backend = LocalBackend(project / ".reconcile/state")
    backend.lock_lease = 3600  # not renewed here: it must not lapse during the test
    lock = backend.acquire_lock("ghost", "destroy")
    [orphan] = json.loads(reconcile(project, "plan", "--json"))["orphaned"]
    assert orphan["hint"] == f"reconcile state force-unlock {lock.id} -p ghost"
    assert orphan["error"] == "a lock and no manifest" and orphan["serial"] is None
    # A live holder (this process) is not removed; once its process is gone, destroy
    # finishes the stopped one's last step.
    assert "is locked by" in reconcile(project, "destroy", "-p", "ghost", "--auto-approve",
                                       "--lock-timeout", "0", expect=1)
    lock_file = project / ".reconcile/state/ghost/lock"
    lock_file.write_text(json.dumps({**lock.to_dict(), "pid": str(dead_pid())}))
    finished = reconcile(project, "destroy", "-p", "ghost", "--auto-approve", "--json")
    assert json.loads(finished[finished.index("{"):]) == {"pipeline": "ghost",
                                                          "result": "nothing to destroy"}
    assert "took over the lock" in finished and not lock_file.exists()
    assert backend.list_pipelines() == []


def test_a_symbolic_link_below_the_storage_root_is_not_followed(tmp_path: Path) -> None:
    """The default storage is in the project's checkout, where a commit can put a link."""
    project = write_files(tmp_path / "project", {"reconcile.yaml": "", "pipelines/.keep": ""})
    victim = tmp_path / "victim"
    (victim / "tables/events/_delta_log").mkdir(parents=True)
    (project / ".reconcile/data").mkdir(parents=True)
    (project / ".reconcile/data/p").symlink_to(victim)
    relation = {"kind": "table", "path": "p/tables/events", "version": 0, "schema": "{}"}
    LocalBackend(project / ".reconcile/state").write_manifest("p", {
        "format_version": 1, "pipeline": "p", "lineage": "l", "serial": 1,
        "status": "Running", "program": {"tables": {"events": {}}, "views": {}},
        "relations": {"events": relation}}, None)
    output = reconcile(project, "destroy", "-p", "p", "--auto-approve", expect=1)
    assert "is a symbolic link: refusing" in output
    assert (victim / "tables/events/_delta_log").is_dir()
    assert manifest(project, "p")["serial"] == 1


def test_on_a_terminal_destroy_asks_and_a_no_keeps_everything(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from click.testing import CliRunner

    from reconciler.cli.main import cli

    project = write_files(tmp_path / "project", {"reconcile.yaml": "", "pipelines/.keep": ""})
    folder = project / ".reconcile/data/p/tables/events/_delta_log"
    folder.mkdir(parents=True)
    relation = {"kind": "table", "path": "p/tables/events", "version": 0, "schema": "{}"}
    LocalBackend(project / ".reconcile/state").write_manifest("p", {
        "format_version": 1, "pipeline": "p", "lineage": "l", "serial": 1,
        "status": "Running", "program": {"tables": {"events": {}}, "views": {}},
        "relations": {"events": relation}}, None)
    monkeypatch.setattr("reconciler.cli.destroy._on_terminal", lambda: True)
    args = ["-C", str(project), "destroy", "-p", "p"]
    result = CliRunner().invoke(cli, args, input="n\n", catch_exceptions=False)
    assert result.exit_code == 0 and "Destroy 'p' and delete its data?" in result.output
    assert "p: destroy cancelled" in result.output and folder.is_dir()
    assert manifest(project, "p")["serial"] == 1
    result = CliRunner().invoke(cli, args, input="y\n", catch_exceptions=False)
    assert result.exit_code == 0 and "p: destroyed" in result.output
    assert not (project / ".reconcile/data/p").exists()
