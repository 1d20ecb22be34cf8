"""A bootstrap: a change applied from the state a pipeline already holds.

Owns recomputing only new and modified views from the committed tables
(``recompute``), tables evolved in place (``evolution``) and state moved between
renamed objects (``state_moves``).

May import: the rest of the engine, the plan's data types (it carries out a
``plan.diff``), ``state``, ``desired`` and ``support``.
"""
