"""pipeline-reconciler: plan and apply changes to continuous Spark SQL pipelines.

The package's folders follow the flow of a change, and imports point one way only
(``tests/test_layering.py`` keeps it so):

    cli -> runner, github -> operations -> engine -> plan -> state -> desired -> support

* ``cli/``: the ``reconcile`` command (flags in, calls out, exit codes back).
* ``runner/``: ``run --continuous`` as a service, with its metrics.
* ``github/``: the GitHub Action (``reconcile github``) and its REST client.
* ``operations/``: what a command does to one pipeline, under its lock.
* ``engine/``: everything that runs on Spark and Delta. The only folder that imports
  pyspark.
* ``plan/``: diffing a desired program against the committed one, the plan document
  and its renderings. No Spark.
* ``state/``: the manifest (the only commit point), its records, the storage layout,
  reading committed state from a backend (``state_backends``, beside this package).
* ``desired/``: reading a project: YAML, settings, SQL, the program with fingerprints.
  No Spark.
* ``support/``: errors and small helpers every layer may use.

Each folder's ``__init__`` says what it owns and what it may import. ARCHITECTURE.md at
the top of the repository is the longer map.
"""

__version__ = "0.1.0"
