"""Settings of `mqgate`: built-in defaults, then a configuration file, then command-line flags (each wins over
the one before).

The file is TOML (`mqgate.toml`) or YAML (`mqgate.yaml` / `mqgate.yml`, read with `yaml.safe_load`). Without
`--config`, `DATA_DIR/mqgate.toml` is read when it exists. Keys:

    log_level = "INFO"              # DEBUG, INFO, WARNING, ERROR or CRITICAL

    [store]                         # every field of core.StoreConfig except store_dir
    flush_mode = "SYNC_FLUSH"       # ASYNC_FLUSH or SYNC_FLUSH
    segment_size = "1GiB"           # sizes: an integer (bytes) or a string with a binary unit
    file_reserved_hours = 72

    [broker]                        # every field of core.BrokerConfig
    auto_create_topic = false       # on in the embedded default; off in production
    cluster_name = "east"           # the cluster it joins, and its NameServers (empty: one in the process)
    namesrv_addr = "10.0.0.5:9876;10.0.0.6:9876"    # or ["10.0.0.5:9876", "10.0.0.6:9876"]

    broker_id = 1                   # 0 for the master, 1, 2, ... for its slaves
    broker_role = "SLAVE"           # ASYNC_MASTER, SYNC_MASTER or SLAVE

    [ha]                            # every field of core.HAConfig (replication, docs/replication.md)
    master_address = "10.0.0.7:10912"   # a slave's master (empty: learned from the NameServers)

    [controller]                    # every field of controller.config.ControllerConfig (automatic failover)
    etcd_endpoints = "10.0.0.8:2379;10.0.0.9:2379"  # the etcd that elects each group's master (empty: none)

    [mqtt]                          # every field of mqtt_bridge.config.MqttConfig
    port = 1883                     # 0: a free port, named in the ready line
    password_file = "/etc/mqgate/passwd"

    [grpc]                          # every field of proxy.config.GrpcConfig (the RocketMQ 5 gRPC endpoint)
    port = 8081                     # 0: a free port, named in the ready line

    [remoting]                      # every field of broker_remoting.config.RemotingConfig (RocketMQ 4's protocol)
    port = 10911                    # 0: a free port, named in the ready line

    [namesrv]                       # every field of namesrv.config.NamesrvConfig
    embedded = true                 # `mqgate serve` runs a NameServer too (unset: when namesrv_addr is empty)
    port = 9876                     # 0: a free port, named in the ready line

    [http]                          # every field of mqgate.http.app.HttpConfig (the REST APIs' one port)
    port = 8082                     # 0: a free port, named in the ready line
    token = "s3cret"                # bearer token every request must carry

The store lives in `DATA_DIR/store`; `store_dir` cannot be set. Unknown keys, wrong types and bad values raise
`ConfigError`, whose message names the file (with the line when it can be found) or the flag, the key, and
what is allowed.
"""

from __future__ import annotations

import dataclasses
import difflib
import json
import logging
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType

from broker_remoting.config import RemotingConfig
from controller.config import ControllerConfig
from core import BrokerConfig, BrokerRole, FlushMode, HAConfig, StoreConfig
from mqgate.config.config_file import ConfigError, ConfigFile, read_config_file
from mqgate.config.help import (
    BROKER_KEY_HELP,
    CONTROLLER_KEY_HELP,
    GRPC_KEY_HELP,
    HA_KEY_HELP,
    HTTP_KEY_HELP,
    MQTT_KEY_HELP,
    NAMESRV_KEY_HELP,
    REMOTING_KEY_HELP,
    STORE_KEY_HELP,
)
from mqgate.config.values import (
    LOG_LEVELS,
    Parser,
    describe_value,
    format_size,
    parse_bool,
    parse_broker_role,
    parse_flush_mode,
    parse_host_port_list,
    parse_log_level,
    parse_non_negative_int,
    parse_optional_bool,
    parse_optional_ip_address,
    parse_optional_port,
    parse_optional_string,
    parse_port,
    parse_port_or_zero,
    parse_positive_int,
    parse_positive_number,
    parse_positive_uint16,
    parse_size,
    parse_string,
    parse_string_list,
    parse_uint16,
)
from mqgate.http.config import HttpConfig
from mqtt_bridge.config import MqttConfig
from namesrv.config import NamesrvConfig
from proxy.config import GrpcConfig

log = logging.getLogger(__name__)

DEFAULT_DATA_DIR = Path("data")
CONFIG_FILE_NAME = "mqgate.toml"
STORE_SUBDIR = "store"
DEFAULT_LOG_LEVEL = "INFO"
# Where a value came from when neither the file nor a flag set it.
DEFAULT_ORIGIN = "default"

# [store] keys that hold byte counts and so also take size strings.
SIZE_KEYS = frozenset({"segment_size", "max_message_size", "write_ring_size", "flush_after_bytes", "sync_warm_bytes"})
# StoreConfig fields that are not settable: the store directory is always DATA_DIR/store.
DERIVED_STORE_FIELDS = {
    "store_dir": "it is always DATA_DIR/store; choose the data directory with --data-dir",
    "role": "it is [broker] broker_role",
    "ha": "replication has its own section, [ha]",
}

# Keys whose values `mqgate config` does not print.
SECRET_KEYS = {"http": ("token",)}

# The flag that sets a key, for every key that has one (cli.py builds its settings options from this table).
FLAGS = {
    "log_level": "--log-level",
    "store.flush_mode": "--flush-mode",
    "store.segment_size": "--segment-size",
    "broker.auto_create_topic": "--auto-create-topic",  # and --no-auto-create-topic
    "broker.broker_name": "--broker-name",
    "broker.cluster_name": "--cluster-name",
    "broker.namesrv_addr": "--namesrv-addr",
    "broker.broker_id": "--broker-id",
    "broker.broker_role": "--role",
    "controller.etcd_endpoints": "--etcd",
    "mqtt.port": "--mqtt-port",
    "grpc.port": "--grpc-port",
    "remoting.port": "--remoting-port",
    "namesrv.port": "--namesrv-port",
    "http.port": "--http-port",
}


@dataclass(slots=True, frozen=True)
class Override:
    """One value given on the command line, as typed, for the key it sets ("log_level" or "store.<field>")."""

    key: str
    value: object
    flag: str


@dataclass(slots=True, frozen=True)
class Settings:
    data_dir: Path
    store: StoreConfig
    broker: BrokerConfig = field(default_factory=BrokerConfig)
    controller: ControllerConfig = field(default_factory=ControllerConfig)
    mqtt: MqttConfig = field(default_factory=MqttConfig)
    grpc: GrpcConfig = field(default_factory=GrpcConfig)
    remoting: RemotingConfig = field(default_factory=RemotingConfig)
    namesrv: NamesrvConfig = field(default_factory=NamesrvConfig)
    http: HttpConfig = field(default_factory=HttpConfig)
    log_level: str = DEFAULT_LOG_LEVEL
    config_file: Path | None = None
    # Where each value came from, keyed "log_level" / "<section>.<field>": "default", "<file>:<line>" or a flag.
    origins: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}), compare=False)


# --- value parsers: each takes what the file or flag gave and returns the value, or raises ValueError -----


def _parsers(
    config_class: type, derived: Mapping[str, str], explicit: Mapping[str, Parser] | None = None
) -> dict[str, Parser]:
    """A parser per settable field of a settings dataclass, chosen by the field's default (or `explicit`, for
    fields whose default says too little, such as None), so new fields are picked up."""
    parsers: dict[str, Parser] = {}
    for spec in dataclasses.fields(config_class):
        if spec.name in derived:
            continue
        if explicit and spec.name in explicit:
            parsers[spec.name] = explicit[spec.name]
            continue
        default = spec.default
        where = f"{config_class.__name__}.{spec.name}"
        if spec.name in SIZE_KEYS:
            parsers[spec.name] = parse_size
        elif spec.name.endswith("_port"):
            parsers[spec.name] = parse_port
        elif isinstance(default, FlushMode):
            parsers[spec.name] = parse_flush_mode
        elif isinstance(default, bool):
            parsers[spec.name] = parse_bool
        elif isinstance(default, int):
            parsers[spec.name] = parse_positive_int
        elif isinstance(default, float):
            parsers[spec.name] = parse_positive_number
        elif isinstance(default, str):
            parsers[spec.name] = parse_string
        else:
            raise TypeError(f"{where}: no parser for {type(default).__name__} in mqgate/config/settings.py")
    return parsers


@dataclass(slots=True, frozen=True)
class Section:
    """A [section] of the configuration file: the settings dataclass it fills and the help of its keys."""

    name: str
    config_class: type
    parsers: Mapping[str, Parser]
    help: Mapping[str, str]
    derived: Mapping[str, str]
    # Where `mqgate serve` runs with another default than the class has for a program embedding it.
    serve_defaults: Mapping[str, object] = dataclasses.field(default_factory=dict)

    def defaults(self) -> dict[str, object]:
        values = {
            spec.name: spec.default for spec in dataclasses.fields(self.config_class) if spec.name in self.parsers
        }
        return {**values, **self.serve_defaults}


STORE_PARSERS = _parsers(
    StoreConfig, DERIVED_STORE_FIELDS, {"access_message_in_memory_max_ratio": parse_non_negative_int}
)
DERIVED_BROKER_FIELDS = {"enable_controller_mode": "it is on when [controller] etcd_endpoints names an etcd"}
DERIVED_HA_FIELDS = {
    "controlled": "it is on when [controller] etcd_endpoints names an etcd",
    "broker_id": "it is [broker] broker_id",
}
BROKER_PARSERS = _parsers(
    BrokerConfig,
    DERIVED_BROKER_FIELDS,
    {"namesrv_addr": parse_host_port_list, "broker_id": parse_non_negative_int, "broker_role": parse_broker_role},
)
HA_PARSERS = _parsers(
    HAConfig,
    DERIVED_HA_FIELDS,
    {"listen_port": parse_optional_port, "max_gap_not_in_sync": parse_size, "transfer_batch_size": parse_size},
)
CONTROLLER_PARSERS = _parsers(ControllerConfig, {}, {"etcd_endpoints": parse_host_port_list})
MQTT_PARSERS = _parsers(
    MqttConfig,
    {},
    {
        "port": parse_port_or_zero,
        "tls_port": parse_optional_port,
        "websocket_port": parse_optional_port,
        "allow_anonymous": parse_optional_bool,
        "certfile": parse_optional_string,
        "keyfile": parse_optional_string,
        "password_file": parse_optional_string,
        "acl_file": parse_optional_string,
        "topics": parse_string_list,
        "server_topic_alias_maximum": parse_uint16,
        "topic_alias_maximum": parse_uint16,
        "receive_maximum": parse_positive_uint16,
        "max_keepalive": parse_uint16,
        "sys_interval": parse_uint16,
    },
)
GRPC_PARSERS = _parsers(
    GrpcConfig,
    {},
    {
        "port": parse_port_or_zero,
        "certfile": parse_optional_string,
        "keyfile": parse_optional_string,
        "acl_file": parse_optional_string,
    },
)
REMOTING_PARSERS = _parsers(
    RemotingConfig,
    {},
    {
        "port": parse_port_or_zero,
        "broker_ip": parse_optional_ip_address,
        "acl_file": parse_optional_string,
    },
)
NAMESRV_PARSERS = _parsers(NamesrvConfig, {}, {"port": parse_port_or_zero, "embedded": parse_optional_bool})
HTTP_PARSERS = _parsers(
    HttpConfig,
    {},
    {"port": parse_port_or_zero, "token": parse_optional_string, "admin_users": parse_string_list},
)
SECTIONS = {
    # The server builds its index in a process of its own (a program embedding the store does not, by default:
    # one process more per store opened).
    "store": Section(
        "store", StoreConfig, STORE_PARSERS, STORE_KEY_HELP, DERIVED_STORE_FIELDS, {"index_process": True}
    ),
    "broker": Section("broker", BrokerConfig, BROKER_PARSERS, BROKER_KEY_HELP, DERIVED_BROKER_FIELDS),
    "ha": Section("ha", HAConfig, HA_PARSERS, HA_KEY_HELP, DERIVED_HA_FIELDS),
    "controller": Section("controller", ControllerConfig, CONTROLLER_PARSERS, CONTROLLER_KEY_HELP, {}),
    "mqtt": Section("mqtt", MqttConfig, MQTT_PARSERS, MQTT_KEY_HELP, {}),
    "grpc": Section("grpc", GrpcConfig, GRPC_PARSERS, GRPC_KEY_HELP, {}),
    "remoting": Section("remoting", RemotingConfig, REMOTING_PARSERS, REMOTING_KEY_HELP, {}),
    "namesrv": Section("namesrv", NamesrvConfig, NAMESRV_PARSERS, NAMESRV_KEY_HELP, {}),
    "http": Section("http", HttpConfig, HTTP_PARSERS, HTTP_KEY_HELP, {}),
}
TOP_LEVEL_PARSERS: dict[str, Parser] = {"log_level": parse_log_level}


def store_defaults() -> dict[str, object]:
    """The defaults of every settable [store] key, as StoreConfig declares them."""
    return SECTIONS["store"].defaults()


# --- merging -------------------------------------------------------------------------------------------------


def default_config_file(data_dir: Path) -> Path | None:
    candidate = data_dir / CONFIG_FILE_NAME
    return candidate if candidate.is_file() else None


def load_settings(
    data_dir: Path = DEFAULT_DATA_DIR,
    config_file: Path | None = None,
    overrides: Sequence[Override] = (),
) -> Settings:
    """Defaults, then `config_file` (or DATA_DIR/mqgate.toml when it exists), then `overrides`."""
    data_dir = data_dir.expanduser().absolute()
    config_file = default_config_file(data_dir) if config_file is None else config_file.expanduser().absolute()
    origins: dict[str, str] = {"log_level": DEFAULT_ORIGIN}
    for section in SECTIONS.values():
        origins.update({f"{section.name}.{name}": DEFAULT_ORIGIN for name in section.parsers})
    top: dict[str, object] = {"log_level": DEFAULT_LOG_LEVEL}
    values: dict[str, dict[str, object]] = {name: section.defaults() for name, section in SECTIONS.items()}
    store = values["store"]

    if config_file is not None:
        parsed = read_config_file(config_file)
        log.debug("reading configuration from %s", config_file)
        _merge_file(parsed, top, values, origins)

    for override in overrides:
        section_name, _, name = override.key.rpartition(".")
        if section_name in SECTIONS:
            parsers, target = SECTIONS[section_name].parsers, values[section_name]
        else:
            parsers, target = TOP_LEVEL_PARSERS, top
        if (section_name and section_name not in SECTIONS) or name not in parsers:
            raise ConfigError(f"{override.flag}: no setting {override.key!r} to override")
        try:
            target[name] = parsers[name](override.value)
        except ValueError as exc:
            raise ConfigError(f"{override.flag}: {exc}") from None
        origins[override.key] = override.flag

    try:
        controller_config = ControllerConfig(**values["controller"])  # type: ignore[arg-type]
    except ValueError as exc:
        raise ConfigError(f"invalid [controller] settings: {exc}") from None
    broker_id = values["broker"]["broker_id"]
    assert isinstance(broker_id, int)
    try:
        ha_config = HAConfig(
            **values["ha"],  # type: ignore[arg-type]
            controlled=controller_config.enabled,
            broker_id=broker_id,
        )
    except ValueError as exc:
        raise ConfigError(f"invalid [ha] settings: {exc}") from None
    if ha_config.listen_port is None:
        # RocketMQ's haListenPort: the remoting port + 1 (a free port when the remoting port is).
        remoting_port = values["remoting"]["port"]
        assert isinstance(remoting_port, int)
        ha_config = dataclasses.replace(ha_config, listen_port=remoting_port + 1 if remoting_port else 0)
    role = values["broker"]["broker_role"]
    assert isinstance(role, BrokerRole)
    try:
        store_config = StoreConfig(
            store_dir=data_dir / STORE_SUBDIR,
            role=role,
            ha=ha_config,
            **store,  # type: ignore[arg-type]
        )
    except ValueError as exc:
        # Cross-field checks live in StoreConfig; name where the keys it mentions were set.
        involved = [f"{name} from {origins[f'store.{name}']}" for name in store if re.search(rf"\b{name}\b", str(exc))]
        detail = f" ({'; '.join(involved)})" if involved else ""
        raise ConfigError(f"invalid [store] settings: {exc}{detail}") from None
    try:
        broker_config = BrokerConfig(
            **values["broker"],  # type: ignore[arg-type]
            enable_controller_mode=controller_config.enabled,
        )
    except ValueError as exc:
        raise ConfigError(f"invalid [broker] settings: {exc}") from None
    mqtt = values["mqtt"]
    if mqtt["tls_port"] is not None and not (mqtt["certfile"] and mqtt["keyfile"]):
        raise ConfigError(f"[mqtt] tls_port ({origins['mqtt.tls_port']}) needs certfile and keyfile")
    # One without the other would leave the WebSocket listener silently unencrypted.
    for given, missing in (("certfile", "keyfile"), ("keyfile", "certfile")):
        if mqtt[given] and not mqtt[missing]:
            raise ConfigError(f"[mqtt] {given} ({origins[f'mqtt.{given}']}) needs {missing} as well")
    mqtt_config = MqttConfig(**mqtt)  # type: ignore[arg-type]
    grpc = values["grpc"]
    for given, missing in (("certfile", "keyfile"), ("keyfile", "certfile")):
        if grpc[given] and not grpc[missing]:
            raise ConfigError(f"[grpc] {given} ({origins[f'grpc.{given}']}) needs {missing} as well")
    grpc_config = GrpcConfig(**grpc)  # type: ignore[arg-type]
    remoting_config = RemotingConfig(**values["remoting"])  # type: ignore[arg-type]
    namesrv_config = NamesrvConfig(**values["namesrv"])  # type: ignore[arg-type]
    if controller_config.enabled and not remoting_config.enabled:
        raise ConfigError(
            f"[controller] etcd_endpoints ({origins['controller.etcd_endpoints']}) needs the remoting port, where the"
            " broker registers its role with the NameServers: set [remoting] enabled = true"
        )
    try:
        http_config = HttpConfig(**values["http"])  # type: ignore[arg-type]
    except ValueError as exc:
        name = next((name for name in values["http"] if re.search(rf"\b{name}\b", str(exc))), "port")
        raise ConfigError(f"invalid [http] settings: {exc} ({name} from {origins[f'http.{name}']})") from None
    if http_config.admin_users and not mqtt_config.password_file:
        raise ConfigError(
            f"[http] admin_users ({origins['http.admin_users']}) are users of [mqtt] password_file, which is not set;"
            " set it, or use [http] token alone"
        )
    return Settings(
        data_dir=data_dir,
        store=store_config,
        broker=broker_config,
        controller=controller_config,
        mqtt=mqtt_config,
        grpc=grpc_config,
        remoting=remoting_config,
        namesrv=namesrv_config,
        http=http_config,
        log_level=str(top["log_level"]),
        config_file=config_file,
        origins=MappingProxyType(origins),
    )


def _merge_file(
    parsed: ConfigFile, top: dict[str, object], values: dict[str, dict[str, object]], origins: dict[str, str]
) -> None:
    allowed_top = [*TOP_LEVEL_PARSERS, *SECTIONS]
    for key, value in parsed.data.items():
        if key in SECTIONS:
            section = SECTIONS[key]
            if value is None:  # an empty `store:` in YAML
                value = {}
            if not isinstance(value, dict):
                raise ConfigError(
                    f"{parsed.where(key)}: {key}: expected a table of {key} settings, got {describe_value(value)}"
                )
            for name, item in value.items():
                where = parsed.where(key, name)
                if name in section.derived:
                    raise ConfigError(f"{where}: {key}.{name} cannot be set: {section.derived[name]}")
                if name not in section.parsers:
                    raise ConfigError(
                        f"{where}: unknown key {key}.{name!s}{_did_you_mean(name, section.parsers)}; [{key}] takes:"
                        f" {', '.join(sorted(section.parsers))}"
                    )
                try:
                    values[key][name] = section.parsers[name](item)
                except ValueError as exc:
                    raise ConfigError(f"{where}: {key}.{name}: {exc}") from None
                origins[f"{key}.{name}"] = where
        elif key in TOP_LEVEL_PARSERS:
            where = parsed.where(key)
            try:
                top[key] = TOP_LEVEL_PARSERS[key](value)
            except ValueError as exc:
                raise ConfigError(f"{where}: {key}: {exc}") from None
            origins[key] = where
        else:
            home = next((name for name, section in SECTIONS.items() if key in section.parsers), None)
            hint = f"; {home} settings go in the [{home}] section" if home else _did_you_mean(key, allowed_top)
            raise ConfigError(
                f"{parsed.where(key)}: unknown key {key!s}{hint}; top-level keys are: {', '.join(allowed_top)}"
            )


def _did_you_mean(name: object, known: Iterable[str]) -> str:
    close = difflib.get_close_matches(str(name), list(known), n=1)
    return f" (did you mean {close[0]}?)" if close else ""


# --- showing -------------------------------------------------------------------------------------------------


def toml_value(value: object) -> str:
    if isinstance(value, FlushMode | BrokerRole):
        return json.dumps(value.value)
    if isinstance(value, str | Path):
        return json.dumps(str(value))
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, tuple):
        return "[" + ", ".join(toml_value(item) for item in value) + "]"
    return repr(value)


def _source(origin: str) -> str:
    return origin if origin == DEFAULT_ORIGIN else f"from {origin}"


def render_toml(settings: Settings) -> str:
    """The effective settings as a TOML file that `load_settings` accepts, each value commented with its origin
    and meaning."""
    origins = settings.origins
    lines = [
        "# Effective mqgate configuration: defaults, then the configuration file, then command-line flags.",
        f"# data directory: {settings.data_dir}",
        f"# configuration file: {settings.config_file or f'none (DATA_DIR/{CONFIG_FILE_NAME} does not exist)'}",
        "",
        f"# {', '.join(LOG_LEVELS)}",
        f"log_level = {toml_value(settings.log_level)}  # {_source(origins.get('log_level', DEFAULT_ORIGIN))}",
        "",
        "[store]",
        f"# store_dir = {toml_value(settings.store.store_dir)}  (always DATA_DIR/{STORE_SUBDIR}; not settable)",
    ]
    sections = (
        ("store", settings.store),
        ("broker", settings.broker),
        ("ha", settings.store.ha),
        ("controller", settings.controller),
        ("mqtt", settings.mqtt),
        ("grpc", settings.grpc),
        ("remoting", settings.remoting),
        ("namesrv", settings.namesrv),
        ("http", settings.http),
    )
    for section_name, config in sections:
        section = SECTIONS[section_name]
        if section_name != "store":
            lines += ["", f"[{section_name}]"]
        for name in section.parsers:
            value = getattr(config, name)
            source = _source(origins.get(f"{section_name}.{name}", DEFAULT_ORIGIN))
            shown = f"{format_size(value)}, {source}" if name in SIZE_KEYS else source
            lines.append(f"# {section.help[name]}")
            if value is None:  # TOML has no null: an unset key is shown commented out
                lines.append(f"# {name} =  (unset, {shown})")
            elif name in SECRET_KEYS.get(section_name, ()):  # the output may be pasted into an issue
                lines.append(f"# {name} =  (set, hidden; {shown})")
            else:
                lines.append(f"{name} = {toml_value(value)}  # {shown}")
    return "\n".join(lines) + "\n"
