"""Check that a usable Java runtime is present before anything starts a JVM.

PySpark's own failure when Java is missing is a long Py4J traceback; this turns
it into one line that says what to install.
"""

from __future__ import annotations

import os
import re
import shutil
import sys
from functools import cache

from reconciler.support.child_process import run_helper
from reconciler.support.errors import ReconcileError

MINIMUM_JAVA = 17


def jdk_tool(name: str) -> str | None:
    """A JDK program (`java`, `javac`) as Spark's launcher finds Java: in `JAVA_HOME/bin`
    when `JAVA_HOME` is set, else on `PATH`; None when it is not there."""
    java_home = os.environ.get("JAVA_HOME")
    tool = os.path.join(java_home, "bin", name) if java_home else shutil.which(name)
    return tool if tool and os.path.exists(tool) else None


def java_major_version() -> int:
    """Return the major version of the `java` that Spark would launch."""
    java = jdk_tool("java")
    if java is None:
        raise ReconcileError(
            f"Java not found: Spark needs a JDK {MINIMUM_JAVA}+ "
            "(e.g. `apt-get install openjdk-17-jdk-headless`, or set JAVA_HOME)"
        )
    return _version_of(java)


@cache
def _version_of(java: str) -> int:
    """The major version `java -version` prints, read once per process for each binary.

    Starting a JVM only to print its version costs a tenth of a second or more; a process
    that opens sessions again and again (the continuous runner, in-process commands)
    asked the same binary the same question each time. A failure is not cached.
    """
    result = run_helper([java, "-version"])  # no secret of the caller's: child_process
    match = re.search(r'version "(\d+)(?:\.(\d+))?', result.stderr + result.stdout)
    if not match:
        raise ReconcileError(f"{java}: cannot read the Java version from `java -version`")
    major = int(match.group(1))
    return int(match.group(2)) if major == 1 and match.group(2) else major


def require_java() -> int:
    """Raise a one-line error unless Java >= MINIMUM_JAVA is available."""
    major = java_major_version()
    if major < MINIMUM_JAVA:
        raise ReconcileError(
            f"Java {major} found, Spark 4 needs Java {MINIMUM_JAVA}+: install a newer JDK "
            "(e.g. `apt-get install openjdk-17-jdk-headless`) or point JAVA_HOME at one"
        )
    return major


if __name__ == "__main__":
    try:
        print(f"Java {require_java()} found")
    except ReconcileError as error:
        print(f"error: {error}", file=sys.stderr)
        sys.exit(1)
