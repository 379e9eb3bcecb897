"""A real `mqgate serve` driven by ali-ons 3.12.0 under Node.js (installed by `make test` in tests/broker_remoting/node
from its lock file), pointed at the embedded NameServer: SEND_MESSAGE_V2 sends, long-polled pulls filtered by tag,
and a group's offsets kept across a consumer's restart."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from tests.proxy.serving import start, write_topics

pytestmark = pytest.mark.slow

NODE_DIR = Path(__file__).resolve().parent / "node"
CLIENT_TIMEOUT_S = 90.0


def ons(namesrv: str, *args: object) -> list[dict]:
    done = subprocess.run(
        ["node", "ons_driver.js", namesrv, *map(str, args)],
        cwd=NODE_DIR, capture_output=True, text=True, timeout=CLIENT_TIMEOUT_S,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    # A consumer also prints {"closing": t} as it closes (tests/cluster read it): messages and send results only.
    lines = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
    return [line for line in lines if "closing" not in line]


@pytest.fixture(scope="module")
def namesrv(tmp_path_factory):
    data_dir = tmp_path_factory.mktemp("ons") / "data"
    # ali-ons routes a send only to a topic the NameServer knows (it has no TBW102 fallback): created beforehand.
    write_topics(data_dir, {"ons_tags": "NORMAL", "ons_restart": "NORMAL"})
    serve = start(data_dir)
    yield f"127.0.0.1:{serve.ready['namesrv'].rpartition(':')[2]}"
    assert serve.stop() == 0


def test_sends_v2_and_a_long_polled_consumer_filtered_by_tag(namesrv):
    sent = ons(namesrv, "send", "ons_tags", "red", 3, "r") + ons(namesrv, "send", "ons_tags", "blue", 2, "b")
    assert [result["status"] for result in sent] == ["SEND_OK"] * 5
    assert all(len(result["msgId"]) == 32 for result in sent)
    got = ons(namesrv, "consume", "ons_tags", "ons_red", "red", 3, 60)
    assert sorted(line["body"] for line in got) == ["r-0", "r-1", "r-2"]
    assert {line["tags"] for line in got} == {"red"}


def test_a_group_goes_on_from_its_committed_offsets_after_a_restart(namesrv):
    ons(namesrv, "send", "ons_restart", "t", 4, "first")
    first = ons(namesrv, "consume", "ons_restart", "ons_group", "*", 4, 60)
    assert sorted(line["body"] for line in first) == [f"first-{n}" for n in range(4)]
    ons(namesrv, "send", "ons_restart", "t", 2, "second")
    again = ons(namesrv, "consume", "ons_restart", "ons_group", "*", 2, 60)
    assert sorted(line["body"] for line in again) == ["second-0", "second-1"]
