"""A query's relation occurrences, its selects as scopes, and the columns its equalities
make equal, resolved through derived tables, CTEs written out and set operations.

Columns are slots, (occurrence index, column), joined into classes by a union-find:
`a.k = b.k` in an `ON` or `WHERE`, `x IN (SELECT y ...)`, a derived table's output
column and the column it reads (the first one of a `COALESCE`), a set operation's
columns position by position.
`desired/analysis/partitioning.py` checks whether one class partitions the query.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from sqlglot import exp

from reconciler.desired.analysis.query_parts import (
    coalesced_columns,
    conjuncts,
    from_of,
    occurrences,
    set_branches,
)

Slot = tuple[int, str]  # (occurrence index, column)
Columns = Mapping[str, Sequence[str] | None]  # relation -> its columns (None: unknown)


class KeyFallback(Exception):
    """The query cannot be split by a key; the message says why."""


@dataclass
class Scope:
    """One select: its own relation occurrences and derived tables, and what encloses it."""

    select: exp.Select
    names: dict[str, int]  # alias (or name) -> occurrence index
    outer: Scope | None
    own: list[int]  # occurrence indexes of this select's FROM and JOINs
    derived: dict[str, list[int]] = field(default_factory=dict)  # alias -> branch scopes
    is_derived: bool = False  # a derived table's select (or a set operation's branch)


class QueryGraph:
    """Built by walking the query once (`_visit`); `Partitioning` reads it."""

    def __init__(self, select: exp.Select, columns: Columns,
                 check: Callable[[exp.Select], None]):
        self.select, self.columns, self.check = select, columns, check
        self.tables = occurrences(select)
        self.index = {id(table): i for i, table in enumerate(self.tables)}
        self.parent: dict[Slot, Slot] = {}
        self.scopes: list[Scope] = []
        # per scope: its own equalities (slot, slot) and its binding to the enclosing query
        self.edges: dict[int, list[tuple[Slot, Slot]]] = {}
        self.in_bindings: dict[int, tuple[Slot, Slot]] = {}
        # scope, the joined source (occurrence, or -1 - derived position), its side, ON eqs
        self.outer_ons: list[tuple[int, int, str, list[tuple[Slot, Slot]]]] = []
        self.set_operations: list[list[int]] = []  # each one's branch scope positions
        self.outputs: dict[int, list[tuple[str, Slot | None]]] = {}
        # a derived COALESCE(a, b, ...) output read as `a`, and the columns it falls back on
        self.coalesced: list[tuple[Slot, list[Slot]]] = []
        self.key: set[Slot] = set()  # the key's class, once `Partitioning.keys` found it

    # -- walking the query ------------------------------------------------------------

    def _visit(self, select: exp.Select, outer: Scope | None, *,
               is_derived: bool = False) -> int:
        """Walk one select: its FROM and JOIN sources (derived tables first, as scopes of
        their own), its equalities, and its expression subqueries; returns its position."""
        self.check(select)
        scope = Scope(select, {}, outer, [], is_derived=is_derived)
        position = len(self.scopes)
        self.scopes.append(scope)
        self.edges[position] = []
        source = from_of(select)
        joins = select.args.get("joins") or []
        sources = [source, *(join.this for join in joins)]
        for relation in sources:
            if isinstance(relation, exp.Subquery) and relation.alias:
                scope.derived[relation.alias.lower()] = self._derived(relation)
                continue
            if not isinstance(relation, exp.Table) or not isinstance(relation.this,
                                                                     exp.Identifier):
                raise KeyFallback("FROM or JOIN with a subquery it cannot name")
            occurrence = self.index[id(relation)]
            scope.names[(relation.alias_or_name or relation.name).lower()] = occurrence
            scope.own.append(occurrence)
        for join in joins:
            kind = (join.kind or "").upper()
            if kind in ("SEMI", "ANTI") or join.args.get("method") or join.args.get("using"):
                raise KeyFallback(f"{(join.side or '').upper()} {kind} JOIN with "
                                  f"{'USING' if join.args.get('using') else 'this form'}")
            equalities = self._equalities(join.args.get("on"), scope, position)
            side = (join.side or "").upper()
            if side in ("LEFT", "RIGHT", "FULL"):
                joined = join.this
                member = (self.index[id(joined)] if isinstance(joined, exp.Table)
                          else -1 - scope.derived[joined.alias.lower()][0])
                self.outer_ons.append((position, member, side, equalities))
        where = select.args.get("where")
        self._equalities(where.this if where is not None else None, scope, position)
        derived_selects = {id(node) for relation in sources
                           if isinstance(relation, exp.Subquery)
                           for node in relation.find_all(exp.Select)}
        for node in select.find_all(exp.Select):
            if node is not select and node.parent_select is select \
                    and id(node) not in derived_selects:
                self._subquery(node, scope)
        return position

    def _derived(self, relation: exp.Subquery) -> list[int]:
        """Visit a derived table: one scope per branch of a set operation (each branch's
        columns equated with the first's, position by position), else one."""
        try:
            selects = set_branches(relation.this)
        except ValueError as reason:
            raise KeyFallback(str(reason)) from None
        positions = [self._visit(branch, None, is_derived=True) for branch in selects]
        if len(positions) > 1:
            self.set_operations.append(positions)
            outputs = [self._outputs(position) for position in positions]
            if len({len(columns) for columns in outputs}) > 1:
                raise KeyFallback("set operation whose branches differ in columns")
            for column in range(len(outputs[0])):
                slots = [branch[column][1] for branch in outputs]
                for slot in slots[1:]:
                    if slots[0] is not None and slot is not None:
                        self._union(slots[0], slot)
        return positions

    def _subquery(self, select: exp.Select, scope: Scope) -> None:
        holder = select.parent
        while isinstance(holder, exp.Subquery):
            holder = holder.parent
        if select.find(exp.Union, exp.Except, exp.Intersect) or isinstance(
                select.parent, (exp.Union, exp.Except, exp.Intersect)):
            raise KeyFallback("set operation in an expression subquery")
        position = self._visit(select, scope)
        if isinstance(holder, exp.In) and isinstance(holder.this, exp.Column) \
                and len(select.expressions) == 1:
            if isinstance(holder.parent, exp.Not):  # no binding: see the module docstring
                return
            output = select.expressions[0].unalias()
            outer_slot = self._slot(holder.this, scope)
            inner_slot = (self._slot(output, self.scopes[position])
                          if isinstance(output, exp.Column) else None)
            if outer_slot is not None and inner_slot is not None:
                self._union(outer_slot, inner_slot)
                self.in_bindings[position] = (outer_slot, inner_slot)

    def _equalities(self, condition: exp.Expr | None, scope: Scope,
                    position: int) -> list[tuple[Slot, Slot]]:
        found = []
        for part in conjuncts(condition):
            if isinstance(part, exp.EQ) and isinstance(part.this, exp.Column) \
                    and isinstance(part.expression, exp.Column):
                left, right = self._slot(part.this, scope), self._slot(part.expression, scope)
                if left is not None and right is not None and left != right:
                    self._union(left, right)
                    found.append((left, right))
        self.edges[position].extend(found)
        return found

    def _slot(self, column: exp.Column, scope: Scope | None) -> Slot | None:
        """The relation occurrence (and column) a column reads, searching enclosing selects
        outward; through a derived table, the occurrence its output column reads (None when
        that output is computed, not a column)."""
        name = column.name.lower()
        while scope is not None:
            if column.table:
                table = column.table.lower()
                occurrence = scope.names.get(table)
                if occurrence is not None:
                    return (occurrence, name)
                if table in scope.derived:
                    return self._derived_slot(scope.derived[table], name)
            else:
                having = [occurrence for occurrence in scope.own
                          if name in self._columns(occurrence)]
                deriving = [branches for branches in scope.derived.values()
                            if any(output == name for output, _ in
                                   self._outputs(branches[0]))]
                if len(having) + len(deriving) > 1:
                    raise KeyFallback(f"column {name} is ambiguous")
                if having:
                    return (having[0], name)
                if deriving:
                    return self._derived_slot(deriving[0], name)
            scope = scope.outer
        return None

    def _derived_slot(self, branches: list[int], name: str) -> Slot | None:
        outputs = self._outputs(branches[0])
        found = [slot for output, slot in outputs if output == name]
        if len(found) != 1:
            raise KeyFallback(f"column {name} of a derived table is "
                              f"{'ambiguous' if found else 'unknown'}")
        return found[0]

    def _outputs(self, position: int) -> list[tuple[str, Slot | None]]:
        """A derived select's output columns in order: name, and the slot it reads when it
        is a column (a `*` spelled out from its sources)."""
        if position in self.outputs:
            return self.outputs[position]
        scope = self.scopes[position]
        outputs: list[tuple[str, Slot | None]] = []
        for item in scope.select.expressions:
            inner = item.unalias()
            star = isinstance(inner, exp.Star) or (isinstance(inner, exp.Column)
                                                   and isinstance(inner.this, exp.Star))
            if star:
                outputs.extend(self._star(scope, inner.table.lower() if isinstance(
                    inner, exp.Column) else None))
            elif isinstance(inner, exp.Column):
                outputs.append((item.alias_or_name.lower(), self._slot(inner, scope)))
            elif (merged := self._coalesced(inner, scope)) is not None:
                outputs.append((item.alias_or_name.lower(), merged))
            else:
                outputs.append((item.alias_or_name.lower(), None))
        self.outputs[position] = outputs
        return outputs

    def _coalesced(self, node: exp.Expr, scope: Scope) -> Slot | None:
        """The slot of a `COALESCE(a, b)` output's first column (or its CASE spelling),
        noted so that `Partitioning` accepts it as the key only when `b` is in the key's
        class too: then every row's value is its key, whichever side of a FULL JOIN it
        came from."""
        columns = coalesced_columns(node)
        slots = [self._slot(column, scope) for column in columns or []]
        if not slots or any(slot is None for slot in slots):
            return None
        first, *others = [slot for slot in slots if slot is not None]
        self.coalesced.append((first, others))
        return first

    def _star(self, scope: Scope, table: str | None) -> list[tuple[str, Slot | None]]:
        """The columns `*` (or `table.*`) stands for, in FROM and JOIN order."""
        expanded: list[tuple[str, Slot | None]] = []
        source = from_of(scope.select)
        for relation in [source, *(join.this for join in scope.select.args.get("joins") or [])]:
            alias = (relation.alias_or_name or "").lower()
            if table is not None and alias != table:
                continue
            if isinstance(relation, exp.Table):
                occurrence = self.index[id(relation)]
                known = self.columns.get(relation.name.lower())
                if known is None:
                    raise KeyFallback(f"the columns of {relation.name.lower()} are not known")
                expanded.extend((column.lower(), (occurrence, column.lower()))
                                for column in known)
            else:
                expanded.extend(self._outputs(scope.derived[alias][0]))
        return expanded

    def _columns(self, occurrence: int) -> set[str]:
        relation = self.tables[occurrence].name.lower()
        known = self.columns.get(relation)
        if known is None:
            raise KeyFallback(f"the columns of {relation} are not known")
        return {column.lower() for column in known}

    def _find(self, slot: Slot) -> Slot:
        self.parent.setdefault(slot, slot)
        while self.parent[slot] != slot:
            self.parent[slot] = self.parent[self.parent[slot]]
            slot = self.parent[slot]
        return slot

    def _union(self, left: Slot, right: Slot) -> None:
        self.parent[self._find(left)] = self._find(right)
