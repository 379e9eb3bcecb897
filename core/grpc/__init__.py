"""mqgate's RocketMQ 5 gRPC endpoint (apache.rocketmq.v2.MessagingService), so that the official RocketMQ 5
clients produce to and consume from the core unchanged. It is a front door like the MQTT gateway: it uses only
the public core API (`from core import ...`), and nothing in the core imports it."""
