from core.store.queues.consume_queue import ENTRY_SIZE, ConsumeQueue


def make(tmp_path, per_file=10):
    return ConsumeQueue(tmp_path, "orders", 2, per_file)


def test_entries_are_20_bytes_at_offset_times_20(tmp_path):
    queue = make(tmp_path)
    for n in range(25):
        queue.put(n, 1000 + n * 50, 50, n % 3)
    assert ENTRY_SIZE == 20
    assert (queue.min_offset, queue.max_offset) == (0, 25)
    assert queue.get(13) == (1000 + 13 * 50, 50, 1)
    assert queue.get(25) is None
    files = sorted(p.name for p in (tmp_path / "orders" / "2").iterdir())
    assert files == [f"{n * 200:020d}" for n in range(3)]
    raw = (tmp_path / "orders" / "2" / f"{200:020d}").read_bytes()
    assert raw[3 * 20 : 4 * 20] == (1000 + 13 * 50).to_bytes(8, "big") + (50).to_bytes(4, "big") + (1).to_bytes(
        8, "big"
    )
    queue.close()


def test_entries_stop_at_file_end_and_max(tmp_path):
    queue = make(tmp_path)
    for n in range(25):
        queue.put(n, n * 10, 10, 0)
    assert [e[0] for e in queue.entries(7, 100)] == [70, 80, 90]
    assert [e[0] for e in queue.entries(20, 100)] == [200, 210, 220, 230, 240]
    assert queue.entries(25, 5) == []
    queue.close()


def test_put_is_idempotent_and_load_finds_the_end(tmp_path):
    queue = make(tmp_path)
    for n in range(17):
        queue.put(n, n * 10, 10, 5)
    for n in range(10, 17):  # a replay after a crash writes the same entries again
        queue.put(n, n * 10, 10, 5)
    queue.flush()
    queue.close()
    again = make(tmp_path)
    again.load()
    assert (again.min_offset, again.max_offset) == (0, 17)
    assert again.max_physical_end == 170
    assert again.get(16) == (160, 10, 5)
    again.close()


def test_truncate_entries_past_the_log_end(tmp_path):
    queue = make(tmp_path)
    for n in range(12):
        queue.put(n, n * 10, 10, 0)
    assert queue.truncate_from_physical(85) == 4  # entries 8..11 end at 90..120
    assert queue.max_offset == 8
    assert queue.get(8) is None
    queue.close()
    again = make(tmp_path)
    again.load()
    assert again.max_offset == 8
    again.close()


def test_delete_below_physical_moves_min_and_keeps_last_file(tmp_path):
    queue = make(tmp_path)
    for n in range(35):
        queue.put(n, n * 100, 100, 0)
    assert queue.delete_below_physical(2250) == 2  # files holding offsets 0..19 point below 2000
    assert queue.min_offset == 23  # entry 23 is the first at or past 2250
    assert queue.get(22) is None
    assert queue.get(23) == (2300, 100, 0)
    assert queue.delete_below_physical(10**9) == 1  # the file of 20..29 goes, the last file never does
    assert len(queue.files.files) == 1
    assert queue.min_offset == queue.max_offset == 35
    queue.close()


def test_offset_by_time_binary_search(tmp_path):
    queue = make(tmp_path)
    stamps = {}
    for n in range(50):
        queue.put(n, n * 10, 10, 0)
        stamps[n * 10] = 1000 + n * 7
    assert queue.offset_by_time(1000, stamps.get) == 0
    assert queue.offset_by_time(1000 + 7 * 20, stamps.get) == 20
    assert queue.offset_by_time(1000 + 7 * 20 + 1, stamps.get) == 21
    assert queue.offset_by_time(10**9, stamps.get) == 50
    queue.close()
