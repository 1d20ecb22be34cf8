"""Time `reconcile plan` as a whole process on a synthetic 1,000-view pipeline.

The pipeline is a layered DAG: 20 tables, then layers of views that join two
relations of the layer below and aggregate. The script deploys nothing: it
plans once against no state (everything added) and once against a committed
manifest after editing one mid-layer view (a realistic PR), and prints the
wall-clock seconds of each run and their ratio to the 2-second target.
"""

from __future__ import annotations

import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from reconciler.manifest import Manifest
from reconciler.spec.workspace import load_programs
from state_backends import LocalBackend

TABLES = 20
VIEWS = 1000
LAYER = 50
TARGET_SECONDS = 2.0


def synthetic_sql(views: int = VIEWS, seed: int = 7) -> str:
    rng = random.Random(seed)
    statements = [
        f"create table t{i} (id bigint not null, k int, amount decimal(12,2), "
        f"day date, label string, primary key (id)) with ('materialized' = 'true');"
        for i in range(TABLES)
    ]
    below = [f"t{i}" for i in range(TABLES)]
    current: list[str] = []
    for index in range(views):
        left, right = rng.sample(below, 2)
        name = f"v{index}"
        if index % 3 == 0:
            body = (f"select a.k, count(*) as n, sum(a.amount) as amount, max(b.day) as day, "
                    f"min(a.label) as label, min(a.id) as id from {left} a join {right} b "
                    f"on a.k = b.k where a.amount > {index % 17} group by a.k")
        elif index % 3 == 1:
            body = (f"with recent as (select * from {left} where day >= date '2025-01-01') "
                    f"select r.id, r.k, r.amount + coalesce(b.amount, 0) as amount, r.day, "
                    f"r.label from recent r left join {right} b on r.id = b.id")
        else:
            body = (f"select id, k, amount, day, upper(label) as label from {left} "
                    f"union all select id, k, amount, day, label from {right}")
        statements.append(f"create view {name} as {body};")
        current.append(name)
        if len(current) == LAYER:
            below, current = current, []
    return "\n".join(statements) + "\n"


def run_plan(project: Path) -> float:
    started = time.perf_counter()
    result = subprocess.run([sys.executable, "-m", "reconciler", "-C", str(project), "plan",
                             "--out", str(project / "plan.json")],
                            capture_output=True, text=True, check=False)
    elapsed = time.perf_counter() - started
    if result.returncode != 0:
        raise SystemExit(f"plan failed: {result.stderr.strip()}")
    return elapsed


def main() -> None:
    with tempfile.TemporaryDirectory() as folder:
        project = Path(folder)
        sql_path = project / "pipelines/bench/program.sql"
        sql_path.parent.mkdir(parents=True)
        (project / "pipelines/bench/pipeline.yaml").write_text("name: bench\n")
        sql = synthetic_sql()
        sql_path.write_text(sql)
        new_pipeline = run_plan(project)
        _, [program] = load_programs(project)
        manifest = Manifest.first("bench", program.document())
        LocalBackend(project / ".reconcile/state").write_manifest(
            "bench", manifest.to_document(), None)
        sql_path.write_text(sql.replace("a.amount > 3 group by", "a.amount > 4 group by"))
        modified = run_plan(project)
    print(f"views: {VIEWS}, tables: {TABLES}")
    print(f"plan, new pipeline:      {new_pipeline:.2f} s "
          f"({new_pipeline / TARGET_SECONDS:.2f} x the {TARGET_SECONDS:.0f} s target)")
    print(f"plan, one view modified: {modified:.2f} s "
          f"({modified / TARGET_SECONDS:.2f} x the {TARGET_SECONDS:.0f} s target)")


if __name__ == "__main__":
    main()
