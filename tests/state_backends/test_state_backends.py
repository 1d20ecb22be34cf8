"""Contract tests run against every state backend, on real parts only.

The S3 backend talks HTTP to moto's server on loopback through
``endpoint_url``; the local backend uses a tmp dir, with real threads and
real processes racing for the lock and the manifest.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import threading
import time
import uuid
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import boto3
import pytest
from botocore.exceptions import ClientError

from state_backends import (
    ConcurrentModificationError,
    CorruptStateError,
    LocalBackend,
    LockHeldError,
    LockInfo,
    LockMismatchError,
    StateBackendError,
    backend_from_url,
)
from state_backends.s3 import S3Backend
from tests.state_backends.conftest import Harness

PROJECT_ROOT = Path(__file__).resolve().parents[2]
PIPE = "orders"
THREADS = 8


def doc(serial: int, **extra: Any) -> dict[str, Any]:
    return {"pipeline": PIPE, "lineage": "l-1", "serial": serial, **extra}


def race(n: int, attempt: Callable[[int], Any]) -> tuple[list[Any], list[BaseException]]:
    """Run ``attempt(i)`` in n threads released together by a barrier."""
    barrier = threading.Barrier(n)
    wins: list[Any] = []
    losses: list[BaseException] = []
    guard = threading.Lock()

    def run(i: int) -> None:
        barrier.wait()
        try:
            result = attempt(i)
        except BaseException as exc:  # collected and asserted on by the caller
            with guard:
                losses.append(exc)
        else:
            with guard:
                wins.append(result)

    threads = [threading.Thread(target=run, args=(i,)) for i in range(n)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)
    return wins, losses


# -- manifest -----------------------------------------------------------------


def test_roundtrip(harness: Harness) -> None:
    backend = harness.backend
    assert backend.read_manifest(PIPE) is None
    version = backend.write_manifest(PIPE, doc(1, tables={"t": 3}), None)
    got = backend.read_manifest(PIPE)
    assert got is not None
    assert got.document == doc(1, tables={"t": 3})
    assert got.version == version


def test_cas_refuses_stale_and_duplicate_create(harness: Harness) -> None:
    backend = harness.backend
    v1 = backend.write_manifest(PIPE, doc(1), None)
    with pytest.raises(ConcurrentModificationError, match=r"manifest\.json"):
        backend.write_manifest(PIPE, doc(1, other=True), None)
    v2 = backend.write_manifest(PIPE, doc(2), v1)
    assert v2 != v1
    with pytest.raises(ConcurrentModificationError) as info:
        backend.write_manifest(PIPE, doc(3), v1)
    assert harness.location("orders/manifest.json") in str(info.value)
    current = backend.read_manifest(PIPE)
    assert current is not None and current.document == doc(2) and current.version == v2


def test_update_of_missing_manifest_refused(harness: Harness) -> None:
    v1 = harness.backend.write_manifest("other", doc(1), None)
    with pytest.raises(ConcurrentModificationError):
        harness.backend.write_manifest(PIPE, doc(2), v1)
    assert harness.backend.read_manifest(PIPE) is None


def test_concurrent_cas_has_one_winner(harness: Harness) -> None:
    backend = harness.backend
    base = backend.write_manifest(PIPE, doc(1), None)
    wins, losses = race(THREADS, lambda i: backend.write_manifest(PIPE, doc(2, w=i), base))
    assert len(wins) == 1, losses
    assert all(isinstance(exc, ConcurrentModificationError) for exc in losses), losses
    current = backend.read_manifest(PIPE)
    assert current is not None and current.version == wins[0]


def test_history_written_and_listed(harness: Harness) -> None:
    backend = harness.backend
    assert backend.list_history(PIPE) == []
    version = None
    for serial in (1, 2, 3, 10):
        version = backend.write_manifest(PIPE, doc(serial, step=serial), version)
    assert backend.list_history(PIPE) == [1, 2, 3, 10]  # numeric, not lexical, order
    assert backend.read_history(PIPE, 2) == doc(2, step=2)
    with pytest.raises(StateBackendError, match="serial 7"):
        backend.read_history(PIPE, 7)


def test_document_without_serial_is_not_committed(harness: Harness) -> None:
    with pytest.raises(StateBackendError, match="serial"):
        harness.backend.write_manifest(PIPE, {"pipeline": PIPE}, None)
    assert harness.backend.read_manifest(PIPE) is None


def test_corrupt_manifest_reported_with_location(harness: Harness) -> None:
    harness.put_raw("orders/manifest.json", b'{"serial": 1,')
    with pytest.raises(CorruptStateError) as info:
        harness.backend.read_manifest(PIPE)
    message = str(info.value)
    assert harness.location("orders/manifest.json") in message
    assert "not valid JSON" in message and "line 1" in message
    harness.put_raw("orders/manifest.json", b"[1, 2]")
    with pytest.raises(CorruptStateError, match="not a JSON object"):
        harness.backend.read_manifest(PIPE)


def test_corrupt_lock_reported_with_location(harness: Harness) -> None:
    harness.put_raw("orders/lock", b"garbage")
    with pytest.raises(CorruptStateError) as info:
        harness.backend.read_lock(PIPE)
    assert harness.location("orders/lock") in str(info.value)


def test_invalid_pipeline_name_rejected(harness: Harness) -> None:
    with pytest.raises(StateBackendError, match="invalid pipeline name"):
        harness.backend.read_manifest("../escape")


# -- locks --------------------------------------------------------------------


def test_concurrent_lockers_have_one_winner(harness: Harness) -> None:
    backend = harness.backend
    wins, losses = race(THREADS, lambda i: backend.acquire_lock(PIPE, "apply", who=f"t{i}"))
    assert len(wins) == 1, losses
    assert len(losses) == THREADS - 1
    assert all(isinstance(exc, LockHeldError) for exc in losses), losses
    assert {exc.holder.id for exc in losses} == {wins[0].id}  # type: ignore[attr-defined]
    assert backend.read_lock(PIPE) == wins[0]


def test_lock_held_error_names_holder(harness: Harness) -> None:
    backend = harness.backend
    held = backend.acquire_lock(PIPE, "apply", who="alice@ci-7")
    with pytest.raises(LockHeldError) as info:
        backend.acquire_lock(PIPE, "plan", who="bob@laptop")
    assert info.value.holder == held
    message = str(info.value)
    for part in (held.id, "alice@ci-7", "'apply'", harness.location("orders/lock"), " ago"):
        assert part in message
    assert "\n" not in message


def test_release_with_wrong_id_refused(harness: Harness) -> None:
    backend = harness.backend
    held = backend.acquire_lock(PIPE, "apply")
    with pytest.raises(LockMismatchError, match=held.id):
        backend.release_lock(PIPE, "not-the-id")
    assert backend.read_lock(PIPE) == held
    backend.release_lock(PIPE, held.id)
    assert backend.read_lock(PIPE) is None
    with pytest.raises(StateBackendError, match="not locked"):
        backend.release_lock(PIPE, held.id)


def test_force_unlock(harness: Harness) -> None:
    backend = harness.backend
    held = backend.acquire_lock(PIPE, "apply", who="dead@host")
    with pytest.raises(LockMismatchError):
        backend.force_unlock(PIPE, str(uuid.uuid4()))
    assert backend.read_lock(PIPE) == held
    backend.force_unlock(PIPE, held.id)
    assert backend.read_lock(PIPE) is None
    again = backend.acquire_lock(PIPE, "apply")
    assert again.id != held.id


def test_locked_context_releases_on_error(harness: Harness) -> None:
    backend = harness.backend
    with pytest.raises(RuntimeError, match="boom"), backend.locked(PIPE, "apply") as info:
        assert backend.read_lock(PIPE) == info
        with pytest.raises(LockHeldError):
            backend.acquire_lock(PIPE, "apply")
        raise RuntimeError("boom")
    assert backend.read_lock(PIPE) is None


def test_locked_keeps_body_error_when_release_fails(harness: Harness) -> None:
    backend = harness.backend
    with pytest.raises(RuntimeError, match="boom") as info, backend.locked(PIPE, "apply") as lock:
        backend.force_unlock(PIPE, lock.id)  # an operator breaks our lock mid-run
        raise RuntimeError("boom")
    assert any("not locked" in note for note in info.value.__notes__)


def test_list_pipelines(harness: Harness) -> None:
    backend = harness.backend
    assert backend.list_pipelines() == []
    backend.write_manifest("b-pipe", doc(1), None)
    backend.acquire_lock("a-pipe", "apply")
    assert backend.list_pipelines() == ["a-pipe", "b-pipe"]


# -- local backend across processes -------------------------------------------

_CHILD = textwrap.dedent(
    """
    import json, os, sys, time
    from pathlib import Path
    from state_backends import ConcurrentModificationError, LocalBackend, LockHeldError

    root, mode, gate, expected = sys.argv[1:5]
    backend = LocalBackend(Path(root))
    Path(gate, f"ready-{os.getpid()}").touch()
    while not Path(gate, "go").exists():
        time.sleep(0.002)
    try:
        if mode == "lock":
            result = backend.acquire_lock("orders", "apply", who=f"pid-{os.getpid()}").id
        else:
            doc = {"serial": 2, "writer": os.getpid()}
            result = backend.write_manifest("orders", doc, expected)
        print(json.dumps({"won": result}))
    except (LockHeldError, ConcurrentModificationError) as exc:
        print(json.dumps({"lost": type(exc).__name__}))
    """
)


def _process_race(root: Path, gate: Path, mode: str, expected: str, n: int = 6) -> list[dict]:
    gate.mkdir()
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(PROJECT_ROOT), *sys.path])}
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", _CHILD, str(root), mode, str(gate), expected],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
        )
        for _ in range(n)
    ]
    deadline = time.monotonic() + 15
    while len(list(gate.glob("ready-*"))) < n and time.monotonic() < deadline:
        time.sleep(0.01)
    (gate / "go").touch()
    results = []
    for proc in procs:
        out, err = proc.communicate(timeout=20)
        assert proc.returncode == 0, err
        results.append(json.loads(out))
    return results


def test_local_lock_across_processes(tmp_path: Path) -> None:
    root = tmp_path / "state"
    results = _process_race(root, tmp_path / "gate", "lock", "")
    winners = [r["won"] for r in results if "won" in r]
    assert len(winners) == 1, results
    assert all(r.get("lost") == "LockHeldError" for r in results if "won" not in r)
    holder = LocalBackend(root).read_lock(PIPE)
    assert holder is not None and holder.id == winners[0]


def test_local_cas_across_processes(tmp_path: Path) -> None:
    root = tmp_path / "state"
    base = LocalBackend(root).write_manifest(PIPE, doc(1), None)
    results = _process_race(root, tmp_path / "gate", "cas", base)
    winners = [r["won"] for r in results if "won" in r]
    assert len(winners) == 1, results
    assert all(r.get("lost") == "ConcurrentModificationError" for r in results if "won" not in r)
    current = LocalBackend(root).read_manifest(PIPE)
    assert current is not None and current.version == winners[0]


def test_local_writes_leave_no_temp_files(tmp_path: Path) -> None:
    backend = LocalBackend(tmp_path)
    v1 = backend.write_manifest(PIPE, doc(1), None)
    backend.write_manifest(PIPE, doc(2), v1)
    names = {p.name for p in (tmp_path / PIPE).rglob("*") if p.is_file()}
    assert names == {"manifest.json", "1.json", "2.json", ".state.flock"}
    text = (tmp_path / PIPE / "manifest.json").read_text()
    assert text == json.dumps(doc(2), sort_keys=True, indent=2) + "\n"



@pytest.mark.parametrize("plant", ["link to /dev/zero", "named pipe"])
def test_local_state_planted_in_a_checkout_is_refused_not_followed(tmp_path: Path,
                                                                   plant: str) -> None:
    """A state folder inside a checkout (the default `.reconcile/state`) holds what a pull
    request committed; a plan reads it: a manifest linked to `/dev/zero` or made a named
    pipe is refused in one line at once, never read without end or waited on (issue 78)."""
    (tmp_path / PIPE).mkdir()
    manifest = tmp_path / PIPE / "manifest.json"
    if plant == "named pipe":
        os.mkfifo(manifest)
    else:
        manifest.symlink_to("/dev/zero")
    with pytest.raises(StateBackendError, match=r"^refusing to read .*manifest\.json: "):
        LocalBackend(tmp_path).read_manifest(PIPE)

# -- S3 specifics -------------------------------------------------------------


def test_s3_missing_bucket_named(s3_endpoint: str, aws_env: None) -> None:
    backend = S3Backend("no-such-bucket-xyz", "p", endpoint_url=s3_endpoint)
    with pytest.raises(StateBackendError, match="'no-such-bucket-xyz' does not exist"):
        backend.read_manifest(PIPE)
    with pytest.raises(StateBackendError, match="'no-such-bucket-xyz' does not exist"):
        backend.acquire_lock(PIPE, "apply")


def test_moto_enforces_conditional_requests(s3_endpoint: str, aws_env: None) -> None:
    """The S3 suite is only meaningful if the server evaluates these headers."""
    client = boto3.client("s3", endpoint_url=s3_endpoint)
    bucket = f"cond-{uuid.uuid4().hex[:12]}"
    client.create_bucket(Bucket=bucket)
    etag = client.put_object(Bucket=bucket, Key="k", Body=b"1", IfNoneMatch="*")["ETag"]
    attempts: list[Callable[[], Any]] = [
        lambda: client.put_object(Bucket=bucket, Key="k", Body=b"2", IfNoneMatch="*"),
        lambda: client.put_object(Bucket=bucket, Key="k", Body=b"2", IfMatch='"stale"'),
        lambda: client.delete_object(Bucket=bucket, Key="k", IfMatch='"stale"'),
    ]
    for attempt in attempts:
        with pytest.raises(ClientError) as info:
            attempt()
        assert info.value.response["Error"]["Code"] == "PreconditionFailed"
    assert client.get_object(Bucket=bucket, Key="k")["ETag"] == etag
    client.delete_object(Bucket=bucket, Key="k", IfMatch=etag)


def test_s3_honours_aws_endpoint_url(
    s3_endpoint: str, aws_env: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AWS_ENDPOINT_URL", s3_endpoint)
    bucket = f"env-{uuid.uuid4().hex[:12]}"
    boto3.client("s3").create_bucket(Bucket=bucket)
    backend = backend_from_url(f"s3://{bucket}/pre", Path("/unused"))
    backend.write_manifest(PIPE, doc(1), None)
    keys = boto3.client("s3").list_objects_v2(Bucket=bucket)["Contents"]
    assert {k["Key"] for k in keys} == {"pre/orders/manifest.json", "pre/orders/history/1.json"}


# -- LockInfo and URLs --------------------------------------------------------


def test_lock_info_roundtrip_and_age() -> None:
    info = LockInfo.new("apply", who="me@here")
    assert LockInfo.from_dict(json.loads(json.dumps(info.to_dict()))) == info
    assert len(uuid.UUID(info.id).hex) == 32
    later = datetime.fromisoformat(info.created) + timedelta(minutes=5)
    assert info.age_seconds(later) == pytest.approx(300)
    assert "@" in LockInfo.new("plan").who
    assert datetime.fromisoformat(info.created).utcoffset() == timedelta(0)
    assert info.age_seconds(datetime.now(UTC)) >= 0


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        ("file:///abs/state", Path("/abs/state")),
        ("file://rel/state", Path("/proj/rel/state")),
        ("state/dir", Path("/proj/state/dir")),
        ("/abs/plain", Path("/abs/plain")),
    ],
)
def test_backend_from_url_local(url: str, expected: Path) -> None:
    backend = backend_from_url(url, Path("/proj"))
    assert isinstance(backend, LocalBackend)
    assert backend.root == expected


@pytest.mark.parametrize(
    ("url", "bucket", "prefix"),
    [("s3://bkt/team/state/", "bkt", "team/state"), ("s3://bkt", "bkt", "")],
)
def test_backend_from_url_s3(url: str, bucket: str, prefix: str, aws_env: None) -> None:
    backend = backend_from_url(url, Path("/proj"))
    assert isinstance(backend, S3Backend)
    assert (backend.bucket, backend.prefix) == (bucket, prefix)
    assert backend.url == url.rstrip("/")


@pytest.mark.parametrize("url", ["gs://bkt/x", "s3:///no-bucket", ""])
def test_backend_from_url_rejects(url: str) -> None:
    with pytest.raises(StateBackendError) as info:
        backend_from_url(url, Path("/proj"))
    if url:
        assert repr(url) in str(info.value)


def test_the_unlock_remedy_is_offered_only_for_a_lock_whose_process_is_gone(
        harness: Harness, monkeypatch: pytest.MonkeyPatch) -> None:
    backend = harness.backend
    live = backend.acquire_lock(PIPE, "run")  # this process: it still runs
    with pytest.raises(LockHeldError) as waited:
        backend.acquire_lock(PIPE, "apply")
    assert f"its process {live.pid} still runs on this host: wait for it" in str(waited.value)
    assert "force-unlock" not in str(waited.value)
    backend.release_lock(PIPE, live.id)

    gone_pid = subprocess.Popen(["true"])  # a process that has ended
    gone_pid.wait()
    monkeypatch.setattr("state_backends.locks.os.getpid", lambda: gone_pid.pid)
    gone = backend.acquire_lock(PIPE, "run")
    monkeypatch.undo()
    with pytest.raises(LockHeldError) as refused:
        backend.acquire_lock(PIPE, "apply")
    assert str(refused.value).endswith(f"its process {gone_pid.pid} is gone: run "
                                       f"`reconcile state force-unlock {gone.id} -p {PIPE}`")

    elsewhere = LockHeldError("somewhere", LockInfo.new("run", who="ci@runner-7"), PIPE)
    assert str(elsewhere).endswith("if that run is gone, run `reconcile state force-unlock "
                                   f"{elsewhere.holder.id} -p {PIPE}`")
