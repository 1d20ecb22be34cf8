"""A data preview as a plan carries it (plan/preview_report.py): typed from the engine to the
renderings, the same JSON in the saved plan as before it was typed."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from reconciler.plan.artifact import load_plan_file
from reconciler.plan.markdown import render_markdown
from reconciler.plan.preview_report import PipelinePreview
from reconciler.plan.terminal import preview_lines, sample_tables
from tests.cli_helpers import grades_plan_file

ROW = {"student_id": "1", "class": "math", "class_avg": "***"}
# Each kind of entry the engine writes (engine/preview/counts.py), as the plan JSON holds it.
DOCUMENT: dict[str, Any] = {"format": 1, "base_serial": 7, "views": {
    "avg_grade": {"kind": "modified", "rows_before": 120, "rows_after": 118, "added": 3,
                  "removed": 5, "key": ["student_id", "class"], "changed": 2,
                  "changed_values": {"class_avg": 2},
                  "samples": {"added": [ROW], "removed": [],
                              "changed": [{"before": ROW, "after": {**ROW, "class": "art"}}]}},
    "avg_grade_enriched": {"kind": "downstream", "rows_before": 10, "rows_after": 4,
                           "added": 4, "removed": 10, "columns_changed": True},
    "all_courses": {"kind": "new", "rows_before": None, "rows_after": 6, "added": 6,
                    "removed": 0, "nulls": {"class": 0, "class_avg": 2},
                    "samples": {"added": [ROW]}},
    "totals": {"kind": "downstream", "rows_before": 3, "rows_after": 3, "added": 0,
               "removed": 0},
    "report": {"kind": "downstream", "unavailable": "reads totals, which is not previewed"},
}}


def test_every_kind_of_entry_reads_back_as_it_was_written(tmp_path: Path) -> None:
    out = grades_plan_file(tmp_path)
    plan = load_plan_file(out)
    for document in (DOCUMENT, {"format": 1, "error": "no JVM", "views": {}}):
        preview = PipelinePreview.from_document(document)
        assert preview is not None and preview.document() == document
        previewed = plan.with_previews({"grades": preview})
        assert previewed.plan_id == plan.plan_id  # it describes the data, not the plan
        out.write_text(json.dumps(previewed.document()))
        assert load_plan_file(out).pipelines[0].preview == preview


def test_the_renderings_read_each_kind() -> None:
    preview = PipelinePreview.from_document(DOCUMENT)
    assert preview is not None
    lines = {line["view"]: line for line in preview_lines(preview)}
    assert lines["avg_grade"] | {"view": ""} == {
        "view": "", "kind": "modified", "rows": "120 → 118", "added": "+3", "removed": "-5",
        "changed": "2", "detail": "class_avg 2"}
    assert lines["avg_grade_enriched"]["detail"] == "its columns change"
    assert (lines["all_courses"]["rows"], lines["all_courses"]["detail"]) == (
        "6", "NULLs: class_avg 2")
    assert (lines["totals"]["changed"], lines["totals"]["detail"]) == ("", "")
    assert lines["report"]["detail"] == "not previewed: reads totals, which is not previewed"
    tables = {table["view"]: table for table in sample_tables(preview)}
    assert [kind for kind, _ in tables["avg_grade"]["rows"]] == ["added", "before", "after"]
    assert tables["all_courses"]["rows"] == [("added", ["1", "math", "***"])]
    failed = PipelinePreview.failed("no JVM")
    assert [line["detail"] for line in preview_lines(failed)] == ["no preview: no JVM"]
    assert sample_tables(failed) == []


def test_the_comment_shows_the_preview_from_its_serial(tmp_path: Path) -> None:
    preview = PipelinePreview.from_document(DOCUMENT)
    assert preview is not None
    plan = load_plan_file(grades_plan_file(tmp_path))
    comment = render_markdown(plan.with_previews({"grades": preview}))
    assert "Data preview of <code>grades</code> (from serial 7)" in comment
    assert "| `avg_grade` | modified | 120 → 118 | +3 | -5 | 2 | class_avg 2 |" in comment
