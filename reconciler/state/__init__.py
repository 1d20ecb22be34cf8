"""Committed state: the manifest, the only commit point, and where its objects live.

Owns the manifest document (``manifest``) with its typed records of relations
(``relations``) and connectors (``connectors``), the program a runtime runs read
once into typed records of its tables and views (``program``), where a pipeline's tables, views and
checkpoints sit under the storage root (``layout``), and reading a pipeline's committed
manifest and program from its backend (``reader``), the records of its pull-request
environments (``environments``; the backends themselves are the
top-level ``state_backends`` package).

May import: ``desired`` (a committed program is checked as a pull request's would be)
and ``support``. Never Spark, ``plan``, ``engine`` or anything above them.
"""
