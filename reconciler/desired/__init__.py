"""Reading a project: from files on disk to a validated, fingerprinted program.

Owns YAML with line numbers (``documents``), ``reconcile.yaml`` and
``pipeline.yaml`` (``project``, the values its settings take in ``setting_values``),
a pipeline's SQL files found and rendered as sandboxed templates (``pipeline_sql``),
Spark SQL statements (``sql``), their canonical text, digest and tree without source
positions (``canonical``), what a statement that does not parse got wrong
and where (``syntax_errors``), how deeply they may nest (``nesting``), what a
view may do (``safety``), resolving its names as Spark's analyzer will
(``resolution``, with Spark's rules for what a scope sees in ``scope_rules``),
column lineage (``lineage``) and fingerprints (``fingerprint``), which views can
be maintained and in which shape (``shapes``, with ``keyed``, ``partitioning``,
``query_graph``, ``query_parts``, ``inline``, ``grouping_sets``, ``group_windows``,
``view_parts`` (aggregating subqueries as views of their own), ``set_operations``
(distinct set operations as counts per branch), ``output_key``
and ``fallback``, the reason a view is recomputed), how each view is refreshed given
its shape and the pipeline's policy (``view_refresh``), whether a table can evolve in
place (``table_evolution``), connector options (``connector_options``), the allow-list
of what a connector may hand a client library (``client_options``), which
connector fields go together (``connector_shape``), which of them say what a connector
reads and which how (``connector_roles``: what resets one) and a Kafka connector's settings
(``kafka_settings``),
expectation clauses (``expectation_clauses``), view test files
(``view_test_files``), which output columns the preview masks, by lineage
(``masking``), the analysis kept between plans (``memo``), the program
with its fingerprints (``program``), a manifest's program checked as if a pull
request wrote it (``committed``) and choosing the pipelines a command works on
(``workspace``). Every error names the file and line, and the column of the token
at fault when there is one.

May import: ``reconciler.support.errors`` and the standard helpers only. Never Spark,
never ``plan``, ``engine``, ``operations`` or ``github``: reading a project must
be cheap and safe enough to run on any pull request.
"""
