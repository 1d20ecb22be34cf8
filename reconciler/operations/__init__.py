"""What a command does to one pipeline, under its lock, on the engine.

Owns apply and approve, which decide, confirm and park a change (``apply``), the three
ways an apply writes, a first deployment, a bootstrap and a full refresh (``deploy``), a
step (``step``), the commit and what follows it, garbage collection included
(``commit``), what an operation did (``outcome``), the Spark a command runs on, started
when first needed (``engine``), ``publish:`` after each commit (``publication``),
``plan --preview`` (``preview``), ``execute`` and ``query`` (``statements``), a
pipeline's data and state removed (``destroy``), the last failed step kept for
``status`` (``step_failures``), tables changed outside the reconciler (``drift``) and an
earlier serial's program to apply again (``rollback``), and pull-request environments,
built, destroyed and found for promotion (``environments``).

May import: ``engine``, ``plan``, ``state``, ``desired`` and ``support``. Never ``cli``,
``runner`` or ``github``, which call it.
"""
