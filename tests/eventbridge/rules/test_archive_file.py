"""Archive definitions in rule files (`archives:`): parsing, refusals at file:line:column, the real pattern compiler
at the node inside the pattern, and a directory reload that keeps the archives of a refused file."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from eventbridge.errors import RuleFileError
from eventbridge.patterns.compiler import compile_pattern
from eventbridge.rules.directory import load_rule_directory
from eventbridge.rules.model import Archive
from eventbridge.rules.rule_file import parse_rule_document


def parse(text: str) -> tuple[Archive, ...]:
    return parse_rule_document("rules/a.yaml", textwrap.dedent(text), compile_pattern=compile_pattern).archives


def fail(text: str) -> RuleFileError:
    with pytest.raises(RuleFileError) as info:
        parse(text)
    return info.value


def test_archives_with_every_field_and_with_defaults() -> None:
    archives = parse(
        """\
        archives:
          - name: orders.2024_v-1
            bus: shop
            description: every order
            pattern: {type: [order], data: {amount: [{numeric: [">", 0]}]}}
            retention_days: 30
          - name: all
        """
    )
    full, bare = archives
    assert (full.name, full.bus, full.description, full.retention_days) == (
        "orders.2024_v-1",
        "shop",
        "every order",
        30,
    )
    assert full.pattern is not None and full.pattern.value == {
        "type": ["order"],
        "data": {"amount": [{"numeric": [">", 0]}]},
    }
    assert str(full.position) == "rules/a.yaml:2:5"
    assert (bare.bus, bare.pattern, bare.retention_days, bare.description) == ("default", None, 0, "")


def test_an_archive_compares_by_content_not_by_where_it_was_written() -> None:
    one = parse("archives:\n  - {name: a, pattern: {type: [x]}}\n")[0]
    moved = parse("\n\narchives:\n  - name: a\n    pattern:\n      type: [x]\n")[0]
    assert one == moved and one.position != moved.position
    assert one != parse("archives:\n  - {name: a, pattern: {type: [x]}, retention_days: 1}\n")[0]


def test_a_file_of_archives_only_and_next_to_rules() -> None:
    document = parse_rule_document(
        "b.yaml",
        "archives: [{name: a}]\nrules:\n  - {name: r, pattern: {type: [x]}, targets: [{id: t, type: http, url: 'http://x/'}]}\n",
    )
    assert [a.name for a in document.archives] == ["a"] and [r.name for r in document.rules] == ["r"]


@pytest.mark.parametrize(
    ("text", "line", "column", "reason"),
    [
        ("archives: {name: a}\n", 1, 11, "archives must be a list"),
        ("archives: []\n", 1, 11, "archives is empty"),
        ("archives:\n  - bus: default\n", 2, 5, "archive: 'name' is missing"),
        ("archives:\n  - name: a\n    retention: 3\n", 3, 5, "unknown key 'retention'; did you mean 'retention_days'?"),
        ("archives:\n  - name: 'a b'\n", 2, 11, "archive name 'a b': use 1 to 48 of letters"),
        ("archives:\n  - name: " + "x" * 49 + "\n", 2, 11, "use 1 to 48"),
        ("archives:\n  - name: '..'\n", 2, 11, "archive name '..': use at least one letter"),
        ("archives:\n  - name: a\n    bus: a.b\n", 3, 10, "archive 'a': bus 'a.b'"),
        ("archives:\n  - name: a\n    retention_days: -1\n", 3, 21, "retention_days is -1; give an integer from 0"),
        ("archives:\n  - name: a\n    retention_days: 2.5\n", 3, 21, "retention_days must be an integer"),
        ("archives:\n  - name: a\n    retention_days: '30'\n", 3, 21, "retention_days must be an integer"),
        ("archives:\n  - name: a\n    description: [x]\n", 3, 18, "description must be a string"),
        ("archives:\n  - name: a\n    description: " + "d" * 513 + "\n", 3, 18, "longer than 512 characters"),
        ("archives:\n  - name: a\n    pattern: {}\n", 3, 14, "pattern must be a non-empty mapping"),
        ("archives:\n  - name: a\n    pattern: [x]\n", 3, 14, "pattern must be a non-empty mapping"),
        ("archives:\n  - name: a\n  - name: a\n", 3, 5, "archive 'a' is defined twice"),
        ("archivez: []\n", 1, 1, "unknown key 'archivez'; did you mean 'archives'?"),
    ],
)
def test_invalid_archives_refused_at_the_node(text: str, line: int, column: int, reason: str) -> None:
    error = fail(text)
    assert (error.path, error.line, error.column) == ("rules/a.yaml", line, column), str(error)
    assert reason in error.reason, error.reason


def test_a_bad_pattern_is_refused_at_the_node_inside_it() -> None:
    error = fail(
        """\
        archives:
          - name: a
            pattern:
              type: [order]
              data: {amount: [{numeric: [">>", 0]}]}
        """
    )
    assert (error.line, error.column) == (5, 34), str(error)
    assert error.reason.startswith("archive 'a': pattern: ")


def write(directory: Path, name: str, text: str) -> None:
    (directory / name).write_text(text)


def test_directory_refuses_an_archive_defined_twice_and_keeps_those_of_a_refused_file(tmp_path: Path) -> None:
    write(tmp_path, "a.yaml", "archives:\n  - {name: one, retention_days: 5}\n")
    write(tmp_path, "b.yaml", "archives:\n  - {name: two, bus: shop}\n")
    first = load_rule_directory(tmp_path, compile_pattern=compile_pattern)
    assert first.errors == ()
    assert {name: (a.bus, a.retention_days) for name, a in first.rules.archives.items()} == {
        "one": ("default", 5),
        "two": ("shop", 0),
    }

    # b.yaml breaks: its archive stays in force; c.yaml defines 'one' again and is refused where it does.
    write(tmp_path, "b.yaml", "archives:\n  - {name: two, retention_days: x}\n")
    write(tmp_path, "c.yaml", "\narchives:\n  - {name: one}\n")
    second = load_rule_directory(tmp_path, first.rules, compile_pattern=compile_pattern)
    assert sorted((Path(e.path).name, e.line, e.column) for e in second.errors) == [("b.yaml", 2, 33), ("c.yaml", 3, 5)]
    assert "archive 'one' is already defined at" in next(e.reason for e in second.errors if e.path.endswith("c.yaml"))
    assert second.rules.archives == first.rules.archives

    # b.yaml deleted: its archive goes.
    (tmp_path / "b.yaml").unlink()
    (tmp_path / "c.yaml").unlink()
    third = load_rule_directory(tmp_path, second.rules, compile_pattern=compile_pattern)
    assert sorted(third.rules.archives) == ["one"]
