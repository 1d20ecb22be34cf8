"""`reconcile init`: a new project that passes `validate` and `apply` as it is.

It writes `reconcile.yaml`, one pipeline with a table, a view and a passing view
test, and the GitHub workflow (the same file as `examples/workflows/reconcile.yml`). Existing files
are never overwritten, and none is written through a symbolic link (`support.safe_files`
says which path has one on the way).
"""

from __future__ import annotations

import os
import re
from importlib.resources import files
from pathlib import Path

from reconciler.desired.settings.project import NAME_PATTERN, display
from reconciler.support.errors import ReconcileError
from reconciler.support.safe_files import outside_reason

PROJECT = """\
# pipeline-reconciler settings; every key is optional (these are the defaults).
backend: .reconcile/state     # or s3://bucket/prefix
storage: .reconcile/data      # where the Delta tables live
pipelines: pipelines
# spark:
#   master: spark://host:7077          # or remote: sc://host:15002
"""
PIPELINE = """\
name: {name}
sql: [program.sql]
vars:
  min_amount: 10
bootstrap_policy: await_approval
connectors: []
# - {{name: events_in, table: events, type: files, format: json, path: data/events}}
"""
PROGRAM = """\
-- Tables are filled by input connectors or `reconcile execute "INSERT INTO ..."`.
create table events (
  id bigint not null,
  kind string,
  amount decimal(10,2),
  primary key (id)
) with ('materialized' = 'true');

-- Views are recomputed from state when they change: no input is re-read.
create materialized view totals_by_kind as
select kind, count(*) as events, sum(amount) as amount
from events
where amount >= {{{{ min_amount }}}}
group by kind;
"""
TEST = """\
# A view test: `reconcile test` runs the view on these rows (embedded Spark, no state),
# then applies the change and checks the view both maintained and recomputed.
name: totals_count_big_events
view: totals_by_kind
given:
  events:
    - {id: 1, kind: click, amount: 12.50}
    - {id: 2, kind: click, amount: 3.00}   # under min_amount: left out
expect:
  - {kind: click, events: 1, amount: 12.50}
change:
  events:
    insert: [{id: 3, kind: view, amount: 20.00}]
    delete: [{id: 1, kind: click, amount: 12.50}]
expect_after:
  - {kind: view, events: 1, amount: 20.00}
"""
GITIGNORE = ".reconcile/\n"


def scaffold(directory: Path, pipeline: str) -> list[Path]:
    """Write the project files that do not exist yet; returns the ones written."""
    directory = Path(os.path.abspath(directory))
    if not re.match(NAME_PATTERN, pipeline):
        raise ReconcileError(f"'{pipeline}' is not a valid pipeline name (letters, digits, _)")
    workflow = files("reconciler.cli").joinpath("templates/workflow.yml").read_text(
        encoding="utf-8")
    wanted = {
        directory / "reconcile.yaml": PROJECT,
        directory / "pipelines" / pipeline / "pipeline.yaml": PIPELINE.format(name=pipeline),
        directory / "pipelines" / pipeline / "program.sql": PROGRAM.format(),
        directory / "pipelines" / pipeline / "tests" / "totals.yaml": TEST,
        directory / ".github" / "workflows" / "reconcile.yml": workflow,
        directory / ".gitignore": GITIGNORE,
    }
    missing = {path: text for path, text in wanted.items()
               if not os.path.lexists(path)}  # a link exists too: never written through
    for path in missing:  # all checked before anything is written
        if (why := outside_reason(path, directory)) is not None:
            raise ReconcileError(f"refusing to write a file that {why}", file=display(path))
    written = []
    for path, text in missing.items():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
        written.append(path)
    if not written:
        raise ReconcileError("nothing to do: every file exists already", file=display(directory))
    return written
