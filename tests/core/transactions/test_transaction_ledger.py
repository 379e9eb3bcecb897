"""The transaction ledger against a plain model: any sequence of halves stored, taken, restored, decided by op records
(in any order), checked and found due keeps the progress a restart trusts exactly where the model puts it (every half
before the half offset decided; no op record before the op offset naming a half at or past it) and finds due exactly
the undecided halves whose check time has come."""

from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from core.transactions.ledger import Half, TransactionLedger

INTERVAL = 30


class LedgerModel(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.ledger = TransactionLedger(INTERVAL)
        self.state: dict[int, str] = {}  # half-queue offset -> undecided | deciding | decided
        self.first: dict[int, int] = {}
        self.checks: dict[int, int] = {}
        self.scheduled: set[int] = set()  # undecided halves the schedule holds (not handed out by due)
        self.halves: dict[int, Half] = {}
        self.ops: list[tuple[int, ...]] = []
        self.now = 0

    def _in(self, state: str) -> list[int]:
        return sorted(offset for offset, held in self.state.items() if held == state)

    @rule(first_check=st.integers(0, 200))
    def store_a_half(self, first_check):
        offset = len(self.state)
        half = Half(offset, 1000 + offset, first_check)
        self.ledger.add(half)
        self.halves[offset] = half
        self.state[offset] = "undecided"
        self.first[offset] = first_check
        self.checks[offset] = 0
        self.scheduled.add(offset)

    @precondition(lambda self: self._in("undecided"))
    @rule(data=st.data())
    def take(self, data):
        offset = data.draw(st.sampled_from(self._in("undecided")))
        assert self.ledger.take(offset) is self.halves[offset]
        assert self.ledger.take(offset) is None  # a second taker gets nothing
        self.state[offset] = "deciding"
        self.scheduled.discard(offset)

    @precondition(lambda self: self._in("deciding"))
    @rule(data=st.data())
    def restore(self, data):
        offset = data.draw(st.sampled_from(self._in("deciding")))
        self.ledger.restore(self.halves[offset])
        self.state[offset] = "undecided"
        self.scheduled.add(offset)

    @precondition(lambda self: self._in("undecided") or self._in("deciding"))
    @rule(data=st.data())
    def write_an_op_record(self, data):
        open_halves = self._in("undecided") + self._in("deciding")
        named = tuple(data.draw(st.lists(st.sampled_from(open_halves), min_size=1, max_size=3, unique=True)))
        self.ledger.decided(named, len(self.ops))
        self.ops.append(named)
        for offset in named:
            self.state[offset] = "decided"
            self.scheduled.discard(offset)

    @rule(step=st.integers(0, 100))
    def round_of_checks(self, step):
        self.now += step
        due = self.ledger.due(self.now)
        expected = {
            offset
            for offset in self.scheduled
            if self.state[offset] == "undecided" and self.first[offset] + self.checks[offset] * INTERVAL <= self.now
        }
        assert {half.queue_offset for half in due} == expected
        self.scheduled -= expected
        for number, half in enumerate(due):
            if number % 2 == 0:
                self.ledger.checked(half)
                self.checks[half.queue_offset] += 1
            else:
                self.ledger.requeue(half)
            self.scheduled.add(half.queue_offset)

    @invariant()
    def the_half_offset_is_the_lowest_half_not_decided(self):
        open_halves = self._in("undecided") + self._in("deciding")
        assert self.ledger.half_offset == (min(open_halves) if open_halves else len(self.state))

    @invariant()
    def the_op_offset_passes_only_op_records_naming_halves_before_the_half_offset(self):
        prefix = 0
        while prefix < len(self.ops) and all(offset < self.ledger.half_offset for offset in self.ops[prefix]):
            prefix += 1
        assert self.ledger.op_offset == prefix

    @invariant()
    def the_next_check_is_the_earliest_scheduled(self):
        times = [
            self.first[offset] + self.checks[offset] * INTERVAL
            for offset in self.scheduled
            if self.state[offset] == "undecided"
        ]
        assert self.ledger.next_due() == (min(times) if times else None)

    @invariant()
    def check_counts_are_those_of_halves_not_decided(self):
        expected = {
            offset: self.checks[offset]
            for offset, state in self.state.items()
            if state != "decided" and self.checks[offset]
        }
        assert self.ledger.check_times() == expected
        assert self.ledger.undecided_count() == len(self._in("undecided")) + len(self._in("deciding"))


TestLedger = LedgerModel.TestCase
TestLedger.settings = settings(max_examples=200, stateful_step_count=60)
