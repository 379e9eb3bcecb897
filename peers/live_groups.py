"""The live broker groups of a cluster as one door of a node follows them: asked of the NameServers every
LIVE_INTERVAL_S (a killed node's group leaves their routes at once, when its connection closes), with a callback
when they change, so that work placed by peers/owners.py moves."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable

from peers.group_peers import ClusterPeers
from peers.owners import owner

log = logging.getLogger(__name__)

# How often the live groups are asked of the NameServers.
LIVE_INTERVAL_S = 1.0


class LiveGroups:
    def __init__(self, peers: ClusterPeers, what: str) -> None:
        """`what` names the door in the log."""
        self.peers = peers
        self.group = peers.own_group
        self.what = what
        self.live: list[str] = [self.group]
        # Called when the live groups changed.
        self.changed: Callable[[], None] = lambda: None
        self._watching: asyncio.Task[None] | None = None

    async def start(self) -> None:
        with contextlib.suppress(Exception):  # no NameServer answers: this node alone until one does
            self.live = await self.peers.live_groups()
        self._watching = asyncio.get_running_loop().create_task(self._watch(), name=f"{self.what} live groups")

    async def close(self) -> None:
        if self._watching is not None:
            self._watching.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._watching
            self._watching = None

    def owner(self, work: str) -> str:
        """The group whose node runs `work` (this one's when it knows no other)."""
        return owner(work, self.live) or self.group

    def owns(self, work: str) -> bool:
        return self.owner(work) == self.group

    def known(self) -> list[str]:
        """Every group known, live or not (one that is down is read again when it is back)."""
        return sorted({self.group, *self.peers.other_groups(), *self.live})

    async def _watch(self) -> None:
        while True:
            await asyncio.sleep(LIVE_INTERVAL_S)
            try:
                live = await self.peers.live_groups()
            except Exception as exc:  # what was known stays the best guess
                log.debug("%s: live groups not known: %s", self.what, exc)
                continue
            if live != self.live:
                log.info("%s: live broker groups %s (were %s)", self.what, ", ".join(live), ", ".join(self.live))
                self.live = live
                self.changed()
