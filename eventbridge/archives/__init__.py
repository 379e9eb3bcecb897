"""Archives and replays (AWS EventBridge archive and replay).

filler.py    one archive: its bus's core topic read, the events its pattern matches appended, retention kept
log.py       an archive's directory of segments, the newest one active
segment.py   one segment file: header, records, COMMIT marks; a torn tail cut at recovery
record.py    the byte layout of a segment's header and records
replay.py    the events of a bus or an archive in a time range, put on the bus again (to one rule, or all)
"""
