"""Messages that wait before their consumers see them: delay levels (RocketMQ's ScheduleMessageService) and timer
messages (RocketMQ 5's TimerMessageStore). Both park the message in a topic of their own and move it on when due.

    delay_levels.py   DELAY=n: one queue per level of SCHEDULE_TOPIC_XXXX, moved in order
    timers.py         TIMER_DELIVER_MS / TIMER_DELAY_*: parked in rmq_sys_wheel_timer, fired by the second
    timer_wheel.py    the timers' pending entries by second, in memory
    recalls.py        RecallMessage: delay-level and timer messages recalled before they are due, dropped when due
    recall_handle.py  the recall handle a send answers (RocketMQ's HandleV1), encoded and decoded
    recall_journal.py recalls.jsonl: the recalls answered OK, kept across a restart

A delayed message: Broker.send -> core.parking (which service parks it) -> delay_levels.py or timers.py -> when due,
core.moves stores a copy in its real topic, at most once across a crash, unless recalls.py holds a recall of it.
"""
