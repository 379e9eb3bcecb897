"""Who may connect and what they may do: the password file checks a CONNECT's credentials (anonymous clients as
`[mqtt] allow_anonymous` says), the ACL file each topic a client publishes to, subscribes to or receives from."""

from __future__ import annotations

import mqtt5

from mqtt_bridge.access.acl_file import Access, AclFile
from mqtt_bridge.access.password_file import PasswordFile
from mqtt_bridge.config import MqttConfig
from mqtt_bridge.link import Link

Reason = mqtt5.ConnAckReasonCode


class AccessControl:
    def __init__(self, config: MqttConfig) -> None:
        self.anonymous_allowed = config.anonymous_allowed
        self.passwords = PasswordFile.load(config.password_file) if config.password_file else None
        self.acl = AclFile.load(config.acl_file) if config.acl_file else None

    def authenticate(self, packet: mqtt5.ConnectPacket) -> Reason:
        if packet.username is None:
            if not self.anonymous_allowed:
                return Reason.NOT_AUTHORIZED
            return Reason.SUCCESS
        if self.passwords is not None and not self.passwords.check(packet.username, packet.password):
            return Reason.BAD_USER_NAME_OR_PASSWORD
        if self.passwords is None and not self.anonymous_allowed:  # no password file to check it against
            return Reason.NOT_AUTHORIZED
        return Reason.SUCCESS

    def allowed(self, link: Link, topic: str, access: Access) -> bool:
        if self.acl is None:
            return True
        return self.acl.check(username=link.username, client_id=link.client_id, topic=topic, access=access)

    def client_allowed(self, username: str | None, client_id: str, topic: str, access: Access) -> bool:
        """`allowed` for a client that has no connection any more (its will)."""
        if self.acl is None:
            return True
        return self.acl.check(username=username, client_id=client_id, topic=topic, access=access)
