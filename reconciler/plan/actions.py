"""One action per object of a diff, with the reasons a reviewer reads.

Tables: `create`, `evolve` (rows kept, `desired.model.table_evolution`), `truncate` (with why it
cannot evolve), `drop`; views: `create`, `recompute` (the columns or query that
changed, `plan.diff`'s lineage), `drop`; a renamed relation: `rename` with `from`
and what else happens to it; connectors: `create`, `reset`, `drop`, `keep`.
Everything else is `keep`. A new or changed connector shows every option Spark gets
(`options`) and, when they changed, each old -> new (`options_changed`): an option can
change what Spark does to files (`cleanSource`), so the approver must see them all.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any, Literal

from reconciler.desired.model.connectors import CONNECTOR_KEYS
from reconciler.desired.model.program import Program
from reconciler.desired.parsing.expectation_clauses import drop_conditions, expectation_changes
from reconciler.desired.settings.connector_kinds import connector_kind
from reconciler.desired.settings.connector_roles import describe_change, normal_entry
from reconciler.plan.diff import ProgramDiff
from reconciler.support.redaction import redact_text, shown_value

ActionKind = Literal["create", "recompute", "evolve", "rename", "truncate", "drop", "reset",
                     "keep"]
ObjectKind = Literal["table", "view", "input_connector", "output_connector"]


@dataclass(frozen=True)
class Action:
    kind: ObjectKind
    name: str
    action: ActionKind
    reasons: tuple[str, ...] = ()
    refresh: str | None = None  # views: how each step keeps it (`maintained incrementally`)
    source: str | None = None  # rename: the old name (`from` in the plan's JSON)
    options: dict[str, str] | None = None  # connectors: every option, as shown
    options_changed: dict[str, dict[str, str | None]] | None = None  # key: {old, new}

    def document(self) -> dict[str, Any]:
        document: dict[str, Any] = {"kind": self.kind, "name": self.name,
                                    "action": self.action, "reasons": list(self.reasons)}
        if self.refresh is not None:
            document["refresh"] = self.refresh
        if self.source is not None:
            document["from"] = self.source
        if self.options is not None:
            document["options"] = self.options
        if self.options_changed:
            document["options_changed"] = self.options_changed
        return document

    @classmethod
    def from_document(cls, document: dict[str, Any]) -> Action:
        """The action a saved plan recorded (`document`'s inverse): what `show` renders and
        what the terminal and Markdown read, whether the plan was just made or saved."""
        return cls(document["kind"], document["name"], document["action"],
                   tuple(document["reasons"]), document.get("refresh"), document.get("from"),
                   document.get("options"), document.get("options_changed"))


def relation_actions(diff: ProgramDiff, program: Program) -> list[Action]:
    """Every table and view, in the desired evaluation order, then removed ones."""
    return [_renamed(diff, action) if action.name in diff.renamed else action
            for action in _change_actions(diff, program)]


def _renamed(diff: ProgramDiff, action: Action) -> Action:
    """A renamed relation's action: `rename`, saying what else happens to it."""
    old = diff.renamed[action.name]
    if action.action == "keep":
        reasons = (f"renamed from {old}: its Delta table moves with its history; nothing is "
                   "recomputed or re-ingested", *action.reasons)
    else:
        reasons = (f"renamed from {old}", f"and {action.action}: " + "; ".join(action.reasons))
    return Action(action.kind, action.name, "rename", reasons, action.refresh, source=old)


def _change_actions(diff: ProgramDiff, program: Program) -> list[Action]:
    actions = []
    for name in _ordered(diff):
        kind: ObjectKind = "table" if name in diff.tables else "view"
        section = "tables" if kind == "table" else "views"
        change = getattr(diff, section)[name]
        view = program.views.get(name)
        refresh = view.describe_refresh() if view is not None else None
        if change == "added":
            actions.append(Action(kind, name, "create", (f"new {kind}",), refresh))
        elif change == "removed":
            actions.append(Action(kind, name, "drop", (f"{kind} removed: its state is discarded",)))
        elif change == "modified" and kind == "table":
            evolved = diff.evolutions[name]
            if evolved.possible:
                actions.append(Action(kind, name, "evolve", (
                    *evolved.describe(), *expectation_changes(diff.old["tables"][name],
                                                              diff.new["tables"][name]),
                    "rows kept; input connectors keep their offsets")))
            else:
                actions.append(Action(kind, name, "truncate", (
                    *_table_reasons(diff, name), f"cannot evolve in place: {evolved.reason}",
                    "contents truncated; input connectors reset and re-ingest")))
        elif change == "modified":
            actions.append(Action(kind, name, "recompute", tuple(_view_reasons(diff, name)),
                                  refresh))
        elif name in diff.refresh_changes or name in diff.expectation_changes:
            modes = diff.refresh_changes.get(name)
            changes = diff.expectation_changes.get(name, [])
            actions.append(Action(kind, name, "keep", (*(
                ["refresh changes: " + " -> ".join(_MODES[mode] for mode in modes)
                 + "; nothing is recomputed now"] if modes else []), *changes, *(
                ["nothing is recomputed: expectations apply to each step's new rows from "
                 "now on"] if changes else [])), refresh))
        else:
            actions.append(Action(kind, name, "keep", (), refresh))
    return actions


_MODES = {"incremental": "maintained incrementally", "full": "recomputed each step",
          "auto": "maintained or recomputed, whichever is cheaper"}


def _ordered(diff: ProgramDiff) -> list[str]:
    """Relations in the desired evaluation order, then removed ones by name."""
    order = list(diff.new.get("order", []))
    known = set(order)
    return order + sorted(n for n in (*diff.tables, *diff.views) if n not in known)


def _table_reasons(diff: ProgramDiff, name: str) -> list[str]:
    old, new = diff.old["tables"][name], diff.new["tables"][name]
    reasons = []
    old_columns = {c["name"]: c for c in old["columns"]}
    new_columns = {c["name"]: c for c in new["columns"]}
    for column in new_columns.keys() - old_columns.keys():
        reasons.append(f"column {column} added: {new_columns[column]['type']}")
    for column in old_columns.keys() - new_columns.keys():
        reasons.append(f"column {column} removed")
    for column in sorted(old_columns.keys() & new_columns.keys()):
        before, after = old_columns[column], new_columns[column]
        if before["type"] != after["type"]:
            reasons.append(f"column {column}: {before['type']} -> {after['type']}")
        if before["nullable"] != after["nullable"]:
            reasons.append(f"column {column}: " + ("NOT NULL dropped" if after["nullable"]
                                                   else "NOT NULL added"))
    common_old = [c for c in old_columns if c in new_columns]
    common_new = [c for c in new_columns if c in old_columns]
    if common_old != common_new:
        reasons.append("column order changed")
    if old["primary_key"] != new["primary_key"]:
        reasons.append(f"primary key ({', '.join(old['primary_key'])}) -> "
                       f"({', '.join(new['primary_key'])})")
    if old["materialized"] != new["materialized"]:
        reasons.append(f"'materialized' {str(old['materialized']).lower()} -> "
                       f"{str(new['materialized']).lower()}")
    return reasons


def _view_reasons(diff: ProgramDiff, name: str) -> list[str]:
    fields = diff.fields("views", name)
    old, new = diff.old["views"][name], diff.new["views"][name]
    reasons = []
    if "query" in fields:
        reasons.append("query changed")
    if "materialized" in fields:
        reasons.append("MATERIALIZED added" if new["materialized"] else "MATERIALIZED removed")
    reasons += expectation_changes(old, new)
    if drop_conditions(old.get("expectations", [])) != drop_conditions(
            new.get("expectations", [])):
        reasons.append("DROP ROW expectations changed: recomputed without the rows they drop")
    for read in new["reads"]:
        kind = "table" if read in diff.new["tables"] else "view"
        change = getattr(diff, f"{kind}s").get(read)
        if read in diff.rows_reset:
            reasons.append(f"reads {'truncated table' if kind == 'table' else 'reset view'} "
                           f"{read}")
        elif change == "added" and read in old["reads"]:
            reasons.append(f"reads re-created {kind} {read}")
    if "query" not in fields:
        reasons += _column_reasons(diff, old.get("lineage") or {}, new.get("lineage") or {})
    return reasons or ["definition changed"]


def _column_reasons(diff: ProgramDiff, old: dict[str, Any], new: dict[str, Any]) -> list[str]:
    """What changed among the columns (and rows) a view reads, in its readers' words:
    `reads orders.amount: DECIMAL(10,2) -> DECIMAL(12,2)`."""
    before, after = old.get("reads", {}), new.get("reads", {})
    rows_changed = {key for key in before.keys() & after.keys()
                    if "." not in key and before[key] != after[key]}
    reasons = [f"reads modified view {relation}" for relation in sorted(rows_changed)]
    for key in sorted({*before, *after}):
        relation, _, column = key.partition(".")
        if before.get(key) == after.get(key) or relation in rows_changed or not column:
            continue
        if key not in before:
            reasons.append(f"reads new column {key}" if column != "*" else f"reads {relation}")
        elif key not in after:
            reasons.append(f"column {key} it read is gone")
        elif column == "*":
            reasons.append(f"reads all of modified {relation}")
        elif relation in diff.new["tables"] and relation in diff.old["tables"]:
            reasons.append(f"reads {key}: {_column_type(diff.old, relation, column)} -> "
                           f"{_column_type(diff.new, relation, column)}")
        else:
            reasons.append(f"reads {key}, whose definition changed")
    return reasons


def _column_type(document: dict[str, Any], table: str, column: str) -> str:
    entry = next(c for c in document["tables"][table]["columns"] if c["name"] == column)
    return f"{entry['type']}{'' if entry['nullable'] else ' NOT NULL'}"


def connector_actions(diff: ProgramDiff) -> list[Action]:
    """Every connector, with what happens to its offsets or what it is sent, and the options
    of those added or changed (throughput ones too, which change nothing else)."""
    return [_with_options(diff, action) for action in _connector_changes(diff)]


def _with_options(diff: ProgramDiff, action: Action) -> Action:
    change = diff.connectors[action.name]
    if change == "removed":
        return action
    after = _all_options(diff.new["connectors"][action.name])
    if change == "added":
        return replace(action, options=after)
    before = _all_options(diff.old["connectors"][action.name])
    if change == "unchanged" and before == after:
        return action
    return replace(action, options=after, options_changed={
        key: {"old": before.get(key), "new": after.get(key)}
        for key in sorted({*before, *after}) if before.get(key) != after.get(key)})


def _all_options(connector: dict[str, Any]) -> dict[str, str]:
    """Every option Spark gets, as a plan may show it: a hash for a secret-looking key, URLs
    without credentials, one printable line (`engine.io.input_batch.configured`)."""
    options = {**connector.get("options", {}), **connector.get("throughput_options", {})}
    return {printable(key): printable(shown_value(key, _spark_text(value)))
            for key, value in sorted(options.items())}


def _spark_text(value: Any) -> Any:
    """YAML booleans as Spark gets them (`true`, not Python's `True`)."""
    return ("true" if value else "false") if isinstance(value, bool) else value


def printable(text: str) -> str:
    """No control character or line break reaches a terminal, a table cell or a code block."""
    return "".join(char if char.isprintable() else char.encode("unicode_escape").decode()
                   for char in text)


def _connector_changes(diff: ProgramDiff) -> list[Action]:
    actions = []
    for name, change in diff.connectors.items():
        document = (diff.old if change == "removed" else diff.new)["connectors"][name]
        direction, relation = document["direction"], document["relation"]
        kind: ObjectKind = f"{direction}_connector"  # type: ignore[assignment]  # input or output
        relation_change = (diff.tables.get(relation) or diff.views.get(relation) or "removed")
        if change == "removed":
            reason = (f"{relation} removed" if relation_change == "removed" else
                      f"rows it ingested stay in {relation}" if direction == "input" else
                      "stops receiving changes")
            actions.append(Action(kind, name, "drop", (reason,)))
        elif change == "added":
            actions.append(Action(kind, name, "create", (_new_connector_reason(
                direction, relation, relation_change), _where(document))))
        elif change == "modified":
            changed = sorted(diff.fields("connectors", name))
            suffix = "; rows already ingested stay" if direction == "input" else ""
            old = diff.old["connectors"][name]
            endpoint = connector_kind(document["type"]).endpoint_key
            if "path" in changed:  # e.g. a Kafka connector's path sums up its servers, topics
                changed = [field for field in changed if field != endpoint]
            actions.append(Action(kind, name, "reset", tuple(
                f"path {redact_text(str(old.get('path')))} -> "
                f"{redact_text(str(document.get('path')))}{suffix}" if field == "path"
                else f"{field} changed{suffix}" for field in changed) + _rereads(document)))
        elif direction == "input" and relation_change == "modified" and \
                diff.keeps_rows(relation):
            actions.append(Action(kind, name, "keep", (
                f"table {relation} evolves in place: offsets kept, new input carries its "
                "new columns",)))
        elif direction == "input" and relation_change in ("modified", "added"):
            actions.append(Action(kind, name, "reset",
                                  (f"table {relation} truncated: re-ingest from the start",)))
        elif direction == "output" and relation_change in ("modified", "added"):
            actions.append(Action(kind, name, "keep", (
                f"receives the full contents of recomputed {relation}"
                if document.get("snapshot_on_bootstrap") else
                f"receives the rows of recomputed {relation} that change (_op delete/insert; "
                "the full contents if its columns change)",)))
        elif relation in diff.renamed:
            actions.append(Action(kind, name, "keep", (
                f"follows {relation} (renamed from {diff.renamed[relation]})"
                + ("; offsets kept" if direction == "input" else ""),)))
        elif name in diff.handling_changes:
            actions.append(Action(kind, name, "keep", tuple(
                f"{change}; {'offsets kept' if direction == 'input' else 'nothing sent again'}"
                for change in handling_descriptions(diff, name))))
        else:
            actions.append(Action(kind, name, "keep"))
    return actions


def handling_descriptions(diff: ProgramDiff, name: str) -> list[str]:
    """Each handling change of an unchanged connector, as `connector_roles` describes it:
    `on_error fail -> quarantine`, `options changed: maxOffsetsPerTrigger`."""
    old = normal_entry(CONNECTOR_KEYS, diff.old["connectors"][name])
    new = normal_entry(CONNECTOR_KEYS, diff.new["connectors"][name])
    return [describe_change(key, old.get(key), new.get(key))
            for key in diff.handling_changes.get(name, ())]


def _rereads(connector: dict[str, Any]) -> tuple[str, ...]:
    """What a reset input connector reads again: a Kafka topic from where it starts; and,
    when it reads again what its table keeps, that its rows are appended again
    (`on_reset: reread`, which `plan.rereads` asks for)."""
    if connector["direction"] != "input":
        return ()
    found = []
    start = connector_kind(connector["type"]).reset_start(connector)
    if start is not None:  # a type that chooses where a new generation starts (Kafka's)
        found.append(f"reads {redact_text(str(connector.get('path')))} from the {start} "
                     "offsets" + ("" if start == "earliest" else
                                  " at the apply: what the topic holds now is not read"))
    if connector.get("on_reset") == "reread":
        found.append(f"on_reset: reread: what it read before is appended to "
                     f"{connector['relation']} again")
    return tuple(found)


def _where(connector: dict[str, Any]) -> str:
    """Where a connector reads or writes, for the approver to see (URLs redacted)."""
    verb = "reads" if connector["direction"] == "input" else "writes"
    return f"{verb} {connector.get('type')} at {redact_text(str(connector.get('path')))}"


def _new_connector_reason(direction: str, relation: str, relation_change: str) -> str:
    if direction == "input":
        return f"starts ingesting into {relation} after bootstrapping"
    if relation_change in ("added", "modified"):
        return f"receives the full contents of {relation}"
    return f"receives only later changes of unchanged {relation}"
