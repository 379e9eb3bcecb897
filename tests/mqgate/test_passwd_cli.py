"""`mqgate passwd`, run as a real process: the file it writes is read by our checker, by mosquitto_passwd and by a
real mosquitto broker, and a user it made logs in to `mqgate serve`."""

from __future__ import annotations

import fcntl
import os
import pty
import re
import select
import subprocess
import sys
import termios
import time
from pathlib import Path

import paho.mqtt.client as paho
import pytest

from mqtt_bridge.access.password_file import PasswordFile
from tests.mqtt_bridge.access.test_password_file import (
    mosquitto_passwd,
    mosquitto_pub,
    needs_mosquitto,
    needs_mosquitto_passwd,
    running_mosquitto,
)
from tests.mqtt_bridge.conftest import Client, start_server

ROOT = Path(__file__).resolve().parents[2]
# mosquitto_passwd's layout: $7$, 101 rounds, 12-byte salt and 64-byte hash in padded base64.
MOSQUITTO_LINE = re.compile(r"(?P<user>[^:]+):\$7\$(?P<rounds>\d+)\$[A-Za-z0-9+/]{16}\$[A-Za-z0-9+/]{86}==")


def passwd(*args: str | Path, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "mqgate.cli", "passwd", *map(str, args)],
        cwd=ROOT,
        input=stdin,
        capture_output=True,
        text=True,
        timeout=60,
        start_new_session=True,  # no controlling terminal: a prompt could not wait on the test's tty
    )


def users(path: Path) -> list[str]:
    """The users of `path` in file order; every user line must be in mosquitto_passwd's format."""
    found = []
    for line in path.read_text().splitlines():
        if line and not line.startswith("#"):
            match = MOSQUITTO_LINE.fullmatch(line)
            assert match, line
            found.append(match["user"])
    return found


def test_batch_mode_creates_adds_and_changes(tmp_path: Path) -> None:
    path = tmp_path / "passwd"
    assert passwd("-c", "-b", path, "alice", "first").returncode == 0
    assert path.stat().st_mode & 0o777 == 0o600
    assert passwd("-b", path, "bob", "pass:with colon").returncode == 0
    assert passwd("-b", path, "alice", "second wörd").returncode == 0
    assert users(path) == ["alice", "bob"]  # changed in place, not appended
    checker = PasswordFile.load(path)
    assert checker.check("alice", "second wörd".encode())
    assert not checker.check("alice", b"first")
    assert checker.check("bob", b"pass:with colon")
    assert sorted(os.listdir(tmp_path)) == ["passwd"]  # no temporary file left behind


def test_create_overwrites_an_existing_file(tmp_path: Path) -> None:
    path = tmp_path / "passwd"
    path.write_text("# old\nbroken line\n")
    assert passwd("-c", "-b", path, "carol", "c").returncode == 0
    assert users(path) == ["carol"]
    assert path.read_text().count("\n") == 1


def test_password_stdin_takes_the_first_line(tmp_path: Path) -> None:
    path = tmp_path / "passwd"
    assert passwd("-c", "--password-stdin", path, "alice", stdin="from stdin\nignored\n").returncode == 0
    assert passwd("--password-stdin", path, "bob", stdin="windows\r\n").returncode == 0
    checker = PasswordFile.load(path)
    assert checker.check("alice", b"from stdin") and checker.check("bob", b"windows")
    empty = passwd("--password-stdin", path, "carol", stdin="")
    assert empty.returncode == 1 and "standard input is empty" in empty.stderr
    blank = passwd("--password-stdin", path, "carol", stdin="\n")
    assert blank.returncode == 1 and "password is empty" in blank.stderr
    assert users(path) == ["alice", "bob"]


def run_on_a_terminal(args: list[str], answers: list[str]) -> tuple[int, str]:
    """Run `mqgate passwd` with a pseudo-terminal as its controlling tty, typing each answer after a prompt."""
    master, slave = pty.openpty()

    def take_the_terminal() -> None:  # runs in the child after setsid
        fcntl.ioctl(0, termios.TIOCSCTTY, 0)

    process = subprocess.Popen(
        [sys.executable, "-m", "mqgate.cli", "passwd", *args],
        cwd=ROOT,
        stdin=slave,
        stdout=slave,
        stderr=slave,
        start_new_session=True,
        preexec_fn=take_the_terminal,
    )
    os.close(slave)
    seen = b""
    pending = list(answers)
    deadline = time.monotonic() + 60
    try:
        while time.monotonic() < deadline:
            readable, _, _ = select.select([master], [], [], 0.5)
            if readable:
                try:
                    chunk = os.read(master, 4096)
                except OSError:  # EIO: the child closed the terminal
                    break
                if not chunk:
                    break
                seen += chunk
                # Answer each prompt once it is shown: getpass discards what was typed before it turned echo off.
                prompts = seen.lower().count(b"password:")
                if pending and prompts > len(answers) - len(pending):
                    os.write(master, pending.pop(0).encode() + b"\n")
            elif process.poll() is not None:
                break
        return process.wait(timeout=30), seen.decode(errors="replace")
    finally:
        os.close(master)
        if process.poll() is None:
            process.kill()


def test_prompts_twice_on_the_terminal_without_echo(tmp_path: Path) -> None:
    path = tmp_path / "passwd"
    code, transcript = run_on_a_terminal(["-c", str(path), "alice"], ["typed secret", "typed secret"])
    assert code == 0, transcript
    assert "Password:" in transcript and "Reenter password:" in transcript
    assert "typed secret" not in transcript  # getpass turns echo off
    assert PasswordFile.load(path).check("alice", b"typed secret")


def test_passwords_that_differ_change_nothing(tmp_path: Path) -> None:
    path = tmp_path / "passwd"
    assert passwd("-c", "-b", path, "alice", "kept").returncode == 0
    before = path.read_bytes()
    code, transcript = run_on_a_terminal([str(path), "alice"], ["one", "two"])
    assert code == 1
    assert "do not match" in transcript
    assert path.read_bytes() == before


def test_without_a_terminal_the_prompt_is_refused_in_one_clear_line(tmp_path: Path) -> None:
    """No controlling terminal (a script, CI): getpass would warn and read standard input with echo; the command
    says what to use instead, and nothing else."""
    result = passwd("-c", tmp_path / "passwd", "bob", stdin="")
    assert (result.returncode, result.stderr) == (
        1,
        "mqgate: error: no terminal to ask for the password; use --password-stdin or -b to pass one\n",
    )
    assert not (tmp_path / "passwd").exists()


def test_a_missing_file_needs_c(tmp_path: Path) -> None:
    path = tmp_path / "typo"
    result = passwd("-b", path, "alice", "a")
    assert result.returncode == 1
    assert str(path) in result.stderr and "-c" in result.stderr
    assert not path.exists()


def test_delete_removes_one_user_and_keeps_the_rest(tmp_path: Path) -> None:
    path = tmp_path / "passwd"
    passwd("-c", "-b", path, "alice", "a")
    with path.open("a") as file:
        file.write("# keep this comment\n")
    passwd("-b", path, "bob", "b")
    assert passwd("-D", path, "alice").returncode == 0
    assert users(path) == ["bob"]
    assert "# keep this comment\n" in path.read_text()
    before = path.read_bytes()
    missing = passwd("-D", path, "alice")
    assert missing.returncode == 1 and "'alice' is not in" in missing.stderr
    assert path.read_bytes() == before


def test_update_hashes_a_plain_text_file_in_place_once(tmp_path: Path) -> None:
    path = tmp_path / "passwd"
    path.write_text("# users\nalice:plain one\n\n bob : spaced \n")
    path.chmod(0o640)
    result = passwd("-U", path)
    assert result.returncode == 0, result.stderr
    assert users(path) == ["alice", "bob"]
    assert path.read_text().startswith("# users\n")
    assert path.stat().st_mode & 0o777 == 0o640
    checker = PasswordFile.load(path)
    assert checker.check("alice", b"plain one")
    assert checker.check("bob", b"spaced")  # trimmed, as mosquitto_passwd -U does
    hashed = path.read_bytes()
    assert passwd("-U", path).returncode == 0  # mosquitto_passwd -U would hash the hashes
    assert path.read_bytes() == hashed


def test_update_refuses_a_password_with_a_colon(tmp_path: Path) -> None:
    # mosquitto_passwd -U would hash only "with"; refusing is better than a password that silently differs.
    path = tmp_path / "passwd"
    path.write_text("alice:a\nbob:with:colon\n")
    result = passwd("-U", path)
    assert result.returncode == 1
    assert f"password file {path}, line 2 (user 'bob')" in result.stderr and "mqgate passwd -b" in result.stderr
    assert path.read_text() == "alice:a\nbob:with:colon\n"


def test_errors_name_the_file_and_the_line_and_leave_it_alone(tmp_path: Path) -> None:
    path = tmp_path / "passwd"
    original = "# hand-edited\nalice:$7$101$not-base64$x\n"
    path.write_text(original)
    result = passwd("-b", path, "bob", "b")
    assert result.returncode == 1
    assert f"password file {path}, line 2 (user 'alice')" in result.stderr
    assert path.read_text() == original
    plain = tmp_path / "plain"
    plain.write_text("alice:a\nno colon here\n")
    result = passwd("-U", plain)
    assert result.returncode == 1
    assert f"password file {plain}, line 3" not in result.stderr and f"password file {plain}, line 2" in result.stderr
    assert plain.read_text() == "alice:a\nno colon here\n"
    bad_user = passwd("-c", "-b", path.with_name("new"), "a:b", "x")
    assert bad_user.returncode == 1 and "contains ':'" in bad_user.stderr
    assert not path.with_name("new").exists()


@pytest.mark.parametrize(
    "args",
    [
        ["-U", "FILE", "alice"],
        ["-D", "FILE", "alice", "password"],
        ["-D", "--password-stdin", "FILE", "alice"],
        ["-b", "FILE", "alice"],
        ["FILE", "alice", "password"],
        ["-c", "-D", "FILE", "alice"],
        ["-b", "--password-stdin", "FILE", "alice", "pw"],
        ["FILE"],
        ["--iterations", "0", "-b", "FILE", "alice", "pw"],
    ],
)
def test_usage_errors_exit_2_and_touch_nothing(tmp_path: Path, args: list[str]) -> None:
    path = tmp_path / "passwd"
    path.write_text("")
    result = passwd(*[str(path) if arg == "FILE" else arg for arg in args])
    assert result.returncode == 2, result.stderr
    assert "usage: mqgate passwd" in result.stderr
    assert path.read_text() == ""


def test_iterations_are_written_into_the_hash(tmp_path: Path) -> None:
    path = tmp_path / "passwd"
    assert passwd("-c", "-b", "--iterations", "5000", path, "alice", "slow").returncode == 0
    assert path.read_text().startswith("alice:$7$5000$")
    assert PasswordFile.load(path).check("alice", b"slow")


@needs_mosquitto_passwd
def test_mosquitto_passwd_and_mqgate_passwd_edit_each_others_files(tmp_path: Path) -> None:
    path = tmp_path / "passwd"
    assert passwd("-c", "-b", path, "ours", "o").returncode == 0
    mosquitto_passwd("-b", path, "theirs", "t")
    assert passwd("-b", path, "ours", "o2").returncode == 0
    assert users(path) == ["ours", "theirs"]
    mosquitto_passwd("-D", path, "ours")
    assert passwd("-D", path, "theirs").returncode == 0
    assert users(path) == []
    # The same plain-text file hashed by both tools reads back the same way.
    for tool in ("mqgate", "mosquitto_passwd"):
        plain = tmp_path / f"plain-{tool}"
        plain.write_text("alice: a b \nbob:b\n")
        if tool == "mqgate":
            assert passwd("-U", plain).returncode == 0
        else:
            mosquitto_passwd("-U", plain)
        checker = PasswordFile.load(plain)
        assert checker.check("alice", b"a b") and checker.check("bob", b"b")


@needs_mosquitto
def test_mosquitto_broker_accepts_users_made_by_mqgate_passwd(tmp_path: Path) -> None:
    path = tmp_path / "passwd"
    assert passwd("-c", "-b", path, "alice", "s3cret wörd").returncode == 0
    assert passwd("--password-stdin", path, "bob", stdin="bobs\n").returncode == 0
    plain = tmp_path / "plain"
    with running_mosquitto(tmp_path, [f"password_file {path}", "allow_anonymous false"]) as port:
        assert mosquitto_pub(port, "alice", "s3cret wörd") == 0
        assert mosquitto_pub(port, "bob", "bobs") == 0
        assert mosquitto_pub(port, "alice", "wrong") != 0
    plain.write_text("carol:plain\n")
    assert passwd("-U", plain).returncode == 0
    with running_mosquitto(tmp_path, [f"password_file {plain}", "allow_anonymous false"]) as port:
        assert mosquitto_pub(port, "carol", "plain") == 0


def test_mqgate_serve_authenticates_a_user_made_by_mqgate_passwd(tmp_path: Path) -> None:
    path = tmp_path / "passwd"
    assert passwd("-c", "--password-stdin", path, "device-1", stdin="d3vice\n").returncode == 0
    config = tmp_path / "mqgate.toml"
    config.write_text(f'[mqtt]\npassword_file = "{path}"\nallow_anonymous = false\n')
    data_dir = tmp_path / "data"
    data_dir.mkdir()
    server = start_server(data_dir, "--config", str(config))
    try:
        good = Client(server, "dev", paho.MQTTv5, username="device-1", password="d3vice")
        assert good.reason == 0
        good.subscribe("t/#", 1)
        good.publish("t/x", b"in", qos=1)
        assert good.receive(1)[0].payload == b"in"
        good.disconnect()
        wrong = Client(server, "dev-2", paho.MQTTv5, username="device-1", password="guess")
        assert wrong.reason == 0x86
        wrong.disconnect()
    finally:
        server.stop()
