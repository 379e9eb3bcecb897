"""RocketMQ 4 remoting benchmark: `mqgate serve`'s broker port driven by the C++ client (rocketmq-client-python
0.5.0rc2), against the same client talking to a bare asyncio server that stores nothing. One run measures both.

    python bench/remoting.py [--quick] [--rounds N]

* echo, the floor: a child process runs a NameServer (namesrv/, the same as mqgate's) and a bare asyncio.Protocol
  broker that decodes frames with remoting/frame.py and answers every SEND_MESSAGE at once with SUCCESS and the
  fields a send reply carries, without storing (other codes: SUCCESS, empty). It registers topic `bench` (QUEUES
  queues) with its NameServer.
The C++ client is the one `make test` installs in tests/broker_remoting/python/site (`make rocketmq4-clients`).

* send: `mqgate serve` as a child process on a fresh data directory (ASYNC_FLUSH, its default), topic `bench`
  created by a first send. One client process with THREADS threads calling the blocking send_sync on one Producer
  (the C++ producer is thread-safe and the wrapper's ctypes calls release the GIL): THREADS sends outstanding.
  Figure: 1 KiB messages acknowledged per second; `remoting.send.ratio_to_echo` is mqgate's over echo's. A send
  the client fails is counted (`remoting.send.failed`, `remoting.send.echo_failed`) and not in the rate: with 16
  threads the C++ client itself fails a few sends in ten thousand against either server ("GetTransport ... get
  timed_mutex timeout", then "No route info of this topic" in its log), its own lock given up under contention.
* pull: a PushConsumer of a new group reads what the sends stored, from the first offsets, with long-polled
  PULL_MESSAGE; the clock runs from its first message to its last. Figure: `remoting.pull.msgs_per_s`.

The clock of the sends starts after WARMUP sends (route, connections). Each figure is the median of --rounds runs.
Prints key=value lines.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.serve_child import ServeChild
from tests.broker_remoting.rocketmq4_clients import python_client_env

QUEUES = 4
THREADS = 16
BODY = b"x" * 1024
WARMUP = 200


def emit(key: str, value: float | str) -> None:
    print(f"{key}={value:.3f}" if isinstance(value, float) else f"{key}={value}", flush=True)


# --- the echo server (a child process) ---


async def echo_server() -> None:
    from namesrv.server import NameServer
    from remoting.client import RemotingClient
    from remoting.codes import RequestCode, ResponseCode
    from remoting.command import RemotingCommand
    from remoting.frame import FrameReader, encode_frame

    class EchoBroker(asyncio.Protocol):
        def connection_made(self, transport: asyncio.BaseTransport) -> None:
            self.transport = transport
            self.reader = FrameReader()
            self.offset = 0

        def data_received(self, data: bytes) -> None:
            self.reader.feed(data)
            out = []
            for request in self.reader.commands():
                if request.is_oneway:
                    continue
                fields = {}
                if request.code in (RequestCode.SEND_MESSAGE, RequestCode.SEND_MESSAGE_V2):
                    self.offset += 1
                    fields = {"msgId": f"{self.offset:032X}", "queueId": "0", "queueOffset": str(self.offset)}
                out.append(encode_frame(request.reply(ResponseCode.SUCCESS, ext_fields=fields)))
            self.transport.write(b"".join(out))  # type: ignore[attr-defined]

    loop = asyncio.get_running_loop()
    broker = await loop.create_server(EchoBroker, "127.0.0.1", 0)
    broker_port = broker.sockets[0].getsockname()[1]
    namesrv = NameServer()
    namesrv_port = await namesrv.start("127.0.0.1", 0)
    table = {"bench": {"topicName": "bench", "readQueueNums": QUEUES, "writeQueueNums": QUEUES, "perm": 6}}
    body = json.dumps({"topicConfigSerializeWrapper": {"topicConfigTable": table, "dataVersion": None}}).encode()
    fields = {"brokerAddr": f"127.0.0.1:{broker_port}", "brokerName": "echo", "brokerId": "0", "clusterName": "c"}
    client = RemotingClient()
    await client.invoke(f"127.0.0.1:{namesrv_port}", RemotingCommand(RequestCode.REGISTER_BROKER, ext_fields=fields,
                                                                     body=body), 10)  # fmt: skip
    print(f"ready namesrv=127.0.0.1:{namesrv_port}", flush=True)
    await asyncio.Event().wait()


# --- the client (a child process) ---


def client(namesrv: str, mode: str, count: int) -> None:
    from rocketmq.client import ConsumeStatus, Message, Producer, PushConsumer

    if mode == "send":
        producer = Producer("bench_producer", timeout=30000)
        producer.set_namesrv_addr(namesrv)
        producer.start()

        def message() -> Message:
            m = Message("bench")
            m.set_body(BODY)
            return m

        for _ in range(WARMUP):
            producer.send_sync(message())
        each = count // THREADS
        failed = [0]

        errors: list[str] = []

        def run() -> None:
            for _ in range(each):
                try:
                    if int(producer.send_sync(message()).status) != 0:
                        failed[0] += 1
                except Exception as exc:  # counted, and the thread goes on: a failed send is no acknowledgement
                    failed[0] += 1
                    errors.append(f"{type(exc).__name__}: {exc}")

        threads = [threading.Thread(target=run) for _ in range(THREADS)]
        start = time.monotonic()
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        elapsed = time.monotonic() - start
        producer.shutdown()
        acknowledged = each * THREADS - failed[0]
        print(json.dumps({"rate": acknowledged / elapsed, "failed": failed[0], "errors": errors[:3]}), flush=True)
        return
    consumer = PushConsumer(f"bench_reader_{time.monotonic_ns()}")
    consumer.set_namesrv_addr(namesrv)
    times: list[float] = []
    done = threading.Event()

    def callback(msg: object) -> ConsumeStatus:
        times.append(time.monotonic())
        if len(times) >= count:
            done.set()
        return ConsumeStatus.CONSUME_SUCCESS

    consumer.subscribe("bench", callback)
    consumer.start()
    done.wait(300)
    consumer.shutdown()
    rate = (len(times) - 1) / (times[-1] - times[0]) if len(times) > 1 else 0.0
    print(json.dumps({"rate": rate, "received": len(times)}), flush=True)


def run_client(namesrv: str, mode: str, count: int) -> dict[str, float]:
    done = subprocess.run(
        [sys.executable, __file__, "--client", namesrv, mode, str(count)],
        capture_output=True, text=True, timeout=900, env={**python_client_env(), "HOME": tempfile.mkdtemp()},
    )  # fmt: skip
    if done.returncode != 0:
        raise SystemExit(f"client failed: {done.stderr[-2000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def echo_round(count: int) -> float:
    process = subprocess.Popen([sys.executable, __file__, "--echo"], stdout=subprocess.PIPE, text=True)
    try:
        assert process.stdout is not None
        line = process.stdout.readline()
        namesrv = line.split("namesrv=")[1].strip()
        sent = run_client(namesrv, "send", count)
        if sent.get("failed"):
            emit("remoting.send.echo_failed", str(sent["failed"]))
        return sent["rate"]
    finally:
        process.terminate()
        process.wait()


def mqgate_round(count: int) -> tuple[float, float]:
    with tempfile.TemporaryDirectory() as data:
        serve = ServeChild(Path(data) / "data")
        try:
            namesrv = "127.0.0.1:" + serve.ready["namesrv"].rpartition(":")[2]
            sent = run_client(namesrv, "send", count)
            if sent.get("failed"):
                emit("remoting.send.failed", str(sent["failed"]))
                print(f"send errors: {sent['errors']}", file=sys.stderr)
            pulled = run_client(namesrv, "pull", count + WARMUP - int(sent.get("failed", 0)))
            return sent["rate"], pulled["rate"]
        finally:
            serve.stop()


def main() -> None:
    if sys.argv[1:2] == ["--echo"]:
        asyncio.run(echo_server())
        return
    if sys.argv[1:2] == ["--client"]:
        client(sys.argv[2], sys.argv[3], int(sys.argv[4]))
        return
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    count = 4_000 if args.quick else 40_000
    rounds = 1 if args.quick else args.rounds
    echo, sends, pulls, ratios = [], [], [], []
    for _ in range(rounds):
        echo.append(echo_round(count))
        send, pull = mqgate_round(count)
        sends.append(send)
        pulls.append(pull)
        ratios.append(send / echo[-1])
    emit("remoting.send.count", str(count))
    emit("remoting.send.threads", str(THREADS))
    emit("remoting.send.echo_msgs_per_s", statistics.median(echo))
    emit("remoting.send.msgs_per_s", statistics.median(sends))
    emit("remoting.send.ratio_to_echo", statistics.median(ratios))
    emit("remoting.pull.msgs_per_s", statistics.median(pulls))


if __name__ == "__main__":
    main()
