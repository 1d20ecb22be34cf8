"""What a program's analysis found, kept in the manifest so that a plan analyses only what changed.

Analysing a view costs far more than the rest of a plan: parsing it, the safety and
resolution checks, maintenance analysis (`desired.analysis.shapes`) and column lineage
(`desired.analysis.lineage`), each about a millisecond. An apply records each view's results in
the manifest it commits (`Manifest.analysis`); the next plan takes them for every view
whose inputs are unchanged and analyses only the others (issue 33: a one-view edit of
a 1,000-view pipeline).

It is a pure memo: each entry sits under a SHA-256 of everything its analysis reads,
with `analysis_version` (the sqlglot version, the Python version and the source of
every module of `desired/`, so any change to the code that analyses invalidates every
entry) prepended, and holds only what that deterministic function returned:

* a view: its statement's text (`canonical.statement_digest`), the columns of each relation
  it reads (as lineage and as Spark name them), `refresh:` of pipeline.yaml and whether
  an input retracts rows give the refresh (mode, reason, retracts, relations read
  whole), its output columns and its resolved output names, the resolution check
  passed;
* a lineage: a canonical query and the columns of the relations it reads give its
  `Lineage` (the fingerprints, `desired.model.fingerprint`, are derived from it as before).

A stale entry is never used: its key no longer matches. A forged one (a manifest whose
entries were edited to say something else) cannot be told from a true one without
analysing again, which is what the memo saves, so who may be trusted is decided by
the caller: a plan honours a memo only from a backend no pull request can write
(`plan.planner`), and `apply` never reads one. Apply analyses every view, so what is
deployed is always computed from the SQL; a plan made from a lying memo would not
match it (another desired fingerprint), and apply refuses such a plan.

What a memo never holds is a verdict on safety: whoever can write the state bucket
can write a memo, and the bucket is not trusted as code. Every statement is parsed
and put through the safety checks (`desired.parsing.safety`, the bare names included) from
its text on every plan; the memo saves only the analyses that decide how a view is
planned (resolution, refresh, lineage), where a lie gives a wrong plan that apply
then refuses, never a query that runs.
"""

from __future__ import annotations

import hashlib
import json
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any, TypeVar

import sqlglot

from reconciler.desired.analysis.lineage import Lineage, OutputLineage, view_lineage
from reconciler.desired.analysis.view_refresh import Refresh

Columns = tuple[str, ...] | None
Schemas = Mapping[str, Sequence[str] | None]
T = TypeVar("T")


@lru_cache(maxsize=1)
def analysis_version() -> str | None:
    """A hash of what the analyses' results depend on besides their inputs: sqlglot's and
    Python's versions and the source of `desired/` (None, and no memo, when it is unreadable)."""
    digest = hashlib.sha256(f"sqlglot {sqlglot.__version__} python "
                            f"{sys.version_info[0]}.{sys.version_info[1]}".encode())
    try:
        for path in sorted(Path(__file__).parent.glob("*.py")):
            digest.update(f"\0{path.name}\0".encode())
            digest.update(path.read_bytes())
    except OSError:
        return None
    return digest.hexdigest()


def _key(version: str, *parts: object) -> str:
    payload = json.dumps([version, *parts], separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(payload.encode("utf-8")).hexdigest()


def _schemas(schemas: Schemas) -> list[list[Any]]:
    """Relation columns in a canonical order (as `lineage.view_lineage` caches them)."""
    return [[name, None if columns is None else list(columns)]
            for name, columns in sorted(schemas.items())]


@dataclass(frozen=True)
class ViewFacts:
    """What analysing a view gives its readers and its program (`program.build_program`)."""

    resolved: Columns  # output names as Spark gives them (`resolution`)
    columns: Columns  # output names as lineage reads them
    refresh: Refresh


class Analysis:
    """One program's analysis results under their keys (what `document` writes into a
    manifest), and the committed results it may take instead of analysing (`committed`,
    None when the caller trusts none or the code that wrote them differs)."""

    def __init__(self, committed: Mapping[str, Any] | None = None):
        self.version = analysis_version()
        self._committed: dict[str, dict[str, Any]] = _sections(committed, self.version)
        self.views: dict[str, ViewFacts] = {}
        self.lineages: dict[str, Lineage] = {}
        self.reused = 0  # views whose results came from the committed memo
        self.analysed = 0  # views analysed here
        self._keys: dict[object, str] = {}  # each key is asked for twice: hashed once

    # -- views -------------------------------------------------------------------------
    def view_key(self, digest: str, columns: Schemas, resolved: Schemas, policy: str,
                 input_retracts: bool) -> str:
        """The key of a view's analysis: its statement and everything else it reads."""
        return _key(self.version or "", "view", digest, _schemas(columns), _schemas(resolved),
                    policy, input_retracts)

    def known_view(self, key: str) -> ViewFacts | None:
        """The committed results of a view's analysis under `key` (`view_key`), if any."""
        if self.version is None:
            return None
        facts = _decoded(_view, self._committed.get("views", {}).get(key))
        if facts is not None:
            self.reused += 1
        return facts

    def remember(self, key: str, facts: ViewFacts) -> None:
        """Record a view's results (reused or computed) for the next manifest."""
        if self.version is not None:
            self.views[key] = facts

    # -- lineage -----------------------------------------------------------------------
    def lineage(self, query: str, schemas: Schemas) -> Lineage:
        """`view_lineage`, recorded for the next manifest (the program's own views)."""
        return self._lineage(query, schemas, record=True)

    def lookup(self, query: str, schemas: Schemas) -> Lineage:
        """`view_lineage`, not recorded (the committed program's views, `plan.diff`)."""
        return self._lineage(query, schemas, record=False)

    def _lineage(self, query: str, schemas: Schemas, *, record: bool) -> Lineage:
        if self.version is None:
            return view_lineage(query, schemas)
        asked = (query, tuple((name, None if columns is None else tuple(columns))
                              for name, columns in sorted(schemas.items())))
        if asked not in self._keys:
            self._keys[asked] = _key(self.version, "lineage", query, _schemas(schemas))
        key = self._keys[asked]
        found = self.lineages.get(key)
        if found is None:
            found = _decoded(_lineage, self._committed.get("lineage", {}).get(key))
        if found is None:
            found = view_lineage(query, schemas)
        if record:
            self.lineages[key] = found
        return found

    def document(self) -> dict[str, Any] | None:
        """The memo a manifest keeps (`Manifest.analysis`): the version in clear, the
        entries as one compact JSON text (a manifest is written indented, which would
        more than double their size)."""
        if self.version is None:
            return None
        entries = {
            "views": {key: [_names(facts.resolved), _names(facts.columns), facts.refresh.mode,
                            facts.refresh.reason, facts.refresh.retracts,
                            list(facts.refresh.read_whole)]
                      for key, facts in sorted(self.views.items())},
            "lineage": {key: _lineage_document(lineage)
                        for key, lineage in sorted(self.lineages.items())}}
        return {"version": self.version,
                "entries": json.dumps(entries, separators=(",", ":"), ensure_ascii=False)}


def _sections(committed: Mapping[str, Any] | None, version: str | None
              ) -> dict[str, dict[str, Any]]:
    """A committed memo's entries by section; none unless written by this very code."""
    if (not isinstance(committed, Mapping) or version is None
            or committed.get("version") != version
            or not isinstance(text := committed.get("entries"), str)):
        return {}
    try:
        entries = json.loads(text)
    except ValueError:
        return {}
    if not isinstance(entries, dict):
        return {}
    return {section: found for section in ("statements", "views", "lineage")
            if isinstance(found := entries.get(section), dict)}


# -- reading entries back: any entry not in the form `document` writes is a miss ------------
def _decoded(decode: Callable[[Any], T], entry: Any) -> T | None:
    if entry is None:
        return None
    try:
        return decode(entry)
    except (TypeError, ValueError, KeyError, IndexError):
        return None


def _view(entry: Any) -> ViewFacts:
    resolved, columns, mode, reason, retracts, read_whole = entry
    if mode not in ("incremental", "auto", "full"):
        raise ValueError(mode)
    return ViewFacts(_optional_texts(resolved), _optional_texts(columns),
                     Refresh(mode, None if reason is None else _text(reason), _flag(retracts),
                             _texts(read_whole)))


def _names(columns: Columns) -> list[str] | None:
    return None if columns is None else list(columns)


def _lineage_document(lineage: Lineage) -> list[Any]:
    """A lineage as lists. Each output column's text ends with the context's and its reads
    include the context's (`lineage._Walk._per_output`): written without them, with a
    flag (1: text, 2: reads) for each part that was, when putting it back gives the same."""
    context = lineage.context

    def output(name: str, found: OutputLineage) -> list[Any]:
        text, refs, flags = found.text, found.reads, 0
        if context is not None:
            suffix = " | " + context.text
            if text.endswith(suffix):
                text, flags = text[:-len(suffix)], flags | 1
            extra = tuple(sorted(set(refs) - set(context.reads)))
            if tuple(sorted({*extra, *context.reads})) == refs:
                refs, flags = extra, flags | 2
        return [name, text, [list(ref) for ref in refs], flags]

    return [None if lineage.reads is None else [list(ref) for ref in lineage.reads],
            _names(lineage.outputs),
            None if lineage.per_output is None else [output(name, found)
                                                     for name, found in lineage.per_output],
            None if context is None else [context.text, [list(ref) for ref in context.reads]]]


def _lineage(entry: Any) -> Lineage:
    reads, outputs, per_output, context_entry = entry
    context = (None if context_entry is None
               else OutputLineage(_text(context_entry[0]), _refs(context_entry[1])))

    def output(name: Any, text: Any, refs: Any, flags: Any) -> tuple[str, OutputLineage]:
        text, found = _text(text), _refs(refs)
        if flags not in (0, 1, 2, 3) or (flags and context is None):
            raise ValueError(flags)
        if flags and context is not None:  # (there is a context whenever flags are: above)
            if flags & 1:
                text += " | " + context.text
            if flags & 2:
                found = tuple(sorted({*found, *context.reads}))
        return _text(name), OutputLineage(text, found)

    return Lineage(reads=None if reads is None else _refs(reads),
                   outputs=_optional_texts(outputs),
                   per_output=None if per_output is None else tuple(
                       output(*item) for item in per_output),
                   context=context)


def _text(value: Any) -> str:
    if not isinstance(value, str):
        raise TypeError(value)
    return value


def _flag(value: Any) -> bool:
    if not isinstance(value, bool):
        raise TypeError(value)
    return value


def _texts(values: Any) -> tuple[str, ...]:
    if not isinstance(values, list):
        raise TypeError(values)
    return tuple(_text(value) for value in values)


def _optional_texts(values: Any) -> tuple[str, ...] | None:
    return None if values is None else _texts(values)


def _refs(values: Any) -> tuple[tuple[str, str], ...]:
    if not isinstance(values, list):
        raise TypeError(values)
    refs = []
    for value in values:
        relation, column = value
        refs.append((_text(relation), _text(column)))
    return tuple(refs)
