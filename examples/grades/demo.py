"""The examples/grades story, end to end, on embedded Spark and a local state folder.

Runs Feldera's bootstrapping example through the real `reconcile` CLI in one
process (one JVM): deploy, insert students and grades, query, change the
pipeline (end date moved, one view added), plan, apply with await_approval,
approve, and query again. It works on a copy in a temporary folder, so it can
be run any number of times and leaves the repository untouched.

    make demo            # or: .venv/bin/python examples/grades/demo.py
"""

from __future__ import annotations

import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from demo_support import project_copy, reconcile, stage  # noqa: E402

STORY = HERE / "story"
STUDENTS = (STORY / "students.sql").read_text()
GRADES = (STORY / "grades.sql").read_text()
NEW_VIEW = (STORY / "new_view.sql").read_text()


def main() -> None:
    with project_copy(HERE) as project:
        stage("1. Deploy the pipeline (tables and views are created in Delta)")
        reconcile(project, "plan")
        reconcile(project, "apply", "--auto-approve")

        stage("2. Feed it: two students, eight grades")
        reconcile(project, "execute", "-p", "grades", STUDENTS)
        reconcile(project, "execute", "-p", "grades", GRADES)
        reconcile(project, "query", "-p", "grades",
                  "SELECT * FROM avg_grade_enriched ORDER BY student_name, class")

        stage("3. Change it: end date 2025-12-15 -> 2026-06-10, new view avg_grade_all_courses")
        spec = project / "pipelines/grades/pipeline.yaml"
        spec.write_text(spec.read_text().replace("2025-12-15", "2026-06-10"))
        sql = project / "pipelines/grades/program.sql"
        sql.write_text(sql.read_text() + NEW_VIEW)
        reconcile(project, "plan")

        stage("4. Apply with bootstrap_policy await_approval: the change waits")
        reconcile(project, "apply")
        reconcile(project, "status", "-p", "grades")

        stage("5. Approve: only the new and modified views are recomputed")
        reconcile(project, "approve", "-p", "grades")
        reconcile(project, "query", "-p", "grades",
                  "SELECT * FROM avg_grade_enriched ORDER BY student_name, class")
        reconcile(project, "query", "-p", "grades",
                  "SELECT * FROM avg_grade_all_courses ORDER BY student_id")
        reconcile(project, "state", "history", "-p", "grades")


if __name__ == "__main__":
    sys.exit(main())
