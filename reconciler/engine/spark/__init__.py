"""Spark itself: the session a command runs on and what it needs to start.

Owns the Java check (``java``), the jars an embedded session needs (``jars``; which of
them a project needs, read from its checkout's files: ``project_jars``) and its
local file system without ``chmod`` processes (``local_fs``, compiled from ``java_src/``), the
class archive an embedded JVM starts from (``class_archive``, made by running
``archive_workload`` in a child), the session (``session``) and what its JVM inherits
(``launch``: a cleaned environment, a filtered stderr), a warm local Spark Connect server
the CLI's commands share (``warm``), Spark dying under a command (``failures``), column
types (``schema``, of type strings parsed without a session in ``type_strings``), rows the
driver holds as DataFrames (``local_rows``), a query's rows for printing
(``query_rows``), frames checkpointed and counted by one job
(``checkpoints``) and a small step's queries planned statically, as a micro-batch
(``micro_batch``).

May import: ``desired``, ``state`` and ``support``. Never another engine folder:
the rest of the engine stands on this one.
"""
