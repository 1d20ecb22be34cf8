"""``plan --preview``'s side on Spark: counts of a view's rows before and after.

Owns the counts and sample rows (``counts``) and the time and job bound a preview runs
under (``bound``).

May import: ``engine.spark``, ``engine.delta``, the step's context (``engine.runtime``),
``state``, ``desired`` and ``support``.
"""
