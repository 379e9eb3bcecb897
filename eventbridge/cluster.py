"""EventBridge on a cluster of broker groups (docs/cluster.md, "EventBridge on a cluster"): every node's rules are
the cluster's, an event put on any node is routed once where it is stored, and each target's delivery runs on one
node at a time, reading the target's delivery queue on every group.

- Rules: the rules directory is shared (peers/shared_directory.py, records of topic EB_CLUSTER): a rule file
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
- Replays: each node replays what its own group holds (its bus topic, its archives: each node archives the events
  its group stored), so a replay asked of one node is asked of the others too (a replay record, `replay_elsewhere`)
  and covers the cluster; every node appends its copies to its own bus, routed there to the rule's targets.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from connectors.remote_reader import RemoteReader
from core import Broker, Message, MessageQueue
from eventbridge.rules.directory import RULE_FILE_SUFFIXES
from peers.group_peers import ClusterPeers
from peers.live_groups import LiveGroups
from peers.record_listeners import RecordListeners
from peers.shared_directory import SharedDirectory

log = logging.getLogger(__name__)

# The records of EventBridge on a cluster (the rules directory's, and replays'), one queue on every group.
RECORDS_TOPIC = "EB_CLUSTER"
# A replay record: the group asking; body {"bus", "from", "to", "rule", "name", "archive"} (times in ms).
PROPERTY_REPLAY = "EB_REPLAY"
# Where the shared directory's versions are kept, under DATA_DIR.
STATE_FILE = Path("eventbridge") / "shared-rules.json"


def is_rule_file(name: str) -> bool:
    return Path(name).suffix in RULE_FILE_SUFFIXES and not name.startswith(".")


class EventBridgeCluster:
    def __init__(self, namesrv_addresses: Sequence[str], group: str, rules_dir: Path, data_dir: Path) -> None:
        self.group = group
        self.peers = ClusterPeers(namesrv_addresses, group, RECORDS_TOPIC, "EVENTBRIDGE")
        self.rules = SharedDirectory(rules_dir, is_rule_file, data_dir / STATE_FILE, self.peers)
        # Its `changed` callback is the runtime's, which moves targets.
        self.live = LiveGroups(self.peers, "EventBridge")
        self._records: RecordListeners | None = None
        # A replay another node asked for (the runtime runs this group's part).
        self.replay_requested: Callable[[dict[str, Any]], None] = lambda request: None

    def open(self, broker: Broker) -> None:
        """Before the broker registers: the records topic on this group (in its first registration), and its records
        applied as they are stored."""
        if not broker.has_topic(RECORDS_TOPIC):
            broker.create_topic(RECORDS_TOPIC, 1)
        self._records = RecordListeners.of(broker)
        self._records.set(RECORDS_TOPIC, self.record_stored)

    async def join(self) -> None:
        """Once registered: the others' rule files taken, this node's given, the live groups known."""
        await self.peers.start()
        await self.rules.join()
        await self.live.start()
        log.info("EventBridge on a cluster: broker group %s; live groups %s", self.group, ", ".join(self.live.live))

    async def close(self) -> None:
        if self._records is not None:
            self._records.clear(RECORDS_TOPIC, self.record_stored)
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

    # --- records ---

    def record_stored(self, message: Message) -> None:
        """A record of EB_CLUSTER reached this group's store (before its writer's SEND_OK)."""
        asking = message.properties.get(PROPERTY_REPLAY)
        if asking is None:
            self.rules.record_stored(message)
            return
        if asking == self.group:
            return
        try:
            request = json.loads(bytes(message.body))
            if not isinstance(request, dict):
                raise ValueError("not an object")
        except ValueError as exc:
            log.error("a replay record from broker group %s could not be read (%s): skipped", asking, exc)
            return
        self.replay_requested(request)

    async def replay_elsewhere(self, request: dict[str, Any]) -> list[str]:
        """Ask every other live group's node to replay its part of `request`; the groups told."""
        others = await self.peers.other_live_groups()
        message = Message(RECORDS_TOPIC, json.dumps(request).encode(), properties={PROPERTY_REPLAY: self.group})
        failed = await self.peers.broadcast(message, others)
        return [group for group in others if group not in failed]
