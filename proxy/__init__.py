"""mqgate's RocketMQ 5 gRPC endpoint (apache.rocketmq.v2.MessagingService), what RocketMQ calls its proxy, so that
the official RocketMQ 5 clients produce to and consume from the core unchanged. It is a wire protocol beside the
core, a front door like the MQTT gateway: it uses only the public core API (`from core import ...`), and nothing in
the core imports it.

    server.py          grpc.aio server, plaintext or TLS, on the broker's loop
    service.py         the servicer: one method per RPC, each family in its module:
      consumer_rpcs.py, offset_rpcs.py, telemetry.py (the client's settings stream), routes.py (QueryRoute,
      QueryAssignment), held_messages.py (receipt handles)
    message_codec.py   apache.rocketmq.v2.Message <-> core Message / StoredMessage
    client_sessions.py, client_settings.py   who is connected, with which settings
    signature.py       who sent a call (the MQv2-HMAC-SHA1 metadata); what it may do is the plain ACL's (acl/),
                       and what each RPC needs is rpc_support.py's table
    status_codes.py, rpc_support.py   answers in the protocol's words
    config.py, stubs.py   [grpc] settings; the protobuf and gRPC stubs (rocketmq-python-client's)

A SendMessage request: server.py -> service.py -> message_codec.py -> core.Broker.send -> status_codes.py.
A RecallMessage request: server.py -> service.py -> core.Broker.recall_message (the handle a send answered in its
SendResultEntry.recall_handle) -> status_codes.py.
"""

import os

# gRPC's fork handlers, on by default in grpcio, pause its threads around every fork() of the process and log
# "fork_posix.cc: Other threads are currently calling into gRPC, skipping fork() handlers" when they cannot (the
# Spark sink's JVM launcher forks while the endpoint serves). No child of mqgate uses gRPC without exec'ing a new
# program first, so the handlers have nothing to protect. Read by gRPC's core at its first use: set here, before
# any module of this package imports grpc; a value the user set wins.
os.environ.setdefault("GRPC_ENABLE_FORK_SUPPORT", "false")
