"""A shared subscription (`$share/<group>/<filter>`): its members read one light queue as a clustering consumer
group, so each message goes to one member. No I/O: the gateway asks it which offsets a member may send and
tells it what was acknowledged.

A member *takes* offsets when it can send them (its window is open), so a slow member takes fewer and a gone
member none: the work goes where the capacity is, as in RocketMQ's pop consumption. What a member took and has
not settled (acknowledged, or sent at QoS 0, or skipped) is given back when its connection goes, and handed out
first to the next member that takes (MQTT 5 4.8.2 lets the server send it to another member as soon as the
connection is lost; EMQX does the same). The group's committed offset is the lowest offset not settled: after a
broker restart the group resumes there, so an unacknowledged message is delivered again (at least once).
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass, field

from mqtt_bridge.sessions.session import core_group_name, split_key

# Offsets one member takes in one go at most: small enough that a burst is spread over the members that are
# ready, big enough that a member's delivery round reads a useful batch.
TAKE_BATCH = 32


def shared_group_name(queue: str) -> str:
    """The core consumer group under which a shared subscription's position is committed."""
    return core_group_name("MQTT_SHARED", queue)


@dataclass(slots=True)
class SharedGroup:
    queue: str  # the light queue (QUEUE@GROUP: another broker group's, handed out by this node)
    share_name: str
    topic_filter: str
    next_offset: int  # the lowest offset nobody has taken yet
    members: set[str] = field(default_factory=set)  # client ids, connected or not
    # Offsets taken and not settled, with who holds them.
    taken: dict[int, str] = field(default_factory=dict)
    # Offsets given back by members that went, handed out again first (a heap: lowest first).
    returned: list[int] = field(default_factory=list)
    dropped: int = 0
    rotation: int = 0  # which connected member is woken first next time

    @property
    def consumer_group(self) -> str:
        # A group handed out here for another broker group's queue (its queue QUEUE@GROUP) commits under the same
        # name there: whichever node hands that queue out next resumes from it.
        return shared_group_name(split_key(self.queue)[0])

    def backlog(self, high: int) -> int:
        """Messages waiting for a member: given back, or not taken yet below `high` (the queue's end)."""
        return len(self.returned) + max(0, high - self.next_offset)

    def skip_to(self, offset: int) -> int:
        """Give up everything not taken below `offset` (max_queued_messages, or offsets removed by retention);
        returns how many were skipped."""
        skipped = max(0, offset - self.next_offset)
        self.next_offset = max(self.next_offset, offset)
        kept = [returned for returned in self.returned if returned >= offset]
        skipped += len(self.returned) - len(kept)
        heapq.heapify(kept)
        self.returned = kept
        return skipped

    def take(self, member: str, high: int, count: int) -> list[int]:
        """Hand `member` up to `count` offsets below `high`: given-back ones first, then new ones, ascending."""
        got: list[int] = []
        while self.returned and len(got) < count:
            got.append(heapq.heappop(self.returned))
        end = min(high, self.next_offset + count - len(got))
        got.extend(range(self.next_offset, end))
        self.next_offset = max(self.next_offset, end)
        for offset in got:
            self.taken[offset] = member
        return got

    def settle(self, offset: int) -> None:
        """The offset is done with: acknowledged, sent at QoS 0, expired or refused."""
        self.taken.pop(offset, None)

    def give_back(self, offsets: list[int]) -> None:
        """Offsets a member took and cannot send (its window closed, or it went): someone else takes them."""
        for offset in offsets:
            if self.taken.pop(offset, None) is not None:
                heapq.heappush(self.returned, offset)

    def give_back_member(self, member: str) -> list[int]:
        """Everything `member` holds goes back to the group; returns the offsets."""
        held = [offset for offset, holder in self.taken.items() if holder == member]
        self.give_back(held)
        return held

    def committed(self) -> int:
        """The offset to commit: nothing below it is still to be delivered or acknowledged."""
        low = self.next_offset
        if self.taken:
            low = min(low, min(self.taken))
        if self.returned:
            low = min(low, self.returned[0])
        return low
