"""The program: tables, views and connectors checked as a graph, and fingerprinted.

Owns the program with its fingerprints (``program``), its connectors checked against it
(``connectors``), names resolved as Spark's analyzer will (``resolution``), the
fingerprints themselves (``fingerprint``), which output columns the preview masks
(``masking``), whether a table can evolve in place (``table_evolution``) and a manifest's
program checked as if a pull request wrote it (``committed``).

May import: ``desired.analysis``, ``desired.parsing``, ``desired.settings`` and
``reconciler.support``.
"""
