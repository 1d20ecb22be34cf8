"""The reason a view is recomputed each step instead of maintained (`desired.analysis.shapes`)."""


class Fallback(Exception):
    """The view is recomputed each step; the message says why (plan and `validate` show it)."""
