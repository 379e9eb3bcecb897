"""Where the RocketMQ 4 clients the broker_remoting tests drive are installed (by `make test`, from the pinned lists
beside them): the Python client, rocketmq-client-python (RocketMQ's C++ client, librocketmq, behind ctypes), in
python/site/, and the Node.js client, ali-ons, in node/node_modules/.

The Python client runs in a child process with `python_client_env()`: its package `rocketmq` would shadow the
RocketMQ 5 client's (rocketmq-python-client, the gRPC tests') in this one, which is why it is not in .venv.
"""

from __future__ import annotations

import os
from pathlib import Path

HERE = Path(__file__).resolve().parent
PYTHON_CLIENT_SITE = HERE / "python" / "site"
NODE_CLIENT_DIR = HERE / "node"
INSTALL_HINT = "run `make test` (or `make rocketmq4-clients`) to install the RocketMQ 4 clients"


def python_client_env() -> dict[str, str]:
    """The environment of a child Python that imports the RocketMQ 4 client (`from rocketmq.client import ...`)."""
    # No empty entry: one would put the working directory on the child's path.
    paths = [str(PYTHON_CLIENT_SITE), *filter(None, os.environ.get("PYTHONPATH", "").split(os.pathsep))]
    return {**os.environ, "PYTHONPATH": os.pathsep.join(paths)}
