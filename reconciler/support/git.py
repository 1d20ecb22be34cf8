"""Asking git about a checkout whose files a pull request wrote, without obeying them.

git reads configuration from the repository it discovers, and discovery starts
in the folder it is given. A pull request can commit `HEAD`, `config`,
`objects/` and `refs/` into the project folder: git then takes that folder for
a bare repository and obeys its `config` (`core.fsmonitor = "sh -c ..."` runs a
command on `git status`). So every call here

* refuses implicit bare repositories (`safe.bareRepository=explicit`, honoured
  only from the command line or the user's and system's own config, never from
  a repository's), and says which folder looked like one;
* switches off what runs programs: `core.fsmonitor`, hooks (`core.hooksPath`);
* takes no optional lock and writes nothing (`--no-optional-locks`);
* runs with `run_helper`'s environment: no AWS keys, no `GITHUB_TOKEN`.

The checkout's own `.git` (made by `actions/checkout` or the user) is trusted; a
pull request cannot commit a `.git` entry of its own (git refuses the path).
"""

from __future__ import annotations

import subprocess
from dataclasses import dataclass
from pathlib import Path

from reconciler.support.child_process import run_helper
from reconciler.support.errors import ReconcileError

HARDENING = ("-c", "safe.bareRepository=explicit", "-c", "core.fsmonitor=false",
             "-c", "core.hooksPath=/dev/null", "--no-optional-locks")
"""Options every git call starts with (see the module's docstring)."""

_BARE_REFUSED = "cannot use bare repository"


@dataclass(frozen=True)
class Commit:
    """The commit a folder is checked out at, and whether the folder has local edits."""

    sha: str
    dirty: bool


def git(folder: Path, *args: str) -> str | None:
    """git's stdout for `args` run in `folder`, or None when git fails or is missing.

    A folder that git would take for a bare repository is an error, not None: in the
    Action it is an attack, and on a laptop a surprise worth a clear line.
    """
    try:
        result = run_helper(["git", *HARDENING, "-C", str(folder), *args], timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        return None
    if result.returncode != 0:
        if _BARE_REFUSED in result.stderr:
            raise ReconcileError("a folder of the project looks like a bare git repository "
                                 "(HEAD, config, objects/, refs/); git would obey its config, "
                                 "so it is refused: remove those files",
                                 file=_bare_folder(result.stderr) or str(folder))
        return None
    return result.stdout.strip()


def _bare_folder(stderr: str) -> str | None:
    """The folder git names in `fatal: cannot use bare repository '<folder>' (...)`."""
    _, found, rest = stderr.partition(_BARE_REFUSED + " '")
    return rest.split("'", 1)[0] if found else None


def checked_out_commit(folder: Path) -> Commit | None:
    """HEAD of the checkout holding `folder`, and whether `folder` has uncommitted edits."""
    sha = git(folder, "rev-parse", "--verify", "HEAD")
    if sha is None:
        return None
    return Commit(sha, bool(git(folder, "status", "--porcelain", "--", ".")))


def repository_prefix(folder: Path) -> str | None:
    """`folder` relative to its checkout's root, "" or ending in "/" (None: not in git)."""
    return git(folder, "rev-parse", "--show-prefix")
