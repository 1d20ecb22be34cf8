"""State in an S3 bucket (or any S3-compatible store with conditional writes).

S3 has no rename and no server-side locks, so correctness rests on the
conditional-request headers S3 evaluates atomically on the server:

* lock: ``PutObject`` with ``If-None-Match: *`` -- only one creator wins; the
  others get 412 PreconditionFailed (or 409 ConditionalRequestConflict while a
  competing write is in flight) and are told who holds the lock;
* manifest: created with ``If-None-Match: *`` and replaced with
  ``If-Match: <ETag read earlier>``, so a stale writer gets 412 instead of
  silently overwriting someone else's commit;
* unlock: ``DeleteObject`` with ``If-Match: <ETag of the lock we checked>``,
  so a lock that changed hands after our check is never deleted. Stores that
  reject conditional deletes (501 NotImplemented) fall back to a plain delete,
  which leaves a window of one round trip between check and delete.

The endpoint comes from ``endpoint_url`` or, as boto3 does natively, from
``AWS_ENDPOINT_URL_S3`` / ``AWS_ENDPOINT_URL``.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any, TypedDict, Unpack

import boto3
from botocore.exceptions import BotoCoreError, ClientError

from state_backends.base import (
    HISTORY_DIR,
    LOCK_NAME,
    MANIFEST_NAME,
    ConcurrentModificationError,
    LockHeldError,
    LockInfo,
    LockMismatchError,
    StateBackend,
    StateBackendError,
    VersionedDocument,
    check_pipeline,
    decode_lock,
    decode_object,
    document_serial,
    encode_document,
    parse_history_name,
)

log = logging.getLogger(__name__)

_CONFLICT_CODES = frozenset({"PreconditionFailed", "ConditionalRequestConflict", "412", "409"})
_MISSING_CODES = frozenset({"NoSuchKey", "404", "NotFound"})
_ACQUIRE_ATTEMPTS = 5


def _code(exc: ClientError) -> str:
    return str(exc.response.get("Error", {}).get("Code", ""))


class _Conditions(TypedDict, total=False):
    """PutObject's preconditions, the compare-and-swap a manifest write is: `IfNoneMatch="*"`
    for the first, `IfMatch=<etag>` for the next (typed, so boto3's stubs check the call)."""

    IfMatch: str
    IfNoneMatch: str


class S3Backend(StateBackend):
    """State under ``s3://bucket/prefix/<pipeline>/``; see the module docstring."""

    def __init__(
        self,
        bucket: str,
        prefix: str = "",
        endpoint_url: str | None = None,
        client: Any | None = None,
    ) -> None:
        if not bucket:
            raise StateBackendError("S3 state backend needs a bucket name")
        self.bucket = bucket
        self.prefix = prefix.strip("/")
        self.endpoint_url = endpoint_url
        if client is None:
            client = boto3.client("s3", endpoint_url=endpoint_url)
        self._client = client
        self.url = f"s3://{bucket}/{self.prefix}" if self.prefix else f"s3://{bucket}"

    # -- keys and primitives --------------------------------------------------

    def _key(self, pipeline: str, *parts: str) -> str:
        check_pipeline(pipeline)
        return "/".join(p for p in (self.prefix, pipeline, *parts) if p)

    def _loc(self, key: str) -> str:
        return f"s3://{self.bucket}/{key}"

    def _error(self, exc: Exception, key: str, action: str) -> StateBackendError:
        """Turn a boto error into one line naming the bucket or object."""
        loc = self._loc(key)
        if isinstance(exc, ClientError):
            code = _code(exc)
            message = exc.response.get("Error", {}).get("Message", "") or str(exc)
            if code == "NoSuchBucket":
                return StateBackendError(
                    f"S3 bucket {self.bucket!r} does not exist (while trying to {action} {loc})"
                )
            return StateBackendError(f"cannot {action} {loc}: {code}: {message}")
        return StateBackendError(f"cannot {action} {loc}: {exc}")

    def _get(self, key: str) -> tuple[bytes, str] | None:
        """Object bytes and ETag, or None when the key does not exist."""
        try:
            response = self._client.get_object(Bucket=self.bucket, Key=key)
            return response["Body"].read(), response["ETag"]
        except ClientError as exc:
            if _code(exc) in _MISSING_CODES:
                return None
            raise self._error(exc, key, "read") from exc
        except BotoCoreError as exc:
            raise self._error(exc, key, "read") from exc

    def _put(self, key: str, data: bytes, **conditions: Unpack[_Conditions]) -> str:
        """PutObject; ClientErrors propagate so callers can read conflict codes."""
        try:
            response = self._client.put_object(
                Bucket=self.bucket,
                Key=key,
                Body=data,
                ContentType="application/json",
                **conditions,
            )
        except BotoCoreError as exc:
            raise self._error(exc, key, "write") from exc
        return str(response["ETag"])

    def _list(self, prefix: str, delimiter: str | None = None) -> tuple[list[str], list[str]]:
        """All keys and common prefixes under ``prefix`` (paginated)."""
        kwargs: dict[str, Any] = {"Bucket": self.bucket, "Prefix": prefix}
        if delimiter:
            kwargs["Delimiter"] = delimiter
        keys: list[str] = []
        prefixes: list[str] = []
        try:
            for page in self._client.get_paginator("list_objects_v2").paginate(**kwargs):
                keys.extend(obj["Key"] for obj in page.get("Contents", []))
                prefixes.extend(p["Prefix"] for p in page.get("CommonPrefixes", []))
        except (ClientError, BotoCoreError) as exc:
            raise self._error(exc, prefix, "list") from exc
        return keys, prefixes

    # -- manifest and history -------------------------------------------------

    def read_manifest(self, pipeline: str) -> VersionedDocument | None:
        key = self._key(pipeline, MANIFEST_NAME)
        found = self._get(key)
        if found is None:
            return None
        data, etag = found
        return VersionedDocument(decode_object(data, self._loc(key)), etag)

    def write_manifest(
        self, pipeline: str, document: dict[str, Any], expected_version: str | None
    ) -> str:
        key = self._key(pipeline, MANIFEST_NAME)
        loc = self._loc(key)
        serial = document_serial(document, loc)
        data = encode_document(document)
        self.check_lease(pipeline)  # a run whose lock was taken over commits nothing
        condition: _Conditions = (
            {"IfNoneMatch": "*"} if expected_version is None else {"IfMatch": expected_version}
        )
        try:
            version = self._put(key, data, **condition)  # the commit point
        except ClientError as exc:
            code = _code(exc)
            conflict = code in _CONFLICT_CODES or (
                expected_version is not None and code in _MISSING_CODES
            )
            if not conflict:
                raise self._error(exc, key, "write") from exc
            # botocore retries a PUT whose response was lost; the retry then
            # fails its precondition against our own write. Identical bytes
            # mean the commit did land.
            current = self._get(key)
            if current is not None and current[0] == data:
                version = current[1]
            else:
                raise self._conflict(loc, expected_version, code) from exc
        history_key = self._key(pipeline, HISTORY_DIR, f"{serial}.json")
        try:
            self._put(history_key, data)
        except (ClientError, StateBackendError) as exc:
            log.warning(
                "manifest committed but history copy %s failed: %s", self._loc(history_key), exc
            )
        return version

    @staticmethod
    def _conflict(loc: str, expected: str | None, code: str) -> ConcurrentModificationError:
        if expected is None:
            return ConcurrentModificationError(
                f"{loc} already exists; another run created it first ({code})"
            )
        if code in _MISSING_CODES:
            return ConcurrentModificationError(
                f"{loc} no longer exists but version {expected} was expected"
            )
        return ConcurrentModificationError(
            f"{loc} changed since version {expected} was read ({code}); re-read and retry"
        )

    def read_history(self, pipeline: str, serial: int) -> dict[str, Any]:
        key = self._key(pipeline, HISTORY_DIR, f"{int(serial)}.json")
        found = self._get(key)
        if found is None:
            raise StateBackendError(
                f"{self._loc(key)} does not exist: no history for serial {serial}"
            )
        return decode_object(found[0], self._loc(key))

    def list_history(self, pipeline: str) -> list[int]:
        prefix = self._key(pipeline, HISTORY_DIR) + "/"
        keys, _ = self._list(prefix)
        serials = (parse_history_name(k[len(prefix) :]) for k in keys)
        return sorted(s for s in serials if s is not None)

    # -- locks ----------------------------------------------------------------

    def read_lock(self, pipeline: str) -> LockInfo | None:
        key = self._key(pipeline, LOCK_NAME)
        found = self._get(key)
        return None if found is None else decode_lock(found[0], self._loc(key))

    def acquire_lock(self, pipeline: str, operation: str, who: str | None = None) -> LockInfo:
        key = self._key(pipeline, LOCK_NAME)
        info = LockInfo.new(operation, who, self.lock_lease)
        data = encode_document(info.to_dict())
        for attempt in range(_ACQUIRE_ATTEMPTS):
            try:
                self._put(key, data, IfNoneMatch="*")
                return info
            except ClientError as exc:
                if _code(exc) not in _CONFLICT_CODES:
                    raise self._error(exc, key, "lock") from exc
            holder = self.read_lock(pipeline)
            if holder is not None and holder.id == info.id:
                return info  # our own PUT landed; a botocore retry hit the precondition
            if holder is not None:
                raise LockHeldError(self._loc(key), holder, pipeline)
            # 409 while a competing write was in flight, or the holder released
            # between our PUT and our read: back off briefly and try again.
            time.sleep(0.05 * (attempt + 1))
        raise StateBackendError(
            f"could not acquire {self._loc(key)}: it kept changing hands; retry"
        )

    def _swap_lock(self, pipeline: str, accept: Callable[[LockInfo | None], bool],
                   new: LockInfo) -> bool:
        key = self._key(pipeline, LOCK_NAME)
        found = self._get(key)
        if not accept(None if found is None else decode_lock(found[0], self._loc(key))):
            return False
        assert found is not None  # no lock is never accepted: a swap replaces one
        try:  # only over the lock just read: a renewal or takeover meanwhile wins
            self._put(key, encode_document(new.to_dict()), IfMatch=found[1])
        except ClientError as exc:
            if _code(exc) in _CONFLICT_CODES or _code(exc) in _MISSING_CODES:
                return False
            raise self._error(exc, key, "replace") from exc
        return True

    def _remove_lock(self, pipeline: str, lock_id: str, verb: str) -> None:
        key = self._key(pipeline, LOCK_NAME)
        loc = self._loc(key)
        found = self._get(key)
        if found is None:
            raise StateBackendError(f"{loc} is not locked; nothing to {verb}")
        data, etag = found
        holder = decode_lock(data, loc)
        if holder.id != lock_id:
            raise LockMismatchError(
                f"{loc} is held by lock id {holder.id} ({holder.who}, operation "
                f"{holder.operation!r}), not {lock_id}; refusing to {verb}"
            )
        try:
            self._client.delete_object(Bucket=self.bucket, Key=key, IfMatch=etag)
        except ClientError as exc:
            code = _code(exc)
            if code in _CONFLICT_CODES:
                raise LockMismatchError(
                    f"{loc} changed hands while trying to {verb} lock id {lock_id}; "
                    "check `state lock` and retry"
                ) from exc
            if code in _MISSING_CODES:
                raise StateBackendError(
                    f"{loc} was removed concurrently; nothing to {verb}"
                ) from exc
            if code != "NotImplemented":
                raise self._error(exc, key, verb) from exc
            # Store without conditional deletes: plain delete (see module docstring).
            try:
                self._client.delete_object(Bucket=self.bucket, Key=key)
            except (ClientError, BotoCoreError) as exc2:
                raise self._error(exc2, key, verb) from exc2
        except BotoCoreError as exc:
            raise self._error(exc, key, verb) from exc

    def release_lock(self, pipeline: str, lock_id: str) -> None:
        self._stop_keeping(pipeline)
        self._remove_lock(pipeline, lock_id, "release")

    def force_unlock(self, pipeline: str, lock_id: str) -> None:
        self._remove_lock(pipeline, lock_id, "force-unlock")

    def delete_state(self, pipeline: str, lock_id: str) -> None:
        self.check_lease(pipeline)  # a destroy whose lock was taken over deletes nothing
        self._stop_keeping(pipeline)
        lock_key, manifest_key = self._key(pipeline, LOCK_NAME), self._key(pipeline, MANIFEST_NAME)
        holder = self.read_lock(pipeline)
        if holder is None or holder.id != lock_id:
            raise LockMismatchError(f"{self._loc(lock_key)} is not held by lock id {lock_id}; "
                                    f"refusing to delete {self._loc(self._key(pipeline))}/")
        keys, _ = self._list(self._key(pipeline) + "/")
        # Every other object first (history, the runner's report, the last failure, strays),
        # then the manifest, then the lock, through the check that it is still ours.
        for key in [k for k in keys if k not in (lock_key, manifest_key)] + [manifest_key]:
            try:
                self._client.delete_object(Bucket=self.bucket, Key=key)  # idempotent
            except (ClientError, BotoCoreError) as exc:
                raise self._error(exc, key, "delete") from exc
        self._remove_lock(pipeline, lock_id, "release")

    def _write_object(self, pipeline: str, name: str, data: bytes) -> None:
        key = self._key(pipeline, name)
        try:
            self._put(key, data)
        except ClientError as exc:
            raise self._error(exc, key, "write") from exc

    def _read_object(self, pipeline: str, name: str) -> bytes | None:
        found = self._get(self._key(pipeline, name))
        return None if found is None else found[0]

    # -- discovery ------------------------------------------------------------

    def list_pipelines(self) -> list[str]:
        base = f"{self.prefix}/" if self.prefix else ""
        _, prefixes = self._list(base, delimiter="/")
        found = []
        for child in prefixes:
            name = child[len(base) :].rstrip("/")
            keys, _ = self._list(child, delimiter="/")
            if {f"{child}{MANIFEST_NAME}", f"{child}{LOCK_NAME}"} & set(keys):
                found.append(name)
        return sorted(found)
