"""YAML bombs and oversized files, through the real CLI: refused in one line, cheaply.

A pull request controls `pipeline.yaml` (and, in a plain `reconcile plan`, `reconcile.yaml`).
Aliases let a few hundred bytes stand for a billion values, an alias may point into itself,
and nesting can be deeper than Python's stack; each must be refused, naming the file (and the
line when there is one), before anything walks the expanded data.
"""

from __future__ import annotations

import re
import tracemalloc
from pathlib import Path

import pytest
from click.testing import CliRunner

from reconciler.cli.main import cli
from reconciler.desired.settings.documents import MAX_YAML_BYTES, parse_yaml
from reconciler.support.errors import ReconcileError

try:
    from tests.projects import write_files
except ImportError:  # tests/ itself on sys.path
    from projects import write_files  # type: ignore[no-redef]

SPEC = "pipelines/p/pipeline.yaml"
SETTINGS = "reconcile.yaml"


def billion_laughs(first_line: str) -> str:
    """`first_line`, then nine levels of nine aliases each: 9**9 strings once expanded."""
    lines = [first_line, 'a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]']
    for previous, name in zip("abcdefgh", "bcdefghi", strict=True):
        lines.append(f"{name}: &{name} [" + ",".join([f"*{previous}"] * 9) + "]")
    return "\n".join(lines) + "\n"


def project(root: Path, files: dict[str, str]) -> Path:
    return write_files(root, {SPEC: "name: p\n",
                              "pipelines/p/program.sql": "create table t (id bigint);\n",
                              **files})


def refusal(root: Path, *command: str) -> str:
    """Run `reconcile -C root COMMAND`; it must exit 1 with one line and no traceback."""
    result = CliRunner().invoke(cli, ["-C", str(root), *command])
    assert result.exit_code == 1, result.output
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in result.output, result.output
    return lines[0]


def assert_names(line: str, root: Path, file: str, number: int | None) -> None:
    """The message starts with `error: <file>:<line>: ` (or `<file>: ` without a line)."""
    where = rf":{number}: " if number is not None else ": "
    match = re.match(rf"error: (\S*?{re.escape(file)}){where}", line)
    assert match, line
    assert (Path.cwd() / match[1]).resolve() == (root / file).resolve(), line


@pytest.mark.parametrize(("file", "first_line"), [(SPEC, "name: p"), (SETTINGS, "# settings")])
@pytest.mark.parametrize("command", ["validate", "plan"])
def test_a_billion_laughs_is_refused_before_it_is_expanded(
        tmp_path: Path, file: str, first_line: str, command: str) -> None:
    root = project(tmp_path, {file: billion_laughs(first_line)})
    tracemalloc.start()
    try:
        line = refusal(root, command)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert_names(line, root, file, 3)  # the first alias
    assert "more than 100,000 values once aliases are expanded" in line
    assert peak < 64 << 20, f"{peak:,} bytes"  # expanded, it is 9**9 strings (GBs)
    assert not (root / ".reconcile").exists()


@pytest.mark.parametrize(("text", "line", "fragment"), [
    ("name: p\nvars: &v\n  self: *v\n", 3, "alias to a node that contains it"),
    ("name: p\nvars: " + "[" * 5000 + "]" * 5000 + "\n", 2, "nested more than 100 levels"),
    ("name: p\na: &a " + "[" * 90 + "]" * 90 + "\nb: &b [" + "[" * 20 + "*a" + "]" * 21 + "\n",
     3, "nested more than 100 levels deep once aliases are expanded"),
], ids=["recursive-alias", "deep-nesting", "deep-through-an-alias"])
def test_infinite_or_too_deep_yaml_is_refused(tmp_path: Path, text: str, line: int,
                                              fragment: str) -> None:
    root = project(tmp_path, {SPEC: text})
    message = refusal(root, "validate")
    assert_names(message, root, SPEC, line)
    assert fragment in message


@pytest.mark.parametrize("file", [SPEC, SETTINGS])
def test_a_file_over_the_size_limit_is_refused_unread(tmp_path: Path, file: str) -> None:
    padding = "# " + "x" * 78 + "\n"
    text = "name: p\n" if file == SPEC else ""
    text += padding * (MAX_YAML_BYTES // len(padding) + 1)
    root = project(tmp_path, {file: text})
    message = refusal(root, "validate")
    assert_names(message, root, file, None)
    assert f"file too large: a YAML file may have at most {MAX_YAML_BYTES:,} bytes" in message


def test_ordinary_anchors_aliases_and_merge_keys_still_work(tmp_path: Path) -> None:
    """Shared connector options through an anchor, a merge key that overrides one of them."""
    spec = """\
        name: p
        vars: {days: &days [mon, tue]}
        connectors:
          - name: a_in
            table: a
            type: files
            format: csv
            path: in/a
            options: &csv {header: true, sep: ";"}
          - name: b_in
            table: b
            type: files
            format: csv
            path: in/b
            options:
              <<: *csv
              sep: ","
        """
    sql = ("create table a (id bigint);\ncreate table b (id bigint);\n"
           "create view v as select id from a where id in ({{ days | length }});\n")
    root = write_files(tmp_path, {SPEC: spec, "pipelines/p/program.sql": sql})
    for folder in ("in/a", "in/b"):
        (root / folder).mkdir(parents=True)
    result = CliRunner().invoke(cli, ["-C", str(root), "validate"])
    assert result.exit_code == 0, result.output
    assert "p: 2 tables, 1 views, 2 input and 0 output connectors: ok" in result.output


def test_text_that_is_not_a_file_goes_through_the_same_limits() -> None:
    """What the Action reads through GitHub's contents API is parsed by `parse_yaml` too."""
    with pytest.raises(ReconcileError, match=r"^base:reconcile.yaml:3: .*more than 100,000"):
        parse_yaml(billion_laughs("backend: x"), "base:reconcile.yaml")
    with pytest.raises(ReconcileError, match=r"^base:reconcile.yaml: file too large"):
        parse_yaml("#" * MAX_YAML_BYTES + "\n", "base:reconcile.yaml")
    document = parse_yaml("a: &x {k: 1}\nb: *x\nc:\n  - 2\n", "base:reconcile.yaml")
    assert document.data == {"a": {"k": 1}, "b": {"k": 1}, "c": [2]}
    assert document.line_of(("c", 0)) == 4
