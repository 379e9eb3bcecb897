"""`mqgate admin` against a real `mqgate serve` after known traffic: 100 orders sent by the official RocketMQ
producer (keys order-0..99), a pop group that consumed 11 of them (one dead-lettered), a pop group that consumed
none, a persistent MQTT session away while 5 sensor readings came, a connected MQTT client. Each command's output
is checked, and every request is refused without the token."""

from __future__ import annotations

import base64
import json
import os
import pty
import re
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import paho.mqtt.client as paho
import pytest
from rocketmq import FilterExpression, Message, Producer, SimpleConsumer

from tests.proxy.serving import client_config, eventually, receive_all, start, write_groups
from tests.serve_process import ROOT, ServeProcess, mqtt_client

pytestmark = pytest.mark.slow

TOKEN = "admin-token-1"
ORDERS = 100
CONSUMED = 11  # by group billing: ten acknowledged, one dead-lettered


def mqgate(*args: str, token: str | None = TOKEN, url: str) -> subprocess.CompletedProcess[str]:
    env = {key: value for key, value in os.environ.items() if key not in ("MQGATE_URL", "MQGATE_TOKEN")}
    env["MQGATE_URL"] = url
    if token is not None:
        env["MQGATE_TOKEN"] = token
    return subprocess.run(
        [sys.executable, "-m", "mqgate.cli", "admin", *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


def http(url: str, method: str = "GET", auth: str | None = None, body: object = None) -> tuple[int, Any]:
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(url, data=data, method=method)
    if auth is not None:
        request.add_header("Authorization", auth)
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())


def basic(user: str, password: str) -> str:
    return "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()


class Gateway:
    def __init__(self, serve: ServeProcess) -> None:
        self.serve = serve
        self.url = serve.http_url

    def admin(self, *args: str) -> subprocess.CompletedProcess[str]:
        result = mqgate(*args, url=self.url)
        assert result.returncode == 0, result.stderr
        return result

    def json(self, *args: str) -> Any:
        return json.loads(self.admin(*args, "--json").stdout)


@pytest.fixture(scope="module")
def gateway(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Gateway]:
    tmp = tmp_path_factory.mktemp("admin")
    data = tmp / "data"
    passwd = tmp / "passwd"
    for user, password in (("root", "root-pw"), ("bob", "bob-pw")):
        create = ["-c"] if user == "root" else []
        subprocess.run(
            [sys.executable, "-m", "mqgate.cli", "passwd", *create, "-b", str(passwd), user, password],
            cwd=ROOT,
            check=True,
        )
    write_groups(data, {"billing": {"retryMaxTimes": 0}})
    # Group "partial" committed an offset on queue 0 of orders only (RocketMQ's consumerOffset.json).
    (data / "config" / "consumerOffset.json").write_text(json.dumps({"offsetTable": {"orders@partial": {"0": 0}}}))
    # The MQTT traffic below comes from anonymous clients, which a password file alone would refuse.
    config = f'[http]\ntoken = "{TOKEN}"\nadmin_users = ["root"]\n[mqtt]\npassword_file = "{passwd}"\n'
    config += "allow_anonymous = true\n"
    serve = start(data, config=config)
    try:
        assert (
            http(f"{serve.http_url}/admin/topics", "POST", f"Bearer {TOKEN}", {"topic": "orders", "queues": 2})[0]
            == 201
        )
        _traffic(serve)
        yield Gateway(serve)
    finally:
        assert serve.stop() == 0


def _traffic(serve: ServeProcess) -> None:
    config = client_config(serve)
    reports = SimpleConsumer(config, "reports", {"orders": FilterExpression()}, await_duration=1)
    reports.startup()
    try:
        assert reports.receive(32, 30) == []  # the pop group starts at the queues' beginning: offset 0 committed
    finally:
        reports.shutdown()
    away = mqtt_client(serve, "meter", clean=False)
    away.subscribe("sensors/#", qos=1)
    time.sleep(0.5)
    away.disconnect()
    away.loop_stop()
    producer = Producer(config, ("orders",))
    producer.startup()
    try:
        for index in range(ORDERS):
            message = Message()
            message.topic, message.body, message.tag = "orders", f'{{"order": {index}}}'.encode(), "paid"
            message.keys = f"order-{index}"
            producer.send(message)
    finally:
        producer.shutdown()
    billing = SimpleConsumer(config, "billing", {"orders": FilterExpression()}, await_duration=5)
    billing.startup()
    try:
        got = receive_all(billing, 10, ack=False)[:10]
        for message in got[:9]:
            billing.ack(message)
        # The tenth stays unacknowledged past its invisible time: retryMaxTimes 0 sends it to %DLQ%billing when the
        # group next pops, and that pop takes an eleventh, acknowledged.
        billing.change_invisible_duration(got[9], 1)
        time.sleep(1.5)
        (eleventh,) = billing.receive(1, 30)
        billing.ack(eleventh)
    finally:
        billing.shutdown()
    publisher = mqtt_client(serve, "thermo", clean=True)
    for index in range(5):
        publisher.publish(f"sensors/room{index}", f"{20 + index}".encode(), qos=1).wait_for_publish(30)
    publisher.disconnect()
    publisher.loop_stop()
    token = f"Bearer {TOKEN}"
    assert eventually(lambda: http(f"{serve.http_url}/admin/dead-letters/billing", auth=token)[1].get("total") == 1)


@pytest.fixture(scope="module")
def watcher(gateway: Gateway) -> Iterator[paho.Client]:
    client = mqtt_client(gateway.serve, "watcher", clean=True)
    client.subscribe("sensors/+", qos=0)
    time.sleep(0.3)
    yield client
    client.disconnect()
    client.loop_stop()


def rows(output: str) -> list[list[str]]:
    """The cells of a rich table's body rows."""
    return [
        [cell.strip() for cell in line.strip("│").split("│")] for line in output.splitlines() if line.startswith("│")
    ]


def test_every_request_is_refused_without_the_token_or_an_admin_user(gateway: Gateway) -> None:
    result = mqgate("topic", "list", token=None, url=gateway.url)
    assert result.returncode == 1
    assert "HTTP 401: authentication required" in result.stderr
    result = mqgate("topic", "list", token="wrong", url=gateway.url)
    assert (result.returncode, "invalid bearer token" in result.stderr) == (1, True)
    status, body = http(f"{gateway.url}/admin/groups", auth=basic("bob", "bob-pw"))
    assert (status, body["message"]) == (403, "user 'bob' has no admin role: add it to [http] admin_users")
    status, _ = http(f"{gateway.url}/admin/groups", auth=basic("root", "wrong"))
    assert status == 401
    status, body = http(f"{gateway.url}/admin/groups", auth=basic("root", "root-pw"))
    assert status == 200 and "groups" in body
    status, _ = http(f"{gateway.url}/admin/topics", "POST", body={"topic": "sneaky"})
    assert status == 401
    assert "sneaky" not in [t["topic"] for t in gateway.json("topic", "list")["topics"]]


def test_topic_list_shows_the_orders_topic_with_its_messages(gateway: Gateway) -> None:
    result = gateway.admin("topic", "list", "--kind", "normal")
    orders = [row for row in rows(result.stdout) if row[0] == "orders"]
    assert orders == [["orders", "normal", "2", "2", "rw", "NORMAL", str(ORDERS)]]
    assert "%RETRY%" not in result.stdout  # --kind normal


def test_topic_status_shows_each_queue_and_the_groups_consuming_it(gateway: Gateway) -> None:
    result = gateway.admin("topic", "status", "orders")
    queues = [row for row in rows(result.stdout) if row[0] in ("0", "1")]
    assert sum(int(row[2]) for row in queues) == ORDERS and all(row[1] == "0" for row in queues)
    assert all(re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z", row[4]) for row in queues)
    assert "groups consuming it: billing, partial, reports" in result.stdout
    missing = mqgate("topic", "status", "nope", url=gateway.url)
    assert missing.returncode == 1 and "HTTP 404: topic 'nope' does not exist" in missing.stderr


def test_topic_create_update_and_delete(gateway: Gateway) -> None:
    assert (
        "topic scratch created: 3 queues, perm rw"
        in gateway.admin("topic", "create", "scratch", "--queues", "3").stdout
    )
    again = mqgate("topic", "create", "scratch", url=gateway.url)
    assert again.returncode == 1 and "HTTP 409" in again.stderr
    updated = gateway.admin("topic", "update", "scratch", "--write-queues", "1", "--perm", "r")
    assert "topic scratch: 3 read queues, 1 write queues, perm r" in updated.stdout
    assert gateway.admin("topic", "delete", "scratch").stdout.strip() == "topic scratch deleted"
    assert "scratch" not in [t["topic"] for t in gateway.json("topic", "list")["topics"]]
    # Each change is in the audit log, with who made it.
    log = gateway.serve.stderr()
    assert re.search(r"mqgate\.audit: token from 127\.0\.0\.1: POST /admin/topics -> 201", log)
    assert re.search(r"mqgate\.audit: token from 127\.0\.0\.1: DELETE /admin/topics/scratch -> 200", log)


def test_consumer_progress_shows_the_lag_of_a_group_that_consumed_nothing(gateway: Gateway) -> None:
    result = gateway.admin("consumer", "progress", "reports")
    queues = [row for row in rows(result.stdout) if row[0] == "orders"]
    assert sum(int(row[4]) for row in queues) == ORDERS  # lag
    assert all(row[3] == "0" and row[5] == "" for row in queues)  # committed 0, nothing consumed yet
    assert f"total lag: {ORDERS}" in result.stdout


def test_consumer_progress_of_a_group_that_consumed_eleven(gateway: Gateway) -> None:
    progress = gateway.json("consumer", "progress", "billing")
    orders = [q for q in progress["queues"] if q["topic"] == "orders"]
    assert sum(q["lag"] for q in orders) == ORDERS - CONSUMED
    assert sum(q["consumer_offset"] for q in orders) == CONSUMED
    assert all(q["last_consume"] for q in orders if q["consumer_offset"] > 0)


def test_group_list_create_and_delete(gateway: Gateway) -> None:
    listed = {row[0]: row for row in rows(gateway.admin("group", "list").stdout)}
    assert listed["reports"][4] == str(ORDERS) and listed["billing"][4] == str(ORDERS - CONSUMED)
    assert listed["billing"][1] == "yes" and listed["reports"][1] == "yes"  # popping created it
    meter = next(group for group in listed if group.startswith("MQTT_SESSION_meter"))
    assert listed[meter][4] == "5"  # the away MQTT session's group: what it has not read yet
    created = gateway.admin("group", "create", "audit", "--retry-max-times", "3")
    assert "group audit created: retry max times 3" in created.stdout
    assert "group audit deleted with its offsets" in gateway.admin("group", "delete", "audit").stdout
    gone = mqgate("group", "delete", "audit", url=gateway.url)
    assert gone.returncode == 1 and "HTTP 404" in gone.stderr


def test_client_list_shows_mqtt_sessions_with_subscriptions_and_queued_messages(
    gateway: Gateway, watcher: paho.Client
) -> None:
    table = {row[0]: row for row in rows(gateway.admin("client", "list").stdout)}
    assert table["meter"][1].startswith("away since ") and table["meter"][3] == "sensors/# (QoS 1)"
    assert table["meter"][5] == "5"  # queued while it was away
    assert table["watcher"][1].startswith("connected from 127.0.0.1:") and table["watcher"][2] == "3.1.1"
    assert table["watcher"][3] == "sensors/+ (QoS 0)"
    connected = gateway.json("client", "list", "--connected")
    assert [s["client_id"] for s in connected["mqtt"]] == ["watcher"]


def test_message_query_by_key_id_and_time(gateway: Gateway) -> None:
    by_key = gateway.json("message", "query", "--topic", "orders", "--key", "order-42")
    (found,) = by_key["messages"]
    assert (found["body"], found["tags"], found["keys"]) == ('{"order": 42}', "paid", ["order-42"])
    by_id = gateway.json("message", "query", "--topic", "orders", "--id", found["msg_id"])
    assert [m["offset_msg_id"] for m in by_id["messages"]] == [found["offset_msg_id"]]
    by_time = gateway.admin("message", "query", "--topic", "orders", "--from", "0", "--limit", "5")
    assert "5 message(s) of orders by time" in by_time.stdout
    assert len([row for row in rows(by_time.stdout)]) == 5
    none = gateway.json("message", "query", "--topic", "orders", "--key", "order-1000")
    assert none["messages"] == []


def test_message_show_prints_the_body_and_the_state_for_each_group(gateway: Gateway) -> None:
    found = gateway.json("message", "query", "--topic", "orders", "--key", "order-0")["messages"][0]
    shown = gateway.admin("message", "show", found["offset_msg_id"])
    assert '{"order": 0}' in shown.stdout
    states = {row[0]: row[1] for row in rows(shown.stdout) if row[0] in ("billing", "reports")}
    assert states["reports"] == "NOT_CONSUMED_YET"
    assert states["billing"] in ("CONSUMED", "NOT_CONSUMED_YET", "IN_DLQ")
    detail = gateway.json("message", "show", found["offset_msg_id"], "--group", "reports")
    assert [t["state"] for t in detail["tracks"]] == ["NOT_CONSUMED_YET"]
    assert detail["message"]["properties"]["KEYS"] == "order-0"


def test_dead_letters_are_listed_and_resent_once(gateway: Gateway) -> None:
    listed = gateway.json("message", "dlq", "billing")
    (letter,) = listed["letters"]
    assert letter["original_topic"] == "orders" and not letter["resent"]
    result = gateway.admin("message", "resend", "billing", "--all")
    assert "1 resent, 0 resent before, 0 failed" in result.stdout
    again = gateway.admin("message", "resend", "billing", "--id", letter["offset_msg_id"])
    assert "0 resent, 1 resent before, 0 failed" in again.stdout
    assert gateway.json("message", "dlq", "billing")["letters"][0]["resent"] is True


def in_terminal(url: str, *args: str, columns: int = 80, term: str = "dumb") -> str:
    """What `mqgate admin ARGS` shows on a terminal COLUMNS wide (colours and styles left out)."""
    primary, secondary = pty.openpty()
    env = {**os.environ, "MQGATE_URL": url, "MQGATE_TOKEN": TOKEN, "COLUMNS": str(columns), "TERM": term}
    command = [sys.executable, "-m", "mqgate.cli", "admin", *args]
    process = subprocess.Popen(command, cwd=ROOT, env=env, stdout=secondary, stderr=secondary, close_fds=True)
    os.close(secondary)
    shown = b""
    while True:
        try:
            chunk = os.read(primary, 65536)
        except OSError:  # EIO: the child closed the terminal
            break
        if not chunk:
            break
        shown += chunk
    os.close(primary)
    assert process.wait(timeout=60) == 0, shown
    return re.sub(r"\x1b\[[0-9;]*m", "", shown.decode(errors="replace"))


def test_a_long_operation_shows_a_progress_bar_in_a_terminal(gateway: Gateway) -> None:
    text = in_terminal(gateway.url, "message", "resend", "billing", "--all", columns=120, term="xterm")
    assert "resending dead letters of billing" in text and "1/1" in text
    # Piped, the same command draws nothing but its result.
    piped = gateway.admin("message", "resend", "billing", "--all")
    assert "resending" not in piped.stdout + piped.stderr


def test_reset_offset_moves_a_group_past_every_message(gateway: Gateway) -> None:
    result = gateway.admin("group", "reset-offset", "reports", "--to", "2999-01-01T00:00:00Z")
    offsets = {(row[0], row[1]): int(row[2]) for row in rows(result.stdout)}
    assert sum(offset for (topic, _), offset in offsets.items() if topic == "orders") >= ORDERS
    assert gateway.json("consumer", "progress", "reports")["lag"] == 0


def test_store_stats_while_serving(gateway: Gateway) -> None:
    stats = gateway.json("store", "stats")
    assert stats["stats"]["commit_log_max_offset"] > 0 and stats["recovery"]["clean"] is True
    assert stats["disk"]["parts"]["commitlog"] > 0 and 0 < stats["disk"]["filesystem"]["used_ratio"] < 1
    table = gateway.admin("store", "stats").stdout
    assert "commit_log_max_offset" in table and "file system used" in table


def test_a_bad_command_line_exits_2(gateway: Gateway) -> None:
    assert mqgate("topic", url=gateway.url).returncode == 2
    result = mqgate("message", "query", "--topic", "orders", url=gateway.url)
    assert result.returncode == 2 and "give --key, --id, or a time range" in result.stderr
    assert mqgate("group", "reset-offset", "g", "--to", "yesterday", url=gateway.url).returncode == 2


def test_unreachable_server_exits_1(tmp_path: Path) -> None:
    result = mqgate("topic", "list", url="http://127.0.0.1:9")
    assert result.returncode == 1 and "cannot reach" in result.stderr


def test_message_ids_are_never_cut_on_a_narrow_terminal(gateway: Gateway) -> None:
    messages = gateway.json("message", "query", "--topic", "orders", "--from", "0", "--limit", "3")["messages"]
    shown = in_terminal(gateway.url, "message", "query", "--topic", "orders", "--from", "0", "--limit", "3")
    for message in messages:
        assert message["offset_msg_id"] in shown and message["msg_id"] in shown
    assert "…" not in "".join(line for line in shown.splitlines() if message["store_time"][:10] in line)
    letters = gateway.json("message", "dlq", "billing")["letters"]
    shown = in_terminal(gateway.url, "message", "dlq", "billing", columns=60)
    assert letters and all(letter["offset_msg_id"] in shown for letter in letters)


def test_a_reader_that_goes_away_ends_the_command_quietly(gateway: Gateway) -> None:
    """`mqgate admin topic status T | head`: the pipe closes; the command ends without a word, as SIGPIPE ends a
    Unix tool (status 141)."""
    for args in (["topic", "status", "orders"], ["topic", "list"], ["message", "show", _first_order(gateway)]):
        reader, writer = os.pipe()
        os.close(reader)  # gone before the command writes a byte
        env = {**os.environ, "MQGATE_URL": gateway.url, "MQGATE_TOKEN": TOKEN}
        try:
            result = subprocess.run(
                [sys.executable, "-m", "mqgate.cli", "admin", *args],
                cwd=ROOT,
                env=env,
                stdout=writer,
                stderr=subprocess.PIPE,
                text=True,
                timeout=60,
            )
        finally:
            os.close(writer)
        assert (result.returncode, result.stderr) == (141, ""), args


def _first_order(gateway: Gateway) -> str:
    found = gateway.json("message", "query", "--topic", "orders", "--key", "order-0")["messages"]
    return str(found[0]["offset_msg_id"])


@pytest.mark.parametrize("topic", ["Gerät", "Gerät/x"])
def test_an_unknown_topic_names_the_listing_command_and_the_core_topic_of_an_mqtt_name(
    gateway: Gateway, topic: str
) -> None:
    for args in (["topic", "status", topic], ["message", "query", "--topic", topic, "--from", "0"]):
        result = mqgate(*args, url=gateway.url)
        assert result.returncode == 1
        assert "`mqgate admin topic list` lists the topics" in result.stderr
        assert "'%MQTT%Ger_C3_A4t'" in result.stderr
        assert "mqgate topics" not in result.stderr
    result = mqgate("consumer", "progress", "no-such-group", url=gateway.url)
    assert result.returncode == 1 and "`mqgate admin group list` lists the groups" in result.stderr


def test_a_group_without_a_committed_offset_shows_none(gateway: Gateway) -> None:
    """`-1` is RocketMQ's "no offset committed" in the API; a table says `none`."""
    answer = gateway.json("consumer", "progress", "partial")
    assert [(q["queue_id"], q["consumer_offset"]) for q in answer["queues"]] == [(0, 0), (1, -1)]
    shown = {row[1]: row[3] for row in rows(gateway.admin("consumer", "progress", "partial").stdout)}
    assert shown == {"0": "0", "1": "none"}


def test_an_option_of_admin_given_after_the_sub_command_is_named(gateway: Gateway) -> None:
    result = mqgate("topic", "list", "--url", gateway.url, url=gateway.url)
    assert result.returncode == 2
    assert "usage: mqgate admin topic list" in result.stderr
    assert "--url is an option of `mqgate admin`: give it before the sub-command" in result.stderr
