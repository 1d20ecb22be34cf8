"""View tests: `tests/*.yaml` in a pipeline's folder, each a view's logic on fixture rows.

A file holds one test or a list of them under `tests:`:

    name: averages_per_class          # default: the file's name (and its position)
    view: avg_grade
    given:                            # rows of the tables (or upstream views) it reads;
      grades:                         # a relation not given is empty
        - {student_id: 1, class: algebra, grade: 90, class_date: 2025-10-01}
    expect:                           # the view's rows (as a multiset); the columns
      - {student_id: 1, class: algebra, class_avg: 90}   # named are the ones compared
    change:                           # optional: a step's change to the tables
      grades:
        insert: [{student_id: 1, class: algebra, grade: 70, class_date: 2025-10-02}]
        delete: [{student_id: 1, class: algebra, grade: 90, class_date: 2025-10-01}]
    expect_after:                     # the view's rows after the change
      - {student_id: 1, class: algebra, class_avg: 70}

Tests are not part of the pipeline: editing one changes no fingerprint and the plan
has nothing to apply. They are parsed with the project's YAML limits, and a mistake
is one line naming the file and line. They come from pull requests like the SQL, so the
`tests` folder and each file are read as SQL files are: inside the pipeline's folder,
regular files, no symbolic link on the way (one to `/dev/zero` would be read until
memory runs out, one to a file outside the repository would be quoted by errors into
the pull request).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from reconciler.desired.model.program import Program, Table
from reconciler.desired.settings.documents import YamlDocument, load_yaml, refuse_outside
from reconciler.support.errors import ReconcileError, did_you_mean

TESTS_FOLDER = "tests"
Row = dict[str, Any]


class _Change(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    insert: list[Row] = Field(default_factory=list)
    delete: list[Row] = Field(default_factory=list)


class _TestSpec(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str | None = Field(default=None, pattern=r"^[A-Za-z0-9_.-]{1,100}$")
    view: str
    given: dict[str, list[Row]] = Field(default_factory=dict)
    expect: list[Row]
    change: dict[str, _Change] | None = None
    expect_after: list[Row] | None = None


@dataclass(frozen=True)
class ViewTest:
    """One test, checked against its pipeline's program."""

    name: str
    file: str
    line: int
    view: str
    given: dict[str, list[Row]]
    expect: list[Row]
    inserts: dict[str, list[Row]] = field(default_factory=dict)
    deletes: dict[str, list[Row]] = field(default_factory=dict)
    expect_after: list[Row] | None = None

    @property
    def has_change(self) -> bool:
        return self.expect_after is not None


def load_view_tests(directory: Path, program: Program, shown: str) -> list[ViewTest]:
    """The tests of one pipeline folder (`shown`: how to name it in errors), in file order."""
    folder = directory / TESTS_FOLDER
    refuse_outside(folder, directory, f"{shown}/{TESTS_FOLDER}", what="a folder")  # before glob
    tests: list[ViewTest] = []
    for path in sorted(folder.glob("*.yaml")) + sorted(folder.glob("*.yml")):
        where = f"{shown}/{TESTS_FOLDER}/{path.name}"
        refuse_outside(path, directory, where)
        document = load_yaml(path, where)
        data = document.data
        entries = data.get("tests") if isinstance(data, dict) and "tests" in data else [data]
        if not isinstance(entries, list):
            raise ReconcileError("'tests' must be a list of tests", file=where,
                                 line=document.line_of(("tests",)))
        prefix: tuple[Any, ...] = ("tests",) if isinstance(data, dict) and "tests" in data else ()
        for index, entry in enumerate(entries):
            key = (*prefix, index) if prefix else ()
            tests.append(_test(entry, document, where, key, program,
                               default=path.stem if len(entries) == 1
                               else f"{path.stem}[{index}]"))
    names = [test.name for test in tests]
    for test in tests:
        if names.count(test.name) > 1:
            raise ReconcileError(f"test name '{test.name}' is used twice", file=test.file,
                                 line=test.line)
    return tests


def _test(entry: Any, document: YamlDocument, where: str, key: tuple[Any, ...],
          program: Program, default: str) -> ViewTest:
    line = document.line_of(key) if key else 1
    if not isinstance(entry, dict):
        raise ReconcileError("a test must be a mapping (view, given, expect, ...)", file=where,
                             line=line)
    try:
        spec = _TestSpec.model_validate(entry)
    except ValidationError as error:
        problem = error.errors()[0]
        location = tuple(problem["loc"])
        raise ReconcileError(f"{'.'.join(str(p) for p in location) or 'test'}: "
                             f"{problem['msg']}", file=where,
                             line=document.line_of((*key, *location))) from None
    view = spec.view.lower()
    if view not in program.views:
        raise ReconcileError(f"test of an unknown view '{spec.view}'"
                             + did_you_mean(view, program.views), file=where,
                             line=document.line_of((*key, "view")))
    relations = {**program.tables, **program.views}
    for section in ("given", "change"):
        for relation in (getattr(spec, section) or {}):
            if relation.lower() not in relations:
                raise ReconcileError(f"{section}: '{relation}' is not a table or view of the "
                                     "pipeline", file=where,
                                     line=document.line_of((*key, section, relation)))
    if (spec.change is None) != (spec.expect_after is None):
        raise ReconcileError("'change' and 'expect_after' go together", file=where, line=line)
    for relation in spec.change or {}:
        if relation.lower() not in program.tables:
            raise ReconcileError(f"change: '{relation}' is a view; a change is to tables",
                                 file=where, line=document.line_of((*key, "change", relation)))
    change = spec.change or {}
    for relation, rows in spec.given.items():
        if relation.lower() in program.tables:
            _check_rows(rows, program.tables[relation.lower()], document, where,
                        (*key, "given", relation))
    for relation, part in change.items():
        for section in ("insert", "delete"):
            _check_rows(getattr(part, section), program.tables[relation.lower()], document,
                        where, (*key, "change", relation, section))
    return ViewTest(
        name=spec.name or default, file=where, line=line, view=view,
        given={name.lower(): rows for name, rows in spec.given.items()}, expect=spec.expect,
        inserts={name.lower(): part.insert for name, part in change.items()},
        deletes={name.lower(): part.delete for name, part in change.items()},
        expect_after=spec.expect_after)


def _check_rows(rows: list[Row], table: Table, document: YamlDocument, where: str,
                key: tuple[Any, ...]) -> None:
    """A table's fixture rows name its columns (any case) and give each NOT NULL one."""
    columns = {column.name.lower(): column for column in table.columns}
    for index, row in enumerate(rows):
        given = {name.lower(): value for name, value in row.items()}
        unknown = [name for name in row if name.lower() not in columns]
        if unknown:
            raise ReconcileError(f"unknown column(s) {', '.join(unknown)} of table "
                                 f"'{table.name}'; its columns are "
                                 f"{', '.join(c.name for c in table.columns)}"
                                 + did_you_mean(unknown[0], columns), file=where,
                                 line=document.line_of((*key, index)))
        missing = [column.name for column in table.columns
                   if not column.nullable and given.get(column.name.lower()) is None]
        if missing:
            raise ReconcileError(f"table '{table.name}' needs a value for its NOT NULL "
                                 f"column(s) {', '.join(missing)}", file=where,
                                 line=document.line_of((*key, index)))
