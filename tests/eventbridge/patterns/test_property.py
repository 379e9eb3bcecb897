"""Property: a Matcher built from many generated patterns answers, for generated events, exactly the rules the
reference evaluator says match (strategies: tests.eventbridge.patterns.pattern_strategies)."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from eventbridge.patterns.compiler import compile_pattern
from eventbridge.patterns.matcher import Matcher
from tests.eventbridge.patterns.pattern_reference import reference_matches
from tests.eventbridge.patterns.pattern_strategies import events, patterns


@settings(max_examples=300)
@given(st.lists(patterns(), min_size=1, max_size=8), st.lists(events(), min_size=1, max_size=6))
def test_matcher_agrees_with_reference(rules: list[dict[str, Any]], sample: list[dict[str, Any]]) -> None:
    matcher = Matcher([(index, compile_pattern(pattern)) for index, pattern in enumerate(rules)])
    for event in sample:
        expected = {index for index, pattern in enumerate(rules) if reference_matches(pattern, event)}
        assert matcher.matches(event) == expected
