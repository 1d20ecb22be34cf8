"""Connector options in the plan, and options that would delete or move input files.

Every option of a new or changed connector is shown (secret-looking values hashed, in
the JSON, on the terminal and in the Markdown); `cleanSource` (but `off`) and
`sourceArchiveDir` are refused by plan, apply and run unless reconcile.yaml sets
`allow_file_cleanup: true`; options that name a location are refused always. No test
here starts Spark: every refusal comes before it.
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from reconciler.desired.settings.project import settings_summary
from reconciler.desired.workspace import load_programs
from reconciler.plan.planner import plan_project
from reconciler.state.manifest import Manifest
from reconciler.support.errors import ReconcileError
from state_backends import LocalBackend
from tests.cli_helpers import reconcile
from tests.projects import program_of, write_files

SECRET = "hunter2-do-not-print"
SQL = "create table t (id bigint, v int);\n"
SPEC = """\
name: p
bootstrap_policy: allow
connectors:
  - name: src
    table: t
    type: files
    format: json
    path: input
    options:
"""


def project_with(root: Path, options: str, settings: str = "") -> Path:
    """Pipeline `p` with one json input `src` whose options are the given YAML lines, and
    one input file that must survive every refused command."""
    write_files(root, {"reconcile.yaml": settings, "pipelines/p/program.sql": SQL,
                       "input/part-1.json": '{"id": 1, "v": 2}\n'})
    spec = root / "pipelines/p/pipeline.yaml"
    spec.write_text(SPEC + "".join(f"      {line}\n" for line in options.splitlines()))
    return root


def commit(project: Path) -> None:
    """Record the pipeline's current program as its committed manifest (no Spark)."""
    settings = settings_summary(load_programs(project)[0].settings)
    manifest = Manifest.first("p", program_of(project).document(), settings=settings)
    LocalBackend(project / ".reconcile/state").write_manifest("p", manifest.to_document(), None)


def connector_action(plan_json: str) -> dict:
    [pipeline] = json.loads(plan_json)["pipelines"]
    return next(a for a in pipeline["actions"] if a["name"] == "src")


def test_plan_shows_a_new_connectors_options(tmp_path: Path) -> None:
    project = project_with(tmp_path, "multiLine: true\nmaxFilesPerTrigger: 3\n"
                                     "timestampFormat: \"yyyy-MM-dd'T'HH:mm\"\n")
    markdown = tmp_path / "plan.md"
    terminal = reconcile(project, "plan", "--markdown", str(markdown))
    as_json = reconcile(project, "plan", "--json")

    options = connector_action(as_json)["options"]
    assert options["multiLine"] == "true" and options["maxFilesPerTrigger"] == "3"
    assert options["timestampFormat"] == "yyyy-MM-dd'T'HH:mm"
    assert "option multiLine = true" in terminal
    text = markdown.read_text()
    assert "```text\n+ input connector src: maxFilesPerTrigger = 3\n" in text


def test_markdown_keeps_an_option_value_inert(tmp_path: Path) -> None:
    """A value cannot close the code block, start a table row, hide the rest of the comment
    (`<!--`) or carry a URL's credentials into a link."""
    value = r'"a | <!-- ``` [x](https://user:pw@host/f?sig=abc)\n``` end"'
    project = project_with(tmp_path, f"timestampFormat: {value}\n")
    markdown = tmp_path / "plan.md"
    reconcile(project, "plan", "--markdown", str(markdown))
    text = markdown.read_text()
    [line] = [line for line in text.splitlines() if "src: timestampFormat =" in line]
    assert line.startswith("+ input connector src: timestampFormat = a | <!-- ``` "
                           "[x](https://host/f")
    assert "\\n``` end" in line, "the line break is shown, not kept"
    assert "pw@" not in text and "sig=abc" not in text
    block = text.split("```text\n", 1)[1]
    assert block.index(line) < block.index("\n```\n"), "the value stays inside the block"


def test_a_modified_option_shows_old_and_new(tmp_path: Path) -> None:
    """A manifest deployed before options were held to an allow-list (`client_options`) may
    hold one now refused: the plan shows it going, its secret-looking value hashed."""
    project = project_with(tmp_path, "multiLine: true\n")
    commit(project)
    stored = project / ".reconcile/state/p/manifest.json"
    document = json.loads(stored.read_text())
    document["program"]["connectors"]["src"]["options"]["fs.s3a.secret.key"] = SECRET
    stored.write_text(json.dumps(document))
    spec = project / "pipelines/p/pipeline.yaml"
    spec.write_text(spec.read_text().replace("multiLine: true", "multiLine: false"))
    terminal = reconcile(project, "plan")
    as_json = reconcile(project, "plan", "--json")

    action = connector_action(as_json)
    assert action["action"] == "reset"
    changed = action["options_changed"]
    assert changed["multiLine"] == {"old": "true", "new": "false"}
    assert changed["fs.s3a.secret.key"]["old"].startswith("sha256:")
    assert action["options"]["multiLine"] == "false"
    assert "option multiLine: true -> false" in terminal
    assert SECRET not in terminal and SECRET not in as_json, "nor in the deepdiff report"


def test_a_throughput_option_change_is_shown_but_resets_nothing(tmp_path: Path) -> None:
    project = project_with(tmp_path, "maxFilesPerTrigger: 3\n")
    commit(project)
    spec = project / "pipelines/p/pipeline.yaml"
    spec.write_text(spec.read_text().replace("maxFilesPerTrigger: 3", "maxFilesPerTrigger: 30"))
    [pipeline] = json.loads(reconcile(project, "plan", "--json"))["pipelines"]
    action = next(a for a in pipeline["actions"] if a["name"] == "src")
    assert pipeline["has_changes"] is True and action["action"] == "keep"
    assert action["options_changed"] == {"maxFilesPerTrigger": {"old": "3", "new": "30"}}
    assert "option maxFilesPerTrigger: 3 -> 30" in reconcile(project, "plan")


CLEANUP = [
    pytest.param("multiLine: true\ncleanSource: delete\n", 11, id="cleanSource-delete"),
    pytest.param("CLEANSOURCE: Delete\n", 10, id="case-insensitive"),
    pytest.param("cleanSource: archive\nsourceArchiveDir: /tmp/archive\n", 10, id="archive"),
    pytest.param("sourceArchiveDir: /tmp/archive\n", 10, id="sourceArchiveDir"),
]


def assert_refused(output: str, line: int) -> None:
    assert output.count("\n") == 1, output
    assert f"pipelines/p/pipeline.yaml:{line}: connector 'src': option " in output
    assert "allowed only when reconcile.yaml sets allow_file_cleanup: true" in output


@pytest.mark.parametrize(("options", "line"), CLEANUP)
def test_options_that_delete_or_move_input_are_refused(tmp_path: Path, options: str,
                                                      line: int) -> None:
    project = project_with(tmp_path, options)
    assert_refused(reconcile(project, "plan", expect=1), line)
    assert_refused(reconcile(project, "apply", "--auto-approve", expect=1), line)
    assert (project / "input/part-1.json").exists()
    assert not (project / ".reconcile/state/p").exists(), "nothing was deployed"


@pytest.mark.parametrize("value", ["off", "'off'", "OFF"])
def test_clean_source_off_is_allowed(tmp_path: Path, value: str) -> None:
    reconcile(project_with(tmp_path, f"cleanSource: {value}\n"), "plan")


def test_allow_file_cleanup_lets_the_plan_show_the_option(tmp_path: Path) -> None:
    project = project_with(tmp_path, "cleanSource: delete\n", "allow_file_cleanup: true\n")
    [pipeline] = json.loads(reconcile(project, "plan", "--json"))["pipelines"]
    action = next(a for a in pipeline["actions"] if a["name"] == "src")
    assert action["options"] == {"cleanSource": "delete"}
    assert pipeline["settings"]["allow_file_cleanup"] == "True"
    assert "option cleanSource = delete" in reconcile(project, "plan")


def test_the_check_uses_the_settings_in_force(tmp_path: Path) -> None:
    """The Action loads the pull request's pipelines, then plans them under the default
    branch's settings: the head's `allow_file_cleanup: true` does not count."""
    project_with(tmp_path, "cleanSource: delete\n", "allow_file_cleanup: true\n")
    project, programs = load_programs(tmp_path)
    trusted = replace(project, settings=project.settings.model_copy(
        update={"allow_file_cleanup": False}))
    with pytest.raises(ReconcileError, match="allow_file_cleanup"):
        plan_project(trusted, programs)


def test_run_refuses_a_committed_cleanup_option_once_withdrawn(tmp_path: Path) -> None:
    project = project_with(tmp_path, "cleanSource: delete\n", "allow_file_cleanup: true\n")
    commit(project)
    (project / "reconcile.yaml").write_text("allow_file_cleanup: false\n")
    output = reconcile(project, "run", expect=1)
    assert "pipeline 'p', connector 'src': option 'cleanSource: delete'" in output
    assert (project / "input/part-1.json").exists()


@pytest.mark.parametrize("key", ["path", "Paths", "checkpointLocation"])
def test_location_options_are_refused_always(tmp_path: Path, key: str) -> None:
    project = project_with(tmp_path, f"multiLine: true\n{key}: /elsewhere\n",
                           "allow_file_cleanup: true\n")
    output = reconcile(project, "plan", expect=1)
    assert f"pipelines/p/pipeline.yaml:11: connector 'src': option '{key}' is not allowed" \
        in output
