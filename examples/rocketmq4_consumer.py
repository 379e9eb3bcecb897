"""A RocketMQ 4 push consumer, as an application writes one: RocketMQ's C++ client (rocketmq-client-python 0.5.0rc2;
`make rocketmq4-clients` installs it in tests/broker_remoting/python/site) pointed at mqgate's NameServer as at
Apache RocketMQ's. It reads the topic `sensors` in the consumer group `walk-reader` and prints each message's MQTT
topic and body: the MQTT readings of the README's walk. It ends after four messages, or 90 s.

    PYTHONPATH=tests/broker_remoting/python/site .venv/bin/python examples/rocketmq4_consumer.py [HOST:PORT]
"""

import sys
import threading

from rocketmq.client import ConsumeStatus, PushConsumer

namesrv = sys.argv[1] if len(sys.argv) > 1 else "127.0.0.1:9876"
seen = []
done = threading.Event()
printing = threading.Lock()  # the client calls on_message from several threads at once


def on_message(message):
    topic = (message.get_property("MQTT_TOPIC") or b"").decode()
    with printing:
        print(topic, message.body.decode(), flush=True)
        seen.append(message)
        if len(seen) >= 4:
            done.set()
    return ConsumeStatus.CONSUME_SUCCESS


consumer = PushConsumer("walk-reader")
consumer.set_namesrv_addr(namesrv)
consumer.subscribe("sensors", on_message)
consumer.start()
done.wait(90)  # a loaded machine may take a while to start the client and rebalance
consumer.shutdown()
