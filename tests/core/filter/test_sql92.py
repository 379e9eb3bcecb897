import random
import re
from dataclasses import dataclass
from fractions import Fraction

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

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


# -- property tests against a reference evaluator ------------------------------------------------------------------
#
# Trees are plain tuples, independent of core.filter.sql92_ast:
#   ("prop", name) | ("lit", value)                              values; value is str, int, float, bool or None
#   ("cmp", op, left, right) | ("between", negated, value, low, high) | ("in", negated, value, options)
#   ("isnull", negated, value) | ("strop", op, negated, value, pattern) | ("bool", value)
#   ("not", cond) | ("and", left, right) | ("or", left, right)

PROPERTY_NAMES = ["a", "b", "c"]
PROPERTY_TEXTS = [
    "0", "5", "-3", "+7", "10", "2.5", "0.5", ".25", "5.", "1e2", "007", "-0",
    "abc", "x", "", "a b", "it's", " 5", "1_0", "true", "TRUE", "false", "False",
]  # fmt: skip
STRING_LITERALS = ["", "x", "abc", "5", "2.5", "true", "FALSE", "it's", "a b", "b"]
# Floats exact in binary, so float and Fraction arithmetic agree.
FLOAT_LITERALS = [0.5, -2.5, 10.25, 3.0, 100.0, 0.0]

prop = st.sampled_from(PROPERTY_NAMES).map(lambda name: ("prop", name))
number_literal = st.one_of(st.integers(-12, 12), st.sampled_from(FLOAT_LITERALS)).map(lambda v: ("lit", v))
string_literal = st.sampled_from(STRING_LITERALS).map(lambda v: ("lit", v))
bool_literal = st.booleans().map(lambda v: ("lit", v))
null_literal = st.just(("lit", None))

numeric_operand = st.one_of(prop, prop, number_literal)
equality_operand = st.one_of(prop, prop, number_literal, string_literal, bool_literal)


@st.composite
def between_nodes(draw: st.DrawFn) -> tuple:
    low, high = draw(numeric_operand), draw(numeric_operand)
    if low[0] == "lit" and high[0] == "lit" and low[1] > high[1]:
        low, high = high, low
    return ("between", draw(st.booleans()), draw(numeric_operand), low, high)


predicates = st.one_of(
    st.tuples(st.just("cmp"), st.sampled_from(["=", "<>"]), equality_operand, equality_operand),
    st.tuples(st.just("cmp"), st.sampled_from(["<", "<=", ">", ">="]), numeric_operand, numeric_operand),
    between_nodes(),
    st.tuples(
        st.just("in"),
        st.booleans(),
        st.one_of(prop, prop, string_literal, number_literal),
        st.lists(st.one_of(string_literal, number_literal, bool_literal), min_size=1, max_size=4),
    ),
    st.tuples(st.just("isnull"), st.booleans(), st.one_of(prop, string_literal, number_literal, null_literal)),
    st.tuples(
        st.just("strop"),
        st.sampled_from(["CONTAINS", "STARTSWITH", "ENDSWITH"]),
        st.booleans(),
        st.one_of(prop, prop, string_literal, number_literal),
        st.sampled_from(STRING_LITERALS),
    ),
    st.tuples(st.just("bool"), st.booleans()),
)

conditions = st.recursive(
    predicates,
    lambda children: st.one_of(
        st.tuples(st.just("not"), children),
        st.tuples(st.just("and"), children, children),
        st.tuples(st.just("or"), children, children),
    ),
    max_leaves=10,
)

property_dicts = st.dictionaries(st.sampled_from(PROPERTY_NAMES), st.sampled_from(PROPERTY_TEXTS))


# -- rendering to SQL text, with random keyword case, spacing and extra parentheses --------------------------------

_PRECEDENCE = {"or": 1, "and": 2, "not": 3}


def render(node: tuple, rng: random.Random, required: int = 0) -> str:
    precedence = _PRECEDENCE.get(node[0], 4)
    text = _render_bare(node, rng)
    if precedence < required or rng.random() < 0.15:
        return "(" + text + ")"
    return text


def _kw(word: str, rng: random.Random) -> str:
    return rng.choice([word.upper(), word.lower(), word.capitalize()])


def _render_bare(node: tuple, rng: random.Random) -> str:
    kind = node[0]
    if kind == "prop":
        return node[1]
    if kind == "lit":
        value = node[1]
        if value is None:
            return _kw("null", rng)
        if isinstance(value, bool):
            return _kw("true" if value else "false", rng)
        if isinstance(value, str):
            return "'" + value.replace("'", "''") + "'"
        return repr(value)
    if kind == "cmp":
        space = rng.choice(["", " "]) if node[2][0] == "prop" and node[3][0] == "prop" else " "
        return f"{_render_bare(node[2], rng)}{space}{node[1]}{space}{_render_bare(node[3], rng)}"
    not_ = _kw("not", rng) + " " if node[1] else ""
    if kind == "between":
        _, _, value, low, high = node
        between, and_ = _kw("between", rng), _kw("and", rng)
        return f"{_render_bare(value, rng)} {not_}{between} {_render_bare(low, rng)} {and_} {_render_bare(high, rng)}"
    if kind == "in":
        options = ", ".join(_render_bare(option, rng) for option in node[3])
        return f"{_render_bare(node[2], rng)} {not_}{_kw('in', rng)} ({options})"
    if kind == "isnull":
        return f"{_render_bare(node[2], rng)} {_kw('is', rng)} {not_}{_kw('null', rng)}"
    if kind == "strop":
        _, op, negated, value, pattern = node
        not_ = _kw("not", rng) + " " if negated else ""
        return f"{_render_bare(value, rng)} {not_}{_kw(op, rng)} {_render_bare(('lit', pattern), rng)}"
    if kind == "bool":
        return _kw("true" if node[1] else "false", rng)
    if kind == "not":
        return f"{_kw('not', rng)} {render(node[1], rng, _PRECEDENCE['not'])}"
    left = render(node[1], rng, _PRECEDENCE[kind])
    right = render(node[2], rng, _PRECEDENCE[kind])
    return f"{left} {_kw(kind, rng)} {right}"


# -- the reference evaluator: the module docstring's rules, written out plainly -----------------------------------

_NUMERIC = re.compile(r"[+-]?([0-9]+(\.[0-9]*)?|\.[0-9]+)([eE][+-]?[0-9]+)?")


def ref_number(value: object) -> Fraction | None:
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, str):
        return Fraction(value) if _NUMERIC.fullmatch(value) else None
    assert isinstance(value, int | float)
    return Fraction(value)


def ref_equal(left: object, right: object) -> bool | None:
    if left is None or right is None:
        return None
    if isinstance(left, bool) and isinstance(right, bool):
        return left == right
    if isinstance(left, bool) or isinstance(right, bool):
        flag, other = (left, right) if isinstance(left, bool) else (right, left)
        return isinstance(other, str) and other.lower() == str(flag).lower()
    if isinstance(left, str) and isinstance(right, str):
        return left == right
    left_number, right_number = ref_number(left), ref_number(right)
    if left_number is None or right_number is None:
        return None
    return left_number == right_number


def ref_order(op: str, left: object, right: object) -> bool | None:
    left_number, right_number = ref_number(left), ref_number(right)
    if left_number is None or right_number is None:
        return None
    return {
        "<": left_number < right_number,
        "<=": left_number <= right_number,
        ">": left_number > right_number,
        ">=": left_number >= right_number,
    }[op]


def ref_not(result: bool | None) -> bool | None:
    return None if result is None else not result


def ref_and(left: bool | None, right: bool | None) -> bool | None:
    if left is False or right is False:
        return False
    if left is None or right is None:
        return None
    return True


def ref_or(left: bool | None, right: bool | None) -> bool | None:
    return ref_not(ref_and(ref_not(left), ref_not(right)))


def ref_eval(node: tuple, properties: dict[str, str]) -> bool | None:
    def value(operand: tuple) -> object:
        return properties.get(operand[1]) if operand[0] == "prop" else operand[1]

    kind = node[0]
    if kind == "cmp":
        _, op, left, right = node
        if op == "=":
            return ref_equal(value(left), value(right))
        if op == "<>":
            return ref_not(ref_equal(value(left), value(right)))
        return ref_order(op, value(left), value(right))
    if kind == "between":
        _, negated, operand, low, high = node
        inside = ref_and(ref_order(">=", value(operand), value(low)), ref_order("<=", value(operand), value(high)))
        return ref_not(inside) if negated else inside
    if kind == "in":
        _, negated, operand, options = node
        found: bool | None = False
        for option in options:
            found = ref_or(found, ref_equal(value(operand), option[1]))
        return ref_not(found) if negated else found
    if kind == "isnull":
        return (value(node[2]) is None) != node[1]
    if kind == "strop":
        _, op, negated, operand, pattern = node
        text = value(operand)
        if not isinstance(text, str) or pattern == "":
            return None
        hit = {"CONTAINS": pattern in text, "STARTSWITH": text.startswith(pattern), "ENDSWITH": text.endswith(pattern)}
        return hit[op] != negated
    if kind == "bool":
        return node[1]
    if kind == "not":
        return ref_not(ref_eval(node[1], properties))
    if kind == "and":
        return ref_and(ref_eval(node[1], properties), ref_eval(node[2], properties))
    assert kind == "or"
    return ref_or(ref_eval(node[1], properties), ref_eval(node[2], properties))


@settings(max_examples=600, deadline=None)
@given(
    tree=conditions, rng=st.randoms(use_true_random=False), messages=st.lists(property_dicts, min_size=1, max_size=6)
)
def test_compiled_filter_agrees_with_the_reference_evaluator(
    tree: tuple, rng: random.Random, messages: list[dict[str, str]]
) -> None:
    text = render(tree, rng)
    compiled = Sql92Filter.compile(text)
    for properties in messages:
        assert compiled.matches(properties) is (ref_eval(tree, properties) is True), (text, properties)
        # NOT of the whole is TRUE exactly when the whole is FALSE: checks UNKNOWN is kept apart from FALSE.
        negated = Sql92Filter.compile(f"NOT ({text})")
        assert negated.matches(properties) is (ref_eval(tree, properties) is False), (text, properties)


@settings(max_examples=150, deadline=None)
@given(tree=conditions, rng=st.randoms(use_true_random=False))
def test_every_prefix_of_a_valid_expression_compiles_or_raises_filter_expression_error(
    tree: tuple, rng: random.Random
) -> None:
    text = render(tree, rng)
    for end in range(len(text)):
        prefix = text[:end]
        try:
            compiled = Sql92Filter.compile(prefix)
        except FilterExpressionError as error:
            assert 0 <= error.position <= len(prefix), (prefix, error)
            assert error.expression == prefix
        else:
            compiled.matches({"a": "1", "b": "x"})


_FRAGMENTS = ["a", "b", " ", "=", "<>", "<", ">=", "(", ")", ",", "'", "-", ".", "5", "1.5", "e", "AND", "OR", "NOT"]
_FRAGMENTS += ["BETWEEN", "IN", "IS", "NULL", "TRUE", "CONTAINS", "''", "#", "!", "\t", "é"]


@settings(max_examples=400, deadline=None)
@given(
    st.tuples(st.sampled_from(["", " "]), st.lists(st.sampled_from(_FRAGMENTS), max_size=14)).map(
        lambda t: t[0].join(t[1])
    )
)
def test_any_token_soup_compiles_or_raises_filter_expression_error(text: str) -> None:
    try:
        Sql92Filter.compile(text)
    except FilterExpressionError as error:
        assert 0 <= error.position <= len(text), (text, error)
