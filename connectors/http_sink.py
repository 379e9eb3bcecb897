"""The HTTP sink: POSTs each record's body to `url`. A 2xx answer is success; anything else (or no answer within
`timeout.ms`) raises, and the runtime retries the record, dead-letters it or fails the task, per errors.*.
At least once: a record is POSTed again after a crash before its offset was committed."""

from __future__ import annotations

from typing import Any, ClassVar

import aiohttp

from connectors.api import (
    ConfigDef,
    ConfigKey,
    ConfigType,
    Connector,
    Importance,
    SinkRecord,
    SinkTask,
    TaskContext,
    at_least,
)
from connectors.errors import ConnectorError


class HttpSinkError(ConnectorError):
    """The target did not accept a record."""


def parse_headers(text: str) -> dict[str, str]:
    """`Name: value|Name2: value2` (| separates headers: a value may hold commas)."""
    headers = {}
    for item in text.split("|"):
        if not item.strip():
            continue
        name, sep, value = item.partition(":")
        if not sep or not name.strip():
            raise ValueError(f"header {item.strip()!r}: expected 'Name: value'")
        headers[name.strip()] = value.strip()
    return headers


def _check_headers(value: Any) -> None:
    parse_headers(value)


def _check_url(value: Any) -> None:
    if not str(value).startswith(("http://", "https://")):
        raise ValueError("expected an http:// or https:// URL")


class HttpSinkTask(SinkTask):
    def __init__(self) -> None:
        self.url = ""
        self.session: aiohttp.ClientSession | None = None

    async def start(self, config: dict[str, Any], context: TaskContext) -> None:
        self.url = config["url"]
        timeout = aiohttp.ClientTimeout(total=config["timeout.ms"] / 1000)
        self.session = aiohttp.ClientSession(headers=parse_headers(config["headers"]), timeout=timeout)

    async def put(self, records: list[SinkRecord]) -> None:
        assert self.session is not None
        for record in records:
            try:
                async with self.session.post(self.url, data=record.body) as response:
                    if not 200 <= response.status < 300:
                        text = (await response.text(errors="replace"))[:200]
                        raise HttpSinkError(f"POST {self.url}: HTTP {response.status} {response.reason}: {text}")
            except (aiohttp.ClientError, TimeoutError) as exc:
                raise HttpSinkError(f"POST {self.url}: {type(exc).__name__}: {exc}") from exc

    async def stop(self) -> None:
        if self.session is not None:
            await self.session.close()
            self.session = None


class HttpSinkConnector(Connector):
    kind: ClassVar[str] = "sink"
    version: ClassVar[str] = "1.0"
    config_def: ClassVar[ConfigDef] = (
        ConfigDef()
        .define(
            ConfigKey(
                "url",
                ConfigType.STRING,
                "where each record is POSTed",
                importance=Importance.HIGH,
                validator=_check_url,
            )
        )
        .define(ConfigKey("topics", ConfigType.LIST, "the topics to read", importance=Importance.HIGH))
        .define(
            ConfigKey(
                "headers",
                ConfigType.STRING,
                "request headers, 'Name: value|Name2: value2'",
                "",
                validator=_check_headers,
            )
        )
        .define(
            ConfigKey("timeout.ms", ConfigType.LONG, "the longest wait for an answer", 30_000, validator=at_least(1))
        )
    )

    def task(self) -> HttpSinkTask:
        return HttpSinkTask()
