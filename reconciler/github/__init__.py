"""The GitHub Action: ``reconcile github`` and the REST calls it makes.

Owns, split by job so each can be read alone: the event and its inputs (``event``),
the runner's log, outputs and summary (``workflow_commands``), the sticky plan comment
(``comment``, fitted to GitHub's limits by ``truncation``), the settings a pull
request cannot choose (``trusted``: backend, storage, Spark and bootstrap policy
from the default branch or the inputs), the plan run on a pull request
(``action``, the entry point), the approval guard (``guard``: permission, fork,
review, head SHA, plan id) and the apply run on a comment (``apply``) with its
``replies``, the rollback run on a comment (``rollback``), the comment either run
answers (``comment_run``: where to reply, the reactions, the outputs), the view tests of a pull
request's pipelines, run apart from the workflow (``view_test_gate``), a pull request's
environment built on each plan and removed when it closes (``environments``), and the REST
client (``client``).

May import: ``operations``, ``plan``, ``state``, ``desired`` and ``support``. Never
``engine`` directly: Spark is
reached only through ``operations``.
"""
