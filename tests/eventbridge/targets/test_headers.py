"""Target headers: static, derived by JSONPath, auth; unsafe derived values refused."""

from __future__ import annotations

import base64

import pytest

from eventbridge.errors import TransformRenderError
from eventbridge.rules.model import HttpTarget
from eventbridge.rules.rule_file import parse_rule_file
from eventbridge.targets.headers import target_headers


def target_from(target_yaml: str) -> HttpTarget:
    text = f"rules:\n  - name: r\n    pattern: {{type: [a]}}\n    targets:\n      - {target_yaml}\n"
    (rule,) = parse_rule_file("h.yaml", text)
    return rule.targets[0]


def test_static_derived_and_basic_auth() -> None:
    target = target_from(
        "{id: t, type: http, url: 'http://x/', auth: {type: basic, username: 'ali baba', password: 'open sesame'},"
        " headers: {X-Team: ops, X-Room: {path: $.subject}, X-Temp: {path: $.data.t}, X-Tags: {path: '$.data.tags[*]'},"
        " X-None: {path: $.data.absent}}}"
    )
    event = {"subject": "room/7", "data": {"t": 3.5, "tags": ["a", "b"]}}
    token = base64.b64encode(b"ali baba:open sesame").decode()
    assert target_headers(target, event) == [
        ("X-Team", "ops"),
        ("X-Room", "room/7"),
        ("X-Temp", "3.5"),
        ("X-Tags", '["a","b"]'),
        ("Authorization", f"Basic {token}"),
    ]


def test_api_key_header() -> None:
    target = target_from("{id: t, type: http, url: 'http://x/', auth: {type: api-key, header: X-Key, value: s3}}")
    assert target_headers(target, {}) == [("X-Key", "s3")]


@pytest.mark.parametrize("subject", ["a\r\nX-Injected: 1", "a\nb", "nul\x00", "x" * 9000])
def test_derived_value_that_would_break_the_header_is_refused(subject: str) -> None:
    target = target_from("{id: t, type: http, url: 'http://x/', headers: {X-Room: {path: $.subject}}}")
    with pytest.raises(TransformRenderError, match="X-Room"):
        target_headers(target, {"subject": subject})


def test_auth_conflicting_with_a_static_header_refused_at_load() -> None:
    from eventbridge.errors import RuleFileError

    with pytest.raises(RuleFileError, match="conflicts with auth"):
        target_from(
            "{id: t, type: http, url: 'http://x/', auth: {type: api-key, value: k}, headers: {x-api-key: other}}"
        )
