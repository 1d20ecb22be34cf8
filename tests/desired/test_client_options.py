"""Options that reach a client library are code (`desired.settings.client_options`),
through the real `reconcile validate`, `plan` and `run`.

A pull request writes pipeline.yaml; someone who can write the state prefix writes the
committed manifest's connectors. Either could make Kafka's Java client send
`${env:AWS_SECRET_ACCESS_KEY}` or a file to a broker it names (config providers), or
have Hadoop load a class, read a credential or talk to another endpoint (a files
connector's options reach the Hadoop configuration of its read). Each family is refused
with one line naming the file, the line and the option; nothing here starts Spark.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from reconciler.desired.settings.project import settings_summary
from reconciler.desired.workspace import load_programs
from reconciler.state.manifest import Manifest
from state_backends import LocalBackend
from tests.cli_helpers import reconcile
from tests.projects import program_of, write_files

SQL = "create table orders (id bigint, customer string);\n"
SECRET = "hunter2-do-not-print"
KAFKA = """\
name: p
connectors:
  - name: orders_in
    table: orders
    type: kafka
    format: json
    bootstrap_servers: 127.0.0.1:1
    topic: orders
"""
FILES = """\
name: p
connectors:
  - name: orders_in
    table: orders
    type: {type}
    path: input
"""
ENV_PROVIDER = "org.apache.kafka.common.config.provider.EnvVarConfigProvider"


def project(root: Path, spec: str, options: dict[str, str], field: str = "options") -> Path:
    """Pipeline `p` whose one connector (`spec`) has `options` under `field`, one a line."""
    lines = "".join(f"      {key}: {value}\n" for key, value in options.items())
    write_files(root, {"reconcile.yaml": "", "pipelines/p/program.sql": SQL})
    (root / "input").mkdir(exist_ok=True)
    (root / "pipelines/p/pipeline.yaml").write_text(spec + f"    {field}:\n" + lines)
    return root


def assert_refused(output: str, line: int, key: str, reason: str) -> None:
    assert len(output.strip().splitlines()) == 1, output
    assert f"pipelines/p/pipeline.yaml:{line}: connector 'orders_in': " in output, output
    assert f"'{key}'" in output and reason in output, output
    assert SECRET not in output and "Traceback" not in output


PROVIDERS = "Kafka config providers read environment variables and files"
CLASSES = "it names Java classes to load"
DOLLAR = "a value holding '${' is not allowed"
TRUSTED = "give it through env_options"

KAFKA_ATTACKS = [
    pytest.param({"kafka.config.providers": "env",
                  "kafka.config.providers.env.class": ENV_PROVIDER,
                  "kafka.client.id": "'${env:AWS_SECRET_ACCESS_KEY}'"},
                 "kafka.config.providers", PROVIDERS, id="env-provider"),
    pytest.param({"kafka.client.id": "'${env:AWS_SECRET_ACCESS_KEY}'"}, "kafka.client.id",
                 DOLLAR, id="provider-reference"),
    pytest.param({"kafka.config.providers.file.class":
                  "org.apache.kafka.common.config.provider.FileConfigProvider"},
                 "kafka.config.providers.file.class", PROVIDERS, id="file-provider"),
    pytest.param({"KAFKA.Config.Providers": "dir"}, "KAFKA.Config.Providers", PROVIDERS,
                 id="any-case"),
    pytest.param({"kafka.ssl.engine.factory.class": "evil.Factory"},
                 "kafka.ssl.engine.factory.class", CLASSES, id="class"),
    pytest.param({"kafka.security.providers": "evil.Creator"}, "kafka.security.providers",
                 CLASSES, id="security-providers"),
    pytest.param({"kafka.interceptor.classes": "evil.Interceptor"},
                 "kafka.interceptor.classes", "interceptors are Java classes", id="interceptor"),
    pytest.param({"kafka.metric.reporters": "evil.Reporter"}, "kafka.metric.reporters",
                 "metric reporters are Java classes", id="metric-reporter"),
    pytest.param({"kafka.sasl.client.callback.handler.class": "evil.Handler"},
                 "kafka.sasl.client.callback.handler.class", "a callback handler is a Java class",
                 id="callback"),
    pytest.param({"kafka.sasl.login.refresh.buffer.seconds": "1"},
                 "kafka.sasl.login.refresh.buffer.seconds", "SASL login settings",
                 id="sasl-login"),
    pytest.param({"kafka.sasl.oauthbearer.token.endpoint.url": "http://attacker/"},
                 "kafka.sasl.oauthbearer.token.endpoint.url", "reaches URLs, files or commands",
                 id="oauth-url"),
    pytest.param({"kafka.sasl.kerberos.kinit.cmd": "'sh -c id'"},
                 "kafka.sasl.kerberos.kinit.cmd", "reaches URLs, files or commands",
                 id="kinit-command"),
    pytest.param({"kafka.key.deserializer": "evil.Deserializer"}, "kafka.key.deserializer",
                 "sets the (de)serializers itself", id="deserializer"),
    pytest.param({"kafka.sasl.jaas.config": f"'x required password=\"{SECRET}\";'"},
                 "kafka.sasl.jaas.config", "looks like a secret; " + TRUSTED, id="jaas"),
    pytest.param({"kafka.ssl.truststore.location": "/etc/passwd"},
                 "kafka.ssl.truststore.location", "names a file of the machine", id="ssl-file"),
    pytest.param({"kafka.fetch.max.byte": "1048576"}, "kafka.fetch.max.byte",
                 "(did you mean 'kafka.fetch.max.bytes'?)", id="unknown-misspelt"),
    pytest.param({"kafka.unheard.of": "1"}, "kafka.unheard.of",
                 "is not one a kafka connector may set", id="unknown"),
    pytest.param({"maxOffsetsPerTrigger": 5, "subscribe": "other"}, "subscribe",
                 "name the topics in 'topic'", id="what-it-reads"),
]


@pytest.mark.parametrize(("options", "key", "reason"), KAFKA_ATTACKS)
def test_kafka_options_that_load_code_or_read_secrets_are_refused(
        tmp_path: Path, options: dict[str, str], key: str, reason: str) -> None:
    root = project(tmp_path, KAFKA, options)
    line = 10 + list(options).index(key)
    assert_refused(reconcile(root, "validate", expect=1), line, key, reason)
    assert_refused(reconcile(root, "plan", expect=1), line, key, reason)
    assert not (root / ".reconcile/state/p").exists()


@pytest.mark.parametrize(("options", "key", "reason"), [
    pytest.param({"kafka.sasl.jaas.config": "KAFKA_JAAS", "kafka.config.providers": "KAFKA_P"},
                 "kafka.config.providers", PROVIDERS, id="provider"),
    pytest.param({"kafka.interceptor.classes": "KAFKA_CLASSES"}, "kafka.interceptor.classes",
                 "interceptors are Java classes", id="interceptor"),
    pytest.param({"kafka.sasl.login.callback.handler.class": "KAFKA_HANDLER"},
                 "kafka.sasl.login.callback.handler.class", "SASL login settings", id="login"),
    pytest.param({"kafka.bootstrap.servers": "KAFKA_SERVERS"}, "kafka.bootstrap.servers",
                 "the servers are the connector's bootstrap_servers", id="servers"),
    pytest.param({"kafka.ssl.truststore.locaton": "KAFKA_TRUST"}, "kafka.ssl.truststore.locaton",
                 "(did you mean 'kafka.ssl.truststore.location'?)", id="misspelt"),
])
def test_env_options_name_no_classes_providers_or_servers(
        tmp_path: Path, options: dict[str, str], key: str, reason: str) -> None:
    root = project(tmp_path, KAFKA, options, field="env_options")
    output = reconcile(root, "validate", expect=1)
    assert_refused(output, 10 + list(options).index(key), key, reason)
    assert "env_options" in output


def test_the_settings_a_kafka_connector_tunes_are_allowed(tmp_path: Path) -> None:
    """What docs/kafka.md lists: Spark's Kafka options and the client's plain settings; the
    secrets and files of the machine from the environment."""
    options = {key: "1" for key in (
        "kafka.request.timeout.ms", "kafka.session.timeout.ms", "kafka.default.api.timeout.ms",
        "kafka.fetch.min.bytes", "kafka.fetch.max.bytes", "kafka.fetch.max.wait.ms",
        "kafka.max.partition.fetch.bytes", "kafka.max.poll.records", "kafka.batch.size",
        "kafka.linger.ms", "kafka.retries", "maxOffsetsPerTrigger", "minPartitions")}
    options |= {"kafka.security.protocol": "SASL_SSL", "kafka.sasl.mechanism": "SCRAM-SHA-512",
                "kafka.compression.type": "zstd", "kafka.acks": "all",
                "kafka.client.id": "reconcile-orders", "kafka.isolation.level": "read_committed",
                "startingOffsets": "latest", "failOnDataLoss": "false",
                "includeHeaders": "true", "groupIdPrefix": "reconcile",
                "kafka.ssl.endpoint.identification.algorithm": "https"}
    env = ("    env_options:\n      kafka.sasl.jaas.config: KAFKA_JAAS\n"
           "      kafka.ssl.truststore.location: KAFKA_TRUSTSTORE\n"
           "      kafka.ssl.truststore.password: KAFKA_TRUSTSTORE_PASSWORD\n"
           "      kafka.ssl.ca.location: KAFKA_CA\n")
    root = project(tmp_path, KAFKA + env, options)
    assert "1 input and 0 output connectors: ok" in reconcile(root, "validate")


HADOOP = "Spark copies a file source's options into the Hadoop configuration"

FILE_ATTACKS = [
    pytest.param({"multiLine": "true", "fs.s3a.endpoint": "http://attacker:9000"},
                 "fs.s3a.endpoint", HADOOP, id="s3a-endpoint"),
    pytest.param({"fs.s3a.aws.credentials.provider": "evil.Provider"},
                 "fs.s3a.aws.credentials.provider", HADOOP, id="credentials-provider"),
    pytest.param({"fs.s3a.secret.key": SECRET}, "fs.s3a.secret.key", HADOOP, id="s3a-secret"),
    pytest.param({"fs.file.impl": "evil.FileSystem"}, "fs.file.impl", HADOOP, id="fs-impl"),
    pytest.param({"hadoop.security.credential.provider.path": "jceks://file/tmp/x"},
                 "hadoop.security.credential.provider.path", HADOOP, id="hadoop-security"),
    pytest.param({"spark.sql.legacy.pathOptionBehavior.enabled": "true"},
                 "spark.sql.legacy.pathOptionBehavior.enabled", HADOOP, id="spark-conf"),
    pytest.param({"dateFormat": "'${env.AWS_SECRET_ACCESS_KEY}'"}, "dateFormat", DOLLAR,
                 id="hadoop-substitution"),
    pytest.param({"mode": "DROPMALFORMED"}, "mode", "on_error and on_bad_input say",
                 id="engine-owned"),
    pytest.param({"multiLin": "true"}, "multiLin", "(did you mean 'multiLine'?)",
                 id="misspelt"),
    pytest.param({"header": "true"}, "header", "is not a Spark reader option of json files",
                 id="another-formats"),
    pytest.param({"path": "/etc"}, "path", "the connector's own 'path' says where it reads",
                 id="location"),
]


@pytest.mark.parametrize(("options", "key", "reason"), FILE_ATTACKS)
def test_files_options_that_reach_hadoop_are_refused(
        tmp_path: Path, options: dict[str, str], key: str, reason: str) -> None:
    root = project(tmp_path, FILES.format(type="files") + "    format: json\n", options)
    line = 9 + list(options).index(key)
    assert_refused(reconcile(root, "validate", expect=1), line, key, reason)
    assert_refused(reconcile(root, "plan", expect=1), line, key, reason)


def test_a_delta_connector_takes_no_options(tmp_path: Path) -> None:
    root = project(tmp_path, FILES.format(type="delta"), {"ignoreDeletes": "true"})
    assert_refused(reconcile(root, "validate", expect=1), 8, "ignoreDeletes",
                   "a delta connector takes no options")
    root = project(tmp_path, FILES.format(type="delta"),
                   {"fs.s3a.endpoint": "http://attacker:9000"})
    assert_refused(reconcile(root, "validate", expect=1), 8, "fs.s3a.endpoint", HADOOP)


@pytest.mark.parametrize(("fmt", "options"), [
    ("json", {"multiLine": "true", "maxFilesPerTrigger": 10, "timestampFormat": "yyyy-MM-dd",
              "allowComments": "true", "encoding": "UTF-8", "pathGlobFilter": "'*.json'"}),
    ("csv", {"header": "true", "sep": "';'", "quote": "'\"'", "nullValue": "NA",
             "maxFilesPerTrigger": 1, "cleanSource": "'off'"}),
    ("parquet", {"mergeSchema": "false", "datetimeRebaseMode": "CORRECTED"}),
])
def test_spark_reader_options_of_each_format_are_allowed(tmp_path: Path, fmt: str,
                                                         options: dict[str, str]) -> None:
    root = project(tmp_path, FILES.format(type="files") + f"    format: {fmt}\n", options)
    assert "connectors: ok" in reconcile(root, "validate")


def deployed_kafka(root: Path) -> Path:
    """A Kafka pipeline whose honest program is the committed manifest (no Spark, no
    broker: `run` refuses before it would ask one)."""
    project(root, KAFKA, {"maxOffsetsPerTrigger": "100"})
    settings = settings_summary(load_programs(root)[0].settings)
    manifest = Manifest.first("p", program_of(root).document(), settings=settings)
    LocalBackend(root / ".reconcile/state").write_manifest("p", manifest.to_document(), None)
    return root / ".reconcile/state/p/manifest.json"


@pytest.mark.parametrize(("section", "entries", "key", "reason"), [
    pytest.param("throughput_options", {
        "kafka.config.providers": "env", "kafka.config.providers.env.class": ENV_PROVIDER,
        "kafka.client.id": "${env:AWS_SECRET_ACCESS_KEY}"}, "kafka.config.providers",
        PROVIDERS, id="providers"),
    pytest.param("throughput_options", {"kafka.client.id": "${env:AWS_SECRET_ACCESS_KEY}"},
                 "kafka.client.id", DOLLAR, id="reference"),
    pytest.param("options", {"kafka.interceptor.classes": "evil.Interceptor"},
                 "kafka.interceptor.classes", "interceptors are Java classes", id="interceptor"),
    pytest.param("env_options", {"kafka.config.providers": "KAFKA_JAAS"},
                 "kafka.config.providers", PROVIDERS, id="env-options"),
])
def test_a_committed_manifest_cannot_carry_them_either(
        tmp_path: Path, section: str, entries: dict[str, str], key: str, reason: str) -> None:
    """Whoever can write the state prefix writes them into the committed connector: `run`
    refuses the manifest, naming it and the option, before any client is made."""
    stored = deployed_kafka(tmp_path)
    document = json.loads(stored.read_text())
    connector = document["program"]["connectors"]["orders_in"]
    connector[section] = {**connector.get(section, {}), **entries}
    stored.write_text(json.dumps(document))
    output = reconcile(tmp_path, "run", expect=1)
    assert len(output.strip().splitlines()) == 1, output
    assert "manifest.json" in output and "connector 'orders_in': " in output, output
    assert "connector 'orders_in': connector" not in output, output
    assert f"'{key}'" in output and reason in output, output
    assert json.loads(stored.read_text())["serial"] == document["serial"]
