"""The orders example: change a running pipeline while its input keeps growing.

1. Deploy, and ingest two months of orders from `data/orders` (a files connector).
2. Start a change: a new view and a stricter `big_countries` threshold. `plan`
   shows what will be recomputed; `apply` records it for approval.
3. Meanwhile a new month of orders lands in the input folder.
4. `approve` bootstraps: only the changed and new views are recomputed from the
   state the pipeline holds; the new file is NOT ingested during bootstrapping,
   and the unchanged `country_revenue` is not re-emitted to its output.
5. The next `run` ingests the new file and `output/country_revenue` receives just
   the changes (rows marked `_op` insert/delete), one file per step.

    make demo-orders     # or: .venv/bin/python examples/orders/demo.py
"""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from demo_support import console, project_copy, reconcile, stage  # noqa: E402

NEW_VIEW = """
-- Average order value per country (new in this change).
create materialized view country_order_value as
select country, revenue / orders as avg_order_value
from country_revenue;
"""
COUNTRIES = "SELECT country, revenue, orders FROM country_revenue ORDER BY country"


def show_outputs(project: Path) -> None:
    folder = project / "output" / "country_revenue"
    for path in sorted(folder.glob("*.json")) if folder.exists() else []:
        lines = path.read_text().splitlines()
        console.print(f"[green]{path.relative_to(project)}[/green]: {len(lines)} rows")
        for line in lines[:6]:
            console.print(f"    {line}")


def main() -> None:
    with project_copy(HERE) as project:
        stage("1. Deploy and ingest January and February")
        reconcile(project, "apply", "--auto-approve")
        reconcile(project, "run")
        reconcile(project, "query", "-p", "orders", COUNTRIES)
        show_outputs(project)

        stage("2. Change the pipeline: a new view, a higher big_countries threshold")
        spec = project / "pipelines/orders/pipeline.yaml"
        spec.write_text(spec.read_text().replace("big_country_revenue: 1000",
                                                 "big_country_revenue: 2500"))
        views = project / "pipelines/orders/views.sql"
        views.write_text(views.read_text() + NEW_VIEW)
        reconcile(project, "plan")
        reconcile(project, "apply")

        stage("3. Meanwhile, March's orders land in the input folder")
        shutil.copy(project / "incoming/2026-03.json", project / "data/orders/2026-03.json")

        stage("4. Approve: bootstrap recomputes 2 views, ingests nothing")
        reconcile(project, "approve", "-p", "orders")
        reconcile(project, "query", "-p", "orders", COUNTRIES)
        show_outputs(project)

        stage("5. The next step ingests March; the output receives only the changes")
        reconcile(project, "run")
        reconcile(project, "query", "-p", "orders",
                  "SELECT * FROM country_order_value ORDER BY country")
        show_outputs(project)
        reconcile(project, "state", "history", "-p", "orders")


if __name__ == "__main__":
    sys.exit(main())
