"""RocketMQ 5 gRPC endpoint benchmark: `mqgate serve`'s SendMessage and ReceiveMessage+Ack, driven by the official
client (rocketmq-python-client), against the floor of this transport here. One run measures all three.

    python bench/grpc_endpoint.py [--quick] [--rounds N]

* echo, the floor: the official client and grpc.aio with a server that stores nothing. A child process serves the
  same service, apache.rocketmq.v2.MessagingService, on grpc.aio (on uvloop when installed, as `mqgate serve`):
  SendMessage answers every request at once with an OK SendMessageResponse of one entry. QueryRoute (QUEUES
  queues, all on itself), Heartbeat, Telemetry (a settings command is answered with the same settings) and
  NotifyClientTermination get the least the client needs to start and stop. It is driven exactly as mqgate is
  below, so the ratio isolates what mqgate's mapping and store cost over the transport and the client.
* send: `mqgate serve`, a child process on a fresh data directory (ASYNC_FLUSH, its default), topic `bench` with
  QUEUES queues in DATA_DIR/config/topics.json. PRODUCERS Producers, each in its own process (the client runs
  every RPC of a process on one shared IO-loop thread, so producers in one process would not be concurrent),
  each send 1 KiB messages with send_async, keeping WINDOW sends outstanding (refilled as each completes): what a
  user does for throughput. Figure: messages acknowledged per second, and its ratio to echo's. The same
  producers then send a smaller count with the blocking `send` (one outstanding each): `send_sync`, also against
  echo (`echo_sync`).
* receive_ack: CONSUMERS SimpleConsumers of one group, each in its own process, receive what the producers stored
  (RECEIVE_BATCH a receive, invisible INVISIBLE_S) and ack every message while receiving on (up to WINDOW acks
  outstanding), until all are acknowledged. Figure: messages acknowledged per second. The acks are the blocking
  `ack`, called from ACK_THREADS threads per process: the client's ack_async (5.1.2) cannot be waited for (it
  drops the future it makes, and that future is an asyncio.Future completed from another thread, whose callbacks
  never run). Every message must be received once (`lost_messages`, `duplicates`).

Clients start, connect and send WARMUP messages each (route, channel, Telemetry stream; consumers: route and
Telemetry) before the clock, then wait at a barrier with this process; the clock runs from the barrier to the
last acknowledgement in any client process (CLOCK_MONOTONIC is one clock for all processes). Clients and server
share this machine's cores: `client_cpu_cores` and `server_cpu_cores` (CPU time over the timed interval) show
which side was saturated, and `server_cpu_us_per_msg` (server CPU over the timed interval, per message) what a
message costs the server. The official Python client spends a few hundred microseconds of CPU on each send and
hands every RPC between threads, so the clients can be the limit of both rates; then the rates of echo and
mqgate are closer than their costs are, and the CPU per message shows the server's own cost apart.
`grpc.serve.rss_mb` is the serve process's resident memory after a round.
Each figure is the median of --rounds runs, each ratio the median of the rounds' ratios; failures, losses and
duplicates are printed (the worst round's) when not zero. Prints key=value lines; serve's warnings and errors go to
stderr. MQGATE_BENCH_PROFILE=FILE runs the serve process under cProfile, written to FILE at its clean stop (the
last round's).

The file is named as its issue asks; `grpc` is also the package it uses, so it takes its own directory off
sys.path first. Client processes get a temporary HOME: the client writes its log under ~/logs/rocketmq_python.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import multiprocessing
import os
import queue
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import AsyncIterator, Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.serve_child import ServeChild  # noqa: E402
from proxy.stubs import (  # noqa: E402
    Code,
    MessageType,
    MessagingServiceServicer,
    Permission,
    add_MessagingServiceServicer_to_server,
    definition_pb2,
)
from proxy.stubs import service_pb2 as pb  # noqa: E402

TOPIC = "bench"
GROUP = "bench-group"
QUEUES = 4
BODY = b"x" * 1024
PRODUCERS = 4
CONSUMERS = 4
# Sends (and acks) outstanding per client process: enough to keep the server busy while the client's one IO
# thread prepares the next, as bench/mqtt.py's QoS 1 window.
WINDOW = 64
# Sent by each producer before the clock: the first sends open the channel and load the route.
WARMUP = 64
RECEIVE_BATCH = 32
# Threads per consumer process that ack with the blocking `ack` (the client's ack_async is unusable: module
# docstring). One consumer against mqgate serve, measured once on the 2-vCPU VM: 1 thread 880 acks/s, 8 threads
# 1,750, 16 threads 2,090.
ACK_THREADS = 16
# Long enough that no message becomes visible again during a run (the endpoint takes 10 s at least).
INVISIBLE_S = 15
# A consumer's long poll, in seconds: the endpoint's least (5 s), the wait of an idle consumer at the end.
LONG_POLL_S = 5
START_TIMEOUT_S = 120
PHASE_TIMEOUT_S = 600
STOP_TIMEOUT_S = 60


def emit(key: str, value: float) -> None:
    text = str(value) if isinstance(value, int) else f"{value:.3f}" if value < 100 else f"{value:.0f}"
    print(f"{key}={text}", flush=True)


def process_cpu_s(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


# --- the floor: a MessagingService that stores nothing ------------------------------------------------------------


def _ok() -> definition_pb2.Status:
    return definition_pb2.Status(code=Code.OK, message="OK")


class EchoService(MessagingServiceServicer):
    def __init__(self) -> None:
        self.own = definition_pb2.Endpoints()
        self.offsets = itertools.count()

    async def QueryRoute(self, request: pb.QueryRouteRequest, context: Any) -> pb.QueryRouteResponse:
        endpoints = request.endpoints if request.endpoints.addresses else self.own
        broker = definition_pb2.Broker(name="echo", id=0, endpoints=endpoints)
        queues = [
            definition_pb2.MessageQueue(
                topic=request.topic,
                id=i,
                permission=Permission.READ_WRITE,
                broker=broker,
                accept_message_types=[MessageType.NORMAL],
            )
            for i in range(QUEUES)
        ]
        return pb.QueryRouteResponse(status=_ok(), message_queues=queues)

    async def Heartbeat(self, request: pb.HeartbeatRequest, context: Any) -> pb.HeartbeatResponse:
        return pb.HeartbeatResponse(status=_ok())

    async def NotifyClientTermination(self, request: Any, context: Any) -> pb.NotifyClientTerminationResponse:
        return pb.NotifyClientTerminationResponse(status=_ok())

    async def Telemetry(self, requests: AsyncIterator[Any], context: Any) -> AsyncIterator[pb.TelemetryCommand]:
        async for command in requests:
            if command.HasField("settings"):
                yield pb.TelemetryCommand(status=_ok(), settings=command.settings)

    async def SendMessage(self, request: pb.SendMessageRequest, context: Any) -> pb.SendMessageResponse:
        entry = pb.SendResultEntry(
            status=_ok(), message_id=request.messages[0].system_properties.message_id, offset=next(self.offsets)
        )
        return pb.SendMessageResponse(status=_ok(), entries=[entry])


def echo_server(control: Any) -> None:
    """Child process: serve EchoService on 127.0.0.1, send the port, stop when `control` says so."""
    from mqgate.process import run

    run(_serve_echo(control))


async def _serve_echo(control: Any) -> None:
    import grpc

    server = grpc.aio.server()
    service = EchoService()
    add_MessagingServiceServicer_to_server(service, server)
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    service.own = definition_pb2.Endpoints(addresses=[definition_pb2.Address(host="127.0.0.1", port=port)])
    control.send(port)
    await asyncio.get_running_loop().run_in_executor(None, control.recv)
    await server.stop(1)


class Echo:
    def __init__(self, spawn: Any) -> None:
        self.control, child_end = spawn.Pipe()
        self.process = spawn.Process(target=echo_server, args=(child_end,), name="grpc bench echo server")
        self.process.start()
        child_end.close()
        if not self.control.poll(START_TIMEOUT_S):
            self.process.kill()
            raise SystemExit("the echo server did not start")
        self.address = f"127.0.0.1:{self.control.recv()}"
        self.pid = self.process.pid

    def stop(self) -> None:
        self.control.send("stop")
        self.process.join(STOP_TIMEOUT_S)
        if self.process.is_alive():
            self.process.kill()
        self.control.close()


# --- mqgate serve -------------------------------------------------------------------------------------------------


class Serve(ServeChild):
    def __init__(self, data_dir: Path) -> None:
        (data_dir / "config").mkdir(parents=True)
        topic = {"topicName": TOPIC, "readQueueNums": QUEUES, "writeQueueNums": QUEUES, "perm": 6}
        (data_dir / "config" / "topics.json").write_text(json.dumps({"topicConfigTable": {TOPIC: topic}}))
        super().__init__(data_dir, data_dir.parent / f"{data_dir.name}.stderr")
        self.address = f"127.0.0.1:{self.ready['grpc'].rsplit(':', 1)[1]}"

    def stop(self) -> int:
        code = super().stop()
        troubles = [line for line in self.stderr().splitlines() if " WARNING " in line or " ERROR " in line
                    or line.startswith("Traceback")]  # fmt: skip
        if troubles or code != 0:
            print(f"# mqgate serve exited {code}; {len(troubles)} warning/error lines:",
                  *troubles[:20], sep="\n# ", file=sys.stderr)  # fmt: skip
        return code


# --- client processes ---------------------------------------------------------------------------------------------


@dataclass(slots=True)
class Phase:
    count: int
    window: int  # 1: the blocking send


def _client_home(home: str) -> None:
    Path(home).mkdir(parents=True, exist_ok=True)
    os.environ["HOME"] = home  # before `import rocketmq`: its log goes under ~/logs/rocketmq_python


def send_all(producer: Any, message_type: Callable[[], Any], phase: Phase) -> int:
    """Send `phase.count` messages; the number that failed. Returns once every send is answered."""

    def message() -> Any:
        m = message_type()
        m.topic = TOPIC
        m.body = BODY
        return m

    if phase.window == 1:
        failed = 0
        for _ in range(phase.count):
            try:
                producer.send(message())
            except Exception:
                failed += 1
        return failed
    slots = threading.BoundedSemaphore(phase.window)
    failures: list[BaseException] = []

    def done(future: Any) -> None:
        if future.exception() is not None:
            failures.append(future.exception())
        slots.release()

    for _ in range(phase.count):
        slots.acquire()
        producer.send_async(message()).add_done_callback(done)
    for _ in range(phase.window):
        slots.acquire()
    return len(failures)


def produce(address: str, home: str, phases: list[Phase], barrier: Any, results: Any) -> None:
    """Child process: one Producer; WARMUP sends, then each phase from the barrier on, reporting
    (end time, CPU seconds, failed sends) for each."""
    try:
        _client_home(home)
        from rocketmq import ClientConfiguration, Credentials, Message, Producer

        producer = Producer(ClientConfiguration(address, Credentials()), (TOPIC,))
        producer.startup()
    except BaseException:
        barrier.abort()
        raise
    try:
        if send_all(producer, Message, Phase(WARMUP, WINDOW)):
            barrier.abort()
            raise SystemExit(f"producer: warm-up sends to {address} failed")
        for phase in phases:
            barrier.wait(START_TIMEOUT_S)
            cpu = time.process_time()
            failed = send_all(producer, Message, phase)
            results.put((time.monotonic(), time.process_time() - cpu, failed))
    finally:
        producer.shutdown()


def consume(address: str, home: str, total: int, received: Any, barrier: Any, results: Any) -> None:
    """Child process: one SimpleConsumer; from the barrier on, receive and ack until the consumers together have
    received `total`, reporting (time of the last ack, CPU seconds, acks failed, message ids received)."""
    try:
        _client_home(home)
        from rocketmq import ClientConfiguration, Credentials, FilterExpression, SimpleConsumer

        config = ClientConfiguration(address, Credentials())
        consumer = SimpleConsumer(config, GROUP, {TOPIC: FilterExpression("*")}, await_duration=LONG_POLL_S)
        consumer.startup()
    except BaseException:
        barrier.abort()
        raise
    ids: list[str] = []
    failures: list[BaseException] = []
    last_ack = [0.0]
    slots = threading.BoundedSemaphore(WINDOW)

    def done(future: Any) -> None:
        if future.exception() is not None:
            failures.append(future.exception())
        last_ack[0] = time.monotonic()
        slots.release()

    acks = ThreadPoolExecutor(ACK_THREADS, thread_name_prefix="ack")
    try:
        barrier.wait(START_TIMEOUT_S)
        cpu = time.process_time()
        deadline = time.monotonic() + PHASE_TIMEOUT_S
        while received.value < total and time.monotonic() < deadline:
            messages = consumer.receive(RECEIVE_BATCH, INVISIBLE_S)
            if not messages:
                continue
            with received.get_lock():
                received.value += len(messages)
            for m in messages:
                ids.append(m.message_id)
                slots.acquire()
                acks.submit(consumer.ack, m).add_done_callback(done)
        for _ in range(WINDOW):
            slots.acquire()
        results.put((last_ack[0], time.process_time() - cpu, len(failures), ids))
    finally:
        acks.shutdown()
        consumer.shutdown()


def stop_clients(processes: list[Any]) -> None:
    for p in processes:
        p.join(STOP_TIMEOUT_S)
        if p.is_alive():
            p.kill()
            p.join()


@dataclass(slots=True)
class Rate:
    msgs_per_s: float
    client_cpu_cores: float
    server_cpu_cores: float
    server_cpu_us_per_msg: float
    failed: int


def timed(barrier: Any, server_pid: int, results: Any, processes: list[Any]) -> tuple[list[Any], float, float]:
    """Release the barrier and wait for every client's result: (results, seconds from the barrier to the last
    client's end, the server's CPU seconds in that interval). The server's CPU is sampled while waiting, so that an
    idle tail (a consumer's last long poll) does not count."""
    barrier.wait(START_TIMEOUT_S)
    started = time.monotonic()
    samples = [(started, process_cpu_s(server_pid))]
    got: list[Any] = []
    while len(got) < len(processes):
        try:
            got.append(results.get(timeout=0.1))
        except queue.Empty:
            dead = [p for p in processes if p.exitcode not in (None, 0)]
            if dead or time.monotonic() > started + PHASE_TIMEOUT_S:
                what = [(p.name, p.exitcode) for p in dead] or "timeout"
                raise SystemExit(f"client processes failed: {what}") from None
        samples.append((time.monotonic(), process_cpu_s(server_pid)))
    ended = max(r[0] for r in got)
    after = next((i for i, (t, _) in enumerate(samples) if t >= ended), len(samples) - 1)
    (t0, cpu0), (t1, cpu1) = samples[max(after - 1, 0)], samples[after]
    cpu_at_end = cpu0 + (cpu1 - cpu0) * min(max((ended - t0) / (t1 - t0), 0.0), 1.0) if t1 > t0 else cpu1
    return got, ended - started, cpu_at_end - samples[0][1]


def rate(count: int, elapsed: float, client_cpu: float, server_cpu: float, failed: int) -> Rate:
    return Rate(count / elapsed, client_cpu / elapsed, server_cpu / elapsed, server_cpu / count * 1e6, failed)


def run_producers(spawn: Any, address: str, server_pid: int, phases: list[Phase], home: Path) -> list[Rate]:
    barrier = spawn.Barrier(PRODUCERS + 1)
    results = spawn.Queue()
    processes = [
        spawn.Process(
            target=produce, args=(address, str(home / f"p{n}"), phases, barrier, results), name=f"producer {n}"
        )
        for n in range(PRODUCERS)
    ]
    for p in processes:
        p.start()
    rates = []
    try:
        for phase in phases:
            got, elapsed, server_cpu = timed(barrier, server_pid, results, processes)
            client_cpu = sum(r[1] for r in got)
            rates.append(rate(phase.count * PRODUCERS, elapsed, client_cpu, server_cpu, sum(r[2] for r in got)))
    finally:
        stop_clients(processes)
    return rates


def run_consumers(spawn: Any, address: str, server_pid: int, total: int, home: Path) -> tuple[Rate, int, int]:
    """(rate, lost messages, duplicates) of receiving and acking `total` messages."""
    barrier = spawn.Barrier(CONSUMERS + 1)
    results = spawn.Queue()
    received = spawn.Value("q", 0)
    processes = [
        spawn.Process(
            target=consume,
            args=(address, str(home / f"c{n}"), total, received, barrier, results),
            name=f"consumer {n}",
        )
        for n in range(CONSUMERS)
    ]
    for p in processes:
        p.start()
    try:
        got, elapsed, server_cpu = timed(barrier, server_pid, results, processes)
    finally:
        stop_clients(processes)
    ids = [i for r in got for i in r[3]]
    failed = sum(r[2] for r in got)
    acked = rate(len(ids) - failed, elapsed, sum(r[1] for r in got), server_cpu, failed)
    return acked, total - len(set(ids)), len(ids) - len(set(ids))


# --- rounds -------------------------------------------------------------------------------------------------------


def one_round(spawn: Any, work: Path, phases: list[Phase]) -> dict[str, float]:
    figures: dict[str, float] = {}

    def put(name: str, measured: Rate) -> None:
        figures[f"{name}.msgs_per_s"] = measured.msgs_per_s
        figures[f"{name}.client_cpu_cores"] = measured.client_cpu_cores
        figures[f"{name}.server_cpu_cores"] = measured.server_cpu_cores
        figures[f"{name}.server_cpu_us_per_msg"] = measured.server_cpu_us_per_msg
        figures[f"{name}.failed"] = measured.failed

    echo = Echo(spawn)
    try:
        echo_async, echo_sync = run_producers(spawn, echo.address, echo.pid, phases, work / "home-echo")
    finally:
        echo.stop()
    put("echo", echo_async)
    put("echo_sync", echo_sync)

    serve = Serve(work / f"serve-{time.monotonic_ns()}")
    try:
        send_async, send_sync = run_producers(spawn, serve.address, serve.pid, phases, work / "home-send")
        total = PRODUCERS * (WARMUP + sum(phase.count for phase in phases))
        receive, lost, duplicates = run_consumers(spawn, serve.address, serve.pid, total, work / "home-receive")
        figures["serve.rss_mb"] = serve.rss_mb()
    finally:
        serve.stop()
    put("send", send_async)
    put("send_sync", send_sync)
    put("receive_ack", receive)
    figures["send.ratio_to_echo"] = send_async.msgs_per_s / echo_async.msgs_per_s
    figures["send_sync.ratio_to_echo"] = send_sync.msgs_per_s / echo_sync.msgs_per_s
    figures["receive_ack.lost_messages"] = lost
    figures["receive_ack.duplicates"] = duplicates
    return figures


# Printed always, in this order; failures, losses and duplicates only when not zero.
KEYS = [
    "echo.msgs_per_s",
    "send.msgs_per_s",
    "send.ratio_to_echo",
    "receive_ack.msgs_per_s",
    "echo_sync.msgs_per_s",
    "send_sync.msgs_per_s",
    "send_sync.ratio_to_echo",
    *(f"{phase}.{what}" for phase in ("echo", "send", "echo_sync", "send_sync", "receive_ack")
      for what in ("client_cpu_cores", "server_cpu_cores", "server_cpu_us_per_msg")),
    "serve.rss_mb",
]  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument(
        "--quick", action="store_true", help="1 round; 2,500 async and 250 blocking sends per producer (10,000; 1,000)"
    )
    parser.add_argument("--rounds", type=int, default=None, help="rounds, each figure their median (3; --quick: 1)")
    args = parser.parse_args()
    rounds = args.rounds or (1 if args.quick else 3)
    phases = [Phase(2_500, WINDOW), Phase(250, 1)] if args.quick else [Phase(10_000, WINDOW), Phase(1_000, 1)]
    spawn = multiprocessing.get_context("spawn")
    measured: list[dict[str, float]] = []
    with tempfile.TemporaryDirectory(prefix="mqgate-bench-grpc-") as work:
        for n in range(rounds):
            measured.append(one_round(spawn, Path(work) / f"round-{n}", phases))
    for key in KEYS:
        emit(f"grpc.{key}", statistics.median(m[key] for m in measured))
    for key in sorted(measured[0].keys() - set(KEYS)):
        if any(m[key] for m in measured):
            emit(f"grpc.{key}", max(m[key] for m in measured))


if __name__ == "__main__":
    main()
