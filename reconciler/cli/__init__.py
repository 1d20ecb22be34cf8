"""The ``reconcile`` command: flags in, calls out, exit codes back.

Owns the root group and the plan/validate/apply/run commands (``main``), the context
commands share with its errors and signals as exit codes and its JSON output
(``context``), the options several commands share (``options``), ``reconcile state``
(``state``), ``execute`` and ``query`` (``statements``, with ``query_output`` printing
the rows), ``reconcile destroy`` (``destroy``), ``reconcile rollback`` (``rollback``),
``reconcile refresh`` and the apply loop
it shares with ``apply`` (``refresh``), ``reconcile test`` (``view_tests``),
``reconcile doctor`` (``doctor``), ``reconcile env`` (``environments``), ``reconcile
spark start|stop|status`` (``spark``),
``reconcile status`` without Spark (``status``), ``reconcile init`` (``scaffold``, with
the workflow it writes in ``templates/``) and the generator of ``docs/cli.md``
(``reference``).

May import: every folder of the package; it is the top. Imports of the engine stay
inside the commands that run it, so ``reconcile --help`` and ``plan`` load no pyspark.
"""
