"""The RocketMQ 4 clients the broker_remoting tests drive are installed, each where the Makefile puts it: the Python
client rocketmq-client-python (librocketmq in its wheel) and the Node.js client ali-ons. Each is loaded in a child
process, as the tests run them."""

from __future__ import annotations

import subprocess
import sys

from tests.broker_remoting.rocketmq4_clients import INSTALL_HINT, NODE_CLIENT_DIR, PYTHON_CLIENT_SITE, python_client_env


def test_the_python_client_imports_from_its_own_directory():
    # Loading librocketmq (ctypes) is part of the import: a missing system library fails here.
    script = "import rocketmq.client as c; from rocketmq.client import Producer, PushConsumer; print(c.__file__)"
    result = subprocess.run(
        [sys.executable, "-c", script], env=python_client_env(), capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 0, f"{result.stderr}\n{INSTALL_HINT}"
    # Its own copy, not one in .venv, where it would break the RocketMQ 5 client's package.
    assert result.stdout.strip().startswith(str(PYTHON_CLIENT_SITE)), result.stdout


def test_the_node_client_loads():
    result = subprocess.run(
        ["node", "-e", "require('ali-ons'); console.log(require('ali-ons/package.json').version)"],
        cwd=NODE_CLIENT_DIR,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, f"{result.stderr}\n{INSTALL_HINT}"
    assert result.stdout.strip() == "3.12.0"
