"""A class data sharing archive of Spark's classes, so an embedded JVM starts in half the time.

Why: an embedded session's JVM loads and verifies Spark's and Delta's classes before its
first job. Measured on this project's 2-core machine with the tests' JVM flags (a probe
reading the JVM's CPU from /proc; not a committed bench): starting a session took 9.5-11.8 s
of the JVM's CPU and its first job 5.2-6.4 s more; with an archive 4.9-5.4 s and 2.3-2.6 s;
through a Delta write and read, 30.0-32.8 s against 17.4-18.4 s. Every command that starts
embedded Spark pays that start (`apply`, `run`, `reconcile test`): `bench/README.md` has
them timed with and without the archive.

Java's class data sharing (CDS) maps classes from an archive instead of parsing and
verifying them. The project's set-up (`python -m reconciler.engine.spark.jars`, after the
jars) makes one: a child process starts an embedded session the way a command does, with
`-XX:ArchiveClassesAtExit`, runs a small workload through Spark SQL and Delta Lake, and the
JVM writes the classes it loaded when it exits (a dynamic archive, about 200 MB). It is
written under a temporary name and moved into place whole; the cache keeps the newest
three (`KEPT_ARCHIVES`).

A JVM can map an archive only when its class path starts with the one the archive was
made with. So every embedded session's class path starts the same way (`archived_class_path`:
Delta's jars and the local file system's, then pyspark's own), and the jars only some
sessions need (S3A's, Kafka's) come after pyspark's (`launch.jvm_launch`). The archive's
name is a digest of the JDK and of that class path, each jar by its path, size and
modification time, the three things the JVM checks before it maps an archive. So a new JDK,
pyspark or Delta, or another virtual environment, even one made again at the same path (as
CI does on every run, with the jar cache kept), makes a new one at the next set-up, and a
session looks only for its own. A JVM that still finds a jar changed (one replaced after the
set-up) starts without sharing, silently: a stale archive is slower, never wrong. Without an
archive nothing changes.
"""

from __future__ import annotations

import hashlib
import os
import sys
import tempfile
from pathlib import Path

from reconciler.engine.spark.java import jdk_tool
from reconciler.support.child_process import run_helper
from reconciler.support.errors import ReconcileError

FORMAT = "1"
"""Part of the digest: a change to how the archive is made makes a new one."""

BUILD_SECONDS = 600.0
"""How long the set-up waits for the child that makes the archive (the whole set-up with it
took 82 s here, the jars already fetched)."""

QUIET = "-Xlog:cds=off -Xlog:cds+dynamic=off"
"""A JVM that cannot use the archive says so on stdout; it starts without it, which is
all the user needs to know: nothing."""


def archive_file(cache: Path, class_path: list[str]) -> Path | None:
    """Where the archive for this JDK and `class_path` lives in the jar cache `cache`;
    None without a JDK to name."""
    java = jdk_tool("java")
    if java is None:
        return None
    home = Path(os.path.realpath(java)).parent.parent
    release = home / "release"  # JAVA_VERSION and the build, in every JDK since 9
    identity = [FORMAT, str(home), release.read_text() if release.is_file() else "",
                *(_as_mapped(entry) for entry in class_path)]
    digest = hashlib.sha256("\n".join(identity).encode()).hexdigest()
    return cache / "class-archive" / f"{digest[:16]}.jsa"


def _as_mapped(entry: str) -> str:
    """A class path entry as the JVM validates it against an archive: its path, size and
    modification time (an entry that is not there is named by its path alone)."""
    try:
        status = os.stat(entry)
    except OSError:
        return entry
    return f"{entry} {status.st_size} {status.st_mtime_ns}"


def java_options(archive: Path | None) -> str:
    """The JVM flags that map `archive`, when it was made; else none."""
    if archive is None or not archive.is_file():
        return ""
    return f"-XX:SharedArchiveFile={archive} -Xshare:auto {QUIET}"


def build(archive: Path) -> Path:
    """Make `archive` once (nothing to do when it exists); a one-line error when the child
    that makes it (this interpreter, `archive_workload`) fails."""
    if archive.is_file():
        return archive
    archive.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix=".building-", dir=archive.parent) as building:
        written, log = Path(building) / archive.name, Path(building) / "cds.log"
        result = run_helper([sys.executable, "-I", "-m", "reconciler.engine.spark.archive_workload",
                             str(written), str(log)], timeout=BUILD_SECONDS)
        if result.returncode != 0 or not written.is_file():
            raise ReconcileError(f"the class archive was not made: {_reason(result.stderr, log)}")
        os.replace(written, archive)
    _prune(archive.parent, keep=archive)
    return archive


KEPT_ARCHIVES = 3
"""Archives kept in the jar cache: this one and the newest others (another virtual
environment's, or the last JDK's), about 200 MB each."""


def _prune(folder: Path, keep: Path) -> None:
    """Remove all but the `KEPT_ARCHIVES` newest archives. A session whose archive went
    starts without one, and its environment's next set-up makes it again."""
    others = sorted((path for path in folder.glob("*.jsa") if path != keep),
                    key=lambda path: path.stat().st_mtime, reverse=True)
    for path in others[KEPT_ARCHIVES - 1:]:
        path.unlink(missing_ok=True)


def _reason(stderr: str, log: Path) -> str:
    """The JVM's own error about the archive, else the child's last line."""
    lines = log.read_text(errors="replace").splitlines() if log.is_file() else []
    errors = [line.split("]")[-1].strip() for line in lines if "[error" in line]
    if errors:
        return errors[0]
    return (stderr.strip().splitlines() or ["the child ended without a word"])[-1]
