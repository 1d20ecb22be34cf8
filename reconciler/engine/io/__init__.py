"""Connectors: input ingested into tables, views written out.

Owns the connectors of a pipeline as a step drives them (``connectors``), one interface
per connector type, registered by its name (``connector_types``), one step's input
(``input_batch``, with bad input files held or skipped) from files (``files_connector``,
with ``input_files``, ``listed_ingest``, both reaching local folders and S3 through one
seam, ``file_tree``, and what a failing batch logs silenced by ``stream_logs``),
Delta tables (``delta_source``) and Kafka (``kafka_source``, with ``kafka_offsets``
asking the broker without Spark), and Kafka output (``kafka_sink``).

May import: ``engine.spark``, ``engine.delta``, the step's context (``engine.runtime``), a
change's representation (``engine.maintenance.zset``), ``state``, ``desired`` and
``support``.
"""
