"""The broker's settings (`[broker]` of mqgate's configuration): one frozen dataclass, with RocketMQ's names and
defaults where it has them."""

from __future__ import annotations

from dataclasses import dataclass

from core.consumer_registry import DEFAULT_EXPIRE_AFTER_S
from core.queue_locks import DEFAULT_LOCK_EXPIRE_S
from core.scheduling.delay_levels import DEFAULT_DELAY_LEVELS, parse_delay_levels
from core.store.config import BrokerRole

# A pull waits at most 15 s for a message (the consumer's brokerSuspendMaxTimeMillis).
DEFAULT_LONG_POLL_MS = 15_000
# RocketMQ's flushConsumerOffsetInterval.
OFFSET_PERSIST_INTERVAL_S = 5.0


@dataclass(slots=True, frozen=True)
class BrokerConfig:
    # The broker group's name (RocketMQ's brokerName): in its message queues, in routes, what it registers under.
    broker_name: str = "broker-a"
    # Its place in the group (RocketMQ's brokerId): 0 for the master, 1, 2, ... for slaves; and its role
    # (RocketMQ's brokerRole). A slave copies its master's log (core.store.ha) and serves reads.
    broker_id: int = 0
    broker_role: BrokerRole = BrokerRole.ASYNC_MASTER
    # Automatic failover (RocketMQ's enableControllerMode; mqgate's [controller] sets it): the controller names the
    # role. `broker_id` is then the broker's identity in its group (1 or more; it registers as 0 while master) and
    # `broker_role` how it acts as master (SYNC_MASTER or ASYNC_MASTER).
    enable_controller_mode: bool = False
    # A master suggests that consumers far behind read from a slave (RocketMQ's slaveReadEnable), and a slave
    # serves such reads while its master lives; off, a slave serves reads only while its master is down.
    slave_read_enable: bool = False
    # The cluster it registers in (RocketMQ's brokerClusterName), and the NameServers it registers with every 30 s
    # (RocketMQ's namesrvAddr, "HOST:PORT;HOST:PORT" there). The broker itself does not use them: its remoting door
    # registers, and the wiring runs a NameServer in the process when no address is given.
    cluster_name: str = "DefaultCluster"
    namesrv_addr: tuple[str, ...] = ()
    # On for the embedded default, as RocketMQ's autoCreateTopicEnable; turn it off in production so a typo in
    # a topic name is an error rather than a new topic.
    auto_create_topic: bool = True
    auto_create_group: bool = True
    default_queue_nums: int = 4
    max_long_poll_ms: int = DEFAULT_LONG_POLL_MS
    # A consumer silent this long is dropped from its group (RocketMQ's channel expiry: 120 s); the scan runs
    # every `consumer_scan_interval_s` (RocketMQ: 10 s).
    consumer_expire_s: float = DEFAULT_EXPIRE_AFTER_S
    consumer_scan_interval_s: float = 10.0
    queue_lock_expire_s: float = DEFAULT_LOCK_EXPIRE_S
    # Committed offsets reach consumerOffset.json this often (RocketMQ's flushConsumerOffsetInterval: 5 s) and
    # at close. A crash forgets at most this much of consumers' progress: those messages are delivered again.
    offset_persist_interval_s: float = OFFSET_PERSIST_INTERVAL_S
    # Delay levels, level 1 first (RocketMQ's messageDelayLevel): a number and a unit (s, m, h, d) each.
    message_delay_level: str = DEFAULT_DELAY_LEVELS
    # The furthest ahead a timer message may be due (RocketMQ caps it at 3 days: timerMaxDelaySec).
    timer_max_delay_s: int = 30 * 24 * 3600
    # A timer message due further ahead than this is stored again (rolled) when this much of its wait is over, so
    # that no parked record must outlive the store's file_reserved_hours (RocketMQ's timerRollWindowSlot: 2 days).
    timer_roll_window_s: int = 24 * 3600
    # Transactions (RocketMQ's transactionTimeOut, transactionCheckInterval, transactionCheckMax): a half message
    # undecided this long is checked back with its producer group, again every interval, at most this many times.
    transaction_timeout_ms: int = 6_000
    transaction_check_interval_ms: int = 30_000
    transaction_check_max: int = 15

    def __post_init__(self) -> None:
        if self.enable_controller_mode:
            if self.broker_id < 1:
                raise ValueError(
                    f"broker_id {self.broker_id}: under automatic failover each broker of a group has its own id, 1 or"
                    " more (it registers as 0 while it is master)"
                )
            if self.broker_role is BrokerRole.SLAVE:
                raise ValueError(
                    'broker_role "SLAVE": under automatic failover the controller names the role; broker_role says'
                    ' how the broker acts as master, "SYNC_MASTER" or "ASYNC_MASTER"'
                )
        elif self.broker_role is BrokerRole.SLAVE and self.broker_id < 1:
            raise ValueError("a SLAVE's broker_id must be 1 or more (0 is the master's)")
        elif self.broker_role is not BrokerRole.SLAVE and self.broker_id != 0:
            raise ValueError(f'a master\'s broker_id is 0, not {self.broker_id} (give a slave broker_role = "SLAVE")')
        parse_delay_levels(self.message_delay_level)
        if self.timer_max_delay_s < 1:
            raise ValueError(f"timer_max_delay_s must be at least 1, not {self.timer_max_delay_s}")
        if self.timer_roll_window_s < 60:
            raise ValueError(f"timer_roll_window_s must be at least 60, not {self.timer_roll_window_s}")
        for name in ("transaction_timeout_ms", "transaction_check_interval_ms", "transaction_check_max"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be at least 1, not {getattr(self, name)}")
