"""Move a renamed table's or view's Delta state to where its new name lives.

The manifest's layout check (`Manifest.resolved`) wants every relation at
the path its kind and name give, so a renamed relation's folder is copied there
(history and data files as they are: data files hard-linked on a local disk,
server-side copies on object storage) and the state entry points at the copy with the same
pinned version. Nothing is recomputed or re-ingested. The old folder stays
until the new manifest is committed and is then deleted with other unused
state, so a crash before the commit leaves the old manifest's state intact; a
retried bootstrap replaces a partial copy.
"""

from __future__ import annotations

import os
import shutil
from dataclasses import replace

from reconciler.engine.delta.log import copy_remote, is_local
from reconciler.engine.runtime import PipelineRuntime
from reconciler.state.relations import RelationRecord


def move_relation(runtime: PipelineRuntime, old: str, new: str) -> RelationRecord:
    """Re-key `old`'s record under `new`, its Delta folders copied to `new`'s paths."""
    record = runtime.relations.pop(old)
    target = runtime.layout.relation(record.kind, new)
    copy_table(runtime, record.path, target)
    record = replace(record, path=target)
    if record.state is not None:  # a maintained aggregate's per-group state
        state_target = runtime.layout.state(new)
        copy_table(runtime, record.state.path, state_target)
        record = replace(record, state=replace(record.state, path=state_target))
    runtime.relations[new] = record
    return record


def copy_table(runtime: PipelineRuntime, source: str, target: str) -> None:
    runtime.storage.delete(target)  # what an interrupted attempt left there
    if not is_local(source):
        copy_remote(source, target, runtime.storage.storage_options(source))
        return
    try:
        shutil.copytree(source, target, copy_function=_link_data_files)
    except OSError:  # another device: hard links cannot cross it
        runtime.storage.delete(target)
        shutil.copytree(source, target)


def _link_data_files(source: str, target: str) -> None:
    """Data files are immutable: a hard link shares them. The log is copied, since a writer
    may rewrite a file there (`_last_checkpoint`) that the old folder must keep as it was."""
    if f"{os.sep}_delta_log{os.sep}" in source:
        shutil.copy2(source, target)
    else:
        os.link(source, target)
