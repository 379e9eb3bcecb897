"""`make deb` installs the Debian packages without leaving a broker running: the real recipe runs with fake
`dpkg`, `apt-get`, `systemctl` and `sudo` first on the PATH, a policy-rc.d path and a systemd marker directory in
a temporary directory, and the fakes record what they were asked and what they saw. `make test` also installs the
RocketMQ 4 clients of the remoting tests (Node.js and npm from Debian when missing, then ali-ons with `npm ci` and
the Python client with pip, each in its own directory, again when its pinned list changes); the real recipes run
with fake `npm` and `python`."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
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


# --- the RocketMQ 4 clients of the remoting tests: Node.js and npm from Debian, each client in its own directory ---


def make_variable(name: str, path_dirs: list[Path]) -> list[str]:
    """The words of a Makefile variable, evaluated with only `path_dirs` on the PATH (so that a command found there,
    or not, decides what the Makefile adds)."""
    make = shutil.which("make")
    assert make is not None
    result = subprocess.run(
        [make, "--no-print-directory", "-s", "--eval", f"print-variable: ; @echo $({name})", "print-variable"],
        cwd=ROOT, capture_output=True, text=True, timeout=60,
        env={**os.environ, "PATH": os.pathsep.join(map(str, path_dirs))},
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    return result.stdout.split()


@pytest.mark.parametrize(
    ("on_path", "added"),
    [((), ["nodejs", "npm"]), (("node",), ["npm"]), (("node", "npm"), [])],
)
def test_node_and_npm_are_installed_unless_on_the_path(tmp_path: Path, on_path: tuple[str, ...], added: list[str]):
    if shutil.which("make") is None:
        pytest.skip("make is not installed")
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    # The Makefile reads pyproject.toml with python3; java is there so that the JDK stays out of the list.
    (bin_dir / "python3").symlink_to(sys.executable)
    for name in ("java", *on_path):
        (bin_dir / name).write_text("#!/bin/sh\n")
        (bin_dir / name).chmod(0o755)
    packages = make_variable("DEB_PACKAGES", [bin_dir])
    assert [package for package in packages if package in ("nodejs", "npm")] == added
    assert "openjdk-17-jre-headless" not in packages


# npm: logs where it ran and with what, and at `ci` makes node_modules. python (the venv's, for pip): logs its
# arguments and makes the --target directory.
FAKE_NPM = """#!/bin/sh
echo "npm $* in $(pwd)" >> "$FAKE/log"
[ "$1" = ci ] && mkdir -p node_modules
exit 0
"""
FAKE_PYTHON = """#!/bin/sh
echo "python $*" >> "$FAKE/log"
while [ $# -gt 0 ]; do [ "$1" = --target ] && mkdir -p "$2"; shift; done
exit 0
"""


def make_client(host: Host, target: Path, clients: Path) -> subprocess.CompletedProcess[str]:
    for name, script in [("npm", FAKE_NPM), ("python", FAKE_PYTHON)]:
        path = host.fake / "bin" / name
        path.write_text(script)
        path.chmod(0o755)
    return subprocess.run(
        ["make", "--no-print-directory", str(target), "DEB_PACKAGES=", f"BIN={host.fake / 'bin'}",
         f"ROCKETMQ4_NODE={clients / 'node'}", f"ROCKETMQ4_PYTHON={clients / 'python'}"],
        cwd=ROOT, capture_output=True, text=True, timeout=60,
        env={**os.environ, "PATH": f"{host.fake / 'bin'}:{os.environ['PATH']}", "FAKE": str(host.fake)},
    )  # fmt: skip


def newer(path: Path, than: Path) -> None:
    stamp = than.stat().st_mtime + 10
    os.utime(path, (stamp, stamp))


def test_npm_ci_runs_when_node_modules_is_missing_or_older_than_the_lock_file(host: Host, tmp_path: Path):
    clients = tmp_path / "clients"
    node = clients / "node"
    node.mkdir(parents=True)
    (node / "package-lock.json").write_text("{}\n")
    target = node / "node_modules"
    for _ in range(2):  # installed once, then up to date
        result = make_client(host, target, clients)
        assert result.returncode == 0, result.stderr
    assert host.log() == [f"npm ci --no-audit --no-fund in {node}"]
    assert target.is_dir()
    newer(node / "package-lock.json", than=target)
    assert make_client(host, target, clients).returncode == 0
    assert host.log() == [f"npm ci --no-audit --no-fund in {node}"] * 2
    newer(target, than=node / "package-lock.json")  # npm ci leaves node_modules newer than the lock file
    assert make_client(host, target, clients).returncode == 0
    assert len(host.log()) == 2


def test_the_python_client_is_installed_into_its_own_directory_from_its_list(host: Host, tmp_path: Path):
    clients = tmp_path / "clients"
    python = clients / "python"
    python.mkdir(parents=True)
    (python / "requirements.txt").write_text("rocketmq-client-python==0.5.0rc2\n")
    target = python / "site"
    install = f"python -m pip install --quiet --no-deps --target {target} -r {python / 'requirements.txt'}"
    for _ in range(2):
        result = make_client(host, target, clients)
        assert result.returncode == 0, result.stderr
    assert host.log() == [install]
    newer(python / "requirements.txt", than=target)
    assert make_client(host, target, clients).returncode == 0
    assert host.log() == [install, install]


def test_make_test_installs_the_test_clients_and_make_run_none():
    if shutil.which("make") is None:
        pytest.skip("make is not installed")
    database = subprocess.run(
        ["make", "--no-print-directory", "-p", "-q", "test"], cwd=ROOT, capture_output=True, text=True, timeout=60
    ).stdout
    rules = dict(
        line.split(":", 1)
        for line in database.splitlines()
        if line.startswith(("test:", "run:", "rocketmq4", "test-clients"))
    )
    assert "test-clients" in rules["test"].split()
    assert not {"test-clients", "rocketmq4-clients"} & set(rules["run"].split())
    assert rules["test-clients"].split() == ["rocketmq4-clients", "tests/proxy/node/node_modules"]
    assert rules["rocketmq4-clients"].split() == [
        "tests/broker_remoting/python/site",
        "tests/broker_remoting/node/node_modules",
    ]
