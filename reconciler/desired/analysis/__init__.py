"""SQL analysis: which views are maintained, in which shape, and what each column reads.

Owns which views can be maintained and in which shape (``shapes``, with ``keyed``,
``partitioning``, ``query_graph``, ``query_parts``, ``inline``, ``factoring``,
``grouping_sets``,
``group_windows``, ``set_operations``, ``output_key``, Spark's rules for what a scope sees
in ``scope_rules``, and ``fallback``, the reason a view is recomputed), aggregating
subqueries as views of their own (``view_parts``), how each view is refreshed given its
shape and the pipeline's policy (``view_refresh``), column lineage (``lineage``) and the
analysis kept between plans (``memo``).

May import: ``desired.parsing``, ``desired.settings`` and ``reconciler.support``.
"""
