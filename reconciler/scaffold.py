"""`reconcile init`: a new project that passes `validate` and `apply` as it is.

It writes `reconcile.yaml`, one pipeline with a table and a view, and the GitHub
workflow (the same file as `examples/workflows/reconcile.yml`). Existing files
are never overwritten.
"""

from __future__ import annotations

import re
from importlib.resources import files
from pathlib import Path

from reconciler.errors import ReconcileError
from reconciler.spec.project import NAME_PATTERN, display

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
GITIGNORE = ".reconcile/\n"


def scaffold(directory: Path, pipeline: str) -> list[Path]:
    """Write the project files that do not exist yet; returns the ones written."""
    if not re.match(NAME_PATTERN, pipeline):
        raise ReconcileError(f"'{pipeline}' is not a valid pipeline name (letters, digits, _)")
    workflow = files("reconciler").joinpath("templates/workflow.yml").read_text(encoding="utf-8")
    wanted = {
        directory / "reconcile.yaml": PROJECT,
        directory / "pipelines" / pipeline / "pipeline.yaml": PIPELINE.format(name=pipeline),
        directory / "pipelines" / pipeline / "program.sql": PROGRAM.format(),
        directory / ".github" / "workflows" / "reconcile.yml": workflow,
        directory / ".gitignore": GITIGNORE,
    }
    written = []
    for path, text in wanted.items():
        if path.exists():
            continue
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
        written.append(path)
    if not written:
        raise ReconcileError("nothing to do: every file exists already", file=display(directory))
    return written
