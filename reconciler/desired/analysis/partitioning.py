"""Whether a query is a disjoint union over the values of one key, and by which column.

The rule and its conditions are described in `desired/analysis/keyed.py`, which builds the
`Keyed` shape from what this finds: column slots joined into classes by the query's
equalities (through derived tables, CTEs written out and set operations' columns),
the class that ties the most relation occurrences tried first, each checked against
every select, join, aggregate, window and set operation of the query.
"""

from __future__ import annotations

from sqlglot import exp

from reconciler.desired.analysis.query_graph import Columns, KeyFallback, QueryGraph, Scope, Slot
from reconciler.desired.analysis.query_parts import aggregates_rows, function_name, occurrences

__all__ = ["Columns", "KeyFallback", "Partitioning"]


class Partitioning(QueryGraph):
    """Finds the column a query is a disjoint union over, if any (`desired/analysis/keyed.py`)."""

    def equated(self) -> tuple[tuple[tuple[exp.Table, str], ...], ...]:
        """The classes of columns the query's equalities make equal, as (occurrence,
        column) pairs; none when a column cannot be placed."""
        try:
            self._visit(self.select, None)
        except KeyFallback:
            return ()
        classes: dict[Slot, list[tuple[exp.Table, str]]] = {}
        for slot in list(self.parent):
            classes.setdefault(self._find(slot), []).append((self.tables[slot[0]], slot[1]))
        return tuple(tuple(members) for members in classes.values() if len(members) > 1)

    def keys(self) -> tuple[str | None, ...]:
        """The key column of each relation occurrence (None: read whole), or KeyFallback."""
        self._visit(self.select, None)
        group = self.select.args.get("group")
        seeds = []
        if group is not None:
            for key in group.expressions:
                if isinstance(key, exp.Column):
                    slot = self._slot(key, self.scopes[0])
                    if slot is not None:
                        self._find(slot)
                        seeds.append(slot)
        for position, scope in enumerate(self.scopes):  # groups and windows can key it
            for column in self._partitioning_columns(scope, windows_only=position == 0):
                slot = self._slot(column, scope)
                if slot is not None:
                    self._find(slot)
        classes: dict[Slot, list[Slot]] = {}
        for slot in list(self.parent):
            classes.setdefault(self._find(slot), []).append(slot)
        unpartitioned = next((window for window in self.select.find_all(exp.Window)
                              if not window.args.get("partition_by")), None)
        if unpartitioned is not None:  # the reason a reader looks for first
            raise KeyFallback(f"window function {function_name(unpartitioned)} without "
                              "PARTITION BY")
        if not classes:
            raise KeyFallback("no column equality to split it by")
        seeded = {self._find(seed) for seed in seeds}
        top = set(self.scopes[0].own)
        # The class tying most occurrences, then most top-level ones; the first that
        # partitions the query is the key.
        ranked = sorted(classes.items(), key=lambda item: (
            -len({i for i, _ in item[1]}), -len({i for i, _ in item[1] if i in top}),
            item[0] not in seeded, sorted(item[1])))
        first_problem: KeyFallback | None = None
        for root, members in ranked:
            if group is not None and root not in seeded:  # a lesser key would read the
                first_problem = first_problem or KeyFallback(  # better-keyed relations whole
                    "GROUP BY without the key")
                break
            keys: list[str | None] = [None] * len(self.tables)
            for occurrence, column_name in sorted(members):
                if keys[occurrence] is None:
                    keys[occurrence] = column_name
            try:
                self._validate(set(members), keys)
            except KeyFallback as problem:
                first_problem = first_problem or problem
                continue
            self.key = set(members)
            return tuple(keys)
        assert first_problem is not None
        raise first_problem

    def output_key(self) -> int | None:
        """The position of an output column that holds each row's key (after `keys()`), so
        the stored rows of the touched keys can be found by it; None when no column surely
        does: none is a key column, a `*` hides positions, or an outer join can pad the
        one there is with NULL (its row's key is then elsewhere)."""
        scope = self.scopes[0]
        padded: set[int] = set()
        for position, member, side, _ in self.outer_ons:
            if position == 0:
                padded |= {member} if side == "LEFT" else (
                    set(scope.own) - ({member} if side == "RIGHT" else set()))
        for index, item in enumerate(self.select.expressions):
            column = item.unalias()
            if isinstance(column, exp.Star) or (isinstance(column, exp.Column)
                                                and isinstance(column.this, exp.Star)):
                return None
            if not isinstance(column, exp.Column):
                continue
            slot = self._slot(column, scope)
            if slot is None or slot not in self.key:
                continue
            direct = slot[0] in scope.own and slot[0] not in padded
            if direct or (slot[0] not in scope.own and not self.outer_ons):
                return index
        return None

    # -- is the query partitioned by the chosen key? ----------------------------------

    def _validate(self, key: set[Slot], keys: list[str | None]) -> None:
        keyed_occurrences = {i for i, column in enumerate(keys) if column is not None}
        for position, scope in enumerate(self.scopes):
            below = self._reads_keyed(position, keyed_occurrences)
            if position == 0:
                self._top_level(scope, key)
            elif scope.is_derived and below:
                self._grouped_by_key(scope, key, "in a derived table")
            elif below:
                self._bound(position, scope, key)
            if below:
                self._windows(scope, key)
            members = [i for i in scope.own if i in keyed_occurrences] + [
                self._member(branches[0]) for branches in scope.derived.values()
                if any(self._reads_keyed(b, keyed_occurrences) for b in branches)]
            self._connected(position, scope, key, members)
        for position, member, side, equalities in self.outer_ons:
            self._outer_join(position, member, side, equalities, key, keyed_occurrences)
        for branches in self.set_operations:
            self._set_operation(branches, key, keyed_occurrences)
        for first, others in self.coalesced:
            if first in key and not all(other in key for other in others):
                raise KeyFallback("COALESCE of the key with a column that is not the key")
        changeable = {table.name.lower() for table in self.tables}
        whole = {self.tables[i].name.lower() for i, column in enumerate(keys) if column is None}
        if changeable <= whole:
            raise KeyFallback(f"every relation it reads is also read whole "
                              f"({', '.join(sorted(whole))}), so any change recomputes it")

    @staticmethod
    def _member(position: int) -> int:
        """A derived table as a member of its select's join graph (occurrences are >= 0)."""
        return -2 - position

    def _member_of(self, occurrence: int, scope: Scope) -> int | None:
        """The member of `scope` (its own occurrence, or a derived table) an occurrence lies
        in; None when it lies outside the select."""
        if occurrence in scope.own:
            return occurrence
        for branches in scope.derived.values():
            if any(occurrence in self._occurrences_of(b) for b in branches):
                return self._member(branches[0])
        return None

    def _occurrences_of(self, position: int) -> set[int]:
        return {self.index[id(table)] for table in occurrences(self.scopes[position].select)}

    def _member_reads_keyed(self, member: int, keyed_occurrences: set[int]) -> bool:
        if member >= 0:
            return member in keyed_occurrences
        return bool(self._occurrences_of(-2 - member) & keyed_occurrences)

    def _outer_join(self, position: int, member: int, side: str,
                    equalities: list[tuple[Slot, Slot]], key: set[Slot],
                    keyed_occurrences: set[int]) -> None:
        """An outer join's joined side, keyed, is tied by its own ON (else whether a row
        matched depends on other keys); a preserved side read whole beside keyed ones would
        be NULL-padded once per key instead of once."""
        scope = self.scopes[position]
        member = member if member >= 0 else self._member(-1 - member)
        keyed = self._member_reads_keyed(member, keyed_occurrences)
        if keyed and not any(slot in key and other in key and member in (
                self._member_of(slot[0], scope), self._member_of(other[0], scope))
                for slot, other in equalities):
            raise KeyFallback("outer join whose ON does not equate the key")
        others = [*scope.own, *(self._member(b[0]) for b in scope.derived.values())]
        others_keyed = any(self._member_reads_keyed(other, keyed_occurrences)
                           for other in others if other != member)
        if side in ("RIGHT", "FULL") and not keyed and others_keyed:
            raise KeyFallback(f"{side} JOIN keeping a relation read whole")

    def _set_operation(self, branches: list[int], key: set[Slot],
                       keyed_occurrences: set[int]) -> None:
        """A set operation over keyed rows keeps its key when every branch has the key in
        the same column: rows of different keys never meet, so it works within each."""
        reads = [self._reads_keyed(position, keyed_occurrences) for position in branches]
        if not any(reads):
            return
        if not all(reads):
            raise KeyFallback("set operation with a branch read whole")
        outputs = [self._outputs(position) for position in branches]
        if not any(all(branch[column][1] in key for branch in outputs)
                   for column in range(len(outputs[0]))):
            raise KeyFallback("set operation without the key in one column of every branch")

    def _windows(self, scope: Scope, key: set[Slot]) -> None:
        """A window over keyed rows sees one key's rows only if it is partitioned by it."""
        for window in scope.select.find_all(exp.Window):
            if window.parent_select is not scope.select:
                continue
            partition = window.args.get("partition_by") or []
            if not any(isinstance(column, exp.Column) and self._slot(column, scope) in key
                       for column in partition):
                raise KeyFallback(f"window function {function_name(window)} not "
                                  "partitioned by the key")

    def _partitioning_columns(self, scope: Scope, *, windows_only: bool = False
                              ) -> list[exp.Column]:
        """GROUP BY columns and window PARTITION BY columns of a select: what may key it
        (the top-level GROUP BY seeds the key on its own, in `shape`)."""
        group = None if windows_only else scope.select.args.get("group")
        found = [key for key in (group.expressions if group is not None else [])
                 if isinstance(key, exp.Column)]
        for window in scope.select.find_all(exp.Window):
            if window.parent_select is scope.select:
                found.extend(column for column in window.args.get("partition_by") or []
                             if isinstance(column, exp.Column))
        return found

    def _grouped_by_key(self, scope: Scope, key: set[Slot], where: str) -> None:
        """Aggregation over keyed rows works within one key: grouped by it, or DISTINCT
        with it among the columns."""
        select = scope.select
        group = select.args.get("group")
        if group is not None:
            if not any(isinstance(k, exp.Column) and self._slot(k, scope) in key
                       for k in group.expressions):
                raise KeyFallback(f"aggregate {where} not grouped by the key")
            return
        if select.args.get("distinct") and not any(
                isinstance(item.unalias(), exp.Column)
                and self._slot(item.unalias(), scope) in key for item in select.expressions):
            raise KeyFallback(f"SELECT DISTINCT {where} without the key among its columns")
        if aggregates_rows(select):
            raise KeyFallback(f"aggregate over every key {where}")

    def _reads_keyed(self, position: int, keyed_occurrences: set[int]) -> bool:
        select = self.scopes[position].select
        return any(self.index[id(table)] in keyed_occurrences for table in occurrences(select))

    def _top_level(self, scope: Scope, key: set[Slot]) -> None:
        select = scope.select
        if select.args.get("distinct") and not any(
                isinstance(item.unalias(), exp.Column)
                and self._slot(item.unalias(), scope) in key for item in select.expressions):
            raise KeyFallback("SELECT DISTINCT without the key among its columns")
        if select.args.get("group") is None and aggregates_rows(select):
            raise KeyFallback("aggregate over every key")

    def _bound(self, position: int, scope: Scope, key: set[Slot]) -> None:
        binding = self.in_bindings.get(position)
        correlated = any((slot[0] in scope.own) != (other[0] in scope.own)
                         for slot, other in self.edges[position]
                         if slot in key and other in key)
        if not correlated and binding is None:
            raise KeyFallback("subquery not correlated on the key")
        select = scope.select
        aggregates = (select.args.get("group") is not None or select.args.get("distinct")
                      or any(part.find(exp.AggFunc) for part in select.expressions))
        if aggregates and not correlated:
            group = select.args.get("group")
            if group is None or not any(isinstance(k, exp.Column) and self._slot(k, scope) in key
                                        for k in group.expressions):
                raise KeyFallback("aggregate in a subquery neither correlated on nor grouped "
                                  "by the key")

    def _connected(self, position: int, scope: Scope, key: set[Slot],
                   members: list[int]) -> None:
        """The select's keyed members (occurrences and derived tables) tied together (and an
        expression subquery to the enclosing query) by its own equalities, so every
        combination of rows it forms shares one key."""
        bound = position > 0 and not scope.is_derived
        if len(members) + bound < 2:
            return
        outside = -1
        parent = {member: member for member in [*members, outside]}

        def root(node: int) -> int:
            while parent[node] != node:
                node = parent[node]
            return node
        links = list(self.edges[position])
        if position in self.in_bindings:
            links.append(self.in_bindings[position])
        for slot, other in links:
            if slot in key and other in key:
                found = [self._member_of(node[0], scope) for node in (slot, other)]
                ends = [outside if end is None else end for end in found]
                if all(end in parent for end in ends):
                    parent[root(ends[0])] = root(ends[1])
        if len({root(member) for member in ([*members, outside] if bound else members)}) > 1:
            raise KeyFallback("relations not joined on the key")
