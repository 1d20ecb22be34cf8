"""Jars an embedded Spark needs beyond pyspark's own: Delta Lake's and Hadoop's S3A.

pyspark ships neither Delta Lake's Spark writer nor `hadoop-aws` (with the AWS
SDK it calls). The project's set-up (`make jars`, run by `make test` and
`make demo`) fetches both once with the ordinary Maven client, for the
installed packages' versions:

* **Delta** — `io.delta:delta-spark_<spark major.minor>_2.13:<delta-spark
  version>` and `io.delta:delta-storage:<same>`, exactly the coordinates
  `delta.configure_spark_with_delta_pip` asks Ivy for. Their Maven dependencies
  are excluded: Scala, Parquet, Jackson and Hadoop are pyspark's own, and the
  Delta Kernel jars serve other engines (their versions conflict with Spark's).
* **S3A** — `org.apache.hadoop:hadoop-aws:<the Hadoop version pyspark ships>`
  with its runtime dependencies (the AWS SDK bundle, the S3 analytics
  accelerator).

Each set is resolved by `mvn dependency:copy-dependencies` from a generated
POM; Maven caches the downloads in `~/.m2` and copies the jars to a folder per
set and version under `jar_folder()` (`$RECONCILE_JARS`, else
`~/.cache/pipeline-reconciler/jars`). A company mirror is configured the Maven
way, in `~/.m2/settings.xml`. Nothing is downloaded when a session starts.

`python -m reconciler.engine.jars --spark-defaults` prints the lines a cluster
operator puts in `spark-defaults.conf` to give a standalone cluster the same
jars (the cluster's set-up, never the project's: see `desired/project.py`).
"""

from __future__ import annotations

import os
import sys
import tempfile
from dataclasses import dataclass
from importlib.metadata import PackageNotFoundError, version
from importlib.util import find_spec
from pathlib import Path

from reconciler.child_process import run_helper
from reconciler.errors import ReconcileError

COMPLETE = "complete.txt"
"""Written last in a jar folder, listing its jars: a fetch cut short is fetched again."""

SCALA_VERSION = "2.13"
DELTA_EXTENSION = "io.delta.sql.DeltaSparkSessionExtension"
DELTA_CATALOG = "org.apache.spark.sql.delta.catalog.DeltaCatalog"

_DEPENDENCY = """    <dependency>
      <groupId>{group}</groupId><artifactId>{name}</artifactId><version>{version}</version>
      {exclusions}
    </dependency>"""
_NO_TRANSITIVES = "<exclusions><exclusion><groupId>*</groupId><artifactId>*</artifactId>" \
                  "</exclusion></exclusions>"
_POM = """<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>local.pipeline-reconciler</groupId><artifactId>jars</artifactId><version>1</version>
  <dependencies>
{dependencies}
  </dependencies>
</project>
"""


@dataclass(frozen=True)
class Artifact:
    """One Maven artifact; `transitive` says whether its own dependencies come along."""

    group: str
    name: str
    version: str
    transitive: bool

    def pom_entry(self) -> str:
        return _DEPENDENCY.format(group=self.group, name=self.name, version=self.version,
                                  exclusions="" if self.transitive else _NO_TRANSITIVES)


@dataclass(frozen=True)
class JarSet:
    """Jars fetched and cached together, in a folder named after their versions."""

    folder_name: str
    artifacts: tuple[Artifact, ...]

    @property
    def folder(self) -> Path:
        return jar_folder() / self.folder_name

    def describe(self) -> str:
        return ", ".join(f"{a.group}:{a.name}:{a.version}" for a in self.artifacts)


def _installed(package: str) -> str:
    try:
        return version(package)
    except PackageNotFoundError:
        raise ReconcileError(f"the Python package {package} is not installed") from None


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


def delta_set() -> JarSet:
    """Delta Lake's Spark writer for the installed pyspark and delta-spark."""
    delta = _installed("delta-spark")
    spark = ".".join(_installed("pyspark").split(".")[:2])
    name = f"delta-spark_{spark}_{SCALA_VERSION}"
    return JarSet(f"{name}-{delta}", (Artifact("io.delta", name, delta, transitive=False),
                                      Artifact("io.delta", "delta-storage", delta,
                                               transitive=False)))


def s3a_set() -> JarSet:
    """Hadoop's S3A connector at pyspark's Hadoop version, with the AWS SDK."""
    hadoop = hadoop_version()
    return JarSet(f"hadoop-aws-{hadoop}",
                  (Artifact("org.apache.hadoop", "hadoop-aws", hadoop, transitive=True),))


def jar_folder() -> Path:
    configured = os.environ.get("RECONCILE_JARS")
    if configured:
        return Path(configured)
    cache = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(cache) / "pipeline-reconciler" / "jars"


def cached(jar_set: JarSet) -> list[Path] | None:
    """The set's jars, or None when they were never (completely) fetched."""
    listed = jar_set.folder / COMPLETE
    if not listed.is_file():
        return None
    jars = [jar_set.folder / name for name in listed.read_text(encoding="utf-8").split()]
    return jars if all(jar.is_file() for jar in jars) else None


def delta_jars() -> list[Path] | None:
    return cached(delta_set())


def s3a_jars() -> list[Path] | None:
    return cached(s3a_set())


def fetch(jar_set: JarSet) -> list[Path]:
    """Fetch a set with `mvn` (nothing to do when it is cached); one line on failure."""
    present = cached(jar_set)
    if present is not None:
        return present
    folder = jar_set.folder
    folder.mkdir(parents=True, exist_ok=True)
    pom = _POM.format(dependencies="\n".join(a.pom_entry() for a in jar_set.artifacts))
    with tempfile.TemporaryDirectory() as build:
        (Path(build) / "pom.xml").write_text(pom, encoding="utf-8")
        command = ["mvn", "--batch-mode", "--quiet", "dependency:copy-dependencies",
                   "-DincludeScope=runtime", f"-DoutputDirectory={folder}"]
        try:  # no secret of the caller's in Maven's environment: child_process
            result = run_helper(command, cwd=Path(build), timeout=1800)
        except FileNotFoundError:
            raise ReconcileError("Maven (`mvn`) is not installed: it fetches Delta Lake's and "
                                 "hadoop-aws's jars (e.g. `apt-get install maven`)") from None
    if result.returncode != 0:
        detail = next((line for line in result.stdout.splitlines() if "ERROR" in line),
                      result.stderr.strip()[:300])
        raise ReconcileError(f"mvn could not fetch {jar_set.describe()}: {detail}")
    names = sorted(jar.name for jar in folder.glob("*.jar"))
    (folder / COMPLETE).write_text("\n".join(names) + "\n", encoding="utf-8")
    jars = cached(jar_set)
    assert jars is not None
    return jars


def spark_defaults() -> str:
    """`spark-defaults.conf` lines giving a standalone cluster (driver and executors on
    this machine's paths) Delta through `spark.jars` and S3A on both class paths."""
    delta, s3a = fetch(delta_set()), fetch(s3a_set())
    class_path = os.pathsep.join(str(jar) for jar in s3a)
    return "\n".join([f"spark.jars {','.join(str(jar) for jar in delta)}",
                      f"spark.sql.extensions {DELTA_EXTENSION}",
                      f"spark.sql.catalog.spark_catalog {DELTA_CATALOG}",
                      f"spark.driver.extraClassPath {class_path}",
                      f"spark.executor.extraClassPath {class_path}"]) + "\n"


def main(arguments: list[str]) -> int:
    try:
        if arguments == ["--spark-defaults"]:
            print(spark_defaults(), end="")
            return 0
        for jar_set in (delta_set(), s3a_set()):
            fetch(jar_set)
            print(f"{jar_set.describe()}: {jar_set.folder}")
    except ReconcileError as error:
        print(f"error: {error}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
