import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from core.errors import ConfigFileError
from core.tables.json_file import DataVersion, read_json, read_table, write_json


def test_round_trip(tmp_path):
    path = tmp_path / "config" / "topics.json"
    data = {"topicConfigTable": {"caf\u00e9": {"perm": 6}}, "list": [1, 2.5, None, True], "nested": {"a": {}}}
    write_json(path, data)
    assert read_json(path) == data
    assert not (tmp_path / "config" / "topics.json.tmp").exists()


def test_missing_file_reads_as_none(tmp_path):
    assert read_json(tmp_path / "absent.json") is None


def test_previous_version_is_kept_as_backup(tmp_path):
    path = tmp_path / "topics.json"
    write_json(path, {"v": 1})
    assert not (tmp_path / "topics.json.bak").exists()
    write_json(path, {"v": 2})
    write_json(path, {"v": 3})
    assert read_json(path) == {"v": 3}
    assert json.loads((tmp_path / "topics.json.bak").read_text()) == {"v": 2}


def test_leftover_tmp_from_a_crash_is_ignored_and_replaced(tmp_path):
    path = tmp_path / "topics.json"
    write_json(path, {"v": 1})
    # A crash between writing the .tmp and the rename leaves a torn .tmp beside the intact file.
    (tmp_path / "topics.json.tmp").write_text('{"v": 2, "tor')
    assert read_json(path) == {"v": 1}
    write_json(path, {"v": 3})
    assert read_json(path) == {"v": 3}
    assert not (tmp_path / "topics.json.tmp").exists()


def test_crash_after_backup_before_rename_keeps_the_old_file(tmp_path):
    path = tmp_path / "topics.json"
    write_json(path, {"v": 1})
    # The state right before the rename: new content only in .tmp, old content in both the file and .bak.
    (tmp_path / "topics.json.tmp").write_text('{"v": 2}')
    (tmp_path / "topics.json.bak").write_text('{"v": 1}')
    assert read_json(path) == {"v": 1}


def test_malformed_file_is_refused_with_line_and_column(tmp_path):
    path = tmp_path / "topics.json"
    write_json(path, {"v": 1})
    write_json(path, {"v": 2})
    path.write_text('{\n    "a": 1,\n    "b": 2\n    "c": 3\n}\n')
    with pytest.raises(ConfigFileError) as caught:
        read_json(path)
    error = caught.value
    assert (error.line, error.column) == (4, 5)
    assert error.path == path
    assert str(error) == (
        f"{path} line 4 column 5: Expecting ',' delimiter; fix or delete the file (a backup is in topics.json.bak)"
    )


def test_malformed_file_without_backup_says_so(tmp_path):
    path = tmp_path / "consumerOffset.json"
    path.write_text('{"offsetTable": {"a@b": {"0": 1,}}}')
    with pytest.raises(ConfigFileError, match=r"line 1 column 33: .*; fix or delete the file$"):
        read_json(path)


def test_invalid_utf8_is_refused_with_position(tmp_path):
    path = tmp_path / "topics.json"
    path.write_bytes(b'{\n  "a": "\xff"\n}')
    with pytest.raises(ConfigFileError, match="line 2 column 9: not UTF-8") as caught:
        read_json(path)
    assert (caught.value.line, caught.value.column) == (2, 9)


def test_missing_file_falls_back_to_backup_with_a_warning(tmp_path, caplog):
    path = tmp_path / "topics.json"
    write_json(path, {"v": 1})
    write_json(path, {"v": 2})
    path.unlink()
    with caplog.at_level("WARNING", logger="core.tables.json_file"):
        assert read_json(path) == {"v": 1}
    assert "is missing; loading the previous version" in caplog.text


def test_empty_file_falls_back_to_backup(tmp_path, caplog):
    path = tmp_path / "topics.json"
    write_json(path, {"v": 1})
    write_json(path, {"v": 2})
    path.write_bytes(b"")
    with caplog.at_level("WARNING", logger="core.tables.json_file"):
        assert read_json(path) == {"v": 1}
    assert "is empty" in caplog.text


def test_empty_file_without_backup_is_refused(tmp_path):
    path = tmp_path / "topics.json"
    path.write_bytes(b"  \n")
    with pytest.raises(ConfigFileError, match="empty and there is no backup"):
        read_json(path)


def test_malformed_backup_is_refused(tmp_path):
    path = tmp_path / "topics.json"
    (tmp_path / "topics.json.bak").write_text("{oops")
    with pytest.raises(ConfigFileError) as caught:
        read_json(path)
    assert caught.value.path == tmp_path / "topics.json.bak"
    assert (caught.value.line, caught.value.column) == (1, 2)


def test_unencodable_data_leaves_the_file_alone(tmp_path):
    path = tmp_path / "topics.json"
    write_json(path, {"v": 1})
    with pytest.raises(TypeError):
        write_json(path, {"v": object()})
    assert read_json(path) == {"v": 1}
    assert not (tmp_path / "topics.json.bak").exists()
    assert not (tmp_path / "topics.json.tmp").exists()


def test_data_version_counts_changes():
    first = DataVersion().next()
    second = first.next()
    assert (first.counter, second.counter) == (1, 2)
    assert second.timestamp >= first.timestamp > 1_600_000_000_000


def test_read_table_checks_the_shape(tmp_path):
    path = tmp_path / "topics.json"
    write_json(path, {"topicConfigTable": {"a": {}}, "dataVersion": {"timestamp": 5, "counter": 2}})
    assert read_table(path, "topicConfigTable") == ({"a": {}}, DataVersion(5, 2))
    write_json(path, [1, 2])
    with pytest.raises(ConfigFileError, match="top level must be a JSON object, found list"):
        read_table(path, "topicConfigTable")
    write_json(path, {"topicConfigTable": [], "dataVersion": {"counter": 1}})
    with pytest.raises(ConfigFileError, match="topicConfigTable must be a JSON object"):
        read_table(path, "topicConfigTable")
    write_json(path, {"topicConfigTable": {}, "dataVersion": {"counter": "1"}})
    with pytest.raises(ConfigFileError, match=r"dataVersion\.counter must be a non-negative integer"):
        read_table(path, "topicConfigTable")


_WRITER = """
import sys
from pathlib import Path
from core.tables.json_file import write_json
path = Path(sys.argv[1])
for n in range(1, 1_000_000):
    write_json(path, {"n": n, "padding": "x" * 4096})
    print(n, flush=True)
"""


@pytest.mark.parametrize("kill_after", [1, 7, 40])
def test_sigkill_during_writes_leaves_a_readable_file(tmp_path, kill_after):
    path = tmp_path / "topics.json"
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[3])}
    child = subprocess.Popen([sys.executable, "-c", _WRITER, str(path)], stdout=subprocess.PIPE, text=True, env=env)
    assert child.stdout is not None
    acknowledged = 0
    while acknowledged < kill_after:
        acknowledged = int(child.stdout.readline())
    child.send_signal(signal.SIGKILL)
    child.wait()
    content = read_json(path)
    assert isinstance(content, dict)
    assert content["n"] >= acknowledged
    assert content["padding"] == "x" * 4096
