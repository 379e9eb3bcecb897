"""The dashboard in real headless Chromium (Debian's, driven by Playwright): after readings published over MQTT
while a persistent session was away, it shows the topic, the session group's lag and the MQTT clients, finds the
readings with its message search, asks for credentials first, and loads nothing from anywhere but mqgate."""

from __future__ import annotations

import shutil
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from playwright.sync_api import Browser, Page, expect, sync_playwright

from tests.proxy.serving import start
from tests.serve_process import ServeProcess, mqtt_client

pytestmark = pytest.mark.slow

CHROMIUM = "/usr/bin/chromium"
TOKEN = "dashboard-token"
# As the machine's own check starts it: no sandbox as root, and no background connections to Google's hosts,
# which this closed network refuses many at a time.
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
READINGS = 3
WAIT_MS = 30_000


@pytest.fixture(scope="module")
def serve(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServeProcess]:
    process = start(tmp_path_factory.mktemp("dashboard") / "data", config=f'[http]\ntoken = "{TOKEN}"\n')
    try:
        away = mqtt_client(process, "plc-7", clean=False)
        away.subscribe("plant/#", qos=1)
        time.sleep(0.5)
        away.disconnect()
        away.loop_stop()
        publisher = mqtt_client(process, "line-sensor", clean=True)
        for index in range(READINGS):
            publisher.publish(f"plant/line{index}/temp", f"reading-{index}".encode(), qos=1).wait_for_publish(30)
        publisher.disconnect()
        publisher.loop_stop()
        yield process
    finally:
        assert process.stop() == 0


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    if shutil.which(CHROMIUM) is None:
        pytest.fail(f"{CHROMIUM} is missing: `make test` installs Debian's chromium")
    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        yield launched
        launched.close()


@pytest.fixture
def page(browser: Browser, serve: ServeProcess) -> Iterator[Page]:
    # The browser's own sign-in: HTTP Basic with the token as the password.
    context = browser.new_context(http_credentials={"username": "operator", "password": TOKEN})
    opened = context.new_page()
    opened.set_default_timeout(WAIT_MS)
    yield opened
    context.close()


def test_the_dashboard_asks_for_credentials(browser: Browser, serve: ServeProcess) -> None:
    context = browser.new_context()
    try:
        # A navigation without credentials ends in the browser's sign-in (headless: an error); the answer itself:
        response = context.request.get(f"{serve.http_url}/dashboard")
        assert response.status == 401
        assert 'Basic realm="mqgate"' in response.headers["www-authenticate"]
    finally:
        context.close()


def test_the_dashboard_shows_topics_lag_clients_and_finds_messages(
    page: Page, serve: ServeProcess, tmp_path: Path
) -> None:
    requested: list[str] = []
    page.on("request", lambda request: requested.append(request.url))
    page.goto(f"{serve.http_url}/dashboard")

    expect(page.locator("#overview-cards")).to_contain_text("messages stored")
    expect(page.locator("#rate-chart polyline")).to_have_count(1)

    page.click("nav a[href='#topics']")
    topic_row = page.locator("#topics-table tr", has_text="plant")
    expect(topic_row).to_have_count(1)
    expect(topic_row.locator("td").last).to_have_text(str(READINGS))  # messages in the topic

    page.click("nav a[href='#groups']")
    group_row = page.locator("#groups-table tr", has_text="MQTT_SESSION_plc-7")
    expect(group_row).to_have_count(1)
    expect(group_row.locator("td").last).to_have_text(str(READINGS))  # lag: all it missed while away
    group_row.locator("button").click()
    expect(page.locator("#group-detail")).to_contain_text(f"lag {READINGS}")

    page.click("nav a[href='#clients']")
    expect(page.locator("#clients-table tr", has_text="plc-7")).to_contain_text("plant/# (QoS 1)")

    page.click("nav a[href='#messages']")
    page.fill("input[name=topic]", "plant")
    page.select_option("select[name=by]", "time")
    page.click("#search button[type=submit]")
    expect(page.locator("#search-results")).to_contain_text(f"{READINGS} message(s)")
    expect(page.locator("#search-results")).to_contain_text("reading-2")
    page.locator("#search-results button").first.click()
    expect(page.locator("#message-detail pre")).to_have_text("reading-0")
    expect(page.locator("#message-detail")).to_contain_text("MQTT_TOPIC")

    shot = tmp_path / "dashboard.png"
    page.screenshot(path=str(shot), full_page=True)
    assert shot.stat().st_size > 10_000
    # Offline: every request went to mqgate itself.
    assert requested and all(url.startswith(serve.http_url) for url in requested), requested


def test_the_dashboard_fills_its_panels_when_the_url_carries_the_credentials(
    browser: Browser, serve: ServeProcess
) -> None:
    # http://user:password@host/dashboard: the page's own URL holds the credentials, and a request built from it
    # cannot be made (fetch refuses such a URL); the page must build its requests from its origin.
    context = browser.new_context()
    try:
        opened = context.new_page()
        opened.set_default_timeout(WAIT_MS)
        errors: list[str] = []
        opened.on("pageerror", lambda error: errors.append(str(error)))
        host = serve.http_url.removeprefix("http://")
        opened.goto(f"http://operator:{TOKEN}@{host}/dashboard")

        expect(opened.locator("#overview-cards")).to_contain_text("messages stored")
        expect(opened.locator("#disk")).to_contain_text("flush mode")
        expect(opened.locator("#status")).to_contain_text("updated")
        expect(opened.locator("#status")).not_to_have_class("error")
        opened.click("nav a[href='#topics']")
        expect(opened.locator("#topics-table tr", has_text="plant")).to_have_count(1)
        opened.click("nav a[href='#groups']")
        expect(opened.locator("#groups-table tr", has_text="MQTT_SESSION_plc-7")).to_have_count(1)
        expect(opened.locator("#status")).to_contain_text("updated")
        expect(opened.locator("#status")).not_to_have_class("error")
        assert not errors, errors
    finally:
        context.close()


def test_the_rules_page_shows_a_refused_rule_file_with_its_error(page: Page, serve: ServeProcess) -> None:
    typo = serve.data_dir / "rules" / "typo.yaml"
    typo.write_text(
        "rules:\n  - name: cold\n    patern: {type: [x]}\n    targets: [{id: t, type: http, url: 'http://x/'}]\n"
    )
    try:
        page.goto(f"{serve.http_url}/dashboard#rules")
        refused = page.locator("#rules-refused tr", has_text="typo.yaml")
        expect(refused).to_contain_text("3:5: rule: unknown key 'patern'; did you mean 'pattern'?")
        expect(refused).to_contain_text("default/cold")
        expect(page.locator("#status")).not_to_have_class("error")
    finally:
        typo.unlink()
