"""pipeline-reconciler: plan and apply changes to continuous Spark SQL pipelines.

The package follows the flow of a change, one sub-package per stage, and imports
point one way only (``tests/test_layering.py`` keeps it so):

    cli, github  ->  operations  ->  engine, plan  ->  spec  ->  errors

* ``desired/``: reading a project (YAML with line numbers, settings, pipeline specs,
  SQL, the program with fingerprints, choosing pipelines). No Spark.
* ``plan/``: diffing a program against the manifest, the plan document, and
  rendering it for a terminal or a pull request. No Spark.
* ``engine/``: everything that runs on Spark and Delta (session, storage,
  connectors, a step, a bootstrap). The only package that imports pyspark.
* ``github/``: the GitHub Action (``reconcile github``) and its REST client.
* At the top: ``cli`` (flags in, calls out; ``cli_context`` its context, errors and
  signals as exit codes; ``cli_state`` for ``reconcile state``; ``cli_statements`` for
  ``execute`` and ``query``; ``cli_destroy`` for ``reconcile destroy``; ``cli_options`` the
  options
  commands
  share, ``cli_test`` for ``reconcile test``, ``cli_doctor`` for ``reconcile doctor``,
  ``cli_refresh`` for ``reconcile refresh`` and the apply it shares with ``apply``,
  ``cli_spark`` for ``reconcile spark start|stop|status``,
  ``cli_reference`` generating ``docs/cli.md``), ``operations`` (what each command does
  to one pipeline, under its lock) with ``spark_engine`` (the Spark it runs on, started
  when first needed), ``publication`` (``publish:`` after each
  commit) and ``preview`` (``plan --preview``), ``statements``
  (``execute`` and ``query``) with ``query_output``, ``destroy`` (a pipeline's data and
  state removed, objects forgotten by ``state rm``), ``runner`` (``run --continuous`` as a service)
  with its ``metrics``, ``status`` (``reconcile status``, without Spark) with
  ``step_failures`` (the last failed step, kept for it), the
  ``manifest`` with ``relation_records`` and ``connector_records`` (its typed records)
  and ``state`` (the commit point and where it is stored), ``errors``
  and small shared helpers (``layout``, ``progress``, ``process`` (what the CLI's own
  process says of itself), ``faults``, ``redact``;
  ``git`` and ``child_process``, which run helper programs without obeying a pull
  request's files or passing on secrets), and ``scaffold`` (``reconcile init``).

ARCHITECTURE.md at the top of the repository is the longer map.
"""

__version__ = "0.1.0"
