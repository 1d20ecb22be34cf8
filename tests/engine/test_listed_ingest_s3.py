"""A `files` input on S3 read as listed batches (issue 79): the client lists, Spark reads.

Real parts: moto's S3 server on loopback (`s3_endpoint`, reached through
`AWS_ENDPOINT_URL` as an operator's environment would set it), the shared local Spark
session reading the files through Hadoop's S3A connector, Delta's own writer
(`delta_spark`) with the tables on `s3a://` too, and the real CLI in-process. The
connector's checkpoint is on S3 with the tables, so it holds `listed/N.json` and
`listed/N.done` there, and no streaming query runs (`ingest_streamed` fails the test if
called).
"""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Any

import boto3
import pytest
from pyspark.sql import SparkSession

from reconciler.engine.io import files_connector, listed_ingest
from reconciler.engine.io.input_files import has_new_files, waiting_files
from reconciler.support.errors import ReconcileError
from tests.cli_helpers import manifest, query, reconcile
from tests.projects import write_files

SQL = """
create table grades (student_id bigint, class string, grade int);
create materialized view best as
select class, max(grade) as top from grades group by class;
"""
GRADES = "SELECT student_id, class, grade FROM grades ORDER BY student_id, class, grade"


def next_job_id(spark: SparkSession) -> int:
    """The id the scheduler gives its next job: unchanged means no job ran, in any thread."""
    return int(spark.sparkContext._jsc.sc().dagScheduler().nextJobId())  # type: ignore[union-attr]


class Inbox:
    """A pipeline `p` whose table `grades` is fed by a json `files` connector on S3, with
    its storage (tables, views, the connector's checkpoint) in the same bucket."""

    def __init__(self, root: Path, endpoint: str, options: str = "") -> None:
        self.s3 = boto3.client("s3", endpoint_url=endpoint)
        self.bucket = f"inbox-{uuid.uuid4().hex[:12]}"
        self.s3.create_bucket(Bucket=self.bucket)
        self.project = write_files(root, {
            "reconcile.yaml": f"storage: s3a://{self.bucket}/data\n",
            "pipelines/p/pipeline.yaml": f"""
                name: p
                bootstrap_policy: allow
                connectors:
                  - name: grades_in
                    table: grades
                    type: files
                    format: json
                    path: s3a://{self.bucket}/inbox
                {options}""",
            "pipelines/p/program.sql": SQL})

    def put(self, key: str, *rows: tuple[int, str, int]) -> str:
        """An input object under `inbox/`; returns its name as the listed log holds it."""
        body = "".join(json.dumps({"student_id": s, "class": c, "grade": g}) + "\n"
                       for s, c, g in rows)
        self.s3.put_object(Bucket=self.bucket, Key=f"inbox/{key}", Body=body.encode())
        return f"s3a://{self.bucket}/inbox/{key}"

    def checkpoint(self) -> str:
        """The connector's checkpoint prefix in the bucket (`data/p/connectors/...`)."""
        generation = manifest(self.project, "p")["connectors"]["grades_in"]["generation"]
        return f"data/p/connectors/grades_in/{generation}/"

    def checkpoint_keys(self) -> list[str]:
        """The checkpoint's objects (a folder's marker, `listed/`, left out: `pyarrow.fs`
        keeps one where it deleted an object)."""
        prefix = self.checkpoint()
        listed = self.s3.list_objects_v2(Bucket=self.bucket, Prefix=prefix)
        return sorted(item["Key"][len(prefix):] for item in listed.get("Contents", [])
                      if not item["Key"].endswith("/"))

    def batch(self, batch_id: int) -> list[str]:
        key = f"{self.checkpoint()}listed/{batch_id}.json"
        files: list[str] = json.loads(self.s3.get_object(Bucket=self.bucket, Key=key)
                                      ["Body"].read())["files"]
        return files

    def waiting(self) -> int | None:
        return waiting_files(f"s3a://{self.bucket}/inbox",
                             f"s3a://{self.bucket}/{self.checkpoint()}")

    def rows(self) -> list[tuple[Any, ...]]:
        return [(r["student_id"], r["class"], r["grade"])
                for r in query(self.project, "p", GRADES)]


@pytest.fixture
def no_stream(monkeypatch: pytest.MonkeyPatch) -> None:
    """A streaming query would fail the step (and so the test)."""
    def refused(*_: object) -> int:
        raise AssertionError("a streaming query was started")

    monkeypatch.setattr(files_connector, "ingest_streamed", refused)


@pytest.fixture
def inbox(tmp_path: Path, s3_endpoint: str, monkeypatch: pytest.MonkeyPatch) -> Inbox:
    monkeypatch.setenv("AWS_ENDPOINT_URL", s3_endpoint)
    return Inbox(tmp_path, s3_endpoint)


def test_an_s3_input_is_ingested_as_listed_batches(spark: SparkSession, delta_spark: str,
                                                   inbox: Inbox, no_stream: None) -> None:
    """Each step takes the files no batch took, in name order, each once; hidden files and
    folders are skipped as Spark's file index skips them; an idle step runs no Spark job."""
    reconcile(inbox.project, "apply", "--auto-approve")
    # Partition folders are listed recursively (Spark reads a file beside them as no
    # partition's: it drops it, so every file is in one).
    first = [inbox.put("day=1/a.json", (1, "algebra", 90)),
             inbox.put("day=2/b.json", (2, "algebra", 80))]
    inbox.put("day=1/_SUCCESS")
    inbox.put("day=1/.c.json", (9, "hidden", 1))
    inbox.put("_temporary/0/day=1/d.json", (9, "hidden", 2))
    inbox.put("day=2/e.json._COPYING_", (9, "hidden", 3))
    assert "step committed" in reconcile(inbox.project, "run")
    assert inbox.batch(0) == first
    assert inbox.rows() == [(1, "algebra", 90), (2, "algebra", 80)]

    later = inbox.put("day=3/f.json", (1, "physics", 70))
    assert inbox.waiting() == 1  # what `status` shows, listed from the client
    assert "step committed" in reconcile(inbox.project, "run")
    assert inbox.batch(1) == [later]
    assert manifest(inbox.project, "p")["last_step"]["ingested"] == {"grades_in": 1}
    assert inbox.rows() == [(1, "algebra", 90), (1, "physics", 70), (2, "algebra", 80)]
    # The listed log only: no stream's offsets, commits or source log.
    assert inbox.checkpoint_keys() == ["listed/0.done", "listed/0.json", "listed/1.done",
                                       "listed/1.json"]

    committed = manifest(inbox.project, "p")["serial"]
    jobs = next_job_id(spark)
    assert "no new input" in reconcile(inbox.project, "run")
    assert next_job_id(spark) == jobs, "an idle step ran a Spark job"
    assert manifest(inbox.project, "p")["serial"] == committed
    assert inbox.waiting() == 0
    # What the step asks before it starts a runtime (`engine.step.has_pending_input`).
    assert not has_new_files(f"s3a://{inbox.bucket}/inbox",
                             f"s3a://{inbox.bucket}/{inbox.checkpoint()}")


def test_an_interrupted_s3_batch_is_redone_once(spark: SparkSession, delta_spark: str,
                                                inbox: Inbox, no_stream: None,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    """A batch whose record (`.json`) is on S3 without its `.done` is redone first with
    exactly its files: after a crash past its append (the Delta app transaction makes the
    append land once), and when the record was all that was written."""
    reconcile(inbox.project, "apply", "--auto-approve")
    inbox.put("a.json", (1, "algebra", 90), (2, "algebra", 80))

    def crash(point: str) -> None:
        if point == "listed-batch-before-done":
            raise ReconcileError("crashed before the batch was marked done")

    with monkeypatch.context() as crashing:
        crashing.setattr(listed_ingest, "crash_point", crash)
        assert "crashed" in reconcile(inbox.project, "run", expect=1)
    assert "listed/0.json" in inbox.checkpoint_keys()
    assert "listed/0.done" not in inbox.checkpoint_keys()
    assert "step committed" in reconcile(inbox.project, "run")
    assert inbox.rows() == [(1, "algebra", 90), (2, "algebra", 80)]
    assert "listed/0.done" in inbox.checkpoint_keys()

    # A record written by hand (a crash right after it): its files only, then the rest.
    recorded = inbox.put("b.json", (3, "algebra", 70))
    later = inbox.put("c.json", (4, "algebra", 60))
    inbox.s3.put_object(Bucket=inbox.bucket, Key=f"{inbox.checkpoint()}listed/1.json",
                        Body=json.dumps({"files": [recorded]}).encode())
    assert "step committed" in reconcile(inbox.project, "run")
    assert inbox.batch(2) == [later]
    assert inbox.rows() == [(1, "algebra", 90), (2, "algebra", 80), (3, "algebra", 70),
                            (4, "algebra", 60)]
    assert "no new input" in reconcile(inbox.project, "run")


def test_a_streamed_s3_connector_moves_to_listed_batches(
        spark: SparkSession, delta_spark: str, inbox: Inbox,
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A connector whose S3 checkpoint a Structured Streaming query kept (before issue 79):
    the files its source log names (percent-encoded there) are taken already, so only new
    files go in, as listed batches numbered after the stream's."""
    reconcile(inbox.project, "apply", "--auto-approve")
    inbox.put("day=1/a b.json", (1, "algebra", 90))
    inbox.put("day=1/c.json", (2, "algebra", 80))
    with monkeypatch.context() as streamed:
        streamed.setattr(files_connector, "uses_listed_batches", lambda *_: False)
        assert "step committed" in reconcile(inbox.project, "run")
    assert "commits/0" in inbox.checkpoint_keys()
    assert not any(key.startswith("listed/") for key in inbox.checkpoint_keys())
    assert "no new input" in reconcile(inbox.project, "run")

    later = inbox.put("day=2/d.json", (3, "algebra", 70))
    assert "step committed" in reconcile(inbox.project, "run")
    assert inbox.batch(1) == [later]
    assert inbox.rows() == [(1, "algebra", 90), (2, "algebra", 80), (3, "algebra", 70)]


def test_the_listed_log_on_s3_is_compacted(spark: SparkSession, tmp_path: Path,
                                          s3_endpoint: str,
                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """One file per batch (`maxFilesPerTrigger: 1`): after COMPACT_EVERY batches (3 here,
    10 in production) their records are one `listed/N.compact`, and no file is taken
    again."""
    monkeypatch.setenv("AWS_ENDPOINT_URL", s3_endpoint)
    monkeypatch.setattr(listed_ingest, "COMPACT_EVERY", 3)
    inbox = Inbox(tmp_path, s3_endpoint, options="    options: {maxFilesPerTrigger: 1}")
    reconcile(inbox.project, "apply", "--auto-approve")
    count = listed_ingest.COMPACT_EVERY + 1
    for student in range(count):
        inbox.put(f"day=1/{student:02d}.json", (student, "algebra", 50))
    assert "step committed" in reconcile(inbox.project, "run")
    last = listed_ingest.COMPACT_EVERY - 1
    assert set(inbox.checkpoint_keys()) == {f"listed/{last}.compact", f"listed/{last + 1}.done",
                                            f"listed/{last + 1}.json"}
    assert "no new input" in reconcile(inbox.project, "run")
    inbox.put("day=2/99.json", (99, "algebra", 50))
    assert "step committed" in reconcile(inbox.project, "run")
    assert inbox.batch(last + 2) == [f"s3a://{inbox.bucket}/inbox/day=2/99.json"]
    assert [row[0] for row in inbox.rows()] == [*range(count), 99]
