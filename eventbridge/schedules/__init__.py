"""Scheduled rules: AWS EventBridge's schedule expressions and the timers that put a "Scheduled Event" on a bus.

expression.py   rate() and six-field cron() expressions, parsed and evaluated without I/O
days.py         the day fields of a cron expression (day of month, day of week, L, W, #)
scheduler.py    the timers of enabled rules, on the runtime's clock
"""
