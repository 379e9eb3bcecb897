"""The archives of a rule file (`archives:`), read from their YAML nodes and checked (rule_file.py reads the rest):

    archives:
      - name: orders-2024              # AWS ArchiveName: 1 to 48 of [.-_A-Za-z0-9], unique across buses
        bus: default                   # optional, "default": the bus whose events are archived
        description: every order       # optional, at most 512 characters (AWS)
        pattern: {type: [order]}       # optional: only matching events are archived (all when absent)
        retention_days: 30             # optional: 0 or absent keeps events indefinitely (AWS RetentionDays)

A pattern is checked by the same compiler, with errors at the same nodes, as a rule's (pattern_field.py).
"""

from __future__ import annotations

import re

from yaml.nodes import Node

from eventbridge.rules.model import DEFAULT_BUS, MAX_RETENTION_DAYS, Archive
from eventbridge.rules.node_reader import NodeReader
from eventbridge.rules.pattern_field import PatternCompileHook, read_pattern
from eventbridge.rules.source_file import BUS_NAME

# AWS ArchiveName: 1 to 48 of [.-_A-Za-z0-9]; an archive's directory is named after it, so it never holds '/'.
ARCHIVE_NAME = re.compile(r"[.\-_A-Za-z0-9]{1,48}")
# AWS's Description of an archive: at most 512 characters.
MAX_DESCRIPTION_CHARS = 512

_ARCHIVE_KEYS = ("name", "bus", "description", "pattern", "retention_days")


def read_archives(reader: NodeReader, node: Node, compile_pattern: PatternCompileHook | None) -> tuple[Archive, ...]:
    nodes = reader.sequence(node, "archives")
    if not nodes:
        raise reader.error(node, "archives is empty; give at least one archive, or leave the key out")
    archives: list[Archive] = []
    for archive_node in nodes:
        archive = _read_archive(reader, archive_node, compile_pattern)
        if any(other.name == archive.name for other in archives):
            raise reader.error(archive_node, f"archive {archive.name!r} is defined twice")
        archives.append(archive)
    return tuple(archives)


def _read_archive(reader: NodeReader, node: Node, compile_pattern: PatternCompileHook | None) -> Archive:
    fields = reader.mapping(node, "archive", _ARCHIVE_KEYS, ["name"])
    name = reader.string(
        fields["name"][1], "archive name", ARCHIVE_NAME, "use 1 to 48 of letters, digits, '.', '_', '-'"
    )
    if name in (".", ".."):
        # Valid for AWS, but the archive's directory would be its parent or itself.
        raise reader.error(fields["name"][1], f"archive name {name!r}: use at least one letter, digit, '_' or '-'")
    where = f"archive {name!r}"
    bus = DEFAULT_BUS
    if "bus" in fields:
        bus = reader.string(fields["bus"][1], f"{where}: bus", BUS_NAME, "use 1 to 64 of letters, digits, '_', '-'")
    description = ""
    if "description" in fields:
        description = reader.scalar(fields["description"][1], f"{where}: description", "str", "a string")
        if len(description) > MAX_DESCRIPTION_CHARS:
            raise reader.error(
                fields["description"][1], f"{where}: description is longer than {MAX_DESCRIPTION_CHARS} characters"
            )
    pattern = None
    if "pattern" in fields:
        pattern = read_pattern(reader, fields["pattern"][1], where, compile_pattern)
    retention_days = 0
    if "retention_days" in fields:
        retention_days = reader.integer(fields["retention_days"][1], f"{where}: retention_days", 0, MAX_RETENTION_DAYS)
    return Archive(name, bus, pattern, retention_days, description, reader.position(node))
