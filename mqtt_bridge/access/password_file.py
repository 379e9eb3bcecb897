"""Mosquitto password files: checking a client's CONNECT credentials and adding users.

Layout, as `mosquitto_passwd` (Mosquitto 2.x) writes it, one user a line, UTF-8:

    # comment
    alice:$7$101$ReH0DlHVYs0LlzBL$/rGTVQxzk2tF...dCNwyPCqQd4/zd7vg==
    carol:$6$KdUWIuEfcm9lsNbH$DGlwc8no6T56ijU...JtyuOLTTyD3O5vw==

- `username:hash`; spaces around either part are ignored (Mosquitto trims them too). Blank lines and lines whose
  first non-blank character is `#` are ignored.
- `$7$<iterations>$<salt>$<digest>`: PBKDF2-HMAC-SHA512 of the password bytes with the salt, `iterations`
  rounds (mosquitto_passwd's default is 101, `-I` changes it), 64-byte output. The default since Mosquitto 2.0.
- `$6$<salt>$<digest>`: SHA-512 of the password bytes followed by the salt bytes; Mosquitto 1.x's format, which
  `mosquitto_passwd -H sha512` still writes.
- `salt` is 12 random bytes and `digest` 64 bytes, both in standard base64 with padding (16 and 88 characters).
  Mosquitto drops entries with any other length, so we refuse them.

Mosquitto skips unusable lines with a log message; we refuse the whole file with a `ConfigError` naming the file
and line, because a silently dropped user surfaces much later as a puzzling "not authorized". A username given
twice is refused for the same reason (Mosquitto would keep one of them, which one is not documented).

A client password that contains a NUL byte never matches: Mosquitto hashes the password as a C string, so it
would compare only the bytes before the NUL, and no password we or mosquitto_passwd write can contain one.
"""

from __future__ import annotations

import base64
import binascii
import enum
import hashlib
import hmac
import logging
import os
import secrets
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType

from mqtt_bridge.errors import ConfigError

log = logging.getLogger(__name__)

# mosquitto_passwd's PW_DEFAULT_ITERATIONS. Low by today's standards, but it is what the broker's own tool
# writes; raise it per file with `iterations=` (the cost is paid once per CONNECT).
DEFAULT_ITERATIONS = 101
# Mosquitto's SALT_LEN and SHA-512's output size; the broker drops entries with other lengths.
SALT_BYTES = 12
DIGEST_BYTES = 64
# MQTT strings and binary data carry a 16-bit length, and mosquitto_passwd refuses longer usernames/passwords.
MAX_FIELD_BYTES = 65535


class HashScheme(enum.Enum):
    """The two hash formats Mosquitto 2.x reads, named by their `$n$` prefix."""

    SHA512 = "6"
    PBKDF2_SHA512 = "7"


@dataclass(frozen=True, slots=True)
class PasswordHash:
    """One decoded hash from a password file; `iterations` is 0 for the unsalted-rounds `$6$` scheme."""

    scheme: HashScheme
    salt: bytes
    digest: bytes
    iterations: int = 0

    @classmethod
    def parse(cls, text: str) -> PasswordHash:
        """Decode `$7$...` or `$6$...`; raises ValueError saying what is wrong (the caller adds file and line)."""
        if not text.startswith("$"):
            raise ValueError("the password is not hashed (it must start with $7$ or $6$)")
        fields = text[1:].split("$")
        # mosquitto_passwd ends nothing with '$', but a trailing empty field is harmless; tolerate it.
        if fields and fields[-1] == "" and len(fields) > 1:
            fields.pop()
        scheme_id = fields[0]
        if scheme_id == HashScheme.PBKDF2_SHA512.value:
            if len(fields) != 4:
                raise ValueError("a $7$ hash has the form $7$<iterations>$<salt>$<hash>")
            iterations_text, salt_text, digest_text = fields[1:]
            if not iterations_text.isascii() or not iterations_text.isdigit() or int(iterations_text) < 1:
                raise ValueError(f"the iteration count {iterations_text!r} is not a positive integer")
            return cls(
                HashScheme.PBKDF2_SHA512,
                _decode_base64(salt_text, "salt", SALT_BYTES),
                _decode_base64(digest_text, "hash", DIGEST_BYTES),
                int(iterations_text),
            )
        if scheme_id == HashScheme.SHA512.value:
            if len(fields) != 3:
                raise ValueError("a $6$ hash has the form $6$<salt>$<hash>")
            return cls(
                HashScheme.SHA512,
                _decode_base64(fields[1], "salt", SALT_BYTES),
                _decode_base64(fields[2], "hash", DIGEST_BYTES),
            )
        raise ValueError(f"unknown hash type ${scheme_id}$ (Mosquitto knows $7$ and $6$)")

    def encode(self) -> str:
        salt = base64.b64encode(self.salt).decode("ascii")
        digest = base64.b64encode(self.digest).decode("ascii")
        if self.scheme is HashScheme.PBKDF2_SHA512:
            return f"$7${self.iterations}${salt}${digest}"
        return f"$6${salt}${digest}"

    def matches(self, password: bytes) -> bool:
        return hmac.compare_digest(_digest(self.scheme, password, self.salt, self.iterations), self.digest)


def _decode_base64(text: str, what: str, size: int) -> bytes:
    try:
        raw = base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError) as exc:
        raise ValueError(f"the {what} {text!r} is not base64 ({exc})") from exc
    if len(raw) != size:
        raise ValueError(f"the {what} is {len(raw)} bytes long, Mosquitto expects {size}")
    return raw


def _digest(scheme: HashScheme, password: bytes, salt: bytes, iterations: int) -> bytes:
    if scheme is HashScheme.PBKDF2_SHA512:
        return hashlib.pbkdf2_hmac("sha512", password, salt, iterations, DIGEST_BYTES)
    return hashlib.sha512(password + salt).digest()


# Checked against for unknown usernames so that a wrong username costs as much time as a wrong password: the
# response time must not tell a client which usernames exist.
_DECOY = PasswordHash(HashScheme.PBKDF2_SHA512, bytes(SALT_BYTES), bytes(DIGEST_BYTES), DEFAULT_ITERATIONS)


@dataclass(frozen=True, slots=True)
class PasswordFile:
    """The users of one password file, by username. Immutable: reload the file to see changes."""

    path: Path
    hashes: Mapping[str, PasswordHash]

    @classmethod
    def load(cls, path: str | os.PathLike[str]) -> PasswordFile:
        """Read and decode `path`; raises ConfigError naming the file and line of the first unusable line."""
        path = Path(path)
        try:
            raw = path.read_bytes()
        except OSError as exc:
            raise ConfigError(
                f"password file {path}: cannot be read ({exc.strerror or exc}); check password_file in the "
                "configuration and the file's permissions"
            ) from exc
        hashes = _parse(path, raw)
        log.info("loaded %d user(s) from password file %s", len(hashes), path)
        return cls(path, MappingProxyType(hashes))

    @property
    def usernames(self) -> frozenset[str]:
        return frozenset(self.hashes)

    def check(self, username: str, password: bytes | None) -> bool:
        """True when `username` is in the file and `password` is its password.

        An unknown user, a missing password (None) and a password containing a NUL byte all fail.
        """
        entry = self.hashes.get(username)
        if entry is None or password is None or b"\x00" in password:
            _DECOY.matches(password or b"")
            return False
        return entry.matches(password)


def _parse(path: Path, raw: bytes) -> dict[str, PasswordHash]:
    """username -> hash for every user line of `raw`, the content of `path`."""
    hashes: dict[str, PasswordHash] = {}
    first_seen: dict[str, int] = {}
    for number, raw_line in enumerate(raw.splitlines(), start=1):
        try:
            line = raw_line.decode("utf-8").strip()
        except UnicodeDecodeError as exc:
            raise ConfigError(f"password file {path}, line {number}: not UTF-8 text ({exc.reason})") from exc
        if not line or line.startswith("#"):
            continue
        username, colon, hash_text = line.partition(":")
        username, hash_text = username.strip(), hash_text.strip()
        if not colon or not username or not hash_text:
            raise ConfigError(
                f"password file {path}, line {number}: expected 'username:hash', found {_shorten(line)!r}; "
                "write passwords with `mqgate passwd` or `mosquitto_passwd`"
            )
        try:
            entry = PasswordHash.parse(hash_text)
        except ValueError as exc:
            raise ConfigError(
                f"password file {path}, line {number} (user {username!r}): {exc}; set the password again with "
                "`mqgate passwd` or `mosquitto_passwd` (`mosquitto_passwd -U` hashes a file of plain passwords)"
            ) from exc
        if username in hashes:
            raise ConfigError(
                f"password file {path}, line {number}: user {username!r} is already given on line "
                f"{first_seen[username]}; delete one of the two lines"
            )
        hashes[username] = entry
        first_seen[username] = number
    return hashes


def _shorten(line: str, limit: int = 40) -> str:
    # Error messages end up in logs: never echo a whole line, it may hold a plain-text password.
    return line if len(line) <= limit else line[:limit] + "..."


def hash_password(password: str, *, iterations: int = DEFAULT_ITERATIONS) -> str:
    """A `$7$` (PBKDF2-HMAC-SHA512) hash of `password` with a fresh random salt, as mosquitto_passwd writes it."""
    encoded = _validate_password(password)
    if iterations < 1:
        raise ValueError(f"iterations must be a positive integer, got {iterations}")
    salt = secrets.token_bytes(SALT_BYTES)
    digest = _digest(HashScheme.PBKDF2_SHA512, encoded, salt, iterations)
    return PasswordHash(HashScheme.PBKDF2_SHA512, salt, digest, iterations).encode()


def _validate_password(password: str) -> bytes:
    encoded = password.encode("utf-8")
    if not encoded:
        raise ValueError("the password is empty; choose a non-empty password")
    if b"\x00" in encoded:
        raise ValueError("the password contains a NUL character, which Mosquitto cannot check; remove it")
    if len(encoded) > MAX_FIELD_BYTES:
        raise ValueError(f"the password is {len(encoded)} bytes long in UTF-8; MQTT allows at most {MAX_FIELD_BYTES}")
    return encoded


def _validate_username(username: str) -> None:
    # The same rules as mosquitto_passwd, plus those that keep the line readable by both parsers: a leading '#'
    # makes the line a comment and surrounding spaces are trimmed away on reading.
    problem = None
    if not username:
        problem = "is empty"
    elif ":" in username:
        problem = "contains ':', which separates the username from the hash"
    elif any(ord(char) < 0x20 or 0x7F <= ord(char) < 0xA0 for char in username):
        problem = "contains a control character"
    elif username != username.strip():
        problem = "starts or ends with white space, which is trimmed when the file is read"
    elif username.startswith("#"):
        problem = "starts with '#', which would make the line a comment"
    elif len(username.encode("utf-8")) > MAX_FIELD_BYTES:
        problem = f"is longer than {MAX_FIELD_BYTES} bytes in UTF-8"
    if problem:
        raise ValueError(f"username {username!r} {problem}; choose another username")


def set_password(
    path: str | os.PathLike[str],
    username: str,
    password: str,
    *,
    iterations: int = DEFAULT_ITERATIONS,
    create: bool = False,
) -> None:
    """Give `username` the password `password` in the password file `path`, adding the user if new.

    Creates the file (mode 0600) when missing; with `create` (mosquitto_passwd -c) the file holds only this user
    afterwards, whatever it held before. The other lines, comments included, are kept byte for byte. The new
    content goes to a temporary file in the same directory which is fsynced and renamed over `path`, so a reader
    (or a crash) sees the old file or the new one, never a mix. Concurrent writers are not serialised: the last
    rename wins. Raises ValueError for an unusable username or password and ConfigError when the existing file
    is malformed (it is left untouched).
    """
    _validate_username(username)
    new_line = f"{username}:{hash_password(password, iterations=iterations)}\n".encode()
    target, old, mode = _read_for_update(path)
    if create:
        old = b""
    _parse(target, old)  # refuse to rewrite a file we cannot read back
    lines = old.splitlines(keepends=True)
    replaced = False
    for index, line in enumerate(lines):
        if _line_user(line) == username:
            lines[index] = new_line
            replaced = True
    if not replaced:
        if lines and not lines[-1].endswith((b"\n", b"\r")):
            lines[-1] += b"\n"
        lines.append(new_line)
    _replace_atomically(target, b"".join(lines), mode)
    log.info("%s the password of user %r in %s", "changed" if replaced else "added", username, target)


def delete_user(path: str | os.PathLike[str], username: str) -> bool:
    """Remove `username` from the password file `path` (mosquitto_passwd -D); False when it was not there.

    The other lines are kept byte for byte and the file is replaced atomically, as by `set_password`. Raises
    ConfigError when the file is missing, unreadable or malformed (it is left untouched).
    """
    target, old, mode = _read_for_update(path, must_exist=True)
    _parse(target, old)
    lines = old.splitlines(keepends=True)
    kept = [line for line in lines if _line_user(line) != username]
    if len(kept) == len(lines):
        return False
    _replace_atomically(target, b"".join(kept), mode)
    log.info("deleted user %r from %s", username, target)
    return True


def hash_plain_passwords(path: str | os.PathLike[str], *, iterations: int = DEFAULT_ITERATIONS) -> int:
    """Hash, in place, the plain-text passwords of a file of `username:password` lines (mosquitto_passwd -U).

    Returns how many lines were hashed. As mosquitto_passwd 2.0 reads them, username and password are trimmed of
    white space. Comments and blank lines are kept. Stricter than mosquitto_passwd, never different from it:
    - a password containing ':' is refused, because mosquitto_passwd would silently hash only the part before it;
    - a line whose password is already a `$7$`/`$6$` hash is left alone (mosquitto_passwd would hash the hash), so
      running this twice changes nothing.
    Raises ConfigError naming the file and line of a line without ':' or with an unusable username or password,
    and of a username given twice; the file is then left untouched.
    """
    target, old, mode = _read_for_update(path, must_exist=True)
    lines = old.splitlines(keepends=True)
    hashed = 0
    for number, raw_line in enumerate(lines, start=1):
        where = f"password file {target}, line {number}"
        try:
            text = raw_line.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise ConfigError(f"{where}: not UTF-8 text ({exc.reason})") from exc
        body = text.rstrip("\r\n")
        if not body.strip() or body.lstrip().startswith("#"):
            continue
        username, colon, password = body.partition(":")
        username, password = username.strip(), password.strip()
        if not colon:
            raise ConfigError(f"{where}: expected 'username:password', found {_shorten(body)!r}")
        try:
            PasswordHash.parse(password)
            continue  # already hashed
        except ValueError:
            pass
        if ":" in password:
            raise ConfigError(
                f"{where} (user {username!r}): the password contains ':', which mosquitto_passwd -U would cut off; "
                "set this user's password with `mqgate passwd -b` instead"
            )
        try:
            _validate_username(username)
            lines[number - 1] = f"{username}:{hash_password(password, iterations=iterations)}\n".encode()
        except ValueError as exc:
            raise ConfigError(f"{where}: {exc}") from None
        hashed += 1
    data = b"".join(lines)
    _parse(target, data)  # duplicate users, and a last check that the result reads back
    _replace_atomically(target, data, mode)
    log.info("hashed %d plain-text password(s) in %s", hashed, target)
    return hashed


def _line_user(line: bytes) -> str | None:
    name, colon, _ = line.decode("utf-8").partition(":")
    stripped = name.strip()
    return stripped if colon and stripped and not stripped.startswith("#") else None


def _read_for_update(path: str | os.PathLike[str], *, must_exist: bool = False) -> tuple[Path, bytes, int]:
    """The real path (through a symlink, so the link keeps pointing at the file), content and mode of `path`."""
    target = Path(os.path.realpath(path))
    try:
        return target, target.read_bytes(), target.stat().st_mode & 0o7777
    except FileNotFoundError:
        if must_exist:
            raise ConfigError(f"password file {path}: does not exist") from None
        return target, b"", 0o600
    except OSError as exc:
        raise ConfigError(f"password file {path}: cannot be read ({exc.strerror or exc})") from None


def _replace_atomically(target: Path, data: bytes, mode: int) -> None:
    fd, temp_name = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    try:
        with os.fdopen(fd, "wb") as temp:
            os.fchmod(temp.fileno(), mode)
            temp.write(data)
            temp.flush()
            os.fsync(temp.fileno())
        os.replace(temp_name, target)
    except BaseException:
        Path(temp_name).unlink(missing_ok=True)
        raise
    # The rename is durable only once the directory entry is on disk.
    directory = os.open(target.parent, os.O_RDONLY)
    try:
        os.fsync(directory)
    finally:
        os.close(directory)
