"""RocketMQ's plain ACL (moved from proxy/; made independent of the gRPC endpoint next)."""
