"""Incremental view maintenance: each step computes a view's change from its inputs'.

One module per operator family, each stating its Z-set rule (DBSP) in its
docstring: `linear` (projections, filters, UNION ALL, inner joins) and
`aggregate` (GROUP BY, DISTINCT, global aggregates). `zset` is the change's
representation, `frames` the relation versions a step reads, and `view` picks
the rule for a view (from `spec.maintenance`'s analysis) or recomputes it.
"""
