"""Password files: read what mosquitto_passwd writes, write what mosquitto reads."""

from __future__ import annotations

import base64
import contextlib
import hashlib
import os
import pwd
import re
import shutil
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from mqtt_bridge.access.password_file import (
    DEFAULT_ITERATIONS,
    HashScheme,
    PasswordFile,
    PasswordHash,
    hash_password,
    set_password,
)
from mqtt_bridge.errors import ConfigError

MOSQUITTO = "/usr/sbin/mosquitto"
MOSQUITTO_PASSWD = shutil.which("mosquitto_passwd")
MOSQUITTO_PUB = shutil.which("mosquitto_pub")

needs_mosquitto_passwd = pytest.mark.skipif(MOSQUITTO_PASSWD is None, reason="mosquitto_passwd is not installed")
needs_mosquitto = pytest.mark.skipif(
    not (os.path.exists(MOSQUITTO) and MOSQUITTO_PUB), reason="mosquitto and mosquitto_pub are not installed"
)


def mosquitto_passwd(*args: str | Path) -> None:
    assert MOSQUITTO_PASSWD is not None
    subprocess.run([MOSQUITTO_PASSWD, *map(str, args)], check=True, capture_output=True, timeout=30)


def sha512_line(username: str, password: str, salt: bytes) -> str:
    """A `$6$` line built from the format's definition (SHA-512 of password bytes then salt bytes)."""
    digest = hashlib.sha512(password.encode() + salt).digest()
    return f"{username}:$6${base64.b64encode(salt).decode()}${base64.b64encode(digest).decode()}\n"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@contextlib.contextmanager
def running_mosquitto(directory: Path, settings: list[str]) -> Iterator[int]:
    """A real mosquitto on a free loopback port with `settings` added to its configuration; yields the port."""
    port = free_port()
    conf = directory / "mosquitto.conf"
    # As root mosquitto would switch to the `mosquitto` user, who cannot read our 0600 files: keep the test's user.
    user = pwd.getpwuid(os.getuid()).pw_name
    conf.write_text("\n".join([f"listener {port} 127.0.0.1", f"user {user}", "persistence false", *settings]) + "\n")
    log_path = directory / "mosquitto.log"
    with log_path.open("wb") as log_file:
        process = subprocess.Popen([MOSQUITTO, "-c", str(conf)], stdout=log_file, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 10
        while True:
            if process.poll() is not None:
                pytest.fail(f"mosquitto exited with {process.returncode}: {log_path.read_text()}")
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
                break
            except OSError:
                if time.monotonic() > deadline:
                    pytest.fail(f"mosquitto did not listen on port {port}: {log_path.read_text()}")
                time.sleep(0.05)
        yield port
    finally:
        process.kill()
        process.wait(timeout=10)


def mosquitto_pub(port: int, username: str, password: str) -> int:
    assert MOSQUITTO_PUB is not None
    command = [MOSQUITTO_PUB, "-h", "127.0.0.1", "-p", str(port), "-u", username, "-P", password]
    result = subprocess.run([*command, "-t", "t", "-m", "m"], capture_output=True, timeout=30)
    return result.returncode


# --- reading ------------------------------------------------------------------------------------------------------


@needs_mosquitto_passwd
def test_reads_files_written_by_mosquitto_passwd(tmp_path: Path) -> None:
    path = tmp_path / "passwords"
    mosquitto_passwd("-b", "-c", path, "alice", "secret")
    mosquitto_passwd("-b", path, "bob", "p:ss wörd")
    mosquitto_passwd("-b", "-I", "5", path, "dave", "few rounds")
    mosquitto_passwd("-H", "sha512", "-b", path, "carol", "old format")

    passwords = PasswordFile.load(path)

    assert passwords.usernames == {"alice", "bob", "carol", "dave"}
    assert passwords.hashes["alice"].scheme is HashScheme.PBKDF2_SHA512
    assert passwords.hashes["alice"].iterations == DEFAULT_ITERATIONS
    assert passwords.hashes["dave"].iterations == 5
    assert passwords.hashes["carol"].scheme is HashScheme.SHA512
    assert passwords.check("alice", b"secret")
    assert passwords.check("bob", "p:ss wörd".encode())
    assert passwords.check("carol", b"old format")
    assert passwords.check("dave", b"few rounds")


@needs_mosquitto_passwd
def test_wrong_passwords_fail(tmp_path: Path) -> None:
    path = tmp_path / "passwords"
    mosquitto_passwd("-b", "-c", path, "alice", "secret")
    mosquitto_passwd("-b", path, "bob", "other")
    passwords = PasswordFile.load(path)

    assert not passwords.check("alice", b"Secret")
    assert not passwords.check("alice", b"secret ")
    assert not passwords.check("alice", b"")
    assert not passwords.check("alice", b"other")  # bob's password
    assert not passwords.check("alice", None)
    assert not passwords.check("Alice", b"secret")  # usernames are case-sensitive
    assert not passwords.check("nobody", b"secret")
    assert passwords.check("alice", b"secret")


def test_sha512_line_generated_here(tmp_path: Path) -> None:
    path = tmp_path / "passwords"
    path.write_text(sha512_line("erin", "hunter2", os.urandom(12)))
    passwords = PasswordFile.load(path)

    assert passwords.check("erin", b"hunter2")
    assert not passwords.check("erin", b"hunter3")


def test_password_with_nul_byte_never_matches(tmp_path: Path) -> None:
    # Mosquitto hashes a C string, so it would accept "secret\0anything" for "secret"; we refuse it.
    path = tmp_path / "passwords"
    path.write_text(f"alice:{hash_password('secret')}\n")
    passwords = PasswordFile.load(path)

    assert passwords.check("alice", b"secret")
    assert not passwords.check("alice", b"secret\x00anything")


def test_comments_blank_lines_spaces_and_crlf_are_accepted(tmp_path: Path) -> None:
    path = tmp_path / "passwords"
    path.write_bytes(
        b"# users of the plant\r\n"
        b"\r\n"
        + f"  alice : {hash_password('a')}  \r\n".encode()
        + b"   # indented comment\n"
        + f"bob:{hash_password('b')}".encode()  # no final newline
    )
    passwords = PasswordFile.load(path)

    assert passwords.usernames == {"alice", "bob"}
    assert passwords.check("alice", b"a")
    assert passwords.check("bob", b"b")


def test_empty_file_has_no_users(tmp_path: Path) -> None:
    path = tmp_path / "passwords"
    path.write_text("")
    passwords = PasswordFile.load(path)

    assert passwords.usernames == frozenset()
    assert not passwords.check("alice", b"")


GOOD = hash_password("x")
SALT = base64.b64encode(bytes(12)).decode()
DIGEST = base64.b64encode(bytes(64)).decode()


@pytest.mark.parametrize(
    ("bad_line", "message"),
    [
        ("alice", "expected 'username:hash'"),
        ("alice:", "expected 'username:hash'"),
        (":" + GOOD, "expected 'username:hash'"),
        ("alice:plaintext", "not hashed"),
        (f"alice:$5${SALT}${DIGEST}", "unknown hash type"),
        (f"alice:$7${SALT}${DIGEST}", "$7$<iterations>$<salt>$<hash>"),
        (f"alice:$7$0${SALT}${DIGEST}", "not a positive integer"),
        (f"alice:$7$ten${SALT}${DIGEST}", "not a positive integer"),
        (f"alice:$7$101$!!!!${DIGEST}", "not base64"),
        (f"alice:$7$101${base64.b64encode(bytes(8)).decode()}${DIGEST}", "salt is 8 bytes long"),
        (f"alice:$7$101${SALT}${base64.b64encode(bytes(32)).decode()}", "hash is 32 bytes long"),
        (f"alice:$6$101${SALT}${DIGEST}", "$6$<salt>$<hash>"),
        (f"alice:{GOOD}:extra", "not base64"),
    ],
)
def test_malformed_line_names_file_and_line(tmp_path: Path, bad_line: str, message: str) -> None:
    path = tmp_path / "passwords"
    path.write_text(f"# header\nbob:{GOOD}\n\n{bad_line}\ncarol:{GOOD}\n")

    with pytest.raises(ConfigError) as caught:
        PasswordFile.load(path)

    text = str(caught.value)
    assert f"password file {path}, line 4" in text
    assert message in text


def test_error_does_not_echo_a_whole_plain_text_password(tmp_path: Path) -> None:
    path = tmp_path / "passwords"
    path.write_text("alicewithoutcolon-and-a-long-secret-that-goes-on-and-on\n")

    with pytest.raises(ConfigError) as caught:
        PasswordFile.load(path)

    assert "goes-on-and-on" not in str(caught.value)
    assert "line 1" in str(caught.value)


def test_duplicate_user_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "passwords"
    path.write_text(f"alice:{GOOD}\nbob:{GOOD}\nalice:{GOOD}\n")

    with pytest.raises(ConfigError, match=r"line 3: user 'alice' is already given on line 1"):
        PasswordFile.load(path)


def test_not_utf8_is_refused_with_line(tmp_path: Path) -> None:
    path = tmp_path / "passwords"
    path.write_bytes(f"alice:{GOOD}\n".encode() + b"b\xffb:" + GOOD.encode() + b"\n")

    with pytest.raises(ConfigError, match=r"line 2: not UTF-8"):
        PasswordFile.load(path)


def test_missing_file_is_a_config_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"password file .*missing.*cannot be read"):
        PasswordFile.load(tmp_path / "missing")


# --- hashing ------------------------------------------------------------------------------------------------------


def test_hash_password_writes_mosquitto_passwd_format() -> None:
    text = hash_password("secret")
    match = re.fullmatch(r"\$7\$101\$([A-Za-z0-9+/]{16})\$([A-Za-z0-9+/]{86}==)", text)
    assert match is not None, text
    salt, digest = (base64.b64decode(part) for part in match.groups())
    assert digest == hashlib.pbkdf2_hmac("sha512", b"secret", salt, 101, 64)


def test_hash_password_uses_fresh_salt_and_given_iterations() -> None:
    first, second = hash_password("secret"), hash_password("secret", iterations=1000)

    assert first.split("$")[3] != second.split("$")[3]
    assert second.startswith("$7$1000$")
    assert PasswordHash.parse(second).matches(b"secret")
    assert PasswordHash.parse(second).encode() == second


@pytest.mark.parametrize(
    ("password", "iterations", "message"),
    [("", 101, "empty"), ("a\x00b", 101, "NUL"), ("x" * 65536, 101, "65535"), ("ok", 0, "iterations")],
)
def test_hash_password_refuses_unusable_input(password: str, iterations: int, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        hash_password(password, iterations=iterations)


# --- set_password -------------------------------------------------------------------------------------------------


def test_set_password_creates_adds_and_replaces(tmp_path: Path) -> None:
    path = tmp_path / "passwords"

    set_password(path, "alice", "first")
    assert path.stat().st_mode & 0o777 == 0o600
    set_password(path, "bob", "bobs")
    set_password(path, "alice", "second")

    passwords = PasswordFile.load(path)
    assert passwords.usernames == {"alice", "bob"}
    assert passwords.check("alice", b"second")
    assert not passwords.check("alice", b"first")
    assert passwords.check("bob", b"bobs")
    lines = path.read_text().splitlines()
    assert [line.split(":")[0] for line in lines] == ["alice", "bob"]  # replaced in place, not appended
    assert sorted(os.listdir(tmp_path)) == ["passwords"]  # no temporary file left behind


def test_set_password_keeps_other_lines_and_mode(tmp_path: Path) -> None:
    path = tmp_path / "passwords"
    original = f"# managed by hand\n\n{sha512_line('carol', 'c', bytes(range(12)))}alice:{GOOD}".encode()
    path.write_bytes(original)
    path.chmod(0o640)

    set_password(path, "alice", "new")
    set_password(path, "dave", "d")

    text = path.read_bytes()
    assert text.startswith(original[: original.index(b"alice:")])
    assert text.count(b"\n") == 5
    assert path.stat().st_mode & 0o777 == 0o640
    passwords = PasswordFile.load(path)
    assert passwords.check("carol", b"c")
    assert passwords.check("alice", b"new")
    assert passwords.check("dave", b"d")


def test_set_password_through_a_symlink_updates_the_target(tmp_path: Path) -> None:
    target = tmp_path / "real"
    set_password(target, "alice", "a")
    link = tmp_path / "link"
    link.symlink_to(target)

    set_password(link, "bob", "b")

    assert link.is_symlink()
    assert PasswordFile.load(target).check("bob", b"b")


def test_set_password_refuses_a_malformed_file_and_leaves_it(tmp_path: Path) -> None:
    path = tmp_path / "passwords"
    path.write_text(f"alice:{GOOD}\nbob:plain\n")
    before = path.read_bytes()

    with pytest.raises(ConfigError, match="line 2"):
        set_password(path, "carol", "c")

    assert path.read_bytes() == before
    assert sorted(os.listdir(tmp_path)) == ["passwords"]


@pytest.mark.parametrize(
    ("username", "message"),
    [("", "empty"), ("a:b", "':'"), ("a\nb", "control"), (" alice", "white space"), ("#alice", "comment")],
)
def test_set_password_refuses_unusable_usernames(tmp_path: Path, username: str, message: str) -> None:
    path = tmp_path / "passwords"

    with pytest.raises(ValueError, match=message):
        set_password(path, username, "pw")

    assert not path.exists()


@needs_mosquitto_passwd
def test_mosquitto_passwd_edits_a_file_we_wrote(tmp_path: Path) -> None:
    path = tmp_path / "passwords"
    set_password(path, "alice", "ours")

    mosquitto_passwd("-b", path, "bob", "theirs")
    set_password(path, "bob", "ours too")

    passwords = PasswordFile.load(path)
    assert passwords.check("alice", b"ours")
    assert passwords.check("bob", b"ours too")


@needs_mosquitto
def test_mosquitto_accepts_a_file_we_wrote(tmp_path: Path) -> None:
    path = tmp_path / "passwords"
    set_password(path, "alice", "s3cret wörd")
    set_password(path, "bob", "many rounds", iterations=5000)

    with running_mosquitto(tmp_path, [f"password_file {path}", "allow_anonymous false"]) as port:
        assert mosquitto_pub(port, "alice", "s3cret wörd") == 0
        assert mosquitto_pub(port, "bob", "many rounds") == 0
        assert mosquitto_pub(port, "alice", "wrong") != 0
        assert mosquitto_pub(port, "carol", "s3cret wörd") != 0
