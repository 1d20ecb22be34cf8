"""Reading a project: from files on disk to a validated, fingerprinted program.

Owns four rooms, each importing only the ones before it (`tests/test_layering.py` holds
it):

- ``settings``: ``reconcile.yaml`` and ``pipeline.yaml`` with their lines, and what a
  connector may say;
- ``parsing``: a pipeline's SQL files rendered, split, parsed and checked;
- ``analysis``: which views are maintained and in which shape, column lineage, and the
  analysis kept between plans;
- ``model``: the program checked as a graph and fingerprinted, and a manifest's program
  checked as if a pull request wrote it.

Above them, ``workspace`` chooses the pipelines a command works on and builds their
programs, and ``view_test_files`` reads view tests. Every error names the file and line,
and the column of the token at fault when there is one.

May import: ``reconciler.support`` only. Never Spark, never ``plan``, ``engine``,
``operations`` or ``github``: reading a project must be cheap and safe enough to run on
any pull request.
"""
