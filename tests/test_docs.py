"""The documentation is checked like code: the site builds with `mkdocs build --strict`,
its commands run, every `reconcile ...` it quotes is one the CLI accepts, and the CLI
reference page is generated from click.

What "its commands run" means, for the ```bash blocks of README.md and docs/*.md (a
block that appears in both, as docs/index.md includes the README's, runs once):

- a block that `cd`s into an example or runs `reconcile` is run line by line, in order,
  on a copy of that example: `reconcile ...` in-process on the test run's Spark session
  (as tests/cli_helpers.py runs the CLI), any other line (`sed`, `cat`) in a shell;
- `make TARGET` must be a target of the Makefile (they are the suite itself, the demos
  and the benches: CI runs `make test`), and `.venv/bin/python -m MODULE` or
  `.venv/bin/python FILE` must name a module or file that exists.
"""

from __future__ import annotations

import ast
import importlib
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import click
import pytest
from click.testing import CliRunner
from pyspark.sql import SparkSession

from reconciler.cli.main import cli
from reconciler.cli.reference import END, START, _commands, render
from tests.projects import copy_example

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
DOCS = ROOT / "docs"
CLI_PAGE = DOCS / "cli.md"
README_MAX_LINES = 250


def pages() -> list[Path]:
    """README.md and every page of the site, in a fixed order."""
    return [README, *sorted(DOCS.glob("*.md"))]


def bash_blocks() -> list[tuple[str, str]]:
    """(where, text) of every ```bash block, each distinct text once."""
    seen: dict[str, str] = {}
    for page in pages():
        for match in re.finditer(r"^```bash\n(.*?)^```", page.read_text(encoding="utf-8"),
                                 re.M | re.S):
            seen.setdefault(match.group(1), page.relative_to(ROOT).as_posix())
    return [(where, text) for text, where in seen.items()]


def command_lines(block: str) -> list[list[str]]:
    """Each line of a block as words, comments dropped."""
    return [words for line in block.splitlines()
            if (words := shlex.split(line, comments=True))]


def runs_reconcile(block: str) -> bool:
    return any(words[0] in ("cd", "reconcile") for words in command_lines(block))


SESSION_BLOCKS = [pytest.param(text, id=f"{where}:{n}")
                  for n, (where, text) in enumerate(bash_blocks()) if runs_reconcile(text)]
OTHER_BLOCKS = [pytest.param(text, id=f"{where}:{n}")
                for n, (where, text) in enumerate(bash_blocks()) if not runs_reconcile(text)]


def test_readme_is_short_and_its_links_resolve() -> None:
    text = README.read_text(encoding="utf-8")
    assert len(text.splitlines()) <= README_MAX_LINES, "README.md: move detail to docs/"
    for target in re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", text):
        if not re.match(r"[a-z]+://", target):
            assert (ROOT / target).exists(), f"README.md links to missing {target}"


def test_site_builds_strict(tmp_path: Path) -> None:
    """A broken link or anchor, a page left out of the nav, or a missing included file
    (README.md, ARCHITECTURE.md, bench/README.md) fails the build."""
    result = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--quiet", "-d",
         str(tmp_path / "site")],
        cwd=ROOT, capture_output=True, text=True, timeout=120,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"})
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.mark.parametrize("block", OTHER_BLOCKS)
def test_other_commands_name_what_exists(block: str) -> None:
    targets = set(re.findall(r"^([\w-]+):", (ROOT / "Makefile").read_text(), re.M))
    for words in command_lines(block):
        if words[0] == "make":
            assert set(words[1:]) <= targets, f"no such make target: {' '.join(words)}"
        elif words[0] == ".venv/bin/python" and words[1] == "-m":
            module = words[2]
            if module in ("pytest", "mkdocs"):
                continue
            assert (ROOT / (module.replace(".", "/") + ".py")).exists(), module
            if module == "reconciler.cli.reference":
                continue  # test_cli_reference_page_matches_click runs what it writes
        elif words[0] == ".venv/bin/python":
            assert (ROOT / words[1]).exists(), words[1]
        else:
            pytest.fail(f"a command no test runs or checks: {' '.join(words)} "
                        "(extend tests/test_docs.py)")


@pytest.mark.slow
@pytest.mark.parametrize("block", SESSION_BLOCKS)
def test_session_commands_run(block: str, spark: SparkSession, tmp_path: Path) -> None:
    project: Path | None = None
    for line, words in zip(_lines(block), command_lines(block), strict=True):
        if words[0] == "cd":
            assert words[1].startswith("examples/") and len(words) == 2, line
            project = copy_example(words[1].removeprefix("examples/"), tmp_path)
            continue
        assert project is not None, f"a block must cd into an example first: {line}"
        if words[0] == "reconcile":
            result = CliRunner().invoke(cli, ["-C", str(project), *words[1:]],
                                        catch_exceptions=False)
            parked = words[1] == "apply" and result.exit_code == 3  # awaiting approval
            assert result.exit_code == 0 or parked, \
                f"{line}\nexit {result.exit_code}: {result.output}"
        else:
            subprocess.run(line, shell=True, cwd=project, check=True, timeout=30)


def _lines(block: str) -> list[str]:
    return [line for line in block.splitlines() if shlex.split(line, comments=True)]


def quoted_commands() -> list[tuple[str, list[str]]]:
    """Every `reconcile ...` in inline code, and `$ reconcile ...` in example output."""
    found: dict[str, str] = {}
    for page in pages():
        if page == CLI_PAGE:
            continue  # usage lines, generated from the commands themselves
        text = page.read_text(encoding="utf-8")
        where = page.relative_to(ROOT).as_posix()
        for command in [*re.findall(r"`(?:\.venv/bin/)?reconcile ([^`]+)`", text),
                        *re.findall(r"^\s*\$ reconcile (.+)$", text, re.M)]:
            found.setdefault(command, where)
    commands = []
    for command, where in found.items():
        if command.strip() in ("...", "COMMAND --help"):
            continue
        words = shlex.split(command.replace("[", " ").replace("]", " "))
        commands.append((where, [word for word in words if word != "..."]))
    return commands


@pytest.mark.parametrize("words", [pytest.param(words, id=f"{where}: {' '.join(words)}")
                                   for where, words in quoted_commands()])
def test_quoted_commands_are_accepted(words: list[str]) -> None:
    """Each names a command and options the CLI has (`[...]` read as optional words;
    a missing argument is fine: `reconcile execute` names the command)."""
    command: click.Command = cli
    parent: click.Context | None = None
    name, args = "reconcile", list(words)
    while True:
        try:
            context = command.make_context(name, list(args), parent=parent)
        except click.MissingParameter:
            return
        except click.BadParameter as error:  # a file the example names need not exist here
            if isinstance(getattr(error.param, "type", None), click.Path):
                return
            raise
        if not isinstance(command, click.Group):
            return
        rest = [*context._protected_args, *context.args]
        if not rest:
            return
        found, subcommand, args = command.resolve_command(context, rest)
        assert subcommand is not None, words
        name, command, parent = found or "", subcommand, context


PACKAGES = sorted(str(init.parent.relative_to(ROOT / "reconciler"))
                  for init in (ROOT / "reconciler").rglob("__init__.py"))


@pytest.mark.parametrize("package", PACKAGES)
def test_package_docstrings_and_architecture_name_every_module(package: str) -> None:
    """The code map cannot fall behind the code: each package's docstring ("Owns ...")
    and ARCHITECTURE.md name every module the package has."""
    folder = ROOT / "reconciler" / package
    docstring = ast.get_docstring(ast.parse((folder / "__init__.py").read_text())) or ""
    architecture = (ROOT / "ARCHITECTURE.md").read_text(encoding="utf-8")
    for module in sorted(folder.glob("*.py")):
        if module.stem.startswith("__"):
            continue
        named = re.compile(rf"`{module.stem}(\.py)?`")
        assert named.search(docstring), f"reconciler/{package}/__init__.py: {module.stem}?"
        assert named.search(architecture), f"ARCHITECTURE.md: {package}/{module.name}?"


def test_cli_reference_page_matches_click() -> None:
    text = CLI_PAGE.read_text(encoding="utf-8")
    section = START + text.split(START, 1)[1].split(END, 1)[0] + END
    assert section == render(), "run: python -m reconciler.cli.reference --write docs/cli.md"


def test_every_command_and_option_has_help() -> None:
    for path, command in _commands(cli, "reconcile"):
        assert command.help, f"{path} has no help text"
        for param in command.params:
            if hasattr(param, "help") and param.param_type_name == "option":
                assert param.help, f"{path} {param.opts} has no help text"


PACKAGES = sorted(p.name for p in (ROOT / "reconciler").iterdir()
                  if (p / "__init__.py").is_file())
MODULE_NAME = re.compile(rf"`((?:reconciler\.)?(?:{'|'.join(PACKAGES)}|state_backends)"
                         r"(?:\.\w+)+)")
NOT_MODULES = {"github.token": "the Actions expression `${{ github.token }}`"}
FILE_SUFFIXES = {"json", "yaml", "yml", "md", "sql", "py", "txt", "csv", "done", "parquet"}


def _names_what_exists(name: str) -> bool:
    """Whether `engine.delta.drift.own_commit` (the package's prefix optional) is a module
    and attributes of it; a file's name (`plan.json`) is not a module name."""
    parts = name.split(".")
    if parts[-1] in FILE_SUFFIXES:
        return True
    if parts[0] not in ("reconciler", "state_backends"):
        parts.insert(0, "reconciler")
    for cut in range(len(parts), 0, -1):
        try:
            found: object = importlib.import_module(".".join(parts[:cut]))
        except ImportError:
            continue
        for attribute in parts[cut:]:
            fields = getattr(found, "__dataclass_fields__", {}) if isinstance(found, type) \
                else {}
            if attribute in fields:
                return True
            if not hasattr(found, attribute):
                return False
            found = getattr(found, attribute)
        return True
    return False


def test_every_dotted_module_name_exists() -> None:
    """A name such as `engine.delta.storage.DeltaStorage` in a docstring, a comment or a
    page is a module (and attributes of it) that exists: moved code takes its names with
    it (issue 83 found 39 stale ones)."""
    sources = [*sorted((ROOT / "reconciler").rglob("*.py")),
               *sorted((ROOT / "state_backends").rglob("*.py")),
               *pages(), ROOT / "ARCHITECTURE.md"]
    stale = [f"{source.relative_to(ROOT)}:{text[:match.start()].count(chr(10)) + 1}: "
             f"{match.group(1)}"
             for source in sources for text in [source.read_text(encoding="utf-8")]
             for match in MODULE_NAME.finditer(text)
             if match.group(1) not in NOT_MODULES and not _names_what_exists(match.group(1))]
    assert stale == []
