"""A network namespace the test creates, joined to this one by a veth pair, so that a process run inside it
(`wrapper`) can have its link cut (`cut`) and restored (`restore`) without its connections being reset: packets
just stop, as when a cable or a switch fails. Needs root (CAP_NET_ADMIN), as the CI machine has."""

from __future__ import annotations

import os
import subprocess


def _ip(*args: str) -> None:
    done = subprocess.run(["ip", *args], capture_output=True, text=True)
    assert done.returncode == 0, f"ip {' '.join(args)}: {done.stderr.strip()}"


class NetworkNamespace:
    def __init__(self, tag: str) -> None:
        number = os.getpid() % 100_000
        self.name = f"mqgate-{tag}-{number}"
        self.host_end, self.inner_end = f"mqh{number}", f"mqi{number}"
        subnet = 16 + number % 200
        self.host_ip, self.inner_ip = f"10.213.{subnet}.1", f"10.213.{subnet}.2"
        _ip("netns", "add", self.name)
        try:
            _ip("link", "add", self.host_end, "type", "veth", "peer", "name", self.inner_end)
            _ip("link", "set", self.inner_end, "netns", self.name)
            _ip("addr", "add", f"{self.host_ip}/30", "dev", self.host_end)
            _ip("link", "set", self.host_end, "up")
            self._inside("addr", "add", f"{self.inner_ip}/30", "dev", self.inner_end)
            self._inside("link", "set", self.inner_end, "up")
            self._inside("link", "set", "lo", "up")
        except BaseException:
            self.close()
            raise

    @property
    def wrapper(self) -> tuple[str, ...]:
        """The command prefix that runs a command inside the namespace."""
        return ("ip", "netns", "exec", self.name)

    def _inside(self, *args: str) -> None:
        _ip("netns", "exec", self.name, "ip", *args)

    def cut(self) -> None:
        self._inside("link", "set", self.inner_end, "down")

    def restore(self) -> None:
        self._inside("link", "set", self.inner_end, "up")

    def close(self) -> None:
        subprocess.run(["ip", "link", "del", self.host_end], capture_output=True)
        subprocess.run(["ip", "netns", "del", self.name], capture_output=True)
