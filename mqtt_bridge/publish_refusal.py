"""What the gateway answers for a PUBLISH it did not store: the rule that nothing refused is acknowledged as stored.

Pure rules, no I/O. `refusal_of(error)` names the MQTT 5 reason code of an error met while storing; `answer`
says what the client is sent, by protocol level and QoS:

| refusal                                          | MQTT 5, QoS 1/2    | MQTT 3.1.1, QoS 1/2            | QoS 0   |
|--------------------------------------------------|--------------------|--------------------------------|---------|
| the ACL denies writing the topic, or it is $SYS  | PUBACK/PUBREC 0x87 | PUBACK/PUBREC, message dropped | dropped |
| topic not accepted ([mqtt] topics, no auto-create, core topic missing or not writable)                   |
|                                                  | 0x90               | connection closed              | dropped |
| store refuses writes (disk over disk_refuse_ratio, store closing, failed fsync)                          |
|                                                  | 0x97               | connection closed              | dropped |
| message larger than the store takes              | 0x97               | connection closed              | dropped |
| written, the disk did not confirm it in time (SYNC_FLUSH's FLUSH_DISK_TIMEOUT)                           |
|                                                  | 0x80               | connection closed              | dropped |
| written on a SYNC_MASTER, no slave confirmed it (FLUSH_SLAVE_TIMEOUT, SLAVE_NOT_AVAILABLE)                 |
|                                                  | 0x80               | connection closed              | dropped |
| any other core error                             | 0x80               | connection closed              | dropped |

MQTT 3.1.1 has no negative acknowledgement: a PUBACK there says "stored", so the only honest answer is none, and
the connection is closed; the client sends the message again (DUP) when it reconnects, as [MQTT-4.4.0-1] requires.
The ACL case follows Mosquitto, which acknowledges a denied 3.1.1 publish and drops it (a client that may not write
a topic would otherwise reconnect and resend forever). A QoS 0 message is never acknowledged, so a refused one is
dropped, logged and counted, and the connection stays.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

from core import (
    NoPermissionError,
    PayloadTooLargeError,
    SendStatus,
    ServiceNotAvailableError,
    TopicConfigError,
    TopicNotFoundError,
)

# MQTT 5 PUBACK / PUBREC reason codes (MQTT 5 3.4.2.1).
UNSPECIFIED_ERROR = 0x80
IMPLEMENTATION_SPECIFIC_ERROR = 0x83
NOT_AUTHORIZED = 0x87
TOPIC_NAME_INVALID = 0x90
QUOTA_EXCEEDED = 0x97


class Answer(enum.Enum):
    ACKNOWLEDGE_REFUSAL = "acknowledge with the reason code"  # MQTT 5
    ACKNOWLEDGE_AND_DROP = "acknowledge as if stored, drop"  # MQTT 3.1.1 ACL denial, as Mosquitto
    CLOSE = "close the connection, acknowledge nothing"  # MQTT 3.1.1
    DROP = "drop (QoS 0: nothing to acknowledge)"


@dataclass(slots=True, frozen=True)
class Refusal:
    """Why a PUBLISH was not stored: the MQTT 5 reason code and a reason string for the client and the log."""

    reason_code: int
    reason: str

    @property
    def by_acl(self) -> bool:
        return self.reason_code == NOT_AUTHORIZED


class TopicNotAccepted(ValueError):
    """The gateway does not take this topic (configured first levels, topics not created on the fly)."""


def refusal_of(error: Exception) -> Refusal:
    """The refusal that an error met while storing a message stands for."""
    if isinstance(error, TopicNotAccepted | TopicNotFoundError | TopicConfigError | NoPermissionError):
        return Refusal(TOPIC_NAME_INVALID, str(error))
    if isinstance(error, ServiceNotAvailableError | PayloadTooLargeError):
        return Refusal(QUOTA_EXCEEDED, str(error))
    if isinstance(error, ValueError):
        return Refusal(IMPLEMENTATION_SPECIFIC_ERROR, str(error))
    return Refusal(UNSPECIFIED_ERROR, str(error))


_NOT_CONFIRMED = {
    SendStatus.FLUSH_DISK_TIMEOUT: "the disk did not confirm the write in time",
    SendStatus.FLUSH_SLAVE_TIMEOUT: "stored on the master only: no slave confirmed it in time",
    SendStatus.SLAVE_NOT_AVAILABLE: "stored on the master only: no slave is in sync to hold it",
}


def not_confirmed(status: SendStatus) -> Refusal:
    """A write the store made but could not confirm as promised: on disk (SYNC_FLUSH timed out) or, under a
    SYNC_MASTER, on a slave."""
    return Refusal(UNSPECIFIED_ERROR, f"{status.value}: {_NOT_CONFIRMED.get(status, 'not confirmed')}")


ACL_DENIED = Refusal(NOT_AUTHORIZED, "not authorized")
# A client's PUBLISH (or will) to $SYS/...: answered as an ACL denial, as Mosquitto denies it.
SYS_DENIED = Refusal(NOT_AUTHORIZED, "$SYS topics are published by the server only")


def answer(version: int, qos: int, refusal: Refusal) -> Answer:
    """What a client of protocol level `version` is sent for a refused PUBLISH of `qos`."""
    if qos == 0:
        return Answer.DROP
    if version == 5:
        return Answer.ACKNOWLEDGE_REFUSAL
    if refusal.by_acl:
        return Answer.ACKNOWLEDGE_AND_DROP
    return Answer.CLOSE
