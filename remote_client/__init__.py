"""The client API of the core over RocketMQ 4's remoting protocol, to the brokers of a cluster found through its
NameServers: what `core` offers in process (Producer, PullConsumer, ...), with the same calls, results and errors,
for a program (or a door of mqgate) that is not the broker's process.

- cluster.py: Cluster, one process's connection to a cluster (RocketMQ's MQClientInstance): routes, a connection
  per broker, heartbeats, the requests brokers send back.
- namesrv_client.py: NameServers asked one at a time, the next when one fails. topic_route.py: a topic's route and
  the queues it gives producers and consumers (pure).
- producer.py: Producer; send_request.py: a send as a request and its reply as SendResult (pure);
  latency_fault.py: which broker groups a producer passes over for a while (pure).
- replies.py: a refusal as the core's error.
"""

from remote_client.cluster import Cluster
from remote_client.producer import Producer

__all__ = ["Cluster", "Producer"]
