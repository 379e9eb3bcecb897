"""Send hooks: how front doors name the light queues a message is also dispatched to (Broker.add_send_hook), and how
their answers are merged into the property the store dispatches by."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any

from core.store.message import MULTI_DISPATCH_SEPARATOR, PROPERTY_MULTI_DISPATCH, Message

# A send hook returns the light queues a message must also be dispatched to (Broker.add_send_hook); a stored
# listener (core.stored_listeners) hears of every message appended (Broker.add_stored_listener).
SendHook = Callable[[Message], Iterable[str] | None]


def name_light_queues(message: Message, hooks: Sequence[SendHook]) -> None:
    """Write the light queues of `message` (its own, then each hook's, in order) into the property the store
    dispatches by. Runs for every message sent while a hook is installed (core.batch_send calls it for each message
    of a batch), so this module is compiled: one hook naming the queues costs one join, as when hooks wrote the
    property themselves. Lists are merged, dropping repeats, only when two sources name queues; a repeat within one
    list is left to the store, which checks each distinct list once (core.store.log.appender.Appender.light_queues),
    keeps it and dispatches a repeated name once. The message's fields are read untyped, so a field of the wrong
    type gets the same answer compiled or not."""
    fields: Any = message
    queues: Any = fields.light_queues
    for hook in hooks:
        named: Any = hook(message)
        if named:
            queues = list(dict.fromkeys([*queues, *named])) if queues else named
    if not queues:
        return
    properties: Any = fields.properties
    given: Any = properties.get(PROPERTY_MULTI_DISPATCH)  # written by a caller that knows the store's property
    if given:
        queues = dict.fromkeys([*given.split(MULTI_DISPATCH_SEPARATOR), *queues])
    names = MULTI_DISPATCH_SEPARATOR.join(queues)
    if names:
        properties[PROPERTY_MULTI_DISPATCH] = names
