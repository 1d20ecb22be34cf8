"""What a JVM the reconciler starts inherits: a cleaned environment, no stdout, a filtered stderr.

Pipeline SQL comes from pull requests, so the JVM must not see the caller's secrets
(``GITHUB_TOKEN``, action inputs, runner tokens): only ``JVM_ENVIRONMENT`` passes. Every
JVM started here also gets ``SAFE_JAVA_OPTIONS`` (``with_safe_java_options``).

The JVM prints ``WARNING: Using incubator modules: jdk.incubator.vector`` at start,
for the ``--add-modules`` flag Spark's launcher always passes; no logging setting or
JVM flag reaches it, and a user can do nothing about it. So the JVM's stderr reaches
ours through a pipe that drops exactly that line (``_IncubatorWarningFilter``) and
passes everything else as it comes.
"""

from __future__ import annotations

import os
import re
import sys
import threading
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path

JVM_ENVIRONMENT = re.compile(
    r"(PATH|HOME|USER|LOGNAME|HOSTNAME|LANG|LC_\w+|TZ|TMPDIR|TEMP|TMP|LD_LIBRARY_PATH"
    r"|JAVA_HOME|SPARK_\w+|PYSPARK_\w+|PYTHON\w*|VIRTUAL_ENV|HADOOP_\w+|YARN_CONF_DIR"
    r"|AWS_\w+|AZURE_\w+|GOOGLE_\w+|KRB5\w*)")
"""Variables the JVM may inherit: what Java, Spark, its Python workers and the storage
clients read. Everything else (``GITHUB_TOKEN``, ``INPUT_*``, ``ACTIONS_*`` tokens,
any other secret of the caller's) stays out of reach of the SQL Spark runs."""


SAFE_JAVA_OPTIONS = "-Dorg.apache.kafka.automatic.config.providers=none"
"""System properties of every Spark JVM the reconciler starts (the driver, where an embedded
session's tasks run too, and the warm server): Kafka's client instantiates no config
provider, so no setting can make it read an environment variable or a file into what it
sends a broker (`${env:AWS_SECRET_ACCESS_KEY}`), whatever reaches it. Connector options are
held to an allow-list before (`desired.settings.client_options`); this holds for a setting that
check would miss. A cluster's executors are its operator's (`docs/clusters.md`)."""


def with_safe_java_options(environment: Mapping[str, str]) -> dict[str, str]:
    """`environment` whose ``SPARK_SUBMIT_OPTS`` (the operator's first) ends with
    `SAFE_JAVA_OPTIONS`: Spark's launcher puts that variable on the command line of the JVM
    that `spark-submit` starts, the driver, before any ``spark.driver.extraJavaOptions``,
    and no conf of a session replaces it (a builder's ``spark.driver.extraJavaOptions``
    would replace the operator's ``spark-defaults.conf`` value)."""
    operator = environment.get("SPARK_SUBMIT_OPTS", "")
    return {**environment, "SPARK_SUBMIT_OPTS": f"{operator} {SAFE_JAVA_OPTIONS}".strip()}


INCUBATOR_WARNING = b"WARNING: Using incubator modules: jdk.incubator.vector\n"
"""What every JVM Spark 4 starts prints first on stderr, for an ``--add-modules`` flag of
Spark's launcher; no setting silences it, and it asks nothing of the user."""


class _IncubatorWarningFilter(threading.Thread):
    """Copies a pipe to a file descriptor as bytes arrive, less every line that is exactly
    ``INCUBATOR_WARNING``. Only the start of a line is held back, and only while it can
    still be that line; partial lines (a progress bar's ``\r``) pass at once."""

    def __init__(self, source: int, target: int) -> None:
        super().__init__(name="jvm-stderr", daemon=True)
        self.source, self.target = source, target
        self._held = b""  # the start of a line that may still become the warning
        self._line_start = True

    def run(self) -> None:
        try:
            while chunk := os.read(self.source, 65536):
                self._write(self._filtered(self._held + chunk))
            self._write(self._held)
        except OSError:  # our stderr went away (the process is ending)
            pass
        finally:
            os.close(self.source)
            os.close(self.target)

    def _filtered(self, data: bytes) -> bytes:
        """`data` to pass on; sets `_held` to its tail that may yet be the warning."""
        out, position, warning = bytearray(), 0, INCUBATOR_WARNING
        self._held = b""
        while position < len(data):
            if self._line_start:
                head = data[position:position + len(warning)]
                if head == warning:
                    position += len(warning)
                    continue
                if len(head) < len(warning) and warning.startswith(head):
                    self._held = head
                    break
            newline = data.find(b"\n", position)
            end = len(data) if newline < 0 else newline + 1
            out += data[position:end]
            position, self._line_start = end, newline >= 0
        return bytes(out)

    def _write(self, data: bytes) -> None:
        while data:
            data = data[os.write(self.target, data):]


def with_appended_jars(environment: dict[str, str], jars: Sequence[Path]) -> dict[str, str]:
    """`environment` whose ``SPARK_DIST_CLASSPATH`` (the caller's own first) ends with
    `jars`: Spark's launcher puts that variable's entries after pyspark's own jars, so the
    start of the class path stays the one the class archive was made with
    (`class_archive`). Spark-defined classes are not in these jars, so their order
    changes nothing else."""
    if not jars:
        return environment
    entries = [environment.get("SPARK_DIST_CLASSPATH", ""), *(str(jar) for jar in jars)]
    return environment | {"SPARK_DIST_CLASSPATH": os.pathsep.join(e for e in entries if e)}


@contextmanager
def jvm_launch(appended: Sequence[Path] = ()) -> Iterator[None]:
    """What the JVM inherits when it starts: a cleaned environment and no stdout.

    ``os.environ`` holds only ``JVM_ENVIRONMENT`` (plus ``PYTHONSAFEPATH=1``,
    ``SAFE_JAVA_OPTIONS`` in ``SPARK_SUBMIT_OPTS`` and the `appended` jars at the end of
    the class path: ``with_appended_jars``), and
    file descriptor 1 points at stderr, so whatever the JVM ever writes to its stdout
    (unified logging such as a GC warning, ``System.out``) lands on stderr: stdout
    carries only what a command prints (``--json``, ``--format json``). Its stderr is a
    pipe to ours that leaves out ``INCUBATOR_WARNING``. The caller's environment, stdout
    and stderr are put back once the JVM runs.
    """
    saved = dict(os.environ)
    sys.stdout.flush()
    sys.stderr.flush()
    saved_stdout, saved_stderr = os.dup(1), os.dup(2)
    source, sink = os.pipe()
    _IncubatorWarningFilter(source, os.dup(2)).start()
    try:
        kept = {key: value for key, value in saved.items() if JVM_ENVIRONMENT.fullmatch(key)}
        os.environ.clear()
        os.environ.update(with_safe_java_options(with_appended_jars(kept, appended))
                          | {"PYTHONSAFEPATH": "1"})
        os.dup2(sink, 2)
        os.dup2(sink, 1)
        yield
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os.dup2(saved_stdout, 1)
        os.dup2(saved_stderr, 2)
        for fd in (saved_stdout, saved_stderr, sink):
            os.close(fd)
        os.environ.clear()
        os.environ.update(saved)
