"""Helper programs (git, `java -version`, `mvn`, our own CLI) run with nothing of the
workflow's in reach: no secret in their environment, no file of the checkout on their
path, and a working directory of their own.

A helper started while `reconcile github` runs inherits the workflow step's
environment: the AWS keys and `GITHUB_TOKEN` the action was given. A helper
never needs them, and whatever a pull request manages to make one run (a git
config it planted, say) would read them. So a helper gets only the variables a
program needs to find itself and its locale (`HELPER_ENVIRONMENT`); the JVM,
which does need the storage clients' credentials, is launched apart
(`engine/spark/session.py`, `jvm_launch`).

A helper also starts in an empty temporary folder, never in the checkout: a
program that looks in its working directory for configuration or code (`python
-m` puts it first on `sys.path`; Spark writes its warehouse there) finds nothing a pull
request wrote. Maven, which looks for `.mvn/` in every folder above its working directory
too (where, under `/tmp`, any local user may have left one), gets a private folder of the
jar cache with an empty `.mvn/` of its own instead (`engine/spark/jars.py`,
`maven_base`). Our own CLI runs as a child with `python -I` (`run_reconciler`):
isolated mode ignores every `PYTHON*` variable, the user's site folder and the working
directory, so a `reconciler/` package, a `sitecustomize.py`, a `usercustomize.py` or a
`.pth` file committed in a pull request is never imported; only the installed package is.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path

HELPER_ENVIRONMENT = re.compile(
    r"PATH|HOME|LANG|LC_\w+|TZ|TMPDIR|JAVA_HOME|XDG_CACHE_HOME|RECONCILE_JARS"
    r"|MAVEN_OPTS|MAVEN_ARGS|M2_HOME|(?i:https?_proxy|no_proxy)")
"""The only variables a helper inherits: where programs are, the locale, the JDK, where
the jars are cached and how Maven reaches its registry (`MAVEN_OPTS`, `MAVEN_ARGS`: the
operator's, the only Maven options there are besides `~/.m2`, since Maven runs where no
`.mvn/` but its own empty one is found: `jars.maven_base`)."""


def helper_environment(environment: Mapping[str, str] | None = None) -> dict[str, str]:
    """`environment` (default: this process's) cut down to `HELPER_ENVIRONMENT`."""
    source = os.environ if environment is None else environment
    return {key: value for key, value in source.items() if HELPER_ENVIRONMENT.fullmatch(key)}


def run_helper(argv: Sequence[str], *, cwd: Path | None = None, timeout: float = 30.0
               ) -> subprocess.CompletedProcess[str]:
    """Run a helper without a shell and with `helper_environment()`; output captured as text.

    Without `cwd` it starts in an empty temporary folder (removed afterwards), so nothing
    in the caller's working directory (a pull request's checkout) is read as its own.
    Raises OSError when the program cannot start and subprocess.TimeoutExpired.
    """
    if cwd is not None:
        return _run(argv, cwd, timeout)
    with tempfile.TemporaryDirectory(prefix="reconcile-helper-") as folder:
        return _run(argv, Path(folder), timeout)


def run_reconciler(args: Sequence[str], *, timeout: float) -> subprocess.CompletedProcess[str]:
    """`reconcile <args>` in a child process of the installed package: `python -I -m
    reconciler`, from an empty folder, with `helper_environment()` (so `args` must name the
    project with `-C` and an absolute path)."""
    return run_helper([sys.executable, "-I", "-m", "reconciler", *args], timeout=timeout)


def _run(argv: Sequence[str], cwd: Path, timeout: float) -> subprocess.CompletedProcess[str]:
    return subprocess.run(list(argv), cwd=cwd, capture_output=True, text=True, check=False,
                          timeout=timeout, stdin=subprocess.DEVNULL,
                          env=helper_environment())
