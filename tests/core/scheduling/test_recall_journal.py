"""The recall journal (core/scheduling/recall_journal.py): recalls appended are read back in order; a write cut short
by a crash (a torn last line, or trailing bytes that do not parse) is dropped, damage before a good line is refused
with its line; a rewrite replaces the file whole."""

import pytest

from core import ConfigFileError
from core.scheduling.recall_journal import RecallJournal


def test_appended_recalls_are_read_back_in_order(tmp_path):
    journal = RecallJournal(tmp_path / "recalls.jsonl", durable=True)
    assert journal.read() == []
    journal.append([("t", "id 1", 5), ("t", "ünïcode", 6)])
    journal.append([("u", "id", 7)])
    assert journal.read() == [("t", "id 1", 5), ("t", "ünïcode", 6), ("u", "id", 7)]
    journal.rewrite([("u", "id", 7)])
    assert journal.read() == [("u", "id", 7)]
    assert not (tmp_path / "recalls.jsonl.tmp").exists()


@pytest.mark.parametrize("tail", [b'["t","cut', b"\x00\x00\x00\x00", b'["t","cut"]\n\x00\x00\n'])
def test_a_write_cut_short_is_dropped(tmp_path, tail, caplog):
    path = tmp_path / "recalls.jsonl"
    journal = RecallJournal(path, durable=False)
    journal.append([("t", "a", 1)])
    with path.open("ab") as file:
        file.write(tail)
    assert journal.read() == [("t", "a", 1)]
    assert "cut short by a crash" in caplog.text


def test_damage_before_a_good_line_is_refused_with_its_line(tmp_path):
    path = tmp_path / "recalls.jsonl"
    path.write_bytes(b'["t","a",1]\n{"not": "a recall"}\n["t","b",2]\n')
    with pytest.raises(ConfigFileError, match=r"line 2 column 1.*delete it to forget"):
        RecallJournal(path, durable=True).read()


def test_a_journal_that_cannot_be_written_says_so(tmp_path):
    path = tmp_path / "recalls.jsonl"
    path.mkdir()  # a directory where the file should be: refused even to root
    with pytest.raises(ConfigFileError, match="cannot be written"):
        RecallJournal(path, durable=True).append([("t", "a", 1)])
