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

STUDENTS = "INSERT INTO students VALUES (1, 'Alice'), (2, 'Bob')"
GRADES = """INSERT INTO grades VALUES
  (1, 'algebra', 97, '2025-09-15'), (1, 'physics', 89, '2025-11-15'),
  (2, 'algebra', 85, '2025-10-22'), (2, 'physics', 93, '2025-12-05'),
  (1, 'algebra', 95, '2026-01-15'), (1, 'physics', 87, '2026-03-15'),
  (2, 'algebra', 98, '2026-04-22'), (2, 'physics', 91, '2026-05-05')"""
NEW_VIEW = """
-- Overall average per student across all courses.
create materialized view avg_grade_all_courses as
select student_id, avg(class_avg) as avg
from avg_grade
group by student_id;
"""


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
