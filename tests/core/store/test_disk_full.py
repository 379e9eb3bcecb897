"""A really full file system: a 4 MiB tmpfs (the tests run as root, as CI does; skipped where mount is refused)."""

import subprocess
import uuid

import pytest

from core.store.errors import StoreNotWritableError
from core.store.message import Message
from core.store.message_store import GetStatus


@pytest.fixture
def tiny_fs(tmp_path):
    mount_point = tmp_path / f"tiny-{uuid.uuid4().hex[:6]}"
    mount_point.mkdir()
    result = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=4m", "tmpfs", str(mount_point)], capture_output=True)
    if result.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {result.stderr.decode().strip()}")
    yield mount_point
    subprocess.run(["umount", "-l", str(mount_point)], check=False)


def test_full_disk_refuses_with_a_clear_error_and_keeps_what_it_has(tiny_fs, open_store):
    # Retention would start deleting (usage is far above 75%): keep it out of this test.
    store = open_store(
        tiny_fs / "store",
        segment_size=1024 * 1024,
        max_message_size=64 * 1024,
        write_ring_size=256 * 1024,
        disk_clean_ratio=1.0,
        disk_warn_ratio=1.0,
        disk_refuse_ratio=1.0,
        cq_entries_per_file=100,
    )
    written = 0
    with pytest.raises(StoreNotWritableError, match=r"cannot create commit-log segment .*No space left"):
        for n in range(1000):
            store.append(Message(topic="t", body=bytes([n % 256]) * 40_000))
            written += 1
    assert 40 < written < 100
    # Consume queues keep up even when the index cannot get a file (queries by key have a gap, logged).
    assert store.wait_dispatched(timeout=5)
    got = store.get_messages("t", 0, 0, max_count=1000, max_bytes=10**9)
    assert got.status is GetStatus.FOUND
    assert [m.body[0] for m in got.messages] == [n % 256 for n in range(written)]
    with pytest.raises(StoreNotWritableError):  # and again: still refused, still no crash
        store.append(Message(topic="t", body=b"x" * 40_000))
