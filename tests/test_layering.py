"""The package's imports point one way: cli/github -> operations -> engine/plan -> spec.

Read from the source (every `import`, at module level or inside a function), so a
lazy import cannot hide an arrow that runs back up. See `reconciler/__init__.py`.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "reconciler"

SHARED = {"reconciler", "reconciler.errors", "reconciler.faults", "reconciler.progress",
          "reconciler.layout", "reconciler.redact",
          "reconciler.child_process", "reconciler.git", "reconciler.process"}
"""Leaf helpers any layer may use; they import nothing of the package but its version."""
STATE = {"reconciler.manifest", "reconciler.relation_records", "reconciler.connector_records",
         "reconciler.state"}

ALLOWED: dict[str, set[str]] = {
    "shared": {"shared"},
    "desired": {"shared", "desired"},
    "state": {"shared", "desired", "state"},
    "plan": {"shared", "desired", "state", "plan"},
    # A bootstrap carries out the plan's diff, so the engine may read the plan's data types.
    "engine": {"shared", "desired", "state", "plan", "engine"},
    "operations": {"shared", "desired", "state", "plan", "engine", "operations"},
    "github": {"shared", "desired", "state", "plan", "operations", "github"},
    "top": {"shared", "desired", "state", "plan", "engine", "operations", "github", "top"},
}


def layer(module: str) -> str:
    if module in SHARED:
        return "shared"
    if module in STATE:
        return "state"
    # They run the engine.
    if module in ("reconciler.operations", "reconciler.spark_engine", "reconciler.preview",
                  "reconciler.publication"):
        return "operations"
    parts = module.split(".")
    if len(parts) > 2 and parts[1] in ("desired", "plan", "engine", "github"):
        return parts[1]
    return "top"  # cli, cli_reference, scaffold, __main__


def module_name(path: Path) -> str:
    relative = path.relative_to(PACKAGE.parent).with_suffix("")
    parts = list(relative.parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def imported(path: Path) -> set[str]:
    """Every module of the package (and pyspark) that `path` imports, anywhere in it."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module)
            found.update(f"{node.module}.{alias.name}" for alias in node.names)
    return found


MODULES = sorted(PACKAGE.rglob("*.py"))


@pytest.mark.parametrize("path", MODULES, ids=lambda p: module_name(p))
def test_imports_point_down(path: Path) -> None:
    source = module_name(path)
    allowed = ALLOWED[layer(source)]
    known = {module_name(p) for p in MODULES}
    upward = sorted(target for target in imported(path) & known
                    if layer(target) not in allowed)
    assert not upward, f"{source} ({layer(source)}) imports {upward}"


@pytest.mark.parametrize("path", MODULES, ids=lambda p: module_name(p))
def test_only_the_engine_imports_pyspark(path: Path) -> None:
    spark = sorted(name for name in imported(path)
                   if name.split(".")[0] in ("pyspark", "py4j", "delta"))
    assert layer(module_name(path)) == "engine" or not spark, spark


def test_every_sub_package_says_what_it_owns_and_may_import() -> None:
    for package in ("desired", "plan", "engine", "github"):
        doc = ast.get_docstring(ast.parse((PACKAGE / package / "__init__.py").read_text()))
        assert doc and "May import" in doc, package


def test_no_module_is_longer_than_about_450_lines() -> None:
    long = {module_name(p): n for p in MODULES
            if (n := len(p.read_text(encoding="utf-8").splitlines())) > 480}
    assert not long, long


def test_importing_spec_and_plan_loads_no_spark() -> None:
    """Checked in a fresh interpreter: `reconcile plan` and `validate` need no JVM or pyspark."""
    names = [module_name(p) for p in MODULES if layer(module_name(p)) in ("desired", "plan")]
    script = ("import importlib, sys\n"
              f"for name in {names!r}:\n    importlib.import_module(name)\n"
              "loaded = sorted(m for m in sys.modules if m.split('.')[0] in "
              "('pyspark', 'py4j', 'delta'))\n"
              "assert not loaded, loaded\n")
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                            check=False, cwd=PACKAGE.parent)
    assert result.returncode == 0, result.stderr
