"""The broker's remoting port: a remoting server (remoting/server.py) whose request codes are served on the core,
and the broker's registration with its NameServers. `mqgate serve` builds one, starts it and closes it.

    code                                    served by
    SEND_MESSAGE 10, _V2 310, _BATCH 320    send.py
    PULL_MESSAGE 11                         pull.py (long polling)
    POP_MESSAGE 200050, ACK_MESSAGE 200051, pop.py (the PopService the gRPC endpoint pops from)
      CHANGE_MESSAGE_INVISIBLETIME 200053,
      NOTIFICATION 200054
    QUERY_CONSUMER_OFFSET 14, UPDATE_ 15,   offsets.py
      SEARCH_OFFSET_BY_TIMESTAMP 29,
      GET_MAX_OFFSET 30, GET_MIN_OFFSET 31
    HEART_BEAT 34, UNREGISTER_CLIENT 35,    clients.py (and NOTIFY_CONSUMER_IDS_CHANGED 40 to the clients)
      GET_CONSUMER_LIST_BY_GROUP 38,
      CHECK_CLIENT_CONFIG 46
    CONSUMER_SEND_MSG_BACK 36,              consumer_requests.py
      LOCK_BATCH_MQ 41, UNLOCK_BATCH_MQ 42
    END_TRANSACTION 37                      transactions.py (and CHECK_TRANSACTION_STATE 39 to producers)
    QUERY_MESSAGE 12, VIEW_MESSAGE_BY_ID 33 queries.py
    UPDATE_AND_CREATE_TOPIC 17,             topic_admin.py
      GET_ALL_TOPIC_CONFIG 21, GET_TOPIC_CONFIG 351,
      DELETE_TOPIC_IN_BROKER 215
    GET_TOPIC_STATS_INFO 202, GET_CONSUME_  admin_requests.py (what mqadmin shows and changes)
      STATS 208, GET_CONSUMER_CONNECTION_
      LIST 203, the subscription groups'
      200, 201, 207, GET_BROKER_RUNTIME_
      INFO 28, INVOKE_BROKER_TO_RESET_
      OFFSET 222
    GET_ALL_CONSUMER_OFFSET 43, GET_ALL_     replication.py (a master's tables for its slaves, and a slave's copy
      DELAY_OFFSET 45, GET_BROKER_HA_        of them)
      STATUS 907

Any other code is answered REQUEST_CODE_NOT_SUPPORTED, naming it. With an ACL file, every request is checked first
(access.py).
"""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import logging
import socket
from collections.abc import Sequence

from acl.access_control import AccessControl
from broker_remoting.access import AccessCheck
from broker_remoting.admin_requests import AdminRequests
from broker_remoting.clients import ClientTable
from broker_remoting.config import RemotingConfig
from broker_remoting.consumer_requests import ConsumerRequests
from broker_remoting.offsets import OffsetDoor
from broker_remoting.pop import PopDoor
from broker_remoting.pull import PullService
from broker_remoting.queries import QueryDoor
from broker_remoting.refusals import serving
from broker_remoting.registration import BrokerRegistration
from broker_remoting.replication import ReplicationDoor, SlaveSync
from broker_remoting.send import SendService
from broker_remoting.topic_admin import TopicAdmin
from broker_remoting.transactions import TransactionDoor
from core import Broker, BrokerRole
from remoting.codes import RequestCode
from remoting.message_codec import Host
from remoting.server import RemotingServer

log = logging.getLogger(__name__)

# How often connections are checked for clients gone silent (RocketMQ's ClientHousekeepingService: every 10 s).
CLIENT_SCAN_INTERVAL_S = 10.0


class BrokerRemoting:
    def __init__(
        self, broker: Broker, config: RemotingConfig, *, max_body_bytes: int, access: AccessControl | None = None
    ) -> None:
        """`access`: RocketMQ's plain ACL, checked on every request (access.py); None: none."""
        self.broker = broker
        self.config = config
        self.max_body_bytes = max_body_bytes
        self.server = RemotingServer("broker")
        self.store_host: Host = (broker_ip(config), config.port)
        self.address = ""  # BROKER_IP:PORT once started: what routes and stored messages name
        # Where this process's RocketMQ 5 gRPC endpoint is reached (BROKER_IP:PORT), told to other groups' endpoints
        # in GET_BROKER_RUNTIME_INFO (`grpcEndpoint`), so that their routes point clients here; None: no endpoint.
        self.grpc_endpoint: str | None = None
        self.registration: BrokerRegistration | None = None
        self._scan: asyncio.Task[None] | None = None
        transactions = TransactionDoor(broker, self._host)
        self.clients = ClientTable(broker, transactions.make_checker)
        sends = SendService(broker, self._host)
        pulls = PullService(broker, self._host, self.clients.subscription_of)
        pops = PopDoor(broker, self._host)
        offsets = OffsetDoor(broker)
        consumers = ConsumerRequests(broker)
        queries = QueryDoor(broker, self._host)
        topics = TopicAdmin(broker, self._registered)
        admin = AdminRequests(broker, lambda: self.grpc_endpoint)
        replication = ReplicationDoor(broker)
        # A slave copies its master's tables every 10 s (its master as the NameServers name it).
        self.slave_sync = (
            SlaveSync(broker, lambda: self.registration.master_address if self.registration else None)
            if broker.ha.role is BrokerRole.SLAVE or broker.ha.controlled
            else None
        )
        handlers = {
            RequestCode.SEND_MESSAGE: sends.send,
            RequestCode.SEND_MESSAGE_V2: sends.send,
            RequestCode.SEND_BATCH_MESSAGE: sends.send,
            RequestCode.PULL_MESSAGE: pulls.pull,
            RequestCode.POP_MESSAGE: pops.pop,
            RequestCode.ACK_MESSAGE: pops.ack,
            RequestCode.CHANGE_MESSAGE_INVISIBLETIME: pops.change_invisible_time,
            RequestCode.NOTIFICATION: pops.notification,
            RequestCode.QUERY_CONSUMER_OFFSET: offsets.query,
            RequestCode.UPDATE_CONSUMER_OFFSET: offsets.update,
            RequestCode.SEARCH_OFFSET_BY_TIMESTAMP: offsets.search,
            RequestCode.GET_MAX_OFFSET: offsets.max_offset,
            RequestCode.GET_MIN_OFFSET: offsets.min_offset,
            RequestCode.HEART_BEAT: self.clients.heartbeat,
            RequestCode.UNREGISTER_CLIENT: self.clients.unregister,
            RequestCode.GET_CONSUMER_LIST_BY_GROUP: self.clients.consumer_list,
            RequestCode.CHECK_CLIENT_CONFIG: self.clients.check_client_config,
            RequestCode.CONSUMER_SEND_MSG_BACK: consumers.send_back,
            RequestCode.LOCK_BATCH_MQ: consumers.lock,
            RequestCode.UNLOCK_BATCH_MQ: consumers.unlock,
            RequestCode.END_TRANSACTION: transactions.end,
            RequestCode.QUERY_MESSAGE: queries.query,
            RequestCode.VIEW_MESSAGE_BY_ID: queries.view,
            RequestCode.UPDATE_AND_CREATE_TOPIC: topics.update,
            RequestCode.GET_ALL_TOPIC_CONFIG: topics.all_configs,
            RequestCode.GET_TOPIC_CONFIG: topics.config,
            RequestCode.DELETE_TOPIC_IN_BROKER: topics.delete,
            RequestCode.GET_TOPIC_STATS_INFO: admin.topic_stats,
            RequestCode.GET_CONSUME_STATS: admin.consume_stats,
            RequestCode.GET_CONSUMER_CONNECTION_LIST: admin.consumer_connections,
            RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP: admin.update_group,
            RequestCode.GET_ALL_SUBSCRIPTIONGROUP_CONFIG: admin.all_groups,
            RequestCode.DELETE_SUBSCRIPTIONGROUP: admin.delete_group,
            RequestCode.GET_BROKER_RUNTIME_INFO: admin.runtime_info,
            RequestCode.INVOKE_BROKER_TO_RESET_OFFSET: admin.reset_offsets,
            RequestCode.GET_ALL_CONSUMER_OFFSET: replication.all_offsets,
            RequestCode.GET_ALL_DELAY_OFFSET: replication.all_delay_offsets,
            RequestCode.GET_TIMER_CHECK_POINT: replication.timer_progress,
            RequestCode.GET_BROKER_HA_STATUS: replication.ha_status,
        }
        check = AccessCheck(access).check if access is not None else None
        for code, handler in handlers.items():
            self.server.register(code, serving(handler, check))
        self.server.add_close_listener(self.clients.channel_closed)

    def _host(self) -> Host:
        return self.store_host

    async def _registered(self) -> None:
        if self.registration is not None:
            await self.registration.registered_now()

    async def start(self, namesrv_addresses: Sequence[str] = ()) -> str:
        """Listen, then register with `namesrv_addresses` (HOST:PORT each); the address bound, HOST:PORT."""
        server = await self.server.start(self.config.host, self.config.port)
        host, port = server.sockets[0].getsockname()[:2]
        self.store_host = (self.store_host[0], int(port))
        self.address = f"{self.store_host[0]}:{port}"
        self.registration = BrokerRegistration(self.broker, self.address, namesrv_addresses)
        if self.slave_sync is not None:
            self.registration.master_changed = self.slave_sync.wake.set
        self.registration.start()
        if self.slave_sync is not None:
            self.slave_sync.start()
        self._scan = asyncio.get_running_loop().create_task(self._scan_clients())
        return f"{host}:{port}"

    async def _scan_clients(self) -> None:
        while True:
            await asyncio.sleep(CLIENT_SCAN_INTERVAL_S)
            self.clients.expire()

    async def close(self) -> None:
        if self._scan is not None:
            self._scan.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._scan
        if self.slave_sync is not None:
            await self.slave_sync.close()
        if self.registration is not None:
            await self.registration.close()
        await self.server.close()


def broker_ip(config: RemotingConfig) -> str:
    """The IP address clients are told (RocketMQ's brokerIP1): `broker_ip`, else `host` when it names one address,
    else this machine's first non-loopback IPv4 address, else 127.0.0.1."""
    if config.broker_ip:
        return config.broker_ip
    try:
        address = ipaddress.ip_address(config.host)
    except ValueError:
        address = None
    if address is not None and not address.is_unspecified:
        return str(address)
    try:
        infos = socket.getaddrinfo(socket.gethostname(), None, socket.AF_INET)
    except OSError:
        infos = []
    for info in infos:
        candidate = ipaddress.ip_address(info[4][0])
        if not candidate.is_loopback:
            return str(candidate)
    return "127.0.0.1"
