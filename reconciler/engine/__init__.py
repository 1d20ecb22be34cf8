"""The data plane: everything that runs on Spark or touches a Delta table.

Owns, bottom to top (each folder imports only those before it):

* ``spark/``: the Java check, the jars, the session, a warm local Spark Connect server,
  Spark dying under a command, column types, rows the driver holds, a query's rows for
  printing (``query_rows``).
* ``delta/``: Delta tables read without a JVM and written with either writer, merge,
  compaction, retention.
* ``runtime``: a pipeline's relations as DataFrames at the versions a step reads (the
  step's context); ``publish``: catalog views pinned to committed versions;
  ``approval``: the approved program recorded in storage, which a step's manifest must
  match; ``statements``: `execute`'s INSERT and DELETE on a table.
* ``maintenance/``: incremental view maintenance, one module per operator family, and
  ``refresh: auto``'s choice.
* ``io/``: input and output connectors (files, Delta, Kafka), bad input.
* ``preview/``: the data preview's counts and its bound; ``expectations``: a step's
  checks on its views' rows.
* ``refresh``: a step's views refreshed, two at once, each after what it reads;
  ``step``: one step, from input to the new versions the caller commits in the manifest.
* ``bootstrap/``: a change applied from the state a pipeline holds; ``promotion``: a
  pull-request environment's views adopted by an apply and caught up.
* ``view_tests``: view tests run on Spark.

May import: ``plan``'s data types (a bootstrap carries out a ``plan.diff``), ``state``,
``desired`` and ``support``. Never ``operations``, ``runner``, ``cli`` or ``github``.
This is the only package that imports pyspark; importing ``reconciler.engine`` itself
imports nothing heavy, so ``python -m reconciler.engine.spark.java`` runs before Spark
is installed.
"""
