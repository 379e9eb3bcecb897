"""Rule file loader properties: whatever the YAML, a file either loads or is refused with a position inside it;
the shipped example rules load."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from eventbridge.errors import RuleFileError
from eventbridge.rules.directory import load_rule_directory
from eventbridge.rules.rule_file import parse_rule_file

EXAMPLES = Path(__file__).resolve().parents[3] / "examples" / "eventbridge-rules"

_scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(10**6), 10**6),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=12),
    st.sampled_from(["http", "http://x/", "$.data", "$.[", "{{ x }}", "{{ x.__class__ }}", "PART", "TEMPLATE",
                     "BACKOFF_RETRY", "binary", "basic", "api-key", "default"]),
)  # fmt: skip
_values: st.SearchStrategy[Any] = st.recursive(
    _scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=3),
        st.dictionaries(
            st.sampled_from(["kind", "path", "template", "variables", "type", "value", "strategy", "retries", "x"]),
            inner,
            max_size=3,
        ),
    ),
    max_leaves=8,
)
_target = st.fixed_dictionaries(
    {"id": st.sampled_from(["t", "bad id"]), "type": st.sampled_from(["http", "sqs"]), "url": _scalars},
    optional={
        "mode": _values, "headers": _values, "timeout_ms": _values, "concurrency": _values, "auth": _values,
        "transform": _values, "retry_policy": _values, "dead_letter_topic": _values, "extra": _values,
    },
)  # fmt: skip
# Schedules good and bad, so that a refusal's column inside the expression is checked to stay on its line.
_schedules = st.one_of(
    _values,
    st.sampled_from(["rate(5 minutes)", "rate(1 minutes)", "cron(0 10 * * ? *)", "cron(0 25 * * ? *)", "cron(",
                     "cron(0 10 * * * *)", "rate(5 minutes", "cron(0 10 ? * 3#1,6#3 *)", "  rate(1 hour)  "]),
    st.text(alphabet="cront(0123456789 *?,-/LW#)", max_size=24),
)  # fmt: skip
_rule = st.fixed_dictionaries(
    {"name": st.sampled_from(["r", "r2", ""]), "targets": st.lists(_target, max_size=2)},
    optional={"pattern": _values, "schedule": _schedules, "bus": _values, "enabled": _values, "description": _values},
)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.one_of(st.fixed_dictionaries({"rules": st.lists(_rule, max_size=3)}), _values), st.booleans())
def test_any_document_loads_or_is_refused_inside_the_file(document: Any, flow_style: bool) -> None:
    text = yaml.safe_dump(document, default_flow_style=flow_style)
    try:
        rules = parse_rule_file("gen.yaml", text)
    except RuleFileError as error:
        lines = text.split("\n")
        assert 1 <= error.line <= len(lines), str(error)
        assert 1 <= error.column <= len(lines[error.line - 1]) + 1, str(error)
        assert error.reason
    else:
        assert rules
        for rule in rules:
            assert rule.targets and ((rule.pattern is not None and rule.pattern.value) or rule.schedule is not None)


def test_example_rules_load() -> None:
    result = load_rule_directory(EXAMPLES)
    assert result.errors == ()
    names = sorted(str(rule.key) for rule in result.rules)
    assert names == ["default/cold-rooms", "default/heat-cold-rooms", "default/readings-archive",
                     "default/weekday-report"]  # fmt: skip
    report = next(rule for rule in result.rules if rule.name == "weekday-report")
    assert report.pattern is None and str(report.schedule) == "cron(0 18 ? * MON-FRI *)"
    assert list(result.rules.sources) == ["plant-sensors"]
    assert result.rules.sources["plant-sensors"].core_topic == "plant"
    assert len(result.rules.schemas) == 1
    assert [(a.name, a.retention_days) for a in result.rules.archives.values()] == [("plant-readings", 365)]
    cold = next(rule for rule in result.rules if rule.name == "cold-rooms")
    event = {"subject": "plant/a/room-7", "data": {"temp": 3}}
    assert cold.targets[0].transform.apply(event).value == {"text": "Room plant/a/room-7 is at 3 C"}
