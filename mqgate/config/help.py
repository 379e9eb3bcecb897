"""The help of every setting, one entry per key, and of each section: the one text that `mqgate config` prints as
comments and `mqgate config --reference` renders as docs/configuration.md. Defaults are not written here: they
come from the settings dataclasses themselves (core.StoreConfig, core.BrokerConfig, MqttConfig, GrpcConfig,
RemotingConfig, NamesrvConfig, HttpConfig). tests/mqgate/test_config_reference.py checks that every key has its help."""

from __future__ import annotations

LOG_LEVEL_HELP = "logging on stderr: DEBUG, INFO, WARNING, ERROR or CRITICAL"

# What a section is, before its table in docs/configuration.md.
SECTION_HELP = {
    "store": (
        "The message store: the fields of `core/store/config.py` (`StoreConfig`). The store directory itself is not a"
        " key: it is always `DATA_DIR/store`. Integers and numbers must be positive; the disk ratios must satisfy"
        " `0 < clean <= warn <= refuse <= 1`."
    ),
    "broker": (
        "The broker core: the fields of `core/broker.py` (`BrokerConfig`); topics, groups and offsets live in"
        " `DATA_DIR/config/`."
    ),
    "ha": (
        "Replication of a broker group's commit log from its master to its slaves (RocketMQ's HA): the fields of"
        " `core/store/ha/config.py` (`HAConfig`). The role is [broker] broker_role; docs/replication.md says more."
    ),
    "controller": (
        "Automatic failover (RocketMQ 5's controller mode, on etcd): the fields of `controller/config.py`"
        " (`ControllerConfig`). With etcd_endpoints set, etcd names each broker's role in its group; docs/cluster.md"
        " says more."
    ),
    "mqtt": (
        "The MQTT gateway: the fields of `mqtt_bridge/config.py` (`MqttConfig`); retained messages and sessions are"
        " snapshotted in `DATA_DIR/mqtt/`."
    ),
    "grpc": "The RocketMQ 5 gRPC endpoint: the fields of `proxy/config.py` (`GrpcConfig`).",
    "remoting": (
        "The broker's remoting port, where RocketMQ 4 clients produce and consume: the fields of"
        " `broker_remoting/config.py` (`RemotingConfig`). The broker registers with its NameServers ([broker]"
        " namesrv_addr) every 30 s."
    ),
    "namesrv": (
        "The NameServer RocketMQ 4 clients ask for routes: the fields of `namesrv/config.py` (`NamesrvConfig`)."
        " `mqgate serve` runs one in its process unless `embedded = false`; `mqgate namesrv` runs one alone."
    ),
    "http": (
        "mqgate's one HTTP port, which serves the connector REST API and the EventBridge HTTP API: the fields of"
        " `mqgate/http/app.py` (`HttpConfig`)."
    ),
}

STORE_KEY_HELP = {
    "flush_mode": "ASYNC_FLUSH: acknowledge once in the page cache; SYNC_FLUSH: acknowledge after fdatasync",
    "segment_size": "bytes per commit-log segment file (RocketMQ mapedFileSizeCommitLog); at least 64 KiB",
    "max_message_size": (
        "largest record: header, body, topic and properties (RocketMQ maxMessageSize); must fit in a segment"
    ),
    "write_ring_size": (
        "bytes of the write ring (DATA_DIR/store/commitlog.ring) that appends are copied into before the dispatcher"
        " writes them to the commit log's segments (as RocketMQ's transientStorePoolEnable, but a file: a record in"
        " it survives the process being killed); at least max_message_size + 68 KiB"
    ),
    "flush_interval_ms": "ASYNC_FLUSH: how often the commit log is flushed (RocketMQ flushIntervalCommitLog)",
    "flush_after_bytes": (
        "ASYNC_FLUSH: flush also as soon as this many bytes of the log are not yet on disk, which bounds what a power"
        " cut can take under load (0: only every flush_interval_ms)"
    ),
    "sync_warm_bytes": (
        "SYNC_FLUSH: how much of the commit log past the write position is kept written with zeros and on disk, so"
        " that a flush does not wait for the file system to allocate blocks (RocketMQ warmMapedFileEnable; 0: off)"
    ),
    "sync_flush_timeout_ms": (
        "SYNC_FLUSH: how long a write waits for the disk before FLUSH_DISK_TIMEOUT (RocketMQ syncFlushTimeout)"
    ),
    "logic_flush_interval_ms": (
        "how often consume queues and index are flushed and the checkpoint written (RocketMQ flushIntervalConsumeQueue)"
    ),
    "logic_flush_least_pages": (
        "a consume queue with fewer unflushed 4 KiB pages is left for the thorough flush (RocketMQ"
        " flushConsumeQueueLeastPages): thousands of light queues with an entry or two each would otherwise cost an"
        " fdatasync apiece every second"
    ),
    "logic_flush_thorough_interval_ms": (
        "how often every consume queue is flushed (RocketMQ flushConsumeQueueThoroughInterval, 60 s there); the"
        " checkpoint vouches for what this flush wrote, so recovery after a crash re-dispatches at most this long of"
        " records"
    ),
    "cq_entries_per_file": "20-byte entries per consume-queue file (RocketMQ mapedFileSizeConsumeQueue)",
    "light_cq_entries_per_file": "entries per file of a light queue (%LMQ%..., one per MQTT subscription filter)",
    "index_slots": "hash slots per index file (RocketMQ maxHashSlotNum)",
    "index_entries": "entries per index file (RocketMQ maxIndexNum)",
    "index_process": (
        "build the index (keys and unique ids, for message queries) in a process of its own, mqgate-index, beside"
        " the one that stores: it reads what was stored from the commit log, so the appending process does not"
        " hash and write index entries; false builds it in the store's dispatcher thread"
    ),
    "file_reserved_hours": "segments last written longer ago are deleted at delete_when (RocketMQ fileReservedTime)",
    "delete_when": 'local hours of the day when expired segments are deleted: "04", or "04;05" (RocketMQ deleteWhen)',
    "disk_clean_ratio": "disk usage at which the oldest segments are deleted even if not expired",
    "disk_warn_ratio": "disk usage at which a warning is logged",
    "disk_refuse_ratio": "disk usage at which writes are refused until space is freed",
    "retention_check_interval_s": "how often retention runs and disk usage is checked (seconds)",
    "store_host": "host written into every record and into offset message ids",
    "access_message_in_memory_max_ratio": (
        "reads further behind the log's end than this percentage of memory are sent to a slave when [broker]"
        " slave_read_enable is on (RocketMQ accessMessageInMemoryMaxRatio)"
    ),
    "store_port": "port written into every record and into offset message ids",
}

BROKER_KEY_HELP = {
    "broker_name": "the broker's name in message queues and routes (RocketMQ brokerName, what it registers under)",
    "cluster_name": "the cluster the broker registers in (RocketMQ brokerClusterName)",
    "broker_id": (
        "0 for the broker group's master, 1, 2, ... for its slaves (RocketMQ brokerId); under automatic failover each"
        " broker's own id, 1 or more"
    ),
    "broker_role": (
        "ASYNC_MASTER (acknowledges at once), SYNC_MASTER (acknowledges once a slave holds the message) or SLAVE"
        " (copies its master's log; RocketMQ brokerRole)"
    ),
    "slave_read_enable": (
        "consumers far behind are sent to read from a slave, which serves them (RocketMQ slaveReadEnable); off, a"
        " slave serves reads only while its master is down"
    ),
    "namesrv_addr": (
        'NameServers the broker registers with every 30 s: "HOST:PORT;HOST:PORT" as RocketMQ\'s namesrvAddr, or a'
        " list; empty: the NameServer `mqgate serve` runs in its process ([namesrv] embedded)"
    ),
    "auto_create_topic": (
        "a send to an unknown topic creates it (RocketMQ autoCreateTopicEnable); turn it off in production"
    ),
    "auto_create_group": "a consumer of an unknown group creates it (RocketMQ autoCreateSubscriptionGroup)",
    "default_queue_nums": "read and write queues of an auto-created topic",
    "max_long_poll_ms": "the longest a pull waits for a message (RocketMQ brokerSuspendMaxTimeMillis)",
    "consumer_expire_s": "a consumer silent this long is dropped from its group and its queues reassigned",
    "consumer_scan_interval_s": "how often silent consumers are looked for",
    "queue_lock_expire_s": "an orderly consumer's queue lock expires this long after its last renewal",
    "offset_persist_interval_s": "how often committed offsets are written to consumerOffset.json",
    "message_delay_level": (
        "the delay levels, level 1 first: a number and a unit (s, m, h, d) each (RocketMQ messageDelayLevel)"
    ),
    "timer_max_delay_s": "the furthest ahead a timer message may be due (RocketMQ timerMaxDelaySec: 3 days)",
    "timer_roll_window_s": (
        "a timer due further ahead is stored again after this long; at most half of file_reserved_hours is used"
    ),
    "transaction_timeout_ms": (
        "an undecided half message is first checked back with its producer group after this long (RocketMQ"
        " transactionTimeOut)"
    ),
    "transaction_check_interval_ms": (
        "then checked back again this often (RocketMQ transactionCheckInterval, as RocketMQ 5; RocketMQ 4 had 60 s)"
    ),
    "transaction_check_max": (
        "checks of one half message before it is moved to TRANS_CHECK_MAX_TIME_TOPIC (RocketMQ transactionCheckMax)"
    ),
}

MQTT_KEY_HELP = {
    "enabled": "open the MQTT listeners",
    "host": "address the MQTT listeners bind to",
    "port": "MQTT over TCP (0: a free port, named in the ready line as mqtt=HOST:PORT)",
    "tls_port": "MQTT over TLS (unset: no TLS listener); needs certfile and keyfile",
    "certfile": "PEM certificate (chain) of the TLS and secure WebSocket listeners",
    "keyfile": "PEM private key of certfile",
    "websocket_port": "MQTT over WebSocket (unset: none; 0: a free port, named mqtt_ws=HOST:PORT, mqtt_wss= with TLS)",
    "websocket_path": "the WebSocket path clients connect to",
    "allow_anonymous": (
        "clients without a username may connect (Mosquitto allow_anonymous); unset: refused when password_file is"
        " set (as Mosquitto 2), allowed without it"
    ),
    "password_file": "Mosquitto password file (mosquitto_passwd / mqgate passwd) checked at CONNECT",
    "acl_file": "Mosquitto ACL file: who may publish, subscribe and receive which topics",
    "topics": 'first-level topics MQTT may use, e.g. ["sensors", "cmd"] (empty: any valid core topic name)',
    "auto_create_topics": "create the core topic of an unknown first level on first use",
    "queue_nums": "queues of a core topic created for MQTT",
    "max_packet_size": "largest packet accepted from a client (Maximum Packet Size in CONNACK)",
    "max_connections": "connections held at once; more are refused",
    "receive_maximum": (
        "unacknowledged QoS 1/2 publishes a client may send (Receive Maximum); an MQTT 5 client past it gets"
        " DISCONNECT 0x93"
    ),
    "max_inflight": "unacknowledged QoS 1/2 publishes sent to a client (Mosquitto max_inflight_messages)",
    "max_queued_messages": "messages queued for one subscription filter of a session; past it the oldest are dropped",
    "topic_alias_maximum": "topic aliases a client may set (Topic Alias Maximum; 0: none)",
    "server_topic_alias_maximum": (
        "topic aliases the server sets toward an MQTT 5 client that takes them (at most the client's Topic Alias"
        " Maximum; Mosquitto's development branch calls it max_topic_alias_broker); 0: none"
    ),
    "message_cache_mb": "memory for recent messages kept decoded, so a fan-out reads the log once",
    "session_expiry_max_s": "the longest a disconnected session is kept (3.1.1 persistent sessions get this)",
    "connect_timeout_s": "a connection must send CONNECT within this long",
    "max_keepalive": (
        "longest keep alive in seconds a client may use (0: no maximum; Mosquitto max_keepalive); past it, or at 0,"
        " an MQTT 5 client gets it as Server Keep Alive, an MQTT 3.1.1 client CONNACK 2"
    ),
    "sys_interval": (
        "seconds between updates of the $SYS/broker/... topics (Mosquitto's sys_interval), 0 to 65535; 0: no $SYS"
    ),
}

HA_KEY_HELP = {
    "listen_port": "the master's port for its slaves (RocketMQ haListenPort); unset: the remoting port + 1",
    "host": "the address the HA port listens on",
    "master_address": (
        "a slave's master, HOST:PORT of its HA port (RocketMQ haMasterAddress); empty: learned from the NameServers"
    ),
    "send_heartbeat_interval_ms": (
        "a slave reports its log's end, and a master with nothing to send sends a heartbeat, this often at least"
    ),
    "housekeeping_interval_ms": "an HA link silent this long is dropped (RocketMQ haHousekeepingInterval)",
    "transfer_batch_size": "the most of the log sent to a slave in one frame (RocketMQ haTransferBatchSize)",
    "max_gap_not_in_sync": (
        "a SYNC_MASTER waits only for a slave at most this far behind; else SLAVE_NOT_AVAILABLE at once"
        " (RocketMQ haMaxGapNotInSync)"
    ),
    "slave_timeout_ms": "a SYNC_MASTER's send no slave holds within this answers FLUSH_SLAVE_TIMEOUT",
    "min_in_sync_replicas": (
        "under automatic failover, a SYNC_MASTER refuses a send at once while its SyncStateSet counts fewer brokers,"
        " itself included (RocketMQ minInSyncReplicas)"
    ),
}

CONTROLLER_KEY_HELP = {
    "etcd_endpoints": (
        'automatic failover: the etcd that elects each broker group\'s master, "HOST:PORT;HOST:PORT" (empty: none;'
        " docs/cluster.md)"
    ),
    "lease_ttl_s": (
        "a broker's heartbeat is an etcd lease this long; a master stops taking writes before it ends unrefreshed,"
        " and its group elects another once it has"
    ),
    "enable_elect_unclean_master": (
        "with no member of the SyncStateSet alive, elect another broker anyway: what only the set held is lost"
        " (RocketMQ enableElectUncleanMaster)"
    ),
    "ha_max_time_slave_not_catchup_ms": (
        "a slave behind its master this long leaves the SyncStateSet (RocketMQ haMaxTimeSlaveNotCatchup)"
    ),
}

GRPC_KEY_HELP = {
    "enabled": "open the RocketMQ 5 gRPC endpoint (apache.rocketmq.v2.MessagingService)",
    "host": "address the gRPC endpoint binds to",
    "port": "gRPC port (RocketMQ proxy's 8081; 0: a free port, named in the ready line as grpc=HOST:PORT)",
    "certfile": "PEM certificate (chain) for TLS on the gRPC port; with keyfile (unset: plaintext)",
    "keyfile": "PEM private key of certfile",
    "acl_file": (
        "RocketMQ plain_acl.yml: access keys, secret keys and their topic and group permissions (unset: no access"
        " control)"
    ),
}

REMOTING_KEY_HELP = {
    "enabled": "open the broker's remoting port (RocketMQ 4's protocol)",
    "host": "address the remoting port binds to",
    "port": ("remoting port (RocketMQ broker's 10911; 0: a free port, named in the ready line as remoting=HOST:PORT)"),
    "broker_ip": (
        "the IP address clients are told to reach the broker at (RocketMQ brokerIP1), in routes and message ids;"
        " unset: host when it names one address, else this machine's first non-loopback IPv4 address"
    ),
    "acl_file": (
        "RocketMQ plain_acl.yml for the remoting port, as [grpc] acl_file (unset: no access control); it may be the"
        " same file"
    ),
}

NAMESRV_KEY_HELP = {
    "embedded": (
        "run a NameServer inside `mqgate serve`; unset: when [broker] namesrv_addr is empty (the broker registers"
        " with it), true: always, false: never"
    ),
    "host": "address the embedded NameServer binds to",
    "port": "NameServer port (RocketMQ's 9876; 0: a free port, named in the ready line as namesrv=HOST:PORT)",
}

HTTP_KEY_HELP = {
    "enabled": "open the HTTP port (admin API, dashboard, metrics, the connector and EventBridge HTTP APIs)",
    "host": "address the HTTP port binds to (loopback by default: the API can make mqgate write files)",
    "port": "HTTP port (RocketMQ Connect's 8082; 0: a free port, named in the ready line as http=HOST:PORT)",
    "token": (
        "bearer token every request must carry (Authorization: Bearer TOKEN); unset: no authentication; mqgate"
        " config does not print it"
    ),
    "admin_users": (
        "users of [mqtt] password_file with the admin role: they may use the HTTP port (admin API, dashboard) with"
        " HTTP Basic and their password; empty: the token alone"
    ),
}
