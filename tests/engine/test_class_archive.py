"""The class data sharing archive embedded JVMs start from (`engine/spark/class_archive.py`):
made by the set-up, named by the JDK and the class path, mapped by every embedded session,
and never in the way when it cannot be."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from reconciler.engine.spark import class_archive, jars
from reconciler.engine.spark.java import jdk_tool
from reconciler.engine.spark.launch import with_appended_jars
from reconciler.engine.spark.session import spark_conf
from reconciler.support.errors import ReconcileError


def test_the_runs_session_maps_the_archive_the_set_up_made(spark: SparkSession) -> None:
    """`make test` runs the set-up, so the archive exists and the run's session was started
    with it; a JVM with that session's class path and `-Xshare:on` (which refuses to start
    rather than run without the archive) loads Spark's classes from it."""
    archive = jars.class_archive_file()
    assert archive is not None and archive.is_file(), "run the set-up: make jars"
    jvm = spark._jvm
    assert jvm is not None
    arguments = list(jvm.java.lang.management.ManagementFactory.getRuntimeMXBean()
                     .getInputArguments())
    assert f"-XX:SharedArchiveFile={archive}" in arguments
    class_path = jvm.java.lang.System.getProperty("java.class.path")
    java = jdk_tool("java")
    assert java is not None
    run = subprocess.run([java, "-Xshare:on", f"-XX:SharedArchiveFile={archive}",
                          "-Xlog:class+load=info", "-cp", class_path,
                          "org.apache.spark.deploy.SparkSubmit", "--version"],
                         capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-2000:]
    assert any(line.endswith("org.apache.spark.deploy.SparkSubmit source: shared objects "
                             "file (top)") for line in run.stdout.splitlines()), run.stdout[-2000:]


def test_a_session_maps_it_only_once_it_was_made(tmp_path: Path,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RECONCILE_JARS", str(tmp_path / "jars"))
    archive = jars.class_archive_file()
    assert archive is not None and not archive.exists()
    assert class_archive.java_options(archive) == ""
    assert "SharedArchiveFile" not in spark_conf("local[2]", {})["spark.driver.extraJavaOptions"]
    archive.parent.mkdir(parents=True)
    archive.write_bytes(b"made by the set-up")
    options = spark_conf("local[2]", {})["spark.driver.extraJavaOptions"]
    assert f"-XX:SharedArchiveFile={archive} -Xshare:auto -Xlog:cds=off" in options
    assert "SharedArchiveFile" not in spark_conf("spark://cluster:7077", {}).get(
        "spark.driver.extraJavaOptions", "")


def test_its_name_follows_the_jdk_and_the_class_path(tmp_path: Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    cache = tmp_path / "jars"
    first = class_archive.archive_file(cache, ["a.jar", "b.jar"])
    assert first == class_archive.archive_file(cache, ["a.jar", "b.jar"])
    assert first != class_archive.archive_file(cache, ["a.jar", "c.jar"])
    other_jdk = tmp_path / "jdk"
    (other_jdk / "bin").mkdir(parents=True)
    (other_jdk / "bin" / "java").write_text("#!/bin/sh\n")
    (other_jdk / "bin" / "java").chmod(0o755)
    (other_jdk / "release").write_text('JAVA_VERSION="21.0.1"\n')
    monkeypatch.setenv("JAVA_HOME", str(other_jdk))
    assert class_archive.archive_file(cache, ["a.jar", "b.jar"]) not in (first, None)
    monkeypatch.setenv("JAVA_HOME", str(tmp_path / "nothing"))
    monkeypatch.setenv("PATH", str(tmp_path / "nothing"))
    assert class_archive.archive_file(cache, ["a.jar"]) is None


def test_a_jar_made_again_at_the_same_path_names_a_new_archive(tmp_path: Path) -> None:
    """CI makes its virtual environment again at the same path on every run and keeps the jar
    cache: the JVM refuses an archive whose jars changed size or time, so the name does too,
    and the set-up makes a fresh archive instead of keeping a stale one."""
    jar = tmp_path / "slf4j-api.jar"
    jar.write_bytes(b"classes")
    os.utime(jar, (1_000_000, 1_000_000))
    cache = tmp_path / "jars"
    first = class_archive.archive_file(cache, [str(jar)])
    assert first == class_archive.archive_file(cache, [str(jar)])
    os.utime(jar, (2_000_000, 2_000_000))  # pip installed it again
    made_again = class_archive.archive_file(cache, [str(jar)])
    assert made_again not in (first, None)
    jar.write_bytes(b"other classes")
    os.utime(jar, (2_000_000, 2_000_000))
    assert class_archive.archive_file(cache, [str(jar)]) not in (first, made_again, None)


def test_the_cache_keeps_the_newest_archives(tmp_path: Path) -> None:
    """Each virtual environment and JDK has its own archive (about 200 MB): making one
    removes all but the newest others, down to `KEPT_ARCHIVES` in all."""
    for age, name in enumerate(["d", "c", "b", "a"]):  # a is the oldest
        path = tmp_path / f"{name}.jsa"
        path.write_bytes(b"archive")
        os.utime(path, (1_000_000 - age, 1_000_000 - age))
    made = tmp_path / "new.jsa"
    made.write_bytes(b"archive")
    class_archive._prune(tmp_path, keep=made)
    assert sorted(path.name for path in tmp_path.iterdir()) == ["c.jsa", "d.jsa", "new.jsa"]


def test_a_failed_archive_is_one_line_and_leaves_the_set_up_standing(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    """The child that makes the archive fails (here: an interpreter that prints one line and
    exits 1): one error line, nothing left in the cache, and the set-up's warning."""
    failing = tmp_path / "python"
    failing.write_text("#!/bin/sh\necho 'MemoryError: no room for the workload' >&2\nexit 1\n")
    failing.chmod(0o755)
    monkeypatch.setattr(sys, "executable", str(failing))
    monkeypatch.setenv("RECONCILE_JARS", str(tmp_path / "jars"))
    archive = jars.class_archive_file()
    assert archive is not None
    with pytest.raises(ReconcileError) as raised:
        class_archive.build(archive)
    assert str(raised.value) == ("the class archive was not made: "
                                 "MemoryError: no room for the workload")
    assert list(archive.parent.iterdir()) == []
    jars._make_class_archive()  # what `python -m reconciler.engine.spark.jars` ends with
    assert capsys.readouterr().err == (
        "warning: the class archive was not made: MemoryError: no room for the workload; "
        "embedded Spark starts without it\n")


def test_jars_some_sessions_need_go_after_pysparks_own() -> None:
    """S3A's and Kafka's jars reach the class path through `SPARK_DIST_CLASSPATH`, which
    Spark's launcher puts after pyspark's jars; a caller's own entries stay first."""
    jars_after = [Path("/cache/hadoop-aws.jar"), Path("/cache/kafka-clients.jar")]
    assert with_appended_jars({"PATH": "/bin"}, []) == {"PATH": "/bin"}
    assert with_appended_jars({"PATH": "/bin"}, jars_after)["SPARK_DIST_CLASSPATH"] == \
        "/cache/hadoop-aws.jar:/cache/kafka-clients.jar"
    assert with_appended_jars({"SPARK_DIST_CLASSPATH": "/opt/site.jar"}, jars_after)[
        "SPARK_DIST_CLASSPATH"] == "/opt/site.jar:/cache/hadoop-aws.jar:/cache/kafka-clients.jar"
