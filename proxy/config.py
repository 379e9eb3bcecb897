"""Settings of the RocketMQ 5 gRPC endpoint (the `[grpc]` section of mqgate's configuration)."""

from __future__ import annotations

from dataclasses import dataclass

# RocketMQ's proxy listens for gRPC on 8081 (ProxyConfig.grpcServerPort).
DEFAULT_GRPC_PORT = 8081


@dataclass(slots=True, frozen=True)
class GrpcConfig:
    enabled: bool = True
    host: str = "0.0.0.0"
    port: int = DEFAULT_GRPC_PORT  # 0: a free port, named in the ready line
    # TLS when both are set: PEM certificate (chain) and its private key.
    certfile: str | None = None
    keyfile: str | None = None
    # RocketMQ's plain_acl.yml: access keys, secret keys and what each may do; unset: no access control.
    acl_file: str | None = None
