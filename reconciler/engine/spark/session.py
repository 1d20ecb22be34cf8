"""The one way the reconciler gets a Spark session: embedded, a cluster, or Spark Connect.

Why a wrapper around ``SparkSession.builder``:

* A laptop run must be quiet and leave nothing behind: no banner or WARN lines
  on stderr (they would drown the plan output), no ``spark-warehouse/`` or
  ``metastore_db/`` in the user's project, no web UI port.
* Local runs are small: a couple of cores and 2 shuffle partitions instead of
  200 keep a bootstrap of a small pipeline fast.
* Timestamps are written to Delta by both storage writers; a fixed UTC session
  timezone makes the bytes independent of the machine that ran ``apply``.

The embedded-only tunings (cores, shuffle partitions, warehouse, UI, loopback
driver, the log4j2 file) are not applied to a cluster (``spark.master`` not
``local...``) or to Spark Connect, where the cluster's own defaults should win;
there only the UTC timezone, no console progress bar and log level ERROR are
set. User ``conf`` from ``reconcile.yaml`` always wins over every default here. The
catalog is Spark's default (in memory) unless the operator's ``spark-defaults.conf``
names a metastore (``spark.sql.catalogImplementation hive``), which a pipeline's
``publish:`` then writes to (``engine/publish.py``).

Pipeline SQL comes from pull requests, so the JVM starts with a cleaned
environment (``launch.jvm_launch``): only what Java, Spark, Python workers and the
cloud storage clients need passes (no ``GITHUB_TOKEN``, no action inputs, no
runner tokens), ``PYTHONSAFEPATH=1`` keeps Spark's Python workers (started as
``python -m pyspark.daemon`` in the working directory, which may be a pull
request's checkout) from importing a ``pyspark/`` folder found there, and
``spark.sql.variable.substitute`` is off so ``${env:NAME}`` in SQL stays text
(a runtime SQL conf: set at build and again on the session, ``with_safe_sql_conf``).
"""

from __future__ import annotations

import atexit
import logging
import os
import shutil
import socket
import tempfile
import threading
import warnings
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from urllib.parse import urlparse

from pyspark.sql import SparkSession

from reconciler.desired.settings.project import SparkSettings
from reconciler.engine.spark.class_archive import java_options
from reconciler.engine.spark.jars import (
    DELTA_CATALOG,
    DELTA_EXTENSION,
    class_archive_file,
    class_path_start,
    delta_jars,
    kafka_jars,
    local_fs_jar,
    s3a_jars,
)
from reconciler.engine.spark.java import require_java
from reconciler.engine.spark.launch import jvm_launch
from reconciler.engine.spark.local_fs import SESSION_CONF as LOCAL_FS_CONF
from reconciler.support.errors import ReconcileError, error_class
from reconciler.support.progress import spark_log_level
from reconciler.support.redaction import redact_text, redact_url

MAX_LOCAL_CORES = 4
"""Upper bound on ``local[N]``: more threads only add scheduling overhead for small state."""


# Quiet (errors still reach stderr; `--log-level debug`: warnings). The loggers at ERROR stop
# Spark's "Setting default log level" notice, printed when their level is not the root's.
LOG4J2_PROPERTIES = """\
rootLogger.level = ROOT_LEVEL
rootLogger.appenderRef.stderr.ref = console
appender.console.type = Console
appender.console.name = console
appender.console.target = SYSTEM_ERR
appender.console.layout.type = PatternLayout
appender.console.layout.pattern = %d{yy/MM/dd HH:mm:ss} %p %c{1}: %m%n%throwable{none}
logger.repl.name = org.apache.spark.repl.Main
logger.repl.level = error
logger.context.name = org.apache.spark.SparkContext
logger.context.level = error
logger.submit.name = org.apache.spark.deploy.SparkSubmit
logger.submit.level = error
logger.gateway.name = org.apache.spark.api.python.PythonGatewayServer
logger.gateway.level = error
logger.parquet.name = org.apache.parquet
logger.parquet.level = error
"""

# pyspark 4.x warns on every import of its pandas helpers while pandas is 3.x;
# the reconciler only moves data through Arrow, so the warning is noise.
warnings.filterwarnings(
    "ignore", message=r"PySpark does not yet fully support pandas", category=FutureWarning
)

# py4j logs a traceback of its own (on the root logger) when the JVM goes away; the CLI
# says it in one line (engine/spark/failures.py), and `--debug` shows the exception itself.
logging.getLogger("py4j").setLevel(logging.CRITICAL)
logging.getLogger().addFilter(lambda record: "/py4j/" not in record.pathname)
# pyspark logs a query error's context as a JSON line of its own: the CLI says it in one.
for _logger in ("DataFrameQueryContextLogger", "SQLQueryContextLogger"):
    logging.getLogger(_logger).setLevel(logging.CRITICAL)

_scratch_lock = threading.Lock()
_scratch_dir: Path | None = None


def _scratch() -> Path:
    """A per-process temp folder for the warehouse and the log4j2 file, removed at exit."""
    global _scratch_dir
    with _scratch_lock:
        if _scratch_dir is None:
            _scratch_dir = Path(tempfile.mkdtemp(prefix="reconciler-spark-"))
            (_scratch_dir / "log4j2.properties").write_text(
                LOG4J2_PROPERTIES.replace("ROOT_LEVEL", spark_log_level()))
            atexit.register(shutil.rmtree, _scratch_dir, ignore_errors=True)
        return _scratch_dir


SAFE_SQL_CONF = {"spark.sql.variable.substitute": "false"}
"""Set on every session, after the user's conf: pipeline SQL must not expand ``${env:...}``."""

SAFE_LAUNCH_CONF = {"spark.executorEnv.PYTHONSAFEPATH": "1"}
"""Set where the reconciler launches Spark: executors' Python workers must not import
from their working directory either (a cluster's own executors are its owner's)."""


def default_master() -> str:
    """``local[N]`` with N = usable CPUs, capped at ``MAX_LOCAL_CORES``."""
    try:
        cores = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # not Linux
        cores = os.cpu_count() or 1
    return f"local[{max(1, min(cores, MAX_LOCAL_CORES))}]"


CODEGEN_CACHE_ENTRIES = "2000"
"""Generated classes Spark keeps compiled (`spark.sql.codegen.cache.maxEntries`, 100 by
default). A maintained step of the step bench's four views on Delta's writer needs about 70
(its queries, Delta's statistics and snapshot projections): with 100 kept, each step evicted
and recompiled them all, 68 Janino compilations and about 1 s of a 7 s step on 2 cores;
with more kept, none after the first step (`bench/README.md`, "A step"). A static conf, so
it is set when the embedded JVM starts; a cluster's is its own (`docs/clusters.md`)."""

DRIVER_MEMORY_SHARE = 0.5
"""Embedded Spark's heap as a share of the machine's memory: its tasks run in the driver, and
Spark's own 1 GiB default fails a broadcast join of a modest dimension table."""


def driver_memory() -> str:
    """`spark.driver.memory` for embedded Spark: `DRIVER_MEMORY_SHARE` of physical memory
    (at least 1 GiB); `spark.conf` in reconcile.yaml overrides it."""
    try:
        physical = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (AttributeError, ValueError, OSError):  # not POSIX: Spark's own default
        return "1g"
    return f"{max(1024, int(physical * DRIVER_MEMORY_SHARE) // 2**20)}m"


def _conf_value(value: str | int | float | bool) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def _merged_java_options(ours: str, user: str | None) -> str:
    """Ours first, so a user ``-D`` of the same name (later on the line) wins."""
    return f"{ours} {user or ''}".strip()


def spark_conf(master: str, user_conf: Mapping[str, str | int | float | bool],
               log_level: str = "ERROR", *, delta: bool = True, s3a: bool = True,
               scratch: Path | None = None) -> dict[str, str]:
    """The conf a classic (non-Connect) session is built with; exposed for tests and docs.
    Without `delta`, an embedded session has no Delta Lake (its SQL extension and catalog)
    and no S3A; without `s3a`, no S3A (`jars_conf`). The jars only some sessions need go on
    the class path through the JVM's environment instead (`appended_jars`).
    `scratch`: a local JVM's folder (else this process's)."""
    user = {key: _conf_value(value) for key, value in user_conf.items()}
    conf: dict[str, str] = {
        "spark.master": master,
        "spark.app.name": "pipeline-reconciler",
        "spark.sql.session.timeZone": "UTC",
        "spark.ui.showConsoleProgress": "false",
        "spark.log.level": log_level,
    }
    if master.startswith("local"):
        scratch = scratch or _scratch()
        conf |= {
            "spark.ui.enabled": "false",
            "spark.sql.shuffle.partitions": "2",
            "spark.sql.warehouse.dir": str(scratch / "warehouse"),
            "spark.driver.memory": driver_memory(),
            "spark.driver.host": "127.0.0.1",
            "spark.driver.bindAddress": "127.0.0.1",
            "spark.sql.codegen.cache.maxEntries": CODEGEN_CACHE_ENTRIES,
            "spark.driver.extraJavaOptions": (
                f"-Dlog4j2.configurationFile=file:{scratch / 'log4j2.properties'} "
                f"-Dderby.system.home={scratch / 'derby'} {java_options(class_archive_file())}"
            ).strip(),
        }
    conf |= jars_conf(master, delta and s3a, delta=delta)
    user_java_options = user.pop("spark.driver.extraJavaOptions", None)
    if user_java_options or "spark.driver.extraJavaOptions" in conf:
        conf["spark.driver.extraJavaOptions"] = _merged_java_options(
            conf.get("spark.driver.extraJavaOptions", ""), user_java_options
        )
    return conf | user | SAFE_SQL_CONF | SAFE_LAUNCH_CONF


def appended_jars(master: str, s3a: bool, kafka: bool) -> list[Path]:
    """The jars only some embedded sessions need (S3A's, Kafka's): they go on the class path
    after pyspark's own (`launch.jvm_launch`), so the start of every session's stays the
    class archive's. A cluster has its own."""
    if not master.startswith("local"):
        return []
    return [*((s3a_jars() or []) if s3a else []), *((kafka_jars() or []) if kafka else [])]


def jars_conf(master: str, s3a: bool = True, *, delta: bool = True) -> dict[str, str]:
    """Delta Lake and Hadoop's S3A connector on an embedded session, when the set-up
    fetched them (`engine.spark.jars`), set up as `configure_spark_with_delta_pip` would: the
    jars, Delta's SQL extension and its catalog (not without `delta`: the jars stay, unused).
    The jars go on the driver's class path, where local mode runs the tasks too
    (`spark.jars` would copy 700 MB per session): Delta's and the local file system's at
    its start (`class_path_start`), S3A's (680 MB) and Kafka's after pyspark's
    (`appended_jars`), only with `s3a`, for a session that may reach S3, and `kafka`, for a
    project with a Kafka connector.
    A cluster's Delta and `s3a://` support are the cluster's own, like on every managed
    Spark (`python -m reconciler.engine.spark.jars --spark-defaults` prints them for a
    standalone cluster); nothing is shipped to its executors from here. The local file
    system the set-up compiled (`local_fs`) serves `file:` paths."""
    if not master.startswith("local"):
        return {}
    conf: dict[str, str] = {}
    if delta and delta_jars() is not None:
        conf |= {"spark.sql.extensions": DELTA_EXTENSION,
                 "spark.sql.catalog.spark_catalog": DELTA_CATALOG,
                 # Delta rebuilds a snapshot from its log in 50 tasks by default: a
                 # cluster's figure; on a laptop each of them is overhead.
                 "spark.databricks.delta.snapshotPartitions": "2"}
    if s3a and s3a_jars() is not None:  # `s3://` is S3A too, as on EMR and Databricks
        conf["spark.hadoop.fs.s3.impl"] = "org.apache.hadoop.fs.s3a.S3AFileSystem"
    if local_fs_jar() is not None:  # `file:` paths without a `chmod` or `readlink` per file
        conf |= LOCAL_FS_CONF
    start = class_path_start()
    if start:
        conf["spark.driver.extraClassPath"] = os.pathsep.join(str(jar) for jar in start)
    return conf


def get_spark(
    settings: SparkSettings | None = None,
    *,
    master: str | None = None,
    remote: str | None = None,
    log_level: str = "ERROR",
    delta: bool = True,
    s3a: bool = True,
    kafka: bool = False,
) -> SparkSession:
    """The reconciler's Spark session; reuses the active one when there is one.

    ``master``/``remote`` (the CLI's flags, the Action's inputs) replace what
    ``settings`` says about where Spark runs; its ``conf`` still applies. With ``remote`` (``sc://host:port``)
    this is a Spark Connect client and no local Java is needed; otherwise Java is
    checked first so a missing JDK is one clear line, not a Py4J traceback.
    An existing session keeps its static settings (master, warehouse); only
    runtime SQL conf from ``settings.conf`` is applied to it, as Spark does.
    ``delta=False`` starts an embedded JVM without Delta Lake and S3A
    (`jars_conf`), for work that writes with delta-rs into local folders only;
    ``s3a=False`` leaves out only S3A's, for a project that never reaches S3;
    ``kafka=True`` adds Spark's Kafka connector, for a project with a Kafka connector.
    """
    settings = settings or SparkSettings()
    if not (master or remote):  # a flag says where Spark runs, whatever the file says
        master, remote = settings.master, settings.remote
    if master and remote:
        raise ReconcileError("give either --spark-master or --spark-remote, not both")
    user_conf = {key: _conf_value(value) for key, value in settings.conf.items()}

    if remote:
        if not remote.startswith("sc://"):
            raise ReconcileError(
                f"spark.remote must be a Spark Connect URL (sc://host:port): {redact_url(remote)}"
            )
        _check_reachable(remote)
        builder = SparkSession.builder.remote(remote)
        connect_conf = {"spark.sql.session.timeZone": "UTC"} | user_conf | SAFE_SQL_CONF
        for key, value in connect_conf.items():
            builder = builder.config(key, value)
        try:
            session = builder.getOrCreate()
        except Exception as error:  # grpc/connection errors carry multi-line details
            first_line = str(error).strip().splitlines()[0] if str(error).strip() else ""
            raise ReconcileError(
                f"cannot connect to Spark Connect at {redact_url(remote)}: "
                f"{type(error).__name__}: {redact_text(first_line)}"
            ) from error
        return with_safe_sql_conf(session)

    require_java()
    builder = SparkSession.builder
    master = master or default_master()
    for key, value in spark_conf(master, user_conf, log_level, delta=delta, s3a=s3a).items():
        builder = builder.config(key, value)
    with jvm_launch(appended_jars(master, delta and s3a, kafka)):
        return with_safe_sql_conf(builder.getOrCreate())


def with_safe_sql_conf(spark: SparkSession) -> SparkSession:
    """`spark` with `SAFE_SQL_CONF` set on the session itself, or a one-line error.

    The builder's conf reaches a new classic session, but pyspark's Spark Connect client
    applies builder conf with errors silenced, and an existing session may have been
    changed since. `spark.sql.variable.substitute` is a runtime SQL conf (not a static
    one), so `spark.conf.set` takes it on classic and Connect sessions alike; a server
    that refuses it is an error, not a silently substituting session.
    """
    for key, value in SAFE_SQL_CONF.items():
        try:
            spark.conf.set(key, value)
        except Exception as error:  # Py4J or gRPC errors carry the server's whole text
            raise ReconcileError(f"Spark refused {key}={value}, which keeps '${{...}}' in "
                                 f"pipeline SQL from being substituted: {error_class(error)}"
                                 ) from None
    return spark


CONNECT_PROBE_SECONDS = 10.0
"""How long to wait for a Spark Connect server's port before saying it is unreachable
(pyspark's client would otherwise retry for many minutes without a word)."""


def _check_reachable(remote: str) -> None:
    """One TCP connection to the Connect server's port, or a one-line error."""
    parsed = urlparse(remote.replace("sc://", "http://", 1))
    try:
        host, port = parsed.hostname or "localhost", parsed.port or 15002
    except ValueError:
        raise ReconcileError(f"spark.remote is not a Spark Connect URL: {redact_url(remote)}") \
            from None
    try:
        socket.create_connection((host, port), timeout=CONNECT_PROBE_SECONDS).close()
    except OSError as error:
        reason = "timed out" if isinstance(error, TimeoutError) else (
            error.strerror or type(error).__name__)
        raise ReconcileError(f"cannot reach Spark Connect at {redact_url(remote)}: {reason}; "
                             "is the server running and the port open?") from None


def is_connect(spark: SparkSession) -> bool:
    """Whether ``spark`` is a Spark Connect client (no JVM on this side)."""
    return type(spark).__module__.startswith("pyspark.sql.connect")


def has_delta_extension(spark: SparkSession) -> bool:
    """Whether the session was started with Delta's SQL extension (so delta-spark can write).

    On Spark Connect the conf may not be readable; then it is False unless the
    conf says otherwise, and the delta-rs writer is used.
    """
    try:
        extensions = spark.conf.get("spark.sql.extensions", "") or ""
    except Exception:  # Spark Connect: server refused or no such conf exposed
        return False
    return DELTA_EXTENSION in [item.strip() for item in extensions.split(",")]


_settings_lock = threading.RLock()


@contextmanager
def session_settings(spark: SparkSession, settings: Mapping[str, str]) -> Iterator[None]:
    """Runtime SQL settings for the statements inside, then as they were: how Delta's DML
    takes a commit's metadata and app transaction, which have no statement syntax.

    A session's settings are shared by every thread using it, and a step refreshes views
    from two threads (`engine.refresh`): one at a time holds settings, or one view's MERGE
    would commit with the other's tag or app transaction, and the later restore would
    leave the earlier one's values in the session for good."""
    with _settings_lock:
        previous = {key: spark.conf.get(key, None) for key in settings}
        for key, value in settings.items():
            spark.conf.set(key, value)
        try:
            yield
        finally:
            for key, earlier in previous.items():
                if earlier is None:
                    spark.conf.unset(key)
                else:
                    spark.conf.set(key, earlier)
