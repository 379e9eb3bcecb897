"""A cluster of processes per test module: one NameServer and two broker groups (broker-a, broker-b) of cluster C."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.cluster.processes import ClusterProcesses


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ClusterProcesses]:
    processes = ClusterProcesses(tmp_path_factory.mktemp("cluster"))
    try:
        yield processes
    finally:
        processes.stop()
