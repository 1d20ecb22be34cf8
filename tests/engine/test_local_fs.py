"""The local file system without `chmod` processes (`engine/spark/local_fs.py`): compiled once
by the set-up, used by an embedded session for `file:` paths, and setting the same
permission bits Hadoop's `chmod` would."""

from __future__ import annotations

import os
import stat
import zipfile
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from reconciler.engine.spark import jars, local_fs
from reconciler.engine.spark.jars import pyspark_jar
from reconciler.engine.spark.session import jars_conf
from reconciler.support.errors import ReconcileError


def hadoop_jar() -> Path:
    return pyspark_jar("hadoop-client-api")


def mode(path: Path) -> int:
    return stat.S_IMODE(os.stat(path).st_mode)


def test_the_set_up_compiles_it_once_into_the_jar_cache(tmp_path: Path) -> None:
    cache = tmp_path / "jars"
    assert local_fs.compiled(cache, hadoop_jar()) is None
    jar = local_fs.compile_classes(cache, hadoop_jar())
    assert jar is not None and local_fs.compiled(cache, hadoop_jar()) == jar
    with zipfile.ZipFile(jar) as archive:  # a jar, as class data sharing needs (no folder)
        assert archive.namelist() == ["pipeline_reconciler/ForklessLocalFileSystem$Raw.class",
                                      "pipeline_reconciler/ForklessLocalFileSystem.class"]
    built = jar.stat().st_mtime_ns
    assert local_fs.compile_classes(cache, hadoop_jar()) == jar  # not compiled again
    assert jar.stat().st_mtime_ns == built
    assert [path.name for path in jar.parent.iterdir()] == [jar.name]  # no leftovers
    assert [path.name for path in jar.parent.parent.iterdir()] == [jar.parent.name]


def test_without_javac_nothing_is_compiled_and_sessions_keep_hadoops_class(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    runtime_only = tmp_path / "jre"
    (runtime_only / "bin").mkdir(parents=True)
    monkeypatch.setenv("JAVA_HOME", str(runtime_only))
    monkeypatch.setenv("RECONCILE_JARS", str(tmp_path / "jars"))
    assert local_fs.compile_classes(tmp_path / "jars", hadoop_jar()) is None
    assert "spark.hadoop.fs.file.impl" not in jars_conf("local[2]")


def test_a_failed_compile_is_one_line_and_leaves_the_set_up_standing(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    broken = tmp_path / "jdk"
    (broken / "bin").mkdir(parents=True)
    (broken / "bin" / "javac").write_text("#!/bin/sh\necho 'error: no space left' >&2\nexit 2\n")
    (broken / "bin" / "javac").chmod(0o755)
    monkeypatch.setenv("JAVA_HOME", str(broken))
    monkeypatch.setenv("RECONCILE_JARS", str(tmp_path / "jars"))
    with pytest.raises(ReconcileError) as raised:
        local_fs.compile_classes(tmp_path / "jars", hadoop_jar())
    assert str(raised.value) == ("javac could not compile ForklessLocalFileSystem.java: "
                                 "error: no space left")
    jars._compile_local_fs()  # what `python -m reconciler.engine.spark.jars` ends with
    assert capsys.readouterr().err == (
        "warning: javac could not compile ForklessLocalFileSystem.java: error: no space left; "
        "local paths keep Hadoop's chmod per file\n")
    assert [path.name for path in (tmp_path / "jars" / "local-fs").iterdir()] == []


def test_an_embedded_session_uses_it_once_compiled_and_a_cluster_its_own(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RECONCILE_JARS", str(tmp_path / "jars"))
    jar = local_fs.compile_classes(tmp_path / "jars", hadoop_jar())
    conf = jars_conf("local[2]")
    assert conf["spark.hadoop.fs.file.impl"] == local_fs.CLASS_NAME
    assert conf["spark.driver.extraClassPath"].split(os.pathsep)[-1] == str(jar)
    assert jars_conf("spark://cluster:7077") == {}


def test_the_sessions_writes_and_permissions_are_hadoops_without_a_chmod(
        spark: SparkSession, tmp_path: Path) -> None:
    """The test run's session (set up as `make test` sets it up) writes `file:` paths with
    the class, and each mode it sets is the one `chmod` gives, a sticky bit included."""
    jvm = spark._jvm
    assert jvm is not None
    hadoop_fs = jvm.org.apache.hadoop.fs
    files = hadoop_fs.FileSystem.get(jvm.java.net.URI("file:///"),
                                     spark._jsc.hadoopConfiguration())  # type: ignore[union-attr]
    assert files.getClass().getName() == local_fs.CLASS_NAME
    spark.range(3).write.parquet(str(tmp_path / "written"))
    data = next((tmp_path / "written").glob("part-*.parquet"))
    assert (mode(tmp_path / "written"), mode(data)) == (0o755, 0o644)  # Hadoop's umask 022
    target = tmp_path / "target"
    target.mkdir()
    for wanted in (0o700, 0o640, 0o604, 0o755, 0o1777, 0o000, 0o777):
        files.setPermission(hadoop_fs.Path(str(target)),
                            jvm.org.apache.hadoop.fs.permission.FsPermission(wanted))
        assert mode(target) == wanted, oct(wanted)
