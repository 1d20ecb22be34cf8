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
        assert archive.namelist() == [f"pipeline_reconciler/ForklessLocalFileSystem{inner}.class"
                                      for inner in ("$Fs", "$Raw", "$RawFs", "")]
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
    assert {key: conf[key] for key in local_fs.SESSION_CONF} == {
        "spark.hadoop.fs.file.impl": local_fs.CLASS_NAME,
        "spark.hadoop.fs.AbstractFileSystem.file.impl": f"{local_fs.CLASS_NAME}$Fs"}
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


def test_link_statuses_are_hadoops_without_a_readlink(spark: SparkSession, tmp_path: Path) -> None:
    """What a FileContext's rename asks of every file it moves (each Delta commit): the class
    answers as Hadoop's own RawLocalFileSystem does, for a file, a folder, a link given as a
    path and as a `file:` URI (which Hadoop's `readlink` never reads as a link), a dangling
    link and a missing file. FileContext's `file:` paths (Delta's log store) go through the
    class too, and make folders and files with Hadoop's modes. What this holds is the
    answers; that no `readlink` process runs is a recording's count (`local_fs`)."""
    jvm = spark._jvm
    assert jvm is not None
    hadoop_fs = jvm.org.apache.hadoop.fs
    local = jvm.java.net.URI("file:///")
    configuration = spark._jsc.hadoopConfiguration()  # type: ignore[union-attr]
    hadoops_configuration = jvm.org.apache.hadoop.conf.Configuration(configuration)
    hadoops_configuration.set("fs.AbstractFileSystem.file.impl",  # Hadoop's default
                              "org.apache.hadoop.fs.local.LocalFs")
    ours = hadoop_fs.FileSystem.get(local, configuration).getRawFileSystem()
    assert ours.getClass().getName() == f"{local_fs.CLASS_NAME}$Raw"
    hadoops = hadoop_fs.RawLocalFileSystem()
    hadoops.initialize(local, configuration)
    context = hadoop_fs.FileContext.getFileContext(local, configuration)
    assert context.getDefaultFileSystem().getClass().getName() == f"{local_fs.CLASS_NAME}$Fs"
    hadoops_context = hadoop_fs.FileContext.getFileContext(local, hadoops_configuration)
    assert hadoops_context.getDefaultFileSystem().getClass().getName() == \
        "org.apache.hadoop.fs.local.LocalFs"
    (tmp_path / "file").write_text("four")
    (tmp_path / "folder").mkdir()
    (tmp_path / "link").symlink_to(tmp_path / "file")
    (tmp_path / "dangling").symlink_to(tmp_path / "gone")

    def status(files: object, name: str) -> tuple[object, ...]:
        try:
            found = files.getFileLinkStatus(hadoop_fs.Path(name))  # type: ignore[attr-defined]
        except Exception as error:  # py4j's error: compare the Java exception's class
            return ("raised", type(error).__name__, "FileNotFoundException" in str(error))
        return (found.isSymlink(), str(found.getSymlink()) if found.isSymlink() else None,
                found.getLen(), found.isDirectory(), str(found.getPath()))

    names = [str(tmp_path / "file"), str(tmp_path / "folder"), str(tmp_path / "link"),
             (tmp_path / "link").as_uri(), str(tmp_path / "dangling"), str(tmp_path / "missing")]
    expected = [status(hadoops, name) for name in names]
    assert [status(ours, name) for name in names] == expected
    assert [status(hadoops_context, name) for name in names] == expected
    assert [status(context, name) for name in names] == expected
    assert [entry[0] for entry in expected] == [False, False, True, False, True, "raised"]

    gateway = spark.sparkContext._gateway
    assert gateway is not None

    def made(files: object, folder: Path) -> tuple[int, int, int]:
        """Modes of a folder, a file created in it and the file renamed, as Delta commits."""
        path = hadoop_fs.Path(str(folder / "log"))
        files.mkdir(path, hadoop_fs.permission.FsPermission.getDirDefault(), True)  # type: ignore[attr-defined]
        flags = jvm.java.util.EnumSet.of(hadoop_fs.CreateFlag.CREATE)
        stream = files.create(hadoop_fs.Path(str(folder / "log" / ".1.tmp")), flags,  # type: ignore[attr-defined]
                              gateway.new_array(hadoop_fs.Options.CreateOpts, 0))
        stream.write(b"{}")
        stream.close()
        files.rename(hadoop_fs.Path(str(folder / "log" / ".1.tmp")),  # type: ignore[attr-defined]
                     hadoop_fs.Path(str(folder / "log" / "1.json")),
                     gateway.new_array(hadoop_fs.Options.Rename, 0))
        return mode(folder / "log"), mode(folder / "log" / "1.json"), \
            len(list((folder / "log").iterdir()))

    assert made(context, tmp_path / "ours") == made(hadoops_context, tmp_path / "hadoops")
