"""Jars an embedded Spark needs beyond pyspark's own: Hadoop's S3A connector (`s3a://`).

pyspark ships Hadoop's client but not `hadoop-aws` and the AWS SDK it calls, so
executors could not write a table's files to `s3a://` storage. The project's
set-up (`make jars`, run by `make test` and `make demo`) fetches them once with
the ordinary Maven client: a generated one-dependency POM on
`org.apache.hadoop:hadoop-aws:<the Hadoop version pyspark ships>`, resolved by
`mvn dependency:copy-dependencies` (runtime scope: the AWS SDK bundle and the
S3 analytics accelerator come with it). Maven caches them in `~/.m2` and copies
them to `jar_folder()` (`$RECONCILE_JARS`, else `~/.cache/pipeline-reconciler/jars`).
A company mirror is configured the Maven way, in `~/.m2/settings.xml`. Nothing is
downloaded when a session starts.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from importlib.util import find_spec
from pathlib import Path

from reconciler.errors import ReconcileError

COMPLETE = "complete.txt"
"""Written last in a jar folder, listing its jars: a fetch cut short is fetched again."""

_POM = """<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>local.pipeline-reconciler</groupId><artifactId>jars</artifactId><version>1</version>
  <dependencies><dependency>
    <groupId>org.apache.hadoop</groupId><artifactId>hadoop-aws</artifactId>
    <version>{version}</version>
  </dependency></dependencies>
</project>
"""


def hadoop_version() -> str:
    """The Hadoop version of pyspark's own client jars (`hadoop-client-api-<v>.jar`)."""
    spec = find_spec("pyspark")
    if spec is None or spec.origin is None:
        raise ReconcileError("pyspark is not installed")
    jars = sorted((Path(spec.origin).parent / "jars").glob("hadoop-client-api-*.jar"))
    if not jars:
        raise ReconcileError("pyspark ships no hadoop-client-api jar: cannot tell its Hadoop "
                             "version")
    return jars[-1].stem.removeprefix("hadoop-client-api-")


def jar_folder() -> Path:
    configured = os.environ.get("RECONCILE_JARS")
    if configured:
        return Path(configured)
    cache = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(cache) / "pipeline-reconciler" / "jars"


def s3a_jars() -> list[Path] | None:
    """hadoop-aws and its runtime dependencies, or None when they were never fetched."""
    folder = jar_folder() / f"hadoop-aws-{hadoop_version()}"
    listed = folder / COMPLETE
    if not listed.is_file():
        return None
    jars = [folder / name for name in listed.read_text(encoding="utf-8").split()]
    return jars if all(jar.is_file() for jar in jars) else None


def fetch_s3a_jars() -> list[Path]:
    """Fetch the jars with `mvn` (nothing to do when they are there); one line on failure."""
    present = s3a_jars()
    if present is not None:
        return present
    version = hadoop_version()
    folder = jar_folder() / f"hadoop-aws-{version}"
    folder.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as build:
        (Path(build) / "pom.xml").write_text(_POM.format(version=version), encoding="utf-8")
        command = ["mvn", "--batch-mode", "--quiet", "dependency:copy-dependencies",
                   "-DincludeScope=runtime", f"-DoutputDirectory={folder}"]
        try:
            result = subprocess.run(command, cwd=build, capture_output=True, text=True,
                                    check=False, timeout=1800)
        except FileNotFoundError:
            raise ReconcileError("Maven (`mvn`) is not installed: it fetches hadoop-aws for "
                                 "s3a:// storage (e.g. `apt-get install maven`)") from None
    if result.returncode != 0:
        detail = next((line for line in result.stdout.splitlines() if "ERROR" in line),
                      result.stderr.strip()[:300])
        raise ReconcileError(f"mvn could not fetch org.apache.hadoop:hadoop-aws:{version}: "
                             f"{detail}")
    names = sorted(jar.name for jar in folder.glob("*.jar"))
    (folder / COMPLETE).write_text("\n".join(names) + "\n", encoding="utf-8")
    jars = s3a_jars()
    assert jars is not None
    return jars


if __name__ == "__main__":
    try:
        for jar in fetch_s3a_jars():
            print(jar)
    except ReconcileError as error:
        print(f"error: {error}", file=sys.stderr)
        sys.exit(1)
