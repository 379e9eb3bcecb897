"""The commit protocol killed (SIGKILL) at every rename it makes, in commits and in the recovery after them."""

import json
import subprocess
import sys
from collections import Counter
from pathlib import Path

from spark_sink.table_commit import META_DIR, parse_queue_key, read_manifest

CHILD = Path(__file__).with_name("commit_crash_child.py")
ROOT = Path(__file__).parents[2]


def run_child(table: Path, kill_at: int, batches: int) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(CHILD), str(table), str(kill_at), str(batches)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )


def rows_after_recovery(table: Path) -> Counter[tuple[str, int, int]]:
    """What the table holds once opened again: its data files plus the committed batch's files still in staging
    (recovery moves those in). Read without opening, so the next child meets the crash as it was left."""
    manifest = read_manifest(table)
    files = [path for path in table.rglob("*.parquet") if META_DIR not in path.relative_to(table).parts]
    staged = table / META_DIR / "staging" / manifest.staged
    files += [staged / name for name in manifest.moving if (staged / name).exists()]
    rows: Counter[tuple[str, int, int]] = Counter()
    for path in files:
        rows.update(tuple(row) for row in json.loads(path.read_text()))
    return rows


def test_sigkill_at_every_rename_loses_and_duplicates_nothing(tmp_path: Path) -> None:
    table = tmp_path / "table"
    kill_at = 1
    kills = 0
    while True:
        result = run_child(table, kill_at, batches=2)
        rows = rows_after_recovery(table)
        offsets = {parse_queue_key(key): n for key, n in read_manifest(table).offsets.items()}
        expected = Counter((q.topic, q.queue_id, offset) for q, n in offsets.items() for offset in range(n))
        assert rows == expected, f"killed at rename {kill_at}"
        if result.returncode == 0:
            break
        assert result.returncode == -9, result.stderr
        kills += 1
        kill_at += 1
    # Every rename of two commits and of the recoveries after the kills was a kill point.
    assert kills >= 2 * (1 + 6), kills
    print(f"kills={kills}")
    # The last child opened the table cleanly: nothing left in staging, every committed row in place.
    assert list((table / META_DIR / "staging").iterdir()) == []
    assert sum(rows.values()) == sum(read_manifest(table).offsets.values())
