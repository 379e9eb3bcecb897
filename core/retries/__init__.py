"""What happens to a message its consumer could not handle: sent back to the group's retry topic after a growing
delay, then to its dead-letter topic; and what an operator does with dead letters.

    send_back.py     RocketMQ's consumerSendMessageBack: %RETRY%<group> after a delay level, %DLQ%<group> at the
                     group's limit
    retry_policy.py  the backoff of RocketMQ 5 push consumers of a group (exponential or customized)
    dead_letters.py  list a group's dead letters and resend them, each once (the Dashboard's resend)

A failed message: a consumer (push, pop) -> send_back.py -> core.scheduling.delay_levels (the wait) -> the retry
topic -> ... -> the dead-letter topic -> dead_letters.py when an operator resends it.
"""
