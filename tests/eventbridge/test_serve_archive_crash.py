"""Archives across SIGKILLs of `mqgate serve`: every event PutEvents acknowledged after an archive was created is in
the archive exactly once after the restarts (those of its pattern only), whatever the moment of the kill; events
put before the archive existed are not in it, however soon after its creation the process dies."""

from __future__ import annotations

import asyncio
import collections
import contextlib
import json
import random
from pathlib import Path

import aiohttp
import pytest

from eventbridge.archives.log import ArchiveLog
from tests.eventbridge.test_rest_definitions import call
from tests.serve_process import ServeProcess

pytestmark = pytest.mark.slow

ARCHIVES = """
archives:
  - name: all
  - name: orders
    pattern: {type: [order]}
"""
BATCH = 10


def batch_of(prefix: str, start: int) -> list[dict[str, object]]:
    return [
        {
            "specversion": "1.0",
            "id": f"{prefix}-{n}",
            "source": "shop",
            "type": "order" if n % 3 else "refund",
            "data": {"n": n},
        }
        for n in range(start, start + BATCH)
    ]


async def put_until_killed(
    serve: ServeProcess, prefix: str, kill_after: int | None, acked: list[str], rng: random.Random
) -> None:
    """PutEvents in batches; SIGKILL the server once `kill_after` batches were acknowledged (None: never)."""
    url = f"{serve.http_url}/buses/default/events"
    async with aiohttp.ClientSession() as http:
        for number in range(kill_after if kill_after is not None else 30):
            batch = batch_of(prefix, number * BATCH)
            try:
                status, answer = await call(http, "POST", url, batch, "application/cloudevents-batch+json")
            except aiohttp.ClientError:
                return
            assert status == 200 and answer["FailedEntryCount"] == 0, answer
            acked += [str(event["id"]) for event in batch]
        if kill_after is not None:
            # Killed while another batch is on its way: it may be stored (and archived, once) or not.
            sending = asyncio.ensure_future(
                call(http, "POST", url, batch_of(prefix, 10_000), "application/cloudevents-batch+json")
            )
            await asyncio.sleep(rng.uniform(0, 0.01))
            serve.kill()
            with contextlib.suppress(aiohttp.ClientError):
                await sending


async def archive_state(serve: ServeProcess, name: str) -> dict[str, object]:
    async with aiohttp.ClientSession() as http:
        status, described = await call(http, "GET", f"{serve.http_url}/archives/{name}")
    assert status == 200, described
    return described


async def read_archive(directory: Path) -> list[str]:
    log = ArchiveLog.open(directory)
    try:
        return [json.loads(e.body)["id"] async for batch in log.read(-(2**62), 2**62, 1000) for e in batch]
    finally:
        log.close()


async def test_every_acknowledged_event_is_archived_exactly_once_across_sigkills(tmp_path: Path) -> None:
    rng = random.Random(14)
    data = tmp_path / "data"
    (data / "rules").mkdir(parents=True)
    acked: list[str] = []

    # Before the archives exist: these events are not theirs.
    first = ServeProcess(data, "--log-level", "WARNING")
    before: list[str] = []
    await put_until_killed(first, "before", None, before, rng)
    (data / "rules" / ".archives.yaml.tmp").write_text(ARCHIVES)
    (data / "rules" / ".archives.yaml.tmp").rename(data / "rules" / "archives.yaml")
    for _ in range(100):
        if (data / "eventbridge" / "archives" / "orders").is_dir():
            break
        await asyncio.sleep(0.05)
    for _ in range(600):  # CREATING until its files are made and open; the bound only stops a hung test
        if (await archive_state(first, "orders"))["state"] != "CREATING":
            break
        await asyncio.sleep(0.05)
    assert (await archive_state(first, "orders"))["state"] == "ENABLED"
    # Killed within a batch or two of the archives' creation: before their start could have been written by a
    # periodic flush of anything.
    await put_until_killed(first, "c0", 1, acked, rng)

    for cycle in range(1, 4):
        serve = ServeProcess(data, "--log-level", "WARNING")
        await put_until_killed(serve, f"c{cycle}", rng.randint(5, 40), acked, rng)

    last = ServeProcess(data, "--log-level", "WARNING")
    try:
        # Caught up once the count holds still and covers every acknowledged event.
        counts: list[int] = []
        for _ in range(400):
            count = (await archive_state(last, "all"))["event_count"]
            assert isinstance(count, int)
            counts.append(count)
            if len(counts) > 10 and counts[-1] == counts[-10] and counts[-1] >= len(acked):
                break
            await asyncio.sleep(0.05)
    finally:
        assert last.stop() == 0

    archives = data / "eventbridge" / "archives"
    for name, wanted in (("all", acked), ("orders", [i for i in acked if int(i.rsplit("-", 1)[1]) % 3])):
        found = collections.Counter(await read_archive(archives / name))
        repeated = {event_id: count for event_id, count in found.items() if count > 1}
        assert not repeated, f"archive {name}: archived more than once: {sorted(repeated)[:5]}"
        missing = set(wanted) - set(found)
        assert not missing, f"archive {name}: {len(missing)} acknowledged events missing, e.g. {sorted(missing)[:5]}"
        assert not set(before) & set(found), f"archive {name} holds events put before it existed"
        if name == "orders":
            assert all(int(i.rsplit("-", 1)[1]) % 3 for i in found)  # no refund in it
    assert len(acked) > 100
