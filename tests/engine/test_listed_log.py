"""The listed-batch log and the input listing, local and on S3, without Spark (issue 79).

Real parts: the local file system and moto's S3 server on loopback, reached by
`pyarrow.fs` through `AWS_ENDPOINT_URL` as the operator's environment sets it. What is
checked is the bookkeeping `engine.io.listed_ingest` relies on: which files a connector
has taken and which wait (Spark's hidden names, globs, a stream's percent-encoded log),
and the compaction that keeps the log a step reads bounded.
"""

from __future__ import annotations

import json
import uuid
from pathlib import Path

import boto3
import pytest

from reconciler.engine.io.file_tree import file_tree
from reconciler.engine.io.input_files import (
    CheckpointLog,
    check_not_moved,
    has_new_files,
    input_files,
)
from reconciler.engine.io.listed_ingest import COMPACT_EVERY, _Compaction
from reconciler.support.errors import ReconcileError


@pytest.fixture
def bucket(s3_endpoint: str, monkeypatch: pytest.MonkeyPatch) -> str:
    monkeypatch.setenv("AWS_ENDPOINT_URL", s3_endpoint)
    name = f"log-{uuid.uuid4().hex[:12]}"
    boto3.client("s3", endpoint_url=s3_endpoint).create_bucket(Bucket=name)
    return name


def put(bucket: str, *keys: str) -> None:
    s3 = boto3.client("s3")
    for key in keys:
        s3.put_object(Bucket=bucket, Key=key, Body=b"{}\n")


def test_an_s3_input_is_listed_as_sparks_file_index_lists_it(bucket: str) -> None:
    put(bucket, "in/a.json", "in/day=1/b.json", "in/_SUCCESS", "in/.c.json",
        "in/_tmp/d.json", "in/.hidden/e.json", "in/f.json._COPYING_", "in/_k=v/g.json",
        "other/h.json")
    root = f"s3a://{bucket}/in"
    assert input_files(f"s3://{bucket}/in/") == {
        f"{root}/a.json", f"{root}/day=1/b.json", f"{root}/_k=v/g.json"}
    assert input_files(f"s3a://{bucket}/in/*/*.json") == {
        f"{root}/day=1/b.json", f"{root}/_k=v/g.json"}
    assert input_files(f"s3a://{bucket}/in/day=*") == {f"{root}/day=1/b.json"}
    assert input_files(f"s3a://{bucket}/in/a.json") == {f"{root}/a.json"}
    assert input_files(f"s3a://{bucket}/nothing") == set()  # an empty inbox has no prefix
    with pytest.raises(ReconcileError, match="no bucket"):  # a mistyped bucket is said
        input_files(f"s3a://{bucket}-typo/in")


def test_a_stream_log_on_s3_counts_as_taken(bucket: str) -> None:
    """Spark's source log names objects percent-encoded, and `s3://` is S3A too: a file it
    took is not new, and one outside the input's folder says the input moved."""
    put(bucket, "in/a b.json", "in/c.json")
    checkpoint = f"s3a://{bucket}/ck"
    tree = file_tree(checkpoint)
    assert tree is not None
    tree.write_text(f"{checkpoint}/sources/0/0", "v1\n" + json.dumps(
        {"path": f"s3://{bucket}/in/a%20b.json", "timestamp": 0, "batchId": 0}) + "\n")
    tree.write_text(f"{checkpoint}/offsets/0", "v1\n{}\n")
    tree.write_text(f"{checkpoint}/commits/0", "v1\n{}\n")
    log = CheckpointLog.read(checkpoint)
    assert log is not None and not log.pending_stream_batch()
    assert log.seen() == {f"s3a://{bucket}/in/a b.json"}
    assert has_new_files(f"s3a://{bucket}/in", checkpoint)
    tree.write_text(f"{checkpoint}/listed/0.json",
                    json.dumps({"files": [f"s3a://{bucket}/in/c.json"]}))
    assert has_new_files(f"s3a://{bucket}/in", checkpoint)  # the batch is redone
    tree.write_text(f"{checkpoint}/listed/0.done", "")
    assert not has_new_files(f"s3a://{bucket}/in", checkpoint)
    with pytest.raises(ReconcileError, match="moved"):
        check_not_moved(f"s3a://{bucket}/elsewhere", CheckpointLog.read(checkpoint).seen())


@pytest.mark.parametrize("where", ["local", "s3"])
def test_compaction_folds_done_batches_and_keeps_what_was_taken(
        where: str, tmp_path: Path, request: pytest.FixtureRequest) -> None:
    """Every COMPACT_EVERY done batches become one `listed/N.compact`; their records go.
    Readers see the same files taken and the same last batch, and a crash between the
    compaction and the removals leaves records they ignore."""
    checkpoint = (str(tmp_path / "ck") if where == "local"
                  else f"s3a://{request.getfixturevalue('bucket')}/ck")
    tree = file_tree(checkpoint)
    assert tree is not None
    batches = {batch: [f"/in/{batch:03d}.json"] for batch in range(COMPACT_EVERY + 2)}
    log = CheckpointLog.read(checkpoint)
    assert log is not None
    compaction = _Compaction(log, {})
    for batch, files in batches.items():  # as `ingest_listed` records and finishes them
        tree.write_text(f"{checkpoint}/listed/{batch}.json", json.dumps({"files": files}))
        compaction.records[batch] = files
        tree.write_text(f"{checkpoint}/listed/{batch}.done", "")
        compaction.after(batch)
    last = COMPACT_EVERY - 1
    assert sorted(tree.files(f"{checkpoint}/listed")) == sorted(
        [f"{last}.compact", *(f"{batch}.{kind}" for batch in (last + 1, last + 2)
                              for kind in ("json", "done"))])
    read = CheckpointLog.read(checkpoint)
    assert read is not None
    assert read.seen() == {file for files in batches.values() for file in files}
    assert read.last_batch() == last + 2 and read.unfinished() == []

    # A crash after the compaction was written, before a record it holds was removed.
    tree.write_text(f"{checkpoint}/listed/3.json", json.dumps({"files": ["/in/003.json"]}))
    read = CheckpointLog.read(checkpoint)
    assert read is not None and read.unfinished() == [] and read.has_listed
    assert read.last_batch() == last + 2
