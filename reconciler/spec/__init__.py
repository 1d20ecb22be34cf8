"""Reading a project: from files on disk to a validated, fingerprinted program.

Owns YAML with line numbers (``documents``), ``reconcile.yaml`` and
``pipeline.yaml`` (``project``), Spark SQL statements (``sql``), the program
with its fingerprints (``program``) and choosing the pipelines a command works
on (``workspace``). Every error names the file and line.

May import: ``reconciler.errors`` and the standard helpers only. Never Spark,
never ``plan``, ``engine``, ``operations`` or ``github``: reading a project must
be cheap and safe enough to run on any pull request.
"""
