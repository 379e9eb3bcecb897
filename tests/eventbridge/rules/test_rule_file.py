"""Rule files: parsing, validation with file:line:column, directory reloads that keep rules in force, diffs."""

from __future__ import annotations

import json
import textwrap
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from eventbridge.errors import RuleFileError
from eventbridge.rules.directory import load_rule_directory
from eventbridge.rules.model import (
    ApiKeyAuth,
    BasicAuth,
    BusTarget,
    HttpTarget,
    MqttTarget,
    RuleKey,
    RuleSet,
    TargetMode,
    TopicTarget,
    diff_rule_sets,
)
from eventbridge.rules.rule_file import declared_rules, parse_rule_file
from eventbridge.schedules.expression import CronSchedule, RateSchedule
from eventbridge.targets.retry_policy import BackoffRetry, ExponentialDecayRetry
from eventbridge.targets.transform import TEXT_CONTENT_TYPE, TransformKind

FULL = textwrap.dedent(
    """\
    rules:
      - name: cold-rooms
        description: rooms below 5 C
        pattern:
          source: [{prefix: "mqgate/"}]
          data: {temp: [{numeric: ["<", 5]}], ok: [true, null]}
        targets:
          - id: alerts
            type: http
            url: https://alerts.example/hook
            mode: structured
            headers:
              X-Team: ops
              X-Room: {path: $.subject}
            timeout_ms: 2500
            concurrency: 4
            auth: {type: basic, username: u, password: p}
            transform:
              kind: TEMPLATE
              variables: {t: $.data.temp, room: $.subject}
              template: |
                {{ room }} is at {{ t }} C
              output: text
            retry_policy: {strategy: EXPONENTIAL_DECAY_RETRY, retries: 20, max_age_s: 3600}
            dead_letter_topic: alerts-dlq
          - id: archive
            type: http
            url: http://archive.local:8080/in
            auth: {type: api-key, value: k}
            transform: {kind: PART, path: $.data}
      - name: everything
        bus: plant_a
        enabled: false
        pattern: {type: [{exists: true}]}
        targets:
          - {id: t, type: http, url: "http://x/", retry_policy: BACKOFF_RETRY}
    """
)


def fail(text: str) -> RuleFileError:
    with pytest.raises(RuleFileError) as info:
        parse_rule_file("rules/a.yaml", textwrap.dedent(text))
    return info.value


def minimal(target: str = "{id: t, type: http, url: 'http://x/'}", extra: str = "") -> str:
    return f"rules:\n  - name: r\n    pattern: {{type: [a]}}\n{extra}    targets:\n      - {target}\n"


def test_full_file_parsed() -> None:
    cold, everything = parse_rule_file("a.yaml", FULL)
    assert cold.key == RuleKey("default", "cold-rooms")
    assert cold.enabled is True and cold.description == "rooms below 5 C"
    assert cold.pattern.value == {
        "source": [{"prefix": "mqgate/"}],
        "data": {"temp": [{"numeric": ["<", 5]}], "ok": [True, None]},
    }
    assert (cold.pattern.position.line, cold.pattern.position.column) == (5, 7)
    alerts, archive = cold.targets
    assert alerts.mode is TargetMode.STRUCTURED and archive.mode is TargetMode.BINARY
    assert alerts.headers == (("X-Team", "ops"),)
    assert [(n, p.text) for n, p in alerts.derived_headers] == [("X-Room", "$.subject")]
    assert (alerts.timeout_ms, alerts.concurrency) == (2500, 4)
    assert alerts.auth == BasicAuth("u", "p")
    assert archive.auth == ApiKeyAuth("X-Api-Key", "k")
    assert alerts.retry_policy == ExponentialDecayRetry(retries=20, max_age_s=3600.0)
    assert archive.retry_policy == BackoffRetry()
    assert alerts.dead_letter_topic == "alerts-dlq" and archive.dead_letter_topic is None
    event = {"id": "1", "subject": "room/7", "data": {"temp": 3}}
    out = alerts.transform.apply(event)
    assert (out.value, out.content_type) == ("room/7 is at 3 C\n", TEXT_CONTENT_TYPE)
    assert archive.transform.spec.kind is TransformKind.PART
    assert archive.transform.apply(event).value == {"temp": 3}
    assert everything.key == RuleKey("plant_a", "everything") and everything.enabled is False
    assert everything.targets[0].transform.spec.kind is TransformKind.ORIGINAL
    assert "password='p'" not in repr(alerts)


@pytest.mark.parametrize(
    ("text", "line", "column", "reason"),
    [
        ("rules: [\n", 2, 1, "not valid YAML"),
        ("", 1, 1, "empty"),
        ("rulez: []\n", 1, 1, "did you mean 'rules'"),
        ("rules: []\n", 1, 8, "rules is empty"),
        ("rules:\n  - name: r\n    name: s\n", 3, 5, "'name' given twice"),
        ("rules:\n  - name: 'bad name'\n    pattern: {a: [1]}\n    targets: []\n", 2, 11, "rule name 'bad name'"),
        (
            "rules:\n  - name: r\n    targets: [{}]\n",
            2,
            5,
            "give a 'pattern', a 'schedule' (rate(...) or cron(...)), or both",
        ),
        ("rules:\n  - name: r\n    pattern: [1]\n    targets: []\n", 3, 14, "pattern must be a non-empty mapping"),
        ("rules:\n  - name: r\n    pattern: {a: [2026-01-01]}\n    targets: []\n", 3, 19, "timestamp is not a JSON"),
        ("rules:\n  - name: r\n    pattern: {a: [1]}\n    targets: []\n", 4, 14, "targets is empty"),
        (minimal(extra="    enabled: yes please\n"), 4, 14, "enabled must be true or false"),
        (minimal(extra="    bus: a.b\n"), 4, 10, "bus 'a.b'"),
    ],
)
def test_invalid_file_refused_at_the_node(text: str, line: int, column: int, reason: str) -> None:
    error = fail(text)
    assert (error.line, error.column) == (line, column), str(error)
    assert reason in error.reason
    assert str(error).startswith(f"rules/a.yaml:{line}:{column}: ")


@pytest.mark.parametrize(
    ("target", "column", "reason"),
    [
        ("{id: t, type: sqs, url: 'http://x/'}", 23, "type 'sqs' is not one of http, topic, mqtt, bus"),
        ("{id: t, type: mqtt}", 9, "'topic' is missing"),
        ("{id: t, type: mqtt, topic: 'a/+/b'}", 36, "wildcard '+' is not allowed"),
        ("{id: t, type: mqtt, topic: 'a/${$.[}'}", 36, "invalid JSONPath"),
        ("{id: t, type: mqtt, topic: 'a/${$.x'}", 36, "not closed"),
        ("{id: t, type: mqtt, topic: a, qos: 3}", 44, "qos is 3"),
        ("{id: t, type: mqtt, topic: a, retain: 1}", 47, "retain must be"),
        ("{id: t, type: bus, bus: default}", 33, "the rule's own bus"),
        ("{id: t, type: bus, bus: ops, transform: {kind: ORIGINAL}}", 38, "unknown key 'transform'"),
        ("{id: t, type: topic, topic: 'a/b'}", 37, "'/' is not allowed"),
        ("{id: t, type: topic, topic: t, concurrency: 4}", 40, "unknown key 'concurrency'"),
        ("{id: t, type: topic, topic: t, tag: 'a||b'}", 45, "'||' separates tags"),
        ("{id: t, type: http, url: 'ftp://x/'}", 34, "not an http:// or https:// URL"),
        ("{id: t, type: http, url: 'http://x/', mode: text}", 53, "mode 'text' is not one of binary, structured"),
        ("{id: t, type: http, url: 'http://x/', timeout_ms: 0}", 59, "timeout_ms is 0"),
        ("{id: t, type: http, url: 'http://x/', concurrency: '8'}", 60, "concurrency must be an integer"),
        ("{id: t, type: http, url: 'http://x/', headers: {ce-id: x}}", 57, "set by the target itself"),
        ("{id: t, type: http, url: 'http://x/', headers: {Content-Type: x}}", 57, "set by the target itself"),
        ("{id: t, type: http, url: 'http://x/', headers: {X-A: {path: '$.['}}}", 69, "invalid JSONPath"),
        ("{id: t, type: http, url: 'http://x/', auth: {type: oauth}}", 60, "auth type 'oauth'"),
        ("{id: t, type: http, url: 'http://x/', auth: {type: basic, username: u}}", 53, "'password' is missing"),
        ("{id: t, type: http, url: 'http://x/', transform: {kind: PART, path: '$.['}}", 77, "invalid JSONPath"),
        ("{id: t, type: http, url: 'http://x/', transform: {kind: PART}}", 58, "'path' is missing"),
        ("{id: t, type: http, url: 'http://x/', transform: {kind: PART, template: x}}", 71, "unknown key 'template'"),
        ("{id: t, type: http, url: 'http://x/', transform: {kind: JQ}}", 65, "kind 'JQ' is not one of"),
        ("{id: t, type: http, url: 'http://x/', retry_policy: SOMETIMES}", 61, "is not one of BACKOFF_RETRY"),
        ("{id: t, type: http, url: 'http://x/', retry_policy: {strategy: BACKOFF_RETRY, max_age_s: 9}}", 87,
         "unknown key 'max_age_s'"),
        ("{id: t, type: http, url: 'http://x/', retry_policy: {strategy: BACKOFF_RETRY, min_delay_s: 30}}", 61,
         "min_delay_s <= max_delay_s"),
        ("{id: t, type: http, url: 'http://x/', dead_letter_topic: 'a/b'}", 66, "'/' is not allowed"),
        ("{id: t, type: http, url: 'http://x/', timeout: 5}", 47, "did you mean 'timeout_ms'"),
    ],
)  # fmt: skip
def test_invalid_target_refused_at_the_node(target: str, column: int, reason: str) -> None:
    error = fail(minimal(target))
    assert (error.line, error.column) == (5, column), str(error)
    assert reason in error.reason


def test_duplicate_target_and_rule_refused() -> None:
    target = "{id: t, type: http, url: 'http://x/'}"
    error = fail(f"rules:\n  - name: r\n    pattern: {{a: [1]}}\n    targets:\n      - {target}\n      - {target}\n")
    assert (error.line, "target id 't' is used twice" in error.reason) == (6, True)
    two = minimal() + minimal().removeprefix("rules:\n")
    error = fail(two)
    assert error.line == 6 and "defined twice" in error.reason


def test_template_errors_point_into_the_block() -> None:
    text = textwrap.dedent(
        """\
        rules:
          - name: r
            pattern: {a: [1]}
            targets:
              - id: t
                type: http
                url: http://x/
                transform:
                  kind: TEMPLATE
                  variables: {x: $.data}
                  template: |
                    {
                      "a": {{ x }
                    }
        """
    )
    error = fail(text)
    assert error.line == 13, str(error)
    assert "template line 2" in error.reason
    injected = text.replace("{{ x }", "{{ x.__class__ }}")
    error = fail(injected)
    assert error.line == 13 and "'__class__'" in error.reason
    undeclared = text.replace("{{ x }", "{{ cycler }}")
    assert "'cycler'" in fail(undeclared).reason
    twice = text.replace("{x: $.data}", "{x: $.data, x: $.id}")
    assert "variable 'x' given twice" in fail(twice).reason
    bad_variable = text.replace("{x: $.data}", "{x: '$.data['}")
    error = fail(bad_variable)
    assert (error.line, error.column) == (10, 26) and "variables.x" in error.reason


def test_pattern_compile_hook_refuses_at_the_faulty_node() -> None:
    class PatternError(ValueError):  # as eventbridge.patterns.errors.PatternError: a dotted path
        def __init__(self, message: str, path: object) -> None:
            super().__init__(message)
            self.path = path

    seen: list[Mapping[str, Any]] = []

    def compile_pattern(pattern: Mapping[str, Any]) -> None:
        seen.append(pattern)
        if "bad" in pattern:
            raise PatternError("numeric needs an operator", pattern["where"])

    head = "rules:\n  - name: r\n    pattern:\n      ok: [1]\n      bad: [{numeric: []}]\n"
    tail = "    targets: [{id: t, type: http, url: 'http://x/'}]\n"
    for where, position in [
        ("bad[0].numeric", (5, 23)),
        (["bad", 0], (5, 13)),
        ("bad", (5, 12)),
        ("absent.x", (4, 7)),  # stops at the pattern when the path leads nowhere
        (None, (4, 7)),
    ]:
        with pytest.raises(RuleFileError) as info:
            text = head + f"      where: {json.dumps(where)}\n" + tail
            parse_rule_file("p.yaml", text, compile_pattern=compile_pattern)
        assert (info.value.line, info.value.column) == position, where
        assert "numeric needs an operator" in info.value.reason
    parse_rule_file("p.yaml", head.replace("bad:", "fine:") + tail, compile_pattern=compile_pattern)
    assert seen[-1] == {"ok": [1], "fine": [{"numeric": []}]}


def write(directory: Path, name: str, text: str) -> Path:
    path = directory / name
    path.write_text(text)
    return path


def rule_yaml(name: str, url: str = "http://x/", bus: str = "default") -> str:
    return (
        f"  - name: {name}\n    bus: {bus}\n    pattern: {{type: [a]}}\n"
        f"    targets: [{{id: t, type: http, url: '{url}'}}]\n"
    )


def test_directory_load_and_reload_keeps_rules_of_a_broken_file(tmp_path: Path) -> None:
    write(tmp_path, "a.yaml", "rules:\n" + rule_yaml("r1") + rule_yaml("r2"))
    write(tmp_path, "b.yml", "rules:\n" + rule_yaml("r3"))
    write(tmp_path, "notes.txt", "not a rule file")
    write(tmp_path, ".#a.yaml", "rules: [")
    first = load_rule_directory(tmp_path)
    assert first.errors == ()
    assert sorted(str(k) for k in first.rules.rules) == ["default/r1", "default/r2", "default/r3"]

    # b.yml breaks; a.yaml changes r2 and adds r4.
    write(tmp_path, "a.yaml", "rules:\n" + rule_yaml("r1") + rule_yaml("r2", url="http://y/") + rule_yaml("r4"))
    write(tmp_path, "b.yml", "rules:\n  - name: r3\n    pattern: {type: [a]}\n    targets: oops\n")
    second = load_rule_directory(tmp_path, first.rules)
    assert len(second.errors) == 1
    assert str(second.errors[0]) == f"{tmp_path / 'b.yml'}:4:14: rule 'r3': targets must be a list"
    assert RuleKey("default", "r3") in second.rules  # still in force
    diff = diff_rule_sets(first.rules, second.rules)
    assert [r.name for r in diff.added] == ["r4"]
    assert [(old.targets[0].url, new.targets[0].url) for old, new in diff.changed] == [("http://x/", "http://y/")]
    assert sorted(r.name for r in diff.unchanged) == ["r1", "r3"]
    assert diff.removed == ()

    # b.yml deleted: its rules go; a rule redefined in a later file is refused there.
    (tmp_path / "b.yml").unlink()
    write(tmp_path, "c.yaml", "rules:\n" + rule_yaml("r1") + rule_yaml("r5"))
    third = load_rule_directory(tmp_path, second.rules)
    assert len(third.errors) == 1 and "already defined at" in third.errors[0].reason
    assert third.errors[0].path.endswith("c.yaml") and third.errors[0].line == 2
    assert RuleKey("default", "r5") not in third.rules
    assert [r.name for r in diff_rule_sets(second.rules, third.rules).removed] == ["r3"]


def test_unchanged_rule_recognised_after_moving_within_and_across_files(tmp_path: Path) -> None:
    write(tmp_path, "a.yaml", "rules:\n" + rule_yaml("r1") + rule_yaml("r2"))
    before = load_rule_directory(tmp_path).rules
    write(tmp_path, "a.yaml", "# moved\n\nrules:\n" + rule_yaml("r2"))
    write(tmp_path, "b.yaml", "rules:\n" + rule_yaml("r1"))
    after = load_rule_directory(tmp_path, before).rules
    diff = diff_rule_sets(before, after)
    assert sorted(r.name for r in diff.unchanged) == ["r1", "r2"]
    assert diff.added == diff.removed == diff.changed == ()
    # Same name on another bus is another rule.
    write(tmp_path, "b.yaml", "rules:\n" + rule_yaml("r1", bus="other"))
    moved_bus = diff_rule_sets(after, load_rule_directory(tmp_path, after).rules)
    assert [str(r.key) for r in moved_bus.added] == ["other/r1"]
    assert [str(r.key) for r in moved_bus.removed] == ["default/r1"]


def test_transform_and_template_changes_count_as_changed() -> None:
    base = minimal("{id: t, type: http, url: 'http://x/', transform: {kind: PART, path: '$.data'}}")
    (a,) = parse_rule_file("a.yaml", base)
    (b,) = parse_rule_file("a.yaml", base.replace("$.data", "$.id"))
    (c,) = parse_rule_file("other.yaml", "\n" + base)
    assert a != b
    assert a == c
    diff = diff_rule_sets(RuleSet({a.key: a}), RuleSet({b.key: b}))
    assert len(diff.changed) == 1 and diff.unchanged == ()


def test_non_utf8_file_refused_with_position(tmp_path: Path) -> None:
    (tmp_path / "bad.yaml").write_bytes(b"rules:\n  - name: caf\xe9\n")
    result = load_rule_directory(tmp_path)
    assert len(result.rules) == 0
    assert (result.errors[0].line, result.errors[0].column) == (2, 14)


def test_pattern_and_constant_compare_as_json_not_as_python() -> None:
    def one(pattern: str, constant: str = "1") -> Any:
        target = f"{{id: t, type: http, url: 'http://x/', transform: {{kind: CONSTANT, value: {constant}}}}}"
        text = f"rules:\n  - name: r\n    pattern: {pattern}\n    targets:\n      - {target}\n"
        (rule,) = parse_rule_file("a.yaml", text)
        return rule

    assert one("{a: [true]}") != one("{a: [1]}")  # True == 1 in Python
    assert one("{a: [1]}") != one("{a: [1.0]}")
    assert one("{a: [1], b: [2]}") == one("{b: [2], a: [1]}")
    assert one("{a: [1]}", "true") != one("{a: [1]}", "1")
    assert one("{a: [1]}", "{x: [1, 2]}") == one("{a: [1]}", "{x: [1, 2]}")


def test_alias_bomb_refused_quickly() -> None:
    lines = ["a0: &a0 [x, x, x, x, x, x, x, x, x, x]"]
    lines += [f"a{i}: &a{i} [*a{i - 1}, *a{i - 1}, *a{i - 1}, *a{i - 1}, *a{i - 1}, *a{i - 1}]" for i in range(1, 9)]
    text = "rules:\n  - name: r\n    pattern:\n" + "".join(f"      {line}\n" for line in lines)
    text += "    targets: [{id: t, type: http, url: 'http://x/'}]\n"
    error = fail(text)
    assert "more than 10000 values" in error.reason


def test_deep_nesting_refused_with_position() -> None:
    text = "rules:\n  - name: r\n    pattern: {a: " + "[" * 5000 + "]" * 5000 + "}\n"
    error = fail(text)
    assert error.line == 3 and "nested deeper than" in error.reason


def test_huge_file_refused() -> None:
    assert "longer than" in fail("#" * (1024 * 1024 + 1)).reason


def test_unreadable_file_keeps_its_rules_and_vanished_file_drops_them(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    write(tmp_path, "a.yaml", "rules:\n" + rule_yaml("r1"))
    write(tmp_path, "b.yaml", "rules:\n" + rule_yaml("r2"))
    before = load_rule_directory(tmp_path).rules
    real_read_bytes = Path.read_bytes

    def read_bytes(self: Path) -> bytes:
        if self.name == "a.yaml":
            raise PermissionError(13, "Permission denied")
        if self.name == "b.yaml":
            raise FileNotFoundError(2, "No such file or directory")
        return real_read_bytes(self)

    monkeypatch.setattr(Path, "read_bytes", read_bytes)
    result = load_rule_directory(tmp_path, before)
    assert [str(e) for e in result.errors] == [f"{tmp_path / 'a.yaml'}:1:1: cannot be read: Permission denied"]
    assert [str(rule.key) for rule in result.rules] == ["default/r1"]


def test_real_pattern_compiler_through_the_hook() -> None:
    from eventbridge.patterns.compiler import compile_pattern

    text = textwrap.dedent(
        """\
        rules:
          - name: r
            pattern:
              data:
                temp: [{numeric: [">", 5, "<", 1]}]
            targets: [{id: t, type: http, url: 'http://x/'}]
        """
    )
    with pytest.raises(RuleFileError) as info:
        parse_rule_file("x.yaml", text, compile_pattern=compile_pattern)
    assert (info.value.line, info.value.column) == (5, 26)
    assert "data.temp[0].numeric" in info.value.reason
    (rule,) = parse_rule_file("x.yaml", text.replace('"<", 1', '"<", 10'), compile_pattern=compile_pattern)
    assert rule.pattern.value == {"data": {"temp": [{"numeric": [">", 5, "<", 10]}]}}


def test_targets_of_every_type_are_read_with_their_settings() -> None:
    (rule,) = parse_rule_file(
        "rules/a.yaml",
        """
rules:
  - name: r
    pattern: {a: [1]}
    targets:
      - {id: web, type: http, url: 'http://x/'}
      - {id: audit, type: topic, topic: audit-log, tag: cold, mode: structured}
      - {id: cmd, type: mqtt, topic: 'devices/${$.data.device}/cmd', qos: 2, retain: true}
      - {id: ops, type: bus, bus: ops, retry_policy: EXPONENTIAL_DECAY_RETRY, dead_letter_topic: ops-dlq}
""",
    )
    web, audit, cmd, ops = rule.targets
    assert isinstance(web, HttpTarget)
    assert isinstance(audit, TopicTarget)
    assert (audit.topic, audit.tag, audit.mode, audit.concurrency) == ("audit-log", "cold", TargetMode.STRUCTURED, 1)
    assert isinstance(cmd, MqttTarget)
    assert (cmd.topic.text, cmd.qos, cmd.retain) == ("devices/${$.data.device}/cmd", 2, True)
    assert cmd.mode is TargetMode.BINARY
    assert isinstance(ops, BusTarget)
    assert (ops.bus, ops.dead_letter_topic, type(ops.retry_policy).__name__) == (
        "ops",
        "ops-dlq",
        "ExponentialDecayRetry",
    )


# --- schedules ---------------------------------------------------------------------------------------------------


def scheduled(schedule: str, pattern: str = "") -> str:
    return f"rules:\n  - name: r\n{pattern}    schedule: {schedule}\n    targets:\n      - {{id: t, type: http, url: 'http://x/'}}\n"


def test_a_rule_with_a_schedule_a_pattern_or_both() -> None:
    (only,) = parse_rule_file("a.yaml", scheduled("rate(5 minutes)"))
    assert only.pattern is None and isinstance(only.schedule, RateSchedule) and only.schedule.interval_s == 300
    (both,) = parse_rule_file("a.yaml", scheduled("'cron(0 9 ? * 2#1 *)'", "    pattern: {type: [a]}\n"))
    assert both.pattern is not None and both.pattern.value == {"type": ["a"]}
    assert isinstance(both.schedule, CronSchedule) and str(both.schedule) == "cron(0 9 ? * 2#1 *)"
    (plain,) = parse_rule_file("a.yaml", minimal())
    assert plain.schedule is None


@pytest.mark.parametrize(
    ("schedule", "column", "reason"),
    [
        # Plain, single- and double-quoted: the column of the part at fault.
        ("cron(0 25 * * ? *)", 22, "hours: 25 is out of range; give 0-23"),
        ("'cron(0 10 * * * *)'", 30, "one of day-of-month and day-of-week must be '?'"),
        ('"rate(1 minutes)"', 23, "a value of 1 takes the singular unit, minute"),
        ("rate(5 minute)", 22, "a value other than 1 takes the plural unit, minutes"),
        ("cron(0 10 ? * 3#1,6#3 *)", 30, "a '#' expression stands alone"),
        # Written otherwise than as its text (an escape): the scalar itself.
        ('"cron(0 25 * * ? \\x2a)"', 15, "hours: 25 is out of range"),
        ("every minute", 15, "a schedule is rate(<value> <unit>)"),
        ("5", 15, "schedule must be a string"),
        ("[rate(5 minutes)]", 15, "schedule must be a string"),
    ],
)
def test_a_bad_schedule_is_refused_at_its_column(schedule: str, column: int, reason: str) -> None:
    error = fail(scheduled(schedule))
    assert (error.line, error.column) == (3, column), str(error)
    assert reason in error.reason
    assert str(error).startswith(f"rules/a.yaml:3:{column}: rule 'r': schedule")


def test_a_changed_schedule_changes_the_rule_and_a_rewritten_one_does_not() -> None:
    (a,) = parse_rule_file("a.yaml", scheduled("cron(0 18 ? * MON-FRI *)"))
    (same,) = parse_rule_file("a.yaml", scheduled("cron(0  18 ? * 2-6 *)"))
    (other,) = parse_rule_file("a.yaml", scheduled("cron(0 19 ? * MON-FRI *)"))
    assert a == same and a != other
    diff = diff_rule_sets(RuleSet({a.key: a}), RuleSet({other.key: other}))
    assert len(diff.changed) == 1


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (
            "rules:\n  - name: a\n    patern: {}\n  - {name: b, bus: shop}\n",
            [RuleKey("default", "a"), RuleKey("shop", "b")],
        ),
        ("rules: [oops\n", []),  # not YAML
        ("- a\n- b\n", []),  # not a mapping
        ("rules: {name: a}\n", []),  # not a list
        ("rules:\n  - {name: [a]}\n  - bus: x\n", []),  # no name to read
        ("sources: []\n", []),
    ],
)
def test_a_refused_file_names_the_rules_it_was_meant_to_hold_as_far_as_it_reads(
    text: str, expected: list[RuleKey]
) -> None:
    assert list(declared_rules(text)) == expected
