"""Second round of attacks on the Action: git obeying the pull request's files, and every
guard reading what the default branch says (issue 30, items 1 to 4 and 7's URL schemes).

Each runs through `reconcile github` (fake GitHub on loopback, moto, real git checkouts)
and shows the attack refused with one line, nothing applied, nothing run.
"""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

import reconciler.github.trusted as trusted
from reconciler.desired.model.program import Program, build_program
from tests.fake_github import FakeGitHub
from tests.github_harness import (
    PR,
    Workspace,
    approve,
    assert_reject_refuses_the_apply,
    deploy,
    git,
    only_sticky,
)
from tests.projects import apply_seed_modification


def edit_yaml(path: Path, **changes: Any) -> None:
    document = yaml.safe_load(path.read_text())
    document.update(changes)
    path.write_text(yaml.safe_dump(document))


def plant_repository(folder: Path, marker: Path) -> None:
    """`HEAD`, `config`, `objects/`, `refs/`: git takes `folder` for a repository and obeys
    its config, whose fsmonitor writes its environment to `marker`."""
    (folder / "objects").mkdir(parents=True, exist_ok=True)
    (folder / "refs").mkdir(exist_ok=True)
    (folder / "objects/.keep").write_text("")
    (folder / "refs/.keep").write_text("")
    (folder / "HEAD").write_text("ref: refs/heads/main\n")
    (folder / "config").write_text(
        "[core]\n\trepositoryformatversion = 0\n\tbare = false\n\tworktree = .\n"
        f"\tfsmonitor = \"sh -c 'env > {marker}; echo'\"\n")


# -- 1: a folder that git takes for a repository runs nothing ------------------------------


def test_a_planted_repository_runs_no_command(workspace: Workspace, github: FakeGitHub,
                                             tmp_path: Path) -> None:
    marker = tmp_path / "fsmonitor-ran"
    plant_repository(workspace.project, marker)
    apply_seed_modification(workspace.project)
    sha = workspace.commit("a folder git takes for a repository")
    # The attack is live: plain git obeys the planted config (then the marker is removed).
    subprocess.run(["git", "-C", str(workspace.project), "status"], capture_output=True,
                   check=False)
    assert marker.exists()
    marker.unlink()

    planned = workspace.pull_request("opened", sha)

    assert planned.exit_code == 1 and planned.outputs["result"] == "failed", planned.log
    assert "looks like a bare git repository" in only_sticky(github)["body"]
    assert "plan-id" not in planned.outputs

    refused, _ = workspace.comment("alice", "/reconcile apply 0123456789ab")

    assert refused.exit_code == 1
    assert not marker.exists()
    assert workspace.manifest() is None


# -- 2: policies are read at the trusted tree's own paths ----------------------------------


def test_moving_the_pipelines_folder_does_not_lift_a_reject_policy(
        workspace: Workspace, github: FakeGitHub, spark: Any) -> None:
    spec = workspace.project / "pipelines/grades/pipeline.yaml"
    edit_yaml(spec, bootstrap_policy="reject")
    workspace.base_sha = workspace.commit("reject on the default branch")
    deploy(workspace)
    git(workspace.root, "mv", "grades/pipelines", "grades/pl2")
    edit_yaml(workspace.project / "reconcile.yaml", pipelines="pl2")
    edit_yaml(workspace.project / "pl2/grades/pipeline.yaml", bootstrap_policy="allow")
    sql = workspace.project / "pl2/grades/program.sql"
    sql.write_text(sql.read_text().replace("avg(grade)", "max(grade)"))
    sha = workspace.commit("move the folder, allow, change a view")

    assert workspace.pull_request("opened", sha).exit_code == 0
    body = only_sticky(github)["body"]
    assert "moves the pipelines folder from pipelines (the main branch) to pl2" in body
    assert "sets bootstrap_policy to allow; the Action uses reject (the main branch)" in body

    assert_reject_refuses_the_apply(workspace)


def test_a_pipeline_the_default_branch_does_not_have_gets_the_strictest_policy(
        workspace: Workspace, github: FakeGitHub, spark: Any) -> None:
    """Deployed from a laptop, unknown to `main`: its state is not rebuilt from a PR."""
    settings = workspace.project / "reconcile.yaml"
    edit_yaml(settings, pipelines="elsewhere")
    (workspace.project / "elsewhere").mkdir()
    (workspace.project / "elsewhere/README").write_text("no pipelines here yet\n")
    workspace.base_sha = workspace.commit("main knows no pipeline")
    edit_yaml(settings, pipelines="pipelines")
    deploy(workspace)
    apply_seed_modification(workspace.project)
    sha = workspace.commit("change the deployed pipeline")

    assert workspace.pull_request("opened", sha).exit_code == 0
    body = only_sticky(github)["body"]
    assert "the Action uses reject (the strictest: main has no " \
           "elsewhere/grades/pipeline.yaml" in body

    assert_reject_refuses_the_apply(workspace)


# -- 4: trusted settings come from the default branch, not the base a writer chose ----------


def test_a_pull_request_into_another_branch_is_planned_under_main_and_never_applied(
        workspace: Workspace, github: FakeGitHub, tmp_path: Path) -> None:
    victim = tmp_path / "victim"
    victim.mkdir()
    edit_yaml(workspace.project / "reconcile.yaml", storage=str(victim), spark={
        "master": "local[2]",
        "conf": {"spark.sql.shuffle.partitions": 3}})
    release = workspace.commit("a branch a writer pushed")
    github.state.branches["release"] = release
    pull = github.add_pull(PR, release, base_sha=release)
    pull["base"]["ref"] = "release"
    apply_seed_modification(workspace.project)
    sha = workspace.commit("the change")

    planned = workspace.pull_request("opened", sha)

    assert planned.exit_code == 0, planned.log
    body = only_sticky(github)["body"]
    assert f"sets storage to {victim}; the Action uses .reconcile/data (the main branch)" in body
    assert "targets release, not main" in body

    run, _ = approve(workspace, "alice")

    assert run.exit_code == 1 and run.outputs["result"] == "refused"
    assert "targets `release`, not `main`" in run.outputs["failure-reason"]
    assert workspace.manifest() is None
    assert list(victim.iterdir()) == []


def test_the_default_branch_settings_pass_the_same_allow_list(
        workspace: Workspace, github: FakeGitHub) -> None:
    """A writer who can push to `main` still cannot give Spark a Java agent through it."""
    edit_yaml(workspace.project / "reconcile.yaml", spark={
        "conf": {"spark.driver.extraJavaOptions": "-javaagent:/tmp/agent.jar"}})
    workspace.base_sha = workspace.commit("a Java agent on main")
    edit_yaml(workspace.project / "reconcile.yaml", spark={"master": "local[2]"})
    apply_seed_modification(workspace.project)
    sha = workspace.commit("a clean head")

    planned = workspace.pull_request("opened", sha)

    assert planned.exit_code == 1
    reason = planned.outputs["failure-reason"]
    assert reason.startswith("main:grades/reconcile.yaml:")
    assert "spark.conf key 'spark.driver.extraJavaOptions' is not allowed" in reason


# -- 7: URL schemes are compared case-insensitively ----------------------------------------


def test_an_upper_case_file_backend_inside_the_checkout_is_refused(
        workspace: Workspace, github: FakeGitHub) -> None:
    edit_yaml(workspace.project / "reconcile.yaml", backend="FILE://.reconcile/state")
    workspace.base_sha = workspace.commit("FILE:// on main")
    assert workspace.pull_request("opened").exit_code == 0

    run, _ = approve(workspace, "alice")

    assert run.exit_code == 1
    assert "state backend is a folder inside the checkout" in run.outputs["failure-reason"]
    state = workspace.project / ".reconcile/state"
    assert not (state / "grades/manifest.json").exists()


@pytest.mark.spark
def test_the_plan_reuses_the_analysis_memo_of_the_trusted_backend(
        workspace: Workspace, monkeypatch: pytest.MonkeyPatch) -> None:
    """State on S3 is written by applies only: the pull request's plan analyses the one view
    it edits and takes the others' analysis from the manifest's memo."""
    deploy(workspace)
    sql = workspace.project / "pipelines/grades/program.sql"
    sql.write_text(sql.read_text().replace("name as student_name,", "upper(name) as student_name,"))
    built: list[Program] = []

    def recording(*args: Any) -> Program:
        built.append(build_program(*args))
        return built[-1]

    monkeypatch.setattr(trusted, "build_program", recording)
    run = workspace.pull_request("opened", workspace.commit("one view edited"))
    assert run.exit_code == 0, run.log
    [program] = built
    assert program.analysis is not None
    assert (program.analysis.reused, program.analysis.analysed) == (len(program.views) - 1, 1)
