"""A warm local Spark: one Spark Connect server a project's commands share (issue 56).

Each command that runs Spark starts its own JVM, several seconds on a laptop before any
work; `execute` then two `query`s paid that three times. `reconcile spark start` starts
pyspark's own Spark Connect server (`bin/spark-submit --class ...SparkConnectServer`) in
the background, with exactly the jars and conf an embedded session of the project would
get (`session.spark_conf`: Delta, S3A and Kafka as the project needs, the user's
`spark.conf`), and the local CLI's Spark commands then connect to it instead
(`warm_remote`, called by `spark_engine.Engine`).

Where it is recorded: the user's cache folder (`$XDG_CACHE_HOME` or `~/.cache`, then
`pipeline-reconciler/spark/<hash of the project's path>/`: `server.json`, `server.log`,
the server's warehouse), never the project folder: a checkout cannot plant a record.
The folder is the user's own with mode 0700, the record 0600; a record that is not
(another owner, group or world access) is ignored.

Who may use it: only processes holding the record's random token. The server listens on
127.0.0.1 only and refuses a client without the token (Spark Connect's bearer token,
given to the server in its environment, never on its command line); pyspark sends a
token without TLS only to `localhost`, hence the URL's host. Only the local CLI attaches
(`allow_attach`, for the commands `cli_context` names): the GitHub Action, and anything
under `GITHUB_ACTIONS`, never does. A command whose flags or `spark.remote`/a cluster
`spark.master` say where Spark runs uses that; a record whose server is gone, or was
started for other settings, is passed over for an embedded session.
"""

from __future__ import annotations

import hashlib
import json
import os
import secrets
import signal
import socket
import stat
import subprocess
import time
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from reconciler.support.errors import ReconcileError

if TYPE_CHECKING:
    from reconciler.desired.settings.project import Project

SERVER_CLASS = "org.apache.spark.sql.connect.service.SparkConnectServer"
START_TIMEOUT = 180.0
"""Seconds `start` waits for the server's port (a JVM's start, jars on a cold disk)."""
STOP_GRACE = 20.0
"""Seconds between SIGTERM and SIGKILL: Spark stops its context and the gRPC server."""

_ATTACH = {"allowed": False}


def allow_attach() -> None:
    """Let this process's engine use a warm server: the local CLI's Spark commands only."""
    _ATTACH["allowed"] = True


@dataclass(frozen=True)
class WarmServer:
    """What `server.json` records of a started server."""

    pid: int
    port: int
    token: str
    project: str
    started_at: float
    log: str
    settings: dict[str, Any]
    """The settings it was started for (`_wanted`): a command wanting others starts its own."""

    @property
    def url(self) -> str:
        """The URL a person sees (no token)."""
        return f"sc://localhost:{self.port}"

    @property
    def progress(self) -> tuple[str, str]:
        """The progress line of a command that uses it (a stage and an item)."""
        return "using the warm Spark at", self.url

    @property
    def client_url(self) -> str:
        return f"{self.url}/;token={self.token}"


def state_folder(project_root: Path) -> Path:
    """The user's cache folder for the warm server of the project at `project_root`."""
    cache = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    key = hashlib.sha256(str(project_root.resolve()).encode()).hexdigest()[:16]
    return Path(cache) / "pipeline-reconciler" / "spark" / key


def _record_path(project_root: Path) -> Path:
    return state_folder(project_root) / "server.json"


def _private(path: Path) -> bool:
    """Whether `path` is this user's and nobody else's (not a link, no group/world access)."""
    try:
        info = path.lstat()
    except OSError:
        return False
    return (info.st_uid == os.getuid() and not stat.S_ISLNK(info.st_mode)
            and not info.st_mode & (stat.S_IRWXG | stat.S_IRWXO))


def read_record(project_root: Path) -> WarmServer | None:
    """The project's record, or None when there is none or it is not the user's own."""
    path = _record_path(project_root)
    if not (_private(path.parent) and _private(path)):
        return None
    try:
        server = WarmServer(**json.loads(path.read_text(encoding="utf-8")))
    except (OSError, ValueError, TypeError):
        return None
    if server.project != str(project_root.resolve()):
        return None
    return server


def _alive(pid: int) -> bool:
    """Whether `pid` is a live Spark Connect server of this user (not a reused pid)."""
    try:
        os.kill(pid, 0)
    except (ProcessLookupError, PermissionError):
        return False
    cmdline = Path(f"/proc/{pid}/cmdline")
    if not cmdline.parent.is_dir():  # no procfs (macOS): the signal's answer must do
        return True
    try:
        return SERVER_CLASS.encode() in cmdline.read_bytes()
    except OSError:
        return False


def _answers(port: int, timeout: float = 1.0) -> bool:
    try:
        socket.create_connection(("127.0.0.1", port), timeout=timeout).close()
    except OSError:
        return False
    return True


def running_server(project_root: Path) -> WarmServer | None:
    """The project's warm server when its process is alive and its port answers; a stale
    record (the process gone) counts as none."""
    server = read_record(project_root)
    if server is None or not _alive(server.pid) or not _answers(server.port):
        return None
    return server


def _wanted(spark: Any, s3a: bool, kafka: bool) -> dict[str, Any]:
    """What decides a server's static settings: the configured master, the user's conf and
    the optional jar sets."""
    return {"master": spark.master, "conf": {key: str(value) for key, value in
                                             sorted(spark.conf.items())},
            "s3a": s3a, "kafka": kafka}


def warm_server(project: Project, s3a: bool, kafka: bool) -> WarmServer | None:
    """The project's warm server when this process may use it and it fits the settings
    the command would start Spark with (`s3a`, `kafka`: the jar sets it needs); otherwise
    None (an embedded session). Never in the Action, nor where reconcile.yaml names a
    Connect server or a cluster."""
    spark = project.settings.spark
    if (not _ATTACH["allowed"] or os.environ.get("GITHUB_ACTIONS") == "true"
            or spark.remote or (spark.master and not spark.master.startswith("local"))):
        return None
    server = running_server(project.root)
    if server is None or server.settings != _wanted(spark, s3a, kafka):
        return None
    return server


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _server_command(folder: Path, spark: Any, port: int, s3a: bool) -> list[str]:
    """spark-submit's arguments: the embedded session's conf (`session.spark_conf`) with
    the folder as its scratch, plus Connect's loopback binding. The jars only some sessions
    need come through its environment (`_server_environment`)."""
    import pyspark

    from reconciler.engine.spark.session import LOG4J2_PROPERTIES, default_master, spark_conf
    from reconciler.support.progress import spark_log_level

    (folder / "log4j2.properties").write_text(  # quiet, as embedded
        LOG4J2_PROPERTIES.replace("ROOT_LEVEL", spark_log_level()))
    master = spark.master or default_master()
    conf = spark_conf(master, spark.conf, s3a=s3a, scratch=folder)
    conf.pop("spark.master")
    conf |= {"spark.connect.grpc.binding.address": "127.0.0.1",
             "spark.connect.grpc.binding.port": str(port)}
    home = Path(pyspark.__file__).resolve().parent
    return [str(home / "bin" / "spark-submit"), "--master", master, "--class", SERVER_CLASS,
            *(item for key, value in conf.items() for item in ("--conf", f"{key}={value}")),
            "spark-internal"]


def _server_environment(token: str, spark: Any, s3a: bool, kafka: bool) -> dict[str, str]:
    """The cleaned environment an embedded JVM gets (`launch.JVM_ENVIRONMENT`, with the
    jars appended to its class path: `session.appended_jars`, and its system properties:
    `launch.SAFE_JAVA_OPTIONS`), and the token the server checks."""
    import pyspark

    from reconciler.engine.spark.launch import (
        JVM_ENVIRONMENT,
        with_appended_jars,
        with_safe_java_options,
    )
    from reconciler.engine.spark.session import appended_jars, default_master

    env = {key: value for key, value in os.environ.items()
           if JVM_ENVIRONMENT.fullmatch(key) and key != "SPARK_REMOTE"}
    jars = appended_jars(spark.master or default_master(), s3a, kafka)
    return with_safe_java_options(with_appended_jars(env, jars)) | {
        "PYTHONSAFEPATH": "1", "SPARK_CONNECT_AUTHENTICATE_TOKEN": token,
        "SPARK_HOME": str(Path(pyspark.__file__).resolve().parent)}


def _write_record(path: Path, server: WarmServer) -> None:
    temporary = path.with_suffix(".tmp")
    descriptor = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(descriptor, "w", encoding="utf-8") as out:
        json.dump(asdict(server), out, indent=2)
    os.replace(temporary, path)


def start_server(project_root: Path, spark: Any, *, s3a: bool, kafka: bool,
                 timeout: float = START_TIMEOUT) -> tuple[WarmServer, bool]:
    """Start the project's warm server in the background (its own session, so it outlives
    this process and a Ctrl-C here), and wait until its port answers. Returns the server
    and whether it was already running."""
    from reconciler.engine.spark.java import require_java

    if spark.remote or (spark.master and not spark.master.startswith("local")):
        raise ReconcileError("reconcile.yaml runs Spark elsewhere "
                             f"({'spark.remote' if spark.remote else 'spark.master'}): a warm "
                             "Spark stands in for embedded local Spark only")
    running = running_server(project_root)
    if running is not None:
        return running, True
    stop_server(project_root)  # a stale record, or a server not answering
    require_java()
    folder = state_folder(project_root)
    folder.mkdir(parents=True, exist_ok=True, mode=0o700)
    folder.chmod(0o700)
    if not _private(folder):
        raise ReconcileError(f"{folder} is not private to this user: not starting Spark there")
    token, port, log = secrets.token_hex(24), _free_port(), folder / "server.log"
    command = _server_command(folder, spark, port, s3a)
    with os.fdopen(os.open(log, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600), "wb") as out:
        process = subprocess.Popen(command, env=_server_environment(token, spark, s3a, kafka),
                                   cwd=folder, stdin=subprocess.DEVNULL, stdout=out,
                                   stderr=subprocess.STDOUT, start_new_session=True)
    server = WarmServer(pid=process.pid, port=port, token=token,
                        project=str(project_root.resolve()), started_at=time.time(),
                        log=str(log), settings=_wanted(spark, s3a, kafka))
    _write_record(folder / "server.json", server)
    deadline = time.monotonic() + timeout
    while not _answers(port, timeout=0.5):
        if process.poll() is not None or time.monotonic() > deadline:
            said = "exited" if process.poll() is not None else f"did not answer in {timeout:.0f} s"
            stop_server(project_root)
            raise ReconcileError(f"the warm Spark {said}: see {log}")
        time.sleep(0.25)
    return server, False


def _wait_gone(pid: int, seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while _alive(pid):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.1)
    return True


def stop_server(project_root: Path, grace: float = STOP_GRACE) -> WarmServer | None:
    """Stop the project's server (SIGTERM to its process group, SIGKILL after `grace`) and
    remove its record. Returns the server that was running, if one was."""
    server = read_record(project_root)
    if server is None:
        return None
    stopped = None
    if _alive(server.pid):
        stopped = server
        try:
            os.killpg(server.pid, signal.SIGTERM)
            if not _wait_gone(server.pid, grace):
                os.killpg(server.pid, signal.SIGKILL)
                _wait_gone(server.pid, 10.0)
        except ProcessLookupError:  # it ended meanwhile
            pass
    _record_path(project_root).unlink(missing_ok=True)
    return stopped


def describe(server: WarmServer | None, now: float | None = None) -> Mapping[str, Any]:
    """`reconcile spark status --json`: running or not, and where (never the token)."""
    if server is None:
        return {"running": False}
    return {"running": True, "pid": server.pid, "url": server.url, "log": server.log,
            "project": server.project,
            "uptime_seconds": round((now or time.time()) - server.started_at, 1)}
