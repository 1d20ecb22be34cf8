"""Load YAML while remembering the line of every key.

Pydantic reports a validation error as a path of keys (`connectors.1.type`);
this module keeps a map from such paths to source lines so each error can name
the file and line the user has to fix.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from reconciler.errors import ReconcileError

KeyPath = tuple[str | int, ...]


@dataclass
class YamlDocument:
    """Parsed YAML data plus the 1-based line of each mapping key or list item."""

    path: Path
    data: Any
    lines: dict[KeyPath, int] = field(default_factory=dict)

    def line_of(self, key_path: KeyPath) -> int:
        """Line of the deepest known prefix of `key_path` (the document start if none)."""
        for end in range(len(key_path), 0, -1):
            line = self.lines.get(tuple(key_path[:end]))
            if line is not None:
                return line
        return 1


def outside_reason(path: Path, folder: Path) -> str | None:
    """Why `path` may not be read as part of `folder`, or None when it may.

    A project's files come from pull requests, and git stores symbolic links: a
    committed `env.sql -> /proc/self/environ` or `sql: [../../etc/hostname]` must not
    pull text from outside the project into the rendered SQL, the plan or a comment.
    So `path` is named from inside `folder` without `..`, every step to it is a real
    file or folder (no symbolic link), and it resolves inside `folder`.
    """
    base = folder.resolve()
    relative = path
    for root in (folder, base):
        if path.is_absolute() and path.is_relative_to(root):
            relative = path.relative_to(root)
            break
    if relative.is_absolute():
        return f"is outside {folder.name or folder}/"
    if ".." in relative.parts:
        return "goes up with '..'"
    current = base
    for part in relative.parts:
        current = current / part
        if current.is_symlink():
            return ("is a symbolic link" if current == base / relative else
                    f"is reached through the symbolic link {current.relative_to(base)}")
    if not (base / relative).resolve().is_relative_to(base):
        return f"is outside {folder.name or folder}/"
    return None


def read_text(path: Path, shown: str) -> str:
    """A user's file as UTF-8 text; unreadable files are a one-line error, not a traceback."""
    try:
        return path.read_text(encoding="utf-8")
    except OSError as error:
        raise ReconcileError(f"cannot read file: {error.strerror}", file=shown) from error
    except UnicodeDecodeError as error:
        line = error.object.count(b"\n", 0, error.start) + 1
        raise ReconcileError("not UTF-8 text", file=shown, line=line) from None


def load_yaml(path: Path, display_path: str | None = None) -> YamlDocument:
    """Parse one YAML file; syntax errors become a one-line ReconcileError."""
    shown = display_path or str(path)
    return parse_yaml(read_text(path, shown), shown, path)


def parse_yaml(text: str, shown: str, path: Path | None = None) -> YamlDocument:
    """Parse YAML text (a file's, or one read through GitHub's contents API) as `shown`."""
    try:
        node = yaml.compose(text, Loader=yaml.SafeLoader)
        data = yaml.safe_load(text)
    except yaml.YAMLError as error:
        raise _syntax_error(error, text, shown) from None
    document = YamlDocument(path=path or Path(shown), data=data if data is not None else {})
    if node is not None:
        _record_lines(node, (), document.lines, shown)
    return document


def _syntax_error(error: yaml.YAMLError, text: str, shown: str) -> ReconcileError:
    """Name the line to fix: where the problem is, unless that is the end of the file.

    An unclosed quote or bracket is only noticed at the end of the file; the context mark
    ("while scanning a quoted scalar") then points at where it was opened.
    """
    mark = getattr(error, "problem_mark", None)
    context_mark = getattr(error, "context_mark", None)
    problem = getattr(error, "problem", None) or str(error)
    context = getattr(error, "context", None)
    if mark is not None and context_mark is not None and mark.index >= len(text.rstrip()):
        mark, problem = context_mark, f"{problem} ({context} started on this line)"
    line = mark.line + 1 if mark is not None else None
    return ReconcileError(f"invalid YAML: {problem}", file=shown, line=line)


def _record_lines(node: yaml.Node, prefix: KeyPath, lines: dict[KeyPath, int],
                  shown: str) -> None:
    """Record key lines; a repeated key is an error, since YAML would silently keep the last."""
    if isinstance(node, yaml.MappingNode):
        for key_node, value_node in node.value:
            key_path = (*prefix, key_node.value)
            line = key_node.start_mark.line + 1
            if key_path in lines:
                raise ReconcileError(f"duplicate key '{key_node.value}' (first at line "
                                     f"{lines[key_path]})", file=shown, line=line)
            lines[key_path] = line
            _record_lines(value_node, key_path, lines, shown)
    elif isinstance(node, yaml.SequenceNode):
        for index, item in enumerate(node.value):
            lines[(*prefix, index)] = item.start_mark.line + 1
            _record_lines(item, (*prefix, index), lines, shown)
