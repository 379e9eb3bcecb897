"""The client API of the core over RocketMQ 4's remoting protocol, to the brokers of a cluster found through its
NameServers: what `core` offers in process (Producer, TransactionProducer, PullConsumer, PushConsumer,
SimpleConsumer), with the same calls, results
and errors, for a program (or a door of mqgate) that is not the broker's process. Calls that reach a broker are
coroutines here even where core's are not (PullConsumer.committed, fetch_queues, start_offset).

- cluster.py: Cluster, one process's connection to a cluster (RocketMQ's MQClientInstance): routes, a connection
  per broker, heartbeats, the requests brokers send back.
- namesrv_client.py: NameServers asked one at a time, the next when one fails. topic_route.py: a topic's route and
  the queues it gives producers and consumers (pure).
- producer.py: Producer; send_request.py: a send as a request and its reply as SendResult (pure);
  latency_fault.py: which broker groups a producer passes over for a while (pure); transaction_producer.py:
  TransactionProducer (half messages, END_TRANSACTION, check-backs over the Cluster's connections).
- records.py: stored records as core's StoredMessage (pure).
- pull_consumer.py: PullConsumer, with offset_store.py (RemoteOffsetStore: offsets in memory, written to the brokers
  every 5 s) and pull_request.py (pure).
- push_consumer.py: PushConsumer (clustering or broadcasting, concurrent or orderly): rebalancing over every
  group's queues, queue locks, pull loops, listener workers, send-back of failed messages.
- simple_consumer.py: SimpleConsumer, popping from every group (pop_request.py, pure).
- admin.py: ClusterAdmin, what `mqgate admin --namesrv` asks (as mqadmin).
- replies.py: a refusal as the core's error.
"""

from remote_client.admin import ClusterAdmin
from remote_client.cluster import Cluster
from remote_client.producer import Producer
from remote_client.pull_consumer import PullConsumer
from remote_client.push_consumer import PushConsumer
from remote_client.simple_consumer import RemoteMessageView, SimpleConsumer
from remote_client.transaction_producer import TransactionProducer

__all__ = [
    "Cluster",
    "ClusterAdmin",
    "Producer",
    "PullConsumer",
    "PushConsumer",
    "RemoteMessageView",
    "SimpleConsumer",
    "TransactionProducer",
]
