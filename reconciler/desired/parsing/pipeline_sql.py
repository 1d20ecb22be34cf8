"""A pipeline's SQL: its files found, read within a byte limit, and rendered.

`pipeline.yaml`'s `sql:` list names the files (else every `*.sql` of the pipeline's
folder); each is a Jinja2 template rendered with the pipeline's `vars` in a sandbox,
since templates come from pull requests, and from the pipeline's folder only. An
undefined variable is an error, never a silently empty string, and a template's error
names the file and the template's own line. Kept apart from the settings' models
(`desired.settings.project`): this is the one place a pull request's text is executed, as a
template, before it is parsed.
"""

from __future__ import annotations

import os
import re
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import jinja2
from jinja2.loaders import split_template_path
from jinja2.sandbox import SandboxedEnvironment

from reconciler.desired.settings.documents import (
    YamlDocument,
    outside_reason,
    read_text,
    refuse_outside,
)
from reconciler.desired.settings.project import PipelineSpec, display, load_pipeline_spec
from reconciler.support.errors import ReconcileError

MAX_SQL_BYTES = 8 << 20
"""Largest SQL file read (8 MiB), before templates are rendered: a pipeline of a thousand
views is well under 1 MiB. It bounds the memory a file costs, whatever `stat()` says of
its size (a pipe or a device says 0)."""


@dataclass(frozen=True)
class SqlSource:
    """One rendered SQL file; `display_path` is what error messages show."""

    display_path: str
    text: str


@dataclass(frozen=True)
class PipelineSource:
    """A pipeline as found on disk: its spec, folder and rendered SQL files."""

    spec: PipelineSpec
    directory: Path
    spec_path: str
    spec_lines: YamlDocument
    sql_files: tuple[SqlSource, ...]

    def connector_line(self, index: int) -> int:
        return self.spec_lines.line_of(("connectors", index))


class _PipelineLoader(jinja2.BaseLoader):
    """Templates from the pipeline's folder only: no symbolic links, nothing outside, read
    by the checkout's safe reader like the SQL files themselves (a regular file, at most
    `MAX_SQL_BYTES`), never by Jinja's own `open()`."""

    def __init__(self, directory: Path):
        self.directory = directory

    def get_source(self, environment: jinja2.Environment,
                   template: str) -> tuple[str, str, Callable[[], bool]]:
        path = self.directory.joinpath(*split_template_path(template))  # no '..' piece
        if (why := outside_reason(path, self.directory)) is not None:
            raise jinja2.TemplateError(f"template '{template}' {why}: refused")
        if not os.path.lexists(path):
            raise jinja2.TemplateNotFound(template, f"template '{template}' not found in "
                                                    "the pipeline folder")
        try:
            text = read_text(path, template, MAX_SQL_BYTES, "a template")
        except ReconcileError as error:
            raise jinja2.TemplateError(f"template '{template}': {error.message}") from None
        return text, str(path), lambda: True


def load_pipeline(directory: Path) -> PipelineSource:
    """Validate `pipeline.yaml` and render its SQL templates with the pipeline's vars."""
    spec, document, shown = load_pipeline_spec(directory)
    seen: dict[str, int] = {}
    for index, connector in enumerate(spec.connectors):
        if connector.name in seen:
            raise ReconcileError(
                f"duplicate connector name '{connector.name}' "
                f"(first at line {seen[connector.name]})",
                file=shown, line=document.line_of(("connectors", index)))
        seen[connector.name] = document.line_of(("connectors", index))
    sql_paths = _sql_files(spec, directory, document, shown)
    # Sandboxed: templates come from pull requests, and a template must not be able to
    # reach Python internals (and through them the Action's secrets).
    environment = SandboxedEnvironment(
        loader=_PipelineLoader(directory),
        undefined=jinja2.StrictUndefined,
        keep_trailing_newline=True,
        autoescape=False,
    )
    rendered = tuple(_render(environment, path, spec.vars) for path in sql_paths)
    return PipelineSource(spec=spec, directory=directory, spec_path=shown,
                          spec_lines=document, sql_files=rendered)


def _sql_files(spec: PipelineSpec, directory: Path, document: YamlDocument,
               shown: str) -> list[Path]:
    if spec.sql is None:
        paths = sorted(directory.glob("*.sql"))
        if not paths:
            raise ReconcileError("no *.sql files in the pipeline folder", file=shown, line=1)
        for path in paths:
            refuse_outside(path, directory, display(path))
        return paths
    paths = []
    for index, name in enumerate(spec.sql):
        path = directory / name
        refuse_outside(path, directory, shown, document.line_of(("sql", index)))
        if not path.is_file():
            raise ReconcileError(f"sql file '{name}' not found", file=shown,
                                 line=document.line_of(("sql", index)))
        paths.append(path)
    return paths


def _render(environment: jinja2.Environment, path: Path, variables: dict[str, Any]) -> SqlSource:
    shown = display(path)
    text = read_text(path, shown, MAX_SQL_BYTES, "a SQL file")
    try:
        template = environment.from_string(text)
        return SqlSource(display_path=shown, text=template.render(**variables))
    except jinja2.TemplateSyntaxError as error:
        raise ReconcileError(f"template error: {error.message}", file=shown,
                             line=error.lineno) from None
    except jinja2.UndefinedError as error:
        raise ReconcileError(f"template error: {error.message}", file=shown,
                             line=_template_line(error)) from None
    except jinja2.TemplateError as error:
        raise ReconcileError(f"template error: {error}", file=shown,
                             line=_template_line(error)) from None
    except Exception as error:  # a template is user code: `{{ 1 // 0 }}`, `{{ n + 'a' }}`
        raise ReconcileError(f"template error: {type(error).__name__}: {error}", file=shown,
                             line=_template_line(error)) from None


def _template_line(error: BaseException) -> int | None:
    """Jinja rewrites tracebacks so template frames carry the template's line numbers."""
    for frame in reversed(traceback.extract_tb(error.__traceback__)):
        if frame.filename == "<template>":
            return frame.lineno
    match = re.search(r"line (\d+)", str(error))
    return int(match.group(1)) if match else None
