"""The SQL92 filter (core/filter): its operators and three-valued logic, precedence, messages' properties and tags,
and malformed or oversized expressions refused with what and where. Against a reference evaluator:
test_sql92_against_reference.py."""

from dataclasses import dataclass

import pytest

from core.filter import MAX_EXPRESSION_LENGTH, MAX_NESTING_DEPTH, FilterExpressionError, Sql92Filter
from core.store.message import Message


def matches(expression: str, properties: dict[str, str]) -> bool:
    return Sql92Filter.compile(expression).matches(properties)


def check(expression: str, cases: list[tuple[dict[str, str], bool]]) -> None:
    compiled = Sql92Filter.compile(expression)
    for properties, expected in cases:
        assert compiled.matches(properties) is expected, (expression, properties)


# -- every operator, both ways -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("expression", "properties", "expected"),
    [
        ("a = 'x'", {"a": "x"}, True),
        ("a = 'x'", {"a": "X"}, False),
        ("a = 'x'", {"a": "x "}, False),
        ("a <> 'x'", {"a": "y"}, True),
        ("a <> 'x'", {"a": "x"}, False),
        ("a = 5", {"a": "5"}, True),
        ("a = 5", {"a": "5.0"}, True),
        ("a = 5", {"a": "+5"}, True),
        ("a = 5", {"a": "6"}, False),
        ("a <> 5", {"a": "6"}, True),
        ("a <> 5", {"a": "5.00"}, False),
        ("a = '5'", {"a": "5.0"}, False),
        ("a = -5", {"a": "-5"}, True),
        ("a = - 5", {"a": "-5"}, True),
        ("a = 2.5", {"a": "2.50"}, True),
        ("a = 1e3", {"a": "1000"}, True),
        ("a = .5", {"a": "0.5"}, True),
        ("a > 5", {"a": "6"}, True),
        ("a > 5", {"a": "5"}, False),
        ("a >= 5", {"a": "5"}, True),
        ("a >= 5", {"a": "4.99"}, False),
        ("a < 5", {"a": "-10"}, True),
        ("a < 5", {"a": "5"}, False),
        ("a <= 5", {"a": "5"}, True),
        ("a <= 5", {"a": "5.01"}, False),
        ("5 < a", {"a": "6"}, True),
        ("5 < a", {"a": "4"}, False),
        ("5 >= a", {"a": "5"}, True),
        ("a > 10", {"a": "9"}, False),  # numeric, not string order ('9' > '10' as text)
        ("a > 9007199254740992", {"a": "9007199254740993"}, True),  # integers stay exact
        ("a BETWEEN 1 AND 5", {"a": "1"}, True),
        ("a BETWEEN 1 AND 5", {"a": "5"}, True),
        ("a BETWEEN 1 AND 5", {"a": "3.5"}, True),
        ("a BETWEEN 1 AND 5", {"a": "0"}, False),
        ("a BETWEEN 1 AND 5", {"a": "6"}, False),
        ("a BETWEEN 3 AND 3", {"a": "3"}, True),
        ("a NOT BETWEEN 1 AND 5", {"a": "6"}, True),
        ("a NOT BETWEEN 1 AND 5", {"a": "3"}, False),
        ("a BETWEEN -5 AND -1", {"a": "-3"}, True),
        ("a IN ('x', 'y')", {"a": "y"}, True),
        ("a IN ('x', 'y')", {"a": "z"}, False),
        ("a NOT IN ('x', 'y')", {"a": "z"}, True),
        ("a NOT IN ('x', 'y')", {"a": "x"}, False),
        ("a IN (1, 2)", {"a": "2.0"}, True),
        ("a IN (1, 2)", {"a": "3"}, False),
        ("a IN ('x', 2)", {"a": "x"}, True),
        ("a IN ('x', 2)", {"a": "2"}, True),
        ("a IN (TRUE)", {"a": "True"}, True),
        ("a IS NULL", {}, True),
        ("a IS NULL", {"a": ""}, False),
        ("a IS NOT NULL", {"a": ""}, True),
        ("a IS NOT NULL", {}, False),
        ("a CONTAINS 'ell'", {"a": "hello"}, True),
        ("a CONTAINS 'ELL'", {"a": "hello"}, False),
        ("a NOT CONTAINS 'xyz'", {"a": "hello"}, True),
        ("a NOT CONTAINS 'ell'", {"a": "hello"}, False),
        ("a STARTSWITH 'he'", {"a": "hello"}, True),
        ("a STARTSWITH 'lo'", {"a": "hello"}, False),
        ("a NOT STARTSWITH 'lo'", {"a": "hello"}, True),
        ("a NOT STARTSWITH 'he'", {"a": "hello"}, False),
        ("a ENDSWITH 'lo'", {"a": "hello"}, True),
        ("a ENDSWITH 'he'", {"a": "hello"}, False),
        ("a NOT ENDSWITH 'he'", {"a": "hello"}, True),
        ("a NOT ENDSWITH 'lo'", {"a": "hello"}, False),
        ("a = TRUE", {"a": "true"}, True),
        ("a = TRUE", {"a": "TRUE"}, True),
        ("a = TRUE", {"a": "yes"}, False),
        ("a = FALSE", {"a": "False"}, True),
        ("a = FALSE", {"a": "true"}, False),
        ("a <> TRUE", {"a": "false"}, True),
        ("TRUE = a", {"a": "true"}, True),
        ("a = b", {"a": "x", "b": "x"}, True),
        ("a = b", {"a": "5", "b": "5.0"}, False),  # two properties compare as text
        ("a < b", {"a": "5", "b": "10"}, True),  # ordering is numeric on both sides
        ("a BETWEEN b AND c", {"a": "5", "b": "1", "c": "9"}, True),
        ("a = 'it''s'", {"a": "it's"}, True),
        ("a = ''", {"a": ""}, True),
        ("msg.type = 'x'", {"msg.type": "x"}, True),
        ("_a1 = 'x'", {"_a1": "x"}, True),
        ("TRUE", {}, True),
        ("FALSE", {}, False),
        ("NOT FALSE", {}, True),
    ],
)
def test_operators(expression: str, properties: dict[str, str], expected: bool) -> None:
    assert matches(expression, properties) is expected


def test_keywords_are_case_insensitive_and_property_names_are_not() -> None:
    check(
        "a between 1 and 5 And b iN ('x') oR c Is NoT nUlL aNd NOT d contains 'q'",
        [({"a": "2", "b": "x"}, True), ({"c": "1", "d": "z"}, True), ({"c": "1", "d": "q"}, False)],
    )
    assert not matches("A = 'x'", {"a": "x"})


def test_whitespace_is_optional_between_tokens_and_may_be_any_ascii_space() -> None:
    assert matches("a>=5 AND(b='x'OR c<>1)", {"a": "5", "b": "x"})
    assert matches("a\t=\n'x'\r\fAND b = 1", {"a": "x", "b": "1"})


# -- NULL, missing properties, failed conversions --------------------------------------------------------------


@pytest.mark.parametrize(
    "expression",
    [
        "a = 'x'",
        "a <> 'x'",
        "a = 5",
        "a <> 5",
        "a > 5",
        "a <= 5",
        "a = TRUE",
        "a <> FALSE",
        "a BETWEEN 1 AND 5",
        "a NOT BETWEEN 1 AND 5",
        "a IN ('x')",
        "a NOT IN ('x')",
        "a CONTAINS 'x'",
        "a NOT CONTAINS 'x'",
        "a STARTSWITH 'x'",
        "a NOT STARTSWITH 'x'",
        "a ENDSWITH 'x'",
        "a NOT ENDSWITH 'x'",
        "a = b",
        "b = a",
    ],
)
def test_a_missing_property_is_unknown_with_or_without_not(expression: str) -> None:
    properties = {"b": "x"}
    assert not matches(expression, properties)
    assert not matches(f"NOT ({expression})", properties)
    assert not matches(f"NOT NOT ({expression})", properties)


@pytest.mark.parametrize("text", ["abc", "", " 5", "5 ", "1_000", "0x10", "NaN", "Infinity", "inf", "5L", "1e", "--5"])
@pytest.mark.parametrize(
    "expression", ["a = 5", "a <> 5", "a > 5", "a < 5", "a BETWEEN 1 AND 9", "a NOT BETWEEN 1 AND 9", "a IN (5)"]
)
def test_a_property_that_is_not_a_number_makes_numeric_comparisons_unknown(expression: str, text: str) -> None:
    assert not matches(expression, {"a": text})
    assert not matches(f"NOT ({expression})", {"a": text})


def test_non_ascii_digits_are_not_numbers() -> None:
    assert not matches("a = 5", {"a": "\u0665"})  # ARABIC-INDIC DIGIT FIVE, which int() would take
    assert not matches("NOT (a = 5)", {"a": "\u0665"})


def test_numbers_in_every_accepted_spelling() -> None:
    for text in ["7", "+7", "7.", "7.0", "07", "0.7e1", "70E-1", ".7e+1"]:
        assert matches("a = 7", {"a": text}), text
    assert matches("a > 1e300", {"a": "1" + "0" * 5000})  # longer than int() converts: read as a float


def test_three_valued_logic() -> None:
    unknown = "a = 'x'"  # a is missing below
    props = {"t": "1"}
    true, false = "t = 1", "t = 2"
    assert matches(f"{unknown} OR {true}", props)
    assert not matches(f"{unknown} OR {false}", props)
    assert not matches(f"NOT ({unknown} OR {false})", props)  # UNKNOWN, not FALSE
    assert not matches(f"{unknown} AND {true}", props)
    assert not matches(f"NOT ({unknown} AND {true})", props)  # UNKNOWN
    assert matches(f"NOT ({unknown} AND {false})", props)  # FALSE AND UNKNOWN is FALSE


def test_in_with_an_unknown_option_is_unknown_unless_another_matches() -> None:
    check(
        "a NOT IN ('x', 5)",
        [({"a": "x"}, False), ({"a": "5"}, False), ({"a": "y"}, False), ({"a": "6"}, True)],
    )
    check("a IN ('x', 5)", [({"a": "x"}, True), ({"a": "y"}, False), ({"a": "5.0"}, True)])


def test_empty_search_text_never_matches() -> None:
    for op in ["CONTAINS", "STARTSWITH", "ENDSWITH"]:
        assert not matches(f"a {op} ''", {"a": "abc"})
        assert not matches(f"a NOT {op} ''", {"a": "abc"})
        assert not matches(f"NOT (a {op} '')", {"a": "abc"})


def test_between_with_an_unknown_bound_is_decided_by_the_other_bound() -> None:
    # a >= b is UNKNOWN (b missing); a <= c is FALSE, so the BETWEEN is FALSE and the NOT BETWEEN TRUE.
    assert matches("a NOT BETWEEN b AND c", {"a": "10", "c": "5"})
    assert not matches("a NOT BETWEEN b AND c", {"a": "1", "c": "5"})


def test_comparisons_between_literals_are_evaluated() -> None:
    assert matches("1 = 1.0", {})
    assert matches("'5' = 5", {})
    assert not matches("'a' = 'A'", {})
    assert matches("2 > 1", {})
    assert matches("3 BETWEEN 1 AND 5", {})
    assert matches("NULL IS NULL", {})
    assert matches("'x' IS NOT NULL", {})
    assert matches("'abc' CONTAINS 'b'", {})
    assert not matches("5 CONTAINS '5'", {})  # not a string: UNKNOWN
    assert matches("'b' IN ('a', 'b')", {})
    assert not matches("TRUE = 1", {})
    assert matches("TRUE = 'true'", {})


# -- precedence ------------------------------------------------------------------------------------------------


def test_and_binds_tighter_than_or() -> None:
    expression = "a = 1 OR b = 1 AND c = 1"  # a = 1 OR (b = 1 AND c = 1)
    check(expression, [({"a": "1"}, True), ({"b": "1"}, False), ({"b": "1", "c": "1"}, True)])
    check("(a = 1 OR b = 1) AND c = 1", [({"a": "1"}, False), ({"a": "1", "c": "1"}, True)])


def test_not_binds_tighter_than_and_and_applies_to_a_whole_comparison() -> None:
    check("NOT a = 1 AND b = 1", [({"a": "2", "b": "1"}, True), ({"a": "1", "b": "1"}, False)])
    check("NOT (a = 1 AND b = 1)", [({"a": "1", "b": "2"}, True), ({"a": "1", "b": "1"}, False)])
    check("NOT a = 1 OR b = 1", [({"a": "1", "b": "1"}, True), ({"a": "1", "b": "2"}, False)])
    check("NOT NOT a = 1", [({"a": "1"}, True), ({"a": "2"}, False)])


def test_between_takes_its_and_before_the_logical_and() -> None:
    check("a BETWEEN 1 AND 5 AND b = 1", [({"a": "3", "b": "1"}, True), ({"a": "3", "b": "2"}, False)])
    check("b = 1 OR a BETWEEN 1 AND 5 AND c = 1", [({"a": "3"}, False), ({"a": "3", "c": "1"}, True)])


def test_long_chains_do_not_recurse() -> None:
    expression = " OR ".join(f"a={i}" for i in range(400))
    assert len(expression) < MAX_EXPRESSION_LENGTH
    compiled = Sql92Filter.compile(expression)
    assert compiled.matches({"a": "399"})
    assert not compiled.matches({"a": "400"})


# -- the message side --------------------------------------------------------------------------------------------


def test_matches_message_uses_properties_and_tags() -> None:
    compiled = Sql92Filter.compile("TAGS = 'TagA' AND color = 'red'")
    assert compiled.matches_message(Message("t", b"", properties={"TAGS": "TagA", "color": "red"}))
    assert not compiled.matches_message(Message("t", b"", properties={"TAGS": "TagB", "color": "red"}))
    assert compiled.matches_code(0)


@dataclass
class _TagsOutsideProperties:
    properties: dict[str, str]
    tags: str | None


def test_matches_message_offers_tags_as_a_property_even_when_kept_apart() -> None:
    compiled = Sql92Filter.compile("TAGS = 'TagA'")
    message = _TagsOutsideProperties({"color": "red"}, "TagA")
    assert compiled.matches_message(message)
    assert message.properties == {"color": "red"}  # the message is not changed


def test_compile_keeps_the_expression() -> None:
    assert Sql92Filter.compile("a = 1").expression == "a = 1"


# -- malformed expressions ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("expression", "position", "phrase"),
    [
        # the brief's own example
        ("price > 10 AND b >", 18, "expected a value after '>' (got end of expression)"),
        ("a = 1 AND b > ", 14, "expected a value after '>' (got end of expression)"),
        # empty
        ("", 0, "empty expression"),
        ("   ", 0, "empty expression"),
        # unexpected characters
        ("a # 1", 2, "unexpected character '#'"),
        ("a != 1", 2, "write <> for 'not equal'"),
        ('a = "x"', 4, "strings take single quotes"),
        ("a = 1 && b = 2", 6, "write AND"),
        ("a LIKE '%x'", 2, "expected a comparison after 'a' (got property 'LIKE'); there is no LIKE"),
        ("a NOT LIKE '%x'", 6, "(got property 'LIKE'); there is no LIKE"),
        ("a = 1 + 2", 6, "there is no arithmetic"),
        ("a = 5abc", 4, "malformed number '5abc'"),
        ("a = 1.2.3", 4, "malformed number '1.2.3'"),
        ("a = 1e999", 4, "out of range"),
        ("a = é", 4, "unexpected character 'é'"),
        # unterminated strings
        ("a = 'abc", 4, "unterminated string"),
        ("a = 'it''s", 4, "unterminated string"),
        ("a IN ('x', 'y)", 11, "unterminated string"),
        # missing operands
        ("a =", 3, "expected a value after '=' (got end of expression)"),
        ("a = AND b = 1", 4, "expected a value after '=' (got 'AND')"),
        ("a = )", 4, "expected a value after '=' (got ')')"),
        ("= 1", 0, "expected a condition (got '=')"),
        ("a = 1 AND", 9, "expected a condition after 'AND' (got end of expression)"),
        ("a = 1 OR OR b = 1", 9, "expected a condition after 'OR' (got 'OR')"),
        ("NOT", 3, "expected a condition after 'NOT'"),
        ("()", 1, "expected a condition after '(' (got ')')"),
        ("a = -", 5, "expected a number after '-' (got end of expression)"),
        ("a = -'x'", 5, "expected a number after '-' (got string 'x')"),
        ("a", 1, "expected a comparison after 'a' (got end of expression)"),
        ("a AND b = 1", 2, "expected a comparison after 'a' (got 'AND')"),
        ("5", 1, "expected a comparison after '5'"),
        ("a IS", 4, "expected NULL after 'IS'"),
        ("a IS NOT 5", 9, "expected NULL after 'NOT' (got number 5)"),
        ("a NOT IS NULL", 6, "expected BETWEEN, IN, CONTAINS, STARTSWITH or ENDSWITH after 'NOT' (got 'IS')"),
        ("a CONTAINS b", 11, "expected a string literal after 'CONTAINS' (got property 'b')"),
        ("a STARTSWITH 5", 13, "expected a string literal after 'STARTSWITH'"),
        ("a NOT ENDSWITH", 14, "expected a string literal after 'ENDSWITH' (got end of expression)"),
        # parentheses
        ("(a = 1", 6, "expected ')' to close the '(' at position 0 (got end of expression)"),
        ("((a = 1) OR (b = 1)", 19, "expected ')' to close the '(' at position 0"),
        ("(a = 1 b = 2)", 7, "expected ')' to close the '(' at position 0 (got property 'b')"),
        ("a = 1)", 5, "unexpected ')' after a complete condition"),
        # BETWEEN
        ("a BETWEEN 1 OR 5", 12, "expected AND after '1' (got 'OR')"),
        ("a BETWEEN 1", 11, "expected AND after '1' (got end of expression)"),
        ("a BETWEEN 1 AND", 15, "expected a value after 'AND'"),
        ("a IN ('x' OR", 10, "expected ',' or ')'"),
        ("'x' = 'y' 'z'", 10, "unexpected string 'z' after a complete condition"),
        ("'x'", 3, "expected a comparison after string 'x' (got end of expression)"),
        ("a BETWEEN 5 AND 1", 10, "BETWEEN 5 AND 1 is empty"),
        ("a BETWEEN 'a' AND 'z'", 10, "BETWEEN compares numbers, not the string 'a'"),
        ("a BETWEEN 1 AND NULL", 16, "BETWEEN compares numbers, not NULL"),
        ("'x' BETWEEN 1 AND 2", 0, "BETWEEN compares numbers"),
        # IN
        ("a IN 'x'", 5, "expected '(' after 'IN' (got string 'x')"),
        ("a IN", 4, "expected '(' after 'IN' (got end of expression)"),
        ("a IN ()", 6, "empty IN list"),
        ("a IN (b)", 6, "IN lists take literals only"),
        ("a IN ('x', b)", 11, "IN lists take literals only"),
        ("a IN ('x', (1))", 11, "expected a literal after ','"),
        ("a IN ('x' 'y')", 10, "expected ',' or ')' to close the IN list opened at position 5"),
        ("a IN ('x',", 10, "expected a literal after ','"),
        ("a IN ('x'", 9, "expected ',' or ')' to close the IN list"),
        ("a IN ('x', NULL)", 11, "NULL in an IN list never matches; use IS NULL"),
        # comparisons that can never be meant
        ("a = NULL", 4, "'=' with NULL is never true; use IS NULL"),
        ("NULL <> a", 0, "'<>' with NULL is never true; use IS NOT NULL"),
        ("a > 'x'", 4, "'>' compares numbers, not the string 'x'"),
        ("TRUE <= a", 0, "'<=' compares numbers, not TRUE"),
        ("a < NULL", 4, "'<' with NULL is never true"),
        # trailing garbage
        ("a = 1 b", 6, "unexpected property 'b' after a complete condition; join conditions with AND or OR"),
        ("a = 1 2", 6, "unexpected number 2 after a complete condition"),
        ("a = 1 = 2", 6, "unexpected '=' after a complete condition"),
        ("TRUE TRUE", 5, "unexpected 'TRUE' after a complete condition"),
    ],
)
def test_malformed_expressions_say_what_and_where(expression: str, position: int, phrase: str) -> None:
    with pytest.raises(FilterExpressionError) as caught:
        Sql92Filter.compile(expression)
    error = caught.value
    assert phrase in str(error)
    assert error.position == position, str(error)
    assert error.expression == expression
    assert str(error).startswith(f"SQL92 expression at position {position}: ")


def test_expression_length_is_limited() -> None:
    at_limit = "a = '" + "x" * (MAX_EXPRESSION_LENGTH - 6) + "'"
    assert len(at_limit) == MAX_EXPRESSION_LENGTH
    Sql92Filter.compile(at_limit)
    with pytest.raises(FilterExpressionError, match=f"at most {MAX_EXPRESSION_LENGTH} are allowed") as caught:
        Sql92Filter.compile(at_limit + " ")
    assert caught.value.position == MAX_EXPRESSION_LENGTH
    assert caught.value.expression == at_limit + " "


def test_nesting_depth_is_limited_for_parentheses() -> None:
    deepest = "(" * MAX_NESTING_DEPTH + "a = 1" + ")" * MAX_NESTING_DEPTH
    assert Sql92Filter.compile(deepest).matches({"a": "1"})
    too_deep = "(" + deepest + ")"
    with pytest.raises(FilterExpressionError, match=f"nesting deeper than {MAX_NESTING_DEPTH}") as caught:
        Sql92Filter.compile(too_deep)
    assert caught.value.position == MAX_NESTING_DEPTH


def test_nesting_depth_is_limited_for_not_and_mixed_nesting() -> None:
    assert Sql92Filter.compile("NOT " * MAX_NESTING_DEPTH + "a = 1").matches({"a": "1"})  # 64 NOTs: even
    with pytest.raises(FilterExpressionError, match="nesting deeper") as caught:
        Sql92Filter.compile("NOT " * (MAX_NESTING_DEPTH + 1) + "a = 1")
    assert caught.value.position == 4 * MAX_NESTING_DEPTH
    with pytest.raises(FilterExpressionError, match="nesting deeper"):
        Sql92Filter.compile("NOT (" * 40 + "a = 1" + ")" * 40)
