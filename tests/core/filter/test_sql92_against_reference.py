"""The SQL92 filter (core/filter) against a plain reference evaluator of the documented rules: generated
expression trees rendered as text, compiled and evaluated over generated properties, agree with the reference;
every prefix of a valid expression, and any soup of tokens, compiles or raises FilterExpressionError."""

import random
import re
from fractions import Fraction

from hypothesis import given, settings
from hypothesis import strategies as st

from core.filter import FilterExpressionError, Sql92Filter

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
