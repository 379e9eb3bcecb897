"""The apache.rocketmq.v2 protobuf messages and gRPC service stubs, as the official Python client ships them
(`rocketmq.grpc_protocol`, rocketmq-python-client 5.1.2): the endpoint uses exactly the protocol its clients use,
neither regenerated nor copied.

They are imported without running the client package's own `rocketmq/__init__.py`, which imports the whole client
and sets up its log file under ~/logs/rocketmq_python: a server should not write into its user's home, and must
start where that home is read-only. The package is entered as an empty shell for the time of the import and
removed again, so that a later `import rocketmq` (tests drive the endpoint with the client in one process) runs
the real package, which then finds these stub modules already loaded.
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
from types import ModuleType
from typing import TYPE_CHECKING, Any


def _import_stubs() -> ModuleType:
    if "rocketmq" in sys.modules:
        return importlib.import_module("rocketmq.grpc_protocol")
    spec = importlib.util.find_spec("rocketmq")
    if spec is None or spec.submodule_search_locations is None:
        raise ImportError("the gRPC endpoint needs rocketmq-python-client (pip install rocketmq-python-client==5.1.2)")
    shell = importlib.util.module_from_spec(spec)  # not executed: an empty package that finds its submodules
    sys.modules["rocketmq"] = shell
    try:
        return importlib.import_module("rocketmq.grpc_protocol")
    finally:
        if sys.modules.get("rocketmq") is shell:
            del sys.modules["rocketmq"]


if TYPE_CHECKING:
    from rocketmq.grpc_protocol import definition_pb2, service_pb2, service_pb2_grpc
else:
    _import_stubs()
    definition_pb2 = sys.modules["rocketmq.grpc_protocol.definition_pb2"]
    service_pb2 = sys.modules["rocketmq.grpc_protocol.service_pb2"]
    service_pb2_grpc = importlib.import_module("rocketmq.grpc_protocol.service_pb2_grpc")


class FastEnum:
    """A protobuf enum's values as plain int attributes, with its Name() and values(). The generated wrapper
    (EnumTypeWrapper) resolves every `Code.OK` through a Python __getattr__ (about a microsecond each), which the
    send path would pay a dozen times a message."""

    def __init__(self, wrapper: Any) -> None:
        self.__dict__.update(wrapper.items())
        self._wrapper = wrapper

    def Name(self, number: int) -> str:
        return str(self._wrapper.Name(number))

    def values(self) -> list[int]:
        return list(self._wrapper.values())

    def __getattr__(self, name: str) -> int:
        raise AttributeError(f"{name} is not a value of {self._wrapper.DESCRIPTOR.name}")


Code = FastEnum(definition_pb2.Code)
ClientType = FastEnum(definition_pb2.ClientType)
MessageType = FastEnum(definition_pb2.MessageType)
Encoding = FastEnum(definition_pb2.Encoding)
DigestType = FastEnum(definition_pb2.DigestType)
FilterType = FastEnum(definition_pb2.FilterType)
Permission = FastEnum(definition_pb2.Permission)
AddressScheme = FastEnum(definition_pb2.AddressScheme)
TransactionResolution = FastEnum(definition_pb2.TransactionResolution)
TransactionSource = FastEnum(definition_pb2.TransactionSource)
Settings = definition_pb2.Settings
Status = definition_pb2.Status
TelemetryCommand = service_pb2.TelemetryCommand
MessagingServiceServicer = service_pb2_grpc.MessagingServiceServicer
add_MessagingServiceServicer_to_server = service_pb2_grpc.add_MessagingServiceServicer_to_server

__all__ = [
    "AddressScheme",
    "ClientType",
    "Code",
    "DigestType",
    "Encoding",
    "FastEnum",
    "FilterType",
    "MessageType",
    "MessagingServiceServicer",
    "Permission",
    "Settings",
    "Status",
    "TelemetryCommand",
    "TransactionResolution",
    "TransactionSource",
    "add_MessagingServiceServicer_to_server",
    "definition_pb2",
    "service_pb2",
    "service_pb2_grpc",
]
