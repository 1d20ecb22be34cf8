"""A manifest's `pending` (the change it awaits or bootstraps) is typed when read: a
document of this version round-trips unchanged, and a committed manifest whose `pending`
is not what this version writes is refused by name, never read as something else."""

from __future__ import annotations

from typing import Any

import pytest

from reconciler.state.manifest import Manifest, PendingChange
from reconciler.support.errors import ReconcileError


def _document(pending: Any) -> dict[str, Any]:
    stored = Manifest.first("p", {"tables": {}, "views": {}, "connectors": {}}).to_document()
    return {**stored, "pending": pending}


@pytest.mark.parametrize("pending", [
    None,
    {"desired_fingerprint": "abc"},
    {"desired_fingerprint": "abc", "selection": {"objects": ["view v"]}},
    {"desired_fingerprint": "abc", "full_refresh": True},
])
def test_a_stored_pending_change_round_trips(pending: Any) -> None:
    manifest = Manifest.from_document(_document(pending), "manifest.json")
    assert manifest.to_document()["pending"] == pending
    if pending is not None:
        assert isinstance(manifest.pending, PendingChange)
        assert manifest.pending.desired_fingerprint == "abc"


@pytest.mark.parametrize("pending", [
    ["abc"], "abc", {"selection": {}}, {"desired_fingerprint": 7},
    {"desired_fingerprint": "abc", "selection": "all"},
    {"desired_fingerprint": "abc", "full_refresh": "yes"},
])
def test_a_malformed_pending_change_is_refused_naming_the_manifest(pending: Any) -> None:
    with pytest.raises(ReconcileError, match="manifest is missing or has a bad field") as found:
        Manifest.from_document(_document(pending), "manifest.json")
    assert "manifest.json" in str(found.value) or found.value.file == "manifest.json"
