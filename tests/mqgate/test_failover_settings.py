"""[controller] (automatic failover) from a file and from --etcd: what it turns on in the broker and the store, and
what it refuses, with the setting named."""

from __future__ import annotations

import pytest

from core import BrokerRole
from mqgate.config.settings import ConfigError, Override, load_settings


def settings(tmp_path, text="", *flags):
    path = tmp_path / "mqgate.toml"
    path.write_text(text)
    return load_settings(tmp_path, path, [Override(key, value, flag) for key, value, flag in flags])


def test_etcd_puts_the_store_and_the_broker_under_the_controller(tmp_path):
    got = settings(
        tmp_path,
        '[broker]\nbroker_id = 2\nbroker_role = "SYNC_MASTER"\n[ha]\nmin_in_sync_replicas = 3\n'
        "[controller]\nlease_ttl_s = 4\nenable_elect_unclean_master = true\n",
        ("controller.etcd_endpoints", "10.0.0.8:2379;10.0.0.9:2379", "--etcd"),
    )
    assert got.controller.etcd_endpoints == ("10.0.0.8:2379", "10.0.0.9:2379")
    assert got.controller.lease_ttl_s == 4 and got.controller.enable_elect_unclean_master
    assert got.broker.enable_controller_mode and got.broker.broker_id == 2
    assert got.store.ha.controlled and got.store.ha.broker_id == 2 and got.store.ha.min_in_sync_replicas == 3
    assert got.store.role is BrokerRole.SYNC_MASTER
    assert got.origins["controller.etcd_endpoints"] == "--etcd"


def test_without_etcd_nothing_is_controlled(tmp_path):
    got = settings(tmp_path)
    assert not got.controller.enabled and not got.broker.enable_controller_mode and not got.store.ha.controlled


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("[broker]\nbroker_id = 0\n", "each broker of a group has its own id, 1 or more"),
        ('[broker]\nbroker_id = 1\nbroker_role = "SLAVE"\n', "the controller names the role"),
        ("[broker]\nbroker_id = 1\n[remoting]\nenabled = false\n", "needs the remoting port"),
        ("[broker]\nbroker_id = 1\n[controller]\nlease_ttl_s = 1\n", "lease_ttl_s 1: give 2 s or more"),
    ],
)
def test_what_automatic_failover_refuses(tmp_path, text, message):
    with pytest.raises(ConfigError, match=message):
        settings(tmp_path, text, ("controller.etcd_endpoints", "127.0.0.1:2379", "--etcd"))


@pytest.mark.parametrize("key", ["controlled", "broker_id"])
def test_the_ha_fields_the_controller_sets_are_not_settable(tmp_path, key):
    with pytest.raises(ConfigError, match=f"ha.{key} cannot be set"):
        settings(tmp_path, f"[ha]\n{key} = 1\n")
