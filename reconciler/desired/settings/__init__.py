"""The project's settings: `reconcile.yaml` and each `pipeline.yaml`, read with their lines.

Owns YAML with line numbers (``documents``), ``reconcile.yaml`` and ``pipeline.yaml``
(``project``, the values its settings take in ``setting_values``), and what a connector
may say: its options (``connector_options``), the allow-list of what it may hand a client
library (``client_options``), which of its fields go together (``connector_shape``), one
declaration per connector type (``connector_kinds``), which say what it reads and which
how (``connector_roles``: what resets one) and a Kafka connector's settings
(``kafka_settings``), and pull-request environments (``environments``).

May import: ``reconciler.support`` only: the bottom room of ``desired``.
"""
