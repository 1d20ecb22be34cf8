"""Load YAML while remembering the line of every key.

Pydantic reports a validation error as a path of keys (`connectors.1.type`);
this module keeps a map from such paths to source lines so each error can name
the file and line the user has to fix. The files come from pull requests, so what a
file may cost is bounded (`MAX_YAML_BYTES`, `MAX_YAML_DEPTH`, `MAX_YAML_NODES`) before
anything walks the data aliases expand to.

A project's files are read by `support.safe_files`, the one reader of a checkout's files
(only regular files inside the project, never through a symbolic link, and never more
bytes than a limit, however big `stat()` says the file is); its names are exported here
too, where the rest of `desired/` has always found them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from reconciler.support.errors import ReconcileError, error_at
from reconciler.support.safe_files import outside_reason as outside_reason
from reconciler.support.safe_files import read_bytes as read_bytes
from reconciler.support.safe_files import read_inside as read_inside
from reconciler.support.safe_files import read_text as read_text
from reconciler.support.safe_files import refuse_outside as refuse_outside
from reconciler.support.safe_files import too_large as too_large

KeyPath = tuple[str | int, ...]


@dataclass
class YamlDocument:
    """Parsed YAML data plus the 1-based line of each mapping key or list item."""

    data: Any
    lines: dict[KeyPath, int] = field(default_factory=dict)

    def line_of(self, key_path: KeyPath) -> int:
        """Line of the deepest known prefix of `key_path` (the document start if none)."""
        for end in range(len(key_path), 0, -1):
            line = self.lines.get(tuple(key_path[:end]))
            if line is not None:
                return line
        return 1


MAX_YAML_BYTES = 1 << 20
"""Largest YAML file read (1 MiB). Real `reconcile.yaml` and `pipeline.yaml` files are a
few KiB even with hundreds of connectors; PyYAML's pure-Python parser takes seconds per
MiB, so this bounds the time a hostile file can cost before any other check; and GitHub's
contents API, through which the Action reads the base branch's files, returns content
inline only up to 1 MB."""

YAML_FILE = "a YAML file"

MAX_YAML_NODES = 100_000
"""Most values (scalars, lists, mappings, each counted once per place it appears) a YAML
file may expand to. Aliases share one parsed node, but everything after parsing (the
line map, pydantic, templates' `vars`) walks the expanded tree, where a 358-byte
"billion laughs" file is a billion values. A real project file is well under 10,000."""

MAX_YAML_DEPTH = 100
"""Deepest nesting of lists and mappings, aliases expanded. Parsing and every walk of
the data recurse once per level, and Python's stack stops at about 1,000 frames; a real
project file nests 5 levels."""


def load_yaml(path: Path, display_path: str | None = None) -> YamlDocument:
    """Parse one YAML file within the limits of `parse_yaml`; no more than `MAX_YAML_BYTES`
    of it are read into memory (`read_bytes`)."""
    shown = display_path or str(path)
    return parse_yaml(read_text(path, shown, MAX_YAML_BYTES, YAML_FILE), shown)


def parse_yaml(text: str, shown: str) -> YamlDocument:
    """Parse YAML text from a user, wherever it comes from (a file, GitHub's contents API).

    Refuses, with a one-line error naming `shown`, text over `MAX_YAML_BYTES`, nesting
    deeper than `MAX_YAML_DEPTH` and aliases that expand past `MAX_YAML_NODES` values or
    into themselves, all before anything walks the expanded data. Syntax errors and
    duplicate keys are one-line errors too.
    """
    if len(text) > MAX_YAML_BYTES or len(text.encode("utf-8")) > MAX_YAML_BYTES:
        raise too_large(shown, YAML_FILE, MAX_YAML_BYTES)
    loader = _LimitedLoader(text, shown)
    try:
        node = loader.get_single_node()
        if node is None:
            return YamlDocument(data={})
        _check_expansion(node, loader.alias_lines, shown)
        lines: dict[KeyPath, int] = {}
        _record_lines(node, (), lines, shown)  # before construction flattens merge keys (<<)
        data = loader.construct_document(node)
        return YamlDocument(data=data if data is not None else {}, lines=lines)
    except yaml.YAMLError as error:
        raise _syntax_error(error, text, shown) from None
    finally:
        loader.dispose()


class _LimitedLoader(yaml.SafeLoader):
    """PyYAML's safe loader, refusing deep nesting (its composer recurses once per level)
    and noting the first alias to each node, for the line of an alias error."""

    def __init__(self, text: str, shown: str):
        super().__init__(text)
        self.shown = shown
        self.depth = 0
        self.alias_lines: dict[int, int] = {}  # id(node) -> line of the first alias to it

    def compose_node(self, parent: yaml.Node | None, index: Any) -> yaml.Node | None:
        event: yaml.Event = self.peek_event()  # type: ignore[no-untyped-call]  # unannotated stub
        if isinstance(event, yaml.AliasEvent):
            node = super().compose_node(parent, index)
            self.alias_lines.setdefault(id(node), _line_of(event))
            return node
        if self.depth >= MAX_YAML_DEPTH:
            raise ReconcileError(f"YAML nested more than {MAX_YAML_DEPTH} levels deep",
                                 file=self.shown, line=_line_of(event))
        self.depth += 1
        try:
            return super().compose_node(parent, index)
        finally:
            self.depth -= 1


def _line_of(event: yaml.Event) -> int:
    """The line an event starts on, from 1 (PyYAML's parser gives every event its marks)."""
    assert event.start_mark is not None
    return event.start_mark.line + 1


def _check_expansion(root: yaml.Node, alias_lines: dict[int, int], shown: str) -> None:
    """Refuse a node graph whose expanded tree is too big, too deep or infinite.

    Sizes and heights are memoised by node identity, so the cost is linear in the nodes
    parsed however far aliases would expand. The walk keeps its own stack: the graph may
    be deeper than Python's. A node met again while its children are still being
    counted contains an alias to itself.
    """
    first_alias = min(alias_lines.values(), default=None)
    done: dict[int, tuple[int, int]] = {}  # id(node) -> (values, levels) expanded
    open_nodes: set[int] = set()
    stack: list[tuple[yaml.Node, bool]] = [(root, False)]
    while stack:
        node, children_counted = stack.pop()
        key = id(node)
        if not children_counted:
            if key in open_nodes:
                raise ReconcileError("YAML alias to a node that contains it (the data would "
                                     "be infinite)", file=shown, line=alias_lines.get(key))
            if key not in done:
                open_nodes.add(key)
                stack.append((node, True))
                stack.extend((child, False) for child in _children(node))
            continue
        counts = [done[id(child)] for child in _children(node)]
        values = 1 + sum(count for count, _ in counts)
        levels = 1 + max((depth for _, depth in counts), default=0)
        if values > MAX_YAML_NODES:
            raise ReconcileError(f"YAML expands to more than {MAX_YAML_NODES:,} values once "
                                 "aliases are expanded", file=shown, line=first_alias)
        if levels > MAX_YAML_DEPTH:
            raise ReconcileError(f"YAML nested more than {MAX_YAML_DEPTH} levels deep once "
                                 "aliases are expanded", file=shown, line=first_alias)
        open_nodes.discard(key)
        done[key] = (values, levels)


def _children(node: yaml.Node) -> list[yaml.Node]:
    """A node's direct children: a list's items, a mapping's keys and values."""
    if isinstance(node, yaml.SequenceNode):
        return list(node.value)
    if isinstance(node, yaml.MappingNode):
        return [part for pair in node.value for part in pair]
    return []


def _syntax_error(error: yaml.YAMLError, text: str, shown: str) -> ReconcileError:
    """Name the line and column to fix: where the problem is, unless that is the end of the
    file; PyYAML's own several-line text is never shown, only its problem and place.

    An unclosed quote or bracket is only noticed at the end of the file; the context mark
    ("while scanning a quoted scalar") then points at where it was opened.
    """
    mark = getattr(error, "problem_mark", None)
    context_mark = getattr(error, "context_mark", None)
    problem = getattr(error, "problem", None) or str(error)
    context = getattr(error, "context", None)
    if mark is not None and context_mark is not None and mark.index >= len(text.rstrip()):
        mark, problem = context_mark, f"{problem} ({context} started on this line)"
    message = f"invalid YAML: {problem}"
    if mark is None:
        return ReconcileError(message, file=shown)
    return error_at(message, shown, text, min(mark.index, len(text)))


def _record_lines(node: yaml.Node, prefix: KeyPath, lines: dict[KeyPath, int],
                  shown: str) -> None:
    """Record key lines; a repeated key is an error, since YAML would silently keep the last."""
    if isinstance(node, yaml.MappingNode):
        for key_node, value_node in node.value:
            if not isinstance(key_node, yaml.ScalarNode):
                continue  # a list or mapping as a key: construction refuses it
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
