import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from core.filter import (
    ExpressionType,
    FilterExpressionError,
    Sql92Filter,
    TagFilter,
    UnsupportedExpressionTypeError,
    build_filter,
)
from core.store.message import Message, tags_code

# Two words with the same CRC32: a consume-queue code cannot tell them apart, the exact check can.
COLLIDING_TAGS = ("plumless", "buckeroo")


@pytest.mark.parametrize("expression", [None, "", "*", "  *  ", "   "])
def test_subscribe_all_matches_every_code_and_tag(expression: str | None) -> None:
    tag_filter = TagFilter.parse(expression)
    assert tag_filter.subscribe_all
    assert tag_filter.tags == frozenset()
    assert tag_filter.matches_code(0)
    assert tag_filter.matches_code(tags_code("anything"))
    assert tag_filter.matches(None)
    assert tag_filter.matches("anything")


def test_tag_list_is_split_on_double_bar_and_trimmed() -> None:
    tag_filter = TagFilter.parse("  TagA ||TagB||   TagC  ")
    assert not tag_filter.subscribe_all
    assert tag_filter.tags == {"TagA", "TagB", "TagC"}
    assert tag_filter.codes == {tags_code("TagA"), tags_code("TagB"), tags_code("TagC")}


def test_single_tag_and_duplicates() -> None:
    assert TagFilter.parse("TagA").tags == {"TagA"}
    assert TagFilter.parse("TagA || TagA").tags == {"TagA"}


def test_matches_is_exact_and_case_sensitive() -> None:
    tag_filter = TagFilter.parse("TagA || TagB")
    assert tag_filter.matches("TagA")
    assert tag_filter.matches("TagB")
    assert not tag_filter.matches("TagC")
    assert not tag_filter.matches("taga")
    assert not tag_filter.matches("TagA || TagB")
    assert not tag_filter.matches(None)


def test_matches_code_checks_the_consume_queue_code() -> None:
    tag_filter = TagFilter.parse("TagA || TagB")
    assert tag_filter.matches_code(tags_code("TagA"))
    assert tag_filter.matches_code(tags_code("TagB"))
    assert not tag_filter.matches_code(tags_code("TagC"))
    assert not tag_filter.matches_code(0)  # an untagged message


def test_hash_collision_passes_the_code_check_and_fails_the_exact_check() -> None:
    wanted, other = COLLIDING_TAGS
    assert tags_code(wanted) == tags_code(other)
    tag_filter = TagFilter.parse(wanted)
    assert tag_filter.matches_code(tags_code(other))
    assert tag_filter.matches(wanted)
    assert not tag_filter.matches(other)


def test_matches_message_reads_the_tags_property() -> None:
    tag_filter = TagFilter.parse("TagA")
    assert tag_filter.matches_message(Message("t", b"", properties={"TAGS": "TagA"}))
    assert not tag_filter.matches_message(Message("t", b"", properties={"TAGS": "TagB"}))
    assert not tag_filter.matches_message(Message("t", b""))
    assert TagFilter.parse("*").matches_message(Message("t", b""))


@pytest.mark.parametrize(
    ("expression", "position", "phrase"),
    [
        ("A || || B", 5, "expected a tag between two '||'"),
        ("A ||   || B", 7, "expected a tag between two '||'"),
        ("A ||", 4, "expected a tag after '||' (got end of expression)"),
        ("A || ", 5, "expected a tag after '||'"),
        ("|| A", 0, "expected a tag before '||'"),
        ("  || A", 2, "expected a tag before '||'"),
        ("||", 0, "expected a tag before '||'"),
        ("Tag A", 3, "contains whitespace"),
        ("A || Tag\tB", 8, "contains whitespace"),
        ("A|B", 1, "contains '|'"),
        ("A || B|C", 6, "contains '|'"),
        ("A || *", 5, "'*' subscribes to every tag and must stand alone"),
    ],
)
def test_malformed_tag_expressions_say_where(expression: str, position: int, phrase: str) -> None:
    with pytest.raises(FilterExpressionError) as caught:
        TagFilter.parse(expression)
    error = caught.value
    assert error.position == position
    assert error.expression == expression
    assert phrase in str(error)
    assert str(error).startswith(f"TAG expression at position {position}: ")
    assert isinstance(error, ValueError)


_TAG = st.text(alphabet=st.sampled_from("abcXYZ019_-.:*"), min_size=1, max_size=6).filter(lambda t: t != "*")


@settings(max_examples=200, deadline=None)
@given(
    tags=st.lists(_TAG, min_size=1, max_size=5), spaces=st.lists(st.sampled_from(["", " ", "  ", "\t"]), min_size=12)
)
def test_any_list_of_tags_round_trips(tags: list[str], spaces: list[str]) -> None:
    expression = "||".join(f"{spaces[2 * i]}{tag}{spaces[2 * i + 1]}" for i, tag in enumerate(tags))
    tag_filter = TagFilter.parse(expression)
    assert tag_filter.tags == set(tags)
    assert tag_filter.codes == {tags_code(tag) for tag in tags}
    for tag in tags:
        assert tag_filter.matches(tag)
        assert tag_filter.matches_code(tags_code(tag))


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet=st.sampled_from("ab |*\t"), max_size=12))
def test_any_text_parses_or_raises_filter_expression_error(expression: str) -> None:
    try:
        TagFilter.parse(expression)
    except FilterExpressionError as error:
        assert 0 <= error.position <= len(expression)


# -- build_filter ----------------------------------------------------------------------------------------------


@pytest.mark.parametrize("expression_type", [None, "", "TAG", "tag"])
def test_build_filter_tag_types(expression_type: str | None) -> None:
    message_filter = build_filter(expression_type, "TagA || TagB")
    assert isinstance(message_filter, TagFilter)
    assert message_filter.matches_code(tags_code("TagA"))
    assert not message_filter.matches_code(tags_code("TagC"))
    assert message_filter.matches_message(Message("t", b"", properties={"TAGS": "TagB"}))


def test_build_filter_sql92_checks_codes_never_and_sees_tags_as_a_property() -> None:
    message_filter = build_filter(ExpressionType.SQL92, "TAGS = 'TagA' AND a > 1")
    assert isinstance(message_filter, Sql92Filter)
    assert message_filter.matches_code(0)
    assert message_filter.matches_code(12345)
    assert message_filter.matches_message(Message("t", b"", properties={"TAGS": "TagA", "a": "2"}))
    assert not message_filter.matches_message(Message("t", b"", properties={"TAGS": "TagB", "a": "2"}))
    assert not message_filter.matches_message(Message("t", b"", properties={"a": "2"}))


@pytest.mark.parametrize("expression", [None, "", "  "])
def test_build_filter_refuses_an_empty_sql92_expression(expression: str | None) -> None:
    with pytest.raises(FilterExpressionError, match="empty expression") as caught:
        build_filter("SQL92", expression)
    assert caught.value.position == 0


def test_build_filter_refuses_unknown_types() -> None:
    with pytest.raises(UnsupportedExpressionTypeError, match="'CLASS' is not supported; use 'TAG' or 'SQL92'"):
        build_filter("CLASS", "x")
