"""The data plane: everything that runs on Spark or touches a Delta table.

Owns the Java check (``java``), the jars an embedded session needs (``jars``), the
Spark session (``session``), a warm local Spark Connect server the CLI's commands share
(``warm_spark``) and Spark dying under a command (``failures``), column
types (``schema``), Delta storage (``delta_log``, ``delta_version`` for the facts
of one opened version, ``deletion_vectors`` and ``column_mapping`` for what delta-rs
does not read, ``files``, ``delta_tables`` for opening, inspecting and scanning
tables, ``storage`` adding the writes with ``delta_writers`` (one class per writer),
``writer`` (its statistics from Parquet footers: ``parquet_stats``), ``merge`` for
row-level changes, ``compaction``, ``retention``), rows the driver holds as DataFrames
(``local_rows``), a pipeline's relations as DataFrames (``runtime``) and as catalog views
pinned to committed versions (``publish``), input and
output connectors (``connectors``, ``input_batch``, ``input_files``,
``listed_ingest``, ``delta_source``, ``bad_input``; Kafka's: ``kafka_offsets`` asking the
broker without Spark, ``kafka_source``, ``kafka_sink``), incremental view maintenance
(``maintenance/``), a step (``step``, ``refresh``, ``refresh_choice``,
``expectations``), a bootstrap (``bootstrap``, ``evolve``, ``state_moves``), the
data preview's counts (``preview_counts``) and its time and job bound
(``preview_bound``), and view tests on Spark (``view_tests``).

May import: ``desired`` (a program's definitions), the plan's data types (a
bootstrap carries out a ``plan.diff``), ``errors`` and the shared helpers. Never
``operations``, ``cli`` or ``github``. This is the only package that imports
pyspark; importing ``reconciler.engine`` itself imports nothing heavy, so
``python -m reconciler.engine.java`` runs before Spark is installed.
"""
