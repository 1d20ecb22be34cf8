"""What resets a connector, and a reset that would append again what its table keeps
(issue 78, finding 5), through `reconcile plan` and `reconcile apply`.

The committed manifest is written as an apply writes it (`Manifest.first`, no Spark): a
refused apply stops before the engine. What the plan says comes from `ConnectorSpec`'s
roles (`desired.settings.connector_roles`), the one list of identity and handling fields.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from reconciler.desired.model.committed import check_committed_program
from reconciler.desired.model.connectors import CONNECTOR_KEYS, HANDLING_KEYS
from reconciler.desired.settings.connector_roles import (
    OPTION_DOCS,
    handling_fields,
    roles_of,
    roles_table,
)
from reconciler.desired.settings.project import ConnectorSpec, load_project, settings_summary
from reconciler.state.manifest import Manifest
from state_backends import LocalBackend
from tests.cli_helpers import reconcile
from tests.projects import program_of, write_files

DOCS = Path(__file__).resolve().parents[2] / "docs"

SQL = """
create table t (id bigint, v int);
create view totals as select id, sum(v) as s from t group by id;
"""
FILES = "{name: src, table: t, type: files, format: json, path: in"
KAFKA = ("{name: src, table: t, type: kafka, format: json, bootstrap_servers: 'b1:9092', "
         "topic: orders")


def deployed(root: Path, connector: str, *, document: dict[str, Any] | None = None) -> Path:
    """A project whose manifest commits `connector` (one line of YAML flow, closed here) or,
    as stored, `document`'s connector entry."""
    write_files(root, {"pipelines/p/program.sql": SQL, "pipelines/p/pipeline.yaml":
                       f"name: p\nbootstrap_policy: allow\nconnectors:\n  - {connector}}}\n"})
    (root / "in").mkdir(exist_ok=True)
    program = program_of(root).document()
    if document is not None:
        program["connectors"]["src"] = document
    manifest = Manifest.first("p", program,
                              settings=settings_summary(load_project(root).settings))
    LocalBackend(root / ".reconcile/state").write_manifest("p", manifest.to_document(), None)
    return root


def edit(root: Path, connector: str, sql: str = SQL) -> None:
    write_files(root, {"pipelines/p/program.sql": sql, "pipelines/p/pipeline.yaml":
                       f"name: p\nbootstrap_policy: allow\nconnectors:\n  - {connector}}}\n"})


def planned(root: Path) -> dict[str, Any]:
    [pipeline] = json.loads(reconcile(root, "plan", "--json"))["pipelines"]
    return dict(pipeline)


def action(pipeline: dict[str, Any], name: str = "src") -> tuple[str, list[str]]:
    [found] = [a for a in pipeline["actions"] if a["name"] == name]
    return found["action"], found["reasons"]


# -- the one list -----------------------------------------------------------------------------

def test_every_connector_field_has_one_role_and_handling_is_what_leaves_the_reading_alone(
        ) -> None:
    roles = roles_of(ConnectorSpec)  # raises for a field without exactly one role
    assert set(roles) == set(ConnectorSpec.model_fields)
    assert set(HANDLING_KEYS) == {"throughput_options", "on_error", "on_bad_input", "on_reset",
                                  "snapshot_on_bootstrap", "env_options"}
    assert {key for key, found in CONNECTOR_KEYS.items() if found.kind == "identity"} == {
        "direction", "relation", "type", "format", "path", "options", "changes", "kafka"}


def test_the_docs_show_the_list_as_declared() -> None:
    assert roles_table(ConnectorSpec) in (DOCS / "modifications.md").read_text()
    kafka = (DOCS / "kafka.md").read_text().split("## What the plan counts as a modification")[1]
    section = kafka.split("\n## ")[0]
    for name in [*OPTION_DOCS["kafka"], "on_error", "on_bad_input", "env_options",
                 "on_reset"]:
        assert f"`{name.removesuffix('*')}" in section, name
    assert set(handling_fields(CONNECTOR_KEYS)) == {
        "on_error", "on_bad_input", "on_reset", "snapshot_on_bootstrap", "env_options"}


@pytest.mark.parametrize(("before", "after", "said"), [
    ("", ", on_error: quarantine", "on_error fail -> quarantine"),
    (", on_error: quarantine", "", "on_error quarantine -> fail"),
    ("", ", on_bad_input: skip", "on_bad_input fail -> skip"),
    ("", ", on_reset: reread", "on_reset refuse -> reread"),
    (", options: {maxFilesPerTrigger: 5}", ", options: {maxFilesPerTrigger: 50}",
     "options changed: maxFilesPerTrigger"),
])
def test_a_handling_change_keeps_the_offsets(tmp_path: Path, before: str, after: str,
                                             said: str) -> None:
    root = deployed(tmp_path, FILES + before)
    edit(root, FILES + after)
    pipeline = planned(root)
    assert action(pipeline) == ("keep", [f"{said}; offsets kept"])
    assert f"connector src: {said}, no reset" in pipeline["notes"]
    assert pipeline["diff"]["modified_input_connectors"] == []
    assert pipeline["has_changes"] and not pipeline["refusals"]


@pytest.mark.parametrize("change", [
    ", options: {maxOffsetsPerTrigger: 10, kafka.request.timeout.ms: 5000}",
    ", options: {startingOffsets: latest, failOnDataLoss: false, minPartitions: 4}",
    ", env_options: {kafka.sasl.jaas.config: KAFKA_JAAS}",
])
def test_kafka_bounds_and_client_settings_keep_the_offsets(tmp_path: Path, change: str) -> None:
    root = deployed(tmp_path, KAFKA)
    edit(root, KAFKA + change)
    assert action(planned(root))[0] == "keep"


# -- committed manifests of an earlier shape ----------------------------------------------------

OLD_ENTRY = {  # as the previous version stored it: `on_error` among the definition's keys,
    # `minPartitions` among the options that say what it reads, no `on_reset`
    "direction": "input", "relation": "t", "type": "kafka", "format": "json",
    "path": "kafka://b1:9092/orders", "options": {"minPartitions": 4}, "on_error": "fail",
    "kafka": {"bootstrap_servers": "b1:9092", "topics": ["orders"]},
    "throughput_options": {"maxOffsetsPerTrigger": 100}}


def test_a_manifest_of_the_earlier_shape_reads_as_the_same_connector(tmp_path: Path) -> None:
    spec = KAFKA + ", options: {minPartitions: 4, maxOffsetsPerTrigger: 100}"
    root = deployed(tmp_path, spec, document=OLD_ENTRY)
    stored = json.loads((root / ".reconcile/state/p/manifest.json").read_text())
    assert stored["program"]["connectors"]["src"] == OLD_ENTRY
    check_committed_program("p", stored["program"], "manifest.json")  # not refused
    pipeline = planned(root)
    assert not pipeline["has_changes"] and action(pipeline) == ("keep", [])

    edit(root, spec + ", on_error: quarantine")  # the held step's advice
    pipeline = planned(root)
    assert action(pipeline) == ("keep", ["on_error fail -> quarantine; offsets kept"])
    assert pipeline["diff"]["modified_input_connectors"] == [] and not pipeline["refusals"]


def test_an_earlier_manifest_with_quarantine_stored_keeps_its_offsets_going_back(
        tmp_path: Path) -> None:
    root = deployed(tmp_path, FILES + ", on_error: quarantine", document={
        "direction": "input", "relation": "t", "type": "files", "format": "json",
        "path": "in", "options": {}, "on_error": "quarantine", "throughput_options": {}})
    edit(root, FILES)
    assert action(planned(root)) == ("keep", ["on_error quarantine -> fail; offsets kept"])


# -- a reset that would read again what its table keeps ----------------------------------------

@pytest.mark.parametrize(("before", "after"), [
    (FILES, FILES.replace("format: json", "format: csv")),
    (FILES, FILES + ", options: {multiLine: true}"),
    (FILES, FILES.replace("path: in", "path: ./in/")),
    (FILES.replace("path: in", "path: in/2025"), FILES),
    (FILES.replace("type: files, format: json", "type: delta"),
     FILES.replace("type: files, format: json", "type: delta, changes: true")),
])
def test_a_files_or_delta_reset_over_the_same_input_is_refused(tmp_path: Path, before: str,
                                                              after: str) -> None:
    root = deployed(tmp_path, before)
    (root / "in/2025").mkdir()
    edit(root, after)
    pipeline = planned(root)
    assert action(pipeline)[0] == "reset"
    [refusal] = pipeline["refusals"]
    assert refusal.startswith("input connector src is reset and would read ")
    assert "again into table t, which keeps the rows read from there before" in refusal
    assert "on_reset: reread" in refusal and "--full-refresh" in refusal
    assert "startingOffsets" not in refusal
    assert "refused: input connector src is reset" in reconcile(root, "plan")
    applied = reconcile(root, "apply", "--auto-approve", expect=1)
    assert len(applied.strip().splitlines()) == 1 and refusal in applied, applied
    assert json.loads((root / ".reconcile/state/p/manifest.json").read_text())["serial"] == 1

    edit(root, after + ", on_reset: reread")  # the way out: knowingly
    pipeline = planned(root)
    assert not pipeline["refusals"]
    assert action(pipeline)[1][-1] == "on_reset: reread: what it read before is appended to " \
        "t again"


def test_a_reset_into_a_truncated_table_or_from_elsewhere_is_not_refused(tmp_path: Path) -> None:
    root = deployed(tmp_path, FILES)
    edit(root, FILES.replace("format: json", "format: csv"),
         SQL.replace("v int", "v string"))  # not a widening: t is truncated
    pipeline = planned(root)
    assert action(pipeline, "t")[0] == "truncate" and not pipeline["refusals"]
    (root / "in2").mkdir()
    edit(root, FILES.replace("path: in", "path: in2").replace("format: json", "format: csv"))
    pipeline = planned(root)
    assert action(pipeline)[0] == "reset" and not pipeline["refusals"]


def test_a_renamed_connector_over_the_same_input_is_refused(tmp_path: Path) -> None:
    root = deployed(tmp_path, FILES)
    edit(root, FILES.replace("name: src", "name: src2"))
    [refusal] = planned(root)["refusals"]
    assert refusal.startswith("new input connector src2 (replacing src) would read every "
                              "file of in again into table t")


@pytest.mark.parametrize("after", [
    KAFKA.replace("b1:9092", "b2:9092"),
    KAFKA.replace("topic: orders", "topic: [orders, returns]"),
    KAFKA.replace("topic: orders", "topic_pattern: 'ord.*'"),
])
def test_a_kafka_reset_over_a_topic_it_read_is_refused(tmp_path: Path, after: str) -> None:
    root = deployed(tmp_path, KAFKA)
    edit(root, after)
    pipeline = planned(root)
    [refusal] = pipeline["refusals"]
    assert "from the earliest offsets again into table t" in refusal
    assert "startingOffsets: latest" in refusal and "on_reset: reread" in refusal
    reconcile(root, "apply", "--auto-approve", expect=1)

    edit(root, after + ", options: {startingOffsets: latest}")  # start after what it holds
    pipeline = planned(root)
    assert not pipeline["refusals"]
    assert any(reason.endswith("from the latest offsets at the apply: what the topic holds "
                               "now is not read") for reason in action(pipeline)[1])


def test_a_kafka_reset_onto_other_topics_is_not_refused(tmp_path: Path) -> None:
    root = deployed(tmp_path, KAFKA)
    edit(root, KAFKA.replace("topic: orders", "topic: returns"))
    pipeline = planned(root)
    assert action(pipeline)[0] == "reset" and not pipeline["refusals"]
