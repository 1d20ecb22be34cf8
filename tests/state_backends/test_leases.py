"""Lock leases (issue 82): a holder renews its lock, a lapsed or orphaned lock is taken over
by exactly one run, and a holder that lost its lock commits nothing. Both backends, real
threads and processes, S3 through moto's server on loopback."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from state_backends import LocalBackend, LockHeldError, LockInfo
from state_backends.leases import LockLostError
from tests.state_backends.conftest import Harness
from tests.state_backends.test_state_backends import THREADS, race

PIPE = "orders"
PROJECT_ROOT = Path(__file__).resolve().parents[2]


def lapsed_lock(harness: Harness, seconds_ago: float, who: str = "ci@runner-7") -> LockInfo:
    """A lock as a run on another host left it: its lease lapsed `seconds_ago`."""
    info = LockInfo.new("run", who=who, lease=-seconds_ago)
    harness.put_raw(f"{PIPE}/lock", json.dumps(info.to_dict()).encode())
    return info


def test_a_lapsed_lease_is_taken_over_by_one_run_which_says_whose_it_was(
        harness: Harness, capsys: pytest.CaptureFixture[str]) -> None:
    backend = harness.backend
    dead = lapsed_lock(harness, 90)
    wins, losses = race(THREADS, lambda i: backend.acquire_lock_waiting(PIPE, "run",
                                                                       who=f"t{i}"))
    assert len(wins) == 1 and all(isinstance(loss, LockHeldError) for loss in losses), losses
    assert backend.read_lock(PIPE) == wins[0] and wins[0].expires
    said = capsys.readouterr().err
    assert said.count("took over the lock") == 1
    assert (f"{PIPE}: took over the lock of ci@runner-7 (lock id {dead.id}, operation 'run', "
            f"created {dead.created}): its lease lapsed 1m30s ago") in said
    backend.release_lock(PIPE, wins[0].id)
    assert backend.read_lock(PIPE) is None


def test_a_live_lease_is_not_taken_over_and_the_error_says_until_when(
        harness: Harness) -> None:
    running = LockInfo.new("run", who="ci@runner-7", lease=600)
    harness.put_raw(f"{PIPE}/lock", json.dumps(running.to_dict()).encode())
    with pytest.raises(LockHeldError) as held:
        harness.backend.acquire_lock_waiting(PIPE, "apply")
    assert f"its lease runs to {running.expires}: if that run is gone" in str(held.value)
    assert harness.backend.read_lock(PIPE) == running


def test_an_older_lock_without_a_lease_is_never_taken_over_by_its_age(
        harness: Harness) -> None:
    old = LockInfo("id-1", "run", "ci@runner-7", "2020-01-01T00:00:00+00:00")
    harness.put_raw(f"{PIPE}/lock", json.dumps(old.to_dict()).encode())
    with pytest.raises(LockHeldError, match="force-unlock id-1"):
        harness.backend.acquire_lock_waiting(PIPE, "apply")


def test_a_held_lock_is_renewed_past_its_lease_and_released_at_the_end(
        harness: Harness) -> None:
    backend = harness.backend
    backend.lock_lease = 0.9  # renewed every 0.3 s
    with backend.locked(PIPE, "run") as info:
        first = backend.read_lock(PIPE)
        time.sleep(2.5)  # almost three leases
        renewed = backend.read_lock(PIPE)
        assert renewed is not None and first is not None and renewed.id == info.id
        assert renewed.expires > first.expires and renewed.lapsed_seconds() is None
        with pytest.raises(LockHeldError):  # a second run waits: the lease never lapsed
            backend.acquire_lock_waiting(PIPE, "apply")
        backend.write_manifest(PIPE, {"pipeline": PIPE, "serial": 1}, None)  # still ours
    assert backend.read_lock(PIPE) is None


def test_a_holder_that_lost_its_lock_commits_nothing_and_says_why(harness: Harness) -> None:
    backend = harness.backend
    backend.lock_lease = 0.6
    with pytest.raises(LockLostError) as lost, backend.locked(PIPE, "run") as info:
        taken = LockInfo.new("run", who="other@host", lease=600)
        harness.put_raw(f"{PIPE}/lock", json.dumps(taken.to_dict()).encode())  # taken over
        time.sleep(0.5)  # a renewal finds it
        backend.write_manifest(PIPE, {"pipeline": PIPE, "serial": 1}, None)
    assert backend.read_manifest(PIPE) is None
    assert (f"this run's lock (lock id {info.id}) is lost: another run took it over; nothing "
            "was committed") in str(lost.value)
    assert backend.read_lock(PIPE) == taken  # the release left the other run's lock alone


HOLDER = textwrap.dedent("""
    import sys, time
    from pathlib import Path
    from state_backends import backend_from_url
    backend = backend_from_url(sys.argv[1], Path("."))
    backend.lock_lease = 1.0
    go = Path(sys.argv[2])
    try:
        with backend.locked("orders", "run"):
            print("holding", flush=True)
            while not go.exists():
                time.sleep(0.05)
            backend.write_manifest("orders", {"pipeline": "orders", "serial": 1}, None)
            print("committed", flush=True)
    except Exception as error:
        print(f"{type(error).__name__}: {error}", flush=True)
""")


def test_a_paused_holder_whose_lock_was_taken_over_commits_nothing(
        harness: Harness, tmp_path: Path) -> None:
    """A real process holds the lock, is stopped (SIGSTOP) for longer than its lease, and
    another run takes the lock over and commits; resumed, the first commits nothing."""
    backend = harness.backend
    url = (backend.url if isinstance(backend, LocalBackend)
           else f"s3://{backend.bucket}/{backend.prefix}")  # type: ignore[attr-defined]
    env = {**os.environ, "PYTHONPATH": str(PROJECT_ROOT),
           **({"AWS_ENDPOINT_URL": backend.endpoint_url}  # type: ignore[attr-defined]
              if not isinstance(backend, LocalBackend) else {})}
    go = tmp_path / "go"
    holder = subprocess.Popen([sys.executable, "-c", HOLDER, url, str(go)], env=env,
                              stdout=subprocess.PIPE, text=True, cwd=tmp_path)
    try:
        assert holder.stdout is not None and holder.stdout.readline() == "holding\n"
        os.kill(holder.pid, signal.SIGSTOP)
        time.sleep(1.5)  # past its lease
        backend.lock_lease = 60
        with backend.locked(PIPE, "run"):  # taken over: its process runs, its lease lapsed
            backend.write_manifest(PIPE, {"pipeline": PIPE, "serial": 7}, None)
        os.kill(holder.pid, signal.SIGCONT)
        go.touch()
        said, _ = holder.communicate(timeout=60)
    finally:
        holder.kill()
    assert said.startswith("LockLostError: "), said
    assert "nothing was committed" in said
    stored = backend.read_manifest(PIPE)
    assert stored is not None and stored.document["serial"] == 7


def test_lease_times_round_trip() -> None:
    info = LockInfo.new("run", lease=30)
    expires = datetime.fromisoformat(info.expires)
    assert timedelta(seconds=29) < expires - datetime.now(UTC) <= timedelta(seconds=30)
    assert LockInfo.from_dict(info.to_dict()) == info and info.lapsed_seconds() is None
    lapsed = LockInfo.new("run", lease=-5).lapsed_seconds()
    assert lapsed is not None and 5 <= lapsed < 10
