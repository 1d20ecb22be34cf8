"""The data plane: everything that runs on Spark or touches a Delta table.

Owns the Java check (``java``), the Spark session (``session``), column types
(``schema``), Delta storage (``delta_log``, ``deletion_vectors`` and
``column_mapping`` for what delta-rs does not read, ``storage``, ``writer``,
``merge`` for row-level changes, ``retention``), a pipeline's relations as DataFrames
(``runtime``), input and output connectors (``connectors``, ``delta_source``),
incremental view maintenance (``maintenance/``), a step (``step``) and a
bootstrap (``bootstrap``).

May import: ``spec`` (a program's definitions), the plan's data types (a
bootstrap carries out a ``plan.diff``), ``errors`` and the shared helpers. Never
``operations``, ``cli`` or ``github``. This is the only package that imports
pyspark; importing ``reconciler.engine`` itself imports nothing heavy, so
``python -m reconciler.engine.java`` runs before Spark is installed.
"""
