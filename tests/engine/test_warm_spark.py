"""A warm local Spark (`reconcile spark start|stop|status`, issue 56), through the real CLI.

One server for the module, started by `reconcile spark start` in a subprocess in a tiny
project; `execute` and `query` in subprocesses must use it (their progress line says so)
and answer right; records that are stale, not private or for other settings are passed
over; `stop` ends the process. The record lives under the test's own XDG_CACHE_HOME.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace

import click
import pytest

from reconciler.cli.main import cli as reconcile_group
from reconciler.desired.settings.project import load_project
from reconciler.engine.spark import warm as warm_spark
from reconciler.engine.spark.jars import jar_folder
from reconciler.engine.spark.session import is_connect
from reconciler.operations.engine import Engine
from tests.projects import single_pipeline

pytestmark = pytest.mark.spark

SQL = """
create table t (id bigint not null, v int);
create materialized view totals as select count(*) as n, sum(v) as s from t;
"""


def environment(cache: Path) -> dict[str, str]:
    """The CLI's environment: its own cache (the jars where they are), progress lines on,
    and not a GitHub Actions run."""
    env = {key: value for key, value in os.environ.items() if key != "GITHUB_ACTIONS"}
    return env | {"XDG_CACHE_HOME": str(cache), "RECONCILE_JARS": str(jar_folder()),
                  "RECONCILE_PROGRESS": "lines"}


def cli(project: Path, cache: Path, *args: str) -> subprocess.CompletedProcess[str]:
    result = subprocess.run([sys.executable, "-m", "reconciler", "-C", str(project), *args],
                            capture_output=True, text=True, timeout=400, check=False,
                            env=environment(cache), cwd=project)
    assert result.returncode == 0, f"{args}: {result.stdout}\n{result.stderr[-3000:]}"
    return result


def status(project: Path, cache: Path) -> dict[str, object]:
    return json.loads(cli(project, cache, "spark", "status", "--json").stdout)


@pytest.fixture(scope="module")
def warm(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, Path]]:
    """A tiny project and the cache holding its running warm server's record."""
    root = tmp_path_factory.mktemp("warm")
    project, cache = single_pipeline(root / "project", SQL), root / "cache"
    cli(project, cache, "spark", "start")
    yield project, cache
    cli(project, cache, "spark", "stop")


@pytest.mark.slow
def test_start_is_recorded_and_idempotent(warm: tuple[Path, Path],
                                          monkeypatch: pytest.MonkeyPatch) -> None:
    project, cache = warm
    monkeypatch.setenv("XDG_CACHE_HOME", str(cache))
    shown = status(project, cache)
    assert shown["running"] is True and str(shown["url"]).startswith("sc://localhost:")
    assert "token" not in json.dumps(shown)
    again = cli(project, cache, "spark", "start").stdout
    assert f"already running at {shown['url']} (pid {shown['pid']}" in again
    folder = warm_spark.state_folder(project)
    assert folder.is_relative_to(cache) and oct(folder.stat().st_mode & 0o777) == "0o700"
    assert oct((folder / "server.json").stat().st_mode & 0o777) == "0o600"


@pytest.mark.slow
def test_execute_and_query_use_the_warm_server(warm: tuple[Path, Path]) -> None:
    project, cache = warm
    url = status(project, cache)["url"]
    for args in (("apply", "--auto-approve"),
                 ("execute", "-p", "p", "INSERT INTO t VALUES (1, 10), (2, 32)")):
        assert f"using the warm Spark at {url}" in cli(project, cache, *args).stderr
    answer = cli(project, cache, "query", "-p", "p", "--format", "json",
                 "SELECT n, s FROM totals")
    assert f"using the warm Spark at {url}" in answer.stderr
    assert json.loads(answer.stdout) == [{"n": 2, "s": 42}]


PROBE = """
import json, sys
from pyspark.sql.connect.proto import base_pb2_grpc

calls = {}
stub_init = base_pb2_grpc.SparkConnectServiceStub.__init__

def counting_init(self, channel):  # every RPC of the client goes through its stub
    stub_init(self, channel)
    for name, method in list(vars(self).items()):
        def counted(*args, _name=name, _method=method, **kwargs):
            calls[_name] = calls.get(_name, 0) + 1
            return _method(*args, **kwargs)
        setattr(self, name, counted)

base_pb2_grpc.SparkConnectServiceStub.__init__ = counting_init
from reconciler.cli.main import main
sys.argv = ["reconcile", *sys.argv[1:]]
try:
    main()
finally:  # before pyspark's own calls at exit
    print(json.dumps({"calls": calls, "modules": sorted(sys.modules)}), file=sys.stderr)
"""
"""`reconcile ARGS` in a process that counts its Spark Connect calls and, when the command
ends, says them and the modules it imported (a JSON line on stderr)."""


@pytest.mark.slow
def test_a_warm_query_asks_and_imports_only_what_it_needs(warm: tuple[Path, Path]) -> None:
    """Counts, not seconds (issue 79: a warm `query` was seconds of a client's imports and
    round trips): the relation the statement names is registered, not every relation of
    the pipeline; no module of a step is imported, nor `pyarrow.dataset` (a log's
    checkpoint is one Parquet file). `execute` does not import how `query` prints.

    pandas is imported, by pyspark: its Connect client requires it at import
    (`pyspark.sql.connect.utils.check_dependencies`) though nothing here uses it."""
    project, cache = warm
    cli(project, cache, "apply", "--auto-approve")  # deployed, whichever test ran first
    calls, modules = probed(project, cache, "query", "-p", "p", "--format", "json",
                            "SELECT count(*) AS n FROM t")
    # `t` registered at its pinned version, the statement, its rows (not also `totals`):
    assert calls["ExecutePlan"] == 3
    assert calls["AnalyzePlan"] == 1  # the result's columns
    # The session's settings (3: the builder's two, the safe SQL conf checked), the writer's
    # choice and its conf (3), the static plan's setting read, set and restored (3), and
    # pyspark's own reads (plan compression, debugging, binary as bytes: 3); one more where
    # the writer is chosen by the session's Delta extension (`auto`, not the run's delta-rs).
    chosen = os.environ.get("RECONCILE_DELTA_WRITER", "auto") == "auto"
    assert calls["Config"] <= 12 + chosen
    assert not modules & {"reconciler.engine.step", "reconciler.operations.step",
                          "reconciler.engine.maintenance", "reconciler.engine.refresh",
                          "pyarrow.dataset", "rich.table"}, sorted(modules)  # JSON: no table
    _, modules = probed(project, cache, "execute", "-p", "p", "INSERT INTO t VALUES (3, 0)")
    assert "reconciler.engine.step" in modules
    assert not modules & {"reconciler.cli.query_output", "rich.table", "pyarrow.dataset"}


def probed(project: Path, cache: Path, *args: str) -> tuple[dict[str, int], set[str]]:
    """`reconcile ARGS` through `PROBE` on the warm server: its calls and its modules."""
    probe = subprocess.run([sys.executable, "-c", PROBE, "-C", str(project), *args],
                           capture_output=True, text=True, timeout=400, check=False,
                           env=environment(cache), cwd=project)
    assert probe.returncode == 0, probe.stderr[-3000:]
    assert "using the warm Spark at" in probe.stderr
    said = json.loads(probe.stderr.strip().splitlines()[-1])
    return said["calls"], set(said["modules"])


@pytest.mark.slow
def test_only_the_local_cli_with_its_settings_attaches(
        warm: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch) -> None:
    """The Action's process never allows it; GITHUB_ACTIONS, a configured Connect server
    or cluster, other settings, a --spark-master flag and a record others may read are
    passed over."""
    project_dir, cache = warm
    monkeypatch.setenv("XDG_CACHE_HOME", str(cache))
    monkeypatch.delenv("GITHUB_ACTIONS", raising=False)
    project = load_project(project_dir)
    monkeypatch.setitem(warm_spark._ATTACH, "allowed", False)
    assert warm_spark.warm_server(project, s3a=False, kafka=False) is None
    monkeypatch.setitem(warm_spark._ATTACH, "allowed", True)
    server = warm_spark.warm_server(project, s3a=False, kafka=False)
    assert server is not None and server.client_url.endswith(f";token={server.token}")
    assert warm_spark.warm_server(project, s3a=False, kafka=True) is None  # no Kafka jars
    monkeypatch.setenv("GITHUB_ACTIONS", "true")
    assert warm_spark.warm_server(project, s3a=False, kafka=False) is None
    monkeypatch.delenv("GITHUB_ACTIONS")
    for key, value in (("remote", "sc://elsewhere:15002"), ("master", "spark://h:7077")):
        elsewhere = SimpleNamespace(root=project.root, settings=SimpleNamespace(
            spark=project.settings.spark.model_copy(update={key: value})))
        assert warm_spark.warm_server(elsewhere, s3a=False, kafka=False) is None  # type: ignore[arg-type]
    said: list[tuple[str, str]] = []  # a flag wins: here the run's embedded session
    session = Engine(project, master="local[2]", report=lambda *line: said.append(line)).spark
    assert said == [("start Spark", "local[2]")] and not is_connect(session)
    record = warm_spark.state_folder(project_dir) / "server.json"
    record.chmod(0o644)
    try:
        assert warm_spark.warm_server(project, s3a=False, kafka=False) is None
    finally:
        record.chmod(0o600)


@pytest.mark.slow
def test_a_client_without_the_token_is_refused(warm: tuple[Path, Path]) -> None:
    project, cache = warm
    port = str(status(project, cache)["url"]).rsplit(":", 1)[1]
    script = ("from pyspark.sql import SparkSession\n"
              f"SparkSession.builder.remote('sc://localhost:{port}').getOrCreate()"
              ".sql('select 1').collect()\n")
    env = {key: value for key, value in environment(cache).items()
           if key != "SPARK_CONNECT_AUTHENTICATE_TOKEN"}
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                            timeout=120, check=False, env=env)
    assert result.returncode != 0 and "UNAUTHENTICATED" in result.stderr, result.stderr[-500:]


@pytest.mark.slow
def test_a_stale_record_is_not_running(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A record whose process is gone: status says not running, commands go embedded,
    stop removes it."""
    project, cache = single_pipeline(tmp_path / "project", SQL), tmp_path / "cache"
    monkeypatch.setenv("XDG_CACHE_HOME", str(cache))
    monkeypatch.setitem(warm_spark._ATTACH, "allowed", True)
    dead = subprocess.Popen(["true"])
    dead.wait()
    folder = warm_spark.state_folder(project)
    folder.mkdir(parents=True, mode=0o700)
    warm_spark._write_record(folder / "server.json", warm_spark.WarmServer(
        pid=dead.pid, port=1, token="x", project=str(project.resolve()), started_at=0.0,
        log="", settings=warm_spark._wanted(load_project(project).settings.spark, False,
                                             False)))
    assert warm_spark.warm_server(load_project(project), s3a=False, kafka=False) is None
    assert status(project, cache) == {"running": False}
    assert "no warm Spark was running" in cli(project, cache, "spark", "stop").stdout
    assert not (folder / "server.json").exists()


@pytest.mark.slow
def test_stop_ends_the_server(warm: tuple[Path, Path]) -> None:
    """Last in the module: the fixture's own stop then finds nothing to stop."""
    project, cache = warm
    pid = int(str(status(project, cache)["pid"]))
    assert f"warm Spark stopped (pid {pid})" in cli(project, cache, "spark", "stop").stdout
    assert status(project, cache) == {"running": False}
    assert not warm_spark._alive(pid)  # gone, or a zombie its new parent has yet to reap


@pytest.mark.parametrize(("command", "allowed"), [("query", True), ("execute", True),
                                                  ("apply", True), ("github", False),
                                                  ("test", False), ("status", False)])
def test_which_commands_may_attach(command: str, allowed: bool,
                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """The local CLI's Spark commands; never the Action's `github` (nor `test`, whose
    session is its own)."""
    monkeypatch.setitem(warm_spark._ATTACH, "allowed", False)
    reconcile_group.resolve_command(click.Context(reconcile_group), [command])
    assert warm_spark._ATTACH["allowed"] is allowed
