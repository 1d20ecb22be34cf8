"""SQL templates come from pull requests: Jinja runs sandboxed, escapes are one-line errors."""

from __future__ import annotations

from pathlib import Path

from click.testing import CliRunner

from reconciler.cli.main import cli
from tests.projects import single_pipeline


def test_template_cannot_reach_python_internals(tmp_path: Path) -> None:
    project = single_pipeline(tmp_path, "create table t (a int);\n"
                              "-- {{ ''.__class__.__mro__[1].__subclasses__() }}\n")
    result = CliRunner().invoke(cli, ["-C", str(project), "validate"])
    assert result.exit_code == 1
    assert "program.sql:2: template error" in result.output
    assert "__class__" in result.output and len(result.output.splitlines()) == 1
