"""Validating a connector config against its plugin's declared keys, and the answer of Kafka Connect's
`PUT /connector-plugins/{plugin}/config/validate`.

A config is a flat map of strings. It is parsed with `api.COMMON_CONFIG` merged with the plugin's `config_def`
(every key alone: type, required, validator), then, only if every key parsed, with the connector's own
`validate` (checks across keys). Each error names the key and the reason; keys no definition declares are kept
and passed on, as Kafka Connect does (a plugin may read them, e.g. `spark.*` options).
"""

from __future__ import annotations

import logging
import re
from collections.abc import Mapping
from typing import Any

from connectors import api
from connectors.plugins import PluginNotFound, PluginRegistry, class_path

log = logging.getLogger(__name__)

# A sink reads as the consumer group `connect-<name>`, and group names are limited to 255 characters (RocketMQ's
# Validators.CHARACTER_MAX_LENGTH). '%' and '|' are legal in a group but not here: a name is also a URL path
# segment, and '%' there would have to be escaped.
SINK_GROUP_PREFIX = "connect-"
MAX_NAME_LENGTH = 255 - len(SINK_GROUP_PREFIX)
_NAME = re.compile(r"[A-Za-z0-9_-]+")

# What Kafka Connect shows instead of a PASSWORD value.
HIDDEN = "[hidden]"

GROUP_COMMON = "Common"
GROUP_ERRORS = "Error Handling"


def check_name(name: str) -> str | None:
    """Why `name` cannot name a connector, or None if it can."""
    if not name:
        return "must not be empty"
    if len(name) > MAX_NAME_LENGTH:
        return f"{len(name)} characters; at most {MAX_NAME_LENGTH} are allowed"
    if _NAME.fullmatch(name) is None:
        bad = next(char for char in name if _NAME.fullmatch(char) is None)
        return f"{bad!r} is not allowed; use letters, digits, '_' or '-'"
    return None


def config_def(plugin: type[api.Connector]) -> api.ConfigDef:
    """COMMON_CONFIG and the plugin's own keys (ValueError if the plugin declares a common key again)."""
    return api.COMMON_CONFIG.merged(plugin.config_def)


def validate_config(plugins: PluginRegistry, config: Mapping[str, str]) -> list[api.ConfigError]:
    """Every problem with `config`, one error per key (empty: the config can be used)."""
    class_name = config.get("connector.class")
    if class_name is None:
        return [api.ConfigError("connector.class", "missing required configuration"), *_errors(None, config)]
    if not isinstance(class_name, str):
        return _errors(None, config)
    try:
        plugin = plugins.get(class_name)
    except PluginNotFound as exc:
        return [api.ConfigError("connector.class", str(exc)), *_errors(None, config)]
    return _errors(plugin, config)


def _errors(plugin: type[api.Connector] | None, config: Mapping[str, object]) -> list[api.ConfigError]:
    """The errors of `config` against `plugin`'s keys (None: the common keys alone, for an unknown plugin)."""
    errors = [
        api.ConfigError(key, f"expected a string value, got {type(value).__name__}")
        for key, value in config.items()
        if not isinstance(value, str)
    ]
    strings = {key: value for key, value in config.items() if isinstance(value, str)}
    if plugin is None:
        definition = api.COMMON_CONFIG
    else:
        try:
            definition = config_def(plugin)
        except ValueError as exc:
            return [api.ConfigError("connector.class", f"plugin {plugin.__qualname__} is unusable: {exc}")]
    values, parse_errors = definition.parse(strings)
    # A key with a value of the wrong type is not missing as well.
    errors += [error for error in parse_errors if error.key in strings or error.key not in config]
    if plugin is None:
        errors = [error for error in errors if error.key != "connector.class"]
    name = strings.get("name")
    reason = None if name is None else check_name(name)
    if reason is not None:
        errors.append(api.ConfigError("name", f"invalid value {name!r}: {reason}"))
    if not parse_errors:
        errors += _error_handling_errors(values, None if plugin is None else plugin.kind)
    if errors or plugin is None:
        return errors
    try:
        return list(plugin().validate(values))
    except Exception as exc:  # third-party code: its failure is reported, not raised through the API
        log.warning("connector plugin %s: validate raised", plugin.__qualname__, exc_info=True)
        return [api.ConfigError("connector.class", f"{plugin.__qualname__}.validate failed: {exc!r}")]


def _error_handling_errors(values: Mapping[str, Any], kind: str | None) -> list[api.ConfigError]:
    """The errors.* keys across each other: a dead-letter topic is only written by a sink, with
    errors.tolerance=all, and it must not be a topic the connector reads (it would be fed its own failures)."""
    topic = values.get("errors.deadletterqueue.topic.name") or ""
    if not topic:
        return []
    key = "errors.deadletterqueue.topic.name"
    if kind == "source":
        return [
            api.ConfigError(
                key,
                f"{topic!r} would never be written: dead letters are records a sink could not write; a source task"
                " that cannot store its records fails after errors.retry.timeout; remove this key",
            )
        ]
    if values.get("errors.tolerance") != "all":
        return [
            api.ConfigError(
                key,
                f"{topic!r} would never be written: with errors.tolerance=none the first failing record fails the"
                " task; set errors.tolerance=all, or remove this key",
            )
        ]
    topics = values.get("topics")
    read = topics if isinstance(topics, list) else [t.strip() for t in str(topics or "").split(",")]
    if topic in read:
        return [api.ConfigError(key, f"{topic!r} is also in topics: the connector would read its own failures")]
    return []


def mask_secrets(plugins: PluginRegistry, config: Mapping[str, str]) -> dict[str, str]:
    """`config` with the values of PASSWORD keys replaced by "[hidden]", for showing through the API."""
    try:
        plugin = plugins.get(str(config.get("connector.class", "")))
        keys = config_def(plugin).keys
    except (PluginNotFound, ValueError):
        keys = api.COMMON_CONFIG.keys
    return {
        key: HIDDEN if key in keys and keys[key].type is api.ConfigType.PASSWORD else value
        for key, value in config.items()
    }


def _render(kind: api.ConfigType, value: Any) -> str | None:
    """A value as the string a config would hold (defaults are typed)."""
    if value is None:
        return None
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, list | tuple):
        return ",".join(str(item) for item in value)
    return str(value)


def validation_response(plugin: type[api.Connector], config: Mapping[str, str], name: str) -> dict[str, Any]:
    """Kafka Connect's ConfigInfos for `config` checked against `plugin` (whose entry-point name is `name`):

        {"name": ..., "error_count": N, "groups": [...],
         "configs": [{"definition": {name, type, required, default_value, importance, documentation, group,
                                     width, display_name, dependents, order},
                      "value": {name, value, recommended_values, errors, visible}}]}

    `name` is the plugin's class path, as in Kafka Connect; `config["connector.class"]` is taken to be `plugin`."""
    config = {**config, "connector.class": name}
    definition = config_def(plugin)
    errors_by_key: dict[str, list[str]] = {}
    for error in _errors(plugin, config):
        errors_by_key.setdefault(error.key, []).append(error.message)
    error_count = sum(len(messages) for messages in errors_by_key.values())
    groups: list[str] = []
    order_in_group: dict[str, int] = {}
    configs: list[dict[str, Any]] = []
    for key in definition.keys.values():
        if key.name in api.COMMON_CONFIG.keys:
            group = GROUP_ERRORS if key.name.startswith("errors.") else GROUP_COMMON
        else:
            group = name
        if group not in groups:
            groups.append(group)
        order_in_group[group] = order_in_group.get(group, 0) + 1
        raw = config.get(key.name)
        shown = raw if isinstance(raw, str) else (None if key.required else _render(key.type, key.default))
        if key.type is api.ConfigType.PASSWORD and shown:
            shown = HIDDEN
        configs.append(
            {
                "definition": {
                    "name": key.name,
                    "type": key.type.value,
                    "required": key.required,
                    "default_value": None if key.required else _render(key.type, key.default),
                    "importance": key.importance.value,
                    "documentation": key.doc,
                    "group": group,
                    "width": "NONE",
                    "display_name": key.name,
                    "dependents": [],
                    "order": order_in_group[group],
                },
                "value": {
                    "name": key.name,
                    "value": shown,
                    "recommended_values": [],
                    "errors": errors_by_key.pop(key.name, []),
                    "visible": True,
                },
            }
        )
    # Errors of keys no definition declares (from the plugin's own validate, or non-string values).
    for undeclared, messages in errors_by_key.items():
        raw = config.get(undeclared)
        configs.append(
            {
                "definition": None,
                "value": {
                    "name": undeclared,
                    "value": raw if isinstance(raw, str) else None,
                    "recommended_values": [],
                    "errors": messages,
                    "visible": True,
                },
            }
        )
    return {
        "name": class_path(plugin),
        "error_count": error_count,
        "groups": groups,
        "configs": configs,
    }
