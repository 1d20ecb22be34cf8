"""What a view's query may do: read the pipeline's own relations with Spark's pure built-ins.

A pipeline's SQL comes from pull requests, and Spark SQL can do far more than
compute: ``TRANSFORM ... USING`` runs a program, ``reflect``/``java_method``
call any Java method (``System.getenv`` hands out the workflow's secrets),
``read_files``, ``text.`/path``` and other table-valued functions read files,
``IDENTIFIER('...')`` builds a name from a string at run time,
``${env:NAME}`` is replaced by an environment variable before Spark even parses
the text, and a bare ``current_user`` is a call. So a view's query is checked
here, on the same sqlglot tree the engine later renders and runs, against an
allow-list:

* every function is one of Spark's built-ins that is deterministic and has no
  side effect (``ALLOWED_FUNCTIONS``: Spark 4's function registry by group,
  minus what reads the environment, files, the network, the clock or a random
  source); a qualified call (``db.fn(x)``) is a catalog function and refused;
* every relation in a ``FROM`` is a plain name (the pipeline's own relations or
  a CTE): no table-valued function, no ``format.`path``` source;
* no ``TRANSFORM`` clause;
* nothing Spark's variable substitution acts on (``check_substitution``, for
  views and for tables, whose ``DEFAULT`` literals reach Spark through
  ``F.expr``): no ``${`` and no escaped dollar (``\\u0024``, ``\\U00000024``,
  ``\\x24``, ``\\044``, ``\\$``, any case) in the text, since sqlglot decodes
  escapes and the engine sends Spark the SQL sqlglot generates
  (``'\\u0024{env:X}'`` would reach it as ``'${env:X}'``); and, belt and braces,
  no ``${`` in that generated SQL either (``'$\\{x}'``, ``$ {x}``). The session
  also turns substitution off (``engine.spark.session``); each defence holds alone;
* no bare name that Spark resolves as a function (``check_bare_names``, run by
  ``desired.model.program`` once the columns of every relation are known): ``user``,
  ``current_user``, ``session_user``, ``current_date``, ``current_timestamp``,
  ``current_time``, ``localtime`` and ``current_path`` are calls in Spark 4
  when no column of that name is in scope, even quoted (`` `user` ``), and read
  the session or the clock (``current_database``, ``current_schema`` and
  ``current_catalog`` are treated alike, in case a release does). Decided: such
  a name is allowed only where a relation in scope declares that column (or a
  derived table or CTE selects it by name); otherwise it is refused, and a
  qualified ``r.user`` is always allowed (Spark never reads a qualified name as
  a function). Refusing every bare use would break tables that do have a
  ``user`` column; allowing them all would let ``current_user`` through as a
  "column".

What is checked is the tree that ``engine.runtime`` renders back to Spark SQL,
and a typed sqlglot function is checked by the name it renders as, so what
passes here is exactly what runs.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from functools import lru_cache
from typing import cast

from sqlglot import exp
from sqlglot.dialects.dialect import Dialect
from sqlglot.generator import Generator
from sqlglot.optimizer.scope import Scope, traverse_scope

from reconciler.support.errors import ReconcileError

_GROUPS = {
    # Spark 4 function registry (`FunctionRegistry.expressions`), by ExpressionInfo group.
    "aggregate": """any any_value approx_count_distinct approx_percentile approx_top_k
        approx_top_k_accumulate approx_top_k_combine array_agg avg bit_and bit_or bit_xor
        bitmap_and_agg bitmap_construct_agg bitmap_or_agg bool_and bool_or collect_list
        collect_set corr count count_if count_min_sketch covar_pop covar_samp every first
        first_value grouping grouping_id histogram_numeric hll_sketch_agg hll_union_agg
        kurtosis last last_value listagg max max_by mean median min min_by mode percentile
        percentile_approx percentile_cont percentile_disc regr_avgx regr_avgy regr_count
        regr_intercept regr_r2 regr_slope regr_sxx regr_sxy regr_syy skewness some std stddev
        stddev_pop stddev_samp string_agg sum try_avg try_sum var_pop var_samp variance""",
    "array": """array array_append array_compact array_contains array_distinct array_except
        array_insert array_intersect array_join array_max array_min array_position
        array_prepend array_remove array_repeat array_size array_union arrays_overlap
        arrays_zip flatten get sequence slice sort_array""",
    "bitwise": "bit_count bit_get getbit shiftleft shiftright shiftrightunsigned",
    "collection": "cardinality concat element_at reverse size try_element_at",
    "conditional": "coalesce if ifnull nanvl nullif nullifzero nvl nvl2 zeroifnull",
    "conversion": """bigint binary boolean cast date decimal double float int smallint string
        time timestamp tinyint try_cast""",
    "csv": "from_csv schema_of_csv to_csv",
    "datetime": """add_months convert_timezone date_add date_diff date_format
        date_from_unix_date date_part date_sub date_trunc dateadd datediff datepart day dayname
        dayofmonth dayofweek dayofyear extract from_unixtime from_utc_timestamp hour last_day
        make_date make_dt_interval make_interval make_time make_timestamp make_timestamp_ltz
        make_timestamp_ntz make_ym_interval minute month monthname months_between next_day
        quarter second session_window time_bucket time_diff time_from_micros time_from_millis
        time_from_seconds time_to_micros time_to_millis time_to_seconds time_trunc
        timestamp_micros timestamp_millis timestamp_seconds to_date to_time
        to_timestamp to_timestamp_ltz to_timestamp_ntz to_unix_timestamp to_utc_timestamp trunc
        try_make_interval try_make_timestamp try_make_timestamp_ltz try_make_timestamp_ntz
        try_to_date try_to_time try_to_timestamp unix_date unix_micros unix_millis
        unix_seconds unix_timestamp weekday weekofyear window window_time year""",
    "generator": "explode explode_outer inline inline_outer posexplode posexplode_outer stack",
    "hash": "crc32 hash md5 sha sha1 sha2 xxhash64",
    "json": """from_json get_json_object json_array_length json_object_keys json_tuple
        schema_of_json to_json""",
    "lambda": """aggregate array_sort exists filter forall map_filter map_zip_with reduce
        transform transform_keys transform_values zip_with""",
    "map": """map map_concat map_contains_key map_entries map_from_arrays map_from_entries
        map_keys map_values str_to_map""",
    "math": """abs acos acosh asin asinh atan atan2 atanh bin bround cbrt ceil ceiling conv cos
        cosh cot csc degrees div e exp expm1 factorial floor greatest hex hypot least ln log
        log10 log1p log2 mod negative pi pmod positive pow power radians rint round sec sign
        signum sin sinh sqrt tan tanh try_add try_divide try_mod try_multiply try_subtract
        unhex width_bucket""",
    "predicate": """between equal_null ilike in isnan isnotnull isnull like not regexp
        regexp_like rlike""",
    "string": """ascii base64 bit_length btrim char char_length character_length chr collate
        collation concat_ws contains decode elt encode endswith find_in_set format_number
        format_string initcap instr is_valid_utf8 lcase
        left len length levenshtein locate lower lpad ltrim luhn_check make_valid_utf8 mask
        octet_length overlay position printf quote regexp_count regexp_extract
        regexp_extract_all regexp_instr regexp_replace regexp_substr repeat replace right rpad
        rtrim sentences soundex space split split_part startswith substr substring
        substring_index to_binary to_char to_number to_varchar translate trim
        try_to_binary try_to_number try_validate_utf8 ucase unbase64 upper validate_utf8""",
    "struct": "named_struct struct",
    "url": "parse_url try_parse_url try_url_decode url_decode url_encode",
    "variant": """is_valid_variant is_variant_null parse_json schema_of_variant
        schema_of_variant_agg to_variant_object try_parse_json try_variant_get variant_get""",
    "window": """cume_dist dense_rank lag lead nth_value ntile percent_rank rank row_number""",
}

ALLOWED_FUNCTIONS: frozenset[str] = frozenset(
    name for names in _GROUPS.values() for name in names.split())
"""Spark built-ins a view may call. Left out on purpose, by what they would reach:
the JVM (``reflect``, ``java_method``, ``try_reflect``), the environment and the
session (``current_user``, ``version``, ``current_database``, ``input_file_name``),
files and the network (``from_avro``/``from_protobuf`` descriptors and registries,
the ``xpath``/``from_xml`` family with its external entities), the clock and
random sources (``current_date``, ``now``, ``rand``, ``uuid``, ``shuffle``,
``randstr``, ``monotonically_increasing_id``, ``spark_partition_id``), and calls
made for their side effects (``raise_error``, ``assert_true``). A view must give
the same rows for the same inputs, or maintaining it incrementally is wrong."""

LITERAL_FUNCTIONS = frozenset({
    "user", "current_user", "session_user", "current_date", "current_timestamp",
    "current_time", "localtime", "current_path", "current_database", "current_schema",
    "current_catalog"})
"""Names Spark calls as functions when written without parentheses and no column of that
name is in scope (its `LiteralFunctionResolution` and ANSI keywords; quoting the name,
`` `user` ``, does not stop it): Spark 4 does so for the first eight, the last three are
refused too in case a later release does. `check_bare_names` refuses them where no
relation in scope declares the column."""

_SYNTAX = frozenset({"case"})
"""Typed sqlglot nodes that render as SQL syntax rather than a call."""

_LEADING_WORD = re.compile(r"\s*([A-Za-z_][A-Za-z0-9_]*)")

_DOLLAR = re.compile(r"\$\{|\\(?:\\|\$|u0024|u00000024|x24|044)", re.IGNORECASE)
"""`${`, and the escapes sqlglot decodes (or might) to `$`: `\\u0024`, `\\U00000024`,
`\\x24`, `\\044`, `\\$`. An escaped backslash (`\\\\`) is matched too, and skipped, so
that a regex's literal dollar (`'\\\\$'`) is read as the escaped backslash it starts with."""

_WHY = "Spark substitutes '${...}' variables, the environment included, before parsing"

_Refuse = Callable[[exp.Expr | None, str], ReconcileError]


def check_view_query(query: exp.Query, statement_text: str, view: str, file: str,
                     line: int, lines: Mapping[int, int] | None = None) -> None:
    """Refuse anything in `query` outside the allow-list, naming the view, file and line
    (each node's line: `lines` by `id(node)` when its positions were taken,
    `canonical.drop_positions`, else its own)."""

    def refuse(node: exp.Expr | None, what: str) -> ReconcileError:
        at = (_line(node, lines) if node is not None else None) or line
        return ReconcileError(f"view '{view}': {what}", file=file, line=at)

    check_substitution(statement_text, query, f"view '{view}'", file, line)
    for node in query.walk():
        if isinstance(node, exp.QueryTransform):
            raise refuse(node, "TRANSFORM ... USING runs a program and is not allowed")
        if isinstance(node, exp.Table):
            _check_table(node, refuse)
        elif isinstance(node, exp.Func) and not isinstance(node, exp.Binary):
            _check_function(node, refuse)  # AND, OR and other operators are Funcs too


def check_substitution(statement_text: str, sent: exp.Expr, subject: str, file: str,
                       line: int) -> None:
    """Refuse a statement from which Spark could be sent `${`, which it substitutes.

    `statement_text` is the statement as written (it starts on `line`), `sent` the tree
    whose generated SQL reaches Spark (a view's query; a table whose DEFAULTs go through
    `F.expr`). Written `${` and escaped dollars are named where they are; then, as the
    generator decodes escapes (`'\\$\\{env:X}'` becomes `'${env:X}'`) and joins tokens
    (`$ {x}` becomes `${x}`), the generated SQL itself is checked. Generating costs about
    20 times the parse, and it can only hold a `$` the text spells with `$` or a
    backslash, so it is generated only for such statements.
    """
    written = next((match for match in _DOLLAR.finditer(statement_text)
                    if match[0] != "\\\\"), None)
    if written is not None:
        what = ("'${...}'" if written[0] == "${" else
                f"'{written[0]}' (an escaped '$', which can become '$' in the SQL sent to Spark)")
        raise ReconcileError(f"{subject}: {what} is not allowed in pipeline SQL ({_WHY})",
                             file=file, line=line + statement_text.count("\n", 0, written.start()))
    if ("$" in statement_text or "\\" in statement_text) \
            and "${" in sent.sql(dialect="spark"):
        raise ReconcileError(f"{subject}: the SQL sent to Spark would contain '${{' "
                             f"({_WHY})", file=file, line=line)


def check_bare_names(query: exp.Query, schemas: Mapping[str, Sequence[str] | None], view: str,
                     file: str, line: int, lines: Mapping[int, int] | None = None) -> None:
    """Refuse an unqualified name Spark would read as a call of `LITERAL_FUNCTIONS`.

    `schemas` gives the columns of each relation the view reads (None: unknown). A name
    is let through where, in its scope (or the enclosing one, for a subquery's correlated
    reference), a relation read by name declares a column of that name, or a derived table
    or CTE selects one by name (`SELECT *` from it does not count: conservative);
    anywhere else Spark would call the function.
    """
    if not any(not column.table and column.name.lower() in LITERAL_FUNCTIONS
               for column in query.find_all(exp.Column)):
        return  # the common case, without building the scopes
    for scope in traverse_scope(query):
        for node in scope.walk():
            if (isinstance(node, exp.Column) and not node.table
                    and node.name.lower() in LITERAL_FUNCTIONS
                    and not _declared(scope, node.name.lower(), schemas)):
                name = node.name.lower()
                raise ReconcileError(
                    f"view '{view}': '{node.name}' names no column in scope, so Spark would "
                    f"call {name}() instead: qualify the column with its relation "
                    f"(r.{name}) or rename it", file=file,
                    line=_line(node.this, lines) or line)


def _line(node: exp.Expr, lines: Mapping[int, int] | None) -> int | None:
    """A node's line: kept aside (`lines`, by id) or still on the node."""
    return lines.get(id(node)) if lines is not None else node.meta.get("line")


def _declared(scope: Scope | None, name: str,
              schemas: Mapping[str, Sequence[str] | None]) -> bool:
    """Whether a relation `scope` selects from is known to have column `name`; for a
    subquery, also one of the enclosing query's (a correlated reference)."""
    while scope is not None:
        for _, source in scope.selected_sources.values():
            if isinstance(source, Scope):
                # A selected scope's root is a query or a table function: selectable.
                names: Sequence[str] = cast(exp.Selectable, source.expression).named_selects
            else:
                names = schemas.get(source.name.lower()) or ()
            if name in (selected.lower() for selected in names):
                return True
        scope = scope.parent if scope.is_subquery or scope.is_udtf else None
    return False


def _check_table(table: exp.Table, refuse: _Refuse) -> None:
    source = table.this
    if isinstance(source, exp.Func):
        name = function_name(source) or source.key
        what = ("IDENTIFIER(...) builds a name at run time and is not allowed"
                if name == "identifier" else
                f"table-valued function {name}(...) is not allowed: a view reads the "
                "pipeline's tables and views only")
        raise refuse(source, what)
    if table.args.get("db") or table.args.get("catalog"):
        raise refuse(table, f"'{table.sql(dialect='spark')}': qualified names are not "
                            "supported (a view reads the pipeline's own relations by name)")
    if not isinstance(source, exp.Identifier):
        raise refuse(table, f"'{table.sql(dialect='spark')}' is not a relation name")


def _check_function(node: exp.Func, refuse: _Refuse) -> None:
    name = function_name(node)
    if isinstance(node.parent, exp.Dot) and node.parent.expression is node:
        raise refuse(node, f"qualified function {node.parent.sql(dialect='spark')} is not "
                           "allowed: only Spark's built-in functions")
    if name is None or name in ALLOWED_FUNCTIONS or name in _SYNTAX:
        return
    if name == "identifier":
        raise refuse(node, "IDENTIFIER(...) builds a name at run time and is not allowed")
    raise refuse(node, f"function {name}() is not allowed: pipeline SQL may call Spark's "
                       "deterministic built-in functions without side effects only")


def function_name(node: exp.Func) -> str | None:
    """The name Spark will call: an anonymous call's own, a typed one's as rendered.

    None for syntax that renders without a leading word (only punctuation). A typed
    function the Spark generator has no rule of its own for renders as `NAME(args)`
    (`Generator.function_fallback_sql`), so its name is read from what that fallback
    writes before the parenthesis, without rendering (and copying) the call and its
    arguments: the same word, at a fraction of the cost (plan speed: every function of
    every view is checked). Any other function is rendered as before.
    """
    if isinstance(node, exp.Anonymous):
        return str(node.name).lower()
    generator = _spark_generator()
    if (type(node) not in generator._dispatch and not node.comments
            and not generator.ENSURE_BOOLS
            and type(node) not in generator.EXPRESSIONS_WITHOUT_NESTED_CTES):
        written = generator.normalize_func(generator.function_name(node)) + "("
    else:
        written = node.sql(dialect=generator.dialect)  # the same Spark dialect, not a new one
    match = _LEADING_WORD.match(written)
    return match.group(1).lower() if match else None


@lru_cache(maxsize=1)
def _spark_generator() -> Generator:
    """A Spark generator, configured as `Expression.sql(dialect="spark")` makes its own;
    only its dispatch table and name rules are read (`function_name`)."""
    return Dialect.get_or_raise("spark").generator()
