"""EventBridge on a cluster of broker groups (docs/cluster.md, "EventBridge on a cluster"): every node's rules are
the cluster's, an event put on any node is routed once where it is stored, and each target's delivery runs on one
node at a time, reading the target's delivery queue on every group.

- Rules: the rules directory is shared (peers/shared_directory.py, records of topic EB_RULE_FILES): a rule file
  written, changed or deleted on one node, by an operator or through the API, is on every node's disk before the
  API answers, and each node loads it as its own. Every node's router then routes by the same rules.
- Routing: an event is stored, and routed to its targets' delivery queues, by the node that took it (PutEvents, an
  event source, a schedule): once, in one append, as on one node.
- Delivery: a target's owner is one of the live groups (peers/owners.py, by the target's name); its node runs the
  target and reads its queue on every group it knows (connectors/remote_reader.py), with the target's consumer
  group's offsets on each queue's group. When the live groups change (a node starts, dies or is back), each node
  stops what it no longer owns at once, and starts what it gained HANDOVER_S later: time for the previous owner to
  see the change, finish its batch in flight and write its offsets.
- Scheduled rules fire on their rule's owner only.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from pathlib import Path

from connectors.remote_reader import RemoteReader
from core import Broker, Message, MessageQueue, SendResult
from eventbridge.rules.directory import RULE_FILE_SUFFIXES
from peers.group_peers import ClusterPeers
from peers.live_groups import LiveGroups
from peers.shared_directory import SharedDirectory

log = logging.getLogger(__name__)

RULES_TOPIC = "EB_RULE_FILES"
# A node starts a target it gained this long after it saw the change: the previous owner sees it within
# peers.live_groups.LIVE_INTERVAL_S and stops, its batch in flight delivered and its offsets written, before the new
# one reads.
HANDOVER_S = 3.0
# Where the shared directory's versions are kept, under DATA_DIR.
STATE_FILE = Path("eventbridge") / "shared-rules.json"


def is_rule_file(name: str) -> bool:
    return Path(name).suffix in RULE_FILE_SUFFIXES and not name.startswith(".")


class EventBridgeCluster:
    def __init__(self, namesrv_addresses: Sequence[str], group: str, rules_dir: Path, data_dir: Path) -> None:
        self.group = group
        self.peers = ClusterPeers(namesrv_addresses, group, RULES_TOPIC, "EVENTBRIDGE")
        self.rules = SharedDirectory(rules_dir, is_rule_file, data_dir / STATE_FILE, self.peers)
        # Its `changed` callback is the runtime's, which moves targets.
        self.live = LiveGroups(self.peers, "EventBridge")

    def open(self, broker: Broker) -> None:
        """Before the broker registers: the records topic on this group (in its first registration), and its records
        applied as they are stored."""
        if not broker.has_topic(RULES_TOPIC):
            broker.create_topic(RULES_TOPIC, 1)
        broker.add_stored_listener(self._on_stored)

    async def join(self) -> None:
        """Once registered: the others' rule files taken, this node's given, the live groups known."""
        await self.peers.start()
        await self.rules.join()
        await self.live.start()
        log.info("EventBridge on a cluster: broker group %s; live groups %s", self.group, ", ".join(self.live.live))

    async def close(self) -> None:
        await self.live.close()
        await self.rules.close()
        await self.peers.close()

    def owner(self, work: str) -> str:
        return self.live.owner(work)

    def owns(self, work: str) -> bool:
        return self.live.owns(work)

    def queues(self, queue: str) -> list[MessageQueue]:
        """A delivery queue on every group known (one that is down is read when it is back: its events wait)."""
        return [MessageQueue(queue, group, 0) for group in self.live.known()]

    def reader(self, consumer_group: str) -> RemoteReader:
        return RemoteReader(self.peers.cluster, consumer_group)

    def _on_stored(self, message: Message, result: SendResult) -> None:
        if message.topic == RULES_TOPIC:
            self.rules.record_stored(message)
