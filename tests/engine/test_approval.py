"""A writer of the state prefix alone cannot redirect a pipeline's data (`engine.approval`).

The manifest is checked as if a pull request wrote it, but a *safe* edit is still an edit
no one approved: an output connector pointed at another folder (or broker), an output
switched to another view, a view redefined. Each is written into the committed manifest
here, as someone who can write the state backend but not the storage could, and the next
`reconcile run` refuses it, sending nothing anywhere; the record of the approved program
lives in storage. A pipeline deployed before the record existed records its program on
its first step.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from reconciler.cli.main import cli
from reconciler.engine import approval
from tests.cli_helpers import reconcile
from tests.projects import program_of, write_files

pytestmark = pytest.mark.spark

SQL = """create table orders (id bigint not null, amount bigint);
create table salaries (name string, salary bigint);
create view totals as select count(*) as n, sum(amount) as total from orders;
create view payroll as select name, salary from salaries;
"""
SPEC = """name: p
bootstrap_policy: allow
connectors:
  - name: orders_in
    table: orders
    type: files
    format: json
    path: inbox
  - name: totals_out
    view: totals
    type: files
    format: json
    path: outbox
"""

Edit = Callable[[dict[str, Any], Path], None]


def _redirect_output(program: dict[str, Any], root: Path) -> None:
    program["connectors"]["totals_out"]["path"] = str(root / "stolen")


def _switch_output_view(program: dict[str, Any], root: Path) -> None:
    program["connectors"]["totals_out"]["relation"] = "payroll"


def _redefine_view(program: dict[str, Any], root: Path) -> None:
    """The view as the product itself would store it (so the SQL check passes), reading
    the other table."""
    other = write_files(root / "other", {
        "pipelines/p/pipeline.yaml": SPEC,
        "pipelines/p/program.sql": SQL.replace("sum(amount) as total from orders",
                                               "sum(salary) as total from salaries")})
    program["views"]["totals"] = program_of(other).document()["views"]["totals"]


EDITS: dict[str, tuple[Edit, str]] = {
    "output redirected": (_redirect_output, "connector 'totals_out' changed"),
    "output switched to another view": (_switch_output_view, "connector 'totals_out' changed"),
    "view redefined": (_redefine_view, "view 'totals' differs"),
}


def _deployed(root: Path) -> Path:
    project = write_files(root / "project", {"pipelines/p/pipeline.yaml": SPEC,
                                             "pipelines/p/program.sql": SQL})
    (project / "inbox").mkdir()
    reconcile(project, "apply", "--auto-approve")
    (project / "inbox/1.json").write_text('{"id": 1, "amount": 5}\n')
    return project


@pytest.mark.parametrize("edit", sorted(EDITS))
def test_a_manifest_edited_outside_reconcile_is_not_run(tmp_path: Path, edit: str) -> None:
    project = _deployed(tmp_path)
    state = project / ".reconcile/state/p/manifest.json"
    approved = state.read_text()
    document = json.loads(approved)
    change, named = EDITS[edit]
    change(document["program"], tmp_path)
    state.write_text(json.dumps(document))

    result = CliRunner().invoke(cli, ["-C", str(project), "run", "-p", "p"])
    assert result.exit_code == 1, result.output
    message = result.output.strip().splitlines()[-1]
    assert "is not the program the last approved apply recorded" in message, message
    assert named in message, message
    assert str(tmp_path / "stolen") not in result.output  # no value the edit wrote is echoed
    assert not (tmp_path / "stolen").exists()
    assert not (project / "outbox").exists() or not any((project / "outbox").rglob("*.json"))
    assert json.loads(state.read_text())["serial"] == document["serial"]
    report = json.loads(reconcile(project, "status", "-p", "p", "--json"))
    assert named in (report[0] if isinstance(report, list) else report)["unapproved"]

    state.write_text(approved)  # the approved manifest back: the pipeline runs again
    assert "step committed" in reconcile(project, "run", "-p", "p")
    assert any((project / "outbox").rglob("*.json"))


def test_a_pipeline_deployed_before_the_record_records_its_program_once(tmp_path: Path) -> None:
    project = _deployed(tmp_path)
    record = project / ".reconcile/data/p/approval"
    assert json.loads(record.read_text())["serial"] == 1
    record.unlink()  # as a deployment by an older version left it
    approval._verified.clear()  # and a new process, which has checked nothing yet

    result = CliRunner().invoke(cli, ["-C", str(project), "run", "-p", "p"])
    assert result.exit_code == 0, result.output
    assert "no approval record in storage" in result.output
    assert json.loads(record.read_text())["serial"] == 1

    state = project / ".reconcile/state/p/manifest.json"
    document = json.loads(state.read_text())
    _redirect_output(document["program"], tmp_path)
    state.write_text(json.dumps(document))
    (project / "inbox/2.json").write_text('{"id": 2, "amount": 7}\n')
    result = CliRunner().invoke(cli, ["-C", str(project), "run", "-p", "p"])
    assert result.exit_code == 1 and "connector 'totals_out' changed" in result.output
    assert not (tmp_path / "stolen").exists()
