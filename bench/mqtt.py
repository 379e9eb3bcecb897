"""MQTT benchmark: mqgate's MQTT listener against Mosquitto and stock amqtt, same load, one run.

    python bench/mqtt.py [--quick] [--rounds N] [--brokers mqgate,mosquitto,amqtt] [--mqgate-arg=--flush-mode=...]

Scenarios (MQTT 3.1.1, 64-byte payloads, clean sessions):
  * qos0: fan-in. 8 publishers, each on its own topic `<run>/bench/<n>`, write their whole stream of QoS 0
    PUBLISHes as fast as TCP takes it; 1 subscriber on `<run>/bench/#` at QoS 0. Figure: messages received per
    second. (<run> numbers the runs, so that nothing left from one reaches the next.)
  * qos1: the same fan-in at QoS 1. Each publisher keeps `--window` (64) PUBLISHes unacknowledged and refills
    the window as PUBACKs come back (receive-maximum style pipelining), so a broker that persists before acking
    is measured by its throughput, not by one round trip at a time. The subscriber holds a QoS 1 subscription
    and PUBACKs every delivery. Figure: messages acknowledged to their publisher and delivered, per second;
    each round checks that the subscriber got as many as were sent and every publisher all its PUBACKs.
  * fanout: 1 publisher writes QoS 0 PUBLISHes to `<run>/fan/0/x`; 100 subscribers hold QoS 0 subscriptions to
    `<run>/fan/+/x`. Figure: deliveries (messages times subscribers) received per second.
The clock runs from the first publisher's first send to the last receipt at a subscriber (and, under QoS 1, the
last PUBACK at a publisher). All clients connect and subscribe, then wait at one start barrier; set-up is not
timed. A run ends when every message has arrived, or IDLE_TIMEOUT after the last one did: such a round is
counted in `incomplete_rounds`, its missing messages in `lost_messages` (and `unacked_messages`), and its rate
is what arrived over the time until the last arrival. `received_fraction` is printed for every scenario.

The load generator (bench/mqtt_load.py) runs publishers and subscribers in their own processes (the 100 fan-out
subscribers in 2), speaks MQTT over raw sockets with every PUBLISH encoded before the clock starts, and reads
in batches; each figure comes with the broker's CPU and the generator's CPU (in cores, over the timed interval)
to show which side was saturated. This VM has 2 cores: broker, generator and the kernel's loopback TCP share
them, so a broker that can use more than one core (mqgate's flush thread) competes with the generator.

Brokers, all on 127.0.0.1 and started by this script, with the same limits where they have them:
  * mosquitto: `/usr/sbin/mosquitto -c <generated conf>`: no persistence, no queue limit (max_queued_messages 0
    means none, mosquitto.conf(5) 2.0.x), `set_tcp_nodelay true` (asyncio servers, amqtt and mqgate, set
    TCP_NODELAY too), max_inflight_messages = --inflight (QoS 1 deliveries awaiting PUBACK per client; default
    --window, 64, which is also mqgate's default);
  * amqtt: the `amqtt` console script of this venv with its shipped default configuration but for the bind
    address (anonymous access, default plugins; no queue or in-flight limit). It is slow, so it gets smaller
    message counts (AMQTT_COUNTS), with the same clients and window: its figure is still a rate, over a shorter
    run;
  * mqgate: `mqgate serve --data-dir <tmp> --mqtt-port 0 [--mqgate-arg ...]`, ready when it prints its
    `ready ...` line, whose `mqtt=HOST:PORT` part names the listener. DATA_DIR/mqgate.toml sets
    mqtt.max_queued_messages past any run's count (its default, 100,000, drops the backlog a full QoS 1 fan-in
    builds for its one subscriber, which Mosquitto here keeps) and mqtt.max_inflight = --inflight; a --config
    passed with --mqgate-arg replaces that file, so it must set both. Its default flush mode (ASYNC_FLUSH)
    applies unless a --mqgate-arg says otherwise (--mqgate-arg=--flush-mode=SYNC_FLUSH). Stopped with SIGTERM.
Rounds alternate brokers (round 1: each scenario on every broker; then round 2 ...) because this VM's speed
drifts; each broker first gets an uncounted warm-up run, and before each run time to go idle. Each figure is
the median over rounds and each ratio the median of per-round ratios.

Output (stdout, key=value): for each scenario and broker `mqtt.<scenario>.<broker>.msgs_per_s` (fanout:
`deliveries_per_s`), `.received_fraction`, `.broker_cpu_cores`, `.generator_cpu_cores`, and when not zero
`.incomplete_rounds`, `.lost_messages`, `.unacked_messages`, `.duplicates`, `.failed_rounds` (a client could not
connect or subscribe); with mqgate among --brokers, `mqtt.<scenario>.ratio_to_mosquitto` and
`mqtt.qos1.ratio_to_amqtt`. Progress goes to stderr. Exits 1 if a broker does not start or dies.
"""

from __future__ import annotations

import argparse
import contextlib
import fcntl
import multiprocessing
import os
import queue
import select
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from threading import BrokenBarrierError
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
# The tree first: bench/eventbridge.py must not stand for the eventbridge package (compiled_state imports it).
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from mqtt_load import (
    PublisherJob,
    SubscriberJob,
    open_session,
    publish_frame,
    run_publisher,
    run_subscribers,
)
from serve_child import serve_command

from bench.compiled_report import compiled_state

ROOT = Path(__file__).resolve().parent.parent
BROKERS = ("mqgate", "mosquitto", "amqtt")
SCENARIOS = ("qos0", "qos1", "fanout")
PAYLOAD = os.urandom(64)
FAN_IN_PUBLISHERS = 8
FANOUT_SUBSCRIBERS = 100
# 100 subscriber connections are served by this many processes (select loops); more would only compete for the
# 2 cores with the broker.
FANOUT_PROCESSES = 2
# Per-publisher unacknowledged QoS 1 PUBLISHes; by default also the brokers' in-flight window towards subscribers.
DEFAULT_WINDOW = 64
HOST = "127.0.0.1"
# Messages per run (fanout: messages published; deliveries are 100 times as many).
COUNTS = {
    "quick": {"qos0": 40_000, "qos1": 40_000, "fanout": 2_000},
    "full": {"qos0": 300_000, "qos1": 200_000, "fanout": 6_000},
}
# amqtt handles a few thousand messages per second (about 20,000 deliveries a second in fan-out): the counts above
# would take minutes per run, so it gets a fifth to a twentieth of them, with the same clients and window.
AMQTT_COUNTS = {
    "quick": {"qos0": 8_000, "qos1": 4_000, "fanout": 100},
    "full": {"qos0": 30_000, "qos1": 20_000, "fanout": 300},
}
CONNECT_TIMEOUT = 30.0  # connecting 100 subscribers to a slow broker on a loaded VM
FIRST_MESSAGE_TIMEOUT = 20.0
IDLE_TIMEOUT = 5.0  # no message for this long after the first: the broker has stalled or dropped the rest
BROKER_START_TIMEOUT = 30.0
# The warm-up run sends this fraction of a qos0 run's messages.
WARM_UP_SHARE = 4
# Another process may take the free port between free_port() and the broker's bind.
START_ATTEMPTS = 2
# mqgate's max_queued_messages must be a positive number: this is more than any run sends.
MQGATE_NO_QUEUE_LIMIT = 1_000_000_000
MAX_RUN_SECONDS = 900.0
# Before each run the broker is given up to SETTLE_LIMIT seconds to go idle (CPU sampled every IDLE_SAMPLE s).
SETTLE_LIMIT = 30.0
IDLE_SAMPLE = 0.2
CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def emit(key: str, value: float) -> None:
    text = f"{value:.3f}" if isinstance(value, float) and abs(value) < 100 else f"{value:.0f}"
    print(f"{key}={text}", flush=True)


class BrokerError(Exception):
    """A broker did not come up or died; the message says which and why."""


# --- brokers -------------------------------------------------------------------------------------------------


@dataclass(slots=True)
class RunningBroker:
    name: str
    host: str
    port: int
    process: subprocess.Popen[bytes]
    log_path: Path
    stop_signal: signal.Signals
    stop_timeout: float

    def cpu_seconds(self) -> float:
        """User plus system CPU of the broker process (all its threads) so far; NaN once it has exited."""
        try:
            with open(f"/proc/{self.process.pid}/stat") as stat:
                fields = stat.read().rsplit(")", 1)[1].split()
        except OSError:
            return float("nan")
        # Fields 14 and 15 of proc_pid_stat(5), utime and stime, counted after the parenthesised command name.
        return (int(fields[11]) + int(fields[12])) / CLOCK_TICKS

    def check_alive(self) -> None:
        if self.process.poll() is not None:
            raise BrokerError(f"{self.name} exited with code {self.process.returncode}; {self.log_tail()}")

    def log_tail(self) -> str:
        try:
            lines = self.log_path.read_text(errors="replace").splitlines()[-15:]
        except OSError:
            return "no log"
        return f"last lines of {self.log_path}:\n  " + "\n  ".join(lines) if lines else f"{self.log_path} is empty"

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(self.stop_signal)
            try:
                self.process.wait(self.stop_timeout)
            except subprocess.TimeoutExpired:
                log(f"{self.name} did not stop within {self.stop_timeout:.0f} s of {self.stop_signal.name}; killing it")
                self.process.kill()
                self.process.wait()
        if self.process.returncode not in (0, -self.stop_signal):
            log(f"{self.name} exited with code {self.process.returncode}")
        if self.process.stdout is not None:
            self.process.stdout.close()


def free_port() -> int:
    """A port free right now; the broker binds it a moment later (main retries a start that lost that race)."""
    with socket.socket() as probe:
        probe.bind((HOST, 0))
        return int(probe.getsockname()[1])


def wait_until_serving(broker: RunningBroker, timeout: float) -> None:
    """Poll with an MQTT CONNECT until the broker answers CONNACK."""
    deadline = time.monotonic() + timeout
    while True:
        broker.check_alive()
        try:
            sock, _ = open_session(broker.host, broker.port, f"probe-{os.getpid()}", timeout=2.0)
        except OSError:
            if time.monotonic() > deadline:
                raise BrokerError(
                    f"{broker.name}: no CONNACK on {broker.host}:{broker.port} within {timeout:.0f} s; "
                    + broker.log_tail()
                ) from None
            time.sleep(0.05)
            continue
        sock.sendall(b"\xe0\x00")
        sock.close()
        return


def start_mosquitto(work: Path, executable: str, inflight: int) -> RunningBroker:
    if not Path(executable).exists():
        raise BrokerError(f"mosquitto: {executable} not found; install the Debian package mosquitto")
    port = free_port()
    conf = work / "mosquitto.conf"
    conf.write_text(
        f"listener {port} {HOST}\n"
        "allow_anonymous true\n"
        "persistence false\n"
        # 0: no limit on queued QoS 1/2 messages per client (mosquitto.conf(5), 2.0.x); the default of 1000 would
        # drop messages a fast fan-in queues for one subscriber.
        "max_queued_messages 0\n"
        f"max_inflight_messages {inflight}\n"
        "set_tcp_nodelay true\n"
        "log_dest stderr\n"
        "log_type error\n"
        "log_type warning\n"
    )
    log_path = work / "mosquitto.log"
    with open(log_path, "wb") as log_file:
        process = subprocess.Popen(
            [executable, "-c", str(conf)], stdin=subprocess.DEVNULL, stdout=log_file, stderr=subprocess.STDOUT
        )
    broker = RunningBroker("mosquitto", HOST, port, process, log_path, signal.SIGTERM, 10.0)
    try:
        wait_until_serving(broker, BROKER_START_TIMEOUT)
    except BaseException:
        broker.stop()
        raise
    return broker


def start_amqtt(work: Path, executable: str) -> RunningBroker:
    if not Path(executable).exists():
        raise BrokerError(f"amqtt: {executable} not found; install the project (`make run` sets up .venv)")
    port = free_port()
    conf = work / "amqtt.yaml"
    # amqtt's shipped scripts/default_broker.yaml with our bind address.
    conf.write_text(
        "listeners:\n"
        "  default:\n"
        "    type: tcp\n"
        f"    bind: {HOST}:{port}\n"
        "plugins:\n"
        "  amqtt.plugins.logging_amqtt.EventLoggerPlugin:\n"
        "  amqtt.plugins.logging_amqtt.PacketLoggerPlugin:\n"
        "  amqtt.plugins.authentication.AnonymousAuthPlugin:\n"
        "    allow_anonymous: true\n"
        "  amqtt.plugins.sys.broker.BrokerSysPlugin:\n"
        "    sys_interval: 20\n"
    )
    log_path = work / "amqtt.log"
    with open(log_path, "wb") as log_file:
        process = subprocess.Popen(
            [executable, "-c", str(conf)], stdin=subprocess.DEVNULL, stdout=log_file, stderr=subprocess.STDOUT
        )
    # The script shuts the broker down on KeyboardInterrupt, i.e. SIGINT.
    broker = RunningBroker("amqtt", HOST, port, process, log_path, signal.SIGINT, 15.0)
    try:
        wait_until_serving(broker, BROKER_START_TIMEOUT)
    except BaseException:
        broker.stop()
        raise
    return broker


def start_mqgate(work: Path, executable: str, inflight: int, extra: Sequence[str]) -> RunningBroker:
    if not Path(executable).exists():
        raise BrokerError(f"mqgate: {executable} not found; install the project (`make run` sets up .venv)")
    data_dir = work / "mqgate-data"
    data_dir.mkdir()
    # Read by `mqgate serve` from its data directory (a --config passed with --mqgate-arg replaces it). The same
    # two limits as Mosquitto's configuration: no queue limit (its default of 100,000 drops what a fan-in at QoS 1
    # queues for the one subscriber of a full run) and the same in-flight window towards subscribers.
    (data_dir / "mqgate.toml").write_text(
        f"[mqtt]\nmax_queued_messages = {MQGATE_NO_QUEUE_LIMIT}\nmax_inflight = {inflight}\n"
    )
    log_path = work / "mqgate.log"
    command = serve_command([executable], data_dir, *extra)
    log(f"starting {' '.join(command)}")
    with open(log_path, "wb") as log_file:
        process = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=log_file)
    broker = RunningBroker("mqgate", "", 0, process, log_path, signal.SIGTERM, 60.0)
    try:
        line = read_ready_line(broker, BROKER_START_TIMEOUT)
        parts = dict(part.split("=", 1) for part in line.split()[1:] if "=" in part)
        address = parts.get("mqtt")
        if address is None or ":" not in address:
            raise BrokerError(f"mqgate: the ready line has no mqtt=HOST:PORT part: {line!r}")
        host, _, port = address.rpartition(":")
        host = host.strip("[]")
        broker.host = {"": HOST, "0.0.0.0": HOST, "::": "::1"}.get(host, host)
        broker.port = int(port)
        assert process.stdout is not None
        # mqgate prints nothing after the ready line; should it, drain_stdout keeps the pipe from filling.
        fd = process.stdout.fileno()
        fcntl.fcntl(fd, fcntl.F_SETFL, fcntl.fcntl(fd, fcntl.F_GETFL) | os.O_NONBLOCK)
        wait_until_serving(broker, BROKER_START_TIMEOUT)
    except BaseException:
        broker.stop()
        raise
    return broker


def read_ready_line(broker: RunningBroker, timeout: float) -> str:
    """The first stdout line starting with `ready `; other lines go to stderr."""
    stdout = broker.process.stdout
    assert stdout is not None
    deadline = time.monotonic() + timeout
    buffer = b""
    while True:
        while b"\n" in buffer:
            raw, buffer = buffer.split(b"\n", 1)
            line = raw.decode(errors="replace").strip()
            if line.startswith("ready "):
                return line
            log(f"mqgate stdout: {line}")
        wait = deadline - time.monotonic()
        if wait <= 0:
            raise BrokerError(f"mqgate: no `ready` line within {timeout:.0f} s; {broker.log_tail()}")
        readable, _, _ = select.select([stdout], [], [], min(wait, 0.5))
        if readable:
            chunk = os.read(stdout.fileno(), 65536)
            if not chunk:
                broker.process.wait(5)
                raise BrokerError(
                    f"mqgate exited with code {broker.process.returncode} before its ready line; " + broker.log_tail()
                )
            buffer += chunk


def drain_stdout(broker: RunningBroker) -> None:
    if broker.process.stdout is None:
        return
    with contextlib.suppress(BlockingIOError, OSError, ValueError):
        while chunk := os.read(broker.process.stdout.fileno(), 65536):
            log(f"{broker.name} stdout: {chunk.decode(errors='replace').rstrip()}")


# --- one run -------------------------------------------------------------------------------------------------


@dataclass(slots=True)
class RunResult:
    expected: int
    received: int = 0
    rate: float = 0.0
    broker_cpu: float = 0.0  # cores, over the timed interval
    generator_cpu: float = 0.0
    subscriber_cpu: float = 0.0  # the part of generator_cpu spent by subscriber processes
    incomplete: bool = False  # ended by a timeout before every message arrived (and, QoS 1, was acknowledged)
    unacked: int = 0  # QoS 1: PUBLISHes sent that got no PUBACK
    duplicates: int = 0
    subscriber_naps: str = ""  # QoS 1: how the subscriber's ack batching went, for the progress line
    errors: list[str] = field(default_factory=list)

    @property
    def fraction(self) -> float:
        return self.received / self.expected if self.expected else 0.0


@dataclass(slots=True, frozen=True)
class Scenario:
    name: str
    qos: int  # of the PUBLISHes and of the subscriptions
    publishers: int
    subscribers: int
    processes: int  # subscriber processes

    # Topics start with the run's number, so that nothing a broker still holds from an earlier run (one that
    # timed out) reaches this run's subscribers; the number has a fixed width, so every broker gets PUBLISHes
    # of the same size, and within a run all are the same size, which the subscriber's counter relies on.
    def topic(self, run: int, publisher: int) -> str:
        if self.name == "fanout":
            return f"{run:05d}/fan/{publisher}/x"
        return f"{run:05d}/bench/{publisher:0{len(str(self.publishers - 1))}d}"

    def topic_filter(self, run: int) -> str:
        return f"{run:05d}/fan/+/x" if self.name == "fanout" else f"{run:05d}/bench/#"


def scenarios(publishers: int) -> dict[str, Scenario]:
    return {
        "qos0": Scenario("qos0", 0, publishers, 1, 1),
        "qos1": Scenario("qos1", 1, publishers, 1, 1),
        "fanout": Scenario("fanout", 0, 1, FANOUT_SUBSCRIBERS, FANOUT_PROCESSES),
    }


def wait_until_idle(broker: RunningBroker, limit: float) -> None:
    """Wait (up to `limit` seconds) until the broker uses under 5% of a core, e.g. after a run that timed out
    while it still had a backlog, or while mqgate flushes what the last run wrote."""
    deadline = time.monotonic() + limit
    before = broker.cpu_seconds()
    while time.monotonic() < deadline:
        time.sleep(IDLE_SAMPLE)
        after = broker.cpu_seconds()
        if not after - before > IDLE_SAMPLE * 0.05:  # NaN (the broker exited) ends the wait too
            return
        before = after
    log(f"{broker.name} still busy {limit:.0f} s after a run")


def run_once(broker: RunningBroker, scenario: Scenario, count: int, window: int, run: int) -> RunResult:
    """Timed run number `run`: `scenario` against `broker` with `count` messages in all (split over the
    publishers)."""
    context = multiprocessing.get_context("fork")
    per_publisher = count // scenario.publishers
    sent_total = per_publisher * scenario.publishers
    expected = sent_total * scenario.subscribers
    result = RunResult(expected=expected)
    _, layout = publish_frame(scenario.topic(run, 0), PAYLOAD, scenario.qos)
    barrier = context.Barrier(scenario.publishers + scenario.processes + 1, timeout=CONNECT_TIMEOUT)
    done = context.Event()
    results = context.Queue()
    workers = []
    client_ids = [f"run{run}-sub-{n}" for n in range(scenario.subscribers)]
    for k in range(scenario.processes):
        mine = client_ids[k :: scenario.processes]
        job = SubscriberJob(
            broker.host,
            broker.port,
            mine,
            scenario.topic_filter(run),
            scenario.qos,
            layout,
            sent_total,
            CONNECT_TIMEOUT,
            FIRST_MESSAGE_TIMEOUT,
            IDLE_TIMEOUT,
        )
        workers.append(context.Process(target=run_subscribers, args=(job, barrier, results), daemon=True))
    for n in range(scenario.publishers):
        pub_job = PublisherJob(
            broker.host,
            broker.port,
            f"run{run}-pub-{n}",
            scenario.topic(run, n),
            PAYLOAD,
            scenario.qos,
            per_publisher,
            window,
            CONNECT_TIMEOUT,
            IDLE_TIMEOUT,
        )
        workers.append(context.Process(target=run_publisher, args=(pub_job, barrier, done, results), daemon=True))
    for worker in workers:
        worker.start()
    reports: list[dict[str, Any]] = []
    try:
        # A worker that cannot connect or subscribe breaks the barrier; its report says why.
        with contextlib.suppress(BrokenBarrierError):
            barrier.wait()
        cpu_start, clock_start = broker.cpu_seconds(), time.perf_counter_ns()
        # Workers end by themselves when a broker stalls (IDLE_TIMEOUT); this only guards against a harness bug.
        give_up = time.monotonic() + CONNECT_TIMEOUT + FIRST_MESSAGE_TIMEOUT + MAX_RUN_SECONDS
        while len(reports) < len(workers):
            try:
                reports.append(results.get(timeout=max(0.1, give_up - time.monotonic())))
            except queue.Empty:
                result.errors.append(f"{len(workers) - len(reports)} workers did not report")
                break
        cpu_end, clock_end = broker.cpu_seconds(), time.perf_counter_ns()
    finally:
        done.set()
        for worker in workers:
            worker.join(10)
            if worker.is_alive():
                worker.terminate()
                worker.join()
    for report in reports:
        if "error" in report:
            result.errors.append(f"{report['role']}: {report['error']}")
            if "traceback" in report:
                log(report["traceback"])
    if result.errors:
        return result
    subs = [r for r in reports if r["role"] == "subscriber"]
    pubs = [r for r in reports if r["role"] == "publisher"]
    result.received = sum(r["received"] for r in subs)
    result.duplicates = sum(r["duplicates"] for r in subs)
    result.incomplete = any(r.get("stalled") for r in reports)
    result.unacked = sum(r["sent"] - r["acked"] for r in pubs) if scenario.qos else 0
    if scenario.qos:
        helped = sum(r["naps_helped"] for r in subs)
        result.subscriber_naps = f" naps {helped} helped, {'on' if all(r['napping'] for r in subs) else 'given up'}"
    start = min(r["first_send_ns"] for r in pubs)
    end = max(r["last_receive_ns"] for r in subs)
    counted = result.received
    if scenario.qos:
        end = max(end, *(r["last_ack_ns"] for r in pubs))
        counted = min(result.received, sum(r["acked"] for r in pubs))
    if end > start and counted:
        result.rate = counted / ((end - start) / 1e9)
        seconds = (end - start) / 1e9
        result.generator_cpu = sum(r["cpu_s"] for r in reports) / seconds
        result.subscriber_cpu = sum(r["cpu_s"] for r in subs) / seconds
    result.broker_cpu = (cpu_end - cpu_start) / max((clock_end - clock_start) / 1e9, 1e-9)
    return result


# --- main ----------------------------------------------------------------------------------------------------


def median(values: Sequence[float]) -> float:
    return statistics.median(values) if values else float("nan")


def parse_brokers(text: str) -> list[str]:
    names = [name.strip() for name in text.split(",") if name.strip()]
    unknown = [name for name in names if name not in BROKERS]
    if unknown or not names:
        raise argparse.ArgumentTypeError(f"choose from {', '.join(BROKERS)} (comma-separated), got {text!r}")
    return [name for name in BROKERS if name in names]


def parse_scenarios(text: str) -> list[str]:
    names = [name.strip() for name in text.split(",") if name.strip()]
    if not names or any(name not in SCENARIOS for name in names):
        raise argparse.ArgumentTypeError(f"choose from {', '.join(SCENARIOS)} (comma-separated), got {text!r}")
    return [name for name in SCENARIOS if name in names]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="smaller counts (about 40 s for all three brokers)")
    parser.add_argument(
        "--rounds", type=int, help="runs per figure; the median is printed (default 3, or 5 without --quick)"
    )
    parser.add_argument("--brokers", type=parse_brokers, default=list(BROKERS), help="default: all three")
    parser.add_argument("--scenarios", type=parse_scenarios, default=list(SCENARIOS), help="default: all three")
    parser.add_argument("--publishers", type=int, default=FAN_IN_PUBLISHERS, help="fan-in publishers (default 8)")
    parser.add_argument("--window", type=int, default=DEFAULT_WINDOW, help="QoS 1 PUBLISHes in flight per publisher")
    parser.add_argument("--scale", type=float, default=1.0, help="multiply every message count by this")
    parser.add_argument(
        "--mqgate-arg",
        action="append",
        default=[],
        metavar="ARG",
        help="extra argument for `mqgate serve`, repeatable; write --mqgate-arg=--flush-mode=SYNC_FLUSH",
    )
    parser.add_argument("--mosquitto", default="/usr/sbin/mosquitto", help="mosquitto executable")
    parser.add_argument("--mqgate", help="mqgate executable (default: the one next to this Python)")
    parser.add_argument(
        "--inflight",
        type=int,
        help="QoS 1 deliveries awaiting PUBACK per subscriber: Mosquitto's max_inflight_messages and mqgate's"
        " mqtt.max_inflight (default: --window; amqtt has no such limit)",
    )
    parser.add_argument("--dir", type=Path, default=ROOT / ".bench-tmp")
    args = parser.parse_args()
    mode = "quick" if args.quick else "full"
    rounds = args.rounds or (3 if args.quick else 5)
    bin_dir = Path(sys.executable).parent
    args.dir.mkdir(parents=True, exist_ok=True)
    plan = scenarios(args.publishers)
    inflight = args.window if args.inflight is None else args.inflight

    def count_for(broker: str, scenario: str) -> int:
        table = AMQTT_COUNTS if broker == "amqtt" else COUNTS
        return max(plan[scenario].publishers, int(table[mode][scenario] * args.scale))

    starters: dict[str, Callable[[Path], RunningBroker]] = {
        "mosquitto": lambda work: start_mosquitto(work, args.mosquitto, inflight),
        "amqtt": lambda work: start_amqtt(work, str(bin_dir / "amqtt")),
        "mqgate": lambda work: start_mqgate(work, args.mqgate or str(bin_dir / "mqgate"), inflight, args.mqgate_arg),
    }
    work = Path(tempfile.mkdtemp(dir=args.dir, prefix="mqtt-"))
    running: dict[str, RunningBroker] = {}
    results: dict[tuple[str, str], list[RunResult]] = {}
    try:
        for name in args.brokers:
            attempts = 1 if name == "mqgate" else START_ATTEMPTS  # mqgate picks its own port
            for attempt in range(1, attempts + 1):
                broker_dir = work / f"{name}-{attempt}"
                broker_dir.mkdir()
                try:
                    running[name] = starters[name](broker_dir)
                    break
                except BrokerError as exc:
                    if attempt == attempts:
                        raise
                    log(f"{exc}\nretrying")
            log(f"{name} serving on {running[name].host}:{running[name].port} (pid {running[name].process.pid})")
        run = 0
        # The first run after start-up is slow on this VM (first touch of memory, cold paths); warm each broker
        # up with a short fan-in that is not counted.
        for name, broker in running.items():
            run += 1
            warm = run_once(broker, plan["qos0"], max(1, count_for(name, "qos0") // WARM_UP_SHARE), args.window, run)
            log(f"warm-up  qos0   {name:9} {warm.rate:11.0f}/s (not counted)")
            broker.check_alive()
        for round_number in range(rounds):
            for scenario in args.scenarios:
                for name, broker in running.items():
                    broker.check_alive()
                    count = count_for(name, scenario)
                    wait_until_idle(broker, SETTLE_LIMIT)
                    run += 1
                    result = run_once(broker, plan[scenario], count, args.window, run)
                    broker.check_alive()
                    results.setdefault((scenario, name), []).append(result)
                    log(
                        f"round {round_number + 1}/{rounds} {scenario:6} {name:9} {result.rate:11.0f}/s "
                        f"received {result.received}/{result.expected} broker {result.broker_cpu:.2f} cores "
                        f"generator {result.generator_cpu:.2f} cores (subscribers {result.subscriber_cpu:.2f})"
                        + result.subscriber_naps
                        + (" INCOMPLETE (timed out)" if result.incomplete else "")
                        + (f" errors: {'; '.join(result.errors)}" if result.errors else "")
                    )
                    if name == "mqgate":
                        drain_stdout(broker)
    except BrokerError as exc:
        log(f"bench/mqtt.py: error: {exc}")
        return 1
    finally:
        for broker in running.values():
            broker.stop()
        shutil.rmtree(work, ignore_errors=True)
    report(results, args.brokers, args.scenarios)
    return 0


def report(results: dict[tuple[str, str], list[RunResult]], brokers: Sequence[str], names: Sequence[str]) -> None:
    unit = {"qos0": "msgs_per_s", "qos1": "msgs_per_s", "fanout": "deliveries_per_s"}
    if "mqgate" in brokers:
        # `mqgate serve` runs from this tree and venv: it imports the same files this process finds.
        print(f"mqtt.compiled={compiled_state()}", flush=True)
    for scenario in names:
        for name in brokers:
            runs = results[(scenario, name)]
            good = [r for r in runs if not r.errors]
            prefix = f"mqtt.{scenario}.{name}"
            emit(f"{prefix}.{unit[scenario]}", median([r.rate for r in good]))
            emit(f"{prefix}.received_fraction", median([r.fraction for r in good]))
            emit(f"{prefix}.broker_cpu_cores", median([r.broker_cpu for r in good]))
            emit(f"{prefix}.generator_cpu_cores", median([r.generator_cpu for r in good]))
            incomplete = sum(r.incomplete for r in runs)
            if incomplete:
                emit(f"{prefix}.incomplete_rounds", incomplete)
            lost = sum(max(0, r.expected - r.received) for r in good)
            if lost:
                emit(f"{prefix}.lost_messages", lost)
            unacked = sum(r.unacked for r in good)
            if unacked:
                emit(f"{prefix}.unacked_messages", unacked)
            failed = len(runs) - len(good)
            if failed:
                emit(f"{prefix}.failed_rounds", failed)
            duplicates = sum(r.duplicates for r in good)
            if duplicates:
                emit(f"{prefix}.duplicates", duplicates)
        if "mqgate" not in brokers:
            continue
        for baseline in ("mosquitto", "amqtt"):
            if baseline not in brokers or (baseline == "amqtt" and scenario != "qos1"):
                continue
            ratios = [
                ours.rate / theirs.rate
                for ours, theirs in zip(results[(scenario, "mqgate")], results[(scenario, baseline)], strict=True)
                if ours.rate and theirs.rate and not ours.errors and not theirs.errors
            ]
            emit(f"mqtt.{scenario}.ratio_to_{baseline}", median(ratios))


if __name__ == "__main__":
    sys.exit(main())
