"""The transactional producer's state table (dafka.client._txn_state), exhaustively.

Every (state, call) pair and every (state, target) pair is tried: allowed ones pass, the
others raise an error that names the call and the state (ProducerFencedError once fenced).
"""

from __future__ import annotations

import itertools

import pytest

from dafka.client._txn_state import CALLS, TRANSITIONS, TransactionState, TransactionStatus
from dafka.records import ProducerFencedError, TransactionError

S = TransactionState


def _in(state: TransactionState) -> TransactionStatus:
    status = TransactionStatus()
    status.state = state
    if state is S.FENCED:
        status._fenced_reason = "instance w~2.0 took over"
    return status


@pytest.mark.parametrize(("state", "call"), list(itertools.product(S, CALLS)))
def test_each_call_is_allowed_only_where_the_table_says(state: TransactionState, call: str) -> None:
    status = _in(state)
    if state in CALLS[call]:
        status.check(call)
        return
    if state is S.FENCED:
        with pytest.raises(ProducerFencedError, match=r"w~2\.0 took over"):
            status.check(call)
        return
    with pytest.raises(TransactionError) as caught:
        status.check(call)
    assert not isinstance(caught.value, ProducerFencedError)
    assert str(caught.value).startswith(f"{call}() in state {state.name}: ")


@pytest.mark.parametrize(("state", "target"), list(itertools.product(S, S)))
def test_each_move_is_allowed_only_where_the_table_says(
    state: TransactionState, target: TransactionState
) -> None:
    status = _in(state)
    if target in TRANSITIONS[state]:
        status.move(target)
        assert status.state is target
    else:
        with pytest.raises(TransactionError, match=f"{state.name} cannot become {target.name}"):
            status.move(target)
        assert status.state is state


def test_a_decided_transaction_cannot_be_aborted_or_added_to() -> None:
    """Past the INTENT (COMMITTING) only finishing it is allowed: an abort would roll back
    partitions whose ACK a successor appends from the INTENT (a half-visible transaction)."""
    status = _in(S.COMMITTING)
    for call in ("abort_transaction", "send", "flush", "begin_transaction"):
        with pytest.raises(TransactionError, match="commit point"):
            status.check(call)
    status.check("commit_transaction")


def test_flush_is_allowed_inside_a_transaction() -> None:
    _in(S.IN_TRANSACTION).check("flush")


def test_fencing_is_terminal_and_reported_once() -> None:
    status = _in(S.IN_TRANSACTION)
    assert status.fence("instance w~3.0 took over")
    assert not status.fence("again")
    for call in CALLS:
        with pytest.raises(ProducerFencedError, match=r"w~3\.0"):
            status.check(call)
    assert TRANSITIONS[S.FENCED] == {S.CLOSED}
    assert TRANSITIONS[S.CLOSED] == frozenset()
    closed = _in(S.CLOSED)
    assert not closed.fence("late")
    assert closed.state is S.CLOSED


def test_every_state_can_reach_closed() -> None:
    """No state traps a producer: close() always has a path (through the table)."""
    for start in S:
        seen, todo = {start}, [start]
        while todo:
            for nxt in TRANSITIONS[todo.pop()]:
                if nxt not in seen:
                    seen.add(nxt)
                    todo.append(nxt)
        assert S.CLOSED in seen or start is S.CLOSED, start
