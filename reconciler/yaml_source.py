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


def load_yaml(path: Path, display_path: str | None = None) -> YamlDocument:
    """Parse one YAML file; syntax errors become a one-line ReconcileError."""
    shown = display_path or str(path)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as error:
        raise ReconcileError(f"cannot read file: {error.strerror}", file=shown) from error
    try:
        node = yaml.compose(text, Loader=yaml.SafeLoader)
        data = yaml.safe_load(text)
    except yaml.YAMLError as error:
        mark = getattr(error, "problem_mark", None)
        problem = getattr(error, "problem", None) or str(error)
        line = mark.line + 1 if mark is not None else None
        raise ReconcileError(f"invalid YAML: {problem}", file=shown, line=line) from error
    document = YamlDocument(path=path, data=data if data is not None else {})
    if node is not None:
        _record_lines(node, (), document.lines)
    return document


def _record_lines(node: yaml.Node, prefix: KeyPath, lines: dict[KeyPath, int]) -> None:
    if isinstance(node, yaml.MappingNode):
        for key_node, value_node in node.value:
            key_path = (*prefix, key_node.value)
            lines[key_path] = key_node.start_mark.line + 1
            _record_lines(value_node, key_path, lines)
    elif isinstance(node, yaml.SequenceNode):
        for index, item in enumerate(node.value):
            lines[(*prefix, index)] = item.start_mark.line + 1
            _record_lines(item, (*prefix, index), lines)
