"""End-to-end latency: an MQTT publish into `mqgate serve` until its event reaches an HTTP target, at a steady rate.

    python bench/eventbridge_e2e.py [--quick] [--seconds N] [--rate N]

mqgate: `mqgate serve` as a child process (data directory in a temporary directory, `--mqtt-port 0 --http-port
0`, its defaults otherwise: ASYNC_FLUSH), started with one rule file in DATA_DIR/rules/: an event source turning
MQTT messages of `bench/+/reading` into events on the default bus, and one rule matching
`type: [mqgate.mqtt.message]` with one HTTP target, binary mode, ORIGINAL transform (the body is the whole event's
JSON; its `data` is the MQTT payload), default concurrency (8). Path measured: MQTT listener -> store -> event
source -> bus topic -> rule -> HTTP POST.

Baseline, in the same run: Mosquitto (the Debian package, started as bench/mqtt.py starts it: a generated
configuration on a free port, persistence off) and a minimal hand-made bridge in its own process: a paho client
subscribed to `bench/+/reading` at QoS 1 (paho's network thread) hands each payload to an asyncio loop where 8
workers POST it with aiohttp to the same kind of target. The same publisher drives both.

Publisher (its own process): one paho client, MQTT 3.1.1, QoS 1, topic `bench/1/reading`, payload
`{"seq": n, "sent_ns": ...}` with the time of the publish call. QoS 1 because that is what a device that cares
about its readings uses, and because in mqgate a QoS 1 PUBLISH is stored (appended to the commit log) before its
PUBACK: the path measured is the durable one, and `delivered` = `sent` then means something. At most INFLIGHT
publishes are unacknowledged (paho's default of 20 is raised, so that a slow PUBACK does not hold back the
schedule). Message n is due at start + n / rate: the schedule comes from the index, so it cannot drift; the
publisher drives paho's loop (no network thread) until the slot, then publishes. Its lag behind the schedule is
printed (`publisher_max_lag_ms`) to show it was not the bottleneck.

Target (its own process, both runs): an aiohttp server (uvloop) that takes the receive time once a request's body
is read, then reads `seq` and `sent_ns` from the body (the event's `data`, or the bridge's raw payload).
Latency = receive time - `sent_ns`; both are CLOCK_MONOTONIC (time.monotonic_ns), one clock for all processes on
Linux. Messages published during the first WARMUP_S seconds are left out of the percentiles (connections,
caches and the interpreters' first calls warm up there); `delivered` counts every message, warm-up included,
and must equal `sent`. A second delivery of a seq counts once (its first receipt) and shows in `duplicates`.

`cpu_cores` lines: CPU time of mqgate (resp. Mosquitto plus the bridge) from the first publish until the last
delivery, over that interval. The machine has 2 cores, shared by every process here.

Prints key=value lines; progress on stderr.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import multiprocessing
import os
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

import aiohttp
import paho.mqtt.client as paho
from aiohttp import web
from paho.mqtt.enums import CallbackAPIVersion

ROOT = Path(__file__).resolve().parent.parent
# Before bench/ (the script's directory), where eventbridge.py would shadow the package.
sys.path.insert(0, str(ROOT))

from mqgate.process import run as run_on_event_loop  # noqa: E402
from tests.serve_process import ServeProcess  # noqa: E402

RATE_PER_S = 1_000
QUICK_SECONDS = 5
FULL_SECONDS = 30
WARMUP_S = 1.0
TOPIC = "bench/1/reading"
TOPIC_FILTER = "bench/+/reading"
# Unacknowledged QoS 1 publishes at most; at 1,000/s this is 100 ms of PUBACK delay before the schedule suffers.
INFLIGHT = 100
# Requests in flight: the rule model's default target concurrency, and the bridge's POST workers.
CONCURRENCY = 8
# After the last publish, how long the target waits for the missing deliveries before the run is reported short.
DELIVERY_TIMEOUT_S = 30.0
# The publisher's first slot is this far after it has connected, so the first messages are not already late.
START_DELAY_S = 0.2
# A publish this far behind its slot counts as late.
LATE_MS = 1.0
MOSQUITTO = "/usr/sbin/mosquitto"
MOSQUITTO_START_TIMEOUT_S = 10.0
CLOCK_TICKS = os.sysconf("SC_CLK_TCK")

RULES = """
sources:
  - name: bench-readings
    mqtt: {topic_filter}
rules:
  - name: e2e
    pattern: {{type: [mqgate.mqtt.message]}}
    targets:
      - id: receiver
        type: http
        url: {url}
        mode: binary
        concurrency: {concurrency}
        transform: {{kind: ORIGINAL}}
"""


def log(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


def emit(key: str, value: float | int) -> None:
    text = str(value) if isinstance(value, int) else f"{value:.3f}" if value < 100 else f"{value:.0f}"
    print(f"{key}={text}", flush=True)


# --- target ------------------------------------------------------------------------------------------------------


def serve_target(control: Connection) -> None:
    """The HTTP target, in a child process: POST /events/{run} records (seq, sent_ns, received_ns). Sends its port;
    then answers each ("collect", run, expected, timeout_s) with that run's records once `expected` distinct seqs
    have arrived or the timeout has passed; serves until `control` closes."""
    run_on_event_loop(_serve_target(control))


async def _serve_target(control: Connection) -> None:
    records: dict[str, list[tuple[int, int, int]]] = {}
    seen: dict[str, set[int]] = {}
    arrived = asyncio.Event()

    async def receive(request: web.Request) -> web.Response:
        body = await request.read()
        received_ns = time.monotonic_ns()
        document = json.loads(body)
        payload = document.get("data", document)  # an event's data, or the bridge's raw payload
        run = request.match_info["run"]
        records.setdefault(run, []).append((payload["seq"], payload["sent_ns"], received_ns))
        seen.setdefault(run, set()).add(payload["seq"])
        arrived.set()
        return web.Response(status=204)

    async def collect(run: str, expected: int, timeout_s: float) -> None:
        deadline = time.monotonic() + timeout_s
        while len(seen.get(run, ())) < expected and time.monotonic() < deadline:
            arrived.clear()
            try:
                async with asyncio.timeout(max(deadline - time.monotonic(), 0)):
                    await arrived.wait()
            except TimeoutError:
                break
        # The loop's reader made the pipe non-blocking; a run's records are more than the pipe holds.
        os.set_blocking(control.fileno(), True)
        control.send(records.get(run, []))
        os.set_blocking(control.fileno(), False)

    app = web.Application()
    app.router.add_post("/events/{run}", receive)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", 0).start()
    control.send(runner.addresses[0][1])
    closed = asyncio.Event()
    tasks: set[asyncio.Task[None]] = set()

    def on_command() -> None:
        try:
            _, run, expected, timeout_s = control.recv()
        except EOFError:
            asyncio.get_running_loop().remove_reader(control.fileno())
            closed.set()
            return
        task = asyncio.get_running_loop().create_task(collect(run, expected, timeout_s))
        tasks.add(task)
        task.add_done_callback(tasks.discard)

    asyncio.get_running_loop().add_reader(control.fileno(), on_command)
    await closed.wait()
    await runner.cleanup()


# --- publisher ---------------------------------------------------------------------------------------------------


def publish_paced(host: str, port: int, rate: int, seconds: float, control: Connection) -> None:
    """In a child process: connect, send "go" just before the first slot, publish on schedule, wait for every
    PUBACK, send a summary dict."""
    acked = 0

    def on_publish(client: paho.Client, userdata: Any, mid: int, reason: Any, properties: Any) -> None:
        nonlocal acked
        acked += 1

    client = paho.Client(CallbackAPIVersion.VERSION2, client_id="e2e-publisher", protocol=paho.MQTTv311)
    client.max_inflight_messages_set(INFLIGHT)
    client.on_publish = on_publish
    client.connect(host, port)
    deadline = time.monotonic() + 10
    while not client.is_connected():
        if time.monotonic() > deadline:
            raise RuntimeError(f"publisher: no CONNACK from {host}:{port} within 10 s")
        client.loop(timeout=0.05)

    count = round(rate * seconds)
    period_ns = 1_000_000_000 / rate
    start = time.monotonic_ns() + int(START_DELAY_S * 1e9)
    control.send("go")
    max_lag_ns = late = 0
    cpu_before = time.process_time()
    for seq in range(count):
        slot = start + int(seq * period_ns)
        while (now := time.monotonic_ns()) < slot:
            client.loop(timeout=(slot - now) / 1e9)  # returns early for a PUBACK; the slot is checked again
        sent_ns = time.monotonic_ns()
        lag_ns = sent_ns - slot
        max_lag_ns = max(max_lag_ns, lag_ns)
        late += lag_ns > LATE_MS * 1e6
        client.publish(TOPIC, json.dumps({"seq": seq, "sent_ns": sent_ns}), qos=1)
    published_s = (time.monotonic_ns() - start) / 1e9
    cpu = time.process_time() - cpu_before
    deadline = time.monotonic() + DELIVERY_TIMEOUT_S
    while acked < count and time.monotonic() < deadline:
        client.loop(timeout=0.05)
    client.disconnect()
    control.send(
        {
            "sent": count,
            "acked": acked,
            "max_lag_ms": max_lag_ns / 1e6,
            "late": late,
            "rate": count / published_s,
            "cpu_cores": cpu / published_s,
        }
    )


# --- baseline bridge ---------------------------------------------------------------------------------------------


def bridge(host: str, port: int, url: str, control: Connection) -> None:
    """In a child process: the hand-made MQTT -> HTTP bridge. Sends "ready" once subscribed; runs until `control`
    closes."""
    run_on_event_loop(_bridge(host, port, url, control))


async def _bridge(host: str, port: int, url: str, control: Connection) -> None:
    loop = asyncio.get_running_loop()
    payloads: asyncio.Queue[bytes] = asyncio.Queue()
    subscribed = asyncio.Event()

    def on_connect(client: paho.Client, userdata: Any, flags: Any, reason: Any, properties: Any) -> None:
        client.subscribe(TOPIC_FILTER, qos=1)

    def on_subscribe(client: paho.Client, userdata: Any, mid: int, reasons: Any, properties: Any) -> None:
        loop.call_soon_threadsafe(subscribed.set)

    def on_message(client: paho.Client, userdata: Any, message: paho.MQTTMessage) -> None:
        loop.call_soon_threadsafe(payloads.put_nowait, message.payload)

    client = paho.Client(CallbackAPIVersion.VERSION2, client_id="e2e-bridge", protocol=paho.MQTTv311)
    client.on_connect, client.on_subscribe, client.on_message = on_connect, on_subscribe, on_message
    client.connect(host, port)
    client.loop_start()
    headers = {"Content-Type": "application/json"}
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=CONCURRENCY)) as session:

        async def post_forever() -> None:
            while True:
                body = await payloads.get()
                async with session.post(url, data=body, headers=headers) as response:
                    await response.read()

        workers = [loop.create_task(post_forever()) for _ in range(CONCURRENCY)]
        async with asyncio.timeout(10):
            await subscribed.wait()
        control.send("ready")
        closed = asyncio.Event()
        loop.add_reader(control.fileno(), closed.set)
        await closed.wait()
        for worker in workers:
            worker.cancel()
        await asyncio.gather(*workers, return_exceptions=True)
    client.disconnect()
    client.loop_stop()


# --- mosquitto ---------------------------------------------------------------------------------------------------


def free_port() -> int:
    """A port free right now; Mosquitto binds it a moment later."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def start_mosquitto(work: Path) -> tuple[subprocess.Popen[bytes], int]:
    """Mosquitto with a generated configuration, as bench/mqtt.py configures it (persistence off, TCP_NODELAY as the
    asyncio servers set it); returns once its port accepts connections."""
    if not Path(MOSQUITTO).exists():
        raise RuntimeError(f"{MOSQUITTO} not found; install the Debian package mosquitto")
    port = free_port()
    conf = work / "mosquitto.conf"
    conf.write_text(
        f"listener {port} 127.0.0.1\n"
        "allow_anonymous true\n"
        "persistence false\n"
        "set_tcp_nodelay true\n"
        "log_dest stderr\n"
        "log_type error\n"
        "log_type warning\n"
    )
    with open(work / "mosquitto.log", "wb") as log_file:
        process = subprocess.Popen(
            [MOSQUITTO, "-c", str(conf)], stdin=subprocess.DEVNULL, stdout=log_file, stderr=subprocess.STDOUT
        )
    deadline = time.monotonic() + MOSQUITTO_START_TIMEOUT_S
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return process, port
        except OSError:
            if process.poll() is not None or time.monotonic() > deadline:
                stop_process(process)
                output = (work / "mosquitto.log").read_text()
                raise RuntimeError(f"mosquitto did not listen on {port}: {output}") from None
            time.sleep(0.05)


def stop_process(process: subprocess.Popen[bytes]) -> None:
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


# --- one run -----------------------------------------------------------------------------------------------------


@dataclass(slots=True)
class RunResult:
    sent: int
    acked: int
    delivered: int
    duplicates: int
    latencies_ms: list[float]  # after warm-up, sorted
    publisher: dict[str, float]
    cpu_cores: float


def percentile(ordered: list[float], fraction: float) -> float:
    """Nearest rank: the smallest value with at least `fraction` of the values at or below it."""
    if not ordered:
        return math.nan
    return ordered[max(math.ceil(fraction * len(ordered)) - 1, 0)]


def measure(
    spawn: Any,
    run: str,
    host: str,
    port: int,
    target: Connection,
    rate: int,
    seconds: float,
    cpu_seconds: Callable[[], float],
) -> RunResult:
    control, child_end = spawn.Pipe()
    publisher = spawn.Process(target=publish_paced, args=(host, port, rate, seconds, child_end), name="publisher")
    publisher.start()
    child_end.close()
    try:
        if not control.poll(60):
            raise RuntimeError("publisher did not start within 60 s")
        control.recv()  # "go"
        cpu_before, started = cpu_seconds(), time.monotonic()
        summary = control.recv()
        target.send(("collect", run, summary["sent"], DELIVERY_TIMEOUT_S))
        if not target.poll(DELIVERY_TIMEOUT_S + 30):
            raise RuntimeError("the target did not send its records")
        records: list[tuple[int, int, int]] = target.recv()
        cpu = cpu_seconds() - cpu_before
        elapsed = time.monotonic() - started
    finally:
        control.close()
        publisher.join(timeout=10)
        if publisher.is_alive():
            publisher.kill()
    first: dict[int, float] = {}
    for seq, sent_ns, received_ns in records:
        first.setdefault(seq, (received_ns - sent_ns) / 1e6)
    warm_from = int(WARMUP_S * rate)
    return RunResult(
        sent=summary["sent"],
        acked=summary["acked"],
        delivered=len(first),
        duplicates=len(records) - len(first),
        latencies_ms=sorted(latency for seq, latency in first.items() if seq >= warm_from),
        publisher=summary,
        cpu_cores=cpu / elapsed,
    )


def process_cpu_seconds(*pids: int) -> float:
    """User plus system CPU of processes (all their threads) so far, from /proc/PID/stat."""
    total = 0
    for pid in pids:
        with open(f"/proc/{pid}/stat") as stat:
            fields = stat.read().rsplit(")", 1)[1].split()
        total += int(fields[11]) + int(fields[12])  # utime, stime: fields 14 and 15 of proc_pid_stat(5)
    return total / CLOCK_TICKS


def run_mqgate(spawn: Any, work: Path, target: Connection, target_port: int, rate: int, seconds: float) -> RunResult:
    data_dir = work / "mqgate"
    rules = data_dir / "rules"
    rules.mkdir(parents=True)
    url = f"http://127.0.0.1:{target_port}/events/mqgate"
    (rules / "e2e.yaml").write_text(RULES.format(topic_filter=TOPIC_FILTER, url=url, concurrency=CONCURRENCY))
    log("starting mqgate serve")
    serve = ServeProcess(data_dir)
    try:
        host, port = serve.ready["mqtt"].rsplit(":", 1)
        host = "127.0.0.1" if host in ("0.0.0.0", "") else host  # the listener's wildcard address: use loopback
        pid = serve.process.pid
        log(f"mqgate: publishing {rate}/s for {seconds} s to {host}:{port}")
        return measure(spawn, "mqgate", host, int(port), target, rate, seconds, lambda: process_cpu_seconds(pid))
    finally:
        code = serve.stop()
        if code != 0:
            log(f"mqgate serve exited with {code}; stderr in {serve.stderr_path}:\n{serve.stderr()[-2000:]}")


def run_baseline(spawn: Any, work: Path, target: Connection, target_port: int, rate: int, seconds: float) -> RunResult:
    mosquitto_dir = work / "mosquitto"
    mosquitto_dir.mkdir()
    log("starting mosquitto and the bridge")
    broker, port = start_mosquitto(mosquitto_dir)
    control, child_end = spawn.Pipe()
    url = f"http://127.0.0.1:{target_port}/events/bridge"
    bridging = spawn.Process(target=bridge, args=("127.0.0.1", port, url, child_end), name="bridge")
    try:
        bridging.start()
        child_end.close()
        if not control.poll(60):
            raise RuntimeError("bridge did not subscribe within 60 s")
        control.recv()  # "ready"
        assert bridging.pid is not None
        pids = (broker.pid, bridging.pid)
        log(f"baseline: publishing {rate}/s for {seconds} s to 127.0.0.1:{port}")
        return measure(spawn, "bridge", "127.0.0.1", port, target, rate, seconds, lambda: process_cpu_seconds(*pids))
    finally:
        control.close()
        bridging.join(timeout=10)
        if bridging.is_alive():
            bridging.kill()
        stop_process(broker)


def report(prefix: str, result: RunResult) -> None:
    emit(f"{prefix}.p50_ms", percentile(result.latencies_ms, 0.50))
    emit(f"{prefix}.p99_ms", percentile(result.latencies_ms, 0.99))
    emit(f"{prefix}.max_ms", result.latencies_ms[-1] if result.latencies_ms else math.nan)
    emit(f"{prefix}.sent", result.sent)
    emit(f"{prefix}.acked", result.acked)
    emit(f"{prefix}.delivered", result.delivered)
    if result.duplicates:
        emit(f"{prefix}.duplicates", result.duplicates)
    emit(f"{prefix}.publish_rate_per_s", result.publisher["rate"])
    emit(f"{prefix}.publisher_max_lag_ms", result.publisher["max_lag_ms"])
    emit(f"{prefix}.publisher_late", int(result.publisher["late"]))
    emit(f"{prefix}.publisher_cpu_cores", result.publisher["cpu_cores"])
    emit(f"{prefix}.cpu_cores", result.cpu_cores)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help=f"publish for {QUICK_SECONDS} s (default {FULL_SECONDS})")
    parser.add_argument("--seconds", type=float, help="publish for this long (overrides --quick)")
    parser.add_argument("--rate", type=int, default=RATE_PER_S, help="messages per second")
    args = parser.parse_args()
    seconds = args.seconds or (QUICK_SECONDS if args.quick else FULL_SECONDS)
    if seconds <= WARMUP_S:
        parser.error(f"--seconds must exceed the {WARMUP_S} s warm-up")

    spawn = multiprocessing.get_context("spawn")
    target, child_end = spawn.Pipe()
    server = spawn.Process(target=serve_target, args=(child_end,), name="e2e target")
    server.start()
    child_end.close()
    try:
        target_port = target.recv()
        with tempfile.TemporaryDirectory(prefix="mqgate-bench-e2e-") as work:
            mqgate = run_mqgate(spawn, Path(work), target, target_port, args.rate, seconds)
            baseline = run_baseline(spawn, Path(work), target, target_port, args.rate, seconds)
    finally:
        target.close()
        server.join(timeout=10)
        if server.is_alive():
            server.kill()
    emit("e2e.rate_per_s", args.rate)
    emit("e2e.seconds", seconds)
    emit("e2e.warmup_s", WARMUP_S)
    report("e2e.mqtt_to_http", mqgate)
    report("e2e.baseline_mosquitto_bridge", baseline)
    ratio = percentile(mqgate.latencies_ms, 0.99) / percentile(baseline.latencies_ms, 0.99)
    emit("e2e.mqtt_to_http.ratio_p99_to_baseline", ratio)
    if mqgate.delivered != mqgate.sent or baseline.delivered != baseline.sent:
        log("not every message was delivered: see the delivered and sent lines")
        sys.exit(1)


if __name__ == "__main__":
    main()
