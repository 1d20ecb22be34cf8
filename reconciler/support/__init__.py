"""Small helpers every layer may use, importing nothing else of the package.

Owns the error types and their public, one-line forms (``errors``), fault injection for
crash tests (``faults``), progress lines and the log level (``progress``), hiding
secrets in messages (``redaction``), running git and other child processes without a
pull request's configuration or the workflow's secrets (``git``, ``child_process``),
what the CLI's own process says of itself (``process``), where a location points
(``locations``) and the one reader of a checkout's files (``safe_files``).

May import: the standard library and the package's version only. Never any other
folder of the package.
"""
