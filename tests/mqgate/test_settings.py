"""Settings: defaults, TOML and YAML files, flag overrides, and the errors for bad input. In-process, real files."""

import dataclasses
import re
import tomllib
from pathlib import Path

import pytest

from core import FlushMode, HAConfig, StoreConfig
from core.store.config import DEFAULT_SEGMENT_SIZE
from mqgate.config.settings import (
    BROKER_KEY_HELP,
    BROKER_PARSERS,
    MQTT_KEY_HELP,
    STORE_KEY_HELP,
    STORE_PARSERS,
    ConfigError,
    Override,
    load_settings,
    parse_size,
    render_toml,
)
from mqtt_bridge.config import MqttConfig

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "mqgate.toml"


def write(path: Path, text: str) -> Path:
    path.write_text(text, encoding="utf-8")
    return path


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("64MiB", 64 * 1024 * 1024),
        ("1GiB", 1024**3),
        ("4MiB", 4 * 1024 * 1024),
        ("512KiB", 512 * 1024),
        ("4096", 4096),
        ("4096B", 4096),
        ("1_024", 1024),
        (" 2 mib ", 2 * 1024 * 1024),
        (65536, 65536),
    ],
)
def test_size_strings_parse(text: object, expected: int) -> None:
    assert parse_size(text) == expected


@pytest.mark.parametrize("text", ["64MB", "1G", "1.5GiB", "", "-1", "0", "abc", "12 parsecs", 0, -5, True, 3.5, None])
def test_bad_sizes_are_refused(text: object) -> None:
    with pytest.raises(ValueError, match=r"size|positive"):
        parse_size(text)


def test_decimal_units_are_refused_with_a_hint() -> None:
    with pytest.raises(ValueError, match="MiB"):
        parse_size("64MB")


def test_defaults_without_a_file(tmp_path: Path) -> None:
    settings = load_settings(tmp_path)
    assert settings.config_file is None
    assert settings.log_level == "INFO"
    # The server builds its index in a process of its own; a store embedded in a program does not by default.
    # ... and listens for slaves on the remoting port + 1, as RocketMQ's haListenPort.
    assert settings.store == StoreConfig(
        store_dir=tmp_path / "store", index_process=True, ha=HAConfig(listen_port=10912)
    )
    assert settings.store.segment_size == DEFAULT_SEGMENT_SIZE
    assert settings.origins["store.flush_mode"] == "default"


def test_store_dir_is_data_dir_store_and_absolute(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    settings = load_settings(Path("relative"))
    assert settings.data_dir == tmp_path / "relative"
    assert settings.store.store_dir == tmp_path / "relative" / "store"
    assert settings.store.store_dir.is_absolute()


def test_data_dir_toml_is_read_when_present(tmp_path: Path) -> None:
    write(tmp_path / "mqgate.toml", 'log_level = "warning"\n[store]\nflush_mode = "SYNC_FLUSH"\n')
    settings = load_settings(tmp_path)
    assert settings.config_file == tmp_path / "mqgate.toml"
    assert settings.log_level == "WARNING"
    assert settings.store.flush_mode is FlushMode.SYNC_FLUSH
    assert settings.origins["store.flush_mode"] == f"{tmp_path / 'mqgate.toml'}:3"


def test_explicit_config_wins_over_data_dir_file(tmp_path: Path) -> None:
    write(tmp_path / "mqgate.toml", '[store]\nflush_mode = "SYNC_FLUSH"\n')
    other = write(tmp_path / "other.toml", '[store]\nflush_mode = "ASYNC_FLUSH"\n')
    settings = load_settings(tmp_path, other)
    assert settings.config_file == other
    assert settings.store.flush_mode is FlushMode.ASYNC_FLUSH


def test_flags_win_over_the_file(tmp_path: Path) -> None:
    config = write(
        tmp_path / "c.toml", 'log_level = "ERROR"\n[store]\nflush_mode = "ASYNC_FLUSH"\nsegment_size = "8MiB"\n'
    )
    settings = load_settings(
        tmp_path,
        config,
        [
            Override("store.flush_mode", "SYNC_FLUSH", "--flush-mode"),
            Override("store.segment_size", "64MiB", "--segment-size"),
            Override("log_level", "debug", "--log-level"),
        ],
    )
    assert settings.store.flush_mode is FlushMode.SYNC_FLUSH
    assert settings.store.segment_size == 64 * 1024 * 1024
    assert settings.log_level == "DEBUG"
    assert settings.origins["store.segment_size"] == "--segment-size"


def test_file_values_of_every_kind(tmp_path: Path) -> None:
    config = write(
        tmp_path / "c.toml",
        "[store]\n"
        'segment_size = "16MiB"\n'
        "max_message_size = 1048576\n"
        "flush_interval_ms = 200\n"
        "file_reserved_hours = 1\n"
        'delete_when = "03;04"\n'
        "disk_clean_ratio = 0.5\n"
        'store_host = "10.0.0.7"\n'
        "store_port = 9876\n",
    )
    store = load_settings(tmp_path, config).store
    assert store.segment_size == 16 * 1024 * 1024
    assert store.max_message_size == 1024 * 1024
    assert store.flush_interval_ms == 200
    assert store.file_reserved_hours == 1.0
    assert store.delete_hours == frozenset({3, 4})
    assert store.disk_clean_ratio == 0.5
    assert (store.store_host, store.store_port) == ("10.0.0.7", 9876)


def test_yaml_file_takes_the_same_keys(tmp_path: Path) -> None:
    config = write(
        tmp_path / "mqgate.yaml", "log_level: DEBUG\nstore:\n  flush_mode: SYNC_FLUSH\n  segment_size: 32MiB\n"
    )
    settings = load_settings(tmp_path, config)
    assert settings.log_level == "DEBUG"
    assert settings.store.flush_mode is FlushMode.SYNC_FLUSH
    assert settings.store.segment_size == 32 * 1024 * 1024


def test_empty_yaml_file_means_defaults(tmp_path: Path) -> None:
    default = StoreConfig(store_dir=tmp_path / "store", index_process=True, ha=HAConfig(listen_port=10912))
    settings = load_settings(tmp_path, write(tmp_path / "mqgate.yml", "# nothing yet\n"))
    assert settings.store == default
    settings = load_settings(tmp_path, write(tmp_path / "mqgate.yaml", "store:\n"))
    assert settings.store == default


def test_store_section_must_be_a_table(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"c.toml:1: store: expected a table of store settings, got a string"):
        load_settings(tmp_path, write(tmp_path / "c.toml", 'store = "fast"\n'))


def test_example_config_loads(tmp_path: Path) -> None:
    settings = load_settings(tmp_path, EXAMPLE)
    assert settings.store.flush_mode is FlushMode.SYNC_FLUSH
    assert settings.store.segment_size == 256 * 1024 * 1024
    assert settings.store.file_reserved_hours == 48.0
    # Every value the example sets is attributed to a line of it.
    assert settings.origins["store.segment_size"].startswith(f"{EXAMPLE}:")


def test_toml_syntax_error_keeps_file_line_and_column(tmp_path: Path) -> None:
    config = write(tmp_path / "bad.toml", '[store]\nflush_mode = "SYNC_FLUSH\n')
    with pytest.raises(ConfigError) as caught:
        load_settings(tmp_path, config)
    message = str(caught.value)
    assert str(config) in message
    assert "line 2" in message


def test_yaml_syntax_error_names_file_and_line(tmp_path: Path) -> None:
    config = write(tmp_path / "bad.yaml", "store:\n  flush_mode: [SYNC_FLUSH\n")
    with pytest.raises(ConfigError, match=rf"^{re.escape(str(tmp_path / 'bad.yaml'))}:3:\d+: invalid YAML"):
        load_settings(tmp_path, config)


def test_unknown_store_key_names_key_line_and_allowed_keys(tmp_path: Path) -> None:
    config = write(tmp_path / "c.toml", '[store]\nflush_mode = "SYNC_FLUSH"\nsegmant_size = 1\n')
    with pytest.raises(ConfigError) as caught:
        load_settings(tmp_path, config)
    message = str(caught.value)
    assert message.startswith(f"{config}:3: unknown key store.segmant_size")
    assert "segment_size" in message.split(";", 1)[1]


def test_unknown_top_level_key_in_yaml_names_line(tmp_path: Path) -> None:
    config = write(tmp_path / "c.yaml", "log_level: INFO\nkafka:\n  port: 9092\n")
    with pytest.raises(ConfigError, match=rf"^{re.escape(str(tmp_path / 'c.yaml'))}:2: unknown key kafka"):
        load_settings(tmp_path, config)


def test_store_key_at_top_level_gets_a_hint(tmp_path: Path) -> None:
    config = write(tmp_path / "c.toml", "segment_size = 1048576\n")
    with pytest.raises(ConfigError, match=r"\[store\] section"):
        load_settings(tmp_path, config)


def test_store_dir_cannot_be_set(tmp_path: Path) -> None:
    config = write(tmp_path / "c.toml", '[store]\nstore_dir = "/elsewhere"\n')
    with pytest.raises(ConfigError, match=r"c.toml:2: store.store_dir cannot be set.*--data-dir"):
        load_settings(tmp_path, config)


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        ('flush_mode = "FAST"', r"store.flush_mode: 'FAST' is not a flush mode; expected ASYNC_FLUSH or SYNC_FLUSH"),
        ('index_slots = "many"', r"store.index_slots: expected a positive integer, got a string"),
        ("index_slots = 0", r"store.index_slots: 0: must be a positive integer"),
        ("cq_entries_per_file = true", r"store.cq_entries_per_file: expected a positive integer, got a boolean"),
        ('file_reserved_hours = "3 days"', r"store.file_reserved_hours: expected a positive number"),
        ("delete_when = 4", r"store.delete_when: expected a string"),
        ('segment_size = "1 gigabyte"', r"store.segment_size: '1 gigabyte' is not a size"),
        ("store_port = 70000", r"store.store_port: 70000: a port goes from 1 to 65535"),
    ],
)
def test_wrong_types_and_values_name_file_line_and_key(tmp_path: Path, line: str, expected: str) -> None:
    config = write(tmp_path / "c.toml", f"# store settings\n[store]\n{line}\n")
    with pytest.raises(ConfigError, match=rf"^{re.escape(str(config))}:3: {expected}"):
        load_settings(tmp_path, config)


def test_bad_log_level_lists_the_levels(tmp_path: Path) -> None:
    config = write(tmp_path / "c.toml", 'log_level = "loud"\n')
    with pytest.raises(ConfigError, match=r"c.toml:1: log_level: expected one of DEBUG, INFO, WARNING"):
        load_settings(tmp_path, config)


def test_cross_field_error_names_where_each_value_came_from(tmp_path: Path) -> None:
    config = write(tmp_path / "c.toml", '[store]\nsegment_size = "4MiB"\n')
    with pytest.raises(ConfigError) as caught:
        load_settings(tmp_path, config)
    message = str(caught.value)
    assert "does not fit in a segment" in message
    assert f"segment_size from {config}:2" in message
    assert "max_message_size from default" in message


def test_bad_flag_value_names_the_flag(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"^--segment-size: '64MB' is not a size"):
        load_settings(tmp_path, None, [Override("store.segment_size", "64MB", "--segment-size")])


def test_missing_and_unknown_format_files_are_refused(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="configuration file not found"):
        load_settings(tmp_path, tmp_path / "absent.toml")
    with pytest.raises(ConfigError, match=r"unknown configuration format '.ini'; use .toml, .yaml or .yml"):
        load_settings(tmp_path, write(tmp_path / "c.ini", "[store]\n"))


def test_every_store_field_is_settable_and_documented() -> None:
    fields = {spec.name for spec in dataclasses.fields(StoreConfig)} - {"store_dir", "role", "ha"}
    assert set(STORE_PARSERS) == fields
    assert set(STORE_KEY_HELP) == fields


def test_rendered_configuration_is_a_file_that_loads_back(tmp_path: Path) -> None:
    config = write(tmp_path / "c.toml", '[store]\nflush_mode = "SYNC_FLUSH"\nsegment_size = "64MiB"\n')
    settings = load_settings(tmp_path, config, [Override("store.delete_when", "02;03", "--delete-when")])
    rendered = render_toml(settings)
    assert tomllib.loads(rendered)["store"]["segment_size"] == 64 * 1024 * 1024
    again = load_settings(tmp_path, write(tmp_path / "rendered.toml", rendered))
    assert again.store == settings.store
    assert again.log_level == settings.log_level


def test_broker_section_file_and_flag(tmp_path):
    config = tmp_path / "mqgate.toml"
    config.write_text("[broker]\nauto_create_topic = false\ndefault_queue_nums = 8\nconsumer_expire_s = 30.5\n")
    settings = load_settings(tmp_path, config)
    assert settings.broker.auto_create_topic is False
    assert (settings.broker.default_queue_nums, settings.broker.consumer_expire_s) == (8, 30.5)
    assert settings.origins["broker.auto_create_topic"].endswith("mqgate.toml:2")
    flagged = load_settings(tmp_path, config, [Override("broker.auto_create_topic", True, "--auto-create-topic")])
    assert flagged.broker.auto_create_topic is True
    assert "auto_create_topic = true  # from --auto-create-topic" in render_toml(flagged)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("[broker]\nauto_create_topic = 1\n", "broker.auto_create_topic: expected true or false"),
        ("[broker]\nno_such = 1\n", "unknown key broker.no_such"),
        ("auto_create_topic = false\n", "broker settings go in the [broker] section"),
    ],
)
def test_bad_broker_settings_name_the_key(tmp_path, text, message):
    config = tmp_path / "mqgate.toml"
    config.write_text(text)
    with pytest.raises(ConfigError, match=re.escape(message)):
        load_settings(tmp_path, config)


def test_every_broker_key_is_documented():
    assert set(BROKER_PARSERS) == set(BROKER_KEY_HELP)


def test_mqtt_section_file_and_flag(tmp_path):
    config = tmp_path / "mqgate.toml"
    config.write_text('[mqtt]\nport = 0\ntopics = ["sensors", "cmd"]\npassword_file = "/etc/passwd-mq"\n')
    settings = load_settings(tmp_path, config)
    assert (settings.mqtt.port, settings.mqtt.topics) == (0, ("sensors", "cmd"))
    assert settings.mqtt.password_file == "/etc/passwd-mq" and settings.mqtt.tls_port is None
    flagged = load_settings(tmp_path, config, [Override("mqtt.port", 1884, "--mqtt-port")])
    assert flagged.mqtt.port == 1884
    rendered = render_toml(flagged)
    assert 'topics = ["sensors", "cmd"]' in rendered and "# tls_port =  (unset" in rendered
    again = load_settings(tmp_path, write(tmp_path / "rendered.toml", rendered))
    assert again.mqtt == flagged.mqtt
    with pytest.raises(ConfigError, match=r"tls_port .* needs certfile and keyfile"):
        load_settings(tmp_path, write(tmp_path / "tls.toml", "[mqtt]\ntls_port = 8883\n"))
    with pytest.raises(ConfigError, match="topics"):
        load_settings(tmp_path, write(tmp_path / "bad.toml", "[mqtt]\ntopics = 3\n"))


@pytest.mark.parametrize(
    ("lines", "setting", "allowed"),
    [
        ("", None, True),  # the embedded default: no authentication at all
        ('password_file = "/etc/passwd-mq"\n', None, False),  # as Mosquitto 2
        ('password_file = "/etc/passwd-mq"\nallow_anonymous = true\n', True, True),  # as Mosquitto, when asked
        ("allow_anonymous = false\n", False, False),
        ('acl_file = "/etc/acl-mq"\n', None, True),  # an ACL file authorizes; it authenticates nobody
    ],
)
def test_anonymous_clients_are_refused_once_a_password_file_is_set(tmp_path, lines, setting, allowed) -> None:
    settings = load_settings(tmp_path, write(tmp_path / "mqgate.toml", f"[mqtt]\n{lines}"))
    assert settings.mqtt.allow_anonymous is setting
    assert settings.mqtt.anonymous_allowed is allowed
    again = load_settings(tmp_path, write(tmp_path / "rendered.toml", render_toml(settings)))
    assert again.mqtt == settings.mqtt  # unset stays unset through `mqgate config`


def test_allow_anonymous_takes_a_boolean_or_null_in_yaml(tmp_path) -> None:
    yaml = load_settings(tmp_path, write(tmp_path / "mqgate.yaml", "mqtt:\n  allow_anonymous: null\n"))
    assert yaml.mqtt.allow_anonymous is None
    with pytest.raises(ConfigError, match=r"mqgate.toml:2: mqtt.allow_anonymous: expected true or false, got a string"):
        load_settings(tmp_path, write(tmp_path / "mqgate.toml", '[mqtt]\nallow_anonymous = "maybe"\n'))


def test_every_mqtt_field_is_documented() -> None:
    fields = {spec.name for spec in dataclasses.fields(MqttConfig)}
    assert set(MQTT_KEY_HELP) == fields


@pytest.mark.parametrize(("given", "missing"), [("certfile", "keyfile"), ("keyfile", "certfile")])
def test_certfile_and_keyfile_come_together(tmp_path, given, missing):
    # Without the pair the WebSocket listener would quietly stay unencrypted.
    config = write(tmp_path / "half.toml", f'[mqtt]\nwebsocket_port = 0\n{given} = "/etc/mqgate/x.pem"\n')
    with pytest.raises(ConfigError, match=rf"{given} \(.*half.toml:3\) needs {missing}"):
        load_settings(tmp_path, config)
