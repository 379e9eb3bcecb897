"""Fixtures shared by the EventBridge tests: a started HTTP target server, a broker on a fresh store, and an HTTP
target client."""

from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest

from core import Broker
from eventbridge.targets.http_target import HttpTargetClient
from tests.core.conftest import make_broker  # noqa: F401 (a fixture: brokers on fresh stores, closed after)
from tests.eventbridge.target_server import target  # noqa: F401 (a fixture: a started HTTP target server)


@pytest.fixture
async def broker(make_broker: Callable[..., Any]) -> Broker:  # noqa: F811
    made: Broker = await make_broker()
    return made


@pytest.fixture
async def client() -> AsyncIterator[HttpTargetClient]:
    made = HttpTargetClient()
    yield made
    await made.close()
