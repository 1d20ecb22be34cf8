"""Conditions common to every branch of an `OR`, written once in front of it.

Reporting SQL often repeats a join or correlation condition in each branch of a
disjunction (Spark's TPC-DS q41: `(i_manufact = i1.i_manufact AND ...) OR
(i_manufact = i1.i_manufact AND ...)`). Maintenance finds a query's key among its
top-level equalities (`desired/analysis/keyed.py`), and an equality inside an `OR`
is not one. Distributivity holds in SQL's three-valued logic as in Boolean logic,

    (c AND a) OR (c AND b)  ==  c AND (a OR b)        (c OR c == c)

so the condition is factored out with the same result for every row, NULL included,
and the equality becomes a top-level conjunct the key analysis can use.
"""

from __future__ import annotations

from typing import TypeVar

from sqlglot import exp

Tree = TypeVar("Tree", bound=exp.Expr)


def factor_common_conditions(query: Tree) -> Tree:
    """`query` (a copy when anything is factored) with each outermost `OR` whose branches
    share conjuncts written as those conjuncts `AND` the branches' rests."""
    found = [node for node in query.find_all(exp.Or) if _outermost(node)
             and _common(_branches(node))]
    if not found:
        return query
    query = query.copy()
    # Deepest first: an OR inside a branch is factored before the branch is copied out.
    for node in reversed([node for node in query.find_all(exp.Or) if _outermost(node)]):
        branches = _branches(node)
        common = _common(branches)
        if not common:
            continue
        rests = [[part for part in branch if part not in common] for branch in branches]
        if any(not rest for rest in rests):  # c OR (c AND a) == c
            factored = exp.and_(*common, copy=True)
        else:
            factored = exp.and_(*common, exp.paren(exp.or_(
                *(exp.and_(*rest, copy=True) for rest in rests), copy=True)), copy=True)
        node.replace(exp.paren(factored, copy=False))
    return query


def _outermost(node: exp.Or) -> bool:
    """Not a branch of a larger OR (through parentheses): that one is factored whole."""
    parent = node.parent
    while isinstance(parent, exp.Paren):
        parent = parent.parent
    return not isinstance(parent, exp.Or)


def _branches(node: exp.Or) -> list[list[exp.Expr]]:
    """Each branch of a (flattened) OR as its list of conjuncts."""
    return [[part.unnest() for part in branch.unnest().flatten()]
            if isinstance(branch.unnest(), exp.And) else [branch.unnest()]
            for branch in _disjuncts(node)]


def _disjuncts(node: exp.Expr) -> list[exp.Expr]:
    node = node.unnest()
    if isinstance(node, exp.Or):
        return [*_disjuncts(node.left), *_disjuncts(node.right)]
    return [node]


def _common(branches: list[list[exp.Expr]]) -> list[exp.Expr]:
    """The conjuncts of the first branch found (equal as trees) in every other branch,
    unless one holds a subquery or a random number (moved, it would be drawn once
    where each branch drew its own)."""
    first, *others = branches
    return [part for part in first if not part.find(exp.Query, exp.Rand, exp.Randn)
            and all(part in other for other in others)]
