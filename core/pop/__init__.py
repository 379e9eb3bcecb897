"""Pop consumption, as RocketMQ 5's broker serves SimpleConsumer: messages handed out invisible for a while, acked
by receipt handle, sent back when not acked in time.

    service.py         PopService: pop, ack, change invisible time, send back (the rules; its module docstring
                       says where a group starts and what a restart delivers again)
    group_state.py     a group's queues' state, rebuilt from its committed offset
    queue_state.py     one queue's in-flight and held-back messages
    request.py         the terms of a pop (limits, PopInitMode, PoppedMessage)
    receipt_handle.py  the receipt handle's text form
    errors.py          PopError and its kinds, under core.errors.CoreError

A pop: Broker.pop -> service.py -> group_state.py -> queue_state.py -> the store's consume queue; a message not
acked in time goes back through core.retries.send_back.
"""
