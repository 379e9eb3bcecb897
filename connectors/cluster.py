"""The connector runtime on a cluster of broker groups (docs/cluster.md, "Connectors on a cluster"), as Kafka
Connect's distributed mode runs it: every node's worker knows every connector, and each task runs on one node.

- Configs: the connectors' configs (with their paused flag) are a table shared by every node (peers/shared_table.py,
  records of topic CONNECT_CLUSTER): a connector created, changed, paused, resumed or deleted through the REST API of
  any node is in every other node's table before the API answers, and each node's worker applies it.
- Tasks: task n of connector c runs on the node of the live group owning `task_work(c, n)` (peers/owners.py);
  the others hold it as running there. When the live groups change, each node stops what it lost at once and starts
  what it gained HANDOVER_S later (the same rule as EventBridge's targets).
- Source tasks append to their node's group; their committed positions are a shared table too (source_runner.py).
- A sink task reads its topics' queues on every live group (the NameServers' route), other groups' over remoting
  (connectors/remote_reader.py), with the connector's consumer group's offsets on each queue's group.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from pathlib import Path

from connectors.remote_reader import RemoteReader
from core import Broker, CoreError, Message, MessageQueue
from peers.group_peers import ClusterPeers
from peers.live_groups import LiveGroups
from peers.record_listeners import RecordListeners
from peers.shared_table import SharedTable

log = logging.getLogger(__name__)

RECORDS_TOPIC = "CONNECT_CLUSTER"
CONFIGS_TABLE = "configs"
POSITIONS_TABLE = "positions"
# Where the shared configs and their versions are kept, under the worker's data dir (DATA_DIR/connect).
CONFIGS_STATE_FILE = "shared-configs.json"
POSITIONS_STATE_FILE = "shared-positions.json"


def task_work(connector: str, task: int) -> str:
    """The name a task is placed by (the same on every node)."""
    return f"connector {connector} task {task}"


class ConnectCluster:
    def __init__(self, namesrv_addresses: Sequence[str], group: str, data_dir: Path) -> None:
        """`data_dir`: the worker's (DATA_DIR/connect)."""
        self.group = group
        self.peers = ClusterPeers(namesrv_addresses, group, RECORDS_TOPIC, "CONNECT")
        self.configs = SharedTable(self.peers, CONFIGS_TABLE, Path(data_dir) / CONFIGS_STATE_FILE)
        # Source tasks' committed positions, so that the node a source task moves to resumes where it was.
        self.positions = SharedTable(self.peers, POSITIONS_TABLE, Path(data_dir) / POSITIONS_STATE_FILE)
        # Its `changed` callback is the worker's, which moves tasks.
        self.live = LiveGroups(self.peers, "connectors")
        self._records: RecordListeners | None = None

    def open(self, broker: Broker) -> None:
        """Before the broker registers: the records topic on this group (in its first registration), and its records
        applied as they are stored."""
        if not broker.has_topic(RECORDS_TOPIC):
            broker.create_topic(RECORDS_TOPIC, 1)
        self._records = RecordListeners.of(broker)
        self._records.set(RECORDS_TOPIC, self._on_record)

    async def join(self) -> None:
        """Once registered: the others' configs taken, this node's given, the live groups known."""
        await self.peers.start()
        await self.configs.join()
        await self.positions.join()
        await self.live.start()
        log.info("connectors on a cluster: broker group %s; live groups %s", self.group, ", ".join(self.live.live))

    async def close(self) -> None:
        if self._records is not None:
            self._records.clear(RECORDS_TOPIC, self._on_record)
        await self.live.close()
        await self.positions.close()
        await self.configs.close()
        await self.peers.close()

    def owner(self, work: str) -> str:
        return self.live.owner(work)

    def owns(self, work: str) -> bool:
        return self.live.owns(work)

    async def other_queues(self, topic: str) -> list[MessageQueue]:
        """The read queues of `topic` on the other groups the NameServers route (none while they route none)."""
        try:
            route = await self.peers.cluster.route(topic, refresh=True)
        except CoreError as exc:
            log.info("topic %s: no route from the NameServers (%s); this group's queues only for now", topic, exc)
            return []
        return [queue for queue in route.read_queues() if queue.broker_name != self.group]

    def reader(self, consumer_group: str) -> RemoteReader:
        return RemoteReader(self.peers.cluster, consumer_group)

    def _on_record(self, message: Message) -> None:
        self.configs.record_stored(message)
        self.positions.record_stored(message)
