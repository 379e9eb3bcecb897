"""A JVM start that fails is tried again (spark_session._start): PySpark forks its launcher with a preexec_fn, and
in a process whose other threads hold locks at that moment the child can die before it sends its port. The
builder here stands for PySpark's, failing as PySpark does; no Spark is started."""

from __future__ import annotations

import pytest

from spark_sink import spark_session
from spark_sink.errors import SparkSessionError


class FlakyBuilder:
    """A SparkSession.builder whose first `failures` starts fail as a dead launcher makes them fail."""

    def __init__(self, failures: int) -> None:
        self.failures = failures
        self.calls = 0
        self.session = object()

    def getOrCreate(self) -> object:  # PySpark's name
        self.calls += 1
        if self.calls <= self.failures:
            raise RuntimeError("[JAVA_GATEWAY_EXITED] Java gateway process exited before sending its port number.")
        return self.session


@pytest.fixture(autouse=True)
def no_wait(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(spark_session, "START_RETRY_S", 0.0)


def test_a_failed_start_is_tried_again() -> None:
    builder = FlakyBuilder(failures=spark_session.START_ATTEMPTS - 1)
    assert spark_session._start(builder, "local[1]") is builder.session
    assert builder.calls == spark_session.START_ATTEMPTS


def test_a_start_failing_every_time_is_reported_with_its_cause() -> None:
    builder = FlakyBuilder(failures=spark_session.START_ATTEMPTS)
    with pytest.raises(SparkSessionError, match=r"cannot start Spark on 'local\[1\]': \[JAVA_GATEWAY_EXITED\]"):
        spark_session._start(builder, "local[1]")
    assert builder.calls == spark_session.START_ATTEMPTS
