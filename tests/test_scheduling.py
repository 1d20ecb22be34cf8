"""The files that share the run's Spark Connect server are scheduled as one unit."""

from __future__ import annotations

import ast
from pathlib import Path

from tests.scheduling import SHARED_SERVER_FILES

ROOT = Path(__file__).resolve().parent.parent


def _uses_fixture(path: Path, fixture: str) -> bool:
    """Whether a test or fixture function of the file takes `fixture` as a parameter."""
    tree = ast.parse(path.read_text(), str(path))
    return any(isinstance(node, ast.FunctionDef) and
               any(arg.arg == fixture for arg in node.args.args)
               for node in ast.walk(tree))


def test_every_file_using_the_connect_server_shares_one_worker() -> None:
    users = {str(path.relative_to(ROOT)) for path in (ROOT / "tests").rglob("test_*.py")
             if _uses_fixture(path, "remote")}
    assert users == set(SHARED_SERVER_FILES), "list them in tests/scheduling.py"
    assert set(SHARED_SERVER_FILES.values()) == {"spark-connect-server"}
