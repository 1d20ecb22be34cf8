"""The state backends under test: the local one in a tmp dir, the S3 one on moto's server
on loopback (`harness`, both in turn)."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import boto3
import pytest

from state_backends import LocalBackend, StateBackend
from state_backends.s3 import S3Backend
from tests.s3_server import moto_s3_server


@pytest.fixture(scope="session")
def s3_endpoint() -> Iterator[str]:
    with moto_s3_server() as endpoint:
        yield endpoint


@pytest.fixture
def aws_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """Dummy credentials so nothing can ever reach a real account."""
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    for name in ("AWS_PROFILE", "AWS_SESSION_TOKEN", "AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_S3"):
        monkeypatch.delenv(name, raising=False)


@dataclass
class Harness:
    backend: StateBackend
    put_raw: Callable[[str, bytes], None]  # key relative to the backend root/prefix
    location: Callable[[str], str]  # how messages name that key


@pytest.fixture(params=["local", "s3"])
def harness(request: pytest.FixtureRequest, tmp_path: Path, aws_env: None) -> Harness:
    if request.param == "local":
        root = tmp_path / "state"

        def put_local(rel: str, data: bytes) -> None:
            (root / rel).parent.mkdir(parents=True, exist_ok=True)
            (root / rel).write_bytes(data)

        return Harness(LocalBackend(root), put_local, lambda rel: str(root / rel))

    endpoint = request.getfixturevalue("s3_endpoint")
    bucket = f"state-{uuid.uuid4().hex[:12]}"
    client = boto3.client("s3", endpoint_url=endpoint)
    client.create_bucket(Bucket=bucket)
    prefix = "team/state"

    def put_s3(rel: str, data: bytes) -> None:
        client.put_object(Bucket=bucket, Key=f"{prefix}/{rel}", Body=data)

    return Harness(
        S3Backend(bucket, prefix, endpoint_url=endpoint),
        put_s3,
        lambda rel: f"s3://{bucket}/{prefix}/{rel}",
    )
