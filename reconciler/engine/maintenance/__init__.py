"""Incremental view maintenance: each step computes a view's change from its inputs'.

Owns one module per operator family, each stating its Z-set rule (DBSP) in its
docstring: `linear` (projections, filters, UNION ALL, inner joins),
`aggregate` (GROUP BY, DISTINCT, global aggregates) and `outer` (the keyed rule:
a query recomputed over only the keys a step touches); `change` is the change of
a select without state of its own. `zset` is the change's representation,
`frames` the relation versions a step reads, and `view` picks the rule for a view
(from `desired.analysis.shapes`'s analysis) or recomputes it, reading only; `writes` makes the
commits it decided, in one place; `refresh_choice` decides, for
`refresh: auto`, whether maintaining or recomputing is cheaper.

May import: ``engine.spark``, ``engine.delta``, the step's context (``engine.runtime``),
``state``, ``desired`` and ``support``.
"""
