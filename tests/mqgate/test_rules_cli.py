"""`mqgate rules test`, run as a real process: match, no match, and invalid patterns, events and files; and `mqgate
rules list` against a real `mqgate serve` with a rule file it refused."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

from tests.serve_process import ROOT, ServeProcess

PATTERN = {"source": ["shop"], "detail": {"total": [{"numeric": [">", 100]}], "ip": [{"cidr": "10.0.0.0/8"}]}}


def rules_test(*args: str | Path, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "mqgate.cli", "rules", "test", *map(str, args)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        input=stdin,
        timeout=60,
    )


def write(path: Path, value: object) -> Path:
    path.write_text(value if isinstance(value, str) else json.dumps(value))
    return path


def test_match_and_no_match(tmp_path: Path) -> None:
    pattern = write(tmp_path / "pattern.json", PATTERN)
    good = write(tmp_path / "good.json", {"source": "shop", "detail": {"total": 120.5, "ip": "10.2.3.4"}})
    cheap = write(tmp_path / "cheap.json", {"source": "shop", "detail": {"total": 100, "ip": "10.2.3.4"}})

    result = rules_test(pattern, good)
    assert (result.returncode, result.stdout, result.stderr) == (0, "match\n", "")
    result = rules_test(pattern, cheap)
    assert (result.returncode, result.stdout, result.stderr) == (1, "no match\n", "")
    result = rules_test(pattern, "-", stdin=good.read_text())
    assert (result.returncode, result.stdout) == (0, "match\n")


def test_invalid_pattern_exits_2_with_path_and_reason(tmp_path: Path) -> None:
    pattern = write(tmp_path / "pattern.json", {"detail": {"temp": [{"numeric": [">", "hot"]}]}})
    event = write(tmp_path / "event.json", {"detail": {"temp": 5}})
    result = rules_test(pattern, event)
    assert result.returncode == 2
    assert result.stdout == ""
    assert "invalid pattern: detail.temp[0].numeric[1]: expected a number, not a string" in result.stderr

    broken = write(tmp_path / "broken.json", '{"a": [1,]}')
    result = rules_test(broken, event)
    assert result.returncode == 2
    assert "invalid pattern: <pattern>: not valid JSON" in result.stderr


def test_invalid_event_or_file_exits_2(tmp_path: Path) -> None:
    pattern = write(tmp_path / "pattern.json", PATTERN)
    for event_text, reason in [("[1, 2]", "an event must be a JSON object"), ("{", "not valid JSON")]:
        event = write(tmp_path / "event.json", event_text)
        result = rules_test(pattern, event)
        assert result.returncode == 2, event_text
        assert f"invalid event: {reason}" in result.stderr
    result = rules_test(pattern, tmp_path / "missing.json")
    assert result.returncode == 2
    assert "missing.json: cannot read" in result.stderr


def rules_list(serve: ServeProcess, *args: str) -> subprocess.CompletedProcess[str]:
    env = {key: value for key, value in os.environ.items() if key not in ("MQGATE_TOKEN", "MQGATE_URL")}
    return subprocess.run(
        [sys.executable, "-m", "mqgate.cli", "rules", "list", "--url", serve.http_url, *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        env={**env, "COLUMNS": "250"},
    )


def test_rules_list_shows_the_rules_and_each_refused_file_with_its_error(tmp_path: Path) -> None:
    rules = tmp_path / "data" / "rules"
    rules.mkdir(parents=True)
    (rules / "good.yaml").write_text(
        "rules:\n  - {name: orders, pattern: {type: [order]}, targets: [{id: t, type: http, url: 'http://127.0.0.1:9/'}]}\n"
    )
    (rules / "typo.yaml").write_text(
        "rules:\n  - name: cold\n    patern: {type: [reading]}\n    targets: [{id: t, type: http, url: 'http://x/'}]\n"
    )
    serve = ServeProcess(tmp_path / "data")
    try:
        result = rules_list(serve)
        assert result.returncode == 0, result.stderr
        assert "orders" in result.stdout and '{"type": ["order"]}' in result.stdout
        assert "1 rule file(s) refused" in result.stdout
        error = (
            f"{rules / 'typo.yaml'}:3:5: rule: unknown key 'patern'; did you mean 'pattern'? (it names default/cold)"
        )
        assert error in result.stdout, result.stdout
        as_json = json.loads(rules_list(serve, "--json").stdout)
        assert [entry["rules"] for entry in as_json["refused"]] == [["default/cold"]]

        (rules / "typo.yaml").unlink()
        deadline = time.monotonic() + 20
        while "no rule file refused" not in (result := rules_list(serve)).stdout:
            assert time.monotonic() < deadline, result.stdout
            time.sleep(0.2)
    finally:
        assert serve.stop() == 0
    unreachable = rules_list(serve)
    assert unreachable.returncode == 1 and "cannot reach" in unreachable.stderr
