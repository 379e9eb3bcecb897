"""`make deb` installs the Debian packages without leaving a broker running: the real recipe runs with fake
`dpkg`, `apt-get`, `systemctl` and `sudo` first on the PATH, a policy-rc.d path and a systemd marker directory in
a temporary directory, and the fakes record what they were asked and what they saw."""

from __future__ import annotations

import os
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

# dpkg -s PACKAGE: installed when PACKAGE is a line of $FAKE/installed.
FAKE_DPKG = """#!/bin/sh
[ "$1" = -s ] && grep -qx "$2" "$FAKE/installed"
"""
# apt-get: logs its arguments; at `install` it logs what the policy-rc.d says about starting a service (its exit
# code, as invoke-rc.d runs it) and marks the packages installed, or fails when $FAKE/fail-install exists.
FAKE_APT_GET = """#!/bin/sh
echo "apt-get $*" >> "$FAKE/log"
if [ "$1" = -o ]; then shift 2; fi
if [ "$1" = install ]; then
  if [ -x "$POLICY" ]; then "$POLICY" mosquitto start; echo "policy-rc.d exit $?" >> "$FAKE/log"
  else echo "no policy-rc.d" >> "$FAKE/log"; fi
  [ -e "$FAKE/fail-install" ] && exit 100
  for arg in "$@"; do case "$arg" in -*|install) ;; *) echo "$arg" >> "$FAKE/installed";; esac; done
fi
exit 0
"""
FAKE_SYSTEMCTL = """#!/bin/sh
echo "systemctl $*" >> "$FAKE/log"
"""
FAKE_SUDO = """#!/bin/sh
exec "$@"
"""


# Every apt-get waits for the dpkg lock a first-boot upgrade may hold, rather than failing at once.
LOCK = "-o DPkg::Lock::Timeout=300"


@dataclass
class Host:
    fake: Path  # the fakes' state: installed, log
    policy: Path  # where the recipe writes policy-rc.d
    systemd: Path  # exists when "systemd is running"

    def install(self, *packages: str) -> None:
        with open(self.fake / "installed", "a") as installed:
            installed.writelines(f"{package}\n" for package in packages)

    def make_deb(self, *packages: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            ["make", "--no-print-directory", "deb", f"DEB_PACKAGES={' '.join(packages)}",
             f"POLICY_RC_D={self.policy}", f"SYSTEMD_RUN_DIR={self.systemd}"],
            cwd=ROOT, capture_output=True, text=True, timeout=60,
            env={**os.environ, "PATH": f"{self.fake / 'bin'}:{os.environ['PATH']}", "FAKE": str(self.fake),
                 "POLICY": str(self.policy)},
        )  # fmt: skip

    def log(self) -> list[str]:
        path = self.fake / "log"
        return path.read_text().splitlines() if path.exists() else []


@pytest.fixture
def host(tmp_path: Path) -> Host:
    if shutil.which("make") is None:
        pytest.skip("make is not installed")
    fake = tmp_path / "fake"
    (fake / "bin").mkdir(parents=True)
    for name, script in [("dpkg", FAKE_DPKG), ("apt-get", FAKE_APT_GET), ("systemctl", FAKE_SYSTEMCTL),
                         ("sudo", FAKE_SUDO)]:  # fmt: skip
        path = fake / "bin" / name
        path.write_text(script)
        path.chmod(0o755)
    (fake / "installed").write_text("")
    systemd = tmp_path / "run-systemd-system"
    systemd.mkdir()
    return Host(fake, tmp_path / "policy-rc.d", systemd)


def test_a_mosquitto_it_installs_is_kept_from_starting_and_disabled(host: Host):
    result = host.make_deb("mosquitto", "mosquitto-clients", "openssl")
    assert result.returncode == 0, result.stderr
    assert host.log() == [
        f"apt-get {LOCK} update -qq",
        f"apt-get {LOCK} install -y -qq mosquitto mosquitto-clients openssl",
        "policy-rc.d exit 101",  # invoke-rc.d would not start the service
        "systemctl disable --now mosquitto",
    ]
    assert not host.policy.exists()  # no policy-rc.d is left behind
    assert "disabling the mosquitto service this set-up installed" in result.stdout
    assert "apt waits up to 300 s for the package database when another install holds its lock" in result.stdout


def test_a_mosquitto_the_user_installed_is_left_running(host: Host):
    host.install("mosquitto")
    result = host.make_deb("mosquitto", "mosquitto-clients")
    assert result.returncode == 0, result.stderr
    assert host.log() == [
        f"apt-get {LOCK} update -qq",
        f"apt-get {LOCK} install -y -qq mosquitto-clients",
        "policy-rc.d exit 101",
    ]


def test_without_systemd_nothing_is_disabled(host: Host):
    host.systemd.rmdir()
    result = host.make_deb("mosquitto")
    assert result.returncode == 0, result.stderr
    assert host.log() == [
        f"apt-get {LOCK} update -qq",
        f"apt-get {LOCK} install -y -qq mosquitto",
        "policy-rc.d exit 101",
    ]


def test_nothing_missing_runs_no_apt_get(host: Host):
    host.install("mosquitto", "openssl")
    result = host.make_deb("mosquitto", "openssl")
    assert result.returncode == 0, result.stderr
    assert host.log() == []
    assert result.stdout == ""


def test_an_existing_policy_rc_d_is_put_back_even_when_the_install_fails(host: Host):
    host.policy.write_text("#!/bin/sh\n# the administrator's policy\nexit 0\n")
    host.policy.chmod(0o755)
    (host.fake / "fail-install").touch()
    result = host.make_deb("mosquitto")
    assert result.returncode != 0
    # Ours was in place during the install, the administrator's is back afterwards, and nothing was disabled.
    assert host.log() == [
        f"apt-get {LOCK} update -qq",
        f"apt-get {LOCK} install -y -qq mosquitto",
        "policy-rc.d exit 101",
    ]
    assert host.policy.read_text() == "#!/bin/sh\n# the administrator's policy\nexit 0\n"
    assert not Path(f"{host.policy}.mqgate-saved").exists()
