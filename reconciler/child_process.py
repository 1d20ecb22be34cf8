"""Helper programs (git, `java -version`) run with no secret of ours in their environment.

A helper started while `reconcile github` runs inherits the workflow step's
environment: the AWS keys and `GITHUB_TOKEN` the action was given. A helper
never needs them, and whatever a pull request manages to make one run (a git
config it planted, say) would read them. So a helper gets only the variables a
program needs to find itself and its locale (`HELPER_ENVIRONMENT`); the JVM,
which does need the storage clients' credentials, is launched apart
(`engine/session.py`, `jvm_launch`).
"""

from __future__ import annotations

import os
import re
import subprocess
from collections.abc import Mapping, Sequence
from pathlib import Path

HELPER_ENVIRONMENT = re.compile(r"PATH|HOME|LANG|LC_\w+|TZ|TMPDIR|JAVA_HOME")
"""The only variables a helper inherits: where programs are, the locale, the JDK."""


def helper_environment(environment: Mapping[str, str] | None = None) -> dict[str, str]:
    """`environment` (default: this process's) cut down to `HELPER_ENVIRONMENT`."""
    source = os.environ if environment is None else environment
    return {key: value for key, value in source.items() if HELPER_ENVIRONMENT.fullmatch(key)}


def run_helper(argv: Sequence[str], *, cwd: Path | None = None, timeout: float = 30.0
               ) -> subprocess.CompletedProcess[str]:
    """Run a helper without a shell and with `helper_environment()`; output captured as text.

    Raises OSError when the program cannot start and subprocess.TimeoutExpired.
    """
    return subprocess.run(list(argv), cwd=cwd, capture_output=True, text=True, check=False,
                          timeout=timeout, stdin=subprocess.DEVNULL,
                          env=helper_environment())
