"""Every read of a file in the package is the checkout's safe reader or is named here with why.

A pull request's files are read only through `reconciler/support/safe_files.py` (a regular
file, no link on the way, `O_NOFOLLOW | O_NONBLOCK`, a size limit): the Action's jar step
once globbed `**/pipeline.yaml` with `Path.read_text()`, and a link to `/dev/zero`
exhausted the runner's memory (issue 78). This test reads the package's source (and
`state_backends/`) and finds every call that opens or reads a file: `open(...)`,
`.open(...)`, `.read_text(...)`, `.read_bytes(...)`, `os.fdopen(...)`, and `yaml`/`json`/
`tomllib`/`pickle` loads of a file. Each must be the safe reader (a bare `read_text` or
`read_bytes` imported from `support.safe_files` or `desired.settings.documents`) or be on
`ALLOWED`, with the reason the file it reads is not a checkout's; a new read fails here
until it goes through the safe reader or is added with its reason. An entry that no
longer matches anything fails too, so the list cannot outlive the code.

Entries are keyed by file and by the call's text (its callee, `ast.unparse`), not by line,
so unrelated edits do not move them.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SOURCES = sorted([*(ROOT / "reconciler").rglob("*.py"), *(ROOT / "state_backends").rglob("*.py")])
SAFE_READER = ROOT / "reconciler/support/safe_files.py"
SAFE_MODULES = {"reconciler.support.safe_files", "reconciler.desired.settings.documents"}

READ_METHODS = {"open", "read_text", "read_bytes", "fdopen"}
LOADERS = {"yaml", "json", "tomllib", "pickle", "marshal"}
LOADS = {"load", "safe_load", "full_load", "unsafe_load"}

ENGINE_STORAGE = "the engine's own table storage (Delta logs, checkpoints), through its store"
ALLOWED: dict[tuple[str, str], str] = {
    # The package's own files.
    ("reconciler/cli/scaffold.py",
     "files('reconciler.cli').joinpath('templates/workflow.yml').read_text"):
        "package data: the workflow `reconcile init` writes",
    ("reconciler/desired/analysis/memo.py", "path.read_bytes"):
        "the package's own source (desired/*.py), hashed into the memo's version",
    ("reconciler/engine/spark/local_fs.py", "SOURCE.read_bytes"):
        "the package's own Java source, compiled into the jar cache",
    # Files the engine writes and reads back, in places no pull request writes.
    ("reconciler/engine/spark/jars.py", "listed.read_text"):
        "complete.txt in the jar cache, written by `fetch`",
    ("reconciler/engine/spark/jars.py", "listing.read_text"):
        "the class path Maven wrote in the fetch's private base folder (mode 0700)",
    ("reconciler/engine/spark/class_archive.py", "log.read_text"):
        "the JVM's log of making the class archive, in the jar cache",
    ("reconciler/engine/spark/class_archive.py", "release.read_text"):
        "the JDK's own `release` file (JAVA_HOME): the operator's or the runner's",
    ("reconciler/engine/spark/warm.py", "path.read_text"):
        "the warm server's record, mode 0600 in the user's cache, written by this module",
    ("reconciler/engine/spark/warm.py", "cmdline.read_bytes"):
        "/proc/<pid>/cmdline: whether the recorded process is still the warm server",
    ("reconciler/engine/spark/warm.py", "os.open"):
        "creates the warm server's record and log (0600), never reads a checkout's file",
    ("reconciler/engine/spark/warm.py", "os.fdopen"):
        "writes the warm server's record and log it has just created",
    ("reconciler/engine/delta/tables.py", "self.open"):
        "opens a Delta table by its URI in the storage: not a file read",
    ("reconciler/engine/delta/writers.py", "tables.open"):
        "opens a Delta table by its URI in the storage: not a file read",
    ("reconciler/engine/delta/deletion_vectors.py", "store.read_bytes"): ENGINE_STORAGE,
    ("reconciler/engine/delta/drift.py", "store.read_bytes"): ENGINE_STORAGE,
    ("reconciler/engine/approval.py", "store.read_bytes"): ENGINE_STORAGE,
    ("reconciler/engine/io/input_batch.py", "store.read_bytes"): ENGINE_STORAGE,
    ("reconciler/engine/io/input_files.py", "self.tree.read_text"): ENGINE_STORAGE,
    ("reconciler/engine/io/kafka_source.py", "log.read_bytes"): ENGINE_STORAGE,
    ("reconciler/support/faults.py", "stat.read_text"):
        "/proc/<pid>/stat, for crash tests' fault injection",
    # Files the runner or the operator names, never a pull request.
    ("reconciler/github/event.py", "Path(event_path).read_text"):
        "GITHUB_EVENT_PATH: the runner's event payload",
    ("reconciler/github/workflow_commands.py", "path.open"):
        "appends to GITHUB_OUTPUT / GITHUB_STEP_SUMMARY, files the runner provides",
    ("reconciler/github/workflow_commands.py", "self.path.open"):
        "appends to GITHUB_OUTPUT / GITHUB_STEP_SUMMARY, files the runner provides",
    ("reconciler/plan/artifact.py", "path.read_text"):
        "the plan file the operator names to `reconcile apply`, written by `plan --out`",
    ("reconciler/cli/reference.py", "target.read_text"):
        "a developer regenerating a docs page they name (`python -m reconciler.cli.reference "
        "--write`)",
    # The state backend's own folder: read with the same checks, written atomically.
    ("state_backends/local.py", "os.open"):
        "state files: read with O_NOFOLLOW | O_NONBLOCK and a regular-file check (this "
        "package imports nothing of reconciler); lock and temporary files created",
    ("state_backends/local.py", "os.fdopen"):
        "the descriptors `os.open` above opened and checked",
}


def _relative(path: Path) -> str:
    return str(path.relative_to(ROOT))


def _safe_names(tree: ast.Module) -> set[str]:
    """Names a module imports from the safe reader (bare `read_text(...)` calls to them)."""
    return {alias.asname or alias.name for node in ast.walk(tree)
            if isinstance(node, ast.ImportFrom) and node.module in SAFE_MODULES
            for alias in node.names}


def reads(path: Path) -> Iterator[tuple[int, str]]:
    """(line, callee) of every call in `path` that opens or reads a file other than through
    the safe reader."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    safe = _safe_names(tree)
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        callee = node.func
        if isinstance(callee, ast.Name):
            if callee.id == "open" or (callee.id in {"read_text", "read_bytes"}
                                       and callee.id not in safe):
                yield node.lineno, callee.id
        elif isinstance(callee, ast.Attribute):
            loader = isinstance(callee.value, ast.Name) and callee.value.id in LOADERS
            if callee.attr in READ_METHODS or (loader and callee.attr in LOADS):
                yield node.lineno, ast.unparse(callee)


def found() -> dict[tuple[str, str], list[int]]:
    calls: dict[tuple[str, str], list[int]] = {}
    for path in SOURCES:
        if path == SAFE_READER:
            continue  # the safe reader itself
        for line, callee in reads(path):
            calls.setdefault((_relative(path), callee), []).append(line)
    return calls


def test_every_file_read_is_the_safe_reader_or_allowed_with_a_reason() -> None:
    unexplained = [f"{file}:{lines[0]}: {callee}(...)"
                   for (file, callee), lines in sorted(found().items())
                   if (file, callee) not in ALLOWED]
    assert not unexplained, (
        "read a checkout's file through reconciler/support/safe_files.py, or add the call "
        "to ALLOWED with why its file is not a checkout's:\n" + "\n".join(unexplained))


def test_every_allowed_read_still_exists() -> None:
    calls = found()
    stale = [f"{file}: {callee}" for file, callee in ALLOWED if (file, callee) not in calls]
    assert not stale, "remove from ALLOWED:\n" + "\n".join(stale)


@pytest.mark.parametrize("source, flagged", [
    ("from pathlib import Path\nPath('x').read_text()\n", ["Path('x').read_text"]),
    ("text = open('reconcile.yaml').read()\n", ["open"]),
    ("import yaml\nyaml.safe_load(handle)\n", ["yaml.safe_load"]),
    ("import json\nwith p.open() as f:\n    json.load(f)\n", ["p.open", "json.load"]),
    ("import os\nos.fdopen(os.open(p, 0))\n", ["os.fdopen", "os.open"]),
    ("from reconciler.support.safe_files import read_text\nread_text(p, 's', 1, 'k')\n", []),
    ("from reconciler.desired.settings.documents import read_bytes\n"
     "read_bytes(p, 's', 1, 'k')\n", []),
    ("def read_text(p): ...\nread_text(p)\n", ["read_text"]),
    ("spark.read.format('delta').load(uri)\n", []),
])
def test_the_scan_finds_what_it_says(tmp_path: Path, source: str, flagged: list[str]) -> None:
    module = tmp_path / "module.py"
    module.write_text(source)
    assert sorted(callee for _, callee in reads(module)) == sorted(flagged)
