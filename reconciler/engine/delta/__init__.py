"""Delta tables: reading, writing and keeping them, with either writer.

Owns the transaction log read without a JVM (``log``), the facts of one opened
version (``versions``), what delta-rs does not read (``deletion_vectors``,
``column_mapping``), data files (``files``), opening, inspecting and scanning tables
(``tables``), the writes (``storage``, with ``writers``: one class per writer), the
delta-rs commit (``commit``, its statistics from Parquet footers: ``parquet_stats``),
row-level changes (``merge``), a table pinned at one version as one object to read and
write (``relation``), ``compaction``, ``retention`` and ``drift`` (commits the
engine did not make, found from the log).

May import: ``engine.spark``, ``state``, ``desired`` and ``support``. Never the step,
``io``, ``bootstrap`` or ``maintenance``, which write through it.
"""
