"""Issue 51.5: a project's files are read only as regular files inside the project.

A view-test fixture (`pipelines/<p>/tests/*.yaml`) or its `tests` folder that is a
symbolic link (to `/dev/zero`, which never ends, or to a file outside the repository,
which errors would quote) is refused, as SQL files and templates are; so is a named
pipe or a folder where a file should be, for view tests, `reconcile.yaml`,
`pipeline.yaml` and SQL files alike. Each refusal is one line naming the file, through
`reconcile test`, `reconcile validate` and the Action, and comes at once: every test
here runs under a deadline, so a read that blocks or never ends fails it instead of
hanging the run.
"""

from __future__ import annotations

import os
import signal
from collections.abc import Callable, Iterator
from pathlib import Path
from types import FrameType

import pytest

from reconciler.desired.parsing.pipeline_sql import MAX_SQL_BYTES
from reconciler.desired.settings.documents import MAX_YAML_BYTES, load_yaml, read_bytes
from reconciler.desired.view_test_files import load_view_tests
from reconciler.support.errors import ReconcileError
from tests.cli_helpers import reconcile
from tests.fake_github import FakeGitHub
from tests.github_harness import Workspace, only_sticky
from tests.projects import program_of, write_files

CANARY = "CANARY-outside-the-repository-51-5"
DEADLINE_SECONDS = 60
SQL = "create table orders (id bigint not null, amount int);\n" \
      "create view big as select id, amount from orders where amount > 10;\n"
A_TEST = "view: big\ngiven:\n  orders: [{id: 1, amount: 50}]\nexpect:\n  - {id: 1}\n"
LEAKING_TEST = f"view: {CANARY}\nexpect: []\n"  # followed, its error would quote the view
SYMLINK = "refusing to read a file that is a symbolic link"


class Deadline(Exception):  # not an OSError, which the reader would report
    """A test ran out of time: its read blocked or did not end."""


@pytest.fixture(autouse=True)
def deadline() -> Iterator[None]:
    """Fail a test whose read blocks (a pipe) or never ends (`/dev/zero`) instead of hanging:
    the alarm interrupts the blocked call, and a child process the Action waits for is
    killed as the wait is interrupted."""
    def expire(signum: int, frame: FrameType | None) -> None:
        raise Deadline(f"still reading after {DEADLINE_SECONDS} s")

    previous = signal.signal(signal.SIGALRM, expire)
    signal.alarm(DEADLINE_SECONDS)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)


def shop(root: Path) -> Path:
    """A one-pipeline project with a passing view test."""
    return write_files(root / "project", {"pipelines/shop/pipeline.yaml": "name: shop\n",
                                          "pipelines/shop/program.sql": SQL,
                                          "pipelines/shop/tests/big.yaml": A_TEST})


def outside_file(root: Path) -> Path:
    """A file outside the project whose text must never be read: a view test naming the
    canary, so an error about it would quote the canary."""
    folder = root / "outside"
    folder.mkdir(exist_ok=True)
    (folder / "leak.yaml").write_text(LEAKING_TEST)
    return folder / "leak.yaml"


def link_to_dev_zero(tests: Path) -> str:
    (tests / "zero.yaml").symlink_to("/dev/zero")
    return "zero.yaml"


def link_outside(tests: Path) -> str:
    (tests / "leak.yaml").symlink_to(outside_file(tests.parents[3]))
    return "leak.yaml"


def linked_folder(tests: Path) -> str:
    """The `tests` folder itself a link to a folder outside the project."""
    (tests / "big.yaml").unlink()
    tests.rmdir()
    tests.symlink_to(outside_file(tests.parents[3]).parent, target_is_directory=True)
    return ""


def a_pipe(tests: Path) -> str:
    os.mkfifo(tests / "pipe.yaml")  # opened for reading, it blocks until a writer comes
    return "pipe.yaml"


def a_folder(tests: Path) -> str:
    (tests / "folder.yaml").mkdir()
    return "folder.yaml"


def too_big(tests: Path) -> str:
    (tests / "big.yaml").write_text(A_TEST + "#" * MAX_YAML_BYTES + "\n")
    return "big.yaml"


@pytest.mark.parametrize("plant, problem", [
    (link_to_dev_zero, SYMLINK),
    (link_outside, SYMLINK),
    (linked_folder, "refusing to read a folder that is a symbolic link"),
    (a_pipe, "refusing to read a file that is a named pipe, not a regular file"),
    (a_folder, "refusing to read a file that is a folder, not a regular file"),
    (too_big, f"file too large: a YAML file may have at most {MAX_YAML_BYTES:,} bytes"),
], ids=["dev-zero", "outside-file", "linked-tests-folder", "fifo", "folder", "too-big"])
def test_reconcile_test_refuses_a_fixture_that_is_not_a_file_of_the_project(
        tmp_path: Path, plant: Callable[[Path], str], problem: str) -> None:
    project = shop(tmp_path)
    name = plant(project / "pipelines/shop/tests")
    output = reconcile(project, "test", expect=1)
    shown = f"pipelines/shop/tests/{name}".rstrip("/")
    assert output.startswith("error: ") and output.count("\n") == 1, output
    assert output.endswith(f"{shown}: {problem}\n"), output
    assert CANARY not in output


def test_an_honest_test_file_still_loads(tmp_path: Path) -> None:
    """The refusals above are the planted files': the project's own test, a regular file in
    a real `tests` folder, loads (without Spark, as `reconcile test` loads it first)."""
    project = shop(tmp_path)
    [test] = load_view_tests(project / "pipelines/shop", program_of(project), "pipelines/shop")
    assert (test.name, test.file, test.view) == ("big", "pipelines/shop/tests/big.yaml", "big")


def plant_pipe(path: Path) -> None:
    path.unlink(missing_ok=True)
    os.mkfifo(path)


@pytest.mark.parametrize("file", ["reconcile.yaml", "pipelines/shop/pipeline.yaml",
                                  "pipelines/shop/program.sql"])
def test_validate_refuses_a_project_file_that_is_a_pipe(tmp_path: Path, file: str) -> None:
    """`reconcile.yaml`, `pipeline.yaml` and SQL are read by the same helper: a named pipe
    in their place is refused at once instead of waiting for a writer forever."""
    project = shop(tmp_path)
    plant_pipe(project / file)
    output = reconcile(project, "validate", expect=1)
    assert output.startswith("error: ") and output.count("\n") == 1, output
    assert output.endswith(f"{file}: refusing to read a file that is a named pipe, not a "
                           "regular file\n"), output


def test_a_sql_file_over_the_limit_is_refused(tmp_path: Path) -> None:
    project = shop(tmp_path)
    (project / "pipelines/shop/program.sql").write_text(SQL + "--" + "x" * MAX_SQL_BYTES)
    output = reconcile(project, "validate", expect=1)
    assert output.endswith(f"pipelines/shop/program.sql: file too large: a SQL file may have "
                           f"at most {MAX_SQL_BYTES:,} bytes\n"), output



@pytest.mark.parametrize("plant, problem", [
    (os.mkfifo, "refusing to read a file that is a named pipe, not a regular file"),
    (lambda path: path.write_text("--" + "x" * MAX_SQL_BYTES),
     f"file too large: a template may have at most {MAX_SQL_BYTES:,} bytes"),
], ids=["fifo", "too-big"])
def test_an_included_template_is_read_by_the_same_reader(
        tmp_path: Path, plant: Callable[[Path], object], problem: str) -> None:
    """`{% include %}` reads through the checkout's safe reader too, never Jinja's own
    `open()`: a named pipe is refused at once, a file over the SQL limit is refused."""
    project = shop(tmp_path)
    program = project / "pipelines/shop/program.sql"
    program.write_text(SQL + "{% include 'part.sql' %}\n")
    plant(project / "pipelines/shop/part.sql")
    project.joinpath("pipelines/shop/pipeline.yaml").write_text("name: shop\nsql: [program.sql]\n")
    output = reconcile(project, "validate", expect=1)
    assert output.startswith("error: ") and output.count("\n") == 1, output
    assert output.endswith(f"pipelines/shop/program.sql:3: template error: template "
                           f"'part.sql': {problem}\n"), output

def test_the_byte_limit_does_not_trust_stat() -> None:
    """`/proc` files are regular files that `stat()` says are empty: what is read is
    counted, so the limit holds for them as for `/dev/zero`."""
    status = Path("/proc/self/status")
    assert status.stat().st_size == 0 and len(status.read_bytes()) > 100
    with pytest.raises(ReconcileError, match=r"^status: file too large: a test may have at "
                                             r"most 100 bytes$"):
        read_bytes(status, "status", 100, "a test")


def test_a_link_is_refused_where_it_is_opened(tmp_path: Path) -> None:
    """The check of the path before reading can be raced (the link made just after it):
    the open itself refuses to follow a link, so the file read is never the link's target."""
    link = tmp_path / "pipeline.yaml"
    link.symlink_to(outside_file(tmp_path))
    with pytest.raises(ReconcileError, match=rf"^pipeline.yaml: {SYMLINK}$"):
        load_yaml(link, "pipeline.yaml")


# -- through the Action ---------------------------------------------------------------------


def link_tests_folder_in(workspace: Workspace, outside: Path) -> str:
    tests = workspace.project / "pipelines/grades/tests"
    for path in tests.iterdir():
        path.unlink()
    tests.rmdir()
    tests.symlink_to(outside.parent, target_is_directory=True)
    return "folder that is a symbolic link"


def link_fixture_in(target: Callable[[Path], Path]) -> Callable[[Workspace, Path], str]:
    def plant(workspace: Workspace, outside: Path) -> str:
        (workspace.project / "pipelines/grades/tests/linked.yaml").symlink_to(target(outside))
        return "file that is a symbolic link"
    return plant


@pytest.mark.parametrize("plant", [
    link_fixture_in(lambda outside: Path("/dev/zero")),
    link_fixture_in(lambda outside: outside),
    link_tests_folder_in,
], ids=["dev-zero", "outside-file", "linked-tests-folder"])
def test_the_action_refuses_a_linked_fixture_and_quotes_nothing_of_it(
        workspace: Workspace, github: FakeGitHub, tmp_path: Path,
        plant: Callable[[Workspace, Path], str]) -> None:
    """A pull request commits the link (git stores symbolic links): the plan is posted, its
    view tests say in one line that they could not run and why, and nothing of the file
    outside the repository reaches the comment, the outputs, the summary or the log."""
    outside = outside_file(tmp_path)
    refused = plant(workspace, outside)
    run = workspace.pull_request("opened", workspace.commit("a linked view test"), tests="on")
    assert run.exit_code == 0, run.log
    body = only_sticky(github)["body"]
    assert "View tests of `grades` could not run:" in body, body
    [line] = [line for line in body.splitlines() if "could not run" in line]
    assert "pipelines/grades/tests" in line and f"refusing to read a {refused}" in line, line
    for shown in (body, run.log, run.summary, *run.outputs.values()):
        assert CANARY not in shown
