"""Jars an embedded Spark needs beyond pyspark's own: Delta Lake's and Hadoop's S3A.

pyspark ships neither Delta Lake's Spark writer nor `hadoop-aws` (with the AWS
SDK it calls). The project's set-up (`make jars`, run by `make test`; `make demo`
fetches Delta's only) fetches both once with the ordinary Maven client, for the
installed packages' versions:

* **Delta** — `io.delta:delta-spark_<spark major.minor>_2.13:<delta-spark
  version>` and `io.delta:delta-storage:<same>`, exactly the coordinates
  `delta.configure_spark_with_delta_pip` asks Ivy for. Their Maven dependencies
  are excluded: Scala, Parquet, Jackson and Hadoop are pyspark's own, and the
  Delta Kernel jars serve other engines (their versions conflict with Spark's).
* **S3A** — `org.apache.hadoop:hadoop-aws:<the Hadoop version pyspark ships>`
  with its runtime dependencies (the AWS SDK bundle, the S3 analytics
  accelerator), and log4j 2's binding for the SLF4J 1.x API the bundle carries.
* **Kafka** — `org.apache.spark:spark-sql-kafka-0-10_2.13:<pyspark version>` with the
  Kafka client, token provider and connection pool at the versions its pom names (the
  rest of its closure is pyspark's own).

Each set is resolved by `mvn dependency:build-classpath` from a generated POM
into Maven's local repository inside the jar cache (`repository()`:
`$RECONCILE_JARS`, else `~/.cache/pipeline-reconciler/jars`), each jar stored once;
a folder per set and version lists its jars (`complete.txt`). Maven runs in a private
folder of the jar cache with an empty `.mvn/` of its own (`maven_base`), obeying no
`.mvn/` anyone left above a temporary folder. A company mirror is
configured the Maven way, in `~/.m2/settings.xml`. S3A's set (680 MB, most of it the AWS
SDK) is fetched only for a project whose storage is on S3 (`sets_for`), and goes on the
class path only of a session that may reach S3 (`session.jars_conf`). Nothing is
downloaded when a session starts. Which sets a project needs is read from its
`reconcile.yaml` and `pipeline.yaml` files by `project_jars`, through the checkout's safe
reader: the Action runs this module on any pull request's checkout.

`python -m reconciler.engine.spark.jars --spark-defaults` prints the lines a cluster
operator puts in `spark-defaults.conf` to give a standalone cluster the same
jars (the cluster's set-up, never the project's: see `desired/settings/project.py`).
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from importlib.metadata import PackageNotFoundError, version
from importlib.util import find_spec
from pathlib import Path

from reconciler.engine.spark import class_archive, local_fs
from reconciler.engine.spark.project_jars import project_storage, project_uses_kafka
from reconciler.support.child_process import run_helper
from reconciler.support.errors import ReconcileError

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
    only: tuple[str, ...] = ()
    """Artifact ids kept of the resolved closure (Maven still picks their versions from the
    artifacts' poms); empty keeps all."""

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
    return _pyspark_jar_version("hadoop-client-api")


def log4j_version() -> str:
    """The log4j 2 version pyspark ships (`log4j-core-<v>.jar`)."""
    return _pyspark_jar_version("log4j-core")


def _pyspark_jar_version(name: str) -> str:
    return pyspark_jar(name).stem.removeprefix(f"{name}-")


def _pyspark_jar_folder() -> Path:
    spec = find_spec("pyspark")
    if spec is None or spec.origin is None:
        raise ReconcileError("pyspark is not installed")
    return Path(spec.origin).parent / "jars"


def pyspark_jar(name: str) -> Path:
    """pyspark's own jar `name-<version>.jar`."""
    jars = sorted(_pyspark_jar_folder().glob(f"{name}-*.jar"))
    if not jars:
        raise ReconcileError(f"pyspark ships no {name} jar: cannot tell its version")
    return jars[-1]


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


def kafka_set() -> JarSet:
    """Spark's Kafka source and sink at pyspark's version, with the Kafka client, token
    provider and connection pool its pom names; the rest of its closure is pyspark's own."""
    spark = _installed("pyspark")
    name = f"spark-sql-kafka-0-10_{SCALA_VERSION}"
    return JarSet(f"{name}-{spark}", (Artifact("org.apache.spark", name, spark, transitive=True),),
                  only=(name, f"spark-token-provider-kafka-0-10_{SCALA_VERSION}",
                        "kafka-clients", "commons-pool2"))


def slf4j_binding_set() -> JarSet:
    """SLF4J 1.x's binding to log4j 2, at pyspark's log4j version. The AWS SDK bundle carries
    SLF4J 1.x's API, which comes first on the class path: finding no binding it printed
    three `SLF4J:` lines on every command's stderr and dropped Spark's log lines."""
    log4j = log4j_version()
    return JarSet(f"log4j-slf4j-impl-{log4j}", (Artifact(
        "org.apache.logging.log4j", "log4j-slf4j-impl", log4j, transitive=False),))


def jar_folder() -> Path:
    configured = os.environ.get("RECONCILE_JARS")
    if configured:
        return Path(configured)
    cache = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(cache) / "pipeline-reconciler" / "jars"


def repository() -> Path:
    """Maven's local repository for the sets, inside the jar cache: each jar is stored once
    (where `~/.m2` and a copy of the jars held the AWS SDK's 686 MB twice), and a CI cache
    of the jar folder holds everything a later run needs."""
    return jar_folder() / "maven"


def cached(jar_set: JarSet) -> list[Path] | None:
    """The set's jars, or None when they were never (completely) fetched. The listing
    names them by absolute path in `repository()` (a set fetched before names its copies
    in the set's folder, which still count)."""
    listed = jar_set.folder / COMPLETE
    if not listed.is_file():
        return None
    jars = [jar_set.folder / name for name in listed.read_text(encoding="utf-8").split()]
    return jars if all(jar.is_file() for jar in jars) else None


def delta_jars() -> list[Path] | None:
    return cached(delta_set())


def s3a_jars() -> list[Path] | None:
    """S3A's jars with the SLF4J binding that keeps them quiet; None unless both are fetched."""
    s3a, binding = cached(s3a_set()), cached(slf4j_binding_set())
    return None if s3a is None or binding is None else [*binding, *s3a]


def kafka_jars() -> list[Path] | None:
    return cached(kafka_set())


def pyspark_jars() -> list[str]:
    """pyspark's own jars, by path, in order: what an embedded JVM's class path holds after
    `class_path_start` (part of the class archive's name: an archive records its jars by
    path, so a pyspark installed elsewhere, another virtual environment's, needs its own)."""
    return sorted(str(path) for path in _pyspark_jar_folder().glob("*.jar"))


def local_fs_jar() -> Path | None:
    """The compiled local file system without `chmod` or `readlink` processes (`local_fs`), or
    None."""
    return local_fs.compiled(jar_folder(), pyspark_jar("hadoop-client-api"))


def class_path_start() -> list[Path]:
    """What every embedded session's class path starts with, ahead of pyspark's own jars:
    Delta's jars and the local file system's, as far as the set-up made them. The same for
    every session, so one class archive fits them all (`class_archive`)."""
    jar = local_fs_jar()
    return [*(delta_jars() or []), *([jar] if jar is not None else [])]


def class_archive_file() -> Path | None:
    """Where the class archive for this JDK and this class path lives (`class_archive`)."""
    start = [str(jar) for jar in class_path_start()]
    return class_archive.archive_file(jar_folder(), [*start, *pyspark_jars()])


@contextmanager
def maven_base() -> Iterator[Path]:
    """A private base folder for one `mvn` run, removed afterwards: fresh, in the jar cache,
    mode 0700 (`mkdtemp`), holding an empty `.mvn/` of its own.

    Maven's launcher walks up from its working directory (or `-f`'s folder) to the first
    folder holding `.mvn/` and obeys `jvm.config` (its JVM's options: `-javaagent:` runs
    code), `maven.config` (its arguments) and `extensions.xml` (its plug-ins) there. Under
    `$TMPDIR` (`/tmp`, which every local user writes) the first such folder could be
    anyone's; here the walk stops at once, at this empty one, so Maven's options are only
    the operator's own: `MAVEN_OPTS`, `MAVEN_ARGS` and `~/.m2`, which `run_helper` passes
    on and no pull request sets. (`-Dmaven.multiModuleProjectDirectory` is not passed: the
    launcher sets it from the same walk, to this folder.)"""
    cache = jar_folder()
    cache.mkdir(parents=True, exist_ok=True)
    build = Path(tempfile.mkdtemp(prefix=".maven-", dir=cache))
    try:
        (build / ".mvn").mkdir()
        yield build
    finally:
        shutil.rmtree(build, ignore_errors=True)


def fetch(jar_set: JarSet) -> list[Path]:
    """Fetch a set with `mvn` (nothing to do when it is cached); one line on failure."""
    present = cached(jar_set)
    if present is not None:
        return present
    folder = jar_set.folder
    folder.mkdir(parents=True, exist_ok=True)
    pom = _POM.format(dependencies="\n".join(a.pom_entry() for a in jar_set.artifacts))
    with maven_base() as build:
        (build / "pom.xml").write_text(pom, encoding="utf-8")
        listing = build / "classpath.txt"
        command = ["mvn", "--batch-mode", "--quiet", "-f", str(build / "pom.xml"),
                   f"-Dmaven.repo.local={repository()}",
                   "dependency:build-classpath", "-DincludeScope=runtime",
                   f"-Dmdep.outputFile={listing}"]
        if jar_set.only:
            command.append(f"-DincludeArtifactIds={','.join(jar_set.only)}")
        try:  # no secret of the caller's in Maven's environment: child_process
            result = run_helper(command, cwd=build, timeout=1800)
        except FileNotFoundError:
            raise ReconcileError("Maven (`mvn`) is not installed: it fetches Delta Lake's and "
                                 "hadoop-aws's jars (e.g. `apt-get install maven`)") from None
        if result.returncode != 0:
            detail = next((line for line in result.stdout.splitlines() if "ERROR" in line),
                          result.stderr.strip()[:300])
            raise ReconcileError(f"mvn could not fetch {jar_set.describe()}: {detail}")
        jars = sorted(listing.read_text(encoding="utf-8").strip().split(os.pathsep))
    (folder / COMPLETE).write_text("\n".join(jars) + "\n", encoding="utf-8")
    fetched = cached(jar_set)
    assert fetched is not None  # COMPLETE was just written, listing the jars mvn fetched
    return fetched


def spark_defaults() -> str:
    """`spark-defaults.conf` lines giving a standalone cluster (driver and executors on
    this machine's paths) Delta through `spark.jars` and S3A on both class paths."""
    delta, s3a = fetch(delta_set()), [*fetch(slf4j_binding_set()), *fetch(s3a_set())]
    class_path = os.pathsep.join(str(jar) for jar in s3a)
    return "\n".join([f"spark.jars {','.join(str(jar) for jar in delta)}",
                      f"spark.sql.extensions {DELTA_EXTENSION}",
                      f"spark.sql.catalog.spark_catalog {DELTA_CATALOG}",
                      f"spark.driver.extraClassPath {class_path}",
                      f"spark.executor.extraClassPath {class_path}"]) + "\n"


def needs_s3a(storage: str) -> bool:
    """Whether Delta tables at `storage` are reached through Hadoop's S3A (`s3://` too)."""
    return storage.strip().lower().startswith(("s3a://", "s3://"))


def sets_for(storage: str | None, kafka: bool = False) -> list[JarSet]:
    """The sets a project storing its tables at `storage` needs: Delta's always, S3A's only
    for `s3a://`/`s3://` (its 680 MB AWS SDK bundle is of no use to a local project),
    Kafka's with `kafka`. None (no project named) asks for every set, as `make test` does."""
    if storage is None:
        return [delta_set(), s3a_set(), slf4j_binding_set(), kafka_set()]
    wanted = [delta_set()]
    if needs_s3a(storage):
        wanted += [s3a_set(), slf4j_binding_set()]
    return [*wanted, kafka_set()] if kafka else wanted


def _arguments(arguments: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m reconciler.engine.spark.jars",
        description="Fetch the jars embedded Spark needs (Delta Lake's; S3A's for s3a:// "
                    "storage) with Maven, once, into the jar cache.")
    parser.add_argument("--project", type=Path, help="only what this project's storage needs")
    parser.add_argument("--storage", default="",
                        help="the storage to fetch for, over the project's reconcile.yaml")
    parser.add_argument("--cache-key", action="store_true",
                        help="print `key=<the sets' versions>` (a CI cache key), fetch nothing")
    parser.add_argument("--spark-defaults", action="store_true",
                        help="print spark-defaults.conf lines for a standalone cluster")
    parser.add_argument("--no-class-archive", action="store_true",
                        help="do not make the class archive embedded JVMs start from "
                             "(about a minute, once per JDK and jars)")
    return parser.parse_args(arguments)


def main(arguments: list[str]) -> int:
    options = _arguments(arguments)
    try:
        if options.spark_defaults:
            print(spark_defaults(), end="")
            return 0
        storage = options.storage or (None if options.project is None
                                      else project_storage(options.project))
        wanted = sets_for(storage, kafka=options.project is not None
                          and project_uses_kafka(options.project))
        if options.cache_key:
            print(f"key={'+'.join(jar_set.folder_name for jar_set in wanted)}")
            return 0
        for jar_set in wanted:
            fetch(jar_set)
            print(f"{jar_set.describe()}: {jar_set.folder}")
    except ReconcileError as error:
        print(f"error: {error}", file=sys.stderr)
        return 1
    _compile_local_fs()
    if not options.no_class_archive:
        _make_class_archive()
    return 0


def _compile_local_fs() -> None:
    """The local file system without `chmod` or `readlink` processes, compiled if it can be:
    sessions without it are slower, never wrong, so a failure is a warning, not the set-up's
    end."""
    try:
        classes = local_fs.compile_classes(jar_folder(), pyspark_jar("hadoop-client-api"))
    except ReconcileError as error:
        print(f"warning: {error}; local paths keep Hadoop's chmod per file", file=sys.stderr)
        return
    shown = classes or "not compiled (no javac): local paths keep Hadoop's chmod per file"
    print(f"{local_fs.CLASS_NAME}: {shown}")


def _make_class_archive() -> None:
    """The class archive embedded JVMs start from (`class_archive`), made if it can be:
    sessions without it start slower, never wrong, so a failure is a warning."""
    archive = class_archive_file()
    if archive is None:
        return
    try:
        class_archive.build(archive)
    except ReconcileError as error:
        print(f"warning: {error}; embedded Spark starts without it", file=sys.stderr)
        return
    print(f"class archive: {archive}")


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
