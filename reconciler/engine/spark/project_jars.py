"""Which jar sets a project needs, read from its checkout: the storage its `reconcile.yaml`
names (S3A's jars for `s3a://`) and whether a `pipeline.yaml` says `kafka` (Kafka's).

The GitHub Action runs `python -P -m reconciler.engine.spark.jars --cache-key --project DIR`
and `--no-class-archive --project DIR` on any pull request's checkout, forks included,
before anything else of the reconciler: these files are the pull request's. So each is
read through the checkout's safe reader (`support.safe_files`: a regular file, no link on
the way, never waited on, at most a YAML file's 1 MiB), the pipeline folders are listed
without following a link, and a file refused or unreadable is skipped with one line on
stderr (stdout is the step's output), so the step never hangs, never exhausts memory and
never fails a project that needs no more than Delta's jars. A session chooses its jars
from the same files the same way (`operations/engine.py`, `pipelines_mention`).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Iterable
from functools import cache
from pathlib import Path
from typing import Any

from reconciler.desired.settings.documents import MAX_YAML_BYTES, YAML_FILE, load_yaml
from reconciler.desired.settings.project import PIPELINE_FILE, PROJECT_FILE
from reconciler.support.errors import ReconcileError
from reconciler.support.safe_files import outside_reason, read_inside, refuse_outside


def project_storage(project_dir: Path) -> str:
    """The `storage` a project's reconcile.yaml names, read only to choose which jars to
    fetch: a file that is missing, refused or does not parse names none (the command that
    reads it says why)."""
    storage = _project_settings(project_dir).get("storage")
    return storage if isinstance(storage, str) else ""


def project_uses_kafka(project_dir: Path) -> bool:
    """Whether a pipeline.yaml of the project says `kafka` (read as text, like the storage,
    only to choose which jars to fetch): the files `reconcile` would load as the project's
    pipelines, `<pipelines folder>/<name>/pipeline.yaml`."""
    project_dir = Path(os.path.abspath(project_dir))
    folder = _project_settings(project_dir).get("pipelines", "pipelines")
    return pipelines_mention(project_dir, _pipeline_dirs(project_dir, folder), ("kafka",),
                             note=_note)


def pipelines_mention(project_dir: Path, pipeline_dirs: Iterable[Path], words: tuple[str, ...],
                      note: Callable[[str], None] | None = None) -> bool:
    """Whether a `pipeline.yaml` in `pipeline_dirs` (folders inside `project_dir`, both
    absolute) holds one of `words` (lower case) in its text.

    A pull request writes these files: each is read through the checkout's safe reader
    (`support.safe_files`: no link on the way, a regular file, at most a YAML file's
    `MAX_YAML_BYTES`); one it refuses or cannot read is skipped (`note`: told so in one
    line), never followed, waited on or read whole."""
    for folder in pipeline_dirs:
        spec = folder / PIPELINE_FILE
        try:
            text = read_inside(spec, project_dir, _shown(spec, project_dir), MAX_YAML_BYTES,
                               YAML_FILE)
        except ReconcileError as error:
            if note is not None:
                note(str(error))
            continue
        if any(word in text.lower() for word in words):
            return True
    return False


def _project_settings(project_dir: Path) -> dict[str, Any]:
    """reconcile.yaml's top-level mapping as the safe reader and the YAML loader's limits
    give it (`desired.settings.documents.load_yaml`), or {} when there is none; a file refused or
    not parsing counts as none, with a one-line note (once: read once per project)."""
    return _settings_at(Path(os.path.abspath(project_dir)))


@cache
def _settings_at(project_dir: Path) -> dict[str, Any]:
    path = project_dir / PROJECT_FILE
    if not os.path.lexists(path):
        return {}
    shown = _shown(path, project_dir)
    try:
        refuse_outside(path, project_dir, shown)
        data = load_yaml(path, shown).data
    except ReconcileError as error:
        _note(str(error))
        return {}
    return data if isinstance(data, dict) else {}


def _pipeline_dirs(project_dir: Path, pipelines: object) -> list[Path]:
    """The project's pipeline folders with a pipeline.yaml, as `desired.settings.project`
    finds them, listed without following a link: a linked folder, or a pipelines folder that is not
    inside the project, is skipped with a note."""
    if not isinstance(pipelines, str):
        return []
    root = project_dir / pipelines
    if (why := outside_reason(root, project_dir)) is not None:
        _note(f"pipelines folder '{pipelines}' {why}")
        return []
    try:
        entries = sorted(os.scandir(root), key=lambda entry: entry.name)
    except OSError:
        return []  # no pipelines folder: nothing to fetch for
    found = []
    for entry in entries:
        folder = Path(entry.path)
        if entry.is_symlink():
            if os.path.lexists(folder / PIPELINE_FILE):
                _note(f"{_shown(folder, project_dir)}: refusing to read a folder that is a "
                      "symbolic link")
            continue
        if entry.is_dir(follow_symlinks=False) and os.path.lexists(folder / PIPELINE_FILE):
            found.append(folder)
    return found


def _shown(path: Path, project_dir: Path) -> str:
    return str(path.relative_to(project_dir)) if path.is_relative_to(project_dir) else str(path)


def _note(message: str) -> None:
    """One line on stderr for a file the jar step skipped: its stdout is the step's output."""
    print(f"note: {message}; not read to choose the jars", file=sys.stderr)
