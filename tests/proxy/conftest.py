"""rocketmq-python-client writes its log under ~/logs/rocketmq_python when first imported (log_config.py resolves
the path then, once). Import it here, before any test module of this directory, with HOME pointing at a temporary
directory, then put HOME back: the tests never write into the real home, and nothing else in the run sees the
change."""

import atexit
import os
import shutil
import tempfile

_home = tempfile.mkdtemp(prefix="mqgate-rocketmq-home-")
_saved_home = os.environ.get("HOME")
os.environ["HOME"] = _home
try:
    import rocketmq  # noqa: F401
finally:
    if _saved_home is None:
        del os.environ["HOME"]
    else:
        os.environ["HOME"] = _saved_home
# The client's log handler keeps its file open; on POSIX the directory can go while it is open.
atexit.register(shutil.rmtree, _home, ignore_errors=True)

from tests.eventbridge.target_server import target  # noqa: E402, F401 (a fixture: a started HTTP target server)
