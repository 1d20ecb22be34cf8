"""One pull request tries every route to the workflow's secrets; the canary never shows.

`reconcile github` runs with canary values as its GitHub token and AWS credentials
(given as inputs, as action.yml gives them). The pull request pushes one attack after
another (each a route of issue 30 or of the first security round), writers and
non-writers comment, and finally a writer applies a harmless change, so the
credentials are really used against moto. Then (issue 51) someone who can write only
the state bucket stores a view that reads the environment in the committed manifest,
which a step refuses, and the next pull request is planned over that manifest with its
data preview and its view tests. A pull request's Kafka connector names a listener of the
test's as its broker and asks Kafka's client for the AWS secret through config providers
(issue 78): refused at plan, and nothing ever connects. Then every comment, log line, output,
summary, file under the test's folder, object in the state bucket and environment
of every git process started is searched for the canaries: only the `::add-mask::`
lines that tell the runner to hide them may hold them.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import stat
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import boto3
import pytest
import yaml
from click.testing import CliRunner

from reconciler.cli.main import cli
from tests.fake_github import FakeGitHub
from tests.github_harness import PR, Run, Workspace, approve, only_sticky
from tests.projects import apply_seed_modification, program_of

CANARY_TOKEN = "ghs_CANARYtoken0000000000000000000000"
CANARY_SECRET = "CANARYsecret/aws+0000000000000000000000"
CANARY_SESSION = "CANARYsession0000000000000000000000"
CANARIES = (CANARY_TOKEN, CANARY_SECRET, CANARY_SESSION)
CREDENTIALS = {"aws_access_key_id": "AKIACANARYKEY0000000",
               "aws_secret_access_key": CANARY_SECRET, "aws_session_token": CANARY_SESSION}


@dataclass(frozen=True)
class Attack:
    """Files a push writes (relative to the project; None deletes) and the refusal shown."""

    name: str
    files: dict[str, str | None]
    refusal: str


def program(workspace: Workspace) -> str:
    return (workspace.project / "pipelines/grades/program.sql").read_text()


def attacks(workspace: Workspace, leak: Path, broker: int) -> list[Attack]:
    sql = program(workspace)
    spec = (workspace.project / "pipelines/grades/pipeline.yaml").read_text()
    settings = yaml.safe_load((workspace.project / "reconcile.yaml").read_text())

    def with_view(text: str) -> dict[str, str | None]:
        return {"pipelines/grades/program.sql": sql + "\n" + text + "\n"}

    def with_settings(**changes: Any) -> dict[str, str | None]:
        return {"reconcile.yaml": yaml.safe_dump({**settings, **changes})}

    fsmonitor = ("[core]\n\trepositoryformatversion = 0\n\tbare = false\n\tworktree = .\n"
                 f"\tfsmonitor = \"sh -c 'env > {leak}; echo'\"\n")
    return [
        Attack("a folder git takes for a repository (fsmonitor)",
               {"HEAD": "ref: refs/heads/main\n", "config": fsmonitor, "objects/.keep": "",
                "refs/.keep": ""}, "looks like a bare git repository"),
        Attack("reflect() reads the environment", with_view(
            "create view leak as select reflect('java.lang.System', 'getenv', "
            "'AWS_SECRET_ACCESS_KEY') as s from students;"), "function reflect() is not allowed"),
        Attack("${env:...} substitution", with_view(
            "create view leak as select '${env:AWS_SECRET_ACCESS_KEY}' as s from students;"),
            "is not allowed"),
        Attack("an escaped ${ (\\u0024{)", with_view(
            "create view leak as select '\\u0024{env:AWS_SECRET_ACCESS_KEY}' as s "
            "from students;"), "is not allowed"),
        Attack("${env:...} in a table's DEFAULT", with_view(
            "create table leak (s string default '${env:AWS_SECRET_ACCESS_KEY}');"),
            "is not allowed"),
        Attack("a template reaching Python internals", with_view(
            "-- {{ ''.__class__.__mro__[1].__subclasses__() }}"), "template error"),
        Attack("a template including /proc/self/environ", {
            "pipelines/grades/program.sql": sql + "\n{% include 'env.txt' %}\n"},
            "is a symbolic link"),
        Attack("an sql: file outside the project", {
            "pipelines/grades/pipeline.yaml": spec.replace(
                "sql: [program.sql]", "sql: [../../../../../../proc/self/environ]")},
            "goes up with '..'"),
        Attack("a Java agent in the head's spark.conf", with_settings(
            spark={"conf": {"spark.driver.extraJavaOptions": "-javaagent:/tmp/a.jar"}}),
            "is not allowed"),
        Attack("a source that deletes the files it reads", {
            "pipelines/grades/pipeline.yaml": spec + (
                "connectors:\n- {name: src, table: students, type: files, format: json, "
                "path: input/students, options: {cleanSource: delete}}\n")},
            "makes Spark delete or move the input files"),
        Attack("Kafka's client reads the environment (config providers)", {
            "pipelines/grades/pipeline.yaml": spec + (
                "connectors:\n- name: leak_in\n  table: students\n  type: kafka\n"
                f"  format: json\n  bootstrap_servers: 127.0.0.1:{broker}\n  topic: leak\n"
                "  options:\n    kafka.config.providers: env\n"
                "    kafka.config.providers.env.class: "
                "org.apache.kafka.common.config.provider.EnvVarConfigProvider\n"
                "    kafka.client.id: '${env:AWS_SECRET_ACCESS_KEY}'\n")},
            "Kafka config providers read environment variables and files"),
        Attack("a YAML alias bomb", {"pipelines/grades/pipeline.yaml": alias_bomb()},
               "values once aliases are expanded"),
        Attack("${env:...} in an expectation's condition", with_view(
            "create materialized view leak (constraint c expect "
            "(s <> '${env:AWS_SECRET_ACCESS_KEY}') on violation fail update) as "
            "select name as s from students;"), "expectation 'c': '${...}' is not allowed"),
        Attack("a session function spelt as a column", with_view(
            "create view leak as select user as s from students;"),
            "so Spark would call user() instead"),
    ]


def alias_bomb() -> str:
    lines = ["name: grades", "a0: &a0 [x, x, x, x, x, x, x, x, x, x]"]
    lines += [f"a{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * 10) + "]" for i in range(1, 9)]
    return "\n".join(lines) + "\n"


def push(workspace: Workspace, files: dict[str, str | None]) -> str:
    for relative, text in files.items():
        path = workspace.project / relative
        if text is None:
            path.unlink()
            continue
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return workspace.commit("attack")


def undo(workspace: Workspace, files: dict[str, str | None], originals: dict[str, str]) -> None:
    for relative in files:
        path = workspace.project / relative
        if relative in originals:
            path.write_text(originals[relative])
        elif path.exists():
            path.unlink()
    for folder in ("objects", "refs"):
        shutil.rmtree(workspace.project / folder, ignore_errors=True)


@pytest.fixture
def git_environments(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Callable[[], str]:
    """A `git` first on PATH that records its environment, then runs the real git."""
    shims, records = tmp_path / "shims", tmp_path / "git-environments"
    shims.mkdir()
    records.mkdir()
    real = shutil.which("git")
    assert real is not None
    shim = shims / "git"
    shim.write_text(f"#!/bin/sh\nenv > \"{records}/$$\"\nexec \"{real}\" \"$@\"\n")
    shim.chmod(shim.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv("PATH", f"{shims}:{os.environ['PATH']}")
    return lambda: "\n".join(path.read_text() for path in sorted(records.iterdir()))


@pytest.fixture
def broker() -> Iterator[socket.socket]:
    """A port a pull request names as its Kafka broker: nothing may ever connect to it."""
    with socket.create_server(("127.0.0.1", 0)) as listener:
        listener.setblocking(False)
        yield listener


def test_no_route_takes_a_secret_out(workspace: Workspace, github: FakeGitHub, spark: Any,
                                     tmp_path: Path, s3_endpoint: str,
                                     git_environments: Callable[[], str],
                                     broker: socket.socket) -> None:
    github.state.token = CANARY_TOKEN
    leak = workspace.root / "leaked-environment.txt"
    (workspace.project / "pipelines/grades/env.txt").symlink_to("/proc/self/environ")
    workspace.commit("a symbolic link waiting for an include")
    originals = {relative: (workspace.project / relative).read_text()
                 for relative in ("reconcile.yaml", "pipelines/grades/program.sql",
                                  "pipelines/grades/pipeline.yaml")}
    runs: list[Run] = []

    def run_pull(action: str, sha: str, **inputs: str) -> Run:
        runs.append(workspace.pull_request(action, sha, token=CANARY_TOKEN, **CREDENTIALS,
                                           **inputs))
        return runs[-1]

    def run_comment(login: str, body: str, **inputs: str) -> Run:
        runs.append(workspace.comment(login, body, token=CANARY_TOKEN, **CREDENTIALS,
                                      **inputs)[0])
        return runs[-1]

    for attack in attacks(workspace, leak, broker.getsockname()[1]):
        planned = run_pull("synchronize", push(workspace, attack.files))
        assert planned.exit_code == 1, (attack.name, planned.log)
        assert attack.refusal in only_sticky(github)["body"], attack.name
        assert run_comment("alice", "/reconcile apply 0123456789ab").exit_code == 1
        undo(workspace, attack.files, originals)

    apply_seed_modification(workspace.project)
    sha = workspace.commit("a harmless change")
    assert run_pull("synchronize", sha).exit_code == 0, runs[-1].log
    plan_id = only_sticky(github)["body"].split("reconcile-plan-id:", 1)[1][:12]
    assert run_comment("rita", f"/reconcile apply {plan_id}").exit_code == 1  # read access
    assert run_comment("alice", f"/reconcile apply {plan_id} $(env)").exit_code == 1
    github.add_review(PR, "mallory", "APPROVED", sha)  # a sock puppet's review
    assert run_comment("alice", f"/reconcile apply {plan_id}",
                       require_review="true").exit_code == 1
    applied, _ = approve(workspace, "alice", token=CANARY_TOKEN, **CREDENTIALS)
    runs.append(applied)
    assert applied.exit_code == 0, applied.log
    assert workspace.manifest()["serial"] == 1  # the credentials were really used

    runs.extend(forged_redirect_refused(workspace, s3_endpoint, tmp_path,
                                        broker.getsockname()[1]))
    runs.append(forged_manifest_refused(workspace, s3_endpoint))
    with (workspace.project / "pipelines/grades/program.sql").open("a") as sql:
        sql.write("\ncreate view student_count as select count(*) as n from students;\n")
    planned = run_pull("synchronize", workspace.commit("a view, previewed and tested"),
                       preview="counts", tests="on")  # over the forged manifest
    assert planned.exit_code == 0, planned.log
    body = only_sticky(github)["body"]
    assert "View tests of <code>grades</code>" in body
    assert "Data preview of <code>grades</code> (from serial 1)" in body

    assert not leak.exists()
    with pytest.raises(BlockingIOError):
        broker.accept()  # no Kafka client ever reached the pull request's broker
    shown = everything(github, runs, tmp_path, workspace.backend_url, s3_endpoint)
    for canary in CANARIES:
        assert canary not in shown
        assert canary not in git_environments()


def forged_redirect_refused(workspace: Workspace, endpoint: str, folder: Path,
                            broker: int) -> list[Run]:
    """Someone who can write the state prefix, and nothing else, adds to the committed
    program (issue 78) a Kafka input and a Kafka output at the test's listener, the input
    sending a `KAFKA_*` secret (holding the canary) to it, each connector as the product
    itself would store it, so that the SQL and option checks pass. `run` refuses the
    manifest (it is not the program the apply recorded in storage) and `status` does not
    ask the listener for the input's lag; the manifest is then put back."""
    bucket, prefix = workspace.backend_url.removeprefix("s3://").split("/", 1)
    key = f"{prefix}/grades/manifest.json"
    s3 = boto3.client("s3", endpoint_url=endpoint)
    approved = s3.get_object(Bucket=bucket, Key=key)["Body"].read()
    document = json.loads(approved)
    forger = folder / "forger"
    shutil.copytree(workspace.project / "pipelines", forger / "pipelines")
    with (forger / "pipelines/grades/pipeline.yaml").open("a") as spec:
        spec.write("connectors:\n"
                   f"- {{name: leak_in, table: students, type: kafka, format: json, "
                   f"bootstrap_servers: '127.0.0.1:{broker}', topic: leak, "
                   "env_options: {kafka.sasl.jaas.config: KAFKA_JAAS}}\n"
                   f"- {{name: leak_out, view: avg_grade, type: kafka, "
                   f"bootstrap_servers: '127.0.0.1:{broker}', topic: leak}}\n")
    forged = program_of(forger, "grades").document()["connectors"]
    document["program"]["connectors"] |= forged
    document["connectors"]["leak_in"] = {
        "generation": "g1", "checkpoint": "grades/connectors/leak_in/g1",
        "kafka_offsets": {"leak": {"0": 0}}, "kafka_batch": 0}
    s3.put_object(Bucket=bucket, Key=key, Body=json.dumps(document).encode("utf-8"))
    environment = {"AWS_ACCESS_KEY_ID": CREDENTIALS["aws_access_key_id"],
                   "AWS_SECRET_ACCESS_KEY": CANARY_SECRET, "AWS_SESSION_TOKEN": CANARY_SESSION,
                   "KAFKA_JAAS": f"org.apache.kafka.common.security.plain.PlainLoginModule "
                                 f"required username=\"u\" password=\"{CANARY_SECRET}\";"}
    runs = []
    for command in (["run", "-p", "grades"], ["status", "-p", "grades"]):
        result = CliRunner().invoke(cli, ["-C", str(workspace.project), *command],
                                    env=environment, catch_exceptions=False)
        runs.append(Run(result.exit_code, result.output, {}, ""))
        assert "is not the program the last approved apply recorded" in result.output
        assert "connector 'leak_in' added" in result.output
    assert runs[0].exit_code == 1 and runs[1].exit_code == 0, runs
    assert workspace.manifest()["serial"] == document["serial"]  # nothing committed
    s3.put_object(Bucket=bucket, Key=key, Body=approved)
    return runs


def forged_manifest_refused(workspace: Workspace, endpoint: str) -> Run:
    """Someone who can write the state prefix, and nothing else, stores a view that reads
    the environment into the committed program (issue 51.4); a step run with the canary
    credentials refuses it, naming the manifest, and commits nothing."""
    bucket, prefix = workspace.backend_url.removeprefix("s3://").split("/", 1)
    key = f"{prefix}/grades/manifest.json"
    s3 = boto3.client("s3", endpoint_url=endpoint)
    document = json.loads(s3.get_object(Bucket=bucket, Key=key)["Body"].read())
    document["program"]["views"]["avg_grade"]["sql"] = (
        "create view avg_grade as select reflect('java.lang.System', 'getenv', "
        "'AWS_SECRET_ACCESS_KEY') as class, 1 as student_id, 1 as class_avg from grades")
    s3.put_object(Bucket=bucket, Key=key, Body=json.dumps(document).encode("utf-8"))
    credentials = {"AWS_ACCESS_KEY_ID": CREDENTIALS["aws_access_key_id"],
                   "AWS_SECRET_ACCESS_KEY": CANARY_SECRET, "AWS_SESSION_TOKEN": CANARY_SESSION}
    result = CliRunner().invoke(cli, ["-C", str(workspace.project), "run", "-p", "grades"],
                                env=credentials, catch_exceptions=False)
    assert result.exit_code == 1, result.output
    assert "manifest.json" in result.output
    assert "function reflect() is not allowed" in result.output
    assert workspace.manifest()["serial"] == document["serial"]  # nothing committed
    return Run(result.exit_code, result.output, {}, "")


def everything(github: FakeGitHub, runs: list[Run], folder: Path, backend_url: str,
               endpoint: str) -> str:
    """Comments, logs (less the runner's masking commands), outputs, summaries, every file
    under the test's folder and every object in the state bucket, as one text."""
    texts = [comment["body"] for comment in github.state.comments.values()]
    for run in runs:
        texts.append("\n".join(line for line in run.log.splitlines()
                               if not line.startswith("::add-mask::")))
        texts.append(run.summary)
        texts.extend(run.outputs.values())
    for path in folder.rglob("*"):
        if path.is_file() and not path.is_symlink():
            texts.append(path.read_bytes().decode("utf-8", "replace"))
    bucket = backend_url.removeprefix("s3://").split("/", 1)[0]
    s3 = boto3.client("s3", endpoint_url=endpoint)
    for item in s3.list_objects_v2(Bucket=bucket).get("Contents", []):
        texts.append(s3.get_object(Bucket=bucket, Key=item["Key"])["Body"].read()
                     .decode("utf-8", "replace"))
    return "\n".join(texts)
