"""Sends to one broker's remoting port directly, with no NameServer (a client beside a broker cut off from the rest
of its cluster, run inside the broker's network namespace):

    python -m tests.cluster.direct_sender ADDRESS BROKER_NAME TOPIC PREFIX SECONDS

One JSON line per send: {"body", "code", "remark", "t"} with the broker's answer, or {"body", "error", "t"}."""

from __future__ import annotations

import asyncio
import json
import sys
import time

from core import Message, MessageQueue
from remote_client.send_request import send_request
from remoting.client import RemotingClient

TIMEOUT_S = 5.0


async def main(address: str, broker_name: str, topic: str, prefix: str, seconds: float) -> None:
    client = RemotingClient()
    deadline = time.monotonic() + seconds
    n = 0
    try:
        while time.monotonic() < deadline:
            body = f"{prefix}-{n}"
            n += 1
            message = Message(topic, body.encode(), properties={"UNIQ_KEY": f"{prefix}{n:08d}"})
            request = send_request("direct_sender", MessageQueue(topic, broker_name, 0), message)
            line: dict[str, object] = {"body": body, "t": time.time()}
            try:
                reply = await client.invoke(address, request, TIMEOUT_S)
                line.update(code=int(reply.code), remark=reply.remark or "")
            except Exception as exc:
                line["error"] = f"{type(exc).__name__}: {exc}"
            print(json.dumps(line), flush=True)
            await asyncio.sleep(0.1)
    finally:
        await client.close()


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4], float(sys.argv[5])))
