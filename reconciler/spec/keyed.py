"""Which queries can be recomputed over only the keys a step touches (the `Keyed` shape).

Outer joins, `EXISTS`/`NOT EXISTS`, `IN (subquery)` and correlated subqueries are
not linear, but in most reporting SQL they only ever combine rows that share a
key: `o_orderkey = l_orderkey` in a join, `WHERE l_orderkey = o_orderkey` in an
`EXISTS`, `l_partkey = p_partkey` in a correlated `AVG`. Such a query is a
disjoint union over key values, `Q(R) = ⊎_k Q(R|k)` (`R|k`: the rows of `R`
whose key is `k`), so its change is the query over just the touched keys,
before and after the step (`engine/maintenance/outer.py`):

    Δ = Q(R'|K) - Q(R|K)      K = the keys of this step's changed rows

This module finds that key. Column equalities (top-level conjuncts of `ON` and
`WHERE`, correlations, `x IN (SELECT y ...)`) join column slots into classes; the
class covering the most relation occurrences is the key. The query is partitioned
by it when:

* each select's keyed occurrences are tied to each other by its own equalities,
  and each subquery's to the enclosing query by a correlation or by `IN`;
* an outer join's keyed occurrence is tied by its own `ON` (else whether a row
  matched anything depends on other keys);
* every aggregate, `GROUP BY` or `DISTINCT` works within one key: the top-level
  `GROUP BY` includes the key, a subquery is correlated on it or groups by it;
* `NOT IN` binds nothing: a NULL anywhere in its subquery decides the answer
  for every row, so an uncorrelated one is read whole (a constant of the step
  while its relations are unchanged); correlated on the key, the NULL rule
  holds within each key, as the subquery only ever sees that key's rows.

Occurrences outside the key class (dimension tables, an uncorrelated subquery)
are read whole: while their relations do not change they are constants of the
step; a step that changes one compares the whole query, old against new
(exact, not cheaper). A query where every relation has such an occurrence
would gain nothing and is recomputed.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from sqlglot import exp

Slot = tuple[int, str]  # (occurrence index, column)
Columns = Mapping[str, Sequence[str] | None]  # relation -> its columns (None: unknown)
Equated = tuple[tuple[tuple[exp.Table, str], ...], ...]  # classes of (occurrence, column)


class KeyFallback(Exception):
    """The query cannot be split by a key; the message says why."""


@dataclass(frozen=True)
class Keyed:
    """A query recomputed over the touched keys. `keys[i]` is the key column of the i-th
    relation occurrence (`occurrences(select)` order), None when it is read whole."""

    select: exp.Select
    keys: tuple[str | None, ...]


def occurrences(query: exp.Expression) -> list[exp.Table]:
    """Every relation occurrence of the query, subqueries included, in a stable order."""
    return list(query.find_all(exp.Table))


def named_columns(query: exp.Expression) -> set[str] | None:
    """Every name the query writes (lowercase), a superset of the columns it reads; None when
    it can read columns it does not name: a `*` in a select list (not `COUNT(*)`, not an
    `EXISTS` subquery's, whose columns nothing reads) or a `NATURAL` join."""
    for star in query.find_all(exp.Star):
        select = star.find_ancestor(exp.Select)
        if not isinstance(star.parent, exp.Count) and not (
                select is not None and isinstance(select.parent, exp.Exists)):
            return None
    if any(join.args.get("method") for join in query.find_all(exp.Join)):
        return None
    return {identifier.name.lower() for identifier in query.find_all(exp.Identifier)}


def conjuncts(condition: exp.Expression | None) -> list[exp.Expression]:
    if condition is None:
        return []
    if isinstance(condition, exp.And):
        return [*conjuncts(condition.this), *conjuncts(condition.expression)]
    if isinstance(condition, exp.Paren):
        return conjuncts(condition.this)
    return [condition]


def from_of(select: exp.Select) -> exp.Expression | None:
    source = select.args.get("from_") or select.args.get("from")  # sqlglot 30: `from_`
    return source.this if source is not None else None


def keyed(select: exp.Select, columns: Columns,
          check: Callable[[exp.Select], None]) -> Keyed:
    """The `Keyed` shape of `select`, or `KeyFallback`. `check` refuses clauses no shape
    supports (ORDER BY, LIMIT, ...) in the select and each subquery."""
    return _Analysis(select, columns, check).shape()


def equated_columns(select: exp.Select, columns: Columns) -> Equated:
    """The select's classes of columns made equal by its top-level `ON`/`WHERE` equalities,
    each as (relation occurrence, column) pairs; none when a column cannot be placed.
    In an inner join every output row's columns of one class hold one value, so the
    rows a change can meet lie within the change's range of that value (`linear`)."""
    analysis = _Analysis(select, columns, lambda _: None)
    try:
        analysis._visit(select, None)
    except KeyFallback:
        return ()
    classes: dict[Slot, list[tuple[exp.Table, str]]] = {}
    for slot in list(analysis.parent):
        classes.setdefault(analysis._find(slot), []).append(
            (analysis.tables[slot[0]], slot[1]))
    return tuple(tuple(members) for members in classes.values() if len(members) > 1)


@dataclass
class _Scope:
    select: exp.Select
    names: dict[str, int]  # alias (or name) -> occurrence index
    outer: _Scope | None
    own: list[int]  # occurrence indexes of this select's FROM and JOINs


class _Analysis:
    def __init__(self, select: exp.Select, columns: Columns,
                 check: Callable[[exp.Select], None]):
        self.select, self.columns, self.check = select, columns, check
        self.tables = occurrences(select)
        self.index = {id(table): i for i, table in enumerate(self.tables)}
        self.parent: dict[Slot, Slot] = {}
        self.scopes: list[_Scope] = []
        # per scope: its own equalities (slot, slot) and its binding to the enclosing query
        self.edges: dict[int, list[tuple[Slot, Slot]]] = {}
        self.in_bindings: dict[int, tuple[Slot, Slot]] = {}
        self.outer_ons: list[tuple[int, int, list[tuple[Slot, Slot]]]] = []  # scope, occ, ON eqs

    def shape(self) -> Keyed:
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
        classes: dict[Slot, list[Slot]] = {}
        for slot in list(self.parent):
            classes.setdefault(self._find(slot), []).append(slot)
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
            for occurrence, column in sorted(members):
                if keys[occurrence] is None:
                    keys[occurrence] = column
            try:
                self._validate(set(members), keys)
            except KeyFallback as problem:
                first_problem = first_problem or problem
                continue
            return Keyed(self.select, tuple(keys))
        assert first_problem is not None
        raise first_problem

    # -- walking the query ------------------------------------------------------------

    def _visit(self, select: exp.Select, outer: _Scope | None) -> None:
        self.check(select)
        if select.find(exp.Union, exp.Except, exp.Intersect):
            raise KeyFallback("set operation in a subquery")
        scope = _Scope(select, {}, outer, [])
        position = len(self.scopes)
        self.scopes.append(scope)
        self.edges[position] = []
        source = from_of(select)
        joins = select.args.get("joins") or []
        for relation in (source, *(join.this for join in joins)):
            if not isinstance(relation, exp.Table) or not isinstance(relation.this,
                                                                     exp.Identifier):
                raise KeyFallback("FROM or JOIN with a subquery")
            occurrence = self.index[id(relation)]
            scope.names[(relation.alias_or_name or relation.name).lower()] = occurrence
            scope.own.append(occurrence)
        for join in joins:
            kind = (join.kind or "").upper()
            if kind in ("SEMI", "ANTI") or join.args.get("method") or join.args.get("using"):
                raise KeyFallback(f"{(join.side or '').upper()} {kind} JOIN with "
                                  f"{'USING' if join.args.get('using') else 'this form'}")
            equalities = self._equalities(join.args.get("on"), scope, position)
            if (join.side or "").upper() in ("LEFT", "RIGHT", "FULL"):
                self.outer_ons.append((position, self.index[id(join.this)], equalities))
        where = select.args.get("where")
        self._equalities(where.this if where is not None else None, scope, position)
        for node in select.find_all(exp.Select):
            if node is not select and node.parent_select is select:
                self._subquery(node, scope)

    def _subquery(self, select: exp.Select, scope: _Scope) -> None:
        holder = select.parent
        while isinstance(holder, exp.Subquery):
            holder = holder.parent
        position = len(self.scopes)
        self._visit(select, scope)
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

    def _equalities(self, condition: exp.Expression | None, scope: _Scope,
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

    def _slot(self, column: exp.Column, scope: _Scope | None) -> Slot | None:
        """The relation occurrence a column reads, searching enclosing selects outward."""
        name = column.name.lower()
        while scope is not None:
            if column.table:
                occurrence = scope.names.get(column.table.lower())
                if occurrence is not None:
                    return (occurrence, name)
            else:
                having = [occurrence for occurrence in scope.own
                          if name in self._columns(occurrence)]
                if len(having) > 1:
                    raise KeyFallback(f"column {name} is ambiguous")
                if having:
                    return (having[0], name)
            scope = scope.outer
        return None

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

    # -- is the query partitioned by the chosen key? ----------------------------------

    def _validate(self, key: set[Slot], keys: list[str | None]) -> None:
        keyed_occurrences = {i for i, column in enumerate(keys) if column is not None}
        for position, scope in enumerate(self.scopes):
            own = [i for i in scope.own if i in keyed_occurrences]
            below = self._reads_keyed(position, keyed_occurrences)
            if position == 0:
                self._top_level(scope, key)
            elif below:
                self._bound(position, scope, key)
            self._connected(position, scope, key, own)
        for _, occurrence, equalities in self.outer_ons:
            if occurrence in keyed_occurrences and not any(
                    slot in key and other in key for slot, other in equalities
                    if occurrence in (slot[0], other[0])):
                raise KeyFallback("outer join whose ON does not equate the key")
        changeable = {table.name.lower() for table in self.tables}
        whole = {self.tables[i].name.lower() for i, column in enumerate(keys) if column is None}
        if changeable <= whole:
            raise KeyFallback(f"every relation it reads is also read whole "
                              f"({', '.join(sorted(whole))}), so any change recomputes it")

    def _reads_keyed(self, position: int, keyed_occurrences: set[int]) -> bool:
        select = self.scopes[position].select
        return any(self.index[id(table)] in keyed_occurrences for table in occurrences(select))

    def _top_level(self, scope: _Scope, key: set[Slot]) -> None:
        select = scope.select
        if select.args.get("distinct") and not any(
                isinstance(item.unalias(), exp.Column)
                and self._slot(item.unalias(), scope) in key for item in select.expressions):
            raise KeyFallback("SELECT DISTINCT without the key among its columns")
        if select.args.get("group") is None and any(
                part.find(exp.AggFunc) for part in select.expressions):
            raise KeyFallback("aggregate over every key")

    def _bound(self, position: int, scope: _Scope, key: set[Slot]) -> None:
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

    def _connected(self, position: int, scope: _Scope, key: set[Slot], own: list[int]) -> None:
        """The select's keyed occurrences tied together (and to the enclosing query) by its
        own equalities, so every combination of rows it forms shares one key."""
        if len(own) + (position > 0) < 2:
            return
        outside = -1
        parent = {occurrence: occurrence for occurrence in [*own, outside]}

        def root(node: int) -> int:
            while parent[node] != node:
                node = parent[node]
            return node
        links = list(self.edges[position])
        if position in self.in_bindings:
            links.append(self.in_bindings[position])
        for slot, other in links:
            if slot in key and other in key:
                ends = [node[0] if node[0] in scope.own else outside for node in (slot, other)]
                if all(end in parent for end in ends):
                    parent[root(ends[0])] = root(ends[1])
        members = [*own, outside] if position > 0 else own
        if len({root(member) for member in members}) > 1:
            raise KeyFallback("relations not joined on the key")
