"""The tests' HTTP target itself: waiting for what a test expects, where at-least-once delivery may repeat some of
it, must not end at the first repeats."""

from __future__ import annotations

import aiohttp
import pytest

from tests.eventbridge.target_server import Received, TargetServer


async def post(http: aiohttp.ClientSession, target: TargetServer, event_id: str) -> None:
    headers = {"ce-id": event_id, "ce-source": "test", "ce-type": "t", "ce-specversion": "1.0"}
    async with http.post(target.url, data=b"{}", headers={**headers, "Content-Type": "application/json"}) as answer:
        assert answer.status == 204


def event_id(received: Received) -> str:
    return str(received.attributes["id"])


async def test_repeats_do_not_end_a_wait_for_every_expected_delivery(target: TargetServer) -> None:
    async with aiohttp.ClientSession() as http:
        for repeated in ("e1", "e1", "e1"):
            await post(http, target, repeated)
        # Three requests, one distinct delivery of the two expected: still waiting when the deadline comes.
        with pytest.raises(AssertionError, match=r"1 of 2 expected requests missing .* \['e2'\]"):
            await target.wait_for_all({"e1", "e2"}, event_id, timeout_s=0.5)
        await post(http, target, "e2")
        await target.wait_for_all({"e1", "e2"}, event_id)
    assert target.ids() == ["e1", "e1", "e1", "e2"]
