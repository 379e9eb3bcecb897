"""Transactional messages (RocketMQ's TransactionalMessageService, EndTransactionProcessor and
TransactionalMessageCheckService): half messages parked until their producer commits or rolls back.

    service.py    the half messages, `end` (commit, rollback) and the check-back rounds
    checkers.py   which live producer of a group is asked to check a half
    ledger.py     the undecided halves in memory, with their check counts
    progress.py   how far the half and op queues were read, and transactionCheck.json, for a restart

A half message: Broker.send (TRAN_MSG) -> service.py parks it in RMQ_SYS_TRANS_HALF_TOPIC -> `end` or a check ->
core.moves copies it to its real topic, and an op record says it was decided.
"""
