"""``reconcile run --continuous``: the pipelines stepped as a long-running service.

Owns the loop (``loop``: steps while input waits, backs off on failures, stops on
SIGTERM between steps) and its Prometheus metrics (``metrics``).

May import: ``operations`` (a step under the pipeline's lock), ``plan``, ``state``,
``desired`` and ``support``. Never ``engine`` directly, nor ``cli`` or ``github``.
"""
