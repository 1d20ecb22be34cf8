"""From a desired program and a committed manifest to a plan a person can approve.

Owns the diff (``diff``: classified from deepdiff; ``diff_summary``: Feldera's shape), renamed
relations (``renames``), one action per object with its reasons (``actions``), the
resets refused because they would append again what a table keeps (``rereads``), one
pipeline's plan (``document``), the plan as one frozen object, its id, and its JSON
written out and read back (``artifact``), the data preview and view tests it carries
(``preview_report``, ``view_test_report``), the objects ``--select`` chooses and the
part-committed program an apply of them commits (``selection``), planning a whole
project against its backend (``planner``), and the renderings (``terminal``,
``markdown`` with its Jinja2 template). The plan crosses from planning to doing as a
frozen ``artifact.Plan``; it is JSON only where it is written out or read back.

May import: ``state``, ``desired`` and ``support``. Never ``engine`` or pyspark:
``reconcile plan`` starts no JVM.
"""
