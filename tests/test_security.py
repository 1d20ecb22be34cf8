"""Attacks a pipeline's own files can make, each run through the real CLI and refused.

The GitHub Action's attacks (approvals, the workflow, comments) are in
test_github_security.py; these are what any `reconcile plan/apply` of a hostile
project must survive: SQL that reaches the shell, the JVM, the environment or the
file system; names and paths that leave the storage root; templates that follow
symlinks; Spark settings that load code; a crafted manifest.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from reconciler.cli import cli
from reconciler.spec.safety import ALLOWED_FUNCTIONS

try:
    from tests.cli_helpers import reconcile
    from tests.projects import write_files
except ImportError:  # tests/ itself on sys.path
    from cli_helpers import reconcile  # type: ignore[no-redef]
    from projects import write_files  # type: ignore[no-redef]

TABLE = "create table t (id bigint not null, s string);\n"


def project_with(root: Path, view_sql: str, extra: dict[str, str] | None = None) -> Path:
    """A one-pipeline project: table t, then `view_sql` on the file's line 2."""
    return write_files(root, {"pipelines/p/pipeline.yaml": "name: p\nbootstrap_policy: allow\n",
                              "pipelines/p/program.sql": TABLE + view_sql, **(extra or {})})


def run(project: Path, *args: str) -> tuple[int, str]:
    result = CliRunner().invoke(cli, ["-C", str(project), *args])
    return result.exit_code, result.output


def assert_refused(project: Path, fragment: str, *, line: int | None = 2) -> str:
    """`apply` exits 1 with one line naming the file (and line), and deploys nothing."""
    code, output = run(project, "apply", "--auto-approve")
    assert code == 1, output
    lines = output.strip().splitlines()
    assert len(lines) == 1, output
    where = "pipelines/p/program.sql" + (f":{line}:" if line else "")
    assert where in lines[0] and fragment in lines[0], lines[0]
    assert not (project / ".reconcile/state/p/manifest.json").exists()
    return lines[0]


SQL_ATTACKS = {
    "transform-using-shell": (
        "create view v as select transform(id) using 'sh -c \"touch {marker}\"' as (x) from t;",
        "TRANSFORM ... USING runs a program"),
    "reflect-getenv": (
        "create view v as select reflect('java.lang.System', 'getenv', "
        "'AWS_SECRET_ACCESS_KEY') as s from t;", "function reflect() is not allowed"),
    "java-method": (
        "create view v as select java_method('java.lang.Runtime', 'getRuntime') as s from t;",
        "function java_method() is not allowed"),
    "try-reflect-quoted": (
        "create view v as select `try_reflect`('java.lang.System', 'getenv', 'HOME') as s "
        "from t;", "function try_reflect() is not allowed"),
    "read-files": (
        "create view v as select * from read_files('/etc/passwd');",
        "table-valued function read_files(...) is not allowed"),
    "file-source": (
        "create view v as select * from text.`/etc/hostname`;",
        "qualified names are not supported"),
    "identifier-clause": (
        "create view v as select * from identifier('text.`/etc/hostname`');",
        "IDENTIFIER(...) builds a name at run time"),
    "range-tvf": (
        "create view v as select * from range(10);",
        "table-valued function range(...) is not allowed"),
    "env-substitution": (
        "create view v as select '${env:AWS_SECRET_ACCESS_KEY}' as s from t;",
        "'${...}' is not allowed"),
    "catalog-function": (
        "create view v as select system.builtin.reflect('a', 'b') as s from t;",
        "is not allowed"),
    "subquery-tvf": (
        "create view v as select id from t where s in (select value from read_files('/x'));",
        "table-valued function read_files(...)"),
    "current-user": (
        "create view v as select current_user() as who from t;",
        "function current_user() is not allowed"),
    "nondeterministic": (
        "create view v as select id, rand() as r from t;", "function rand() is not allowed"),
    "xml-entities": (
        "create view v as select xpath_string(s, '/a') as x from t;",
        "function xpath_string() is not allowed"),
}


@pytest.mark.parametrize("attack", sorted(SQL_ATTACKS))
def test_view_sql_outside_the_allow_list_is_refused(tmp_path: Path, attack: str) -> None:
    marker = tmp_path / "PWNED"
    sql, fragment = SQL_ATTACKS[attack]
    project = project_with(tmp_path / "project", sql.replace("{marker}", str(marker)) + "\n")
    message = assert_refused(project, fragment)
    assert "view 'v'" in message
    assert not marker.exists()


def test_a_refused_change_leaves_the_deployed_pipeline_as_it_was(tmp_path: Path) -> None:
    """A modification to a hostile view is refused at plan time: nothing runs, serial stays."""
    project = project_with(tmp_path, "create view v as select id from t;\n")
    reconcile(project, "apply", "--auto-approve")
    state = project / ".reconcile/state/p/manifest.json"
    before = state.read_text()
    (project / "pipelines/p/program.sql").write_text(
        TABLE + "create view v as select reflect('java.lang.System', 'getenv', 'HOME') as h "
                "from t;\n")
    for command in (["plan"], ["apply", "--auto-approve"]):
        code, output = run(project, *command)
        assert code == 1 and "function reflect() is not allowed" in output, output
    assert state.read_text() == before


def test_ordinary_analytic_sql_is_allowed(tmp_path: Path) -> None:
    """The allow-list must not get in the way of real reporting SQL."""
    sql = """
    create table o (id bigint not null, k string, amount decimal(10,2), d date, tags array<string>);
    create view v as
    with recent as (select * from o where d >= date '2026-01-01' - interval '30' day)
    select k, count(*) as n, sum(amount) as total, avg(amount) as mean,
           max(d) as last_day, count(distinct id) as ids,
           sum(case when amount > 100 then 1 else 0 end) as big,
           round(100 * sum(amount) / nullif(sum(amount) over (), 0), 2) as share,
           concat_ws('-', k, cast(year(max(d)) as string)) as label,
           coalesce(max(element_at(tags, 1)), 'none') as first_tag,
           date_trunc('MONTH', max(d)) as month
    from recent
    where k like 'a%' and not exists (select 1 from o o2 where o2.id = recent.id and o2.k is null)
    group by k having count(*) > 1;
    create view w as select k, x from o lateral view explode(tags) e as x where size(tags) > 0;
    """
    project = write_files(tmp_path, {"pipelines/p/pipeline.yaml": "name: p\n",
                                     "pipelines/p/program.sql": sql})
    assert "ok" in reconcile(project, "validate")


def test_every_allowed_function_is_a_spark_built_in(spark) -> None:  # type: ignore[no-untyped-def]
    """The allow-list names Spark's own functions: a typo would let nothing through, and
    a name Spark does not know could only ever be a catalog function."""
    built_in = {row["function"] for row in spark.sql("SHOW SYSTEM FUNCTIONS").collect()}
    syntax = {"try_cast"}  # a keyword form, not in the function registry
    assert ALLOWED_FUNCTIONS - syntax <= built_in, sorted(ALLOWED_FUNCTIONS - syntax - built_in)
    for dangerous in ("reflect", "java_method", "try_reflect", "current_user", "uuid", "rand",
                      "input_file_name", "raise_error", "xpath", "from_avro"):
        assert dangerous in built_in and dangerous not in ALLOWED_FUNCTIONS

