"""From a desired program and a committed manifest to a plan a person can approve.

Owns the diff (``diff``: Feldera's shape, classified from deepdiff), renamed
relations (``renames``), one action per object with its reasons (``actions``), the
plan document and its id (``document``), the objects ``--select`` chooses and the
part-committed program an apply of them commits (``selection``), planning a whole
project against its backend (``planner``), and the renderings (``terminal``,
``markdown`` with its Jinja2 template). The plan is plain data that crosses from planning to doing.

May import: ``state``, ``desired`` and ``support``. Never ``engine`` or pyspark:
``reconcile plan`` starts no JVM.
"""
