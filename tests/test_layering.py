"""The package's imports point one way, folder by folder: the flow of a change.

    cli -> runner, github -> operations -> engine -> plan -> state -> desired -> support

Inside `desired/` and `engine/` the rooms keep an order of their own (`ROOMS`), and no two
modules import each other, through any number of others.

Read from the source (every `import`, at module level or inside a function), so a
lazy import cannot hide an arrow that runs back up. See `reconciler/__init__.py`.
"""

from __future__ import annotations

import ast
import graphlib
import subprocess
import sys
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "reconciler"

FOLDERS = ("support", "desired", "state", "plan", "engine", "operations", "runner", "github",
           "cli")
"""The package's folders, each below the ones after it."""

ALLOWED: dict[str, set[str]] = {
    "support": {"support"},
    "desired": {"support", "desired"},
    "state": {"support", "desired", "state"},
    "plan": {"support", "desired", "state", "plan"},
    # A bootstrap carries out the plan's diff, so the engine may read the plan's data types.
    "engine": {"support", "desired", "state", "plan", "engine"},
    "operations": {"support", "desired", "state", "plan", "engine", "operations"},
    "runner": {"support", "desired", "state", "plan", "operations", "runner"},
    # The Action runs operations but never drives Spark itself.
    "github": {"support", "desired", "state", "plan", "operations", "github"},
    "cli": set(FOLDERS),
}


def layer(module: str) -> str:
    """The folder a module sits in; the package's root (its version) counts as support."""
    parts = module.split(".")
    if len(parts) == 1:
        return "support"
    if parts[1] == "__main__":
        return "cli"
    assert parts[1] in FOLDERS, f"{module} is in no known folder"
    return parts[1]


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
    packages = [p.parent for p in PACKAGE.rglob("__init__.py") if p.parent != PACKAGE]
    for package in packages:
        doc = ast.get_docstring(ast.parse((package / "__init__.py").read_text()))
        assert doc and "Owns" in doc and "May import" in doc, package


def test_no_module_is_longer_than_450_lines() -> None:
    long = {module_name(p): n for p in MODULES
            if (n := len(p.read_text(encoding="utf-8").splitlines())) > 450}
    assert not long, long


def test_importing_desired_state_and_plan_loads_no_spark() -> None:
    """Checked in a fresh interpreter: `reconcile plan` and `validate` need no JVM or pyspark."""
    names = [module_name(p) for p in MODULES
             if layer(module_name(p)) in ("desired", "state", "plan")]
    script = ("import importlib, sys\n"
              f"for name in {names!r}:\n    importlib.import_module(name)\n"
              "loaded = sorted(m for m in sys.modules if m.split('.')[0] in "
              "('pyspark', 'py4j', 'delta'))\n"
              "assert not loaded, loaded\n")
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                            check=False, cwd=PACKAGE.parent)
    assert result.returncode == 0, result.stderr


ROOMS: dict[str, tuple[str, ...]] = {
    "desired": ("settings", "parsing", "analysis", "model", "workspace", "view_test_files"),
    "engine": ("spark", "delta", "publish", "approval", "runtime", "statements", "maintenance",
               "preview",
               "expectations", "io", "bootstrap", "refresh", "step", "promotion", "view_tests"),
}
"""The rooms (a sub-folder or a module) of a folder, each below the ones after it: a room
imports only the rooms before it, and itself."""


def room(module: str) -> tuple[str, str] | None:
    """(folder, room) of a module in a folder with ordered rooms; the folder's face (its
    `__init__`) is no room."""
    parts = module.split(".")
    if len(parts) < 3 or parts[1] not in ROOMS:
        return None
    assert parts[2] in ROOMS[parts[1]], f"{module} is in no room of {parts[1]}"
    return parts[1], parts[2]


@pytest.mark.parametrize("folder", sorted(ROOMS))
def test_rooms_import_only_the_rooms_before_them(folder: str) -> None:
    known = {module_name(p) for p in MODULES}
    order = ROOMS[folder]
    upward = []
    for path in MODULES:
        source = room(module_name(path))
        if source is None or source[0] != folder:
            continue
        for target in sorted(imported(path) & known):
            into = room(target)
            if into is not None and into[0] == folder and \
                    order.index(into[1]) > order.index(source[1]):
                upward.append(f"{module_name(path)} -> {target}")
    assert upward == []


def test_no_module_imports_in_a_circle() -> None:
    """Every import, lazy ones too: a circle means two modules that are one."""
    known = {module_name(p) for p in MODULES}
    graph = {module_name(p): {t for t in imported(p) & known if t != module_name(p)}
             for p in MODULES}
    for name in graph:  # a package's face is not a module of its own here
        graph[name] = {t for t in graph[name] if not name.startswith(t + ".")}
    try:
        list(graphlib.TopologicalSorter(graph).static_order())
    except graphlib.CycleError as circle:
        pytest.fail(f"modules import each other: {' -> '.join(circle.args[1])}")


def test_the_runtime_records_writes_through_at_most_four_methods() -> None:
    """Writing a table is one call on its `DeltaRelation`, recorded by `pin`; only creating
    a table, replacing a view and replacing a view's state have methods of their own
    (issue 83). A method counts when it changes a relation's record itself."""
    tree = ast.parse((PACKAGE / "engine" / "runtime.py").read_text(encoding="utf-8"))
    [runtime] = [node for node in tree.body
                 if isinstance(node, ast.ClassDef) and node.name == "PipelineRuntime"]

    def records(method: ast.FunctionDef) -> bool:
        for node in ast.walk(method):
            targets = node.targets if isinstance(node, ast.Assign) else []
            if any(isinstance(target, ast.Subscript) and ast.unparse(target.value)
                   == "self.relations" for target in targets):
                return True
            if isinstance(node, ast.Call) and ast.unparse(node.func) in ("self._record",
                                                                         "self.pin"):
                return True
        return False
    writing = sorted(method.name for method in runtime.body
                     if isinstance(method, ast.FunctionDef)
                     and not method.name.startswith("_") and records(method))
    assert writing == ["create_table", "pin", "write_state", "write_view"]
