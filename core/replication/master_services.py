"""The services only a group's master runs, because they write (RocketMQ's BrokerController starts them on the master
and, in controller mode, on the broker elected master): the delay levels and timers that move parked messages when
they are due, the recalls that drop some of them, and the transaction check-backs.

A slave holds what they need in the log it copies (parked messages, half and op messages) and in the progress it
copies from its master (core.replication.master_copy); elected master, it starts them from there, and each service's
restart rule applies as after a crash: a message moved already is looked for in its topic (core.moves.already_moved)
before it is moved, so none is delivered twice and none is lost. Demoted, it stops them before its log may be cut.
"""

from __future__ import annotations

from collections.abc import Callable

from core.scheduling.delay_levels import ScheduleService
from core.scheduling.recalls import RecallTable
from core.scheduling.timers import TimerService
from core.transactions.service import TransactionService


class MasterServices:
    def __init__(
        self,
        recalls: RecallTable,
        schedule: ScheduleService,
        timers: TimerService,
        transactions: TransactionService,
    ) -> None:
        self.recalls = recalls
        self.schedule = schedule
        self.timers = timers
        self.transactions = transactions
        self.running = False

    async def start(self, settled_before: Callable[[], int]) -> None:
        """Start them (the store must have dispatched everything appended before: they rebuild from the queues)."""
        if self.running:
            return
        self.recalls.load()  # before the services move anything it may hold back
        for service in (self.schedule, self.timers, self.transactions):
            await service.start()
        self.recalls.start(settled_before)
        self.running = True

    async def close(self) -> None:
        if not self.running:
            return
        self.running = False
        for service in (self.transactions, self.timers, self.schedule):
            await service.close()
        await self.recalls.close()
