"""Renamed tables and views: found, then applied to the committed document before diffing.

Feldera treats a rename as a drop and a create: the state is rebuilt and the
connectors re-ingest. A relation that disappears while another appears with the
same definition is the same relation under a new name, so it keeps its state:

- found automatically when exactly one removed relation and one added relation
  of the same kind have the same definition (a table's columns, key and
  `materialized`; a view's canonical query, with the other renames applied, and
  `MATERIALIZED`);
- or named in `pipeline.yaml` as `renamed: {old: new}` (Terraform's `moved`
  blocks), for a rename together with an edit.

The committed document is then rewritten as if the relation had always had its
new name (its entry moved, readers' queries and `reads`, connectors' relation),
so the diff sees exactly what else changed: readers whose query only follows the
new name are unchanged, and so are the renamed relation's connectors.
"""

from __future__ import annotations

from typing import Any

SECTIONS = ("tables", "views")


def find_renames(old: dict[str, Any], new: dict[str, Any]) -> dict[str, str]:
    """{new name: old name} of every relation renamed between two program documents."""
    renames: dict[str, str] = {}
    for source, target in (new.get("renamed") or {}).items():
        for section in SECTIONS:
            if source in old[section] and target in new[section] \
                    and target not in old[section] and source not in new[section]:
                renames[target] = source
    for section in SECTIONS:
        removed = [n for n in old[section] if n not in new[section] and n not in
                   renames.values()]
        added = [n for n in new.get("order", new[section]) if n in new[section]
                 and n not in old[section] and n not in renames]
        wanted = {name: _signature(new, section, name, {}) for name in added}
        for name in added:  # dependency order: a view's inputs are renamed before it
            same = [gone for gone in removed
                    if _signature(old, section, gone, renames) == wanted[name]]
            twins = [other for other in added if wanted[other] == wanted[name]]
            if len(same) == 1 and len(twins) == 1:
                renames[name] = same[0]
                removed.remove(same[0])
    return renames


def apply_renames(document: dict[str, Any], renames: dict[str, str]) -> dict[str, Any]:
    """`document` (the committed program) as if each relation had its new name already."""
    if not renames:
        return document
    new_name = {old: new for new, old in renames.items()}
    tables = {new_name.get(n, n): entry for n, entry in document["tables"].items()}
    views = {new_name.get(n, n): {**entry, "query": rename_in_query(entry["query"], new_name),
                                  "reads": [new_name.get(r, r) for r in entry["reads"]]}
             for n, entry in document["views"].items()}
    connectors = {n: {**entry, "relation": new_name.get(entry["relation"], entry["relation"])}
                  for n, entry in document["connectors"].items()}
    order = [new_name.get(n, n) for n in document.get("order", [])]
    return {**document, "tables": tables, "views": views, "connectors": connectors,
            "order": order}


def rename_in_query(query: str, new_name: dict[str, str]) -> str:
    """A canonical query (space-separated tokens, identifiers lower-cased) with relation names
    replaced. A column that shares a renamed relation's name is renamed too; the query then
    differs from the desired one and the view is recomputed: extra work, never a wrong row."""
    def renamed(token: str) -> str:
        quoted = token.startswith("`") and token.endswith("`")
        name = token[1:-1] if quoted else token
        if name not in new_name:
            return token
        return f"`{new_name[name]}`" if quoted else new_name[name]

    return " ".join(renamed(token) for token in query.split(" "))


def _signature(document: dict[str, Any], section: str, name: str,
               renames: dict[str, str]) -> Any:
    """What must match for two relations to be one renamed: the definition, not the name."""
    entry = document[section][name]
    if section == "tables":
        return (entry["columns"], entry["primary_key"], entry["materialized"])
    new_name = {old: new for new, old in renames.items()}
    return (rename_in_query(entry["query"], new_name), entry["materialized"])
