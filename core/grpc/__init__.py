"""mqgate's RocketMQ 5 gRPC endpoint (apache.rocketmq.v2.MessagingService), so that the official RocketMQ 5
clients produce to and consume from the core unchanged. It is a front door like the MQTT gateway: it uses only
the public core API (`from core import ...`), and nothing in the core imports it."""

import os

# gRPC's fork handlers, on by default in grpcio, pause its threads around every fork() of the process and log
# "fork_posix.cc: Other threads are currently calling into gRPC, skipping fork() handlers" when they cannot (the
# Spark sink's JVM launcher forks while the endpoint serves). No child of mqgate uses gRPC without exec'ing a new
# program first, so the handlers have nothing to protect. Read by gRPC's core at its first use: set here, before
# any module of this package imports grpc; a value the user set wins.
os.environ.setdefault("GRPC_ENABLE_FORK_SUPPORT", "false")
