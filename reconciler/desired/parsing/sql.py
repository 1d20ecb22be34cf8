"""Split rendered SQL into statements and parse them with sqlglot (Spark dialect).

Only two statement kinds make a pipeline: `CREATE TABLE` with a column list and
`CREATE [MATERIALIZED] VIEW ... AS <query>`. Anything else is refused here, with
the file and the line of the statement, before any later layer sees it.
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass, field, replace

import sqlglot
from sqlglot import exp
from sqlglot.dialects.dialect import Dialect
from sqlglot.errors import ParseError, TokenError
from sqlglot.optimizer.scope import Scope, traverse_scope
from sqlglot.tokens import Token, TokenType

from reconciler.desired.parsing.canonical import canonical_text, drop_positions, statement_digest
from reconciler.desired.parsing.expectation_clauses import Expectation, split_expectations
from reconciler.desired.parsing.nesting import check_nesting, refuse_deep_recursion
from reconciler.desired.parsing.pipeline_sql import SqlSource
from reconciler.desired.parsing.safety import check_substitution, check_view_query
from reconciler.desired.parsing.syntax_errors import (
    command_error,
    misspelling,
    parse_error,
    token_error,
)
from reconciler.desired.settings.project import NAME_PATTERN
from reconciler.support.errors import ReconcileError, did_you_mean, error_at

DIALECT = "spark"
SPARK: Dialect = Dialect.get_or_raise(DIALECT)
"""One Spark dialect for every parse and every generated text of this package: given the name,
sqlglot builds a new `Dialect` on each call (`parse_one`, `Expression.sql`), thousands of
times in a 1,000-view plan; given this instance, it uses it as it is, with the same result."""
TABLE_PROPERTIES = {"materialized"}
ONLY_CREATE = "only CREATE TABLE and CREATE [MATERIALIZED] VIEW are allowed"
_NAME = re.compile(NAME_PATTERN)
NAME_RULE = "letters, digits and underscores, not starting with a digit"

# sqlglot logs a warning whenever it falls back to an opaque Command; we refuse such
# statements with our own one-line error, so the warning would only be a stray second line.
logging.getLogger("sqlglot").addFilter(
    lambda record: "Falling back to parsing as a 'Command'" not in record.getMessage())


@dataclass(frozen=True)
class Location:
    """Where a statement starts, for error messages and plan renderings."""

    file: str
    line: int

    def error(self, message: str) -> ReconcileError:
        return ReconcileError(message, file=self.file, line=self.line)


@dataclass(frozen=True)
class ColumnDef:
    name: str
    type: str
    nullable: bool
    default: str | None = None  # a literal's Spark SQL text (`DEFAULT 0`)


@dataclass(frozen=True)
class TableStatement:
    name: str
    columns: tuple[ColumnDef, ...]
    primary_key: tuple[str, ...]
    materialized: bool
    location: Location
    sql: str
    expectations: tuple[Expectation, ...] = ()  # `desired.parsing.expectation_clauses`


@dataclass(frozen=True)
class ViewStatement:
    name: str
    query: str  # canonical text, see canonical_text()
    materialized: bool
    reads: tuple[str, ...]
    location: Location
    sql: str
    full_refresh: bool = False  # TBLPROPERTIES ('refresh' = 'full')
    expectations: tuple[Expectation, ...] = ()
    key: tuple[str, ...] = ()  # TBLPROPERTIES ('key' = 'a, b'): what a preview counts by
    tree: exp.Query | None = field(default=None, compare=False, repr=False)  # the query
    digest: str = field(default="", compare=False, repr=False)  # statement_digest()
    lines: dict[int, int] = field(default_factory=dict, compare=False, repr=False)  # by id
    # The tree's scopes (`traverse_scope`), built once here to find what it reads and kept
    # for the resolution check (`desired.model.resolution`), which walks the same tree.
    scopes: tuple[Scope, ...] = field(default=(), compare=False, repr=False)
    # Where each name of the tree was written: (start, end) offsets in the file's rendered
    # text (`source`) by `id(node)` of its identifier, for errors at the name's own token.
    spans: dict[int, tuple[int, int]] = field(default_factory=dict, compare=False, repr=False)
    source: str = field(default="", compare=False, repr=False)

    def error_at(self, message: str, node: exp.Expr | None) -> ReconcileError:
        """An error at `node`'s first name written (a column's or table's, a projection's
        alias) when its place is known, else at the statement's line."""
        if isinstance(node, exp.Alias):
            node = node.args.get("alias") or node
        span = next((found for part in node.walk(bfs=False)
                     if (found := self.spans.get(id(part)))), None) if node else None
        if span is None:
            return self.location.error(message)
        return error_at(message, self.location.file, self.source, *span)


Statement = TableStatement | ViewStatement


def parse_file(source: SqlSource) -> list[Statement]:
    """Parse and check every statement of one rendered SQL file.

    Every statement is parsed and put through the safety checks (`desired.parsing.safety`) from
    its text, always: no memo stands in for them (a memo comes from the state backend,
    which is not trusted as code, `desired.analysis.memo`).
    """
    statements: list[Statement] = []
    for tokens, location in _split(source):
        digest = statement_digest(source.text, tokens)  # of the text, expectations included
        tokens, expectations = split_expectations(tokens, source.text, location.file)
        statement = _parse_statement(tokens, source, location, digest)
        statements.append(replace(statement, expectations=expectations) if expectations
                          else statement)
    return statements






def parse_query(text: str) -> exp.Expr:
    """`sqlglot.parse_one(text, dialect="spark")`, on the shared dialect (`SPARK`)."""
    return sqlglot.parse_one(text, dialect=SPARK)


def canonical_type(data_type: exp.DataType) -> str:
    """Spark spelling of a type, without spaces after commas: `DECIMAL(5,2)`."""
    return data_type.sql(dialect=SPARK).replace(", ", ",")


def _split(source: SqlSource) -> list[tuple[list[Token], Location]]:
    """Each statement's tokens with the line it starts on (the file is tokenized once)."""
    tokenizer = SPARK.tokenizer()
    try:
        tokens = tokenizer.tokenize(source.text)
    except TokenError as error:
        raise token_error(error, source.text, source.display_path,
                          tokenizer.tokens) from None
    statements: list[tuple[list[Token], Location]] = []
    current: list[Token] = []
    for token in [*tokens, None]:
        if token is None or token.token_type == TokenType.SEMICOLON:
            if current:
                check_nesting(current, source.display_path)  # before sqlglot recurses
                statements.append((current, Location(source.display_path, current[0].line)))
            current = []
        else:
            current.append(token)
    return statements


def _parse_statement(tokens: list[Token], source: SqlSource, location: Location,
                     digest: str = "") -> Statement:
    """One statement parsed and checked; a shape too deep for sqlglot's recursion (one
    `check_nesting` does not count) refused in one line, as a syntax error is."""
    with refuse_deep_recursion(location.file, location.line):
        return _parse_checked(tokens, source, location, digest)


def _parse_checked(tokens: list[Token], source: SqlSource, location: Location,
                   digest: str) -> Statement:
    text = source.text[tokens[0].start: tokens[-1].end + 1]
    try:
        [expression] = SPARK.parser().parse(tokens, source.text)
    except ParseError as error:
        raise parse_error(error, tokens, source.text, location.file) from None
    if isinstance(expression, exp.Command):
        raise command_error(tokens, source.text, location.file, ONLY_CREATE)
    if not isinstance(expression, exp.Create):
        word = match[0] if (match := re.search(r"\w+", text)) else text
        if (guessed := misspelling(tokens, source.text, location.file, None)) is not None:
            raise guessed  # `crete view ...`
        if expression is None or isinstance(expression, exp.Condition):
            raise location.error(f"SQL syntax error: expected CREATE TABLE or CREATE VIEW, "
                                 f"got '{word}'")
        raise location.error(f"unsupported statement {word.upper()}: {ONLY_CREATE}")
    kind = str(expression.args.get("kind") or "").upper()
    for flag, words in (("replace", "OR REPLACE"), ("exists", "IF NOT EXISTS")):
        if expression.args.get(flag):
            raise location.error(f"CREATE {words} is not supported: the reconciler decides "
                                 "what to replace")
    if kind == "TABLE":
        return _table(expression, location, text, source.text)
    if kind == "VIEW":
        return _view(expression, tokens, location, text, digest, source.text)
    raise location.error(f"unsupported statement CREATE {kind}: {ONLY_CREATE}")


def _relation_name(expression: exp.Create, location: Location) -> str:
    target = expression.this
    table = target.this if isinstance(target, exp.Schema) else target
    if not isinstance(table, exp.Table) or not table.name:
        raise location.error("missing relation name")
    if table.args.get("db") or table.args.get("catalog"):
        raise location.error(f"qualified name '{table.sql(dialect=DIALECT)}' is not supported: "
                             "relations live in the pipeline's own namespace")
    name = table.name.lower()
    if not _NAME.fullmatch(name):  # it names a folder under the storage root
        raise location.error(f"relation name {name!r} is not allowed: use {NAME_RULE}")
    return name


def _table(expression: exp.Create, location: Location, text: str, source: str
           ) -> TableStatement:
    name = _relation_name(expression, location)
    schema = expression.this
    if expression.expression is not None:
        raise location.error(f"table '{name}': CREATE TABLE ... AS SELECT is not supported "
                             "(declare the columns, or use CREATE VIEW)")
    if not isinstance(schema, exp.Schema):
        raise location.error(f"table '{name}' needs a column list")
    check_substitution(text, expression, f"table '{name}'", location.file, location.line)
    columns: list[ColumnDef] = []
    key_parts: list[tuple[str, exp.Expr]] = []
    for item in schema.expressions:
        if isinstance(item, exp.PrimaryKey):
            key_parts = [(part.name.lower(), part) for part in item.expressions]
        elif isinstance(item, exp.ColumnDef):
            columns.append(_column(item, name, location))
        elif isinstance(item, exp.Identifier):  # a bare name: sqlglot does not see a column
            raise _at(item, f"table '{name}': column '{item.name.lower()}' has no type",
                      location, source)
        else:
            raise location.error(f"table '{name}': unsupported element '{item.sql(DIALECT)}'")
    if not columns:
        raise location.error(f"table '{name}' has no columns")
    names = [column.name for column in columns]
    duplicates = sorted({column for column in names if names.count(column) > 1})
    if duplicates:
        raise location.error(f"table '{name}': duplicate column '{duplicates[0]}'")
    primary_key = tuple(key for key, _ in key_parts)
    for key, part in key_parts:
        if key not in names:
            raise _at(part, f"table '{name}': primary key column '{key}' is not a column"
                      + did_you_mean(key, names), location, source)
    if primary_key:
        key_set = set(primary_key)
        columns = [ColumnDef(c.name, c.type, c.nullable and c.name not in key_set, c.default)
                   for c in columns]
    return TableStatement(name=name, columns=tuple(columns), primary_key=primary_key,
                          materialized=_materialized_property(expression, name, location),
                          location=location, sql=text)


def _at(node: exp.Expr, message: str, location: Location, source: str
        ) -> ReconcileError:
    """An error at the first name written in `node`, where the parser kept its place (a
    table's tree keeps them: `drop_positions` is for views), else at the statement."""
    meta = next((part._meta for part in node.walk(bfs=False)
                 if part._meta and "start" in part._meta), None)
    if meta is None:
        return location.error(message)
    return error_at(message, location.file, source, meta["start"], meta["end"])


def _column(item: exp.ColumnDef, table: str, location: Location) -> ColumnDef:
    column = item.name.lower()
    if not _NAME.fullmatch(column):
        raise location.error(f"table '{table}': column name {column!r} is not allowed: use "
                             f"{NAME_RULE}")
    if not isinstance(item.args.get("kind"), exp.DataType):
        raise location.error(f"table '{table}': column '{column}' has no type")
    nullable = True
    default: str | None = None
    for constraint in item.args.get("constraints") or []:
        kind = constraint.args.get("kind")
        if isinstance(kind, exp.NotNullColumnConstraint):
            nullable = bool(kind.args.get("allow_null"))
        elif isinstance(kind, exp.PrimaryKeyColumnConstraint):
            nullable = False
        elif isinstance(kind, exp.DefaultColumnConstraint) and _is_literal(kind.this):
            default = kind.this.sql(DIALECT)
        elif isinstance(kind, exp.DefaultColumnConstraint):
            raise location.error(f"table '{table}': the DEFAULT of column '{column}' must be "
                                 f"a literal, not '{kind.this.sql(DIALECT)}'")
        else:
            raise location.error(f"table '{table}': unsupported constraint "
                                 f"'{constraint.sql(DIALECT)}' on column '{column}'")
    return ColumnDef(name=column, type=canonical_type(item.args["kind"]), nullable=nullable,
                     default=default)


def _is_literal(value: exp.Expr) -> bool:
    """A constant a DEFAULT may hold: a number, string, boolean or NULL, a negative number,
    or a typed literal (`DATE '2024-01-01'`). Nothing that calls a function."""
    if isinstance(value, exp.Neg):
        value = value.this
    if isinstance(value, exp.Cast):
        value = value.this
    return isinstance(value, (exp.Literal, exp.Boolean, exp.Null))


def _materialized_property(expression: exp.Create, table: str, location: Location) -> bool:
    properties = expression.args.get("properties")
    materialized = True
    for prop in properties.expressions if properties else []:
        if not isinstance(prop, exp.Property):
            raise location.error(f"table '{table}': unsupported clause '{prop.sql(DIALECT)}'")
        key = prop.name.lower()
        value = prop.args.get("value")
        # Spark takes 'true' and a bare true alike; sqlglot makes the latter a Boolean.
        text = ("" if value is None else value.name.lower() if isinstance(value, exp.Literal)
                else value.sql(DIALECT).lower())
        if key not in TABLE_PROPERTIES:
            raise location.error(f"table '{table}': unsupported property '{key}' "
                                 "(only 'materialized')")
        if text not in {"true", "false"}:
            raise location.error(f"table '{table}': 'materialized' must be 'true' or 'false', "
                                 f"got '{text}'")
        materialized = text == "true"
    return materialized


def _view(expression: exp.Create, tokens: list[Token], location: Location,
          text: str, digest: str, source: str) -> ViewStatement:
    name = _relation_name(expression, location)
    if isinstance(expression.this, exp.Schema):
        raise location.error(f"view '{name}': a column list is not supported; name the columns "
                             "with aliases in the query")
    query = expression.expression
    if not isinstance(query, exp.Query):
        raise location.error(f"view '{name}' needs AS <query>")
    properties = expression.args.get("properties")
    materialized, full_refresh = False, False
    key: tuple[str, ...] = ()
    for prop in properties.expressions if properties else []:
        if isinstance(prop, exp.MaterializedProperty):
            materialized = True
        elif isinstance(prop, exp.Property) and prop.name.lower() == "refresh":
            value = prop.args.get("value")
            mode = value.name.lower() if isinstance(value, exp.Literal) else ""
            if mode not in ("full", "incremental"):
                raise location.error(f"view '{name}': 'refresh' must be 'full' or "
                                     f"'incremental', got {mode or _text(value)!r}")
            full_refresh = mode == "full"
        elif isinstance(prop, exp.Property) and prop.name.lower() == "key":
            key = declared_key(prop.args.get("value"), location, name)
        else:
            raise location.error(f"view '{name}': unsupported clause '{prop.sql(DIALECT)}' "
                                 "(views take MATERIALIZED and TBLPROPERTIES ('refresh' = ..., "
                                 "'key' = ...))")
    spans: dict[int, tuple[int, int]] = {}
    lines = drop_positions(query, spans)
    check_view_query(query, text, name, location.file, location.line, lines)
    body = next(index for index, token in enumerate(tokens) if token.token_type == TokenType.ALIAS)
    scopes = _scopes(query, name, location)
    return ViewStatement(name=name, query=canonical_text(tokens[body + 1:]),
                         materialized=materialized, reads=_reads(scopes, name, location),
                         location=location, sql=text, full_refresh=full_refresh, key=key,
                         tree=query, digest=digest, lines=lines, scopes=scopes, spans=spans,
                         source=source)


def _text(value: exp.Expr | None) -> str:
    """A property's value as written, for an error ('' when it has none)."""
    return "" if value is None else value.sql(DIALECT)


def declared_key(value: exp.Expr | None, location: Location, view: str
                 ) -> tuple[str, ...]:
    """`TBLPROPERTIES ('key' = 'a, b')`: the output columns that identify a view's rows, for
    a data preview to count rows changed where the query has no GROUP BY to say it
    (`desired.analysis.output_key`). Not part of the view's definition: it changes no data."""
    text = value.name if isinstance(value, exp.Literal) and value.is_string else ""
    names = tuple(part.strip() for part in text.split(","))
    if not all(re.fullmatch(NAME_PATTERN, part) for part in names):
        raise location.error(f"view '{view}': 'key' names output columns, as 'id' or "
                             f"'id, day', not {text!r}")
    return names




def _scopes(query: exp.Query, view: str, location: Location) -> tuple[Scope, ...]:
    """The query's scopes, innermost first; a query sqlglot cannot scope is refused."""
    try:
        return tuple(traverse_scope(query))
    except Exception as error:  # sqlglot raises several types for queries it cannot scope
        raise location.error(f"view '{view}': cannot analyse query: {error}") from None


def _reads(scopes: tuple[Scope, ...], view: str, location: Location) -> tuple[str, ...]:
    """Relations a query reads: real tables in every scope; CTE names are not relations."""
    reads: set[str] = set()
    for scope in scopes:
        for source in scope.sources.values():
            if isinstance(source, exp.Table) and source.name:
                if source.args.get("db") or source.args.get("catalog"):
                    raise location.error(f"view '{view}' reads '{source.sql(DIALECT)}': "
                                         "qualified names are not supported")
                reads.add(source.name.lower())
    return tuple(sorted(reads))
