"""What `mqgate serve` writes to its log at INFO: what happened, not every HTTP request nor whole dataclass reprs.
Requests are there at DEBUG."""

from __future__ import annotations

import urllib.request
from pathlib import Path

import pytest

from tests.serve_process import ServeProcess


def _get(serve: ServeProcess, path: str) -> None:
    with urllib.request.urlopen(f"{serve.http_url}{path}", timeout=30) as response:
        response.read()


@pytest.mark.parametrize(("level", "logged"), [("INFO", False), ("DEBUG", True)])
def test_requests_are_logged_at_debug_only(tmp_path: Path, level: str, logged: bool) -> None:
    serve = ServeProcess(tmp_path / "data", "--log-level", level)
    try:
        for _ in range(3):
            _get(serve, "/admin/topics")
    finally:
        assert serve.stop() == 0
    log = serve.stderr()
    assert ('"GET /admin/topics HTTP/1.1" 200' in log) is logged
    if logged:
        assert all(" DEBUG " in line for line in log.splitlines() if "mqgate.http.requests" in line)


def test_the_start_is_logged_in_words_not_reprs(tmp_path: Path) -> None:
    serve = ServeProcess(tmp_path / "data")
    try:
        _get(serve, "/")
    finally:
        assert serve.stop() == 0
    log = serve.stderr()
    for repr_of in ("RecoveryReport(", "TopicConfig(", "SubscriptionGroupConfig(", "<Perm.", "<MessageType."):
        assert repr_of not in log
    assert "open: clean, log 0..0" in log
    assert "topic 'SCHEDULE_TOPIC_XXXX' created or updated: 18 read and 18 write queues, perm 6, NORMAL" in log
