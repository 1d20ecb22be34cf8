"""The analysis memo (`desired/analysis/memo.py`): a plan takes each unchanged view's
analysis from the committed manifest, analyses only what changed, and plans exactly what
it plans without the memo; a memo it cannot trust (one a pull request could have written,
one written by other code, entries that do not match) changes nothing."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from reconciler.desired.analysis.lineage import view_lineage
from reconciler.desired.analysis.memo import Analysis, _lineage, _lineage_document
from reconciler.desired.model.program import Program, build_program
from reconciler.desired.settings.project import load_project, settings_summary
from reconciler.desired.workspace import load_programs, load_source
from reconciler.plan import planner
from reconciler.plan.planner import compute_plan, plan_project
from reconciler.state.manifest import Manifest
from reconciler.support.errors import ReconcileError
from state_backends import LocalBackend
from tests.projects import write_files

SQL = """
create table orders (id bigint not null, cust int, amount decimal(12,2), day date,
  note string, primary key (id));
create table custs (c_id int not null, name string, region string, primary key (c_id));
create view per_cust as select cust, sum(amount) as total, count(*) as n from orders
  group by cust;
create view Big AS SELECT Id, Cust, Amount FROM Orders WHERE Amount > 100 -- big ones
;
create view smallest as select cust, min(amount) as m from big group by cust;
create view ranked as select id, rank() over (partition by cust order by amount) as r
  from orders;
create view recent as with r as (select * from orders where day >= date '2025-01-01')
  select r.id, c.name from r left join custs c on r.cust = c.c_id;
create view ids as select id from orders union select c_id from custs;
create view kept tblproperties ('refresh' = 'full') as select cust, max(day) as d
  from orders group by cust;
create view ungrouped as select cust, note, count(*) as n from orders group by cust;
create view top as select p.cust, p.total, c.name from per_cust p join custs c
  on p.cust = c.c_id where p.n > 1;
"""
EDIT = ("where p.n > 1", "where p.n > 2")  # one view changes: `top`


def project_with_state(tmp_path: Path, state: str) -> Path:
    """A project whose backend is `state` (relative to the project)."""
    return write_files(tmp_path / "project", {
        "reconcile.yaml": f"backend: {state}\n",
        "pipelines/p/pipeline.yaml": "name: p\n",
        "pipelines/p/program.sql": SQL})


def deploy(project: Path, memo: dict[str, Any] | None = None) -> Program:
    """Commit the program's manifest as apply does: its document and its analysis memo."""
    loaded, [program] = load_programs(project)
    analysis = memo if memo is not None else program.analysis.document()  # type: ignore[union-attr]
    manifest = Manifest.first("p", program.document(), analysis=analysis,
                              settings=settings_summary(loaded.settings))
    backend = LocalBackend(Path(loaded.resolve(loaded.settings.backend)))
    backend.write_manifest("p", manifest.to_document(), None)
    return program


def edit(project: Path, old: str, new: str) -> None:
    path = project / "pipelines/p/program.sql"
    text = path.read_text()
    assert old in text
    path.write_text(text.replace(old, new))


def honest_plan(project: Path) -> dict[str, Any]:
    """The plan with every view analysed (the programs apply builds)."""
    loaded, programs = load_programs(project)
    return without_time(plan_project(loaded, programs).document())


def without_time(plan: dict[str, Any]) -> dict[str, Any]:
    return {key: value for key, value in plan.items() if key != "created_at"}


def planned(project: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[dict[str, Any], Analysis]:
    """`reconcile plan`'s document, and the analysis of the program it built."""
    built: list[Program] = []

    def recording(*args: Any) -> Program:
        built.append(build_program(*args))
        return built[-1]

    monkeypatch.setattr(planner, "build_program", recording)
    plan = without_time(compute_plan(project, None, None).document())
    assert built[0].analysis is not None
    return plan, built[0].analysis


def test_unchanged_views_are_not_analysed_again(tmp_path: Path,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    project = project_with_state(tmp_path, "../state")  # outside the project: applies only
    program = deploy(project)
    edit(project, *EDIT)
    plan, analysis = planned(project, monkeypatch)
    assert (analysis.reused, analysis.analysed) == (len(program.views) - 1, 1)
    assert plan == honest_plan(project)
    assert [action["name"] for action in plan["pipelines"][0]["actions"]
            if action["action"] != "keep"] == ["top"]


def test_memo_gives_the_same_program(tmp_path: Path) -> None:
    project = project_with_state(tmp_path, "../state")
    loaded, [first] = load_programs(project)
    memo = first.analysis.document()  # type: ignore[union-attr]
    for old, new in (EDIT, ("min(amount)", "max(amount)"), ("note string", "note int"),
                     ("region string", "region string, extra int"), ("", "")):
        edit(project, old, new)
        source = load_source(loaded, "p")
        again, honest = build_program(source, memo), build_program(source)
        assert again.document() == honest.document()
        assert again.fingerprint == honest.fingerprint
        assert {name: view.refresh for name, view in again.views.items()} == \
            {name: view.refresh for name, view in honest.views.items()}
        assert again.analysis.document() == honest.analysis.document()  # type: ignore[union-attr]
    assert again.analysis.reused > 0  # type: ignore[union-attr]


def test_a_memo_a_pull_request_could_write_is_ignored(tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """State in the checkout (the default `.reconcile/state`) can hold a manifest committed
    by a pull request: its memo, here forged to say every view is recomputed, is not read."""
    project = project_with_state(tmp_path, ".reconcile/state")
    _, [program] = load_programs(project)
    memo = program.analysis.document()  # type: ignore[union-attr]
    entries = json.loads(memo["entries"])
    for entry in entries["views"].values():
        entry[2:4] = ["full", "forged"]
    deploy(project, {**memo, "entries": json.dumps(entries)})
    edit(project, *EDIT)
    plan, analysis = planned(project, monkeypatch)
    assert analysis.reused == 0
    assert plan == honest_plan(project)
    assert "forged" not in json.dumps(plan)


@pytest.mark.parametrize("tamper", ["version", "entries", "views", "lineage", "shapes"])
def test_entries_that_do_not_match_change_nothing(tmp_path: Path, tamper: str,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """A memo written by other code (another version), unreadable, or whose entries are
    keyed for other inputs or not in the form written, is a miss: the view is analysed."""
    project = project_with_state(tmp_path, "../state")
    _, [program] = load_programs(project)
    memo = program.analysis.document()  # type: ignore[union-attr]
    entries = json.loads(memo["entries"])
    if tamper == "version":
        memo = {**memo, "version": "0" * 64}
    elif tamper == "entries":
        memo = {**memo, "entries": "{not json"}
    elif tamper == "shapes":  # every entry of the wrong form
        entries = {section: {key: [None] for key in found} for section, found in entries.items()}
    else:  # each entry under the key of other inputs (as if the SQL or columns differed)
        entries[tamper] = {key[::-1]: value for key, value in entries[tamper].items()}
    if tamper not in ("version", "entries"):
        memo = {**memo, "entries": json.dumps(entries)}
    deploy(project, memo)
    edit(project, *EDIT)
    plan, analysis = planned(project, monkeypatch)
    assert plan == honest_plan(project)
    if tamper in ("version", "entries", "views", "shapes"):
        assert analysis.reused == 0


@pytest.mark.parametrize("unsafe", [
    "select transform(cust) using 'env' as (s) from orders",
    "select reflect('java.lang.System', 'getenv', 'HOME') as s from orders",
    "select user as s from orders"])
def test_a_forged_memo_never_vouches_for_an_unsafe_view(tmp_path: Path, unsafe: str,
                                                         monkeypatch: pytest.MonkeyPatch
                                                         ) -> None:
    """Whoever writes the state bucket can write a memo whose keys match any text (the keys
    are hashes of public inputs). Forged here as such a writer would: the pull request's
    unsafe view analysed with the safety checks switched off. `reconcile plan` still
    refuses the view, at its file and line: the checks run from the text every time."""
    from reconciler.desired.model import program as program_module
    from reconciler.desired.parsing import sql as sql_module
    from tests.cli_helpers import reconcile

    project = project_with_state(tmp_path, "../state")
    edit(project, "where p.n > 1;", f"where p.n > 1;\ncreate view leak as {unsafe};")
    with monkeypatch.context() as switched_off:
        switched_off.setattr(sql_module, "check_view_query", lambda *args, **kwargs: None)
        switched_off.setattr(program_module, "check_bare_names", lambda *args, **kwargs: None)
        _, [forged] = load_programs(project)
    memo = forged.analysis.document()  # type: ignore[union-attr]
    assert forged.views["leak"]  # the memo holds the unsafe view's analysis
    deploy_document(project, forged, memo)
    output = reconcile(project, "plan", expect=1)
    assert "pipelines/p/program.sql:" in output
    assert "leak" in output and "Traceback" not in output


def deploy_document(project: Path, program: Program, memo: dict[str, Any] | None) -> None:
    """Commit `program` and `memo` as a state-bucket writer could."""
    loaded = load_project(project)
    manifest = Manifest.first("p", program.document(), analysis=memo,
                              settings=settings_summary(loaded.settings))
    LocalBackend(Path(loaded.resolve(loaded.settings.backend))).write_manifest(
        "p", manifest.to_document(), None)


def test_a_view_that_fails_is_refused_with_or_without_the_memo(tmp_path: Path) -> None:
    project = project_with_state(tmp_path, "../state")
    deploy(project)
    edit(project, "select p.cust, p.total, c.name", "select p.cust, p.total, c.nme")
    with pytest.raises(ReconcileError) as with_memo:
        compute_plan(project, None, None)
    with pytest.raises(ReconcileError) as without:
        load_programs(project)
    assert str(with_memo.value) == str(without.value)
    assert "nme" in str(with_memo.value)


def test_apply_reads_no_memo(tmp_path: Path) -> None:
    """What apply builds (`load_programs`) analyses every view, whatever the manifest says."""
    project = project_with_state(tmp_path, "../state")
    deploy(project)
    _, [program] = load_programs(project)
    assert program.analysis is not None
    assert (program.analysis.reused, program.analysis.analysed) == (0, len(program.views))


def test_lineage_is_written_and_read_back_exactly(tmp_path: Path) -> None:
    project = project_with_state(tmp_path, "../state")
    _, [program] = load_programs(project)
    columns = {name: [c.name for c in table.columns] for name, table in program.tables.items()}
    for name in program.order:
        if name in program.views:
            view = program.views[name]
            lineage = view_lineage(view.query, {read: columns.get(read) for read in view.reads})
            assert _lineage(json.loads(json.dumps(_lineage_document(lineage)))) == lineage
            columns[name] = list(lineage.outputs or ())


def test_the_memo_is_kept_beside_the_program_not_in_it(tmp_path: Path) -> None:
    """The program document, its fingerprint and so the plan id are what they were."""
    project = project_with_state(tmp_path, "../state")
    program = deploy(project)
    stored = LocalBackend(tmp_path / "state").read_manifest("p")
    assert stored is not None
    assert stored.document["program"] == program.document()
    assert "analysis" not in stored.document["program"]
    assert Manifest.from_document(stored.document, "x").analysis is not None
    assert "analysis" not in Manifest.first("p", program.document()).to_document()
    assert load_project(project).settings.backend == "../state"
