"""Loading a directory of rule files into a RuleSet, keeping the rules (and sources, schemas and archives) in force
of a file that is refused.

The only module of the rule loader that reads files; parsing and validation are in rule_file.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from eventbridge.errors import RuleFileError
from eventbridge.rules.model import Archive, EventSchema, EventSource, Rule, RuleKey, RuleSet, SourcePosition
from eventbridge.rules.pattern_field import PatternCompileHook
from eventbridge.rules.rule_file import declared_rules, parse_rule_document

logger = logging.getLogger(__name__)

RULE_FILE_SUFFIXES = (".yaml", ".yml")


@dataclass(frozen=True, slots=True)
class ReloadResult:
    """A reload's outcome: the new rule set (valid files, plus the rules in force of files that failed), the
    errors, one per refused file, and the rules each refused file names (read leniently, by its path)."""

    rules: RuleSet
    errors: tuple[RuleFileError, ...]
    declared: Mapping[str, tuple[RuleKey, ...]] = field(default_factory=dict)


def rule_files(directory: Path) -> list[Path]:
    """The rule files of a directory, in name order; hidden files (editor swap and backup files) are skipped."""
    return sorted(
        p for p in directory.iterdir() if p.suffix in RULE_FILE_SUFFIXES and not p.name.startswith(".") and p.is_file()
    )


def load_rule_directory(
    directory: Path, in_force: RuleSet | None = None, *, compile_pattern: PatternCompileHook | None = None
) -> ReloadResult:
    """Load every rule file of `directory`. A file that fails keeps its rules from `in_force` and reports its error;
    a rule defined in two files is refused in the later one (by name)."""
    in_force = in_force if in_force is not None else RuleSet()  # an empty RuleSet is falsy (len 0)
    accepted: dict[RuleKey, Rule] = {}
    accepted_sources: dict[str, EventSource] = {}
    accepted_schemas: list[EventSchema] = []
    accepted_archives: dict[str, Archive] = {}
    errors: list[RuleFileError] = []
    declared: dict[str, tuple[RuleKey, ...]] = {}
    for file_path in rule_files(directory):
        name = str(file_path)
        text = None
        try:
            try:
                text = _read_text(file_path)
            except FileNotFoundError:
                continue  # deleted since the listing: as if it were gone already
            except OSError as exc:
                raise RuleFileError(name, 1, 1, f"cannot be read: {exc.strerror or exc}") from None
            document = parse_rule_document(name, text, compile_pattern=compile_pattern)
            rules, sources, schemas, archives = document.rules, document.sources, document.schemas, document.archives
            for rule in rules:
                if rule.key in accepted:
                    other = accepted[rule.key].position
                    pos = rule.position or SourcePosition(name, 1, 1)
                    raise RuleFileError(name, pos.line, pos.column, f"rule {rule.key} is already defined at {other}")
            for source in sources:
                if source.name in accepted_sources:
                    other = accepted_sources[source.name].position
                    pos = source.position or SourcePosition(name, 1, 1)
                    raise RuleFileError(
                        name, pos.line, pos.column, f"source {source.name!r} is already defined at {other}"
                    )
            for archive in archives:
                if archive.name in accepted_archives:
                    other = accepted_archives[archive.name].position
                    pos = archive.position or SourcePosition(name, 1, 1)
                    raise RuleFileError(
                        name, pos.line, pos.column, f"archive {archive.name!r} is already defined at {other}"
                    )
        except RuleFileError as exc:
            logger.warning("rule file refused, its rules in force stay: %s", exc)
            errors.append(exc)
            declared[name] = declared_rules(text) if text is not None else ()
            rules = tuple(rule for rule in in_force.from_file(name) if rule.key not in accepted)
            sources = tuple(s for s in in_force.sources_from_file(name) if s.name not in accepted_sources)
            schemas = tuple(in_force.schemas_from_file(name))
            archives = tuple(a for a in in_force.archives_from_file(name) if a.name not in accepted_archives)
        for rule in rules:
            accepted[rule.key] = rule
        for source in sources:
            accepted_sources[source.name] = source
        accepted_schemas += schemas
        for archive in archives:
            accepted_archives[archive.name] = archive
    result = RuleSet(accepted, accepted_sources, tuple(accepted_schemas), accepted_archives)
    return ReloadResult(result, tuple(errors), declared)


def _read_text(path: Path) -> str:
    data = path.read_bytes()
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        column = exc.start - (data.rfind(b"\n", 0, exc.start) + 1) + 1
        raise RuleFileError(str(path), line, column, "not UTF-8 text") from None
