"""Hadoop's local file system without a `chmod` or `readlink` child process per file.

Why: pyspark ships no native Hadoop library, and without one Hadoop's
`RawLocalFileSystem.setPermission` runs `chmod` in a child process of the JVM. Hadoop sets
the permission of every folder it makes and every file it creates on a local path: each
data file of a write, its `.crc` checksum, each of the commit protocol's temporary folders,
Delta's log files. A JFR recording of the test session over the maintenance tests (257 s)
counted 2,983 child processes, 2,721 of them `chmod`. Each costs the JVM a fork, a
thread reading its output and a wait: 300 of Hadoop's `mkdirs` of two new folders each
took 2.8 to 3.9 s with `chmod` and 0.3 to 0.5 s without (a probe in one session), and
the orders example's steps take 0.90x the time (`bench/local_fs_bench.py`, `bench/README.md`).
FileContext, through which Delta's log store writes each commit and renames it into place,
has a `file:` class of its own (`LocalFs`) over a RawLocalFileSystem of its own, and its
rename asks each file's link status, which Hadoop reads with a `readlink` process: with
only FileSystem's class replaced, a recording over four test files (272 s of the JVM's
CPU) still counted 956 child processes, 728 `readlink` and 210 `chmod`, all from
FileContext; with FileContext's class replaced too, 18, none of them either (258 s).

`ForklessLocalFileSystem.java` (in `java_src/`) is Hadoop's `LocalFileSystem` whose
permissions are set, and links read, through java.nio, the same bits and the same answers
in the JVM's own process; its `$Fs` is Hadoop's `LocalFs` over it, for FileContext;
everything else is Hadoop's. The project's set-up (`python -m
reconciler.engine.spark.jars`, run by `make jars` and the Action) compiles it with the
JDK's `javac` against the Hadoop jar pyspark ships, once, into a jar in the jar cache (in
a folder named by a digest of the source and that jar, so a new pyspark or a changed
source compiles again). A jar, not a folder of classes: Java's class data sharing
(`class_archive`) refuses a class path with a folder on it. An embedded session then uses
it for `file:` paths (`SESSION_CONF`, in `session.jars_conf`); a cluster or Spark Connect
keeps its own. Without `javac` (a Java runtime without the compiler), nothing is compiled
and Hadoop's class is used, as before: slower, never wrong.

A sticky bit, which java.nio cannot set, and a file system without POSIX permissions
still go through Hadoop's own `chmod`.
"""

from __future__ import annotations

import hashlib
import shutil
import tempfile
import zipfile
from functools import cache
from pathlib import Path

from reconciler.engine.spark.java import jdk_tool
from reconciler.support.child_process import run_helper
from reconciler.support.errors import ReconcileError

SOURCE = Path(__file__).with_name("java_src") / "ForklessLocalFileSystem.java"
CLASS_NAME = "pipeline_reconciler.ForklessLocalFileSystem"
SESSION_CONF = {"spark.hadoop.fs.file.impl": CLASS_NAME,
                "spark.hadoop.fs.AbstractFileSystem.file.impl": f"{CLASS_NAME}$Fs"}
"""A session's `file:` paths through the class: FileSystem's, and FileContext's, through
which Delta's log store renames each commit into place."""
JAR_NAME = "forkless-local-fs.jar"


def jar_folder(cache: Path, hadoop_jar: Path) -> Path:
    """Where the jar compiled against `hadoop_jar` lives in the jar cache `cache`."""
    digest = hashlib.sha256(_source() + hadoop_jar.name.encode() + JAR_NAME.encode()
                            ).hexdigest()
    return cache / "local-fs" / digest[:16]


@cache
def _source() -> bytes:
    """The Java source, read once per process: a session's start asks for the jar three
    times (its `file:` settings, its class path, its class archive's name)."""
    return SOURCE.read_bytes()


def compiled(cache: Path, hadoop_jar: Path) -> Path | None:
    """The jar holding the compiled class, or None when it was never compiled."""
    jar = jar_folder(cache, hadoop_jar) / JAR_NAME
    return jar if jar.is_file() else None


def compile_classes(cache: Path, hadoop_jar: Path) -> Path | None:
    """Compile the class into a jar in the jar cache once; None without a `javac` to
    compile it.

    Built in a temporary folder beside the final one and moved into place whole, so a
    session never finds half a jar, whatever ran at the same time."""
    present = compiled(cache, hadoop_jar)
    if present is not None:
        return present
    compiler = jdk_tool("javac")  # beside the `java` Spark launches
    if compiler is None:
        return None
    folder = jar_folder(cache, hadoop_jar)
    folder.parent.mkdir(parents=True, exist_ok=True)
    building = Path(tempfile.mkdtemp(prefix=".building-", dir=folder.parent))
    try:
        classes = building / "classes"
        result = run_helper([compiler, "--release", "17", "-nowarn", "-classpath",
                             str(hadoop_jar), "-d", str(classes), str(SOURCE)], timeout=300)
        if result.returncode != 0:
            detail = (result.stderr.strip().splitlines() or ["no output"])[0]
            raise ReconcileError(f"javac could not compile {SOURCE.name}: {detail}")
        _write_jar(classes, building / JAR_NAME)
        shutil.rmtree(classes)
        try:
            building.rename(folder)
        except OSError:  # another set-up moved its copy into place first
            if compiled(cache, hadoop_jar) is None:
                raise
    finally:
        shutil.rmtree(building, ignore_errors=True)
    return folder / JAR_NAME


def _write_jar(classes: Path, jar: Path) -> None:
    """The compiled classes as a jar (a zip of them; no manifest is needed on a class
    path), entries in a fixed order."""
    with zipfile.ZipFile(jar, "w", zipfile.ZIP_DEFLATED) as archive:
        for path in sorted(classes.rglob("*.class")):
            archive.write(path, path.relative_to(classes).as_posix())
