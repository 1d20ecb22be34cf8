"""Shared fixtures: one real Spark session and one real S3 endpoint for the whole run.

Starting a JVM costs seconds, so every test that needs Spark shares the
session from ``reconciler.engine.spark.session.get_spark`` (code under test calling
``get_spark()`` itself gets the same one, as it reuses the active session).
"""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest
from pyspark.sql import SparkSession

from reconciler.desired.settings.project import SparkSettings
from reconciler.engine.spark.session import get_spark
from tests.jvm_options import SESSION_JVM

try:
    from tests.connect_server import connect_server
    from tests.s3_server import moto_s3_server
except ImportError:  # bare `pytest` with tests/ not a package: tests/ itself is on sys.path
    from connect_server import connect_server  # type: ignore[no-redef]
    from s3_server import moto_s3_server  # type: ignore[no-redef]

pytest_plugins = [
    "tests.github_harness",  # the `github` and `workspace` fixtures
    "tests.scheduling",  # which files share a worker
]

# The run's session has Delta's jars (`make jars`), so the tests, and the CLIs they start,
# write with the writer the product chooses there: Delta's own. Tests about the delta-rs
# fallback say so (`RECONCILE_DELTA_WRITER=delta-rs` set by the test), the storage contract
# runs on both, and `make test-delta-rs` runs the whole suite on the fallback
# (docs/clusters.md, "Which writer the tests run").
os.environ.setdefault("RECONCILE_DELTA_WRITER", "auto")

# Off a terminal every command prints a progress line per stage on stderr, which CliRunner
# mixes into the output the tests read; tests/cli/test_progress.py turns them on where they are
# the subject. Subprocesses inherit it.
os.environ.setdefault("RECONCILE_PROGRESS", "off")

DUMMY_AWS_ENV = {
    "AWS_ACCESS_KEY_ID": "testing",
    "AWS_SECRET_ACCESS_KEY": "testing",
    "AWS_DEFAULT_REGION": "us-east-1",
    "AWS_REGION": "us-east-1",
}
REAL_AWS_ENV = ("AWS_PROFILE", "AWS_SESSION_TOKEN", "AWS_SECURITY_TOKEN")

# Set for the whole test process, before anything can start a JVM: a JVM reads its
# environment once, and with the suite split across workers the first JVM of a worker
# may be started by code under test (a CLI run in-process) before any fixture runs.
# Dummy credentials also mean nothing in the run can reach a real account.
os.environ.update(DUMMY_AWS_ENV)
for _name in REAL_AWS_ENV:
    os.environ.pop(_name, None)


def pytest_configure(config: pytest.Config) -> None:
    # pyspark 4.x warns about pandas 3 on each use of its pandas helpers; pytest
    # resets warning filters per test, so the filter in session.py is not enough.
    config.addinivalue_line(
        "filterwarnings", "ignore:PySpark does not yet fully support pandas:FutureWarning"
    )


# Test-only settings: tests run many tiny jobs, where the JVM options of `jvm_options`, a
# few shuffle partitions (not 200 tasks per shuffle of a dozen rows), a few partitions for
# Delta Lake's replay of a table's log (not 50 tasks each time Delta's writer reads a
# snapshot of a log of a few commits) and interpreted expressions (no Java code generated
# and compiled for each new query of a dozen rows) start and finish them faster; production
# keeps the defaults. Interpreted and generated code compute the same results: Spark's own
# tests check each expression both ways.
TEST_SPARK_CONF = {
    "spark.driver.extraJavaOptions": SESSION_JVM,
    "spark.sql.shuffle.partitions": "4",
    "spark.databricks.delta.snapshotPartitions": "2",
    "spark.sql.codegen.wholeStage": "false",
    "spark.sql.codegen.factoryMode": "NO_CODEGEN",
}


@pytest.fixture(scope="session")
def spark() -> Iterator[SparkSession]:
    """The single embedded Spark session of the test run (of each worker when the run is
    split: `docs/development.md`), stopped at the end.

    Its JVM has the dummy AWS credentials (set above), as a production JVM starts with its
    own: Hadoop's S3A connector reads them from the JVM's environment."""
    session = get_spark(SparkSettings(conf=TEST_SPARK_CONF), kafka=True)
    yield session
    session.stop()


SPARK_FIXTURES = {"spark", "delta_spark", "remote", "merge_even_small"}
"""Fixtures that start Spark: a test using one is marked `spark` without saying so."""


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if SPARK_FIXTURES & set(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.spark)


def _without_spark(config: pytest.Config) -> bool:
    """Whether the run leaves out the tests that start Spark (`make test-fast`)."""
    return "not spark" in (config.option.markexpr or "")


@pytest.fixture(scope="session", autouse=True)
def one_session_for_the_run(request: pytest.FixtureRequest) -> SparkSession | None:
    """The run's session is this file's, whichever test first needs Spark: a command run
    in-process would otherwise start it with its own project's settings (without the test
    conf, and without S3A's jars for a project that never reaches S3: `reaches_s3`), and
    every later test of the worker would share that session. A run without the Spark tests
    starts no JVM at all."""
    if _without_spark(request.config):
        return None
    session: SparkSession = request.getfixturevalue("spark")
    return session


@pytest.fixture(autouse=True)
def spark_only_where_marked(request: pytest.FixtureRequest,
                            monkeypatch: pytest.MonkeyPatch) -> None:
    """In a run without the Spark tests, a test that starts Spark in-process after all fails
    at once, naming the marker it lacks, instead of making the quick loop slow."""
    if not _without_spark(request.config) or request.node.get_closest_marker("spark"):
        return
    from reconciler.engine.spark import session

    def refused(*args: object, **kwargs: object) -> SparkSession:
        pytest.fail("this test starts Spark: mark it `pytest.mark.spark`", pytrace=False)

    monkeypatch.setattr(session, "get_spark", refused)


@pytest.fixture(scope="session")
def remote(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """`sc://127.0.0.1:PORT` of the run's one Spark Connect server (started on first use).

    Besides the Connect tests, the kill tests use it where the killed process's kind of
    Spark does not matter: a killed client costs a second, a killed driver a JVM start.
    """
    with connect_server(tmp_path_factory.mktemp("connect")) as url:
        yield url


@pytest.fixture(scope="session")
def s3_endpoint() -> Iterator[str]:
    """moto's S3 server on loopback, e.g. ``http://127.0.0.1:41234``.

    The dummy credentials and region are set for the whole run (above). The
    endpoint itself is not exported: tests pass it (or set ``AWS_ENDPOINT_URL``
    with monkeypatch) where they need it.
    """
    with moto_s3_server() as endpoint:
        yield endpoint


@pytest.fixture
def delta_spark(spark: SparkSession, monkeypatch: pytest.MonkeyPatch) -> str:
    """Delta Lake's own Spark writer for this test (and the CLIs it starts), as on a
    cluster with Delta; returns the writer's name."""
    monkeypatch.setenv("RECONCILE_DELTA_WRITER", "delta-spark")
    return "delta-spark"


@pytest.fixture
def merge_even_small(monkeypatch: pytest.MonkeyPatch) -> None:
    """Deletions go through the path a large table takes (Delta's MERGE marking rows in
    deletion vectors, delta-rs's rewrite of the files holding them) however small the
    table: a test's few rows would otherwise be rewritten whole (`merge.REWRITE_WHOLE_BYTES`,
    `merge.OVERWRITE_SMALL_BYTES`)."""
    from reconciler.engine.delta import merge

    monkeypatch.setattr(merge, "REWRITE_WHOLE_BYTES", -1)
    monkeypatch.setattr(merge, "OVERWRITE_SMALL_BYTES", -1)
