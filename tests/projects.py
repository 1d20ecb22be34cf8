"""Build small user projects on disk for tests, and load their programs."""

from __future__ import annotations

import json
import shutil
import textwrap
from pathlib import Path
from uuid import uuid4

from reconciler.desired.model.program import Program
from reconciler.desired.workspace import load_programs

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"


def write_files(root: Path, files: dict[str, str]) -> Path:
    """Write `files` (relative path -> text, dedented) under root."""
    for relative, text in files.items():
        path = root / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text).lstrip("\n"), encoding="utf-8")
    return root


def single_pipeline(root: Path, sql: str, pipeline_yaml: str = "name: p\n") -> Path:
    """A project with one pipeline `p` made of one SQL file."""
    return write_files(root, {"pipelines/p/pipeline.yaml": pipeline_yaml,
                              "pipelines/p/program.sql": sql})


def program_of(root: Path, name: str | None = None) -> Program:
    _, programs = load_programs(root, name)
    return programs[0]


def copy_example(name: str, destination: Path) -> Path:
    """A private copy of an example project (tests never write into the repository)."""
    target = destination / name
    shutil.copytree(EXAMPLES / name, target, ignore=shutil.ignore_patterns(".reconcile"))
    return target


def grades_on_s3(s3_endpoint: str, destination: Path) -> tuple[Path, str]:
    """The grades example with state and data in a new bucket of the test run's S3 server:
    (the project, the bucket)."""
    import boto3

    bucket = f"grades-{uuid4().hex[:12]}"
    boto3.client("s3", endpoint_url=s3_endpoint).create_bucket(Bucket=bucket)
    project = copy_example("grades", destination)
    (project / "reconcile.yaml").write_text(
        f"backend: s3://{bucket}/state\nstorage: s3a://{bucket}/data\n")
    return project, bucket


STORY = EXAMPLES / "grades" / "story"
SEED_STUDENTS = (STORY / "students.sql").read_text()
SEED_GRADES = (STORY / "grades.sql").read_text()


def apply_seed_modification(project: Path) -> None:
    """Feldera's example change: end date moved to 2026-06-10, one new view."""
    spec = project / "pipelines/grades/pipeline.yaml"
    spec.write_text(spec.read_text().replace("2025-12-15", "2026-06-10"))
    sql = project / "pipelines/grades/program.sql"
    sql.write_text(sql.read_text() + (STORY / "new_view.sql").read_text())


def events_pipeline(sql: str, settings: str = "", refresh: str = "incremental"
                    ) -> dict[str, str]:
    """Files of a project whose pipeline `p` feeds table `events` from json files in
    `input/events` (a `files` connector), with `sql` as its program. Its views are
    maintained (`refresh: incremental`) unless `refresh` says otherwise: on rows this few
    the default, `auto`, would recompute them, and these tests are about maintenance."""
    return {"reconcile.yaml": settings,
            "pipelines/p/pipeline.yaml": f"""
                name: p
                bootstrap_policy: allow
                refresh: {refresh}
                connectors:
                  - name: events_in
                    table: events
                    type: files
                    format: json
                    path: input/events
                """,
            "pipelines/p/program.sql": sql,
            "input/events/.keep": ""}  # the folder exists (plan refuses a missing one)


GRADES_INPUT = """
      - name: grades_in
        table: grades
        type: files
        format: json
        path: input/grades
"""
"""A pipeline.yaml connector feeding table `grades` from the json files of `input/grades`
(`feed_grades` writes them)."""


def feed_grades(project: Path, file: str, rows: list[tuple[int, str, int]]) -> None:
    """A json file of (student_id, class, grade) rows in `input/grades`."""
    inbox = project / "input/grades"
    inbox.mkdir(parents=True, exist_ok=True)
    (inbox / file).write_text("".join(json.dumps({"student_id": s, "class": c, "grade": g})
                                      + "\n" for s, c, g in rows))
