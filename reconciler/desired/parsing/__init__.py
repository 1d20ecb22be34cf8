"""A pipeline's SQL, from files to checked statements.

Owns the SQL files found and rendered as sandboxed templates (``pipeline_sql``), Spark
SQL split and parsed (``sql``), a statement's canonical text, digest and tree without
source positions (``canonical``), what a statement that does not parse got wrong and
where (``syntax_errors``), how deeply SQL may nest (``nesting``), what a view may do
(``safety``) and expectation clauses (``expectation_clauses``).

May import: ``desired.settings`` and ``reconciler.support``.
"""
